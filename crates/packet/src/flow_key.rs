//! The flow key: every header field the switch matches on, parsed once from a frame.
//!
//! Parsing is total over arbitrary bytes: a header that is missing, truncated or malformed leaves
//! its fields (and those of every layer above it) at zero, as Open vSwitch's `flow_extract` does;
//! `dl_type` and `nw_proto` say which layers were present. Nothing is allocated.

use crate::arp::ArpPacket;
use crate::ethernet::{EtherType, EthernetFrame, MacAddr};
use crate::icmp::Icmpv4Packet;
use crate::ipv4::{IpProtocol, Ipv4Packet};
use crate::ipv6::Ipv6Packet;
use crate::tcp::TcpPacket;
use crate::udp::UdpPacket;
use crate::vlan::VlanTag;

/// The bit of `vlan_tci` that says a tag is present (OVS's convention: the DEI bit's place).
pub const VLAN_PRESENT: u16 = 0x1000;
/// The VLAN id bits of a TCI.
pub const VLAN_VID_MASK: u16 = 0x0fff;
/// The priority code point bits of a TCI.
pub const VLAN_PCP_MASK: u16 = 0xe000;

/// IPv6 extension headers walked over to reach the transport header (RFC 8200 §4).
pub const IPV6_HOP_BY_HOP: u8 = 0;
pub const IPV6_ROUTING: u8 = 43;
pub const IPV6_FRAGMENT: u8 = 44;
pub const IPV6_DEST_OPTIONS: u8 = 60;
/// A lying chain of extension headers must not keep the parser busy.
const MAX_IPV6_EXTENSIONS: usize = 8;

/// Where an IPv6 packet's extension headers lead (see [`ipv6_upper_layer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Upper {
    /// The protocol of what follows the last header walked over (`nw_proto`).
    pub proto: u8,
    /// Where it starts in the payload walked.
    pub at: usize,
    /// A transport header may start at `at`: the walk ended on a protocol that is not an
    /// extension header (not on a later fragment, a cut header or the walk's bound).
    pub transport: bool,
}

/// Walks the extension headers of an IPv6 packet from `next_header` over `payload` (what
/// follows the fixed header), at most eight of them, as Open vSwitch's parse does. A later
/// fragment's protocol is known but its transport header is not there.
pub fn ipv6_upper_layer(next_header: u8, payload: &[u8]) -> Ipv6Upper {
    let mut upper = Ipv6Upper {
        proto: next_header,
        at: 0,
        transport: false,
    };
    for _ in 0..MAX_IPV6_EXTENSIONS {
        let rest = &payload[upper.at..];
        let header_len = match upper.proto {
            IPV6_HOP_BY_HOP | IPV6_ROUTING | IPV6_DEST_OPTIONS => match rest.get(1) {
                Some(&units) => (usize::from(units) + 1) * 8,
                None => return upper,
            },
            IPV6_FRAGMENT => 8,
            _ => break,
        };
        let Some(header) = rest.get(..header_len) else {
            return upper;
        };
        if upper.proto == IPV6_FRAGMENT && u16::from_be_bytes([header[2], header[3]]) >> 3 != 0 {
            upper.proto = header[0];
            return upper;
        }
        upper.proto = header[0];
        upper.at += header_len;
    }
    upper.transport = !matches!(
        upper.proto,
        IPV6_HOP_BY_HOP | IPV6_ROUTING | IPV6_FRAGMENT | IPV6_DEST_OPTIONS
    );
    upper
}

/// The header fields of one packet, in ovs-ofctl's names. Absent fields are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowKey {
    /// The switch port the frame arrived on (given by the caller, not in the frame).
    pub in_port: u32,
    pub dl_dst: MacAddr,
    pub dl_src: MacAddr,
    /// The outer 802.1Q / 802.1ad TCI with the DEI bit replaced by [`VLAN_PRESENT`]; 0 if untagged.
    pub vlan_tci: u16,
    /// The EtherType after the outer VLAN tag (an 802.3 length field is kept as it is).
    pub dl_type: u16,
    pub nw_src: u32,
    pub nw_dst: u32,
    pub ipv6_src: u128,
    pub ipv6_dst: u128,
    /// IP protocol, or the IPv6 next header after the extension headers.
    pub nw_proto: u8,
    /// The DSCP bits of the IPv4 ToS or IPv6 traffic class (ECN bits cleared).
    pub nw_tos: u8,
    /// The ECN bits (the low two) of the IPv4 ToS or IPv6 traffic class.
    pub nw_ecn: u8,
    pub nw_ttl: u8,
    pub tp_src: u16,
    pub tp_dst: u16,
    /// ICMP or ICMPv6 type and code.
    pub icmp_type: u8,
    pub icmp_code: u8,
    pub arp_spa: u32,
    pub arp_tpa: u32,
    pub arp_op: u16,
    /// ARP's sender and target hardware addresses.
    pub arp_sha: MacAddr,
    pub arp_tha: MacAddr,
    /// TCP's flags and the reserved bits above them (12 bits: see [`TcpPacket::control_bits`]).
    pub tcp_flags: u16,
    /// IPv6's flow label (20 bits).
    pub ipv6_label: u32,
}

