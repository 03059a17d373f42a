//! The outer headers of a tunnelled packet: Ethernet, IPv4, then UDP and VXLAN (RFC 7348) or
//! Geneve (RFC 8926), or GRE (RFC 2784, with RFC 2890's key) carrying Ethernet. Pushing
//! writes all of them from a template made once per neighbour (only the lengths, the
//! checksums, the source port and the key change per packet, OVS's `tnl_push` idea);
//! popping checks them and says where the inner frame is.

use std::net::Ipv4Addr;

use wirespeed_packet::MacAddr;
use wirespeed_packet::checksum;

use crate::field::TunnelMeta;
use crate::tunnel::config::{TunnelConfig, TunnelKey, TunnelKind};

pub const VXLAN_PORT: u16 = 4789;
pub const GENEVE_PORT: u16 = 6081;
const ETHERNET_LEN: usize = 14;
const IPV4_LEN: usize = 20;
const UDP_LEN: usize = 8;
/// VXLAN's header, and Geneve's without options (both eight bytes).
const TUNNEL_HEADER_LEN: usize = 8;
/// The room pushing needs in front of the inner frame: the most any kind adds (VXLAN and
/// Geneve, which sends no options; GRE adds at most 46 bytes, and leaves the room's first
/// bytes unused).
pub const OUTER_LEN: usize = ETHERNET_LEN + IPV4_LEN + UDP_LEN + TUNNEL_HEADER_LEN;
const UDP_AT: usize = ETHERNET_LEN + IPV4_LEN;
const UDP: u8 = 17;
const GRE: u8 = 47;
/// GRE's flags: a checksum, a key and a sequence number follow (RFC 2890); routing present
/// (RFC 1701, obsolete: such packets are refused, as the kernel does).
const GRE_C: u16 = 0x8000;
const GRE_R: u16 = 0x4000;
const GRE_K: u16 = 0x2000;
const GRE_S: u16 = 0x1000;
const GRE_VERSION: u16 = 0x0007;
/// GRE's base header: flags and version, protocol type.
const GRE_BASE_LEN: usize = 4;
const TUNNEL_AT: usize = UDP_AT + UDP_LEN;
/// VXLAN's flags byte with the I bit: the VNI is valid.
const VXLAN_I: u8 = 0x08;
/// Geneve's and GRE's protocol type for an Ethernet frame (Transparent Ethernet Bridging).
const ETHERNET_BRIDGING: u16 = 0x6558;
/// Geneve's flag: the options include a critical one, which a receiver that does not
/// process options must drop the packet for (RFC 8926, 3.4).
const GENEVE_CRITICAL: u8 = 0x40;
const IPV4_DF: u16 = 0x4000;
/// Linux's and Open vSwitch's range for a tunnel's UDP source port.
const SOURCE_PORTS: (u16, u16) = (32768, 61000);

/// The outer headers' length for a tunnel of `config`: Ethernet, IPv4 and the tunnel's own.
pub fn outer_len(config: &TunnelConfig) -> usize {
    match config.kind {
        TunnelKind::Vxlan | TunnelKind::Geneve => OUTER_LEN,
        TunnelKind::Gre => ETHERNET_LEN + IPV4_LEN + gre_header_len(config),
    }
}

/// What the outer IPv4 packet adds to the inner frame, against the underlay's MTU.
pub fn outer_ip_overhead(config: &TunnelConfig) -> usize {
    outer_len(config) - ETHERNET_LEN
}

/// GRE's header as a port of `config` sends it: a checksum with `csum=true`, a key unless
/// the port has none; never a sequence number (as the kernel's gretap and Open vSwitch by
/// default).
fn gre_header_len(config: &TunnelConfig) -> usize {
    GRE_BASE_LEN + 4 * usize::from(config.csum) + 4 * usize::from(config.key != TunnelKey::Absent)
}

/// One tunnel's outer headers with everything fixed filled in, at the end of the room
/// ([`OUTER_LEN`]) so that pushing copies the whole room at once and the inner frame follows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OuterTemplate {
    bytes: [u8; OUTER_LEN],
    /// Where in the room the outer headers start (0 but for GRE).
    at: u8,
    /// The outer IPv4 header's sum without its length (added per packet).
    ip_sum: u32,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    csum: bool,
    kind: TunnelKind,
    /// GRE: where the key goes; 0 when none is sent. (Bytes, to keep the template small.)
    gre_key_at: u8,
    /// DF set: the ID stays 0; clear, each packet gets the one it is given.
    df: bool,
}

