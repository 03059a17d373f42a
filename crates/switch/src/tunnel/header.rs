//! The outer headers of a tunnelled packet: Ethernet, IPv4, UDP, then VXLAN (RFC 7348) or
//! Geneve (RFC 8926). Pushing writes all of them from a template made once per neighbour
//! (only the lengths, the checksums, the source port and the VNI change per packet, OVS's
//! `tnl_push` idea); popping checks them and says where the inner frame is.

use std::net::Ipv4Addr;

use wirespeed_packet::MacAddr;
use wirespeed_packet::checksum;

use crate::field::TunnelMeta;
use crate::tunnel::config::{TunnelConfig, TunnelKind};

pub const VXLAN_PORT: u16 = 4789;
pub const GENEVE_PORT: u16 = 6081;
const ETHERNET_LEN: usize = 14;
const IPV4_LEN: usize = 20;
const UDP_LEN: usize = 8;
/// VXLAN's header, and Geneve's without options (both eight bytes).
const TUNNEL_HEADER_LEN: usize = 8;
/// What pushing adds in front of the inner frame (no Geneve options are sent).
pub const OUTER_LEN: usize = ETHERNET_LEN + IPV4_LEN + UDP_LEN + TUNNEL_HEADER_LEN;
/// What the outer IPv4 packet adds to the inner frame, against the underlay's MTU.
pub const OUTER_IP_OVERHEAD: usize = OUTER_LEN - ETHERNET_LEN;
const UDP_AT: usize = ETHERNET_LEN + IPV4_LEN;
const TUNNEL_AT: usize = UDP_AT + UDP_LEN;
/// VXLAN's flags byte with the I bit: the VNI is valid.
const VXLAN_I: u8 = 0x08;
/// Geneve's protocol type for an Ethernet frame (Transparent Ethernet Bridging).
const GENEVE_ETHERNET: u16 = 0x6558;
/// Geneve's flag: the options include a critical one, which a receiver that does not
/// process options must drop the packet for (RFC 8926, 3.4).
const GENEVE_CRITICAL: u8 = 0x40;
const IPV4_DF: u16 = 0x4000;
/// Linux's and Open vSwitch's range for a tunnel's UDP source port.
const SOURCE_PORTS: (u16, u16) = (32768, 61000);

