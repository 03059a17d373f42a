//! Writers against the reader, and the bytes of the headers.

use super::*;
use crate::read::{CaptureReader, FileFormat};

fn iface() -> Interface {
    Interface {
        link_type: 1,
        snaplen: 96,
        name: Some("veth1".to_string()),
    }
}

fn read_back(bytes: Vec<u8>) -> (CaptureReader, Vec<(u64, Vec<u8>, u32)>) {
    let mut r = CaptureReader::from_reader("mem", Box::new(std::io::Cursor::new(bytes))).unwrap();
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        out.push((rec.ts_ns, rec.data.to_vec(), rec.orig_len));
    }
    (r, out)
}

fn packets() -> Vec<(u64, Vec<u8>, u32)> {
    vec![
        (1_700_000_000_123_456_789, vec![1, 2, 3], 3),
        (1_700_000_001_000_000_001, (0..96).collect(), 1514),
        (5, vec![], 60),
    ]
}

#[test]
fn pcap_round_trip_with_nanoseconds() {
    let mut out = Vec::new();
    Format::Pcap.file_header(&iface(), &mut out);
    assert_eq!(out.len(), pcap::FILE_HEADER_LEN);
    assert_eq!(&out[..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
    for (ts, data, orig) in packets() {
        let before = out.len();
        Format::Pcap.record(&mut out, ts, &data, orig);
        assert_eq!(out.len() - before, Format::Pcap.record_len(data.len()));
    }
    Format::Pcap.trailer(&IfStats::default(), &mut out);
    let (r, got) = read_back(out);
    assert_eq!(r.format(), FileFormat::Pcap { nanosecond: true });
    assert_eq!((r.link_type(), r.snaplen()), (1, 96));
    assert_eq!(got, packets());
}

#[test]
fn pcapng_round_trip_with_nanoseconds_and_statistics() {
    let mut out = Vec::new();
    Format::Pcapng.file_header(&iface(), &mut out);
    assert_eq!(out.len() % 4, 0);
    for (ts, data, orig) in packets() {
        let before = out.len();
        Format::Pcapng.record(&mut out, ts, &data, orig);
        assert_eq!(out.len() - before, Format::Pcapng.record_len(data.len()));
    }
    let before = out.len();
    let stats = IfStats {
        start_ns: 1,
        end_ns: 2,
        received: 3,
        dropped: 4,
    };
    Format::Pcapng.trailer(&stats, &mut out);
    assert_eq!(out.len() - before, Format::Pcapng.trailer_len());
    let isb = &out[before..];
    assert_eq!(&isb[0..4], &5u32.to_le_bytes());
    // isb_ifrecv and isb_ifdrop, little-endian 64-bit.
    let find = |code: u16| {
        let at = (20..isb.len() - 4)
            .step_by(4)
            .find(|&i| isb[i..i + 2] == code.to_le_bytes())
            .unwrap();
        u64::from_le_bytes(isb[at + 4..at + 12].try_into().unwrap())
    };
    assert_eq!((find(4), find(5)), (3, 4));
    let (r, got) = read_back(out);
    assert_eq!(r.format(), FileFormat::Pcapng);
    assert_eq!((r.link_type(), r.snaplen()), (1, 96));
    assert_eq!(got, packets());
}

#[test]
fn pcapng_interface_name_is_written() {
    let mut out = Vec::new();
    Format::Pcapng.file_header(&iface(), &mut out);
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("veth1"));
    assert!(text.contains("wirespeed"));
}