impl OuterTemplate {
    pub fn new(
        config: &TunnelConfig,
        src_mac: MacAddr,
        dst_mac: MacAddr,
        local: Ipv4Addr,
        remote: Ipv4Addr,
    ) -> OuterTemplate {
        let mut bytes = [0u8; OUTER_LEN];
        let at = OUTER_LEN - outer_len(config);
        let outer = &mut bytes[at..];
        outer[0..6].copy_from_slice(&dst_mac.0);
        outer[6..12].copy_from_slice(&src_mac.0);
        outer[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip = &mut outer[ETHERNET_LEN..UDP_AT];
        ip[0] = 0x45;
        if config.df {
            ip[6..8].copy_from_slice(&IPV4_DF.to_be_bytes());
        }
        ip[8] = config.ttl;
        ip[9] = match config.kind {
            TunnelKind::Gre => GRE,
            TunnelKind::Vxlan | TunnelKind::Geneve => UDP,
        };
        ip[12..16].copy_from_slice(&local.octets());
        ip[16..20].copy_from_slice(&remote.octets());
        let ip_sum = ip
            .chunks_exact(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        let mut gre_key_at = 0;
        match config.kind {
            TunnelKind::Vxlan | TunnelKind::Geneve => {
                outer[UDP_AT + 2..UDP_AT + 4].copy_from_slice(&config.dst_port.to_be_bytes());
                let tunnel = &mut outer[TUNNEL_AT..];
                match config.kind {
                    TunnelKind::Vxlan => tunnel[0] = VXLAN_I,
                    _ => tunnel[2..4].copy_from_slice(&ETHERNET_BRIDGING.to_be_bytes()),
                }
            }
            TunnelKind::Gre => {
                let mut flags = 0;
                let mut next = at + UDP_AT + GRE_BASE_LEN;
                if config.csum {
                    flags |= GRE_C;
                    next += 4;
                }
                if config.key != TunnelKey::Absent {
                    flags |= GRE_K;
                    gre_key_at = next as u8;
                }
                let gre = &mut outer[UDP_AT..];
                gre[0..2].copy_from_slice(&flags.to_be_bytes());
                gre[2..4].copy_from_slice(&ETHERNET_BRIDGING.to_be_bytes());
            }
        }
        OuterTemplate {
            bytes,
            at: at as u8,
            ip_sum,
            src: local,
            dst: remote,
            csum: config.csum,
            kind: config.kind,
            gre_key_at,
            df: config.df,
        }
    }

    /// Writes the outer headers into `packet[..OUTER_LEN]`, in front of the inner frame
    /// that fills the rest of it, with key (VNI) `vni` and, where DF is clear, IPv4 ID
    /// `ip_id`. The packet to send starts the returned number of bytes in (0 but for GRE,
    /// whose headers are shorter than the room).
    #[inline]
    #[must_use = "the packet to send starts this many bytes into the room"]
    pub fn push(&self, packet: &mut [u8], vni: u32, ip_id: u16) -> usize {
        let (room, inner) = packet.split_at_mut(OUTER_LEN);
        let room: &mut [u8; OUTER_LEN] = room.try_into().expect("the outer headers' room");
        *room = self.bytes;
        // Each kind apart: VXLAN's and Geneve's offsets are constants (no bounds checks).
        match self.kind {
            TunnelKind::Vxlan | TunnelKind::Geneve => {
                self.push_udp(room, inner, vni, ip_id);
                0
            }
            TunnelKind::Gre => {
                self.push_gre(room, inner, vni, ip_id);
                usize::from(self.at)
            }
        }
    }

    /// Writes the outer IPv4 header's length, ID and checksum for `ip` (the header) and an
    /// inner frame of `inner_len`; the packet's length on the IP layer. A packet routers may
    /// fragment (DF clear) carries `ip_id`, for the far end to reassemble it by (RFC 6864):
    /// with every one 0, fragments of different packets would be put together.
    #[inline(always)]
    fn set_ip_len(&self, ip: &mut [u8], outer_len: usize, inner_len: usize, ip_id: u16) -> u16 {
        let ip_len = (outer_len - ETHERNET_LEN + inner_len) as u16;
        ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
        let id = if self.df { 0 } else { ip_id };
        ip[4..6].copy_from_slice(&id.to_be_bytes());
        let sum = checksum::fold(u64::from(self.ip_sum + u32::from(ip_len) + u32::from(id)));
        ip[10..12].copy_from_slice(&(!sum).to_be_bytes());
        ip_len
    }

    #[inline]
    fn push_udp(&self, outer: &mut [u8; OUTER_LEN], inner: &[u8], vni: u32, ip_id: u16) {
        let ip_len = self.set_ip_len(
            &mut outer[ETHERNET_LEN..UDP_AT],
            OUTER_LEN,
            inner.len(),
            ip_id,
        );
        let udp_len = ip_len - IPV4_LEN as u16;
        outer[UDP_AT..UDP_AT + 2].copy_from_slice(&source_port(inner).to_be_bytes());
        outer[UDP_AT + 4..UDP_AT + 6].copy_from_slice(&udp_len.to_be_bytes());
        outer[TUNNEL_AT + 4..TUNNEL_AT + 7].copy_from_slice(&vni.to_be_bytes()[1..]);
        if self.csum {
            let sum = checksum::combine(&[
                checksum::pseudo_header_v4(self.src, self.dst, UDP, udp_len),
                checksum::data(&outer[UDP_AT..]),
                checksum::data(inner),
            ]);
            // Zero means "no checksum" over IPv4: a computed zero is sent as all ones.
            let sum = match !sum {
                0 => 0xffff,
                sum => sum,
            };
            outer[UDP_AT + 6..UDP_AT + 8].copy_from_slice(&sum.to_be_bytes());
        }
    }

    #[inline]
    fn push_gre(&self, room: &mut [u8; OUTER_LEN], inner: &[u8], key: u32, ip_id: u16) {
        let at = usize::from(self.at);
        let ip_at = at + ETHERNET_LEN;
        self.set_ip_len(
            &mut room[ip_at..ip_at + IPV4_LEN],
            OUTER_LEN - at,
            inner.len(),
            ip_id,
        );
        if self.gre_key_at != 0 {
            let key_at = usize::from(self.gre_key_at);
            room[key_at..key_at + 4].copy_from_slice(&key.to_be_bytes());
        }
        if self.csum {
            // Over the GRE header and what it carries, the field itself taken as zero.
            let gre_at = at + UDP_AT;
            let sum = checksum::combine(&[checksum::data(&room[gre_at..]), checksum::data(inner)]);
            room[gre_at + 4..gre_at + 6].copy_from_slice(&(!sum).to_be_bytes());
        }
    }
}

/// The UDP source port for an inner frame: a hash of its addresses, protocol and ports, so
/// one flow keeps one port and the underlay spreads flows (RFC 7348, 5). Read as whole
/// words and mixed with two multiplies: it runs for every packet pushed.
#[inline]
pub fn source_port(inner: &[u8]) -> u16 {
    let word = |at: usize, len: usize| -> u64 {
        let mut bytes = [0u8; 8];
        if let Some(field) = inner.get(at..at + len) {
            bytes[..len].copy_from_slice(field);
        }
        u64::from_le_bytes(bytes)
    };
    let mut l3 = 14;
    let mut ethertype = word(12, 2);
    if ethertype == 0x0081 {
        // 802.1Q (0x8100, read little-endian): the type after the tag.
        ethertype = word(16, 2);
        l3 = 18;
    }
    let (addresses, more, l4, protocol) = match ethertype {
        // 0x0800 and 0x86dd, read little-endian.
        0x0008 if inner.len() >= l3 + IPV4_LEN => {
            let protocol = inner[l3 + 9];
            let l4 = l3 + usize::from(inner[l3] & 0x0f) * 4;
            (word(l3 + 12, 8), 0, l4, protocol)
        }
        0xdd86 if inner.len() >= l3 + 40 => {
            let protocol = inner[l3 + 6];
            let fold = word(l3 + 8, 8) ^ word(l3 + 16, 8) ^ word(l3 + 24, 8) ^ word(l3 + 32, 8);
            (fold, 0, l3 + 40, protocol)
        }
        // Not IP: the addresses.
        _ => (word(0, 8), word(6, 6), 0, 0),
    };
    let ports = match protocol {
        6 | 17 | 132 => word(l4, 4),
        _ => 0,
    };
    let mix = |a: u64, b: u64| {
        let product = u128::from(a) * u128::from(b);
        (product as u64) ^ ((product >> 64) as u64)
    };
    let hash = mix(
        addresses ^ 0xa076_1d64_78bd_642f,
        (more ^ ports ^ (u64::from(protocol) << 56)) ^ 0xe703_7ed1_a0b4_28db,
    );
    let hash = mix(hash, 0x8ebc_6af0_9c88_c6e3);
    let span = u64::from(SOURCE_PORTS.1 - SOURCE_PORTS.0);
    SOURCE_PORTS.0 + (((hash >> 32) * span) >> 32) as u16
}

/// A received frame that is a tunnel's packet to a local address: where its inner frame is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Popped {
    /// The inner frame starts this many bytes into the packet...
    pub inner_at: usize,
    /// ...and is this long (the outer IPv4 length decides, not padding after it).
    pub inner_len: usize,
    pub meta: TunnelMeta,
}

/// Where a tunnel listens on its underlay: its local address, UDP destination port (0 for
/// GRE) and kind.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Listener {
    pub local: Ipv4Addr,
    pub dst_port: u16,
    pub kind: TunnelKind,
}

