//! UDP headers (RFC 768): the view, its owned `UdpRepr`, and the checksum over the IPv4 or
//! IPv6 pseudo-header.

use crate::checksum;
use crate::error::{ParseError, malformed, truncated};
use crate::ipv4::IpProtocol;
use std::net::{Ipv4Addr, Ipv6Addr};

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// A view of a UDP datagram. After `new_checked`, the length field is known to be at least the
/// header and to fit in the buffer; the checksum covers exactly `len()` bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    pub const HEADER_LEN: usize = field::CHECKSUM.end;

    pub fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wraps after checking the header and the length field against the buffer.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    pub fn check_len(&self) -> Result<(), ParseError> {
        let have = self.buffer.as_ref().len();
        if have < Self::HEADER_LEN {
            return Err(truncated("udp", Self::HEADER_LEN, have));
        }
        let len = usize::from(self.len());
        if len < Self::HEADER_LEN {
            return Err(malformed("udp", "length field is below the 8-byte header"));
        }
        if len > have {
            return Err(truncated("udp", len, have));
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

    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    /// The length field: header plus payload, in bytes.
    #[allow(clippy::len_without_is_empty)] // a datagram always has its 8-byte header
    pub fn len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..usize::from(self.len())]
    }

    fn datagram(&self) -> &[u8] {
        &self.buffer.as_ref()[..usize::from(self.len())]
    }

    /// Sum of pseudo-header and datagram, reading the checksum field as 0 whatever it holds.
    fn sum_without_checksum(&self, pseudo: u16) -> u16 {
        let datagram = self.datagram();
        let before = checksum::data(&datagram[..field::CHECKSUM.start]);
        let after = checksum::data(&datagram[field::CHECKSUM.end..]);
        checksum::combine(&[pseudo, before, after])
    }

    /// The checksum this datagram should carry over IPv4 (0 is sent as 0xffff, RFC 768).
    pub fn compute_checksum_v4(&self, src_addr: Ipv4Addr, dst_addr: Ipv4Addr) -> u16 {
        let pseudo = checksum::pseudo_header_v4(src_addr, dst_addr, IpProtocol::UDP.0, self.len());
        nonzero(!self.sum_without_checksum(pseudo))
    }

    /// True if the checksum is correct, or 0 (RFC 768: the sender computed none).
    pub fn verify_checksum_v4(&self, src_addr: Ipv4Addr, dst_addr: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let pseudo = checksum::pseudo_header_v4(src_addr, dst_addr, IpProtocol::UDP.0, self.len());
        checksum::combine(&[pseudo, checksum::data(self.datagram())]) == 0xffff
    }

    /// The checksum this datagram should carry over IPv6.
    pub fn compute_checksum_v6(&self, src_addr: &Ipv6Addr, dst_addr: &Ipv6Addr) -> u16 {
        let length = u32::from(self.len());
        let pseudo = checksum::pseudo_header_v6(src_addr, dst_addr, IpProtocol::UDP.0, length);
        nonzero(!self.sum_without_checksum(pseudo))
    }

    /// True if the checksum is correct; over IPv6 a 0 checksum is invalid (RFC 8200 §8.1).
    pub fn verify_checksum_v6(&self, src_addr: &Ipv6Addr, dst_addr: &Ipv6Addr) -> bool {
        let length = u32::from(self.len());
        let pseudo = checksum::pseudo_header_v6(src_addr, dst_addr, IpProtocol::UDP.0, length);
        self.checksum() != 0
            && checksum::combine(&[pseudo, checksum::data(self.datagram())]) == 0xffff
    }
}

/// A computed UDP checksum of 0 is sent as 0xffff, since 0 means "no checksum" (RFC 768).
fn nonzero(checksum: u16) -> u16 {
    if checksum == 0 { 0xffff } else { checksum }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    fn set_u16_at(&mut self, range: core::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
    }

    pub fn set_src_port(&mut self, port: u16) {
        self.set_u16_at(field::SRC_PORT, port);
    }

    pub fn set_dst_port(&mut self, port: u16) {
        self.set_u16_at(field::DST_PORT, port);
    }

    pub fn set_len(&mut self, len: u16) {
        self.set_u16_at(field::LENGTH, len);
    }

    pub fn set_checksum(&mut self, checksum: u16) {
        self.set_u16_at(field::CHECKSUM, checksum);
    }

    /// Computes and writes the checksum over IPv4 (set the length and payload first).
    pub fn fill_checksum_v4(&mut self, src_addr: Ipv4Addr, dst_addr: Ipv4Addr) {
        let checksum = self.compute_checksum_v4(src_addr, dst_addr);
        self.set_checksum(checksum);
    }

    /// Computes and writes the checksum over IPv6 (set the length and payload first).
    pub fn fill_checksum_v6(&mut self, src_addr: &Ipv6Addr, dst_addr: &Ipv6Addr) {
        let checksum = self.compute_checksum_v6(src_addr, dst_addr);
        self.set_checksum(checksum);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[Self::HEADER_LEN..end]
    }
}

/// The owned form of a UDP header (smoltcp's `UdpRepr`): parsed from a checked view, emitted
/// into a mutable one. The checksum covers the payload, so `emit` leaves it 0 and the caller
/// fills it once the payload is in place (`fill_checksum_v4` / `_v6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    /// Bytes after the header (the length field less 8).
    pub payload_len: u16,
}

impl UdpRepr {
    /// The header of a checked datagram (its checksum is the caller's to verify: it needs
    /// the IP addresses).
    pub fn parse<T: AsRef<[u8]>>(udp: &UdpPacket<T>) -> Result<UdpRepr, ParseError> {
        udp.check_len()?;
        Ok(UdpRepr {
            src_port: udp.src_port(),
            dst_port: udp.dst_port(),
            payload_len: udp.len() - UdpPacket::<&[u8]>::HEADER_LEN as u16,
        })
    }

