//! `wirespeed switch` on interfaces with a 9000-byte MTU: a packet larger than a UMEM frame
//! arrives as a chain of frames (AF_XDP multi-buffer), is parsed from its first segment and
//! crosses between AF_XDP ports whole, its descriptors moved; the counters add up exactly and
//! every segment's frame is in the audit. A destination that cannot take such a packet (a tap
//! port's frames are 4096 bytes, or its interface's MTU is smaller) counts it, never sends
//! it or part of it.

mod common;
use common::switched::{Setup, Switched};
use common::*;

/// An 8900-byte ping payload on the wire: 8 bytes of ICMP, 20 of IPv4, 14 of Ethernet.
const JUMBO: u64 = 8942;

/// Ports 1 and 2 (`xdp:`) between hosts A and B, every veth at MTU 9000, each host knowing
/// the other's address for good (no ARP: the counts below are the pings' alone).
fn jumbo_switch(tag: &str, extra: &[&str]) -> Switched {
    let (s, ()) = Switched::prepared(tag, Setup::default(), extra, |c| {
        for (ns, dev) in [
            (&c.ns_a, &c.a),
            (&c.ns_m, &c.ma),
            (&c.ns_m, &c.mb),
            (&c.ns_b, &c.b),
        ] {
            must(&["ip", "-n", ns, "link", "set", dev, "mtu", "9000"]);
        }
    });
    let (mac_a, mac_b) = (mac_of(&s.c.ns_a, &s.c.a), mac_of(&s.c.ns_b, &s.c.b));
    for (ns, dev, ip, mac) in [
        (&s.c.ns_a, &s.c.a, "10.9.0.2", &mac_b),
        (&s.c.ns_b, &s.c.b, "10.9.0.1", &mac_a),
    ] {
        permanent_neighbour(ns, dev, ip, mac);
    }
    s
}