/// What a frame received on an underlay is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Arrival {
    /// Not UDP to an address and port where a VXLAN or Geneve tunnel listens, nor GRE to
    /// an address where a GRE tunnel does: the bridge's, as any other packet.
    Other,
    /// A tunnel packet, its UDP destination port (0 for GRE) and the inner frame.
    Tunnel(u16, TunnelKind, Popped),
    /// To where a tunnel listens, but not a packet the tunnel can take (bad
    /// header, fragment, Geneve critical options, GRE with routing or a bad checksum, not
    /// Ethernet inside).
    Malformed,
}

/// What a packet (its first frame `head`, then the frames `tail` of a chain, if any) is, for
/// an underlay whose tunnels are `listeners`. Only a GRE checksum reads past `head`. Inlined:
/// an [`Arrival`] returned through memory was read back wider than it was written (a
/// store-forwarding stall, a fifth of a pop).
#[inline(always)]
pub fn classify(head: &[u8], tail: &[&[u8]], listeners: &[Listener]) -> Arrival {
    let packet_len = head.len() + tail.iter().map(|frame| frame.len()).sum::<usize>();
    if head.len() < TUNNEL_AT || head[12..14] != [0x08, 0x00] {
        return Arrival::Other;
    }
    let ip = &head[ETHERNET_LEN..];
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    if ip[0] >> 4 != 4 {
        return Arrival::Other;
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let l4_at = ETHERNET_LEN + ihl;
    let (dst_port, kind, least) = match ip[9] {
        UDP => {
            let Some(udp) = head.get(l4_at..l4_at + UDP_LEN) else {
                return Arrival::Other;
            };
            let dst_port = u16::from_be_bytes([udp[2], udp[3]]);
            let listens = |l: &&Listener| {
                l.local == dst && l.dst_port == dst_port && l.kind != TunnelKind::Gre
            };
            let Some(listener) = listeners.iter().find(listens) else {
                return Arrival::Other;
            };
            (dst_port, listener.kind, UDP_LEN + TUNNEL_HEADER_LEN)
        }
        GRE if listeners
            .iter()
            .any(|l| l.local == dst && l.kind == TunnelKind::Gre) =>
        {
            // The IPv4 header and GRE's base header in the frame at hand (a chain's first
            // frame can be shorter than a long header with options).
            if head.len() < l4_at + GRE_BASE_LEN {
                return Arrival::Malformed;
            }
            (0, TunnelKind::Gre, GRE_BASE_LEN)
        }
        _ => return Arrival::Other,
    };
    let ip_len = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
    let ip_end = ETHERNET_LEN + ip_len;
    // A chain's length is its IP packet's; only a single frame carries padding after it.
    let well_formed = ihl >= IPV4_LEN
        && !fragment
        && ip_len >= ihl + least
        && (ip_end == packet_len || (ip_end < packet_len && packet_len == head.len()))
        && header_sum_is_right(&ip[..ihl]);
    if !well_formed {
        return Arrival::Malformed;
    }
    let tunnel_at = l4_at + UDP_LEN;
    let (inner_at, vni, opts) = match kind {
        TunnelKind::Gre => match gre(head, tail, l4_at, ip_end) {
            Some((inner_at, key)) => (inner_at, key, 0),
            None => return Arrival::Malformed,
        },
        _ => {
            let Some(tunnel) = head.get(tunnel_at..tunnel_at + TUNNEL_HEADER_LEN) else {
                return Arrival::Malformed;
            };
            let vni = u32::from_be_bytes([0, tunnel[4], tunnel[5], tunnel[6]]);
            // A UDP checksum, when the far end sent one (csum=true), is checked as Open
            // vSwitch checks it: a packet it does not add up for is not popped.
            if head[l4_at + 6..l4_at + 8] != [0, 0] && !udp_sum_is_right(head, tail, l4_at, ip_end)
            {
                return Arrival::Malformed;
            }
            match udp_tunnel(head, kind, tunnel_at, tunnel) {
                Some((inner_at, opts)) => (inner_at, vni, opts),
                None => return Arrival::Malformed,
            }
        }
    };
    if ip_end < inner_at + ETHERNET_LEN || head.len() < inner_at + ETHERNET_LEN {
        return Arrival::Malformed;
    }
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    Arrival::Tunnel(
        dst_port,
        kind,
        Popped {
            inner_at,
            inner_len: ip_end - inner_at,
            meta: TunnelMeta {
                id: u64::from(vni),
                src: u32::from(src),
                dst: u32::from(dst),
                opts,
            },
        },
    )
}

/// A VXLAN or Geneve header at `tunnel_at` (its first eight bytes `tunnel`): where the
/// inner frame starts and Geneve's first option (raw), or `None` if the tunnel cannot take
/// it.
#[inline(always)]
fn udp_tunnel(
    head: &[u8],
    kind: TunnelKind,
    tunnel_at: usize,
    tunnel: &[u8],
) -> Option<(usize, u64)> {
    match kind {
        TunnelKind::Vxlan if tunnel[0] & VXLAN_I != 0 => Some((tunnel_at + TUNNEL_HEADER_LEN, 0)),
        TunnelKind::Geneve => {
            let version = tunnel[0] >> 6;
            let opts_len = usize::from(tunnel[0] & 0x3f) * 4;
            let protocol = u16::from_be_bytes([tunnel[2], tunnel[3]]);
            if version != 0 || tunnel[1] & GENEVE_CRITICAL != 0 || protocol != ETHERNET_BRIDGING {
                return None;
            }
            let opts_at = tunnel_at + TUNNEL_HEADER_LEN;
            let options = head.get(opts_at..opts_at + opts_len)?;
            let mut first = [0u8; 8];
            let n = options.len().min(8);
            first[..n].copy_from_slice(&options[..n]);
            Some((opts_at + opts_len, u64::from_be_bytes(first)))
        }
        _ => None,
    }
}

/// A GRE header at `gre_at` of an IP packet ending at `ip_end` (a chain's ends with its last
/// frame, `tail`'s): where the inner frame starts and the key (0 without one), or `None` if
/// the tunnel cannot take it: version other than 0, routing, not Ethernet inside, or a wrong
/// checksum. A sequence number is skipped.
#[inline(always)]
fn gre(head: &[u8], tail: &[&[u8]], gre_at: usize, ip_end: usize) -> Option<(usize, u32)> {
    let base = head.get(gre_at..gre_at + GRE_BASE_LEN)?;
    let flags = u16::from_be_bytes([base[0], base[1]]);
    let protocol = u16::from_be_bytes([base[2], base[3]]);
    if flags & (GRE_R | GRE_VERSION) != 0 || protocol != ETHERNET_BRIDGING {
        return None;
    }
    let mut next = gre_at + GRE_BASE_LEN;
    if flags & GRE_C != 0 {
        let sum = match tail {
            [] => checksum::data(head.get(gre_at..ip_end)?),
            // A chain's IP packet ends with its last frame.
            _ => {
                let first = head.get(gre_at..ip_end.min(head.len()))?;
                checksum::data_chained(std::iter::once(first).chain(tail.iter().copied()))
            }
        };
        if sum != 0xffff {
            return None;
        }
        next += 4;
    }
    let mut key = 0;
    if flags & GRE_K != 0 {
        let field = head.get(next..next + 4)?;
        key = u32::from_be_bytes([field[0], field[1], field[2], field[3]]);
        next += 4;
    }
    if flags & GRE_S != 0 {
        next += 4;
    }
    Some((next, key))
}

/// Whether the UDP datagram at `l4_at` (to `ip_end`, a chain's later frames in `tail`) adds
/// up with its IPv4 pseudo-header, or its checksum is one its sender left to its device
/// (the field holds the pseudo-header's sum: a veth's frames, read raw, come so; the
/// kernel takes them as checked, [`wirespeed_packet::partial_checksum`]).
#[cold]
fn udp_sum_is_right(head: &[u8], tail: &[&[u8]], l4_at: usize, ip_end: usize) -> bool {
    let ip = &head[ETHERNET_LEN..];
    let (src, dst) = (
        Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
        Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]),
    );
    let udp_len = u16::from_be_bytes([head[l4_at + 4], head[l4_at + 5]]);
    // The datagram is what its length says (the IP packet may hold bytes after it).
    let end = l4_at + usize::from(udp_len);
    if usize::from(udp_len) < UDP_LEN || end > ip_end {
        return false;
    }
    let data = match tail {
        [] => checksum::data(&head[l4_at..end]),
        // A chain: its frames up to the datagram's end.
        _ => {
            let first = &head[l4_at..end.min(head.len())];
            let mut left = end - l4_at - first.len();
            let rest = tail.iter().map(|frame| {
                let part = &frame[..left.min(frame.len())];
                left -= part.len();
                part
            });
            checksum::data_chained(std::iter::once(first).chain(rest))
        }
    };
    let pseudo = checksum::pseudo_header_v4(src, dst, UDP, udp_len);
    let field = u16::from_be_bytes([head[l4_at + 6], head[l4_at + 7]]);
    field == pseudo || checksum::combine(&[pseudo, data]) == 0xffff
}

