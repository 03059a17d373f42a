//! Path MTU discovery across a tunnel: a packet too long for the underlay once pushed is
//! answered, as the kernel answers for a tunnel device on a bridge (`skb_tunnel_check_pmtu`),
//! with ICMP "fragmentation needed" (IPv4 with DF) or ICMPv6 "packet too big", naming the
//! longest inner IP packet that fits. The answer comes from the packet's own destination, so
//! the sender's stack takes it as the path's: TCP lowers its segment size at once instead of
//! waiting on losses for ever.

use wirespeed_packet::checksum;

const IPV4: [u8; 2] = [0x08, 0x00];
const IPV6: [u8; 2] = [0x86, 0xdd];
const ICMP: u8 = 1;
const ICMPV6: u8 = 58;
/// IPv4: what an answer may hold at most (RFC 1812 §4.3.2.3), and the least MTU it may name.
const IPV4_ANSWER_MAX: usize = 576;
/// IPv6: the least MTU (RFC 8200 §5), and what an answer may hold at most (RFC 4443 §2.4).
const IPV6_MIN_MTU: usize = 1280;
/// The answer's IP time to live or hop limit.
const TTL: u8 = 64;

/// Writes into `out` the answer to `inner`, an Ethernet frame (802.1Q or 802.1ad tags kept)
/// that did not fit a tunnel which takes inner frames of `room` bytes at most. False, with
/// `out` cleared, where no answer is due: not IPv4 with DF (and no fragment) or IPv6, an
/// ICMP error itself, a sender that cannot be answered (multicast, broadcast, unspecified),
/// or a path that would be below IP's least MTU.
pub fn too_big_answer(inner: &[u8], room: usize, out: &mut Vec<u8>) -> bool {
    out.clear();
    let Some(l3) = ip_start(inner) else {
        return false;
    };
    let Some(mtu) = room.checked_sub(l3) else {
        return false;
    };
    let answered = match inner[l3 - 2..l3] == IPV4 {
        true => answer_v4(&inner[..l3], &inner[l3..], mtu, out),
        false => answer_v6(&inner[..l3], &inner[l3..], mtu, out),
    };
    if !answered {
        out.clear();
    }
    answered
}

/// Where the IP header starts, past the Ethernet header and up to two VLAN tags (802.1Q,
/// 802.1ad): IPv4 or IPv6 only.
fn ip_start(frame: &[u8]) -> Option<usize> {
    let mut at = 12;
    for _ in 0..3 {
        let ether_type: [u8; 2] = frame.get(at..at + 2)?.try_into().ok()?;
        match ether_type {
            IPV4 | IPV6 => return Some(at + 2),
            [0x81, 0x00] | [0x88, 0xa8] => at += 4,
            _ => return None,
        }
    }
    None
}

/// The answer's Ethernet header and tags: the frame's own, its addresses swapped.
fn link_header(l2: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&l2[6..12]);
    out.extend_from_slice(&l2[0..6]);
    out.extend_from_slice(&l2[12..]);
}

fn answer_v4(l2: &[u8], ip: &[u8], mtu: usize, out: &mut Vec<u8>) -> bool {
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return false;
    }
    let header_len = usize::from(ip[0] & 0x0f) * 4;
    // DF alone: a fragment (an offset, or more to come) is not answered, as the kernel.
    let dont_fragment = ip[6..8] == [0x40, 0x00];
    let (src, dst) = (&ip[12..16], &ip[16..20]);
    // A sender on "this network" (0/8), loopback, multicast or broadcast is not answered;
    // nor is a packet to a group, whose address the answer would come from.
    let unanswerable = src[0] == 0 || src[0] == 127 || src[0] >= 224 || dst[0] >= 224;
    if header_len < 20 || ip.len() < header_len || !dont_fragment || unanswerable {
        return false;
    }
    if ip[9] == ICMP && ip.get(header_len).is_some_and(|&t| is_icmp_error(t)) {
        return false;
    }
    if mtu < IPV4_ANSWER_MAX {
        return false;
    }
    let quoted = ip.len().min(IPV4_ANSWER_MAX - 20 - 8);
    let total = 20 + 8 + quoted;
    link_header(l2, out);
    let at = out.len();
    // The IPv4 header, from the packet's destination back to its source.
    out.extend_from_slice(&[0x45, ip[1] & 0xfc]);
    out.extend_from_slice(&(total as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0x40, 0, TTL, ICMP, 0, 0]);
    out.extend_from_slice(dst);
    out.extend_from_slice(src);
    let sum = checksum::internet_checksum(&out[at..at + 20]);
    out[at + 10..at + 12].copy_from_slice(&sum.to_be_bytes());
    // Destination unreachable, fragmentation needed, the next hop's MTU, the packet quoted.
    let icmp = out.len();
    out.extend_from_slice(&[3, 4, 0, 0, 0, 0]);
    out.extend_from_slice(&(mtu.min(0xffff) as u16).to_be_bytes());
    out.extend_from_slice(&ip[..quoted]);
    let sum = checksum::internet_checksum(&out[icmp..]);
    out[icmp + 2..icmp + 4].copy_from_slice(&sum.to_be_bytes());
    true
}

