//! The pcap backend: a file replayed with every byte, timestamp and wire length; packets sent
//! recorded in pcap and pcapng files the reader takes back whole; bad specs and files refused
//! with the file named, and no recording left behind by a port that failed to open; a paced
//! replay keeps the recorded distances between packets.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wirespeed_capture::CaptureReader;
use wirespeed_capture::write::{Format, Interface};
use wirespeed_port::pcap::PcapPort;
use wirespeed_port::{Batch, Port, PortError, PortOptions, PortSpec, RxMeta};

/// A directory of this test's own, removed when dropped (on failure too).
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("ws-pcap-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn opts(rx: bool, tx: bool) -> PortOptions {
    PortOptions {
        frame_count: 64,
        frame_size: 2048,
        rx,
        tx,
        ..PortOptions::default()
    }
}

fn open(spec: &str, rx: bool, tx: bool) -> Result<PcapPort, PortError> {
    let spec: PortSpec = spec.parse().unwrap();
    PcapPort::open(&spec, &opts(rx, tx))
}

/// Packet `i`: 60 + 7(i mod 200) bytes, each byte (i + offset) mod 251.
fn packet(i: usize) -> Vec<u8> {
    (0..60 + 7 * (i % 200))
        .map(|k| ((i + k) % 251) as u8)
        .collect()
}

/// A capture file of `count` packets (packet i at time 1e9 + i µs), the last `cut` of them
/// cut to 40 bytes of a longer wire length, and one 3000-byte record after the third.
fn write_capture(path: &Path, format: Format, count: usize, cut: usize) {
    let mut out = Vec::new();
    let iface = Interface {
        link_type: 1,
        snaplen: 65535,
        name: None,
    };
    format.file_header(&iface, &mut out);
    for i in 0..count {
        let p = packet(i);
        let ts = 1_000_000_000 + i as u64 * 1000;
        if i >= count - cut {
            format.record(&mut out, ts, &p[..40], p.len() as u32);
        } else {
            format.record(&mut out, ts, &p, p.len() as u32);
        }
        if i == 2 {
            format.record(&mut out, ts, &[0xee; 3000], 3000);
        }
    }
    std::fs::write(path, out).unwrap();
}

/// Receives until the port says its file ended; every packet's bytes and metadata.
fn receive_all(port: &mut PcapPort) -> Vec<(Vec<u8>, RxMeta)> {
    let mut got = Vec::new();
    let mut batch = Batch::with_capacity(16);
    while !port.rx_ended() {
        port.rx_burst(&mut batch).unwrap();
        for i in 0..batch.len() {
            let bytes = port.packet(batch.addr(i), batch.frame_len(i)).to_vec();
            got.push((bytes, batch.meta(i)));
        }
        port.release(&mut batch);
    }
    got
}

#[test]
fn replays_every_packet_with_its_time_and_wire_length() {
    let dir = TempDir::new("replay");
    for (name, format) in [("in.pcap", Format::Pcap), ("in.pcapng", Format::Pcapng)] {
        let path = dir.path(name);
        write_capture(&path, format, 100, 2);
        let mut port = open(&format!("pcap:{}", path.display()), true, false).unwrap();
        assert_eq!(port.info().mode, "replay");
        let got = receive_all(&mut port);
        assert_eq!(got.len(), 100, "{name}");
        for (i, (bytes, meta)) in got.iter().enumerate() {
            let p = packet(i);
            let whole = i < 98;
            assert_eq!(
                bytes[..],
                p[..if whole { p.len() } else { 40 }],
                "{name} {i}"
            );
            assert_eq!(meta.ts_ns, 1_000_000_000 + i as u64 * 1000, "{name} {i}");
            assert_eq!(meta.wire_len, if whole { 0 } else { p.len() as u32 });
        }
        let stats = port.stats();
        assert_eq!(stats.rx_packets, 100);
        let bytes: usize = (0..100)
            .map(|i| if i < 98 { packet(i).len() } else { 40 })
            .sum();
        assert_eq!(stats.rx_bytes, bytes as u64);
        assert_eq!(stats.drops.rx_invalid_desc, 1, "the 3000-byte record");
        assert!(port.audit().unwrap().balanced());
        let mut batch = Batch::with_capacity(16);
        assert_eq!(port.rx_burst(&mut batch).unwrap(), 0, "ended stays ended");
    }
}

