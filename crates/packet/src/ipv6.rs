//! IPv6 fixed headers (RFC 8200). Extension headers are left to the caller: `next_header()` says
//! what `payload()` starts with.

use crate::error::{ParseError, malformed, truncated};
use crate::ipv4::IpProtocol;
use std::net::Ipv6Addr;

mod field {
    use core::ops::Range;
    /// Version (4 bits), traffic class (8 bits), flow label (20 bits).
    pub const VERSION_TC_FLOW: Range<usize> = 0..4;
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Range<usize> = 8..24;
    pub const DST_ADDR: Range<usize> = 24..40;
}

/// A view of an IPv6 packet. After `new_checked`, the 40-byte header and `payload_len` bytes of
/// payload are known to fit in the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    pub const HEADER_LEN: usize = field::DST_ADDR.end;

    pub fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps after checking version 6 and that the payload length fits in the buffer.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    pub fn check_len(&self) -> Result<(), ParseError> {
        let have = self.buffer.as_ref().len();
        if have < Self::HEADER_LEN {
            return Err(truncated("ipv6", Self::HEADER_LEN, have));
        }
        if self.version() != 6 {
            return Err(malformed("ipv6", "version field is not 6"));
        }
        let need = Self::HEADER_LEN + usize::from(self.payload_len());
        if need > have {
            return Err(truncated("ipv6", need, have));
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn first_word(&self) -> u32 {
        let bytes = &self.buffer.as_ref()[field::VERSION_TC_FLOW];
        u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
    }

    fn addr_at(&self, range: core::ops::Range<usize>) -> Ipv6Addr {
        let mut octets = [0u8; 16];
        octets.copy_from_slice(&self.buffer.as_ref()[range]);
        Ipv6Addr::from(octets)
    }

    pub fn version(&self) -> u8 {
        (self.first_word() >> 28) as u8
    }

    /// DSCP (high 6 bits) and ECN (low 2 bits), as in IPv4's second byte.
    pub fn traffic_class(&self) -> u8 {
        (self.first_word() >> 20) as u8
    }

    pub fn flow_label(&self) -> u32 {
        self.first_word() & 0x000f_ffff
    }

    /// Length of everything after the fixed header, extension headers included.
    pub fn payload_len(&self) -> u16 {
        let bytes = &self.buffer.as_ref()[field::PAYLOAD_LEN];
        u16::from_be_bytes([bytes[0], bytes[1]])
    }

    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::NEXT_HEADER])
    }

    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    pub fn src_addr(&self) -> Ipv6Addr {
        self.addr_at(field::SRC_ADDR)
    }

    pub fn dst_addr(&self) -> Ipv6Addr {
        self.addr_at(field::DST_ADDR)
    }

    /// The payload up to `payload_len`, without link-layer padding.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..Self::HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn set_first_word(&mut self, word: u32) {
        self.buffer.as_mut()[field::VERSION_TC_FLOW].copy_from_slice(&word.to_be_bytes());
    }

    pub fn set_version(&mut self, version: u8) {
        let word = (self.first_word() & 0x0fff_ffff) | (u32::from(version & 0x0f) << 28);
        self.set_first_word(word);
    }

    pub fn set_traffic_class(&mut self, traffic_class: u8) {
        let word = (self.first_word() & 0xf00f_ffff) | (u32::from(traffic_class) << 20);
        self.set_first_word(word);
    }

    /// Sets the flow label; only the low 20 bits of `flow_label` are used.
    pub fn set_flow_label(&mut self, flow_label: u32) {
        let word = (self.first_word() & 0xfff0_0000) | (flow_label & 0x000f_ffff);
        self.set_first_word(word);
    }

    pub fn set_payload_len(&mut self, payload_len: u16) {
        self.buffer.as_mut()[field::PAYLOAD_LEN].copy_from_slice(&payload_len.to_be_bytes());
    }

    pub fn set_next_header(&mut self, next_header: IpProtocol) {
        self.buffer.as_mut()[field::NEXT_HEADER] = next_header.0;
    }

    pub fn set_hop_limit(&mut self, hop_limit: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = hop_limit;
    }

    pub fn set_src_addr(&mut self, addr: &Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    pub fn set_dst_addr(&mut self, addr: &Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = Self::HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[Self::HEADER_LEN..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // fe80::1 -> ff02::1, traffic class 0xb8 (EF), flow label 0x12345, UDP, hop limit 255,
    // 2 bytes of payload, then 1 byte of padding.
    const PACKET: [u8; 43] = [
        0x6b, 0x81, 0x23, 0x45, 0x00, 0x02, 0x11,
        0xff, // version, class, flow, len, next, hops
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // source
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // destination
        0xab, 0xcd, 0x00,
    ];

    #[test]
    fn parse_literal_packet() {
        let ip = Ipv6Packet::new_checked(&PACKET[..]).unwrap();
        assert_eq!(ip.version(), 6);
        assert_eq!(ip.traffic_class(), 0xb8);
        assert_eq!(ip.flow_label(), 0x12345);
        assert_eq!(ip.payload_len(), 2);
        assert_eq!(ip.next_header(), IpProtocol::UDP);
        assert_eq!(ip.hop_limit(), 255);
        assert_eq!(ip.src_addr(), "fe80::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(ip.dst_addr(), "ff02::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(ip.payload(), &[0xab, 0xcd]);
    }

    #[test]
    fn lying_headers_are_errors() {
        assert_eq!(
            Ipv6Packet::new_checked(&PACKET[..39]).unwrap_err(),
            truncated("ipv6", 40, 39)
        );
        let mut long = PACKET;
        long[5] = 4;
        assert_eq!(
            Ipv6Packet::new_checked(&long[..]).unwrap_err(),
            truncated("ipv6", 44, 43)
        );
        let mut v4 = PACKET;
        v4[0] = 0x4b;
        assert_eq!(
            Ipv6Packet::new_checked(&v4[..]).unwrap_err(),
            malformed("ipv6", "version field is not 6")
        );
    }

    #[test]
    fn build_matches_literal() {
        let mut bytes = [0u8; 43];
        bytes[40..42].copy_from_slice(&[0xab, 0xcd]);
        let mut ip = Ipv6Packet::new_unchecked(&mut bytes[..]);
        ip.set_version(6);
        ip.set_traffic_class(0xb8);
        ip.set_flow_label(0xfff1_2345);
        ip.set_payload_len(2);
        ip.set_next_header(IpProtocol::UDP);
        ip.set_hop_limit(255);
        ip.set_src_addr(&"fe80::1".parse().unwrap());
        ip.set_dst_addr(&"ff02::1".parse().unwrap());
        assert_eq!(bytes, PACKET);
    }

    proptest! {
        #[test]
        fn parsing_arbitrary_bytes_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 0..96),
                                                plausible in any::<bool>()) {
            if plausible && bytes.len() >= 6 {
                bytes[0] = 0x60 | (bytes[0] & 0x0f);
                bytes[4] = 0; // a payload length that may fit
            }
            if let Ok(ip) = Ipv6Packet::new_checked(&bytes[..]) {
                let _ = (ip.traffic_class(), ip.flow_label(), ip.next_header(), ip.hop_limit());
                let _ = (ip.src_addr(), ip.dst_addr());
                prop_assert!(ip.payload().len() + 40 <= bytes.len());
            }
        }
    }
}
