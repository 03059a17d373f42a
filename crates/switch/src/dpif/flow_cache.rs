//! The two caches in front of the rule tables, and their revalidation: exact-match cache, then
//! megaflow cache, then an upcall ([`Upcall::translate`]), which installs a megaflow matching
//! exactly the bits it examined.

use core::time::Duration;

use crate::classifier::RuleId;
use crate::dpif::digest;
use crate::dpif::emc::{DEFAULT_EMC_ENTRIES, ExactMatchCache};
use crate::dpif::megaflow::{
    DEFAULT_MEGAFLOW_CAPACITY, Megaflow, MegaflowCache, MegaflowId, Unexported, flow_record_mask,
};
use crate::dpif::process::Plan;
use crate::dpif::revalidate::{Changes, MAX_PRECISE_CHANGES};
use crate::dpif::upcall::Upcall;
use crate::field::{Field, FlowBits, PACKET_WORDS, PacketKey, hash_packet_words};
use crate::flow_match::Match;

/// Where lookups were answered.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CacheStats {
    pub emc_hits: u64,
    pub megaflow_hits: u64,
    /// Slow-path translations (each installs a megaflow).
    pub misses: u64,
    /// Times both caches were emptied (a change to the fail mode or many rules at once, a
    /// bundle rolled back, or the megaflow cache full).
    pub flushes: u64,
    /// Megaflows removed because a change to a rule could decide their packets otherwise
    /// (the rest stay: see [`crate::dpif::revalidate`]).
    pub stale: u64,
    /// Bursts in which the poll-mode thread owning the cache locked the bridge's shared
    /// state (for a miss, a `normal` address its view did not hold, or the offload).
    pub shared_bursts: u64,
}

impl CacheStats {
    pub fn add(&mut self, other: &CacheStats) {
        self.emc_hits += other.emc_hits;
        self.megaflow_hits += other.megaflow_hits;
        self.misses += other.misses;
        self.flushes += other.flushes;
        self.stale += other.stale;
        self.shared_bursts += other.shared_bursts;
    }
}

/// One poll-mode thread's caches (DESIGN rule 3: no thread reads another's). Their
/// megaflows count packets; the rules are credited from those counts when the control side
/// harvests them ([`FlowCache::harvest`]) before counters are shown, before a change takes
/// their rules away ([`FlowCache::harvest_for`]), and as revalidation removes them.
pub struct FlowCache {
    emc: ExactMatchCache,
    megaflows: MegaflowCache,
    /// The rule-table generation the entries were made at.
    generation: u64,
    /// Lookups the EMC missed and the megaflows answered since its last hit.
    emc_misses_in_row: u32,
    /// Flow records (IPFIX) are made from the megaflows: each is exact on a record's
    /// fields, and those emptied out keep their counts until the control side takes them.
    flow_records: bool,
    /// Megaflows emptied out with counts not yet in a flow record.
    retired: Vec<Megaflow>,
    /// Megaflows emptied out whose counts could not be kept (more than a cache's worth
    /// waiting): their packets are missing from the flow records.
    retired_lost: u64,
    /// Where [`FlowCache::take_flow_counts`] goes on from.
    counts_cursor: usize,
    /// Megaflows a removal moved from past the cursor to before it: the next call looks at
    /// them first, so none misses its round.
    revisit: Vec<MegaflowId>,
    pub stats: CacheStats,
}

/// Credits `megaflow`'s packets since it was last credited to `tables` (see
/// [`FlowCache::harvest`]).
fn credit(megaflow: &mut Megaflow, tables: &mut dyn Upcall) {
    let (packets, bytes) = megaflow.take_uncredited();
    if packets == 0 {
        return;
    }
    let decision = &megaflow.decision;
    for &id in &decision.rules {
        tables.credit(id, packets, bytes, megaflow.used);
    }
    for &visit in &decision.groups {
        tables.credit_group(visit, packets, bytes);
    }
    for &table in &decision.missed {
        tables.credit_miss(table, packets);
    }
    if !decision.learned.is_empty() {
        tables.learned_again(&decision.learned, megaflow.used);
    }
}

