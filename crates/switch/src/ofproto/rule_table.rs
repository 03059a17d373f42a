//! The rule tables of a bridge: up to 255 classifiers, the installed rules with their counters,
//! the generation number every change bumps so the caches know to revalidate, and the log
//! of the last changes to single rules, which says what to revalidate
//! ([`crate::dpif::revalidate`]). The groups (`rule_table/groups.rs`), the meters
//! (`meters.rs`) and a bundle's journal of how to take its changes back (`undo.rs`) are
//! the same tables' other parts, in files of their own.

use core::time::Duration;
use std::collections::{BTreeMap, BTreeSet};

use crate::action::Action;
use crate::classifier::{Classifier, RuleId, RuleRank};
use crate::dpif::revalidate::{MAX_PRECISE_CHANGES, RuleChange};
use crate::error::FlowError;
use crate::field::FlowBits;
use crate::flow_match::Match;
use crate::meter::MeterRef;
use crate::ofproto::learned::Learned;
use crate::rule::{Rule, RuleStats, TABLE_COUNT, check_actions};

mod groups;
mod meters;
mod undo;

use groups::InstalledGroup;
use undo::Undo;

/// A rule in a table, with its counters and rank.
#[derive(Clone, Debug)]
pub struct InstalledRule {
    pub rule: Rule,
    pub stats: RuleStats,
    pub rank: RuleRank,
}

/// What a `replace-flows` did, rule by rule.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct Replaced {
    pub added: usize,
    pub changed: usize,
    pub deleted: usize,
    pub kept: usize,
}

/// Which rules a `mod-flows` / `del-flows` applies to.
#[derive(Clone, Copy, Debug, Default)]
pub struct RuleSelector {
    /// None: every table.
    pub table: Option<u8>,
    /// Non-strict: rules at least as specific as this match. Strict: exactly this match.
    pub flow_match: Match,
    /// Some: strict selection (`--strict`), which also requires this priority.
    pub strict_priority: Option<u16>,
    /// Some((value, mask)): only rules whose cookie equals `value` in `mask`'s bits.
    pub cookie: Option<(u64, u64)>,
    /// Some: only rules with an `output` to this port (OpenFlow's `out_port`).
    pub out_port: Option<u32>,
    /// Some: only rules with a `group` action to this group (OpenFlow's `out_group`).
    pub out_group: Option<u32>,
}

impl RuleSelector {
    /// Every rule with a `group` action to group `id` (those its delete takes with it).
    pub fn sending_to_group(id: u32) -> RuleSelector {
        RuleSelector {
            out_group: Some(id),
            ..RuleSelector::default()
        }
    }

    pub fn selects(&self, rule: &Rule) -> bool {
        if self.table.is_some_and(|table| table != rule.table) {
            return false;
        }
        if self
            .cookie
            .is_some_and(|(value, mask)| (rule.cookie ^ value) & mask != 0)
        {
            return false;
        }
        if !rule.outputs_to(self.out_port) {
            return false;
        }
        if let Some(group) = self.out_group
            && !rule.actions.contains(&Action::Group(group))
        {
            return false;
        }
        match self.strict_priority {
            Some(priority) => priority == rule.priority && self.flow_match == rule.flow_match,
            None => self.flow_match.covers(&rule.flow_match),
        }
    }
}

#[derive(Default)]
pub struct RuleTables {
    tables: Vec<Classifier>,
    /// Slots indexed by [`RuleId`]; freed slots are reused.
    rules: Vec<Option<InstalledRule>>,
    free: Vec<u32>,
    next_seq: u64,
    generation: u64,
    /// The change of each generation after `log_since`, while each is one rule's.
    change_log: Vec<RuleChange>,
    log_since: u64,
    /// Every packet is switched as by `normal`, whatever the rules say (a standalone
    /// switch whose controllers are all gone: Open vSwitch's fail-open).
    fail_open: bool,
    groups: BTreeMap<u32, InstalledGroup>,
    meters: BTreeMap<u32, MeterRef>,
    /// Ports whose link is not up, for the groups' buckets that watch them.
    dead_ports: BTreeSet<u32>,
    /// While a bundle commits: how to take back each change made since it began.
    journal: Option<Vec<Undo>>,
    /// Each table's lookups and the packets that found a rule there, as the datapath
    /// credits them (OpenFlow's table statistics).
    lookups: Vec<TableLookups>,
    /// The rules translations learned, for the control side to add.
    pub learned: Learned,
    /// The table and cookie of each `delete_learned` learn a rule held when it went or its
    /// actions changed, since the last look ([`crate::ofproto::learned::delete_learned_flows`]).
    released_learns: Vec<(u8, u64)>,
    /// How many of those there were when the journal began: a roll back takes back the
    /// rest with the changes that noted them.
    released_before_journal: usize,
}

/// A table's statistics: its rules, and what looked it up.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct TableStats {
    pub table: u8,
    pub active: u32,
    pub counts: TableLookups,
}

/// How many packets looked a table up, and how many found a rule.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct TableLookups {
    pub lookups: u64,
    pub matched: u64,
}

