//! What a bridge's poll-mode threads share, owned by the OpenFlow layer: the rule tables, the
//! learning table and the offload ([`Ofproto`]), reached by the datapath through the
//! [`SharedState`] upcall interface, and edited by the control side with every thread's cache
//! locked, harvested where the change needs counts and then revalidated ([`edit`]).

use core::ops::DerefMut;
use core::time::Duration;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use wirespeed_xdp::XdpError;

use crate::action::Action;
use crate::classifier::RuleId;
use crate::dpif::flow_cache::FlowCache;
use crate::dpif::megaflow::Megaflow;
use crate::dpif::upcall::{SharedState, Upcall};
use crate::error::FlowError;
use crate::flow_match::Match;
use crate::group::{Group, GroupError, GroupUsage};
use crate::mac_learning::MacTable;
use crate::offload::Offload;
use crate::ofproto::learned;
use crate::ofproto::rule_table::{InstalledRule, RuleTables};
use crate::rule::Rule;

/// What the poll-mode threads of a bridge share: its rules, its learning table, its
/// offload and its ports.
pub struct Ofproto {
    pub tables: RuleTables,
    pub mac_table: MacTable,
    /// The kernel's fast path, when the bridge offloads flows there.
    pub offload: Option<Offload>,
    ports: Vec<u32>,
    /// Rules a `delete_learned` took with the learn that learned them ([`edit`]), for the
    /// bridge to tell the controllers (FLOW_REMOVED).
    pub deleted_with_learns: Vec<InstalledRule>,
    /// While an [`edit`] runs, the poll-mode threads' caches, swapped in from behind their
    /// locks (which hold these stand-ins meanwhile), so that a change harvests just the
    /// counts it needs ([`Ofproto::before_taking`], [`Ofproto::harvest`]); stand-ins
    /// otherwise.
    caches: Vec<FlowCache>,
    /// Whether the caches were all harvested in this edit: no packet has come since (the
    /// threads wait), so there is nothing more to harvest.
    harvested: bool,
}

impl Default for Ofproto {
    fn default() -> Self {
        Ofproto::new()
    }
}

impl Ofproto {
    /// A bridge that behaves as a learning switch until told otherwise: its one rule is
    /// `priority=0,actions=normal`, as an Open vSwitch bridge's.
    pub fn new() -> Ofproto {
        let mut ofproto = Ofproto::without_rules();
        let rule = Rule {
            priority: 0,
            ..Rule::new(Match::ANY, vec![Action::Normal])
        };
        ofproto.tables.add(rule, Duration::ZERO);
        ofproto
    }

    /// A bridge with empty tables (every packet misses and is dropped).
    pub fn without_rules() -> Ofproto {
        Ofproto {
            tables: RuleTables::new(),
            mac_table: MacTable::default(),
            offload: None,
            ports: Vec::new(),
            deleted_with_learns: Vec::new(),
            caches: Vec::new(),
            harvested: false,
        }
    }

    pub fn ports(&self) -> &[u32] {
        &self.ports
    }

    pub fn add_port(&mut self, port: u32) {
        if !self.ports.contains(&port) {
            self.ports.push(port);
            self.ports.sort_unstable();
        }
    }

    pub fn remove_port(&mut self, port: u32) {
        self.ports.retain(|&p| p != port);
        self.mac_table.flush_port(port);
    }

    /// Adds the rules `learn` actions learned ([`crate::ofproto::learned`]) at `now`; how
    /// many changed the tables. Every cache is harvested first, so what the packets they
    /// hold learned again is among them (a rule dropped from a full queue, a newer version
    /// of one).
    pub fn add_learned(&mut self, now: Duration) -> usize {
        self.harvest_caches();
        let rules = learned::take_pending(&mut self.tables);
        self.add_learned_rules(rules, now)
    }

    /// Puts learned `rules` (one a place: a PACKET_OUT's, or those waiting) in the tables at
    /// `now`; how many changed them (they add rules or change actions, never take one
    /// away: the kernel's fast path goes on forwarding, see [`Ofproto::watch_offload`]).
    pub fn add_learned_rules(&mut self, rules: Vec<Rule>, now: Duration) -> usize {
        let Ofproto {
            tables, offload, ..
        } = self;
        learned::add_learned(tables, rules, now, |tables| {
            if let Some(offload) = offload {
                offload.watch(tables);
            }
        })
    }