/// Where the parsed headers start in the frame, found by the same single parse, so actions can
/// rewrite them without parsing again. A header is listed only if it parsed whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HeaderOffsets {
    /// The IPv4, IPv6 or ARP header.
    pub l3: Option<usize>,
    /// The TCP, UDP, ICMP or ICMPv6 header (absent in later fragments).
    pub l4: Option<usize>,
}

impl FlowKey {
    /// Parses `frame` (starting at the Ethernet header) into a key; never fails, never panics.
    pub fn parse(frame: &[u8], in_port: u32) -> FlowKey {
        FlowKey::parse_with_offsets(frame, in_port).0
    }

    /// [`FlowKey::parse`], also returning where the L3 and L4 headers are.
    // Inlined, the key is built where the caller packs it and is never copied whole: left
    // to the compiler, growing the key by ARP's addresses (80 to 96 bytes) made it a call,
    // and parsing took 17 ns a packet more (crates/switch/examples/stages, AMD EPYC).
    #[inline(always)]
    pub fn parse_with_offsets(frame: &[u8], in_port: u32) -> (FlowKey, HeaderOffsets) {
        let mut key = FlowKey {
            in_port,
            ..FlowKey::default()
        };
        let mut offsets = HeaderOffsets::default();
        let Ok(ethernet) = EthernetFrame::new_checked(frame) else {
            return (key, offsets);
        };
        key.dl_dst = ethernet.dst_addr();
        key.dl_src = ethernet.src_addr();
        let mut ethertype = ethernet.ethertype();
        let mut payload = ethernet.payload();
        if ethertype.is_vlan() {
            let Ok(tag) = VlanTag::new_checked(payload) else {
                key.dl_type = ethertype.0;
                return (key, offsets);
            };
            key.vlan_tci = (u16::from(tag.priority()) << 13) | VLAN_PRESENT | tag.vlan_id();
            ethertype = tag.ethertype();
            payload = &payload[VlanTag::<&[u8]>::HEADER_LEN..];
        }
        key.dl_type = ethertype.0;
        let l3 = frame.len() - payload.len();
        let (l3_parsed, l4) = match ethertype {
            EtherType::IPV4 => key.parse_ipv4(payload),
            EtherType::IPV6 => key.parse_ipv6(payload),
            EtherType::ARP => (key.parse_arp(payload), None),
            _ => (false, None),
        };
        offsets.l3 = l3_parsed.then_some(l3);
        offsets.l4 = l4.map(|l4| l3 + l4);
        (key, offsets)
    }

    /// The VLAN id if the frame is tagged.
    pub fn dl_vlan(&self) -> Option<u16> {
        (self.vlan_tci & VLAN_PRESENT != 0).then_some(self.vlan_tci & VLAN_VID_MASK)
    }

    /// The VLAN priority if the frame is tagged.
    pub fn dl_vlan_pcp(&self) -> Option<u8> {
        (self.vlan_tci & VLAN_PRESENT != 0).then_some((self.vlan_tci >> 13) as u8)
    }

    /// Returns whether the header parsed, and the transport header's offset in `bytes`.
    fn parse_ipv4(&mut self, bytes: &[u8]) -> (bool, Option<usize>) {
        let Ok(ip) = Ipv4Packet::new_checked(bytes) else {
            return (false, None);
        };
        self.nw_src = u32::from(ip.src_addr());
        self.nw_dst = u32::from(ip.dst_addr());
        self.nw_proto = ip.protocol().0;
        self.nw_tos = ip.dscp() << 2;
        self.nw_ecn = ip.ecn();
        self.nw_ttl = ip.ttl();
        // Later fragments carry no transport header; the first one does.
        let l4 = ip.header_len();
        let parsed = ip.frag_offset() == 0 && self.parse_transport(ip.payload());
        (true, parsed.then_some(l4))
    }

    fn parse_ipv6(&mut self, bytes: &[u8]) -> (bool, Option<usize>) {
        let Ok(ip) = Ipv6Packet::new_checked(bytes) else {
            return (false, None);
        };
        self.ipv6_src = u128::from(ip.src_addr());
        self.ipv6_dst = u128::from(ip.dst_addr());
        self.nw_tos = ip.traffic_class() & 0xfc;
        self.nw_ecn = ip.traffic_class() & 0x03;
        self.nw_ttl = ip.hop_limit();
        self.ipv6_label = ip.flow_label();
        let payload = ip.payload();
        let upper = ipv6_upper_layer(ip.next_header().0, payload);
        self.nw_proto = upper.proto;
        // From the header's end, not the packet's: bytes past the payload's length (an
        // Ethernet pad, or a sender's) are not before the transport header.
        let l4 = Ipv6Packet::<&[u8]>::HEADER_LEN + upper.at;
        let parsed = upper.transport && self.parse_transport(&payload[upper.at..]);
        (true, parsed.then_some(l4))
    }

