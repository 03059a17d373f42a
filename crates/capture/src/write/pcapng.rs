//! pcapng, little-endian: a section header, one interface description (link type, snap length,
//! if_name, if_tsresol 9 = nanoseconds), enhanced packet blocks, and at the end an interface
//! statistics block (start and end time, isb_ifrecv, isb_ifdrop).

use super::{IfStats, Interface};
use crate::read::pcapng::{BYTE_ORDER_MAGIC, EPB_TYPE, IDB_TYPE, SHB_TYPE};

const ISB_TYPE: u32 = 5;
/// Block type, length, interface, timestamp (2), captured and original length, trailing length.
pub const EPB_OVERHEAD: usize = 32;
/// ISB: 7 words of header and trailer, four 8-byte options with 4-byte headers, end of options.
pub const ISB_LEN: usize = 24 + 4 * 12 + 4;

const OPT_END: u16 = 0;
const SHB_USERAPPL: u16 = 4;
const IF_NAME: u16 = 2;
const IF_TSRESOL: u16 = 9;
const ISB_STARTTIME: u16 = 2;
const ISB_ENDTIME: u16 = 3;
const ISB_IFRECV: u16 = 4;
const ISB_IFDROP: u16 = 5;

fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A timestamp in if_tsresol 9 units, as the high and low 32 bits.
fn put_ts(out: &mut Vec<u8>, ts_ns: u64) {
    put_u32(out, (ts_ns >> 32) as u32);
    put_u32(out, ts_ns as u32);
}

fn put_option(out: &mut Vec<u8>, code: u16, value: &[u8]) {
    put_u16(out, code);
    put_u16(out, value.len() as u16);
    out.extend_from_slice(value);
    out.resize(out.len().next_multiple_of(4), 0);
}

/// Writes a block whose body `body` appends, with both length fields.
fn block(out: &mut Vec<u8>, block_type: u32, body: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    put_u32(out, block_type);
    put_u32(out, 0);
    body(out);
    let len = (out.len() - start + 4) as u32;
    out[start + 4..start + 8].copy_from_slice(&len.to_le_bytes());
    put_u32(out, len);
}

pub fn file_header(iface: &Interface, out: &mut Vec<u8>) {
    block(out, SHB_TYPE, |b| {
        put_u32(b, BYTE_ORDER_MAGIC);
        put_u16(b, 1);
        put_u16(b, 0);
        b.extend_from_slice(&(-1i64).to_le_bytes()); // section length not known
        let app = concat!("wirespeed ", env!("CARGO_PKG_VERSION"));
        put_option(b, SHB_USERAPPL, app.as_bytes());
        put_option(b, OPT_END, &[]);
    });
    block(out, IDB_TYPE, |b| {
        put_u16(b, iface.link_type);
        put_u16(b, 0);
        put_u32(b, iface.snaplen);
        if let Some(name) = &iface.name {
            put_option(b, IF_NAME, name.as_bytes());
        }
        put_option(b, IF_TSRESOL, &[9]);
        put_option(b, OPT_END, &[]);
    });
}

#[inline]
pub fn enhanced_packet(out: &mut Vec<u8>, ts_ns: u64, data: &[u8], orig_len: u32) {
    let padded = data.len().next_multiple_of(4);
    let len = (EPB_OVERHEAD + padded) as u32;
    let mut h = [0u8; 28];
    h[0..4].copy_from_slice(&EPB_TYPE.to_le_bytes());
    h[4..8].copy_from_slice(&len.to_le_bytes());
    // h[8..12]: interface 0
    h[12..16].copy_from_slice(&((ts_ns >> 32) as u32).to_le_bytes());
    h[16..20].copy_from_slice(&(ts_ns as u32).to_le_bytes());
    h[20..24].copy_from_slice(&(data.len() as u32).to_le_bytes());
    h[24..28].copy_from_slice(&orig_len.to_le_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    out.extend_from_slice(&[0u8; 3][..padded - data.len()]);
    out.extend_from_slice(&len.to_le_bytes());
}

pub fn interface_statistics(out: &mut Vec<u8>, stats: &IfStats) {
    block(out, ISB_TYPE, |b| {
        put_u32(b, 0);
        put_ts(b, stats.end_ns);
        let mut ts = Vec::with_capacity(8);
        put_ts(&mut ts, stats.start_ns);
        put_option(b, ISB_STARTTIME, &ts);
        ts.clear();
        put_ts(&mut ts, stats.end_ns);
        put_option(b, ISB_ENDTIME, &ts);
        put_option(b, ISB_IFRECV, &stats.received.to_le_bytes());
        put_option(b, ISB_IFDROP, &stats.dropped.to_le_bytes());
        put_option(b, OPT_END, &[]);
    });
}
