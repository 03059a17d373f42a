//! The megaflow cache: wildcarded flows and their decisions, found by tuple-space search (one
//! hash table per distinct mask, OVS's `dpcls`). Entries carry no priority: each one matches only
//! packets that agree with its installing packet on every bit the slow path examined, and all
//! such packets get the same decision, so two entries that overlap agree.

use core::time::Duration;
use std::collections::HashMap;

use crate::dpif::digest::Digest;
use crate::dpif::process::Plan;
use crate::dpif::upcall::Decision;
use crate::field::{Field, FlowBits, FlowHashBuilder, PacketKey};
use crate::flow_match::Match;

/// OVS's default `flow-limit`.
pub const DEFAULT_MEGAFLOW_CAPACITY: usize = 200_000;

/// Index of a megaflow in its cache.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub struct MegaflowId(pub u32);

/// One cached wildcarded flow.
#[derive(Clone, Debug)]
pub struct Megaflow {
    pub flow_match: Match,
    /// Fixed when the megaflow is installed: its cache keeps a [`Digest`] of it made then,
    /// which revalidation trusts, so a megaflow that should decide otherwise is replaced,
    /// never edited.
    pub decision: Decision,
    pub n_packets: u64,
    pub n_bytes: u64,
    /// When its last packet came (the bridge's clock).
    pub used: Duration,
    /// How much of the counts has been credited to the decision's rules.
    pub credited: (u64, u64),
    /// When it was installed: its first packet's time (the bridge's clock).
    pub created: Duration,
    /// How much of the counts has gone into flow records (IPFIX), apart from the rules'.
    pub exported: (u64, u64),
    /// When its counts were last taken for flow records (its installation before): the
    /// packets counted since came after.
    pub exported_at: Duration,
    /// TCP's flags of the packets counted since the last flow record, ORed.
    pub tcp_flags: u16,
}

/// What a megaflow counted since its counts last went into a flow record.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct Unexported {
    pub packets: u64,
    pub bytes: u64,
    pub tcp_flags: u16,
    /// Those packets came after this (the bridge's clock): when the counts were last taken,
    /// or the megaflow installed.
    pub since: Duration,
}

impl Megaflow {
    /// A megaflow installed at `now`, no packet counted yet.
    pub fn new(flow_match: Match, decision: Decision, now: Duration) -> Megaflow {
        Megaflow {
            flow_match,
            decision,
            n_packets: 0,
            n_bytes: 0,
            used: now,
            credited: (0, 0),
            created: now,
            exported: (0, 0),
            exported_at: now,
            tcp_flags: 0,
        }
    }

    /// Whether packets came since its counts were last credited to the rules.
    pub fn has_uncredited(&self) -> bool {
        self.n_packets != self.credited.0
    }

    /// Counts not yet credited to the rules, marked credited.
    pub fn take_uncredited(&mut self) -> (u64, u64) {
        let new = (
            self.n_packets - self.credited.0,
            self.n_bytes - self.credited.1,
        );
        self.credited = (self.n_packets, self.n_bytes);
        new
    }

    /// Counts not yet in a flow record, marked as in one at `now`.
    pub fn take_unexported(&mut self, now: Duration) -> Unexported {
        let new = Unexported {
            packets: self.n_packets - self.exported.0,
            bytes: self.n_bytes - self.exported.1,
            tcp_flags: std::mem::take(&mut self.tcp_flags),
            since: self.exported_at,
        };
        self.exported = (self.n_packets, self.n_bytes);
        self.exported_at = now;
        new
    }
}

