//! Precise revalidation: after a change to the rules, the megaflows whose packets the change
//! could decide otherwise go, and the rest stay with their counts. A packet's decision
//! changes only if one of its translation's table lookups finds another rule, so each
//! megaflow keeps what its lookups were ([`TableLookup`]) and each change says what it can
//! alter ([`RuleChange`]):
//!
//! - a rule that went, or whose actions or cookie changed, alters exactly the megaflows
//!   whose lookups found it;
//! - a rule added alters only lookups of its table that found nothing or a rule of lower
//!   priority (an older rule wins a tie), and of those only where some packet of the
//!   megaflow could match it: its match and what the lookup saw of the flow agree on every
//!   bit both pin;
//! - a group added, modified or deleted alters exactly the megaflows whose translation
//!   passed through it ([`crate::group::GroupVisit`]), and so does a port whose link went up
//!   or down, for each group with a bucket that watches it;
//! - a meter added, modified or deleted alters exactly the megaflows that pass it (they
//!   hold the meter as it was: [`crate::dpif::upcall::Decision::meters`]).
//!
//! A change to the fail mode, a bundle rolled back, or more changes at once than
//! [`MAX_PRECISE_CHANGES`], still empty the caches. Open vSwitch's
//! revalidators instead translate every datapath flow again and compare; this test costs,
//! for each megaflow, a binary search per rule it found when rules went and, per lookup when
//! rules came, a compare of the words each rule added in that table pins: a few nanoseconds,
//! not a translation. The caches are
//! locked meanwhile: 128 rules added to one table, tested against 150,000 megaflows on
//! every word, took 54 ms a cache; the test now reads only the words a rule pins, and takes
//! at most [`MAX_PRECISE_CHANGES`] changes.

use crate::classifier::RuleId;
use crate::dpif::digest::{Digest, bits};
use crate::dpif::megaflow::Megaflow;
use crate::field::{FlowBits, PACKET_WORDS};
use crate::flow_match::Match;
use crate::group::GroupVisit;
use crate::meter::MeterRef;
use std::collections::HashSet;

/// More changes at once than this (an `add-flows` of a table, a `replace-flows`) empty the
/// caches: testing every megaflow against each would hold the caches longer than a flush.
pub const MAX_PRECISE_CHANGES: usize = 64;

/// Lookups after a rewrite a decision keeps what they saw of (352 bytes each); those
/// beyond (a long `resubmit` chain) take every rule added in their table as a match.
const MAX_SEEN: usize = 16;

/// One change to the rules, as the caches revalidate against it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum RuleChange {
    /// A rule went into `table` with this match and priority.
    Added {
        table: u8,
        priority: u16,
        flow_match: Box<Match>,
    },
    /// This rule went, or its actions or cookie changed (its slot may hold another since).
    Changed(RuleId),
    /// This group was added, modified or deleted, or a port one of its buckets watches went
    /// up or down.
    Group(u32),
    /// This meter was added, modified or deleted.
    Meter(u32),
}

/// One table lookup of a translation: which table, the priority of the rule it found, and
/// what it saw of the flow.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TableLookup {
    pub table: u8,
    /// None: no rule matched (a table miss).
    pub found: Option<u16>,
    pub seen: Seen,
}

impl TableLookup {
    /// The lookup, without what it saw of a flow rewritten before it (any rule added to its
    /// table then counts as a match): smaller to keep, and only more cautious.
    pub fn unseen(&self) -> TableLookup {
        let seen = match self.seen {
            Seen::Arrived => Seen::Arrived,
            Seen::Written(_) | Seen::Unknown => Seen::Unknown,
        };
        TableLookup {
            table: self.table,
            found: self.found,
            seen,
        }
    }
}

/// What a lookup saw of the flow.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Seen {
    /// The packet as it came (no action had changed the flow): the megaflow's own match
    /// says it, with metadata and registers zero.
    Arrived,
    /// The bits of the flow at the lookup that every packet of the megaflow has alike, and
    /// their values.
    Written(Box<Match>),
    /// Not kept (a lookup beyond the first `MAX_SEEN` after a rewrite): any flow.
    Unknown,
}