    /// Returns whether a transport header the key knows was parsed whole.
    fn parse_transport(&mut self, bytes: &[u8]) -> bool {
        match IpProtocol(self.nw_proto) {
            IpProtocol::TCP => {
                let Ok(tcp) = TcpPacket::new_checked(bytes) else {
                    return false;
                };
                self.tp_src = tcp.src_port();
                self.tp_dst = tcp.dst_port();
                self.tcp_flags = tcp.control_bits();
            }
            IpProtocol::UDP => {
                let Ok(udp) = UdpPacket::new_checked(bytes) else {
                    return false;
                };
                self.tp_src = udp.src_port();
                self.tp_dst = udp.dst_port();
            }
            // ICMPv6 shares ICMP's first four bytes (type, code, checksum).
            IpProtocol::ICMP | IpProtocol::ICMPV6 => {
                let Ok(icmp) = Icmpv4Packet::new_checked(bytes) else {
                    return false;
                };
                self.icmp_type = icmp.msg_type();
                self.icmp_code = icmp.code();
            }
            _ => return false,
        }
        true
    }

    fn parse_arp(&mut self, bytes: &[u8]) -> bool {
        let Ok(arp) = ArpPacket::new_checked(bytes) else {
            return false;
        };
        self.arp_op = arp.operation();
        self.arp_spa = u32::from(arp.sender_protocol_addr());
        self.arp_tpa = u32::from(arp.target_protocol_addr());
        self.arp_sha = arp.sender_hardware_addr();
        self.arp_tha = arp.target_hardware_addr();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
    const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

    /// Ethernet / 802.1Q (PCP 5, VID 100) / IPv4 (tos 0xb8, ttl 64) / TCP 1234 -> 80.
    const TAGGED_TCP: [u8; 58] = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, // dst, src
        0x81, 0x00, 0xa0, 0x64, 0x08, 0x00, // 802.1Q, TCI, IPv4
        0x45, 0xb8, 0x00, 0x28, 0x00, 0x01, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00, // IPv4 header
        10, 0, 0, 1, 10, 0, 0, 2, // addresses
        0x04, 0xd2, 0x00, 0x50, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0,
        0, // TCP
    ];

