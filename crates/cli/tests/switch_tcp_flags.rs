//! Open vSwitch's `tcp_flags` match, as ovs-ofctl writes it (`tcp_flags=+syn-ack`: SYN set,
//! ACK clear): a stateless firewall that lets host A open TCP connections to host B and
//! not the other way, judged by real TCP, with exact counts; and, with `--offload`, a flow
//! decided by its flags stays in user space, where each packet's flags are looked at.

mod common;
use common::switched::{Switched, field, flow_without_duration};
use common::*;

/// Linux's SYN: 20 bytes of TCP options (MSS, SACK permitted, timestamps, window scale),
/// so 14 + 20 + 40 bytes. A FIN without data carries timestamps only: 14 + 20 + 32.
const SYN_BYTES: u64 = 74;
const FIN_BYTES: u64 = 66;

/// Host A (10.9.0.1) and B (10.9.0.2) knowing each other for good: no ARP crosses, so each
/// count below is TCP's alone.
fn neighbours(s: &Switched) {
    let (mac_a, mac_b) = (mac_of(&s.c.ns_a, &s.c.a), mac_of(&s.c.ns_b, &s.c.b));
    permanent_neighbour(&s.c.ns_a, &s.c.a, "10.9.0.2", &mac_b);
    permanent_neighbour(&s.c.ns_b, &s.c.b, "10.9.0.1", &mac_a);
}

/// From `ns`, a TCP connection to `to` port 5002 tried for half a second (one SYN: Linux
/// sends the next after a second): `connected`, `refused` or `timeout`.
fn try_connect(ns: &str, to: &str) -> String {
    let script = format!(
        "import socket\n\
         s=socket.socket(); s.settimeout(0.5)\n\
         try:\n  s.connect(('{to}', 5002)); print('connected')\n\
         except socket.timeout: print('timeout')\n\
         except ConnectionRefusedError: print('refused')"
    );
    let out = sh(&["ip", "netns", "exec", ns, "python3", "-c", &script]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn ovs_ofctl_tcp_flags_let_only_one_side_open_connections() {
    let s = Switched::new("tfl", &["--openflow", "ptcp:"]);
    neighbours(&s);
    for flow in [
        // B's connection attempts go nowhere.
        "priority=100,tcp,in_port=2,tcp_flags=+syn-ack,actions=drop",
        // A's are counted, and so is B's end of a connection.
        "priority=90,tcp,in_port=1,tcp_flags=+syn-ack,actions=output:2",
        "priority=90,tcp,in_port=2,tcp_flags=+fin,actions=output:1",
        "priority=10,in_port=1,actions=output:2",
        "priority=10,in_port=2,actions=output:1",
    ] {
        s.ofctl_ok(&["add-flow", flow]);
    }

    // A opens a connection to B, sends, and closes; B reads to the end and closes its side.
    s.tcp_transfer_is_intact(100_000);
    // B's attempt is not refused by A: it never reaches A. Its one SYN is dropped.
    assert_eq!(try_connect(&s.c.ns_b, "10.9.0.1"), "timeout");
    let flows = s.ofctl_ok(&["dump-flows"]);
    let dropped = "in_port=2,tcp_flags=+syn-ack";
    assert_eq!(field(&flows, dropped, "n_packets"), 1, "{flows}");
    assert_eq!(field(&flows, dropped, "n_bytes"), SYN_BYTES, "{flows}");
    // Without the firewall, A would refuse it.
    s.ofctl_ok(&[
        "del-flows",
        "--strict",
        "priority=100,tcp,in_port=2,tcp_flags=+syn-ack",
    ]);
    assert_eq!(try_connect(&s.c.ns_b, "10.9.0.1"), "refused");

    let flows = s.ofctl_ok(&["dump-flows"]);
    for (rule, packets, bytes) in [
        ("in_port=1,tcp_flags=+syn-ack", 1, SYN_BYTES),
        ("in_port=2,tcp_flags=+fin", 1, FIN_BYTES),
    ] {
        assert_eq!(field(&flows, rule, "n_packets"), packets, "{rule}: {flows}");
        assert_eq!(field(&flows, rule, "n_bytes"), bytes, "{rule}: {flows}");
    }
    // ovs-ofctl and ctl print the flags' rules as Open vSwitch does.
    let flag_rules = |dump: &str| -> Vec<String> {
        let mut lines: Vec<String> = dump
            .lines()
            .filter(|l| l.contains("tcp_flags"))
            .map(|l| flow_without_duration(l).replace("cookie=0x0, ", ""))
            .map(|l| l.split("priority=").nth(1).unwrap_or_default().to_string())
            .collect();
        lines.sort();
        lines
    };
    let want = [
        "90,tcp,in_port=1,tcp_flags=+syn-ack actions=output:2",
        "90,tcp,in_port=2,tcp_flags=+fin actions=output:1",
    ];
    assert_eq!(flag_rules(&flows), want);
    assert_eq!(flag_rules(&s.ctl_ok(&["dump-flows"])), want);
    // tcp_flags needs TCP, and cannot be written.
    for (flow, why) in [
        (
            "udp,tcp_flags=+syn,actions=drop",
            "tcp_flags requires tcp or tcp6 (nw_proto=6)",
        ),
        (
            "tcp,actions=load:1->NXM_NX_TCP_FLAGS[0]",
            "NXM_NX_TCP_FLAGS cannot be written",
        ),
    ] {
        let out = s.ctl(&["add-flow", flow]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(why),
            "{flow}: {stderr}"
        );
    }
}

/// With `--offload`, a flow whose megaflow looked at TCP's flags is never handed to the
/// kernel, whose key has no flags: B's acknowledgements, checked for a FIN, stay in user
/// space, so B's FIN is counted by its rule; A's data, never checked, is offloaded.
#[test]
fn flows_decided_by_tcp_flags_stay_out_of_the_kernel() {
    let s = Switched::new("tfo", &["--offload"]);
    neighbours(&s);
    // NAPI for the kernel's redirects; whole checksums, so TCP's segments can be offloaded.
    for (ns, dev) in [(&s.c.ns_a, &s.c.a), (&s.c.ns_b, &s.c.b)] {
        must(&[
            "ip", "netns", "exec", ns, "ethtool", "-K", dev, "gro", "on", "tx", "off",
        ]);
    }
    for flow in [
        "priority=100,tcp,in_port=2,tcp_flags=+fin,actions=output:1",
        "priority=10,in_port=1,actions=output:2",
        "priority=10,in_port=2,actions=output:1",
    ] {
        s.ctl_ok(&["add-flow", flow]);
    }
    s.tcp_transfer_is_intact(4 * 1024 * 1024);
    let flows = s.ctl_ok(&["dump-flows"]);
    assert_eq!(field(&flows, "tcp_flags=+fin", "n_packets"), 1, "{flows}");
    assert_eq!(
        field(&flows, "tcp_flags=+fin", "n_bytes"),
        FIN_BYTES,
        "{flows}"
    );
    let cache = s.ctl_ok(&["dump-cache"]);
    assert!(
        field(&cache, "fast_path:", "kernel_hits") > 100,
        "A's segments went through the kernel: {cache}"
    );
}
