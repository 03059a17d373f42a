//! Ports on many receive queues: frames follow the queues that get packets, and `--cpus`
//! serves each queue from a thread of its own.

mod common;
use common::*;

/// Sends `count` frames out of queue `queue` of A at 50,000 a second (veth delivers them on
/// queue `queue` of B): slow enough that a loaded machine's receiver never falls a ring
/// behind (see common::traffic::recv_in_b). The fewest frames a queue has in flight here
/// (1536 of 2048) last 30 ms at this rate, twice the late vCPU wake-ups usually seen (up
/// to 14 ms).
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
            "50000",
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

/// One generator's packets split over two queues (even records on queue 0, odd on queue 1,
/// replayed from a file gen wrote): `recv --cpus 0,1` merges the two threads' sequence
/// numbers, so the losses are exactly the numbers gen left out, and nothing else.
#[test]
fn recv_with_a_thread_per_queue_merges_one_generator_s_numbers() {
    use common::pcaps::{TempDir, write_capture};
    use wirespeed_capture::write::Format;
    let net = NetPair::with_queues("qv", 2);
    let dir = TempDir::new("qv");
    let all = dir.path("all.pcap");
    // 10,000 frames numbered 0..10010, leaving out 999, 1999, ..., 9999.
    let port = format!("pcap:{all}");
    run_json_here(&[
        "gen",
        "--port",
        &port,
        "--count",
        "10000",
        "--skip-every",
        "1000",
        "--json",
        "-q",
    ]);
    let frames = read_pcap(&all);
    assert_eq!(frames.len(), 10_000);
    for q in 0..2 {
        let half: Vec<_> = frames
            .iter()
            .skip(q)
            .step_by(2)
            .map(|f| (0u64, f.clone(), f.len() as u32))
            .collect();
        write_capture(&dir.path(&format!("q{q}.pcap")), Format::Pcap, &half);
    }
    let port_b = format!("xdp:{}@all", net.b);
    let argv = [
        "recv",
        "--port",
        &port_b,
        "--cpus",
        "0,1",
        "--expect",
        "10010",
        "--json",
        "-q",
        "--ring-size",
        "8192",
    ];
    let mut rx = spawn_in(&net.ns_b, &argv);
    rx.wait_for("CPU 0: queues 0; CPU 1: queues 1");
    for q in 0..2u32 {
        let file = dir.path(&format!("q{q}.pcap"));
        let port_a = format!("xdp:{}@{q}", net.a);
        let tx = run_json(
            &net.ns_a,
            &[
                "gen", "--port", &port_a, "--pcap", &file, "--fast", "--rate", "100000", "--json",
                "-q",
            ],
        );
        assert_eq!(tx["tx_packets"], 5_000, "{tx}");
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (j, log) = rx.interrupt();
    assert_eq!(j["packets"], 10_000, "{j}\n{log}");
    let threads = j["threads"].as_array().expect("threads");
    assert_eq!(threads[0]["packets"], 5_000, "{j}");
    assert_eq!(threads[1]["packets"], 5_000, "{j}");
    let gens = j["generators"].as_array().unwrap();
    assert_eq!(gens.len(), 1, "{j}");
    let g = &gens[0];
    assert_eq!(g["received"], 10_000, "{j}");
    assert_eq!(g["unique"], 10_000, "{j}");
    assert_eq!(g["lost"], 10, "{j}");
    let want: Vec<serde_json::Value> = (1..=10u64)
        .map(|k| serde_json::json!([k * 1000 - 1, k * 1000 - 1]))
        .collect();
    assert_eq!(g["lost_ranges"].as_array().unwrap(), &want, "{j}");
    assert_eq!(g["duplicated"], 0, "{j}");
    assert_eq!(g["sequence_end"], 10_010, "{j}");
    assert_eq!(j["drops_total"], 0, "{j}");
    net.assert_no_xdp();
}
