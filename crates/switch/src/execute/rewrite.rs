//! Header rewrites on a frame, each patching the checksums it invalidates incrementally
//! (RFC 1624): the IPv4 header checksum, and the TCP / UDP / ICMPv6 checksum whose
//! pseudo-header covers the addresses. No header is parsed again: the offsets come from the
//! flow key's single parse and follow VLAN pushes and pops.

use wirespeed_packet::checksum;
use wirespeed_packet::flow_key::{FlowKey, HeaderOffsets};
use wirespeed_packet::ipv4::Ipv4Packet;
use wirespeed_packet::{EtherType, IpProtocol};

use crate::field::Field;
use crate::frame::Frame;

/// What the rewrites need to know about a frame: which protocols, and where their headers are.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct PacketHeaders {
    pub dl_type: u16,
    pub nw_proto: u8,
    pub offsets: HeaderOffsets,
}

impl PacketHeaders {
    pub fn new(key: &FlowKey, offsets: HeaderOffsets) -> PacketHeaders {
        PacketHeaders {
            dl_type: key.dl_type,
            nw_proto: key.nw_proto,
            offsets,
        }
    }

    /// The same from a parsed flow ([`crate::extract::extract`]).
    pub fn of_flow(flow: &crate::field::FlowBits, offsets: HeaderOffsets) -> PacketHeaders {
        PacketHeaders {
            dl_type: Field::DlType.get(flow) as u16,
            nw_proto: Field::NwProto.get(flow) as u8,
            offsets,
        }
    }

    fn ipv4(&self) -> Option<usize> {
        self.offsets
            .l3
            .filter(|_| EtherType(self.dl_type) == EtherType::IPV4)
    }

    fn ipv6(&self) -> Option<usize> {
        self.offsets
            .l3
            .filter(|_| EtherType(self.dl_type) == EtherType::IPV6)
    }

    fn arp(&self) -> Option<usize> {
        self.offsets
            .l3
            .filter(|_| EtherType(self.dl_type) == EtherType::ARP)
    }

    /// Where the checksum covering the IP pseudo-header is, and whether 0 means "none" (UDP
    /// over IPv4).
    fn pseudo_checksum(&self) -> Option<(usize, bool)> {
        let l4 = self.offsets.l4?;
        let dl_type = EtherType(self.dl_type);
        match IpProtocol(self.nw_proto) {
            IpProtocol::TCP => Some((l4 + 16, false)),
            // Over IPv6 too: 0 is "none" (a tunnel's, RFC 6935) and a computed 0 goes as
            // 0xffff, as Open vSwitch patches it; a 0 written over IPv6 is a broken packet.
            IpProtocol::UDP => Some((l4 + 6, true)),
            IpProtocol::ICMPV6 if dl_type == EtherType::IPV6 => Some((l4 + 2, false)),
            _ => None,
        }
    }

    fn shift(&mut self, bytes: isize) {
        let move_by = |offset: usize| offset.checked_add_signed(bytes);
        self.offsets.l3 = self.offsets.l3.and_then(move_by);
        self.offsets.l4 = self.offsets.l4.and_then(move_by);
    }
}

fn read_u16(data: &[u8], at: usize) -> Option<u16> {
    let bytes = data.get(at..at + 2)?;
    Some(u16::from_be_bytes([bytes[0], bytes[1]]))
}

fn write_u16(data: &mut [u8], at: usize, value: u16) {
    if let Some(bytes) = data.get_mut(at..at + 2) {
        bytes.copy_from_slice(&value.to_be_bytes());
    }
}

/// Patches the 16-bit checksum at `at` for covered data whose sum went from `old_sum` to
/// `new_sum`. A UDP checksum of 0 means "none" and stays 0; a computed 0 is sent as 0xffff.
fn patch_checksum(data: &mut [u8], at: usize, zero_is_none: bool, old_sum: u16, new_sum: u16) {
    let Some(old) = read_u16(data, at) else {
        return;
    };
    if zero_is_none && old == 0 {
        return;
    }
    let mut new = checksum::update(old, old_sum, new_sum);
    if zero_is_none && new == 0 {
        new = 0xffff;
    }
    write_u16(data, at, new);
}

/// Replaces `data[at..at + new.len()]`, returning the sums of the old and new bytes; None if
/// the range is outside the frame.
fn replace(data: &mut [u8], at: usize, new: &[u8]) -> Option<(u16, u16)> {
    let field = data.get_mut(at..at + new.len())?;
    let old_sum = checksum::data(field);
    field.copy_from_slice(new);
    Some((old_sum, checksum::data(new)))
}

