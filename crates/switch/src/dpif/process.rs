//! One frame through the datapath, without I/O: parse once, find the decision through the
//! thread's caches, execute the actions. The bridge's shared state (rules, learning table,
//! offload: a [`SharedState`]) is locked only in a burst that needs it ([`BurstLock`]): a
//! cached decision touches nothing another thread writes (DESIGN rule 3), `normal` included
//! while the thread's [`MacView`] knows both addresses.

use core::time::Duration;
use std::sync::{Mutex, MutexGuard};

use wirespeed_packet::IpProtocol;
use wirespeed_packet::MacAddr;
use wirespeed_packet::flow_key::{FlowKey, HeaderOffsets};
use wirespeed_packet::partial_checksum;

use crate::action::Action;
use crate::dpif::flow_cache::FlowCache;
use crate::dpif::thread_cache::lock;
use crate::dpif::upcall::{Decision, SharedState};
use crate::execute::rewrite::PacketHeaders;
use crate::execute::{self, ActionContext, DropReason, Learning, Packet, Verdict};
use crate::extract::extract;
use crate::field::{FlowBits, PacketKey};
use crate::frame::Frame;
use crate::mac_learning::mac_view::MacView;

/// The bridge's [`SharedState`] as one poll-mode thread reaches it during a burst: locked the
/// first time the burst needs it (a miss, an address the thread's view of the learning table
/// cannot answer, the offload), held until the burst ends ([`BurstLock::release`]).
pub struct BurstLock<'a> {
    shared: &'a Mutex<dyn SharedState + Send>,
    macs: &'a mut MacView,
    guard: Option<MutexGuard<'a, dyn SharedState + Send>>,
    /// The bridge's ports (fixed when it opened), for `flood`, without the lock.
    ports: &'a [u32],
    /// The bridge offloads flows: each decision the kernel could take is offered to it.
    offload: bool,
    taken: u64,
}

impl<'a> BurstLock<'a> {
    pub fn new(
        shared: &'a Mutex<dyn SharedState + Send>,
        macs: &'a mut MacView,
        ports: &'a [u32],
        offload: bool,
    ) -> BurstLock<'a> {
        BurstLock {
            shared,
            macs,
            guard: None,
            ports,
            offload,
            taken: 0,
        }
    }

    /// The shared state, locked now if it is not yet.
    pub fn get(&mut self) -> &mut (dyn SharedState + Send + 'a) {
        let (shared, taken) = (self.shared, &mut self.taken);
        &mut **self.guard.get_or_insert_with(|| {
            *taken += 1;
            lock(shared)
        })
    }

    /// Ends the burst: unlocks the shared state if it was taken.
    pub fn release(&mut self) {
        self.guard = None;
    }

    /// Whether the shared state is locked now.
    pub fn is_locked(&self) -> bool {
        self.guard.is_some()
    }

    /// How many times the shared state was locked.
    pub fn taken(&self) -> u64 {
        self.taken
    }
}

impl Learning for BurstLock<'_> {
    fn learn(&mut self, vlan: u16, mac: MacAddr, port: u32, now: Duration) {
        if mac.is_multicast() || self.macs.knows_source(vlan, mac, port, now) {
            return;
        }
        let table = self.get().mac_table();
        table.learn(vlan, mac, port, now);
        let learned = table.entry(vlan, mac).filter(|e| e.port == port);
        if let Some(entry) = learned {
            self.macs.record(vlan, mac, entry);
        }
    }

    fn lookup(&mut self, vlan: u16, mac: MacAddr, now: Duration) -> Option<u32> {
        if let Some(port) = self.macs.lookup(vlan, mac, now) {
            return Some(port);
        }
        let table = self.get().mac_table();
        let port = table.lookup(vlan, mac, now)?;
        let entry = table.entry(vlan, mac)?;
        self.macs.record(vlan, mac, entry);
        Some(port)
    }
}

