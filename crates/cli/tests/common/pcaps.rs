//! Capture files for the capture tests: a mixed set of frames (IPv4/IPv6, TCP/UDP/ICMP/ARP,
//! VLAN-tagged, fragments, truncated), written with our own writer; temporary directories;
//! and the real tools (tcpdump, tshark, capinfos) as judges of what we write.

use std::path::{Path, PathBuf};
use std::process::Command;

use wirespeed_capture::CaptureReader;
use wirespeed_capture::write::{Format, Interface};

/// One packet: timestamp (ns), captured bytes, length on the wire.
pub type Rec = (u64, Vec<u8>, u32);

/// A directory of its own under /tmp, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("wscap-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn path(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes `records` as a capture file with our writer.
pub fn write_capture(path: &str, format: Format, records: &[Rec]) {
    write_capture_of(path, format, 1, records);
}

/// Writes `records` of link type `link_type` as a capture file with our writer.
pub fn write_capture_of(path: &str, format: Format, link_type: u16, records: &[Rec]) {
    let iface = Interface {
        link_type,
        snaplen: 262_144,
        name: Some("test0".to_string()),
    };
    let mut out = Vec::new();
    format.file_header(&iface, &mut out);
    for (ts, data, orig) in records {
        format.record(&mut out, *ts, data, *orig);
    }
    std::fs::write(path, out).unwrap();
}

/// Every record of a capture file, read with our reader.
pub fn read_records(path: &str) -> Vec<Rec> {
    let mut r = CaptureReader::open(path).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap_or_else(|e| panic!("{e}")) {
        out.push((rec.ts_ns, rec.data.to_vec(), rec.orig_len));
    }
    out
}

pub fn run_tool(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .env("TZ", "UTC")
        .output()
        .unwrap_or_else(|e| panic!("{} (install it: make deps): {e}", args[0]));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// tcpdump, tshark and capinfos each read the whole file without complaint; returns the
/// packets and captured bytes they agree on (capinfos counts wire bytes: checked too).
pub fn judge(path: &str) -> (u64, u64) {
    let (ok, out, err) = run_tool(&["tcpdump", "-n", "-r", path]);
    assert!(ok && !err.contains("truncated"), "tcpdump -r {path}: {err}");
    let tcpdump_packets = out.lines().count() as u64;

    let (ok, out, err) = run_tool(&[
        "tshark",
        "-r",
        path,
        "-T",
        "fields",
        "-e",
        "frame.cap_len",
        "-e",
        "frame.len",
    ]);
    assert!(
        ok && !err.contains("cut short") && !err.contains("rror"),
        "tshark -r {path}: {err}"
    );
    let (mut tshark_packets, mut captured, mut wire) = (0u64, 0u64, 0u64);
    for l in out.lines() {
        let mut f = l.split_whitespace().map(|v| v.parse::<u64>().unwrap());
        captured += f.next().unwrap();
        wire += f.next().unwrap();
        tshark_packets += 1;
    }

    let (ok, out, err) = run_tool(&["capinfos", "-T", "-r", "-M", "-c", "-d", path]);
    assert!(ok, "capinfos {path}: {err}");
    let fields: Vec<&str> = out.trim().split('\t').collect();
    let capinfos_packets: u64 = fields[1].parse().unwrap();
    let capinfos_wire_bytes: u64 = fields[2].parse().unwrap();

    assert_eq!(
        tcpdump_packets, tshark_packets,
        "{path}: tcpdump and tshark disagree"
    );
    assert_eq!(
        (tshark_packets, wire),
        (capinfos_packets, capinfos_wire_bytes),
        "{path}: tshark and capinfos disagree"
    );
    (tshark_packets, captured)
}

/// isb_ifrecv and isb_ifdrop of the interface statistics block that ends a pcapng file.
pub fn isb_counts(bytes: &[u8]) -> (u64, u64) {
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap());
    let total = u32_at(bytes.len() - 4) as usize;
    let start = bytes.len() - total;
    assert_eq!(
        u32_at(start),
        5,
        "the file does not end with an interface statistics block"
    );
    let (mut at, mut found) = (start + 20, (None, None));
    while at + 4 <= bytes.len() - 4 {
        let code = u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        let len = u16::from_le_bytes([bytes[at + 2], bytes[at + 3]]) as usize;
        let value = || u64::from_le_bytes(bytes[at + 4..at + 12].try_into().unwrap());
        match code {
            0 => break,
            4 => found.0 = Some(value()),
            5 => found.1 = Some(value()),
            _ => {}
        }
        at += 4 + len.next_multiple_of(4);
    }
    (found.0.expect("isb_ifrecv"), found.1.expect("isb_ifdrop"))
}

