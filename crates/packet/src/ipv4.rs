//! IPv4 headers (RFC 791): the view, its owned `Ipv4Repr`, the header checksum, and the IP
//! protocol numbers.

use crate::checksum;
use crate::error::{ParseError, malformed, truncated};
use std::net::Ipv4Addr;

/// The IPv4 protocol / IPv6 next header field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpProtocol(pub u8);

impl IpProtocol {
    pub const ICMP: IpProtocol = IpProtocol(1);
    pub const TCP: IpProtocol = IpProtocol(6);
    pub const UDP: IpProtocol = IpProtocol(17);
    pub const ICMPV6: IpProtocol = IpProtocol(58);
}

mod field {
    use core::ops::Range;
    pub const VERSION_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const TOTAL_LEN: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLAGS_FRAG_OFFSET: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
}

const DONT_FRAG: u16 = 0x4000;
const MORE_FRAGS: u16 = 0x2000;
const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// A view of an IPv4 packet. After `new_checked`, the header length and total length are known to
/// fit in the buffer; bytes past `total_len` (Ethernet padding) are not part of `payload()`.
///
/// Setters do not re-validate: after changing a length field, call `check_len` before reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Length of a header without options.
    pub const MIN_HEADER_LEN: usize = field::DST_ADDR.end;

    pub fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps after checking version 4, the header length and the total length.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    pub fn check_len(&self) -> Result<(), ParseError> {
        let have = self.buffer.as_ref().len();
        if have < Self::MIN_HEADER_LEN {
            return Err(truncated("ipv4", Self::MIN_HEADER_LEN, have));
        }
        if self.version() != 4 {
            return Err(malformed("ipv4", "version field is not 4"));
        }
        let header_len = self.header_len();
        if header_len < Self::MIN_HEADER_LEN {
            return Err(malformed("ipv4", "header length field is below 20 bytes"));
        }
        if header_len > have {
            return Err(truncated("ipv4", header_len, have));
        }
        let total_len = usize::from(self.total_len());
        if total_len < header_len {
            return Err(malformed("ipv4", "total length is shorter than the header"));
        }
        if total_len > have {
            return Err(truncated("ipv4", total_len, have));
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

    fn addr_at(&self, range: core::ops::Range<usize>) -> Ipv4Addr {
        let mut octets = [0u8; 4];
        octets.copy_from_slice(&self.buffer.as_ref()[range]);
        Ipv4Addr::from(octets)
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VERSION_IHL] & 0x0f) * 4
    }

    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Length of header and payload in bytes.
    pub fn total_len(&self) -> u16 {
        self.u16_at(field::TOTAL_LEN)
    }

    pub fn ident(&self) -> u16 {
        self.u16_at(field::IDENT)
    }

    pub fn dont_frag(&self) -> bool {
        self.u16_at(field::FLAGS_FRAG_OFFSET) & DONT_FRAG != 0
    }

    pub fn more_frags(&self) -> bool {
        self.u16_at(field::FLAGS_FRAG_OFFSET) & MORE_FRAGS != 0
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (self.u16_at(field::FLAGS_FRAG_OFFSET) & FRAG_OFFSET_MASK) << 3
    }

    /// True for any fragment, first or later: its L4 header may be missing or partial.
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }

    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    pub fn protocol(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::PROTOCOL])
    }

    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    pub fn src_addr(&self) -> Ipv4Addr {
        self.addr_at(field::SRC_ADDR)
    }

    pub fn dst_addr(&self) -> Ipv4Addr {
        self.addr_at(field::DST_ADDR)
    }

    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::MIN_HEADER_LEN..self.header_len()]
    }

    /// True if the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(&self.buffer.as_ref()[..self.header_len()])
    }

    /// The payload up to `total_len`, without link-layer padding.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn set_u16_at(&mut self, range: core::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
    }

    pub fn set_version(&mut self, version: u8) {
        let byte = &mut self.buffer.as_mut()[field::VERSION_IHL];
        *byte = (*byte & 0x0f) | (version << 4);
    }

    /// Sets IHL from a length in bytes; must be a multiple of 4 in 20..=60.
    pub fn set_header_len(&mut self, header_len: usize) {
        let byte = &mut self.buffer.as_mut()[field::VERSION_IHL];
        *byte = (*byte & 0xf0) | ((header_len / 4) as u8 & 0x0f);
    }

    pub fn set_dscp(&mut self, dscp: u8) {
        let byte = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *byte = (*byte & 0x03) | (dscp << 2);
    }

    pub fn set_ecn(&mut self, ecn: u8) {
        let byte = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *byte = (*byte & 0xfc) | (ecn & 0x03);
    }

    pub fn set_total_len(&mut self, total_len: u16) {
        self.set_u16_at(field::TOTAL_LEN, total_len);
    }

    pub fn set_ident(&mut self, ident: u16) {
        self.set_u16_at(field::IDENT, ident);
    }

    /// Sets DF, clears MF and the fragment offset: the header of an unfragmented packet.
    pub fn set_unfragmented(&mut self, dont_frag: bool) {
        self.set_u16_at(
            field::FLAGS_FRAG_OFFSET,
            if dont_frag { DONT_FRAG } else { 0 },
        );
    }

    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    pub fn set_protocol(&mut self, protocol: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = protocol.0;
    }

    pub fn set_checksum(&mut self, checksum: u16) {
        self.set_u16_at(field::CHECKSUM, checksum);
    }

    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }

    /// Computes and writes the header checksum (set `header_len` first).
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let checksum = checksum::internet_checksum(&self.buffer.as_ref()[..self.header_len()]);
        self.set_checksum(checksum);
    }

    /// Decrements the TTL as a router does and patches the checksum incrementally (RFC 1624);
    /// returns the new TTL, or None (nothing changed) if it was already 0.
    pub fn decrement_ttl(&mut self) -> Option<u8> {
        let ttl = self.ttl().checked_sub(1)?;
        let protocol = self.buffer.as_ref()[field::PROTOCOL];
        let old_word = u16::from_be_bytes([ttl + 1, protocol]);
        let new_word = u16::from_be_bytes([ttl, protocol]);
        self.set_ttl(ttl);
        self.set_checksum(checksum::update(self.checksum(), old_word, new_word));
        Some(ttl)
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.header_len()..usize::from(self.total_len());
        &mut self.buffer.as_mut()[range]
    }
}