/// Parses, classifies and executes one received frame, writing what became of it into
/// `verdict` (kept by the caller across packets); see [`execute::execute`] for `emit`. The
/// decision comes from `cache`; `shared` is locked only for a miss, a `normal` action its
/// view of the learning table cannot answer, or a decision the offload may take.
pub fn process(
    cache: &mut FlowCache,
    shared: &mut BurstLock<'_>,
    frame: &mut Frame<'_>,
    in_port: u32,
    now: Duration,
    verdict: &mut Verdict,
    emit: &mut impl FnMut(&[u8], &[u32]),
) {
    let (flow, offsets) = extract(frame.data(), in_port);
    let headers = PacketHeaders::of_flow(&flow, offsets);
    let hash = PacketKey::of(&flow).hash64();
    let id = match cache.hit(&flow, hash) {
        Some(id) => id,
        None => cache.miss(shared.get().rules(), &flow, hash),
    };
    let decision = &cache.credit(id, frame.len(), now).decision;
    if let Some(reason) = drop_reason(decision) {
        return verdict.drop_for(reason);
    }
    let completed = complete_checksum(frame, &offsets, headers.nw_proto);
    let mut packet = Packet {
        frame,
        headers,
        flow,
        in_port,
    };
    if decision.actions.contains(&Action::Normal) {
        shared.macs.revalidate();
    }
    let mut bridge = ActionContext {
        ports: shared.ports,
        learning: shared,
        now,
    };
    execute::execute(&decision.actions, &mut packet, &mut bridge, verdict, emit);
    if let Some(origin) = decision.packet_in {
        verdict.packet_in = origin;
    }
    offer_to_offload(shared, frame.data(), in_port, decision, completed, now);
}

/// Runs `actions` (no table jumps) on one frame, as for a packet that came in on `in_port`
/// (an OpenFlow PACKET_OUT): no cache, no offload.
pub fn execute_given(
    shared: &mut BurstLock<'_>,
    frame: &mut Frame<'_>,
    in_port: u32,
    actions: &[Action],
    now: Duration,
    verdict: &mut Verdict,
    emit: &mut impl FnMut(&[u8], &[u32]),
) {
    let (key, offsets) = FlowKey::parse_with_offsets(frame.data(), in_port);
    complete_checksum(frame, &offsets, key.nw_proto);
    let mut packet = Packet {
        frame,
        headers: PacketHeaders::new(&key, offsets),
        flow: FlowBits::from_key(&key),
        in_port,
    };
    if actions.contains(&Action::Normal) {
        shared.macs.revalidate();
    }
    let mut bridge = ActionContext {
        ports: shared.ports,
        learning: shared,
        now,
    };
    execute::execute(actions, &mut packet, &mut bridge, verdict, emit);
    verdict.packet_in = crate::rule::PacketInOrigin::of(None);
}

/// Why a decision drops every packet, if it does.
fn drop_reason(decision: &Decision) -> Option<DropReason> {
    if decision.too_deep {
        return Some(DropReason::ResubmitLimit);
    }
    if !decision.actions.is_empty() {
        return None;
    }
    Some(match decision.rules.is_empty() {
        true => DropReason::TableMiss,
        false => DropReason::NoOutput,
    })
}

/// Completes a TCP or UDP checksum the sender left partial: a host that offloads transmit
/// checksums (veth's default) leaves them so, and its receiver would drop the frame as it is.
/// Whether it wrote to the frame.
fn complete_checksum(frame: &mut Frame<'_>, offsets: &HeaderOffsets, nw_proto: u8) -> bool {
    match (offsets.l3, offsets.l4) {
        (Some(l3), Some(l4)) if nw_proto == IpProtocol::TCP.0 || nw_proto == IpProtocol::UDP.0 => {
            partial_checksum::complete_in_frame(frame.data_mut(), l3, l4)
        }
        _ => false,
    }
}

/// Hands an executed decision to the offload when it could take it. Only `output:N` and
/// `normal` decisions can go to the kernel's table; a packet that locked nothing changed no
/// learned address, so it leaves the offload as it was.
fn offer_to_offload(
    shared: &mut BurstLock<'_>,
    frame: &[u8],
    in_port: u32,
    decision: &Decision,
    completed: bool,
    now: Duration,
) {
    let offloadable = !completed
        && matches!(
            decision.actions.as_slice(),
            [Action::Output(_)] | [Action::Normal]
        );
    if !shared.offload || !(offloadable || shared.is_locked()) {
        return;
    }
    shared
        .get()
        .after_decision(frame, in_port, decision, completed, now);
}
