//! `capture --cpus`: a pinned receiving thread per CPU, each with its share of the port's
//! queues, all writing one output. Every packet reaches the file, each queue's in the order
//! it arrived, the counts add up and each thread's are its queues' exactly; bad uses are
//! refused before anything is attached.

mod common;

use common::pcaps::*;
use common::*;

/// One capture at a time: two CPUs here, and each capture pins a thread to both.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// gen's frames: 60 bytes without the FCS.
const FRAME_LEN: u64 = 60;

fn n(j: &serde_json::Value, k: &str) -> u64 {
    j[k].as_u64().unwrap_or_else(|| panic!("no {k} in {j}"))
}

/// Sends `counts[q]` frames out of each queue q of A at once (a `gen` per queue, at 100,000
/// a second each, generator id q + 1): veth delivers them on queue q of B, interleaved.
fn send_on_each_queue(net: &NetPair, counts: &[u64]) {
    std::thread::scope(|s| {
        for (q, &count) in counts.iter().enumerate() {
            s.spawn(move || {
                let port = format!("xdp:{}@{q}", net.a);
                let (count, id) = (count.to_string(), (q + 1).to_string());
                let argv = [
                    "gen",
                    "--port",
                    &port,
                    "--count",
                    &count,
                    "--rate",
                    "100000",
                    "--generator-id",
                    &id,
                    "--json",
                    "-q",
                ];
                let tx = run_json(&net.ns_a, &argv);
                assert_eq!(
                    tx["tx_packets"].as_u64(),
                    Some(count.parse().unwrap()),
                    "{tx}"
                );
            });
        }
    });
}

/// Checks that the records hold, for each queue q, exactly the sequence numbers
/// 0..counts[q] of generator q + 1, in that order (the order across queues is not promised).
fn assert_each_queue_in_order(records: &[Rec], counts: &[u64]) {
    let mut next = vec![0u64; counts.len()];
    for (i, (_, data, _)) in records.iter().enumerate() {
        let p = wirespeed_packet::read_test_payload(data)
            .unwrap_or_else(|| panic!("record {i} is not gen's: {data:02x?}"));
        let q = p.generator as usize - 1;
        assert_eq!(p.seq, next[q], "record {i}: queue {q} out of order");
        next[q] += 1;
    }
    assert_eq!(next, counts, "packets of each queue");
}

/// The counts' identities, overall and for each thread; returns the threads.
fn assert_counts_add_up(j: &serde_json::Value) -> Vec<serde_json::Value> {
    assert_eq!(
        n(j, "received"),
        n(j, "filtered_out") + n(j, "matched") + n(j, "after_stop"),
        "{j}"
    );
    assert_eq!(
        n(j, "matched"),
        n(j, "written") + n(j, "dropped_by_writer"),
        "{j}"
    );
    let threads = j["threads"].as_array().expect("threads").clone();
    for key in ["received", "matched", "written", "dropped_by_kernel"] {
        let sum: u64 = threads.iter().map(|t| n(t, key)).sum();
        assert_eq!(sum, n(j, key), "{key}: {j}");
    }
    threads
}