/// Whether an IPv4 header's checksum is right; the usual 20 bytes summed as five words in
/// line (the general sum's loop is for long data).
#[inline(always)]
fn header_sum_is_right(header: &[u8]) -> bool {
    if header.len() != IPV4_LEN {
        return checksum::verify(header);
    }
    let acc: u64 = header
        .chunks_exact(4)
        .map(|w| u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]])))
        .sum();
    checksum::fold(acc) == 0xffff
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(kind: &str) -> TunnelConfig {
        format!("{kind}:remote_ip=192.0.2.2,key=flow")
            .parse()
            .unwrap()
    }

    /// Tunnels of each kind on `ports` (UDP port, kind) at each address of `local`.
    fn listeners(local: &[Ipv4Addr], ports: &[(u16, TunnelKind)]) -> Vec<Listener> {
        let at = |&local| {
            ports.iter().map(move |&(dst_port, kind)| Listener {
                local,
                dst_port,
                kind,
            })
        };
        local.iter().flat_map(at).collect()
    }

    fn inner() -> Vec<u8> {
        let mut frame = vec![0u8; 60];
        frame[..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        frame[14] = 0x45;
        frame[23] = 17;
        frame[26..30].copy_from_slice(&[10, 0, 0, 1]);
        frame[30..34].copy_from_slice(&[10, 0, 0, 2]);
        frame[34..38].copy_from_slice(&[0x30, 0x39, 0x00, 0x35]);
        frame
    }

    fn pushed(config: &TunnelConfig, vni: u32) -> Vec<u8> {
        let local = Ipv4Addr::new(192, 0, 2, 1);
        let template = OuterTemplate::new(
            config,
            MacAddr([2, 0, 0, 0, 0, 0xa]),
            MacAddr([2, 0, 0, 0, 0, 0xb]),
            local,
            Ipv4Addr::new(192, 0, 2, 2),
        );
        let mut packet = vec![0u8; OUTER_LEN];
        packet.extend_from_slice(&inner());
        let at = template.push(&mut packet, vni, 0x1234);
        assert_eq!(at, OUTER_LEN - outer_len(config));
        packet.split_off(at)
    }

    /// DF set (the default), the outer ID is 0; clear, each packet carries the ID it is
    /// given, in the header checksum too: fragments of two packets a router cut are never
    /// put together at the far end.
    #[test]
    fn packets_routers_may_fragment_carry_an_id_each() {
        for kind in ["vxlan", "gre"] {
            let with_df = pushed(&config(kind), 1);
            assert_eq!(&with_df[18..20], &[0, 0], "{kind}: DF set");
            let mut no_df = config(kind);
            no_df.df = false;
            let packet = pushed(&no_df, 1);
            assert_eq!(&packet[18..20], &[0x12, 0x34], "{kind}: the ID given");
            assert_eq!(packet[20] & 0x40, 0, "{kind}: DF clear");
            assert!(checksum::verify(&packet[14..34]), "{kind}: IPv4 checksum");
        }
    }

    #[test]
    fn pushed_headers_pop_back_to_the_same_frame() {
        for kind in ["vxlan", "geneve"] {
            let config = config(kind);
            let packet = pushed(&config, 0x12_3456);
            assert_eq!(&packet[..6], &[2, 0, 0, 0, 0, 0xb]);
            assert!(checksum::verify(&packet[14..34]), "{kind}: IPv4 checksum");
            assert_eq!(
                u16::from_be_bytes([packet[16], packet[17]]),
                20 + 8 + 8 + 60
            );
            assert_eq!(packet[20] & 0x40, 0x40, "DF");
            let local = [Ipv4Addr::new(192, 0, 2, 2)];
            // The far end sees it addressed to itself.
            let ports = [(config.dst_port, config.kind)];
            let Arrival::Tunnel(port, got, popped) =
                classify(&packet, &[], &listeners(&local, &ports))
            else {
                panic!("{kind}: not popped");
            };
            assert_eq!((port, got), (config.dst_port, config.kind));
            assert_eq!(popped.inner_at, OUTER_LEN);
            assert_eq!(popped.inner_len, 60);
            assert_eq!(popped.meta.id, 0x12_3456);
            assert_eq!(popped.meta.src, u32::from(Ipv4Addr::new(192, 0, 2, 1)));
            assert_eq!(popped.meta.dst, u32::from(Ipv4Addr::new(192, 0, 2, 2)));
            assert_eq!(&packet[OUTER_LEN..], &inner()[..]);
        }
    }

    #[test]
    fn gre_pops_back_with_its_key_and_checksum() {
        let local = [Ipv4Addr::new(192, 0, 2, 2)];
        let ports = [(0, TunnelKind::Gre)];
        for (spec, len, flags) in [
            ("gre:remote_ip=192.0.2.2", 38, 0x0000),
            ("gre:remote_ip=192.0.2.2,key=flow", 42, 0x2000),
            ("gre:remote_ip=192.0.2.2,key=flow,csum=true", 46, 0xa000),
        ] {
            let config: TunnelConfig = spec.parse().unwrap();
            let packet = pushed(&config, 0xdead_beef);
            assert_eq!(packet.len(), len + 60, "{spec}");
            assert_eq!(packet[23], GRE, "{spec}");
            assert!(checksum::verify(&packet[14..34]), "{spec}: IPv4 checksum");
            assert_eq!(
                u16::from_be_bytes([packet[16], packet[17]]) as usize,
                len - 14 + 60
            );
            assert_eq!(
                u16::from_be_bytes([packet[34], packet[35]]),
                flags,
                "{spec}"
            );
            assert_eq!(&packet[36..38], &[0x65, 0x58], "{spec}");
            if flags & GRE_C != 0 {
                assert!(checksum::verify(&packet[34..]), "{spec}: GRE checksum");
            }
            let Arrival::Tunnel(port, kind, popped) =
                classify(&packet, &[], &listeners(&local, &ports))
            else {
                panic!("{spec}: not popped");
            };
            assert_eq!((port, kind), (0, TunnelKind::Gre));
            assert_eq!(popped.inner_at, len, "{spec}");
            assert_eq!(popped.inner_len, 60, "{spec}");
            let key = if flags & GRE_K != 0 { 0xdead_beef } else { 0 };
            assert_eq!(popped.meta.id, key, "{spec}");
            assert_eq!(&packet[len..], &inner()[..], "{spec}");
        }
    }

    #[test]
    fn gre_the_tunnel_cannot_take_is_malformed() {
        let local = [Ipv4Addr::new(192, 0, 2, 2)];
        let ports = [(0, TunnelKind::Gre)];
        let config: TunnelConfig = "gre:remote_ip=192.0.2.2,key=5,csum=true".parse().unwrap();
        let good = pushed(&config, 5);
        let changed = |at: usize, byte: u8| {
            let mut p = good.clone();
            p[at] = byte;
            classify(&p, &[], &listeners(&local, &ports))
        };
        assert_eq!(changed(34, 0xe0), Arrival::Malformed, "routing");
        assert_eq!(changed(35, 0x01), Arrival::Malformed, "version 1 (PPTP)");
        assert_eq!(changed(37, 0x00), Arrival::Malformed, "not Ethernet inside");
        assert_eq!(
            changed(60, 0x77),
            Arrival::Malformed,
            "a wrong GRE checksum"
        );
        // A chain's checksum covers every frame, cut at odd and even lengths: right, it is
        // popped; a byte changed in a later frame, it is not.
        let chain = |p: &[u8], cuts: &[usize]| {
            let mut frames: Vec<&[u8]> = Vec::new();
            let mut from = cuts[0];
            for &cut in &cuts[1..] {
                frames.push(&p[from..cut]);
                from = cut;
            }
            frames.push(&p[from..]);
            classify(&p[..cuts[0]], &frames, &listeners(&local, &ports))
        };
        for cuts in [[60, 71, 90], [61, 77, 78], [80, 81, 100]] {
            assert!(
                matches!(chain(&good, &cuts), Arrival::Tunnel(..)),
                "{cuts:?}"
            );
            let mut bad = good.clone();
            bad[101] ^= 0x10;
            assert_eq!(chain(&bad, &cuts), Arrival::Malformed, "{cuts:?}");
        }
        // A sequence number is skipped.
        let mut seq = good.clone();
        seq[34] |= 0x10;
        seq.splice(46..46, [0, 0, 0, 9]);
        let ip_len = u16::from_be_bytes([seq[16], seq[17]]) + 4;
        seq[16..18].copy_from_slice(&ip_len.to_be_bytes());
        seq[24..26].copy_from_slice(&[0, 0]);
        let sum = checksum::internet_checksum(&seq[14..34]);
        seq[24..26].copy_from_slice(&sum.to_be_bytes());
        seq[38..40].copy_from_slice(&[0, 0]);
        let sum = checksum::internet_checksum(&seq[34..]);
        seq[38..40].copy_from_slice(&sum.to_be_bytes());
        let Arrival::Tunnel(_, _, popped) = classify(&seq, &[], &listeners(&local, &ports)) else {
            panic!("a sequence number");
        };
        assert_eq!((popped.inner_at, popped.meta.id), (50, 5));
        // A chain's first frame too short for a long IPv4 header (options) and GRE's.
        let mut options = good.clone();
        options[14] = 0x4f;
        assert_eq!(
            classify(
                &options[..50],
                &[&options[50..]],
                &listeners(&local, &ports)
            ),
            Arrival::Malformed
        );
        // UDP to port 0 is not GRE's.
        let vxlan: TunnelConfig = "vxlan:remote_ip=192.0.2.2,dst_port=1".parse().unwrap();
        let mut udp = pushed(&vxlan, 5);
        udp[36..38].copy_from_slice(&[0, 0]);
        assert_eq!(
            classify(&udp, &[], &listeners(&local, &ports)),
            Arrival::Other
        );
        // Without a GRE port listening, GRE is any other packet.
        assert_eq!(
            classify(&good, &[], &listeners(&local, &[(4789, TunnelKind::Vxlan)])),
            Arrival::Other
        );
    }

    #[test]
    fn the_udp_checksum_is_right_when_asked_for() {
        let mut config = config("geneve");
        config.csum = true;
        let packet = pushed(&config, 7);
        let udp = &packet[UDP_AT..];
        let sum = checksum::combine(&[
            checksum::pseudo_header_v4(
                Ipv4Addr::new(192, 0, 2, 1),
                Ipv4Addr::new(192, 0, 2, 2),
                17,
                udp.len() as u16,
            ),
            checksum::data(udp),
        ]);
        assert_eq!(sum, 0xffff, "a right checksum sums to all ones");
        assert_ne!(&udp[6..8], &[0, 0]);
        // The far end checks it: a byte of the inner frame changed on the way is not popped;
        // without a checksum (zero) nothing is checked.
        let local = [Ipv4Addr::new(192, 0, 2, 2)];
        let listening = listeners(&local, &[(config.dst_port, config.kind)]);
        assert!(matches!(
            classify(&packet, &[], &listening),
            Arrival::Tunnel(..)
        ));
        let mut changed = packet.clone();
        *changed.last_mut().unwrap() ^= 0x40;
        assert_eq!(classify(&changed, &[], &listening), Arrival::Malformed);
        // A checksum its sender left to its device (offload): the pseudo-header's sum.
        let pseudo = checksum::pseudo_header_v4(
            Ipv4Addr::new(192, 0, 2, 1),
            Ipv4Addr::new(192, 0, 2, 2),
            17,
            udp.len() as u16,
        );
        changed[UDP_AT + 6..UDP_AT + 8].copy_from_slice(&pseudo.to_be_bytes());
        assert!(matches!(
            classify(&changed, &[], &listening),
            Arrival::Tunnel(..)
        ));
        changed[UDP_AT + 6..UDP_AT + 8].copy_from_slice(&[0, 0]);
        assert!(matches!(
            classify(&changed, &[], &listening),
            Arrival::Tunnel(..)
        ));
        // The sum covers the datagram as its length says, not bytes the IP packet holds
        // after it; a length past the packet does not add up.
        let mut longer = packet.clone();
        longer.extend_from_slice(&[0xab, 0xcd]);
        let ip_len = u16::from_be_bytes([longer[16], longer[17]]) + 2;
        longer[16..18].copy_from_slice(&ip_len.to_be_bytes());
        longer[24..26].fill(0);
        let sum = checksum::internet_checksum(&longer[14..34]);
        longer[24..26].copy_from_slice(&sum.to_be_bytes());
        assert!(matches!(
            classify(&longer, &[], &listening),
            Arrival::Tunnel(..)
        ));
        let udp_len = u16::from_be_bytes([longer[UDP_AT + 4], longer[UDP_AT + 5]]);
        longer[UDP_AT + 4..UDP_AT + 6].copy_from_slice(&(udp_len + 4).to_be_bytes());
        assert_eq!(classify(&longer, &[], &listening), Arrival::Malformed);
    }

    #[test]
    fn a_flow_keeps_its_source_port_and_flows_differ() {
        let mut a = inner();
        let first = source_port(&a);
        a[24] = 99; // the TTL is not part of the flow
        assert_eq!(source_port(&a), first);
        a[35] = 0x3a; // another source port
        assert_ne!(source_port(&a), first);
        assert!((SOURCE_PORTS.0..SOURCE_PORTS.1).contains(&first));
    }

    #[test]
    fn what_a_tunnel_cannot_take_is_malformed_and_the_rest_is_not_its() {
        let config = config("vxlan");
        let local = [Ipv4Addr::new(192, 0, 2, 2)];
        let ports = [(config.dst_port, config.kind)];
        let good = pushed(&config, 5);
        let mut bad_sum = good.clone();
        bad_sum[24] ^= 1;
        assert_eq!(
            classify(&bad_sum, &[], &listeners(&local, &ports)),
            Arrival::Malformed
        );
        let mut fragment = good.clone();
        fragment[20] |= 0x20; // MF
        assert_eq!(
            classify(&fragment, &[], &listeners(&local, &ports)),
            Arrival::Malformed
        );
        let mut no_i = good.clone();
        no_i[TUNNEL_AT] = 0;
        assert_eq!(
            classify(&no_i, &[], &listeners(&local, &ports)),
            Arrival::Malformed
        );
        // A head of a longer packet (a chain) is popped; an IPv4 length past the packet's
        // end is a lie.
        assert!(matches!(
            classify(&good[..80], &[&good[80..]], &listeners(&local, &ports)),
            Arrival::Tunnel(..)
        ));
        assert_eq!(
            classify(&good[..80], &[&good[80..100]], &listeners(&local, &ports)),
            Arrival::Malformed
        );
        let elsewhere = [Ipv4Addr::new(192, 0, 2, 9)];
        assert_eq!(
            classify(&good, &[], &listeners(&elsewhere, &ports)),
            Arrival::Other
        );
        // Its port at another address, and another kind at its address, are not it.
        let crossed = [
            Listener {
                local: elsewhere[0],
                dst_port: ports[0].0,
                kind: ports[0].1,
            },
            Listener {
                local: local[0],
                dst_port: 0,
                kind: TunnelKind::Gre,
            },
        ];
        assert_eq!(classify(&good, &[], &crossed), Arrival::Other);
        assert_eq!(
            classify(&good, &[], &listeners(&local, &[])),
            Arrival::Other
        );
        assert_eq!(
            classify(&inner(), &[], &listeners(&local, &ports)),
            Arrival::Other
        );
        let geneve = TunnelConfig {
            kind: TunnelKind::Geneve,
            ..config.clone()
        };
        let mut critical = pushed(&geneve, 5);
        critical[TUNNEL_AT + 1] |= GENEVE_CRITICAL;
        let ports = [(geneve.dst_port, TunnelKind::Geneve)];
        assert_eq!(
            classify(&critical, &[], &listeners(&local, &ports)),
            Arrival::Malformed
        );
    }

    #[test]
    fn geneve_options_are_skipped_and_the_first_kept_raw() {
        let config = TunnelConfig {
            kind: TunnelKind::Geneve,
            ..config("vxlan")
        };
        let mut packet = pushed(&config, 9);
        // One option: class 0x0102, type 0x80, 4 bytes of data.
        let option = [0x01, 0x02, 0x80, 0x01, 0xde, 0xad, 0xbe, 0xef];
        packet.splice(OUTER_LEN..OUTER_LEN, option);
        packet[TUNNEL_AT] = 2; // options: two 4-byte words
        let ip_len = u16::from_be_bytes([packet[16], packet[17]]) + 8;
        packet[16..18].copy_from_slice(&ip_len.to_be_bytes());
        packet[24..26].copy_from_slice(&[0, 0]);
        let sum = !checksum::fold(u64::from(checksum::data(&packet[14..34])));
        packet[24..26].copy_from_slice(&sum.to_be_bytes());
        let local = [Ipv4Addr::new(192, 0, 2, 2)];
        let ports = [(config.dst_port, TunnelKind::Geneve)];
        let arrival = classify(&packet, &[], &listeners(&local, &ports));
        let Arrival::Tunnel(_, _, popped) = arrival else {
            panic!("not popped: {arrival:?}");
        };
        assert_eq!(popped.inner_at, OUTER_LEN + 8);
        assert_eq!(popped.inner_len, 60);
        assert_eq!(popped.meta.opts, 0x0102_8001_dead_beef);
    }

    mod hostile {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// Hostile underlay input: a pushed packet with bytes changed (the outer IPv4
            /// header's checksum made right again half the time, so the checks past it are
            /// reached), cut short, and taken as a whole frame or as the head of a longer
            /// chain. Classifying never panics, and what it pops lies inside the packet with
            /// room for the inner Ethernet header in the frame at hand.
            #[test]
            fn a_changed_tunnel_packet_pops_within_its_bounds_or_not_at_all(
                kind in 0usize..3,
                changes in proptest::collection::vec((0usize..100, any::<u8>()), 0..6),
                fix_sum in any::<bool>(),
                keep in 0usize..120,
                chained in prop_oneof![Just(0usize), 1usize..3000],
            ) {
                let config = config(["vxlan", "geneve", "gre"][kind]);
                let mut packet = pushed(&config, 42);
                for (at, byte) in changes {
                    if let Some(b) = packet.get_mut(at) {
                        *b = byte;
                    }
                }
                let ihl = usize::from(packet[14] & 0x0f) * 4;
                if fix_sum && ihl >= IPV4_LEN && ETHERNET_LEN + ihl <= packet.len() {
                    packet[24..26].copy_from_slice(&[0, 0]);
                    let sum = checksum::internet_checksum(&packet[ETHERNET_LEN..ETHERNET_LEN + ihl]);
                    packet[24..26].copy_from_slice(&sum.to_be_bytes());
                }
                packet.truncate(keep);
                let rest = vec![0u8; chained];
                let tail: &[&[u8]] = if chained == 0 { &[] } else { &[&rest] };
                let packet_len = packet.len() + chained;
                let local = [Ipv4Addr::new(192, 0, 2, 1)];
                let ports = [
                    (4789, TunnelKind::Vxlan),
                    (6081, TunnelKind::Geneve),
                    (0, TunnelKind::Gre),
                ];
                let listening = listeners(&local, &ports);
                if let Arrival::Tunnel(_, _, popped) = classify(&packet, tail, &listening) {
                    prop_assert!(popped.inner_len >= ETHERNET_LEN, "{popped:?}");
                    prop_assert!(popped.inner_at + ETHERNET_LEN <= packet.len(), "{popped:?}");
                    prop_assert!(popped.inner_at + popped.inner_len <= packet_len, "{popped:?}");
                }
            }
        }
    }
}
