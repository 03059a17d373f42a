//! gen --rate: the receiver counts the rate asked for, in packets and in bits. One test in a
//! file of its own, so that nothing else shares the two cores while it measures.

mod common;
use common::traffic::{gen_in_a, recv_in_b};
use common::*;

#[test]
fn rate_in_packets_and_in_bits_within_2_percent_at_the_receiver() {
    let net = NetPair::new("gr");
    let rx = recv_in_b(&net, &[]);
    let tx = gen_in_a(&net, &["--rate", "100000", "--duration", "5"]);
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
    assert_eq!(tx["rate_reached"], true, "{tx}");
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
    // Scripts take steady rates and costs from the summaries, as from bench's.
    assert_seconds_at(&tx, 0.1, 0.05, 4);
    assert_seconds_at(&rj, 0.1, 0.05, 4);
    assert_cpu_reported(&tx);
    assert_cpu_reported(&rj);

    // 40 Mbit/s of IMIX (mean 361.8 bytes on the wire) for 3 s: 120 Mbit, FCS counted.
    let rx = recv_in_b(&net, &[]);
    let tx = gen_in_a(
        &net,
        &[
            "--rate",
            "40Mbit",
            "--imix",
            "--duration",
            "3",
            "--generator-id",
            "2",
        ],
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (rj, _) = rx.interrupt();
    let g = &rj["generators"][0];
    let received = g["received"].as_u64().unwrap();
    assert_eq!(received, tx["packets"].as_u64().unwrap(), "{tx} {rj}");
    let wire_bits = (rj["bytes"].as_u64().unwrap() + 4 * received) as f64 * 8.0;
    assert!(
        (wire_bits - 120e6).abs() <= 2.4e6,
        "received {wire_bits} bits in 3 s at 40 Mbit/s: {rj}"
    );

    // The same pacing over AF_PACKET: 50,000 packets a second for 5 s.
    let rx = recv_in_b(&net, &[]);
    let port = format!("packet:{}", net.a);
    let tx = run_json(
        &net.ns_a,
        &[
            "gen",
            "--port",
            &port,
            "--rate",
            "50000",
            "--duration",
            "5",
            "--generator-id",
            "3",
            "--json",
            "-q",
        ],
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (rj, _) = rx.interrupt();
    let g = &rj["generators"][0];
    let received = g["received"].as_u64().unwrap();
    assert!(
        (received as f64 - 250_000.0).abs() <= 5_000.0,
        "received {received} in 5 s at 50000 pps over packet: {rj}"
    );
    assert_eq!(received, tx["packets"].as_u64().unwrap(), "{tx} {rj}");
    assert_eq!(g["lost"].as_u64(), Some(0), "{rj}");
    net.assert_no_xdp();
}
