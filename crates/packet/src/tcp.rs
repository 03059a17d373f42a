//! TCP headers (RFC 9293). The view wraps exactly one segment (the IP payload), because the
//! checksum covers all of it.

use crate::checksum;
use crate::error::{ParseError, malformed, truncated};
use crate::ipv4::IpProtocol;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Control bits of the flags field (the low 9 bits of the 16-bit word at offset 12).
pub mod flags {
    pub const FIN: u16 = 0x001;
    pub const SYN: u16 = 0x002;
    pub const RST: u16 = 0x004;
    pub const PSH: u16 = 0x008;
    pub const ACK: u16 = 0x010;
    pub const URG: u16 = 0x020;
    pub const ECE: u16 = 0x040;
    pub const CWR: u16 = 0x080;
    pub const NS: u16 = 0x100;
}

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ_NUMBER: Range<usize> = 4..8;
    pub const ACK_NUMBER: Range<usize> = 8..12;
    /// Data offset (4 bits), reserved (3 bits), flags (9 bits).
    pub const OFFSET_FLAGS: Range<usize> = 12..14;
    pub const WINDOW_LEN: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT_AT: Range<usize> = 18..20;
}

const FLAGS_MASK: u16 = 0x01ff;
/// The flags with the three reserved bits above them: the 12 bits after the data offset.
const CONTROL_MASK: u16 = 0x0fff;

