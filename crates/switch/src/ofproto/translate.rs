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
use crate::dpif::upcall::{Decision, Upcall};
use crate::field::FlowBits;
use crate::ofproto::rule_table::RuleTables;
use crate::rule::{PacketInOrigin, Rule};

/// Nested `resubmit`s allowed before the packet is dropped (OVS's limit too).
pub const MAX_RESUBMIT_DEPTH: usize = 64;
/// Table lookups allowed for one packet before it is dropped (OVS: 4096 resubmits).
pub const MAX_TABLE_LOOKUPS: usize = 4096;

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
    fn translate(&self, flow: &FlowBits, wildcards: &mut FlowBits) -> Decision {
        translate(self, flow, wildcards)
    }

    fn generation(&self) -> u64 {
        RuleTables::generation(self)
    }

    fn credit(&mut self, rule: RuleId, packets: u64, bytes: u64, used: Duration) {
        self.credit_many(rule, packets, bytes, used);
    }

    fn times_out(&self, rule: RuleId) -> bool {
        self.get(rule)
            .is_none_or(|r| r.rule.idle_timeout != 0 || r.rule.hard_timeout != 0)
    }
}

struct Translation<'a> {
    tables: &'a RuleTables,
    /// The flow as the actions so far have changed it.
    flow: FlowBits,
    wildcards: &'a mut FlowBits,
    /// Fields of `flow` that actions computed from packet bits...
    derived: FlowBits,
    /// ...and those packet bits.
    dependencies: FlowBits,
    decision: Decision,
    lookups: usize,
}

impl<'a> Translation<'a> {
    fn new(
        tables: &'a RuleTables,
        flow: &FlowBits,
        wildcards: &'a mut FlowBits,
    ) -> Translation<'a> {
        Translation {
            tables,
            flow: *flow,
            wildcards,
            derived: FlowBits::ZERO,
            dependencies: FlowBits::ZERO,
            decision: Decision::default(),
            lookups: 0,
        }
    }

    fn finish(self) -> Decision {
        let mut decision = self.decision;
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
            let Some(id) = found else {
                return;
            };
            self.decision.rules.push(id);
            let tables: &'a RuleTables = self.tables;
            let rule = &tables
                .get(id)
                .expect("the classifier returns installed rules")
                .rule;
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
        for action in actions {
            match *action {
                Action::GotoTable(target) => next_table = Some(target),
                Action::Resubmit(target) => {
                    self.run_table(target, depth + 1);
                    if self.decision.too_deep {
                        return None;
                    }
                }
                _ => {
                    if matches!(action, Action::Controller(_)) && self.decision.packet_in.is_none()
                    {
                        self.decision.packet_in = Some(PacketInOrigin::of(rule));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Field;
    use crate::ofctl::flow_parse::parse_rule;
    use core::time::Duration;

    fn tables(rules: &[&str]) -> RuleTables {
        let mut tables = RuleTables::new();
        for text in rules {
            tables.add(parse_rule(text).unwrap(), Duration::ZERO);
        }
        tables
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
        assert_eq!(decision, Decision::default());
    }

    #[test]
    fn resubmit_loop_is_cut_and_dropped() {
        let tables = tables(&["actions=output:1,resubmit(,0)"]);
        let decision = translate(&tables, &FlowBits::ZERO, &mut FlowBits::default());
        assert!(decision.too_deep);
        assert!(decision.actions.is_empty());
        assert_eq!(decision.rules.len(), MAX_RESUBMIT_DEPTH + 1);
    }
}
