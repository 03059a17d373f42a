//! The pipe backend (`pipe:NAME`) between processes: a sender and a receiver meet on a
//! pipe by name and every packet crosses, exactly; a second sender takes the place of one
//! that left; gen feeds a capture whose file tcpdump, tshark and capinfos judge; the switch
//! forwards from one pipe to another.

mod common;
use common::pcaps::{TempDir, judge};
use common::*;

/// A pipe name of this test run's own.
fn pipe(tag: &str) -> String {
    format!("pipe:t{}-{tag}", std::process::id())
}

/// Removes a pipe's files when dropped, should a test fail with its processes killed (the
/// last end out removes them otherwise, which the tests check first).
struct PipeFiles(Vec<String>);

impl PipeFiles {
    fn of(ports: &[&str]) -> PipeFiles {
        PipeFiles(ports.iter().map(|p| file_of(p)).collect())
    }
}

impl Drop for PipeFiles {
    fn drop(&mut self) {
        for f in &self.0 {
            for suffix in ["", ".bell0", ".bell1"] {
                let _ = std::fs::remove_file(format!("{f}{suffix}"));
            }
        }
    }
}

/// The file under /dev/shm of port `pipe:NAME`.
fn file_of(port: &str) -> String {
    format!("/dev/shm/wirespeed-{}", port.replace(':', "-"))
}

#[test]
fn txpush_into_rxdrop_across_processes_loses_nothing() {
    let port = pipe("push");
    let _files = PipeFiles::of(&[&port]);
    let mut rx = spawn(&[
        "bench",
        "rxdrop",
        "--port",
        &port,
        "--count",
        "300000",
        "--duration",
        "30",
        "--json",
    ]);
    rx.wait_ready();
    let tx = run_json_here(&[
        "bench", "txpush", "--port", &port, "--count", "300000", "--json", "-q",
    ]);
    assert_eq!(tx["backend"], "pipe", "{tx}");
    assert_eq!(tx["packets"].as_u64(), Some(300_000), "{tx}");
    assert_eq!(tx["drops_total"].as_u64(), Some(0), "{tx}");
    assert_frames_balanced(&tx);
    let (j, log) = rx.finish();
    assert_eq!(j["packets"].as_u64(), Some(300_000), "{j} {log}");
    assert_eq!(j["bytes"].as_u64(), Some(300_000 * 60), "{j}");
    assert_eq!(j["drops_total"].as_u64(), Some(0), "{j}");
    assert_frames_balanced(&j);
    let file = file_of(&port);
    assert!(!exists(&file), "the last end out removes {file}");
}

#[test]
fn a_second_sender_takes_the_place_of_the_first() {
    let port = pipe("again");
    let _files = PipeFiles::of(&[&port]);
    let mut rx = spawn(&[
        "bench",
        "rxdrop",
        "--port",
        &port,
        "--count",
        "100000",
        "--duration",
        "30",
        "--json",
    ]);
    rx.wait_ready();
    for _ in 0..2 {
        let tx = run_json_here(&[
            "bench", "txpush", "--port", &port, "--count", "50000", "--json", "-q",
        ]);
        assert_eq!(tx["packets"].as_u64(), Some(50_000), "{tx}");
        // The receiver has taken all of them before the sender leaves (its drain).
        assert_frames_balanced(&tx);
    }
    let (j, log) = rx.finish();
    assert_eq!(j["packets"].as_u64(), Some(100_000), "{j} {log}");
    assert_eq!(j["drops_total"].as_u64(), Some(0), "{j}");
}

#[test]
fn gen_into_capture_over_a_pipe_makes_a_file_the_tools_count_exactly() {
    let port = pipe("cap");
    let _files = PipeFiles::of(&[&port]);
    let dir = TempDir::new("pipe");
    let file = dir.path("p.pcap");
    let mut cap = spawn(&[
        "capture", "--port", &port, "-c", "2000", "-w", &file, "--format", "pcap", "--json",
    ]);
    cap.wait_ready();
    let g = run_json_here(&[
        "gen", "--port", &port, "--count", "2000", "--size", "100", "--json", "-q",
    ]);
    assert_eq!(g["packets"].as_u64(), Some(2000), "{g}");
    let (j, log) = cap.finish();
    assert_eq!(j["written"].as_u64(), Some(2000), "{j} {log}");
    // 100-byte frames are 96 bytes without the FCS.
    assert_eq!(judge(&file), (2000, 2000 * 96));
}

#[test]
fn the_switch_forwards_from_one_pipe_to_another() {
    let (p1, p2) = (pipe("sw1"), pipe("sw2"));
    let _files = PipeFiles::of(&[&p1, &p2]);
    let dir = TempDir::new("pipesw");
    let (file, ctl) = (dir.path("out.pcap"), dir.path("ctl.sock"));
    let (a1, a2) = (format!("1={p1}"), format!("2={p2}"));
    let mut switch = spawn(&[
        "switch", "--port", &a1, "--port", &a2, "--ctl", &ctl, "--json",
    ]);
    switch.wait_ready();
    let out = must(&[
        wirespeed(),
        "ctl",
        "--ctl",
        &ctl,
        "add-flow",
        "in_port=1,actions=output:2",
    ]);
    assert!(out.is_empty(), "{out}");
    let mut cap = spawn(&[
        "capture", "--port", &p2, "-c", "1000", "-w", &file, "--format", "pcap", "--json",
    ]);
    cap.wait_ready();
    let g = run_json_here(&["gen", "--port", &p1, "--count", "1000", "--json", "-q"]);
    assert_eq!(g["packets"].as_u64(), Some(1000), "{g}");
    let (j, log) = cap.finish();
    assert_eq!(j["written"].as_u64(), Some(1000), "{j} {log}");
    assert_eq!(judge(&file), (1000, 1000 * 60));
    let ports = must(&[wirespeed(), "ctl", "--ctl", &ctl, "dump-ports"]);
    assert!(ports.contains("copies=1000"), "{ports}");
    switch.interrupt();
    for p in [&p1, &p2] {
        let file = file_of(p);
        assert!(!exists(&file), "the last end out removes {file}");
    }
}