/// After this many EMC misses in a row the EMC is thrashing (more flows than it holds), and
/// only one lookup in [`EMC_THRASHING_EVERY`] probes it (and, missing, enters its flow):
/// the rest go straight to the megaflows, without the EMC's hash, its cold line of checks,
/// or an 80-byte store that evicts a flow before it comes back. Entering a few flows lets
/// those stay long enough to hit (OVS enters a flow with probability 1/100 always,
/// `emc-insert-inv-prob`); a hit ends the streak, and every lookup probes again.
const EMC_THRASHING: u32 = 256;
const EMC_THRASHING_EVERY: u32 = 64;

/// Megaflows [`FlowCache::take_flow_counts`] looks at per call at least (all if fewer): the
/// owning thread waits while they are read, well under a millisecond for this many.
pub const FLOW_COUNTS_BATCH: usize = 8192;

impl Default for FlowCache {
    fn default() -> Self {
        FlowCache::new(DEFAULT_EMC_ENTRIES, DEFAULT_MEGAFLOW_CAPACITY)
    }
}

impl FlowCache {
    /// `emc_entries` 0 disables the exact-match cache.
    pub fn new(emc_entries: usize, megaflow_capacity: usize) -> FlowCache {
        FlowCache {
            emc: ExactMatchCache::new(emc_entries),
            megaflows: MegaflowCache::new(megaflow_capacity.max(1)),
            generation: 0,
            emc_misses_in_row: 0,
            flow_records: false,
            retired: Vec::new(),
            retired_lost: 0,
            counts_cursor: 0,
            revisit: Vec::new(),
            stats: CacheStats::default(),
        }
    }

    /// An empty cache that takes no room, to hold a thread's place while its cache is
    /// elsewhere ([`crate::ofproto::state::edit`]).
    pub fn stand_in() -> FlowCache {
        FlowCache::new(0, 1)
    }

    /// Makes flow records from this cache's megaflows from now on (see
    /// [`flow_record_mask`]); call before the thread handles a packet.
    pub fn keep_flow_records(&mut self) {
        self.flow_records = true;
    }

    /// The megaflow deciding `flow` under the current rules, counted for a packet of `bytes`:
    /// the poll-mode threads' path ([`Self::hit`], [`Self::miss`], [`Self::credit`]) for a
    /// single-threaded caller that edits `tables` directly (a change shows at the next lookup;
    /// before one that takes rules away the caller harvests them, as [`Self::revalidate`]
    /// says).
    pub fn lookup(&mut self, tables: &mut dyn Upcall, flow: &FlowBits, bytes: usize) -> &Megaflow {
        self.revalidate(tables);
        let id = match self.hit(flow) {
            Some(id) => id,
            None => self.miss(tables, flow, Duration::ZERO),
        };
        self.megaflows.credit(id, bytes, Duration::ZERO)
    }

    /// The cached megaflow for an arriving packet's `flow`, if any; the caller has
    /// revalidated the cache since the rules last changed.
    #[inline]
    pub fn hit(&mut self, flow: &FlowBits) -> Option<MegaflowId> {
        let misses = self.emc_misses_in_row;
        let probe = misses < EMC_THRASHING || misses.is_multiple_of(EMC_THRASHING_EVERY);
        let hash = if probe && self.emc.is_enabled() {
            let hash = hash_packet_words(flow.packet_words());
            if let Some(id) = self.emc.lookup(flow.packet_words(), hash) {
                self.stats.emc_hits += 1;
                self.emc_misses_in_row = 0;
                return Some(id);
            }
            Some(hash)
        } else {
            None
        };
        let id = self.megaflows.lookup(flow)?;
        self.stats.megaflow_hits += 1;
        self.emc_misses_in_row = misses.wrapping_add(1);
        if let Some(hash) = hash {
            self.emc.insert(&PacketKey::of(flow), hash, id);
        }
        Some(id)
    }

