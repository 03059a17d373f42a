//! `wirespeed switch --offload`: flows whose decision is exactly `output:N` are forwarded by
//! the XDP program in the kernel, with every packet delivered and counted once; other
//! decisions stay in user space; a foreign XDP program is not replaced.

mod common;
use common::switched::{Setup, Switched, field, send_on_cpu};
use common::*;

/// The hosts' veths receive the kernel's XDP redirects only with NAPI on: GRO on.
fn offloading(tag: &str) -> Switched {
    offloading_with(tag, Setup::default(), &[])
}

fn offloading_with(tag: &str, setup: Setup<'_>, extra: &[&str]) -> Switched {
    let mut args = vec!["--offload"];
    args.extend_from_slice(extra);
    let s = Switched::with(tag, setup, &args);
    for (ns, dev) in [(&s.c.ns_a, &s.c.a), (&s.c.ns_b, &s.c.b)] {
        must(&["ip", "netns", "exec", ns, "ethtool", "-K", dev, "gro", "on"]);
    }
    s
}

/// Sends `count` UDP frames (one flow) from host A with bench txpush, all of them.
fn push_from_a(s: &Switched, count: u64) {
    push_from_a_with(s, count, &[]);
}

/// [`push_from_a`] with `extra` on txpush's command line.
fn push_from_a_with(s: &Switched, count: u64, extra: &[&str]) {
    let port = format!("xdp:{}", s.c.a);
    let count_text = count.to_string();
    let mut argv = vec![
        "bench",
        "txpush",
        "--port",
        &port,
        "--count",
        &count_text,
        "--json",
        "-q",
    ];
    argv.extend_from_slice(extra);
    let tx = run_json(&s.c.ns_a, &argv);
    assert_eq!(tx["packets"], count, "{tx}");
}

/// Port `port`'s received packets in dump-ports: all of them, and those of the kernel's
/// fast path.
fn port_rx(ports: &str, port: u32) -> (u64, u64) {
    let block = port_block(ports, port);
    (
        field(&block, "rx pkts", "pkts"),
        field(&block, "fast path", "pkts"),
    )
}

/// Port `port`'s lines in dump-ports.
fn port_block(ports: &str, port: u32) -> String {
    let lines: Vec<&str> = ports
        .lines()
        .skip_while(|l| !l.contains(&format!("port {port:>2}: rx")))
        .take(5)
        .collect();
    lines.join("\n")
}

/// `count` frames pushed from host A: how many reached host B.
fn push_and_count(s: &Switched, count: u64) -> u64 {
    let before = link_stat(&s.c.ns_b, &s.c.b, "rx", "packets");
    push_from_a(s, count);
    std::thread::sleep(std::time::Duration::from_millis(300));
    link_stat(&s.c.ns_b, &s.c.b, "rx", "packets") - before
}

/// Port `port`'s receive drops in dump-ports (rings full, fill ring empty, kernel drops).
fn port_rx_drops(ports: &str, port: u32) -> u64 {
    field(ports, &format!("port {port:>2}: rx"), "drop")
}

