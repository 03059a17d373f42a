//! One flow table's classifier: tuple-space search (one hash table per distinct mask), subtables
//! visited in order of their highest priority and skipped once a better rule is found, each
//! probed in stages (in_port, then L2, then L3, then all), and skipped early when the table's
//! prefix tries show no rule's address prefix of the subtable's length can match — OVS's
//! classifier in small.
//!
//! A lookup records in `wildcards` the bits of every stage it probed: any flow that agrees with
//! the looked-up one on those bits gets the same hash results, hence the same rule. That is what
//! the megaflow installed after a miss may match on, and no more. Staging is what keeps it
//! small: a flow whose in_port no rule of a subtable has examined only in_port there, and a
//! flow whose destination leaves every rule's prefix at bit 3 examined 3 bits of it.

pub mod prefix_trie;

use std::collections::{BTreeMap, HashMap};

use crate::field::{Field, FlowBits, FlowHashBuilder, with_registers};
use crate::flow_match::Match;
use prefix_trie::{PrefixMatch, PrefixTrie, prefix_length};

/// The fields with a prefix trie (OVS lets three be chosen; these are the usual ones).
const TRIE_FIELDS: [Field; 4] = [Field::NwDst, Field::NwSrc, Field::Ipv6Dst, Field::Ipv6Src];

/// The top `bits` bits of `field`, as a mask.
fn top_bits(field: Field, bits: u32) -> u128 {
    let width = field.width();
    if bits == 0 {
        0
    } else {
        (field.full_mask() >> (width - bits)) << (width - bits)
    }
}

/// Index of an installed rule in [`crate::ofproto::rule_table::RuleTables`].
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

/// Rank of a rule among overlapping ones: higher priority first, then the earlier-installed
/// (OpenFlow leaves equal priorities undefined; a fixed order keeps decisions reproducible).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RuleRank {
    pub priority: u16,
    /// Installation sequence number: lower is older.
    pub seq: u64,
}

impl RuleRank {
    /// True if `self` wins over `other`.
    pub fn beats(&self, other: &RuleRank) -> bool {
        self.priority > other.priority || (self.priority == other.priority && self.seq < other.seq)
    }
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    rank: RuleRank,
    id: RuleId,
}

/// The fields each stage adds, in lookup order; the last stage is the whole mask. The
/// pipeline's state comes first with the input port, as in Open vSwitch. ARP's opcode is
/// left to the last stage with the transport's fields: its bits are TCP's flags in a TCP
/// flow, which a lookup must not look at before it knows the protocol is TCP (a UDP flow's
/// megaflow would pin them, and lose the offload, whose key has no flags).
const STAGES: [&[Field]; 3] = [
    &with_registers::<2, 18>([Field::InPort, Field::Metadata]),
    &[Field::DlSrc, Field::DlDst, Field::VlanTci, Field::DlType],
    &[
        Field::NwSrc,
        Field::NwDst,
        Field::Ipv6Src,
        Field::Ipv6Dst,
        Field::Ipv6Label,
        Field::NwProto,
        Field::NwTos,
        Field::NwEcn,
        Field::NwTtl,
        Field::ArpSpa,
        Field::ArpTpa,
        Field::ArpSha,
        Field::ArpTha,
    ],
];

/// One early stage of a subtable: the mask so far, and how many rules have each value under it.
struct Stage {
    mask: FlowBits,
    values: HashMap<FlowBits, u32, FlowHashBuilder>,
}

/// The cumulative stage masks of `mask` that are neither empty nor the whole mask, without
/// repeats (a stage adding no bits of this mask is skipped).
fn stages_of(mask: &FlowBits) -> Vec<Stage> {
    let mut stages: Vec<Stage> = Vec::new();
    let mut cumulative = FlowBits::ZERO;
    for fields in STAGES {
        for field in fields {
            field.set(&mut cumulative, field.full_mask());
        }
        let stage_mask = mask.and(&cumulative);
        let previous = stages.last().map_or(FlowBits::ZERO, |stage| stage.mask);
        if stage_mask != previous && stage_mask != *mask {
            stages.push(Stage {
                mask: stage_mask,
                values: HashMap::default(),
            });
        }
    }
    stages
}

struct Subtable {
    mask: FlowBits,
    stages: Vec<Stage>,
    /// For each of [`TRIE_FIELDS`]: the prefix length this mask has there, if it is a non-empty
    /// prefix (then the rules' prefixes are in the classifier's trie for that field).
    trie_lengths: [Option<u32>; TRIE_FIELDS.len()],
    max_priority: u16,
    /// How many rules have each priority: the highest is `max_priority`, kept without a
    /// walk over every rule when one goes (a table of 100,000 emptied in one go).
    priorities: BTreeMap<u16, u32>,
    /// Masked match value → the rules with exactly that match, best first.
    buckets: HashMap<FlowBits, Vec<Entry>, FlowHashBuilder>,
    len: usize,
}

