//! Filters against libpcap's own interpreter (`pcap_offline_filter`) as the oracle.

use super::*;
use proptest::prelude::*;

const EXPRESSIONS: &[&str] = &[
    "ip",
    "ip6",
    "arp",
    "not arp",
    "tcp",
    "udp",
    "icmp",
    "vlan",
    "vlan 100",
    "vlan and udp",
    "port 53",
    "tcp port 80",
    "udp dst port 9",
    "src port 1024",
    "portrange 1-1000",
    "host 10.0.0.1",
    "src host 10.0.0.2",
    "dst net 10.0.0.0/24",
    "net 192.168.0.0/16",
    "ip6 and udp",
    "ip6 host fe80::1",
    "len > 100",
    "len <= 64",
    "greater 200",
    "less 80",
    "tcp[tcpflags] & tcp-syn != 0",
    "tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn",
    "ip[8] < 64",
    "icmp[icmptype] == icmp-echo",
    "ether host 02:00:00:00:00:01",
    "ether broadcast",
    "ip broadcast or ip multicast",
    "ip proto 47",
    "udp and not port 53",
    "ip6 protochain 6",
    "ip protochain 17",
];

/// A frame with plausible headers at the usual offsets, then random bytes.
fn frame(ethertype: u16, proto: u8, vlan: bool, tail: &[u8], len: usize) -> Vec<u8> {
    let mut p = vec![0u8; 14];
    p[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    p[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    if vlan {
        p[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        p.extend_from_slice(&[0x00, 100]);
        p.extend_from_slice(&ethertype.to_be_bytes());
    } else {
        p[12..14].copy_from_slice(&ethertype.to_be_bytes());
    }
    match ethertype {
        0x0800 => {
            p.extend_from_slice(&[0x45, 0, 0, 60, 0, 0, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1]);
            p.extend_from_slice(&[10, 0, 0, 2]);
        }
        0x86dd => {
            p.extend_from_slice(&[0x60, 0, 0, 0, 0, 20, proto, 64]);
            p.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            p.extend_from_slice(&[0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        }
        _ => {}
    }
    p.extend_from_slice(tail);
    p.truncate(len);
    p
}

#[test]
fn invalid_expression_gives_libpcap_message() {
    let e = Filter::compile("tcp port", 1).unwrap_err();
    assert!(e.message.contains("syntax error"), "{e}");
    let e = Filter::compile("port 99999", 1).unwrap_err();
    assert!(e.message.contains("99999"), "{e}");
}

/// A raw-IP file (LINKTYPE_RAW, 101: a tun or WireGuard capture) is filtered as libpcap
/// filters it, its packets starting at the IP header.
#[test]
fn raw_ip_files_are_filtered() {
    let mut udp = vec![0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0];
    udp.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    udp.extend_from_slice(&[0, 53, 0, 53, 0, 8, 0, 0]);
    let mut tcp = udp.clone();
    tcp[9] = 6;
    let f = Filter::compile("udp port 53", 101).unwrap();
    assert!(f.matches(&udp, udp.len() as u32));
    assert!(!f.matches(&tcp, tcp.len() as u32));
    let ip6 = Filter::compile("ip6", 101).unwrap();
    assert!(!ip6.matches(&udp, udp.len() as u32));
}

#[test]
fn a_program_comes_back_whole_from_its_text() {
    for expr in EXPRESSIONS {
        let f = Filter::compile(expr, 1).unwrap();
        let back = Filter::from_text(expr, &f.to_text()).unwrap();
        assert_eq!(back.insns(), f.insns(), "{expr}");
    }
    let e = Filter::from_text("x", "6 0 0\n").unwrap_err();
    assert_eq!(e.message, "a line of the program is not code jt jf k");
}

#[test]
fn all_expressions_compile_and_validate() {
    for expr in EXPRESSIONS {
        let f = Filter::compile(expr, 1).unwrap_or_else(|e| panic!("{expr}: {e}"));
        assert!(!f.insns().is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn same_answer_as_libpcap(
        kind in 0usize..4,
        // 0, 43, 60: IPv6 extension headers, which protochain walks.
        proto in prop::sample::select(vec![1u8, 6, 17, 47, 58, 0, 43, 60]),
        vlan in any::<bool>(),
        tail in proptest::collection::vec(any::<u8>(), 0..200),
        len in 0usize..260,
    ) {
        let ethertype = [0x0800, 0x86dd, 0x0806, 0x1234][kind];
        let p = frame(ethertype, proto, vlan, &tail, len);
        for expr in EXPRESSIONS {
            let ours = Filter::compile(expr, 1).unwrap();
            let dead = pcap::Capture::dead(pcap::Linktype(1)).unwrap();
            let theirs = dead.compile(expr, true).unwrap();
            prop_assert_eq!(ours.matches(&p, p.len() as u32), theirs.filter(&p), "{} on {:02x?}", expr, p);
        }
    }
}
