//! The test payload every wirespeed generator stamps (its layout below), and the plain frame
//! `bench txpush` sends, [`UdpTemplate`]: Ethernet / IPv4 / UDP / test payload / filler. `gen`
//! builds its frames of every shape in `frame_builder.rs`, with the same payload.
//!
//! The test payload must fit the smallest frame, 60 bytes without FCS (64 on the wire), after
//! 14 + 20 + 8 bytes of headers: that leaves 18 bytes, so it is laid out as
//!
//! | bytes  | field                                                            |
//! | ------ | ---------------------------------------------------------------- |
//! | 0..2   | magic `b"WS"`                                                    |
//! | 2..4   | generator id, u16 big-endian                                     |
//! | 4..12  | sequence number, u64 big-endian                                  |
//! | 12..18 | send timestamp in ns, low 48 bits big-endian (wraps every ~78 h) |
//!
//! then filler where byte `i` is `(seq as u8).wrapping_add(i as u8)`, so corruption is visible.

use crate::checksum;
use crate::error::BuildError;
use crate::ethernet::{EtherType, EthernetFrame, EthernetRepr, MacAddr};
use crate::ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr};
use crate::udp::{UdpPacket, UdpRepr};
use crate::vlan::VlanTag;
use std::net::Ipv4Addr;

pub const PAYLOAD_MAGIC: [u8; 2] = *b"WS";
pub const PAYLOAD_HEADER_LEN: usize = 18;
/// The timestamp keeps 48 bits; compare timestamps modulo 2^48 (see [`TestPayload::latency_ns`]).
pub const TIMESTAMP_MASK: u64 = (1 << 48) - 1;

/// Ethernet (14) + IPv4 without options (20) + UDP (8).
const HEADERS_LEN: usize = 42;
const _: () = assert!(HEADERS_LEN + PAYLOAD_HEADER_LEN == UdpTemplate::MIN_FRAME_LEN);

mod field {
    use core::ops::Range;
    pub const MAGIC: Range<usize> = 0..2;
    pub const GENERATOR: Range<usize> = 2..4;
    pub const SEQ: Range<usize> = 4..12;
    pub const TIMESTAMP_NS: Range<usize> = 12..18;
}

/// The generator id `wirespeed gen` sends under unless told another.
pub const DEFAULT_GENERATOR_ID: u16 = 1;

/// The test payload written right after the UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestPayload {
    pub generator: u16,
    pub seq: u64,
    /// Send time in ns, only the low 48 bits (the wire keeps no more).
    pub timestamp_ns: u64,
}

impl TestPayload {
    /// Reads a test payload from the start of a UDP payload; None if too short or no magic.
    pub fn parse(payload: &[u8]) -> Option<TestPayload> {
        let header = payload.get(..PAYLOAD_HEADER_LEN)?;
        if header[field::MAGIC] != PAYLOAD_MAGIC {
            return None;
        }
        let mut generator = [0u8; 2];
        generator.copy_from_slice(&header[field::GENERATOR]);
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&header[field::SEQ]);
        let mut timestamp = [0u8; 8];
        timestamp[2..].copy_from_slice(&header[field::TIMESTAMP_NS]);
        Some(TestPayload {
            generator: u16::from_be_bytes(generator),
            seq: u64::from_be_bytes(seq),
            timestamp_ns: u64::from_be_bytes(timestamp),
        })
    }

    /// Writes the 18-byte header at the start of `payload` (timestamp truncated to 48 bits).
    pub fn emit(&self, payload: &mut [u8]) -> Result<(), BuildError> {
        let have = payload.len();
        let need = PAYLOAD_HEADER_LEN;
        let header = payload
            .get_mut(..need)
            .ok_or(BuildError::BufferTooShort { need, have })?;
        header[field::MAGIC].copy_from_slice(&PAYLOAD_MAGIC);
        header[field::GENERATOR].copy_from_slice(&self.generator.to_be_bytes());
        header[field::SEQ].copy_from_slice(&self.seq.to_be_bytes());
        header[field::TIMESTAMP_NS].copy_from_slice(&self.timestamp_ns.to_be_bytes()[2..]);
        Ok(())
    }

    /// One-way latency from the send timestamp to `now_ns` (same clock), modulo 2^48.
    pub fn latency_ns(&self, now_ns: u64) -> u64 {
        now_ns.wrapping_sub(self.timestamp_ns) & TIMESTAMP_MASK
    }
}

