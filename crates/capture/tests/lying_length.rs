//! A capture file whose record header claims more bytes than the file holds costs what the
//! file has, not what it claims: the reader allocates as the bytes arrive. A test binary of
//! its own, so its allocator can count what reading one file asks for.

use std::io::Cursor;
use std::time::{Duration, Instant};

use wirespeed_capture::CaptureReader;

/// This process's peak resident memory (VmHWM), in bytes: what reading touched at most.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM");
    kb * 1024
}

/// A 56-byte pcap file: its header, then one record header claiming 16 MiB (the largest
/// record the reader takes) and 16 bytes of data.
fn lying_pcap() -> Vec<u8> {
    let mut f = Vec::new();
    for word in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        f.extend_from_slice(&word.to_le_bytes());
    }
    f.truncate(24);
    let claimed = 16u32 << 20;
    for word in [1u32, 0, claimed, claimed] {
        f.extend_from_slice(&word.to_le_bytes());
    }
    f.extend_from_slice(&[0xab; 16]);
    assert_eq!(f.len(), 56);
    f
}

/// A pcapng file whose second block claims a 16 MiB body and ends after 8 bytes of it.
fn lying_pcapng() -> Vec<u8> {
    let mut f = Vec::new();
    let word = |f: &mut Vec<u8>, w: u32| f.extend_from_slice(&w.to_le_bytes());
    // Section header: type, length 28, byte-order magic, version 1.0, section length -1.
    for w in [
        0x0a0d_0d0a,
        28,
        0x1a2b_3c4d,
        0x0000_0001,
        u32::MAX,
        u32::MAX,
        28,
    ] {
        word(&mut f, w);
    }
    // An enhanced packet block claiming 16 MiB.
    for w in [6, 16 << 20, 0, 0] {
        word(&mut f, w);
    }
    f
}

/// Reads every record of `file`; the error it ends with and how long it took.
fn read(file: &[u8]) -> (String, Duration) {
    let source = Box::new(Cursor::new(file.to_vec()));
    let started = Instant::now();
    let mut reader = match CaptureReader::from_reader("lying", source) {
        Ok(reader) => reader,
        Err(e) => return (e.to_string(), started.elapsed()),
    };
    let error = loop {
        match reader.next_record() {
            Ok(Some(_)) => continue,
            Ok(None) => break "no error".to_string(),
            Err(e) => break e.to_string(),
        }
    };
    drop(reader);
    (error, started.elapsed())
}

/// The median of 21 reads' times, so one read the VM delays does not decide.
fn median_time(file: &[u8]) -> Duration {
    let mut times: Vec<Duration> = (0..21).map(|_| read(file).1).collect();
    times.sort();
    times[times.len() / 2]
}

/// One test, so no other test's memory shows in the peak: the old reader zero-filled the
/// 16 MiB a record claimed before finding the file 16 bytes long (15.8 ms a file).
#[test]
fn a_record_claiming_16_mib_costs_what_the_file_holds() {
    let pcap = lying_pcap();
    let pcapng = lying_pcapng();
    let before = peak_rss();
    let (error, _) = read(&pcap);
    assert_eq!(
        error,
        "lying: truncated at byte 40: a packet's data needs 16777216 bytes, the file has 16 more"
    );
    let (error, _) = read(&pcapng);
    assert_eq!(
        error,
        "lying: truncated at byte 36: a block needs 16777208 bytes, the file has 8 more"
    );
    let grew = peak_rss() - before;
    // At most the reader's 64 KiB input buffer and small change, not the 16 MiB claimed.
    assert!(grew < 4 << 20, "peak memory grew by {grew} bytes");
    for (name, file) in [("pcap", &pcap), ("pcapng", &pcapng)] {
        let median = median_time(file);
        assert!(
            median < Duration::from_millis(1),
            "{name}: median read {median:?}"
        );
    }
}
