//! The kernel transmit engine (XDP live frames) sends exactly what it is asked to, and the
//! in-kernel drop counter (xdpdrop) counts exactly what arrives; what the device refuses is
//! counted as dropped.

mod common;
use common::*;

/// Sends `count` frames with `bench txpush --engine kernel` and `extra` options from A into
/// an xdpdrop sink on B; checks that every frame sent arrived or was dropped by the veth, and
/// returns txpush's summary and the sink's.
fn send_into_sink(
    net: &NetPair,
    count: u64,
    extra: &[&str],
) -> (serde_json::Value, serde_json::Value) {
    let mut sink = spawn_in(
        &net.ns_b,
        &[
            "bench",
            "xdpdrop",
            "--port",
            &format!("xdp:{}", net.b),
            "--duration",
            "60",
            "--json",
            "-q",
        ],
    );
    sink.wait_ready();
    let (port, n) = (format!("xdp:{}", net.a), count.to_string());
    let mut args = vec![
        "bench", "txpush", "--engine", "kernel", "--port", &port, "--count", &n, "--json", "-q",
    ];
    args.extend_from_slice(extra);
    let tx = run_json(&net.ns_a, &args);
    assert_eq!(tx["packets"].as_u64(), Some(count), "{tx}");
    assert_eq!(tx["engine"], "kernel");
    // The sink takes XDP frames: nothing refused. What the veth refuses when it flushes
    // (its peer's ring full) bench does not watch (that costs rate): not listed, and said.
    assert_eq!(tx["drops"], serde_json::json!({"tx_not_queued": 0}), "{tx}");
    assert!(
        tx["notes"].to_string().contains(&format!(
            "{}: frames the veth refuses when it flushes its queue",
            net.a
        )),
        "{tx}"
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (rx, _) = sink.interrupt();
    let arrived = rx["packets"].as_u64().unwrap();
    let veth_drops = net.veth_drops();
    assert_eq!(
        arrived + veth_drops,
        count,
        "xdpdrop counted {arrived}, veth dropped {veth_drops}: {rx}"
    );
    assert!(arrived > 0, "nothing arrived: {rx}");
    net.assert_no_xdp();
    (tx, rx)
}

#[test]
fn kernel_engine_million_frames_counted_by_xdpdrop() {
    const COUNT: u64 = 1_000_000;
    let net = NetPair::new("ke");
    let (tx, rx) = send_into_sink(&net, COUNT, &["--size", "128"]);
    assert_eq!(tx["bytes"].as_u64(), Some(COUNT * 124), "{tx}");
    // Without --cpus: the one CPU it started on.
    assert_eq!(tx["engine_cpus"].as_array().map(Vec::len), Some(1), "{tx}");
    let arrived = rx["packets"].as_u64().unwrap();
    assert_eq!(rx["bytes"].as_u64(), Some(arrived * 124), "{rx}");
}

#[test]
fn kernel_engine_on_two_cpus_sends_exactly_the_count_from_both() {
    const COUNT: u64 = 1_000_001;
    // Two queues: a live-frames run on CPU c lands on the peer's receive queue c mod 2.
    let net = NetPair::with_queues("k2", 2);
    let (tx, _) = send_into_sink(&net, COUNT, &["--cpus", "0,1"]);
    assert_eq!(tx["bytes"].as_u64(), Some(COUNT * 60), "{tx}");
    assert_eq!(tx["engine_cpus"], serde_json::json!([0, 1]), "{tx}");
    // Two threads on each CPU share the count (the first thread takes the odd one): CPU q's
    // frames all go to queue q, where they were received or failed to enter its ring.
    for (q, sent_from_cpu) in [(0, 500_001), (1, 500_000)] {
        let got = ethtool_stat(&net.ns_b, &net.b, &format!("rx_queue_{q}_xdp_packets"));
        let refused = ethtool_stat(&net.ns_a, &net.a, &format!("tx_queue_{q}_xdp_xmit_errors"));
        assert_eq!(
            got + refused,
            sent_from_cpu,
            "queue {q}: {got} received + {refused} refused, CPU {q} sent {sent_from_cpu}"
        );
    }
}

/// A veth whose peer runs no XDP program (and has GRO off) refuses every frame the kernel
/// engine hands it, and a veth whose peer is down too: each frame is counted as dropped,
/// with why and what to do, where before the run reported them sent and said nothing.
#[test]
fn kernel_engine_counts_the_frames_a_veth_refuses() {
    let net = NetPair::new("kr");
    let port = format!("xdp:{}", net.a);
    let send = |count: &str| {
        run_json(
            &net.ns_a,
            &[
                "bench", "txpush", "--engine", "kernel", "--port", &port, "--count", count,
                "--json", "-q",
            ],
        )
    };
    let tx = send("100000");
    assert_eq!(tx["packets"].as_u64(), Some(100_000), "{tx}");
    assert_eq!(
        tx["drops"],
        serde_json::json!({"tx_not_queued": 100_000}),
        "{tx}"
    );
    assert_eq!(tx["drops_total"].as_u64(), Some(100_000), "{tx}");
    let notes = tx["notes"].to_string();
    assert!(
        notes.contains(&format!(
            "the kernel did not send 100000 of the frames handed to it on {} (EOPNOTSUPP",
            net.a
        )) && notes.contains("ethtool -K PEER gro on"),
        "{tx}"
    );
    assert_eq!(link_stat(&net.ns_b, &net.b, "rx", "packets"), 0);
    // GRO on the peer makes it take them; with the peer down, the device refuses each
    // batch as it is flushed.
    must(&[
        "ip", "netns", "exec", &net.ns_b, "ethtool", "-K", &net.b, "gro", "on",
    ]);
    must(&["ip", "-n", &net.ns_b, "link", "set", &net.b, "down"]);
    // The kernel marks A down (IFF_RUNNING) moments later, on a work queue.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !must(&["ip", "-n", &net.ns_a, "link", "show", "dev", &net.a]).contains("state DOWN") {
        assert!(std::time::Instant::now() < deadline, "{} stays up", net.a);
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let tx = send("50000");
    assert_eq!(
        tx["drops"],
        serde_json::json!({"tx_not_queued": 0, "tx_queue_full": 0, "tx_refused": 50_000}),
        "{tx}"
    );
    assert!(
        tx["notes"]
            .to_string()
            .contains("(ENXIO: No such device or address): its link was down"),
        "{tx}"
    );
    net.assert_no_xdp();
}