    /// Bytes the header takes.
    pub const fn buffer_len(&self) -> usize {
        UdpPacket::<&[u8]>::HEADER_LEN
    }

    /// Writes the header, checksum 0, into `udp` (whose buffer holds at least
    /// `buffer_len()` bytes).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, udp: &mut UdpPacket<T>) {
        udp.set_src_port(self.src_port);
        udp.set_dst_port(self.dst_port);
        udp.set_len(self.buffer_len() as u16 + self.payload_len);
        udp.set_checksum(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    // 1234 -> 5678, length 12, payload "ping", then 2 bytes of padding past the length.
    // Checksum by hand (python3): !(0a00+0001+0a00+0002+0011+000c + 04d2+162e+000c+0000+7069+6e67)
    // = !fold(0x10dfc) = !0x0dfd = 0xf202.
    const DATAGRAM: [u8; 14] = [
        0x04, 0xd2, 0x16, 0x2e, 0x00, 0x0c, 0xf2, 0x02, b'p', b'i', b'n', b'g', 0x00, 0x00,
    ];

    #[test]
    fn repr_round_trips_literal_bytes() {
        let repr = UdpRepr::parse(&UdpPacket::new_checked(&DATAGRAM[..]).unwrap()).unwrap();
        assert_eq!(
            repr,
            UdpRepr {
                src_port: 1234,
                dst_port: 5678,
                payload_len: 4,
            }
        );
        assert_eq!(repr.buffer_len(), 8);
        let mut out = [0u8; 12];
        out[8..].copy_from_slice(b"ping");
        let mut udp = UdpPacket::new_unchecked(&mut out[..]);
        repr.emit(&mut udp);
        udp.fill_checksum_v4(SRC, DST);
        assert_eq!(out, DATAGRAM[..12]);
        assert!(UdpRepr::parse(&UdpPacket::new_unchecked(&DATAGRAM[..7])).is_err());
    }

    #[test]
    fn parse_literal_datagram() {
        let udp = UdpPacket::new_checked(&DATAGRAM[..]).unwrap();
        assert_eq!(
            (udp.src_port(), udp.dst_port(), udp.len()),
            (1234, 5678, 12)
        );
        assert_eq!(udp.payload(), b"ping");
        assert!(udp.verify_checksum_v4(SRC, DST));
        assert!(!udp.verify_checksum_v4(DST, Ipv4Addr::new(10, 0, 0, 3)));
        assert_eq!(udp.compute_checksum_v4(SRC, DST), 0xf202);
    }

    #[test]
    fn lying_lengths_are_errors() {
        assert_eq!(
            UdpPacket::new_checked(&DATAGRAM[..7]).unwrap_err(),
            truncated("udp", 8, 7)
        );
        let mut long = DATAGRAM;
        long[5] = 15;
        assert_eq!(
            UdpPacket::new_checked(&long[..]).unwrap_err(),
            truncated("udp", 15, 14)
        );
        let mut short = DATAGRAM;
        short[5] = 7;
        assert!(matches!(
            UdpPacket::new_checked(&short[..]),
            Err(ParseError::Malformed { .. })
        ));
    }

    #[test]
    fn build_matches_literal() {
        let mut bytes = [0u8; 14];
        bytes[8..12].copy_from_slice(b"ping");
        let mut udp = UdpPacket::new_unchecked(&mut bytes[..]);
        udp.set_src_port(1234);
        udp.set_dst_port(5678);
        udp.set_len(12);
        udp.fill_checksum_v4(SRC, DST);
        assert_eq!(bytes, DATAGRAM);
    }

    #[test]
    fn zero_checksum_means_none_over_ipv4_only() {
        let mut bytes = DATAGRAM;
        bytes[6..8].fill(0);
        let udp = UdpPacket::new_checked(&bytes[..]).unwrap();
        assert!(udp.verify_checksum_v4(SRC, DST));
        let v6 = "fe80::1".parse().unwrap();
        assert!(!udp.verify_checksum_v6(&v6, &v6));
    }

    #[test]
    fn ipv6_checksum_round_trip() {
        let (src, dst) = ("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap());
        let mut bytes = DATAGRAM;
        let mut udp = UdpPacket::new_checked(&mut bytes[..]).unwrap();
        udp.fill_checksum_v6(&src, &dst);
        assert!(udp.verify_checksum_v6(&src, &dst));
        assert!(!udp.verify_checksum_v6(&src, &"fe80::3".parse().unwrap()));
    }

    proptest! {
        #[test]
        fn parsing_arbitrary_bytes_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 0..64),
                                                plausible in any::<bool>()) {
            if plausible && bytes.len() >= 6 {
                bytes[4] = 0;
            }
            if let Ok(udp) = UdpPacket::new_checked(&bytes[..]) {
                let _ = (udp.src_port(), udp.dst_port(), udp.checksum(), udp.payload().len());
                let _ = udp.verify_checksum_v4(SRC, DST);
            }
        }

        #[test]
        fn filled_checksum_verifies(payload in proptest::collection::vec(any::<u8>(), 0..100),
                                    src in any::<[u8; 4]>(), dst in any::<[u8; 4]>()) {
            let mut bytes = vec![0u8; 8 + payload.len()];
            bytes[8..].copy_from_slice(&payload);
            let mut udp = UdpPacket::new_unchecked(&mut bytes[..]);
            udp.set_len((8 + payload.len()) as u16);
            udp.fill_checksum_v4(src.into(), dst.into());
            prop_assert_ne!(udp.checksum(), 0);
            prop_assert!(udp.verify_checksum_v4(src.into(), dst.into()));
        }
    }
}
