//! Classic pcap, little-endian, nanosecond timestamps (magic 0xa1b23c4d).

use super::Interface;
use crate::read::pcap::MAGIC_NANO as NANO;

pub const FILE_HEADER_LEN: usize = 24;
pub const RECORD_HEADER_LEN: usize = 16;

pub fn file_header(iface: &Interface, out: &mut Vec<u8>) {
    out.extend_from_slice(&NANO.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes()); // thiszone: timestamps are UTC
    out.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
    out.extend_from_slice(&iface.snaplen.to_le_bytes());
    out.extend_from_slice(&u32::from(iface.link_type).to_le_bytes());
}

#[inline]
pub fn record(out: &mut Vec<u8>, ts_ns: u64, data: &[u8], orig_len: u32) {
    let mut h = [0u8; RECORD_HEADER_LEN];
    // Seconds wrap in 2106, as every classic pcap file's do.
    h[0..4].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
    h[4..8].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
    h[8..12].copy_from_slice(&(data.len() as u32).to_le_bytes());
    h[12..16].copy_from_slice(&orig_len.to_le_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
}
