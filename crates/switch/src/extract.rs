//! A received frame's flow, packed straight into [`FlowBits`] (OVS's `miniflow_extract`):
//! the datapath's parse. Ethernet (one VLAN tag or none) with IPv4 and TCP, UDP or ICMP, the
//! traffic a switch sees most, is read word by word from the frame into the packed words;
//! every other frame goes through [`FlowKey::parse_with_offsets`] and [`FlowBits::from_key`].
//! Both give the same flow and offsets for every frame (a test checks it over arbitrary
//! bytes): parsing into a [`FlowKey`] first, then packing it, cost more than the lookup.

use wirespeed_packet::EtherType;
use wirespeed_packet::IpProtocol;
use wirespeed_packet::flow_key::{FlowKey, HeaderOffsets, VLAN_PRESENT, ipv6_upper_layer};

use crate::field::FlowBits;

const ETHERNET_LEN: usize = 14;
const VLAN_TAG_LEN: usize = 4;
const IPV4_MIN_LEN: usize = 20;
const TCP_MIN_LEN: usize = 20;
const UDP_LEN: usize = 8;
const ICMP_LEN: usize = 8;
const FRAG_OFFSET_MASK: u16 = 0x1fff;

#[inline(always)]
fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([bytes[at], bytes[at + 1]])
}

#[inline(always)]
fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// A TCP or UDP header's ports as the flow packs them: source low, destination above.
#[inline(always)]
fn ports(l4: &[u8]) -> u64 {
    u64::from(u32_at(l4, 0).rotate_left(16))
}

/// TCP's flags and the reserved bits above them, where the flow packs them (`tcp_flags`).
#[inline(always)]
fn tcp_flags(l4: &[u8]) -> u64 {
    u64::from(u16_at(l4, 12) & 0x0fff) << 32
}

/// Parses `frame` (from its Ethernet header) that arrived on `in_port`: its flow and where
/// its L3 and L4 headers are; the same as [`FlowBits::from_key`] of
/// [`FlowKey::parse_with_offsets`].
#[inline]
pub fn extract(frame: &[u8], in_port: u32) -> (FlowBits, HeaderOffsets) {
    extract_with::<false>(frame, frame.len(), in_port)
}

/// [`extract`] of a packet of `packet_len` bytes whose first segment is `head` (a packet
/// larger than a frame, AF_XDP multi-buffer): lengths in the headers are checked against the
/// whole packet, headers are read from `head` (they must lie in it whole). The same as
/// [`extract`] of the whole packet's bytes for IPv4 and IPv6 (tagged or not); any other
/// packet goes through the general parse of its head, its headers having no length the
/// rest of the packet could fail.
// Out of line, and apart from `extract`: a one-frame packet's parse does none of its work
// (with it, 13 instructions more a packet).
#[inline(never)]
pub fn extract_packet(head: &[u8], packet_len: usize, in_port: u32) -> (FlowBits, HeaderOffsets) {
    extract_with::<true>(head, packet_len, in_port)
}

