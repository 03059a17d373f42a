//! l2fwd: every packet comes back with its MAC addresses swapped and its payload intact,
//! as tcpdump on the sending side sees it.

mod common;
use common::*;

use wirespeed_packet::{MacAddr, UdpTemplate, swap_macs};

fn expected_frame(seq: u64, ts: u64) -> Vec<u8> {
    let t = UdpTemplate {
        src_mac: "02:00:00:00:00:01".parse::<MacAddr>().unwrap(),
        dst_mac: "02:00:00:00:00:02".parse::<MacAddr>().unwrap(),
        src_ip: "10.0.0.1".parse().unwrap(),
        dst_ip: "10.0.0.2".parse().unwrap(),
        src_port: 9,
        dst_port: 9,
        frame_len: 60,
        generator: 1,
    };
    let mut f = vec![0u8; 60];
    t.write(&mut f, seq, ts).unwrap();
    swap_macs(&mut f);
    f
}

pub fn frames_come_back_swapped(tag: &str, backend: &str) {
    const COUNT: u64 = 10_000;
    let net = NetPair::new(tag);
    let file = format!("/tmp/wirespeed-l2fwd-{}-{tag}.pcap", std::process::id());
    let cap = Capture::tcpdump_inbound(&net.ns_a, &net.a, &file);
    let fwd_port = format!("{backend}:{}", net.b);
    let mut fwd = spawn_in(
        &net.ns_b,
        &[
            "bench",
            "l2fwd",
            "--port",
            &fwd_port,
            "--duration",
            "60",
            "--json",
            "-q",
        ],
    );
    fwd.wait_ready();
    // The sender uses AF_XDP transmit only: no XDP program on A, so what comes back reaches
    // the stack and tcpdump.
    let n = COUNT.to_string();
    let tx = run_json(
        &net.ns_a,
        &[
            "bench",
            "txpush",
            "--port",
            &format!("xdp:{}", net.a),
            "--count",
            &n,
            "--src-mac",
            "02:00:00:00:00:01",
            "--json",
            "-q",
        ],
    );
    assert_eq!(tx["tx_packets"].as_u64(), Some(COUNT), "{tx}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (fj, log) = fwd.interrupt();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let frames = cap.stop();
    let mut seen = vec![false; COUNT as usize];
    for f in &frames {
        let p = wirespeed_packet::read_test_payload(f)
            .unwrap_or_else(|| panic!("not a test frame: {f:02x?}"));
        assert_eq!(
            f,
            &expected_frame(p.seq, p.timestamp_ns),
            "frame {} changed on the way",
            p.seq
        );
        assert!(!seen[p.seq as usize], "frame {} came back twice", p.seq);
        seen[p.seq as usize] = true;
    }
    let forwarded = fj["packets"].as_u64().unwrap();
    let fwd_drops = fj["drops_total"].as_u64().unwrap();
    let veth_drops = net.veth_drops();
    assert_eq!(
        fj["rx_packets"].as_u64(),
        Some(forwarded + fj["drops"]["tx_ring_full"].as_u64().unwrap()),
        "{fj}"
    );
    assert_eq!(
        frames.len() as u64 + fwd_drops + veth_drops,
        COUNT,
        "captured {} + forwarder drops {fwd_drops} ({}) + veth drops {veth_drops} != sent; log: {log}",
        frames.len(),
        fj["drops"]
    );
    if backend == "xdp" {
        assert_eq!(
            fj["copies"].as_u64(),
            Some(0),
            "AF_XDP l2fwd must move descriptors: {fj}"
        );
        assert_frames_balanced(&fj);
    }
    net.assert_no_xdp();
}

#[test]
fn xdp_l2fwd_swaps_macs_and_keeps_payload() {
    frames_come_back_swapped("xl", "xdp");
}
