//! Helpers of the gen / recv tests: a receiver in B, a generator in A.

use super::*;

/// `wirespeed recv` on B's end over AF_XDP, ready, with `extra` flags. Its rings hold 80 ms
/// at the 100,000 packets a second the tests send: the tests count every packet, and a VM's
/// CPU can stall for longer than the default 1024 entries last (10 ms at that rate; seen
/// in CI).
pub fn recv_in_b(net: &NetPair, extra: &[&str]) -> Running {
    recv_on_port_in_b(net, &format!("xdp:{}", net.b), extra)
}

/// As `recv_in_b`, on `port` of B's end (`xdp:B@all`, with `--cpus` in `extra`).
pub fn recv_on_port_in_b(net: &NetPair, port: &str, extra: &[&str]) -> Running {
    let mut args = vec![
        "recv",
        "--port",
        port,
        "--duration",
        "60",
        "--json",
        "-q",
        "--ring-size",
        "8192",
        "--frames",
        "16384",
    ];
    args.extend_from_slice(extra);
    let mut r = spawn_in(&net.ns_b, &args);
    r.wait_ready();
    r
}

/// `wirespeed gen` on A's end over AF_XDP with `extra` flags, to the end; its summary.
pub fn gen_in_a(net: &NetPair, extra: &[&str]) -> serde_json::Value {
    let port = format!("xdp:{}", net.a);
    let mut args = vec!["gen", "--port", &port, "--json", "-q"];
    args.extend_from_slice(extra);
    run_json(&net.ns_a, &args)
}

/// Sends `count` txpush frames out of queue `queue` of A: veth delivers them on that queue
/// of B. Every one must leave.
pub fn send_on_queue(net: &NetPair, queue: u32, count: u64) {
    let port = format!("xdp:{}@{queue}", net.a);
    let tx = run_json(
        &net.ns_a,
        &[
            "bench",
            "txpush",
            "--port",
            &port,
            "--count",
            &count.to_string(),
            "--json",
            "-q",
        ],
    );
    assert_eq!(tx["tx_packets"].as_u64(), Some(count), "sender: {tx}");
}
