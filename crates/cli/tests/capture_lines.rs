//! Lines as tcpdump -n prints them, judged by tcpdump itself. TCP: sequence numbers relative
//! to each connection's first ones (and absolute with -S), options, SACK blocks, malformed
//! and truncated headers, in crafted frames and in a real connection between namespaces.
//! ICMP and ICMPv6: each message with what it is about, and messages cut short.

mod common;

use std::process::{Command, Stdio};

use common::pcaps::*;
use common::*;
use wirespeed_capture::write::Format;

const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 0, 0, 2];
const A6: [u16; 8] = [0xfd00, 0, 0, 0, 0, 0, 0, 1];
const B6: [u16; 8] = [0xfd00, 0, 0, 0, 0, 0, 0, 2];

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
const URG: u8 = 0x20;

/// A TCP header with every field chosen; `options` are padded to whole words by the caller.
struct Seg<'a> {
    ports: (u16, u16),
    seq: u32,
    ack: u32,
    flags: u8,
    win: u16,
    urg: u16,
    options: &'a [u8],
    /// The data offset, when it is to lie; else the header's true length.
    offset: Option<u8>,
    payload: &'a [u8],
}

impl Seg<'_> {
    fn bytes(&self) -> Vec<u8> {
        assert_eq!(self.options.len() % 4, 0);
        let offset = self.offset.unwrap_or(5 + self.options.len() as u8 / 4);
        let mut h = Vec::new();
        h.extend_from_slice(&self.ports.0.to_be_bytes());
        h.extend_from_slice(&self.ports.1.to_be_bytes());
        h.extend_from_slice(&self.seq.to_be_bytes());
        h.extend_from_slice(&self.ack.to_be_bytes());
        h.extend_from_slice(&[offset << 4, self.flags]);
        h.extend_from_slice(&self.win.to_be_bytes());
        h.extend_from_slice(&[0, 0]);
        h.extend_from_slice(&self.urg.to_be_bytes());
        h.extend_from_slice(self.options);
        h.extend_from_slice(self.payload);
        h
    }
}

fn seg(ports: (u16, u16), seq: u32, ack: u32, flags: u8, options: &[u8]) -> Seg<'_> {
    Seg {
        ports,
        seq,
        ack,
        flags,
        win: 502,
        urg: 0,
        options,
        offset: None,
        payload: &[],
    }
}

fn v4(src: [u8; 4], dst: [u8; 4], s: &Seg) -> Vec<u8> {
    eth(
        MAC_B,
        MAC_A,
        &[],
        0x0800,
        &ipv4(src, dst, 6, 0x4000, 0, &s.bytes()),
    )
}

fn v6(src: [u16; 8], dst: [u16; 8], s: &Seg) -> Vec<u8> {
    eth(MAC_B, MAC_A, &[], 0x86dd, &ipv6(src, dst, 6, &s.bytes()))
}

/// mss 1460, sackOK, TS val 1 ecr 0, nop, wscale 7: what Linux puts in a SYN.
const SYN_OPTIONS: [u8; 20] = [
    2, 4, 5, 180, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
];
/// nop, nop, TS val 2 ecr 1.
const TS_OPTIONS: [u8; 12] = [1, 1, 8, 10, 0, 0, 0, 2, 0, 0, 0, 1];

