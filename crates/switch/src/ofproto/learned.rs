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
//!
//! And as in Open vSwitch, a learn with `delete_learned` takes its learned rules with it:
//! when no rule holds such a learn of a table and cookie any more, every rule of that table
//! with that cookie goes ([`delete_learned_flows`], after each change to the tables).

use core::time::Duration;
use std::collections::{HashMap, HashSet};

use crate::action::Action;
use crate::classifier::RuleId;
use crate::flow_match::Match;
use crate::ofproto::rule_table::{InstalledRule, RuleTables};
use crate::rule::Rule;

/// After a change: for each table and cookie of a `delete_learned` learn that a rule held
/// when it went or changed, and that no rule holds any more, deletes the rules of that table
/// with that cookie (and so on for learns those held). The rules deleted, for FLOW_REMOVED.
/// Rules learned for those and still waiting in the queue go too (Open vSwitch's learned
/// flows are in the tables at once). The decision is taken once, at the end of the change:
/// a request of several flows (`add-flows`, `replace-flows`, a bundle) is one change here,
/// where Open vSwitch decides after each flow_mod. `before_removing` is given the rules
/// about to go first (their counts are taken then, the caches' and the kernel's).
pub fn delete_learned_flows(
    tables: &mut RuleTables,
    mut before_removing: impl FnMut(&mut RuleTables, &[RuleId]),
) -> Vec<InstalledRule> {
    let mut deleted = Vec::new();
    loop {
        let released: HashSet<(u8, u64)> = tables.take_released_learns().into_iter().collect();
        if released.is_empty() {
            return deleted;
        }
        let held = delete_learned_holders(tables);
        let gone: HashSet<(u8, u64)> = released.difference(&held).copied().collect();
        if gone.is_empty() {
            continue;
        }
        tables
            .learned
            .pending
            .retain(|_, rule| !gone.contains(&(rule.table, rule.cookie)));
        // One pass over the rules, however many learns went.
        let ids: Vec<RuleId> = tables
            .iter()
            .filter(|(_, r)| gone.contains(&(r.rule.table, r.rule.cookie)))
            .map(|(id, _)| id)
            .collect();
        before_removing(tables, &ids);
        deleted.extend(tables.remove_all(ids));
    }
}

/// The table and cookie of every `delete_learned` learn the rules' actions hold.
fn delete_learned_holders(tables: &RuleTables) -> HashSet<(u8, u64)> {
    let mut held = HashSet::new();
    for (_, installed) in tables.iter() {
        for action in &installed.rule.actions {
            if let Action::Learn(id) = action {
                let learn = id.get();
                if learn.delete_learned {
                    held.insert((learn.table, learn.cookie));
                }
            }
        }
    }
    held
}

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
    /// Learned rules dropped because [`MAX_PENDING`] places were waiting. The queue holds
    /// only rules that change the tables ([`queue`]), so a full one is followed by changes;
    /// a dropped rule's megaflow, kept or not, learns it again: at the next harvest after
    /// its packets ([`crate::dpif::upcall::Upcall::learned_again`]), or at its next miss.
    pub dropped: u64,
}

impl Learned {
    /// Keeps `rule` (a translation's, or a harvested megaflow's learned again), replacing
    /// what was waiting for its place. Cheap: a translation calls it under the lock the
    /// poll-mode threads share.
    pub fn push(&mut self, rule: &Rule) {
        let place = place(rule);
        if self.pending.len() < MAX_PENDING || self.pending.contains_key(&place) {
            self.pending.insert(place, rule.clone());
        } else {
            self.dropped += 1;
        }
    }