/// ICMPv4 error types (RFC 1812 §4.3.2.7: an error is never answered with an error).
fn is_icmp_error(icmp_type: u8) -> bool {
    matches!(icmp_type, 3 | 4 | 5 | 11 | 12)
}

fn answer_v6(l2: &[u8], ip: &[u8], mtu: usize, out: &mut Vec<u8>) -> bool {
    if ip.len() < 40 || ip[0] >> 4 != 6 {
        return false;
    }
    let (src, dst) = (&ip[8..24], &ip[24..40]);
    // Unspecified or multicast: not a sender to answer (RFC 4443 §2.4 (e)); a packet to a
    // group is answered by the kernel, but from the group's address, which no receiver
    // takes (§2.2): not here.
    let unanswerable = src == [0; 16] || src[0] == 0xff || dst[0] == 0xff;
    if unanswerable || mtu < IPV6_MIN_MTU || !answerable_v6(ip) {
        return false;
    }
    let quoted = ip.len().min(IPV6_MIN_MTU - 40 - 8);
    let payload = 8 + quoted;
    link_header(l2, out);
    out.extend_from_slice(&[0x60, 0, 0, 0]);
    out.extend_from_slice(&(payload as u16).to_be_bytes());
    out.extend_from_slice(&[ICMPV6, TTL]);
    out.extend_from_slice(dst);
    out.extend_from_slice(src);
    // Packet too big, the path's MTU, the packet quoted.
    let icmp = out.len();
    out.extend_from_slice(&[2, 0, 0, 0]);
    out.extend_from_slice(&(mtu as u32).to_be_bytes());
    out.extend_from_slice(&ip[..quoted]);
    let pseudo = checksum::pseudo_header_v6(&to_v6(dst), &to_v6(src), ICMPV6, payload as u32);
    let sum = !checksum::combine(&[pseudo, checksum::data(&out[icmp..])]);
    out[icmp + 2..icmp + 4].copy_from_slice(&sum.to_be_bytes());
    true
}

/// Past IPv6's extension headers: false for an ICMPv6 error (types below 128) or a
/// fragment other than the first (RFC 4443 §2.4 (e)), or headers that cannot be read.
fn answerable_v6(ip: &[u8]) -> bool {
    const HOP_BY_HOP: u8 = 0;
    const ROUTING: u8 = 43;
    const FRAGMENT: u8 = 44;
    const DESTINATION: u8 = 60;
    let (mut next, mut at) = (ip[6], 40);
    // As the kernel's ipv6_skip_exthdr, a handful at most.
    for _ in 0..8 {
        match next {
            HOP_BY_HOP | ROUTING | DESTINATION => {
                let Some(header) = ip.get(at..at + 2) else {
                    return false;
                };
                next = header[0];
                at += (usize::from(header[1]) + 1) * 8;
            }
            FRAGMENT => {
                let Some(header) = ip.get(at..at + 8) else {
                    return false;
                };
                if u16::from_be_bytes([header[2], header[3]]) & 0xfff8 != 0 {
                    return false;
                }
                next = header[0];
                at += 8;
            }
            ICMPV6 => return ip.get(at).is_some_and(|&t| t >= 128),
            _ => return true,
        }
    }
    false
}

