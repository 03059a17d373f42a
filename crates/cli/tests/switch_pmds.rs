//! `--pmd-cpus 0,1`: two poll-mode threads, thread i on receive queue i of every port of
//! veths with two queues. Packets sent into each queue all arrive, each thread received its
//! queue's share, and ping works both ways. Each thread forwards from its own cache and view
//! of the learning table, without locking the bridge's shared state, and the rules count
//! every packet.
//! Bad thread, queue and ring options are refused. An idle thread sleeps instead of spinning.

mod common;
use common::switched::{Setup, Switched, field, send_on_cpu};
use common::*;

#[test]
fn one_thread_on_ports_with_two_queues_says_one_is_not_served() {
    let setup = Setup {
        queues: 2,
        ..Setup::default()
    };
    let mut s = Switched::with("pn", setup, &[]);
    let (_, log) = s.stop();
    for (n, dev) in [(1, &s.c.ma), (2, &s.c.mb)] {
        let note = format!(
            "note: port {n} (xdp:{dev}): {dev} has 2 receive queues and the switch serves 1"
        );
        assert!(log.contains(&note), "{note}\n{log}");
    }
}

#[test]
fn one_poll_mode_thread_per_receive_queue() {
    let setup = Setup {
        queues: 2,
        ..Setup::default()
    };
    let mut s = Switched::with("pq", setup, &["--pmd-cpus", "0,1"]);
    let shown = s.ctl_ok(&["show"]);
    assert!(
        shown.contains("2 poll-mode threads")
            && shown.contains("pmd 0 (CPU 0)")
            && shown.contains("pmd 1 (CPU 1)"),
        "{shown}"
    );
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    assert_eq!(s.ping(&s.c.ns_b, "10.9.0.1", 3), 3);

    let file = format!("/tmp/wirespeed-pmds-{}.pcap", std::process::id());
    let cap = Capture::tcpdump_inbound(&s.c.ns_b, &s.c.b, &file);
    let b_mac = mac_of(&s.c.ns_b, &s.c.b);
    for cpu in [0, 1] {
        // One frame a burst, so each arrives in a burst of its own.
        send_on_cpu(&s.c.ns_a, &s.c.a, cpu, 1000, &b_mac, &["--batch", "1"]);
    }
    let frames = cap.stop(false).frames;
    let numbered = frames
        .iter()
        .filter(|f| wirespeed_packet::read_test_payload(f).is_some())
        .count();
    assert_eq!(numbered, 2000, "numbered frames at B");
    let cache = s.ctl_ok(&["dump-cache"]);
    // DESIGN rule 3 with `normal`: once each thread's view of the learning table knows A
    // and B, their frames lock nothing shared. A few bursts lock: misses, each address's
    // first sight by each thread, a source's write-back once a second.
    let (misses, locked) = (
        field(&cache, "emc_hits=", "misses"),
        field(&cache, "emc_hits=", "shared_bursts"),
    );
    assert!(locked <= misses + 12, "{cache}");

    let (j, _) = s.stop();
    let pmds = j["pmds"].as_array().expect("pmds in the summary");
    assert_eq!(pmds.len(), 2, "{j}");
    // Each thread's busy share: mostly idle here (a few thousand frames in seconds).
    for p in pmds {
        let busy = p["busy"].as_f64().expect("busy");
        assert!((0.0..0.5).contains(&busy), "{j}");
    }
    let on_port1: Vec<u64> = pmds
        .iter()
        .map(|p| p["rx_packets"][0].as_u64().unwrap())
        .collect();
    // Each queue carried one generator's 1000 frames (plus some ping and ARP).
    assert!(
        on_port1.iter().all(|&n| n >= 1000),
        "each thread receives its queue: {j}"
    );
    assert_eq!(
        on_port1.iter().sum::<u64>(),
        j["ports"][0]["rx_packets"].as_u64().unwrap(),
        "{j}"
    );
    assert_eq!(j["ports"][1]["drops"]["tx_ring_full"], 0, "{j}");
}