    /// Ethernet / IPv6 (tclass 0x28, hop limit 255) / hop-by-hop options / ICMPv6 echo request.
    const IPV6_ICMP: [u8; 70] = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x86, 0xdd, // Ethernet
        0x62, 0x80, 0x00, 0x00, 0x00, 0x10, 0x00, 0xff, // version 6, tclass 0x28, len 16, HBH
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // src 2001:db8::1
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, // dst 2001:db8::2
        58, 0, 1, 4, 0, 0, 0, 0, // hop-by-hop: next ICMPv6, 8 bytes, PadN
        128, 0, 0, 0, 0, 1, 0, 1, // echo request
    ];

    /// Ethernet / ARP request who-has 10.0.0.2 tell 10.0.0.1, padded to 60 bytes.
    const ARP_REQUEST: [u8; 60] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x06, // Ethernet
        0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01, // Ethernet/IPv4, request
        0x02, 0, 0, 0, 0, 0x01, 10, 0, 0, 1, // sender
        0, 0, 0, 0, 0, 0, 10, 0, 0, 2, // target
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // padding
    ];

    #[test]
    fn tagged_tcp() {
        let key = FlowKey::parse(&TAGGED_TCP, 3);
        assert_eq!(
            key,
            FlowKey {
                in_port: 3,
                dl_dst: MacAddr(MAC_B),
                dl_src: MacAddr(MAC_A),
                vlan_tci: 0xb064,
                dl_type: 0x0800,
                nw_src: 0x0a00_0001,
                nw_dst: 0x0a00_0002,
                nw_proto: 6,
                nw_tos: 0xb8,
                nw_ttl: 64,
                tp_src: 1234,
                tp_dst: 80,
                tcp_flags: 0x002,
                ..FlowKey::default()
            }
        );
        assert_eq!(key.dl_vlan(), Some(100));
        assert_eq!(key.dl_vlan_pcp(), Some(5));
        // The ECN bits are a field of their own.
        let mut marked = TAGGED_TCP;
        marked[19] |= 0x03;
        let key = FlowKey::parse(&marked, 3);
        assert_eq!((key.nw_tos, key.nw_ecn), (0xb8, 3));
    }

    #[test]
    fn offsets_of_the_headers() {
        let offsets = |frame: &[u8]| FlowKey::parse_with_offsets(frame, 1).1;
        assert_eq!(
            offsets(&TAGGED_TCP),
            HeaderOffsets {
                l3: Some(18),
                l4: Some(38)
            }
        );
        assert_eq!(
            offsets(&IPV6_ICMP),
            HeaderOffsets {
                l3: Some(14),
                l4: Some(62)
            }
        );
        assert_eq!(
            offsets(&ARP_REQUEST),
            HeaderOffsets {
                l3: Some(14),
                l4: None
            }
        );
        assert_eq!(offsets(&TAGGED_TCP[..30]), HeaderOffsets::default());
        // Bytes after the IPv6 payload move nothing (a rewrite of the ports must land on them).
        let mut padded = IPV6_ICMP.to_vec();
        padded.extend_from_slice(&[0xee; 8]);
        assert_eq!(offsets(&padded), offsets(&IPV6_ICMP));
    }

    #[test]
    fn ipv6_icmp_behind_hop_by_hop() {
        let key = FlowKey::parse(&IPV6_ICMP, 1);
        assert_eq!(key.dl_type, 0x86dd);
        assert_eq!(key.ipv6_src, 0x2001_0db8_0000_0000_0000_0000_0000_0001);
        assert_eq!(key.ipv6_dst, 0x2001_0db8_0000_0000_0000_0000_0000_0002);
        assert_eq!((key.nw_proto, key.nw_tos, key.nw_ttl), (58, 0x28, 255));
        assert_eq!((key.icmp_type, key.icmp_code), (128, 0));
        assert_eq!(key.dl_vlan(), None);
    }

    #[test]
    fn arp_request() {
        let key = FlowKey::parse(&ARP_REQUEST, 2);
        assert_eq!(key.dl_type, 0x0806);
        assert_eq!(key.dl_dst, MacAddr::BROADCAST);
        assert_eq!(
            (key.arp_op, key.arp_spa, key.arp_tpa),
            (1, 0x0a00_0001, 0x0a00_0002)
        );
        assert_eq!(
            (key.arp_sha, key.arp_tha),
            (MacAddr(MAC_A), MacAddr([0; 6]))
        );
        assert_eq!(key.nw_src, 0);
    }

    #[test]
    fn truncation_leaves_upper_layers_absent() {
        let key = FlowKey::parse(&TAGGED_TCP[..13], 7);
        assert_eq!(
            key,
            FlowKey {
                in_port: 7,
                ..FlowKey::default()
            }
        );
        // Tag announced but cut: addresses kept, dl_type is the VLAN EtherType.
        let key = FlowKey::parse(&TAGGED_TCP[..16], 7);
        assert_eq!(
            (key.dl_src, key.dl_type, key.vlan_tci),
            (MacAddr(MAC_A), 0x8100, 0)
        );
        // IPv4 header cut: dl_type known, IP fields absent.
        let key = FlowKey::parse(&TAGGED_TCP[..30], 7);
        assert_eq!((key.dl_type, key.nw_src, key.nw_proto), (0x0800, 0, 0));
        assert_eq!(key.vlan_tci, 0xb064);
    }

    #[test]
    fn later_fragment_has_no_ports() {
        let mut frame = TAGGED_TCP;
        frame[24..26].copy_from_slice(&0x0010u16.to_be_bytes()); // offset 128 bytes
        let key = FlowKey::parse(&frame, 1);
        assert_eq!((key.nw_proto, key.tp_src, key.tp_dst), (6, 0, 0));
    }

    #[test]
    fn short_tcp_header_leaves_ports_absent() {
        // Total length 36: only 16 of the 20 TCP header bytes.
        let mut frame = TAGGED_TCP;
        frame[20..22].copy_from_slice(&36u16.to_be_bytes());
        let key = FlowKey::parse(&frame, 1);
        assert_eq!((key.nw_src, key.tp_src), (0x0a00_0001, 0));
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let (_, offsets) = FlowKey::parse_with_offsets(&bytes, 1);
            // Every header listed is whole: IPv4 and ARP are at least 20 bytes, L4 at least 8.
            prop_assert!(offsets.l3.is_none_or(|l3| l3 + 20 <= bytes.len()));
            prop_assert!(offsets.l4.is_none_or(|l4| l4 + 8 <= bytes.len()));
        }

        #[test]
        fn parse_of_mutated_frames_never_panics(index in 0usize..70, byte in any::<u8>(), cut in 0usize..71) {
            let mut frame = IPV6_ICMP;
            frame[index] = byte;
            let _ = FlowKey::parse(&frame[..cut], 1);
            let mut frame = TAGGED_TCP;
            frame[index % 58] = byte;
            let _ = FlowKey::parse(&frame[..cut.min(58)], 1);
        }
    }
}