/// Notes the table and cookie of each `delete_learned` learn in `actions` (a rule's that
/// goes or changes).
fn note_released_learns(released: &mut Vec<(u8, u64)>, actions: &[Action]) {
    for action in actions {
        if let Action::Learn(id) = action {
            let learn = id.get();
            if learn.delete_learned {
                released.push((learn.table, learn.cookie));
            }
        }
    }
}

impl RuleTables {
    pub fn new() -> RuleTables {
        RuleTables {
            tables: (0..TABLE_COUNT).map(|_| Classifier::default()).collect(),
            lookups: vec![TableLookups::default(); TABLE_COUNT],
            ..RuleTables::default()
        }
    }

    /// Bumped by every change to any table; a cache made at another generation revalidates
    /// ([`RuleTables::changes_since`]).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The changes since `generation`, if the log holds them all (see
    /// [`crate::dpif::revalidate`]).
    pub fn changes_since(&self, generation: u64) -> Option<&[RuleChange]> {
        let from = generation.checked_sub(self.log_since)?;
        self.change_log.get(usize::try_from(from).ok()?..)
    }

    /// A new generation, for a change to one rule.
    fn changed(&mut self, change: RuleChange) {
        self.generation += 1;
        // The log keeps at least the last changes a revalidation tests one by one: a cache
        // older than those is emptied.
        if self.change_log.len() == 2 * MAX_PRECISE_CHANGES {
            self.change_log.drain(..MAX_PRECISE_CHANGES);
            self.log_since += MAX_PRECISE_CHANGES as u64;
        }
        self.change_log.push(change);
    }

    /// A new generation, for a change the log cannot say: every cache made before it is
    /// emptied.
    fn changed_everything(&mut self) {
        self.generation += 1;
        self.change_log.clear();
        self.log_since = self.generation;
    }

    /// Whether the rules are set aside for `normal` switching (see [`RuleTables::set_fail_open`]).
    pub fn fail_open(&self) -> bool {
        self.fail_open
    }

    /// Sets the rules aside (every packet switched by `normal`) or takes them back; a
    /// change is a new generation, so no cache keeps the other behaviour.
    pub fn set_fail_open(&mut self, on: bool) {
        if self.fail_open != on {
            self.fail_open = on;
            self.changed_everything();
        }
    }

    /// Whether a bucket watching `port` may be used: its link is up.
    pub fn is_live(&self, port: u32) -> bool {
        !self.dead_ports.contains(&port)
    }

    /// A port's link went up or down; the flows through groups with a bucket that watches
    /// it are translated again.
    pub fn set_port_live(&mut self, port: u32, live: bool) {
        let changed = match live {
            true => self.dead_ports.remove(&port),
            false => self.dead_ports.insert(port),
        };
        if !changed {
            return;
        }
        let watching: Vec<u32> = self
            .groups()
            .filter(|g| g.buckets.iter().any(|b| b.watch_port == Some(port)))
            .map(|g| g.id)
            .collect();
        for id in watching {
            self.changed(RuleChange::Group(id));
        }
    }

    /// The rule of `table` with exactly this match and priority.
    pub fn find_exact(&self, table: u8, flow_match: &Match, priority: u16) -> Option<RuleId> {
        self.tables[usize::from(table)].find_exact(flow_match, priority)
    }

    /// Zeroes a rule's packet and byte counts (OpenFlow's `RESET_COUNTS`).
    pub fn reset_counts(&mut self, id: RuleId) {
        self.note_changed(id);
        if let Some(Some(installed)) = self.rules.get_mut(id.0 as usize) {
            installed.stats.n_packets = 0;
            installed.stats.n_bytes = 0;
        }
    }

    pub fn len(&self) -> usize {
        self.rules.len() - self.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, id: RuleId) -> Option<&InstalledRule> {
        self.rules.get(id.0 as usize)?.as_ref()
    }

