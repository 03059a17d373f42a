//! A generator whose frames do not go out says so: into a veth whose peer is down, every
//! frame is counted as not sent, by the way each engine loses it, and gen's rates count only
//! what went out (they counted every frame handed over, and said "drops: none").

mod common;
use common::*;

/// Waits until the kernel marks A down (IFF_RUNNING), moments after B goes down.
fn wait_down(net: &NetPair) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !must(&["ip", "-n", &net.ns_a, "link", "show", "dev", &net.a]).contains("state DOWN") {
        assert!(std::time::Instant::now() < deadline, "{} stays up", net.a);
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn send(net: &NetPair, port: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["gen", "--port", port, "--json", "-q"];
    args.extend_from_slice(extra);
    run_json(&net.ns_a, &args)
}

/// Nothing sent, `count` of `packets` not sent, and these drops.
fn assert_none_sent(tx: &serde_json::Value, count: u64, drops: serde_json::Value) {
    assert_eq!(tx["packets"].as_u64(), Some(count), "{tx}");
    assert_eq!(tx["not_sent"].as_u64(), Some(count), "{tx}");
    assert_eq!(tx["mpps"].as_f64(), Some(0.0), "{tx}");
    assert_eq!(tx["wire_mbps"].as_f64(), Some(0.0), "{tx}");
    for (reason, n) in drops.as_object().unwrap() {
        assert_eq!(&tx["drops"][reason], n, "{reason}: {tx}");
    }
}

#[test]
fn frames_into_a_peer_that_is_down_are_counted_not_sent() {
    let net = NetPair::new("gd");
    must(&[
        "ip", "netns", "exec", &net.ns_b, "ethtool", "-K", &net.b, "gro", "on",
    ]);
    must(&["ip", "-n", &net.ns_b, "link", "set", &net.b, "down"]);
    wait_down(&net);
    let xdp = format!("xdp:{}", net.a);
    // AF_XDP completes each frame; the veth drops it, and its counter says so.
    let tx = send(&net, &xdp, &["--count", "20000"]);
    assert_none_sent(
        &tx,
        20_000,
        serde_json::json!({"tx_dropped_by_interface": 20_000}),
    );
    assert!(
        tx["notes"].to_string().contains(&format!(
            "the kernel dropped 20000 frames on {} after the port handed them over",
            net.a
        )),
        "{tx}"
    );
    // bench txpush lists them too (its rate stays the socket's).
    let bench = run_json(
        &net.ns_a,
        &[
            "bench", "txpush", "--port", &xdp, "--count", "10000", "--json", "-q",
        ],
    );
    assert_eq!(
        bench["drops"]["tx_dropped_by_interface"].as_u64(),
        Some(10_000),
        "{bench}"
    );
    // An asked rate not reached says why: not the CPU, the drops.
    let out = run_in(
        &net.ns_a,
        &[
            "gen",
            "--port",
            &xdp,
            "--rate",
            "20000",
            "--duration",
            "1",
            "--json",
            "-q",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["rate_reached"], false, "{j}");
    assert!(
        err.contains("of the frames handed over were not sent (drops)"),
        "{err}"
    );
    // AF_PACKET: the kernel never takes them from the ring.
    let packet = format!("packet:{}", net.a);
    let tx = send(&net, &packet, &["--count", "500"]);
    assert_none_sent(&tx, 500, serde_json::json!({"tx_unsent": 500}));
    // The kernel engine: the device refuses each batch as it is flushed.
    let tx = send(&net, &xdp, &["--engine", "kernel", "--count", "3000"]);
    assert_none_sent(&tx, 3000, serde_json::json!({"tx_refused": 3000}));
    assert_eq!(tx["tx_packets"].as_u64(), Some(0), "{tx}");
    assert_eq!(link_stat(&net.ns_b, &net.b, "rx", "packets"), 0);
    // Back up, every frame goes out and none is said lost.
    must(&["ip", "-n", &net.ns_b, "link", "set", &net.b, "up"]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    for extra in [
        &["--count", "1000"][..],
        &["--engine", "kernel", "--count", "1000"],
    ] {
        let tx = send(&net, &xdp, extra);
        assert_eq!(tx["not_sent"].as_u64(), Some(0), "{tx}");
        assert_eq!(tx["drops_total"].as_u64(), Some(0), "{tx}");
    }
}