/// A conversation and its oddities, each frame whole unless a capture length is given.
fn crafted() -> Vec<(Vec<u8>, Option<usize>)> {
    let (c, s) = ((40002, 5001), (5001, 40002));
    let (isn_c, isn_s) = (100_000u32, 4_294_967_000u32); // the server's wraps around
    // nop, nop, SACK of two blocks of the client's data.
    let mut sack = vec![1, 1, 5, 18];
    for n in [isn_c + 101, isn_c + 201, isn_c + 301, isn_c + 401] {
        sack.extend_from_slice(&n.to_be_bytes());
    }
    let data = [7u8; 100];
    let frames = vec![
        v4(A, B, &seg(c, isn_c, 0, SYN, &SYN_OPTIONS)),
        v4(B, A, &seg(s, isn_s, isn_c + 1, SYN | ACK, &SYN_OPTIONS)),
        v4(
            A,
            B,
            &seg(c, isn_c + 1, isn_s.wrapping_add(1), ACK, &TS_OPTIONS),
        ),
        v4(
            A,
            B,
            &Seg {
                payload: &data,
                ..seg(c, isn_c + 1, isn_s.wrapping_add(1), PSH | ACK, &TS_OPTIONS)
            },
        ),
        v4(
            B,
            A,
            &seg(s, isn_s.wrapping_add(1), isn_c + 101, ACK, &sack),
        ),
        v4(
            A,
            B,
            &Seg {
                urg: 5,
                win: 65535,
                payload: &data[..10],
                ..seg(c, isn_c + 101, isn_s.wrapping_add(1), URG | ACK, &[])
            },
        ),
        // An option tcpdump does not know; nop then eol, and what follows eol is not read;
        // a length past the header; mss with a length of 6.
        v4(
            A,
            B,
            &seg(
                c,
                isn_c + 111,
                isn_s.wrapping_add(1),
                ACK,
                &[99, 4, 0xab, 0xcd],
            ),
        ),
        v4(
            A,
            B,
            &seg(c, isn_c + 111, isn_s.wrapping_add(1), ACK, &[1, 0, 5, 5]),
        ),
        v4(
            A,
            B,
            &seg(c, isn_c + 111, isn_s.wrapping_add(1), ACK, &[1, 2, 9, 0]),
        ),
        v4(
            A,
            B,
            &seg(
                c,
                isn_c + 111,
                isn_s.wrapping_add(1),
                ACK,
                &[2, 6, 5, 180, 0, 0, 0, 0],
            ),
        ),
        v4(
            B,
            A,
            &seg(s, isn_s.wrapping_add(1), isn_c + 111, FIN | ACK, &[]),
        ),
        v4(A, B, &seg(c, isn_c + 111, 0, RST, &[])),
        v4(A, B, &seg(c, 7, 0, 0, &[])),
        v4(A, B, &seg(c, 7, 0, 0xc0 | ACK, &[])),
        // Another conversation whose first segment seen carries an ACK: absolute numbers,
        // then relative ones.
        v4(B, A, &seg((80, 33000), 5000, 6000, ACK, &[])),
        v4(A, B, &seg((33000, 80), 6000, 5010, ACK, &[])),
        // The data offset says 16 bytes; then 60, in a 20-byte segment.
        v4(
            A,
            B,
            &Seg {
                offset: Some(4),
                ..seg(c, 1, 1, ACK, &[])
            },
        ),
        v4(
            A,
            B,
            &Seg {
                offset: Some(15),
                ..seg(c, 1, 1, ACK, &[])
            },
        ),
        // IPv6.
        v6(A6, B6, &seg(c, 10, 0, SYN, &SYN_OPTIONS)),
        v6(B6, A6, &seg(s, 20, 11, SYN | ACK, &SYN_OPTIONS)),
        v6(
            A6,
            B6,
            &Seg {
                payload: &data,
                ..seg(c, 11, 21, PSH | ACK, &TS_OPTIONS)
            },
        ),
    ];
    let mut out: Vec<_> = frames.into_iter().map(|f| (f, None)).collect();
    // Cut short by a snap length: inside TS's value, at an option's length byte, inside
    // the fixed header, inside the ports, inside the payload; UDP and ICMP after their
    // headers.
    let syn = v4(A, B, &seg(c, isn_c, 0, SYN, &SYN_OPTIONS));
    for cut in [
        14 + 20 + 20 + 10,
        14 + 20 + 20 + 5,
        14 + 20 + 10,
        14 + 20 + 2,
    ] {
        out.push((syn.clone(), Some(cut)));
    }
    let with_data = v4(
        A,
        B,
        &Seg {
            payload: &data,
            ..seg(c, isn_c + 1, isn_s.wrapping_add(1), PSH | ACK, &TS_OPTIONS)
        },
    );
    out.push((with_data, Some(14 + 20 + 32 + 4)));
    let udp_v4 = eth(
        MAC_B,
        MAC_A,
        &[],
        0x0800,
        &ipv4(A, B, 17, 0, 0, &udp(1024, 9, &[0; 40])),
    );
    out.push((udp_v4, Some(14 + 20 + 8)));
    let icmp_v4 = eth(
        MAC_B,
        MAC_A,
        &[],
        0x0800,
        &ipv4(A, B, 1, 0, 0, &icmp(8, 0, &[0; 56])),
    );
    out.push((icmp_v4, Some(14 + 20 + 8)));
    out
}

