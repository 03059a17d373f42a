//! The slow path: runs a flow through the rule tables (priorities, `goto_table`, `resubmit`) and
//! flattens what the rules say into one datapath action list, the [`Decision`] the caches keep.
//!
//! As in OVS's `xlate`, a later table sees the flow as earlier actions left it (a `mod_nw_dst`
//! then a lookup on `nw_dst` matches the new address), and every bit of the packet's flow the
//! outcome depended on is un-wildcarded in `wildcards`: the bits each lookup examined, and, when
//! a lookup examined a field an action computed from the packet (`dec_ttl`'s TTL,
//! `mod_vlan_vid`'s kept priority), the bits it was computed from. Rewrites themselves run per
//! packet, so a `dec_ttl` no later table looks at leaves the TTL wildcarded.

use core::time::Duration;

use crate::action::Action;
use crate::classifier::RuleId;
use crate::dpif::revalidate::{self, RuleChange, Seen, TableLookup};
use crate::dpif::upcall::{Decision, Upcall};
use wirespeed_packet::flow_key::{VLAN_PRESENT, VLAN_VID_MASK};

use crate::action::{SETTABLE_FIELDS, action_set_slot};
use crate::field::{Field, FlowBits};
use crate::flow_match::Match;
use crate::group::{Bucket, BucketsTaken, Group, GroupType, GroupVisit};
use crate::learn::{LearnId, port_action};
use crate::meter::METER_CONTROLLER;
use crate::ofproto::learned;
use crate::ofproto::rule_table::RuleTables;
use crate::rule::{PacketInOrigin, Rule};
use crate::subfield::Subfield;

/// Nested `resubmit`s allowed before the packet is dropped (OVS's limit too).
pub const MAX_RESUBMIT_DEPTH: usize = 64;
/// Table lookups and group visits allowed for one packet before it is dropped (OVS: 4096
/// resubmits, a group counted as one).
pub const MAX_TABLE_LOOKUPS: usize = 4096;
/// Datapath actions one translation may build before the packet is dropped (OVS cuts a
/// translation whose actions pass 64 KiB, some 8192 outputs): groups of many buckets
/// reached many times would otherwise multiply without bound.
pub const MAX_DATAPATH_ACTIONS: usize = 8192;
/// Actions one translation may run (a rule's, a bucket's, the action set's), whether or not
/// they reach the datapath: the bound on its time.
pub const MAX_ACTIONS_RUN: usize = 1 << 20;

/// Translates `flow` starting at table 0; see the module docs for `wildcards`. While the
/// tables are set aside ([`RuleTables::fail_open`]) every flow is switched by `normal`.
pub fn translate(tables: &RuleTables, flow: &FlowBits, wildcards: &mut FlowBits) -> Decision {
    if tables.fail_open() {
        return Decision {
            actions: vec![Action::Normal],
            ..Decision::default()
        };
    }
    let mut translation = Translation::new(tables, flow, wildcards);
    translation.run_table(0, 0);
    translation.run_action_set();
    translation.finish()
}

/// Translates an action list given outside the tables (an OpenFlow PACKET_OUT's), where a
/// `resubmit` runs the packet through the tables.
pub fn translate_actions(tables: &RuleTables, flow: &FlowBits, actions: &[Action]) -> Decision {
    let mut wildcards = FlowBits::ZERO;
    let mut translation = Translation::new(tables, flow, &mut wildcards);
    translation.run_actions(actions, None, 0);
    translation.finish()
}

/// The datapath's upcall lands here: a miss is translated through the tables, and the caches'
/// counts come back to the rules they were made from.
impl Upcall for RuleTables {
    fn translate(&mut self, flow: &FlowBits, wildcards: &mut FlowBits) -> Decision {
        let decision = translate(self, flow, wildcards);
        learned::queue(self, &decision.learned, None);
        decision
    }

    fn learned_again(&mut self, rules: &[Rule], used: Duration) {
        learned::queue(self, rules, Some(used));
    }

    fn generation(&self) -> u64 {
        RuleTables::generation(self)
    }

    fn changes_since(&self, generation: u64) -> Option<&[RuleChange]> {
        RuleTables::changes_since(self, generation)
    }

    fn credit(&mut self, rule: RuleId, packets: u64, bytes: u64, used: Duration) {
        if let Some(table) = self.get(rule).map(|r| r.rule.table) {
            self.count_lookups(table, packets, true);
        }
        self.credit_many(rule, packets, bytes, used);
    }

    fn credit_miss(&mut self, table: u8, packets: u64) {
        self.count_lookups(table, packets, false);
    }

    fn credit_group(&mut self, visit: GroupVisit, packets: u64, bytes: u64) {
        RuleTables::credit_group(self, visit, packets, bytes);
    }

    fn times_out(&self, rule: RuleId) -> bool {
        self.get(rule)
            .is_none_or(|r| r.rule.idle_timeout != 0 || r.rule.hard_timeout != 0)
    }
}

struct Translation<'a> {
    tables: &'a RuleTables,
    /// The flow as the packet arrived...
    input: FlowBits,
    /// ...and as the actions so far have changed it.
    flow: FlowBits,
    wildcards: &'a mut FlowBits,
    /// Fields of `flow` that actions computed from packet bits...
    derived: FlowBits,
    /// ...and those packet bits.
    dependencies: FlowBits,
    decision: Decision,
    /// Table lookups and group visits so far.
    lookups: usize,
    /// Actions run so far.
    actions_run: usize,
    /// Lookups whose record keeps what they saw of a rewritten flow ([`Seen::Written`]).
    seen_kept: usize,
    /// OpenFlow's action set: what `write_actions` put there, run when the pipeline ends.
    action_set: Vec<Action>,
}

