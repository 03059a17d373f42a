//! Reader tests over literal files.

use super::pcapng::TsResol;
use super::*;

fn reader(bytes: &[u8]) -> Result<CaptureReader, CaptureError> {
    CaptureReader::from_reader("test.cap", Box::new(std::io::Cursor::new(bytes.to_vec())))
}

fn all(r: &mut CaptureReader) -> Vec<(u64, Vec<u8>, u32)> {
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        out.push((rec.ts_ns, rec.data.to_vec(), rec.orig_len));
    }
    out
}

#[rustfmt::skip]
const PCAP_LE_MICRO: &[u8] = &[
    0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0xff, 0xff, 0, 0, 1, 0, 0, 0,
    // ts 1.000002 s, 4 captured of 60
    1, 0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 60, 0, 0, 0,
    0xde, 0xad, 0xbe, 0xef,
    // ts 2.0, 0 bytes
    2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
];

#[rustfmt::skip]
const PCAP_BE_NANO: &[u8] = &[
    0xa1, 0xb2, 0x3c, 0x4d, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0x01, 0x00, 0, 0, 0, 1,
    0, 0, 0, 3, 0, 0, 0, 7, 0, 0, 0, 2, 0, 0, 0, 2,
    0xaa, 0xbb,
];

#[test]
fn pcap_little_endian_microseconds() {
    let mut r = reader(PCAP_LE_MICRO).unwrap();
    assert_eq!(r.format(), FileFormat::Pcap { nanosecond: false });
    assert_eq!(r.link_type(), 1);
    assert_eq!(r.snaplen(), 65535);
    assert_eq!(
        all(&mut r),
        vec![
            (1_000_002_000, vec![0xde, 0xad, 0xbe, 0xef], 60),
            (2_000_000_000, vec![], 0)
        ]
    );
}

#[test]
fn pcap_big_endian_nanoseconds() {
    let mut r = reader(PCAP_BE_NANO).unwrap();
    assert_eq!(r.format(), FileFormat::Pcap { nanosecond: true });
    assert_eq!((r.link_type(), r.snaplen()), (1, 256));
    assert_eq!(all(&mut r), vec![(3_000_000_007, vec![0xaa, 0xbb], 2)]);
}

#[test]
fn pcap_truncated_packet_names_file_and_offset() {
    let cut = &PCAP_LE_MICRO[..24 + 16 + 2];
    let mut r = reader(cut).unwrap();
    let e = r.next_record().unwrap_err();
    assert!(
        matches!(
            e.kind,
            ErrorKind::Truncated {
                offset: 40,
                need: 4,
                have: 2,
                ..
            }
        ),
        "{e}"
    );
    let msg = e.to_string();
    assert!(msg.starts_with("test.cap: truncated at byte 40"), "{msg}");
}

#[test]
fn pcap_truncated_record_header() {
    let mut r = reader(&PCAP_LE_MICRO[..24 + 5]).unwrap();
    let e = r.next_record().unwrap_err();
    assert!(
        matches!(e.kind, ErrorKind::Truncated { have: 5, .. }),
        "{e}"
    );
}

#[test]
fn pcap_truncated_file_header() {
    let e = reader(&PCAP_LE_MICRO[..10]).err().unwrap();
    assert!(matches!(e.kind, ErrorKind::Truncated { .. }), "{e}");
}

#[test]
fn pcap_lying_caplen_is_malformed_not_an_allocation() {
    let mut bytes = PCAP_LE_MICRO[..40].to_vec();
    bytes[32..36].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    let mut r = reader(&bytes).unwrap();
    let e = r.next_record().unwrap_err();
    assert!(
        matches!(e.kind, ErrorKind::Malformed { offset: 24, .. }),
        "{e}"
    );
}

#[rustfmt::skip]
const PCAPNG_LE: &[u8] = &[
    // SHB, 28 bytes: byte-order magic, version 1.0, section length -1
    0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 28, 0, 0, 0,
    // IDB, 32 bytes: Ethernet, snaplen 4, if_tsresol 9 (nanoseconds), end of options
    1, 0, 0, 0, 32, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0,
    9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0, 0,
    // NRB (skipped), 16 bytes
    4, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0,
    // EPB, 36 bytes: interface 0, ts 0x1_0000_0002 ns, 3 of 70 bytes, padded
    6, 0, 0, 0, 36, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0,
    3, 0, 0, 0, 70, 0, 0, 0, 0x11, 0x22, 0x33, 0, 36, 0, 0, 0,
    // SPB, 20 bytes: original length 6, snaplen 4 keeps 4
    3, 0, 0, 0, 20, 0, 0, 0, 6, 0, 0, 0, 0x44, 0x55, 0x66, 0x77, 20, 0, 0, 0,
    // ISB (skipped), 24 bytes
    5, 0, 0, 0, 24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 24, 0, 0, 0,
];