    /// `add-flow`, refusing outputs to ports the bridge does not have.
    pub fn add_rule(&mut self, rule: Rule, now: Duration) -> Result<RuleId, FlowError> {
        self.check_output_ports(&rule.actions)?;
        Ok(self.tables.add(rule, now))
    }

    /// An error naming the first `output:N` whose port the bridge does not have (for `add-flow`
    /// and `mod-flows`), or the first group or meter it does not have.
    pub fn check_output_ports(&self, actions: &[Action]) -> Result<(), FlowError> {
        check_output_ports(&self.ports, actions)?;
        self.check_groups_and_meters(actions)
    }

    /// An error naming the first group or meter `actions` name that the bridge does not have.
    pub fn check_groups_and_meters(&self, actions: &[Action]) -> Result<(), FlowError> {
        match actions.iter().find(|a| match a {
            Action::Group(g) => self.tables.group(*g).is_none(),
            Action::Meter(m) => self.tables.meter(*m).is_none(),
            _ => false,
        }) {
            Some(Action::Group(g)) => Err(FlowError(format!(
                "group:{g}: no such group (ctl add-group adds one, as OpenFlow can)"
            ))),
            Some(action) => Err(FlowError(format!(
                "{action}: no such meter (ctl add-meter adds one, as OpenFlow can)"
            ))),
            None => Ok(()),
        }
    }

    /// Installs `group` (`replace`: replaces one), as OpenFlow's GROUP_MOD add and modify and
    /// ctl's add-group and mod-group do: refused unless it is well formed, its buckets
    /// output to the `ports` allowed and its entries fit OpenFlow's replies. The counts of
    /// the flows through the group are credited to it as it was first (a modify starts the
    /// new one's from zero, and they were made from the old buckets), and the offloaded ones
    /// go; the others go on.
    /// Nothing changes when it is refused.
    pub fn set_group(
        &mut self,
        group: Group,
        replace: bool,
        ports: OutputPorts,
        now: Duration,
    ) -> Result<(), GroupError> {
        group.check()?;
        if ports == OutputPorts::Present {
            for bucket in &group.buckets {
                check_output_ports(&self.ports, &bucket.actions)
                    .map_err(|e| GroupError::BadOutPort(e.to_string()))?;
            }
        }
        self.tables.check_group(&group, replace)?;
        if !crate::openflow::reply::fits_a_reply(crate::openflow::reply::group_entry_len(&group)) {
            return Err(GroupError::TooLong);
        }
        // A bucket watching a port the bridge lacks is never live, as in Open vSwitch: a
        // fast failover group goes on to its next bucket, a select group leaves it out.
        for watched in group.buckets.iter().filter_map(|b| b.watch_port) {
            if !self.ports.contains(&watched) {
                self.tables.set_port_live(watched, false);
            }
        }
        let _ = self.before_groups(&[group.id], &[], now);
        self.tables.set_group(group, replace, now)
    }

    /// Removes group `only`, or every group (None), and the rules that send to them (as
    /// OpenFlow's GROUP_MOD delete and ctl's del-groups do); the rules removed. The counts
    /// of the flows through those groups or counting for those rules are credited first,
    /// and the offloaded ones go.
    pub fn delete_groups(&mut self, only: Option<u32>, now: Duration) -> Vec<InstalledRule> {
        let groups: Vec<u32> = match only {
            Some(id) => vec![id],
            None => self.tables.groups().map(|g| g.id).collect(),
        };
        // One pass over the rules, however many groups.
        let going = self
            .tables
            .sending_to_groups(&groups.iter().copied().collect());
        let _ = self.before_groups(&groups, &going, now);
        self.tables.delete_groups(only)
    }

