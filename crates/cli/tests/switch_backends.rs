//! A bridge with an AF_XDP port and an AF_PACKET port: ping both ways, numbered frames both
//! ways all arrive (tcpdump counts them), and every frame that crossed between the two
//! backends' buffers is a counted copy.

mod common;
use common::switched::{Setup, Switched};
use common::*;

/// Sends `count` numbered UDP frames from `ns` out of `dev` towards `dst_mac`.
fn send(ns: &str, dev: &str, count: u32, dst_mac: &str, dst_ip: &str) {
    let port = format!("packet:{dev}");
    let out = run_in(
        ns,
        &[
            "gen",
            "--port",
            &port,
            "--count",
            &count.to_string(),
            "--rate",
            "50000",
            "--dst-mac",
            dst_mac,
            "--dst-ip",
            dst_ip,
            "--json",
        ],
    );
    assert!(
        out.status.success(),
        "gen: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn numbered(frames: &[Vec<u8>]) -> usize {
    frames
        .iter()
        .filter(|f| wirespeed_packet::read_test_payload(f).is_some())
        .count()
}

#[test]
fn xdp_and_packet_ports_on_one_bridge() {
    let setup = Setup {
        backends: ["xdp", "packet"],
        ..Setup::default()
    };
    let mut s = Switched::with("sb", setup, &[]);
    let shown = s.ctl_ok(&["show"]);
    assert!(
        shown.contains("(xdp:") && shown.contains("(packet:") && shown.contains("tpacket_v3"),
        "{shown}"
    );
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    assert_eq!(s.ping(&s.c.ns_b, "10.9.0.1", 3), 3);

    let id = std::process::id();
    let (a_mac, b_mac) = (mac_of(&s.c.ns_a, &s.c.a), mac_of(&s.c.ns_b, &s.c.b));
    let at_b =
        Capture::tcpdump_inbound(&s.c.ns_b, &s.c.b, &format!("/tmp/wirespeed-sb-{id}-b.pcap"));
    send(&s.c.ns_a, &s.c.a, 1000, &b_mac, "10.9.0.2");
    assert_eq!(numbered(&at_b.stop(false).frames), 1000, "A to B");
    let at_a =
        Capture::tcpdump_inbound(&s.c.ns_a, &s.c.a, &format!("/tmp/wirespeed-sb-{id}-a.pcap"));
    send(&s.c.ns_b, &s.c.b, 1000, &a_mac, "10.9.0.1");
    assert_eq!(numbered(&at_a.stop(false).frames), 1000, "B to A");

    let (j, _) = s.stop();
    let ports = &j["ports"];
    for p in 0..2 {
        let (tx, copies) = (
            ports[p]["tx_packets"].as_u64().unwrap(),
            ports[p]["copies"].as_u64().unwrap(),
        );
        // Every frame out of either port came from the other backend's buffers.
        assert!(tx >= 1000, "{j}");
        assert_eq!(
            copies,
            tx,
            "port {}: every frame sent is a copy: {j}",
            p + 1
        );
    }
    assert_eq!(j["no_frame"], 0, "{j}");
}