/// The bits a megaflow matches exactly when each megaflow must be one flow of a flow record
/// (IPFIX): the input port, the Ethernet type, the VLAN tag (whether there is one too, so
/// every packet has the same L2 header length), the destination MAC (where `normal` sends
/// it), the IP addresses and protocol, the transport ports or ICMP type and code, and the
/// tunnel's VNI and outer addresses for a packet that came out of one. More exact bits never change a decision, only how many megaflows there are: one per
/// such flow, as Open vSwitch's megaflows are with IPFIX on.
pub fn flow_record_mask(flow: &FlowBits) -> FlowBits {
    let mut mask = FlowBits::ZERO;
    let mut exact = |fields: &[Field]| {
        for field in fields {
            field.or_mask(&mut mask, field.full_mask());
        }
    };
    exact(&[Field::InPort, Field::DlType, Field::VlanTci, Field::DlDst]);
    // A packet out of a tunnel: the record says which far end and VNI it came from.
    if Field::TunDst.get(flow) != 0 {
        exact(&[Field::TunId, Field::TunSrc, Field::TunDst]);
    }
    match Field::DlType.get(flow) as u16 {
        IPV4 => exact(&[Field::NwSrc, Field::NwDst, Field::NwProto]),
        IPV6 => exact(&[Field::Ipv6Src, Field::Ipv6Dst, Field::NwProto]),
        _ => return mask,
    }
    match Field::NwProto.get(flow) as u8 {
        TCP | UDP => exact(&[Field::TpSrc, Field::TpDst]),
        ICMP | ICMPV6 => exact(&[Field::IcmpType, Field::IcmpCode]),
        _ => {}
    }
    mask
}

const IPV4: u16 = wirespeed_packet::EtherType::IPV4.0;
const IPV6: u16 = wirespeed_packet::EtherType::IPV6.0;
const TCP: u8 = wirespeed_packet::IpProtocol::TCP.0;
const UDP: u8 = wirespeed_packet::IpProtocol::UDP.0;
const ICMP: u8 = wirespeed_packet::IpProtocol::ICMP.0;
const ICMPV6: u8 = wirespeed_packet::IpProtocol::ICMPV6.0;

struct MegaflowSubtable {
    mask: FlowBits,
    flows: HashMap<PacketKey, MegaflowId, FlowHashBuilder>,
    hits: u64,
}

pub struct MegaflowCache {
    subtables: Vec<MegaflowSubtable>,
    megaflows: Vec<Megaflow>,
    /// What the datapath runs for each megaflow, worked out once from its decision.
    plans: Vec<Plan>,
    /// Each megaflow's decision in bits, for the control side's passes over them all.
    digests: Vec<Digest>,
    capacity: usize,
}

impl MegaflowCache {
    pub fn new(capacity: usize) -> MegaflowCache {
        MegaflowCache {
            subtables: Vec::new(),
            megaflows: Vec::new(),
            plans: Vec::new(),
            digests: Vec::new(),
            capacity,
        }
    }

    pub fn len(&self) -> usize {
        self.megaflows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.megaflows.is_empty()
    }

    pub fn is_full(&self) -> bool {
        self.megaflows.len() >= self.capacity
    }

    pub fn subtable_count(&self) -> usize {
        self.subtables.len()
    }

    /// Probes each mask's table for an arriving packet's `flow`; the first hit wins (they all
    /// agree, see the module docs).
    pub fn lookup(&mut self, flow: &FlowBits) -> Option<MegaflowId> {
        for subtable in &mut self.subtables {
            if let Some(&id) = subtable.flows.get(&PacketKey::masked(flow, &subtable.mask)) {
                subtable.hits += 1;
                return Some(id);
            }
        }
        None
    }

    pub fn get(&self, id: MegaflowId) -> &Megaflow {
        &self.megaflows[id.0 as usize]
    }

    pub fn credit(&mut self, id: MegaflowId, bytes: usize, now: Duration) -> &Megaflow {
        self.credit_with_plan(id, bytes, 0, now).0
    }

    /// [`Self::credit`] of a packet with TCP's flags `tcp_flags` (0: none, or not TCP), with
    /// the megaflow's [`Plan`].
    #[inline]
    pub fn credit_with_plan(
        &mut self,
        id: MegaflowId,
        bytes: usize,
        tcp_flags: u16,
        now: Duration,
    ) -> (&Megaflow, Plan) {
        let megaflow = &mut self.megaflows[id.0 as usize];
        megaflow.n_packets += 1;
        megaflow.n_bytes += bytes as u64;
        if tcp_flags != 0 {
            megaflow.tcp_flags |= tcp_flags;
        }
        megaflow.used = now;
        (megaflow, self.plans[id.0 as usize])
    }

