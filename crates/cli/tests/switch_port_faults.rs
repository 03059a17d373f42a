//! A port whose interface goes down or away under a running switch: the switch marks it
//! (show, dump-ports, --json), counts what was meant for it as `link_down`, and every other
//! port goes on forwarding; a port back up forwards again, and one deleted is left until an
//! interface is made again under its name (switch_port_made_again.rs), or the switch exits,
//! cleanly. (Before: the whole switch exited, status 1, on the first
//! failed send to the port.)

mod common;

use std::time::Duration;

use common::star::NetStar;
use common::switched::field;
use common::*;

fn ctl(ctl: &str, args: &[&str]) -> String {
    let mut argv = vec![wirespeed(), "ctl", "--ctl", ctl];
    argv.extend_from_slice(args);
    must(&argv)
}

/// What `ovs-ofctl VERB [ARGS]` printed against the switch listening on 6653 in namespace
/// `ns` (it prints an OpenFlow error and still succeeds).
fn ofctl_in(ns: &str, args: &[&str]) -> String {
    let (verb, rest) = args.split_first().expect("an ovs-ofctl command");
    let mut argv = vec!["ip", "netns", "exec", ns, "ovs-ofctl", "-O", "OpenFlow13"];
    argv.extend(["--no-names", verb, "tcp:127.0.0.1:6653"]);
    argv.extend_from_slice(rest);
    must(&argv)
}

/// Port `port`'s lines in dump-ports.
fn port_block(ports: &str, port: u32) -> String {
    let lines: Vec<&str> = ports
        .lines()
        .skip_while(|l| !l.contains(&format!("port {port:>2}: rx")))
        .take_while(|l| !l.contains(&format!("port {:>2}: rx", port + 1)) && !l.contains("bridge:"))
        .collect();
    lines.join("\n")
}

/// The number after `name=` in port `port`'s block of dump-ports, 0 when it is not there.
fn port_count(ports: &str, port: u32, within: &str, name: &str) -> u64 {
    let block = port_block(ports, port);
    match block
        .lines()
        .any(|l| l.contains(within) && l.contains(&format!("{name}=")))
    {
        true => field(&block, within, name),
        false => 0,
    }
}

/// What port 2 was sent, or was meant to be: sent, link_down, tx_ring_full.
fn meant_for(ports: &str, port: u32) -> u64 {
    port_count(ports, port, "tx pkts", "pkts")
        + port_count(ports, port, "drops:", "link_down")
        + port_count(ports, port, "drops:", "tx_ring_full")
}

/// Host 0 sends `count` UDP frames to host 1 (at `dst_mac`, asked before it may be gone),
/// 20,000 a second.
fn send_to_host1(star: &NetStar, dst_mac: &str, count: u32) -> std::process::Child {
    let port = format!("packet:{}", star.hosts[0]);
    std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &star.hosts[0],
            wirespeed(),
            "gen",
            "--port",
            &port,
        ])
        .args([
            "--count",
            &count.to_string(),
            "--rate",
            "20000",
            "--json",
            "-q",
        ])
        .args(["--dst-mac", dst_mac, "--dst-ip", &star.ip(1)])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn a_port_deleted_under_traffic_leaves_the_others_forwarding() {
    deleted_under_traffic("pfd", &["xdp", "xdp", "xdp"]);
}

/// The port deleted is an AF_PACKET one: its send fails otherwise (ENXIO from the ring's
/// kick), and is no more the end of the switch.
#[test]
fn a_packet_port_deleted_under_traffic_leaves_the_others_forwarding() {
    deleted_under_traffic("pfp", &["xdp", "packet", "xdp"]);
}