    /// Installs `rule`; like `add-flow`, it replaces a rule with the same table, priority and
    /// match (whose counters are lost).
    pub fn add(&mut self, rule: Rule, now: Duration) -> RuleId {
        let table = &self.tables[usize::from(rule.table)];
        if let Some(id) = table.find_exact(&rule.flow_match, rule.priority) {
            self.remove(id);
        }
        let rank = RuleRank {
            priority: rule.priority,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        let (id, was_free) = match self.free.pop() {
            Some(slot) => (RuleId(slot), true),
            None => {
                self.rules.push(None);
                (RuleId(self.rules.len() as u32 - 1), false)
            }
        };
        self.tables[usize::from(rule.table)].insert(&rule.flow_match, rank, id);
        let added = RuleChange::Added {
            table: rule.table,
            priority: rule.priority,
            flow_match: Box::new(rule.flow_match),
        };
        self.rules[id.0 as usize] = Some(InstalledRule {
            rule,
            stats: RuleStats::new(now),
            rank,
        });
        self.note(Undo::Added { id, was_free });
        self.changed(added);
        id
    }

    /// Removes one rule; None if `id` is not installed.
    pub fn remove(&mut self, id: RuleId) -> Option<InstalledRule> {
        let installed = self.rules.get_mut(id.0 as usize)?.take()?;
        note_released_learns(&mut self.released_learns, &installed.rule.actions);
        let table = usize::from(installed.rule.table);
        self.tables[table].remove(&installed.rule.flow_match, id);
        self.free.push(id.0);
        if self.journaling() {
            self.note(Undo::Removed(id, Box::new(installed.clone())));
        }
        self.changed(RuleChange::Changed(id));
        Some(installed)
    }

    /// `del-flows`: removes the selected rules, returns how many.
    pub fn delete(&mut self, selector: &RuleSelector) -> usize {
        self.delete_taking(selector).len()
    }

    /// Removes the selected rules and hands them back (for OpenFlow's FLOW_REMOVED).
    pub fn delete_taking(&mut self, selector: &RuleSelector) -> Vec<InstalledRule> {
        let ids = self.selected(selector);
        self.remove_all(ids)
    }

    /// Removes the rules `ids` (those still there) and hands them back.
    pub fn remove_all(&mut self, ids: Vec<RuleId>) -> Vec<InstalledRule> {
        ids.into_iter().filter_map(|id| self.remove(id)).collect()
    }

    /// The rules `selector` picks. A strict one (`--strict`, DELETE_STRICT, MODIFY_STRICT)
    /// names at most one rule a table, found by its match as a lookup finds it, not by
    /// reading every rule: a controller's change costs the same with 10 rules or 100,000.
    pub fn selected(&self, selector: &RuleSelector) -> Vec<RuleId> {
        let Some(priority) = selector.strict_priority else {
            return self
                .iter()
                .filter(|(_, installed)| selector.selects(&installed.rule))
                .map(|(id, _)| id)
                .collect();
        };
        self.tables
            .iter()
            .enumerate()
            .filter(|&(table, _)| selector.table.is_none_or(|t| usize::from(t) == table))
            .filter_map(|(_, classifier)| classifier.find_exact(&selector.flow_match, priority))
            .filter(|&id| self.get(id).is_some_and(|i| selector.selects(&i.rule)))
            .collect()
    }

    /// `replace-flows`: the tables hold exactly `rules` afterwards (as ovs-ofctl's
    /// replace-flows leaves them): a rule already there as given is kept with its counters,
    /// one there with other actions, cookie, timeouts or flags is replaced, and a rule the
    /// list does not name (by table, priority and match) is deleted. The counts, and the
    /// rules deleted (for OpenFlow's FLOW_REMOVED).
    pub fn replace_all(
        &mut self,
        rules: Vec<Rule>,
        now: Duration,
    ) -> (Replaced, Vec<InstalledRule>) {
        let named: std::collections::HashSet<RuleId> = rules
            .iter()
            .filter_map(|r| self.find_exact(r.table, &r.flow_match, r.priority))
            .collect();
        let unnamed: Vec<RuleId> = self
            .iter()
            .map(|(id, _)| id)
            .filter(|id| !named.contains(id))
            .collect();
        let mut counts = Replaced {
            deleted: unnamed.len(),
            ..Replaced::default()
        };
        let deleted = unnamed
            .into_iter()
            .filter_map(|id| self.remove(id))
            .collect();
        for rule in rules {
            match self.find_exact(rule.table, &rule.flow_match, rule.priority) {
                Some(id) if self.get(id).is_some_and(|r| r.rule == rule) => counts.kept += 1,
                Some(_) => {
                    self.add(rule, now);
                    counts.changed += 1;
                }
                None => {
                    self.add(rule, now);
                    counts.added += 1;
                }
            }
        }
        (counts, deleted)
    }

    /// `diff-flows`: how the tables differ from `rules` (by table, priority and match, then
    /// by what a rule holds): the rules only the tables have or hold otherwise, best first,
    /// and the rules of `rules` they lack or hold otherwise, in `rules`' order.
    pub fn diff<'a>(&'a self, rules: &'a [Rule]) -> (Vec<&'a Rule>, Vec<&'a Rule>) {
        let mut same = std::collections::HashSet::new();
        let mut wanted = Vec::new();
        for rule in rules {
            match self.find_exact(rule.table, &rule.flow_match, rule.priority) {
                Some(id) if self.get(id).is_some_and(|r| r.rule == *rule) => {
                    same.insert(id);
                }
                _ => wanted.push(rule),
            }
        }
        let extra = self
            .dump_order()
            .into_iter()
            .filter(|installed| {
                let id = self.find_exact(
                    installed.rule.table,
                    &installed.rule.flow_match,
                    installed.rule.priority,
                );
                !id.is_some_and(|id| same.contains(&id))
            })
            .map(|installed| &installed.rule)
            .collect();
        (extra, wanted)
    }

    /// `mod-flows`: replaces the actions (and the cookie, when given) of the selected rules,
    /// keeping their counters; returns how many. All or nothing: the actions must be valid in
    /// every selected rule's table (`goto_table` goes forward from it), or nothing changes.
    pub fn modify(
        &mut self,
        selector: &RuleSelector,
        actions: &[Action],
        new_cookie: Option<u64>,
    ) -> Result<usize, FlowError> {
        let selected = self.selected(selector);
        for installed in selected.iter().filter_map(|&id| self.get(id)) {
            let mut changed = installed.rule.clone();
            changed.actions = actions.to_vec();
            check_actions(&changed)?;
        }
        if self.journaling() {
            for &id in &selected {
                self.note_changed(id);
            }
        }
        for &id in &selected {
            let Some(Some(installed)) = self.rules.get_mut(id.0 as usize) else {
                continue;
            };
            note_released_learns(&mut self.released_learns, &installed.rule.actions);
            installed.rule.actions = actions.to_vec();
            if let Some(cookie) = new_cookie {
                installed.rule.cookie = cookie;
            }
            self.changed(RuleChange::Changed(id));
        }
        Ok(selected.len())
    }

