//! The rules `learn` actions built, between the translation that built them and the tables.
//!
//! A translation runs on a poll-mode thread in the middle of a round, while the other
//! threads' caches hold counts for the rules as they are. Adding a rule there would empty
//! those caches without crediting their counts; so the tables keep what was learned, and the
//! control side adds it between rounds ([`crate::bridge::Bridge::edit`]), as any change.

use std::collections::HashMap;

use crate::ofproto::rule_table::RuleTables;
use crate::rule::Rule;

/// Learned rules kept at most between two of the control side's visits; a flood of new
/// flows beyond it loses some, which a later packet of theirs learns again.
pub const MAX_PENDING: usize = 4096;

/// The learned rules waiting to be added.
#[derive(Default, Debug)]
pub struct Learned {
    pending: Vec<Rule>,
    /// Learned rules dropped because [`MAX_PENDING`] were waiting.
    pub dropped: u64,
}

impl Learned {
    /// Keeps `rules` for the control side (those past [`MAX_PENDING`] are dropped). Cheap:
    /// a translation calls it under the lock the poll-mode threads share.
    pub fn push(&mut self, rules: Vec<Rule>) {
        for rule in rules {
            if self.pending.len() >= MAX_PENDING {
                self.dropped += 1;
            } else {
                self.pending.push(rule);
            }
        }
    }

    pub fn is_pending(&self) -> bool {
        !self.pending.is_empty()
    }
}

/// Takes the learned rules waiting, the last learned of each table, priority and match,
/// less those the tables hold already: a rule learned again changes nothing (its counts and
/// timeouts go on, and the tables' generation stays, so no cache is emptied by every packet
/// that learns it again). One with the same table, priority and match but other actions or
/// timeouts stays, to replace it.
pub fn take_new(tables: &mut RuleTables) -> Vec<Rule> {
    let pending = std::mem::take(&mut tables.learned.pending);
    let place = |rule: &Rule| (rule.table, rule.priority, rule.flow_match);
    let last: HashMap<_, usize> = pending
        .iter()
        .enumerate()
        .map(|(i, rule)| (place(rule), i))
        .collect();
    pending
        .into_iter()
        .enumerate()
        .filter(|(i, rule)| last[&place(rule)] == *i)
        .map(|(_, rule)| rule)
        .filter(|rule| {
            tables
                .find_exact(rule.table, &rule.flow_match, rule.priority)
                .and_then(|id| tables.get(id))
                .is_none_or(|installed| installed.rule != *rule)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ofctl::flow_parse::parse_rule;
    use core::time::Duration;

    fn add_learned(tables: &mut RuleTables, now: Duration) -> usize {
        let new = take_new(tables);
        let added = new.len();
        for rule in new {
            tables.add(rule, now);
        }
        added
    }

    #[test]
    fn adds_each_rule_once_and_an_identical_one_changes_nothing() {
        let mut tables = RuleTables::new();
        let rule = parse_rule("table=10,dl_dst=0a:00:00:00:00:01,actions=output:1").unwrap();
        tables.learned.push(vec![rule.clone(), rule.clone()]);
        assert_eq!(add_learned(&mut tables, Duration::ZERO), 1);
        let generation = tables.generation();
        tables.learned.push(vec![rule.clone()]);
        assert_eq!(add_learned(&mut tables, Duration::from_secs(1)), 0);
        assert_eq!(
            tables.generation(),
            generation,
            "relearning empties no cache"
        );
        assert_eq!(tables.len(), 1);
        let moved = parse_rule("table=10,dl_dst=0a:00:00:00:00:01,actions=output:2").unwrap();
        tables.learned.push(vec![moved.clone()]);
        assert_eq!(add_learned(&mut tables, Duration::from_secs(2)), 1);
        assert_eq!(tables.len(), 1);
        assert!(tables.iter().all(|(_, installed)| installed.rule == moved));
        assert!(!tables.learned.is_pending());
    }

    #[test]
    fn keeps_at_most_max_pending() {
        let mut learned = Learned::default();
        let rules = (0..MAX_PENDING as u16 + 10).map(|p| {
            let mut rule = parse_rule("actions=drop").unwrap();
            rule.priority = p;
            rule
        });
        learned.push(rules.collect());
        assert_eq!(learned.pending.len(), MAX_PENDING);
        assert_eq!(learned.dropped, 10);
    }
}
