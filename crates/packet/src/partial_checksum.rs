//! Completing the TCP and UDP checksums a sender left to its device (checksum offload).
//!
//! A Linux host that offloads transmit checksums (the default on veth) writes only the sum of
//! the pseudo-header into the checksum field and leaves the rest to the device; inside the
//! kernel the frame carries a note saying so (CHECKSUM_PARTIAL). A frame read raw, as AF_XDP
//! reads it, loses the note, and a receiver that gets it as it is drops it for a bad checksum.
//! So a switch completes such checksums before it sends the frame on: a field that holds
//! exactly the pseudo-header sum, in a segment that does not verify, is completed. A checksum
//! that verifies, or one that is wrong in any other way, is left as it is.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::ipv4::IpProtocol;

const TCP: u8 = IpProtocol::TCP.0;
const UDP: u8 = IpProtocol::UDP.0;

/// Completes the checksum of `segment` (a TCP or UDP header and its data) when it is partial:
/// its field holds `pseudo`, the pseudo-header sum, and the segment does not verify. Returns
/// whether the field was rewritten.
pub fn complete_segment(segment: &mut [u8], protocol: u8, pseudo: u16) -> bool {
    let at = match protocol {
        TCP => 16,
        UDP => 6,
        _ => return false,
    };
    let Some(field) = segment.get(at..at + 2) else {
        return false;
    };
    if u16::from_be_bytes([field[0], field[1]]) != pseudo
        || checksum::combine(&[pseudo, checksum::data(segment)]) == 0xffff
    {
        return false;
    }
    segment[at..at + 2].fill(0);
    let mut check = !checksum::combine(&[pseudo, checksum::data(segment)]);
    if protocol == UDP && check == 0 {
        // RFC 768: a computed zero is sent as all ones (zero means "no checksum").
        check = 0xffff;
    }
    segment[at..at + 2].copy_from_slice(&check.to_be_bytes());
    true
}

