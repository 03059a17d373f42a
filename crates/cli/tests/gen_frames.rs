//! gen sends the frames asked for: tshark judges every checksum (IPv4, UDP, TCP, ICMP,
//! ICMPv6) and reads back the protocol fields, sizes and flows.

mod common;
use common::tshark::{tshark_fields, tshark_problems};
use common::*;
use std::collections::{BTreeMap, BTreeSet};

/// Captures what `gen ARGS` sends from A into B; returns the capture file.
fn capture_gen(net: &NetPair, tag: &str, backend: &str, count: u64, args: &[&str]) -> ScratchFile {
    let file = ScratchFile::new(&format!("gen-{tag}.pcap"));
    let cap = Capture::tcpdump_inbound(&net.ns_b, &net.b, &file);
    let port = format!("{backend}:{}", net.a);
    let n = count.to_string();
    let mut all = vec!["gen", "--port", &port, "--count", &n, "--json", "-q"];
    all.extend_from_slice(args);
    let tx = run_json(&net.ns_a, &all);
    assert_eq!(tx["packets"].as_u64(), Some(count), "{tx}");
    assert_eq!(tx["drops_total"].as_u64(), Some(0), "{tx}");
    let seen = cap.stop(true);
    assert_eq!(seen.dropped_by_tcpdump, 0);
    assert_eq!(
        seen.frames.len() as u64,
        count,
        "tcpdump saw {} frames",
        seen.frames.len()
    );
    file
}

fn count_by(rows: &[Vec<String>], col: usize) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for r in rows {
        *m.entry(r[col].clone()).or_insert(0) += 1;
    }
    m
}

#[test]
fn ipv4_udp_imix_vlan_flows_over_xdp() {
    let net = NetPair::new("g1");
    let file = capture_gen(
        &net,
        "g1",
        "xdp",
        120,
        &[
            "--imix",
            "--flows",
            "4",
            "--vlan",
            "10",
            "--src-mac",
            "02:aa:bb:cc:dd:ee",
            "--dst-mac",
            "02:11:22:33:44:55",
            "--src-ip",
            "192.0.2.1",
            "--dst-ip",
            "198.51.100.7",
            "--src-port",
            "65534",
            "--dst-port",
            "9",
        ],
    );
    assert_eq!(tshark_problems(&file), "", "tshark found problems");
    let rows = tshark_fields(
        &file,
        &[
            "frame.len",
            "eth.src",
            "eth.dst",
            "vlan.id",
            "ip.src",
            "ip.dst",
            "udp.srcport",
            "udp.dstport",
            "ip.checksum.status",
            "udp.checksum.status",
        ],
    );
    assert_eq!(rows.len(), 120);
    // IMIX 7:4:1 of 64/594/1518 on the wire (frame.len has no FCS); with the VLAN tag the
    // smallest frame that holds the test payload is 68 bytes, so 64 is raised to it.
    let sizes = count_by(&rows, 0);
    let want: BTreeMap<String, usize> = [("64", 70), ("590", 40), ("1514", 10)]
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    assert_eq!(sizes, want);
    let mut flows = BTreeSet::new();
    for r in &rows {
        assert_eq!(
            &r[1..4],
            ["02:aa:bb:cc:dd:ee", "02:11:22:33:44:55", "10"],
            "{r:?}"
        );
        assert_eq!(r[5], "198.51.100.7");
        assert_eq!(r[7], "9");
        assert_eq!(&r[8..10], ["1", "1"], "checksums not good: {r:?}");
        flows.insert((r[4].clone(), r[6].clone()));
    }
    // Source port 65534, 65535, then the next address.
    let want: BTreeSet<(String, String)> = [
        ("192.0.2.1", "65534"),
        ("192.0.2.1", "65535"),
        ("192.0.2.2", "65534"),
        ("192.0.2.2", "65535"),
    ]
    .iter()
    .map(|(a, p)| (a.to_string(), p.to_string()))
    .collect();
    assert_eq!(flows, want);
    net.assert_no_xdp();
}

#[test]
fn ipv6_tcp_syn_size_range_over_packet() {
    let net = NetPair::new("g2");
    let file = capture_gen(
        &net,
        "g2",
        "packet",
        100,
        &[
            "--proto",
            "tcp-syn",
            "--ipv6",
            "--size",
            "100-1518",
            "--dst-ip",
            "2001:db8::7",
        ],
    );
    assert_eq!(tshark_problems(&file), "", "tshark found problems");
    let rows = tshark_fields(
        &file,
        &[
            "frame.len",
            "ipv6.src",
            "ipv6.dst",
            "tcp.flags.syn",
            "tcp.flags.ack",
            "tcp.srcport",
            "tcp.dstport",
            "tcp.checksum.status",
            "tcp.len",
        ],
    );
    assert_eq!(rows.len(), 100);
    let mut sizes = BTreeSet::new();
    for r in &rows {
        let len: u32 = r[0].parse().unwrap();
        assert!((96..=1514).contains(&len), "{r:?}");
        sizes.insert(len);
        assert_eq!(
            &r[1..8],
            ["fd00::1", "2001:db8::7", "1", "0", "1024", "9", "1"],
            "{r:?}"
        );
        // The test payload rides in the SYN: everything after 14 + 40 + 20 bytes of headers.
        assert_eq!(r[8], (len - 74).to_string(), "{r:?}");
    }
    assert!(
        sizes.len() > 50,
        "sizes not spread over the range: {sizes:?}"
    );
}

#[test]
fn icmp_echo_v4_and_v6() {
    let net = NetPair::new("g3");
    let file = capture_gen(
        &net,
        "g3",
        "xdp",
        50,
        &["--proto", "icmp", "--size", "128", "--flows", "5"],
    );
    assert_eq!(tshark_problems(&file), "", "tshark found problems");
    let rows = tshark_fields(
        &file,
        &[
            "frame.len",
            "icmp.type",
            "icmp.code",
            "icmp.ident",
            "icmp.checksum.status",
            "ip.checksum.status",
        ],
    );
    assert_eq!(rows.len(), 50);
    for r in &rows {
        assert_eq!(&r[0..3], ["124", "8", "0"], "{r:?}");
        assert_eq!(&r[4..6], ["1", "1"], "{r:?}");
    }
    assert_eq!(
        count_by(&rows, 3).len(),
        5,
        "five flows: five echo identifiers"
    );

    let file = capture_gen(
        &net,
        "g3v6",
        "xdp",
        50,
        &["--proto", "icmp", "--ipv6", "--size", "84"],
    );
    assert_eq!(tshark_problems(&file), "", "tshark found problems");
    let rows = tshark_fields(
        &file,
        &[
            "frame.len",
            "icmpv6.type",
            "icmpv6.checksum.status",
            "ipv6.src",
        ],
    );
    assert_eq!(rows.len(), 50);
    for r in &rows {
        assert_eq!(r, &["80", "128", "1", "fd00::1"], "{r:?}");
    }
    net.assert_no_xdp();
}
