//! One poll-mode thread's side of the tunnels: what its underlays receive is popped,
//! answered (ARP) or passed on, and what it outputs to a tunnel port is pushed. Its own
//! headers per tunnel and its own counters, so no packet touches what another thread
//! writes; the shared neighbour table is read only when its generation moves.

use core::time::Duration;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Arc;

use wirespeed_packet::MacAddr;

use crate::field::{FlowHashBuilder, TunnelMeta, TunnelOut};
use crate::tunnel::endpoint::{self, ToEndpoint};
use crate::tunnel::header::{self, Arrival, Listener, OUTER_LEN, OuterTemplate, Popped};
use crate::tunnel::neighbours::{self, Known, arp_frame, parse_arp};
use crate::tunnel::pmtu::too_big_answer;
use crate::tunnel::{Remote, TunnelPort, Tunnels};

/// How long a tunnel without a neighbour waits before it asks again (an ARP request, the
/// host's tables).
const RETRY: Duration = Duration::from_secs(1);
/// How often a tunnel's underlay MTU is read again at most, when a packet is too big for it.
const MTU_LOOK: Duration = Duration::from_millis(100);
/// How long a tunnel's headers stand before the route is looked at again (it may have moved
/// to another interface, or gone).
const REVALIDATE: Duration = Duration::from_secs(5);
/// Far ends a `remote_ip=flow` tunnel keeps headers for before it looks for ones to forget:
/// the rules may name thousands over a switch's life.
const FAR_ENDS_KEPT: usize = 1024;
/// Too-big answers a thread queues between two bursts at most; more are not answered.
const MAX_TOO_BIG_ANSWERS: usize = 32;
/// Too-big answers a thread sends at most: a burst of this many, then one a millisecond
/// (the kernel's `icmp_msgs_burst` and `icmp_msgs_per_sec`; RFC 1812 §4.3.2.8 and RFC 4443
/// §2.4 (f) ask that ICMP errors be limited).
const ANSWER_BURST: u32 = 50;
const ANSWER_EVERY: Duration = Duration::from_millis(1);
/// How long a far end's headers are kept once no packet went to it (one in use is looked
/// at every [`REVALIDATE`] at most), and how often the forgetting is done.
const FORGET_AFTER: Duration = Duration::from_secs(60);

/// One tunnel port's counters, in one thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TunnelCounters {
    /// Packets popped and handed to the pipeline, and their inner frames' bytes.
    pub decap_packets: u64,
    pub decap_bytes: u64,
    /// Packets pushed and queued on the underlay, and their inner frames' bytes.
    pub encap_packets: u64,
    pub encap_bytes: u64,
    /// Not sent: the host's route to the far end is not through the underlay (or none).
    pub no_route: u64,
    /// Not sent: the next hop's MAC address is not known yet (an ARP request went out).
    pub no_neighbour: u64,
    /// Not sent: longer than the underlay's MTU once pushed (never sent cut).
    pub too_big: u64,
    /// Of those, the ones answered with ICMP "fragmentation needed" or ICMPv6 "packet too
    /// big" ([`crate::tunnel::pmtu`]).
    pub too_big_answered: u64,
}

impl TunnelCounters {
    pub fn add(&mut self, other: &TunnelCounters) {
        self.decap_packets += other.decap_packets;
        self.decap_bytes += other.decap_bytes;
        self.encap_packets += other.encap_packets;
        self.encap_bytes += other.encap_bytes;
        self.no_route += other.no_route;
        self.no_neighbour += other.no_neighbour;
        self.too_big += other.too_big;
        self.too_big_answered += other.too_big_answered;
    }

    pub fn drops(&self) -> u64 {
        self.no_route + self.no_neighbour + self.too_big
    }
}

/// Why a packet was not pushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncapDrop {
    NoRoute,
    NoNeighbour,
    TooBig,
}

/// What became of a frame an underlay received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Landing {
    /// Not the tunnels': the underlay port's packet, into the pipeline as before.
    Pipeline,
    /// Popped: the inner frame enters the pipeline on tunnel port `port`.
    Tunnel { port: u32, popped: Popped },
    /// Taken by the tunnels (ARP for a local address, a packet for a tunnel's own address)
    /// or dropped (counted): free it.
    Consumed,
    /// An ICMP echo request to a tunnel's own address: answer it in place
    /// ([`crate::tunnel::endpoint::answer_echo_in_place`]) and send it back out of the
    /// underlay it came in on.
    Echo,
}

/// A tunnel's outer headers as this thread last resolved them.
#[derive(Clone, Debug, Default)]
struct Resolved {
    template: Option<OuterTemplate>,
    /// The neighbour table's generation it was resolved at.
    generation: u64,
    /// Why the last try failed.
    failure: Option<EncapDrop>,
    /// When to look at the host's tables again: [`RETRY`] after a failure, [`REVALIDATE`]
    /// after a success.
    next_look: Duration,
}

pub struct TunnelPlane {
    tunnels: Arc<Tunnels>,
    /// Per tunnel with one far end, its headers.
    resolved: Vec<Resolved>,
    /// Per `remote_ip=flow` tunnel, each far end's headers: one per address the flows set
    /// as `tun_dst` (constants of the rules, so as many as they name; past
    /// [`FAR_ENDS_KEPT`], those unused for [`FORGET_AFTER`] are forgotten).
    by_remote: Vec<HashMap<u32, Resolved, FlowHashBuilder>>,
    /// Per tunnel, when its far ends may next be looked over for ones to forget.
    next_forget: Vec<Duration>,
    /// Per tunnel, in [`Tunnels::ports`]' order.
    pub counters: Vec<TunnelCounters>,
    /// The outer IPv4 ID of the last packet pushed (used where DF is clear): a count of
    /// this thread's, from where the clock put it, so threads seldom share a run of IDs.
    ip_id: u16,
    /// Per tunnel, what its outer headers add to an IPv4 packet ([`TunnelPort::mtu`]'s
    /// check), worked out once.
    ip_overheads: Vec<usize>,
    /// Received on an underlay where one of its tunnels listens (its address, and its UDP
    /// port or GRE), but not a packet any tunnel can take: a bad header, a fragment, Geneve
    /// critical options ([`Arrival::Malformed`]), or no tunnel port for its far end or VNI.
    pub malformed: u64,
    pub unmatched: u64,
    /// Echo requests to a tunnel's own address answered, and other packets to it taken.
    pub echoes: u64,
    pub to_endpoint: u64,
    /// The underlays' port numbers, and where the tunnels over each listen.
    underlays: Vec<u32>,
    listening: Vec<Vec<Listener>>,
    /// ARP to send: (underlay port, frame).
    pending: Vec<(u32, [u8; 42])>,
    /// Answers to packets too big for their tunnel, to come in on it once the burst is done.
    pub too_big_answers: TooBigAnswers,
    /// Answers that may be sent now, and when the last one was earned.
    answer_tokens: u32,
    answer_earned: Duration,
    /// Per tunnel, when its underlay's MTU was last read for a packet too big.
    mtu_looked: Vec<Duration>,
}

