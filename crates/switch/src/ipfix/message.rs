//! IPFIX messages on the wire (RFC 7011 section 3): the 16-byte message header, and sets
//! (a 4-byte set header, then records) packed into messages no longer than a datagram
//! should be.

/// The version field of every IPFIX message.
pub const VERSION: u16 = 10;
/// Bytes of the message header.
pub const HEADER_LEN: usize = 16;
/// Bytes of a set header.
pub const SET_HEADER_LEN: usize = 4;
/// The set id of a Template Set.
pub const TEMPLATE_SET: u16 = 2;
/// The set id of an Options Template Set.
pub const OPTIONS_TEMPLATE_SET: u16 = 3;
/// A message's longest, so it crosses a 1500-byte path in one IPv6 or IPv4 datagram with
/// room for tunnels (RFC 7011 section 10.3.3: avoid IP fragmentation).
pub const MAX_MESSAGE_LEN: usize = 1400;

/// The message header's fields but its length.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MessageHeader {
    /// Seconds since the Unix epoch.
    pub export_time: u32,
    /// Data records sent in this observation domain before this message, modulo 2^32
    /// (RFC 7011 section 3.1).
    pub sequence: u32,
    pub domain: u32,
}

impl MessageHeader {
    /// The header of a message of `length` bytes, header included.
    pub fn encode(&self, length: u16) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..2].copy_from_slice(&VERSION.to_be_bytes());
        out[2..4].copy_from_slice(&length.to_be_bytes());
        out[4..8].copy_from_slice(&self.export_time.to_be_bytes());
        out[8..12].copy_from_slice(&self.sequence.to_be_bytes());
        out[12..16].copy_from_slice(&self.domain.to_be_bytes());
        out
    }
}

/// A message being filled: sets of records, each record whole in one message. The header
/// is written by [`Message::finish`], when the length and the records are known.
#[derive(Debug)]
pub struct Message {
    bytes: Vec<u8>,
    /// Where the open set's header is, and its id.
    open_set: Option<(usize, u16)>,
    /// Data records in it (template records do not count for the sequence number).
    data_records: u32,
}

impl Default for Message {
    fn default() -> Self {
        Message::new()
    }
}

impl Message {
    pub fn new() -> Message {
        let mut bytes = Vec::with_capacity(MAX_MESSAGE_LEN);
        bytes.resize(HEADER_LEN, 0);
        Message {
            bytes,
            open_set: None,
            data_records: 0,
        }
    }

    /// Whether a record of `len` bytes for set `set_id` fits (a new set header included if
    /// the open set is another).
    pub fn fits(&self, set_id: u16, len: usize) -> bool {
        let header = match self.open_set {
            Some((_, id)) if id == set_id => 0,
            _ => SET_HEADER_LEN,
        };
        self.bytes.len() + header + len <= MAX_MESSAGE_LEN
    }

    /// Appends one record to set `set_id` (opening it when the open set is another);
    /// `data` says whether it is a data record. The caller checked [`Message::fits`].
    pub fn push(&mut self, set_id: u16, record: &[u8], data: bool) {
        if self.open_set.map(|(_, id)| id) != Some(set_id) {
            self.close_set();
            self.open_set = Some((self.bytes.len(), set_id));
            self.bytes.extend_from_slice(&set_id.to_be_bytes());
            self.bytes.extend_from_slice(&[0, 0]);
        }
        self.bytes.extend_from_slice(record);
        if data {
            self.data_records += 1;
        }
    }

    fn close_set(&mut self) {
        if let Some((at, _)) = self.open_set.take() {
            let len = (self.bytes.len() - at) as u16;
            self.bytes[at + 2..at + 4].copy_from_slice(&len.to_be_bytes());
        }
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.len() == HEADER_LEN
    }

    /// Data records in the message.
    pub fn data_records(&self) -> u32 {
        self.data_records
    }

    /// The message's bytes under `header`.
    pub fn finish(mut self, header: &MessageHeader) -> Vec<u8> {
        self.close_set();
        let length = self.bytes.len() as u16;
        self.bytes[..HEADER_LEN].copy_from_slice(&header.encode(length));
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_bytes() {
        let header = MessageHeader {
            export_time: 0x6543_2100,
            sequence: 7,
            domain: 0x0102_0304,
        };
        assert_eq!(
            header.encode(0x0030),
            [
                0x00, 0x0a, 0x00, 0x30, 0x65, 0x43, 0x21, 0x00, 0, 0, 0, 7, 1, 2, 3, 4
            ]
        );
    }

    #[test]
    fn records_of_one_set_share_its_header_and_another_opens_a_new_one() {
        let mut message = Message::new();
        assert!(message.is_empty());
        message.push(256, &[1, 2], true);
        message.push(256, &[3, 4], true);
        message.push(2, &[9, 9, 9], false);
        assert_eq!(message.data_records(), 2);
        let header = MessageHeader {
            export_time: 1,
            sequence: 40,
            domain: 5,
        };
        let bytes = message.finish(&header);
        assert_eq!(
            bytes,
            [
                0, 10, 0, 31, 0, 0, 0, 1, 0, 0, 0, 40, 0, 0, 0, 5, // header, 31 bytes
                0x01, 0x00, 0, 8, 1, 2, 3, 4, // data set 256: two records
                0, 2, 0, 7, 9, 9, 9, // template set
            ]
        );
    }

    #[test]
    fn a_message_stops_short_of_the_limit() {
        let mut message = Message::new();
        let record = [0u8; 100];
        let mut n = 0;
        while message.fits(256, record.len()) {
            message.push(256, &record, true);
            n += 1;
        }
        // 16 + 4 + 13 * 100 = 1320; a 14th would make 1420.
        assert_eq!(n, 13);
        assert!(!message.fits(300, 97));
        assert!(message.fits(300, 76));
        let bytes = message.finish(&MessageHeader {
            export_time: 0,
            sequence: 0,
            domain: 0,
        });
        assert_eq!(bytes.len(), 1320);
        assert_eq!(&bytes[2..4], &1320u16.to_be_bytes());
        assert_eq!(&bytes[16..20], &[1, 0, 0x05, 0x18]);
    }
}