/// One tunnel's outer headers with everything fixed filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OuterTemplate {
    bytes: [u8; OUTER_LEN],
    /// The outer IPv4 header's sum without its length (added per packet).
    ip_sum: u32,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    csum: bool,
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
        bytes[0..6].copy_from_slice(&dst_mac.0);
        bytes[6..12].copy_from_slice(&src_mac.0);
        bytes[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip = &mut bytes[ETHERNET_LEN..UDP_AT];
        ip[0] = 0x45;
        if config.df {
            ip[6..8].copy_from_slice(&IPV4_DF.to_be_bytes());
        }
        ip[8] = config.ttl;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&local.octets());
        ip[16..20].copy_from_slice(&remote.octets());
        let ip_sum = ip
            .chunks_exact(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        bytes[UDP_AT + 2..UDP_AT + 4].copy_from_slice(&config.dst_port.to_be_bytes());
        let tunnel = &mut bytes[TUNNEL_AT..];
        match config.kind {
            TunnelKind::Vxlan => tunnel[0] = VXLAN_I,
            TunnelKind::Geneve => tunnel[2..4].copy_from_slice(&GENEVE_ETHERNET.to_be_bytes()),
        }
        OuterTemplate {
            bytes,
            ip_sum,
            src: local,
            dst: remote,
            csum: config.csum,
        }
    }

    /// Writes the outer headers into `packet[..OUTER_LEN]`, in front of the inner frame
    /// that fills the rest of it.
    #[inline]
    pub fn push(&self, packet: &mut [u8], vni: u32, src_port: u16) {
        let (outer, inner) = packet.split_at_mut(OUTER_LEN);
        let outer: &mut [u8; OUTER_LEN] = outer.try_into().expect("the outer headers' room");
        *outer = self.bytes;
        let ip_len = (OUTER_IP_OVERHEAD + inner.len()) as u16;
        let ip = &mut outer[ETHERNET_LEN..UDP_AT];
        ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
        let sum = checksum::fold(u64::from(self.ip_sum + u32::from(ip_len)));
        ip[10..12].copy_from_slice(&(!sum).to_be_bytes());
        let udp_len = ip_len - IPV4_LEN as u16;
        outer[UDP_AT..UDP_AT + 2].copy_from_slice(&src_port.to_be_bytes());
        outer[UDP_AT + 4..UDP_AT + 6].copy_from_slice(&udp_len.to_be_bytes());
        outer[TUNNEL_AT + 4..TUNNEL_AT + 7].copy_from_slice(&vni.to_be_bytes()[1..]);
        if self.csum {
            let sum = checksum::combine(&[
                checksum::pseudo_header_v4(self.src, self.dst, 17, udp_len),
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

/// A received frame that is an IPv4/UDP packet to `local` on a tunnel's port: where its
/// inner frame is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Popped {
    /// The inner frame starts this many bytes into the packet...
    pub inner_at: usize,
    /// ...and is this long (the outer IPv4 length decides, not padding after it).
    pub inner_len: usize,
    pub meta: TunnelMeta,
}

/// What a frame received on an underlay is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Arrival {
    /// Not UDP to a local address on a tunnel port: the bridge's, as any other packet.
    Other,
    /// A tunnel packet, its UDP destination port and the inner frame.
    Tunnel(u16, TunnelKind, Popped),
    /// To a local address on a tunnel port, but not a packet the tunnel can take (bad
    /// header, fragment, Geneve critical options, not Ethernet inside).
    Malformed,
}

/// What `head` (the first `head.len()` bytes of a packet of `packet_len`) is, for an
/// underlay whose tunnels listen at `local` on `ports` (UDP port, kind). Inlined: an
/// [`Arrival`] returned through memory was read back wider than it was written (a
/// store-forwarding stall, a fifth of a pop).
#[inline(always)]
pub fn classify(
    head: &[u8],
    packet_len: usize,
    local: &[Ipv4Addr],
    ports: &[(u16, TunnelKind)],
) -> Arrival {
    if head.len() < TUNNEL_AT || head[12..14] != [0x08, 0x00] {
        return Arrival::Other;
    }
    let ip = &head[ETHERNET_LEN..];
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    if ip[0] >> 4 != 4 || ip[9] != 17 || !local.contains(&dst) {
        return Arrival::Other;
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let udp_at = ETHERNET_LEN + ihl;
    let Some(udp) = head.get(udp_at..udp_at + UDP_LEN) else {
        return Arrival::Other;
    };
    let dst_port = u16::from_be_bytes([udp[2], udp[3]]);
    let Some(&(_, kind)) = ports.iter().find(|(port, _)| *port == dst_port) else {
        return Arrival::Other;
    };
    let ip_len = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
    let ip_end = ETHERNET_LEN + ip_len;
    // A chain's length is its IP packet's; only a single frame carries padding after it.
    let well_formed = ihl >= IPV4_LEN
        && !fragment
        && ip_len >= ihl + UDP_LEN + TUNNEL_HEADER_LEN
        && (ip_end == packet_len || (ip_end < packet_len && packet_len == head.len()))
        && header_sum_is_right(&ip[..ihl]);
    if !well_formed {
        return Arrival::Malformed;
    }
    let tunnel_at = udp_at + UDP_LEN;
    let Some(tunnel) = head.get(tunnel_at..tunnel_at + TUNNEL_HEADER_LEN) else {
        return Arrival::Malformed;
    };
    let vni = u32::from_be_bytes([0, tunnel[4], tunnel[5], tunnel[6]]);
    let (inner_at, opts) = match kind {
        TunnelKind::Vxlan if tunnel[0] & VXLAN_I != 0 => (tunnel_at + TUNNEL_HEADER_LEN, 0),
        TunnelKind::Vxlan => return Arrival::Malformed,
        TunnelKind::Geneve => {
            let version = tunnel[0] >> 6;
            let opts_len = usize::from(tunnel[0] & 0x3f) * 4;
            let protocol = u16::from_be_bytes([tunnel[2], tunnel[3]]);
            if version != 0 || tunnel[1] & GENEVE_CRITICAL != 0 || protocol != GENEVE_ETHERNET {
                return Arrival::Malformed;
            }
            let opts_at = tunnel_at + TUNNEL_HEADER_LEN;
            let Some(options) = head.get(opts_at..opts_at + opts_len) else {
                return Arrival::Malformed;
            };
            let mut first = [0u8; 8];
            let n = options.len().min(8);
            first[..n].copy_from_slice(&options[..n]);
            (opts_at + opts_len, u64::from_be_bytes(first))
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
        let inner = inner();
        let mut packet = vec![0u8; OUTER_LEN];
        packet.extend_from_slice(&inner);
        template.push(&mut packet, vni, source_port(&inner));
        packet
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
                classify(&packet, packet.len(), &local, &ports)
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
            classify(&bad_sum, bad_sum.len(), &local, &ports),
            Arrival::Malformed
        );
        let mut fragment = good.clone();
        fragment[20] |= 0x20; // MF
        assert_eq!(
            classify(&fragment, fragment.len(), &local, &ports),
            Arrival::Malformed
        );
        let mut no_i = good.clone();
        no_i[TUNNEL_AT] = 0;
        assert_eq!(
            classify(&no_i, no_i.len(), &local, &ports),
            Arrival::Malformed
        );
        // A head of a longer packet (a chain) is popped; an IPv4 length past the packet's
        // end is a lie.
        assert!(matches!(
            classify(&good[..80], good.len(), &local, &ports),
            Arrival::Tunnel(..)
        ));
        assert_eq!(
            classify(&good[..80], 100, &local, &ports),
            Arrival::Malformed
        );
        let elsewhere = [Ipv4Addr::new(192, 0, 2, 9)];
        assert_eq!(
            classify(&good, good.len(), &elsewhere, &ports),
            Arrival::Other
        );
        assert_eq!(classify(&good, good.len(), &local, &[]), Arrival::Other);
        assert_eq!(classify(&inner(), 60, &local, &ports), Arrival::Other);
        let geneve = TunnelConfig {
            kind: TunnelKind::Geneve,
            ..config.clone()
        };
        let mut critical = pushed(&geneve, 5);
        critical[TUNNEL_AT + 1] |= GENEVE_CRITICAL;
        let ports = [(geneve.dst_port, TunnelKind::Geneve)];
        assert_eq!(
            classify(&critical, critical.len(), &local, &ports),
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
        let arrival = classify(&packet, packet.len(), &local, &ports);
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
                geneve in any::<bool>(),
                changes in proptest::collection::vec((0usize..100, any::<u8>()), 0..6),
                fix_sum in any::<bool>(),
                keep in 0usize..120,
                chained in prop_oneof![Just(0usize), 1usize..3000],
            ) {
                let config = config(if geneve { "geneve" } else { "vxlan" });
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
                let packet_len = packet.len() + chained;
                let local = [Ipv4Addr::new(192, 0, 2, 1)];
                let ports = [(4789, TunnelKind::Vxlan), (6081, TunnelKind::Geneve)];
                if let Arrival::Tunnel(_, _, popped) = classify(&packet, packet_len, &local, &ports) {
                    prop_assert!(popped.inner_len >= ETHERNET_LEN, "{popped:?}");
                    prop_assert!(popped.inner_at + ETHERNET_LEN <= packet.len(), "{popped:?}");
                    prop_assert!(popped.inner_at + popped.inner_len <= packet_len, "{popped:?}");
                }
            }
        }
    }
}
