//! One poll-mode thread's side of the tunnels: what its underlays receive is popped,
//! answered (ARP) or passed on, and what it outputs to a tunnel port is pushed. Its own
//! headers per tunnel and its own counters, so no packet touches what another thread
//! writes; the shared neighbour table is read only when its generation moves.

use core::time::Duration;
use std::net::Ipv4Addr;
use std::sync::Arc;

use wirespeed_packet::MacAddr;

use crate::tunnel::Tunnels;
use crate::tunnel::header::{self, Arrival, OUTER_IP_OVERHEAD, OUTER_LEN, OuterTemplate, Popped};
use crate::tunnel::neighbours::{self, arp_frame, parse_arp};

/// How long a tunnel without a neighbour waits before it asks again (an ARP request, the
/// host's tables).
const RETRY: Duration = Duration::from_secs(1);

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
    /// Taken by the tunnels (ARP for a local address) or dropped (counted): free it.
    Consumed,
}

/// A tunnel's outer headers as this thread last resolved them.
#[derive(Clone, Debug, Default)]
struct Resolved {
    template: Option<OuterTemplate>,
    /// The neighbour table's generation it was resolved at.
    generation: u64,
    /// Why the last try failed, and when to try again.
    failure: Option<EncapDrop>,
    retry_at: Duration,
}

pub struct TunnelPlane {
    tunnels: Arc<Tunnels>,
    resolved: Vec<Resolved>,
    /// Per tunnel, in [`Tunnels::ports`]' order.
    pub counters: Vec<TunnelCounters>,
    /// Received on an underlay, to a local address and a tunnel's UDP port, but not a
    /// packet any tunnel can take: a bad header, a fragment, Geneve critical options
    /// ([`Arrival::Malformed`]), or no tunnel port for its far end or VNI.
    pub malformed: u64,
    pub unmatched: u64,
    /// The underlays' port numbers, and the addresses and UDP ports tunnels listen on.
    underlays: Vec<u32>,
    locals: Vec<Ipv4Addr>,
    listening: Vec<(u16, crate::tunnel::TunnelKind)>,
    /// ARP to send: (underlay port, frame).
    pending: Vec<(u32, [u8; 42])>,
}