    /// Installs a megaflow, its first packet come at `now`; the caller flushes first when
    /// [`Self::is_full`].
    pub fn insert(&mut self, flow_match: Match, decision: Decision, now: Duration) -> MegaflowId {
        let id = MegaflowId(self.megaflows.len() as u32);
        let mask = *flow_match.mask();
        let index = match self.subtables.iter().position(|s| s.mask == mask) {
            Some(index) => index,
            None => {
                self.subtables.push(MegaflowSubtable {
                    mask,
                    flows: HashMap::default(),
                    hits: 0,
                });
                self.subtables.len() - 1
            }
        };
        let key = PacketKey::masked(flow_match.value(), &mask);
        self.subtables[index].flows.insert(key, id);
        self.plans.push(Plan::of(&decision));
        self.digests.push(Digest::of(&decision));
        self.megaflows
            .push(Megaflow::new(flow_match, decision, now));
        id
    }

    /// Puts the most-hit masks first, so common flows probe fewer tables (OVS re-sorts its
    /// subtables by hit count every second; the caller picks the moment).
    pub fn sort_subtables(&mut self) {
        self.subtables
            .sort_by_key(|subtable| core::cmp::Reverse(subtable.hits));
        for subtable in &mut self.subtables {
            subtable.hits = 0;
        }
    }

    pub fn clear(&mut self) {
        self.subtables.clear();
        self.megaflows.clear();
        self.plans.clear();
        self.digests.clear();
    }

    /// Removes the megaflows `stale` picks (given each one's digest first, and the
    /// megaflow to look into) and hands them back, with where each megaflow went:
    /// `moved[old id]` is its new id, None if it was removed. The last megaflows move into
    /// the places freed, so a change that touches a few of many moves a few (the rest keep
    /// their places); each keeps its counts and plan.
    pub fn remove_where(
        &mut self,
        mut stale: impl FnMut(&Digest, &Megaflow) -> bool,
    ) -> (Vec<Megaflow>, Vec<Option<MegaflowId>>) {
        let picked: Vec<usize> = (self.digests.iter())
            .zip(&self.megaflows)
            .enumerate()
            .filter(|(_, (digest, megaflow))| stale(digest, megaflow))
            .map(|(i, _)| i)
            .collect();
        if picked.is_empty() {
            return (Vec::new(), Vec::new());
        }
        let mut moved: Vec<Option<MegaflowId>> = (0..self.megaflows.len() as u32)
            .map(|i| Some(MegaflowId(i)))
            .collect();
        // `at[place]`: the old id of the megaflow there now.
        let mut at: Vec<u32> = (0..self.megaflows.len() as u32).collect();
        let mut removed = Vec::with_capacity(picked.len());
        // From the last picked down, so the megaflow moved into a freed place was not
        // picked (every picked one above it has gone already).
        for &place in picked.iter().rev() {
            let gone = self.megaflows.swap_remove(place);
            self.plans.swap_remove(place);
            self.digests.swap_remove(place);
            // Its table's entry names its place; `moved` its old id.
            Self::relink(&mut self.subtables, &gone, MegaflowId(place as u32), None);
            moved[at[place] as usize] = None;
            let last = at.pop().expect("one place a megaflow");
            if place < at.len() {
                at[place] = last;
                let (from, to) = (MegaflowId(at.len() as u32), MegaflowId(place as u32));
                moved[last as usize] = Some(to);
                Self::relink(&mut self.subtables, &self.megaflows[place], from, Some(to));
            }
            removed.push(gone);
        }
        self.subtables.retain(|subtable| !subtable.flows.is_empty());
        (removed, moved)
    }

