//! One frame through the datapath, without I/O: parse once, find the decision through the
//! thread's caches, execute the actions. The bridge's shared state (rules, learning table,
//! offload: a [`SharedState`]) is locked only in a burst that needs it ([`BurstLock`]): a
//! cached decision touches nothing another thread writes (DESIGN rule 3), `normal` included
//! while the thread's [`MacView`] knows both addresses.

use core::time::Duration;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::{Mutex, MutexGuard};

use wirespeed_packet::IpProtocol;
use wirespeed_packet::MacAddr;
use wirespeed_packet::flow_key::{FlowKey, HeaderOffsets};
use wirespeed_packet::{checksum, partial_checksum};

use crate::action::Action;
use crate::dpif::flow_cache::FlowCache;
use crate::dpif::megaflow::Megaflow;
use crate::dpif::thread_cache::lock;
use crate::dpif::upcall::{Decision, SharedState};
use crate::execute::rewrite::PacketHeaders;
use crate::execute::{self, ActionContext, DropReason, Learning, Packet, Verdict};
use crate::extract::{extract, extract_packet};
use crate::field::{Field, FlowBits, TunnelMeta, TunnelOut};
use crate::frame::{Frame, Tail};
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
#[inline]
pub fn process(
    cache: &mut FlowCache,
    shared: &mut BurstLock<'_>,
    frame: &mut Frame<'_>,
    in_port: u32,
    now: Duration,
    verdict: &mut Verdict,
    emit: &mut impl FnMut(&[u8], &[u32], TunnelOut),
) {
    process_with(cache, shared, frame, in_port, None, now, verdict, emit);
}

/// [`process`] for the inner frame of a tunnel packet, popped by tunnel port `in_port`:
/// `tunnel` goes into its flow.
#[allow(clippy::too_many_arguments)]
pub fn process_tunnelled(
    cache: &mut FlowCache,
    shared: &mut BurstLock<'_>,
    frame: &mut Frame<'_>,
    in_port: u32,
    tunnel: &TunnelMeta,
    now: Duration,
    verdict: &mut Verdict,
    emit: &mut impl FnMut(&[u8], &[u32], TunnelOut),
) {
    process_with(
        cache,
        shared,
        frame,
        in_port,
        Some(tunnel),
        now,
        verdict,
        emit,
    );
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn process_with(
    cache: &mut FlowCache,
    shared: &mut BurstLock<'_>,
    frame: &mut Frame<'_>,
    in_port: u32,
    tunnel: Option<&TunnelMeta>,
    now: Duration,
    verdict: &mut Verdict,
    emit: &mut impl FnMut(&[u8], &[u32], TunnelOut),
) {
    // Used where it was returned, not moved out: copying the flow out of the return slot
    // read it back with wider loads than it was written with (a store-forwarding stall).
    // A packet of several frames: parsed from its head, its lengths checked against the
    // whole (out of line: one frame's parse stays the inlined `extract`).
    let mut parsed = match frame.tail().len {
        0 => extract(frame.data(), in_port),
        _ => extract_packet(frame.data(), frame.packet_len(), in_port),
    };
    if let Some(tunnel) = tunnel {
        tunnel.write(&mut parsed.0);
    }
    let (flow, offsets) = (&parsed.0, parsed.1);
    let headers = PacketHeaders::of_flow(flow, offsets);
    let id = match cache.hit(flow) {
        Some(id) => id,
        None => cache.miss(shared.get().rules(), flow, now),
    };
    let (megaflow, plan) = cache.credit_with_plan(id, frame.packet_len(), flow, now);
    let decision = &megaflow.decision;
    let normal = match plan {
        Plan::Drop(reason) => return verdict.drop_for(reason),
        Plan::Output(port) => {
            // What `execute` does for this one action, without its loop and flow copy.
            let completed = complete_checksum(frame, &offsets, headers.nw_proto);
            verdict.reset();
            verdict.tunnel = TunnelOut::of(flow);
            match port != in_port {
                true => verdict.outputs.push(port),
                false => verdict.dropped = Some(DropReason::NoOutput),
            }
            return offer_to_offload(shared, frame, in_port, megaflow, completed, now);
        }
        Plan::Execute { normal } => normal,
    };
    let completed = complete_checksum(frame, &offsets, headers.nw_proto);
    let mut packet = Packet {
        frame,
        headers,
        flow: *flow,
        in_port,
    };
    if normal {
        shared.macs.revalidate();
    }
    let mut bridge = ActionContext {
        ports: shared.ports,
        learning: shared,
        now,
        meters: &decision.meters,
    };
    execute::execute(&decision.actions, &mut packet, &mut bridge, verdict, emit);
    if let Some(origin) = decision.packet_in {
        verdict.packet_in = origin;
    }
    offer_to_offload(shared, frame, in_port, megaflow, completed, now);
}

/// What the datapath runs for a megaflow, worked out once when it is installed (a cached
/// packet then takes no look at the action list to pick its path).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Plan {
    /// Every packet is dropped, for this reason.
    Drop(DropReason),
    /// The actions are `output:port` alone (and no packet-in).
    Output(u32),
    /// Anything else: [`execute::execute`] runs the actions; `normal` says whether they
    /// include it.
    Execute { normal: bool },
}

