//! Ports on many receive queues: frames follow the queues that get packets, and `--cpus`
//! serves each queue from a thread of its own.

mod common;
use common::*;

/// Sends `count` frames out of queue `queue` of A at 100,000 a second (veth delivers them on
/// queue `queue` of B): slow enough that a loaded machine's receiver never falls a ring
/// behind (see common::traffic::recv_in_b).
fn send_paced(net: &NetPair, queue: u32, count: u64) {
    let port = format!("xdp:{}@{queue}", net.a);
    let tx = run_json(
        &net.ns_a,
        &[
            "gen",
            "--port",
            &port,
            "--count",
            &count.to_string(),
            "--rate",
            "100000",
            "--json",
            "-q",
        ],
    );
    assert_eq!(tx["tx_packets"].as_u64(), Some(count), "sender: {tx}");
}

/// rxdrop on all eight queues of B, with `extra` flags, while queue 0 gets 20,000 frames and
/// queue q then 1,000 * q; its summary once they are in.
fn rxdrop_on_eight_queues(net: &NetPair, extra: &[&str]) -> serde_json::Value {
    let port = format!("xdp:{}@all", net.b);
    let mut argv = vec!["bench", "rxdrop", "--port", &port, "--json", "-q"];
    argv.extend_from_slice(&["--duration", "60", "--ring-size", "8192"]);
    argv.extend_from_slice(extra);
    let mut rx = spawn_in(&net.ns_b, &argv);
    rx.wait_ready();
    // Queue 0 first and longest: by then the idle queues have had thousands of visits.
    send_paced(net, 0, 20_000);
    for q in 1..8u32 {
        send_paced(net, q, 1_000 * u64::from(q));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (j, log) = rx.interrupt();
    assert_eq!(j["packets"], 48_000, "{j}\n{log}");
    assert_eq!(j["drops"]["fill_ring_empty"], 0, "{j}");
    assert_frames_balanced(&j);
    j
}

/// With eight queues, the default frames are a one-queue port's for each queue.
#[test]
fn an_eight_queue_port_has_each_queue_s_frames_by_default() {
    let net = NetPair::with_queues("q8", 8);
    let j = rxdrop_on_eight_queues(&net, &[]);
    assert_eq!(j["frames"]["total"], 8 * 4096, "{j}");
    net.assert_no_xdp();
}

/// A queue that gets nothing must not soak up the frames a busy one needs. Before each
/// queue's fill ring was held to its share, the frames given for eight queues went, 64 at a
/// visit, into the idle queues' fill rings (8192 entries each), and then queue 0 received
/// nothing (fill_ring_empty counted every packet).
#[test]
fn idle_queues_keep_only_their_share_of_the_frames() {
    let net = NetPair::with_queues("qs", 8);
    let j = rxdrop_on_eight_queues(&net, &["--frames", "16384"]);
    assert_eq!(j["frames"]["total"], 16384, "{j}");
    net.assert_no_xdp();
}

/// `bench MODE --port xdp:B@all --cpus 0,1` on two queues while queue 0 gets 3,000 frames
/// and queue 1 5,000: each thread counts exactly its queue's, and the whole is their sum.
fn two_threads(mode: &str, tag: &str) {
    let net = NetPair::with_queues(tag, 2);
    let port = format!("xdp:{}@all", net.b);
    let argv = [
        "bench",
        mode,
        "--port",
        &port,
        "--cpus",
        "0,1",
        "--duration",
        "60",
        "--json",
        "-q",
        "--ring-size",
        "8192",
    ];
    let mut rx = spawn_in(&net.ns_b, &argv);
    rx.wait_for("CPU 0: queues 0; CPU 1: queues 1");
    send_paced(&net, 0, 3_000);
    send_paced(&net, 1, 5_000);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (j, log) = rx.interrupt();
    assert_eq!(j["packets"], 8_000, "{j}\n{log}");
    let threads = j["threads"].as_array().expect("threads");
    assert_eq!(threads.len(), 2, "{j}");
    for (t, want) in [(0, 3_000), (1, 5_000)] {
        assert_eq!(threads[t]["cpu"], t, "{j}");
        assert_eq!(threads[t]["queues"], serde_json::json!([t]), "{j}");
        assert_eq!(threads[t]["packets"], want, "{j}");
        assert_eq!(threads[t]["drops_total"], 0, "{j}");
        let busy = threads[t]["busy"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&busy), "{j}");
    }
    assert_eq!(j["drops_total"], 0, "{j}");
    assert_frames_balanced(&j);
    net.assert_no_xdp();
}

#[test]
fn rxdrop_with_a_thread_per_queue_counts_each_queue_exactly() {
    two_threads("rxdrop", "qr");
}

#[test]
fn l2fwd_with_a_thread_per_queue_forwards_each_queue_exactly() {
    two_threads("l2fwd", "qf");
}
