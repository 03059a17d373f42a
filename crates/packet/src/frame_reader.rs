//! Finds the test payload in any frame [`crate::frame_builder`] makes (IPv4 or IPv6; UDP,
//! TCP or ICMP echo; one optional VLAN tag) and checks every checksum on the way.

use crate::checksum;
use crate::ethernet::{EtherType, EthernetFrame};
use crate::frame_builder::ICMPV6_ECHO_REQUEST;
use crate::icmp::{Icmpv4Packet, message_type};
use crate::ipv4::{IpProtocol, Ipv4Packet};
use crate::ipv6::Ipv6Packet;
use crate::tcp::TcpPacket;
use crate::template::TestPayload;
use crate::udp::UdpPacket;
use crate::vlan::VlanTag;

/// What a received generator frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadFrame {
    pub payload: TestPayload,
    /// The IPv4 header and transport checksums (with their pseudo-headers) all verify.
    pub checksums_ok: bool,
}

/// The layer 3 of a frame: where it starts and its ethertype, past one VLAN tag.
fn l3_of(frame: &[u8]) -> Option<(EtherType, &[u8])> {
    let ethernet = EthernetFrame::new_checked(frame).ok()?;
    let mut offset = EthernetFrame::<&[u8]>::HEADER_LEN;
    let mut ethertype = ethernet.ethertype();
    if ethertype.is_vlan() {
        ethertype = VlanTag::new_checked(&frame[offset..]).ok()?.ethertype();
        offset += VlanTag::<&[u8]>::HEADER_LEN;
    }
    Some((ethertype, &frame[offset..]))
}

/// Reads the test payload of a generator frame; None if the frame is not one.
pub fn read_test_frame(frame: &[u8]) -> Option<ReadFrame> {
    let (ethertype, l3) = l3_of(frame)?;
    match ethertype {
        EtherType::IPV4 => read_v4(l3),
        EtherType::IPV6 => read_v6(l3),
        _ => None,
    }
}

/// The UDP payload up to the length field (new_checked validated 8 <= len <= l4.len()).
fn udp_payload<'a>(l4: &'a [u8], udp: &UdpPacket<&[u8]>) -> &'a [u8] {
    &l4[UdpPacket::<&[u8]>::HEADER_LEN..usize::from(udp.len())]
}

fn read_v4(l3: &[u8]) -> Option<ReadFrame> {
    let ip = Ipv4Packet::new_checked(l3).ok()?;
    if ip.is_fragment() {
        return None;
    }
    // In range: new_checked validated header_len <= total_len <= l3.len().
    let l4 = &l3[ip.header_len()..usize::from(ip.total_len())];
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let (data, l4_ok) = match ip.protocol() {
        IpProtocol::UDP => {
            let udp = UdpPacket::new_checked(l4).ok()?;
            (udp_payload(l4, &udp), udp.verify_checksum_v4(src, dst))
        }
        IpProtocol::TCP => {
            let tcp = TcpPacket::new_checked(l4).ok()?;
            (&l4[tcp.header_len()..], tcp.verify_checksum_v4(src, dst))
        }
        IpProtocol::ICMP => {
            let icmp = Icmpv4Packet::new_checked(l4).ok()?;
            if icmp.msg_type() != message_type::ECHO_REQUEST {
                return None;
            }
            (
                &l4[Icmpv4Packet::<&[u8]>::HEADER_LEN..],
                icmp.verify_checksum(),
            )
        }
        _ => return None,
    };
    Some(ReadFrame {
        payload: TestPayload::parse(data)?,
        checksums_ok: ip.verify_checksum() && l4_ok,
    })
}