impl Plan {
    pub fn of(decision: &Decision) -> Plan {
        if let Some(reason) = drop_reason(decision) {
            return Plan::Drop(reason);
        }
        match decision.actions.as_slice() {
            [Action::Output(port)] if decision.packet_in.is_none() => Plan::Output(*port),
            actions => Plan::Execute {
                normal: actions.contains(&Action::Normal),
            },
        }
    }
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
    emit: &mut impl FnMut(&[u8], &[u32], TunnelOut),
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
        meters: &[],
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
            match frame.tail() {
                Tail { len: 0, .. } => {
                    partial_checksum::complete_in_frame(frame.data_mut(), l3, l4)
                }
                tail => complete_in_chain(frame.data_mut(), l3, l4, tail),
            }
        }
        _ => false,
    }
}

/// True when a packet starting with `head` is TCP or UDP over IPv4 or IPv6 (tagged or not):
/// the packets whose transport checksum `complete_checksum` may complete, so the only ones
/// that need the sum of their continuation segments ([`Tail::sum`]).
pub fn may_complete_checksum(head: &[u8]) -> bool {
    let (ethertype, l3) = match head.get(12..14) {
        Some([0x81, 0x00] | [0x88, 0xa8]) => (head.get(16..18), 18),
        ethertype => (ethertype, 14),
    };
    let protocol = match ethertype {
        Some([0x08, 0x00]) => head.get(l3 + 9),
        Some([0x86, 0xdd]) => head.get(l3 + 6),
        _ => None,
    };
    matches!(protocol, Some(&6 | &17))
}

