//! gen and recv together: the rate the receiver counts is the rate asked for, and the
//! losses it reports are exactly the sequence numbers the generator left out.

mod common;
use common::*;

fn recv(net: &NetPair, extra: &[&str]) -> Running {
    let port = format!("xdp:{}", net.b);
    let mut args = vec!["recv", "--port", &port, "--duration", "60", "--json", "-q"];
    args.extend_from_slice(extra);
    let mut r = spawn_in(&net.ns_b, &args);
    r.wait_ready();
    r
}

fn gen_json(net: &NetPair, extra: &[&str]) -> serde_json::Value {
    let port = format!("xdp:{}", net.a);
    let mut args = vec!["gen", "--port", &port, "--json", "-q"];
    args.extend_from_slice(extra);
    run_json(&net.ns_a, &args)
}

#[test]
fn rate_100k_pps_for_5_s_within_2_percent_at_the_receiver() {
    let net = NetPair::new("gr");
    let rx = recv(&net, &[]);
    let tx = gen_json(&net, &["--rate", "100000", "--duration", "5"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (rj, _) = rx.interrupt();
    let sent = tx["packets"].as_u64().unwrap();
    let g = &rj["generators"][0];
    let received = g["received"].as_u64().unwrap();
    assert!(
        (received as f64 - 500_000.0).abs() <= 10_000.0,
        "received {received} in 5 s at 100000 pps: {rj}"
    );
    assert_eq!(
        received, sent,
        "every packet arrives at this rate: {tx} {rj}"
    );
    assert_eq!(g["lost"].as_u64(), Some(0), "{rj}");
    assert_eq!(g["duplicated"].as_u64(), Some(0), "{rj}");
    assert_eq!(g["reordered"].as_u64(), Some(0), "{rj}");
    assert_eq!(g["corrupt"].as_u64(), Some(0), "{rj}");
    let lat = &g["latency_ns"];
    assert_eq!(lat["samples"].as_u64(), Some(received), "{rj}");
    let (p50, p99, p999, max) = (
        lat["p50"].as_u64().unwrap(),
        lat["p99"].as_u64().unwrap(),
        lat["p999"].as_u64().unwrap(),
        lat["max"].as_u64().unwrap(),
    );
    assert!(p50 > 0 && p50 <= p99 && p99 <= p999 && p999 <= max, "{lat}");
    assert!(
        p50 < 1_000_000_000,
        "one-way latency over a veth under a second: {lat}"
    );
    assert_frames_balanced(&tx);
    assert_frames_balanced(&rj);
    net.assert_no_xdp();
}

#[test]
fn skipped_sequence_numbers_are_reported_lost_per_generator() {
    let net = NetPair::new("gl");
    let rx = recv(&net, &["--expect", "10010"]);
    // Generator 7 leaves out 999, 1999, ..., 9999: 10000 frames use numbers 0..10010.
    let g7 = gen_json(
        &net,
        &[
            "--generator-id",
            "7",
            "--count",
            "10000",
            "--skip-every",
            "1000",
            "--rate",
            "200000",
        ],
    );
    assert_eq!(g7["packets"].as_u64(), Some(10_000), "{g7}");
    assert_eq!(g7["sequence_end"].as_u64(), Some(10_010), "{g7}");
    assert_eq!(g7["skipped"].as_u64(), Some(10), "{g7}");
    // Generator 8 sends 0..10010 without a gap, in another size and protocol.
    let g8 = gen_json(
        &net,
        &[
            "--generator-id",
            "8",
            "--count",
            "10010",
            "--rate",
            "200000",
            "--size",
            "200",
            "--proto",
            "tcp-syn",
        ],
    );
    assert_eq!(g8["packets"].as_u64(), Some(10_010), "{g8}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (rj, _) = rx.interrupt();
    let gens = rj["generators"].as_array().unwrap();
    assert_eq!(gens.len(), 2, "{rj}");
    let (a, b) = (&gens[0], &gens[1]);
    assert_eq!(a["generator"].as_u64(), Some(7));
    assert_eq!(a["received"].as_u64(), Some(10_000), "{rj}");
    assert_eq!(a["lost"].as_u64(), Some(10), "{rj}");
    let want: Vec<serde_json::Value> = (1..=10u64)
        .map(|k| serde_json::json!([k * 1000 - 1, k * 1000 - 1]))
        .collect();
    assert_eq!(a["lost_ranges"].as_array().unwrap(), &want, "{rj}");
    assert_eq!(a["duplicated"].as_u64(), Some(0));
    assert_eq!(a["reordered"].as_u64(), Some(0));
    assert_eq!(b["generator"].as_u64(), Some(8));
    assert_eq!(b["received"].as_u64(), Some(10_010), "{rj}");
    assert_eq!(b["lost"].as_u64(), Some(0), "{rj}");
    assert_eq!(b["lost_ranges"].as_array().unwrap().len(), 0);
    assert_eq!(rj["not_test_frames"].as_u64(), Some(0), "{rj}");
    assert_eq!(rj["drops_total"].as_u64(), Some(0), "{rj}");
    net.assert_no_xdp();
}