/// An answer to a packet too big for tunnel port `port`, as if its far end had sent it: the
/// pipeline takes it in on that port with `meta`, so the rules send it to the packet's
/// sender as they send the tunnel's other packets.
#[derive(Clone, Debug, Default)]
pub struct TooBigAnswer {
    pub port: u32,
    pub meta: TunnelMeta,
    pub frame: Vec<u8>,
}

/// The answers queued in a burst; their buffers are kept for the next ones.
#[derive(Debug, Default)]
pub struct TooBigAnswers {
    slots: Vec<TooBigAnswer>,
    len: usize,
}

impl TooBigAnswers {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = &TooBigAnswer> {
        self.slots[..self.len].iter()
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// The next answer's slot; none past [`MAX_TOO_BIG_ANSWERS`].
    fn next(&mut self) -> Option<&mut TooBigAnswer> {
        if self.len == MAX_TOO_BIG_ANSWERS {
            return None;
        }
        if self.len == self.slots.len() {
            self.slots.push(TooBigAnswer::default());
        }
        self.len += 1;
        Some(&mut self.slots[self.len - 1])
    }

    /// Forgets the last answer taken with `next` (none was due).
    fn unqueue(&mut self) {
        self.len -= 1;
    }
}

impl TunnelPlane {
    pub fn new(tunnels: Arc<Tunnels>) -> TunnelPlane {
        let mut underlays: Vec<u32> = tunnels.ports.iter().map(|p| p.underlay).collect();
        underlays.sort_unstable();
        underlays.dedup();
        let listening = underlays
            .iter()
            .map(|&underlay| {
                let mut over: Vec<Listener> = Vec::new();
                for p in tunnels.ports.iter().filter(|p| p.underlay == underlay) {
                    let listener = Listener {
                        local: p.local_ip,
                        dst_port: p.config.dst_port,
                        kind: p.config.kind,
                    };
                    if !over.contains(&listener) {
                        over.push(listener);
                    }
                }
                over
            })
            .collect();
        TunnelPlane {
            resolved: vec![Resolved::default(); tunnels.ports.len()],
            by_remote: vec![HashMap::default(); tunnels.ports.len()],
            next_forget: vec![Duration::ZERO; tunnels.ports.len()],
            counters: vec![TunnelCounters::default(); tunnels.ports.len()],
            ip_id: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos() as u16),
            ip_overheads: tunnels
                .ports
                .iter()
                .map(|p| p.outer_ip_overhead())
                .collect(),
            malformed: 0,
            unmatched: 0,
            echoes: 0,
            to_endpoint: 0,
            underlays,
            listening,
            pending: Vec::new(),
            too_big_answers: TooBigAnswers::default(),
            answer_tokens: ANSWER_BURST,
            answer_earned: Duration::ZERO,
            mtu_looked: vec![Duration::ZERO; tunnels.ports.len()],
            tunnels,
        }
    }

    pub fn tunnels(&self) -> &Tunnels {
        &self.tunnels
    }

    /// Whether bridge port `port` carries tunnels.
    #[inline]
    pub fn is_underlay(&self, port: u32) -> bool {
        self.underlays.contains(&port)
    }

    /// The tunnel index of bridge port `port`, if it is a tunnel port.
    #[inline]
    pub fn index_of(&self, port: u32) -> Option<usize> {
        self.tunnels.index_of(port)
    }

    /// The underlay port of tunnel `t`.
    pub fn underlay_of(&self, t: usize) -> u32 {
        self.tunnels.ports[t].underlay
    }

    /// What a packet received on underlay `in_port` at `now` is: its first frame `head`, then
    /// the frames `tail` of a chain, if any.
    pub fn arrive(&mut self, in_port: u32, head: &[u8], tail: &[&[u8]], now: Duration) -> Landing {
        if head.len() >= 14 && head[12..14] == [0x08, 0x06] {
            return self.arp(in_port, head, now);
        }
        let Some(over) = self.underlays.iter().position(|&u| u == in_port) else {
            return Landing::Pipeline;
        };
        let (dst_port, kind, popped) = match header::classify(head, tail, &self.listening[over]) {
            Arrival::Other => return self.other(in_port, head),
            Arrival::Malformed => {
                self.malformed += 1;
                return Landing::Consumed;
            }
            Arrival::Tunnel(dst_port, kind, popped) => (dst_port, kind, popped),
        };
        let (src, dst) = (
            Ipv4Addr::from(popped.meta.src),
            Ipv4Addr::from(popped.meta.dst),
        );
        let vni = popped.meta.id as u32;
        // A port with the far end's own address first, then one with remote_ip=flow.
        let takes = |p: &TunnelPort, exact: bool| {
            p.underlay == in_port
                && p.config.kind == kind
                && p.config.dst_port == dst_port
                && p.local_ip == dst
                && p.config.takes_vni(vni)
                && match p.config.remote_ip {
                    Remote::Ip(ip) => exact && ip == src,
                    Remote::Flow => !exact,
                }
        };
        let ports = &self.tunnels.ports;
        let found = ports
            .iter()
            .position(|p| takes(p, true))
            .or_else(|| ports.iter().position(|p| takes(p, false)));
        let Some(t) = found else {
            self.unmatched += 1;
            return Landing::Consumed;
        };
        let counters = &mut self.counters[t];
        counters.decap_packets += 1;
        counters.decap_bytes += popped.inner_len as u64;
        Landing::Tunnel {
            port: self.tunnels.ports[t].number,
            popped,
        }
    }

    /// A packet underlay `in_port` received that is no tunnel's: a tunnel endpoint's own
    /// (addressed to its local address: answered if an echo request to it, else taken), or
    /// the bridge's.
    #[inline]
    fn other(&mut self, in_port: u32, head: &[u8]) -> Landing {
        let locals = (self.tunnels.ports.iter())
            .filter(|p| p.underlay == in_port)
            .map(|p| (p.local_ip, p.local_mac));
        match endpoint::to_endpoint(head, locals) {
            None => Landing::Pipeline,
            Some(ToEndpoint::Echo) => {
                self.echoes += 1;
                Landing::Echo
            }
            Some(ToEndpoint::Other) => {
                self.to_endpoint += 1;
                Landing::Consumed
            }
        }
    }

