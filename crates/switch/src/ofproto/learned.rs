//! The rules `learn` actions built, between the translation that built them and the tables.
//!
//! A translation runs on a poll-mode thread in the middle of a round, while the other
//! threads' caches hold counts for the rules as they are. Adding a rule there would empty
//! those caches without crediting their counts; so the tables keep what was learned, and the
//! control side adds it between rounds ([`crate::bridge::Bridge::edit`]), as any change.
//!
//! As in Open vSwitch, a rule is learned again while packets take the learning path: the
//! cached decision keeps what it learned, and each harvest of a megaflow that had packets
//! learns it again, which restarts the learned rule's hard timeout.

use core::time::Duration;
use std::collections::HashMap;

use crate::classifier::RuleId;
use crate::flow_match::Match;
use crate::ofproto::rule_table::RuleTables;
use crate::rule::Rule;

/// Distinct learned rules kept at most between two of the control side's visits.
pub const MAX_PENDING: usize = 4096;

/// Where a rule goes: the tables hold one rule a table, priority and match.
type Place = (u8, u16, Match);

fn place(rule: &Rule) -> Place {
    (rule.table, rule.priority, rule.flow_match)
}

/// The learned rules waiting for the control side: the last learned of each place.
#[derive(Default, Debug)]
pub struct Learned {
    pending: HashMap<Place, Rule>,
    /// Learned rules dropped because [`MAX_PENDING`] places were waiting.
    pub dropped: u64,
    /// A rule was dropped: the megaflows that learned it still hold it, so a harvest soon
    /// learns it again.
    harvest_soon: bool,
    /// A learned rule with a hard timeout was seen: harvests must learn again.
    pub any_hard_timeouts: bool,
}

impl Learned {
    /// Keeps `rules` (a translation's, or a harvested megaflow's learned again), each
    /// replacing what was waiting for its place. Cheap: a translation calls it under the
    /// lock the poll-mode threads share.
    pub fn push(&mut self, rules: &[Rule]) {
        for rule in rules {
            self.any_hard_timeouts |= rule.hard_timeout != 0;
            let place = place(rule);
            if self.pending.len() < MAX_PENDING || self.pending.contains_key(&place) {
                self.pending.insert(place, rule.clone());
            } else {
                self.dropped += 1;
                self.harvest_soon = true;
            }
        }
    }

    pub fn is_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Whether a rule was dropped since the last call: the caches should be harvested.
    pub fn take_harvest_soon(&mut self) -> bool {
        std::mem::take(&mut self.harvest_soon)
    }
}

/// What the tables do with one learned rule.
enum Fate {
    /// The same rule is there: its hard timeout restarts.
    Again(RuleId),
    /// One with the same table, priority and match has other actions or cookie: they are
    /// replaced, its counters, timeouts and flags kept (Open vSwitch's MODIFY_STRICT), and
    /// its hard timeout restarts.
    Modify(RuleId),
    /// None is there.
    Add,
}

fn fate(tables: &RuleTables, rule: &Rule) -> Fate {
    let Some(id) = tables.find_exact(rule.table, &rule.flow_match, rule.priority) else {
        return Fate::Add;
    };
    match tables.get(id) {
        Some(installed)
            if installed.rule.actions == rule.actions && installed.rule.cookie == rule.cookie =>
        {
            Fate::Again(id)
        }
        Some(_) => Fate::Modify(id),
        None => Fate::Add,
    }
}

/// Restarts at `now` the hard timeouts of the waiting rules the tables hold already, and
/// keeps waiting only those that change the tables; whether there are any (the control side
/// then adds them with every cache locked, [`add_learned`]). Learning a rule again thus
/// empties no cache.
pub fn learn_again(tables: &mut RuleTables, now: Duration) -> bool {
    let mut pending = std::mem::take(&mut tables.learned.pending);
    pending.retain(|_, rule| match fate(tables, rule) {
        Fate::Again(id) => {
            tables.restart_hard_timeout(id, now);
            false
        }
        _ => true,
    });
    tables.learned.pending = pending;
    tables.learned.is_pending()
}

/// The waiting rules, taken.
pub fn take_pending(tables: &mut RuleTables) -> Vec<Rule> {
    std::mem::take(&mut tables.learned.pending)
        .into_values()
        .collect()
}

