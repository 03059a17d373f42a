//! OpenFlow 1.3's framing: the common header, message type numbers, reserved port numbers, and
//! a reader that never goes past the bytes it was given (a length field that lies is an
//! error, never a read beyond the message).

use crate::openflow::error::{OfpError, bad_request};

/// The protocol version this agent speaks (OpenFlow 1.3).
pub const OFP_VERSION: u8 = 0x04;
/// The common header: version, type, length, transaction id.
pub const HEADER_LEN: usize = 8;
/// Where controllers listen and the agent listens unless told otherwise (IANA).
pub const DEFAULT_PORT: u16 = 6653;

/// Message types (`enum ofp_type`).
pub mod msg {
    pub const HELLO: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const ECHO_REQUEST: u8 = 2;
    pub const ECHO_REPLY: u8 = 3;
    pub const EXPERIMENTER: u8 = 4;
    pub const FEATURES_REQUEST: u8 = 5;
    pub const FEATURES_REPLY: u8 = 6;
    pub const GET_CONFIG_REQUEST: u8 = 7;
    pub const GET_CONFIG_REPLY: u8 = 8;
    pub const SET_CONFIG: u8 = 9;
    pub const PACKET_IN: u8 = 10;
    pub const FLOW_REMOVED: u8 = 11;
    pub const PORT_STATUS: u8 = 12;
    pub const PACKET_OUT: u8 = 13;
    pub const FLOW_MOD: u8 = 14;
    pub const GROUP_MOD: u8 = 15;
    pub const PORT_MOD: u8 = 16;
    pub const TABLE_MOD: u8 = 17;
    pub const MULTIPART_REQUEST: u8 = 18;
    pub const MULTIPART_REPLY: u8 = 19;
    pub const BARRIER_REQUEST: u8 = 20;
    pub const BARRIER_REPLY: u8 = 21;
    pub const QUEUE_GET_CONFIG_REQUEST: u8 = 22;
    pub const QUEUE_GET_CONFIG_REPLY: u8 = 23;
    pub const ROLE_REQUEST: u8 = 24;
    pub const ROLE_REPLY: u8 = 25;
    pub const GET_ASYNC_REQUEST: u8 = 26;
    pub const GET_ASYNC_REPLY: u8 = 27;
    pub const SET_ASYNC: u8 = 28;
    pub const METER_MOD: u8 = 29;
}

/// Reserved port numbers (`enum ofp_port_no`).
pub mod port {
    /// Ports above this are reserved.
    pub const MAX: u32 = 0xffff_ff00;
    pub const IN_PORT: u32 = 0xffff_fff8;
    pub const TABLE: u32 = 0xffff_fff9;
    pub const NORMAL: u32 = 0xffff_fffa;
    pub const FLOOD: u32 = 0xffff_fffb;
    pub const ALL: u32 = 0xffff_fffc;
    pub const CONTROLLER: u32 = 0xffff_fffd;
    pub const LOCAL: u32 = 0xffff_fffe;
    pub const ANY: u32 = 0xffff_ffff;
}

/// `OFPG_ANY`: no group filter.
pub const GROUP_ANY: u32 = 0xffff_ffff;
/// `OFPG_ALL`: every group (a group delete, group statistics).
pub const GROUP_ALL: u32 = 0xffff_fffc;
/// `OFPTT_ALL`: every table (flow deletion and statistics).
pub const TABLE_ALL: u8 = 0xff;
/// `OFP_NO_BUFFER`: the packet is in the message, not buffered in the switch.
pub const NO_BUFFER: u32 = 0xffff_ffff;
/// `OFPCML_NO_BUFFER`: send the whole packet to the controller.
pub const CML_NO_BUFFER: u16 = 0xffff;

/// The common header of every message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Header {
    pub version: u8,
    pub kind: u8,
    pub length: u16,
    pub xid: u32,
}

impl Header {
    /// The header at the front of `bytes`, if there are eight bytes.
    pub fn peek(bytes: &[u8]) -> Option<Header> {
        let b = bytes.get(..HEADER_LEN)?;
        Some(Header {
            version: b[0],
            kind: b[1],
            length: u16::from_be_bytes([b[2], b[3]]),
            xid: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        })
    }
}