impl Subtable {
    fn count_priority(&mut self, priority: u16) {
        *self.priorities.entry(priority).or_insert(0) += 1;
        self.max_priority = self.max_priority.max(priority);
    }

    /// Forgets one rule of `priority`; whether the highest priority changed.
    fn uncount_priority(&mut self, priority: u16) -> bool {
        if let Some(count) = self.priorities.get_mut(&priority) {
            *count -= 1;
            if *count == 0 {
                self.priorities.remove(&priority);
            }
        }
        let max = self.priorities.keys().next_back().copied().unwrap_or(0);
        let changed = max != self.max_priority;
        self.max_priority = max;
        changed
    }
}

/// The rules of one table, searchable by flow.
pub struct Classifier {
    /// Sorted by `max_priority`, highest first.
    subtables: Vec<Subtable>,
    len: usize,
    tries: [PrefixTrie; TRIE_FIELDS.len()],
}

impl Default for Classifier {
    fn default() -> Self {
        Classifier {
            subtables: Vec::new(),
            len: 0,
            tries: TRIE_FIELDS.map(|field| PrefixTrie::new(field.width())),
        }
    }
}

impl Classifier {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of distinct masks (the subtables a lookup may probe).
    pub fn subtable_count(&self) -> usize {
        self.subtables.len()
    }

    pub fn insert(&mut self, flow_match: &Match, rank: RuleRank, id: RuleId) {
        let index = match self
            .subtables
            .iter()
            .position(|s| s.mask == *flow_match.mask())
        {
            Some(index) => index,
            None => {
                self.subtables.push(Subtable {
                    mask: *flow_match.mask(),
                    stages: stages_of(flow_match.mask()),
                    trie_lengths: TRIE_FIELDS.map(|field| {
                        prefix_length(field.get(flow_match.mask()), field.width())
                            .filter(|&length| length > 0)
                    }),
                    max_priority: 0,
                    priorities: BTreeMap::new(),
                    buckets: HashMap::default(),
                    len: 0,
                });
                self.subtables.len() - 1
            }
        };
        let subtable = &mut self.subtables[index];
        for (trie, (field, length)) in self
            .tries
            .iter_mut()
            .zip(TRIE_FIELDS.iter().zip(subtable.trie_lengths))
        {
            if let Some(length) = length {
                trie.insert(field.get(flow_match.value()), length);
            }
        }
        for stage in &mut subtable.stages {
            *stage
                .values
                .entry(flow_match.value().and(&stage.mask))
                .or_insert(0) += 1;
        }
        let bucket = subtable.buckets.entry(*flow_match.value()).or_default();
        let at = bucket
            .iter()
            .position(|entry| rank.beats(&entry.rank))
            .unwrap_or(bucket.len());
        bucket.insert(at, Entry { rank, id });
        subtable.len += 1;
        subtable.count_priority(rank.priority);
        self.len += 1;
        self.sort_subtables();
    }

    /// The rule installed with exactly this match and priority, if any.
    pub fn find_exact(&self, flow_match: &Match, priority: u16) -> Option<RuleId> {
        let subtable = self
            .subtables
            .iter()
            .find(|s| s.mask == *flow_match.mask())?;
        let bucket = subtable.buckets.get(flow_match.value())?;
        let entry = bucket
            .iter()
            .find(|entry| entry.rank.priority == priority)?;
        Some(entry.id)
    }

    /// Removes the rule `id` installed with `flow_match`; false if it is not here.
    pub fn remove(&mut self, flow_match: &Match, id: RuleId) -> bool {
        let Some(index) = self
            .subtables
            .iter()
            .position(|s| s.mask == *flow_match.mask())
        else {
            return false;
        };
        let subtable = &mut self.subtables[index];
        let Some(bucket) = subtable.buckets.get_mut(flow_match.value()) else {
            return false;
        };
        let Some(at) = bucket.iter().position(|entry| entry.id == id) else {
            return false;
        };
        let priority = bucket.remove(at).rank.priority;
        if bucket.is_empty() {
            subtable.buckets.remove(flow_match.value());
        }
        for (trie, (field, length)) in self
            .tries
            .iter_mut()
            .zip(TRIE_FIELDS.iter().zip(subtable.trie_lengths))
        {
            if let Some(length) = length {
                trie.remove(field.get(flow_match.value()), length);
            }
        }
        for stage in &mut subtable.stages {
            let value = flow_match.value().and(&stage.mask);
            if let Some(count) = stage.values.get_mut(&value) {
                *count -= 1;
                if *count == 0 {
                    stage.values.remove(&value);
                }
            }
        }
        subtable.len -= 1;
        self.len -= 1;
        if subtable.len == 0 {
            self.subtables.remove(index);
        } else if subtable.uncount_priority(priority) {
            self.sort_subtables();
        }
        true
    }