    /// Replaces one rule's actions and cookie, keeping its counters, timeouts and flags (what
    /// a `learn` does to the rule it learned before with other actions: Open vSwitch's
    /// MODIFY_STRICT).
    pub fn modify_actions(&mut self, id: RuleId, actions: Vec<Action>, cookie: u64) {
        self.note_changed(id);
        if let Some(installed) = self.rules.get_mut(id.0 as usize).and_then(Option::as_mut) {
            note_released_learns(&mut self.released_learns, &installed.rule.actions);
            installed.rule.actions = actions;
            installed.rule.cookie = cookie;
            self.changed(RuleChange::Changed(id));
        }
    }

    /// The table and cookie of each `delete_learned` learn a rule held when it went or its
    /// actions changed since the last call (some other rule may hold one still).
    pub fn take_released_learns(&mut self) -> Vec<(u8, u64)> {
        std::mem::take(&mut self.released_learns)
    }

    /// Whether [`RuleTables::take_released_learns`] has any to give.
    pub fn has_released_learns(&self) -> bool {
        !self.released_learns.is_empty()
    }

    /// Restarts a rule's hard timeout at `now` (a `learn` learned it again). What the
    /// datapath does with it is the same, so the generation stays.
    pub fn restart_hard_timeout(&mut self, id: RuleId, now: Duration) {
        if let Some(installed) = self.rules.get_mut(id.0 as usize).and_then(Option::as_mut) {
            installed.stats.modified_at = installed.stats.modified_at.max(now);
        }
    }

    /// Removes the rules whose idle or hard timeout has passed at `now`; how many.
    pub fn expire(&mut self, now: Duration) -> usize {
        self.expire_taking(now).len()
    }

    /// Removes the rules whose idle or hard timeout has passed at `now` and hands them back.
    pub fn expire_taking(&mut self, now: Duration) -> Vec<InstalledRule> {
        let ids: Vec<RuleId> = self
            .iter()
            .filter(|(_, installed)| installed.rule.is_expired(&installed.stats, now))
            .map(|(id, _)| id)
            .collect();
        ids.into_iter().filter_map(|id| self.remove(id)).collect()
    }

    /// Whether any rule's expiry depends on when packets came: an idle timeout, or a hard
    /// timeout a `learn` that packets take restarts.
    pub fn has_timeouts(&self) -> bool {
        self.iter().any(|(_, installed)| {
            installed.rule.idle_timeout != 0 || installed.rule.hard_timeout != 0
        })
    }

    /// Whether [`RuleTables::expire`] would remove a rule at `now`.
    pub fn any_expired(&self, now: Duration) -> bool {
        self.iter()
            .any(|(_, installed)| installed.rule.is_expired(&installed.stats, now))
    }