/// The parse; `CHAIN`: `frame` is the head of a packet of `packet_len` bytes.
#[inline(always)]
fn extract_with<const CHAIN: bool>(
    frame: &[u8],
    packet_len: usize,
    in_port: u32,
) -> (FlowBits, HeaderOffsets) {
    // The fast path builds each word in a register and the flow once at the end: a flow
    // assembled in memory field by field, then copied, cost store-forwarding stalls.
    let Some(&[d0, d1, d2, d3, d4, d5, s0, s1, s2, s3, s4, s5, t0, t1]) =
        frame.first_chunk::<ETHERNET_LEN>()
    else {
        return extract_any(frame, in_port);
    };
    let dl_dst = u64::from_be_bytes([0, 0, d0, d1, d2, d3, d4, d5]);
    let dl_src = u64::from_be_bytes([0, 0, s0, s1, s2, s3, s4, s5]);
    let mut dl_type = u16::from_be_bytes([t0, t1]);
    let mut l3 = ETHERNET_LEN;
    let mut vlan_tci = 0u16;
    if EtherType(dl_type).is_vlan() {
        let Some(tag) = frame.get(ETHERNET_LEN..ETHERNET_LEN + VLAN_TAG_LEN) else {
            return extract_any(frame, in_port);
        };
        // The TCI with the DEI bit replaced by "present" (priority and id kept).
        vlan_tci = u16_at(tag, 0) | VLAN_PRESENT;
        dl_type = u16_at(tag, 2);
        l3 += VLAN_TAG_LEN;
    }
    if EtherType(dl_type) != EtherType::IPV4 {
        if CHAIN && EtherType(dl_type) == EtherType::IPV6 {
            return extract_ipv6_chain(frame, packet_len, in_port, l3);
        }
        return extract_any(frame, in_port);
    }
    let word0 = u64::from(in_port) | (u64::from(dl_type) << 32) | (u64::from(vlan_tci) << 48);
    let (mut word1, mut word2, mut word3, mut word4) = (dl_src, dl_dst, 0, 0);
    let mut offsets = HeaderOffsets::default();
    // The checks of `Ipv4Packet::new_checked`: a header that fails them leaves the IP fields
    // absent, as the general parse does.
    let ip = &frame[l3..];
    // The IP packet's length: what follows the head segment counts.
    let ip_len = match CHAIN {
        true => ip.len() + packet_len.saturating_sub(frame.len()),
        false => ip.len(),
    };
    let header_len = usize::from(ip.first().copied().unwrap_or(0) & 0x0f) * 4;
    let valid = ip.len() >= IPV4_MIN_LEN
        && ip[0] >> 4 == 4
        && header_len >= IPV4_MIN_LEN
        && header_len <= ip.len()
        && (header_len..=ip_len).contains(&usize::from(u16_at(ip, 2)));
    if valid {
        let total_len = usize::from(u16_at(ip, 2));
        let tos = ip[1];
        let nw_proto = ip[9];
        word1 |= (u64::from(nw_proto) << 48) | (u64::from(tos & 0xfc) << 56);
        word2 |= u64::from(ip[8]) << 48;
        word3 = u64::from(u32_at(ip, 12)) | (u64::from(u32_at(ip, 16)) << 32);
        word4 = u64::from(tos & 0x03) << 56;
        offsets.l3 = Some(l3);
        // Later fragments carry no transport header; the first one does.
        if u16_at(ip, 6) & FRAG_OFFSET_MASK == 0 {
            // The transport bytes in the head; the segment's whole length for its checks.
            let l4 = match CHAIN {
                true => &ip[header_len..total_len.min(ip.len())],
                false => &ip[header_len..total_len],
            };
            let l4_len = match CHAIN {
                true => total_len - header_len,
                false => l4.len(),
            };
            // The words the transport header fills, if it parsed whole (and lies in `head`).
            let transport = match IpProtocol(nw_proto) {
                IpProtocol::TCP => (l4.len() >= TCP_MIN_LEN
                    && (TCP_MIN_LEN..=l4.len()).contains(&(usize::from(l4[12] >> 4) * 4)))
                .then(|| (0, ports(l4) | tcp_flags(l4))),
                IpProtocol::UDP => (l4.len() >= UDP_LEN
                    && (UDP_LEN..=l4_len).contains(&usize::from(u16_at(l4, 4))))
                .then(|| (0, ports(l4))),
                // ICMPv6 shares ICMP's first four bytes (the general parse reads either so).
                IpProtocol::ICMP | IpProtocol::ICMPV6 => {
                    (l4.len() >= ICMP_LEN).then(|| (u64::from(l4[0]) << 56, u64::from(l4[1]) << 48))
                }
                _ => None,
            };
            if let Some((high2, high4)) = transport {
                word2 |= high2;
                word4 |= high4;
                offsets.l4 = Some(l3 + header_len);
            }
        }
    }
    let mut flow = FlowBits::ZERO;
    flow.0[..5].copy_from_slice(&[word0, word1, word2, word3, word4]);
    (flow, offsets)
}