    /// The slow path after [`Self::hit`] found nothing at `now`: translates `flow` through
    /// `tables` and installs the megaflow. A full cache is harvested into `tables`, then
    /// emptied.
    pub fn miss(&mut self, tables: &mut dyn Upcall, flow: &FlowBits, now: Duration) -> MegaflowId {
        if self.megaflows.is_full() {
            self.harvest(tables);
            self.flush();
        }
        self.stats.misses += 1;
        let mut wildcards = FlowBits::ZERO;
        let decision = tables.translate(flow, &mut wildcards);
        // What the lookups saw of the pipeline's state (metadata, registers) the actions wrote
        // from pinned packet bits or constants: no packet carries it, so the megaflow's mask
        // leaves it out (one subtable for masks that differ only there).
        wildcards.0[PACKET_WORDS..].fill(0);
        if self.flow_records {
            wildcards.or_assign(&flow_record_mask(flow));
        }
        let id = self
            .megaflows
            .insert(Match::new(*flow, wildcards), decision, now);
        let key = PacketKey::of(flow);
        self.emc.insert(&key, key.hash64(), id);
        id
    }

    /// Counts a packet of `bytes` at `now` for megaflow `id`.
    pub fn credit(&mut self, id: MegaflowId, bytes: usize, now: Duration) -> &Megaflow {
        self.megaflows.credit(id, bytes, now)
    }

    /// [`Self::credit`] of a packet of `flow`, with what the datapath runs for the megaflow.
    /// Its TCP flags are kept for flow records only: without them the packet costs nothing
    /// more.
    #[inline]
    pub fn credit_with_plan(
        &mut self,
        id: MegaflowId,
        bytes: usize,
        flow: &FlowBits,
        now: Duration,
    ) -> (&Megaflow, Plan) {
        let tcp_flags = match self.flow_records {
            true => Field::TcpFlags.get(flow) as u16,
            false => 0,
        };
        self.megaflows.credit_with_plan(id, bytes, tcp_flags, now)
    }

    /// Credits each megaflow's packets since the last harvest to what it was made from: its
    /// rules, the groups and buckets it passes, and the tables it looked up; what its
    /// `learn`s learned, they learn again. Call with the tables the megaflows were made
    /// from, before a change takes any of those rules or groups away or resets their counts
    /// ([`Self::harvest_for`] does only the megaflows such a change needs).
    pub fn harvest(&mut self, tables: &mut dyn Upcall) {
        for megaflow in self.megaflows.iter_mut() {
            credit(megaflow, tables);
        }
    }

    /// [`Self::harvest`] of only the megaflows made from one of `rules` or passing one of
    /// `groups` (both sorted): before a change takes those away or resets their counts, so
    /// theirs are complete. The others' counts can wait: their rules stay in their slots.
    /// When rules go, the megaflows that learn are harvested too: what they learned from
    /// packets before the change is learned before it, and a learned rule deleted does
    /// not come back from them.
    pub fn harvest_for(&mut self, tables: &mut dyn Upcall, rules: &[RuleId], groups: &[u32]) {
        if rules.is_empty() && groups.is_empty() {
            return;
        }
        let rule_bits = digest::bits(rules.iter().map(|r| r.0));
        let group_bits = digest::bits(groups.iter().copied());
        let learning = !rules.is_empty();
        for (digest, megaflow) in self.megaflows.iter_mut_digested() {
            if !(digest.may_name(rule_bits, group_bits, 0) || (learning && digest.learns())) {
                continue;
            }
            let decision = &megaflow.decision;
            let from_rules = || (decision.rules.iter()).any(|r| rules.binary_search(r).is_ok());
            let through_groups =
                || (decision.groups.iter()).any(|v| groups.binary_search(&v.group).is_ok());
            let learns = learning && !decision.learned.is_empty();
            if megaflow.has_uncredited() && (learns || from_rules() || through_groups()) {
                credit(megaflow, tables);
            }
        }
    }

    /// After the rules changed since the entries were made, removes those the changes could
    /// decide otherwise (see [`crate::dpif::revalidate`]), or all of them, their counts
    /// credited to `tables` first. A change that took rules or groups away, or reset their
    /// counts, harvested their megaflows before ([`Self::harvest_for`]): what is left to
    /// credit counts for rules still in their slots.
    pub fn revalidate(&mut self, tables: &mut dyn Upcall) {
        let generation = tables.generation();
        if self.generation == generation {
            return;
        }
        match tables.changes_since(self.generation) {
            Some(changes) if changes.len() <= MAX_PRECISE_CHANGES => {
                self.remove_stale(&Changes::new(changes), tables)
            }
            _ => {
                self.harvest(tables);
                self.flush();
            }
        }
        self.generation = generation;
    }

