//! l2fwd between two ports: 100,000 numbered packets cross a forwarder from one namespace to
//! another; on two AF_XDP ports sharing one UMEM not one frame is copied.

mod common;
use common::*;

fn numbered_packets_cross_the_forwarder(tag: &str, backend: &str) {
    const COUNT: u64 = 100_000;
    let c = NetChain::new(tag);
    let n = COUNT.to_string();
    let mac = "02:00:00:00:00:01";
    let mut rx = spawn_in(
        &c.ns_b,
        &[
            "bench",
            "rxdrop",
            "--port",
            &format!("xdp:{}", c.b),
            "--duration",
            "60",
            "--verify",
            "--expect",
            &n,
            "--src-mac",
            mac,
            "--json",
            "-q",
        ],
    );
    rx.wait_ready();
    let mut fwd = spawn_in(
        &c.ns_m,
        &[
            "bench",
            "l2fwd",
            "--port",
            &format!("{backend}:{}", c.ma),
            "--peer-port",
            &format!("{backend}:{}", c.mb),
            "--duration",
            "60",
            "--json",
            "-q",
        ],
    );
    fwd.wait_ready();
    let tx = run_json(
        &c.ns_a,
        &[
            "bench",
            "txpush",
            "--port",
            &format!("xdp:{}", c.a),
            "--count",
            &n,
            "--src-mac",
            mac,
            "--json",
            "-q",
        ],
    );
    assert_eq!(tx["tx_packets"].as_u64(), Some(COUNT), "{tx}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (fj, _) = fwd.interrupt();
    let (rj, log) = rx.interrupt();
    let v = &rj["verify"];
    let unique = v["unique"].as_u64().unwrap();
    assert_eq!(v["duplicates"].as_u64(), Some(0), "{rj}");
    assert_eq!(v["corrupt"].as_u64(), Some(0), "{rj}");
    assert_eq!(v["not_test_frames"].as_u64(), Some(0), "{rj}");
    // AF_XDP socket drops on receive also show as failed redirects in the veth counters.
    let d = &fj["drops"];
    let fwd_tx_drops: u64 = ["tx_ring_full", "tx_invalid_desc", "tx_error"]
        .iter()
        .map(|k| d[k].as_u64().unwrap())
        .sum();
    let fwd_rx_drops = fj["drops_total"].as_u64().unwrap() - fwd_tx_drops;
    let rx_socket_drops = rj["drops_total"].as_u64().unwrap();
    let mut veth = c.veth_drops();
    if backend == "xdp" {
        veth -= fwd_rx_drops;
    }
    veth -= rx_socket_drops;
    let lost = fwd_tx_drops + fwd_rx_drops + rx_socket_drops + veth;
    assert_eq!(
        unique + lost,
        COUNT,
        "arrived {unique}, forwarder {fj}, receiver drops {rx_socket_drops}, veth {veth}; {log}"
    );
    assert_eq!(
        fj["packets"].as_u64(),
        Some(COUNT - fwd_rx_drops - fwd_tx_drops),
        "{fj}"
    );
    if backend == "xdp" {
        assert_eq!(
            fj["copies"].as_u64(),
            Some(0),
            "shared UMEM forwards by descriptor: {fj}"
        );
        assert_frames_balanced(&fj);
    } else {
        assert_eq!(
            fj["copies"].as_u64(),
            fj["packets"].as_u64(),
            "each frame copied once: {fj}"
        );
    }
}

#[test]
fn xdp_ports_share_a_umem_and_forward_without_copies() {
    numbered_packets_cross_the_forwarder("fx", "xdp");
}

#[test]
fn packet_ports_forward_by_copy() {
    numbered_packets_cross_the_forwarder("fp", "packet");
}