/// `count` pings of 8900 bytes, not to be fragmented, from `ns` to `to`: how many were
/// answered.
fn jumbo_ping(ns: &str, to: &str, count: u32) -> u32 {
    let count = count.to_string();
    let out = sh(&[
        "ip", "netns", "exec", ns, "ping", "-n", "-c", &count, "-i", "0.2", "-W", "2", "-s",
        "8900", "-M", "do", to,
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    text.split(", ")
        .find_map(|part| part.strip_suffix(" received"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no ping summary: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// Five jumbo pings each way, all answered; then each port received and sent exactly the
/// ten packets of its side, 8942 bytes each, dropped nothing, and the frames balance.
fn pings_both_ways(tag: &str, extra: &[&str]) -> serde_json::Value {
    let mut s = jumbo_switch(tag, extra);
    assert_eq!(jumbo_ping(&s.c.ns_a, "10.9.0.2", 5), 5, "A to B");
    assert_eq!(jumbo_ping(&s.c.ns_b, "10.9.0.1", 5), 5, "B to A");
    let (j, _) = s.stop();
    for p in 0..2 {
        let port = &j["ports"][p];
        assert_eq!(port["multi_buffer"].as_u64(), Some(18), "{j}");
        // Each port: five requests of one direction and five replies of the other.
        assert_eq!(port["rx_packets"].as_u64(), Some(10), "port {}: {j}", p + 1);
        assert_eq!(port["tx_packets"].as_u64(), Some(10), "port {}: {j}", p + 1);
        assert_eq!(port["rx_bytes"].as_u64(), Some(10 * JUMBO), "{j}");
        assert_eq!(port["tx_bytes"].as_u64(), Some(10 * JUMBO), "{j}");
        // Moved, not copied.
        assert_eq!(port["copies"].as_u64(), Some(0), "{j}");
        for (reason, n) in port["drops"].as_object().unwrap() {
            assert_eq!(n.as_u64(), Some(0), "port {} drop {reason}: {j}", p + 1);
        }
    }
    assert_eq!(j["no_frame"], 0, "{j}");
    assert_eq!(j["unknown_port"], 0, "{j}");
    for (reason, n) in j["bridge_drops"].as_object().unwrap() {
        assert_eq!(n.as_u64(), Some(0), "bridge drop {reason}: {j}");
    }
    assert_eq!(j["frames"]["balanced"], true, "{j}");
    j
}

#[test]
fn jumbo_pings_cross_the_switch_both_ways_as_chains() {
    pings_both_ways("jp", &[]);
}

/// The fast path leaves a packet of several frames to user space: the same pings, the same
/// counts, none of them forwarded in the kernel.
#[test]
fn jumbo_pings_cross_an_offloading_switch() {
    let j = pings_both_ways("jo", &["--offload"]);
    for p in 0..2 {
        let fast = &j["ports"][p]["fast_path"];
        assert_eq!(fast["rx_packets"].as_u64(), Some(0), "{j}");
    }
}

/// Port 2's interface (and host B) at MTU 1500 under a running switch: a jumbo packet for
/// it is not handed to the kernel, which would count it sent and drop it unseen, but
/// counted as `tx_too_big`, a transmit drop in dump-ports as Open vSwitch shows the
/// kernel's. The MTU raised back, the pings cross at once.
#[test]
fn a_packet_over_the_output_port_mtu_is_counted_not_sent() {
    let mut s = jumbo_switch("jm", &[]);
    let set_mtu = |mtu: &str| {
        for (ns, dev) in [(&s.c.ns_m, &s.c.mb), (&s.c.ns_b, &s.c.b)] {
            must(&["ip", "-n", ns, "link", "set", dev, "mtu", mtu]);
        }
        // The switch hears of it from rtnetlink, on a thread of its own.
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    set_mtu("1500");
    assert_eq!(jumbo_ping(&s.c.ns_a, "10.9.0.2", 3), 0, "A to B at 1500");
    let ports = s.ctl_ok(&["dump-ports"]);
    assert!(
        ports.contains("port  2: rx pkts=0, bytes=0, drop=0, errs=0, frame=0, over=0, crc=0\n           tx pkts=0, bytes=0, drop=3, errs=0"),
        "{ports}"
    );
    set_mtu("9000");
    assert_eq!(jumbo_ping(&s.c.ns_a, "10.9.0.2", 3), 3, "A to B at 9000");
    let (j, _) = s.stop();
    let b = &j["ports"][1];
    assert_eq!(b["drops"]["tx_too_big"].as_u64(), Some(3), "{j}");
    assert_eq!(b["tx_packets"].as_u64(), Some(3), "{j}");
    assert_eq!(b["tx_bytes"].as_u64(), Some(3 * JUMBO), "{j}");
    // Nothing over the MTU reached the kernel: the veth dropped nothing.
    assert_eq!(link_stat(&s.c.ns_m, &s.c.mb, "tx", "dropped"), 0);
    assert_eq!(link_stat(&s.c.ns_b, &s.c.b, "rx", "dropped"), 0);
}

/// Ports 1 and 2 as in [`jumbo_switch`] with `flows` for ICMP in place of the learning
/// switch, and a tap port 3 (up, MTU 9000) whose frames hold 4096 bytes; three jumbo pings
/// from A to B, all answered; the summary.
fn jumbo_flows(tag: &str, flows: &[&str]) -> serde_json::Value {
    let tap = format!("ws{tag}{}", std::process::id() % 100000);
    let port = format!("3=tap:{tap}");
    let mut s = jumbo_switch(tag, &["--port", &port]);
    for flow in flows {
        s.ctl_ok(&["add-flow", flow]);
    }
    // At MTU 9000, so what it cannot take is the chain, not a packet over its MTU.
    must(&[
        "ip", "-n", &s.c.ns_m, "link", "set", &tap, "mtu", "9000", "up",
    ]);
    // The switch hears of the link asynchronously: a ping sent before would be counted as
    // link_down on port 3, not as the chain it cannot send.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let shown = s.ctl_ok(&["show"]);
        let port_3 = shown
            .split(&format!(" 3({tap})"))
            .nth(1)
            .unwrap_or_default();
        let state = port_3
            .lines()
            .find(|l| l.trim_start().starts_with("state:"));
        if state.is_some_and(|l| !l.contains("LINK_DOWN")) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "port 3 stays down: {shown}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(jumbo_ping(&s.c.ns_a, "10.9.0.2", 3), 3, "A to B");
    let (j, _) = s.stop();
    assert_eq!(j["ports"][2]["spec"], format!("tap:{tap}"), "{j}");
    assert_eq!(j["no_frame"], 0, "{j}");
    assert_eq!(j["frames"]["balanced"], true, "{j}");
    j
}

/// Port `p`'s (0-based) sent packets, their bytes and the copies among them.
fn sent(j: &serde_json::Value, p: usize) -> [u64; 3] {
    ["tx_packets", "tx_bytes", "copies"].map(|k| j["ports"][p][k].as_u64().unwrap())
}

/// A jumbo packet meant for a tap port too: the tap, whose frames hold 4096 bytes, counts it
/// as `tx_bad_chain` and sends nothing; host B gets a whole copy made before the tag was
/// pushed (its ping is answered), and the replies move to A.
#[test]
fn a_chain_for_a_port_that_sends_single_frames_is_counted_not_cut() {
    let j = jumbo_flows(
        "jt",
        &[
            "priority=100,in_port=1,icmp,actions=output:2,mod_vlan_vid:5,output:3",
            "priority=100,in_port=2,icmp,actions=output:1",
        ],
    );
    let tap = &j["ports"][2];
    assert_eq!(tap["tx_packets"].as_u64(), Some(0), "{j}");
    assert_eq!(tap["drops"]["tx_bad_chain"].as_u64(), Some(3), "{j}");
    assert_eq!(sent(&j, 1), [3, 3 * JUMBO, 3], "B: copies, whole: {j}");
    assert_eq!(sent(&j, 0), [3, 3 * JUMBO, 0], "A: the replies, moved: {j}");
}

/// A jumbo packet out of two AF_XDP ports: one gets a copy (a chain of fresh frames, one
/// copy counted), the other the packet itself.
#[test]
fn a_chain_out_of_two_ports_is_copied_whole_once() {
    let j = jumbo_flows(
        "jd",
        &[
            "priority=100,in_port=1,icmp,actions=in_port,output:2",
            "priority=100,in_port=2,icmp,actions=output:1",
        ],
    );
    assert_eq!(sent(&j, 1), [3, 3 * JUMBO, 0], "B: moved: {j}");
    // A: its requests back (copies; A's kernel ignores them) and B's replies.
    assert_eq!(sent(&j, 0), [6, 6 * JUMBO, 3], "{j}");
    for p in 0..3 {
        assert_eq!(
            j["ports"][p]["drops"]["tx_bad_chain"].as_u64(),
            Some(0),
            "{j}"
        );
    }
}

/// TCP at MTU 9000 with the hosts' default transmit checksum offload: segments larger than
/// a frame arrive with partial checksums, which the switch completes over every segment of
/// the chain; the transfer arrives intact.
#[test]
fn tcp_in_jumbo_segments_with_partial_checksums_is_intact() {
    let mut s = jumbo_switch("jc", &[]);
    for (ns, dev) in [(&s.c.ns_a, &s.c.a), (&s.c.ns_b, &s.c.b)] {
        let features = sh(&["ip", "netns", "exec", ns, "ethtool", "-k", dev]);
        let features = String::from_utf8_lossy(&features.stdout);
        assert!(
            features.contains("tx-checksumming: on"),
            "{dev}: {features}"
        );
    }
    s.tcp_transfer_is_intact(4 * 1024 * 1024);
    let (j, _) = s.stop();
    // Port 1 took A's segments: most of them chains (more than a 4096-byte frame each).
    let (packets, bytes) = (
        j["ports"][0]["rx_packets"].as_u64().unwrap(),
        j["ports"][0]["rx_bytes"].as_u64().unwrap(),
    );
    assert!(packets > 0 && bytes / packets > 4096, "{j}");
}

/// A chain sent to the controller arrives whole and in order: tcpdump reads three 8942-byte
/// echo requests from the controller's file, their ICMP checksums (over every byte) good.
#[test]
fn a_chain_for_the_controller_is_gathered_whole() {
    let dir = common::pcaps::TempDir::new("jcontroller");
    let file = dir.path("controller.pcap");
    let mut s = jumbo_switch("jg", &["--controller-pcap", &file]);
    s.ctl_ok(&["add-flow", "priority=100,icmp,actions=controller"]);
    assert_eq!(
        jumbo_ping(&s.c.ns_a, "10.9.0.2", 3),
        0,
        "the controller answers nothing"
    );
    let (j, _) = s.stop();
    assert_eq!(j["to_controller"], 3, "{j}");
    assert_eq!(common::pcaps::judge(&file), (3, 3 * JUMBO));
    for frame in read_pcap(&file) {
        assert_eq!(frame.len() as u64, JUMBO);
        assert!(
            wirespeed_packet::checksum::verify(&frame[14..34]),
            "IPv4 header"
        );
        assert!(
            wirespeed_packet::checksum::verify(&frame[34..]),
            "ICMP, every byte"
        );
    }
}

/// IPv6 too: a jumbo echo is parsed from its head with its whole length, so rules on its
/// IPv6 fields match it (everything else is dropped), and the rules count its whole bytes:
/// 8900 of payload, 8 of ICMPv6, 40 of IPv6, 14 of Ethernet.
#[test]
fn jumbo_ipv6_pings_match_rules_on_their_ipv6_fields() {
    let s = jumbo_switch("j6", &[]);
    s.ipv6_on();
    for flow in [
        "priority=100,in_port=1,icmp6,ipv6_dst=fd09::2,actions=output:2",
        "priority=100,in_port=2,icmp6,ipv6_dst=fd09::1,actions=output:1",
        "priority=1,actions=drop",
    ] {
        s.ctl_ok(&["add-flow", flow]);
    }
    assert_eq!(jumbo_ping(&s.c.ns_a, "fd09::2", 5), 5, "A to B");
    let flows = s.ctl_ok(&["dump-flows"]);
    for dst in ["fd09::2", "fd09::1"] {
        let line = flows
            .lines()
            .find(|l| l.contains(&format!("ipv6_dst={dst}")))
            .unwrap_or_else(|| panic!("no rule for {dst}: {flows}"));
        assert!(
            line.contains(&format!("n_packets=5, n_bytes={}", 5 * 8962)),
            "{line}"
        );
    }
}

/// TCP over IPv6 in jumbo segments with partial checksums: completed over every segment,
/// the transfer arrives intact.
#[test]
fn tcp_over_ipv6_in_jumbo_segments_is_intact() {
    let mut s = jumbo_switch("j7", &[]);
    s.ipv6_on();
    common::switched::tcp_transfer_is_intact(&s.c.ns_a, &s.c.ns_b, "fd09::2", 4 * 1024 * 1024);
    let (j, _) = s.stop();
    let (packets, bytes) = (
        j["ports"][0]["rx_packets"].as_u64().unwrap(),
        j["ports"][0]["rx_bytes"].as_u64().unwrap(),
    );
    assert!(packets > 0 && bytes / packets > 4096, "{j}");
}
