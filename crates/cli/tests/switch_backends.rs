//! A bridge with an AF_XDP port and an AF_PACKET port: ping both ways, numbered frames both
//! ways all arrive (tcpdump counts them), and every frame that crossed between the two
//! backends' buffers is a counted copy.

mod common;
use common::switched::{Setup, Switched, tcp_transfer_is_intact};
use common::*;

/// Sends `count` numbered UDP frames from `ns` out of `dev` towards `dst_mac`.
fn send(ns: &str, dev: &str, count: u32, dst_mac: &str, dst_ip: &str) {
    let port = format!("packet:{dev}");
    let out = run_in(
        ns,
        &[
            "gen",
            "--port",
            &port,
            "--count",
            &count.to_string(),
            "--rate",
            "50000",
            "--dst-mac",
            dst_mac,
            "--dst-ip",
            dst_ip,
            "--json",
        ],
    );
    assert!(
        out.status.success(),
        "gen: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn numbered(frames: &[Vec<u8>]) -> usize {
    frames
        .iter()
        .filter(|f| wirespeed_packet::read_test_payload(f).is_some())
        .count()
}

#[test]
fn xdp_and_packet_ports_on_one_bridge() {
    let setup = Setup {
        backends: ["xdp", "packet"],
        ..Setup::default()
    };
    let mut s = Switched::with("sb", setup, &[]);
    let shown = s.ctl_ok(&["show"]);
    assert!(
        shown.contains("(xdp:") && shown.contains("(packet:") && shown.contains("tpacket_v3"),
        "{shown}"
    );
    // First as ovs-ofctl show prints a bridge: the datapath id (from the first port's
    // address), then each port by its interface, with its address, state and speed.
    let (ma, mb) = (mac_of(&s.c.ns_m, &s.c.ma), mac_of(&s.c.ns_m, &s.c.mb));
    let port = |n: u32, name: &str, mac: &str, state: &str, speed: u32| {
        format!(
            "\n {n}({name}): addr:{mac}\n     config:     0\n     state:      {state}\n     \
             speed: {speed} Mbps now, 0 Mbps max\n"
        )
    };
    let features = format!(
        "OFPT_FEATURES_REPLY (xid=0x2): dpid:0000{}\nn_tables:254, n_buffers:0\n",
        ma.replace(':', "")
    );
    assert!(shown.starts_with(&features), "{shown}");
    assert!(
        shown.contains(&port(1, &s.c.ma, &ma, "0", 10000)),
        "{shown}"
    );
    assert!(
        shown.contains(&port(2, &s.c.mb, &mb, "0", 10000)),
        "{shown}"
    );
    // A's end down: port 1 has no carrier.
    must(&["ip", "-n", &s.c.ns_a, "link", "set", &s.c.a, "down"]);
    let shown = s.ctl_ok(&["show"]);
    assert!(
        shown.contains(&port(1, &s.c.ma, &ma, "LINK_DOWN", 10000)),
        "{shown}"
    );
    must(&["ip", "-n", &s.c.ns_a, "link", "set", &s.c.a, "up"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    assert_eq!(s.ping(&s.c.ns_b, "10.9.0.1", 3), 3);

    let id = std::process::id();
    let (a_mac, b_mac) = (mac_of(&s.c.ns_a, &s.c.a), mac_of(&s.c.ns_b, &s.c.b));
    let at_b =
        Capture::tcpdump_inbound(&s.c.ns_b, &s.c.b, &format!("/tmp/wirespeed-sb-{id}-b.pcap"));
    send(&s.c.ns_a, &s.c.a, 1000, &b_mac, "10.9.0.2");
    assert_eq!(numbered(&at_b.stop(false).frames), 1000, "A to B");
    let at_a =
        Capture::tcpdump_inbound(&s.c.ns_a, &s.c.a, &format!("/tmp/wirespeed-sb-{id}-a.pcap"));
    send(&s.c.ns_b, &s.c.b, 1000, &a_mac, "10.9.0.1");
    assert_eq!(numbered(&at_a.stop(false).frames), 1000, "B to A");

    let (j, _) = s.stop();
    let ports = &j["ports"];
    for p in 0..2 {
        let (tx, copies) = (
            ports[p]["tx_packets"].as_u64().unwrap(),
            ports[p]["copies"].as_u64().unwrap(),
        );
        // Every frame out of either port came from the other backend's buffers.
        assert!(tx >= 1000, "{j}");
        assert_eq!(
            copies,
            tx,
            "port {}: every frame sent is a copy: {j}",
            p + 1
        );
    }
    assert_eq!(j["no_frame"], 0, "{j}");
}

/// A tap port puts the host the switch runs on onto the bridge (Open vSwitch's internal
/// port): A pings it, it pings B, a TCP transfer from A to it arrives intact, and every frame
/// that crossed between the tap's buffers and the AF_XDP ports' UMEM is a counted copy.
#[test]
fn a_tap_port_puts_the_switch_host_on_the_bridge() {
    tap_on_the_bridge("st", Setup::default(), &[]);
}

/// With two poll-mode threads each has a port on the tap device (one descriptor: the kernel
/// opens a device once), and one of them receives.
#[test]
fn a_tap_port_serves_two_poll_mode_threads() {
    let setup = Setup {
        queues: 2,
        ..Setup::default()
    };
    tap_on_the_bridge("sq", setup, &["--pmd-cpus", "0,1"]);
}

fn tap_on_the_bridge(tag: &str, setup: Setup<'_>, extra: &[&str]) {
    let tap = format!("ws{tag}{}", std::process::id() % 100000);
    let port = format!("3=tap:{tap}");
    let mut s = Switched::with(tag, setup, &[&["--port", &port][..], extra].concat());
    let host = s.c.ns_m.clone();
    let shown = s.ctl_ok(&["show"]);
    assert!(shown.contains(&format!("3(tap:{tap}, tap mode")), "{shown}");
    must(&["ip", "-n", &host, "link", "set", &tap, "up"]);
    must(&["ip", "-n", &host, "addr", "add", "10.9.0.3/24", "dev", &tap]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.3", 3), 3);
    assert_eq!(s.ping(&host, "10.9.0.2", 3), 3);
    tcp_transfer_is_intact(&s.c.ns_a, &host, "10.9.0.3", 2 * 1024 * 1024);

    let (j, log) = s.stop();
    // The switch made the device, down: it said so at start.
    assert!(
        log.contains(&format!("note: port 3 (tap:{tap}): {tap} is down")),
        "{log}"
    );
    let tap_port = &j["ports"][2];
    assert_eq!(tap_port["spec"], format!("tap:{tap}"), "{j}");
    assert_eq!(tap_port["mode"], "tap", "{j}");
    assert_eq!(
        tap_port["drops"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum::<u64>(),
        0,
        "{j}"
    );
    // Every frame out of the tap came from the AF_XDP ports' UMEM (a copy each), and every
    // frame the tap received went on by a copy, to one port or (flooded) to both.
    let (rx, tx) = (
        tap_port["rx_packets"].as_u64().unwrap(),
        tap_port["tx_packets"].as_u64().unwrap(),
    );
    assert!(tx > 1000 && rx > 100, "{j}");
    assert_eq!(tap_port["copies"].as_u64(), Some(tx), "{j}");
    let xdp_copies: u64 = (0..2)
        .map(|p| j["ports"][p]["copies"].as_u64().unwrap())
        .sum();
    assert!(rx <= xdp_copies && xdp_copies <= 2 * rx, "{j}");
    for (reason, n) in j["bridge_drops"].as_object().unwrap() {
        assert_eq!(n.as_u64(), Some(0), "bridge drop {reason}: {j}");
    }
    // The device went away with the switch.
    let links = must(&["ip", "-n", &host, "link", "show"]);
    assert!(!links.contains(&tap), "{links}");
}

/// A tap port names a tap device: an interface of another kind is refused, by name.
#[test]
fn a_tap_port_on_an_interface_that_is_no_tap_is_refused() {
    let c = NetChain::new("sn");
    let port = format!("1=tap:{}", c.ma);
    let out = run_in(&c.ns_m, &["switch", "--port", &port]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("{} exists and is not a tap device", c.ma)),
        "{err}"
    );
}