#[test]
fn records_sent_packets_in_pcap_and_pcapng() {
    let dir = TempDir::new("record");
    for (name, nanosecond_pcap) in [("out.pcap", true), ("out.pcapng", false)] {
        let path = dir.path(name);
        let mut port = open(&format!("pcap:{}", path.display()), false, true).unwrap();
        assert_eq!(port.info().mode, "record");
        let mut batch = Batch::with_capacity(64);
        let mut sent = 0;
        // More than one buffer's worth, so some records go out from tx_burst itself.
        while sent < 1200 {
            let n = port.alloc_tx(&mut batch, 64.min(1200 - sent), 2000);
            assert!(n > 0);
            for i in 0..n {
                let p = packet(sent + i);
                batch.set_len(i, p.len() as u32);
                port.packet_mut(batch.addr(i), p.len() as u32)
                    .copy_from_slice(&p);
            }
            assert_eq!(port.tx_burst(&mut batch).unwrap(), n);
            sent += n;
        }
        port.flush().unwrap();
        assert!(!port.tx_pending());
        let stats = port.stats();
        assert_eq!((stats.tx_packets, stats.drops.total()), (1200, 0));
        drop(port);
        let mut reader = CaptureReader::open(&path).unwrap();
        let format = reader.format();
        assert_eq!(
            format,
            match nanosecond_pcap {
                true => wirespeed_capture::FileFormat::Pcap { nanosecond: true },
                false => wirespeed_capture::FileFormat::Pcapng,
            }
        );
        let mut count = 0;
        while let Some(r) = reader.next_record().unwrap() {
            assert_eq!(r.data, &packet(count)[..], "{name} {count}");
            assert_eq!(r.orig_len as usize, r.data.len());
            count += 1;
        }
        assert_eq!(count, 1200, "{name}");
    }
}

#[test]
fn replays_one_file_into_another() {
    let dir = TempDir::new("through");
    let (inp, out) = (dir.path("in.pcapng"), dir.path("out.pcap"));
    write_capture(&inp, Format::Pcapng, 50, 0);
    let spec = format!("pcap:rx={},tx={}", inp.display(), out.display());
    let mut port = open(&spec, true, true).unwrap();
    assert_eq!(port.info().mode, "replay+record");
    let mut batch = Batch::with_capacity(8);
    while !port.rx_ended() {
        port.rx_burst(&mut batch).unwrap();
        port.tx_burst(&mut batch).unwrap();
    }
    // Not flushed: dropping the port writes what is left.
    drop(port);
    let mut reader = CaptureReader::open(&out).unwrap();
    let mut count = 0;
    while let Some(r) = reader.next_record().unwrap() {
        assert_eq!(r.data, &packet(count)[..]);
        count += 1;
    }
    assert_eq!(count, 50);
}

#[test]
fn refuses_what_it_cannot_do_and_leaves_no_file() {
    let dir = TempDir::new("refuse");
    let (inp, out) = (dir.path("in.pcap"), dir.path("out.pcap"));
    let err = |spec: &str, rx, tx| open(spec, rx, tx).err().unwrap().to_string();

    // A missing replay file is named; the recording it was paired with is not made.
    let e = err(
        &format!("pcap:rx={},tx={}", inp.display(), out.display()),
        true,
        true,
    );
    assert!(
        e.starts_with(&inp.display().to_string()) && e.contains("cannot open"),
        "{e}"
    );
    assert!(!out.exists());

    // Not a capture file; a link type other than Ethernet.
    std::fs::write(&inp, b"hello, not a capture file").unwrap();
    let e = err(&format!("pcap:{}", inp.display()), true, false);
    assert!(e.contains("not a pcap or pcapng capture file"), "{e}");
    let mut raw_ip = Vec::new();
    let iface = Interface {
        link_type: 101,
        snaplen: 65535,
        name: None,
    };
    Format::Pcap.file_header(&iface, &mut raw_ip);
    std::fs::write(&inp, raw_ip).unwrap();
    let e = err(&format!("pcap:{}", inp.display()), true, false);
    assert!(e.contains("link type 101 is not supported"), "{e}");

    // One file both ways, and a bare file for a tool that does both.
    write_capture(&inp, Format::Pcap, 3, 0);
    let e = err(&format!("pcap:rx={0},tx={0}", inp.display()), true, true);
    assert!(e.contains("the same file"), "{e}");
    let e = err(&format!("pcap:{}", inp.display()), true, true);
    assert!(e.contains("pcap:rx=IN,tx=OUT"), "{e}");
    let e = err(&format!("pcap:tx={}", out.display()), true, false);
    assert!(
        e.contains("this tool receives on the port and the spec names no file"),
        "{e}"
    );
    assert!(!out.exists());
    assert_eq!(
        CaptureReader::open(&inp)
            .unwrap()
            .next_record()
            .unwrap()
            .unwrap()
            .data,
        &packet(0)[..]
    );

    // A recording that cannot take even its header; the device is left alone.
    let e = err("pcap:/dev/full", false, true);
    assert!(
        e.contains("/dev/full: write the capture file's header"),
        "{e}"
    );
    assert!(Path::new("/dev/full").exists());

    // A pace for a port that replays nothing.
    let e = err(&format!("pcap:tx={},pace=2", out.display()), false, true);
    assert!(e.contains("this port replays no file"), "{e}");
    assert!(!out.exists());

    // Malformed specs never reach the backend.
    for bad in ["pcap:", "pcap:rx=", "pcap:rx=a,rx=b", "pcap:in.pcap,pace=0"] {
        let e = bad.parse::<PortSpec>().unwrap_err().to_string();
        assert!(e.contains("expected pcap:FILE"), "{bad}: {e}");
    }
}

