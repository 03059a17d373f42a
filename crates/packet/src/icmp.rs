//! ICMPv4 (RFC 792): the common header, echo request / reply fields, and the checksum. The view
//! wraps exactly one message (the IP payload), because the checksum covers all of it.

use crate::checksum;
use crate::error::{ParseError, truncated};

/// ICMPv4 message types.
pub mod message_type {
    pub const ECHO_REPLY: u8 = 0;
    pub const DEST_UNREACHABLE: u8 = 3;
    pub const ECHO_REQUEST: u8 = 8;
    pub const TIME_EXCEEDED: u8 = 11;
}

mod field {
    use core::ops::{Range, RangeFrom};
    pub const MSG_TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    /// The "rest of header" word: identifier and sequence number in echo messages.
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQ_NO: Range<usize> = 6..8;
    pub const DATA: RangeFrom<usize> = 8..;
}

/// A view of an ICMPv4 message: 8 bytes of header, then data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    pub const HEADER_LEN: usize = field::DATA.start;

    pub fn new_unchecked(buffer: T) -> Self {
        Icmpv4Packet { buffer }
    }

    /// Wraps after checking the buffer holds the 8-byte header.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    pub fn check_len(&self) -> Result<(), ParseError> {
        let have = self.buffer.as_ref().len();
        if have < Self::HEADER_LEN {
            return Err(truncated("icmpv4", Self::HEADER_LEN, have));
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

    /// One of [`message_type`].
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::MSG_TYPE]
    }

    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    pub fn is_echo(&self) -> bool {
        matches!(
            self.msg_type(),
            message_type::ECHO_REQUEST | message_type::ECHO_REPLY
        )
    }

    /// Echo identifier; meaningful only when `is_echo()`.
    pub fn echo_ident(&self) -> u16 {
        self.u16_at(field::ECHO_IDENT)
    }

    /// Echo sequence number; meaningful only when `is_echo()`.
    pub fn echo_seq_no(&self) -> u16 {
        self.u16_at(field::ECHO_SEQ_NO)
    }

    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA]
    }

    /// True if the checksum over the whole message is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(self.buffer.as_ref())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    fn set_u16_at(&mut self, range: core::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
    }

    pub fn set_msg_type(&mut self, msg_type: u8) {
        self.buffer.as_mut()[field::MSG_TYPE] = msg_type;
    }

    pub fn set_code(&mut self, code: u8) {
        self.buffer.as_mut()[field::CODE] = code;
    }

    pub fn set_checksum(&mut self, checksum: u16) {
        self.set_u16_at(field::CHECKSUM, checksum);
    }

    pub fn set_echo_ident(&mut self, ident: u16) {
        self.set_u16_at(field::ECHO_IDENT, ident);
    }

    pub fn set_echo_seq_no(&mut self, seq_no: u16) {
        self.set_u16_at(field::ECHO_SEQ_NO, seq_no);
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }

    /// Computes and writes the checksum over the whole message.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let checksum = checksum::internet_checksum(self.buffer.as_ref());
        self.set_checksum(checksum);
    }

    /// Turns an echo request into its reply in place, patching the checksum incrementally
    /// (RFC 1624) instead of summing the data again; false (nothing changed) if not a request.
    pub fn make_echo_reply(&mut self) -> bool {
        if self.msg_type() != message_type::ECHO_REQUEST {
            return false;
        }
        let code = self.code();
        let old_word = u16::from_be_bytes([message_type::ECHO_REQUEST, code]);
        let new_word = u16::from_be_bytes([message_type::ECHO_REPLY, code]);
        self.set_msg_type(message_type::ECHO_REPLY);
        self.set_checksum(checksum::update(self.checksum(), old_word, new_word));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Echo request, id 0x1234, seq 1, data "abcd". Checksum by hand (python3):
    // !(0800+0000+1234+0001+6162+6364) = !0xdefb = 0x2104.
    const ECHO_REQUEST: [u8; 12] = [
        0x08, 0x00, 0x21, 0x04, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd',
    ];

    #[test]
    fn parse_literal_echo_request() {
        let icmp = Icmpv4Packet::new_checked(&ECHO_REQUEST[..]).unwrap();
        assert_eq!(
            (icmp.msg_type(), icmp.code()),
            (message_type::ECHO_REQUEST, 0)
        );
        assert!(icmp.is_echo());
        assert_eq!((icmp.echo_ident(), icmp.echo_seq_no()), (0x1234, 1));
        assert_eq!(icmp.data(), b"abcd");
        assert!(icmp.verify_checksum());
    }

    #[test]
    fn truncated_header_is_an_error() {
        assert_eq!(
            Icmpv4Packet::new_checked(&ECHO_REQUEST[..7]).unwrap_err(),
            truncated("icmpv4", 8, 7)
        );
    }

    #[test]
    fn build_matches_literal() {
        let mut bytes = [0u8; 12];
        let mut icmp = Icmpv4Packet::new_unchecked(&mut bytes[..]);
        icmp.set_msg_type(message_type::ECHO_REQUEST);
        icmp.set_code(0);
        icmp.set_echo_ident(0x1234);
        icmp.set_echo_seq_no(1);
        icmp.data_mut().copy_from_slice(b"abcd");
        icmp.fill_checksum();
        assert_eq!(bytes, ECHO_REQUEST);
    }

    #[test]
    fn echo_reply_in_place() {
        let mut bytes = ECHO_REQUEST;
        let mut icmp = Icmpv4Packet::new_checked(&mut bytes[..]).unwrap();
        assert!(icmp.make_echo_reply());
        assert!(!icmp.make_echo_reply());
        assert!(icmp.verify_checksum());
        // Only the type and the checksum change: 0x2104 + 0x0800 = 0x2904.
        assert_eq!(&bytes[..4], &[0x00, 0x00, 0x29, 0x04]);
        assert_eq!(&bytes[4..], &ECHO_REQUEST[4..]);
    }

    proptest! {
        #[test]
        fn parsing_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
            if let Ok(icmp) = Icmpv4Packet::new_checked(&bytes[..]) {
                let _ = (icmp.msg_type(), icmp.code(), icmp.checksum(), icmp.is_echo());
                let _ = (icmp.echo_ident(), icmp.echo_seq_no(), icmp.data().len(), icmp.verify_checksum());
            }
        }

        #[test]
        fn echo_reply_checksum_equals_recompute(data in proptest::collection::vec(any::<u8>(), 0..64),
                                                ident in any::<u16>(), seq_no in any::<u16>()) {
            // The RFC 1624 exception: an all-zero reply, where only the sign of zero differs.
            prop_assume!(ident != 0 || seq_no != 0 || data.iter().any(|&b| b != 0));
            let mut bytes = vec![0u8; 8 + data.len()];
            let mut icmp = Icmpv4Packet::new_unchecked(&mut bytes[..]);
            icmp.set_msg_type(message_type::ECHO_REQUEST);
            icmp.set_echo_ident(ident);
            icmp.set_echo_seq_no(seq_no);
            icmp.data_mut().copy_from_slice(&data);
            icmp.fill_checksum();
            icmp.make_echo_reply();
            prop_assert!(icmp.verify_checksum());
            let incremental = icmp.checksum();
            icmp.fill_checksum();
            prop_assert_eq!(incremental, icmp.checksum());
        }
    }
}