/// [`complete_segment`] for the TCP or UDP segment of `frame`, whose IPv4 or IPv6 header is at
/// `l3` and transport header at `l4` (as [`crate::flow_key::HeaderOffsets`] gives them). Only
/// whole segments are completed: not IPv4 fragments, nor IPv6 with extension headers.
pub fn complete_in_frame(frame: &mut [u8], l3: usize, l4: usize) -> bool {
    let Some(&version) = frame.get(l3) else {
        return false;
    };
    match version >> 4 {
        4 => {
            let Some(ip) = frame.get(l3..l3 + 20) else {
                return false;
            };
            let fragmented = ip[6] & 0x3f != 0 || ip[7] != 0;
            let protocol = ip[9];
            let end = l3 + usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            if fragmented || end > frame.len() || l4 > end {
                return false;
            }
            let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
            let length = (end - l4) as u16;
            let pseudo = checksum::pseudo_header_v4(src, dst, protocol, length);
            complete_segment(&mut frame[l4..end], protocol, pseudo)
        }
        6 => {
            let Some(ip) = frame.get(l3..l3 + 40) else {
                return false;
            };
            let protocol = ip[6];
            let end = l3 + 40 + usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            if l4 != l3 + 40 || end > frame.len() {
                return false;
            }
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&ip[8..24]);
            let src = Ipv6Addr::from(octets);
            octets.copy_from_slice(&ip[24..40]);
            let dst = Ipv6Addr::from(octets);
            let pseudo = checksum::pseudo_header_v6(&src, &dst, protocol, (end - l4) as u32);
            complete_segment(&mut frame[l4..end], protocol, pseudo)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethernet::MacAddr;
    use crate::flow_key::FlowKey;
    use crate::frame_builder::{FrameSpec, IpPair, L4Kind};
    use proptest::prelude::*;

    /// A frame `FrameSpec` built (correct checksums), its L3 and L4 offsets, and the offset
    /// of its transport checksum.
    fn built(kind: L4Kind, ipv6: bool, len: usize) -> (Vec<u8>, usize, usize, usize) {
        let ip = if ipv6 {
            IpPair::V6(
                "2001:db8::1".parse().unwrap(),
                "2001:db8::2".parse().unwrap(),
            )
        } else {
            IpPair::V4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2))
        };
        let spec = FrameSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            vlan: None,
            ip,
            l4: kind,
            src_port: 40000,
            dst_port: 5001,
            generator: 1,
        };
        let mut frame = vec![0u8; len];
        spec.write(&mut frame, len, 7, 99).unwrap();
        let (_, offsets) = FlowKey::parse_with_offsets(&frame, 1);
        let (l3, l4) = (offsets.l3.unwrap(), offsets.l4.unwrap());
        let at = l4 + if kind == L4Kind::Udp { 6 } else { 16 };
        (frame, l3, l4, at)
    }

    /// What a host with checksum offload hands out: the pseudo-header sum in the field.
    fn make_partial(frame: &mut [u8], l3: usize, l4: usize, at: usize) {
        let (pseudo, protocol) = if frame[l3] >> 4 == 4 {
            let ip = &frame[l3..l3 + 20];
            let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
            let end = l3 + usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            let p = checksum::pseudo_header_v4(src, dst, ip[9], (end - l4) as u16);
            (p, ip[9])
        } else {
            let ip = &frame[l3..l3 + 40];
            let src = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).unwrap());
            let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[24..40]).unwrap());
            let length = u32::from(u16::from_be_bytes([ip[4], ip[5]]));
            (checksum::pseudo_header_v6(&src, &dst, ip[6], length), ip[6])
        };
        assert!(protocol == TCP || protocol == UDP);
        frame[at..at + 2].copy_from_slice(&pseudo.to_be_bytes());
    }

    #[test]
    fn partial_checksums_are_completed_to_the_full_ones() {
        for (kind, ipv6) in [
            (L4Kind::Udp, false),
            (L4Kind::TcpSyn, false),
            (L4Kind::Udp, true),
            (L4Kind::TcpSyn, true),
        ] {
            for len in [100, 101, 200, 1514] {
                let (good, l3, l4, at) = built(kind, ipv6, len);
                let mut frame = good.clone();
                make_partial(&mut frame, l3, l4, at);
                assert_ne!(frame, good);
                assert!(
                    complete_in_frame(&mut frame, l3, l4),
                    "{kind:?} v6 {ipv6} {len}"
                );
                assert_eq!(frame, good, "{kind:?} v6 {ipv6} {len}");
                // Complete now: left alone.
                assert!(!complete_in_frame(&mut frame, l3, l4));
                assert_eq!(frame, good);
            }
        }
    }

    #[test]
    fn fragments_and_other_protocols_are_left_alone() {
        let (mut frame, l3, l4, at) = built(L4Kind::Udp, false, 100);
        make_partial(&mut frame, l3, l4, at);
        frame[l3 + 6] |= 0x20; // more fragments (the IPv4 header checksum does not matter here)
        let before = frame.clone();
        assert!(!complete_in_frame(&mut frame, l3, l4));
        assert_eq!(frame, before);
        let (mut frame, l3, l4, _) = built(L4Kind::IcmpEcho, false, 100);
        let before = frame.clone();
        assert!(!complete_in_frame(&mut frame, l3, l4));
        assert_eq!(frame, before);
    }

    proptest! {
        /// A checksum that is wrong in any other way than partial is not touched.
        #[test]
        fn other_wrong_checksums_are_left_alone(field in any::<u16>(), tcp in any::<bool>()) {
            let kind = if tcp { L4Kind::TcpSyn } else { L4Kind::Udp };
            let (mut frame, l3, l4, at) = built(kind, false, 120);
            let mut partial = frame.clone();
            make_partial(&mut partial, l3, l4, at);
            prop_assume!(field.to_be_bytes() != partial[at..at + 2]);
            frame[at..at + 2].copy_from_slice(&field.to_be_bytes());
            let before = frame.clone();
            prop_assert!(!complete_in_frame(&mut frame, l3, l4));
            prop_assert_eq!(frame, before);
        }
    }
}