#[test]
fn a_truncated_file_delivers_what_it_has_then_fails() {
    let dir = TempDir::new("truncated");
    let path = dir.path("cut.pcap");
    write_capture(&path, Format::Pcap, 10, 0);
    let whole = std::fs::read(&path).unwrap();
    std::fs::write(&path, &whole[..whole.len() - 5]).unwrap();
    let mut port = open(&format!("pcap:{}", path.display()), true, false).unwrap();
    let mut batch = Batch::with_capacity(64);
    assert_eq!(port.rx_burst(&mut batch).unwrap(), 9);
    port.release(&mut batch);
    let e = port.rx_burst(&mut batch).unwrap_err().to_string();
    assert!(e.contains("cut.pcap: truncated"), "{e}");
    assert!(!port.rx_ended(), "a failed file did not end");
}

#[test]
fn sends_to_a_port_without_a_recording_are_counted() {
    let dir = TempDir::new("norecord");
    let inp = dir.path("in.pcap");
    write_capture(&inp, Format::Pcap, 4, 0);
    let mut port = open(&format!("pcap:rx={}", inp.display()), true, true).unwrap();
    assert!(port.info().notes.iter().any(|n| n.contains("tx_error")));
    let mut batch = Batch::with_capacity(8);
    assert_eq!(port.rx_burst(&mut batch).unwrap(), 4);
    assert_eq!(port.tx_burst(&mut batch).unwrap(), 4);
    let stats = port.stats();
    assert_eq!((stats.tx_packets, stats.drops.tx_error), (0, 4));
    assert!(port.audit().unwrap().balanced());
}

#[test]
fn a_paced_replay_keeps_the_recorded_distances() {
    // Five packets 40 ms apart, replayed at twice the pace: 20 ms apart, none sooner.
    let dir = TempDir::new("pace");
    let path = dir.path("paced.pcap");
    let mut out = Vec::new();
    let iface = Interface {
        link_type: 1,
        snaplen: 65535,
        name: None,
    };
    Format::Pcap.file_header(&iface, &mut out);
    let ts = |i: u64| 1_000_000_000 + i * 40_000_000;
    for i in 0..5 {
        Format::Pcap.record(&mut out, ts(i), &packet(i as usize), 60);
    }
    std::fs::write(&path, out).unwrap();

    let mut port = open(&format!("pcap:{},pace=2", path.display()), true, false).unwrap();
    let mut batch = Batch::with_capacity(16);
    let start = Instant::now();
    let mut arrivals = Vec::new();
    while !port.rx_ended() {
        let n = port.rx_burst(&mut batch).unwrap();
        let at = start.elapsed();
        for i in 0..n {
            arrivals.push((at, batch.meta(i).ts_ns));
        }
        port.release(&mut batch);
        let audit = port.audit().unwrap();
        assert!(audit.balanced(), "{audit:?}");
        if n > 0 && arrivals.len() < 5 {
            // The next packet is read and waits for its time in a frame of its own.
            assert_eq!((audit.rx, audit.application), (1, 0), "{audit:?}");
        }
        if n == 0 {
            port.wait_rx(Duration::from_millis(100)).unwrap();
        }
    }
    assert_eq!(arrivals.len(), 5);
    for (i, (at, got_ts)) in arrivals.iter().enumerate() {
        assert_eq!(*got_ts, ts(i as u64), "packet {i} keeps its recorded time");
        assert!(
            *at >= Duration::from_millis(20 * i as u64),
            "packet {i} came {at:?} after the first"
        );
    }
    assert!(arrivals[4].0 < Duration::from_secs(2), "{arrivals:?}");
    assert_eq!(port.stats().rx_packets, 5);
}