    /// Points `megaflow`'s entry in its mask's table, if it is `id`'s (an entry replaced by
    /// a later insert of the same flow is not), at `new`, or takes it out (None).
    fn relink(
        subtables: &mut [MegaflowSubtable],
        megaflow: &Megaflow,
        id: MegaflowId,
        new: Option<MegaflowId>,
    ) {
        let mask = megaflow.flow_match.mask();
        let Some(subtable) = subtables.iter_mut().find(|s| s.mask == *mask) else {
            return;
        };
        let key = PacketKey::masked(megaflow.flow_match.value(), mask);
        match (subtable.flows.get_mut(&key), new) {
            (Some(entry), Some(new)) if *entry == id => *entry = new,
            (Some(entry), None) if *entry == id => {
                subtable.flows.remove(&key);
            }
            _ => {}
        }
    }

    /// Empties the cache, handing back its megaflows.
    pub fn take_all(&mut self) -> Vec<Megaflow> {
        self.subtables.clear();
        self.plans.clear();
        self.digests.clear();
        std::mem::take(&mut self.megaflows)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Megaflow> {
        self.megaflows.iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Megaflow> {
        self.megaflows.iter_mut()
    }

    /// Each megaflow with its digest.
    pub fn iter_mut_digested(&mut self) -> impl Iterator<Item = (&Digest, &mut Megaflow)> {
        self.digests.iter().zip(self.megaflows.iter_mut())
    }

    pub fn as_mut_slice(&mut self) -> &mut [Megaflow] {
        &mut self.megaflows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::Action;
    use crate::field::Field;

    #[test]
    fn wildcarded_hit_and_miss() {
        let mut cache = MegaflowCache::new(16);
        let mut flow_match = Match::ANY;
        flow_match.add(Field::InPort, 1, u128::MAX).unwrap();
        let decision = Decision {
            actions: vec![Action::Output(2)],
            ..Decision::default()
        };
        let id = cache.insert(flow_match, decision.clone(), Duration::ZERO);
        let mut flow = FlowBits::ZERO;
        Field::InPort.set(&mut flow, 1);
        Field::NwDst.set(&mut flow, 0x0a00_0001);
        assert_eq!(cache.lookup(&flow), Some(id));
        assert_eq!(cache.credit(id, 60, Duration::ZERO).decision, decision);
        Field::InPort.set(&mut flow, 2);
        assert_eq!(cache.lookup(&flow), None);
        assert_eq!((cache.len(), cache.subtable_count()), (1, 1));
        cache.clear();
        assert!(cache.is_empty());
    }

    /// A megaflow ORs its packets' TCP flags until a flow record takes them.
    #[test]
    fn tcp_flags_gather_until_taken() {
        let mut cache = MegaflowCache::new(16);
        let id = cache.insert(Match::ANY, Decision::default(), Duration::ZERO);
        for flags in [0x002, 0x010, 0x018] {
            cache.credit_with_plan(id, 60, flags, Duration::ZERO);
        }
        let megaflow = &mut cache.megaflows[id.0 as usize];
        let taken = megaflow.take_unexported(Duration::from_secs(2));
        assert_eq!(
            taken,
            Unexported {
                packets: 3,
                bytes: 180,
                tcp_flags: 0x01a,
                since: Duration::ZERO,
            }
        );
        // The next packets came after the counts were taken.
        assert_eq!(
            megaflow.take_unexported(Duration::from_secs(3)),
            Unexported {
                since: Duration::from_secs(2),
                ..Unexported::default()
            }
        );
    }

    #[test]
    fn one_mask_many_megaflows_each_found() {
        let mut cache = MegaflowCache::new(10_000);
        let mut ids = Vec::new();
        for nw_dst in 0..1000u128 {
            let mut flow_match = Match::ANY;
            flow_match.add(Field::InPort, 1, u128::MAX).unwrap();
            flow_match.add(Field::NwDst, nw_dst, u128::MAX).unwrap();
            ids.push(cache.insert(flow_match, Decision::default(), Duration::ZERO));
        }
        assert_eq!(cache.subtable_count(), 1);
        for (nw_dst, id) in ids.into_iter().enumerate() {
            let mut flow = FlowBits::ZERO;
            Field::InPort.set(&mut flow, 1);
            Field::NwDst.set(&mut flow, nw_dst as u128);
            Field::TpSrc.set(&mut flow, 7);
            assert_eq!(cache.lookup(&flow), Some(id));
            Field::InPort.set(&mut flow, 2);
            assert_eq!(cache.lookup(&flow), None);
        }
    }

    /// Megaflow `n` of [`removals_move_only_the_last_megaflows`]: in_port=n, and for odd n
    /// a second mask (nw_dst too); its actions name it.
    fn numbered(n: u32) -> (Match, Decision, FlowBits) {
        let mut flow_match = Match::ANY;
        flow_match.add(Field::InPort, n.into(), u128::MAX).unwrap();
        let mut flow = FlowBits::ZERO;
        Field::InPort.set(&mut flow, n.into());
        if n % 2 == 1 {
            flow_match.add(Field::NwDst, 9, u128::MAX).unwrap();
            Field::NwDst.set(&mut flow, 9);
        }
        let decision = Decision {
            actions: vec![Action::Output(n)],
            rules: vec![crate::classifier::RuleId(n)],
            ..Decision::default()
        };
        (flow_match, decision, flow)
    }

    /// Every way of removing some of 8 megaflows (and of 9, one of them in twice: the first
    /// entry of its flow replaced in its table): the removed ones are handed back, `moved`
    /// says where each of the rest went, and each is found in its new place with its own
    /// decision, plan and digest. The rest keep their places unless they were last.
    #[test]
    fn removals_move_only_the_last_megaflows() {
        for twice in [false, true] {
            let n = if twice { 9 } else { 8 };
            for picks in 0u32..1 << n {
                let mut cache = MegaflowCache::new(16);
                for i in 0..n {
                    let (flow_match, decision, _) = numbered(i.min(7));
                    cache.insert(flow_match, decision, Duration::ZERO);
                }
                let picked = |i: u32| picks >> i & 1 == 1;
                let mut seen = 0u32;
                let (removed, moved) = cache.remove_where(|_, _| {
                    seen += 1;
                    picked(seen - 1)
                });
                if picks == 0 {
                    assert!(removed.is_empty() && moved.is_empty());
                    continue;
                }
                let port = |m: &Megaflow| match m.decision.actions[..] {
                    [Action::Output(port)] => port,
                    _ => unreachable!("numbered megaflows output"),
                };
                let mut gone: Vec<u32> = removed.iter().map(port).collect();
                gone.sort_unstable();
                let want: Vec<u32> = (0..n).filter(|&i| picked(i)).map(|i| i.min(7)).collect();
                assert_eq!(gone, want, "picks {picks:b}");
                assert_eq!(cache.len() as u32, n - picks.count_ones());
                for old in 0..n {
                    let Some(new) = moved[old as usize] else {
                        assert!(picked(old));
                        continue;
                    };
                    assert!(!picked(old));
                    assert!(new.0 == old || old >= cache.len() as u32, "{old} moved");
                    let (flow_match, decision, flow) = numbered(old.min(7));
                    let megaflow = cache.get(new);
                    assert_eq!(
                        (&megaflow.flow_match, &megaflow.decision),
                        (&flow_match, &decision)
                    );
                    assert_eq!(cache.plans[new.0 as usize], Plan::of(&decision));
                    assert_eq!(cache.digests[new.0 as usize], Digest::of(&decision));
                    // The table has the flow's last entry: the first of 7's (replaced) is
                    // found by none, as before the removals.
                    let shadowed = old == 7 && twice;
                    assert_eq!(cache.lookup(&flow) == Some(new), !shadowed, "{old}");
                }
                // A flow whose table entry went is found nowhere; tables emptied go.
                for m in 0..8 {
                    let entry = if twice && m == 7 { 8 } else { m };
                    assert_eq!(cache.lookup(&numbered(m).2).is_some(), !picked(entry));
                }
                let entered = |i: u32| !(picked(i) || twice && i == 7);
                let masks = (0..n).filter(|&i| entered(i)).map(|i| i.min(7) % 2);
                let masks: std::collections::HashSet<u32> = masks.collect();
                assert_eq!(cache.subtable_count(), masks.len());
            }
        }
    }
}
