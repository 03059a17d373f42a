//! ARP (RFC 826) for IPv4 over Ethernet, the only combination a LAN switch meets.

use crate::error::{ParseError, malformed, truncated};
use crate::ethernet::{EtherType, MacAddr};
use std::net::Ipv4Addr;

/// ARP opcodes.
pub mod operation {
    pub const REQUEST: u16 = 1;
    pub const REPLY: u16 = 2;
}

/// Hardware type of Ethernet in the ARP header.
pub const HARDWARE_ETHERNET: u16 = 1;

mod field {
    use core::ops::Range;
    pub const HARDWARE_TYPE: Range<usize> = 0..2;
    pub const PROTOCOL_TYPE: Range<usize> = 2..4;
    pub const HARDWARE_LEN: usize = 4;
    pub const PROTOCOL_LEN: usize = 5;
    pub const OPERATION: Range<usize> = 6..8;
    pub const SENDER_HARDWARE_ADDR: Range<usize> = 8..14;
    pub const SENDER_PROTOCOL_ADDR: Range<usize> = 14..18;
    pub const TARGET_HARDWARE_ADDR: Range<usize> = 18..24;
    pub const TARGET_PROTOCOL_ADDR: Range<usize> = 24..28;
}

/// A view of an Ethernet/IPv4 ARP packet (28 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    pub const HEADER_LEN: usize = field::TARGET_PROTOCOL_ADDR.end;

    pub fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// Wraps after checking the length and that the addresses are Ethernet and IPv4, so the
    /// address accessors can return fixed-size types.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        if packet.hardware_type() != HARDWARE_ETHERNET || packet.hardware_len() != 6 {
            return Err(malformed(
                "arp",
                "hardware is not Ethernet (type 1, length 6)",
            ));
        }
        if packet.protocol_type() != EtherType::IPV4 || packet.protocol_len() != 4 {
            return Err(malformed(
                "arp",
                "protocol is not IPv4 (type 0x0800, length 4)",
            ));
        }
        Ok(packet)
    }

    pub fn check_len(&self) -> Result<(), ParseError> {
        let have = self.buffer.as_ref().len();
        if have < Self::HEADER_LEN {
            return Err(truncated("arp", Self::HEADER_LEN, have));
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

    fn mac_at(&self, range: core::ops::Range<usize>) -> MacAddr {
        let mut octets = [0u8; 6];
        octets.copy_from_slice(&self.buffer.as_ref()[range]);
        MacAddr(octets)
    }

    fn ipv4_at(&self, range: core::ops::Range<usize>) -> Ipv4Addr {
        let mut octets = [0u8; 4];
        octets.copy_from_slice(&self.buffer.as_ref()[range]);
        Ipv4Addr::from(octets)
    }

    pub fn hardware_type(&self) -> u16 {
        self.u16_at(field::HARDWARE_TYPE)
    }

    pub fn protocol_type(&self) -> EtherType {
        EtherType(self.u16_at(field::PROTOCOL_TYPE))
    }

    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HARDWARE_LEN]
    }

    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL_LEN]
    }

    /// [`operation::REQUEST`] or [`operation::REPLY`] (other values exist, e.g. RARP's).
    pub fn operation(&self) -> u16 {
        self.u16_at(field::OPERATION)
    }

    pub fn sender_hardware_addr(&self) -> MacAddr {
        self.mac_at(field::SENDER_HARDWARE_ADDR)
    }

    pub fn sender_protocol_addr(&self) -> Ipv4Addr {
        self.ipv4_at(field::SENDER_PROTOCOL_ADDR)
    }

    pub fn target_hardware_addr(&self) -> MacAddr {
        self.mac_at(field::TARGET_HARDWARE_ADDR)
    }

    pub fn target_protocol_addr(&self) -> Ipv4Addr {
        self.ipv4_at(field::TARGET_PROTOCOL_ADDR)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Writes the fixed part for Ethernet/IPv4: hardware and protocol types and lengths.
    pub fn set_ethernet_ipv4(&mut self) {
        let buffer = self.buffer.as_mut();
        buffer[field::HARDWARE_TYPE].copy_from_slice(&HARDWARE_ETHERNET.to_be_bytes());
        buffer[field::PROTOCOL_TYPE].copy_from_slice(&EtherType::IPV4.0.to_be_bytes());
        buffer[field::HARDWARE_LEN] = 6;
        buffer[field::PROTOCOL_LEN] = 4;
    }

    pub fn set_operation(&mut self, operation: u16) {
        self.buffer.as_mut()[field::OPERATION].copy_from_slice(&operation.to_be_bytes());
    }

    pub fn set_sender_hardware_addr(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[field::SENDER_HARDWARE_ADDR].copy_from_slice(&addr.0);
    }

    pub fn set_sender_protocol_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SENDER_PROTOCOL_ADDR].copy_from_slice(&addr.octets());
    }

    pub fn set_target_hardware_addr(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[field::TARGET_HARDWARE_ADDR].copy_from_slice(&addr.0);
    }

    pub fn set_target_protocol_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::TARGET_PROTOCOL_ADDR].copy_from_slice(&addr.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Who has 10.0.0.2? Tell 10.0.0.1 (02:00:00:00:00:01).
    const REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, // Ethernet, IPv4, 6, 4, request
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 10, 0, 0, 1, // sender
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 10, 0, 0, 2, // target
    ];

    #[test]
    fn parse_literal_request() {
        let arp = ArpPacket::new_checked(&REQUEST[..]).unwrap();
        assert_eq!(arp.operation(), operation::REQUEST);
        assert_eq!(arp.sender_hardware_addr(), MacAddr([2, 0, 0, 0, 0, 1]));
        assert_eq!(arp.sender_protocol_addr(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(arp.target_hardware_addr(), MacAddr::ZERO);
        assert_eq!(arp.target_protocol_addr(), Ipv4Addr::new(10, 0, 0, 2));
    }

    #[test]
    fn rejects_truncated_and_foreign_packets() {
        assert_eq!(
            ArpPacket::new_checked(&REQUEST[..27]),
            Err(ParseError::Truncated {
                header: "arp",
                need: 28,
                have: 27
            })
        );
        let mut token_ring = REQUEST;
        token_ring[1] = 6;
        assert!(matches!(
            ArpPacket::new_checked(&token_ring[..]),
            Err(ParseError::Malformed { .. })
        ));
        let mut ipv6 = REQUEST;
        ipv6[5] = 16;
        assert!(matches!(
            ArpPacket::new_checked(&ipv6[..]),
            Err(ParseError::Malformed { .. })
        ));
    }

    #[test]
    fn build_the_reply() {
        let mut bytes = [0u8; 28];
        let mut reply = ArpPacket::new_unchecked(&mut bytes[..]);
        reply.set_ethernet_ipv4();
        reply.set_operation(operation::REPLY);
        reply.set_sender_hardware_addr(MacAddr([2, 0, 0, 0, 0, 2]));
        reply.set_sender_protocol_addr(Ipv4Addr::new(10, 0, 0, 2));
        reply.set_target_hardware_addr(MacAddr([2, 0, 0, 0, 0, 1]));
        reply.set_target_protocol_addr(Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(
            bytes,
            [
                0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
                10, 0, 0, 2, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 10, 0, 0, 1,
            ]
        );
    }

    proptest! {
        #[test]
        fn parsing_arbitrary_bytes_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 0..40),
                                                plausible in any::<bool>()) {
            if plausible && bytes.len() >= 6 {
                bytes[..6].copy_from_slice(&REQUEST[..6]);
            }
            if let Ok(arp) = ArpPacket::new_checked(&bytes[..]) {
                let _ = (arp.operation(), arp.sender_hardware_addr(), arp.sender_protocol_addr(),
                         arp.target_hardware_addr(), arp.target_protocol_addr());
            }
        }
    }
}
