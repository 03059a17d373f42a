//! txpush sends valid Ethernet/IPv4/UDP frames with the addresses asked for: tcpdump
//! checks the IPv4 and UDP checksums and prints the fields.

mod common;
use common::*;

fn frames_judged_by_tcpdump(tag: &str, backend: &str, size: u32) {
    let net = NetPair::new(tag);
    let file = ScratchFile::new(&format!("frames-{tag}.pcap"));
    let cap = Capture::tcpdump_inbound(&net.ns_b, &net.b, &file);
    let size_s = size.to_string();
    let tx = run_json(
        &net.ns_a,
        &[
            "bench",
            "txpush",
            "--port",
            &format!("{backend}:{}", net.a),
            "--count",
            "100",
            "--size",
            &size_s,
            "--src-mac",
            "02:aa:bb:cc:dd:ee",
            "--dst-mac",
            "02:11:22:33:44:55",
            "--src-ip",
            "192.0.2.1",
            "--dst-ip",
            "198.51.100.7",
            "--src-port",
            "1234",
            "--dst-port",
            "5678",
            "--json",
            "-q",
        ],
    );
    assert_eq!(tx["packets"].as_u64(), Some(100), "{tx}");
    let seen = cap.stop(true);
    assert_eq!(
        seen.frames.len(),
        100,
        "tcpdump saw {} frames",
        seen.frames.len()
    );
    let out = must(&["tcpdump", "-r", &file, "-n", "-e", "-vv"]);
    let lines: Vec<&str> = out.lines().collect();
    // -vv prints two lines a packet: link + IPv4 header, then UDP.
    assert_eq!(lines.len(), 200, "{out}");
    let ip_len = size - 4 - 14;
    let udp_payload = ip_len - 28;
    for pair in lines.chunks(2) {
        let (l1, l2) = (pair[0], pair[1]);
        assert!(
            l1.contains("02:aa:bb:cc:dd:ee > 02:11:22:33:44:55, ethertype IPv4 (0x0800)"),
            "{l1}"
        );
        assert!(l1.contains("ttl 64"), "{l1}");
        assert!(
            l1.contains(&format!("proto UDP (17), length {ip_len})")),
            "{l1}"
        );
        assert!(!l1.contains("bad cksum"), "IPv4 checksum wrong: {l1}");
        assert!(
            l2.trim().starts_with(&format!(
                "192.0.2.1.1234 > 198.51.100.7.5678: [udp sum ok] UDP, length {udp_payload}"
            )),
            "{l2}"
        );
    }
}

#[test]
fn xdp_txpush_frames_are_valid_udp_64() {
    frames_judged_by_tcpdump("f1", "xdp", 64);
}

#[test]
fn xdp_txpush_frames_are_valid_udp_1500() {
    frames_judged_by_tcpdump("f2", "xdp", 1500);
}

#[test]
fn packet_txpush_frames_are_valid_udp_1500() {
    frames_judged_by_tcpdump("f3", "packet", 1500);
}
