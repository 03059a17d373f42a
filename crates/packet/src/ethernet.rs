//! Ethernet II frames (IEEE 802.3 without preamble and FCS): the view, its owned
//! `EthernetRepr`, MAC addresses and the EtherType numbers.

use crate::error::{ParseError, truncated};
use core::fmt;
use core::str::FromStr;

/// The EtherType field: what the frame (or VLAN tag) carries next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EtherType(pub u16);

impl EtherType {
    pub const IPV4: EtherType = EtherType(0x0800);
    pub const ARP: EtherType = EtherType(0x0806);
    /// IEEE 802.1Q customer VLAN tag.
    pub const VLAN: EtherType = EtherType(0x8100);
    pub const IPV6: EtherType = EtherType(0x86dd);
    /// IEEE 802.1ad service VLAN tag (the outer tag of QinQ).
    pub const QINQ: EtherType = EtherType(0x88a8);

    /// True for the EtherTypes that announce a 4-byte VLAN tag.
    pub fn is_vlan(self) -> bool {
        self == EtherType::VLAN || self == EtherType::QINQ
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:04x}", self.0)
    }
}

/// A 48-bit IEEE MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    pub fn octets(&self) -> [u8; 6] {
        self.0
    }

    pub fn is_broadcast(&self) -> bool {
        *self == MacAddr::BROADCAST
    }

    /// The I/G bit: group addresses (broadcast included) are delivered to many stations.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// The U/L bit: set on addresses that were not assigned by the IEEE (veth, VMs).
    pub fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

/// Why a string is not a MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseMacError;

impl fmt::Display for ParseMacError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid MAC address: expected six hex octets like aa:bb:cc:dd:ee:ff")
    }
}

impl std::error::Error for ParseMacError {}

impl FromStr for MacAddr {
    type Err = ParseMacError;

    /// Accepts `aa:bb:cc:dd:ee:ff` and `aa-bb-cc-dd-ee-ff`, either case, 1 or 2 digits an octet.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let separator = if text.contains('-') { '-' } else { ':' };
        let mut octets = [0u8; 6];
        let mut parts = text.split(separator);
        for octet in &mut octets {
            let part = parts.next().ok_or(ParseMacError)?;
            // from_str_radix alone would accept a leading '+'.
            if part.is_empty() || part.len() > 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(ParseMacError);
            }
            *octet = u8::from_str_radix(part, 16).map_err(|_| ParseMacError)?;
        }
        if parts.next().is_some() {
            return Err(ParseMacError);
        }
        Ok(MacAddr(octets))
    }
}

/// Swaps destination and source MAC in place, the whole work of a reflector; false if the frame
/// is shorter than the two addresses.
pub fn swap_macs(frame: &mut [u8]) -> bool {
    match frame.get_mut(..12) {
        Some(addrs) => {
            let (dst, src) = addrs.split_at_mut(6);
            dst.swap_with_slice(src);
            true
        }
        None => false,
    }
}

mod field {
    use core::ops::{Range, RangeFrom};
    pub const DESTINATION: Range<usize> = 0..6;
    pub const SOURCE: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const PAYLOAD: RangeFrom<usize> = 14..;
}

/// A view of an Ethernet II frame: destination, source, EtherType, payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    pub const HEADER_LEN: usize = field::PAYLOAD.start;

    /// Wraps without checks; accessors panic on a buffer shorter than the header.
    pub fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps after checking the buffer holds the 14-byte header.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    pub fn check_len(&self) -> Result<(), ParseError> {
        let have = self.buffer.as_ref().len();
        if have < Self::HEADER_LEN {
            return Err(truncated("ethernet", Self::HEADER_LEN, have));
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn mac_at(&self, range: core::ops::Range<usize>) -> MacAddr {
        let mut octets = [0u8; 6];
        octets.copy_from_slice(&self.buffer.as_ref()[range]);
        MacAddr(octets)
    }

    pub fn dst_addr(&self) -> MacAddr {
        self.mac_at(field::DESTINATION)
    }

    pub fn src_addr(&self) -> MacAddr {
        self.mac_at(field::SOURCE)
    }

    pub fn ethertype(&self) -> EtherType {
        let bytes = &self.buffer.as_ref()[field::ETHERTYPE];
        EtherType(u16::from_be_bytes([bytes[0], bytes[1]]))
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    pub fn set_dst_addr(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr.0);
    }

    pub fn set_src_addr(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr.0);
    }

    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&ethertype.0.to_be_bytes());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// The owned form of an Ethernet II header (smoltcp's `EthernetRepr`): parsed from a checked