/// The packets a decision was made for, as they arrive: the packet words (flow words below
/// [`PACKET_WORDS`]) every one has alike (`mask`), and their values. A megaflow's match, or
/// the exact flow of a kernel fast path entry.
#[derive(Clone, Copy)]
pub struct Arrival<'a> {
    pub value: &'a [u64; PACKET_WORDS],
    pub mask: &'a [u64; PACKET_WORDS],
}

impl<'a> Arrival<'a> {
    /// The packets `flow_match` holds.
    pub fn of(flow_match: &'a Match) -> Arrival<'a> {
        Arrival {
            value: flow_match.value().packet_words(),
            mask: flow_match.mask().packet_words(),
        }
    }
}

/// The changes a batch of megaflows is tested against, sorted for the test.
pub struct Changes {
    /// Sorted: a binary search of a few ids, not a SipHash per rule of every megaflow.
    changed: Vec<RuleId>,
    groups: HashSet<u32>,
    meters: HashSet<u32>,
    /// By table: each rule added.
    added: Vec<Added>,
    /// The changed rules, groups and meters as a [`Digest`]'s bits.
    digest_bits: (u64, u64, u64),
}

/// A rule added: its table and priority, and the words its match pins (index, value,
/// mask), so a test reads only those.
struct Added {
    table: u8,
    priority: u16,
    words: Vec<(usize, u64, u64)>,
}

impl Added {
    /// Whether some flow with `value` in the bits `known` (the rest any) matches it.
    fn may_match(&self, value: &FlowBits, known: &FlowBits) -> bool {
        self.words
            .iter()
            .all(|&(i, v, m)| (v ^ value.0[i]) & m & known.0[i] == 0)
    }

    /// Whether it admits some packet of `arrival` as the packet arrives, with metadata and
    /// registers zero.
    fn admits_some_arrival(&self, arrival: Arrival<'_>) -> bool {
        self.words.iter().all(|&(i, v, m)| match i < PACKET_WORDS {
            true => (v ^ arrival.value[i]) & m & arrival.mask[i] == 0,
            false => v & m == 0,
        })
    }
}

impl Changes {
    pub fn new(changes: &[RuleChange]) -> Changes {
        let mut sorted = Changes {
            changed: Vec::new(),
            groups: HashSet::new(),
            meters: HashSet::new(),
            added: Vec::new(),
            digest_bits: (0, 0, 0),
        };
        for change in changes {
            match change {
                RuleChange::Added {
                    table,
                    priority,
                    flow_match,
                } => {
                    let (value, mask) = (flow_match.value(), flow_match.mask());
                    let words = (0..mask.0.len())
                        .filter(|&i| mask.0[i] != 0)
                        .map(|i| (i, value.0[i], mask.0[i]))
                        .collect();
                    sorted.added.push(Added {
                        table: *table,
                        priority: *priority,
                        words,
                    });
                }
                RuleChange::Changed(id) => {
                    sorted.changed.push(*id);
                }
                RuleChange::Group(id) => {
                    sorted.groups.insert(*id);
                }
                RuleChange::Meter(id) => {
                    sorted.meters.insert(*id);
                }
            }
        }
        sorted.added.sort_by_key(|added| added.table);
        sorted.changed.sort_unstable();
        sorted.changed.dedup();
        sorted.digest_bits = (
            bits(sorted.changed.iter().map(|r| r.0)),
            bits(sorted.groups.iter().copied()),
            bits(sorted.meters.iter().copied()),
        );
        sorted
    }

    /// Whether the changes may touch a decision with `digest`: if not, they do not.
    pub fn may_touch(&self, digest: &Digest) -> bool {
        let (rules, groups, meters) = self.digest_bits;
        digest.may_name(rules, groups, meters)
            || (self.added.iter()).any(|added| digest.may_lose_to(added.table, added.priority))
    }