/// A capture of B's two queues with `--cpus 0,1`, `port` and `extra` flags, while queue 0
/// gets 3,000 frames and queue 1 5,000 at once; its counts and log.
fn capture_two_queues(net: &NetPair, port: &str, extra: &[&str]) -> (serde_json::Value, String) {
    let mut argv = vec!["capture", "--port", port, "--cpus", "0,1", "--json"];
    argv.extend_from_slice(extra);
    let mut cap = spawn_in(&net.ns_b, &argv);
    // The notes come after the ready line.
    cap.wait_for("CPU 0: queues 0; CPU 1: queues 1");
    send_on_each_queue(net, &[3_000, 5_000]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    cap.interrupt()
}

fn two_threads_one_file(tag: &str, port: impl Fn(&NetPair) -> String, format: &str) {
    let _one = serial();
    let net = NetPair::with_queues(tag, 2);
    let dir = TempDir::new(tag);
    let file = dir.path(&format!("threads.{format}"));
    let (j, log) = capture_two_queues(&net, &port(&net), &["-w", &file]);
    let threads = assert_counts_add_up(&j);
    assert_eq!(
        (
            n(&j, "received"),
            n(&j, "written"),
            n(&j, "dropped_by_kernel"),
            n(&j, "dropped_by_writer")
        ),
        (8_000, 8_000, 0, 0),
        "{j}\n{log}"
    );
    assert_eq!(threads.len(), 2, "{j}");
    for (t, want) in [(0, 3_000), (1, 5_000)] {
        let th = &threads[t];
        assert_eq!(th["cpu"], t, "{j}");
        assert_eq!(th["queues"], serde_json::json!([t]), "{j}");
        for key in ["received", "matched", "written"] {
            assert_eq!(n(th, key), want, "thread {t} {key}: {j}");
        }
        assert_eq!(n(th, "dropped_by_kernel"), 0, "{j}");
        let busy = th["busy"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&busy), "{j}");
    }
    assert_eq!(judge(&file), (8_000, 8_000 * FRAME_LEN));
    if format == "pcapng" {
        // The statistics at the end: every thread's received, none dropped.
        let isb = isb_counts(&std::fs::read(&file).unwrap());
        assert_eq!(isb, (8_000, 0), "isb_ifrecv and isb_ifdrop");
    }
    assert_each_queue_in_order(&read_records(&file), &[3_000, 5_000]);
    net.assert_no_xdp();
}

#[test]
fn two_threads_write_one_pcapng_each_queue_in_order() {
    two_threads_one_file("ct1", |net| format!("xdp:{}@all", net.b), "pcapng");
}

#[test]
fn two_threads_write_one_pcap_from_an_interface_name() {
    // -i's bare interface name means every queue.
    two_threads_one_file("ct2", |net| net.b.clone(), "pcap");
}

#[test]
fn two_threads_on_a_queue_range() {
    two_threads_one_file("ct3", |net| format!("xdp:{}@0-1", net.b), "pcapng");
}

