//! A tool whose interface is deleted under it ends with a clear error and a non-zero exit,
//! after its summary (and `--json`), with what it wrote whole; senders, the kernel engines
//! among them, count what they sent; a replay cut short reports what it did replay.
//! (Before: receivers printed 0.000 Mpps until their duration ran out, then exited 0; gen
//! and recv exited 1 without a summary.)

mod common;

use std::time::{Duration, Instant};

use common::pcaps::judge;
use common::*;

/// Sends `count` test frames from A to B over AF_PACKET, 20,000 a second.
fn send_from_a(net: &NetPair, count: u32) {
    let port = format!("packet:{}", net.a);
    let count_text = count.to_string();
    let args = [
        "gen",
        "--port",
        &port,
        "--count",
        &count_text,
        "--rate",
        "20000",
        "--json",
        "-q",
    ];
    let j = run_json(&net.ns_a, &args);
    assert_eq!(j["packets"].as_u64(), Some(u64::from(count)), "{j}");
}

/// Deletes B's end (and with it the pair), then waits for `tool` to exit: its status, its
/// JSON summary and its stderr. It must notice within a few seconds.
fn delete_b_and_wait(net: &NetPair, tool: Running) -> (Option<i32>, serde_json::Value, String) {
    must(&["ip", "-n", &net.ns_b, "link", "del", &net.b]);
    let deleted = Instant::now();
    let (code, stdout, stderr) = tool.exit();
    let took = deleted.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "{took:?} to notice: {stderr}"
    );
    let json = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON object ({e}): {stdout}\n{stderr}"));
    (code, json, stderr)
}

/// Runs a receiving tool on B (`args`, with IFACE standing for B's interface), sends it
/// 100 frames, deletes the interface: the tool ends with the error, after a summary that
/// counts the 100 under `received`. Returns the JSON and the scratch directory's files.
fn receiver_ends_when_its_interface_goes(
    tag: &str,
    args: &[&str],
    received: &str,
) -> serde_json::Value {
    let net = NetPair::new(tag);
    let args: Vec<String> = args.iter().map(|a| a.replace("IFACE", &net.b)).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut tool = spawn_in(&net.ns_b, &args);
    tool.wait_ready();
    send_from_a(&net, 100);
    std::thread::sleep(Duration::from_millis(300));
    let (code, json, stderr) = delete_b_and_wait(&net, tool);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(json[received].as_u64(), Some(100), "{json}");
    let error = json["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error: {json}"));
    assert!(error.contains("the interface went away"), "{error}");
    assert!(
        stderr.contains(&format!("wirespeed: error: {error}")),
        "{stderr}"
    );
    json
}

#[test]
fn bench_rxdrop_ends_when_its_interface_goes() {
    let args = [
        "bench",
        "rxdrop",
        "--port",
        "xdp:IFACE",
        "--duration",
        "60",
        "--json",
    ];
    receiver_ends_when_its_interface_goes("ig1", &args, "packets");
}

#[test]
fn recv_ends_when_its_interface_goes() {
    let args = ["recv", "--port", "xdp:IFACE", "--duration", "60", "--json"];
    let j = receiver_ends_when_its_interface_goes("ig2", &args, "packets");
    assert_eq!(j["generators"][0]["received"].as_u64(), Some(100), "{j}");
}

#[test]
fn capture_ends_when_its_interface_goes_and_its_file_is_whole() {
    // -i IFACE: AF_XDP on every queue, as tcpdump -i takes the whole interface.
    for (tag, port) in [
        ("ig3", ["-i", "IFACE"]),
        ("ig4", ["--port", "packet:IFACE"]),
    ] {
        let file = ScratchFile::new(&format!("{tag}.pcap"));
        let args = ["capture", port[0], port[1], "-w", &file, "--json"];
        let j = receiver_ends_when_its_interface_goes(tag, &args, "written");
        assert_eq!(j["received"].as_u64(), Some(100), "{j}");
        assert_eq!(judge(&file).0, 100, "{port:?}");
    }
}