    fn sort_subtables(&mut self) {
        // Stable, so equal priorities keep their order and lookups stay deterministic.
        self.subtables
            .sort_by_key(|subtable| core::cmp::Reverse(subtable.max_priority));
    }

    /// The best rule matching `flow`, un-wildcarding in `wildcards` every mask probed.
    pub fn lookup(&self, flow: &FlowBits, wildcards: &mut FlowBits) -> Option<RuleId> {
        let mut best: Option<Entry> = None;
        let mut prefixes: [Option<PrefixMatch>; TRIE_FIELDS.len()] = [None; TRIE_FIELDS.len()];
        'subtables: for subtable in &self.subtables {
            // Every rule further on has a lower priority than the one found: none can win.
            if best.is_some_and(|best| best.rank.priority > subtable.max_priority) {
                break;
            }
            if self.no_prefix_matches(subtable, flow, &mut prefixes, wildcards) {
                continue;
            }
            for stage in &subtable.stages {
                wildcards.or_assign(&stage.mask);
                if !stage.values.contains_key(&flow.and(&stage.mask)) {
                    continue 'subtables;
                }
            }
            wildcards.or_assign(&subtable.mask);
            let Some(bucket) = subtable.buckets.get(&flow.and(&subtable.mask)) else {
                continue;
            };
            let candidate = bucket[0];
            if best.is_none_or(|best| candidate.rank.beats(&best.rank)) {
                best = Some(candidate);
            }
        }
        best.map(|entry| entry.id)
    }

    /// True if a prefix trie proves no rule of `subtable` can match `flow`; then only the
    /// address bits that proved it are un-wildcarded. Trie walks are done once per lookup.
    fn no_prefix_matches(
        &self,
        subtable: &Subtable,
        flow: &FlowBits,
        prefixes: &mut [Option<PrefixMatch>; TRIE_FIELDS.len()],
        wildcards: &mut FlowBits,
    ) -> bool {
        for (index, field) in TRIE_FIELDS.into_iter().enumerate() {
            let Some(length) = subtable.trie_lengths[index] else {
                continue;
            };
            let found =
                *prefixes[index].get_or_insert_with(|| self.tries[index].lookup(field.get(flow)));
            if !found.has_length(length, field.width()) {
                field.or_mask(wildcards, top_bits(field, length.min(found.checked_bits)));
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Field;

    fn rule_match(fields: &[(Field, u128, u128)]) -> Match {
        let mut flow_match = Match::ANY;
        for &(field, value, mask) in fields {
            flow_match.add(field, value, mask).unwrap();
        }
        flow_match
    }

    fn flow(fields: &[(Field, u128)]) -> FlowBits {
        let mut flow = FlowBits::ZERO;
        for &(field, value) in fields {
            field.set(&mut flow, value);
        }
        flow
    }

    #[test]
    fn priority_wins_and_wildcards_record_probed_masks() {
        let mut classifier = Classifier::default();
        let by_port = rule_match(&[(Field::InPort, 1, u128::MAX)]);
        let by_dst = rule_match(&[(Field::NwDst, 0x0a00_0000, 0xff00_0000)]);
        classifier.insert(
            &by_port,
            RuleRank {
                priority: 10,
                seq: 0,
            },
            RuleId(0),
        );
        classifier.insert(
            &by_dst,
            RuleRank {
                priority: 20,
                seq: 1,
            },
            RuleId(1),
        );

        let mut wildcards = FlowBits::ZERO;
        let packet = flow(&[(Field::InPort, 1), (Field::NwDst, 0x0a01_0203)]);
        assert_eq!(classifier.lookup(&packet, &mut wildcards), Some(RuleId(1)));
        // The priority-20 hit makes the in_port subtable (max 10) unnecessary.
        assert_eq!(wildcards, *by_dst.mask());

        let mut wildcards = FlowBits::ZERO;
        let packet = flow(&[(Field::InPort, 1), (Field::NwDst, 0x0b00_0001)]);
        assert_eq!(classifier.lookup(&packet, &mut wildcards), Some(RuleId(0)));
        let mut both = *by_dst.mask();
        both.or_assign(by_port.mask());
        assert_eq!(wildcards, both);
    }

    #[test]
    fn a_miss_in_an_early_stage_examines_only_that_stage() {
        let mut classifier = Classifier::default();
        let rule = rule_match(&[
            (Field::InPort, 1, u128::MAX),
            (Field::DlType, 0x0800, u128::MAX),
            (Field::NwProto, 6, u128::MAX),
        ]);
        classifier.insert(
            &rule,
            RuleRank {
                priority: 1,
                seq: 0,
            },
            RuleId(0),
        );
        let port_only = rule_match(&[(Field::InPort, u128::from(u32::MAX), u128::MAX)]);

        let mut wildcards = FlowBits::ZERO;
        let other_port = flow(&[
            (Field::InPort, 2),
            (Field::DlType, 0x0800),
            (Field::NwProto, 6),
        ]);
        assert_eq!(classifier.lookup(&other_port, &mut wildcards), None);
        assert_eq!(wildcards, *port_only.mask());

        let mut wildcards = FlowBits::ZERO;
        let other_type = flow(&[(Field::InPort, 1), (Field::DlType, 0x86dd)]);
        assert_eq!(classifier.lookup(&other_type, &mut wildcards), None);
        assert_eq!(Field::DlType.get(&wildcards), 0xffff);
        assert_eq!(Field::NwProto.get(&wildcards), 0, "L3 not reached");

        let mut wildcards = FlowBits::ZERO;
        let hit = flow(&[
            (Field::InPort, 1),
            (Field::DlType, 0x0800),
            (Field::NwProto, 6),
        ]);
        assert_eq!(classifier.lookup(&hit, &mut wildcards), Some(RuleId(0)));
        assert_eq!(wildcards, *rule.mask());

        assert!(classifier.remove(&rule, RuleId(0)));
        classifier.insert(
            &port_only,
            RuleRank {
                priority: 1,
                seq: 1,
            },
            RuleId(1),
        );
        assert_eq!(
            classifier.lookup(&other_port, &mut FlowBits::default()),
            None
        );
    }

    #[test]
    fn prefix_tries_un_wildcard_only_the_deciding_bits() {
        let mut classifier = Classifier::default();
        let rule = rule_match(&[
            (Field::DlType, 0x0800, u128::MAX),
            (Field::NwDst, 0xac10_0000, 0xffff_0000),
            (Field::TpDst, 80, 0xffff),
        ]);
        classifier.insert(
            &rule,
            RuleRank {
                priority: 1,
                seq: 0,
            },
            RuleId(0),
        );
        let mut wildcards = FlowBits::ZERO;
        let packet = flow(&[
            (Field::DlType, 0x0800),
            (Field::NwDst, 0x0a00_0001),
            (Field::TpDst, 80),
        ]);
        assert_eq!(classifier.lookup(&packet, &mut wildcards), None);
        // 10.0.0.1 leaves 172.16/16 at the first bit: that bit alone proves the miss.
        let mut expected = FlowBits::ZERO;
        Field::NwDst.set(&mut expected, 0x8000_0000);
        assert_eq!(wildcards, expected);

        let mut wildcards = FlowBits::ZERO;
        let inside = flow(&[
            (Field::DlType, 0x0800),
            (Field::NwDst, 0xac10_0001),
            (Field::TpDst, 80),
        ]);
        assert_eq!(classifier.lookup(&inside, &mut wildcards), Some(RuleId(0)));
        assert_eq!(wildcards, *rule.mask());
        assert!(classifier.remove(&rule, RuleId(0)));
        assert_eq!(classifier.lookup(&inside, &mut FlowBits::default()), None);
    }

    #[test]
    fn equal_priority_goes_to_the_older_rule() {
        let mut classifier = Classifier::default();
        let any = Match::ANY;
        let port = rule_match(&[(Field::InPort, 1, u128::MAX)]);
        classifier.insert(
            &port,
            RuleRank {
                priority: 5,
                seq: 9,
            },
            RuleId(9),
        );
        classifier.insert(
            &any,
            RuleRank {
                priority: 5,
                seq: 3,
            },
            RuleId(3),
        );
        let mut wildcards = FlowBits::ZERO;
        assert_eq!(
            classifier.lookup(&flow(&[(Field::InPort, 1)]), &mut wildcards),
            Some(RuleId(3))
        );
    }

    #[test]
    fn remove_restores_the_next_best() {
        let mut classifier = Classifier::default();
        let port = rule_match(&[(Field::InPort, 1, u128::MAX)]);
        classifier.insert(
            &port,
            RuleRank {
                priority: 5,
                seq: 0,
            },
            RuleId(0),
        );
        classifier.insert(
            &port,
            RuleRank {
                priority: 7,
                seq: 1,
            },
            RuleId(1),
        );
        let packet = flow(&[(Field::InPort, 1)]);
        assert_eq!(
            classifier.lookup(&packet, &mut FlowBits::default()),
            Some(RuleId(1))
        );
        assert!(classifier.remove(&port, RuleId(1)));
        assert!(!classifier.remove(&port, RuleId(1)));
        assert_eq!(
            classifier.lookup(&packet, &mut FlowBits::default()),
            Some(RuleId(0))
        );
        assert!(classifier.remove(&port, RuleId(0)));
        assert!(classifier.is_empty() && classifier.subtable_count() == 0);
        assert_eq!(classifier.lookup(&packet, &mut FlowBits::default()), None);
    }
}