    /// ARP on an underlay: for a tunnel's local address it is the tunnels' (the sender is
    /// learned, a request answered), any other is the bridge's, though what a known
    /// neighbour says of itself in it is taken (a gratuitous ARP announcing a new address).
    fn arp(&mut self, in_port: u32, frame: &[u8], now: Duration) -> Landing {
        let Some(arp) = parse_arp(frame) else {
            return Landing::Pipeline;
        };
        let neighbours = &self.tunnels.neighbours;
        let ours = self
            .tunnels
            .ports
            .iter()
            .find(|p| p.underlay == in_port && p.local_ip == arp.target_ip);
        let Some(port) = ours else {
            if neighbours.knows(arp.sender_ip) {
                neighbours.learn(arp.sender_ip, arp.sender_mac, now);
            }
            return Landing::Pipeline;
        };
        neighbours.learn(arp.sender_ip, arp.sender_mac, now);
        // A sender that no frame can be addressed to is not answered: a reply to a
        // multicast sender would go to every host of the group.
        let answerable = !arp.sender_mac.is_multicast() && arp.sender_mac != MacAddr([0; 6]);
        if arp.operation == 1 && answerable {
            let reply = arp_frame(
                2,
                port.local_mac,
                port.local_ip,
                arp.sender_mac,
                arp.sender_mac,
                arp.sender_ip,
            );
            self.pending.push((in_port, reply));
        }
        Landing::Consumed
    }

    /// Pushes tunnel `t`'s outer headers onto `packet`: its first [`OUTER_LEN`] bytes are
    /// room for them, the rest the inner frame. `out` is the flow's `tun_id` (for
    /// `key=flow`) and `tun_dst` (for `remote_ip=flow`: a flow that set none is counted
    /// `no_route`). The packet to send starts the returned number of bytes in (GRE's
    /// headers are shorter than the room).
    #[inline]
    pub fn push(
        &mut self,
        t: usize,
        packet: &mut [u8],
        out: TunnelOut,
        now: Duration,
    ) -> Result<usize, EncapDrop> {
        let inner_len = packet.len() - OUTER_LEN;
        let mtu = self.tunnels.ports[t].mtu.get() as usize;
        if inner_len + self.ip_overheads[t] > mtu && !self.mtu_grew(t, inner_len, now) {
            self.counters[t].too_big += 1;
            self.answer_too_big(t, &packet[OUTER_LEN..], out, now);
            return Err(EncapDrop::TooBig);
        }
        let port = &self.tunnels.ports[t];
        let remote = match port.config.remote_ip {
            Remote::Ip(ip) => ip,
            Remote::Flow if out.dst.is_unspecified() => {
                self.counters[t].no_route += 1;
                return Err(EncapDrop::NoRoute);
            }
            Remote::Flow => out.dst,
        };
        let vni = port.config.vni(out.id);
        let generation = self.tunnels.neighbours.generation();
        self.ip_id = self.ip_id.wrapping_add(1);
        let ip_id = self.ip_id;
        let resolved = self.slot(t, remote);
        if let Some(template) = &resolved.template
            && resolved.generation == generation
            && now < resolved.next_look
        {
            let at = template.push(packet, vni, ip_id);
            let counters = &mut self.counters[t];
            counters.encap_packets += 1;
            counters.encap_bytes += inner_len as u64;
            return Ok(at);
        }
        self.push_resolving(t, remote, packet, (vni, ip_id), now)
    }

    /// Whether the underlay's MTU, read again (at most every [`MTU_LOOK`] per tunnel), now
    /// takes an inner frame of `inner_len` bytes: an MTU raised under a running switch is
    /// followed at the first packet that needs it. (One lowered is followed as the route is
    /// looked at again, [`REVALIDATE`].)
    #[cold]
    fn mtu_grew(&mut self, t: usize, inner_len: usize, now: Duration) -> bool {
        if now < self.mtu_looked[t] + MTU_LOOK {
            return false;
        }
        self.mtu_looked[t] = now;
        let port = &self.tunnels.ports[t];
        let Some(mtu) = wirespeed_port::interface_mtu(&port.iface) else {
            return false;
        };
        port.mtu.set(mtu);
        inner_len + self.ip_overheads[t] <= mtu as usize
    }

    /// Queues the answer to `inner`, too big for tunnel `t`, where one is due
    /// ([`too_big_answer`]), coming from the far end the flow sent it to.
    #[cold]
    fn answer_too_big(&mut self, t: usize, inner: &[u8], out: TunnelOut, now: Duration) {
        if !self.may_answer(now) {
            return;
        }
        let port = &self.tunnels.ports[t];
        let remote = match port.config.remote_ip {
            Remote::Ip(ip) => ip,
            Remote::Flow if out.dst.is_unspecified() => return,
            Remote::Flow => out.dst,
        };
        let room = (port.mtu.get() as usize).saturating_sub(self.ip_overheads[t]);
        let meta = TunnelMeta {
            id: u64::from(port.config.vni(out.id)),
            src: u32::from(remote),
            dst: u32::from(port.local_ip),
            opts: 0,
        };
        let number = port.number;
        let Some(answer) = self.too_big_answers.next() else {
            return;
        };
        if !too_big_answer(inner, room, &mut answer.frame) {
            self.too_big_answers.unqueue();
            return;
        }
        (answer.port, answer.meta) = (number, meta);
        self.counters[t].too_big_answered += 1;
        self.answer_tokens -= 1;
    }

    /// Whether an answer may go now (a token is left once those earned since are added).
    fn may_answer(&mut self, now: Duration) -> bool {
        let earned = now.saturating_sub(self.answer_earned).as_millis() / ANSWER_EVERY.as_millis();
        if earned > 0 {
            self.answer_tokens =
                (self.answer_tokens as u128 + earned).min(ANSWER_BURST as u128) as u32;
            self.answer_earned = now;
        }
        self.answer_tokens > 0
    }

    /// [`TunnelPlane::push`] where the headers to `remote` are not known or due a look:
    /// resolves them first (or counts why not).
    #[cold]
    fn push_resolving(
        &mut self,
        t: usize,
        remote: Ipv4Addr,
        packet: &mut [u8],
        (vni, ip_id): (u32, u16),
        now: Duration,
    ) -> Result<usize, EncapDrop> {
        self.forget_idle_far_ends(t, now);
        let generation = self.tunnels.neighbours.generation();
        self.resolve(t, remote, generation, now);
        let resolved = self.slot(t, remote);
        let pushed = match &resolved.template {
            Some(template) => Ok(template.push(packet, vni, ip_id)),
            None => Err(resolved.failure.unwrap_or(EncapDrop::NoNeighbour)),
        };
        let counters = &mut self.counters[t];
        match pushed {
            Ok(_) => {
                counters.encap_packets += 1;
                counters.encap_bytes += (packet.len() - OUTER_LEN) as u64;
            }
            Err(EncapDrop::NoRoute) => counters.no_route += 1,
            Err(_) => counters.no_neighbour += 1,
        }
        pushed
    }