/// Writes `value` into the packet's `field`; a field the packet does not have is left alone.
pub fn set_field(frame: &mut Frame<'_>, headers: &PacketHeaders, field: Field, value: u128) {
    let data = frame.data_mut();
    match field {
        Field::DlDst | Field::DlSrc => {
            let at = if field == Field::DlDst { 0 } else { 6 };
            let _ = replace(data, at, &value.to_be_bytes()[10..]);
        }
        Field::NwSrc | Field::NwDst => {
            let Some(l3) = headers.ipv4() else { return };
            let at = l3 + if field == Field::NwSrc { 12 } else { 16 };
            let Some((old_sum, new_sum)) = replace(data, at, &(value as u32).to_be_bytes()) else {
                return;
            };
            patch_checksum(data, l3 + 10, false, old_sum, new_sum);
            if let Some((at, zero_is_none)) = headers.pseudo_checksum() {
                patch_checksum(data, at, zero_is_none, old_sum, new_sum);
            }
        }
        Field::Ipv6Src | Field::Ipv6Dst => {
            let Some(l3) = headers.ipv6() else { return };
            let at = l3 + if field == Field::Ipv6Src { 8 } else { 24 };
            let Some((old_sum, new_sum)) = replace(data, at, &value.to_be_bytes()) else {
                return;
            };
            if let Some((at, zero_is_none)) = headers.pseudo_checksum() {
                patch_checksum(data, at, zero_is_none, old_sum, new_sum);
            }
        }
        Field::Ipv6Label => {
            // No checksum covers it.
            let Some(l3) = headers.ipv6() else { return };
            let Some(bytes) = data.get_mut(l3 + 1..l3 + 4) else {
                return;
            };
            let label = (value as u32).to_be_bytes();
            bytes[0] = (bytes[0] & 0xf0) | (label[1] & 0x0f);
            bytes[1..].copy_from_slice(&label[2..]);
        }
        Field::NwTos => set_tos_bits(data, headers, value as u8, 0xfc),
        Field::NwEcn => set_tos_bits(data, headers, value as u8, 0x03),
        Field::ArpSha | Field::ArpTha => {
            // ARP has no checksum; the parse took the addresses only from a whole header.
            let Some(l3) = headers.arp() else { return };
            let at = l3 + if field == Field::ArpSha { 8 } else { 18 };
            let _ = replace(data, at, &value.to_be_bytes()[10..]);
        }
        Field::NwTtl => set_ttl(data, headers, value as u8),
        Field::TpSrc | Field::TpDst => {
            let Some(l4) = headers.offsets.l4 else { return };
            if !matches!(
                IpProtocol(headers.nw_proto),
                IpProtocol::TCP | IpProtocol::UDP
            ) {
                return;
            }
            let at = l4 + if field == Field::TpSrc { 0 } else { 2 };
            let Some((old_sum, new_sum)) = replace(data, at, &(value as u16).to_be_bytes()) else {
                return;
            };
            if let Some((at, zero_is_none)) = headers.pseudo_checksum() {
                patch_checksum(data, at, zero_is_none, old_sum, new_sum);
            }
        }
        _ => {}
    }
}

/// Sets the `bits` of the ToS byte or traffic class to those of `tos`, keeping the others:
/// 0xfc, the DSCP bits (`nw_tos`), or 0x03, ECN (`nw_ecn`, the value in the low bits).
fn set_tos_bits(data: &mut [u8], headers: &PacketHeaders, tos: u8, bits: u8) {
    if let Some(l3) = headers.ipv4() {
        let Some(&old) = data.get(l3 + 1) else { return };
        let new = (tos & bits) | (old & !bits);
        if let Some((old_sum, new_sum)) = replace(data, l3, &[data[l3], new]) {
            patch_checksum(data, l3 + 10, false, old_sum, new_sum);
        }
    } else if let Some(l3) = headers.ipv6() {
        // The traffic class straddles bytes 0 and 1; IPv6 has no header checksum.
        let Some(bytes) = data.get_mut(l3..l3 + 2) else {
            return;
        };
        let class = (bytes[0] << 4) | (bytes[1] >> 4);
        let class = (tos & bits) | (class & !bits);
        bytes[0] = (bytes[0] & 0xf0) | (class >> 4);
        bytes[1] = (bytes[1] & 0x0f) | (class << 4);
    }
}