impl<'a> Translation<'a> {
    fn new(
        tables: &'a RuleTables,
        flow: &FlowBits,
        wildcards: &'a mut FlowBits,
    ) -> Translation<'a> {
        Translation {
            tables,
            input: *flow,
            flow: *flow,
            wildcards,
            derived: FlowBits::ZERO,
            dependencies: FlowBits::ZERO,
            decision: Decision::default(),
            lookups: 0,
            actions_run: 0,
            seen_kept: 0,
            action_set: Vec::new(),
        }
    }

    /// Counts one more action (or bucket) run; false, the translation marked too deep,
    /// once it is past a limit.
    fn within_limits(&mut self) -> bool {
        self.actions_run += 1;
        let too_large = self.decision.actions.len() > MAX_DATAPATH_ACTIONS
            || self.actions_run > MAX_ACTIONS_RUN;
        self.decision.too_deep |= too_large;
        !self.decision.too_deep
    }

    fn finish(self) -> Decision {
        let mut decision = self.decision;
        // The last action, or the fields a bucket put back, may have passed the limit.
        decision.too_deep |= decision.actions.len() > MAX_DATAPATH_ACTIONS;
        if decision.too_deep {
            decision.actions.clear();
        }
        decision
    }

    fn run_table(&mut self, mut table: u8, depth: usize) {
        // goto_table is always last and always forward: a loop, not recursion.
        loop {
            if depth > MAX_RESUBMIT_DEPTH || self.lookups >= MAX_TABLE_LOOKUPS {
                self.decision.too_deep = true;
                return;
            }
            self.lookups += 1;
            // A table miss drops (the OpenFlow 1.3 table-miss default).
            let mut examined = FlowBits::ZERO;
            let found = self.tables.lookup(table, &self.flow, &mut examined);
            if examined.and(&self.derived) != FlowBits::ZERO {
                examined.or_assign(&self.dependencies);
            }
            self.wildcards.or_assign(&examined);
            let tables: &'a RuleTables = self.tables;
            let rule = found.map(|id| {
                &tables
                    .get(id)
                    .expect("the classifier returns installed rules")
                    .rule
            });
            let seen = revalidate::seen(
                &self.input,
                &self.flow,
                self.wildcards,
                &self.derived,
                self.seen_kept,
            );
            self.seen_kept += usize::from(matches!(seen, Seen::Written(_)));
            self.decision.lookups.push(TableLookup {
                table,
                found: rule.map(|rule| rule.priority),
                seen,
            });
            let (Some(id), Some(rule)) = (found, rule) else {
                self.decision.missed.push(table);
                return;
            };
            self.decision.rules.push(id);
            match self.run_actions(&rule.actions, Some(rule), depth) {
                Some(target) => table = target,
                None => return,
            }
        }
    }

    /// Runs one rule's actions (`rule`: None for a PACKET_OUT's); the table a `goto_table`
    /// names, if there is one.
    fn run_actions(&mut self, actions: &[Action], rule: Option<&Rule>, depth: usize) -> Option<u8> {
        let mut next_table = None;
        let mut rest = actions;
        while let Some((action, tail)) = rest.split_first() {
            rest = tail;
            if !self.within_limits() {
                return None;
            }
            // A rule's own actions were checked against its match when it was added.
            if rule.is_none() && !self.prerequisites_met(action) {
                continue;
            }
            match *action {
                Action::ClearActions => self.action_set.clear(),
                Action::WriteActions(n) => {
                    let n = usize::from(n).min(rest.len());
                    for written in &rest[..n] {
                        let slot = action_set_slot(written);
                        self.action_set.retain(|a| action_set_slot(a) != slot);
                        self.action_set.push(*written);
                    }
                    rest = &rest[n..];
                }
                Action::GotoTable(target) => next_table = Some(target),
                // One queue a port: nothing for the datapath to do (see `Action::SetQueue`).
                Action::SetQueue(_) => {}
                // For the tables after this one; nothing the datapath does.
                Action::WriteMetadata(..) => {
                    action.apply_to_flow(&mut self.flow, &mut self.dependencies)
                }
                Action::SetField(field, _) if field.is_pipeline_state() => {
                    action.apply_to_flow(&mut self.flow, &mut self.dependencies)
                }
                Action::Load(..) | Action::Move(..) => self.write_bits(action),
                Action::OutputReg(src) => self.output_from(src),
                Action::Learn(id) => self.learn(id),
                Action::Resubmit(target) => {
                    self.run_table(target, depth + 1);
                    if self.decision.too_deep {
                        return None;
                    }
                }
                Action::Group(id) => self.run_group(id, depth),
                Action::Meter(id) => {
                    if self.keep_meter(id) {
                        self.decision.actions.push(*action);
                    }
                }
                _ => {
                    if matches!(action, Action::Controller(_)) {
                        if self.decision.packet_in.is_none() {
                            self.decision.packet_in = Some(PacketInOrigin::of(rule));
                        }
                        self.keep_meter(METER_CONTROLLER);
                    }
                    action.apply_to_flow(&mut self.flow, &mut self.dependencies);
                    if let Some(field) = action.derived_field() {
                        field.set(&mut self.derived, field.full_mask());
                    }
                    self.decision.actions.push(*action);
                }
            }
        }
        next_table
    }
}

/// The fields a `select` group hashes to pick a bucket (those of a connection).
const SELECT_FIELDS: [Field; 10] = [
    Field::DlSrc,
    Field::DlDst,
    Field::DlType,
    Field::NwSrc,
    Field::NwDst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
    Field::NwProto,
    Field::TpSrc,
    Field::TpDst,
];