/// [`partial_checksum::complete_in_frame`] for a packet of several frames: `head` is its
/// first segment, `tail` sums up the rest. The checksum covers every segment: a tail not
/// summed (or segments that do not end where the IP packet does) is left alone, and so are
/// IPv4 fragments and IPv6 with extension headers, as for one frame.
#[cold]
#[inline(never)]
fn complete_in_chain(head: &mut [u8], l3: usize, l4: usize, tail: Tail) -> bool {
    let Some(tail_sum) = tail.sum else {
        return false;
    };
    // The protocol, where the IP packet ends, and the pseudo-header sum.
    let (protocol, end, pseudo) = match head.get(l3).map(|v| v >> 4) {
        Some(4) => {
            let Some(ip) = head.get(l3..l3 + 20) else {
                return false;
            };
            if ip[6] & 0x3f != 0 || ip[7] != 0 {
                return false;
            }
            let end = l3 + usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
            let length = end.saturating_sub(l4) as u16;
            (
                ip[9],
                end,
                checksum::pseudo_header_v4(src, dst, ip[9], length),
            )
        }
        Some(6) => {
            let Some(ip) = head.get(l3..l3 + 40) else {
                return false;
            };
            if l4 != l3 + 40 {
                return false;
            }
            let end = l4 + usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            let address = |at: usize| {
                Ipv6Addr::from(<[u8; 16]>::try_from(&ip[at..at + 16]).expect("16 bytes"))
            };
            let (src, dst) = (address(8), address(24));
            let length = (end - l4) as u32;
            (
                ip[6],
                end,
                checksum::pseudo_header_v6(&src, &dst, ip[6], length),
            )
        }
        _ => return false,
    };
    let at = l4
        + match protocol {
            6 => 16,
            17 => 6,
            _ => return false,
        };
    if end != head.len() + tail.len || l4 > end || at + 2 > head.len() {
        return false;
    }
    // The tail's sum was worked out from an even offset: after a head part of odd length
    // its bytes sit in the other lanes.
    let tail_sum = match (head.len() - l4) % 2 {
        0 => tail_sum,
        _ => tail_sum.swap_bytes(),
    };
    let field = u16::from_be_bytes([head[at], head[at + 1]]);
    let sum = |head: &[u8]| checksum::combine(&[pseudo, checksum::data(&head[l4..]), tail_sum]);
    // As for one frame: only a field holding the pseudo-header sum, in a segment that does
    // not verify, is partial.
    if field != pseudo || sum(head) == 0xffff {
        return false;
    }
    head[at..at + 2].fill(0);
    let mut check = !sum(head);
    if protocol == 17 && check == 0 {
        // RFC 768: a computed zero is sent as all ones.
        check = 0xffff;
    }
    head[at..at + 2].copy_from_slice(&check.to_be_bytes());
    true
}

