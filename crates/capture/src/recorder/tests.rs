//! The recorder over an in-memory output: rotation, limits, the writer's drops and errors.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::*;
use crate::read::CaptureReader;
use crate::spool::{Chunk, WriteError};

type Files = Arc<Mutex<BTreeMap<PathBuf, Vec<u8>>>>;

/// Files in memory; fails writes once `budget` bytes are spent, like a full disk.
struct MemOutput {
    files: Files,
    current: Option<PathBuf>,
    budget: usize,
    /// A slow disk.
    delay: Option<std::time::Duration>,
}

impl Output for MemOutput {
    fn open(&mut self, path: &Path, header: &[u8]) -> io::Result<()> {
        self.files
            .lock()
            .unwrap()
            .insert(path.to_path_buf(), header.to_vec());
        self.current = Some(path.to_path_buf());
        Ok(())
    }

    fn write(&mut self, chunk: &Chunk) -> Result<(), WriteError> {
        if let Some(d) = self.delay {
            std::thread::sleep(d);
        }
        let mut files = self.files.lock().unwrap();
        let file = files.get_mut(self.current.as_ref().unwrap()).unwrap();
        if chunk.bytes.len() > self.budget {
            let whole = chunk.packet_ends.partition_point(|&e| e <= self.budget);
            let end = if whole == 0 {
                0
            } else {
                chunk.packet_ends[whole - 1]
            };
            file.extend_from_slice(&chunk.bytes[..end]);
            self.budget = 0;
            return Err(WriteError {
                written_packets: whole as u64,
                error: io::Error::from_raw_os_error(28),
            });
        }
        self.budget -= chunk.bytes.len();
        file.extend_from_slice(&chunk.bytes);
        Ok(())
    }

    fn close(&mut self, trailer: &[u8]) -> io::Result<()> {
        if let Some(p) = self.current.take() {
            self.files
                .lock()
                .unwrap()
                .get_mut(&p)
                .unwrap()
                .extend_from_slice(trailer);
        }
        Ok(())
    }
}

fn recorder(format: Format, rotation: Rotation, budget: usize) -> (Recorder, Files) {
    let files = Files::default();
    let output = MemOutput {
        files: files.clone(),
        current: None,
        budget,
        delay: None,
    };
    (start(format, rotation, Box::new(output), true), files)
}

fn start(format: Format, rotation: Rotation, output: Box<dyn Output>, wait: bool) -> Recorder {
    start_named(format, rotation, output, wait, "cap")
}

fn start_named(
    format: Format,
    rotation: Rotation,
    output: Box<dyn Output>,
    wait: bool,
    pattern: &str,
) -> Recorder {
    let config = RecorderConfig {
        format,
        interface: Interface {
            link_type: 1,
            snaplen: 100,
            name: Some("veth0".to_string()),
        },
        rotation,
        pattern: pattern.to_string(),
        buffer_bytes: 0,
        chunk_size: 0,
        wait_for_writer: wait,
    };
    Recorder::start(config, output, 0).unwrap()
}

fn count(bytes: &[u8]) -> (u64, u64) {
    let mut r =
        CaptureReader::from_reader("mem", Box::new(io::Cursor::new(bytes.to_vec()))).unwrap();
    let (mut n, mut b) = (0, 0);
    while let Some(rec) = r.next_record().unwrap() {
        n += 1;
        b += rec.data.len() as u64;
    }
    (n, b)
}

#[test]
fn snaplen_cuts_packets_but_keeps_the_original_length() {
    let (mut rec, files) = recorder(Format::Pcapng, Rotation::default(), usize::MAX);
    assert_eq!(rec.record(1, &[7u8; 300], 300), Outcome::Queued);
    let report = rec.finish();
    assert_eq!((report.written, report.lost), (1, 0));
    let bytes = files.lock().unwrap()[Path::new("cap")].clone();
    let mut r = CaptureReader::from_reader("m", Box::new(io::Cursor::new(bytes))).unwrap();
    let p = r.next_record().unwrap().unwrap();
    assert_eq!((p.data.len(), p.orig_len), (100, 300));
}

#[test]
fn size_rotation_keeps_every_file_within_its_size() {
    for format in [Format::Pcap, Format::Pcapng] {
        let limit = 1000;
        let rotation = Rotation {
            bytes: Some(limit),
            ..Rotation::default()
        };
        let (mut rec, files) = recorder(format, rotation, usize::MAX);
        for i in 0..100u64 {
            assert_eq!(rec.record(i, &[i as u8; 60], 60), Outcome::Queued);
        }
        let report = rec.finish();
        assert_eq!(report.written, 100);
        let files = files.lock().unwrap();
        assert_eq!(report.files.len(), files.len());
        assert_eq!(report.files[0], PathBuf::from("cap"));
        assert_eq!(report.files[1], PathBuf::from("cap1"));
        let mut total = 0;
        for (name, bytes) in files.iter() {
            assert!(
                bytes.len() as u64 <= limit,
                "{name:?}: {} bytes",
                bytes.len()
            );
            total += count(bytes).0;
        }
        assert_eq!(total, 100, "{format:?}");
    }
}