impl Translation<'_> {
    /// Whether the flow has the fields `action` reads or writes. A rule's actions always do
    /// (they were checked against its match, and no action changes the protocol), but a
    /// group's buckets, the action set and a PACKET_OUT's actions meet no match: there an
    /// action on a field the packet lacks (an IPv6 flow label in an ARP packet, whose bits
    /// are ARP's sender address) is skipped. What the answer read is pinned. Open vSwitch
    /// skips only such a `set_field` (its fields do not share bits), and refuses such a
    /// PACKET_OUT; here `load`, `move`, `output:SRC` and `learn` are skipped too, as they
    /// would read or write another protocol's field.
    fn prerequisites_met(&mut self, action: &Action) -> bool {
        let prerequisites = action.prerequisites();
        if prerequisites.is_empty() {
            return true;
        }
        for field in prerequisites.iter().flat_map(|p| p.fields()) {
            field.or_mask(self.wildcards, field.full_mask());
        }
        let flow = Match::exactly(&self.flow);
        prerequisites.iter().all(|p| p.is_met_by(&flow))
    }

    /// Keeps meter `id` with the decision, for the datapath to charge; whether there is one.
    fn keep_meter(&mut self, id: u32) -> bool {
        let Some(meter) = self.tables.meter(id) else {
            return false;
        };
        if !self.decision.meters.contains(meter) {
            self.decision.meters.push(meter.clone());
        }
        true
    }

    /// The action set when the pipeline ends, in the specification's order; a group in it
    /// takes the place of its output.
    fn run_action_set(&mut self) {
        if self.decision.too_deep || self.action_set.is_empty() {
            return;
        }
        let mut set = std::mem::take(&mut self.action_set);
        set.sort_by_key(|a| action_set_slot(a).0);
        let has_group = set.iter().any(|a| matches!(a, Action::Group(_)));
        set.retain(|a| !(has_group && action_set_slot(a).0 == 7));
        self.run_actions(&set, None, 0);
    }

    /// A group's buckets, as its type says (a group deleted meanwhile does nothing); the
    /// visit is noted, so the group and the buckets taken are credited, and a change to the
    /// group (or its adding, when missing) revalidates the flow.
    fn run_group(&mut self, id: u32, depth: usize) {
        if self.lookups >= MAX_TABLE_LOOKUPS {
            self.decision.too_deep = true;
            return;
        }
        self.lookups += 1;
        let tables: &RuleTables = self.tables;
        let Some(group) = tables.group(id) else {
            self.note_visit(id, BucketsTaken::Nothing);
            return;
        };
        let live = |b: &Bucket| b.watch_port.is_none_or(|p| tables.is_live(p));
        let chosen = match group.kind {
            GroupType::All => {
                self.note_visit(id, BucketsTaken::Every);
                for bucket in &group.buckets {
                    self.run_bucket(bucket, depth);
                }
                return;
            }
            GroupType::Indirect => Some(0),
            GroupType::FastFailover => group.buckets.iter().position(live),
            GroupType::Select => self.select_bucket(group, live),
        };
        match chosen {
            Some(i) => {
                self.note_visit(id, BucketsTaken::One(i as u32));
                self.run_bucket(&group.buckets[i], depth);
            }
            None => self.note_visit(id, BucketsTaken::Nothing),
        }
    }

    /// The live bucket (of weight above 0: one of weight 0 is never chosen, as in Open
    /// vSwitch) a `select` group gives this flow: weighted, by a hash of its connection.
    fn select_bucket(&mut self, group: &Group, live: impl Fn(&Bucket) -> bool) -> Option<usize> {
        let candidates = || {
            group
                .buckets
                .iter()
                .enumerate()
                .filter(|(_, b)| live(b) && b.weight > 0)
        };
        let total: u64 = candidates().map(|(_, b)| u64::from(b.weight)).sum();
        if total == 0 {
            return None;
        }
        // The choice depends on these fields: the megaflow must keep them.
        let mut mask = FlowBits::ZERO;
        for field in SELECT_FIELDS {
            field.set(&mut mask, field.full_mask());
        }
        self.wildcards.or_assign(&mask);
        let mut point = self.flow.and(&mask).hash64() % total;
        for (i, bucket) in candidates() {
            let weight = u64::from(bucket.weight);
            if point < weight {
                return Some(i);
            }
            point -= weight;
        }
        None
    }

    /// A `load` or `move`: the flow's bits change for later tables, and a packet's field
    /// written becomes a `set_field` of the whole field for the datapath. What the value
    /// written depends on is un-wildcarded at once (as OVS's xlate does for a move): the
    /// source's bits, and for a packet's field the rest of it, which the `set_field` writes
    /// back as this flow has it.
    fn write_bits(&mut self, action: &Action) {
        let (source, dst) = match *action {
            Action::Load(dst, _) => (None, dst),
            Action::Move(src, dst) => (Some(src), dst),
            _ => return,
        };
        let field = dst.field();
        let mut read = FlowBits::ZERO;
        if let Some(src) = source {
            src.field().or_mask(&mut read, src.mask());
        }
        if !field.is_pipeline_state() {
            field.or_mask(&mut read, field.full_mask());
        }
        self.depend_on(read);
        action.apply_to_flow(&mut self.flow, &mut self.dependencies);
        if !field.is_pipeline_state() {
            let value = field.get(&self.flow);
            self.decision.actions.push(Action::SetField(field, value));
        }
    }

    /// An output to the port `src`'s bits hold ([`port_action`]), which the megaflow pins.
    fn output_from(&mut self, src: Subfield) {
        let mut read = FlowBits::ZERO;
        src.field().or_mask(&mut read, src.mask());
        self.depend_on(read);
        self.decision
            .actions
            .extend(port_action(src.get(&self.flow)));
    }

    /// A `learn`: the rule it builds from the flow as it is here goes with the decision,
    /// and the bits it read are pinned, so every packet of the megaflow learns the same rule.
    fn learn(&mut self, id: LearnId) {
        let mut read = FlowBits::ZERO;
        let rule = id.get().rule_for(&self.flow, &mut read);
        self.depend_on(read);
        self.decision.learned.push(rule);
    }

    /// Un-wildcards the bits `read` of the flow, and what they were computed from if an
    /// action computed them.
    fn depend_on(&mut self, mut read: FlowBits) {
        if read.and(&self.derived) != FlowBits::ZERO {
            read.or_assign(&self.dependencies);
        }
        self.wildcards.or_assign(&read);
    }

    fn note_visit(&mut self, group: u32, taken: BucketsTaken) {
        self.decision.groups.push(GroupVisit { group, taken });
    }

    /// One bucket, on the packet as it was before it: what the bucket rewrote is put back
    /// after it (and the packet's value of each such field becomes part of the decision).
    fn run_bucket(&mut self, bucket: &Bucket, depth: usize) {
        // A bucket costs its copy of the flow even with no actions.
        if !self.within_limits() {
            return;
        }
        let before = self.flow;
        self.run_actions(&bucket.actions, None, depth);
        for field in [Field::VlanTci, Field::NwTtl]
            .into_iter()
            .chain(SETTABLE_FIELDS)
        {
            let old = field.get(&before);
            if field.get(&self.flow) == old {
                continue;
            }
            field.or_mask(self.wildcards, field.full_mask());
            let tci = old as u16;
            match field {
                Field::VlanTci if tci & VLAN_PRESENT == 0 => {
                    self.decision.actions.push(Action::StripVlan)
                }
                Field::VlanTci => {
                    self.decision
                        .actions
                        .push(Action::ModVlanVid(tci & VLAN_VID_MASK));
                    self.decision
                        .actions
                        .push(Action::ModVlanPcp((tci >> 13) as u8));
                }
                _ => self.decision.actions.push(Action::SetField(field, old)),
            }
        }
        self.flow = before;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ofctl::flow_parse::parse_rule;
    use core::time::Duration;

    fn tables(rules: &[&str]) -> RuleTables {
        let mut tables = RuleTables::new();
        for text in rules {
            tables.add(parse_rule(text).unwrap(), Duration::ZERO);
        }
        tables
    }

    /// A miss is noted with its table, so the datapath's counts come back to each table
    /// looked up: a lookup that found a rule through the rule, one that did not directly.
    #[test]
    fn each_table_counts_its_lookups_and_matches() {
        let mut tables = tables(&[
            "in_port=1,actions=goto_table:1",
            "table=1,in_port=2,actions=drop",
        ]);
        let through = translate(
            &tables,
            &flow(&[(Field::InPort, 1)]),
            &mut FlowBits::default(),
        );
        assert_eq!((through.rules.len(), &through.missed[..]), (1, &[1][..]));
        let miss = translate(
            &tables,
            &flow(&[(Field::InPort, 3)]),
            &mut FlowBits::default(),
        );
        assert_eq!((miss.rules.len(), &miss.missed[..]), (0, &[0][..]));

        let upcall: &mut dyn Upcall = &mut tables;
        upcall.credit(through.rules[0], 5, 300, Duration::ZERO);
        for &table in &through.missed {
            upcall.credit_miss(table, 5);
        }
        upcall.credit_miss(miss.missed[0], 2);
        let counts =
            |lookups, matched| crate::ofproto::rule_table::TableLookups { lookups, matched };
        let stats = tables.table_stats();
        assert_eq!(stats[0].counts, counts(7, 5));
        assert_eq!(stats[1].counts, counts(5, 0));
        assert_eq!(stats[2].counts, counts(0, 0));
        assert_eq!((stats[0].active, stats[1].active), (1, 1));
    }

    fn flow(fields: &[(Field, u128)]) -> FlowBits {
        let mut flow = FlowBits::ZERO;
        for &(field, value) in fields {
            field.set(&mut flow, value);
        }
        flow
    }

    #[test]
    fn goto_and_resubmit_see_rewritten_flow() {
        let tables = tables(&[
            "priority=10,in_port=1,ip,actions=mod_nw_dst:10.0.0.9,resubmit(,2),goto_table:1",
            "table=1,priority=10,ip,nw_dst=10.0.0.9,actions=output:3",
            "table=1,priority=1,actions=output:4",
            "table=2,priority=1,actions=mod_vlan_vid:5",
        ]);
        let packet = flow(&[
            (Field::InPort, 1),
            (Field::DlType, 0x0800),
            (Field::NwDst, 0x0a00_0001),
        ]);
        let mut wildcards = FlowBits::ZERO;
        let decision = translate(&tables, &packet, &mut wildcards);
        assert_eq!(
            decision.actions,
            vec![
                Action::SetField(Field::NwDst, 0x0a00_0009),
                Action::ModVlanVid(5),
                Action::Output(3)
            ]
        );
        assert_eq!(decision.rules.len(), 3);
        assert!(!decision.too_deep);
        // What was examined: in_port, dl_type, nw_dst (in table 1), the VLAN bits mod_vlan_vid
        // keeps; nothing else.
        assert_eq!(Field::InPort.get(&wildcards), 0xffff_ffff);
        assert_eq!(Field::DlType.get(&wildcards), 0xffff);
        assert_eq!(Field::NwDst.get(&wildcards), 0xffff_ffff);
        assert_eq!(Field::NwSrc.get(&wildcards), 0);
        assert_eq!(Field::TpDst.get(&wildcards), 0);
    }

    /// TCP's flags share ARP's opcode's bits: a lookup looks at them only once it knows the
    /// flow is TCP, so a UDP flow's megaflow leaves them out (and can be offloaded).
    #[test]
    fn tcp_flags_are_examined_only_in_tcp_flows() {
        let tables = tables(&[
            "priority=20,tcp,tcp_flags=+fin,actions=drop",
            "priority=30,tcp,tp_dst=22,tcp_flags=+syn,actions=drop",
            "priority=10,actions=output:2",
        ]);
        let packet = |proto: u128| {
            flow(&[
                (Field::InPort, 1),
                (Field::DlType, 0x0800),
                (Field::NwProto, proto),
                (Field::TpDst, 22),
                (Field::TcpFlags, 0x002),
            ])
        };
        let mut wildcards = FlowBits::ZERO;
        let decision = translate(&tables, &packet(17), &mut wildcards);
        assert_eq!(decision.actions, vec![Action::Output(2)]);
        assert_eq!(Field::TcpFlags.get(&wildcards), 0);
        let mut wildcards = FlowBits::ZERO;
        let decision = translate(&tables, &packet(6), &mut wildcards);
        assert_eq!(decision.actions, vec![]);
        assert_eq!(Field::TcpFlags.get(&wildcards), 0x002);
    }

    /// `set_queue`, applied or in the action set, leaves the datapath's actions as they would
    /// be without it (one queue a port), so such flows are offloaded like any other.
    #[test]
    fn set_queue_reaches_no_datapath_action() {
        let tables = tables(&[
            "priority=10,in_port=1,actions=set_queue:1,output:3",
            "priority=10,in_port=2,actions=write_actions(set_queue:2,output:4)",
        ]);
        for (in_port, out) in [(1, 3), (2, 4)] {
            let mut wildcards = FlowBits::ZERO;
            let decision = translate(&tables, &flow(&[(Field::InPort, in_port)]), &mut wildcards);
            assert_eq!(
                decision.actions,
                vec![Action::Output(out)],
                "in_port={in_port}"
            );
        }
    }

    #[test]
    fn dec_ttl_examined_later_pins_the_ttl_and_unexamined_does_not() {
        let tables = tables(&[
            "priority=10,in_port=1,ip,actions=dec_ttl,goto_table:1",
            "priority=10,in_port=2,ip,actions=dec_ttl,goto_table:2",
            "table=1,priority=10,ip,nw_ttl=64,actions=output:3",
            "table=2,priority=10,ip,nw_src=10.0.0.0/8,actions=output:4",
        ]);
        let packet = |in_port| {
            flow(&[
                (Field::InPort, in_port),
                (Field::DlType, 0x0800),
                (Field::NwTtl, 65),
            ])
        };
        let mut wildcards = FlowBits::ZERO;
        let decision = translate(&tables, &packet(1), &mut wildcards);
        assert_eq!(decision.actions, vec![Action::DecTtl, Action::Output(3)]);
        assert_eq!(
            Field::NwTtl.get(&wildcards),
            0xff,
            "64 = 65 - 1 depends on all TTL bits"
        );
        let mut wildcards = FlowBits::ZERO;
        let decision = translate(&tables, &packet(2), &mut wildcards);
        assert_eq!(decision.actions, vec![Action::DecTtl]);
        assert_eq!(
            Field::NwTtl.get(&wildcards),
            0,
            "no table looked at the TTL"
        );
    }

    fn bucket(actions: &str, weight: u16, watch_port: Option<u32>) -> Bucket {
        Bucket {
            weight,
            watch_port,
            actions: crate::ofctl::action_parse::parse_actions(actions).unwrap(),
        }
    }

    #[test]
    fn all_group_runs_each_bucket_on_the_packet_as_the_rule_left_it() {
        let mut tables = tables(&["in_port=1,actions=group:7,output:3"]);
        tables
            .set_group(
                crate::group::Group {
                    id: 7,
                    kind: GroupType::All,
                    buckets: vec![
                        bucket("output:4", 0, None),
                        bucket("mod_vlan_vid:5,output:2", 0, None),
                    ],
                },
                false,
                Duration::ZERO,
            )
            .unwrap();
        let mut wildcards = FlowBits::ZERO;
        let decision = translate(&tables, &flow(&[(Field::InPort, 1)]), &mut wildcards);
        assert_eq!(
            decision.actions,
            [
                Action::Output(4),
                Action::ModVlanVid(5),
                Action::Output(2),
                Action::StripVlan,
                Action::Output(3)
            ]
        );
        assert_eq!(
            Field::VlanTci.get(&wildcards),
            0xffff,
            "the tag was put back"
        );
        assert_eq!(decision.groups, [visit(7, BucketsTaken::Every)]);
    }

    /// A bucket may load into a packet's field (as Open vSwitch's may); the next bucket sees
    /// the packet as it was.
    #[test]
    fn a_bucket_loads_into_its_copy_only() {
        let mut tables = tables(&["in_port=1,actions=group:7"]);
        let all = |buckets| crate::group::Group {
            id: 7,
            kind: GroupType::All,
            buckets,
        };
        let buckets = vec![
            bucket("load:0xaa->NXM_OF_ETH_DST[0..7],output:2", 0, None),
            bucket("output:4", 0, None),
        ];
        tables
            .set_group(all(buckets), false, Duration::ZERO)
            .unwrap();
        let packet = flow(&[(Field::InPort, 1), (Field::DlDst, 0x0200_0000_0001)]);
        let decision = translate(&tables, &packet, &mut FlowBits::default());
        assert_eq!(
            decision.actions,
            [
                Action::SetField(Field::DlDst, 0x0200_0000_00aa),
                Action::Output(2),
                Action::SetField(Field::DlDst, 0x0200_0000_0001),
                Action::Output(4)
            ]
        );
    }

    fn visit(group: u32, taken: BucketsTaken) -> GroupVisit {
        GroupVisit { group, taken }
    }

    /// A group that is not there does nothing, and the visit is noted: the group's adding
    /// revalidates the flow.
    #[test]
    fn a_missing_group_is_noted_as_visited() {
        let tables = tables(&["in_port=1,actions=group:7,output:3"]);
        let decision = translate(
            &tables,
            &flow(&[(Field::InPort, 1)]),
            &mut FlowBits::default(),
        );
        assert_eq!(decision.actions, [Action::Output(3)]);
        assert_eq!(decision.groups, [visit(7, BucketsTaken::Nothing)]);
    }

    /// A bucket meets no rule's match: an action on a field the packet lacks is skipped
    /// there, so it cannot write ARP's bits as IPv6's flow label (and a learn then read them).
    #[test]
    fn a_bucket_skips_actions_on_fields_the_packet_lacks() {
        let mut tables = tables(&["arp,actions=group:7"]);
        let buckets = vec![bucket(
            "set_field:0x5->ipv6_label,learn(table=1,eth_type=0x806,NXM_OF_ARP_SPA[]),output:2",
            0,
            None,
        )];
        let group = crate::group::Group {
            id: 7,
            kind: GroupType::All,
            buckets,
        };
        tables.set_group(group, false, Duration::ZERO).unwrap();
        let packet = flow(&[
            (Field::DlType, 0x0806),
            (Field::ArpSpa, 0x0a00_0001),
            (Field::ArpOp, 1),
        ]);
        let mut wildcards = FlowBits::ZERO;
        let decision = translate(&tables, &packet, &mut wildcards);
        assert_eq!(decision.actions, [Action::Output(2)]);
        let learned = &decision.learned[0].flow_match;
        assert_eq!(learned.exact(Field::ArpSpa), Some(0x0a00_0001));
        // An IPv6 packet's label is written (and put back after the bucket).
        tables.add(parse_rule("ipv6,actions=group:7").unwrap(), Duration::ZERO);
        let packet = flow(&[(Field::DlType, 0x86dd), (Field::Ipv6Label, 1)]);
        let decision = translate(&tables, &packet, &mut wildcards);
        assert_eq!(
            decision.actions,
            [
                Action::SetField(Field::Ipv6Label, 5),
                Action::Output(2),
                Action::SetField(Field::Ipv6Label, 1)
            ]
        );
        assert!(decision.learned.is_empty(), "ARP's learn is skipped");
    }

    #[test]
    fn select_is_stable_per_flow_and_fast_failover_follows_liveness() {
        let mut tables = tables(&["in_port=1,actions=group:1", "in_port=2,actions=group:2"]);
        tables
            .set_group(
                crate::group::Group {
                    id: 1,
                    kind: GroupType::Select,
                    // The bucket of weight 0 first: a visit names a bucket by its place
                    // among all of them, not among those that can be chosen.
                    buckets: vec![
                        bucket("output:5", 0, None),
                        bucket("output:3", 1, None),
                        bucket("output:4", 1, None),
                    ],
                },
                false,
                Duration::ZERO,
            )
            .unwrap();
        tables
            .set_group(
                crate::group::Group {
                    id: 2,
                    kind: GroupType::FastFailover,
                    buckets: vec![
                        bucket("output:3", 0, Some(3)),
                        bucket("output:4", 0, Some(4)),
                    ],
                },
                false,
                Duration::ZERO,
            )
            .unwrap();
        let mut chosen: Vec<(Vec<Action>, u32)> = Vec::new();
        for src in 0..64u128 {
            let packet = flow(&[(Field::InPort, 1), (Field::NwSrc, src)]);
            let mut wildcards = FlowBits::ZERO;
            let decision = translate(&tables, &packet, &mut wildcards);
            let first = decision.actions;
            let bucket = match first[..] {
                [Action::Output(port)] => port - 2,
                _ => panic!("one bucket's output: {first:?}"),
            };
            assert_eq!(decision.groups, [visit(1, BucketsTaken::One(bucket))]);
            assert_eq!(
                translate(&tables, &packet, &mut FlowBits::default()).actions,
                first
            );
            assert_eq!(Field::NwSrc.get(&wildcards), 0xffff_ffff);
            match chosen.iter_mut().find(|(a, _)| *a == first) {
                Some((_, n)) => *n += 1,
                None => chosen.push((first, 1)),
            }
        }
        assert_eq!(
            chosen.len(),
            2,
            "both weighted buckets, never weight 0: {chosen:?}"
        );
        let failover =
            |t: &RuleTables| translate(t, &flow(&[(Field::InPort, 2)]), &mut FlowBits::default());
        assert_eq!(failover(&tables).actions, [Action::Output(3)]);
        let generation = tables.generation();
        tables.set_port_live(3, false);
        assert!(tables.generation() > generation);
        assert_eq!(failover(&tables).actions, [Action::Output(4)]);
        assert_eq!(failover(&tables).groups, [visit(2, BucketsTaken::One(1))]);
        tables.set_port_live(4, false);
        assert!(failover(&tables).actions.is_empty());
        assert_eq!(
            failover(&tables).groups,
            [visit(2, BucketsTaken::Nothing)],
            "the packet still passed through the group"
        );
    }

    #[test]
    fn the_action_set_runs_at_the_end_in_the_specifications_order() {
        let tables = tables(&[
            "in_port=1,ip,actions=output:9,write_actions(output:5,mod_nw_dst:10.0.0.9),goto_table:1",
            "table=1,ip,actions=write_actions(dec_ttl,output:6),goto_table:2",
            "table=2,actions=output:7",
            "in_port=2,actions=write_actions(output:5),clear_actions,goto_table:2",
        ]);
        let ip = |in_port| flow(&[(Field::InPort, in_port), (Field::DlType, 0x0800)]);
        let decision = translate(&tables, &ip(1), &mut FlowBits::default());
        assert_eq!(
            decision.actions,
            [
                Action::Output(9),
                Action::Output(7),
                Action::DecTtl,
                Action::SetField(Field::NwDst, 0x0a00_0009),
                Action::Output(6)
            ]
        );
        // clear_actions after write_actions in the same rule: the set is empty.
        let decision = translate(&tables, &ip(2), &mut FlowBits::default());
        assert_eq!(decision.actions, [Action::Output(7)]);
    }

    #[test]
    fn write_metadata_steers_later_tables_and_never_reaches_the_datapath() {
        let tables = tables(&[
            "in_port=1,actions=write_metadata:0x1200/0xff00,goto_table:1",
            "in_port=2,actions=write_metadata:0x1299,goto_table:2",
            "table=1,actions=write_metadata:0x34/0xff,goto_table:2",
            "table=2,priority=2,metadata=0x1234,actions=output:3",
            "table=2,priority=1,metadata=0x1200/0xff00,actions=output:4",
        ]);
        let mut wildcards = FlowBits::default();
        let decision = translate(&tables, &flow(&[(Field::InPort, 1)]), &mut wildcards);
        assert_eq!(decision.actions, [Action::Output(3)]);
        let decision = translate(&tables, &flow(&[(Field::InPort, 2)]), &mut wildcards);
        assert_eq!(decision.actions, [Action::Output(4)]);
        // The packet's own metadata (always zero) is in the megaflow's key, harmlessly.
        assert_eq!(Field::Metadata.get(&wildcards), u128::from(u64::MAX));
    }

    /// Registers steer later tables and never reach the datapath; a move from a packet's
    /// field pins the bits it read, however the register is used after.
    #[test]
    fn registers_steer_later_tables_and_pin_what_was_moved_into_them() {
        let tables = tables(&[
            "in_port=1,actions=move:NXM_OF_IN_PORT[]->NXM_NX_REG0[8..23],goto_table:1",
            "in_port=2,actions=set_field:0x200->reg0,load:0x7->NXM_NX_REG5[28..31],goto_table:1",
            "table=1,priority=2,reg0=0x100/0xff00,actions=output:3",
            "table=1,priority=1,reg0=0x200,reg5=0x70000000,actions=output:4",
            "in_port=3,actions=load:0x4->NXM_NX_REG7[],output:NXM_NX_REG7[0..15],output:NXM_NX_REG6[],load:0x10004->NXM_NX_REG6[],output:NXM_NX_REG6[],load:0xfff8->NXM_NX_REG6[],output:NXM_NX_REG6[]",
        ]);
        let decision = translate(
            &tables,
            &flow(&[(Field::InPort, 3)]),
            &mut FlowBits::default(),
        );
        assert_eq!(
            decision.actions,
            [Action::Output(4), Action::InPort],
            "reg6 holds 0, then 0x10004 (past 16 bits): no port; 0xfff8 is in_port"
        );
        let mut wildcards = FlowBits::default();
        let decision = translate(&tables, &flow(&[(Field::InPort, 1)]), &mut wildcards);
        assert_eq!(decision.actions, [Action::Output(3)]);
        assert_eq!(Field::InPort.get(&wildcards), 0xffff_ffff);
        assert_eq!(Field::DlSrc.get(&wildcards), 0);
        let decision = translate(&tables, &flow(&[(Field::InPort, 2)]), &mut wildcards);
        assert_eq!(decision.actions, [Action::Output(4)]);
        // The key the caches keep holds no register.
        let key = crate::field::PacketKey::masked(&flow(&[(Field::InPort, 2)]), &wildcards);
        assert_eq!(key.0[..], flow(&[(Field::InPort, 2)]).0[..key.0.len()]);
    }

    /// A load or move into a packet's field reaches the datapath as a set_field of the whole
    /// field, so the bits it kept and the bits it moved are pinned in the megaflow.
    #[test]
    fn load_and_move_into_a_packet_become_set_field() {
        let tables = tables(&[
            "ip,actions=move:NXM_OF_IP_SRC[]->NXM_OF_IP_DST[],load:0xaa->NXM_OF_ETH_DST[0..7],output:2",
        ]);
        let packet = flow(&[
            (Field::DlType, 0x0800),
            (Field::NwSrc, 0x0a00_0001),
            (Field::NwDst, 0x0a00_0002),
            (Field::DlDst, 0x0200_0000_0001),
        ]);
        let mut wildcards = FlowBits::default();
        let decision = translate(&tables, &packet, &mut wildcards);
        assert_eq!(
            decision.actions,
            [
                Action::SetField(Field::NwDst, 0x0a00_0001),
                Action::SetField(Field::DlDst, 0x0200_0000_00aa),
                Action::Output(2)
            ]
        );
        assert_eq!(Field::NwSrc.get(&wildcards), 0xffff_ffff);
        assert_eq!(Field::NwDst.get(&wildcards), 0xffff_ffff);
        assert_eq!(Field::DlDst.get(&wildcards), 0xffff_ffff_ffff);
        assert_eq!(Field::TpDst.get(&wildcards), 0);
    }

    #[test]
    fn a_meter_goes_with_the_decision_and_takes_its_rules_when_deleted() {
        use crate::meter::{Band, MeterConfig, Unit};
        let mut tables = tables(&[]);
        let config = MeterConfig {
            id: 4,
            unit: Unit::Packets,
            band: Some(Band {
                rate: 10,
                burst_size: 0,
            }),
            burst: false,
            stats: false,
        };
        tables.set_meter(config, false, Duration::ZERO).unwrap();
        tables.add(
            parse_rule("in_port=1,actions=meter:4,goto_table:1").unwrap(),
            Duration::ZERO,
        );
        tables.add(
            parse_rule("table=1,actions=output:2").unwrap(),
            Duration::ZERO,
        );
        let mut wildcards = FlowBits::default();
        let decision = translate(&tables, &flow(&[(Field::InPort, 1)]), &mut wildcards);
        assert_eq!(decision.actions, [Action::Meter(4), Action::Output(2)]);
        assert_eq!(decision.meters, [tables.meter(4).unwrap().clone()]);
        assert_eq!(tables.meter_flow_count(4), 1);
        let generation = tables.generation();
        let removed = tables.delete_meter(4);
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].rule.meter(), Some(4));
        assert!(tables.generation() > generation);
        let decision = translate(&tables, &flow(&[(Field::InPort, 1)]), &mut wildcards);
        assert_eq!(decision.actions, []);
    }

    #[test]
    fn table_miss_drops() {
        let tables = tables(&["in_port=1,actions=goto_table:1"]);
        let decision = translate(
            &tables,
            &flow(&[(Field::InPort, 1)]),
            &mut FlowBits::default(),
        );
        assert!(decision.actions.is_empty());
        assert_eq!(decision.rules.len(), 1);
        let decision = translate(
            &tables,
            &flow(&[(Field::InPort, 2)]),
            &mut FlowBits::default(),
        );
        let miss = Decision {
            missed: vec![0],
            lookups: vec![TableLookup {
                table: 0,
                found: None,
                seen: Seen::Arrived,
            }],
            ..Decision::default()
        };
        assert_eq!(decision, miss);
    }

    #[test]
    fn resubmit_loop_is_cut_and_dropped() {
        let tables = tables(&["actions=output:1,resubmit(,0)"]);
        let decision = translate(&tables, &FlowBits::ZERO, &mut FlowBits::default());
        assert!(decision.too_deep);
        assert!(decision.actions.is_empty());
        assert_eq!(decision.rules.len(), MAX_RESUBMIT_DEPTH + 1);
    }

    /// Group 1, type all, with `n` buckets of `actions`.
    fn fan_out(tables: &mut RuleTables, n: usize, actions: &str) {
        let group = crate::group::Group {
            id: 1,
            kind: GroupType::All,
            buckets: (0..n).map(|_| bucket(actions, 0, None)).collect(),
        };
        tables.set_group(group, false, Duration::ZERO).unwrap();
    }

    /// Rules and groups that multiply (resubmits of rules of many `group:`s of many buckets)
    /// are cut at MAX_DATAPATH_ACTIONS, as Open vSwitch cuts a translation too large: before,
    /// a controller's three messages made one packet build billions of actions.
    #[test]
    fn a_translation_that_multiplies_is_cut_and_dropped() {
        let groups = ["group:1"; 50].join(",");
        let resubmits = ["resubmit(,1)"; 10].join(",");
        let mut tables = tables(&[
            &format!("actions={resubmits}"),
            &format!("table=1,actions={groups}"),
        ]);
        fan_out(&mut tables, 100, "output:1");
        let decision = translate(&tables, &FlowBits::ZERO, &mut FlowBits::default());
        assert!(decision.too_deep);
        assert!(decision.actions.is_empty());
        // The same from a PACKET_OUT's actions.
        let actions = crate::ofctl::action_parse::parse_actions(&resubmits).unwrap();
        let decision = translate_actions(&tables, &FlowBits::ZERO, &actions);
        assert!(decision.too_deep && decision.actions.is_empty());
    }

    /// Empty buckets count too: a group of thousands visited thousands of times stops at
    /// MAX_ACTIONS_RUN instead of copying the flow for each of millions of buckets.
    #[test]
    fn empty_buckets_count_towards_the_actions_run() {
        let groups = ["group:1"; 4000].join(",");
        let mut tables = tables(&[&format!("actions={groups}")]);
        fan_out(&mut tables, 4000, "");
        let decision = translate(&tables, &FlowBits::ZERO, &mut FlowBits::default());
        assert!(decision.too_deep);
        assert!(decision.groups.len() <= MAX_ACTIONS_RUN / 4000 + 1);
    }

    /// Each group visited counts as a table lookup (Open vSwitch counts it as a resubmit),
    /// so buckets that add no action still stop at MAX_TABLE_LOOKUPS visits.
    #[test]
    fn group_visits_count_as_lookups() {
        let groups = ["group:1"; 5000].join(",");
        let mut tables = tables(&[&format!("actions={groups}")]);
        fan_out(&mut tables, 2, "load:1->NXM_NX_REG0[]");
        let decision = translate(&tables, &FlowBits::ZERO, &mut FlowBits::default());
        assert!(decision.too_deep);
        assert!(
            decision.groups.len() < MAX_TABLE_LOOKUPS,
            "{}",
            decision.groups.len()
        );
    }
}
