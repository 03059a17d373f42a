//! A port whose interface is deleted and made again under its name, as a container restarted
//! makes its veth anew, is bound to the new interface while the switch runs (as Open vSwitch
//! re-adds it): every frame sent to it afterwards is received and forwarded, exactly; ping
//! and TCP cross it; controllers hear PORT_STATUS DELETE, then ADD; its counters go on; and
//! every frame of the UMEM is still accounted for at exit. With two poll-mode threads each
//! binds its own queue; an AF_PACKET port opens again. (Before: the port stayed gone until
//! the switch restarted.) With `--offload` it stays gone (switch_port_faults.rs).

mod common;

use std::time::{Duration, Instant};

use common::star::NetStar;
use common::switched::{field, monitor_in};
use common::*;

fn ctl(ctl: &str, args: &[&str]) -> String {
    let mut argv = vec![wirespeed(), "ctl", "--ctl", ctl];
    argv.extend_from_slice(args);
    must(&argv)
}

/// Waits (5 s at most) until `show` has `line` (`shown`), or has it no more.
fn wait_shown(sock: &str, line: &str, shown: bool) {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let show = ctl(sock, &["show"]);
        if show.contains(line) == shown {
            return;
        }
        assert!(Instant::now() < until, "{line:?} never {shown}: {show}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (5 s at most) until interface `iface` in namespace `ns` has an XDP program
/// attached (`attached`), or none.
fn wait_program(ns: &str, iface: &str, attached: bool) {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let shown = must(&["ip", "-n", ns, "-d", "link", "show", iface]);
        if shown.contains("prog/xdp") == attached {
            return;
        }
        assert!(
            Instant::now() < until,
            "{ns} {iface}: program attached never {attached}: {shown}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Port `port`'s received packets, as dump-ports counts them.
fn rx_packets(sock: &str, port: u32) -> u64 {
    field(
        &ctl(sock, &["dump-ports", &port.to_string()]),
        "rx pkts",
        "pkts",
    )
}

/// Host `from` sends `count` UDP frames to host `to`'s address (by `to`'s MAC, which the
/// switch has learned), on each CPU of `cpus` in turn; all are sent.
fn send(star: &NetStar, from: usize, to: usize, count: u32, cpus: &[usize]) {
    let (host, mac) = (&star.hosts[from], mac_of(&star.hosts[to], &star.hosts[to]));
    let port = format!("packet:{host}");
    for cpu in cpus {
        let (cpu, count) = (cpu.to_string(), count.to_string());
        let out = must(&[
            "ip",
            "netns",
            "exec",
            host,
            "taskset",
            "-c",
            &cpu,
            wirespeed(),
            "gen",
            "--port",
            &port,
            "--count",
            &count,
            "--rate",
            "20000",
            "--json",
            "-q",
            "--dst-mac",
            &mac,
            "--dst-ip",
            &star.ip(to),
        ]);
        let j: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(j["packets"].as_u64(), count.parse().ok(), "{j}");
    }
}

/// `send`, in the background, from CPU 0 at 20,000 frames a second.
fn sending(star: &NetStar, from: usize, to: usize, count: u32) -> std::process::Child {
    let (host, mac) = (&star.hosts[from], mac_of(&star.hosts[to], &star.hosts[to]));
    std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            host,
            "taskset",
            "-c",
            "0",
            wirespeed(),
            "gen",
        ])
        .args([
            "--port",
            &format!("packet:{host}"),
            "--count",
            &count.to_string(),
        ])
        .args([
            "--rate",
            "20000",
            "-q",
            "--dst-mac",
            &mac,
            "--dst-ip",
            &star.ip(to),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Deletes host `i`'s veth (from the host's side: both ends go), waits until the switch
/// says its port is gone, makes it again, and waits until the port is up.
fn restart_host(star: &NetStar, sock: &str, i: usize) {
    // `show` lists the ports that are not up.
    let port = format!(" port {}: link ", i + 1);
    must(&["ip", "-n", &star.hosts[i], "link", "del", &star.hosts[i]]);
    wait_shown(sock, &format!("{port}gone"), true);
    star.link_host(i);
    wait_shown(sock, &port, false);
}

#[test]
fn a_port_made_again_under_its_name_forwards_again() {
    let star = NetStar::new("pma", 3);
    let sock = ScratchFile::new("pma.sock");
    must(&["ip", "-n", &star.ns_m, "link", "set", "lo", "up"]);
    let switch = star.switch(&sock, &["--openflow", "ptcp:6653"]);
    let monitor = monitor_in(&star.ns_m);
    assert_eq!(ping(&star.hosts[0], &star.ip(1), 2), 2);

    // Four times: the frames the old socket's rings held come back each time (a port's fill
    // ring holds half its frames: without them the fourth socket would have none).
    for round in 0..4 {
        // Every other time under traffic to the port: its kernel rings are busy when it goes.
        let busy = (round % 2 == 1).then(|| {
            let sender = sending(&star, 0, 1, 20_000);
            std::thread::sleep(Duration::from_millis(300));
            sender
        });
        restart_host(&star, &sock, 1);
        if let Some(sender) = busy {
            assert!(sender.wait_with_output().unwrap().status.success());
        }
        assert_eq!(ping(&star.hosts[1], &star.ip(0), 3), 3, "round {round}");
        let before = rx_packets(&sock, 2);
        send(&star, 1, 0, 5_000, &[0]);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(rx_packets(&sock, 2) - before, 5_000, "round {round}");
    }
    assert_eq!(ping(&star.hosts[0], &star.ip(1), 3), 3);
    assert_eq!(ping(&star.hosts[2], &star.ip(1), 3), 3);
    common::switched::tcp_transfer_is_intact(&star.hosts[0], &star.hosts[1], &star.ip(1), 1 << 20);

    let told = monitor.told();
    // A link seen down on the way (a veth made, then set up) adds a MODIFY: left out.
    let statuses: Vec<&str> = told
        .lines()
        .filter(|l| l.contains("PORT_STATUS"))
        .filter_map(|l| match (l.contains(" ADD"), l.contains(" DEL")) {
            (true, _) => Some("ADD"),
            (_, true) => Some("DELETE"),
            _ => None,
        })
        .collect();
    assert_eq!(statuses, ["DELETE", "ADD"].repeat(4), "{told}");

    let (j, log) = switch.interrupt();
    let port2 = format!("port 2 (xdp:{})", star.ports[1]);
    // Made again and up, or made again down and then up.
    for said in ["interface gone", "interface made again: bound to it"] {
        let times = log.matches(&format!("{port2}: {said}")).count();
        assert_eq!(times, 4, "{said}: {log}");
    }
    assert_eq!(j["ports"][1]["link"], "up", "{j}");
    assert_eq!(j["frames"]["balanced"], true, "{j}");
}

#[test]
fn two_threads_each_bind_their_queue_again() {
    let star = NetStar::with_queues("pmq", 2, 2);
    let sock = ScratchFile::new("pmq.sock");
    let switch = star.switch(&sock, &["--pmd-cpus", "0,1"]);
    assert_eq!(ping(&star.hosts[0], &star.ip(1), 2), 2);
    restart_host(&star, &sock, 1);
    assert_eq!(ping(&star.hosts[1], &star.ip(0), 3), 3);
    let before = rx_packets(&sock, 2);
    // From each CPU, so each queue, and each thread, gets its share.
    send(&star, 1, 0, 5_000, &[0, 1]);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(rx_packets(&sock, 2) - before, 10_000);
    let (j, log) = switch.interrupt();
    assert!(log.contains("interface made again"), "{log}");
    assert_eq!(j["ports"][1]["link"], "up", "{j}");
    assert_eq!(j["frames"]["balanced"], true, "{j}");
}

/// Two threads bind queues 0 and 1 of each port; host 2's veth made again with one queue
/// (a container runtime's default) is refused before either binds. The first thread took
/// queue 0, with our program on the interface, for a port that stayed out: its traffic was
/// taken from the stack and lost.
#[test]
fn an_interface_made_again_with_too_few_queues_is_left_alone() {
    let star = NetStar::with_queues("pmf", 2, 2);
    let sock = ScratchFile::new("pmf.sock");
    let switch = star.switch(&sock, &["--pmd-cpus", "0,1"]);
    assert_eq!(ping(&star.hosts[0], &star.ip(1), 2), 2);
    let (host, port) = (&star.hosts[1], &star.ports[1]);
    must(&["ip", "-n", host, "link", "del", host]);
    wait_shown(&sock, " port 2: link gone", true);
    let one = ["numtxqueues", "1", "numrxqueues", "1"];
    let mut add = vec!["ip", "link", "add", host, "netns", host];
    add.extend(one);
    add.extend(["type", "veth", "peer", "name", port, "netns", &star.ns_m]);
    add.extend(one);
    must(&add);
    must(&["ip", "-n", &star.ns_m, "link", "set", port, "up"]);
    // Two tries at least (one a second).
    std::thread::sleep(Duration::from_millis(2500));
    wait_program(&star.ns_m, port, false);
    wait_shown(&sock, " port 2: link gone", true);
    let (j, log) = switch.interrupt();
    assert_eq!(
        log.matches(&format!(
            "but the port stays out: {port}: interface has no queue 1 (it has 1)"
        ))
        .count(),
        1,
        "{log}"
    );
    assert_eq!(j["frames"]["balanced"], true, "{j}");
}

#[test]
fn an_af_packet_port_opens_again() {
    let star = NetStar::new("pmp", 2);
    let sock = ScratchFile::new("pmp.sock");
    let switch = star.switch_with(&sock, &["xdp", "packet"], &[]);
    assert_eq!(ping(&star.hosts[0], &star.ip(1), 2), 2);
    for round in 0..2 {
        restart_host(&star, &sock, 1);
        assert_eq!(ping(&star.hosts[1], &star.ip(0), 3), 3, "round {round}");
        let before = rx_packets(&sock, 2);
        send(&star, 1, 0, 5_000, &[0]);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(rx_packets(&sock, 2) - before, 5_000, "round {round}");
    }
    let (j, log) = switch.interrupt();
    let said = format!("port 2 (packet:{}): interface made again", star.ports[1]);
    assert_eq!(log.matches(&said).count(), 2, "{log}");
    assert_eq!(j["ports"][1]["link"], "up", "{j}");
    // Its counts went on: the pings and the frames of both rounds, at least.
    assert!(
        j["ports"][1]["rx_packets"].as_u64().unwrap() >= 10_006,
        "{j}"
    );
}

/// The UMEM's first socket (port 1's) made again shares the UMEM through another port's;
/// with every port's interface deleted at once, the first made again registers the same
/// frames anew.
#[test]
fn every_port_made_again_even_the_umem_s_first() {
    let star = NetStar::new("pmu", 2);
    let sock = ScratchFile::new("pmu.sock");
    let switch = star.switch(&sock, &[]);
    assert_eq!(ping(&star.hosts[0], &star.ip(1), 2), 2);
    restart_host(&star, &sock, 0);
    assert_eq!(ping(&star.hosts[0], &star.ip(1), 3), 3);
    for host in &star.hosts {
        must(&["ip", "-n", host, "link", "del", host]);
    }
    wait_shown(&sock, " port 2: link gone", true);
    for i in 0..2 {
        star.link_host(i);
    }
    for port in [" port 1: link ", " port 2: link "] {
        wait_shown(&sock, port, false);
    }
    assert_eq!(ping(&star.hosts[1], &star.ip(0), 3), 3);
    let before = rx_packets(&sock, 1);
    send(&star, 0, 1, 5_000, &[0]);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(rx_packets(&sock, 1) - before, 5_000);
    let (j, _) = switch.interrupt();
    assert_eq!(j["frames"]["balanced"], true, "{j}");
}

/// An interface moved to another network namespace and back keeps its index, but the move
/// unbound its socket: the port binds again all the same. Away, it is its new owner's: our
/// program is no longer attached to it (the owner could not take it off while we held its
/// link, and every packet it received went to our unbound socket).
#[test]
fn a_port_moved_away_and_back_binds_again() {
    let star = NetStar::new("pmn", 3);
    let sock = ScratchFile::new("pmn.sock");
    let switch = star.switch_with(&sock, &["xdp", "xdp"], &[]);
    assert_eq!(ping(&star.hosts[0], &star.ip(1), 2), 2);
    let (port, away) = (&star.ports[1], &star.hosts[2]);
    let index = |ns: &str| must(&["ip", "-n", ns, "-o", "link", "show", port]);
    let before = index(&star.ns_m);
    must(&["ip", "-n", &star.ns_m, "link", "set", port, "netns", away]);
    wait_shown(&sock, " port 2: link gone", true);
    wait_program(away, port, false);
    must(&["ip", "-n", away, "link", "set", port, "xdp", "off"]);
    must(&["ip", "-n", away, "link", "set", port, "netns", &star.ns_m]);
    must(&["ip", "-n", &star.ns_m, "link", "set", port, "up"]);
    let after = index(&star.ns_m);
    assert_eq!(before.split(':').next(), after.split(':').next(), "{after}");
    wait_shown(&sock, " port 2: link ", false);
    assert_eq!(ping(&star.hosts[1], &star.ip(0), 3), 3);
    let before = rx_packets(&sock, 2);
    send(&star, 1, 0, 5_000, &[0]);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(rx_packets(&sock, 2) - before, 5_000);
    // Made again and moved away as soon as the switch bound it (maybe before a thread saw
    // it up): our program comes off it all the same.
    must(&["ip", "-n", &star.hosts[1], "link", "del", &star.hosts[1]]);
    wait_shown(&sock, " port 2: link gone", true);
    star.link_host(1);
    wait_program(&star.ns_m, port, true);
    must(&["ip", "-n", &star.ns_m, "link", "set", port, "netns", away]);
    wait_program(away, port, false);
    let (j, _) = switch.interrupt();
    assert_eq!(j["frames"]["balanced"], true, "{j}");
}

/// With `--offload` too, an interface moved to another network namespace is its new
/// owner's: the fast path's program comes off it, so the owner's traffic flows (the
/// program stayed and sent every packet it received to our socket, bound to nothing: a
/// ping across the moved link got no answer, and `xdp off` there failed).
#[test]
fn an_offloaded_port_moved_away_is_its_new_owners() {
    let star = NetStar::new("pmo", 3);
    let sock = ScratchFile::new("pmo.sock");
    let switch = star.switch_with(&sock, &["xdp", "xdp"], &["--offload"]);
    // The hosts' veths take the kernel's redirected frames only with NAPI on.
    for host in &star.hosts[..2] {
        must(&[
            "ip", "netns", "exec", host, "ethtool", "-K", host, "gro", "on",
        ]);
    }
    assert_eq!(ping(&star.hosts[0], &star.ip(1), 2), 2);
    let (port, away) = (&star.ports[1], &star.hosts[2]);
    must(&["ip", "-n", &star.ns_m, "link", "set", port, "netns", away]);
    wait_shown(&sock, " port 2: link gone", true);
    wait_program(away, port, false);
    // The moved end and host 2's veth, on an address range of their own.
    must(&["ip", "-n", away, "addr", "add", "10.99.0.1/24", "dev", port]);
    must(&["ip", "-n", away, "link", "set", port, "up"]);
    let host = &star.hosts[1];
    must(&["ip", "-n", host, "addr", "add", "10.99.0.2/24", "dev", host]);
    assert_eq!(ping(away, "10.99.0.2", 3), 3);
    let (j, log) = switch.interrupt();
    assert!(
        log.contains("port 2 (xdp:") && log.contains("interface gone"),
        "{log}"
    );
    assert_eq!(j["frames"]["balanced"], true, "{j}");
}