fn deleted_under_traffic(tag: &str, backends: &[&str]) {
    let star = NetStar::new(tag, 3);
    let sock = ScratchFile::new(&format!("{tag}.sock"));
    let switch = star.switch_with(&sock, backends, &[]);
    // Everyone learned.
    for to in [1, 2] {
        assert_eq!(ping(&star.hosts[0], &star.ip(to), 2), 2);
    }
    let before = ctl(&sock, &["dump-ports"]);
    let host1 = mac_of(&star.hosts[1], &star.hosts[1]);
    let sender = send_to_host1(&star, &host1, 40_000);
    std::thread::sleep(Duration::from_millis(700));
    must(&["ip", "-n", &star.ns_m, "link", "del", &star.ports[1]]);
    let sent = sender.wait_with_output().unwrap();
    assert!(sent.status.success());
    let sent: serde_json::Value = serde_json::from_slice(&sent.stdout).unwrap();
    assert_eq!(sent["packets"].as_u64(), Some(40_000), "{sent}");
    std::thread::sleep(Duration::from_millis(300));
    let after = ctl(&sock, &["dump-ports"]);

    // Every frame host 0 sent reached the switch, and each was meant for port 2 once (sent
    // before the delete; after it counted as link_down, its address forgotten and flooded).
    let rx = port_count(&after, 1, "rx pkts", "pkts") - port_count(&before, 1, "rx pkts", "pkts");
    assert_eq!(rx, 40_000, "{before}\n{after}");
    assert_eq!(
        meant_for(&after, 2) - meant_for(&before, 2),
        40_000,
        "{after}"
    );
    assert!(port_count(&after, 2, "drops:", "link_down") > 0, "{after}");
    assert!(port_block(&after, 2).contains("link: gone"), "{after}");
    let shown = ctl(&sock, &["show"]);
    assert!(shown.contains(" port 2: link gone"), "{shown}");

    // Hosts 0 and 2 still talk, both ways, ping and TCP.
    assert_eq!(ping(&star.hosts[0], &star.ip(2), 3), 3);
    assert_eq!(ping(&star.hosts[2], &star.ip(0), 3), 3);
    common::switched::tcp_transfer_is_intact(&star.hosts[0], &star.hosts[2], &star.ip(2), 1 << 20);

    // It exits cleanly later, with the port marked and every frame accounted for.
    let (j, log) = switch.interrupt();
    assert!(
        log.contains(&format!(
            "port 2 ({}:{}): interface gone",
            backends[1], star.ports[1]
        )),
        "{log}"
    );
    assert_eq!(j["ports"][1]["link"], "gone", "{j}");
    assert_eq!(j["ports"][0]["link"], "up", "{j}");
    assert_eq!(j["frames"]["balanced"], true, "{j}");
}

#[test]
fn a_port_down_is_skipped_and_forwards_again_when_up() {
    let star = NetStar::new("pfu", 3);
    let sock = ScratchFile::new("pfu.sock");
    // OpenFlow on the namespace's loopback.
    must(&["ip", "-n", &star.ns_m, "link", "set", "lo", "up"]);
    let switch = star.switch(&sock, &["--openflow", "ptcp:6653"]);
    assert_eq!(ping(&star.hosts[0], &star.ip(2), 2), 2);
    star.set_port(2, "down");
    std::thread::sleep(Duration::from_millis(200));
    let shown = ctl(&sock, &["show"]);
    assert!(shown.contains(" port 3: link down"), "{shown}");
    // Port 3's host is cut off; the others are not.
    assert_eq!(ping(&star.hosts[0], &star.ip(2), 2), 0);
    assert_eq!(ping(&star.hosts[0], &star.ip(1), 3), 3);
    let ports = ctl(&sock, &["dump-ports", "3"]);
    assert!(port_count(&ports, 3, "drops:", "link_down") > 0, "{ports}");
    assert!(ports.contains("link: down"), "{ports}");
    star.set_port(2, "up");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(ping(&star.hosts[0], &star.ip(2), 3), 3);
    assert_eq!(ping(&star.hosts[2], &star.ip(1), 3), 3);
    // Down with no traffic, then deleted (before: os error 6, and the switch was gone).
    star.set_port(2, "down");
    std::thread::sleep(Duration::from_millis(200));
    must(&["ip", "-n", &star.ns_m, "link", "del", &star.ports[2]]);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(ping(&star.hosts[0], &star.ip(1), 3), 3);
    // Gone, the port is left out of what controllers see, as Open vSwitch removes it.
    let desc = ofctl_in(&star.ns_m, &["dump-ports-desc"]);
    assert!(desc.contains(" 2(") && !desc.contains(" 3("), "{desc}");
    let stats = ofctl_in(&star.ns_m, &["dump-ports"]);
    assert!(
        stats.contains("port  2:") && !stats.contains("port  3:"),
        "{stats}"
    );
    let one = ofctl_in(&star.ns_m, &["dump-ports", "3"]);
    assert!(
        one.contains("OFPST_PORT reply (OF1.3) (xid=0x2): 0 ports"),
        "{one}"
    );
    // An interface made again under its name: the port is bound to it, and OpenFlow's port
    // description has its address and state (up), as show does.
    let again = format!("{}x", star.ports[2]);
    must(&[
        "ip",
        "-n",
        &star.ns_m,
        "link",
        "add",
        &star.ports[2],
        "type",
        "veth",
        "peer",
        "name",
        &again,
    ]);
    for dev in [&star.ports[2], &again] {
        must(&["ip", "-n", &star.ns_m, "link", "set", dev, "up"]);
    }
    // `show` lists the ports that are not up.
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while ctl(&sock, &["show"]).contains(" port 3: link ") {
        assert!(std::time::Instant::now() < until, "port 3 never came back");
        std::thread::sleep(Duration::from_millis(50));
    }
    let desc = ofctl_in(&star.ns_m, &["dump-ports-desc"]);
    let port3 = desc.split(" 3(").nth(1).unwrap_or_default();
    let address = format!("addr:{}", mac_of(&star.ns_m, &star.ports[2]));
    assert!(
        port3.contains(&address)
            && port3.contains("config:     0")
            && port3.contains("state:      LIVE"),
        "{desc}"
    );
    let (j, log) = switch.interrupt();
    let port3 = format!("port 3 (xdp:{})", star.ports[2]);
    for said in [
        "link down",
        "link up: forwarding again",
        "interface gone",
        "interface made again: bound to it",
    ] {
        assert!(log.contains(&format!("{port3}: {said}")), "{said}: {log}");
    }
    assert_eq!(j["ports"][2]["link"], "up", "{j}");
    assert_eq!(j["frames"]["balanced"], true, "{j}");
}

