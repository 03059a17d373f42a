//! The tap backend (`tap:NAME`), the way to the host's own stack: what is sent on the port,
//! the host receives on the device, frame for frame; what the host sends out of the device,
//! the port receives; a device the port made goes away with it.

mod common;
use common::*;

/// A tap device name in the pair's namespace A, unique like the pair's own names.
fn tap_name(net: &NetPair) -> String {
    format!("{}t", &net.a[..net.a.len() - 1])
}

#[test]
fn gen_on_a_tap_port_reaches_the_host_frame_for_frame() {
    let net = NetPair::new("tg");
    let tap = tap_name(&net);
    must(&[
        "ip", "-n", &net.ns_a, "tuntap", "add", "dev", &tap, "mode", "tap",
    ]);
    must(&["ip", "-n", &net.ns_a, "link", "set", &tap, "up"]);
    let port = format!("tap:{tap}");
    let j = run_json(
        &net.ns_a,
        &[
            "gen", "--port", &port, "--count", "1000", "--rate", "100000", "--json", "-q",
        ],
    );
    assert_eq!(j["backend"], "tap", "{j}");
    assert_eq!(j["packets"].as_u64(), Some(1000), "{j}");
    assert_eq!(j["drops_total"].as_u64(), Some(0), "{j}");
    // 64-byte frames on the wire are 60 bytes without the FCS.
    assert_eq!(link_stat(&net.ns_a, &tap, "rx", "packets"), 1000);
    assert_eq!(link_stat(&net.ns_a, &tap, "rx", "bytes"), 60_000);
    // A device made by someone else stays.
    must(&["ip", "-n", &net.ns_a, "link", "show", &tap]);
}

#[test]
fn rxdrop_on_a_tap_port_takes_what_the_host_sends() {
    let net = NetPair::new("tr");
    let tap = tap_name(&net);
    let port = format!("tap:{tap}");
    // The port makes the device; the host side is set up once it is there.
    let mut rx = spawn_in(
        &net.ns_a,
        &[
            "bench",
            "rxdrop",
            "--port",
            &port,
            "--duration",
            "3",
            "--json",
        ],
    );
    rx.wait_ready();
    let ns = net.ns_a.as_str();
    must(&["ip", "-n", ns, "link", "set", &tap, "up"]);
    must(&["ip", "-n", ns, "addr", "add", "10.66.0.1/24", "dev", &tap]);
    // No ARP: the only frames out of the device are the datagrams.
    must(&[
        "ip",
        "-n",
        ns,
        "neigh",
        "add",
        "10.66.0.2",
        "lladdr",
        "02:00:00:00:00:02",
        "dev",
        &tap,
    ]);
    let send = "import socket\n\
                s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
                for i in range(500): s.sendto(i.to_bytes(4, 'big') * 8, ('10.66.0.2', 9))";
    must(&["ip", "netns", "exec", ns, "python3", "-c", send]);
    let (j, log) = rx.finish();
    assert_eq!(j["backend"], "tap", "{j}");
    assert_eq!(j["packets"].as_u64(), Some(500), "{j}\n{log}");
    // Ethernet 14 + IPv4 20 + UDP 8 + 32 bytes of payload.
    assert_eq!(j["bytes"].as_u64(), Some(500 * 74), "{j}");
    assert_eq!(j["drops_total"].as_u64(), Some(0), "{j}");
    assert_eq!(j["frames"]["balanced"], true, "{j}");
    // The device was the port's: it went away with it.
    let links = must(&["ip", "-n", ns, "link", "show"]);
    assert!(!links.contains(&tap), "{links}");
}

/// Every packet the port could not take has its reason: what the host sent while the port
/// was not reading (the device's own drops), a frame longer than the port's frames, and what
/// the port sent while the device was down.
#[test]
fn a_tap_port_counts_every_packet_it_could_not_take() {
    let net = NetPair::new("td");
    let tap = tap_name(&net);
    let ns = net.ns_a.as_str();
    let port = format!("tap:{tap}");
    // Down: the device refuses every write.
    must(&["ip", "-n", ns, "tuntap", "add", "dev", &tap, "mode", "tap"]);
    let j = run_json(
        ns,
        &["gen", "--port", &port, "--count", "100", "--json", "-q"],
    );
    // Handed to the device, which refused each one.
    assert_eq!(j["packets"].as_u64(), Some(100), "{j}");
    assert_eq!(j["drops"]["tx_error"].as_u64(), Some(100), "{j}");
    assert_eq!(j["drops_total"].as_u64(), Some(100), "{j}");
    assert_eq!(link_stat(ns, &tap, "rx", "packets"), 0);

    let mut rx = spawn_in(
        ns,
        &[
            "bench",
            "rxdrop",
            "--port",
            &port,
            "--frame-size",
            "2048",
            "--duration",
            "4",
            "--json",
        ],
    );
    rx.wait_ready();
    must(&["ip", "-n", ns, "link", "set", &tap, "mtu", "9000", "up"]);
    must(&["ip", "-n", ns, "addr", "add", "10.66.1.1/24", "dev", &tap]);
    must(&[
        "ip",
        "-n",
        ns,
        "neigh",
        "add",
        "10.66.1.2",
        "lladdr",
        "02:00:00:00:00:02",
        "dev",
        &tap,
    ]);
    let send = |count: u32, bytes: u32| {
        let script = format!(
            "import socket\n\
             s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             for i in range({count}): s.sendto(bytes({bytes}), ('10.66.1.2', 9))"
        );
        must(&["ip", "netns", "exec", ns, "python3", "-c", &script]);
    };
    // 2000 datagrams while the port does not read: the device holds a few hundred.
    let pid = rx.pid().to_string();
    must(&["kill", "-STOP", &pid]);
    send(2000, 32);
    must(&["kill", "-CONT", &pid]);
    // One frame of 3042 bytes: longer than a 2048-byte frame.
    std::thread::sleep(std::time::Duration::from_millis(500));
    send(1, 3000);
    let (j, log) = rx.finish();
    let (got, full) = (
        j["packets"].as_u64().unwrap(),
        j["drops"]["rx_ring_full"].as_u64().unwrap(),
    );
    assert!(got > 0 && full > 0, "{j}\n{log}");
    assert_eq!(got + full, 2000, "{j}");
    assert_eq!(j["bytes"].as_u64(), Some(got * 74), "{j}");
    assert_eq!(j["drops"]["rx_invalid_desc"].as_u64(), Some(1), "{j}");
    assert_eq!(j["drops_total"].as_u64(), Some(full + 1), "{j}");
}