/// A view of a TCP segment. After `new_checked`, the data offset is known to be at least 20 and
/// to fit in the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Length of a header without options.
    pub const MIN_HEADER_LEN: usize = field::URGENT_AT.end;

    pub fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wraps after checking the header and its data offset against the buffer.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    pub fn check_len(&self) -> Result<(), ParseError> {
        let have = self.buffer.as_ref().len();
        if have < Self::MIN_HEADER_LEN {
            return Err(truncated("tcp", Self::MIN_HEADER_LEN, have));
        }
        let header_len = self.header_len();
        if header_len < Self::MIN_HEADER_LEN {
            return Err(malformed("tcp", "data offset is below the 20-byte header"));
        }
        if header_len > have {
            return Err(truncated("tcp", header_len, have));
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, range: core::ops::Range<usize>) -> u16 {
        let bytes = &self.buffer.as_ref()[range];
        u16::from_be_bytes([bytes[0], bytes[1]])
    }

    fn u32_at(&self, range: core::ops::Range<usize>) -> u32 {
        let bytes = &self.buffer.as_ref()[range];
        u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
    }

    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    pub fn seq_number(&self) -> u32 {
        self.u32_at(field::SEQ_NUMBER)
    }

    pub fn ack_number(&self) -> u32 {
        self.u32_at(field::ACK_NUMBER)
    }

    /// Header length in bytes (data offset × 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::OFFSET_FLAGS.start] >> 4) * 4
    }

    /// The control bits; test them with the constants of [`flags`].
    pub fn flags(&self) -> u16 {
        self.u16_at(field::OFFSET_FLAGS) & FLAGS_MASK
    }

    /// The flags and the three reserved bits above them (the low 12 bits of the word at
    /// offset 12), as Open vSwitch's `tcp_flags` match field holds them.
    pub fn control_bits(&self) -> u16 {
        self.u16_at(field::OFFSET_FLAGS) & CONTROL_MASK
    }

    pub fn syn(&self) -> bool {
        self.flags() & flags::SYN != 0
    }

    pub fn ack(&self) -> bool {
        self.flags() & flags::ACK != 0
    }

    pub fn fin(&self) -> bool {
        self.flags() & flags::FIN != 0
    }

    pub fn rst(&self) -> bool {
        self.flags() & flags::RST != 0
    }

    pub fn window_len(&self) -> u16 {
        self.u16_at(field::WINDOW_LEN)
    }

    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    pub fn urgent_at(&self) -> u16 {
        self.u16_at(field::URGENT_AT)
    }

    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::MIN_HEADER_LEN..self.header_len()]
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    fn segment_sum(&self, pseudo: u16) -> u16 {
        checksum::combine(&[pseudo, checksum::data(self.buffer.as_ref())])
    }

    /// True if the checksum is correct over IPv4; false for a segment longer than 65535 bytes,
    /// which no IPv4 packet can carry.
    pub fn verify_checksum_v4(&self, src_addr: Ipv4Addr, dst_addr: Ipv4Addr) -> bool {
        let Ok(length) = u16::try_from(self.buffer.as_ref().len()) else {
            return false;
        };
        let pseudo = checksum::pseudo_header_v4(src_addr, dst_addr, IpProtocol::TCP.0, length);
        self.segment_sum(pseudo) == 0xffff
    }

    /// True if the checksum is correct over IPv6.
    pub fn verify_checksum_v6(&self, src_addr: &Ipv6Addr, dst_addr: &Ipv6Addr) -> bool {
        let Ok(length) = u32::try_from(self.buffer.as_ref().len()) else {
            return false;
        };
        let pseudo = checksum::pseudo_header_v6(src_addr, dst_addr, IpProtocol::TCP.0, length);
        self.segment_sum(pseudo) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    fn set_u16_at(&mut self, range: core::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
    }

    fn set_u32_at(&mut self, range: core::ops::Range<usize>, value: u32) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
    }

    pub fn set_src_port(&mut self, port: u16) {
        self.set_u16_at(field::SRC_PORT, port);
    }

    pub fn set_dst_port(&mut self, port: u16) {
        self.set_u16_at(field::DST_PORT, port);
    }

    pub fn set_seq_number(&mut self, seq_number: u32) {
        self.set_u32_at(field::SEQ_NUMBER, seq_number);
    }

    pub fn set_ack_number(&mut self, ack_number: u32) {
        self.set_u32_at(field::ACK_NUMBER, ack_number);
    }

    /// Sets the data offset from a length in bytes; must be a multiple of 4 in 20..=60.
    pub fn set_header_len(&mut self, header_len: usize) {
        let byte = &mut self.buffer.as_mut()[field::OFFSET_FLAGS.start];
        *byte = (*byte & 0x0f) | (((header_len / 4) as u8) << 4);
    }

    /// Sets all control bits at once (a combination of [`flags`]); keeps the data offset.
    pub fn set_flags(&mut self, control_bits: u16) {
        let word = (self.u16_at(field::OFFSET_FLAGS) & !FLAGS_MASK) | (control_bits & FLAGS_MASK);
        self.set_u16_at(field::OFFSET_FLAGS, word);
    }

    pub fn set_window_len(&mut self, window_len: u16) {
        self.set_u16_at(field::WINDOW_LEN, window_len);
    }

    pub fn set_checksum(&mut self, checksum: u16) {
        self.set_u16_at(field::CHECKSUM, checksum);
    }

    pub fn set_urgent_at(&mut self, urgent_at: u16) {
        self.set_u16_at(field::URGENT_AT, urgent_at);
    }

    /// Computes and writes the checksum over IPv4; the buffer must be the whole segment
    /// (at most 65535 bytes, as an IPv4 payload is).
    pub fn fill_checksum_v4(&mut self, src_addr: Ipv4Addr, dst_addr: Ipv4Addr) {
        self.set_checksum(0);
        let length = u16::try_from(self.buffer.as_ref().len()).unwrap_or(u16::MAX);
        let pseudo = checksum::pseudo_header_v4(src_addr, dst_addr, IpProtocol::TCP.0, length);
        let checksum = !self.segment_sum(pseudo);
        self.set_checksum(checksum);
    }

    /// Computes and writes the checksum over IPv6; the buffer must be the whole segment.
    pub fn fill_checksum_v6(&mut self, src_addr: &Ipv6Addr, dst_addr: &Ipv6Addr) {
        self.set_checksum(0);
        let length = u32::try_from(self.buffer.as_ref().len()).unwrap_or(u32::MAX);
        let pseudo = checksum::pseudo_header_v6(src_addr, dst_addr, IpProtocol::TCP.0, length);
        let checksum = !self.segment_sum(pseudo);
        self.set_checksum(checksum);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    // SYN from 49152 to 80, seq 1, window 64240, one 4-byte MSS option (1460), no payload.
    // Checksum by hand (python3), pseudo-header 10.0.0.1 > 10.0.0.2 proto 6 length 24: 0xc8e1.
    const SYN: [u8; 24] = [
        0xc0, 0x00, 0x00, 0x50, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
        0x00, // ports, seq, ack
        0x60, 0x02, 0xfa, 0xf0, 0xc8, 0xe1, 0x00,
        0x00, // offset 6, SYN, window, checksum, urgent
        0x02, 0x04, 0x05, 0xb4, // MSS 1460
    ];

    #[test]
    fn parse_literal_syn() {
        let tcp = TcpPacket::new_checked(&SYN[..]).unwrap();
        assert_eq!((tcp.src_port(), tcp.dst_port()), (49152, 80));
        assert_eq!((tcp.seq_number(), tcp.ack_number()), (1, 0));
        assert_eq!(tcp.header_len(), 24);
        assert_eq!(tcp.flags(), flags::SYN);
        assert!(tcp.syn() && !tcp.ack() && !tcp.fin() && !tcp.rst());
        assert_eq!((tcp.window_len(), tcp.urgent_at()), (64240, 0));
        assert_eq!(tcp.options(), &[0x02, 0x04, 0x05, 0xb4]);
        assert!(tcp.payload().is_empty());
        assert!(tcp.verify_checksum_v4(SRC, DST));
        assert!(!tcp.verify_checksum_v4(SRC, Ipv4Addr::new(10, 0, 0, 3)));
    }

    #[test]
    fn lying_data_offset_is_an_error() {
        assert_eq!(
            TcpPacket::new_checked(&SYN[..19]).unwrap_err(),
            truncated("tcp", 20, 19)
        );
        let mut long = SYN;
        long[12] = 0x70;
        assert_eq!(
            TcpPacket::new_checked(&long[..]).unwrap_err(),
            truncated("tcp", 28, 24)
        );
        let mut short = SYN;
        short[12] = 0x40;
        assert!(matches!(
            TcpPacket::new_checked(&short[..]),
            Err(ParseError::Malformed { .. })
        ));
    }

    #[test]
    fn build_matches_literal() {
        let mut bytes = [0u8; 24];
        bytes[20..].copy_from_slice(&[0x02, 0x04, 0x05, 0xb4]);
        let mut tcp = TcpPacket::new_unchecked(&mut bytes[..]);
        tcp.set_src_port(49152);
        tcp.set_dst_port(80);
        tcp.set_seq_number(1);
        tcp.set_ack_number(0);
        tcp.set_header_len(24);
        tcp.set_flags(flags::SYN | 0xfe00); // bits above the flags are ignored
        tcp.set_window_len(64240);
        tcp.set_urgent_at(0);
        tcp.fill_checksum_v4(SRC, DST);
        assert_eq!(bytes, SYN);
    }

    #[test]
    fn ipv6_checksum_round_trip() {
        let (src, dst) = (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        );
        let mut bytes = SYN;
        let mut tcp = TcpPacket::new_checked(&mut bytes[..]).unwrap();
        tcp.fill_checksum_v6(&src, &dst);
        assert!(tcp.verify_checksum_v6(&src, &dst));
        tcp.set_seq_number(2);
        assert!(!tcp.verify_checksum_v6(&src, &dst));
    }

    proptest! {
        #[test]
        fn parsing_arbitrary_bytes_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 0..96),
                                                plausible in any::<bool>()) {
            if plausible && bytes.len() > 12 {
                bytes[12] = 0x50 | (bytes[12] & 0x3f);
            }
            if let Ok(tcp) = TcpPacket::new_checked(&bytes[..]) {
                let _ = (tcp.src_port(), tcp.dst_port(), tcp.seq_number(), tcp.ack_number());
                let _ = (tcp.flags(), tcp.window_len(), tcp.checksum(), tcp.urgent_at());
                let _ = (tcp.options().len(), tcp.payload().len(), tcp.verify_checksum_v4(SRC, DST));
            }
        }

        #[test]
        fn seq_rewrite_by_incremental_update_verifies(seq in any::<u32>(), new_seq in any::<u32>()) {
            let mut bytes = SYN;
            let mut tcp = TcpPacket::new_checked(&mut bytes[..]).unwrap();
            tcp.set_seq_number(seq);
            tcp.fill_checksum_v4(SRC, DST);
            let updated = checksum::update_u32(tcp.checksum(), seq, new_seq);
            tcp.set_seq_number(new_seq);
            tcp.set_checksum(updated);
            prop_assert!(tcp.verify_checksum_v4(SRC, DST));
        }
    }
}