fn set_ttl(data: &mut [u8], headers: &PacketHeaders, ttl: u8) {
    if let Some(l3) = headers.ipv4() {
        let Some(&protocol) = data.get(l3 + 9) else {
            return;
        };
        if let Some((old_sum, new_sum)) = replace(data, l3 + 8, &[ttl, protocol]) {
            patch_checksum(data, l3 + 10, false, old_sum, new_sum);
        }
    } else if let Some(l3) = headers.ipv6()
        && let Some(hop_limit) = data.get_mut(l3 + 7)
    {
        *hop_limit = ttl;
    }
}

/// Decrements the IPv4 TTL or IPv6 hop limit; false if it is 0 or 1 (the packet must be
/// dropped, unchanged). Other packets pass untouched.
pub fn dec_ttl(frame: &mut Frame<'_>, headers: &PacketHeaders) -> bool {
    let data = frame.data_mut();
    if let Some(l3) = headers.ipv4() {
        let Ok(mut ip) = Ipv4Packet::new_checked(&mut data[l3..]) else {
            return true;
        };
        if ip.ttl() <= 1 {
            return false;
        }
        ip.decrement_ttl();
    } else if let Some(l3) = headers.ipv6()
        && let Some(hop_limit) = data.get_mut(l3 + 7)
    {
        if *hop_limit <= 1 {
            return false;
        }
        *hop_limit -= 1;
    }
    true
}

fn is_tagged(data: &[u8]) -> bool {
    read_u16(data, 12).is_some_and(|tpid| EtherType(tpid).is_vlan()) && data.len() >= 18
}

/// Sets the VLAN id and/or priority of the outer tag, pushing an 802.1Q tag (id 0, priority 0
/// before the change) on an untagged frame. False if there is no room to push.
pub fn set_vlan(
    frame: &mut Frame<'_>,
    headers: &mut PacketHeaders,
    vid: Option<u16>,
    pcp: Option<u8>,
) -> bool {
    if frame.len() < 14 {
        return true;
    }
    if !is_tagged(frame.data()) {
        if !frame.insert_gap(12, 4) {
            return false;
        }
        write_u16(frame.data_mut(), 12, EtherType::VLAN.0);
        headers.shift(4);
    }
    let data = frame.data_mut();
    let mut tci = read_u16(data, 14).unwrap_or(0);
    if let Some(vid) = vid {
        tci = (tci & 0xf000) | (vid & 0x0fff);
    }
    if let Some(pcp) = pcp {
        tci = (tci & 0x1fff) | (u16::from(pcp & 0x07) << 13);
    }
    write_u16(data, 14, tci);
    true
}