/// view, emitted into a mutable one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetRepr {
    pub src_addr: MacAddr,
    pub dst_addr: MacAddr,
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// The header of a checked frame (every 14-byte header parses).
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<EthernetRepr, ParseError> {
        frame.check_len()?;
        Ok(EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Bytes the header takes.
    pub const fn buffer_len(&self) -> usize {
        field::PAYLOAD.start
    }

    /// Writes the header into `frame` (whose buffer holds at least `buffer_len()` bytes).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        frame.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_round_trips_literal_bytes() {
        let frame = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        let repr = EthernetRepr::parse(&frame).unwrap();
        assert_eq!(
            repr,
            EthernetRepr {
                dst_addr: MacAddr([0x02, 0, 0, 0, 0, 0x02]),
                src_addr: MacAddr([0x02, 0, 0, 0, 0, 0x01]),
                ethertype: EtherType::IPV4,
            }
        );
        let mut out = [0u8; 14];
        assert_eq!(repr.buffer_len(), out.len());
        repr.emit(&mut EthernetFrame::new_unchecked(&mut out[..]));
        assert_eq!(out, FRAME[..14]);
        assert!(EthernetRepr::parse(&EthernetFrame::new_unchecked(&FRAME[..13])).is_err());
    }
    use proptest::prelude::*;

    const FRAME: [u8; 18] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // destination
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // source
        0x08, 0x00, // IPv4
        0xaa, 0xbb, 0xcc, 0xdd,
    ];

    #[test]
    fn parse_literal_frame() {
        let frame = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(frame.dst_addr(), MacAddr([2, 0, 0, 0, 0, 2]));
        assert_eq!(frame.src_addr(), MacAddr([2, 0, 0, 0, 0, 1]));
        assert_eq!(frame.ethertype(), EtherType::IPV4);
        assert_eq!(frame.payload(), &[0xaa, 0xbb, 0xcc, 0xdd]);
    }

    #[test]
    fn truncated_header_is_an_error() {
        assert_eq!(
            EthernetFrame::new_checked(&FRAME[..13]),
            Err(ParseError::Truncated {
                header: "ethernet",
                need: 14,
                have: 13
            })
        );
        assert!(
            EthernetFrame::new_checked(&FRAME[..14])
                .unwrap()
                .payload()
                .is_empty()
        );
    }

    #[test]
    fn setters_write_the_fields() {
        let mut bytes = [0u8; 14];
        let mut frame = EthernetFrame::new_checked(&mut bytes[..]).unwrap();
        frame.set_dst_addr(MacAddr::BROADCAST);
        frame.set_src_addr(MacAddr([0x02, 0, 0, 0, 0, 0x01]));
        frame.set_ethertype(EtherType::ARP);
        assert_eq!(
            bytes,
            [
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06
            ]
        );
    }

    #[test]
    fn swap_macs_swaps_and_refuses_short_frames() {
        let mut frame = FRAME;
        assert!(swap_macs(&mut frame));
        assert_eq!(&frame[..12], &[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]);
        assert_eq!(&frame[12..], &FRAME[12..]);
        let mut short = [1u8; 11];
        assert!(!swap_macs(&mut short));
        assert_eq!(short, [1u8; 11]);
    }

    #[test]
    fn mac_display_and_parse() {
        let mac = MacAddr([0xaa, 0xbb, 0xcc, 0x0d, 0xee, 0x0f]);
        assert_eq!(mac.to_string(), "aa:bb:cc:0d:ee:0f");
        assert_eq!("aa:bb:cc:0d:ee:0f".parse(), Ok(mac));
        assert_eq!("AA-BB-CC-d-EE-f".parse(), Ok(mac));
        for bad in [
            "",
            "aa:bb:cc:dd:ee",
            "aa:bb:cc:dd:ee:ff:00",
            "aa:bb:cc:dd:ee:fg",
            "aaa:bb:cc:dd:ee:ff",
            "+a:bb:cc:dd:ee:ff",
            "aa:bb:cc:dd:ee:",
            "aa:bb-cc:dd:ee:ff",
        ] {
            assert_eq!(bad.parse::<MacAddr>(), Err(ParseMacError), "{bad:?}");
        }
    }

    #[test]
    fn mac_address_kinds() {
        assert!(MacAddr::BROADCAST.is_broadcast() && MacAddr::BROADCAST.is_multicast());
        assert!(MacAddr([0x01, 0x00, 0x5e, 0, 0, 1]).is_multicast());
        assert!(MacAddr([0x02, 0, 0, 0, 0, 1]).is_unicast());
        assert!(MacAddr([0x02, 0, 0, 0, 0, 1]).is_local());
        assert!(!MacAddr([0x00, 0x1b, 0x21, 0, 0, 1]).is_local());
    }

    proptest! {
        #[test]
        fn parsing_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(frame) = EthernetFrame::new_checked(&bytes[..]) {
                let _ = (frame.dst_addr(), frame.src_addr(), frame.ethertype(), frame.payload().len());
            }
            let mut copy = bytes.clone();
            prop_assert_eq!(swap_macs(&mut copy), bytes.len() >= 12);
        }

        #[test]
        fn mac_display_round_trips(octets in any::<[u8; 6]>()) {
            let mac = MacAddr(octets);
            prop_assert_eq!(mac.to_string().parse::<MacAddr>(), Ok(mac));
        }

        #[test]
        fn mac_parse_never_panics(text in "\\PC{0,24}") {
            let _ = text.parse::<MacAddr>();
        }
    }
}
