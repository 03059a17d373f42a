//! IPv6's flow label: matched whole or under a mask, and rewritten, by rules ovs-ofctl adds
//! (`ipv6_label=0x12345`, `set_field:0x54321->ipv6_label`); ping sets the labels (`-F`) and
//! tcpdump on the far host reads them, with exact counts.

mod common;
use common::switched::{Switched, field};
use common::*;

/// An echo request: 14 + 40 + 8 + ping's 56 bytes.
const ECHO_BYTES: u64 = 118;

/// Pings host B (fd09::2) from host A `count` times with flow label `label`: the replies.
fn ping_with_label(s: &Switched, label: &str, count: u32) -> u32 {
    ping_with(&s.c.ns_a, "fd09::2", count, &["-6", "-F", label])
}

#[test]
fn ovs_ofctl_rules_match_and_rewrite_the_flow_label() {
    let s = Switched::new("fla", &["--openflow", "ptcp:"]);
    s.ipv6_on();
    for flow in [
        "priority=100,icmp6,in_port=1,icmp_type=128,ipv6_label=0x12345,actions=set_field:0x54321->ipv6_label,output:2",
        "priority=90,icmp6,in_port=1,icmp_type=128,ipv6_label=0x10000/0xf0000,actions=output:2",
        "priority=10,in_port=1,actions=output:2",
        "priority=10,in_port=2,actions=output:1",
    ] {
        s.ofctl_ok(&["add-flow", flow]);
    }
    let file = ScratchFile::new("fla.pcap");
    let at_b = Capture::tcpdump_inbound(&s.c.ns_b, &s.c.b, &file);
    for (label, count) in [("0x12345", 3), ("0x1abcd", 2), ("0x2abcd", 2)] {
        assert_eq!(ping_with_label(&s, label, count), count, "label {label}");
    }
    let captured = at_b.stop(true);

    // The echo requests B received, by label, as tcpdump prints them.
    let printed = must(&["tcpdump", "-nv", "-r", &file]);
    let mut labels: Vec<&str> = printed
        .lines()
        .filter(|l| l.contains("fd09::1 > fd09::2"))
        .filter(|l| l.contains("echo request"))
        .map(|l| {
            l.split("flowlabel ")
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .unwrap_or("none")
        })
        .collect();
    labels.sort();
    assert_eq!(
        labels,
        [
            "0x1abcd", "0x1abcd", "0x2abcd", "0x2abcd", "0x54321", "0x54321", "0x54321"
        ],
        "{printed}"
    );
    assert_eq!(captured.dropped_by_tcpdump, 0);

    let flows = s.ofctl_ok(&["dump-flows"]);
    for (rule, packets) in [
        (
            "ipv6_label=0x12345,icmp_type=128 actions=set_field:0x54321",
            3,
        ),
        (
            "ipv6_label=0x10000/0xf0000,icmp_type=128 actions=output:2",
            2,
        ),
    ] {
        assert_eq!(field(&flows, rule, "n_packets"), packets, "{rule}: {flows}");
        assert_eq!(
            field(&flows, rule, "n_bytes"),
            packets * ECHO_BYTES,
            "{flows}"
        );
    }
    // ctl prints them as ovs-ofctl does.
    let ctl = s.ctl_ok(&["dump-flows"]);
    assert!(
        ctl.contains("icmp6,in_port=1,ipv6_label=0x12345,icmp_type=128 actions=set_field:0x54321->ipv6_label,output:2")
            && ctl.contains("icmp6,in_port=1,ipv6_label=0x10000/0xf0000,icmp_type=128 actions=output:2"),
        "{ctl}"
    );
}