/// Runs a sending tool on A (`args`, with IFACE standing for A's interface), deletes the
/// interface after half a second: the tool ends with the error, after a summary that counts
/// what it sent under `sent`.
fn sender_reports_what_it_sent_when_its_interface_goes(tag: &str, args: &[&str], sent: &str) {
    let net = NetPair::new(tag);
    let args: Vec<String> = args.iter().map(|a| a.replace("IFACE", &net.a)).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut sender = spawn_in(&net.ns_a, &args);
    sender.wait_ready();
    std::thread::sleep(Duration::from_millis(500));
    must(&["ip", "-n", &net.ns_a, "link", "del", &net.a]);
    let (code, stdout, stderr) = sender.exit();
    assert_eq!(code, Some(1), "{args:?}: {stderr}");
    let j: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("no summary ({e}): {stdout}\n{stderr}"));
    assert!(j[sent].as_u64().unwrap_or(0) > 0, "{args:?}: {j}");
    let error = j["error"].as_str().unwrap_or_default();
    assert!(error.contains("the interface went away"), "{args:?}: {j}");
    // The error is the reason the run fell short, not the port's or the CPU's speed.
    assert!(
        !stderr.contains("the asked rate was not reached"),
        "{stderr}"
    );
}

#[test]
fn gen_reports_what_it_sent_when_its_interface_goes() {
    let args = [
        "gen",
        "--port",
        "xdp:IFACE",
        "--rate",
        "10000",
        "--duration",
        "60",
        "--json",
        "-q",
    ];
    sender_reports_what_it_sent_when_its_interface_goes("ig5", &args, "packets");
}

/// An interface taken down under gen ends the run with that error, and gen does not also
/// blame the port's or the CPU's speed for the rate it then fell short of.
#[test]
fn gen_stopped_by_a_link_going_down_says_why_and_only_that() {
    let net = NetPair::new("igd");
    let port = format!("xdp:{}", net.a);
    let mut sender = spawn_in(
        &net.ns_a,
        &[
            "gen",
            "--port",
            &port,
            "--rate",
            "2000",
            "--duration",
            "4",
            "--json",
            "-q",
        ],
    );
    sender.wait_ready();
    std::thread::sleep(Duration::from_millis(1000));
    must(&["ip", "-n", &net.ns_a, "link", "set", &net.a, "down"]);
    let (code, stdout, stderr) = sender.exit();
    assert_eq!(code, Some(1), "{stderr}");
    let j: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(
        j["error"]
            .as_str()
            .unwrap_or_default()
            .contains("the interface is down"),
        "{j}"
    );
    assert!(
        !stderr.contains("the asked rate was not reached"),
        "{stderr}"
    );
}

#[test]
fn bench_txpush_reports_what_it_sent_when_its_interface_goes() {
    let args = [
        "bench",
        "txpush",
        "--port",
        "xdp:IFACE",
        "--duration",
        "60",
        "--json",
        "-q",
    ];
    sender_reports_what_it_sent_when_its_interface_goes("ig7", &args, "packets");
}

/// The kernel engines too (before: the kernel call's raw error, and no summary).
#[test]
fn the_kernel_engines_report_what_they_sent_when_their_interface_goes() {
    let txpush = [
        "bench",
        "txpush",
        "--engine",
        "kernel",
        "--port",
        "xdp:IFACE",
        "--duration",
        "60",
        "--json",
        "-q",
    ];
    sender_reports_what_it_sent_when_its_interface_goes("ig8", &txpush, "packets");
    let generator = [
        "gen",
        "--engine",
        "kernel",
        "--port",
        "xdp:IFACE",
        "--rate",
        "100000",
        "--duration",
        "60",
        "--json",
        "-q",
    ];
    sender_reports_what_it_sent_when_its_interface_goes("ig9", &generator, "packets");
}

#[test]
fn recv_of_a_truncated_file_reports_what_it_replayed() {
    let file = ScratchFile::new("ig6.pcap");
    let made = run_json_here(&[
        "gen",
        "--port",
        &format!("pcap:{}", &*file),
        "--count",
        "10",
        "--json",
    ]);
    assert_eq!(made["packets"].as_u64(), Some(10), "{made}");
    // Cut the last record short.
    let bytes = std::fs::read(&*file).unwrap();
    std::fs::write(&*file, &bytes[..bytes.len() - 5]).unwrap();
    let out = std::process::Command::new(wirespeed())
        .args(["recv", "--port", &format!("pcap:{}", &*file), "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no summary ({e}): {stderr}"));
    assert_eq!(j["packets"].as_u64(), Some(9), "{j}");
    assert_eq!(j["generators"][0]["received"].as_u64(), Some(9), "{j}");
    let error = j["error"].as_str().unwrap_or_default();
    assert!(error.contains("truncated"), "{j}");
}