/// The general path, through a [`FlowKey`].
#[inline(never)]
fn extract_any(frame: &[u8], in_port: u32) -> (FlowBits, HeaderOffsets) {
    let (key, offsets) = FlowKey::parse_with_offsets(frame, in_port);
    (FlowBits::from_key(&key), offsets)
}

/// The fixed IPv6 header.
const IPV6_HEADER_LEN: usize = 40;

/// The general parse of an IPv6 packet of `packet_len` bytes whose head segment is `head`,
/// its IPv6 header at `l3`: what [`FlowKey::parse_with_offsets`] finds in the whole packet,
/// the lengths checked against the whole packet, the headers read from the head (left out
/// where they do not lie in it whole). The general parse of the head alone would find its
/// payload length longer than the bytes and lose every L3 and L4 field.
#[inline(never)]
fn extract_ipv6_chain(
    head: &[u8],
    packet_len: usize,
    in_port: u32,
    l3: usize,
) -> (FlowBits, HeaderOffsets) {
    // The link layer as the general parse reads it (it stops where the head is cut).
    let (mut key, _) = FlowKey::parse_with_offsets(&head[..l3], in_port);
    let mut offsets = HeaderOffsets::default();
    let ip = &head[l3..];
    let ip_len = packet_len.saturating_sub(l3);
    let done = |key: &FlowKey, offsets| (FlowBits::from_key(key), offsets);
    // `Ipv6Packet::new_checked`'s checks, with the whole packet's length.
    if ip.len() < IPV6_HEADER_LEN || ip[0] >> 4 != 6 {
        return done(&key, offsets);
    }
    let payload_len = usize::from(u16_at(ip, 4));
    if IPV6_HEADER_LEN + payload_len > ip_len {
        return done(&key, offsets);
    }
    let address = |at: usize| u128::from_be_bytes(ip[at..at + 16].try_into().expect("16 bytes"));
    key.ipv6_src = address(8);
    key.ipv6_dst = address(24);
    let traffic_class = (ip[0] << 4) | (ip[1] >> 4);
    key.nw_tos = traffic_class & 0xfc;
    key.nw_ecn = traffic_class & 0x03;
    key.nw_ttl = ip[7];
    key.ipv6_label = u32_at(ip, 0) & 0x000f_ffff;
    offsets.l3 = Some(l3);
    let payload = &ip[IPV6_HEADER_LEN..(IPV6_HEADER_LEN + payload_len).min(ip.len())];
    let upper = ipv6_upper_layer(ip[6], payload);
    key.nw_proto = upper.proto;
    // The transport segment's length in the whole packet.
    let whole = payload_len - upper.at;
    if upper.transport && transport_of_chain(&mut key, &payload[upper.at..], whole) {
        // After the extension headers, wherever the packet ends (it may carry bytes past
        // its payload).
        offsets.l4 = Some(l3 + IPV6_HEADER_LEN + upper.at);
    }
    done(&key, offsets)
}