/// What a generator sends, minus what changes per packet (sequence number, timestamp).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpTemplate {
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub src_port: u16,
    pub dst_port: u16,
    /// Whole Ethernet frame length without FCS, `MIN_FRAME_LEN..=MAX_FRAME_LEN`.
    pub frame_len: usize,
    pub generator: u16,
}

impl UdpTemplate {
    /// A 64-byte wire frame minus its FCS; exactly holds the headers and the 18-byte payload.
    pub const MIN_FRAME_LEN: usize = 60;
    /// A jumbo frame.
    pub const MAX_FRAME_LEN: usize = 9000;

    /// Writes the whole frame into `buf[..frame_len]` and returns `frame_len`: IPv4 with DF
    /// clear, TTL 64, ident = `seq as u16`; UDP with its checksum; test payload, then filler.
    pub fn write(&self, buf: &mut [u8], seq: u64, timestamp_ns: u64) -> Result<usize, BuildError> {
        let frame_len = self.frame_len;
        let (min, max) = (Self::MIN_FRAME_LEN, Self::MAX_FRAME_LEN);
        if !(min..=max).contains(&frame_len) {
            return Err(BuildError::FrameLenOutOfRange {
                frame_len,
                min,
                max,
            });
        }
        let have = buf.len();
        let frame = buf.get_mut(..frame_len).ok_or(BuildError::BufferTooShort {
            need: frame_len,
            have,
        })?;

        let mut ethernet = EthernetFrame::new_unchecked(&mut *frame);
        EthernetRepr {
            src_addr: self.src_mac,
            dst_addr: self.dst_mac,
            ethertype: EtherType::IPV4,
        }
        .emit(&mut ethernet);

        // Both fit in u16: frame_len <= 9000.
        let ip_len = (frame_len - EthernetFrame::<&[u8]>::HEADER_LEN) as u16;
        let udp_len = ip_len - Ipv4Packet::<&[u8]>::MIN_HEADER_LEN as u16;
        let mut ip = Ipv4Packet::new_unchecked(ethernet.payload_mut());
        Ipv4Repr {
            src_addr: self.src_ip,
            dst_addr: self.dst_ip,
            protocol: IpProtocol::UDP,
            payload_len: udp_len,
            ttl: 64,
            ident: seq as u16,
            dscp: 0,
            ecn: 0,
            dont_frag: false,
        }
        .emit(&mut ip);

        let mut udp = UdpPacket::new_unchecked(ip.payload_mut());
        UdpRepr {
            src_port: self.src_port,
            dst_port: self.dst_port,
            payload_len: udp_len - UdpPacket::<&[u8]>::HEADER_LEN as u16,
        }
        .emit(&mut udp);
        let payload = udp.payload_mut();
        let test_payload = TestPayload {
            generator: self.generator,
            seq,
            timestamp_ns,
        };
        test_payload.emit(payload)?;
        crate::filler::write(&mut payload[PAYLOAD_HEADER_LEN..], seq);
        let pseudo =
            checksum::pseudo_header_v4(self.src_ip, self.dst_ip, IpProtocol::UDP.0, udp_len);
        let datagram = ip.payload_mut();
        let sum = crate::filler::udp_checksum(datagram, pseudo, seq);
        UdpPacket::new_unchecked(datagram).set_checksum(sum);
        Ok(frame_len)
    }
}

/// The IPv4 and UDP views of one frame.
type Ipv4Udp<'a> = (Ipv4Packet<&'a [u8]>, UdpPacket<&'a [u8]>);

