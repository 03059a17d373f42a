//! Bad input to gen and recv: a clear message naming what is wrong, a non-zero exit, and
//! nothing sent (the sender's veth counts no packet).

mod common;
use common::*;

/// A classic pcap file with one 60-byte record and the given link type.
fn write_pcap(path: &str, link_type: u32) {
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    for v in [0u32, 0, 65535, link_type, 0, 0, 60, 60] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    f.extend_from_slice(&[0x45u8; 60]);
    std::fs::write(path, f).unwrap();
}

#[test]
fn bad_input_is_refused_before_anything_is_sent() {
    let net = NetPair::new("ge");
    let port = format!("xdp:{}", net.a);
    let dir = std::env::temp_dir();
    let raw_ip = dir.join(format!("wirespeed-gen-rawip-{}.pcap", std::process::id()));
    let garbage = dir.join(format!("wirespeed-gen-garbage-{}.pcap", std::process::id()));
    let (raw_ip, garbage) = (raw_ip.to_str().unwrap(), garbage.to_str().unwrap());
    let all_queues = format!("xdp:{}@all", net.a);
    write_pcap(raw_ip, 101);
    std::fs::write(garbage, b"this is not a capture file at all").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--rate", "0"], "--rate 0: out of range"),
        (&["--rate", "200M"], "--rate 200M: out of range"),
        (&["--rate", "10bit"], "--rate 10bit: out of range"),
        (&["--rate", "lots"], "--rate lots: expected"),
        (&["--size", "63"], "--size 63: out of range"),
        (&["--size", "1519"], "--size 1519: out of range"),
        (&["--size", "64-2000"], "--size 64-2000: out of range"),
        (&["--size", "1500-64"], "--size 1500-64: the range is empty"),
        (
            &["--size", "64", "--ipv6"],
            "IPv6/UDP frames with the 18-byte test payload are 84 to 1518",
        ),
        (
            &["--size", "64", "--proto", "tcp-syn"],
            "IPv4/TCP SYN frames",
        ),
        (&["--flows", "0"], "--flows 0: must be from 1"),
        (&["--vlan", "4095"], "--vlan 4095"),
        (&["--skip-every", "1"], "--skip-every 1"),
        (&["--count", "0"], "--count 0"),
        (
            &["--src-ip", "10.0.0.1", "--dst-ip", "fd00::2"],
            "both must be IPv4, or both IPv6",
        ),
        (
            &["--engine", "kernel", "--port", "packet:lo"],
            "use an xdp: port",
        ),
        (&["--cpus", "0"], "--cpus 0 is for --engine kernel"),
        (
            &["--engine", "kernel", "--cpus", "4096"],
            "--cpus 4096: CPU 4096 is not one this process may run on",
        ),
        (
            &["--engine", "kernel", "--cpus", "0,0"],
            "--cpus 0,0: CPU 0 is listed twice",
        ),
        (
            &["--pcap", "/nonexistent/trace.pcap"],
            "/nonexistent/trace.pcap: cannot open",
        ),
        (&["--pcap", garbage], "not a pcap or pcapng capture file"),
        (&["--pcap", raw_ip], "link type 101 is not supported"),
        (&["--pcap", raw_ip, "--flows", "3"], "cannot be used with"),
        (
            &["--port", &all_queues],
            "'@all' receives on every queue; a port that only sends uses one",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec!["gen"];
        if !extra.contains(&"--port") {
            args.extend_from_slice(&["--port", &port]);
        }
        if !extra.contains(&"--count") {
            args.extend_from_slice(&["--count", "10"]);
        }
        args.extend_from_slice(extra);
        let out = run_in(&net.ns_a, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} succeeded: {err}");
        assert!(err.contains(want), "{extra:?}: expected '{want}' in: {err}");
        assert!(
            !err.contains(" ready "),
            "{extra:?} got as far as ready: {err}"
        );
    }
    let out = run_in(
        &net.ns_b,
        &["recv", "--port", &format!("xdp:{}", net.b), "--count", "0"],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--count 0"));
    let _ = std::fs::remove_file(raw_ip);
    let _ = std::fs::remove_file(garbage);
    assert_eq!(
        link_stat(&net.ns_a, &net.a, "tx", "packets"),
        0,
        "something was sent"
    );
    net.assert_no_xdp();
}
