//! A megaflow's decision folded into a few bits ([`Digest`]), kept beside the megaflows in
//! a dense array. A pass over every megaflow on the control side (revalidation after a
//! change, a harvest before rules go) reads the digests, and looks into a megaflow and its
//! lists, which lie apart in memory, only where the digest says the change may be there.
//! With 10,000 megaflows that is one cache miss avoided for nearly every one of them.

use crate::dpif::upcall::Decision;

/// What a decision names, as bits: one may be set for something it does not name (two
/// ids share a bit), never clear for something it does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Digest {
    /// Bit `id % 64` of each rule, group and meter.
    rules: u64,
    groups: u64,
    meters: u64,
    /// Bit `table` of each table looked up, bit 63 for tables 63 and up.
    tables: u64,
    /// The lowest priority a lookup found, -1 if one found no rule: a rule added at that
    /// priority or below wins none of its lookups (an older rule wins a tie).
    lowest_found: i32,
    /// Whether its `learn` actions learn rules.
    learns: bool,
}

/// The bit of `n` in a digest's set.
pub fn bit(n: u32) -> u64 {
    1 << (n % 64)
}

/// The bit of table `table` in a digest's tables.
fn table_bit(table: u8) -> u64 {
    1 << table.min(63)
}

/// The bits of `ids` in a digest's set.
pub fn bits(ids: impl IntoIterator<Item = u32>) -> u64 {
    ids.into_iter().fold(0, |set, id| set | bit(id))
}

impl Digest {
    pub fn of(decision: &Decision) -> Digest {
        Digest {
            rules: bits(decision.rules.iter().map(|r| r.0)),
            groups: bits(decision.groups.iter().map(|v| v.group)),
            meters: bits(decision.meters.iter().map(|m| m.0.config.id)),
            tables: (decision.lookups.iter()).fold(0, |set, l| set | table_bit(l.table)),
            lowest_found: (decision.lookups.iter())
                .map(|l| l.found.map_or(-1, i32::from))
                .min()
                .unwrap_or(i32::MAX),
            learns: !decision.learned.is_empty(),
        }
    }

    pub fn learns(&self) -> bool {
        self.learns
    }

    /// Whether it may name a rule of `rules`, a group of `groups` or a meter of `meters`
    /// (each [`bits`]).
    pub fn may_name(&self, rules: u64, groups: u64, meters: u64) -> bool {
        self.rules & rules != 0 || self.groups & groups != 0 || self.meters & meters != 0
    }

    /// Whether a rule added to `table` at `priority` may win one of its lookups.
    pub fn may_lose_to(&self, table: u8, priority: u16) -> bool {
        self.tables & table_bit(table) != 0 && i32::from(priority) > self.lowest_found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classifier::RuleId;
    use crate::dpif::revalidate::{Seen, TableLookup};
    use crate::group::{BucketsTaken, GroupVisit};

    fn lookup(table: u8, found: Option<u16>) -> TableLookup {
        TableLookup {
            table,
            found,
            seen: Seen::Arrived,
        }
    }

    #[test]
    fn names_what_the_decision_names() {
        let decision = Decision {
            rules: vec![RuleId(3), RuleId(70)],
            groups: vec![GroupVisit {
                group: 9,
                taken: BucketsTaken::Every,
            }],
            lookups: vec![lookup(0, Some(100)), lookup(70, Some(5))],
            ..Decision::default()
        };
        let digest = Digest::of(&decision);
        let rule = |id| digest.may_name(bit(id), 0, 0);
        assert!(rule(3) && rule(70));
        assert!(rule(67), "67 shares 3's bit");
        assert!(!rule(4));
        assert!(digest.may_name(0, bit(9), 0) && !digest.may_name(bit(4), bit(8), !0));
        // Table 70 shares table 63's bit; a tie goes to the older rule.
        assert!(digest.may_lose_to(0, 101) && digest.may_lose_to(63, 6));
        assert!(!digest.may_lose_to(0, 5) && !digest.may_lose_to(1, 200));
    }

    #[test]
    fn a_table_miss_loses_to_any_priority() {
        let decision = Decision {
            lookups: vec![lookup(2, None)],
            ..Decision::default()
        };
        assert!(Digest::of(&decision).may_lose_to(2, 0));
        assert!(!Digest::of(&Decision::default()).may_lose_to(0, u16::MAX));
    }
}
