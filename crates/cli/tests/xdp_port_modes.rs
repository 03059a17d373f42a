//! What an AF_XDP port promises beyond moving packets: the XDP mode asked for is the one it
//! reports (zero-copy, which veth lacks, is refused with a message and nothing left
//! attached), busy polling, the live line and the JSON summary, drops counted by reason when
//! the receiver stops reading, and a queue without a socket passing its packets to the stack.

mod common;
use common::traffic::gen_in_a;
use common::*;

/// `gen` from A at a rate B keeps up with: `count` packets.
fn gen_from_a(net: &NetPair, count: u64, rate: &str) {
    let j = gen_in_a(net, &["--count", &count.to_string(), "--rate", rate]);
    assert_eq!(j["packets"].as_u64(), Some(count), "{j}");
}

/// `bench rxdrop --json ARGS` on `port` in B, once it is ready.
fn rxdrop_in_b(net: &NetPair, port: &str, args: &[&str]) -> Running {
    let mut argv = vec!["bench", "rxdrop", "--port", port, "--json"];
    argv.extend_from_slice(args);
    let mut rx = spawn_in(&net.ns_b, &argv);
    rx.wait_ready();
    rx
}

#[test]
fn skb_mode_with_busy_poll_and_headroom_reports_itself_and_takes_every_packet() {
    let net = NetPair::new("xm");
    let port = format!("xdp:{}", net.b);
    // No -q: the live line once a second.
    let rx = rxdrop_in_b(
        &net,
        &port,
        &[
            "--xdp-mode",
            "skb",
            "--busy-poll",
            "--headroom",
            "256",
            // 160 ms of packets at 50,000 a second: a VM's CPU can stall for longer than
            // the default rings last (see common::traffic::recv_in_b).
            "--ring-size",
            "8192",
            "--frames",
            "16384",
            "--duration",
            "4",
        ],
    );
    gen_from_a(&net, 100_000, "50000");
    let (j, log) = rx.finish();
    assert_eq!(j["mode"], "rxdrop", "{j}");
    assert_eq!(j["port"], port.as_str(), "{j}");
    assert_eq!(j["backend"], "xdp", "{j}");
    assert_eq!(j["xdp_mode"], "skb", "{j}");
    assert_eq!(j["batch"], 64, "{j}");
    assert_eq!(j["size"], 64, "{j}");
    // The kernel busy-polls zero-copy sockets only: said, and the port sleeps in poll() when
    // idle as without --busy-poll.
    let notes = j["notes"].as_array().expect("notes");
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("busy poll: the kernel busy-polls zero-copy sockets only")
            && n.as_str().unwrap().contains("in skb mode")),
        "{j}"
    );
    // 50,000 packets a second: none lost.
    assert_eq!(j["packets"].as_u64(), Some(100_000), "{j}");
    assert_eq!(j["drops_total"].as_u64(), Some(0), "{j}");
    assert_eq!(net.veth_drops(), 0);
    assert_eq!(j["bytes"].as_u64(), Some(100_000 * 60), "{j}");
    let (mpps, seconds) = (j["mpps"].as_f64().unwrap(), j["seconds"].as_f64().unwrap());
    assert!((mpps * 1e6 * seconds - 100_000.0).abs() < 1.0, "{j}");
    // "   1.0s  rx    0.050 Mpps       24.0 Mbit/s  total        50000  drops 0 ..."
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" Mpps ") && l.contains(" Mbit/s ") && l.contains("drops "))
        .collect();
    assert!(lines.len() >= 3, "a live line a second: {log}");
    let totals: Vec<u64> = lines
        .iter()
        .map(|l| {
            let after = l.split("total").nth(1).expect(l);
            after.split_whitespace().next().unwrap().parse().expect(l)
        })
        .collect();
    assert!(totals.windows(2).all(|w| w[0] <= w[1]), "{log}");
    assert!(*totals.last().unwrap() <= 100_000, "{log}");
    net.assert_no_xdp();
}