    /// Each group (or group `only`) and its statistics at `now`, harvested first (a failed
    /// harvest of the kernel's counts leaves those of the last one that worked).
    pub fn group_stats(&mut self, only: Option<u32>, now: Duration) -> Vec<(Group, GroupUsage)> {
        let _ = self.harvest(now);
        // The rules' references counted in one pass, however many groups.
        let references = self.tables.group_references();
        self.tables
            .groups()
            .filter(|g| only.is_none_or(|id| id == g.id))
            .map(|g| {
                let rules = references.get(&g.id).copied().unwrap_or(0);
                (g.clone(), self.tables.group_usage_of(g.id, rules, now))
            })
            .collect()
    }

    /// Credits what the threads' caches (in an [`edit`]) and the kernel's fast path counted
    /// since the last harvest to the rules, groups and tables: call in the change before
    /// counters are shown. A failed harvest of the kernel's counts leaves those of the last
    /// one that worked.
    pub fn harvest(&mut self, now: Duration) -> Result<(), XdpError> {
        self.harvest_caches();
        self.harvest_offload(now)
    }

    /// [`Ofproto::harvest`] of the threads' caches alone.
    pub fn harvest_caches(&mut self) {
        if self.harvested {
            return;
        }
        for cache in &mut self.caches {
            cache.harvest(&mut self.tables);
        }
        self.harvested = true;
    }

    /// Starts changes that may be taken back ([`RuleTables::begin_undo`]), every cache
    /// harvested first: a roll-back puts the rules' counts back as they were when it began,
    /// so counts credited after would be lost.
    pub fn begin_undo(&mut self) {
        self.harvest_caches();
        self.tables.begin_undo();
    }

    /// Credits what the kernel's fast path forwarded since the last call to the rules and
    /// ports (the caches' counts wait for [`Ofproto::harvest`]).
    pub fn harvest_offload(&mut self, now: Duration) -> Result<(), XdpError> {
        match &mut self.offload {
            Some(offload) => offload.harvest(&mut self.tables, &mut self.mac_table, now),
            None => Ok(()),
        }
    }

    /// Housekeeping of the kernel's fast path: credits and removes idle entries.
    pub fn age_offload(&mut self, now: Duration) -> Result<(), XdpError> {
        match &mut self.offload {
            Some(offload) => offload.age(&mut self.tables, &mut self.mac_table, now),
            None => Ok(()),
        }
    }

    /// Call in [`edit`]'s change before a change that takes no rule away (adds rules,
    /// changes actions, or changes none): the kernel's fast path goes on forwarding, and
    /// after the change `edit` removes the entries it touched ([`Offload::resume`]).
    pub fn watch_offload(&mut self) {
        if let Some(offload) = &mut self.offload {
            offload.watch(&self.tables);
        }
    }

    /// Call in [`edit`]'s change before one that takes the rules `going` away, or resets
    /// their counts, so that their counts are complete: the caches' megaflows made from them
    /// are harvested ([`FlowCache::harvest_for`]), and the kernel's fast path first stops
    /// forwarding on the entries whose packets count for one of them, and the rest of their
    /// classes ([`Offload::suspend_for`]); the others go on, as for
    /// [`Ofproto::watch_offload`].
    pub fn before_taking(&mut self, going: &[RuleId], now: Duration) -> Result<(), XdpError> {
        self.before_groups(&[], going, now)
    }

    /// Removes meter `only`, or every meter (None), and the rules that pass them (as
    /// OpenFlow's METER_MOD delete and ctl's del-meter do); the rules removed. The kernel
    /// never takes a metered decision, so its entries stay.
    pub fn delete_meters(&mut self, only: Option<u32>, now: Duration) -> Vec<InstalledRule> {
        let meters: Vec<u32> = match only {
            Some(id) => vec![id],
            None => self.tables.meters().map(|m| m.0.config.id).collect(),
        };
        let going: Vec<RuleId> = meters
            .iter()
            .flat_map(|&id| self.tables.metered_by(id))
            .collect();
        let _ = self.before_taking(&going, now);
        self.tables.delete_meters(only)
    }

