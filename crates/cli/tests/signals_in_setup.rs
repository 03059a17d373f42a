//! A signal ends a tool promptly whatever it is doing, set-up included, with nothing left
//! behind. (Before: the first SIGTERM waited for the set-up to finish: a filter libpcap's
//! optimiser never finishes kept `capture` going for ever, and a 4 GiB buffer area took
//! 7.5 s.)

mod common;

use std::time::{Duration, Instant};

use common::*;

/// SIGTERM to `tool` after `after`: how long it took to exit, its status, its stderr.
fn terminate_after(tool: Running, after: Duration) -> (Duration, Option<i32>, String) {
    std::thread::sleep(after);
    must(&["kill", "-TERM", &tool.pid().to_string()]);
    let signalled = Instant::now();
    let (code, _, stderr) = tool.exit();
    (signalled.elapsed(), code, stderr)
}

/// A filter of 500 `or port N` terms from `first` on: libpcap's optimiser does not finish
/// it. Each test starts from its own port, so its compiler is told from another test's.
fn endless_filter(first: u32) -> String {
    (first..first + 500)
        .map(|p| format!("port {p}"))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// No `compile-filter` child compiling `filter` is left running (each process's whole
/// command line, from /proc).
fn no_compiler_left(filter: &str) {
    let left = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|cmdline| String::from_utf8_lossy(&cmdline).replace('\0', " "))
        .filter(|l| l.contains("compile-filter") && l.trim_end().ends_with(filter))
        .count();
    assert_eq!(left, 0, "a compiler of ours is still running");
}

/// A capture file of one packet, for `capture -r`.
fn one_packet_file(name: &str) -> ScratchFile {
    let file = ScratchFile::new(name);
    let j = run_json_here(&[
        "gen",
        "--port",
        &format!("pcap:{}", &*file),
        "--count",
        "1",
        "--json",
    ]);
    assert_eq!(j["packets"].as_u64(), Some(1), "{j}");
    file
}

#[test]
fn sigterm_while_a_filter_compiles_ends_the_capture_at_once() {
    let input = one_packet_file("sis-in.pcap");
    let output = ScratchFile::new("sis-out.pcap");
    let filter = endless_filter(1);
    let tool = spawn(&["capture", "-r", &input, "-w", &output, &filter]);
    let (took, code, stderr) = terminate_after(tool, Duration::from_millis(500));
    assert!(took < Duration::from_secs(2), "{took:?}: {stderr}");
    assert_eq!(code, Some(143), "{stderr}");
    assert!(
        stderr.contains("stopped while compiling the filter"),
        "{stderr}"
    );
    assert!(!exists(&output), "the output was made");
    no_compiler_left(&filter);
}

#[test]
fn a_filter_libpcap_cannot_finish_is_refused() {
    let input = one_packet_file("sir-in.pcap");
    let output = ScratchFile::new("sir-out.pcap");
    let filter = endless_filter(1001);
    let out = std::process::Command::new(wirespeed())
        .args(["capture", "-r", &input, "-w", &output, &filter])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("libpcap did not finish compiling the filter within 10 s"),
        "{stderr}"
    );
    assert!(!exists(&output), "the output was made");
    no_compiler_left(&filter);
}

#[test]
fn sigterm_while_a_4_gib_umem_is_set_up_ends_at_once() {
    let net = NetPair::new("siu");
    let port = format!("xdp:{}", net.b);
    // 1,048,576 frames of 4 KiB: seconds of filling in pages.
    let args = [
        "bench",
        "rxdrop",
        "--port",
        &port,
        "--frames",
        "1048576",
        "--frame-size",
        "4096",
        "--duration",
        "30",
        "--json",
        "-q",
    ];
    let tool = spawn_in(&net.ns_b, &args);
    let (took, code, stderr) = terminate_after(tool, Duration::from_millis(300));
    assert!(took < Duration::from_secs(2), "{took:?}: {stderr}");
    assert_eq!(code, Some(143), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "open {port}: {}: stopped while it was being set up",
            net.b
        )),
        "{stderr}"
    );
    net.assert_no_xdp();
}

/// The same with a thread per queue (`--cpus`): their ports are given up on as one is (the
/// capture set them all up, made its file and exited 0).
#[test]
fn sigterm_while_the_threads_ports_are_set_up_ends_at_once() {
    let net = NetPair::with_queues("sit", 2);
    let port = format!("xdp:{}@all", net.b);
    let output = ScratchFile::new("sit-out.pcap");
    let args = [
        "capture",
        "--port",
        &port,
        "--cpus",
        "0,1",
        "--frames",
        "1048576",
        "--frame-size",
        "4096",
        "-w",
        &output,
    ];
    let tool = spawn_in(&net.ns_b, &args);
    let (took, code, stderr) = terminate_after(tool, Duration::from_millis(300));
    assert!(took < Duration::from_secs(2), "{took:?}: {stderr}");
    assert_eq!(code, Some(143), "{stderr}");
    assert!(
        stderr.contains("stopped while it was being set up"),
        "{stderr}"
    );
    assert!(!exists(&output), "the output was made");
    net.assert_no_xdp();
}