/// Puts learned `rules` (one a place) in the tables at `now`; how many changed them.
pub fn add_learned(tables: &mut RuleTables, rules: Vec<Rule>, now: Duration) -> usize {
    let mut changed = 0;
    for rule in rules {
        match fate(tables, &rule) {
            Fate::Again(id) => tables.restart_hard_timeout(id, now),
            Fate::Modify(id) => {
                tables.modify_actions(id, rule.actions, rule.cookie);
                tables.restart_hard_timeout(id, now);
                changed += 1;
            }
            Fate::Add => {
                tables.add(rule, now);
                changed += 1;
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ofctl::flow_parse::parse_rule;

    const SECOND: Duration = Duration::from_secs(1);

    fn add_pending(tables: &mut RuleTables, now: Duration) -> usize {
        let rules = take_pending(tables);
        add_learned(tables, rules, now)
    }

    #[test]
    fn adds_each_rule_once_and_learning_it_again_restarts_its_hard_timeout() {
        let mut tables = RuleTables::new();
        let text = "table=10,hard_timeout=5,dl_dst=0a:00:00:00:00:01,actions=output:1";
        let rule = parse_rule(text).unwrap();
        tables.learned.push(&[rule.clone(), rule.clone()]);
        assert!(learn_again(&mut tables, Duration::ZERO));
        assert_eq!(add_pending(&mut tables, Duration::ZERO), 1);
        assert!(tables.has_learned_hard_timeouts());
        let generation = tables.generation();
        tables.learned.push(std::slice::from_ref(&rule));
        assert!(
            !learn_again(&mut tables, 4 * SECOND),
            "nothing changes the tables"
        );
        assert_eq!(
            tables.generation(),
            generation,
            "relearning empties no cache"
        );
        assert!(
            !tables.any_expired(8 * SECOND),
            "the hard timeout restarted at 4 s"
        );
        assert!(tables.any_expired(9 * SECOND));
        assert_eq!(tables.len(), 1);
    }

    #[test]
    fn other_actions_replace_the_learned_rules_keeping_its_counts_and_timeouts() {
        let mut tables = RuleTables::new();
        let text = "table=10,hard_timeout=10,dl_dst=0a:00:00:00:00:01,actions=output:1";
        let id = tables.add(parse_rule(text).unwrap(), Duration::ZERO);
        tables.credit_many(id, 3, 180, SECOND);
        let moved = parse_rule(&text.replace("output:1", "output:2")).unwrap();
        let other = parse_rule(&text.replace("output:1", "output:3")).unwrap();
        // The last learned for the place is the one that counts.
        tables.learned.push(&[other, moved.clone()]);
        assert!(learn_again(&mut tables, 9 * SECOND));
        let generation = tables.generation();
        assert_eq!(add_pending(&mut tables, 9 * SECOND), 1);
        assert!(tables.generation() > generation);
        let installed = tables.get(id).unwrap();
        assert_eq!(installed.rule, moved);
        assert_eq!(
            (installed.stats.n_packets, installed.stats.n_bytes),
            (3, 180)
        );
        assert!(!tables.any_expired(11 * SECOND), "restarted at 9 s");
        assert!(tables.any_expired(19 * SECOND));
        assert!(!tables.learned.is_pending());
    }

    #[test]
    fn the_last_learned_wins_over_an_older_one_that_would_only_restart() {
        let mut tables = RuleTables::new();
        let installed = parse_rule("table=10,dl_dst=0a:00:00:00:00:01,actions=output:1").unwrap();
        let id = tables.add(installed.clone(), Duration::ZERO);
        let moved = parse_rule("table=10,dl_dst=0a:00:00:00:00:01,actions=output:2").unwrap();
        tables.learned.push(&[moved, installed.clone()]);
        assert!(!learn_again(&mut tables, SECOND), "the rule as it is");
        assert_eq!(tables.get(id).unwrap().rule, installed);
    }

    #[test]
    fn the_queue_holds_distinct_places_and_asks_for_a_harvest_when_full() {
        let mut tables = RuleTables::new();
        let rules: Vec<Rule> = (0..MAX_PENDING as u16 + 10)
            .map(|p| {
                let mut rule = parse_rule("actions=drop").unwrap();
                rule.priority = p;
                rule
            })
            .collect();
        // The same rules again take no more room.
        tables.learned.push(&rules[..MAX_PENDING]);
        tables.learned.push(&rules[..MAX_PENDING]);
        assert!(!tables.learned.take_harvest_soon());
        tables.learned.push(&rules);
        assert_eq!(tables.learned.dropped, 10);
        assert!(tables.learned.take_harvest_soon());
        assert!(!tables.learned.take_harvest_soon(), "once");
        let generation = tables.generation();
        assert_eq!(add_pending(&mut tables, Duration::ZERO), MAX_PENDING);
        assert_eq!(tables.generation(), generation + MAX_PENDING as u64);
    }
}