fn to_v6(bytes: &[u8]) -> std::net::Ipv6Addr {
    let octets: [u8; 16] = bytes.try_into().expect("16 bytes");
    octets.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirespeed_packet::checksum::verify;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

    /// An IPv4 frame of `len` bytes from 10.9.0.1 to 10.9.0.2 (A to B) with `flags_fragment`
    /// and `protocol`, its first payload byte `first`.
    fn v4(len: usize, flags_fragment: [u8; 2], protocol: u8, first: u8) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[0..6].copy_from_slice(&B);
        f[6..12].copy_from_slice(&A);
        f[12..14].copy_from_slice(&IPV4);
        f[14] = 0x45;
        f[15] = 0xb9; // DSCP 46, ECN 1
        f[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
        f[20..22].copy_from_slice(&flags_fragment);
        f[22] = 64;
        f[23] = protocol;
        f[26..30].copy_from_slice(&[10, 9, 0, 1]);
        f[30..34].copy_from_slice(&[10, 9, 0, 2]);
        f[34] = first;
        for (i, b) in f.iter_mut().enumerate().skip(35) {
            *b = i as u8;
        }
        f
    }

    #[test]
    fn ipv4_with_df_is_answered_from_its_destination_with_the_mtu_that_fits() {
        let frame = v4(1514, [0x40, 0], 6, 0);
        let mut out = Vec::new();
        // A 1500-byte underlay, VXLAN's 36 bytes of IPv4, UDP and VXLAN: 1464-byte frames.
        assert!(too_big_answer(&frame, 1464, &mut out));
        assert_eq!(out.len(), 14 + IPV4_ANSWER_MAX);
        assert_eq!(
            (&out[0..6], &out[6..12], &out[12..14]),
            (&A[..], &B[..], &IPV4[..])
        );
        let ip = &out[14..34];
        assert!(verify(ip), "{ip:02x?}");
        assert_eq!(ip[0], 0x45);
        assert_eq!(ip[1], 0xb8, "DSCP kept, ECN not");
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]), 576);
        assert_eq!((ip[8], ip[9]), (TTL, ICMP));
        assert_eq!(
            (&ip[12..16], &ip[16..20]),
            (&[10, 9, 0, 2][..], &[10, 9, 0, 1][..])
        );
        let icmp = &out[34..];
        assert!(verify(icmp));
        assert_eq!((icmp[0], icmp[1]), (3, 4));
        assert_eq!(u16::from_be_bytes([icmp[6], icmp[7]]), 1450);
        assert_eq!(&icmp[8..], &frame[14..14 + 548], "the packet quoted");
    }

    #[test]
    fn a_short_ipv4_packet_is_quoted_whole_and_tags_are_kept() {
        let mut frame = v4(100, [0x40, 0], 17, 0);
        // One 802.1Q tag, VLAN 10.
        frame.splice(12..12, [0x81, 0x00, 0x00, 0x0a]);
        let mut out = Vec::new();
        assert!(too_big_answer(&frame, 1000, &mut out));
        assert_eq!(&out[12..18], &[0x81, 0x00, 0x00, 0x0a, 0x08, 0x00]);
        assert_eq!(out.len(), 18 + 20 + 8 + 86);
        assert_eq!(u16::from_be_bytes([out[18 + 26], out[18 + 27]]), 1000 - 18);
        assert!(verify(&out[18 + 20..]));
    }

    #[test]
    fn no_answer_without_df_for_a_fragment_an_icmp_error_or_a_tiny_path() {
        let mut out = vec![1];
        for (frame, room) in [
            (v4(1514, [0, 0], 6, 0), 1464),
            (v4(1514, [0x60, 0], 6, 0), 1464),
            (v4(1514, [0x40, 1], 6, 0), 1464),
            (v4(1514, [0x40, 0], ICMP, 3), 1464),
            (v4(600, [0x40, 0], 6, 0), 500),
        ] {
            assert!(!too_big_answer(&frame, room, &mut out));
            assert!(out.is_empty());
        }
        // An echo request is answered.
        assert!(too_big_answer(
            &v4(1514, [0x40, 0], ICMP, 8),
            1464,
            &mut out
        ));
        // A multicast destination; a broadcast, loopback or "this network" source; ARP;
        // three VLAN tags: not.
        let mut multicast = v4(1514, [0x40, 0], 17, 0);
        multicast[30] = 239;
        let from = |first: [u8; 4]| {
            let mut f = v4(1514, [0x40, 0], 17, 0);
            f[26..30].copy_from_slice(&first);
            f
        };
        let mut arp = v4(60, [0x40, 0], 17, 0);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let mut tagged = v4(1514, [0x40, 0], 17, 0);
        tagged.splice(12..12, [0x81, 0, 0, 1, 0x88, 0xa8, 0, 2, 0x81, 0, 0, 3]);
        for frame in [
            multicast,
            from([255; 4]),
            from([127, 0, 0, 1]),
            from([0, 1, 2, 3]),
            arp,
            tagged,
        ] {
            assert!(
                !too_big_answer(&frame, 40, &mut out) && !too_big_answer(&frame, 1464, &mut out)
            );
        }
    }

    fn v6(len: usize, next: u8, first: u8) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[0..6].copy_from_slice(&B);
        f[6..12].copy_from_slice(&A);
        f[12..14].copy_from_slice(&IPV6);
        f[14] = 0x60;
        f[18..20].copy_from_slice(&((len - 54) as u16).to_be_bytes());
        f[20] = next;
        f[21] = 64;
        f[22..24].copy_from_slice(&[0xfd, 0]);
        f[37] = 1;
        f[38..40].copy_from_slice(&[0xfd, 0]);
        f[53] = 2;
        f[54] = first;
        f
    }

    #[test]
    fn ipv6_is_answered_with_packet_too_big_quoting_up_to_1280_bytes() {
        let frame = v6(1514, 6, 0);
        let mut out = Vec::new();
        assert!(too_big_answer(&frame, 1464, &mut out));
        assert_eq!(out.len(), 14 + IPV6_MIN_MTU);
        let ip = &out[14..54];
        assert_eq!((ip[6], ip[7]), (ICMPV6, TTL));
        assert_eq!(u16::from_be_bytes([ip[4], ip[5]]), 1240);
        assert_eq!((&ip[8..24], &ip[24..40]), (&frame[38..54], &frame[22..38]));
        let icmp = &out[54..];
        assert_eq!((icmp[0], icmp[1]), (2, 0));
        assert_eq!(
            u32::from_be_bytes([icmp[4], icmp[5], icmp[6], icmp[7]]),
            1450
        );
        assert_eq!(&icmp[8..], &frame[14..14 + 1232]);
        let pseudo = checksum::pseudo_header_v6(&to_v6(&ip[8..24]), &to_v6(&ip[24..40]), 58, 1240);
        assert_eq!(checksum::combine(&[pseudo, checksum::data(icmp)]), 0xffff);
    }

    #[test]
    fn no_ipv6_answer_to_an_error_a_multicast_sender_or_below_1280() {
        let mut out = Vec::new();
        assert!(!too_big_answer(&v6(1514, ICMPV6, 1), 1464, &mut out));
        assert!(too_big_answer(&v6(1514, ICMPV6, 128), 1464, &mut out));
        let mut multicast = v6(1514, 17, 0);
        multicast[22] = 0xff;
        assert!(!too_big_answer(&multicast, 1464, &mut out));
        let mut to_group = v6(1514, 17, 0);
        to_group[38] = 0xff;
        assert!(!too_big_answer(&to_group, 1464, &mut out));
        assert!(!too_big_answer(&v6(1400, 17, 0), 1290, &mut out));
        // Behind extension headers: a hop-by-hop header, then an ICMPv6 error: not; a
        // first fragment of UDP: answered; a later fragment: not.
        let behind = |next: u8, header: [u8; 8], first: u8| {
            let mut f = v6(1514, next, 0);
            f[54..62].copy_from_slice(&header);
            f[62] = first;
            f
        };
        assert!(!too_big_answer(
            &behind(0, [ICMPV6, 0, 0, 0, 0, 0, 0, 0], 1),
            1464,
            &mut out
        ));
        assert!(too_big_answer(
            &behind(0, [ICMPV6, 0, 0, 0, 0, 0, 0, 0], 128),
            1464,
            &mut out
        ));
        assert!(too_big_answer(
            &behind(44, [17, 0, 0, 1, 0, 0, 0, 9], 0),
            1464,
            &mut out
        ));
        assert!(!too_big_answer(
            &behind(44, [17, 0, 0x05, 0x01, 0, 0, 0, 9], 0),
            1464,
            &mut out
        ));
    }
}
