//! `actions=controller` with `--controller-pcap FILE`: the packets the rule sends to the
//! controller land in a pcap file that tcpdump, tshark and capinfos read, byte for byte as
//! sent; nothing else is written and nothing of them goes on to the far host.

mod common;
use common::pcaps::judge;
use common::switched::Switched;
use common::*;

#[test]
fn controller_packets_go_to_a_pcap_file() {
    let id = std::process::id();
    let file = format!("/tmp/wirespeed-controller-{id}.pcap");
    let _ = std::fs::remove_file(&file);
    let mut s = Switched::new("sc", &["--controller-pcap", &file]);
    s.ctl_ok(&["add-flow", "priority=100,udp,actions=controller"]);
    let at_b = Capture::tcpdump_inbound(
        &s.c.ns_b,
        &s.c.b,
        &format!("/tmp/wirespeed-controller-{id}-b.pcap"),
    );
    let port = format!("xdp:{}", s.c.a);
    run_json(
        &s.c.ns_a,
        &[
            "bench", "txpush", "--port", &port, "--count", "100", "--size", "128", "--json", "-q",
        ],
    );
    let reached_b = at_b.stop(false).frames;
    let (j, log) = s.stop();
    assert_eq!(j["to_controller"], 100, "{j}");
    assert!(
        log.contains(&format!("controller: 100 packets written to {file}")),
        "{log}"
    );
    assert_eq!(
        reached_b
            .iter()
            .filter(|f| wirespeed_packet::read_test_payload(f).is_some())
            .count(),
        0,
        "controller packets must not be forwarded"
    );
    let (packets, bytes) = judge(&file);
    assert_eq!(
        (packets, bytes),
        (100, 100 * 124),
        "128-byte frames less the FCS"
    );
    let frames = read_pcap(&file);
    assert!(
        frames
            .iter()
            .all(|f| f.len() == 124 && wirespeed_packet::ipv4_udp_checksums_ok(f)),
        "frames as sent"
    );
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn an_unwritable_controller_file_is_refused_before_start() {
    let c = NetChain::new("sd");
    let p1 = format!("1=xdp:{}", c.ma);
    let ctl = format!("/tmp/wirespeed-sd-{}.sock", std::process::id());
    let (code, _, err) = spawn_in(
        &c.ns_m,
        &[
            "switch",
            "--port",
            &p1,
            "--ctl",
            &ctl,
            "--controller-pcap",
            "/nonexistent-dir/c.pcap",
        ],
    )
    .exit();
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--controller-pcap /nonexistent-dir/c.pcap") && err.contains("No such file"),
        "{err}"
    );
    assert!(!exists(&ctl));
    c.assert_no_xdp_left();
}