    /// Removes the megaflows `changes` touch, and their exact-match entries, crediting
    /// their counts to `tables`.
    fn remove_stale(&mut self, changes: &Changes, tables: &mut dyn Upcall) {
        let (mut stale, moved) = (self.megaflows)
            .remove_where(|digest, megaflow| changes.touch_digested(digest, megaflow));
        if stale.is_empty() {
            return;
        }
        for megaflow in &mut stale {
            credit(megaflow, tables);
        }
        self.stats.stale += stale.len() as u64;
        self.emc.remap(&moved);
        if self.flow_records {
            // Flow records go on from the same place; a megaflow moved from past it to
            // before it is looked at next.
            let cursor = self.counts_cursor;
            let mut revisit: Vec<MegaflowId> = (self.revisit.iter())
                .filter_map(|id| moved[id.0 as usize])
                .collect();
            let passed = moved.iter().skip(cursor).flatten();
            revisit.extend(passed.filter(|new| (new.0 as usize) < cursor));
            self.revisit = revisit;
            self.retire(stale);
        }
        self.counts_cursor = self.counts_cursor.min(self.megaflows.len());
    }

    /// Empties both caches (a full megaflow cache harvests first, see [`Self::harvest`]).
    pub fn flush(&mut self) {
        if self.megaflows.is_empty() {
            return;
        }
        self.emc.clear();
        if self.flow_records {
            let all = self.megaflows.take_all();
            self.retire(all);
        } else {
            self.megaflows.clear();
        }
        self.counts_cursor = 0;
        self.revisit.clear();
        self.stats.flushes += 1;
    }

    /// Keeps the `megaflows` emptied out that have counts not yet in a flow record.
    fn retire(&mut self, mut megaflows: Vec<Megaflow>) {
        megaflows.retain(|m| m.n_packets != m.exported.0 || m.n_bytes != m.exported.1);
        let room = DEFAULT_MEGAFLOW_CAPACITY.saturating_sub(self.retired.len());
        if megaflows.len() > room {
            self.retired_lost += (megaflows.len() - room) as u64;
            megaflows.truncate(room);
        }
        match self.retired.is_empty() {
            true => self.retired = megaflows,
            false => self.retired.append(&mut megaflows),
        }
    }

    /// Hands `each` the megaflows with counts not yet in a flow record and those counts,
    /// marked as taken: every one emptied out since the last call, those a removal moved to
    /// before the share last read, and of those in the cache the next share, so that each is
    /// looked at once every `rounds` calls (at least [`FLOW_COUNTS_BATCH`] a call: the thread
    /// waits while they are read).
    /// Returns how many emptied megaflows could not be kept since the last call. `now`
    /// (the bridge's clock) marks when the counts were taken.
    pub fn take_flow_counts(
        &mut self,
        rounds: usize,
        now: Duration,
        mut each: impl FnMut(&Megaflow, Unexported),
    ) -> u64 {
        for mut megaflow in std::mem::take(&mut self.retired) {
            let counts = megaflow.take_unexported(now);
            each(&megaflow, counts);
        }
        let megaflows = self.megaflows.as_mut_slice();
        for id in std::mem::take(&mut self.revisit) {
            let megaflow = &mut megaflows[id.0 as usize];
            let counts = megaflow.take_unexported(now);
            if counts.packets != 0 || counts.bytes != 0 {
                each(megaflow, counts);
            }
        }
        let len = megaflows.len();
        let share = len.div_ceil(rounds.max(1)).max(FLOW_COUNTS_BATCH).min(len);
        let start = if self.counts_cursor < len {
            self.counts_cursor
        } else {
            0
        };
        for i in 0..share {
            let megaflow = &mut megaflows[(start + i) % len];
            let counts = megaflow.take_unexported(now);
            if counts.packets != 0 || counts.bytes != 0 {
                each(megaflow, counts);
            }
        }
        self.counts_cursor = (start + share) % len.max(1);
        std::mem::take(&mut self.retired_lost)
    }

    /// Re-sorts the megaflow masks by recent hits; call now and then (OVS: every second).
    pub fn optimize(&mut self) {
        self.megaflows.sort_subtables();
    }

