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

use crate::ofproto::rule_table::RuleTables;
use crate::rule::Rule;

/// Learned rules kept at most between two of the control side's visits.
pub const MAX_PENDING: usize = 4096;

/// The learned rules waiting for the control side.
#[derive(Default, Debug)]
pub struct Learned {
    pending: Vec<Rule>,
    /// Learned rules dropped because [`MAX_PENDING`] were waiting.
    pub dropped: u64,
    /// A translation's learned rule was dropped since the control side's last visit: the
    /// megaflow that learned it stays cached, so the caches must be made anew.
    lost: bool,
    /// A learned rule with a hard timeout was seen: harvests must learn again.
    pub any_hard_timeouts: bool,
}

impl Learned {
    /// Keeps the rules a translation learned (those past [`MAX_PENDING`] are dropped).
    /// Cheap: a translation calls it under the lock the poll-mode threads share.
    pub fn push(&mut self, rules: &[Rule]) {
        self.lost |= !self.keep(rules);
    }

    /// Keeps the rules a harvested megaflow learned again (dropped past [`MAX_PENDING`]:
    /// the next harvest learns them again).
    pub fn push_again(&mut self, rules: &[Rule]) {
        self.keep(rules);
    }

    /// Whether all of `rules` were kept.
    fn keep(&mut self, rules: &[Rule]) -> bool {
        let room = MAX_PENDING - self.pending.len();
        let kept = rules.len().min(room);
        self.pending.extend_from_slice(&rules[..kept]);
        self.any_hard_timeouts |= rules.iter().any(|r| r.hard_timeout != 0);
        self.dropped += (rules.len() - kept) as u64;
        kept == rules.len()
    }

    pub fn is_pending(&self) -> bool {
        !self.pending.is_empty()
    }
}

/// What the tables do with one learned rule.
enum Fate {
    /// The same rule is there: its hard timeout restarts.
    Again(crate::classifier::RuleId),
    /// One with the same table, priority and match has other actions or cookie: they are
    /// replaced, its counters and timeouts kept (Open vSwitch's MODIFY_STRICT).
    Modify(crate::classifier::RuleId),
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
    pending.retain(|rule| match fate(tables, rule) {
        Fate::Again(id) => {
            tables.restart_hard_timeout(id, now);
            false
        }
        _ => true,
    });
    tables.learned.pending = pending;
    tables.learned.is_pending() || tables.learned.lost
}

/// Adds the waiting rules at `now` (the last learned of each table, priority and match);
/// how many changed the tables. If a translation's learned rule was dropped, every cache is
/// made anew, so its flow learns it again.
pub fn add_learned(tables: &mut RuleTables, now: Duration) -> usize {
    let pending = std::mem::take(&mut tables.learned.pending);
    if std::mem::take(&mut tables.learned.lost) {
        tables.invalidate_caches();
    }
    let place = |rule: &Rule| (rule.table, rule.priority, rule.flow_match);
    let last: HashMap<_, usize> = pending
        .iter()
        .enumerate()
        .map(|(i, rule)| (place(rule), i))
        .collect();
    let mut changed = 0;
    for (i, rule) in pending.into_iter().enumerate() {
        if last[&place(&rule)] != i {
            continue;
        }
        match fate(tables, &rule) {
            Fate::Again(id) => tables.restart_hard_timeout(id, now),
            Fate::Modify(id) => {
                tables.modify_actions(id, rule.actions, rule.cookie);
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

    #[test]
    fn adds_each_rule_once_and_learning_it_again_restarts_its_hard_timeout() {
        let mut tables = RuleTables::new();
        let text = "table=10,hard_timeout=5,dl_dst=0a:00:00:00:00:01,actions=output:1";
        let rule = parse_rule(text).unwrap();
        tables.learned.push(&[rule.clone(), rule.clone()]);
        assert!(learn_again(&mut tables, Duration::ZERO));
        assert_eq!(add_learned(&mut tables, Duration::ZERO), 1);
        assert!(tables.has_learned_hard_timeouts());
        let generation = tables.generation();
        tables.learned.push_again(std::slice::from_ref(&rule));
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
    fn other_actions_replace_the_learned_rules_keeping_its_counts() {
        let mut tables = RuleTables::new();
        let rule = parse_rule("table=10,dl_dst=0a:00:00:00:00:01,actions=output:1").unwrap();
        let id = tables.add(rule, Duration::ZERO);
        tables.credit_many(id, 3, 180, SECOND);
        let moved = parse_rule("table=10,dl_dst=0a:00:00:00:00:01,actions=output:2").unwrap();
        tables.learned.push(std::slice::from_ref(&moved));
        assert!(learn_again(&mut tables, 2 * SECOND));
        let generation = tables.generation();
        assert_eq!(add_learned(&mut tables, 2 * SECOND), 1);
        assert!(tables.generation() > generation);
        let installed = tables.get(id).unwrap();
        assert_eq!(installed.rule, moved);
        assert_eq!(
            (installed.stats.n_packets, installed.stats.n_bytes),
            (3, 180)
        );
        assert!(!tables.learned.is_pending());
    }

    #[test]
    fn a_dropped_rule_makes_the_caches_anew() {
        let mut tables = RuleTables::new();
        let rules: Vec<Rule> = (0..MAX_PENDING as u16 + 10)
            .map(|p| {
                let mut rule = parse_rule("actions=drop").unwrap();
                rule.priority = p;
                rule
            })
            .collect();
        tables.learned.push_again(&rules);
        assert_eq!(tables.learned.dropped, 10);
        assert!(!tables.learned.lost, "a harvest learns them again");
        tables.learned.push(&rules[..1]);
        assert!(tables.learned.lost);
        assert!(learn_again(&mut tables, Duration::ZERO));
        let generation = tables.generation();
        assert_eq!(add_learned(&mut tables, Duration::ZERO), MAX_PENDING);
        assert!(tables.generation() > generation + MAX_PENDING as u64);
    }
}