/// A pcap port that takes chains, in 2048-byte frames (64 of them).
fn open_chains(spec: &str, rx: bool, tx: bool) -> PcapPort {
    let spec: PortSpec = spec.parse().unwrap();
    let opts = PortOptions {
        multi_buffer: true,
        ..opts(rx, tx)
    };
    PcapPort::open(&spec, &opts).unwrap()
}

/// A capture file of one record of each size, `gap_ns` apart, record `i` filled by
/// `packet_of`.
fn write_sizes(path: &Path, sizes: &[usize], gap_ns: u64) {
    let mut out = Vec::new();
    let iface = Interface {
        link_type: 1,
        snaplen: 262_144,
        name: None,
    };
    Format::Pcap.file_header(&iface, &mut out);
    for (i, &len) in sizes.iter().enumerate() {
        let p = packet_of(i, len);
        Format::Pcap.record(&mut out, 1_000_000_000 + i as u64 * gap_ns, &p, len as u32);
    }
    std::fs::write(path, out).unwrap();
}

fn packet_of(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|k| ((i * 13 + k) % 251) as u8).collect()
}

#[test]
fn records_larger_than_a_frame_replay_and_record_as_chains() {
    let dir = TempDir::new("chains");
    let (input, output) = (dir.path("in.pcap"), dir.path("out.pcap"));
    // 64 frames of 2048 bytes: a chain may take 32, so 70000 bytes is too many.
    let sizes = [60usize, 2048, 2049, 9000, 20_000, 70_000, 100];
    write_sizes(&input, &sizes, 1);
    let spec = format!("pcap:rx={},tx={}", input.display(), output.display());
    let mut port = open_chains(&spec, true, true);
    assert_eq!(port.info().multi_buffer, Some(64));
    let mut batch = Batch::with_capacity(16);
    let mut got = Vec::new();
    while !port.rx_ended() {
        port.rx_burst(&mut batch).unwrap();
        for i in 0..batch.len() {
            got.push((batch.packet_len(i) as usize, batch.more(i) + 1));
        }
        // Sent on as it came: recorded whole.
        port.tx_burst(&mut batch).unwrap();
    }
    port.flush().unwrap();
    let kept = [60usize, 2048, 2049, 9000, 20_000, 100];
    let frames: Vec<usize> = kept.iter().map(|l| l.div_ceil(2048)).collect();
    assert_eq!(got, kept.iter().copied().zip(frames).collect::<Vec<_>>());
    let s = port.stats();
    assert_eq!((s.rx_packets, s.tx_packets), (6, 6), "{s:?}");
    assert_eq!(s.drops.rx_invalid_desc, 1, "the record too large: {s:?}");
    assert!(port.audit().unwrap().balanced());
    assert_eq!(port.audit().unwrap().application, 0);
    drop(port);
    let mut reader = CaptureReader::open(&output).unwrap();
    let mut recorded = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        recorded.push(r.data.to_vec());
    }
    let want: Vec<Vec<u8>> = [0, 1, 2, 3, 4, 6]
        .iter()
        .map(|&i| packet_of(i, sizes[i]))
        .collect();
    assert!(recorded == want, "every byte recorded");
}

#[test]
fn a_paced_chain_waits_in_its_frames() {
    let dir = TempDir::new("pacedchain");
    let input = dir.path("in.pcap");
    write_sizes(&input, &[9000, 9000], 20_000_000);
    let spec = format!("pcap:{},pace=1", input.display());
    let mut port = open_chains(&spec, true, false);
    let mut batch = Batch::with_capacity(16);
    let mut lens = Vec::new();
    let mut held = 0;
    while !port.rx_ended() {
        port.rx_burst(&mut batch).unwrap();
        lens.extend((0..batch.len()).map(|i| batch.packet_len(i)));
        port.release(&mut batch);
        let audit = port.audit().unwrap();
        assert!(audit.balanced(), "{audit:?}");
        if audit.rx > 0 {
            // The second packet, read before its time, waits in all five of its frames.
            assert_eq!(audit.rx, 5, "{audit:?}");
            held += 1;
        }
        port.wait_rx(Duration::from_millis(1)).unwrap();
    }
    assert!(held > 0, "the second packet was held for its time");
    assert_eq!(lens, vec![9000, 9000]);
    assert_eq!(port.audit().unwrap().application, 0);
}