    /// Every installed rule, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (RuleId, &InstalledRule)> {
        self.rules
            .iter()
            .enumerate()
            .filter_map(|(slot, rule)| Some((RuleId(slot as u32), rule.as_ref()?)))
    }

    /// The rules in `dump-flows` order: by table, then best first.
    pub fn dump_order(&self) -> Vec<&InstalledRule> {
        let mut rules: Vec<&InstalledRule> = self.iter().map(|(_, rule)| rule).collect();
        rules.sort_by(|a, b| {
            (
                a.rule.table,
                core::cmp::Reverse(a.rank.priority),
                a.rank.seq,
            )
                .cmp(&(
                    b.rule.table,
                    core::cmp::Reverse(b.rank.priority),
                    b.rank.seq,
                ))
        });
        rules
    }

    /// The best rule of `table` for `flow`; see [`Classifier::lookup`] for `wildcards`.
    pub fn lookup(&self, table: u8, flow: &FlowBits, wildcards: &mut FlowBits) -> Option<RuleId> {
        self.tables[usize::from(table)].lookup(flow, wildcards)
    }

    /// Counts one packet of `bytes` against the rule (a no-op for a rule no longer installed).
    pub fn credit(&mut self, id: RuleId, bytes: usize, now: Duration) {
        self.note_changed(id);
        if let Some(Some(installed)) = self.rules.get_mut(id.0 as usize) {
            installed.stats.credit(bytes, now);
        }
    }

    /// Counts `packets` lookups of `table`, that found a rule or not.
    pub fn count_lookups(&mut self, table: u8, packets: u64, matched: bool) {
        if let Some(counts) = self.lookups.get_mut(usize::from(table)) {
            counts.lookups += packets;
            if matched {
                counts.matched += packets;
            }
        }
    }

    /// Each table's rules, lookups and matches, table 0 first (OpenFlow's table statistics).
    pub fn table_stats(&self) -> Vec<TableStats> {
        let mut stats: Vec<TableStats> = (0..TABLE_COUNT)
            .map(|t| TableStats {
                table: t as u8,
                active: 0,
                counts: self.lookups[t],
            })
            .collect();
        for installed in self.rules.iter().flatten() {
            stats[usize::from(installed.rule.table)].active += 1;
        }
        stats
    }

    /// Counts `packets` packets of `bytes` in all against the rule (as `credit`).
    pub fn credit_many(&mut self, id: RuleId, packets: u64, bytes: u64, now: Duration) {
        self.note_changed(id);
        if let Some(Some(installed)) = self.rules.get_mut(id.0 as usize) {
            installed.stats.credit_many(packets, bytes, now);
        }
    }

    /// Number of distinct masks in a table (how many hash probes a lookup may take).
    pub fn subtable_count(&self, table: u8) -> usize {
        self.tables[usize::from(table)].subtable_count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::{
        BucketsTaken, Counts, GroupCounts, GroupError, GroupUsage, GroupVisit, MAX_GROUPS,
    };
    use crate::ofctl::flow_parse::{parse_match, parse_rule};

    fn tables(rules: &[&str]) -> RuleTables {
        let mut tables = RuleTables::new();
        for text in rules {
            tables.add(parse_rule(text).unwrap(), Duration::ZERO);
        }
        tables
    }

    fn selector(text: &str, strict_priority: Option<u16>) -> RuleSelector {
        let spec = parse_match(text).unwrap();
        RuleSelector {
            table: spec.table,
            flow_match: spec.flow_match,
            strict_priority,
            cookie: None,
            out_port: None,
            out_group: None,
        }
    }

    /// A strict selector's rules, found by lookup, are those a scan of every rule picks.
    #[test]
    fn strict_selection_finds_what_a_scan_finds() {
        let tables = tables(&[
            "priority=5,ip,nw_dst=10.0.0.1,actions=output:1",
            "table=1,priority=5,ip,nw_dst=10.0.0.1,cookie=0x7,actions=output:2",
            "table=1,priority=6,ip,nw_dst=10.0.0.1,actions=drop",
            "priority=5,ip,nw_dst=10.0.0.0/24,actions=drop",
        ]);
        let scan = |selector: &RuleSelector| -> Vec<RuleId> {
            let mut ids: Vec<RuleId> = tables
                .iter()
                .filter(|(_, installed)| selector.selects(&installed.rule))
                .map(|(id, _)| id)
                .collect();
            ids.sort_by_key(|id| id.0);
            ids
        };
        let mut cases = Vec::new();
        for text in [
            "ip,nw_dst=10.0.0.1",
            "table=1,ip,nw_dst=10.0.0.1",
            "ip,nw_dst=10.0.0.0/24",
        ] {
            for priority in [5, 6, 7] {
                cases.push(selector(text, Some(priority)));
            }
        }
        let mut by_cookie = selector("ip,nw_dst=10.0.0.1", Some(5));
        by_cookie.cookie = Some((0x7, u64::MAX));
        let mut by_port = selector("ip,nw_dst=10.0.0.1", Some(5));
        by_port.out_port = Some(2);
        cases.extend([by_cookie, by_port]);
        let mut found = 0;
        for case in &cases {
            let mut ids = tables.selected(case);
            ids.sort_by_key(|id| id.0);
            assert_eq!(ids, scan(case), "{case:?}");
            found += ids.len();
        }
        assert_eq!(found, 8);
    }

    /// A group's changes are logged for precise revalidation: its own, the rules a delete
    /// takes with it, and a port's liveness for each group with a bucket watching it.
    #[test]
    fn group_changes_are_logged_one_by_one() {
        let mut tables = tables(&["in_port=1,actions=group:1", "in_port=2,actions=output:2"]);
        let add = |tables: &mut RuleTables, text: &str| {
            let group = crate::ofctl::group_text::parse_group(text).unwrap();
            tables.set_group(group, false, Duration::ZERO).unwrap();
        };
        let generation = tables.generation();
        add(&mut tables, "group_id=1,type=all,bucket=output:3");
        add(
            &mut tables,
            "group_id=2,type=fast_failover,bucket=watch_port:3,output:3,\
             bucket=watch_port:4,output:4",
        );
        add(
            &mut tables,
            "group_id=3,type=select,bucket=output:4,bucket=watch_port:5,output:5",
        );
        tables.set_port_live(4, false);
        tables.set_port_live(4, false);
        tables.set_port_live(5, false);
        tables.set_port_live(6, false);
        let first_rule = tables.iter().next().unwrap().0;
        assert_eq!(tables.delete_groups(Some(1)).len(), 1);
        assert_eq!(
            tables.changes_since(generation).unwrap(),
            [1, 2, 3, 2, 3, 1]
                .map(RuleChange::Group)
                .into_iter()
                .chain([RuleChange::Changed(first_rule)])
                .collect::<Vec<_>>()
        );
    }

    /// A meter's changes are logged as its own, and the rules its delete takes as theirs.
    #[test]
    fn meter_changes_are_logged_one_by_one() {
        let mut tables = tables(&["in_port=2,actions=output:2"]);
        let meter = |text| crate::ofctl::meter_text::parse_meter(text).unwrap();
        tables
            .set_meter(
                meter("meter=5,pktps,bands=type=drop,rate=10"),
                false,
                Duration::ZERO,
            )
            .unwrap();
        let metered = tables.add(
            parse_rule("in_port=1,actions=meter:5,output:2").unwrap(),
            Duration::ZERO,
        );
        let generation = tables.generation();
        tables
            .set_meter(
                meter("meter=5,pktps,bands=type=drop,rate=20"),
                true,
                Duration::ZERO,
            )
            .unwrap();
        assert_eq!(tables.delete_meters(Some(5)).len(), 1);
        assert_eq!(
            tables.changes_since(generation).unwrap(),
            [
                RuleChange::Meter(5),
                RuleChange::Meter(5),
                RuleChange::Changed(metered)
            ]
        );
    }

    #[test]
    fn groups_are_added_once_modified_if_known_and_bounded() {
        let mut tables = tables(&["in_port=1,actions=group:1", "in_port=2,actions=group:1"]);
        let group = |id: u32| {
            crate::ofctl::group_text::parse_group(&format!(
                "group_id={id},type=all,bucket=output:3"
            ))
            .unwrap()
        };
        let generation = tables.generation();
        assert_eq!(
            tables.set_group(group(1), true, Duration::ZERO),
            Err(GroupError::Unknown)
        );
        assert_eq!(tables.generation(), generation, "a refusal changes nothing");
        let (added, modified) = (Duration::from_secs(1), Duration::from_secs(5));
        assert_eq!(tables.set_group(group(1), false, added), Ok(()));
        assert_eq!(
            tables.set_group(group(1), false, modified),
            Err(GroupError::Exists)
        );
        let visit = GroupVisit {
            group: 1,
            taken: BucketsTaken::Every,
        };
        tables.credit_group(visit, 3, 294);
        let six = Duration::from_secs(6);
        assert_eq!(tables.group_usage(1, six).counts.total.packets, 3);
        assert_eq!(tables.set_group(group(1), true, modified), Ok(()));
        let usage = tables.group_usage(1, six);
        assert_eq!(
            usage.age,
            Duration::from_secs(5),
            "a modify keeps the group's age"
        );
        assert_eq!(
            usage.counts,
            GroupCounts::new(1),
            "and starts its counts anew"
        );
        assert_eq!(tables.generation(), generation + 2);
        tables.credit_group(visit, 3, 294);
        tables.credit_group(GroupVisit { group: 9, ..visit }, 1, 60);
        let three = Counts {
            packets: 3,
            bytes: 294,
        };
        assert_eq!(
            tables.group_usage(1, six),
            GroupUsage {
                rules: 2,
                counts: GroupCounts {
                    total: three,
                    buckets: vec![three]
                },
                age: Duration::from_secs(5),
            }
        );
        assert_eq!(
            tables.group_usage(9, six),
            GroupUsage {
                rules: 0,
                ..GroupUsage::default()
            },
            "no such group, nothing credited"
        );
        for id in 2..MAX_GROUPS as u32 + 1 {
            tables.set_group(group(id), false, Duration::ZERO).unwrap();
        }
        assert_eq!(
            tables.set_group(group(MAX_GROUPS as u32 + 1), false, Duration::ZERO),
            Err(GroupError::TooMany)
        );
        assert_eq!(
            tables.delete_groups(Some(1)).len(),
            2,
            "its rules go with it"
        );
        assert_eq!(tables.delete_groups(None).len(), 0);
        assert_eq!(tables.groups().count(), 0);
    }

    /// Every group deleted takes the rules sending to any of them, in one pass, and those
    /// alone; each rule counts once a group it sends to, as group_usage counts it.
    #[test]
    fn deleting_every_group_takes_the_rules_that_send_to_them() {
        let mut tables = tables(&[
            "in_port=1,actions=group:1,group:1",
            "in_port=2,actions=group:2,output:1",
            "in_port=3,actions=group:9",
            "in_port=4,actions=output:2",
        ]);
        for id in [1, 2] {
            let text = format!("group_id={id},type=all,bucket=output:3");
            let group = crate::ofctl::group_text::parse_group(&text).unwrap();
            tables.set_group(group, false, Duration::ZERO).unwrap();
        }
        let references = tables.group_references();
        assert_eq!(references, [(1, 1), (2, 1), (9, 1)].into_iter().collect());
        assert_eq!(tables.group_usage(1, Duration::ZERO).rules, 1);
        let generation = tables.generation();
        let gone = tables.delete_groups(None);
        let ports: Vec<u128> = gone
            .iter()
            .filter_map(|r| r.rule.flow_match.exact(crate::field::Field::InPort))
            .collect();
        assert_eq!(ports, [1, 2], "group 9 is no group: its rule stays");
        assert_eq!((tables.len(), tables.groups().count()), (2, 0));
        let changes = tables.changes_since(generation).unwrap();
        assert!(changes.contains(&RuleChange::Group(1)) && changes.contains(&RuleChange::Group(2)));
    }

    /// Everything a rollback must put back: each slot's rule, counts and rank, the groups
    /// and their ages, and what a lookup finds.
    fn snapshot(tables: &RuleTables) -> String {
        let mut text = format!("{} rules, {} free\n", tables.len(), tables.free.len());
        for (id, installed) in tables.iter() {
            text += &format!("{id:?} {installed:?}\n");
        }
        for (id, entry) in &tables.groups {
            text += &format!("group {id} {entry:?}\n");
        }
        for port in 1..4u128 {
            let mut flow = FlowBits::ZERO;
            crate::field::Field::InPort.set(&mut flow, port);
            let mut wildcards = FlowBits::ZERO;
            text += &format!(
                "in_port={port} -> {:?}\n",
                tables.lookup(0, &flow, &mut wildcards)
            );
        }
        text
    }

    #[test]
    fn a_rollback_takes_back_every_change_a_bundle_can_make() {
        let mut tables = tables(&[
            "priority=5,in_port=1,actions=output:2",
            "priority=5,in_port=2,actions=group:1",
            "priority=1,actions=drop",
        ]);
        let group = |id: u32, port: u32| {
            crate::ofctl::group_text::parse_group(&format!(
                "group_id={id},type=all,bucket=output:{port}"
            ))
            .unwrap()
        };
        let second = Duration::from_secs(1);
        tables.set_group(group(1, 3), false, second).unwrap();
        tables.set_group(group(2, 3), false, second).unwrap();
        let first = tables.iter().next().map(|(id, _)| id).unwrap();
        tables.credit_many(first, 3, 180, second);
        let visit = GroupVisit {
            group: 1,
            taken: BucketsTaken::One(0),
        };
        tables.credit_group(visit, 3, 180);
        let before = snapshot(&tables);

        tables.begin_undo();
        let now = Duration::from_secs(9);
        // A rule replaced (its counts gone), one added, one modified, one counted and
        // reset, some deleted, a group changed, one added and one deleted with its rule.
        tables.add(
            parse_rule("priority=5,in_port=1,actions=output:3").unwrap(),
            now,
        );
        tables.add(
            parse_rule("priority=7,in_port=3,actions=output:1").unwrap(),
            now,
        );
        tables
            .modify(&selector("in_port=3", None), &[Action::Output(2)], Some(7))
            .unwrap();
        let id = tables.find_exact(0, &parse_match("in_port=3").unwrap().flow_match, 7);
        tables.credit_many(id.unwrap(), 5, 300, now);
        tables.reset_counts(id.unwrap());
        tables.set_group(group(1, 1), true, now).unwrap();
        tables.set_group(group(3, 2), false, now).unwrap();
        assert_eq!(tables.delete_groups(Some(1)).len(), 1);
        assert_eq!(tables.delete(&selector("priority=1", Some(1))), 1);
        assert_ne!(snapshot(&tables), before);
        tables.roll_back();
        assert_eq!(snapshot(&tables), before);

        // Changes after a rollback, and kept ones, are no longer taken back.
        tables.begin_undo();
        tables.add(
            parse_rule("priority=9,in_port=3,actions=drop").unwrap(),
            now,
        );
        tables.keep();
        tables.roll_back();
        assert_eq!(tables.len(), 4, "kept");
    }

    #[test]
    fn replace_all_keeps_what_is_the_same_and_counts_each_change() {
        let mut tables = tables(&[
            "priority=5,in_port=1,actions=output:2",
            "priority=5,in_port=2,actions=output:1",
            "priority=1,actions=drop",
        ]);
        let same = tables
            .find_exact(0, &parse_match("in_port=1").unwrap().flow_match, 5)
            .unwrap();
        tables.credit_many(same, 3, 180, Duration::ZERO);
        let rules = [
            "priority=5,in_port=1,actions=output:2",
            "priority=5,in_port=2,actions=output:3",
            "priority=9,icmp,actions=drop",
            "table=1,priority=9,actions=drop",
        ]
        .map(|text| parse_rule(text).unwrap());
        let (counts, deleted) = tables.replace_all(rules.to_vec(), Duration::from_secs(1));
        assert_eq!(
            counts,
            Replaced {
                added: 2,
                changed: 1,
                deleted: 1,
                kept: 1
            }
        );
        assert_eq!(deleted.len(), 1);
        let now: Vec<&Rule> = tables.dump_order().iter().map(|r| &r.rule).collect();
        assert_eq!(now.len(), 4);
        assert!(rules.iter().all(|r| now.contains(&r)), "{now:?}");
        assert_eq!(
            tables.get(same).unwrap().stats.n_packets,
            3,
            "kept, with its counts"
        );
        let (again, _) = tables.replace_all(rules.to_vec(), Duration::from_secs(2));
        assert_eq!(again.kept, 4, "{again:?}");
    }

    #[test]
    fn diff_names_what_each_side_lacks_or_holds_otherwise() {
        let tables = tables(&[
            "priority=5,in_port=1,actions=output:2",
            "priority=5,in_port=2,actions=output:1",
            "priority=1,actions=drop",
        ]);
        let rules = [
            "priority=5,in_port=1,actions=output:2",
            "priority=5,in_port=2,actions=output:3",
            "priority=9,icmp,actions=drop",
        ]
        .map(|text| parse_rule(text).unwrap());
        let (extra, wanted) = tables.diff(&rules);
        let text = |rules: Vec<&Rule>| -> Vec<String> {
            rules
                .iter()
                .map(|r| crate::RuleDisplay(r).to_string())
                .collect()
        };
        assert_eq!(
            text(extra),
            [
                "table=0,priority=5,in_port=2,actions=output:1",
                "table=0,priority=1,actions=drop"
            ]
        );
        assert_eq!(
            text(wanted),
            [
                "table=0,priority=5,in_port=2,actions=output:3",
                "table=0,priority=9,icmp,actions=drop"
            ]
        );
        let all: Vec<Rule> = tables.iter().map(|(_, r)| r.rule.clone()).collect();
        let (extra, wanted) = tables.diff(&all);
        assert!(extra.is_empty() && wanted.is_empty());
    }

    #[test]
    fn add_replaces_identical_and_bumps_generation() {
        let mut tables = tables(&["priority=5,in_port=1,actions=output:2"]);
        let generation = tables.generation();
        let id = tables.add(
            parse_rule("priority=5,in_port=1,actions=output:3").unwrap(),
            Duration::ZERO,
        );
        assert_eq!(tables.len(), 1);
        assert_eq!(
            tables.get(id).unwrap().rule.actions,
            vec![Action::Output(3)]
        );
        assert!(tables.generation() > generation);
    }

    #[test]
    fn delete_non_strict_and_strict() {
        let mut tables = tables(&[
            "priority=5,tcp,tp_dst=80,actions=drop",
            "priority=6,tcp,actions=drop",
            "priority=7,udp,actions=drop",
            "table=1,priority=5,tcp,actions=drop",
        ]);
        assert_eq!(tables.delete(&selector("tcp", Some(4))), 0);
        assert_eq!(tables.delete(&selector("table=0,tcp", None)), 2);
        assert_eq!(tables.len(), 2);
        assert_eq!(tables.delete(&selector("tcp", Some(5))), 1);
        assert_eq!(tables.delete(&selector("", None)), 1);
        assert!(tables.is_empty());
    }

    #[test]
    fn cookie_selects_in_its_mask() {
        let mut tables = tables(&[
            "cookie=0x15,priority=1,actions=drop",
            "cookie=0x25,priority=2,actions=drop",
            "cookie=0x5,priority=3,actions=drop",
        ]);
        let by_cookie = |value, mask| RuleSelector {
            cookie: Some((value, mask)),
            ..selector("", None)
        };
        assert_eq!(tables.delete(&by_cookie(0x5, u64::MAX)), 1);
        assert_eq!(
            tables.modify(&by_cookie(0x10, 0xf0), &[Action::Normal], Some(0x99)),
            Ok(1)
        );
        let cookies: Vec<(u64, Vec<Action>)> = tables
            .dump_order()
            .iter()
            .map(|r| (r.rule.cookie, r.rule.actions.clone()))
            .collect();
        assert_eq!(cookies, vec![(0x25, vec![]), (0x99, vec![Action::Normal])]);
        assert_eq!(tables.delete(&by_cookie(0, 0)), 2);
    }

    /// mod-flows without table= reaches every table; goto_table must still go forward from each
    /// rule it changes, or nothing changes.
    #[test]
    fn modify_checks_goto_against_each_rules_table() {
        let mut tables = tables(&["table=3,ip,actions=drop", "table=0,ip,actions=drop"]);
        let generation = tables.generation();
        assert_eq!(
            tables
                .modify(&selector("ip", None), &[Action::GotoTable(1)], None)
                .unwrap_err()
                .0,
            "goto_table:1: must go to a later table than this rule's table 3"
        );
        assert_eq!(tables.generation(), generation);
        assert!(tables.iter().all(|(_, r)| r.rule.actions.is_empty()));
        assert_eq!(
            tables.modify(&selector("ip", None), &[Action::GotoTable(4)], None),
            Ok(2)
        );
    }

    #[test]
    fn modify_keeps_counters() {
        let mut tables = tables(&["priority=5,in_port=1,actions=output:2"]);
        let (id, _) = tables.iter().next().unwrap();
        tables.credit(id, 100, Duration::from_secs(1));
        assert_eq!(
            tables.modify(&selector("in_port=1", None), &[Action::Flood], None),
            Ok(1)
        );
        let installed = tables.get(id).unwrap();
        assert_eq!(installed.rule.actions, vec![Action::Flood]);
        assert_eq!(
            (installed.stats.n_packets, installed.stats.n_bytes),
            (1, 100)
        );
    }

    #[test]
    fn expire_removes_timed_out_rules() {
        let mut tables = tables(&[
            "priority=1,hard_timeout=10,actions=drop",
            "priority=2,idle_timeout=5,actions=drop",
            "priority=3,actions=NORMAL",
        ]);
        assert_eq!(tables.expire(Duration::from_secs(4)), 0);
        assert_eq!(tables.expire(Duration::from_secs(5)), 1);
        assert_eq!(tables.expire(Duration::from_secs(10)), 1);
        assert_eq!(tables.len(), 1);
    }

    #[test]
    fn dump_order_is_table_then_priority() {
        let tables = tables(&[
            "table=1,priority=9,actions=drop",
            "priority=1,actions=drop",
            "priority=8,actions=drop",
        ]);
        let lines = crate::ofctl::flow_format::dump_flows(
            &tables,
            &RuleSelector::default(),
            Duration::from_secs(2),
        );
        assert_eq!(
            lines[0],
            "cookie=0x0, duration=2.000s, table=0, n_packets=0, n_bytes=0, priority=8 actions=drop"
        );
        let order: Vec<(u8, u16)> = tables
            .dump_order()
            .iter()
            .map(|r| (r.rule.table, r.rule.priority))
            .collect();
        assert_eq!(order, vec![(0, 8), (0, 1), (1, 9)]);
    }
}