fn records(frames: Vec<(Vec<u8>, Option<usize>)>) -> Vec<Rec> {
    frames
        .into_iter()
        .enumerate()
        .map(|(i, (mut f, cut))| {
            let len = f.len() as u32;
            if let Some(cut) = cut {
                f.truncate(cut);
            }
            (1_700_000_000_000_000_000 + i as u64 * 1_000_000, f, len)
        })
        .collect()
}

/// `wirespeed capture -r FILE FLAGS` prints, line for line, what `tcpdump -n -r FILE FLAGS`
/// does.
fn assert_lines_like_tcpdump(file: &str, count: usize, flags: &[&str]) {
    let run = |program: &str, args: &[&str]| {
        let out = Command::new(program)
            .args(args)
            .args(["-r", file])
            .args(flags)
            .env("TZ", "UTC")
            .stderr(Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // -nn, tcpdump's habit: neither addresses nor ports named.
    let ours = run(wirespeed(), &["capture", "-nn"]);
    let theirs = run("tcpdump", &["-nn"]);
    assert_eq!(theirs.lines().count(), count, "{theirs}");
    assert_eq!(ours.lines().count(), count, "{ours}");
    for (a, b) in ours.lines().zip(theirs.lines()) {
        assert_eq!(a, b, "{flags:?}");
    }
}

#[test]
fn crafted_tcp_lines_print_like_tcpdump() {
    let dir = TempDir::new("tcp-lines");
    let file = dir.path("tcp.pcap");
    let recs = records(crafted());
    write_capture(&file, Format::Pcap, &recs);
    assert_lines_like_tcpdump(&file, recs.len(), &[]);
    assert_lines_like_tcpdump(&file, recs.len(), &["-S"]);
}

/// Real traffic captured by tcpdump in both directions: a TCP connection (handshake,
/// 300 kB, close), pings, a UDP datagram to a closed port and its ICMP port unreachable,
/// and over IPv6 (on for this test) neighbour discovery, multicast listener reports and
/// pings.
#[test]
fn real_traffic_prints_like_tcpdump() {
    let net = NetPair::new("tl");
    for (ns, dev, v4, v6) in [
        (&net.ns_a, &net.a, "10.31.0.1/24", "fd31::1/64"),
        (&net.ns_b, &net.b, "10.31.0.2/24", "fd31::2/64"),
    ] {
        let knob = format!("net.ipv6.conf.{dev}.disable_ipv6=0");
        for knob in ["net.ipv6.conf.all.disable_ipv6=0", &knob] {
            must(&["ip", "netns", "exec", ns, "sysctl", "-qw", knob]);
        }
        must(&["ip", "-n", ns, "addr", "add", v4, "dev", dev]);
        must(&["ip", "-n", ns, "addr", "add", v6, "dev", dev, "nodad"]);
    }
    let dir = TempDir::new("lines-live");
    let file = dir.path("live.pcap");
    let capture = Capture::tcpdump(&net.ns_b, &net.b, "inout", &file);
    common::switched::tcp_transfer_is_intact(&net.ns_a, &net.ns_b, "10.31.0.2", 300_000);
    assert_eq!(ping(&net.ns_a, "10.31.0.2", 2), 2);
    assert_eq!(ping(&net.ns_a, "fd31::2", 2), 2);
    let closed = "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\
                  .sendto(b'x', ('10.31.0.2', 9))";
    must(&["ip", "netns", "exec", &net.ns_a, "python3", "-c", closed]);
    let captured = capture.stop(true);
    assert_eq!(captured.dropped_by_tcpdump, 0);
    let count = captured.frames.len();
    // ARP, the handshake, the data and its ACKs, the close, 4 pings and 4 replies, the
    // datagram and its unreachable, neighbour discovery.
    assert!(count >= 20, "{count} frames");
    assert_lines_like_tcpdump(&file, count, &[]);
    assert_lines_like_tcpdump(&file, count, &["-S"]);
}

/// An ICMP message: type, code, the 4 bytes after the checksum, the rest.
fn icmp_msg(kind: u8, code: u8, word: [u8; 4], rest: &[u8]) -> Vec<u8> {
    let mut m = vec![kind, code, 0, 0];
    m.extend_from_slice(&word);
    m.extend_from_slice(rest);
    m
}

fn icmp_v4(m: &[u8]) -> Vec<u8> {
    eth(MAC_B, MAC_A, &[], 0x0800, &ipv4(B, A, 1, 0, 0, m))
}

fn icmp_v6(src: [u16; 8], dst: [u16; 8], m: &[u8]) -> Vec<u8> {
    eth(MAC_B, MAC_A, &[], 0x86dd, &ipv6(src, dst, 58, m))
}

fn crafted_icmp() -> Vec<(Vec<u8>, Option<usize>)> {
    let quoted_udp = ipv4(A, B, 17, 0, 0, &udp(1024, 9, b"abcd"));
    let quoted_tcp = ipv4(A, B, 6, 0, 0, &tcp(1024, 80, 0x02, &[]));
    let quoted_gre = ipv4(A, B, 47, 0, 0, &[0, 0, 8, 0, 0, 0, 0, 0]);
    let mut frames = Vec::new();
    // Every unreachable code (4: with and without a next-hop MTU), by protocol.
    for code in 0..=16u8 {
        let mtu: u16 = if code == 4 { 1400 } else { 0 };
        let [h, l] = mtu.to_be_bytes();
        frames.push(icmp_v4(&icmp_msg(3, code, [0, 0, h, l], &quoted_udp)));
    }
    frames.push(icmp_v4(&icmp_msg(3, 4, [0; 4], &quoted_udp)));
    frames.push(icmp_v4(&icmp_msg(3, 3, [0; 4], &quoted_tcp)));
    frames.push(icmp_v4(&icmp_msg(3, 3, [0; 4], &quoted_gre)));
    for code in 0..=4 {
        frames.push(icmp_v4(&icmp_msg(5, code, [10, 0, 0, 254], &quoted_udp)));
    }
    for kind in [4, 10, 13, 15, 16, 17, 19, 40] {
        frames.push(icmp_v4(&icmp_msg(kind, 0, [0, 3, 0, 4], &[])));
    }
    for code in 0..=2 {
        frames.push(icmp_v4(&icmp_msg(11, code, [0; 4], &quoted_udp)));
        frames.push(icmp_v4(&icmp_msg(12, code, [20, 0, 0, 0], &quoted_udp)));
    }
    frames.push(icmp_v4(&icmp_msg(18, 0, [0, 3, 0, 4], &[255, 255, 255, 0])));
    let mut stamps = Vec::new();
    for ms in [1000u32, 3_600_000 * 30 + 61_001, 3000] {
        stamps.extend_from_slice(&ms.to_be_bytes());
    }
    frames.push(icmp_v4(&icmp_msg(14, 0, [0, 3, 0, 4], &stamps)));
    for (count, size, lifetime) in [(1u8, 2u8, 30u16), (2, 2, 1800), (1, 2, 7300), (0, 0, 0)] {
        let [h, l] = lifetime.to_be_bytes();
        let mut entries = Vec::new();
        for i in 0..count {
            entries.extend_from_slice(&[10, 0, 0, i + 1, 0, 0, 0, 5 + i]);
        }
        frames.push(icmp_v4(&icmp_msg(9, 0, [count, size, h, l], &entries)));
    }
    frames.push(icmp_v4(&icmp_msg(8, 0, [0, 3, 0, 4], &[])));
    let mut out: Vec<_> = frames.into_iter().map(|f| (f, None)).collect();
    // Cut short: the quoted header without its port, no quoted header, an echo's id.
    let unreachable = icmp_v4(&icmp_msg(3, 3, [0; 4], &quoted_udp));
    for cut in [14 + 20 + 8 + 20, 14 + 20 + 8, 14 + 20 + 5] {
        out.push((unreachable.clone(), Some(cut)));
    }
    out.push((
        icmp_v4(&icmp_msg(8, 0, [0, 3, 0, 4], &[])),
        Some(14 + 20 + 5),
    ));

    let group = [0xff02, 0, 0, 0, 0, 1, 0xff00, 2];
    let link_local = [0xfe80, 0, 0, 0, 0, 0, 0, 1];
    let words = |w: [u16; 8]| w.iter().flat_map(|x| x.to_be_bytes()).collect::<Vec<u8>>();
    let quoted6 = ipv6(B6, A6, 17, &udp(1024, 9, &[]));
    let quoted6_tcp = ipv6(B6, A6, 6, &tcp(1024, 80, 0x02, &[]));
    let mut v6 = Vec::new();
    for code in 0..=4 {
        v6.push(icmp_v6(A6, B6, &icmp_msg(1, code, [0; 4], &quoted6)));
    }
    v6.push(icmp_v6(A6, B6, &icmp_msg(1, 4, [0; 4], &quoted6_tcp)));
    v6.push(icmp_v6(A6, B6, &icmp_msg(2, 0, [0, 0, 5, 0], &quoted6)));
    for code in 0..=2 {
        v6.push(icmp_v6(A6, B6, &icmp_msg(3, code, [0; 4], &quoted6)));
    }
    for code in 0..=3 {
        v6.push(icmp_v6(A6, B6, &icmp_msg(4, code, [0, 0, 0, 40], &quoted6)));
    }
    v6.push(icmp_v6(A6, B6, &icmp_msg(128, 0, [0, 7, 0, 1], &[b'x'; 8])));
    v6.push(icmp_v6(B6, A6, &icmp_msg(129, 0, [0, 7, 0, 1], &[b'x'; 8])));
    for kind in 130..=132 {
        v6.push(icmp_v6(
            link_local,
            group,
            &icmp_msg(kind, 0, [3, 232, 0, 0], &words(group)),
        ));
    }
    let mut query2 = words(group);
    query2.extend_from_slice(&[2, 125, 0, 0]);
    v6.push(icmp_v6(
        link_local,
        group,
        &icmp_msg(130, 0, [3, 232, 0, 0], &query2),
    ));
    v6.push(icmp_v6(link_local, group, &icmp_msg(133, 0, [0; 4], &[])));
    v6.push(icmp_v6(
        link_local,
        group,
        &icmp_msg(134, 0, [64, 0, 7, 8], &[0; 8]),
    ));
    v6.push(icmp_v6(A6, group, &icmp_msg(135, 0, [0; 4], &words(B6))));
    v6.push(icmp_v6(
        B6,
        A6,
        &icmp_msg(136, 0, [0xe0, 0, 0, 0], &words(B6)),
    ));
    let mut redirect = words(B6);
    redirect.extend_from_slice(&words(A6));
    v6.push(icmp_v6(
        link_local,
        A6,
        &icmp_msg(137, 0, [0; 4], &redirect),
    ));
    let mut records = vec![4, 0, 0, 0];
    records.extend_from_slice(&words(group));
    v6.push(icmp_v6(
        link_local,
        group,
        &icmp_msg(143, 0, [0, 0, 0, 1], &records),
    ));
    out.extend(v6.into_iter().map(|f| (f, None)));
    out.push((
        icmp_v6(A6, B6, &icmp_msg(128, 0, [0, 7, 0, 1], &[])),
        Some(14 + 40 + 4),
    ));
    // IPv6 options headers (hop-by-hop, as MLD's router alert; destination): a word each,
    // and the transport's ports without the addresses; one cut short.
    let hbh = |next: u8| vec![next, 0, 5, 2, 0, 0, 1, 0];
    let dstopt = |next: u8| vec![next, 0, 1, 4, 0, 0, 0, 0];
    let chained = [
        (0, [hbh(17), udp(1024, 9, b"abcd")].concat()),
        (60, [dstopt(6), tcp(1024, 5001, 0x02, &[])].concat()),
        (
            0,
            [hbh(60), dstopt(58), icmp_msg(128, 0, [0, 1, 0, 2], &[])].concat(),
        ),
    ];
    for (next, payload) in chained {
        let f = eth(MAC_B, MAC_A, &[], 0x86dd, &ipv6(A6, B6, next, &payload));
        out.push((f, None));
    }
    let f = eth(
        MAC_B,
        MAC_A,
        &[],
        0x86dd,
        &ipv6(A6, B6, 0, &[hbh(17), udp(1, 2, &[])].concat()),
    );
    out.push((f, Some(14 + 40 + 4)));
    out
}

#[test]
fn crafted_icmp_and_ipv6_option_lines_print_like_tcpdump() {
    let dir = TempDir::new("icmp-lines");
    let file = dir.path("icmp.pcap");
    let recs = records(crafted_icmp());
    write_capture(&file, Format::Pcap, &recs);
    assert_lines_like_tcpdump(&file, recs.len(), &[]);
}

/// Network-layer packets for the link-type tests: UDP, TCP, ICMPv6, an IPv4 header cut.
fn network_packets() -> Vec<(u16, Vec<u8>)> {
    let udp4 = ipv4(A, B, 17, 0, 0, &udp(1234, 9999, b"hello"));
    let syn = ipv4(A, B, 6, 0x4000, 0, &tcp(40000, 80, SYN, &[]));
    let echo6 = icmp_v6(A6, B6, &icmp_msg(128, 0, [0, 7, 0, 1], &[0; 8]))[14..].to_vec();
    vec![
        (0x0800, udp4.clone()),
        (0x0800, syn),
        (0x86dd, echo6),
        (0x0800, udp4[..10].to_vec()),
    ]
}

/// A LINUX_SLL header: packet type, ARPHRD_ETHER, the address, the protocol.
fn sll(kind: u16, address: &[u8], protocol: u16, packet: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    for w in [kind, 1, address.len() as u16] {
        h.extend_from_slice(&w.to_be_bytes());
    }
    let mut field = [0u8; 8];
    field[..address.len()].copy_from_slice(address);
    h.extend_from_slice(&field);
    h.extend_from_slice(&protocol.to_be_bytes());
    h.extend_from_slice(packet);
    h
}

/// A LINUX_SLL2 header: the protocol, the interface index, ARPHRD_ETHER, the packet type,
/// the address.
fn sll2(protocol: u16, index: u32, kind: u8, address: &[u8], packet: &[u8]) -> Vec<u8> {
    let mut h = protocol.to_be_bytes().to_vec();
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&index.to_be_bytes());
    h.extend_from_slice(&[0, 1, kind, address.len() as u8]);
    let mut field = [0u8; 8];
    field[..address.len()].copy_from_slice(address);
    h.extend_from_slice(&field);
    h.extend_from_slice(packet);
    h
}

/// Captures of `tcpdump -i any` (Linux cooked, SLL and SLL2) and of raw IP print as
/// tcpdump prints them, with and without -e: every packet type, an address of no bytes, an
/// interface this machine does not have, headers cut short.
#[test]
fn cooked_and_raw_ip_lines_print_like_tcpdump() {
    let dir = TempDir::new("link-lines");
    let arp_request = arp(1, MAC_A, A, B);
    let mut cooked = Vec::new();
    let mut cooked2 = Vec::new();
    for (i, (protocol, packet)) in network_packets().into_iter().enumerate() {
        for kind in [0u8, 1, 2, 3, 4, 7] {
            cooked.push(sll(u16::from(kind), &MAC_A, protocol, &packet));
            cooked2.push(sll2(protocol, 1, kind, &MAC_A, &packet));
        }
        cooked.push(sll(0, &[], protocol, &packet));
        // Index 1 is lo everywhere; this one is nowhere.
        let index = if i == 0 { 4_000_000 } else { 1 };
        cooked2.push(sll2(protocol, index, 4, &[], &packet));
    }
    cooked.push(sll(4, &MAC_B, 0x0806, &arp_request));
    cooked2.push(sll2(0x0806, 1, 4, &MAC_B, &arp_request));
    cooked.push(sll(0, &MAC_A, 0x0800, &[])[..10].to_vec());
    cooked2.push(sll2(0x0800, 1, 0, &MAC_A, &[])[..12].to_vec());
    let raw: Vec<Vec<u8>> = network_packets().into_iter().map(|(_, p)| p).collect();
    for (name, link_type, frames) in [
        ("sll.pcap", 113, cooked),
        ("sll2.pcap", 276, cooked2),
        ("raw.pcap", 101, raw),
    ] {
        let file = dir.path(name);
        let recs = records(frames.into_iter().map(|f| (f, None)).collect());
        write_capture_of(&file, Format::Pcap, link_type, &recs);
        assert_lines_like_tcpdump(&file, recs.len(), &[]);
        assert_lines_like_tcpdump(&file, recs.len(), &["-e"]);
    }
}

/// What tcpdump -i any writes in a namespace (SLL2: pings and their ARP) prints as
/// tcpdump prints it.
#[test]
fn a_capture_on_any_interface_prints_like_tcpdump() {
    let net = NetPair::new("ta");
    net.address("10.32.0.1/24", "10.32.0.2/24");
    let dir = TempDir::new("lines-any");
    let file = dir.path("any.pcap");
    let capture = Capture::tcpdump(&net.ns_b, "any", "inout", &file);
    assert_eq!(ping(&net.ns_a, "10.32.0.2", 2), 2);
    let captured = capture.stop(true);
    // ARP both ways, two requests and two replies.
    assert!(
        captured.frames.len() >= 6,
        "{} frames",
        captured.frames.len()
    );
    let link_type = must(&["capinfos", "-E", "-T", "-r", &file]);
    assert!(link_type.contains("linux-sll2"), "{link_type}");
    assert_lines_like_tcpdump(&file, captured.frames.len(), &[]);
    assert_lines_like_tcpdump(&file, captured.frames.len(), &["-e"]);
}

/// A link type lines cannot show is refused before anything is printed; -w takes it.
#[test]
fn lines_of_an_undecoded_link_type_are_refused() {
    let dir = TempDir::new("link-other");
    let file = dir.path("wifi.pcap");
    write_capture_of(
        &file,
        Format::Pcap,
        105,
        &records(vec![(vec![0; 30], None)]),
    );
    let (code, out, err) = wirespeed_out(&["capture", "-r", &file]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(out, "");
    assert!(
        err.contains(&format!(
            "{file}: link type 105: lines show Ethernet, Linux cooked (SLL, SLL2) and raw IP"
        )),
        "{err}"
    );
    let copy = dir.path("copy.pcap");
    let (code, _, err) = wirespeed_out(&["capture", "-r", &file, "-w", &copy]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(judge(&copy), (1, 30));
}