fn read_v6(l3: &[u8]) -> Option<ReadFrame> {
    let ip = Ipv6Packet::new_checked(l3).ok()?;
    let l4 = ip.payload();
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let (data, l4_ok) = match ip.next_header() {
        IpProtocol::UDP => {
            let udp = UdpPacket::new_checked(l4).ok()?;
            (udp_payload(l4, &udp), udp.verify_checksum_v6(&src, &dst))
        }
        IpProtocol::TCP => {
            let tcp = TcpPacket::new_checked(l4).ok()?;
            (&l4[tcp.header_len()..], tcp.verify_checksum_v6(&src, &dst))
        }
        IpProtocol::ICMPV6 => {
            let icmp = Icmpv4Packet::new_checked(l4).ok()?;
            if icmp.msg_type() != ICMPV6_ECHO_REQUEST {
                return None;
            }
            let pseudo =
                checksum::pseudo_header_v6(&src, &dst, IpProtocol::ICMPV6.0, l4.len() as u32);
            let ok = checksum::combine(&[pseudo, checksum::data(l4)]) == 0xffff;
            (&l4[Icmpv4Packet::<&[u8]>::HEADER_LEN..], ok)
        }
        _ => return None,
    };
    Some(ReadFrame {
        payload: TestPayload::parse(data)?,
        checksums_ok: l4_ok,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethernet::MacAddr;
    use crate::frame_builder::{FrameSpec, IpPair, L4Kind};
    use crate::template::{TIMESTAMP_MASK, UdpTemplate};
    use proptest::prelude::*;

    fn spec(ip: IpPair, l4: L4Kind, vlan: Option<u16>) -> FrameSpec {
        FrameSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            vlan,
            ip,
            l4,
            src_port: 1234,
            dst_port: 5678,
            generator: 7,
        }
    }

    fn all_specs() -> Vec<FrameSpec> {
        let v4 = IpPair::V4("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let v6 = IpPair::V6("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let mut specs = Vec::new();
        for ip in [v4, v6] {
            for l4 in [L4Kind::Udp, L4Kind::TcpSyn, L4Kind::IcmpEcho] {
                for vlan in [None, Some(100)] {
                    specs.push(spec(ip, l4, vlan));
                }
            }
        }
        specs
    }

    #[test]
    fn minimum_lengths() {
        let v4 = IpPair::V4("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let v6 = IpPair::V6("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        assert_eq!(spec(v4, L4Kind::Udp, None).min_frame_len(), 60);
        assert_eq!(spec(v4, L4Kind::IcmpEcho, None).min_frame_len(), 60);
        assert_eq!(spec(v4, L4Kind::TcpSyn, None).min_frame_len(), 72);
        assert_eq!(spec(v4, L4Kind::Udp, Some(1)).min_frame_len(), 64);
        assert_eq!(spec(v6, L4Kind::Udp, None).min_frame_len(), 80);
        assert_eq!(spec(v6, L4Kind::TcpSyn, Some(1)).min_frame_len(), 96);
    }

    #[test]
    fn ipv4_udp_matches_the_txpush_template() {
        let v4 = IpPair::V4("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let template = UdpTemplate {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: "10.0.0.1".parse().unwrap(),
            dst_ip: "10.0.0.2".parse().unwrap(),
            src_port: 1234,
            dst_port: 5678,
            frame_len: 200,
            generator: 7,
        };
        let (mut a, mut b) = (vec![0u8; 200], vec![0u8; 200]);
        template.write(&mut a, 99, 12345).unwrap();
        spec(v4, L4Kind::Udp, None)
            .write(&mut b, 200, 99, 12345)
            .unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn every_kind_round_trips_with_good_checksums() {
        for s in all_specs() {
            for len in [s.min_frame_len(), s.min_frame_len() + 1, 1514] {
                let mut buf = vec![0u8; len];
                assert_eq!(s.write(&mut buf, len, 42, 77), Ok(len), "{s:?}");
                let read = read_test_frame(&buf).unwrap_or_else(|| panic!("{s:?} len {len}"));
                assert_eq!(read.payload.seq, 42);
                assert_eq!(read.payload.generator, 7);
                assert_eq!(read.payload.timestamp_ns, 77);
                assert!(read.checksums_ok, "{s:?} len {len}");
            }
        }
    }

    #[test]
    fn a_flipped_byte_fails_the_checksums() {
        for s in all_specs() {
            let len = 300;
            let mut buf = vec![0u8; len];
            s.write(&mut buf, len, 5, 6).unwrap();
            // A filler byte: covered by every transport checksum.
            buf[len - 10] ^= 0x40;
            let read = read_test_frame(&buf).unwrap();
            assert!(!read.checksums_ok, "{s:?}");
        }
    }

    #[test]
    fn too_short_is_refused() {
        let s = all_specs().pop().unwrap();
        let min = s.min_frame_len();
        let mut buf = vec![0u8; 100];
        assert!(s.write(&mut buf, min - 1, 0, 0).is_err());
        assert!(s.write(&mut buf[..min - 1], min, 0, 0).is_err());
    }

    proptest! {
        #[test]
        fn any_spec_any_seq(index in 0usize..12, extra in 0usize..1500, seq in any::<u64>(),
                            ts in any::<u64>(), old in any::<u8>()) {
            let s = &all_specs()[index];
            let len = s.min_frame_len() + extra;
            // A frame used before: whatever it held must not reach a checksum.
            let mut buf = vec![old; len];
            s.write(&mut buf, len, seq, ts).unwrap();
            let read = read_test_frame(&buf).unwrap();
            prop_assert_eq!(read.payload.seq, seq);
            prop_assert_eq!(read.payload.timestamp_ns, ts & TIMESTAMP_MASK);
            prop_assert!(read.checksums_ok);
        }

        #[test]
        fn damaged_frames_never_panic(index in 0usize..12, cut in 0usize..=160,
                                      at in 0usize..160, value in any::<u8>()) {
            let s = &all_specs()[index];
            let mut buf = vec![0u8; 160];
            s.write(&mut buf, 160, 1, 2).unwrap();
            buf[at] = value;
            let _ = read_test_frame(&buf[..cut]);
        }
    }
}