    /// Past [`FAR_ENDS_KEPT`] far ends on tunnel `t`, forgets those no packet went to for
    /// [`FORGET_AFTER`] (at most once in that time: a switch with more live far ends than
    /// that pays for the look rarely).
    fn forget_idle_far_ends(&mut self, t: usize, now: Duration) {
        let far_ends = &mut self.by_remote[t];
        if far_ends.len() <= FAR_ENDS_KEPT || now < self.next_forget[t] {
            return;
        }
        self.next_forget[t] = now + FORGET_AFTER;
        far_ends.retain(|_, resolved| now < resolved.next_look.saturating_add(FORGET_AFTER));
    }

    /// Tunnel `t`'s headers towards `remote` (empty the first time a flow names a far end).
    #[inline]
    fn slot(&mut self, t: usize, remote: Ipv4Addr) -> &mut Resolved {
        match self.tunnels.ports[t].config.remote_ip {
            Remote::Ip(_) => &mut self.resolved[t],
            Remote::Flow => self.by_remote[t].entry(u32::from(remote)).or_default(),
        }
    }

    /// Works out tunnel `t`'s outer headers to `remote`: the route to it, the next hop's
    /// address (known to the bridge, else the host's table, else ask by ARP; a stale one is
    /// used and asked for again). Looks at the host's tables at most every [`RETRY`] while
    /// it fails, unless a neighbour was learned since, and every [`REVALIDATE`] while it
    /// works.
    #[cold]
    fn resolve(&mut self, t: usize, remote: Ipv4Addr, generation: u64, now: Duration) {
        let resolved = self.slot(t, remote);
        let learned_since = resolved.generation != generation;
        if resolved.template.is_none() && !learned_since && now < resolved.next_look {
            return;
        }
        resolved.generation = generation;
        resolved.next_look = now + RETRY;
        let port = &self.tunnels.ports[t];
        // The underlay's MTU, which may have changed since the last look.
        if let Some(mtu) = wirespeed_port::interface_mtu(&port.iface) {
            port.mtu.set(mtu);
        }
        let route = neighbours::route_to(remote).filter(|r| r.iface == port.iface);
        let Some(route) = route else {
            let resolved = self.slot(t, remote);
            resolved.template = None;
            resolved.failure = Some(EncapDrop::NoRoute);
            return;
        };
        let next_hop = route.next_hop(remote);
        let mac = self.next_hop_mac(t, next_hop, now);
        let port = &self.tunnels.ports[t];
        let template = mac.map(|mac| {
            OuterTemplate::new(&port.config, port.local_mac, mac, port.local_ip, remote)
        });
        // What learning it moved on (the host's entry) is in the template already.
        let generation = self.tunnels.neighbours.generation();
        let resolved = self.slot(t, remote);
        match template {
            Some(template) => {
                resolved.template = Some(template);
                resolved.failure = None;
                resolved.next_look = now + REVALIDATE;
                resolved.generation = generation;
            }
            None => {
                resolved.template = None;
                resolved.failure = Some(EncapDrop::NoNeighbour);
            }
        }
    }

    /// `next_hop`'s MAC address for tunnel `t`: the bridge's, else the host's table's.
    /// Queues an ARP request for it where it is stale (still used) or unknown.
    fn next_hop_mac(&mut self, t: usize, next_hop: Ipv4Addr, now: Duration) -> Option<MacAddr> {
        let port = &self.tunnels.ports[t];
        let neighbours = &self.tunnels.neighbours;
        let (mac, ask) = match neighbours.get(next_hop, now) {
            Known::Fresh(mac) => (Some(mac), false),
            Known::Stale(mac) => (Some(mac), true),
            Known::Unknown => {
                neighbours.want(next_hop, now);
                let known = neighbours::kernel_neighbour(next_hop, &port.iface);
                if let Some(k) = known {
                    neighbours.learn(next_hop, k.mac, now);
                }
                // Asked even where the host's table has it, unless set by hand: the entry
                // may be stale (the kernel's "complete" takes in STALE, and the redirect
                // program takes the underlay's ARP from the kernel, so it is never
                // refreshed there), and a far end whose MAC changed would get nothing for
                // a whole freshness time.
                (known.map(|k| k.mac), !known.is_some_and(|k| k.permanent))
            }
        };
        if ask {
            let request = arp_frame(
                1,
                port.local_mac,
                port.local_ip,
                MacAddr::BROADCAST,
                MacAddr([0; 6]),
                next_hop,
            );
            self.pending.push((port.underlay, request));
        }
        mac
    }

    /// Gives tunnel `t` its next hop's MAC address towards `remote` without asking the
    /// host's tables or ARP (a static neighbour: the stages example times pushing without
    /// I/O with it).
    pub fn set_next_hop(&mut self, t: usize, remote: Ipv4Addr, mac: MacAddr) {
        let port = &self.tunnels.ports[t];
        let template = OuterTemplate::new(&port.config, port.local_mac, mac, port.local_ip, remote);
        let generation = self.tunnels.neighbours.generation();
        *self.slot(t, remote) = Resolved {
            template: Some(template),
            generation,
            failure: None,
            // A static neighbour: never looked up again.
            next_look: Duration::MAX,
        };
    }

    /// An ARP frame to send, and the underlay port it goes out of.
    pub fn take_pending(&mut self) -> Option<(u32, [u8; 42])> {
        self.pending.pop()
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }
}

/// The tunnels' counters of one thread, or of all of them summed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TunnelFigures {
    /// Per tunnel port, in the bridge's order of them.
    pub ports: Vec<TunnelCounters>,
    /// See [`TunnelPlane::malformed`], [`TunnelPlane::unmatched`],
    /// [`TunnelPlane::echoes`] and [`TunnelPlane::to_endpoint`].
    pub malformed: u64,
    pub unmatched: u64,
    pub echoes: u64,
    pub to_endpoint: u64,
}

impl TunnelFigures {
    pub fn add(&mut self, other: &TunnelFigures) {
        if self.ports.len() < other.ports.len() {
            self.ports
                .resize(other.ports.len(), TunnelCounters::default());
        }
        for (mine, theirs) in self.ports.iter_mut().zip(&other.ports) {
            mine.add(theirs);
        }
        self.malformed += other.malformed;
        self.unmatched += other.unmatched;
        self.echoes += other.echoes;
        self.to_endpoint += other.to_endpoint;
    }
}