/// The IPv4 and UDP views of an Ethernet / (one VLAN tag) / IPv4 / UDP frame, unfragmented.
fn ipv4_udp(frame: &[u8]) -> Option<Ipv4Udp<'_>> {
    let ethernet = EthernetFrame::new_checked(frame).ok()?;
    let mut offset = EthernetFrame::<&[u8]>::HEADER_LEN;
    let mut ethertype = ethernet.ethertype();
    if ethertype.is_vlan() {
        ethertype = VlanTag::new_checked(&frame[offset..]).ok()?.ethertype();
        offset += VlanTag::<&[u8]>::HEADER_LEN;
    }
    if ethertype != EtherType::IPV4 {
        return None;
    }
    let l3 = &frame[offset..];
    let ip = Ipv4Packet::new_checked(l3).ok()?;
    if ip.protocol() != IpProtocol::UDP || ip.is_fragment() {
        return None;
    }
    // In range: new_checked validated header_len <= total_len <= l3.len().
    let udp = UdpPacket::new_checked(&l3[ip.header_len()..usize::from(ip.total_len())]).ok()?;
    Some((ip, udp))
}

/// Reads the test payload of a frame built by [`UdpTemplate`] (optionally with one VLAN tag);
/// None if the frame is not one.
pub fn read_test_payload(frame: &[u8]) -> Option<TestPayload> {
    let (_, udp) = ipv4_udp(frame)?;
    TestPayload::parse(udp.payload())
}