#[test]
fn zero_copy_on_veth_is_refused_with_nothing_left_attached() {
    let net = NetPair::new("xz");
    let port = format!("xdp:{}", net.b);
    let out = run_in(
        &net.ns_b,
        &[
            "bench",
            "rxdrop",
            "--port",
            &port,
            "--xdp-mode",
            "zc",
            "--duration",
            "1",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "zero-copy on veth: {err}");
    assert!(err.contains("zero-copy"), "{err}");
    assert!(err.contains(&net.b), "names the interface: {err}");
    net.assert_no_xdp();
    // native: driver-mode XDP, where veth's AF_XDP runs in copy mode.
    let j = run_json(
        &net.ns_b,
        &[
            "bench",
            "rxdrop",
            "--port",
            &port,
            "--xdp-mode",
            "native",
            "--duration",
            "1",
            "--json",
            "-q",
        ],
    );
    assert_eq!(j["xdp_mode"], "copy", "{j}");
    net.assert_no_xdp();
}

/// Stops a receiver that has set up its rings (SIGSTOP), sends 2000 packets, lets it go on:
/// it gets what its rings held, and every other packet is a drop under `reason`.
fn stopped_receiver(tag: &str, rings: &[&str], held: u64, reason: &str) {
    let net = NetPair::new(tag);
    let port = format!("xdp:{}", net.b);
    let mut args = vec!["--duration", "30", "-q"];
    args.extend_from_slice(rings);
    let rx = rxdrop_in_b(&net, &port, &args);
    let pid = rx.pid().to_string();
    must(&["kill", "-STOP", &pid]);
    gen_from_a(&net, 2000, "100000");
    must(&["kill", "-CONT", &pid]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (j, _) = rx.interrupt();
    let turned_away = 2000 - held;
    assert_eq!(j["packets"].as_u64(), Some(held), "{j}");
    assert_eq!(j["drops"][reason].as_u64(), Some(turned_away), "{j}");
    assert_eq!(j["drops_total"].as_u64(), Some(turned_away), "{j}");
    // veth agrees: its failed redirects into the socket, and nothing else lost.
    assert_eq!(
        ethtool_stat(&net.ns_b, &net.b, "rx_queue_0_drops"),
        turned_away
    );
    assert_eq!(net.veth_drops(), turned_away);
    assert_frames_balanced(&j);
}

#[test]
fn a_full_rx_ring_counts_every_packet_it_turned_away() {
    // 256 RX entries, 512 frames waiting in the fill ring: the RX ring fills first.
    stopped_receiver(
        "xf",
        &["--ring-size", "256", "--frames", "2048"],
        256,
        "rx_ring_full",
    );
}

#[test]
fn an_empty_fill_ring_counts_every_packet_it_had_no_frame_for() {
    // 384 frames in the fill ring (512 less the transmit reserve), 1024 RX entries.
    stopped_receiver(
        "xe",
        &["--ring-size", "1024", "--frames", "512"],
        384,
        "fill_ring_empty",
    );
}

#[test]
fn a_queue_without_a_socket_passes_its_packets_to_the_stack() {
    // A sends on its one queue, so everything arrives on B's queue 0.
    let net = NetPair::with_queue_counts("xq", 1, 2);
    net.address("10.8.0.1/24", "10.8.0.2/24");
    let ping_b = || ping(&net.ns_a, "10.8.0.2", 3);
    for (queue, replies) in [(1, 3), (0, 0)] {
        let port = format!("xdp:{}@{queue}", net.b);
        let rx = rxdrop_in_b(&net, &port, &["--duration", "30", "-q"]);
        assert_eq!(ping_b(), replies, "socket on queue {queue}");
        let (j, log) = rx.interrupt();
        let note = format!("has 2 receive queues and this port receives on queue {queue} only");
        assert!(log.contains(&note), "{log}");
        match queue {
            1 => assert_eq!(j["packets"], 0, "queue 1 saw nothing: {j}"),
            // The ARP requests at least (their replies would have let ping send).
            _ => assert!(
                j["packets"].as_u64().unwrap() >= 1,
                "queue 0 took them: {j}"
            ),
        }
        net.assert_no_xdp();
    }
}

#[test]
fn an_all_queues_port_takes_every_queue_and_keeps_its_frames() {
    // Queue q of A sends 500 * (q + 1) frames; veth delivers them on queue q of B.
    let net = NetPair::with_queues("xa", 2);
    let rx = rxdrop_in_b(
        &net,
        &format!("xdp:{}@all", net.b),
        &["--duration", "30", "-q"],
    );
    for q in 0..2u32 {
        let count = (500 * (q + 1)).to_string();
        let port = format!("xdp:{}@{q}", net.a);
        let tx = run_json(
            &net.ns_a,
            &[
                "bench", "txpush", "--port", &port, "--count", &count, "--json", "-q",
            ],
        );
        assert_eq!(tx["tx_packets"].to_string(), count, "{tx}");
    }
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let (j, log) = rx.interrupt();
    assert_eq!(j["packets"], 1500, "{j}\n{log}");
    assert_eq!(j["port"], format!("xdp:{}@all", net.b), "{j}");
    assert!(log.contains("receiving on all 2 queues"), "{log}");
    assert_frames_balanced(&j);
    net.assert_no_xdp();
}

/// `--xdp-mode auto` (the default) tries zero-copy, copy, then skb, and says what it got:
/// copy on a veth (native XDP, no zero-copy), skb on a bridge device (no native XDP), each
/// with a note naming what did not work, once.
#[test]
fn auto_reports_the_mode_each_interface_allows() {
    let net = NetPair::new("am");
    let rxdrop = |port: &str| {
        run_json(
            &net.ns_b,
            &[
                "bench",
                "rxdrop",
                "--port",
                port,
                "--duration",
                "0.5",
                "--json",
                "-q",
            ],
        )
    };
    let j = rxdrop(&format!("xdp:{}", net.b));
    assert_eq!(j["xdp_mode"], "copy", "{j}");
    let zc_refused = format!(
        "fell back after: zero-copy bind: {} queue 0: bind in zero-copy mode: Operation not \
         supported (os error 95) (the driver has no AF_XDP zero-copy, as veth: --xdp-mode copy)",
        net.b
    );
    assert_eq!(j["notes"], serde_json::json!([zc_refused]), "{j}");
    let bridge = format!("{}br", &net.b[..net.b.len().min(13)]);
    must(&[
        "ip", "-n", &net.ns_b, "link", "add", &bridge, "type", "bridge",
    ]);
    must(&["ip", "-n", &net.ns_b, "link", "set", &bridge, "up"]);
    let j = rxdrop(&format!("xdp:{bridge}"));
    assert_eq!(j["xdp_mode"], "skb", "{j}");
    let notes = j["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{j}");
    let note = notes[0].as_str().unwrap();
    assert!(
        note.starts_with("fell back after: native XDP: ")
            && note.contains("not supported")
            && note.matches("native XDP").count() == 1,
        "{note}"
    );
    net.assert_no_xdp();
}