#[test]
fn pcapng_little_endian_nanosecond_interface() {
    let mut r = reader(PCAPNG_LE).unwrap();
    assert_eq!(r.format(), FileFormat::Pcapng);
    assert_eq!((r.link_type(), r.snaplen()), (1, 4));
    assert_eq!(
        all(&mut r),
        vec![
            ((1u64 << 32) + 2, vec![0x11, 0x22, 0x33], 70),
            (0, vec![0x44, 0x55, 0x66, 0x77], 6)
        ]
    );
}

#[rustfmt::skip]
const PCAPNG_BE_MICRO: &[u8] = &[
    0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 28, 0x1a, 0x2b, 0x3c, 0x4d, 0, 1, 0, 0,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 28,
    // IDB, no options: microseconds by default; link type 228 (raw IPv4)
    0, 0, 0, 1, 0, 0, 0, 20, 0, 228, 0, 0, 0, 0, 0, 0, 0, 0, 0, 20,
    // EPB: ts 1_500_000 us, 1 byte
    0, 0, 0, 6, 0, 0, 0, 36, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x16, 0xe3, 0x60,
    0, 0, 0, 1, 0, 0, 0, 1, 0x99, 0, 0, 0, 0, 0, 0, 36,
];

#[test]
fn pcapng_big_endian_default_microseconds() {
    let mut r = reader(PCAPNG_BE_MICRO).unwrap();
    assert_eq!(r.link_type(), 228);
    assert_eq!(all(&mut r), vec![(1_500_000_000, vec![0x99], 1)]);
}

#[test]
fn pcapng_second_section_switches_byte_order() {
    let mut bytes = PCAPNG_LE.to_vec();
    bytes.extend_from_slice(PCAPNG_BE_MICRO);
    // The second section's interface as Ethernet too (its link type's low byte).
    bytes[PCAPNG_LE.len() + 37] = 1;
    let mut r = reader(&bytes).unwrap();
    assert_eq!(all(&mut r).len(), 3);
}

