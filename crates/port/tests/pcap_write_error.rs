//! A pcap port whose recording cannot grow (the file size limit, as a full disk would): the
//! error names the file, the file keeps every whole record written before it and nothing
//! after, and every packet sent is either in the file or counted as tx_error.
//!
//! Alone in its test binary: the size limit is the whole process's.

use nix::sys::resource::{Resource, getrlimit, setrlimit};
use nix::sys::signal::{SigSet, Signal};
use wirespeed_capture::CaptureReader;
use wirespeed_port::pcap::PcapPort;
use wirespeed_port::{Batch, Port, PortOptions, PortSpec};

const LIMIT: u64 = 3 << 20;

/// The recording, removed however the test ends.
struct Removed(std::path::PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn a_failed_write_keeps_the_file_whole_and_counts_the_loss() {
    let path = std::env::temp_dir().join(format!("ws-pcap-{}-full.pcap", std::process::id()));
    let _removed = Removed(path.clone());
    let spec: PortSpec = format!("pcap:tx={}", path.display()).parse().unwrap();
    let opts = PortOptions {
        frame_count: 64,
        frame_size: 2048,
        rx: false,
        ..PortOptions::default()
    };
    let mut port = PcapPort::open(&spec, &opts).unwrap();
    // A write past the limit fails with EFBIG instead of killing the process.
    let mut xfsz = SigSet::empty();
    xfsz.add(Signal::SIGXFSZ);
    xfsz.thread_block().unwrap();
    let (soft, hard) = getrlimit(Resource::RLIMIT_FSIZE).unwrap();
    setrlimit(Resource::RLIMIT_FSIZE, LIMIT, hard).unwrap();

    let mut batch = Batch::with_capacity(64);
    let (mut sent, mut error) = (0u64, None);
    while sent < 5000 && error.is_none() {
        let n = port.alloc_tx(&mut batch, 64, 1000);
        for i in 0..n {
            port.packet_mut(batch.addr(i), 1000)
                .fill((sent as usize + i) as u8);
        }
        match port.tx_burst(&mut batch) {
            Ok(q) => sent += q as u64,
            Err(e) => {
                // Said by the call after the one whose write failed (that one said how
                // many it queued), which takes nothing.
                assert_eq!(batch.len(), n);
                error = Some(e.to_string());
            }
        }
    }
    // Sent after the failure: counted, not recorded.
    let n = batch.len() + port.alloc_tx(&mut batch, 10, 1000);
    assert_eq!(port.tx_burst(&mut batch).unwrap(), n);
    sent += n as u64;
    port.flush().unwrap();
    setrlimit(Resource::RLIMIT_FSIZE, soft, hard).unwrap();

    let error = error.expect("writes past the limit fail");
    assert!(
        error.starts_with(&format!("{}: write the capture file", path.display())),
        "{error}"
    );
    let stats = port.stats();
    assert_eq!(stats.tx_packets + stats.drops.tx_error, sent);
    assert!(stats.tx_packets > 0 && stats.drops.tx_error > 0);
    drop(port);
    let size = std::fs::metadata(&path).unwrap().len();
    let mut reader = CaptureReader::open(&path).unwrap();
    let mut records = 0u64;
    while let Some(r) = reader.next_record().unwrap() {
        assert_eq!(r.data, &[records as u8; 1000][..]);
        records += 1;
    }
    assert!(size <= LIMIT, "{size}");
    assert_eq!(records, stats.tx_packets);
}