/// The packets `tcpdump -r input -w - EXPR` selects (libpcap's own filter), as records.
pub fn tcpdump_select(input: &str, expr: &str, dir: &TempDir) -> Vec<Rec> {
    let out = dir.path("tcpdump-selected.pcap");
    let (ok, _, err) = run_tool(&["tcpdump", "-r", input, "-w", &out, expr]);
    assert!(ok, "tcpdump -r {input} -w {out} {expr}: {err}");
    let recs = read_records(&out);
    let _ = std::fs::remove_file(&out);
    recs
}

/// A small deterministic random source (no dependency, same frames every run).
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.next() as usize % items.len()]
    }
}

pub fn eth(
    dst: [u8; 6],
    src: [u8; 6],
    tags: &[(u16, u16)],
    ethertype: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = Vec::with_capacity(18 + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    for &(tpid, tci) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

pub fn ipv4(
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    frag: u16,
    options: usize,
    payload: &[u8],
) -> Vec<u8> {
    let ihl = 5 + options / 4;
    let total = (ihl * 4 + payload.len()) as u16;
    let mut h = vec![0x40 | ihl as u8, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0x12, 0x34]);
    h.extend_from_slice(&frag.to_be_bytes());
    h.extend_from_slice(&[64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend(std::iter::repeat_n(1u8, options)); // NOP options
    h.extend_from_slice(payload);
    h
}

pub fn ipv6(src: [u16; 8], dst: [u16; 8], next: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    for w in src.iter().chain(dst.iter()) {
        h.extend_from_slice(&w.to_be_bytes());
    }
    h.extend_from_slice(payload);
    h
}

pub fn tcp(sport: u16, dport: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&1000u32.to_be_bytes());
    h.extend_from_slice(&2000u32.to_be_bytes());
    h.extend_from_slice(&[5 << 4, flags, 0x10, 0, 0, 0, 0, 0]);
    h.extend_from_slice(payload);
    h
}

pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(payload);
    h
}

pub fn icmp(kind: u8, code: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![kind, code, 0, 0, 0, 1, 0, 1];
    h.extend_from_slice(payload);
    h
}

pub fn arp(op: u16, sha: [u8; 6], spa: [u8; 4], tpa: [u8; 4]) -> Vec<u8> {
    let mut h = vec![0, 1, 0x08, 0x00, 6, 4];
    h.extend_from_slice(&op.to_be_bytes());
    h.extend_from_slice(&sha);
    h.extend_from_slice(&spa);
    h.extend_from_slice(&[0; 6]);
    h.extend_from_slice(&tpa);
    h
}

pub const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
pub const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
pub const BROADCAST: [u8; 6] = [0xff; 6];

/// The mixed frames: every combination the filter tests need, whole (sendable on a veth).
pub fn mixed_frames(count: usize) -> Vec<Vec<u8>> {
    let mut rng = Lcg(0x5eed);
    let v4 = [
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        [192, 168, 1, 10],
        [172, 16, 5, 4],
        [10, 0, 1, 7],
    ];
    let v4_dst = [
        [10, 0, 0, 2],
        [10, 0, 0, 1],
        [192, 168, 1, 255],
        [224, 0, 0, 251],
        [255, 255, 255, 255],
    ];
    let v6 = [
        [0xfd00, 0, 0, 0, 0, 0, 0, 1],
        [0xfd00, 0, 0, 0, 0, 0, 0, 2],
        [0xfe80, 0, 0, 0, 0, 0, 0, 1],
        [0xff02, 0, 0, 0, 0, 0, 0, 0xfb],
    ];
    let ports = [9u16, 22, 53, 80, 443, 1024, 5353, 8080, 40000];
    let tcp_flags = [0x02u8, 0x12, 0x10, 0x11, 0x04, 0x18, 0x29];
    let vlans: [&[(u16, u16)]; 5] = [
        &[],
        &[],
        &[(0x8100, 100)],
        &[(0x8100, 0x2000 | 200)],
        &[(0x88a8, 300), (0x8100, 100)],
    ];
    let mut frames = Vec::with_capacity(count);
    for i in 0..count {
        let tags = rng.pick(&vlans);
        let payload = vec![(i % 251) as u8; rng.pick(&[0usize, 6, 18, 100, 300, 1000, 1400])];
        let (sp, dp) = (rng.pick(&ports), rng.pick(&ports));
        let dst_mac = if i % 13 == 0 { BROADCAST } else { MAC_B };
        let frame = match i % 10 {
            0..=2 => {
                let l4 = tcp(sp, dp, rng.pick(&tcp_flags), &payload);
                let (frag, opts) = (
                    if i % 37 == 0 { 0x0020 } else { 0x4000 },
                    if i % 11 == 0 { 4 } else { 0 },
                );
                eth(
                    dst_mac,
                    MAC_A,
                    tags,
                    0x0800,
                    &ipv4(rng.pick(&v4), rng.pick(&v4_dst), 6, frag, opts, &l4),
                )
            }
            3..=4 => {
                let l4 = udp(sp, dp, &payload);
                eth(
                    dst_mac,
                    MAC_A,
                    tags,
                    0x0800,
                    &ipv4(rng.pick(&v4), rng.pick(&v4_dst), 17, 0x4000, 0, &l4),
                )
            }
            5 => {
                let l4 = icmp(rng.pick(&[8u8, 0, 3, 11]), 0, &payload);
                eth(
                    dst_mac,
                    MAC_A,
                    tags,
                    0x0800,
                    &ipv4(rng.pick(&v4), rng.pick(&v4_dst), 1, 0, 0, &l4),
                )
            }
            6 => {
                let l4 = udp(sp, dp, &payload);
                eth(
                    MAC_B,
                    MAC_A,
                    tags,
                    0x86dd,
                    &ipv6(rng.pick(&v6), rng.pick(&v6), 17, &l4),
                )
            }
            7 => {
                let l4 = tcp(sp, dp, rng.pick(&tcp_flags), &payload);
                eth(
                    MAC_B,
                    MAC_A,
                    tags,
                    0x86dd,
                    &ipv6(rng.pick(&v6), rng.pick(&v6), 6, &l4),
                )
            }
            8 => {
                let op = rng.pick(&[1u16, 2]);
                let body = arp(op, MAC_A, rng.pick(&v4), rng.pick(&v4_dst));
                eth(
                    if op == 1 { BROADCAST } else { MAC_B },
                    MAC_A,
                    tags,
                    0x0806,
                    &body,
                )
            }
            _ => match i % 3 {
                0 => eth(
                    MAC_B,
                    MAC_A,
                    tags,
                    0x0800,
                    &ipv4(rng.pick(&v4), rng.pick(&v4_dst), 47, 0, 0, &payload),
                ),
                1 => eth(
                    MAC_B,
                    MAC_A,
                    tags,
                    0x86dd,
                    &ipv6(rng.pick(&v6), rng.pick(&v6), 58, &icmp(128, 0, &payload)),
                ),
                _ => eth(BROADCAST, MAC_A, tags, 0x88cc, &payload),
            },
        };
        frames.push(frame);
    }
    frames
}

/// The mixed frames as records one millisecond apart, some cut short (captured bytes fewer
/// than the wire length, as a snap length leaves them).
pub fn mixed_records(count: usize) -> Vec<Rec> {
    let mut rng = Lcg(0xcafe);
    mixed_frames(count)
        .into_iter()
        .enumerate()
        .map(|(i, mut f)| {
            let orig = f.len() as u32;
            if i % 7 == 3 {
                f.truncate(rng.pick(&[10usize, 14, 20, 30, 38, 50, 60]).min(f.len()));
            }
            (1_700_000_000_000_000_000 + i as u64 * 1_000_000, f, orig)
        })
        .collect()
}

/// Runs `wirespeed ARGS` in `dir` with `stdin` (a file; none: empty) as its standard input;
/// it must succeed. Its standard output as bytes, and the JSON summary: the last line of its
/// standard error that starts with `{`.
pub fn run_piped(
    dir: &TempDir,
    stdin: Option<&str>,
    args: &[&str],
) -> (Vec<u8>, serde_json::Value) {
    let input = match stdin {
        Some(path) => std::process::Stdio::from(std::fs::File::open(path).unwrap()),
        None => std::process::Stdio::null(),
    };
    let out = std::process::Command::new(super::wirespeed())
        .current_dir(&dir.0)
        .args(args)
        .stdin(input)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "wirespeed {args:?}: {err}");
    let last = err
        .lines()
        .rfind(|l| l.starts_with('{'))
        .unwrap_or_default();
    let json = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {err}"));
    (out.stdout, json)
}

/// Runs `wirespeed ARGS` (no namespace) and returns status, stdout, stderr.
pub fn wirespeed_out(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(super::wirespeed())
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn exists_path(p: &str) -> bool {
    Path::new(p).exists()
}