#[test]
fn offloaded_flows_are_forwarded_and_counted_exactly() {
    let s = offloading_with("so", Setup::default(), &["--openflow", "ptcp:"]);
    s.ctl_ok(&["add-flow", "priority=10,in_port=1,actions=output:2"]);
    s.ctl_ok(&["add-flow", "priority=10,in_port=2,actions=output:1"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    const SENT: u64 = 20_000;
    // The first push's first packet goes up and installs the flow's entry; how many of the
    // rest the kernel takes depends on how soon the switch thread runs (about nine tenths
    // on a fast day, none if it wakes after the burst). With the entry in place, the kernel
    // forwards a second push (all but a handful at most: 99 %).
    let arrived = push_and_count(&s, SENT);
    let fast_first = port_rx(&s.ctl_ok(&["dump-ports"]), 1).1;
    let arrived = arrived + push_and_count(&s, SENT);
    let ports = s.ctl_ok(&["dump-ports"]);
    let (received, fast) = port_rx(&ports, 1);
    let fast_again = fast - fast_first;
    assert!(
        fast_again >= SENT * 99 / 100,
        "the kernel forwarded {fast_again} of a second {SENT}:\n{ports}"
    );
    // Under a loaded machine the first packets can overflow the socket's rings before the
    // flow is installed; every loss must then be counted somewhere.
    // The socket's drops also show as the veth's failed redirects: count them once.
    let redirect_failures = ethtool_stat(&s.c.ns_m, &s.c.ma, "rx_queue_0_drops");
    let dropped = port_rx_drops(&ports, 1) + s.c.veth_drops() - redirect_failures;
    assert_eq!(
        arrived + dropped,
        2 * SENT,
        "every packet arrived or was counted as dropped (veth drops {}, of them failed \
         redirects to the socket {redirect_failures}):\n{ports}",
        s.c.veth_drops()
    );
    let flows = s.ctl_ok(&["dump-flows"]);
    let rule = field(&flows, "in_port=1 actions=output:2", "n_packets");
    assert_eq!(
        rule, received,
        "the rule counts every packet port 1 received, in the kernel or not:\n{flows}\n{ports}"
    );
    assert!(fast > 0 && fast < received, "{ports}");
    // A controller's port statistics count the kernel's packets too.
    let of_ports = s.ofctl_ok(&["dump-ports", "1"]);
    assert_eq!(
        field(&of_ports, "port  1: rx", "pkts"),
        received,
        "{of_ports}\n{ports}"
    );
    let cache = s.ctl_ok(&["dump-cache"]);
    let hits = field(&cache, "fast_path:", "kernel_hits");
    assert_eq!(
        hits,
        fast + port_rx(&ports, 2).1,
        "kernel hits are the fast path's receptions on both ports:\n{cache}"
    );
    // Ping replies (port 2 -> 1) went through the kernel too: ICMP is offloaded.
    assert!(field(&cache, "fast_path:", "flows") >= 3, "{cache}");
}

/// Port `port`'s fast-path transmit failures in dump-ports, and whether it is blocked.
fn port_tx_failed(ports: &str, port: u32) -> (u64, bool) {
    let block = port_block(ports, port);
    let line = block
        .lines()
        .find(|l| l.contains("fast path"))
        .unwrap_or_else(|| panic!("no fast path line for port {port}:\n{ports}"));
    (field(line, "fast path", "failed"), line.contains("blocked"))
}

/// A host whose veth cannot take XDP frames (no XDP program and GRO off, veth's default):
/// the kernel drops what the fast path redirects there. The switch counts those frames,
/// the program blocks the port at the first failure so the flow goes on through user space,
/// and the user is told; once the host's veth takes XDP frames, the kernel's next try finds
/// the port sending and forwards there again.
#[test]
fn a_port_that_refuses_the_kernels_frames_is_served_from_user_space() {
    let mut s = Switched::with("sf", Setup::default(), &["--offload"]);
    s.ctl_ok(&["add-flow", "priority=10,in_port=1,actions=output:2"]);
    s.ctl_ok(&["add-flow", "priority=10,in_port=2,actions=output:1"]);
    const SENT: u64 = 20_000;
    // One packet first, whose upcall installs the flow's entry: the burst's first packets
    // then meet the kernel's failure however late the switch thread wakes.
    let arrived = push_and_count(&s, 1) + push_and_count(&s, SENT);
    // The switch tries a blocked port again no sooner than a second later.
    let ports = s.ctl_ok(&["dump-ports"]);
    let (failed, blocked) = port_tx_failed(&ports, 2);
    assert!(blocked, "{ports}");
    // One batch at most: the program blocks the port at its first failure.
    assert!((1..=64).contains(&failed), "{ports}");
    let cache = s.ctl_ok(&["dump-cache"]);
    assert!(
        field(&cache, "fast_path:", "blocked") > 0,
        "the flow's later packets went up to user space:\n{cache}"
    );
    let redirect_failures = ethtool_stat(&s.c.ns_m, &s.c.ma, "rx_queue_0_drops");
    let dropped =
        port_rx_drops(&ports, 1) + field(&ports, "port  2: rx", "drop") + s.c.veth_drops()
            - redirect_failures;
    // Port 2's transmit line: what went out, the kernel's failed redirects among the drops.
    let tx_line = ports
        .lines()
        .skip_while(|l| !l.contains("port  2: rx"))
        .nth(1)
        .unwrap_or_else(|| panic!("no tx line for port 2:\n{ports}"));
    let (sent, tx_dropped) = (field(tx_line, "tx", "pkts"), field(tx_line, "tx", "drop"));
    assert!(tx_dropped >= failed, "{ports}");
    assert_eq!(
        arrived + dropped + tx_dropped,
        SENT + 1,
        "every packet arrived, failed in the kernel or was dropped and counted:\n{ports}"
    );
    // (How many of the rest the socket's rings could take depends on how busy the machine
    // is: those it could not are counted above.)
    assert_eq!(arrived, sent, "all that was sent arrived:\n{ports}");
    // The host's veth takes XDP frames now: once the switch unblocks the port (1-2 s after
    // the failure), the kernel sends there.
    must(&[
        "ip", "netns", "exec", &s.c.ns_b, "ethtool", "-K", &s.c.b, "gro", "on",
    ]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while port_tx_failed(&s.ctl_ok(&["dump-ports"]), 2).1 {
        assert!(std::time::Instant::now() < deadline, "port 2 stays blocked");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let hits = |s: &Switched| field(&s.ctl_ok(&["dump-cache"]), "fast_path:", "kernel_hits");
    let hits_before = hits(&s);
    push_from_a(&s, SENT);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let ports = s.ctl_ok(&["dump-ports"]);
    assert_eq!(port_tx_failed(&ports, 2), (failed, false), "{ports}");
    assert!(
        hits(&s) - hits_before >= SENT * 9 / 10,
        "the kernel forwards to port 2 again:\n{ports}"
    );
    // Two housekeeping rounds see the port send before the switch says so.
    std::thread::sleep(std::time::Duration::from_millis(3000));
    let (_, stderr) = s.stop();
    assert!(
        stderr.contains("port 2: the kernel could not send what the fast path forwarded")
            && stderr.contains("ethtool -K PEER gro on")
            && stderr.contains("port 2: the kernel sends what the fast path forwards there again"),
        "{stderr}"
    );
}

#[test]
fn each_queue_misses_to_its_own_poll_mode_thread() {
    let setup = Setup {
        queues: 2,
        ..Setup::default()
    };
    let mut s = offloading_with("sq", setup, &["--pmd-cpus", "0,1"]);
    s.ctl_ok(&["add-flow", "priority=10,in_port=1,actions=output:2"]);
    s.ctl_ok(&["add-flow", "priority=10,in_port=2,actions=output:1"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let before = link_stat(&s.c.ns_b, &s.c.b, "rx", "packets");
    let b_mac = mac_of(&s.c.ns_b, &s.c.b);
    // 16 flows of their own into each queue: their first packets come up to the queue's
    // thread, the rest are forwarded by the kernel. How many came up before their flow's
    // entry depends on how soon the thread ran (all of a round, if it woke after it): the
    // second round of the same flows finds every entry in place.
    for _round in 0..2 {
        for (cpu, src_port) in [(0, "2000"), (1, "3000")] {
            send_on_cpu(
                &s.c.ns_a,
                &s.c.a,
                cpu,
                1000,
                &b_mac,
                &["--src-port", src_port],
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let arrived = link_stat(&s.c.ns_b, &s.c.b, "rx", "packets") - before;
    let ports = s.ctl_ok(&["dump-ports"]);
    let redirect_failures: u64 = (0..2)
        .map(|q| ethtool_stat(&s.c.ns_m, &s.c.ma, &format!("rx_queue_{q}_drops")))
        .sum();
    let dropped = port_rx_drops(&ports, 1) + s.c.veth_drops() - redirect_failures;
    assert_eq!(
        arrived + dropped,
        4000,
        "every packet of both queues crossed or was counted as dropped:\n{ports}"
    );
    let cache = s.ctl_ok(&["dump-cache"]);
    assert!(
        field(&cache, "fast_path:", "kernel_hits") >= 2000,
        "the second round went through the kernel:\n{cache}"
    );
    let (j, _) = s.stop();
    let up: Vec<u64> = j["pmds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rx_packets"][0].as_u64().unwrap())
        .collect();
    assert!(
        up.iter().all(|&n| n >= 16),
        "each thread decided its queue's flows: {j}"
    );
}

#[test]
fn queues_without_a_socket_are_not_the_switch_s() {
    let setup = Setup {
        queues: 2,
        ..Setup::default()
    };
    // One thread, bound to queue 0 of each port: queue 1 is the stack's, as without the
    // fast path, even for flows installed from queue 0.
    let s = offloading_with("sx", setup, &[]);
    s.ctl_ok(&["add-flow", "priority=10,in_port=1,actions=output:2"]);
    let before = link_stat(&s.c.ns_b, &s.c.b, "rx", "packets");
    let b_mac = mac_of(&s.c.ns_b, &s.c.b);
    for cpu in [0, 1] {
        send_on_cpu(&s.c.ns_a, &s.c.a, cpu, 1000, &b_mac, &[]);
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let arrived = link_stat(&s.c.ns_b, &s.c.b, "rx", "packets") - before;
    assert_eq!(arrived, 1000, "only queue 0's packets cross");
    let cache = s.ctl_ok(&["dump-cache"]);
    assert_eq!(field(&cache, "fast_path:", "flows"), 16, "{cache}");
}

/// With the hosts' default transmit checksum offload, UDP datagrams and TCP segments from
/// sockets arrive with partial checksums: the kernel leaves those to user space, which
/// completes them, so they arrive whole; and such flows get no kernel entry (their next
/// packets are partial too, so it would never be used).
#[test]
fn tcp_with_partial_checksums_crosses_an_offloading_switch() {
    let s = offloading("sc");
    // 50 UDP datagrams from a socket: each leaves A with a partial checksum.
    let mut rx = std::process::Command::new("ip")
        .args(["netns", "exec", &s.c.ns_b, "python3", "-c"])
        .arg(
            "import socket\n\
             r=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); r.bind(('10.9.0.2', 5002))\n\
             r.settimeout(3); print('ready', flush=True); n=0\n\
             try:\n  while True:\n    d=r.recv(2000); n+=d==bytes(range(200))\n\
             except socket.timeout: pass\n\
             print(n, flush=True)",
        )
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(rx.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    must(&[
        "ip",
        "netns",
        "exec",
        &s.c.ns_a,
        "python3",
        "-c",
        "import socket,time\n\
         t=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         for i in range(50): t.sendto(bytes(range(200)), ('10.9.0.2', 5002)); time.sleep(0.01)",
    ]);
    line.clear();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    let _ = rx.wait();
    assert_eq!(line.trim(), "50", "datagrams received whole");
    let cache = s.ctl_ok(&["dump-cache"]);
    assert_eq!(field(&cache, "fast_path:", "installed"), 0, "{cache}");
    s.tcp_transfer_is_intact(2 * 1024 * 1024);
}

#[test]
fn idle_flows_leave_the_kernel_table_and_come_back() {
    let s = offloading("si");
    s.ctl_ok(&["add-flow", "priority=10,in_port=1,actions=output:2"]);
    s.ctl_ok(&["add-flow", "priority=10,in_port=2,actions=output:1"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let cache = s.ctl_ok(&["dump-cache"]);
    // Echo request and echo reply.
    assert_eq!(field(&cache, "fast_path:", "flows"), 2, "{cache}");
    // Idle for 10 s, then the next housekeeping round (1 s) removes them.
    std::thread::sleep(std::time::Duration::from_secs(12));
    let cache = s.ctl_ok(&["dump-cache"]);
    assert_eq!(field(&cache, "fast_path:", "flows"), 0, "{cache}");
    assert_eq!(field(&cache, "fast_path:", "aged"), 2, "{cache}");
    let flows = s.ctl_ok(&["dump-flows"]);
    let counted = field(&flows, "in_port=1 actions=output:2", "n_packets");
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let cache = s.ctl_ok(&["dump-cache"]);
    assert_eq!(field(&cache, "fast_path:", "flows"), 2, "{cache}");
    assert_eq!(field(&cache, "fast_path:", "installed"), 4, "{cache}");
    let flows = s.ctl_ok(&["dump-flows"]);
    assert_eq!(
        field(&flows, "in_port=1 actions=output:2", "n_packets"),
        counted + 3,
        "the rule counts every echo request, before and after: {flows}"
    );
}

#[test]
fn learning_switch_flows_are_offloaded_and_follow_a_move() {
    let s = offloading("sl");
    // Quiet hosts: an IPv6 packet from B would teach the table B's true port at any time.
    for ns in [&s.c.ns_a, &s.c.ns_b] {
        must(&[
            "ip",
            "netns",
            "exec",
            ns,
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
        ]);
    }
    // ARP teaches the table both hosts; the echo requests and replies are then offloaded.
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let cache = s.ctl_ok(&["dump-cache"]);
    assert_eq!(field(&cache, "fast_path:", "flows"), 2, "{cache}");
    let hits = field(&cache, "fast_path:", "kernel_hits");
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let cache = s.ctl_ok(&["dump-cache"]);
    assert_eq!(
        field(&cache, "fast_path:", "kernel_hits"),
        hits + 6,
        "{cache}"
    );
    // B's address shows up behind port 1: the table moves it, so A's echo requests to B
    // now go nowhere (normal never sends out of the input port), in the kernel too.
    let b_mac = mac_of(&s.c.ns_b, &s.c.b);
    let tx = run_json(
        &s.c.ns_a,
        &[
            "gen",
            "--port",
            &format!("packet:{}", s.c.a),
            "--count",
            "1",
            "--src-mac",
            &b_mac,
            "--dst-mac",
            "ff:ff:ff:ff:ff:ff",
            "--json",
            "-q",
        ],
    );
    assert_eq!(tx["packets"], 1, "{tx}");
    assert_eq!(
        s.ping(&s.c.ns_a, "10.9.0.2", 2),
        0,
        "B is behind port 1 now"
    );
    // B speaks from port 2 again: learned back, and ping works.
    assert_eq!(s.ping(&s.c.ns_b, "10.9.0.1", 3), 3);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let flows = s.ctl_ok(&["dump-flows"]);
    let ports = s.ctl_ok(&["dump-ports"]);
    let ((received1, fast1), (received2, fast2)) = (port_rx(&ports, 1), port_rx(&ports, 2));
    assert!(fast1 + fast2 > 0, "some went through the kernel:\n{ports}");
    assert_eq!(
        field(&flows, "priority=0 actions=NORMAL", "n_packets"),
        received1 + received2,
        "the normal rule counts every packet, in the kernel or not:\n{flows}\n{ports}"
    );
}

#[test]
fn only_exact_output_decisions_are_offloaded() {
    let s = offloading("sn");
    // A rewrite, flood and a rule with a timeout: all stay in user space.
    s.ctl_ok(&[
        "add-flow",
        "priority=10,icmp,in_port=1,actions=mod_nw_tos:32,output:2",
    ]);
    s.ctl_ok(&["add-flow", "priority=10,icmp,in_port=2,actions=flood"]);
    s.ctl_ok(&[
        "add-flow",
        "priority=10,udp,idle_timeout=60,in_port=1,actions=output:2",
    ]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    push_from_a(&s, 1000);
    let cache = s.ctl_ok(&["dump-cache"]);
    assert_eq!(field(&cache, "fast_path:", "flows"), 0, "{cache}");
    assert_eq!(field(&cache, "fast_path:", "installed"), 0, "{cache}");
    assert_eq!(field(&cache, "fast_path:", "kernel_hits"), 0, "{cache}");
}

/// A decision the kernel's table cannot take (a rewrite) is not offered to it: its packets
/// lock the bridge's shared state only for their miss, not in every burst.
#[test]
fn decisions_that_stay_in_user_space_lock_nothing_shared() {
    let s = offloading("sr");
    s.ctl_ok(&[
        "add-flow",
        "priority=10,udp,in_port=1,actions=mod_nw_tos:32,output:2",
    ]);
    push_from_a_with(&s, 5000, &["--batch", "1"]);
    let cache = s.ctl_ok(&["dump-cache"]);
    assert_eq!(field(&cache, "fast_path:", "installed"), 0, "{cache}");
    let (misses, locked) = (
        field(&cache, "emc_hits=", "misses"),
        field(&cache, "emc_hits=", "shared_bursts"),
    );
    assert!((1..=misses).contains(&locked), "{cache}");
}

/// Runs the switch with --offload on `ports` in the middle namespace of `c`: it must exit 1
/// with `want` in its message and leave no control socket behind.
fn refused(c: &NetChain, ports: [String; 2], want: &str) {
    let ctl = ScratchFile::new(&format!("{}.sock", c.ma));
    let out = run_in(
        &c.ns_m,
        &[
            "switch",
            "--port",
            &ports[0],
            "--port",
            &ports[1],
            "--ctl",
            &ctl,
            "--offload",
            "--duration",
            "1",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(want), "{err}");
    assert!(
        !std::path::Path::new(&*ctl).exists(),
        "no control socket left"
    );
}

#[test]
fn a_foreign_program_is_not_replaced() {
    let c = NetChain::new("sf");
    let obj = foreign_object();
    must(&[
        "ip",
        "-n",
        &c.ns_m,
        "link",
        "set",
        "dev",
        &c.mb,
        "xdpgeneric",
        "obj",
        &obj,
        "sec",
        FOREIGN_SECTION,
    ]);
    let _ = std::fs::remove_file(&obj);
    refused(
        &c,
        [format!("1=xdp:{}", c.ma), format!("2=xdp:{}", c.mb)],
        &format!("{}: another XDP program is attached", c.mb),
    );
    // Nothing of ours is left on the first interface either.
    let link = must(&["ip", "-n", &c.ns_m, "-d", "link", "show", "dev", &c.ma]);
    assert!(!link.contains("prog/xdp"), "{link}");
}

#[test]
fn offload_refuses_ports_it_cannot_serve() {
    let c = NetChain::new("sr");
    refused(
        &c,
        [format!("1=packet:{}", c.ma), format!("2=packet:{}", c.mb)],
        "--offload: needs 1 to 64 AF_XDP ports, not 0",
    );
    refused(
        &c,
        [format!("1=xdp:{}", c.ma), format!("2=xdp:{}@0", c.ma)],
        &format!("{} is already port 1", c.ma),
    );
    c.assert_no_xdp_left();
}