/// Hands a megaflow's executed decision to the offload when it could take it. Only
/// `output:N` and `normal` decisions can go to the kernel's table; a packet that locked
/// nothing changed no learned address, so it leaves the offload as it was.
#[inline]
fn offer_to_offload(
    shared: &mut BurstLock<'_>,
    frame: &Frame<'_>,
    in_port: u32,
    megaflow: &Megaflow,
    completed: bool,
    now: Duration,
) {
    // The kernel's fast path leaves a packet of several frames to us, so one is no model
    // for an entry (its later packets would need the lock for nothing); nor is a packet of
    // a megaflow that pins TCP's flags, which the kernel's key leaves out (the flow's next
    // packets may be decided otherwise). Like a rewritten frame, it goes to the offload
    // only for what it changed in the learning table.
    if !shared.offload {
        return;
    }
    let decision = &megaflow.decision;
    // (In an ARP flow those bits are the opcode's.)
    let (value, mask) = (megaflow.flow_match.value(), megaflow.flow_match.mask());
    let by_tcp_flags = Field::TcpFlags.get(mask) != 0
        && Field::NwProto.get(value) == u128::from(IpProtocol::TCP.0);
    let unfit = completed || frame.tail().len > 0 || by_tcp_flags;
    let offloadable = !unfit
        && matches!(
            decision.actions.as_slice(),
            [Action::Output(_)] | [Action::Normal]
        );
    if !(offloadable || shared.is_locked()) {
        return;
    }
    shared
        .get()
        .after_decision(frame.data(), in_port, megaflow, unfit, now);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ofctl::flow_parse::parse_rule;
    use crate::ofproto::state::Ofproto;

    /// Ethernet 02:..:01 -> 02:..:02, IPv4 / UDP.
    const FRAME: [u8; 42] = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00, // Ethernet
        0x45, 0x00, 0x00, 0x1c, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x00, 0x00, // IPv4
        10, 0, 0, 1, 10, 0, 0, 2, // addresses
        0x04, 0xd2, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00, // UDP, no checksum
    ];

    /// A bridge's rules and state with `ports` and `rules`, nothing else.
    fn ofproto_with(ports: &[u32], rules: &[&str]) -> Ofproto {
        let mut ofproto = Ofproto::without_rules();
        for &port in ports {
            ofproto.add_port(port);
        }
        for rule in rules {
            ofproto
                .tables
                .add(parse_rule(rule).unwrap(), Duration::ZERO);
        }
        ofproto
    }

    /// The verdict and frame of `FRAME` from `in_port` through the cache (twice: a miss,
    /// then a hit), and through `execute_given` with the decision's actions.
    fn both_ways(rule: &str, in_port: u32) -> [(Verdict, Vec<u8>); 3] {
        let ofproto = ofproto_with(&[1, 2, 3], &[rule]);
        let ports = ofproto.ports().to_vec();
        let mut macs = MacView::new(&ofproto.mac_table);
        let ofproto = Mutex::new(ofproto);
        let mut cache = FlowCache::default();
        let mut run = |given: Option<&[Action]>| {
            let mut buffer = vec![0u8; 8 + FRAME.len()];
            buffer[8..].copy_from_slice(&FRAME);
            let mut frame = Frame::new(&mut buffer, 8, FRAME.len()).unwrap();
            let mut verdict = Verdict::default();
            let mut shared = BurstLock::new(&ofproto, &mut macs, &ports, false);
            let mut emit = |_: &[u8], _: &[u32], _: TunnelOut| {};
            match given {
                Some(actions) => execute_given(
                    &mut shared,
                    &mut frame,
                    in_port,
                    actions,
                    Duration::ZERO,
                    &mut verdict,
                    &mut emit,
                ),
                None => process(
                    &mut cache,
                    &mut shared,
                    &mut frame,
                    in_port,
                    Duration::ZERO,
                    &mut verdict,
                    &mut emit,
                ),
            }
            (verdict, frame.data().to_vec())
        };
        let missed = run(None);
        let hit = run(None);
        let actions = parse_rule(rule).unwrap().actions;
        let given = run(Some(&actions));
        [missed, hit, given]
    }

    /// `FRAME` from tunnel port 10 with `tun_id`, through one cache over `rules`: the
    /// verdict's outputs and tun_id.
    fn tunnelled(rules: &[&str], tun_ids: &[u64]) -> Vec<(Vec<u32>, Option<DropReason>, u64)> {
        let ofproto = ofproto_with(&[1, 2, 10], rules);
        let ports = ofproto.ports().to_vec();
        let mut macs = MacView::new(&ofproto.mac_table);
        let ofproto = Mutex::new(ofproto);
        let mut cache = FlowCache::default();
        let mut verdicts = Vec::new();
        for &id in tun_ids {
            let mut buffer = FRAME.to_vec();
            let mut frame = Frame::whole(&mut buffer);
            let mut verdict = Verdict::default();
            let mut shared = BurstLock::new(&ofproto, &mut macs, &ports, false);
            let meta = TunnelMeta {
                id,
                src: 0xc000_0202,
                dst: 0xc000_0201,
                opts: 0,
            };
            process_tunnelled(
                &mut cache,
                &mut shared,
                &mut frame,
                10,
                &meta,
                Duration::ZERO,
                &mut verdict,
                &mut |_: &[u8], _: &[u32], _: TunnelOut| {},
            );
            verdicts.push((
                verdict.outputs.as_slice().to_vec(),
                verdict.dropped,
                verdict.tunnel.id,
            ));
        }
        verdicts
    }

    #[test]
    fn the_caches_key_on_the_tunnel_metadata() {
        // The same frame with VNI 42 (twice: a miss, then a hit), 43, then 42 again: a
        // megaflow made for one VNI never answers for another.
        let rules = [
            "priority=10,in_port=10,tun_id=42,tun_src=192.0.2.2,actions=output:1",
            "priority=5,in_port=10,actions=output:2",
        ];
        let got = tunnelled(&rules, &[42, 42, 43, 42]);
        let outputs: Vec<&[u32]> = got.iter().map(|(o, _, _)| o.as_slice()).collect();
        assert_eq!(outputs, [&[1][..], &[1], &[2], &[1]]);
        // The lone output keeps the arriving tun_id for a key=flow port to send.
        assert_eq!(got[2].2, 43);
    }

    #[test]
    fn set_field_tun_id_is_what_the_outputs_after_it_send() {
        let rules = ["in_port=10,actions=set_field:7->tun_id,output:1"];
        let got = tunnelled(&rules, &[42]);
        assert_eq!(got[0], (vec![1], None, 7));
    }

    #[test]
    fn a_lone_output_runs_as_the_actions_would() {
        for (rule, in_port, outputs) in [
            ("actions=output:2", 1, &[2][..]),
            ("actions=output:2", 2, &[]),
            ("actions=output:2,output:3", 1, &[2, 3]),
            ("actions=output:3,mod_vlan_vid:5", 1, &[]),
        ] {
            let [missed, hit, given] = both_ways(rule, in_port);
            assert_eq!(missed, hit, "{rule} from {in_port}");
            assert_eq!(hit.0.outputs, given.0.outputs, "{rule} from {in_port}");
            assert_eq!(hit.0.dropped, given.0.dropped, "{rule} from {in_port}");
            assert_eq!(hit.1, given.1, "{rule} from {in_port}");
            assert_eq!(hit.0.outputs.as_slice(), outputs, "{rule} from {in_port}");
        }
    }

    /// Ethernet / IPv4 / `protocol` (TCP or UDP) with `payload` bytes, its transport
    /// checksum left partial (the pseudo-header sum) as a host offloading checksums sends it.
    fn partial(protocol: u8, payload: usize) -> Vec<u8> {
        let l4_len = if protocol == 6 { 20 } else { 8 } + payload;
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        f.extend([
            0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, protocol, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        f[16..18].copy_from_slice(&((20 + l4_len) as u16).to_be_bytes());
        let mut l4 = vec![0u8; l4_len];
        l4[..4].copy_from_slice(&[0x04, 0xd2, 0x00, 0x50]);
        match protocol {
            6 => l4[12] = 0x50,
            _ => l4[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes()),
        }
        for (i, b) in l4.iter_mut().enumerate().skip(20) {
            *b = (i * 7 + 3) as u8;
        }
        let pseudo = checksum::pseudo_header_v4(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            protocol,
            l4_len as u16,
        );
        let at = if protocol == 6 { 16 } else { 6 };
        l4[at..at + 2].copy_from_slice(&pseudo.to_be_bytes());
        f.extend(l4);
        f
    }

    /// [`partial`] over IPv6.
    fn partial6(protocol: u8, payload: usize) -> Vec<u8> {
        let v4 = partial(protocol, payload);
        let l4 = &v4[34..];
        let mut f = vec![
            2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd, 0x60, 0, 0, 0,
        ];
        f.extend((l4.len() as u16).to_be_bytes());
        f.extend([protocol, 64]);
        let (src, dst): (Ipv6Addr, Ipv6Addr) = (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        );
        f.extend(src.octets());
        f.extend(dst.octets());
        f.extend(l4);
        let pseudo = checksum::pseudo_header_v6(&src, &dst, protocol, l4.len() as u32);
        let at = 54 + if protocol == 6 { 16 } else { 6 };
        f[at..at + 2].copy_from_slice(&pseudo.to_be_bytes());
        f
    }

    #[test]
    fn a_partial_checksum_is_completed_over_every_segment() {
        let built = [
            (partial as fn(u8, usize) -> Vec<u8>, 34),
            (partial6 as fn(u8, usize) -> Vec<u8>, 54),
        ];
        for (protocol, (build, l4)) in [6, 17].into_iter().flat_map(|p| built.map(|b| (p, b))) {
            for payload in [999, 1000] {
                let f = build(protocol, payload);
                let mut whole = f.clone();
                assert!(partial_checksum::complete_in_frame(&mut whole, 14, l4));
                // Heads of odd and even lengths, tails cut into segments of odd and even
                // lengths: the same checksum as over the whole packet's bytes.
                for cut in [80, 81, 300, 301, f.len() - 1] {
                    let mut head = f[..cut].to_vec();
                    let rest = &f[cut..];
                    let at = rest.len().min(7);
                    let segments = [&rest[..at], &rest[at..]];
                    let tail = Tail {
                        len: rest.len(),
                        sum: Some(checksum::data_chained(segments)),
                    };
                    assert!(complete_in_chain(&mut head, 14, l4, tail), "cut at {cut}");
                    assert_eq!(head, whole[..cut], "{protocol}: cut at {cut}");
                    // Complete now: left as it is.
                    assert!(!complete_in_chain(&mut head, 14, l4, tail), "cut at {cut}");
                    // Without the tail's sum it cannot be completed.
                    let mut head = f[..cut].to_vec();
                    let unsummed = Tail { sum: None, ..tail };
                    assert!(!complete_in_chain(&mut head, 14, l4, unsummed));
                    // A tail that does not end where the IP packet does.
                    let short = Tail {
                        len: tail.len - 1,
                        ..tail
                    };
                    assert!(!complete_in_chain(&mut head, 14, l4, short));
                    assert_eq!(head, f[..cut]);
                }
            }
        }
    }

    #[test]
    fn heads_that_may_need_their_tail_summed() {
        assert!(may_complete_checksum(&partial(6, 0)));
        assert!(may_complete_checksum(&partial(17, 0)));
        let mut icmp = partial(17, 0);
        icmp[23] = 1;
        assert!(!may_complete_checksum(&icmp));
        let mut tagged = partial(6, 0);
        tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        assert!(may_complete_checksum(&tagged));
        assert!(!may_complete_checksum(&tagged[..20]));
        assert!(may_complete_checksum(&partial6(6, 0)));
        assert!(may_complete_checksum(&partial6(17, 0)));
        let mut icmp6 = partial6(17, 0);
        icmp6[20] = 58;
        assert!(!may_complete_checksum(&icmp6));
        assert!(!may_complete_checksum(&[]));
    }

    /// The datapath's parse and counters see a chain's whole length from its head.
    #[test]
    fn a_chain_is_parsed_and_counted_whole() {
        let f = partial(17, 5000);
        let mut ofproto = Ofproto::without_rules();
        for port in 1..=2 {
            ofproto.add_port(port);
        }
        ofproto.tables.add(
            parse_rule("priority=5,udp,tp_dst=80,actions=output:2").unwrap(),
            Duration::ZERO,
        );
        let ports = ofproto.ports().to_vec();
        let mut macs = MacView::new(&ofproto.mac_table);
        let ofproto = Mutex::new(ofproto);
        let mut cache = FlowCache::default();
        let mut head = f[..3000].to_vec();
        let frame = Frame::new(&mut head, 0, 3000).unwrap();
        let mut frame = frame.with_tail(Tail {
            len: f.len() - 3000,
            sum: None,
        });
        let mut verdict = Verdict::default();
        let mut shared = BurstLock::new(&ofproto, &mut macs, &ports, false);
        process(
            &mut cache,
            &mut shared,
            &mut frame,
            1,
            Duration::ZERO,
            &mut verdict,
            &mut |_: &[u8], _: &[u32], _: TunnelOut| {},
        );
        assert_eq!(verdict.outputs.as_slice(), &[2], "the UDP rule matched");
        let counted: Vec<(u64, u64)> = cache
            .megaflows()
            .map(|m| (m.n_packets, m.n_bytes))
            .collect();
        assert_eq!(counted, [(1, f.len() as u64)]);
    }

    #[test]
    fn plans() {
        let decision = |actions: Vec<Action>| Decision {
            actions,
            rules: vec![crate::classifier::RuleId(0)],
            ..Decision::default()
        };
        assert_eq!(
            Plan::of(&decision(vec![Action::Output(2)])),
            Plan::Output(2)
        );
        assert_eq!(
            Plan::of(&decision(vec![])),
            Plan::Drop(DropReason::NoOutput)
        );
        assert_eq!(
            Plan::of(&Decision::default()),
            Plan::Drop(DropReason::TableMiss)
        );
        assert_eq!(
            Plan::of(&decision(vec![Action::Normal])),
            Plan::Execute { normal: true }
        );
        assert_eq!(
            Plan::of(&decision(vec![Action::Output(2), Action::Output(3)])),
            Plan::Execute { normal: false }
        );
        let mut to_controller = decision(vec![Action::Output(2)]);
        to_controller.packet_in = Some(crate::rule::PacketInOrigin::of(None));
        assert_eq!(Plan::of(&to_controller), Plan::Execute { normal: false });
    }
}