/// Reads big-endian fields from a slice; every read past the end is [`bad_len`].
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// The error for a message, match, action or instruction shorter than its fields.
pub fn bad_len() -> OfpError {
    bad_request::BAD_LEN
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], OfpError> {
        if self.remaining() < n {
            return Err(bad_len());
        }
        let slice = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(slice)
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        let slice = &self.bytes[self.at..];
        self.at = self.bytes.len();
        slice
    }

    pub fn skip(&mut self, n: usize) -> Result<(), OfpError> {
        self.take(n).map(|_| ())
    }

    pub fn u8(&mut self) -> Result<u8, OfpError> {
        Ok(self.take(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16, OfpError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub fn u32(&mut self) -> Result<u32, OfpError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> Result<u64, OfpError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    /// A nested structure whose own length field said `len` bytes (the header included,
    /// already read as `header` bytes): the rest of it, as a reader of its own.
    pub fn nested(&mut self, len: usize, header: usize) -> Result<Reader<'a>, OfpError> {
        if len < header {
            return Err(bad_len());
        }
        Ok(Reader::new(self.take(len - header)?))
    }
}

/// Appends big-endian fields to a message being built.
#[derive(Default)]
pub struct Writer {
    pub bytes: Vec<u8>,
}

impl Writer {
    /// A message of `kind` with transaction id `xid`; its length is set by [`Writer::finish`].
    pub fn message(kind: u8, xid: u32) -> Writer {
        let mut w = Writer {
            bytes: Vec::with_capacity(64),
        };
        w.u8(OFP_VERSION).u8(kind).u16(0).u32(xid);
        w
    }

    pub fn u8(&mut self, v: u8) -> &mut Writer {
        self.bytes.push(v);
        self
    }

    pub fn u16(&mut self, v: u16) -> &mut Writer {
        self.bytes.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn u32(&mut self, v: u32) -> &mut Writer {
        self.bytes.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn u64(&mut self, v: u64) -> &mut Writer {
        self.bytes.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn zeros(&mut self, n: usize) -> &mut Writer {
        self.bytes.resize(self.bytes.len() + n, 0);
        self
    }

    pub fn slice(&mut self, b: &[u8]) -> &mut Writer {
        self.bytes.extend_from_slice(b);
        self
    }

    /// A string in a fixed-size, zero-padded field (always NUL-terminated).
    pub fn text(&mut self, s: &str, size: usize) -> &mut Writer {
        let b = s.as_bytes();
        let n = b.len().min(size - 1);
        self.slice(&b[..n]).zeros(size - n)
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Zero bytes up to the next multiple of eight.
    pub fn pad8(&mut self) -> &mut Writer {
        let n = self.bytes.len().next_multiple_of(8) - self.bytes.len();
        self.zeros(n)
    }

    /// Writes a 16-bit length at `at`: the bytes from `from` to the end.
    pub fn set_len(&mut self, at: usize, from: usize) {
        let len = (self.bytes.len() - from) as u16;
        self.bytes[at..at + 2].copy_from_slice(&len.to_be_bytes());
    }

    /// Sets the header's length and hands the message over.
    pub fn finish(mut self) -> Vec<u8> {
        self.set_len(2, 0);
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_stops_at_the_end() {
        let mut r = Reader::new(&[0, 1, 2, 3, 4]);
        assert_eq!(r.u16(), Ok(1));
        assert_eq!(r.u32(), Err(bad_len()));
        assert_eq!(r.remaining(), 3, "a failed read consumes nothing");
        let mut inner = r.nested(3, 1).unwrap();
        assert_eq!(inner.rest(), &[2, 3]);
        assert_eq!(r.nested(0, 4).err(), Some(bad_len()));
    }

    #[test]
    fn writer_sets_the_length() {
        let mut w = Writer::message(msg::HELLO, 7);
        w.u32(0x0001_0008).text("ab", 4);
        let bytes = w.finish();
        assert_eq!(
            bytes,
            [4, 0, 0, 16, 0, 0, 0, 7, 0, 1, 0, 8, b'a', b'b', 0, 0]
        );
        assert_eq!(
            Header::peek(&bytes),
            Some(Header {
                version: 4,
                kind: 0,
                length: 16,
                xid: 7
            })
        );
    }
}