/// Pops the outer VLAN tag, if there is one.
pub fn strip_vlan(frame: &mut Frame<'_>, headers: &mut PacketHeaders) {
    if is_tagged(frame.data()) && frame.remove_range(12, 4) {
        headers.shift(-4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;
    use wirespeed_packet::icmp::Icmpv4Packet;
    use wirespeed_packet::ipv6::Ipv6Packet;
    use wirespeed_packet::tcp::TcpPacket;
    use wirespeed_packet::udp::UdpPacket;

    /// Ethernet / IPv4 (ttl 64) / UDP 1234 -> 53 with "hi!!"; checksums filled by [`valid`].
    const UDP_FRAME: [u8; 46] = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00, // Ethernet
        0x45, 0x00, 0x00, 0x20, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x00, 0x00, // IPv4
        10, 0, 0, 1, 10, 0, 0, 2, // addresses
        0x04, 0xd2, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, b'h', b'i', b'!', b'!', // UDP
    ];

    /// Ethernet / IPv4 / TCP SYN 40000 -> 80.
    const TCP_FRAME: [u8; 54] = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00, // Ethernet
        0x45, 0x10, 0x00, 0x28, 0x00, 0x02, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00, // IPv4
        10, 0, 0, 1, 10, 0, 0, 2, // addresses
        0x9c, 0x40, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xfa, 0xf0, 0, 0, 0, 0,
    ];

    /// Ethernet / IPv6 / ICMPv6 echo request.
    const ICMPV6_FRAME: [u8; 62] = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x86, 0xdd, // Ethernet
        0x60, 0x00, 0x00, 0x00, 0x00, 0x08, 58, 64, // IPv6
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // 2001:db8::1
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, // 2001:db8::2
        128, 0, 0, 0, 0, 1, 0, 1, // echo request
    ];

    /// The frame with every checksum filled in from scratch.
    fn valid(frame: &[u8]) -> Vec<u8> {
        let mut data = frame.to_vec();
        let headers = headers(&data);
        let l3 = headers.offsets.l3.unwrap();
        if EtherType(headers.dl_type) == EtherType::IPV4 {
            let mut ip = Ipv4Packet::new_checked(&mut data[l3..]).unwrap();
            ip.fill_checksum();
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            match IpProtocol(headers.nw_proto) {
                IpProtocol::TCP => TcpPacket::new_checked(ip.payload_mut())
                    .unwrap()
                    .fill_checksum_v4(src, dst),
                _ => UdpPacket::new_checked(ip.payload_mut())
                    .unwrap()
                    .fill_checksum_v4(src, dst),
            }
        } else {
            let ip = Ipv6Packet::new_checked(&data[l3..]).unwrap();
            let sum = checksum::combine(&[
                checksum::pseudo_header_v6(
                    &ip.src_addr(),
                    &ip.dst_addr(),
                    58,
                    ip.payload().len() as u32,
                ),
                checksum::data(ip.payload()),
            ]);
            let at = headers.offsets.l4.unwrap() + 2;
            data[at..at + 2].copy_from_slice(&(!sum).to_be_bytes());
        }
        data
    }

    fn headers(data: &[u8]) -> PacketHeaders {
        let (key, offsets) = FlowKey::parse_with_offsets(data, 1);
        PacketHeaders::new(&key, offsets)
    }

    /// Every checksum of the frame verifies, as a receiver would check it.
    fn checksums_ok(data: &[u8]) -> bool {
        let headers = headers(data);
        let Some(l3) = headers.offsets.l3 else {
            return true;
        };
        if EtherType(headers.dl_type) == EtherType::IPV4 {
            let ip = Ipv4Packet::new_checked(&data[l3..]).unwrap();
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            ip.verify_checksum()
                && match IpProtocol(headers.nw_proto) {
                    IpProtocol::TCP => TcpPacket::new_checked(ip.payload())
                        .unwrap()
                        .verify_checksum_v4(src, dst),
                    IpProtocol::UDP => UdpPacket::new_checked(ip.payload())
                        .unwrap()
                        .verify_checksum_v4(src, dst),
                    IpProtocol::ICMP => Icmpv4Packet::new_checked(ip.payload())
                        .unwrap()
                        .verify_checksum(),
                    _ => true,
                }
        } else {
            let ip = Ipv6Packet::new_checked(&data[l3..]).unwrap();
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            let sum = checksum::combine(&[
                checksum::pseudo_header_v6(&src, &dst, headers.nw_proto, ip.payload().len() as u32),
                checksum::data(ip.payload()),
            ]);
            sum == 0xffff
        }
    }

    #[test]
    fn literal_frames_start_valid() {
        assert!(checksums_ok(&valid(&UDP_FRAME)));
        assert!(checksums_ok(&valid(&TCP_FRAME)));
        assert!(checksums_ok(&valid(&ICMPV6_FRAME)));
        assert!(!checksums_ok(&UDP_FRAME));
    }

    #[test]
    fn nw_and_tp_rewrites_keep_checksums() {
        let rewrites = [
            (Field::NwSrc, 0xc0a8_0101),
            (Field::NwDst, 0xac10_fffe),
            (Field::TpSrc, 5353),
            (Field::TpDst, 0xffff),
            (Field::NwTos, 0xb8),
            (Field::NwEcn, 3),
            (Field::NwTtl, 3),
            (Field::DlSrc, 0x0aff_ffff_ffff),
        ];
        for frame in [valid(&UDP_FRAME), valid(&TCP_FRAME)] {
            for (field, value) in rewrites {
                let mut buffer = frame.clone();
                let headers = headers(&buffer);
                set_field(&mut Frame::whole(&mut buffer), &headers, field, value);
                assert!(checksums_ok(&buffer), "{field}");
                let key = FlowKey::parse(&buffer, 1);
                assert_eq!(
                    field.get(&crate::field::FlowBits::from_key(&key)),
                    value,
                    "{field}"
                );
            }
        }
    }

    #[test]
    fn ipv6_address_rewrite_patches_icmpv6() {
        let mut buffer = valid(&ICMPV6_FRAME);
        let headers = headers(&buffer);
        set_field(
            &mut Frame::whole(&mut buffer),
            &headers,
            Field::Ipv6Dst,
            0xfe80 << 112 | 7,
        );
        assert_eq!(FlowKey::parse(&buffer, 1).ipv6_dst, 0xfe80 << 112 | 7);
        assert!(checksums_ok(&buffer));
        set_field(&mut Frame::whole(&mut buffer), &headers, Field::NwTos, 0x28);
        set_field(&mut Frame::whole(&mut buffer), &headers, Field::NwEcn, 1);
        let key = FlowKey::parse(&buffer, 1);
        assert_eq!((key.nw_tos, key.nw_ecn), (0x28, 1));
        // The flow label shares its first byte with the traffic class, which it keeps.
        set_field(
            &mut Frame::whole(&mut buffer),
            &headers,
            Field::Ipv6Label,
            0xf_ffff,
        );
        set_field(
            &mut Frame::whole(&mut buffer),
            &headers,
            Field::Ipv6Label,
            0xa_bcde,
        );
        let key = FlowKey::parse(&buffer, 1);
        assert_eq!(
            (key.ipv6_label, key.nw_tos, key.nw_ecn),
            (0xa_bcde, 0x28, 1)
        );
        assert!(checksums_ok(&buffer));
    }

    #[test]
    fn arp_hardware_addresses_rewrite() {
        let mut buffer = vec![0u8; 42];
        buffer[12..14].copy_from_slice(&[0x08, 0x06]);
        buffer[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        let headers = headers(&buffer);
        let frame = &mut Frame::whole(&mut buffer);
        set_field(frame, &headers, Field::ArpSha, 0x0200_0000_0007);
        set_field(frame, &headers, Field::ArpTha, 0x0200_0000_0008);
        let key = FlowKey::parse(&buffer, 1);
        assert_eq!(key.arp_sha.0, [2, 0, 0, 0, 0, 7]);
        assert_eq!(key.arp_tha.0, [2, 0, 0, 0, 0, 8]);
        assert_eq!(key.arp_op, 1);
    }

    #[test]
    fn an_ipv6_udp_checksum_that_comes_to_zero_is_sent_as_all_ones() {
        let (src, dst) = (Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED);
        let new_dst = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x99);
        // Ethernet / IPv6 / UDP 1234 -> 53 with two bytes of payload, chosen below.
        let mut frame = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x86, 0xdd];
        frame.extend_from_slice(&[0x60, 0, 0, 0, 0, 10, 17, 64]);
        frame.extend_from_slice(&src.octets());
        frame.extend_from_slice(&dst.octets());
        frame.extend_from_slice(&[0x04, 0xd2, 0x00, 0x35, 0x00, 0x0a, 0, 0, 0, 0]);
        let udp = 54;
        let sum_to = |frame: &[u8], to: &Ipv6Addr| {
            checksum::combine(&[
                checksum::pseudo_header_v6(&src, to, 17, 10),
                checksum::data(&frame[udp..]),
            ])
        };
        // The payload that makes the sum to the new address all ones: its checksum is 0.
        let word = !sum_to(&frame, &new_dst);
        frame[udp + 8..udp + 10].copy_from_slice(&word.to_be_bytes());
        assert_eq!(sum_to(&frame, &new_dst), 0xffff);
        let checksum = !sum_to(&frame, &dst);
        frame[udp + 6..udp + 8].copy_from_slice(&checksum.to_be_bytes());
        let headers = headers(&frame);
        set_field(
            &mut Frame::whole(&mut frame),
            &headers,
            Field::Ipv6Dst,
            u128::from(new_dst),
        );
        assert_eq!(&frame[udp + 6..udp + 8], &[0xff, 0xff], "not 0: none");
        assert_eq!(sum_to(&frame, &new_dst), 0xffff, "and it verifies");
    }

    #[test]
    fn udp_without_checksum_stays_without() {
        let mut buffer = valid(&UDP_FRAME);
        buffer[40..42].fill(0);
        let headers = headers(&buffer);
        set_field(
            &mut Frame::whole(&mut buffer),
            &headers,
            Field::NwDst,
            0x0102_0304,
        );
        assert_eq!(&buffer[40..42], &[0, 0]);
    }

    #[test]
    fn dec_ttl_drops_at_one() {
        let mut buffer = valid(&UDP_FRAME);
        let headers = headers(&buffer);
        assert!(dec_ttl(&mut Frame::whole(&mut buffer), &headers));
        assert_eq!(buffer[22], 63);
        assert!(checksums_ok(&buffer));
        buffer[22] = 1;
        Ipv4Packet::new_checked(&mut buffer[14..])
            .unwrap()
            .fill_checksum();
        assert!(!dec_ttl(&mut Frame::whole(&mut buffer), &headers));
        assert_eq!(buffer[22], 1);
        let mut buffer = ICMPV6_FRAME;
        assert!(dec_ttl(
            &mut Frame::whole(&mut buffer),
            &self::headers(&ICMPV6_FRAME)
        ));
        assert_eq!(buffer[21], 63);
    }

    #[test]
    fn push_modify_and_pop_vlan() {
        let mut buffer = [0u8; 4 + 54];
        buffer[4..].copy_from_slice(&valid(&TCP_FRAME));
        let mut frame = Frame::new(&mut buffer, 4, 54).unwrap();
        let mut headers = headers(frame.data());
        assert!(set_vlan(&mut frame, &mut headers, Some(100), None));
        assert_eq!(&frame.data()[12..18], &[0x81, 0x00, 0x00, 0x64, 0x08, 0x00]);
        assert_eq!(headers.offsets.l3, Some(18));
        assert!(set_vlan(&mut frame, &mut headers, None, Some(5)));
        let key = FlowKey::parse(frame.data(), 1);
        assert_eq!(
            (key.dl_vlan(), key.dl_vlan_pcp(), key.tp_dst),
            (Some(100), Some(5), 80)
        );
        // The offsets followed the push: a rewrite lands in the right place.
        set_field(&mut frame, &headers, Field::NwDst, 0x0a00_0063);
        assert!(checksums_ok(frame.data()));
        strip_vlan(&mut frame, &mut headers);
        assert_eq!(frame.data()[..12], TCP_FRAME[..12]);
        assert_eq!(frame.data()[12..14], [0x08, 0x00]);
        assert_eq!(headers.offsets.l3, Some(14));
        assert_eq!(FlowKey::parse(frame.data(), 1).nw_dst, 0x0a00_0063);
    }

    #[test]
    fn push_without_room_fails_cleanly() {
        let mut buffer = TCP_FRAME;
        let mut frame = Frame::whole(&mut buffer);
        let mut headers = headers(frame.data());
        assert!(!set_vlan(&mut frame, &mut headers, Some(1), None));
        assert_eq!(buffer, TCP_FRAME);
        assert!(set_vlan(
            &mut Frame::whole(&mut buffer[..13]),
            &mut headers,
            Some(1),
            None
        ));
    }

    #[test]
    fn rewrites_on_truncated_frames_do_nothing_wrong() {
        // Cut before the end of the IPv4 header, a frame has no network or transport header to
        // rewrite: every rewrite below must leave its bytes exactly as they were.
        for cut in 0..34 {
            let mut buffer = UDP_FRAME[..cut].to_vec();
            let mut headers = headers(&buffer);
            let mut frame = Frame::whole(&mut buffer);
            for field in [Field::NwSrc, Field::TpDst, Field::NwTos, Field::NwTtl] {
                set_field(&mut frame, &headers, field, 1);
            }
            assert!(dec_ttl(&mut frame, &headers), "cut at {cut}");
            strip_vlan(&mut frame, &mut headers);
            assert_eq!(frame.data(), &UDP_FRAME[..cut], "cut at {cut}");
            // The Ethernet destination is written only when all six bytes are there.
            set_field(&mut frame, &headers, Field::DlDst, 1);
            let mut expected = UDP_FRAME[..cut].to_vec();
            if cut >= 6 {
                expected[..6].copy_from_slice(&[0, 0, 0, 0, 0, 1]);
            }
            assert_eq!(frame.data(), &expected[..], "cut at {cut}");
        }
        // Past it, whatever the rewrites reach, they stay inside the frame.
        for cut in 34..UDP_FRAME.len() {
            let mut buffer = UDP_FRAME[..cut].to_vec();
            let mut headers = headers(&buffer);
            let mut frame = Frame::whole(&mut buffer);
            for field in [
                Field::NwSrc,
                Field::TpDst,
                Field::NwTos,
                Field::NwTtl,
                Field::DlDst,
            ] {
                set_field(&mut frame, &headers, field, 1);
            }
            dec_ttl(&mut frame, &headers);
            strip_vlan(&mut frame, &mut headers);
            assert_eq!(frame.len(), cut);
        }
    }
}