/// The transport header of a chain into `key`, as the general parse reads it: `l4` is what
/// the head holds of the segment, `whole` the segment's length in the whole packet. Whether
/// a header the key knows parsed whole (and lies in the head).
fn transport_of_chain(key: &mut FlowKey, l4: &[u8], whole: usize) -> bool {
    match IpProtocol(key.nw_proto) {
        IpProtocol::TCP => {
            let parsed = l4.len() >= TCP_MIN_LEN
                && (TCP_MIN_LEN..=l4.len().min(whole)).contains(&(usize::from(l4[12] >> 4) * 4));
            if parsed {
                (key.tp_src, key.tp_dst) = (u16_at(l4, 0), u16_at(l4, 2));
                key.tcp_flags = u16_at(l4, 12) & 0x0fff;
            }
            parsed
        }
        IpProtocol::UDP => {
            let parsed =
                l4.len() >= UDP_LEN && (UDP_LEN..=whole).contains(&usize::from(u16_at(l4, 4)));
            if parsed {
                (key.tp_src, key.tp_dst) = (u16_at(l4, 0), u16_at(l4, 2));
            }
            parsed
        }
        // ICMPv6 shares ICMP's first four bytes (type, code, checksum).
        IpProtocol::ICMP | IpProtocol::ICMPV6 => {
            let parsed = l4.len() >= ICMP_LEN;
            if parsed {
                (key.icmp_type, key.icmp_code) = (l4[0], l4[1]);
            }
            parsed
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use wirespeed_packet::flow_key::{IPV6_FRAGMENT, IPV6_HOP_BY_HOP};

    fn general(frame: &[u8], in_port: u32) -> (FlowBits, HeaderOffsets) {
        let (key, offsets) = FlowKey::parse_with_offsets(frame, in_port);
        (FlowBits::from_key(&key), offsets)
    }

    /// Ethernet / optional 802.1Q / IPv4 with `options` words / `proto` header and data.
    fn frame(vlan: bool, options: usize, proto: u8, l4_len: usize) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        if vlan {
            f.extend([0x81, 0x00, 0xa0, 0x64]);
        }
        f.extend([0x08, 0x00]);
        let header_len = 20 + 4 * options;
        let total = (header_len + l4_len) as u16;
        f.extend([0x40 | (header_len / 4) as u8, 0xb9]);
        f.extend(total.to_be_bytes());
        f.extend([0, 1, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        f.extend(vec![1; 4 * options]);
        let mut l4: Vec<u8> = (0..l4_len as u8).collect();
        if proto == 6 && l4_len >= 13 {
            l4[12] = 0x50;
        }
        if proto == 17 && l4_len >= 6 {
            l4[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
        }
        f.extend(l4);
        f
    }

    #[test]
    fn udp_tcp_icmp_as_the_general_parse() {
        for vlan in [false, true] {
            for proto in [1, 6, 17, 58, 47] {
                for options in [0, 2] {
                    for l4_len in [0, 4, 8, 20, 30] {
                        let f = frame(vlan, options, proto, l4_len);
                        assert_eq!(extract(&f, 3), general(&f, 3), "{f:?}");
                    }
                }
            }
        }
    }

    /// A packet of several frames parses from its head as the whole packet's bytes do, as
    /// long as the head holds its headers.
    #[test]
    fn a_head_segment_parses_as_its_whole_packet() {
        for vlan in [false, true] {
            for proto in [1, 6, 17, 47] {
                for options in [0, 2] {
                    let f = frame(vlan, options, proto, 200);
                    let headers_end = 14 + 4 * usize::from(vlan) + 20 + 4 * options + 20;
                    let whole = extract(&f, 3);
                    assert!(whole.1.l3.is_some(), "{f:?}");
                    for cut in headers_end..=f.len() {
                        assert_eq!(extract_packet(&f[..cut], f.len(), 3), whole, "cut at {cut}");
                    }
                    // Alone, a head that claims more than it holds is no IPv4 packet.
                    assert_eq!(extract(&f[..headers_end], 3).1.l3, None);
                }
            }
        }
    }

    /// Ethernet / optional 802.1Q / IPv6 / an optional extension header (`ext`: hop-by-hop
    /// options, or the fragment header of a later fragment) / `proto` with `l4_len` bytes.
    fn ipv6_frame(vlan: bool, ext: Option<u8>, proto: u8, l4_len: usize) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        if vlan {
            f.extend([0x81, 0x00, 0xa0, 0x64]);
        }
        f.extend([0x86, 0xdd, 0x62, 0x80, 0, 0]);
        let ext_len = if ext.is_some() { 8 } else { 0 };
        f.extend(((ext_len + l4_len) as u16).to_be_bytes());
        f.extend([ext.unwrap_or(proto), 64]);
        f.extend([0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend([0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        match ext {
            Some(IPV6_FRAGMENT) => f.extend([proto, 0, 0x00, 0x08, 0, 0, 0, 1]),
            Some(_) => f.extend([proto, 0, 1, 4, 0, 0, 0, 0]),
            None => {}
        }
        let mut l4: Vec<u8> = (0..l4_len).map(|i| (i * 5 + 1) as u8).collect();
        match proto {
            6 => l4[12] = 0x50,
            17 => l4[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes()),
            _ => l4[0] = 128,
        }
        f.extend(l4);
        f
    }

    /// An IPv6 packet of several frames parses from its head as the whole packet's bytes
    /// do (the general parse), as long as the head holds its headers.
    #[test]
    fn an_ipv6_head_segment_parses_as_its_whole_packet() {
        for vlan in [false, true] {
            for ext in [None, Some(IPV6_HOP_BY_HOP), Some(IPV6_FRAGMENT)] {
                for (proto, pad) in [6, 17, 58, 47].into_iter().flat_map(|p| [(p, 0), (p, 8)]) {
                    let mut f = ipv6_frame(vlan, ext, proto, 300);
                    // Bytes after the payload (an Ethernet pad, or a sender's) move nothing.
                    f.extend(vec![0xee; pad]);
                    let headers_end = 14 + 4 * usize::from(vlan) + 40 + 8 + 20;
                    let whole = general(&f, 3);
                    assert!(whole.1.l3.is_some(), "{f:?}");
                    let l4 = 14 + 4 * usize::from(vlan) + 40 + 8 * usize::from(ext.is_some());
                    let parsed = proto != 47 && ext != Some(IPV6_FRAGMENT);
                    assert_eq!(whole.1.l4, parsed.then_some(l4), "{pad}");
                    for cut in headers_end..=f.len() {
                        let head = extract_packet(&f[..cut], f.len(), 3);
                        assert_eq!(head, whole, "{vlan} {ext:?} {proto}: cut at {cut}");
                    }
                    // Alone, the head claims more than it holds: no IPv6 fields.
                    assert_eq!(extract(&f[..headers_end], 3).1.l3, None);
                }
            }
        }
    }

    fn near_ipv6() -> impl Strategy<Value = Vec<u8>> {
        (
            any::<bool>(),
            prop::sample::select(vec![None, Some(IPV6_HOP_BY_HOP), Some(IPV6_FRAGMENT)]),
            prop::sample::select(vec![6u8, 17, 58, 0]),
            1usize..40,
            proptest::collection::vec((0usize..100, any::<u8>()), 0..4),
            0usize..100,
        )
            .prop_map(|(vlan, ext, proto, l4_len, flips, cut)| {
                let mut f = ipv6_frame(vlan, ext, proto, l4_len.max(20));
                for (at, byte) in flips {
                    if let Some(b) = f.get_mut(at) {
                        *b = byte;
                    }
                }
                f.truncate(f.len().saturating_sub(cut % 8 * (cut / 50)));
                f
            })
    }

    fn near_ipv4() -> impl Strategy<Value = Vec<u8>> {
        (
            any::<bool>(),
            0usize..3,
            prop::sample::select(vec![1u8, 6, 17, 58, 0]),
            0usize..40,
            proptest::collection::vec((0usize..80, any::<u8>()), 0..4),
            0usize..100,
        )
            .prop_map(|(vlan, options, proto, l4_len, flips, cut)| {
                let mut f = frame(vlan, options, proto, l4_len);
                for (at, byte) in flips {
                    if let Some(b) = f.get_mut(at) {
                        *b = byte;
                    }
                }
                f.truncate(f.len().saturating_sub(cut % 8 * (cut / 50)));
                f
            })
    }

    proptest! {
        #[test]
        fn same_as_the_general_parse(bytes in proptest::collection::vec(any::<u8>(), 0..96), in_port: u32) {
            prop_assert_eq!(extract(&bytes, in_port), general(&bytes, in_port));
        }

        #[test]
        fn same_as_the_general_parse_near_ipv4(f in near_ipv4(), in_port: u32) {
            prop_assert_eq!(extract(&f, in_port), general(&f, in_port));
        }

        /// The chain parse given a whole packet finds what the general parse does, on
        /// arbitrary bytes too.
        #[test]
        fn a_whole_packet_parses_as_a_chain_as_it_does_alone(
            f in prop_oneof![near_ipv4(), near_ipv6(), proptest::collection::vec(any::<u8>(), 0..96)],
            in_port: u32,
        ) {
            prop_assert_eq!(extract_packet(&f, f.len(), in_port), general(&f, in_port));
        }
    }
}