impl TunnelPlane {
    pub fn figures(&self) -> TunnelFigures {
        TunnelFigures {
            ports: self.counters.clone(),
            malformed: self.malformed,
            unmatched: self.unmatched,
            echoes: self.echoes,
            to_endpoint: self.to_endpoint,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tunnel::{Mtu, TunnelConfig, TunnelPort};

    const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    const REMOTE: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
    const MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);

    /// A plane with tunnel port 10 (VXLAN, key 42) over bridge port 2, whose interface the
    /// host has no route through (so pushing meets no route).
    fn plane() -> TunnelPlane {
        let port = TunnelPort {
            number: 10,
            config: "vxlan:remote_ip=192.0.2.2,key=42".parse().unwrap(),
            underlay: 2,
            iface: "ws-no-such0".to_string(),
            local_ip: LOCAL,
            local_mac: MAC,
            mtu: Mtu::new(1500),
        };
        TunnelPlane::new(Arc::new(Tunnels {
            ports: vec![port],
            neighbours: Default::default(),
        }))
    }

    /// A plane with tunnel port 10 (VXLAN, key 42, far end 192.0.2.2) and, after it, port 11
    /// (VXLAN, key 42, remote_ip=flow) over the same underlay.
    fn plane_with_flow_port() -> TunnelPlane {
        let fixed = plane();
        let mut ports = fixed.tunnels().ports.clone();
        ports.push(TunnelPort {
            number: 11,
            config: "vxlan:remote_ip=flow,key=42".parse().unwrap(),
            ..ports[0].clone()
        });
        TunnelPlane::new(Arc::new(Tunnels {
            ports,
            neighbours: Default::default(),
        }))
    }

    /// What the far end pushes: `inner` in VXLAN with `vni`, from `src` to LOCAL.
    fn from_far_end(src: Ipv4Addr, vni: u32, inner: &[u8]) -> Vec<u8> {
        let config: TunnelConfig = format!("vxlan:remote_ip={LOCAL},key=flow").parse().unwrap();
        let template = OuterTemplate::new(&config, MacAddr([2, 0, 0, 0, 0, 2]), MAC, src, LOCAL);
        let mut packet = vec![0u8; OUTER_LEN];
        packet.extend_from_slice(inner);
        assert_eq!(
            template.push(&mut packet, vni, 0),
            0,
            "VXLAN fills the room"
        );
        packet
    }

    #[test]
    fn its_tunnels_packets_are_popped_and_others_counted_or_passed_on() {
        let mut plane = plane();
        assert!(plane.is_underlay(2) && !plane.is_underlay(1));
        let inner = [7u8; 60];
        let packet = from_far_end(REMOTE, 42, &inner);
        let Landing::Tunnel { port, popped } = plane.arrive(2, &packet, &[], Duration::ZERO) else {
            panic!("not popped");
        };
        assert_eq!(port, 10);
        assert_eq!(&packet[popped.inner_at..][..popped.inner_len], &inner[..]);
        assert_eq!(popped.meta.id, 42);
        assert_eq!(plane.counters[0].decap_packets, 1);
        assert_eq!(plane.counters[0].decap_bytes, 60);
        // Another VNI, another far end: no port of ours.
        let other_vni = from_far_end(REMOTE, 43, &inner);
        assert_eq!(
            plane.arrive(2, &other_vni, &[], Duration::ZERO),
            Landing::Consumed
        );
        let stranger = from_far_end(Ipv4Addr::new(192, 0, 2, 9), 42, &inner);
        assert_eq!(
            plane.arrive(2, &stranger, &[], Duration::ZERO),
            Landing::Consumed
        );
        assert_eq!(plane.unmatched, 2);
        // Bad outer checksum: malformed.
        let mut bad = packet.clone();
        bad[24] ^= 0xff;
        assert_eq!(
            plane.arrive(2, &bad, &[], Duration::ZERO),
            Landing::Consumed
        );
        assert_eq!(plane.malformed, 1);
        // Not the tunnel's: the inner frame itself, as plain traffic.
        assert_eq!(
            plane.arrive(2, &inner, &[], Duration::ZERO),
            Landing::Pipeline
        );
        assert_eq!(plane.figures().ports[0].decap_packets, 1);
    }

    #[test]
    fn arp_for_the_local_address_is_answered_and_its_sender_learned() {
        let mut plane = plane();
        let asker = MacAddr([2, 0, 0, 0, 0, 9]);
        let request = arp_frame(1, asker, REMOTE, MacAddr::BROADCAST, MacAddr([0; 6]), LOCAL);
        assert_eq!(
            plane.arrive(2, &request, &[], Duration::ZERO),
            Landing::Consumed
        );
        assert_eq!(
            plane.tunnels().neighbours.get(REMOTE, Duration::ZERO),
            Known::Fresh(asker)
        );
        let (port, reply) = plane.take_pending().expect("a reply");
        assert_eq!(port, 2);
        let arp = parse_arp(&reply).unwrap();
        assert_eq!(arp.operation, 2);
        assert_eq!((arp.sender_mac, arp.sender_ip), (MAC, LOCAL));
        assert_eq!(arp.target_ip, REMOTE);
        assert_eq!(&reply[..6], &asker.0);
        assert!(!plane.has_pending());
        // From a multicast sender: taken by the tunnels, neither learned nor answered (the
        // reply would go to the whole group).
        let group = MacAddr([1, 0, 0x5e, 0, 0, 1]);
        let stranger = Ipv4Addr::new(192, 0, 2, 50);
        let request = arp_frame(
            1,
            group,
            stranger,
            MacAddr::BROADCAST,
            MacAddr([0; 6]),
            LOCAL,
        );
        assert_eq!(
            plane.arrive(2, &request, &[], Duration::ZERO),
            Landing::Consumed
        );
        assert!(!plane.has_pending());
        assert!(!plane.tunnels().neighbours.knows(stranger));
        // ARP for someone else is the bridge's; so is ARP on another port.
        let other = arp_frame(
            1,
            asker,
            REMOTE,
            MacAddr::BROADCAST,
            MacAddr([0; 6]),
            Ipv4Addr::new(192, 0, 2, 77),
        );
        assert_eq!(
            plane.arrive(2, &other, &[], Duration::ZERO),
            Landing::Pipeline
        );
        assert_eq!(
            plane.arrive(1, &request, &[], Duration::ZERO),
            Landing::Pipeline
        );
    }

    #[test]
    fn a_known_neighbours_gratuitous_arp_moves_it_and_a_strangers_is_not_taken() {
        let mut plane = plane();
        let (old, new) = (MacAddr([2, 0, 0, 0, 0, 9]), MacAddr([2, 0, 0, 0, 0, 10]));
        let request = arp_frame(1, old, REMOTE, MacAddr::BROADCAST, MacAddr([0; 6]), LOCAL);
        assert_eq!(
            plane.arrive(2, &request, &[], Duration::ZERO),
            Landing::Consumed
        );
        let _ = plane.take_pending();
        // The tunnel's next hop: it uses what was learned.
        assert_eq!(plane.next_hop_mac(0, REMOTE, Duration::ZERO), Some(old));
        let generation = plane.tunnels().neighbours.generation();
        // Its announcement of a new address (for itself, not us) is the bridge's frame, and
        // the tunnels follow the address.
        let now = Duration::from_secs(3);
        let announce = arp_frame(1, new, REMOTE, MacAddr::BROADCAST, MacAddr([0; 6]), REMOTE);
        assert_eq!(plane.arrive(2, &announce, &[], now), Landing::Pipeline);
        let neighbours = &plane.tunnels().neighbours;
        assert_eq!(neighbours.get(REMOTE, now), Known::Fresh(new));
        assert_eq!(neighbours.generation(), generation + 1);
        let stranger = Ipv4Addr::new(192, 0, 2, 9);
        let announce = arp_frame(
            1,
            new,
            stranger,
            MacAddr::BROADCAST,
            MacAddr([0; 6]),
            stranger,
        );
        assert_eq!(plane.arrive(2, &announce, &[], now), Landing::Pipeline);
        assert!(!plane.tunnels().neighbours.knows(stranger));
        assert!(!plane.has_pending());
    }

    #[test]
    fn a_stale_next_hop_is_used_and_asked_for_and_a_forgotten_one_only_asked_for() {
        let mut plane = plane();
        let mac = MacAddr([2, 0, 0, 0, 0, 9]);
        let at = |s: u64| Duration::from_secs(100 + s);
        plane.tunnels().neighbours.learn(REMOTE, mac, at(0));
        assert_eq!(plane.next_hop_mac(0, REMOTE, at(10)), Some(mac));
        assert!(!plane.has_pending());
        let asked = |plane: &mut TunnelPlane| {
            let (port, frame) = plane.take_pending().expect("an ARP request");
            let arp = parse_arp(&frame).unwrap();
            assert_eq!(port, 2);
            assert_eq!(
                (arp.operation, arp.target_ip, arp.sender_ip),
                (1, REMOTE, LOCAL)
            );
            assert_eq!(&frame[..6], &MacAddr::BROADCAST.0);
            assert!(!plane.has_pending());
        };
        assert_eq!(plane.next_hop_mac(0, REMOTE, at(31)), Some(mac));
        asked(&mut plane);
        // Unanswered: forgotten (and the host's table has none on this interface).
        assert_eq!(plane.next_hop_mac(0, REMOTE, at(46)), None);
        asked(&mut plane);
    }

    #[test]
    fn a_push_without_a_route_or_too_long_is_counted_and_nothing_is_written() {
        let mut plane = plane();
        let mut packet = vec![0u8; OUTER_LEN + 60];
        let now = Duration::from_secs(5);
        assert_eq!(
            plane.push(0, &mut packet, TunnelOut::default(), now),
            Err(EncapDrop::NoRoute)
        );
        // Within the retry time the answer is the same, and the host is not asked again.
        assert_eq!(
            plane.push(0, &mut packet, TunnelOut::default(), now),
            Err(EncapDrop::NoRoute)
        );
        assert_eq!(plane.counters[0].no_route, 2);
        assert!(packet[..OUTER_LEN].iter().all(|&b| b == 0));
        let mut long = vec![0u8; OUTER_LEN + 1500 - 36 + 1];
        assert_eq!(
            plane.push(0, &mut long, TunnelOut::default(), now),
            Err(EncapDrop::TooBig)
        );
        assert_eq!(plane.counters[0].too_big, 1);
        let mut longest = vec![0u8; OUTER_LEN + 1500 - 36];
        assert_eq!(
            plane.push(0, &mut longest, TunnelOut::default(), now),
            Err(EncapDrop::NoRoute)
        );
        assert_eq!(plane.counters[0].encap_packets, 0);
    }

    /// A frame too long for the tunnel with DF set is answered as if from the far end,
    /// which the flow named; one without DF is not; past the limit a burst holds, none is.
    #[test]
    fn a_too_long_frame_with_df_is_answered_from_the_far_end() {
        let mut plane = plane();
        let now = Duration::from_secs(5);
        let frame = |df: bool| {
            let mut f = vec![0u8; OUTER_LEN + 1500];
            let inner = &mut f[OUTER_LEN..];
            inner[12..14].copy_from_slice(&[0x08, 0x00]);
            inner[14] = 0x45;
            inner[20] = if df { 0x40 } else { 0 };
            inner[26..30].copy_from_slice(&[10, 9, 0, 1]);
            inner[30..34].copy_from_slice(&[10, 9, 0, 2]);
            f
        };
        let out = TunnelOut::default();
        assert_eq!(
            plane.push(0, &mut frame(false), out, now),
            Err(EncapDrop::TooBig)
        );
        assert!(plane.too_big_answers.is_empty());
        assert_eq!(
            plane.push(0, &mut frame(true), out, now),
            Err(EncapDrop::TooBig)
        );
        let answers: Vec<&TooBigAnswer> = plane.too_big_answers.iter().collect();
        assert_eq!(answers.len(), 1);
        let a = answers[0];
        assert_eq!(a.port, 10);
        assert_eq!(
            a.meta,
            TunnelMeta {
                id: 42,
                src: u32::from(REMOTE),
                dst: u32::from(LOCAL),
                opts: 0
            }
        );
        // Fragmentation needed, 1500 - 36 - 14 bytes.
        assert_eq!((a.frame[34], a.frame[35]), (3, 4));
        assert_eq!(u16::from_be_bytes([a.frame[40], a.frame[41]]), 1450);
        assert_eq!(plane.counters[0].too_big, 2);
        assert_eq!(plane.counters[0].too_big_answered, 1);
        for _ in 0..MAX_TOO_BIG_ANSWERS {
            let _ = plane.push(0, &mut frame(true), out, now);
        }
        assert_eq!(plane.too_big_answers.iter().count(), MAX_TOO_BIG_ANSWERS);
        assert_eq!(
            plane.counters[0].too_big_answered,
            MAX_TOO_BIG_ANSWERS as u64
        );
        plane.too_big_answers.clear();
        assert!(plane.too_big_answers.is_empty());
        // At most a burst of 50 at once, then one a millisecond.
        for _ in 0..30 {
            let _ = plane.push(0, &mut frame(true), out, now);
        }
        assert_eq!(plane.counters[0].too_big_answered, u64::from(ANSWER_BURST));
        let later = now + Duration::from_millis(5);
        for _ in 0..10 {
            let _ = plane.push(0, &mut frame(true), out, later);
        }
        assert_eq!(
            plane.counters[0].too_big_answered,
            u64::from(ANSWER_BURST) + 5
        );
    }

    /// A GRE port with a key pushes 42 bytes at the end of the room (the packet starts 8
    /// bytes in), with the key from the flow, and its MTU check counts 28 bytes of outer
    /// IPv4 and GRE, not VXLAN's 36; what the far end pushes is popped onto it.
    #[test]
    fn a_gre_port_pushes_its_shorter_headers_and_pops_its_own() {
        let mut port = plane().tunnels().ports[0].clone();
        port.config = "gre:remote_ip=192.0.2.2,key=flow".parse().unwrap();
        let mut plane = TunnelPlane::new(Arc::new(Tunnels {
            ports: vec![port],
            neighbours: Default::default(),
        }));
        plane.set_next_hop(0, REMOTE, MacAddr([2, 0, 0, 0, 0, 0xb]));
        let now = Duration::from_secs(5);
        let out = TunnelOut {
            id: 0x1_0000_002a,
            dst: Ipv4Addr::UNSPECIFIED,
        };
        let mut longest = vec![0u8; OUTER_LEN + 1500 - 28];
        assert_eq!(plane.push(0, &mut longest, out, now), Ok(8));
        let packet = &longest[8..];
        assert_eq!(packet[23], 47);
        assert_eq!(u16::from_be_bytes([packet[16], packet[17]]), 1500);
        assert_eq!(packet[34..42], [0x20, 0, 0x65, 0x58, 0, 0, 0, 0x2a]);
        let mut long = vec![0u8; OUTER_LEN + 1500 - 28 + 1];
        assert_eq!(plane.push(0, &mut long, out, now), Err(EncapDrop::TooBig));
        // From the far end: its own headers, key 42.
        let config: TunnelConfig = format!("gre:remote_ip={LOCAL},key=42").parse().unwrap();
        let far = OuterTemplate::new(&config, MacAddr([2, 0, 0, 0, 0, 2]), MAC, REMOTE, LOCAL);
        let mut arriving = vec![0u8; OUTER_LEN];
        arriving.extend_from_slice(&[7u8; 60]);
        let at = far.push(&mut arriving, 42, 0);
        let arriving = &arriving[at..];
        let landing = plane.arrive(2, arriving, &[], now);
        let Landing::Tunnel { port, popped } = landing else {
            panic!("{landing:?}");
        };
        assert_eq!((port, popped.inner_at, popped.meta.id), (10, 42, 42));
        assert_eq!(plane.counters[0].encap_packets, 1);
        assert_eq!(plane.counters[0].decap_packets, 1);
    }

    /// A GRE port with key 42 and no key: each takes its own packets; another key is
    /// counted unmatched, a GRE packet it cannot read (routing present) malformed, and
    /// neither reaches the pipeline.
    #[test]
    fn gre_packets_of_another_key_or_unreadable_are_counted_by_name() {
        let mut keyed = plane().tunnels().ports[0].clone();
        keyed.config = "gre:remote_ip=192.0.2.2,key=42".parse().unwrap();
        let keyless = TunnelPort {
            number: 11,
            config: "gre:remote_ip=192.0.2.3".parse().unwrap(),
            ..keyed.clone()
        };
        let mut plane = TunnelPlane::new(Arc::new(Tunnels {
            ports: vec![keyed, keyless],
            neighbours: Default::default(),
        }));
        let now = Duration::ZERO;
        let arriving = |from: Ipv4Addr, spec: &str, key: u32| {
            let config: TunnelConfig = spec.parse().unwrap();
            let far = OuterTemplate::new(&config, MacAddr([2, 0, 0, 0, 0, 2]), MAC, from, LOCAL);
            let mut packet = vec![0u8; OUTER_LEN];
            packet.extend_from_slice(&[7u8; 60]);
            let at = far.push(&mut packet, key, 0);
            packet.split_off(at)
        };
        let to_a = format!("gre:remote_ip={LOCAL},key=flow");
        let to_a_keyless = format!("gre:remote_ip={LOCAL}");
        let third = Ipv4Addr::new(192, 0, 2, 3);
        for (from, spec, key, want) in [
            (REMOTE, to_a.as_str(), 42, Some(10)),
            (third, to_a_keyless.as_str(), 0, Some(11)),
            (REMOTE, to_a.as_str(), 43, None),
            (third, to_a.as_str(), 7, None),
        ] {
            let packet = arriving(from, spec, key);
            let landing = plane.arrive(2, &packet, &[], now);
            match want {
                Some(port) => assert!(
                    matches!(landing, Landing::Tunnel { port: got, .. } if got == port),
                    "{from} key {key}: {landing:?}"
                ),
                None => assert_eq!(landing, Landing::Consumed, "{from} key {key}"),
            }
        }
        let mut routed = arriving(REMOTE, &to_a, 42);
        routed[34] |= 0x40;
        let landing = plane.arrive(2, &routed, &[], now);
        assert_eq!(landing, Landing::Consumed);
        assert_eq!((plane.unmatched, plane.malformed), (2, 1));
        assert_eq!(plane.counters[0].decap_packets, 1);
        assert_eq!(plane.counters[1].decap_packets, 1);
    }

    /// A tunnel listens at its own local address, on its own underlay, for its own kind:
    /// VXLAN over port 2 at LOCAL and GRE over port 3 at another address (as in Open
    /// vSwitch, whose native tunnels match address, protocol and port together). A tunnel
    /// packet of the other kind to a tunnel's address is that endpoint's (in Open vSwitch,
    /// the host's, never the bridge's): taken, not counted as unmatched or malformed. One
    /// to an address no tunnel on its underlay has is the bridge's.
    #[test]
    fn a_tunnel_takes_only_its_own_address_kind_and_underlay() {
        let vxlan = plane().tunnels().ports[0].clone();
        let second = Ipv4Addr::new(192, 0, 2, 5);
        let gre = TunnelPort {
            number: 11,
            config: "gre:remote_ip=192.0.2.2".parse().unwrap(),
            underlay: 3,
            local_ip: second,
            ..vxlan.clone()
        };
        let mut plane = TunnelPlane::new(Arc::new(Tunnels {
            ports: vec![vxlan, gre],
            neighbours: Default::default(),
        }));
        let arriving = |kind: &str, to: Ipv4Addr| {
            let config: TunnelConfig = format!("{kind}:remote_ip={to},key=flow").parse().unwrap();
            let far = OuterTemplate::new(&config, MacAddr([2, 0, 0, 0, 0, 2]), MAC, REMOTE, to);
            let mut packet = vec![0u8; OUTER_LEN];
            packet.extend_from_slice(&[7u8; 60]);
            let at = far.push(&mut packet, if kind == "gre" { 0 } else { 42 }, 0);
            packet.split_off(at)
        };
        for (kind, to, underlay, want) in [
            ("vxlan", LOCAL, 2, Some(10)),
            ("gre", second, 3, Some(11)),
            ("gre", LOCAL, 2, Some(0)),
            ("vxlan", second, 3, Some(0)),
            ("vxlan", LOCAL, 3, None),
            ("gre", second, 2, None),
        ] {
            let packet = arriving(kind, to);
            let landing = plane.arrive(underlay, &packet, &[], Duration::ZERO);
            match want {
                Some(0) => assert_eq!(landing, Landing::Consumed, "{kind} to {to}"),
                Some(port) => assert!(
                    matches!(landing, Landing::Tunnel { port: got, .. } if got == port),
                    "{kind} to {to} on {underlay}: {landing:?}"
                ),
                None => assert_eq!(landing, Landing::Pipeline, "{kind} to {to} on {underlay}"),
            }
        }
        // GRE it could not read, to an address where no GRE tunnel listens, is the
        // endpoint's too.
        let mut routed = arriving("gre", LOCAL);
        routed[34] |= 0x40;
        assert_eq!(
            plane.arrive(2, &routed, &[], Duration::ZERO),
            Landing::Consumed
        );
        assert_eq!((plane.unmatched, plane.malformed), (0, 0));
        assert_eq!((plane.to_endpoint, plane.echoes), (3, 0));
        assert_eq!(plane.counters[0].decap_packets, 1);
        assert_eq!(plane.counters[1].decap_packets, 1);
    }

    #[test]
    fn a_flow_port_takes_far_ends_no_other_port_names() {
        let mut plane = plane_with_flow_port();
        let inner = [7u8; 60];
        for (from, port) in [(REMOTE, 10), (Ipv4Addr::new(192, 0, 2, 9), 11)] {
            let packet = from_far_end(from, 42, &inner);
            let landing = plane.arrive(2, &packet, &[], Duration::ZERO);
            let Landing::Tunnel { port: got, popped } = landing else {
                panic!("from {from}: {landing:?}");
            };
            assert_eq!((got, Ipv4Addr::from(popped.meta.src)), (port, from));
        }
        assert_eq!(plane.counters[0].decap_packets, 1);
        assert_eq!(plane.counters[1].decap_packets, 1);
    }

    #[test]
    fn a_flow_port_sends_each_packet_to_its_flows_tun_dst() {
        let mut plane = plane_with_flow_port();
        let (b, c) = (Ipv4Addr::new(192, 0, 2, 2), Ipv4Addr::new(192, 0, 2, 3));
        plane.set_next_hop(1, b, MacAddr([2, 0, 0, 0, 0, 0xb]));
        plane.set_next_hop(1, c, MacAddr([2, 0, 0, 0, 0, 0xc]));
        let now = Duration::from_secs(5);
        for (dst, mac) in [(b, 0xb), (c, 0xc), (b, 0xb)] {
            let mut packet = vec![0u8; OUTER_LEN + 60];
            let out = TunnelOut { id: 0, dst };
            assert_eq!(plane.push(1, &mut packet, out, now), Ok(0));
            assert_eq!(packet[..6], [2, 0, 0, 0, 0, mac]);
            assert_eq!(packet[26..30], LOCAL.octets());
            assert_eq!(packet[30..34], dst.octets());
        }
        // A flow that named no far end has nowhere to go.
        let mut packet = vec![0u8; OUTER_LEN + 60];
        assert_eq!(
            plane.push(1, &mut packet, TunnelOut::default(), now),
            Err(EncapDrop::NoRoute)
        );
        let counters = plane.counters[1];
        assert_eq!((counters.encap_packets, counters.no_route), (3, 1));
    }

    #[test]
    fn a_flow_port_forgets_far_ends_no_packet_went_to() {
        let mut plane = plane_with_flow_port();
        let push = |plane: &mut TunnelPlane, dst: u32, now: Duration| {
            let mut packet = vec![0u8; OUTER_LEN + 60];
            let out = TunnelOut {
                id: 0,
                dst: Ipv4Addr::from(0xc000_0000 + dst),
            };
            let _ = plane.push(1, &mut packet, out, now);
        };
        let start = Duration::from_secs(1);
        for dst in 0..FAR_ENDS_KEPT as u32 + 10 {
            push(&mut plane, dst, start);
        }
        assert_eq!(plane.by_remote[1].len(), FAR_ENDS_KEPT + 10);
        // Two far ends stay in use; the rest go once they have been idle long enough (and a
        // look is due: the first, as the map outgrew FAR_ENDS_KEPT, found none idle).
        let mut now = start;
        for _ in 0..4 {
            now += FORGET_AFTER / 2;
            push(&mut plane, 1, now);
            push(&mut plane, 2, now);
        }
        push(&mut plane, 5000, now + RETRY);
        let mut kept: Vec<u32> = plane.by_remote[1].keys().map(|a| a - 0xc000_0000).collect();
        kept.sort_unstable();
        assert_eq!(kept, [1, 2, 5000]);
    }

    /// Each flow port looks over its own far ends when its own look is due: one port's look
    /// put off every other's by a minute (a review's finding).
    #[test]
    fn each_flow_port_forgets_on_its_own_time() {
        let fixed = plane_with_flow_port();
        let mut ports = fixed.tunnels().ports.clone();
        ports.push(TunnelPort {
            number: 12,
            ..ports[1].clone()
        });
        let mut plane = TunnelPlane::new(Arc::new(Tunnels {
            ports,
            neighbours: Default::default(),
        }));
        let push = |plane: &mut TunnelPlane, t: usize, dst: u32, now: Duration| {
            let mut packet = vec![0u8; OUTER_LEN + 60];
            let out = TunnelOut {
                id: 0,
                dst: Ipv4Addr::from(0xc000_0000 + dst),
            };
            let _ = plane.push(t, &mut packet, out, now);
        };
        let at = Duration::from_secs;
        for dst in 0..FAR_ENDS_KEPT as u32 + 10 {
            push(&mut plane, 2, dst, at(1));
        }
        // Port 11's look, a minute on, is due: it must not put off port 12's.
        for dst in 0..FAR_ENDS_KEPT as u32 + 10 {
            push(&mut plane, 1, dst, at(62));
        }
        push(&mut plane, 2, 9000, at(63));
        assert_eq!(plane.by_remote[2].len(), 1, "the idle far ends stayed");
        assert!(plane.by_remote[2].contains_key(&(0xc000_0000 + 9000)));
    }
}