    /// Call in [`edit`]'s change before the groups `groups` change, and the rules `going` go
    /// with them: as [`Ofproto::before_taking`], for the megaflows and entries through the
    /// groups too.
    pub fn before_groups(
        &mut self,
        groups: &[u32],
        going: &[RuleId],
        now: Duration,
    ) -> Result<(), XdpError> {
        let mut going = going.to_vec();
        going.sort_unstable();
        let mut groups = groups.to_vec();
        groups.sort_unstable();
        if !self.harvested {
            for cache in &mut self.caches {
                cache.harvest_for(&mut self.tables, &going, &groups);
            }
        }
        match &mut self.offload {
            Some(offload) => {
                offload.suspend_for(&going, &groups, &mut self.tables, &mut self.mac_table, now)
            }
            None => Ok(()),
        }
    }

    /// Harvests every cache and stops the kernel's fast path forwarding, its counts
    /// credited: call in [`edit`]'s change before a change that may take any rules away.
    /// After the change, `edit` removes the entries it touched and lets the kernel go on
    /// with the rest ([`Offload::resume`]).
    pub fn before_taking_any(&mut self, now: Duration) -> Result<(), XdpError> {
        self.harvest_caches();
        match &mut self.offload {
            Some(offload) => offload.suspend(&mut self.tables, &mut self.mac_table, now),
            None => Ok(()),
        }
    }

    /// Housekeeping's side of the learning table: after ageing, the fast path's entries go
    /// if an address a `normal` entry depends on has gone; and a flush that failed is tried
    /// again.
    pub fn sync_offload_macs(&mut self, now: Duration) -> Result<(), XdpError> {
        if let Some(offload) = &mut self.offload
            && (offload.macs_changed(&self.mac_table) || offload.flush_failed())
        {
            return offload.flush(&mut self.tables, &mut self.mac_table, now);
        }
        Ok(())
    }
}

/// What the datapath's threads reach under the lock: the tables answer upcalls, the learning
/// table `normal`, and the offload takes the decisions the kernel can carry out.
impl SharedState for Ofproto {
    fn rules(&mut self) -> &mut dyn Upcall {
        &mut self.tables
    }

    fn mac_table(&mut self) -> &mut MacTable {
        &mut self.mac_table
    }

    fn after_decision(
        &mut self,
        frame: &[u8],
        in_port: u32,
        megaflow: &Megaflow,
        unfit: bool,
        now: Duration,
    ) {
        let Some(offload) = &mut self.offload else {
            return;
        };
        // After execution: a `normal` decision reads the learning table as it now is. The
        // decisions the fast path takes never rewrite the frame; a completed checksum did,
        // and that flow's next packets will come partial too, which the kernel leaves to us:
        // an entry for them would never be used.
        if !unfit {
            offload.consider(frame, in_port, megaflow, &self.tables, &self.mac_table, now);
        }
        if !offload.flush_failed()
            && offload.macs_changed(&self.mac_table)
            && offload
                .flush(&mut self.tables, &mut self.mac_table, now)
                .is_err()
        {
            offload.count_error();
        }
    }
}

/// Runs `change` on the datapath for the control side with `caches` (every thread's,
/// locked) in `ofproto`, and revalidates them after if the rules changed
/// ([`FlowCache::revalidate`]), as it does the kernel's fast path if `change` said it would
/// change it. The change says what it needs of the counts the caches hold: all of them
/// to show them ([`Ofproto::harvest`]), or those of the rules it takes away or resets
/// ([`Ofproto::before_taking`], [`Ofproto::before_groups`], [`Ofproto::before_taking_any`]);
/// the rest go to their rules when revalidation removes their megaflows, or at the next
/// harvest. So a change that only adds rules, replaces none and learns none
/// ([`Ofproto::add_learned`] harvests all), harvests nothing. The rules a `delete_learned`
/// learn that went takes with it go in the same change, every cache harvested first
/// ([`learned::delete_learned_flows`]).
pub fn edit<R>(
    ofproto: &mut Ofproto,
    caches: &mut [impl DerefMut<Target = FlowCache>],
    now: Duration,
    change: impl FnOnce(&mut Ofproto) -> R,
) -> R {
    ofproto
        .caches
        .resize_with(caches.len(), FlowCache::stand_in);
    ofproto.harvested = false;
    swap_caches(ofproto, caches);
    let done = catch_unwind(AssertUnwindSafe(|| {
        let result = change(ofproto);
        after_change(ofproto, now);
        result
    }));
    // The threads get their caches back, even after a panic.
    swap_caches(ofproto, caches);
    let result = done.unwrap_or_else(|panic| resume_unwind(panic));
    let Ofproto {
        tables,
        offload,
        mac_table,
        ..
    } = ofproto;
    if let Some(offload) = offload {
        // A failure is the flush's to retry (housekeeping), as for any flush.
        let _ = offload.resume(tables, mac_table, now);
    }
    result
}