    /// [`Changes::touch`], the megaflow looked into only if its `digest` says the changes
    /// may be there.
    pub fn touch_digested(&self, digest: &Digest, megaflow: &Megaflow) -> bool {
        self.may_touch(digest) && self.touch(megaflow)
    }

    /// Whether the changes could decide some packet of `megaflow` otherwise.
    pub fn touch(&self, megaflow: &Megaflow) -> bool {
        let decision = &megaflow.decision;
        let arrival = Arrival::of(&megaflow.flow_match);
        let metered = |meter: &MeterRef| self.meters.contains(&meter.0.config.id);
        (!self.meters.is_empty() && decision.meters.iter().any(metered))
            || self.touches(
                arrival,
                &decision.rules,
                &decision.lookups,
                &decision.groups,
            )
    }

    /// Whether the changes could decide otherwise some packet of `arrival`, decided by
    /// `rules` after `lookups`, through the groups `visits` and no meter (a megaflow's, or
    /// a kernel entry's made from one: the kernel never takes a metered decision).
    pub fn touches(
        &self,
        arrival: Arrival<'_>,
        rules: &[RuleId],
        lookups: &[TableLookup],
        visits: &[GroupVisit],
    ) -> bool {
        // A list is read only when some change could be in it: over many megaflows each read
        // is a cache miss (the lists lie apart), and most changes are of one kind.
        let changed = |id| self.changed.binary_search(id).is_ok();
        let in_groups = |v: &GroupVisit| self.groups.contains(&v.group);
        if (!self.changed.is_empty() && rules.iter().any(changed))
            || (!self.groups.is_empty() && visits.iter().any(in_groups))
        {
            return true;
        }
        !self.added.is_empty()
            && lookups.iter().any(|lookup| {
                let first = self
                    .added
                    .partition_point(|added| added.table < lookup.table);
                self.added[first..]
                    .iter()
                    .take_while(|added| added.table == lookup.table)
                    .filter(|added| lookup.found.is_none_or(|found| added.priority > found))
                    .any(|added| match &lookup.seen {
                        Seen::Arrived => added.admits_some_arrival(arrival),
                        Seen::Written(seen) => added.may_match(seen.value(), seen.mask()),
                        Seen::Unknown => true,
                    })
            })
    }
}

/// What a lookup sees of the flow, from the flow as the packet arrived (`input`), as the
/// actions left it (`flow`), the bits the translation pinned so far (`pinned`) and the
/// fields actions computed from packet bits (`derived`). A bit the actions never wrote is
/// the packet's: alike in every packet of the megaflow where the megaflow pins it. A bit
/// they wrote holds a constant or packet bits the translation pinned as it copied them,
/// except in a derived field (`dec_ttl`'s TTL): alike too. A bit written back to its own
/// value counts as unwritten, which only makes the test more cautious.
pub fn seen(
    input: &FlowBits,
    flow: &FlowBits,
    pinned: &FlowBits,
    derived: &FlowBits,
    kept: usize,
) -> Seen {
    let mut changed = false;
    let mut known = FlowBits::ZERO;
    for i in 0..known.0.len() {
        let written = input.0[i] ^ flow.0[i];
        changed |= written != 0 || derived.0[i] != 0;
        let alike = match i < PACKET_WORDS {
            true => pinned.0[i] | written,
            false => u64::MAX,
        };
        known.0[i] = alike & !derived.0[i];
    }
    match (changed, kept < MAX_SEEN) {
        (false, _) => Seen::Arrived,
        (true, true) => Seen::Written(Box::new(Match::new(*flow, known))),
        (true, false) => Seen::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dpif::upcall::Decision;
    use crate::field::Field;
    use crate::group::BucketsTaken;
    use core::time::Duration;

    fn exact(fields: &[(Field, u128)]) -> Match {
        let mut flow_match = Match::ANY;
        for &(field, value) in fields {
            flow_match.add(field, value, u128::MAX).unwrap();
        }
        flow_match
    }

    fn megaflow(flow_match: Match, rules: &[u32], lookups: Vec<TableLookup>) -> Megaflow {
        let decision = Decision {
            rules: rules.iter().map(|&id| RuleId(id)).collect(),
            lookups,
            ..Decision::default()
        };
        Megaflow::new(flow_match, decision, Duration::ZERO)
    }

    /// [`Changes::touch`], which the digest's test agrees with.
    fn touched(changes: &Changes, megaflow: &Megaflow) -> bool {
        let touch = changes.touch(megaflow);
        let digest = Digest::of(&megaflow.decision);
        assert_eq!(
            changes.touch_digested(&digest, megaflow),
            touch,
            "the digest disagrees"
        );
        touch
    }

    fn lookup(table: u8, found: Option<u16>) -> TableLookup {
        TableLookup {
            table,
            found,
            seen: Seen::Arrived,
        }
    }

    fn added(table: u8, priority: u16, flow_match: Match) -> RuleChange {
        RuleChange::Added {
            table,
            priority,
            flow_match: Box::new(flow_match),
        }
    }

    #[test]
    fn a_rule_gone_or_changed_touches_what_found_it() {
        let flow = megaflow(exact(&[(Field::InPort, 1)]), &[4, 9], vec![]);
        assert!(touched(
            &Changes::new(&[RuleChange::Changed(RuleId(9))]),
            &flow
        ));
        assert!(!touched(
            &Changes::new(&[RuleChange::Changed(RuleId(5))]),
            &flow
        ));
    }

    #[test]
    fn a_group_changed_touches_what_passed_through_it() {
        let mut flow = megaflow(exact(&[(Field::InPort, 1)]), &[4], vec![]);
        flow.decision.groups = vec![GroupVisit {
            group: 7,
            taken: BucketsTaken::One(0),
        }];
        assert!(touched(&Changes::new(&[RuleChange::Group(7)]), &flow));
        assert!(!touched(&Changes::new(&[RuleChange::Group(8)]), &flow));
        flow.decision.groups.clear();
        assert!(!touched(&Changes::new(&[RuleChange::Group(7)]), &flow));
    }

    #[test]
    fn a_meter_changed_touches_what_it_meters() {
        let config = crate::ofctl::meter_text::parse_meter("meter=3,pktps,bands=type=drop,rate=10");
        let meter = crate::meter::Meter::new(config.unwrap(), Duration::ZERO);
        let mut flow = megaflow(exact(&[(Field::InPort, 1)]), &[4], vec![]);
        flow.decision.meters = vec![crate::meter::MeterRef(std::sync::Arc::new(meter))];
        assert!(touched(&Changes::new(&[RuleChange::Meter(3)]), &flow));
        assert!(!touched(&Changes::new(&[RuleChange::Meter(2)]), &flow));
        flow.decision.meters.clear();
        assert!(!touched(&Changes::new(&[RuleChange::Meter(3)]), &flow));
    }

    /// A lookup after a rewrite kept without what it saw (as a kernel entry keeps it) takes
    /// any rule added to its table as a match.
    #[test]
    fn a_lookup_kept_unseen_takes_any_rule_added_to_its_table() {
        let written = TableLookup {
            table: 1,
            found: None,
            seen: Seen::Written(Box::new(exact(&[(Field::NwDst, 7)]))),
        };
        let other_host = || Changes::new(&[added(1, 5, exact(&[(Field::NwDst, 8)]))]);
        let flow = |lookup| megaflow(Match::ANY, &[], vec![lookup]);
        assert!(!touched(&other_host(), &flow(written.clone())));
        assert!(touched(&other_host(), &flow(written.unseen())));
        assert_eq!(lookup(0, Some(3)).unseen(), lookup(0, Some(3)));
    }

    #[test]
    fn a_rule_added_touches_lookups_it_could_win() {
        let to_b = exact(&[(Field::DlDst, 0xb)]);
        let flow = megaflow(to_b, &[1], vec![lookup(0, Some(10)), lookup(2, None)]);
        let touch = |change| touched(&Changes::new(&[change]), &flow);
        // Another destination: no packet of the megaflow matches it.
        assert!(!touch(added(2, 5, exact(&[(Field::DlDst, 0xc)]))));
        assert!(touch(added(2, 5, to_b)));
        // A field the megaflow leaves open: some packet may match.
        assert!(touch(added(2, 5, exact(&[(Field::NwDst, 7)]))));
        // A table it did not look up.
        assert!(!touch(added(1, 5, to_b)));
        // In table 0 it found priority 10: a rule of 10 is younger and loses, 11 wins.
        assert!(!touch(added(0, 10, to_b)));
        assert!(touch(added(0, 11, to_b)));
        // Metadata and registers are zero as the packet arrives.
        assert!(!touch(added(2, 5, exact(&[(Field::Reg(0), 1)]))));
        assert!(touch(added(2, 5, exact(&[(Field::Reg(0), 0)]))));
    }

    /// After an action wrote the flow, a lookup's test uses what it saw: the bits written,
    /// and the packet's pinned bits.
    #[test]
    fn a_lookup_after_a_rewrite_is_tested_on_what_it_saw() {
        let mut input = FlowBits::ZERO;
        Field::DlDst.set(&mut input, 0xb);
        Field::NwDst.set(&mut input, 0x0a00_0001);
        let mut pinned = FlowBits::ZERO;
        Field::DlDst.or_mask(&mut pinned, Field::DlDst.full_mask());
        let mut flow = input;
        Field::Reg(1).set(&mut flow, 7);
        Field::NwDst.set(&mut flow, 0x0a00_0009);
        let seen = seen(&input, &flow, &pinned, &FlowBits::ZERO, 0);
        assert!(matches!(seen, Seen::Written(_)));
        let flow = megaflow(
            exact(&[(Field::DlDst, 0xb)]),
            &[],
            vec![TableLookup {
                table: 1,
                found: None,
                seen,
            }],
        );
        let touch =
            |fields: &[(Field, u128)]| touched(&Changes::new(&[added(1, 1, exact(fields))]), &flow);
        assert!(touch(&[(Field::Reg(1), 7), (Field::DlDst, 0xb)]));
        assert!(!touch(&[(Field::Reg(1), 8)]));
        assert!(!touch(&[(Field::Reg(2), 1)]));
        assert!(!touch(&[(Field::NwDst, 0x0a00_0001)]));
        assert!(touch(&[(Field::NwDst, 0x0a00_0009)]));
        assert!(!touch(&[(Field::DlDst, 0xc)]));
        // The packet's own bits the megaflow leaves open.
        assert!(touch(&[(Field::NwSrc, 5)]));
    }

    /// A field computed from packet bits (`dec_ttl`) may differ between the megaflow's
    /// packets: the test takes it as unknown.
    #[test]
    fn a_derived_field_is_unknown() {
        let mut input = FlowBits::ZERO;
        Field::NwTtl.set(&mut input, 64);
        let mut flow = input;
        Field::NwTtl.set(&mut flow, 63);
        let mut derived = FlowBits::ZERO;
        Field::NwTtl.or_mask(&mut derived, Field::NwTtl.full_mask());
        let all = FlowBits::ALL_ONES;
        let Seen::Written(saw) = seen(&input, &flow, &all, &derived, 0) else {
            panic!("the flow was written");
        };
        assert_eq!(Field::NwTtl.get(saw.mask()), 0);
        assert_eq!(Field::NwDst.get(saw.mask()), 0xffff_ffff);
        assert_eq!(
            seen(&input, &input, &all, &FlowBits::ZERO, 0),
            Seen::Arrived
        );
        // Past the lookups that keep theirs, what was seen is not kept.
        assert_eq!(seen(&input, &flow, &all, &derived, MAX_SEEN), Seen::Unknown);
        assert_eq!(
            seen(&input, &input, &all, &FlowBits::ZERO, MAX_SEEN),
            Seen::Arrived
        );
    }
}