    /// The cached megaflows, for `dump-cache`.
    pub fn megaflows(&self) -> impl Iterator<Item = &Megaflow> {
        self.megaflows.iter()
    }

    pub fn megaflow_masks(&self) -> usize {
        self.megaflows.subtable_count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::Action;
    use crate::field::Field;
    use crate::ofctl::flow_parse::parse_rule;
    use crate::ofproto::rule_table::{RuleSelector, RuleTables};

    fn flow(in_port: u128, nw_dst: u128) -> FlowBits {
        let mut flow = FlowBits::ZERO;
        Field::InPort.set(&mut flow, in_port);
        Field::DlType.set(&mut flow, 0x0800);
        Field::NwDst.set(&mut flow, nw_dst);
        flow
    }

    #[test]
    fn miss_then_megaflow_then_emc() {
        let mut tables = RuleTables::new();
        tables.add(
            parse_rule("in_port=1,actions=output:2").unwrap(),
            Duration::ZERO,
        );
        let mut cache = FlowCache::default();
        let megaflow = cache.lookup(&mut tables, &flow(1, 1), 60);
        assert_eq!(megaflow.decision.actions, vec![Action::Output(2)]);
        // Only in_port was examined: the megaflow leaves nw_dst wildcarded.
        assert_eq!(megaflow.flow_match.field(Field::InPort), (1, 0xffff_ffff));
        assert!(megaflow.flow_match.is_wildcarded(Field::NwDst));
        cache.lookup(&mut tables, &flow(1, 2), 60);
        cache.lookup(&mut tables, &flow(1, 2), 60);
        assert_eq!(
            cache.stats,
            CacheStats {
                emc_hits: 1,
                megaflow_hits: 1,
                misses: 1,
                flushes: 0,
                stale: 0,
                shared_bursts: 0
            }
        );
        let megaflow = cache.megaflows().next().unwrap();
        assert_eq!((megaflow.n_packets, megaflow.n_bytes), (3, 180));
    }

    #[test]
    fn a_rule_change_is_never_hidden_by_a_cache() {
        let mut tables = RuleTables::new();
        tables.add(
            parse_rule("priority=1,actions=output:2").unwrap(),
            Duration::ZERO,
        );
        let mut cache = FlowCache::default();
        assert_eq!(
            cache.lookup(&mut tables, &flow(1, 1), 60).decision.actions,
            vec![Action::Output(2)]
        );
        assert_eq!(
            cache.lookup(&mut tables, &flow(1, 1), 60).decision.actions,
            vec![Action::Output(2)]
        );
        tables.add(
            parse_rule("priority=9,ip,nw_dst=0.0.0.1,actions=drop").unwrap(),
            Duration::ZERO,
        );
        assert!(
            cache
                .lookup(&mut tables, &flow(1, 1), 60)
                .decision
                .actions
                .is_empty()
        );
        assert_eq!((cache.stats.flushes, cache.stats.stale), (0, 1));
    }

    /// A rule change removes the megaflows it could decide otherwise; the others keep
    /// answering, from the EMC too, though their places in the cache moved.
    #[test]
    fn a_rule_change_removes_only_what_it_touches() {
        let mut tables = RuleTables::new();
        for rule in [
            "priority=5,in_port=1,actions=output:2",
            "priority=5,in_port=2,actions=output:1",
        ] {
            tables.add(parse_rule(rule).unwrap(), Duration::ZERO);
        }
        let mut cache = FlowCache::default();
        let actions = |cache: &mut FlowCache, tables: &mut RuleTables, in_port| {
            let megaflow = cache.lookup(tables, &flow(in_port, 1), 60);
            megaflow.decision.actions.clone()
        };
        assert_eq!(actions(&mut cache, &mut tables, 2), [Action::Output(1)]);
        assert_eq!(actions(&mut cache, &mut tables, 1), [Action::Output(2)]);
        tables.add(
            parse_rule("priority=9,in_port=2,ip,nw_dst=0.0.0.1,actions=drop").unwrap(),
            Duration::ZERO,
        );
        // in_port=1's megaflow stays (it moved to the first place) and its EMC entry with it.
        assert_eq!(actions(&mut cache, &mut tables, 1), [Action::Output(2)]);
        assert_eq!((cache.stats.emc_hits, cache.stats.misses), (1, 2));
        assert_eq!(actions(&mut cache, &mut tables, 2), []);
        assert_eq!((cache.stats.misses, cache.stats.stale), (3, 1));
        // A rule gone takes the megaflows that found it.
        let gone = tables.find_exact(
            0,
            &parse_rule("priority=5,in_port=1,actions=drop")
                .unwrap()
                .flow_match,
            5,
        );
        tables.remove(gone.unwrap());
        assert_eq!(actions(&mut cache, &mut tables, 1), []);
        assert_eq!(actions(&mut cache, &mut tables, 2), []);
        assert_eq!((cache.stats.misses, cache.stats.stale), (4, 2));
        assert_eq!(cache.stats.flushes, 0);
        // A change the log cannot say (here the fail mode) empties the caches.
        tables.set_fail_open(true);
        assert_eq!(actions(&mut cache, &mut tables, 2), [Action::Normal]);
        assert_eq!(cache.stats.flushes, 1);
    }

    /// A later table looks up the flow as the actions left it: a rule added there is tested
    /// against the rewritten address and the register written, not the packet's own.
    #[test]
    fn a_lookup_after_a_rewrite_is_revalidated_as_it_saw_the_flow() {
        let mut tables = RuleTables::new();
        for rule in [
            "in_port=1,ip,nw_dst=0.0.0.1,actions=mod_nw_dst:0.0.0.9,load:7->NXM_NX_REG0[],goto_table:1",
            "table=1,priority=1,actions=output:2",
        ] {
            tables.add(parse_rule(rule).unwrap(), Duration::ZERO);
        }
        let mut cache = FlowCache::default();
        let mut after = |rule: &str, tables: &mut RuleTables| {
            tables.add(parse_rule(rule).unwrap(), Duration::ZERO);
            let decision = &cache.lookup(tables, &flow(1, 1), 60).decision;
            (decision.actions.last().copied(), cache.stats.stale)
        };
        let output = Some(Action::Output(2));
        assert_eq!(after("table=2,actions=drop", &mut tables), (output, 0));
        // Neither the packet's address nor the register's value as the packet came.
        assert_eq!(
            after(
                "table=1,priority=5,ip,nw_dst=0.0.0.1,actions=drop",
                &mut tables
            ),
            (output, 0)
        );
        assert_eq!(
            after("table=1,priority=5,reg0=0,actions=drop", &mut tables),
            (output, 0)
        );
        assert_eq!(
            after("table=1,priority=5,reg0=8,actions=drop", &mut tables),
            (output, 0)
        );
        // What the lookup saw.
        let set_field = Some(Action::SetField(Field::NwDst, 9));
        assert_eq!(
            after("table=1,priority=6,reg0=7,actions=drop", &mut tables),
            (set_field, 1)
        );
        tables.delete(&RuleSelector {
            table: Some(1),
            flow_match: parse_rule("reg0=7,actions=drop").unwrap().flow_match,
            ..RuleSelector::default()
        });
        assert_eq!(after("table=2,actions=drop", &mut tables), (output, 2));
        assert_eq!(
            after(
                "table=1,priority=7,ip,nw_dst=0.0.0.9,actions=drop",
                &mut tables
            ),
            (set_field, 3)
        );
    }

    /// The tables' log keeps every change a revalidation tests one by one, however many
    /// came before; more at once empty the caches.
    #[test]
    fn changes_up_to_the_limit_never_flush() {
        let mut tables = RuleTables::new();
        tables.add(
            parse_rule("in_port=1,actions=output:2").unwrap(),
            Duration::ZERO,
        );
        let mut cache = FlowCache::default();
        let add = |tables: &mut RuleTables, n: usize| {
            let rule = format!(
                "in_port=9,ip,nw_dst=10.0.{}.{},actions=drop",
                n / 256,
                n % 256
            );
            tables.add(parse_rule(&rule).unwrap(), Duration::ZERO);
        };
        let mut added = 0;
        for _ in 0..5 {
            for _ in 0..MAX_PRECISE_CHANGES {
                add(&mut tables, added);
                added += 1;
            }
            cache.lookup(&mut tables, &flow(1, 1), 60);
        }
        assert_eq!((cache.stats.misses, cache.stats.flushes), (1, 0));
        for _ in 0..=MAX_PRECISE_CHANGES {
            add(&mut tables, added);
            added += 1;
        }
        cache.lookup(&mut tables, &flow(1, 1), 60);
        assert_eq!((cache.stats.misses, cache.stats.flushes), (2, 1));
    }

    #[test]
    fn a_thrashing_emc_is_probed_less_and_recovers() {
        let mut tables = RuleTables::new();
        tables.add(
            parse_rule("in_port=1,actions=output:2").unwrap(),
            Duration::ZERO,
        );
        let mut cache = FlowCache::new(16, 16);
        // Far more flows than EMC slots, round robin: the EMC never hits.
        for _ in 0..10 {
            for nw_dst in 0..1000 {
                let megaflow = cache.lookup(&mut tables, &flow(1, nw_dst), 60);
                assert_eq!(megaflow.decision.actions, vec![Action::Output(2)]);
            }
        }
        assert!(
            cache.emc_misses_in_row >= EMC_THRASHING,
            "{:?}",
            cache.stats
        );
        // One flow again: a probe finds it entered, and every lookup probes after.
        let before = cache.stats;
        for _ in 0..4 * EMC_THRASHING_EVERY {
            cache.lookup(&mut tables, &flow(1, 5000), 60);
        }
        let emc_hits = cache.stats.emc_hits - before.emc_hits;
        assert!(
            emc_hits >= 2 * u64::from(EMC_THRASHING_EVERY),
            "{emc_hits} EMC hits"
        );
        assert_eq!(cache.emc_misses_in_row, 0);
        assert_eq!(cache.stats.misses, 1, "one megaflow for all");
    }

    /// A rule sending port 1's packets to port 2, and a cache of `capacity` megaflows (no
    /// EMC) that keeps flow records.
    fn recording(capacity: usize) -> (RuleTables, FlowCache) {
        let mut tables = RuleTables::new();
        tables.add(
            parse_rule("in_port=1,actions=output:2").unwrap(),
            Duration::ZERO,
        );
        let mut cache = FlowCache::new(0, capacity);
        cache.keep_flow_records();
        (tables, cache)
    }

    /// With flow records kept, a megaflow is one flow (exact on nw_dst here although the
    /// rule looks at in_port alone), and the counts of megaflows emptied out by a full
    /// cache wait for the exporter: it sees every packet once.
    #[test]
    fn flow_records_see_every_count_across_flushes() {
        let (mut tables, mut cache) = recording(2);
        for nw_dst in 0..5u128 {
            for _ in 0..3 {
                cache.lookup(&mut tables, &flow(1, nw_dst), 60);
            }
        }
        assert!(cache.stats.flushes >= 2, "{:?}", cache.stats);
        let mut seen = Vec::new();
        let lost = cache.take_flow_counts(1, Duration::ZERO, |m, counts| {
            assert_eq!(m.flow_match.field(Field::NwDst).1, 0xffff_ffff);
            let dst = Field::NwDst.get(m.flow_match.value());
            seen.push((dst, counts.packets, counts.bytes));
        });
        seen.sort();
        assert_eq!(lost, 0);
        assert_eq!(seen, (0..5).map(|d| (d, 3, 180)).collect::<Vec<_>>());
        // Taken: nothing new until more packets come.
        cache.take_flow_counts(1, Duration::ZERO, |_, _| panic!("counted twice"));
        cache.lookup(&mut tables, &flow(1, 4), 60);
        let mut again = Vec::new();
        cache.take_flow_counts(1, Duration::ZERO, |_, counts| {
            again.push((counts.packets, counts.bytes))
        });
        assert_eq!(again, [(1, 60)]);
    }

    /// Many megaflows are read a share a call, each once per `rounds` calls.
    #[test]
    fn flow_counts_are_taken_a_share_at_a_time() {
        let (mut tables, mut cache) = recording(100_000);
        let flows = 3 * FLOW_COUNTS_BATCH as u128;
        for nw_dst in 0..flows {
            cache.lookup(&mut tables, &flow(1, nw_dst), 60);
        }
        let mut take = |rounds| {
            let mut n = 0;
            cache.take_flow_counts(rounds, Duration::ZERO, |_, counts| n += counts.packets);
            n
        };
        let half = flows as u64 / 2;
        assert_eq!([take(2), take(2), take(2)], [half, half, 0]);
        // At least a batch a call, however many rounds.
        let mut cache = FlowCache::new(0, 100);
        cache.keep_flow_records();
        for nw_dst in 0..10 {
            cache.lookup(&mut tables, &flow(1, nw_dst), 60);
        }
        let mut n = 0;
        cache.take_flow_counts(50, Duration::ZERO, |_, counts| n += counts.packets);
        assert_eq!(n, 10);
    }

    /// Flows for two batches of flow records, a megaflow each with a packet, the first half
    /// of their counts read (`take`: read the next half).
    const TWO_BATCHES: u128 = 2 * FLOW_COUNTS_BATCH as u128;

    fn half_read() -> (RuleTables, FlowCache) {
        let (mut tables, mut cache) = recording(100_000);
        for nw_dst in 0..TWO_BATCHES {
            cache.lookup(&mut tables, &flow(1, nw_dst), 60);
        }
        assert_eq!(take(&mut cache), TWO_BATCHES as u64 / 2);
        (tables, cache)
    }

    fn take(cache: &mut FlowCache) -> u64 {
        let mut n = 0;
        cache.take_flow_counts(2, Duration::ZERO, |_, counts| n += counts.packets);
        n
    }

    /// A rule change that removes a megaflow moves the last one into its place: past the
    /// share already read, the moved one is read at the next call, not a round late.
    #[test]
    fn a_megaflow_moved_before_the_share_read_is_not_skipped() {
        let (mut tables, mut cache) = half_read();
        let flows = TWO_BATCHES;
        // The second megaflow goes; the last (unread, a packet more) moves to its place.
        tables.add(
            parse_rule("priority=40000,ip,nw_dst=0.0.0.1,actions=drop").unwrap(),
            Duration::ZERO,
        );
        cache.lookup(&mut tables, &flow(1, flows - 1), 60);
        assert_eq!(cache.stats.stale, 1);
        // The rest of the second half, the moved one with its two packets among them.
        assert_eq!(take(&mut cache), flows as u64 / 2 - 1 + 2);
        assert_eq!(take(&mut cache), 0, "read twice");
    }

    /// Two removals before the next read: the megaflow moved by the first goes in the
    /// second, and the one moved into its place is read instead; every count is read once.
    #[test]
    fn moved_megaflows_are_followed_across_removals() {
        let (mut tables, mut cache) = half_read();
        let flows = TWO_BATCHES;
        let drop = |nw_dst: u128| {
            format!(
                "priority=40000,ip,nw_dst=0.0.{}.{},actions=drop",
                nw_dst >> 8,
                nw_dst & 0xff
            )
        };
        // The second megaflow goes and the last moves to its place, a packet more...
        tables.add(parse_rule(&drop(1)).unwrap(), Duration::ZERO);
        cache.lookup(&mut tables, &flow(1, flows - 1), 60);
        // ...then that one goes (its two packets kept for its record) and the one before
        // it moves there, a packet more.
        tables.add(parse_rule(&drop(flows - 1)).unwrap(), Duration::ZERO);
        cache.lookup(&mut tables, &flow(1, flows - 2), 60);
        assert_eq!(cache.stats.stale, 2);
        // The second half's packets, the last two flows' twice.
        assert_eq!(take(&mut cache), flows as u64 / 2 + 2);
        assert_eq!(take(&mut cache), 0, "read twice");
        cache.flush();
        assert_eq!(take(&mut cache), 0);
    }

    #[test]
    fn full_megaflow_cache_flushes_instead_of_growing() {
        let mut tables = RuleTables::new();
        tables.add(
            parse_rule("priority=1,ip,actions=output:2").unwrap(),
            Duration::ZERO,
        );
        tables.add(
            parse_rule("priority=9,in_port=1,actions=output:3").unwrap(),
            Duration::ZERO,
        );
        let mut cache = FlowCache::new(0, 2);
        // in_port is matched exactly: each port is a megaflow of its own.
        for in_port in 0..5u128 {
            cache.lookup(&mut tables, &flow(in_port, 1), 60);
        }
        assert!(cache.megaflows().count() <= 2);
        assert!(cache.stats.flushes >= 2);
    }
}