/// What follows a change in [`edit`], the caches still in `ofproto`: the learned rules a
/// `delete_learned` learn that went takes with it go, and the caches are revalidated.
fn after_change(ofproto: &mut Ofproto, now: Duration) {
    if ofproto.tables.has_released_learns() {
        // What the caches' megaflows learned before the change is learned before the
        // learned rules go, not after, when it would put them back.
        ofproto.harvest_caches();
    }
    let Ofproto {
        tables,
        offload,
        mac_table,
        deleted_with_learns,
        caches: editing,
        ..
    } = ofproto;
    if tables.has_released_learns() {
        // Rules are about to go: the kernel's counts for them first, as for any change.
        let deleted = learned::delete_learned_flows(tables, |tables, going| {
            if let Some(offload) = offload {
                let _ = offload.suspend_for(going, &[], tables, mac_table, now);
            }
        });
        deleted_with_learns.extend(deleted);
    }
    for cache in editing.iter_mut() {
        cache.revalidate(tables);
    }
}

/// Swaps the threads' `caches` with those `ofproto` holds: stand-ins for the caches, or back.
fn swap_caches(ofproto: &mut Ofproto, caches: &mut [impl DerefMut<Target = FlowCache>]) {
    for (cache, held) in caches.iter_mut().zip(&mut ofproto.caches) {
        core::mem::swap(&mut **cache, held);
    }
}

/// Which ports a change's `output:N` may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputPorts {
    /// Only the bridge's: ctl and the start-up files, where another is a typo.
    Present,
    /// Any number (1 to 0xfeff), as Open vSwitch takes from a controller, whose
    /// configuration may name ports this switch lacks: what goes there is dropped, counted
    /// as `unknown_port`.
    AnyNumber,
}

