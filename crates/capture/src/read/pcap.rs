//! Classic pcap: a 24-byte file header, then a 16-byte header before each packet.
//! The magic says the byte order and whether timestamps are in micro- or nanoseconds.

use super::input::Input;
use super::{Found, MAX_RECORD_LEN};
use crate::error::ErrorKind;

pub const MAGIC_MICRO: u32 = 0xa1b2_c3d4;
pub const MAGIC_NANO: u32 = 0xa1b2_3c4d;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Order {
    big_endian: bool,
    nanosecond: bool,
}

pub(crate) struct Header {
    order: Order,
    pub(crate) nanosecond: bool,
    pub(crate) snaplen: u32,
    pub(crate) link_type: u16,
}

impl Order {
    fn u32(self, b: [u8; 4]) -> u32 {
        match self.big_endian {
            true => u32::from_be_bytes(b),
            false => u32::from_le_bytes(b),
        }
    }
}

/// The byte order and resolution a pcap magic announces, if it is one.
pub(crate) fn magic_order(magic: [u8; 4]) -> Option<Order> {
    let (le, be) = (u32::from_le_bytes(magic), u32::from_be_bytes(magic));
    [(le, false), (be, true)]
        .into_iter()
        .find_map(|(m, big_endian)| match m {
            MAGIC_MICRO => Some(Order {
                big_endian,
                nanosecond: false,
            }),
            MAGIC_NANO => Some(Order {
                big_endian,
                nanosecond: true,
            }),
            _ => None,
        })
}

pub(crate) fn read_header(input: &mut Input, order: Order) -> Result<Header, ErrorKind> {
    let mut rest = [0u8; 20];
    input.need(&mut rest, "the pcap file header")?;
    let word = |i: usize| order.u32([rest[i], rest[i + 1], rest[i + 2], rest[i + 3]]);
    // version major/minor are u16s; thiszone, sigfigs, snaplen, linktype are 32 bits each.
    let snaplen = word(12);
    // The upper 16 bits of the link type word carry FCS information (pcap-linktype(7)).
    let link_type = (word(16) & 0xffff) as u16;
    Ok(Header {
        order,
        nanosecond: order.nanosecond,
        snaplen,
        link_type,
    })
}

pub(crate) fn next_record(
    input: &mut Input,
    h: &Header,
    buf: &mut Vec<u8>,
) -> Result<Option<Found>, ErrorKind> {
    let at = input.offset();
    let mut rec = [0u8; 16];
    match input.fill(&mut rec)? {
        0 => return Ok(None),
        16 => {}
        got => {
            return Err(ErrorKind::Truncated {
                offset: at,
                what: "a packet record header",
                need: 16,
                have: got as u64,
            });
        }
    }
    let word = |i: usize| h.order.u32([rec[i], rec[i + 1], rec[i + 2], rec[i + 3]]);
    let (sec, frac, caplen, orig_len) = (word(0), word(4), word(8), word(12));
    if caplen > MAX_RECORD_LEN {
        return Err(ErrorKind::Malformed {
            offset: at,
            reason: format!(
                "packet record claims {caplen} captured bytes (at most {MAX_RECORD_LEN})"
            ),
        });
    }
    input.need_vec(buf, caplen as usize, "a packet's data")?;
    let frac_ns = match h.nanosecond {
        true => frac as u64,
        false => frac as u64 * 1_000,
    };
    Ok(Some(Found {
        ts_ns: sec as u64 * 1_000_000_000 + frac_ns,
        start: 0,
        caplen: caplen as usize,
        orig_len,
    }))
}