#[test]
fn ring_of_files_wraps() {
    let rotation = Rotation {
        bytes: Some(500),
        files: Some(3),
        ..Rotation::default()
    };
    let (mut rec, files) = recorder(Format::Pcap, rotation, usize::MAX);
    for i in 0..100u64 {
        rec.record(i, &[0u8; 60], 60);
    }
    let report = rec.finish();
    let names: Vec<_> = files.lock().unwrap().keys().cloned().collect();
    assert_eq!(names, ["cap0", "cap1", "cap2"].map(PathBuf::from));
    assert!(report.files.len() > 3);
}

#[test]
fn time_rotation_follows_packet_timestamps_and_stops_after_w_files() {
    let rotation = Rotation {
        seconds: Some(2),
        files: Some(3),
        ..Rotation::default()
    };
    let (mut rec, files) = recorder(Format::Pcapng, rotation, usize::MAX);
    let mut queued = 0;
    let mut outcome = Outcome::Queued;
    for s in 0..10u64 {
        outcome = rec.record(s * 1_000_000_000, &[0u8; 60], 60);
        if outcome != Outcome::Queued {
            break;
        }
        queued += 1;
    }
    assert_eq!(outcome, Outcome::FilesDone);
    assert_eq!(queued, 6);
    let report = rec.finish();
    assert_eq!(report.files.len(), 3);
    assert_eq!(
        files.lock().unwrap().len(),
        1,
        "the pattern has no %: one name"
    );
}

#[test]
fn size_rotated_files_keep_their_intervals_time_in_the_name() {
    // -G 10 -C 500 -W 2: names from the interval's start, the index a ring of two.
    let rotation = Rotation {
        seconds: Some(10),
        bytes: Some(500),
        files: Some(2),
    };
    let files = Files::default();
    let output = MemOutput {
        files: files.clone(),
        current: None,
        budget: usize::MAX,
        delay: None,
    };
    let mut rec = start_named(Format::Pcap, rotation, Box::new(output), true, "gc-%s-");
    // A 60-byte packet every 0.2 s for 30 s: 50 an interval, 5 a file (24 + 5 x 76 bytes).
    for i in 0..150u64 {
        assert_eq!(rec.record(i * 200_000_000, &[0u8; 60], 60), Outcome::Queued);
    }
    rec.finish();
    let names: Vec<_> = files.lock().unwrap().keys().cloned().collect();
    let want = [
        "gc-0-0", "gc-0-1", "gc-10-0", "gc-10-1", "gc-20-0", "gc-20-1",
    ];
    assert_eq!(names, want.map(PathBuf::from));
}

#[test]
fn write_error_keeps_whole_packets_and_counts_the_rest() {
    let (mut rec, files) = recorder(Format::Pcap, Rotation::default(), 1000);
    for i in 0..20u64 {
        rec.record(i, &[0u8; 60], 60);
    }
    let report = rec.finish();
    // 1000 bytes hold 13 records of 76 bytes.
    assert_eq!((report.written, report.lost), (13, 7));
    assert!(
        report.error.unwrap().contains("No space left"),
        "error names the problem"
    );
    let bytes = files.lock().unwrap()[Path::new("cap")].clone();
    assert_eq!(count(&bytes), (13, 13 * 60));
}

#[test]
fn a_slow_writer_drops_and_counts_never_blocks() {
    let files = Files::default();
    let output = MemOutput {
        files: files.clone(),
        current: None,
        budget: usize::MAX,
        delay: Some(std::time::Duration::from_millis(20)),
    };
    let mut rec = start(Format::Pcap, Rotation::default(), Box::new(output), false);
    let t = std::time::Instant::now();
    let (mut queued, mut behind) = (0u64, 0u64);
    // 64 KiB chunks, 2 of them: 40,000 records of 1 KiB cannot all wait in memory.
    for i in 0..40_000u64 {
        match rec.record(i, &[0u8; 100], 1000) {
            Outcome::Queued => queued += 1,
            Outcome::WriterBehind => behind += 1,
            Outcome::FilesDone => unreachable!(),
        }
    }
    assert!(
        t.elapsed() < std::time::Duration::from_millis(500),
        "the loop waited"
    );
    assert!(behind > 0);
    assert_eq!(rec.dropped_by_writer, behind);
    let report = rec.finish();
    assert_eq!(report.written, queued);
    assert_eq!(count(&files.lock().unwrap()[Path::new("cap")]).0, queued);
}