/// An error naming the first `output:N` of `actions` whose port is not one of `ports`.
pub fn check_output_ports(ports: &[u32], actions: &[Action]) -> Result<(), FlowError> {
    let missing = actions.iter().find_map(|action| match action {
        Action::Output(port) if !ports.contains(port) => Some(*port),
        _ => None,
    });
    let Some(port) = missing else {
        return Ok(());
    };
    let known = if ports.is_empty() {
        "no ports".to_string()
    } else {
        let ports: Vec<String> = ports.iter().map(u32::to_string).collect();
        format!("ports {}", ports.join(", "))
    };
    Err(FlowError(format!(
        "output:{port}: no such port (the bridge has {known})"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dpif::process::{BurstLock, process};
    use crate::dpif::thread_cache::lock;
    use crate::execute::{DropReason, Verdict};
    use crate::field::TunnelOut;
    use crate::frame::Frame;
    use crate::mac_learning::mac_view::MacView;
    use crate::ofctl::flow_parse::parse_rule;
    use crate::ofproto::rule_table::RuleSelector;
    use std::sync::Mutex;

    const FRAME: [u8; 42] = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00, // Ethernet
        0x45, 0x00, 0x00, 0x1c, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x00, 0x00, // IPv4
        10, 0, 0, 1, 10, 0, 0, 2, // addresses
        0x04, 0xd2, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00, // UDP
    ];

    /// A bridge with one poll-mode thread's cache and view, driven by hand.
    struct Thread {
        ofproto: Mutex<Ofproto>,
        ports: Vec<u32>,
        cache: FlowCache,
        macs: MacView,
    }

    impl Thread {
        fn new(mut ofproto: Ofproto, ports: &[u32]) -> Thread {
            for &port in ports {
                ofproto.add_port(port);
            }
            Thread {
                macs: MacView::new(&ofproto.mac_table),
                ofproto: Mutex::new(ofproto),
                ports: ports.to_vec(),
                cache: FlowCache::default(),
            }
        }

        /// One packet as a burst of its own: its verdict, and whether the shared state
        /// was locked for it.
        fn send(&mut self, in_port: u32) -> (Verdict, bool) {
            self.send_at(in_port, false, Duration::from_secs(1))
        }

        /// [`Thread::send`] at time `now`, the frame's MAC addresses swapped if `back`.
        fn send_at(&mut self, in_port: u32, back: bool, now: Duration) -> (Verdict, bool) {
            let mut buffer = [0u8; 4 + 42];
            buffer[4..].copy_from_slice(&FRAME);
            if back {
                let (dst, src) = buffer[4..16].split_at_mut(6);
                dst.swap_with_slice(src);
            }
            let mut frame = Frame::new(&mut buffer, 4, 42).unwrap();
            let mut verdict = Verdict::default();
            let mut shared = BurstLock::new(&self.ofproto, &mut self.macs, &self.ports, false);
            process(
                &mut self.cache,
                &mut shared,
                &mut frame,
                in_port,
                now,
                &mut verdict,
                &mut |_: &[u8], _: &[u32], _: TunnelOut| {},
            );
            let locked = shared.taken() == 1;
            (verdict, locked)
        }

        fn edit<R>(&mut self, change: impl FnOnce(&mut Ofproto) -> R) -> R {
            edit(
                &mut lock(&self.ofproto),
                &mut [&mut self.cache],
                Duration::ZERO,
                change,
            )
        }

        /// The (n_packets, n_bytes) of each rule, in dump order, after a harvest.
        fn counts(&mut self) -> Vec<(u64, u64)> {
            self.edit(|ofproto| {
                ofproto.harvest_caches();
                let rules = ofproto.tables.dump_order();
                rules
                    .iter()
                    .map(|r| (r.stats.n_packets, r.stats.n_bytes))
                    .collect()
            })
        }
    }

    fn udp_rules() -> RuleSelector {
        RuleSelector {
            flow_match: crate::ofctl::flow_parse::parse_match("udp")
                .unwrap()
                .flow_match,
            ..RuleSelector::default()
        }
    }

    #[test]
    fn learning_switch_by_default() {
        let mut thread = Thread::new(Ofproto::new(), &[1, 2, 3]);
        assert_eq!(thread.send(1).0.outputs.as_slice(), &[2, 3]);
        assert_eq!(thread.counts(), vec![(1, 42)]);
    }

    #[test]
    fn drop_rule_then_removed() {
        let mut thread = Thread::new(Ofproto::new(), &[1, 2]);
        let drop = parse_rule("priority=10,udp,actions=drop").unwrap();
        thread
            .edit(|ofproto| ofproto.add_rule(drop, Duration::ZERO))
            .unwrap();
        assert_eq!(thread.send(1).0.dropped, Some(DropReason::NoOutput));
        assert_eq!(thread.send(1).0.dropped, Some(DropReason::NoOutput));
        assert_eq!(
            thread.edit(|ofproto| ofproto.tables.delete(&udp_rules())),
            1
        );
        assert_eq!(thread.send(1).0.outputs.as_slice(), &[2]);
        assert_eq!(thread.cache.stats.emc_hits, 1);
    }

    /// DESIGN rule 3: a cached decision is taken without locking what the threads share;
    /// a miss locks it, and so does `normal` until the thread's view knows both addresses.
    #[test]
    fn only_misses_and_new_addresses_lock_the_shared_state() {
        let mut thread = Thread::new(Ofproto::without_rules(), &[1, 2, 3]);
        let output = parse_rule("in_port=1,actions=output:2").unwrap();
        thread
            .edit(|ofproto| ofproto.add_rule(output, Duration::ZERO))
            .unwrap();
        let locked: Vec<bool> = (0..3).map(|_| thread.send(1).1).collect();
        assert_eq!(locked, [true, false, false]);
        assert_eq!(thread.send(1).0.outputs.as_slice(), &[2]);

        thread
            .edit(|ofproto| {
                ofproto.tables.delete(&RuleSelector::default());
                ofproto.add_rule(parse_rule("actions=normal").unwrap(), Duration::ZERO)
            })
            .unwrap();
        let second = Duration::from_secs(1);
        let mut send = |in_port, back, now| {
            let (verdict, locked) = thread.send_at(in_port, back, now);
            (verdict.outputs.as_slice().to_vec(), locked)
        };
        // A (port 1) to B, unknown: flooded; each new address locks, each flood asks again.
        assert_eq!(send(1, false, second), (vec![2, 3], true));
        assert_eq!(send(1, false, second), (vec![2, 3], true));
        // B answers from port 2 (a miss, and B is learned); then both are known.
        assert_eq!(send(2, true, second), (vec![1], true));
        assert_eq!(send(1, false, second), (vec![2], false));
        assert_eq!(send(2, true, second), (vec![1], false));
        // A source is written back to the shared table once per REFRESH.
        assert_eq!(send(1, false, 2 * second), (vec![2], true));
        assert_eq!(send(1, false, 2 * second), (vec![2], false));
        // An address that moves empties the view.
        assert_eq!(send(3, true, 2 * second), (vec![1], true));
        assert_eq!(send(1, false, 2 * second), (vec![3], true));
        assert_eq!(send(1, false, 2 * second), (vec![3], false));
    }

    /// A rule's counts come from the cache at the next harvest, and a rule installed in a
    /// removed rule's slot does not inherit the removed rule's packets.
    #[test]
    fn counts_reach_their_rules_across_changes() {
        let mut thread = Thread::new(Ofproto::without_rules(), &[1, 2, 3]);
        let first = parse_rule("udp,actions=output:2").unwrap();
        let id = thread
            .edit(|ofproto| ofproto.add_rule(first, Duration::ZERO))
            .unwrap();
        for _ in 0..3 {
            thread.send(1);
        }
        assert_eq!(thread.counts(), vec![(3, 126)]);
        thread.send(1);
        assert_eq!(
            thread.edit(|ofproto| ofproto.tables.delete(&udp_rules())),
            1
        );
        let second = parse_rule("udp,actions=output:3").unwrap();
        let reused = thread
            .edit(|ofproto| ofproto.add_rule(second, Duration::ZERO))
            .unwrap();
        assert_eq!(reused, id, "the slot is reused");
        assert_eq!(thread.send(1).0.outputs.as_slice(), &[3]);
        assert_eq!(thread.counts(), vec![(1, 42)]);
    }

    /// A change harvests only the counts it needs: an add leaves them in the cache, a rule
    /// taken away has every packet when it goes, even with its slot reused in the same
    /// change, and a megaflow the change removes credits its rule on the way out.
    #[test]
    fn a_change_harvests_only_the_counts_it_takes() {
        let mut thread = Thread::new(Ofproto::without_rules(), &[1, 2, 3]);
        let rules = [
            "in_port=1,udp,actions=output:2",
            "in_port=2,udp,actions=output:1",
        ];
        let [a, b] = rules.map(|r| {
            let rule = parse_rule(r).unwrap();
            thread
                .edit(|ofproto| ofproto.add_rule(rule, Duration::ZERO))
                .unwrap()
        });
        for in_port in [1, 1, 1, 2, 2] {
            thread.send(in_port);
        }
        let unrelated = parse_rule("priority=5,tcp,actions=drop").unwrap();
        thread
            .edit(|ofproto| ofproto.add_rule(unrelated, Duration::ZERO))
            .unwrap();
        let stats = |thread: &Thread, id| lock(&thread.ofproto).tables.get(id).unwrap().stats;
        assert_eq!(stats(&thread, a).n_packets, 0, "the add harvested nothing");
        thread.send(1);

        let (removed, reused, over_b) = thread.edit(|ofproto| {
            ofproto.before_taking(&[a], Duration::ZERO).unwrap();
            let removed = ofproto.tables.remove(a).unwrap();
            let reused = ofproto.add_rule(
                parse_rule("in_port=1,udp,actions=output:3").unwrap(),
                Duration::ZERO,
            );
            let over_b = ofproto.add_rule(
                parse_rule("priority=40000,in_port=2,udp,actions=drop").unwrap(),
                Duration::ZERO,
            );
            (removed, reused.unwrap(), over_b.unwrap())
        });
        assert_eq!(reused, a, "the slot is reused");
        assert_eq!((removed.stats.n_packets, removed.stats.n_bytes), (4, 168));
        assert_eq!(
            stats(&thread, b).n_packets,
            2,
            "b's megaflow went, its counts to b"
        );
        assert_eq!(thread.send(1).0.outputs.as_slice(), &[3]);
        assert_eq!(thread.send(2).0.dropped, Some(DropReason::NoOutput));
        thread.edit(|ofproto| ofproto.harvest_caches());
        let counts = [reused, b, over_b].map(|id| {
            let s = stats(&thread, id);
            (s.n_packets, s.n_bytes)
        });
        assert_eq!(counts, [(1, 42), (2, 84), (1, 42)]);
    }

    /// A change that drops a `delete_learned` learn deletes what it learned, and packets
    /// the cache counted before the change do not learn it back after.
    #[test]
    fn a_learned_rule_deleted_with_its_learn_stays_deleted() {
        let mut thread = Thread::new(Ofproto::without_rules(), &[1, 2]);
        let learn = "learn(table=10,cookie=0x5,delete_learned,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[])";
        let learning = parse_rule(&format!("udp,actions={learn},output:2")).unwrap();
        thread
            .edit(|ofproto| ofproto.add_rule(learning, Duration::ZERO))
            .unwrap();
        thread.send(1);
        assert_eq!(
            thread.edit(|ofproto| ofproto.add_learned(Duration::ZERO)),
            1
        );
        let in_table_10 = |thread: &Thread| {
            let ofproto = lock(&thread.ofproto);
            (ofproto.tables.iter())
                .filter(|(_, r)| r.rule.table == 10)
                .count()
        };
        assert_eq!(in_table_10(&thread), 1);
        thread.send(1);
        thread.send(1);

        let deleted = thread.edit(|ofproto| {
            ofproto.before_taking(&[], Duration::ZERO).unwrap();
            let changed = ofproto
                .tables
                .modify(&udp_rules(), &[Action::Output(2)], None);
            assert_eq!(changed.unwrap(), 1);
            std::mem::take(&mut ofproto.deleted_with_learns)
        });
        assert!(deleted.is_empty(), "taken at the end of the change");
        let deleted = std::mem::take(&mut lock(&thread.ofproto).deleted_with_learns);
        assert_eq!(deleted.len(), 1);
        assert_eq!(in_table_10(&thread), 0);
        assert_eq!(
            thread.edit(|ofproto| ofproto.add_learned(Duration::ZERO)),
            0
        );
        assert_eq!(in_table_10(&thread), 0, "learned back from packets before");
    }

    /// The threads' caches go into the shared state for a change and come back after it,
    /// even when the change panics.
    #[test]
    fn a_change_that_panics_gives_the_threads_their_caches_back() {
        let mut thread = Thread::new(Ofproto::new(), &[1, 2, 3]);
        thread.send(1);
        let panicked = std::panic::catch_unwind(AssertUnwindSafe(|| {
            thread.edit(|_| panic!("a change that fails (this test's)"))
        }));
        assert!(panicked.is_err());
        let hits = thread.cache.stats.emc_hits;
        assert_eq!(thread.send(1).0.outputs.as_slice(), &[2, 3]);
        assert_eq!(thread.cache.stats.emc_hits, hits + 1, "its own cache again");
    }

    #[test]
    fn unknown_output_port_is_refused() {
        let mut thread = Thread::new(Ofproto::without_rules(), &[1, 2]);
        let error = thread
            .edit(|ofproto| {
                ofproto.add_rule(parse_rule("actions=output:7").unwrap(), Duration::ZERO)
            })
            .unwrap_err();
        assert_eq!(
            error.0,
            "output:7: no such port (the bridge has ports 1, 2)"
        );
        assert!(lock(&thread.ofproto).tables.is_empty());
        assert_eq!(thread.send(1).0.dropped, Some(DropReason::TableMiss));
    }
}