    pub fn is_pending(&self) -> bool {
        !self.pending.is_empty()
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

/// Queues the learned `rules` that would change the tables; one the tables hold already
/// takes no place in the queue, and has its hard timeout restarted at `used` if a packet
/// learned it again then (a harvest's), so the queue holds new and changed rules only.
pub fn queue(tables: &mut RuleTables, rules: &[Rule], used: Option<Duration>) {
    for rule in rules {
        match (fate(tables, rule), used) {
            (Fate::Again(id), Some(used)) => tables.restart_hard_timeout(id, used),
            (Fate::Again(_), None) => {}
            _ => tables.learned.push(rule),
        }
    }
}

/// Restarts at `now` the hard timeouts of `rules` the tables hold already; the others,
/// which change the tables.
fn changing(tables: &mut RuleTables, rules: Vec<Rule>, now: Duration) -> Vec<Rule> {
    let mut rules = rules;
    rules.retain(|rule| match fate(tables, rule) {
        Fate::Again(id) => {
            tables.restart_hard_timeout(id, now);
            false
        }
        _ => true,
    });
    rules
}

/// Restarts at `now` the hard timeouts of the waiting rules the tables hold already (one
/// may have come in since it was queued), and keeps waiting only those that change the
/// tables; whether there are any (the control side then adds them with every cache locked,
/// [`add_learned`]).
pub fn learn_again(tables: &mut RuleTables, now: Duration) -> bool {
    let rules = take_pending(tables);
    let rules = changing(tables, rules, now);
    tables.learned.pending = rules.into_iter().map(|rule| (place(&rule), rule)).collect();
    tables.learned.is_pending()
}

/// The waiting rules, taken.
pub fn take_pending(tables: &mut RuleTables) -> Vec<Rule> {
    std::mem::take(&mut tables.learned.pending)
        .into_values()
        .collect()
}

/// Puts learned `rules` (one a place) in the tables at `now`; `before_a_change` runs once,
/// before the first that changes them (the caller has the kernel's fast path revalidated
/// after: they take no rule away). How many changed them.
pub fn add_learned(
    tables: &mut RuleTables,
    rules: Vec<Rule>,
    now: Duration,
    before_a_change: impl FnOnce(&mut RuleTables),
) -> usize {
    // One no OpenFlow reply could hold is not learned (a learn's specs are shorter than the
    // actions they make, so a flow that fits can learn one that does not).
    let dumpable = |r: &Rule| crate::openflow::reply::dumpable_rule(&r.flow_match, &r.actions);
    let rules = changing(tables, rules.into_iter().filter(dumpable).collect(), now);
    if !rules.is_empty() {
        before_a_change(tables);
    }
    let changed = rules.len();
    for rule in rules {
        match fate(tables, &rule) {
            Fate::Again(id) => tables.restart_hard_timeout(id, now),
            Fate::Modify(id) => {
                tables.modify_actions(id, rule.actions, rule.cookie);
                tables.restart_hard_timeout(id, now);
            }
            Fate::Add => {
                tables.add(rule, now);
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ofctl::flow_parse::parse_rule;
    use crate::ofproto::rule_table::RuleSelector;

    const SECOND: Duration = Duration::from_secs(1);

    fn add_pending(tables: &mut RuleTables, now: Duration) -> usize {
        let rules = take_pending(tables);
        add_learned(tables, rules, now, |_| {})
    }

    /// As in Open vSwitch: the learned rules (table 10, cookie 5) go with the last rule that
    /// holds a `delete_learned` learn of that table and cookie, however it went, and a rule
    /// they took takes its own learned rules in turn. Others stay.
    #[test]
    fn delete_learned_takes_the_learned_rules_with_the_last_learn() {
        let learn = "learn(table=10,cookie=0x5,delete_learned,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[])";
        let mut tables = RuleTables::new();
        for text in [
            format!("priority=10,in_port=1,actions={learn},output:2"),
            format!("priority=10,in_port=2,actions={learn},output:1"),
            "table=10,cookie=0x5,dl_dst=0a:00:00:00:00:01,actions=drop".into(),
            "table=10,cookie=0x6,dl_dst=0a:00:00:00:00:02,actions=drop".into(),
            "table=11,cookie=0x5,dl_dst=0a:00:00:00:00:03,actions=drop".into(),
            // A learned rule that learns in turn.
            "table=10,cookie=0x5,dl_dst=0a:00:00:00:00:04,\
             actions=learn(table=20,cookie=0x7,delete_learned,NXM_OF_ETH_SRC[])"
                .into(),
            "table=20,cookie=0x7,dl_src=0a:00:00:00:00:05,actions=drop".into(),
        ] {
            tables.add(parse_rule(&text).unwrap(), Duration::ZERO);
        }
        let remaining = |tables: &RuleTables| {
            let mut left: Vec<(u8, u64)> = tables
                .iter()
                .map(|(_, r)| (r.rule.table, r.rule.cookie))
                .collect();
            left.sort();
            left
        };
        let select = |text: &str| RuleSelector {
            flow_match: crate::ofctl::flow_parse::parse_match(text)
                .unwrap()
                .flow_match,
            ..RuleSelector::default()
        };
        // One of two holders goes: the other holds the learn still.
        tables.delete_taking(&select("in_port=1"));
        let mut told = Vec::new();
        assert!(delete_learned_flows(&mut tables, |_, ids| told.extend_from_slice(ids)).is_empty());
        assert_eq!(remaining(&tables).len(), 6);
        // The last one's actions change: its learn goes, and the rules with it, each round
        // of them told before it goes.
        tables
            .modify(&select("in_port=2"), &[Action::Output(1)], None)
            .unwrap();
        let deleted = delete_learned_flows(&mut tables, |tables, ids| {
            assert!(ids.iter().all(|&id| tables.get(id).is_some()));
            told.extend_from_slice(ids);
        });
        assert_eq!(told.len(), deleted.len());
        assert!(told.iter().all(|&id| tables.get(id).is_none()));
        let mut gone: Vec<(u8, u64)> = deleted
            .iter()
            .map(|r| (r.rule.table, r.rule.cookie))
            .collect();
        gone.sort();
        assert_eq!(gone, [(10, 5), (10, 5), (20, 7)]);
        assert_eq!(remaining(&tables), [(0, 0), (10, 6), (11, 5)]);
        assert!(!tables.has_released_learns());
    }

    /// A bundle that failed took back its changes: a learning rule it added and deleted
    /// again releases nothing, and what table 10 held with that cookie stays. A learned rule
    /// still queued for the control side goes with its learn.
    #[test]
    fn delete_learned_after_a_roll_back_and_with_rules_queued() {
        let learn = "learn(table=10,cookie=0x5,delete_learned,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[])";
        let learning = parse_rule(&format!("priority=10,actions={learn}")).unwrap();
        let mut tables = RuleTables::new();
        let learned = "table=10,cookie=0x5,dl_dst=0a:00:00:00:00:01,actions=drop";
        tables.add(parse_rule(learned).unwrap(), Duration::ZERO);
        tables.begin_undo();
        let id = tables.add(learning.clone(), Duration::ZERO);
        tables.remove(id);
        tables.roll_back();
        assert!(delete_learned_flows(&mut tables, |_, _| ()).is_empty());
        assert_eq!(tables.len(), 1);

        let id = tables.add(learning, Duration::ZERO);
        let queued = "table=10,cookie=0x5,dl_dst=0a:00:00:00:00:02,actions=drop";
        tables.learned.push(&parse_rule(queued).unwrap());
        let kept = "table=10,cookie=0x6,dl_dst=0a:00:00:00:00:03,actions=drop";
        tables.learned.push(&parse_rule(kept).unwrap());
        tables.remove(id);
        assert_eq!(delete_learned_flows(&mut tables, |_, _| ()).len(), 1);
        assert_eq!(
            add_pending(&mut tables, Duration::ZERO),
            1,
            "cookie 0x6's alone"
        );
        assert_eq!(tables.len(), 1);
    }

    #[test]
    fn adds_each_rule_once_and_learning_it_again_restarts_its_hard_timeout() {
        let mut tables = RuleTables::new();
        let text = "table=10,hard_timeout=5,dl_dst=0a:00:00:00:00:01,actions=output:1";
        let rule = parse_rule(text).unwrap();
        tables.learned.push(&rule);
        tables.learned.push(&rule);
        assert!(learn_again(&mut tables, Duration::ZERO));
        assert_eq!(add_pending(&mut tables, Duration::ZERO), 1);
        assert!(tables.has_timeouts());
        let generation = tables.generation();
        tables.learned.push(&rule);
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
        tables.learned.push(&other);
        tables.learned.push(&moved);
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
        tables.learned.push(&moved);
        tables.learned.push(&installed);
        assert!(!learn_again(&mut tables, SECOND), "the rule as it is");
        assert_eq!(tables.get(id).unwrap().rule, installed);
    }

    #[test]
    fn the_queue_holds_distinct_places_and_rules_that_change_the_tables() {
        let mut tables = RuleTables::new();
        let rules: Vec<Rule> = (0..MAX_PENDING as u16 + 10)
            .map(|p| {
                let mut rule = parse_rule("actions=drop").unwrap();
                rule.priority = p;
                rule
            })
            .collect();
        // The same rules again take no more room.
        queue(&mut tables, &rules[..MAX_PENDING], None);
        queue(&mut tables, &rules[..MAX_PENDING], None);
        assert_eq!(tables.learned.dropped, 0);
        queue(&mut tables, &rules, None);
        assert_eq!(tables.learned.dropped, 10);
        let generation = tables.generation();
        assert_eq!(add_pending(&mut tables, Duration::ZERO), MAX_PENDING);
        assert_eq!(tables.generation(), generation + MAX_PENDING as u64);
        // Installed, they take no room when learned again; a harvest's restarts them.
        queue(
            &mut tables,
            &rules[..MAX_PENDING],
            Some(Duration::from_secs(3)),
        );
        assert!(!tables.learned.is_pending());
        assert_eq!(tables.generation(), generation + MAX_PENDING as u64);
    }
}
