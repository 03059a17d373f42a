//! Bad input to gen and recv: a clear message naming what is wrong, a non-zero exit, and
//! nothing sent (the sender's veth counts no packet).

mod common;
use common::*;

/// A classic pcap file with one record of `len` bytes and the given link type.
fn write_pcap(path: &str, link_type: u32, len: u32) {
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    for v in [0u32, 0, 65535, link_type, 0, 0, len, len] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    f.extend(std::iter::repeat_n(0x45u8, len as usize));
    std::fs::write(path, f).unwrap();
}

/// A pcapng file: an Ethernet interface and a 60-byte packet on it, then a raw-IP interface
/// (link type 101) and a packet on that.
fn write_mixed_pcapng(path: &str) {
    let block = |kind: u32, body: &[u8]| {
        let len = (12 + body.len()) as u32;
        let mut b = kind.to_le_bytes().to_vec();
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(body);
        b.extend_from_slice(&len.to_le_bytes());
        b
    };
    let idb = |link_type: u16| {
        let mut b = link_type.to_le_bytes().to_vec();
        b.extend_from_slice(&[0, 0, 0xff, 0xff, 0, 0]);
        b
    };
    let epb = |interface: u32| {
        let mut b = Vec::new();
        for v in [interface, 0, 0, 60, 60] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&[0x45u8; 60]);
        b
    };
    let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&[1, 0, 0, 0]);
    shb.extend_from_slice(&[0xff; 8]);
    let mut f = block(0x0a0d_0d0a, &shb);
    f.extend(block(1, &idb(1)));
    f.extend(block(6, &epb(0)));
    f.extend(block(1, &idb(101)));
    f.extend(block(6, &epb(1)));
    std::fs::write(path, f).unwrap();
}

#[test]
fn bad_input_is_refused_before_anything_is_sent() {
    let net = NetPair::new("ge");
    let port = format!("xdp:{}", net.a);
    let dir = std::env::temp_dir();
    let file = |name: &str| {
        let path = dir.join(format!("wirespeed-gen-{name}-{}", std::process::id()));
        path.to_str().unwrap().to_string()
    };
    let (raw_ip, garbage) = (file("rawip.pcap"), file("garbage.pcap"));
    let (mixed, jumbo) = (file("mixed.pcapng"), file("jumbo.pcap"));
    let (raw_ip, garbage, mixed, jumbo) = (&*raw_ip, &*garbage, &*mixed, &*jumbo);
    let all_queues = format!("xdp:{}@all", net.a);
    write_pcap(raw_ip, 101, 60);
    write_pcap(jumbo, 1, 9000);
    write_mixed_pcapng(mixed);
    std::fs::write(garbage, b"this is not a capture file at all").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--rate", "0"], "--rate 0: out of range"),
        (&["--rate", "200M"], "--rate 200M: out of range"),
        (&["--rate", "10bit"], "--rate 10bit: out of range"),
        (&["--rate", "lots"], "--rate lots: expected"),
        (&["--size", "63"], "--size 63: out of range"),
        (
            &["--size", "1519"],
            "has MTU 1500, which carries frames of at most 1518 bytes on the wire",
        ),
        (&["--size", "64-2000"], "--size 64-2000: wst"),
        (&["--size", "9001"], "--size 9001: out of range"),
        (
            &["--imix=64,big"],
            "--imix=64,big: expected up to 1024 sizes",
        ),
        (&["--imix=64,9001"], "--imix=64,9001: out of range"),
        (
            &["--size", "1519", "--engine", "kernel"],
            "--size 1519: out of range: IPv4/UDP frames with the 18-byte test payload are 64 to 1518",
        ),
        (&["--size", "1500-64"], "--size 1500-64: the range is empty"),
        (
            &["--size", "64", "--ipv6"],
            "IPv6/UDP frames with the 18-byte test payload are 84 to 9000",
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
        // The file's frames go as they are: a destination given would be ignored.
        (
            &["--pcap", raw_ip, "--dst-mac", "02:11:11:11:11:11"],
            "cannot be used with",
        ),
        // A replay sends the file's frames as they are: --no-stamp would be ignored.
        (
            &["--pcap", raw_ip, "--engine", "kernel", "--no-stamp"],
            "cannot be used with '--no-stamp'",
        ),
        (
            &["--pcap", mixed],
            "has link type 101, the first interface 1: files that mix link types",
        ),
        (
            &["--pcap", jumbo],
            "a frame of 9000 bytes is longer than xdp:",
        ),
        (
            &["--port", &all_queues],
            "a port on several queues receives on each; a port that only sends uses one",
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
    // A recording port is not touched when the replay is refused.
    let keep = file("keep.pcap");
    std::fs::write(&keep, b"not to be cut").unwrap();
    let to_keep = format!("pcap:{keep}");
    let out = run_in(&net.ns_a, &["gen", "--port", &to_keep, "--pcap", jumbo]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("longer than"),
        "{err}"
    );
    assert_eq!(std::fs::read(&keep).unwrap(), b"not to be cut");
    for f in [raw_ip, garbage, mixed, jumbo, &keep] {
        let _ = std::fs::remove_file(f);
    }
    assert_eq!(
        link_stat(&net.ns_a, &net.a, "tx", "packets"),
        0,
        "something was sent"
    );
    net.assert_no_xdp();
}