/// The owned form of an IPv4 header without options, of an unfragmented packet (smoltcp's
/// `Ipv4Repr`): parsed from a checked view, emitted into a mutable one with its checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    pub src_addr: Ipv4Addr,
    pub dst_addr: Ipv4Addr,
    pub protocol: IpProtocol,
    /// Bytes after the header (total length less 20).
    pub payload_len: u16,
    pub ttl: u8,
    pub ident: u16,
    pub dscp: u8,
    pub ecn: u8,
    pub dont_frag: bool,
}

impl Ipv4Repr {
    /// The header of a checked packet; options, fragments and a wrong checksum are refused
    /// (the form could not emit them again).
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> Result<Ipv4Repr, ParseError> {
        packet.check_len()?;
        if packet.header_len() != Ipv4Packet::<&[u8]>::MIN_HEADER_LEN {
            return Err(malformed("ipv4", "options are not supported here"));
        }
        if packet.is_fragment() {
            return Err(malformed("ipv4", "fragments are not supported here"));
        }
        if !packet.verify_checksum() {
            return Err(malformed("ipv4", "header checksum is wrong"));
        }
        Ok(Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: packet.total_len() - Ipv4Packet::<&[u8]>::MIN_HEADER_LEN as u16,
            ttl: packet.ttl(),
            ident: packet.ident(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            dont_frag: packet.dont_frag(),
        })
    }

    /// Bytes the header takes.
    pub const fn buffer_len(&self) -> usize {
        Ipv4Packet::<&[u8]>::MIN_HEADER_LEN
    }

    /// Writes the header, checksum filled, into `packet` (whose buffer holds at least
    /// `buffer_len()` bytes).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv4Packet<T>) {
        let header_len = self.buffer_len();
        packet.set_version(4);
        packet.set_header_len(header_len);
        packet.set_dscp(self.dscp);
        packet.set_ecn(self.ecn);
        packet.set_total_len(header_len as u16 + self.payload_len);
        packet.set_ident(self.ident);
        packet.set_unfragmented(self.dont_frag);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // 192.168.0.1 -> 192.168.0.199, UDP, total length 24, DF, TTL 64; then 4 bytes of payload
    // and 2 of Ethernet padding past total_len.
    fn packet_bytes() -> Vec<u8> {
        let mut bytes = vec![
            0x45, 0x00, 0x00, 0x18, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x00,
        ];
        // Checksum by hand (python3): !(4500+0018+0000+4000+4011+c0a8+0001+c0a8+00c7) = b8bc.
        bytes[10..12].copy_from_slice(&0xb8bcu16.to_be_bytes());
        bytes
    }