impl TunnelPlane {
    pub fn new(tunnels: Arc<Tunnels>) -> TunnelPlane {
        let mut underlays: Vec<u32> = tunnels.ports.iter().map(|p| p.underlay).collect();
        underlays.sort_unstable();
        underlays.dedup();
        let mut locals: Vec<Ipv4Addr> = tunnels.ports.iter().map(|p| p.local_ip).collect();
        locals.sort_unstable();
        locals.dedup();
        let mut listening: Vec<_> = tunnels
            .ports
            .iter()
            .map(|p| (p.config.dst_port, p.config.kind))
            .collect();
        listening.dedup();
        TunnelPlane {
            resolved: vec![Resolved::default(); tunnels.ports.len()],
            counters: vec![TunnelCounters::default(); tunnels.ports.len()],
            malformed: 0,
            unmatched: 0,
            underlays,
            locals,
            listening,
            pending: Vec::new(),
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

    /// What the frame `head` (of a packet of `packet_len` bytes) received on underlay
    /// `in_port` is.
    pub fn arrive(&mut self, in_port: u32, head: &[u8], packet_len: usize) -> Landing {
        if head.len() >= 14 && head[12..14] == [0x08, 0x06] {
            return self.arp(in_port, head);
        }
        let (dst_port, kind, popped) =
            match header::classify(head, packet_len, &self.locals, &self.listening) {
                Arrival::Other => return Landing::Pipeline,
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
        let found = self.tunnels.ports.iter().position(|p| {
            p.underlay == in_port
                && p.config.kind == kind
                && p.config.dst_port == dst_port
                && p.local_ip == dst
                && p.config.remote_ip == src
                && p.config.takes_vni(vni)
        });
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

    /// ARP on an underlay: for a tunnel's local address it is the tunnels' (the sender is
    /// learned, a request answered), any other is the bridge's.
    fn arp(&mut self, in_port: u32, frame: &[u8]) -> Landing {
        let Some(arp) = parse_arp(frame) else {
            return Landing::Pipeline;
        };
        let ours = self
            .tunnels
            .ports
            .iter()
            .find(|p| p.underlay == in_port && p.local_ip == arp.target_ip);
        let Some(port) = ours else {
            return Landing::Pipeline;
        };
        self.tunnels.neighbours.learn(arp.sender_ip, arp.sender_mac);
        if arp.operation == 1 {
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
    /// room for them, the rest the inner frame. `tun_id` is the flow's, for `key=flow`.
    #[inline]
    pub fn push(
        &mut self,
        t: usize,
        packet: &mut [u8],
        tun_id: u64,
        now: Duration,
    ) -> Result<(), EncapDrop> {
        let inner_len = packet.len() - OUTER_LEN;
        let port = &self.tunnels.ports[t];
        if inner_len + OUTER_IP_OVERHEAD > port.mtu as usize {
            self.counters[t].too_big += 1;
            return Err(EncapDrop::TooBig);
        }
        let generation = self.tunnels.neighbours.generation();
        let resolved = &self.resolved[t];
        if resolved.template.is_none() || resolved.generation != generation {
            self.resolve(t, generation, now);
        }
        let resolved = &self.resolved[t];
        let Some(template) = &resolved.template else {
            let failure = resolved.failure.unwrap_or(EncapDrop::NoNeighbour);
            match failure {
                EncapDrop::NoRoute => self.counters[t].no_route += 1,
                _ => self.counters[t].no_neighbour += 1,
            }
            return Err(failure);
        };
        let config = &self.tunnels.ports[t].config;
        let src_port = header::source_port(&packet[OUTER_LEN..]);
        template.push(packet, config.vni(tun_id), src_port);
        let counters = &mut self.counters[t];
        counters.encap_packets += 1;
        counters.encap_bytes += inner_len as u64;
        Ok(())
    }

    /// Works out tunnel `t`'s outer headers: the route to its far end, the next hop's
    /// address (known to the bridge, else the host's table, else ask by ARP). Looks at
    /// the host's tables at most every [`RETRY`] while it fails, unless a neighbour was
    /// learned since.
    #[cold]
    fn resolve(&mut self, t: usize, generation: u64, now: Duration) {
        let resolved = &mut self.resolved[t];
        let learned_since = resolved.generation != generation;
        if resolved.template.is_none() && !learned_since && now < resolved.retry_at {
            return;
        }
        resolved.generation = generation;
        resolved.retry_at = now + RETRY;
        let port = &self.tunnels.ports[t];
        let remote = port.config.remote_ip;
        let route = neighbours::route_to(remote).filter(|r| r.iface == port.iface);
        let Some(route) = route else {
            resolved.template = None;
            resolved.failure = Some(EncapDrop::NoRoute);
            return;
        };
        let next_hop = route.next_hop(remote);
        let neighbours = &self.tunnels.neighbours;
        let mac = neighbours.get(next_hop).or_else(|| {
            let mac = neighbours::kernel_neighbour(next_hop, &port.iface)?;
            neighbours.learn(next_hop, mac);
            Some(mac)
        });
        match mac {
            Some(mac) => {
                resolved.template = Some(OuterTemplate::new(
                    &port.config,
                    port.local_mac,
                    mac,
                    port.local_ip,
                ));
                resolved.failure = None;
                // What learning it moved on (the host's entry) is in the template already.
                resolved.generation = neighbours.generation();
            }
            None => {
                resolved.template = None;
                resolved.failure = Some(EncapDrop::NoNeighbour);
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
        }
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
    /// See [`TunnelPlane::malformed`] and [`TunnelPlane::unmatched`].
    pub malformed: u64,
    pub unmatched: u64,
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
    }
}

impl TunnelPlane {
    pub fn figures(&self) -> TunnelFigures {
        TunnelFigures {
            ports: self.counters.clone(),
            malformed: self.malformed,
            unmatched: self.unmatched,
        }
    }
}