/// -C with two threads: the files follow each other as with one, none over the size, and
/// together they hold every packet, each queue's in order.
#[test]
fn two_threads_rotate_files_by_size() {
    let _one = serial();
    let net = NetPair::with_queues("ctr", 2);
    let dir = TempDir::new("ctr");
    let file = dir.path("rot.pcap");
    let port = format!("xdp:{}@all", net.b);
    let (j, log) = capture_two_queues(&net, &port, &["-w", &file, "-C", "100k"]);
    assert_counts_add_up(&j);
    assert_eq!(n(&j, "written"), 8_000, "{j}\n{log}");
    let files: Vec<String> = j["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    // 76 bytes a packet in pcap: about 1,350 a file of 100 KiB.
    assert!(files.len() >= 5, "{files:?}");
    let mut all = Vec::new();
    for f in &files {
        let size = std::fs::metadata(f).unwrap().len();
        assert!(size <= 100 << 10, "{f}: {size} bytes");
        let recs = read_records(f);
        assert_eq!(judge(f).0, recs.len() as u64, "{f}");
        all.extend(recs);
    }
    assert_each_queue_in_order(&all, &[3_000, 5_000]);
    net.assert_no_xdp();
}

/// -c with two threads: exactly COUNT packets written, the rest counted after the stop.
#[test]
fn two_threads_stop_at_the_count() {
    let _one = serial();
    let net = NetPair::with_queues("ctc", 2);
    let dir = TempDir::new("ctc");
    let file = dir.path("count.pcapng");
    let port = format!("xdp:{}@all", net.b);
    let argv = [
        "capture", "--port", &port, "--cpus", "0,1", "--json", "-w", &file, "-c", "1000",
    ];
    let mut cap = spawn_in(&net.ns_b, &argv);
    cap.wait_ready();
    send_on_each_queue(&net, &[3_000, 5_000]);
    let (j, log) = cap.finish();
    assert_counts_add_up(&j);
    assert_eq!(n(&j, "written"), 1_000, "{j}\n{log}");
    assert_eq!(judge(&file).0, 1_000);
    net.assert_no_xdp();
}

/// Stopped (SIGSTOP) while each queue gets 2,000 packets, with 256-entry rings: each
/// thread's own spill ring holds what its rings cannot, and nothing is lost or reordered.
#[test]
fn each_thread_s_spill_ring_loses_nothing_while_the_capture_is_stopped() {
    let _one = serial();
    let net = NetPair::with_queues("cts", 2);
    let dir = TempDir::new("cts");
    let file = dir.path("stopped.pcapng");
    let port = format!("xdp:{}@all", net.b);
    let argv = [
        "capture",
        "--port",
        &port,
        "--cpus",
        "0,1",
        "-w",
        &file,
        "--frames",
        "4096",
        "--ring-size",
        "256",
        "--json",
    ];
    let mut cap = spawn_in(&net.ns_b, &argv);
    cap.wait_for("CPU 0: queues 0; CPU 1: queues 1");
    let pid = cap.pid().to_string();
    must(&["kill", "-STOP", &pid]);
    send_on_each_queue(&net, &[2_000, 2_000]);
    must(&["kill", "-CONT", &pid]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (j, log) = cap.interrupt();
    let threads = assert_counts_add_up(&j);
    assert_eq!(
        (
            n(&j, "received"),
            n(&j, "dropped_by_kernel"),
            n(&j, "written")
        ),
        (4_000, 0, 4_000),
        "{j}\n{log}"
    );
    for (t, th) in threads.iter().enumerate() {
        assert_eq!(n(th, "received"), 2_000, "thread {t}: {j}");
        // The RX ring held at most 256 - 128 (the program keeps a NAPI poll's room).
        assert!(n(th, "spilled") >= 2_000 - 128, "thread {t}: {j}");
        let drops = ethtool_stat(&net.ns_b, &net.b, &format!("rx_queue_{t}_drops"));
        assert_eq!(drops, 0, "queue {t}");
    }
    assert_eq!(
        n(&j, "spilled"),
        threads.iter().map(|t| n(t, "spilled")).sum::<u64>()
    );
    assert_eq!(judge(&file), (4_000, 4_000 * FRAME_LEN));
    assert_each_queue_in_order(&read_records(&file), &[2_000, 2_000]);
    net.assert_no_xdp();
}

/// Runs wirespeed in `ns`, expects failure with `needle` in its message.
fn fails_with(ns: &str, args: &[&str], needle: &str) {
    let out = run_in(ns, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded; stderr: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected '{needle}' in: {err}"
    );
}

#[test]
fn bad_uses_of_cpus_are_refused_and_leave_nothing_attached() {
    let _one = serial();
    let net = NetPair::with_queues("cte", 2);
    let one = NetPair::new("ctf");
    let dir = TempDir::new("cte");
    let file = dir.path("never.pcapng");
    let ns = &net.ns_b;
    // One queue named: nothing to share out.
    let port0 = format!("xdp:{}@0", net.b);
    fails_with(
        ns,
        &["capture", "--port", &port0, "--cpus", "0,1", "-w", &file],
        "one thread per queue needs a port on several queues",
    );
    // An AF_PACKET port has no queues to share out.
    let packet = format!("packet:{}", net.b);
    fails_with(
        ns,
        &["capture", "--port", &packet, "--cpus", "0,1", "-w", &file],
        "one thread per queue needs a port on several queues",
    );
    // More CPUs than queues.
    fails_with(
        &one.ns_b,
        &["capture", "-i", &one.b, "--cpus", "0,1", "-w", &file],
        "2 threads for 1 receive queue: give at most one thread a queue",
    );
    // A file has no queues.
    fails_with(
        ns,
        &["capture", "-r", "/dev/null", "--cpus", "0,1"],
        "--cpus",
    );
    fails_with(
        ns,
        &["capture", "-i", &net.b, "--cpus", "0-x", "-w", &file],
        "--cpus 0-x: expected a CPU list",
    );
    assert!(!exists_path(&file), "a file was created");
    net.assert_no_xdp();
    one.assert_no_xdp();
}