    #[test]
    fn repr_round_trips_literal_bytes() {
        let bytes = packet_bytes();
        let repr = Ipv4Repr::parse(&Ipv4Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(
            repr,
            Ipv4Repr {
                src_addr: Ipv4Addr::new(192, 168, 0, 1),
                dst_addr: Ipv4Addr::new(192, 168, 0, 199),
                protocol: IpProtocol::UDP,
                payload_len: 4,
                ttl: 64,
                ident: 0,
                dscp: 0,
                ecn: 0,
                dont_frag: true,
            }
        );
        let mut out = [0u8; 20];
        assert_eq!(repr.buffer_len(), out.len());
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes[..20]);

        let mut bad = bytes.clone();
        bad[11] ^= 1;
        let e = Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&bad[..])).unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
        let mut fragment = bytes.clone();
        fragment[6] |= 0x20; // MF
        assert!(Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&fragment[..])).is_err());
        assert!(Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&bytes[..19])).is_err());
    }

    #[test]
    fn parse_literal_packet() {
        let bytes = packet_bytes();
        let ip = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!((ip.version(), ip.header_len(), ip.total_len()), (4, 20, 24));
        assert_eq!((ip.dscp(), ip.ecn(), ip.ident()), (0, 0, 0));
        assert!(ip.dont_frag() && !ip.more_frags() && !ip.is_fragment());
        assert_eq!((ip.ttl(), ip.protocol()), (64, IpProtocol::UDP));
        assert_eq!(ip.src_addr(), Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(ip.dst_addr(), Ipv4Addr::new(192, 168, 0, 199));
        assert!(ip.options().is_empty());
        assert_eq!(ip.payload(), &[0xde, 0xad, 0xbe, 0xef]);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn lying_headers_are_errors() {
        let bytes = packet_bytes();
        let err = |bytes: &[u8]| Ipv4Packet::new_checked(bytes).unwrap_err();
        assert_eq!(err(&bytes[..19]), truncated("ipv4", 20, 19));
        let mut v6 = bytes.clone();
        v6[0] = 0x65;
        assert_eq!(err(&v6), malformed("ipv4", "version field is not 4"));
        let mut short_ihl = bytes.clone();
        short_ihl[0] = 0x44;
        assert!(matches!(err(&short_ihl), ParseError::Malformed { .. }));
        let mut long_ihl = bytes.clone();
        long_ihl[0] = 0x4f; // 60 bytes of header in a 26-byte buffer
        assert_eq!(err(&long_ihl), truncated("ipv4", 60, 26));
        let mut long_total = bytes.clone();
        long_total[3] = 27;
        assert_eq!(err(&long_total), truncated("ipv4", 27, 26));
        let mut short_total = bytes.clone();
        short_total[3] = 19;
        assert!(matches!(err(&short_total), ParseError::Malformed { .. }));
    }

    #[test]
    fn build_matches_literal() {
        let mut bytes = vec![0u8; 26];
        bytes[20..24].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        let mut ip = Ipv4Packet::new_unchecked(&mut bytes[..]);
        ip.set_version(4);
        ip.set_header_len(20);
        ip.set_total_len(24);
        ip.set_unfragmented(true);
        ip.set_ttl(64);
        ip.set_protocol(IpProtocol::UDP);
        ip.set_src_addr(Ipv4Addr::new(192, 168, 0, 1));
        ip.set_dst_addr(Ipv4Addr::new(192, 168, 0, 199));
        ip.fill_checksum();
        assert_eq!(bytes, packet_bytes());
    }

    #[test]
    fn decrement_ttl_keeps_checksum_valid() {
        let mut bytes = packet_bytes();
        let mut ip = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
        assert_eq!(ip.decrement_ttl(), Some(63));
        assert!(ip.verify_checksum());
        ip.set_ttl(0);
        ip.fill_checksum();
        assert_eq!(ip.decrement_ttl(), None);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn fragment_fields() {
        let mut bytes = packet_bytes();
        bytes[6..8].copy_from_slice(&[0x20, 0x03]); // MF, offset 3 × 8
        let ip = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert!(ip.more_frags() && !ip.dont_frag() && ip.is_fragment());
        assert_eq!(ip.frag_offset(), 24);
    }

    proptest! {
        #[test]
        fn parsing_arbitrary_bytes_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 0..96),
                                                plausible in any::<bool>()) {
            // Half the cases look like IPv4 so the length checks, not the version check, decide.
            if plausible && !bytes.is_empty() {
                bytes[0] = 0x40 | (bytes[0] & 0x0f);
            }
            if let Ok(ip) = Ipv4Packet::new_checked(&bytes[..]) {
                let _ = (ip.dscp(), ip.ecn(), ip.ident(), ip.is_fragment(), ip.ttl(), ip.protocol());
                let _ = (ip.src_addr(), ip.dst_addr(), ip.verify_checksum());
                prop_assert!(ip.options().len() + ip.payload().len() + 20 <= bytes.len());
            }
        }

        #[test]
        fn decrement_ttl_equals_recompute(ttl in 1u8..=255, protocol in any::<u8>(), ident in any::<u16>()) {
            let mut bytes = packet_bytes();
            let mut ip = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
            ip.set_ttl(ttl);
            ip.set_protocol(IpProtocol(protocol));
            ip.set_ident(ident);
            ip.fill_checksum();
            ip.decrement_ttl();
            let incremental = ip.checksum();
            ip.fill_checksum();
            prop_assert_eq!(incremental, ip.checksum());
        }
    }
}