/// A star of three hosts (`tag`) around a switch with `--offload` on control socket `sock`;
/// the hosts take the kernel's XDP redirects (NAPI on).
fn offloading_star(tag: &str, sock: &ScratchFile) -> (NetStar, Running) {
    let star = NetStar::new(tag, 3);
    for host in &star.hosts {
        must(&[
            "ip", "netns", "exec", host, "ethtool", "-K", host, "gro", "on",
        ]);
    }
    let switch = star.switch(sock, &["--offload"]);
    (star, switch)
}

#[test]
fn the_fast_path_stops_redirecting_to_a_port_that_went_away() {
    let sock = ScratchFile::new("pfo.sock");
    let (star, switch) = offloading_star("pfo", &sock);
    for to in [1, 2] {
        assert_eq!(ping(&star.hosts[0], &star.ip(to), 3), 3);
    }
    let host1 = mac_of(&star.hosts[1], &star.hosts[1]);
    let sender = send_to_host1(&star, &host1, 20_000);
    assert!(sender.wait_with_output().unwrap().status.success());
    let cache = ctl(&sock, &["dump-cache"]);
    assert!(field(&cache, "fast_path:", "kernel_hits") > 0, "{cache}");
    must(&["ip", "-n", &star.ns_m, "link", "del", &star.ports[1]]);
    std::thread::sleep(Duration::from_millis(300));
    // The kernel has no entry left towards the port, and host 0 still reaches host 2.
    let sender = send_to_host1(&star, &host1, 2_000);
    assert!(sender.wait_with_output().unwrap().status.success());
    assert_eq!(ping(&star.hosts[0], &star.ip(2), 3), 3);
    assert_eq!(ping(&star.hosts[2], &star.ip(0), 3), 3);
    let ports = ctl(&sock, &["dump-ports", "2"]);
    assert!(
        port_count(&ports, 2, "drops:", "link_down") >= 2_000,
        "{ports}"
    );
    // Made again: the fast path does not take a port back, and the log says so.
    star.link_host(1);
    std::thread::sleep(Duration::from_millis(300));
    assert!(ctl(&sock, &["show"]).contains(" port 2: link gone"));
    let (j, log) = switch.interrupt();
    let refused = format!(
        "port 2 (xdp:{}): interface {} made again",
        star.ports[1], star.ports[1]
    );
    assert!(
        log.contains(&refused) && log.contains("with --offload the fast path does not take"),
        "{log}"
    );
    assert_eq!(j["ports"][1]["link"], "gone", "{j}");
    assert_eq!(j["frames"]["balanced"], true, "{j}");
}

/// With `--offload`, a port going down takes only the kernel's flows to and from it out:
/// host 0's pings to host 1 go on in the kernel, none installed again. (ICMP goes by rules
/// to each host's address, so no entry depends on an address learned on the port.)
#[test]
fn a_port_down_leaves_the_fast_path_s_other_flows() {
    let sock = ScratchFile::new("pfk.sock");
    let (star, switch) = offloading_star("pfk", &sock);
    for i in 0..3 {
        let rule = format!(
            "priority=10,icmp,nw_dst={},actions=output:{}",
            star.ip(i),
            i + 1
        );
        ctl(&sock, &["add-flow", &rule]);
    }
    for to in [1, 2] {
        assert_eq!(ping(&star.hosts[0], &star.ip(to), 3), 3);
    }
    let fast = |name| field(&ctl(&sock, &["dump-cache"]), "fast_path:", name);
    assert_eq!((fast("flows"), fast("installed")), (4, 4));
    let hits = fast("kernel_hits");

    star.set_port(2, "down");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        (
            fast("flows"),
            fast("port_down"),
            fast("flushes"),
            fast("stops")
        ),
        (2, 2, 0, 1),
        "only the flows to and from port 3 left the kernel"
    );
    assert_eq!(ping(&star.hosts[0], &star.ip(1), 3), 3);
    assert_eq!(
        (fast("installed"), fast("kernel_hits")),
        (4, hits + 6),
        "the kernel forwarded every echo and reply, on the entries it had"
    );
    let (j, _) = switch.interrupt();
    assert_eq!(j["ports"][2]["fast_path"]["rx_packets"], 2, "{j}");
    assert_eq!(j["fast_path"]["port_down"], 2, "{j}");
    assert_eq!(j["frames"]["balanced"], true, "{j}");
}