/// True if `frame` is Ethernet / IPv4 / UDP (optionally one VLAN tag) with a correct IPv4 header
/// checksum and a correct UDP checksum (or none: 0, which RFC 768 allows).
pub fn ipv4_udp_checksums_ok(frame: &[u8]) -> bool {
    match ipv4_udp(frame) {
        Some((ip, udp)) => {
            ip.verify_checksum() && udp.verify_checksum_v4(ip.src_addr(), ip.dst_addr())
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn template(frame_len: usize) -> UdpTemplate {
        UdpTemplate {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: Ipv4Addr::new(10, 0, 0, 1),
            dst_ip: Ipv4Addr::new(10, 0, 0, 2),
            src_port: 1234,
            dst_port: 5678,
            frame_len,
            generator: 7,
        }
    }

    const SEQ: u64 = 0x0102_0304_0506_0708;
    const TIMESTAMP_NS: u64 = 0x1122_3344_5566_7788;

    // Built independently with python3 struct.pack; IPv4 checksum 0x5fb5, UDP checksum 0x6916.
    const FRAME_60: [u8; 60] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // MACs
        0x08, 0x00, 0x45, 0x00, 0x00, 0x2e, 0x07, 0x08, 0x00, 0x00, 0x40, 0x11, // IPv4
        0x5f, 0xb5, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0x04, 0xd2, // addrs, UDP
        0x16, 0x2e, 0x00, 0x1a, 0x69, 0x16, 0x57, 0x53, 0x00, 0x07, 0x01, 0x02, // "WS", gen
        0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // seq, time
    ];

    /// RFC 1071 word by word, independent of the crate's checksum module.
    fn naive_checksum(chunks: &[&[u8]]) -> u16 {
        let bytes: Vec<u8> = chunks.concat();
        let mut sum: u64 = 0;
        for (i, byte) in bytes.iter().enumerate() {
            sum += if i % 2 == 0 {
                u64::from(*byte) << 8
            } else {
                u64::from(*byte)
            };
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    #[test]
    fn sixty_byte_frame_is_exact() {
        let mut buf = [0xeeu8; 64];
        assert_eq!(template(60).write(&mut buf, SEQ, TIMESTAMP_NS), Ok(60));
        assert_eq!(buf[..60], FRAME_60);
        assert_eq!(buf[60..], [0xee; 4], "wrote past frame_len");
    }

    #[test]
    fn checksums_verify_at_every_size() {
        for frame_len in [60, 64, 128, 1500, 9000] {
            let mut buf = vec![0u8; frame_len];
            let seq = frame_len as u64 * 1_000_003;
            template(frame_len).write(&mut buf, seq, 42).unwrap();
            assert!(ipv4_udp_checksums_ok(&buf), "frame_len {frame_len}");
            // Independent check: both headers sum to zero with the naive reference.
            assert_eq!(
                naive_checksum(&[&buf[14..34]]),
                0,
                "IPv4 header, frame_len {frame_len}"
            );
            let udp_len = (frame_len - 34) as u16;
            let pseudo = [&buf[26..34], &[0, 17], &udp_len.to_be_bytes()[..]].concat();
            assert_eq!(
                naive_checksum(&[&pseudo, &buf[34..]]),
                0,
                "UDP, frame_len {frame_len}"
            );
            for (i, byte) in buf[60..].iter().enumerate() {
                assert_eq!(*byte, (seq as u8).wrapping_add(i as u8), "filler byte {i}");
            }
        }
    }

    #[test]
    fn corruption_is_detected() {
        let mut buf = vec![0u8; 128];
        template(128).write(&mut buf, 9, 10).unwrap();
        for index in [15, 24, 30, 40, 59, 100, 127] {
            let mut corrupt = buf.clone();
            corrupt[index] ^= 0x10;
            assert!(!ipv4_udp_checksums_ok(&corrupt), "flipped byte {index}");
        }
    }

    #[test]
    fn round_trip_plain_and_vlan_tagged() {
        let mut buf = vec![0u8; 1500];
        template(1500).write(&mut buf, u64::MAX, u64::MAX).unwrap();
        let expected = TestPayload {
            generator: 7,
            seq: u64::MAX,
            timestamp_ns: TIMESTAMP_MASK,
        };
        assert_eq!(read_test_payload(&buf), Some(expected));
        let mut tagged = buf[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x64]);
        tagged.extend_from_slice(&buf[12..]);
        assert_eq!(read_test_payload(&tagged), Some(expected));
        assert!(ipv4_udp_checksums_ok(&tagged));
    }

    #[test]
    fn other_frames_are_not_test_frames() {
        let mut frame = FRAME_60;
        frame[42] = b'X'; // magic
        assert_eq!(read_test_payload(&frame), None);
        let mut tcp = FRAME_60;
        tcp[23] = 6;
        assert_eq!(read_test_payload(&tcp), None);
        let mut fragment = FRAME_60;
        fragment[20] = 0x20; // MF
        assert_eq!(read_test_payload(&fragment), None);
        let mut arp = FRAME_60;
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(read_test_payload(&arp), None);
        assert!(!ipv4_udp_checksums_ok(&arp));
        assert_eq!(read_test_payload(&FRAME_60[..59]), None);
    }

    #[test]
    fn write_refuses_bad_lengths() {
        let mut buf = [0u8; 9001];
        for frame_len in [0, 59, 9001] {
            assert_eq!(
                template(frame_len).write(&mut buf, 0, 0),
                Err(BuildError::FrameLenOutOfRange {
                    frame_len,
                    min: 60,
                    max: 9000
                })
            );
        }
        assert_eq!(
            template(128).write(&mut buf[..127], 0, 0),
            Err(BuildError::BufferTooShort {
                need: 128,
                have: 127
            })
        );
    }

    #[test]
    fn latency_wraps_at_48_bits() {
        let sent = TestPayload {
            generator: 0,
            seq: 0,
            timestamp_ns: TIMESTAMP_MASK - 5,
        };
        assert_eq!(sent.latency_ns(1 << 48), 6);
        assert_eq!(sent.latency_ns((1 << 49) + 10), 16);
    }

    proptest! {
        #[test]
        fn round_trip(frame_len in 60usize..=1600, seq in any::<u64>(), timestamp_ns in any::<u64>(),
                      generator in any::<u16>(), old in any::<u8>()) {
            // A frame used before: whatever it held must not reach a checksum.
            let mut buf = vec![old; frame_len];
            let mut tpl = template(frame_len);
            tpl.generator = generator;
            prop_assert_eq!(tpl.write(&mut buf, seq, timestamp_ns), Ok(frame_len));
            let expected = TestPayload { generator, seq, timestamp_ns: timestamp_ns & TIMESTAMP_MASK };
            prop_assert_eq!(read_test_payload(&buf), Some(expected));
            prop_assert!(ipv4_udp_checksums_ok(&buf));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = read_test_payload(&bytes);
            let _ = ipv4_udp_checksums_ok(&bytes);
            let _ = TestPayload::parse(&bytes);
        }

        #[test]
        fn damaged_frames_never_panic(cut in 0usize..=128, index in 0usize..128, value in any::<u8>()) {
            // Start from a valid frame so the damage reaches the deeper length checks.
            let mut buf = vec![0u8; 128];
            template(128).write(&mut buf, 1, 2).unwrap();
            buf[index] = value;
            let _ = read_test_payload(&buf[..cut]);
            let _ = ipv4_udp_checksums_ok(&buf[..cut]);
        }
    }
}
