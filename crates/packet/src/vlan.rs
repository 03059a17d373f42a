//! IEEE 802.1Q VLAN tags, the view and its owned `VlanRepr`: the 4 bytes after an EtherType of
//! 0x8100 (or 0x88a8 for 802.1ad).
//!
//! The view starts at the Tag Control Information, so for a tagged frame it wraps
//! `EthernetFrame::payload()`; its own `ethertype()` is the one of the encapsulated protocol.

use crate::error::{ParseError, truncated};
use crate::ethernet::EtherType;

mod field {
    use core::ops::{Range, RangeFrom};
    /// Priority code point (3 bits), drop eligible indicator (1 bit), VLAN id (12 bits).
    pub const TCI: Range<usize> = 0..2;
    pub const ETHERTYPE: Range<usize> = 2..4;
    pub const PAYLOAD: RangeFrom<usize> = 4..;
}

/// A view of one VLAN tag and what follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    pub const HEADER_LEN: usize = field::PAYLOAD.start;
    /// VLAN ids 0 (priority tag only) and 4095 are reserved; the rest are usable.
    pub const MAX_VLAN_ID: u16 = 4094;

    pub fn new_unchecked(buffer: T) -> Self {
        VlanTag { buffer }
    }

    /// Wraps after checking the buffer holds the 4-byte tag.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let tag = Self::new_unchecked(buffer);
        tag.check_len()?;
        Ok(tag)
    }

    pub fn check_len(&self) -> Result<(), ParseError> {
        let have = self.buffer.as_ref().len();
        if have < Self::HEADER_LEN {
            return Err(truncated("vlan", Self::HEADER_LEN, have));
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn tci(&self) -> u16 {
        let bytes = &self.buffer.as_ref()[field::TCI];
        u16::from_be_bytes([bytes[0], bytes[1]])
    }

    /// Priority code point, 0..=7 (802.1p class of service).
    pub fn priority(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator (formerly CFI).
    pub fn drop_eligible(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    pub fn vlan_id(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// The EtherType of the encapsulated protocol.
    pub fn ethertype(&self) -> EtherType {
        let bytes = &self.buffer.as_ref()[field::ETHERTYPE];
        EtherType(u16::from_be_bytes([bytes[0], bytes[1]]))
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
    fn set_tci(&mut self, tci: u16) {
        self.buffer.as_mut()[field::TCI].copy_from_slice(&tci.to_be_bytes());
    }

    /// Sets the priority code point; only the low 3 bits of `priority` are used.
    pub fn set_priority(&mut self, priority: u8) {
        let tci = (self.tci() & 0x1fff) | (u16::from(priority & 0x07) << 13);
        self.set_tci(tci);
    }

    pub fn set_drop_eligible(&mut self, drop_eligible: bool) {
        let tci = (self.tci() & !0x1000) | if drop_eligible { 0x1000 } else { 0 };
        self.set_tci(tci);
    }

    /// Sets the VLAN id; only the low 12 bits of `vlan_id` are used.
    pub fn set_vlan_id(&mut self, vlan_id: u16) {
        let tci = (self.tci() & 0xf000) | (vlan_id & 0x0fff);
        self.set_tci(tci);
    }

    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&ethertype.0.to_be_bytes());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// The owned form of a VLAN tag: parsed from a checked view, emitted into a mutable one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanRepr {
    /// Priority code point, 0..=7.
    pub priority: u8,
    pub drop_eligible: bool,
    /// 12 bits.
    pub vlan_id: u16,
    /// What the tag carries next.
    pub ethertype: EtherType,
}

impl VlanRepr {
    /// The tag of a checked view (every 4-byte tag parses).
    pub fn parse<T: AsRef<[u8]>>(tag: &VlanTag<T>) -> Result<VlanRepr, ParseError> {
        tag.check_len()?;
        Ok(VlanRepr {
            priority: tag.priority(),
            drop_eligible: tag.drop_eligible(),
            vlan_id: tag.vlan_id(),
            ethertype: tag.ethertype(),
        })
    }

    /// Bytes the tag takes.
    pub const fn buffer_len(&self) -> usize {
        field::PAYLOAD.start
    }

    /// Writes the tag into `tag` (whose buffer holds at least `buffer_len()` bytes).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, tag: &mut VlanTag<T>) {
        tag.set_priority(self.priority);
        tag.set_drop_eligible(self.drop_eligible);
        tag.set_vlan_id(self.vlan_id);
        tag.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethernet::EthernetFrame;
    use proptest::prelude::*;

    // Broadcast ARP tagged with priority 5, DEI set, VLAN 100.
    const TAGGED_FRAME: [u8; 20] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // addresses
        0x81, 0x00, // 802.1Q
        0xb0, 0x64, // PCP 5 (101), DEI 1, VID 0x064
        0x08, 0x06, // ARP
        0x00, 0x01,
    ];

    #[test]
    fn repr_round_trips_literal_bytes() {
        let bytes = &TAGGED_FRAME[14..18];
        let repr = VlanRepr::parse(&VlanTag::new_checked(bytes).unwrap()).unwrap();
        assert_eq!(
            repr,
            VlanRepr {
                priority: 5,
                drop_eligible: true,
                vlan_id: 100,
                ethertype: EtherType::ARP,
            }
        );
        let mut out = [0u8; 4];
        assert_eq!(repr.buffer_len(), out.len());
        repr.emit(&mut VlanTag::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
        assert!(VlanRepr::parse(&VlanTag::new_unchecked(&bytes[..3])).is_err());
    }

    #[test]
    fn parse_tag_inside_frame() {
        let frame = EthernetFrame::new_checked(&TAGGED_FRAME[..]).unwrap();
        assert!(frame.ethertype().is_vlan());
        let tag = VlanTag::new_checked(frame.payload()).unwrap();
        assert_eq!(tag.priority(), 5);
        assert!(tag.drop_eligible());
        assert_eq!(tag.vlan_id(), 100);
        assert_eq!(tag.ethertype(), EtherType::ARP);
        assert_eq!(tag.payload(), &[0x00, 0x01]);
    }

    #[test]
    fn truncated_tag_is_an_error() {
        assert_eq!(
            VlanTag::new_checked(&TAGGED_FRAME[14..17]),
            Err(ParseError::Truncated {
                header: "vlan",
                need: 4,
                have: 3
            })
        );
    }

    #[test]
    fn setters_write_only_their_bits() {
        let mut bytes = [0u8; 4];
        let mut tag = VlanTag::new_checked(&mut bytes[..]).unwrap();
        tag.set_vlan_id(0xaff4); // high bits dropped: 0xff4
        tag.set_priority(0xff); // low 3 bits: 7
        tag.set_drop_eligible(true);
        tag.set_ethertype(EtherType::IPV6);
        assert_eq!(bytes, [0xff, 0xf4, 0x86, 0xdd]);
        let mut tag = VlanTag::new_checked(&mut bytes[..]).unwrap();
        tag.set_drop_eligible(false);
        tag.set_priority(0);
        assert_eq!(tag.vlan_id(), 0xff4);
        assert_eq!(bytes, [0x0f, 0xf4, 0x86, 0xdd]);
    }

    proptest! {
        #[test]
        fn parsing_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            if let Ok(tag) = VlanTag::new_checked(&bytes[..]) {
                prop_assert!(tag.priority() <= 7);
                prop_assert!(tag.vlan_id() <= 0x0fff);
                let _ = (tag.drop_eligible(), tag.ethertype(), tag.payload().len());
            }
        }

        #[test]
        fn fields_round_trip(priority in 0u8..8, drop_eligible in any::<bool>(), vlan_id in 0u16..4096) {
            let mut bytes = [0u8; 4];
            let mut tag = VlanTag::new_unchecked(&mut bytes[..]);
            tag.set_priority(priority);
            tag.set_drop_eligible(drop_eligible);
            tag.set_vlan_id(vlan_id);
            prop_assert_eq!((tag.priority(), tag.drop_eligible(), tag.vlan_id()), (priority, drop_eligible, vlan_id));
        }
    }
}
