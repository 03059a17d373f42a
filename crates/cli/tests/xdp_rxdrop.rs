//! AF_XDP receive: 100,000 numbered packets from one namespace; on the other side every
//! number arrives exactly once with identical bytes, or is counted under a named drop.

mod common;
use common::*;

/// Sends `count` numbered frames from `tx_port` in A to an rxdrop --verify on `rx_port` in B,
/// and checks that received + counted drops account for every one.
pub fn numbered_packets_arrive_once(tag: &str, backend: &str, count: u64) {
    let net = NetPair::new(tag);
    let rx_port = format!("{backend}:{}", net.b);
    let tx_port = format!("{backend}:{}", net.a);
    let src_mac = "02:00:00:00:00:01";
    let n = count.to_string();
    let mut rx = spawn_in(
        &net.ns_b,
        &[
            "bench",
            "rxdrop",
            "--port",
            &rx_port,
            "--duration",
            "60",
            "--verify",
            "--expect",
            &n,
            "--src-mac",
            src_mac,
            "--json",
            "-q",
        ],
    );
    rx.wait_ready();
    let tx = run_json(
        &net.ns_a,
        &[
            "bench",
            "txpush",
            "--port",
            &tx_port,
            "--count",
            &n,
            "--src-mac",
            src_mac,
            "--json",
            "-q",
        ],
    );
    assert_eq!(tx["packets"].as_u64(), Some(count), "sender: {tx}");
    assert_eq!(tx["tx_packets"].as_u64(), Some(count), "sender: {tx}");
    assert_eq!(tx["drops_total"].as_u64(), Some(0), "sender dropped: {tx}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (rxj, log) = rx.interrupt();
    let v = &rxj["verify"];
    let unique = v["unique"].as_u64().unwrap();
    assert_eq!(v["duplicates"].as_u64(), Some(0), "{rxj}");
    assert_eq!(v["corrupt"].as_u64(), Some(0), "{rxj}");
    assert_eq!(v["not_test_frames"].as_u64(), Some(0), "{rxj}");
    assert_eq!(v["out_of_range"].as_u64(), Some(0), "{rxj}");
    assert_eq!(v["received"].as_u64(), Some(unique), "{rxj}");
    assert_eq!(rxj["packets"].as_u64(), Some(unique), "{rxj}");
    let receiver_drops = rxj["drops_total"].as_u64().unwrap();
    let veth_drops = net.veth_drops();
    assert_eq!(
        unique + receiver_drops + veth_drops,
        count,
        "received {unique} + receiver drops {receiver_drops} ({}) + veth drops {veth_drops} != sent; log: {log}",
        rxj["drops"]
    );
    assert_eq!(v["missing"].as_u64(), Some(count - unique), "{rxj}");
    assert_frames_balanced(&tx);
    if backend == "xdp" {
        assert_frames_balanced(&rxj);
    }
    net.assert_no_xdp();
}

#[test]
fn xdp_hundred_thousand_numbered_packets_arrive_once() {
    numbered_packets_arrive_once("xr", "xdp", 100_000);
}