/// DESIGN rule 3: with `output` rules, each thread answers its packets from its own cache;
/// only its misses lock the bridge's shared state (rules, learning table). `dump-flows`
/// harvests both threads' caches: each rule counts exactly the packets its port received.
#[test]
fn threads_forward_from_their_own_caches() {
    let setup = Setup {
        queues: 2,
        ..Setup::default()
    };
    let mut s = Switched::with("pc", setup, &["--pmd-cpus", "0,1"]);
    s.ctl_ok(&["del-flows"]);
    s.ctl_ok(&["add-flow", "in_port=1,actions=output:2"]);
    s.ctl_ok(&["add-flow", "in_port=2,actions=output:1"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let b_mac = mac_of(&s.c.ns_b, &s.c.b);
    for cpu in [0, 1] {
        send_on_cpu(&s.c.ns_a, &s.c.a, cpu, 1000, &b_mac, &[]);
    }
    // IPv6 is off on the hosts: nothing else comes after the last numbered frame.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let cache = s.ctl_ok(&["dump-cache"]);
    let flows = s.ctl_ok(&["dump-flows"]);
    let (j, _) = s.stop();
    let rx = |port: usize| j["ports"][port]["rx_packets"].as_u64().unwrap();
    assert!(rx(0) >= 2003, "{j}");
    assert_eq!(
        field(&flows, "in_port=1 actions=output:2", "n_packets"),
        rx(0),
        "{flows}\n{j}"
    );
    assert_eq!(
        field(&flows, "in_port=2 actions=output:1", "n_packets"),
        rx(1),
        "{flows}\n{j}"
    );
    let stat = |name: &str| field(&cache, "emc_hits=", name);
    assert_eq!(
        stat("emc_hits") + stat("megaflow_hits") + stat("misses"),
        rx(0) + rx(1),
        "{cache}"
    );
    // A megaflow per port and thread (the rules look at in_port only): a handful of
    // misses, each locking at most once, against some 2,000 bursts.
    let (misses, locked) = (stat("misses"), stat("shared_bursts"));
    assert!(
        (1..=misses).contains(&locked) && misses <= 4,
        "misses and locking bursts: {cache}"
    );
    let per_thread: u64 = (0..2)
        .map(|t| field(&cache, &format!("pmd {t}: "), "misses"))
        .sum();
    assert_eq!(per_thread, misses, "{cache}");
    let pmds = j["pmds"].as_array().expect("pmds in the summary");
    assert!(
        pmds.iter()
            .all(|p| p["rx_packets"][0].as_u64().unwrap() >= 1000),
        "each thread receives its queue: {j}"
    );
}

/// CPU time (user + system) of process `pid` so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name, which is in parentheses; utime and stime are the
    // 14th and 15th fields of the line.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// With nothing to forward, the poll-mode thread stops spinning and sleeps in poll()
/// (DESIGN rule 8): over 3 s the switch uses a small share of one CPU, where a thread
/// that kept polling would use all of it. A packet still wakes it: ping works at once.
#[test]
fn an_idle_thread_sleeps_and_wakes_for_traffic() {
    let s = Switched::new("pi", &[]);
    // Let the hosts' start-up chatter (IPv6 DAD, MLD) pass.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let ticks_per_second = must(&["getconf", "CLK_TCK"]).trim().parse::<u64>().unwrap();
    let before = cpu_ticks(s.pid());
    std::thread::sleep(std::time::Duration::from_secs(3));
    let used = cpu_ticks(s.pid()) - before;
    assert!(
        used * 10 < 3 * ticks_per_second,
        "an idle switch used {used} ticks of CPU in 3 s ({ticks_per_second} a second): it spins"
    );
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
}

#[test]
fn thread_and_queue_options_are_checked() {
    let c = NetChain::new("pe");
    let p1 = format!("1=xdp:{}", c.ma);
    let p2 = format!("2=xdp:{}", c.mb);
    let queued = format!("1=xdp:{}@1", c.ma);
    let ctl = ScratchFile::new("pe.sock");
    let cases: [(&[&str], &str); 5] = [
        (
            &["--port", &p1, "--port", &p2, "--pmd-cpus", "0,1"],
            "numrxqueues 2",
        ),
        (
            &["--port", &queued, "--port", &p2, "--pmd-cpus", "0,1"],
            "leave out @QUEUE",
        ),
        (
            &["--port", &p1, "--pmd-cpus", "4096"],
            "CPU 4096 is not one this process may run on",
        ),
        (&["--port", &p1, "--pmd-cpus", "1-0"], "expected a CPU list"),
        (
            &["--port", &p1, "--ring-size", "100"],
            "--ring-size 100: must be a power of two",
        ),
    ];
    for (args, message) in cases {
        let mut argv = vec!["switch", "--ctl", &ctl, "--duration", "1"];
        argv.extend_from_slice(args);
        let (code, _, err) = spawn_in(&c.ns_m, &argv).exit();
        assert_eq!(code, Some(1), "{argv:?}: {err}");
        assert!(err.contains(message), "{argv:?}: {err}");
        assert!(!exists(&ctl), "no control socket left behind");
    }
    c.assert_no_xdp_left();
}