#[test]
fn pcapng_mixing_link_types_is_refused_at_the_second_interface() {
    // The same, with the second section's raw-IPv4 interface: records are read as the
    // first interface's link type, so this file is refused (libpcap refuses it as well).
    let mut bytes = PCAPNG_LE.to_vec();
    bytes.extend_from_slice(PCAPNG_BE_MICRO);
    let mut r = reader(&bytes).unwrap();
    assert_eq!(r.link_type(), 1);
    let mut got = 0;
    let e = loop {
        match r.next_record() {
            Ok(Some(_)) => got += 1,
            Ok(None) => panic!("read to the end"),
            Err(e) => break e,
        }
    };
    assert_eq!(got, 2, "the first interface's packets");
    let offset = PCAPNG_LE.len() as u64 + 28;
    assert!(
        matches!(
            e.kind,
            ErrorKind::MixedLinkTypes { offset: o, link_type: 228, first: 1 } if o == offset
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("link type 228, the first interface 1"),
        "{e}"
    );
}

#[test]
fn pcapng_without_interface_is_refused() {
    let e = reader(&PCAPNG_LE[..28]).err().unwrap();
    assert!(matches!(e.kind, ErrorKind::NoInterface), "{e}");
}

#[test]
fn pcapng_packet_before_interface_is_malformed() {
    let mut bytes = PCAPNG_LE[..28].to_vec();
    bytes.extend_from_slice(&PCAPNG_LE[76..112]);
    let e = reader(&bytes).err().unwrap();
    assert!(
        matches!(e.kind, ErrorKind::Malformed { offset: 28, .. }),
        "{e}"
    );
}

#[test]
fn pcapng_lying_lengths_are_malformed() {
    // EPB trailing length disagrees with the leading one.
    let mut bytes = PCAPNG_LE[..112].to_vec();
    bytes[108] = 40;
    let mut r = reader(&bytes).unwrap();
    assert!(matches!(
        r.next_record().unwrap_err().kind,
        ErrorKind::Malformed { offset: 76, .. }
    ));
    // EPB captured length beyond its block.
    let mut bytes = PCAPNG_LE[..112].to_vec();
    bytes[96] = 200;
    let mut r = reader(&bytes).unwrap();
    assert!(matches!(
        r.next_record().unwrap_err().kind,
        ErrorKind::Malformed { .. }
    ));
    // Block length not a multiple of 4.
    let mut bytes = PCAPNG_LE[..112].to_vec();
    bytes[80] = 37;
    let mut r = reader(&bytes).unwrap();
    assert!(matches!(
        r.next_record().unwrap_err().kind,
        ErrorKind::Malformed { .. }
    ));
    // Interface that was never described.
    let mut bytes = PCAPNG_LE[..112].to_vec();
    bytes[84] = 5;
    let mut r = reader(&bytes).unwrap();
    assert!(matches!(
        r.next_record().unwrap_err().kind,
        ErrorKind::Malformed { .. }
    ));
}

#[test]
fn pcapng_truncated_block() {
    let mut r = reader(&PCAPNG_LE[..100]).unwrap();
    let e = r.next_record().unwrap_err();
    assert!(
        matches!(e.kind, ErrorKind::Truncated { offset: 84, .. }),
        "{e}"
    );
}

#[test]
fn not_a_capture_file() {
    let e = reader(b"hello world, not a capture").err().unwrap();
    assert!(matches!(e.kind, ErrorKind::NotCapture { .. }), "{e}");
    assert!(
        e.to_string()
            .ends_with("not a pcap or pcapng capture file (it starts with \"hell\")"),
        "{e}"
    );
    let e = reader(b"").err().unwrap();
    assert!(matches!(e.kind, ErrorKind::NotCapture { ref magic } if magic.is_empty()));
    assert!(e.to_string().ends_with("(it is empty)"), "{e}");
    let e = reader(&[0x7f, b'E', b'L', b'F', 2]).err().unwrap();
    assert!(
        e.to_string()
            .ends_with("(it starts with bytes 7f 45 4c 46)"),
        "{e}"
    );
}

#[test]
fn missing_file_names_it() {
    let e = CaptureReader::open("/nonexistent/x.pcap").err().unwrap();
    assert!(matches!(e.kind, ErrorKind::Open(_)));
    assert!(
        e.to_string()
            .starts_with("/nonexistent/x.pcap: cannot open"),
        "{e}"
    );
}

#[test]
fn timestamp_resolutions() {
    assert_eq!(TsResol::Pow10(6).to_ns(3), 3_000);
    assert_eq!(TsResol::Pow10(9).to_ns(3), 3);
    assert_eq!(TsResol::Pow10(12).to_ns(3_000), 3);
    assert_eq!(TsResol::Pow10(100).to_ns(u64::MAX), 0);
    assert_eq!(TsResol::Pow2(0).to_ns(2), 2_000_000_000);
    assert_eq!(TsResol::Pow2(10).to_ns(1024), 1_000_000_000);
    assert_eq!(TsResol::Pow2(127).to_ns(u64::MAX), 0);
    assert_eq!(TsResol::Pow10(0).to_ns(u64::MAX), u64::MAX);
}

#[test]
fn unsupported_link_type_message() {
    let e = CaptureError::unsupported_link_type("in.pcap", 228);
    assert_eq!(
        e.to_string(),
        "in.pcap: link type 228 is not supported (wirespeed handles Ethernet, link type 1)"
    );
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    /// Reads everything, however the bytes lie: records or a typed error, never a panic.
    fn read_all(bytes: Vec<u8>) {
        let Ok(mut r) = reader(&bytes) else { return };
        for _ in 0..10_000 {
            match r.next_record() {
                Ok(Some(rec)) => assert!(rec.data.len() <= MAX_RECORD_LEN as usize),
                Ok(None) | Err(_) => return,
            }
        }
    }

    fn mutated(base: &[u8], edits: &[(usize, u8)], cut: usize) -> Vec<u8> {
        let mut b = base.to_vec();
        for &(at, v) in edits {
            let n = b.len();
            if n > 0 {
                b[at % n] = v;
            }
        }
        b.truncate(cut.min(b.len()));
        b
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            read_all(bytes);
        }

        #[test]
        fn mutated_files_never_panic(
            which in 0usize..4,
            edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
            cut in 0usize..200,
        ) {
            let base = [PCAP_LE_MICRO, PCAP_BE_NANO, PCAPNG_LE, PCAPNG_BE_MICRO][which];
            read_all(mutated(base, &edits, cut));
        }
    }
}

#[test]
fn pcapng_names_its_one_interface_and_not_one_of_several() {
    use crate::write::{Format, Interface};
    let iface = Interface {
        link_type: 1,
        snaplen: 100,
        name: Some("eth7".to_string()),
    };
    let mut one = Vec::new();
    Format::Pcapng.file_header(&iface, &mut one);
    let header_len = one.len();
    Format::Pcapng.record(&mut one, 5, &[1, 2, 3], 3);
    let mut r = reader(&one).unwrap();
    assert_eq!(
        r.next_record().unwrap().unwrap().interface_name,
        Some("eth7")
    );
    // The interface block twice: two interfaces, so no name.
    let shb_len = u32::from_le_bytes(one[4..8].try_into().unwrap()) as usize;
    let mut two = one[..header_len].to_vec();
    two.extend_from_slice(&one[shb_len..header_len]);
    two.extend_from_slice(&one[header_len..]);
    let mut r = reader(&two).unwrap();
    assert_eq!(r.next_record().unwrap().unwrap().interface_name, None);
    let mut pcap = Vec::new();
    Format::Pcap.file_header(&iface, &mut pcap);
    Format::Pcap.record(&mut pcap, 5, &[1, 2, 3], 3);
    let mut r = reader(&pcap).unwrap();
    assert_eq!(r.next_record().unwrap().unwrap().interface_name, None);
}
