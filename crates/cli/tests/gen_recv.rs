//! gen and recv together: the losses the receiver reports are exactly the sequence numbers
//! the generator left out, or a drop rule on the way took; duplicates and reordering, exactly
//! those of a replayed file.

mod common;
use common::traffic::{gen_in_a, recv_in_b};
use common::*;

#[test]
fn skipped_sequence_numbers_are_reported_lost_per_generator() {
    let net = NetPair::new("gl");
    let rx = recv_in_b(&net, &["--expect", "10010"]);
    // Generator 7 leaves out 999, 1999, ..., 9999: 10000 frames use numbers 0..10010.
    let g7 = gen_in_a(
        &net,
        &[
            "--generator-id",
            "7",
            "--count",
            "10000",
            "--skip-every",
            "1000",
            "--rate",
            "20000",
        ],
    );
    assert_eq!(g7["packets"].as_u64(), Some(10_000), "{g7}");
    assert_eq!(g7["sequence_end"].as_u64(), Some(10_010), "{g7}");
    assert_eq!(g7["skipped"].as_u64(), Some(10), "{g7}");
    // Generator 8 sends 0..10010 without a gap, in another size and protocol.
    let g8 = gen_in_a(
        &net,
        &[
            "--generator-id",
            "8",
            "--count",
            "10010",
            "--rate",
            "20000",
            "--size",
            "200",
            "--proto",
            "tcp-syn",
        ],
    );
    assert_eq!(g8["packets"].as_u64(), Some(10_010), "{g8}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (rj, _) = rx.interrupt();
    let gens = rj["generators"].as_array().unwrap();
    assert_eq!(gens.len(), 2, "{rj}");
    let (a, b) = (&gens[0], &gens[1]);
    assert_eq!(a["generator"].as_u64(), Some(7));
    assert_eq!(a["received"].as_u64(), Some(10_000), "{rj}");
    assert_eq!(a["lost"].as_u64(), Some(10), "{rj}");
    let want: Vec<serde_json::Value> = (1..=10u64)
        .map(|k| serde_json::json!([k * 1000 - 1, k * 1000 - 1]))
        .collect();
    assert_eq!(a["lost_ranges"].as_array().unwrap(), &want, "{rj}");
    assert_eq!(a["duplicated"].as_u64(), Some(0));
    assert_eq!(a["reordered"].as_u64(), Some(0));
    assert_eq!(b["generator"].as_u64(), Some(8));
    assert_eq!(b["received"].as_u64(), Some(10_010), "{rj}");
    assert_eq!(b["lost"].as_u64(), Some(0), "{rj}");
    assert_eq!(b["lost_ranges"].as_array().unwrap().len(), 0);
    assert_eq!(rj["not_test_frames"].as_u64(), Some(0), "{rj}");
    assert_eq!(rj["drops_total"].as_u64(), Some(0), "{rj}");
    net.assert_no_xdp();
}

/// A, a bridge namespace M, and B: `a` in A is joined to `ma`, `mb` to `b` in B, and M
/// bridges `ma` and `mb`. Removed when dropped.
struct Chain {
    ns: [String; 3],
    a: String,
    ma: String,
    b: String,
}

impl Chain {
    fn new(tag: &str) -> Chain {
        require_root();
        let id = format!("{tag}{}", std::process::id() % 100000);
        let ns = [
            format!("wsc{id}a"),
            format!("wsc{id}m"),
            format!("wsc{id}b"),
        ];
        let c = Chain {
            a: format!("wsc{id}a"),
            ma: format!("wsc{id}x"),
            b: format!("wsc{id}b"),
            ns,
        };
        let mb = format!("wsc{id}y");
        for n in &c.ns {
            must(&["ip", "netns", "add", n]);
            must(&[
                "ip",
                "netns",
                "exec",
                n,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
            ]);
            must(&[
                "ip",
                "netns",
                "exec",
                n,
                "sysctl",
                "-qw",
                "net.ipv6.conf.default.disable_ipv6=1",
            ]);
        }
        let [na, nm, nb] = &c.ns;
        must(&[
            "ip", "link", "add", &c.a, "netns", na, "type", "veth", "peer", "name", &c.ma, "netns",
            nm,
        ]);
        must(&[
            "ip", "link", "add", &c.b, "netns", nb, "type", "veth", "peer", "name", &mb, "netns",
            nm,
        ]);
        must(&["ip", "-n", nm, "link", "add", "br0", "type", "bridge"]);
        for dev in [&c.ma, &mb] {
            must(&["ip", "-n", nm, "link", "set", dev, "master", "br0"]);
            must(&["ip", "-n", nm, "link", "set", dev, "up"]);
        }
        must(&["ip", "-n", nm, "link", "set", "br0", "up"]);
        must(&["ip", "-n", na, "link", "set", &c.a, "up"]);
        must(&["ip", "-n", nb, "link", "set", &c.b, "up"]);
        c
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        for n in &self.ns {
            let _ = sh(&["ip", "netns", "del", n]);
        }
    }
}

#[test]
fn an_nftables_drop_rule_on_the_way_is_reported_as_exactly_those_losses() {
    let c = Chain::new("gt");
    let [na, nm, nb] = &c.ns;
    // In the bridge namespace, on the way in: drop the IPv4 packets whose ident (the low
    // 16 bits of the sequence number) is 100 to 107.
    let chain = format!(
        "{{ type filter hook ingress device \"{}\" priority 0; }}",
        c.ma
    );
    let nft = |args: &[&str]| {
        let mut all = vec!["ip", "netns", "exec", nm.as_str(), "nft"];
        all.extend_from_slice(args);
        must(&all)
    };
    nft(&["add", "table", "netdev", "gen_test"]);
    nft(&["add", "chain", "netdev", "gen_test", "drops", &chain]);
    nft(&[
        "add", "rule", "netdev", "gen_test", "drops", "ip", "id", "100-107", "counter", "drop",
    ]);
    let mut rx = spawn_in(
        nb,
        &[
            "recv",
            "--port",
            &format!("xdp:{}", c.b),
            "--duration",
            "60",
            "--expect",
            "1000",
            "--json",
            "-q",
        ],
    );
    rx.wait_ready();
    let tx = run_json(
        na,
        &[
            "gen",
            "--port",
            &format!("xdp:{}", c.a),
            "--count",
            "1000",
            "--rate",
            "20000",
            "--json",
            "-q",
        ],
    );
    assert_eq!(tx["packets"].as_u64(), Some(1000), "{tx}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (rj, _) = rx.interrupt();
    let g = &rj["generators"][0];
    assert_eq!(g["received"].as_u64(), Some(992), "{rj}");
    assert_eq!(g["lost"].as_u64(), Some(8), "{rj}");
    assert_eq!(g["lost_ranges"], serde_json::json!([[100, 107]]), "{rj}");
    assert_eq!(g["duplicated"].as_u64(), Some(0), "{rj}");
    let rules = must(&[
        "ip", "netns", "exec", nm, "nft", "list", "table", "netdev", "gen_test",
    ]);
    assert!(
        rules.contains("counter packets 8 "),
        "the rule did not drop 8: {rules}"
    );
}

#[test]
fn every_kind_of_frame_is_verified_by_the_receiver() {
    let net = NetPair::new("gv");
    let rx = recv_in_b(&net, &[]);
    let kinds: [&[&str]; 6] = [
        &["--proto", "icmp"],
        &["--proto", "icmp", "--ipv6"],
        &["--ipv6", "--vlan", "7"],
        &["--proto", "tcp-syn", "--ipv6", "--imix"],
        &["--size", "64-1500", "--flows", "100"],
        &["--proto", "tcp-syn", "--vlan", "9"],
    ];
    for (i, kind) in kinds.iter().enumerate() {
        let id = (i + 2).to_string();
        let mut args = vec!["--count", "1000", "--rate", "20000", "--generator-id", &id];
        args.extend_from_slice(kind);
        let tx = gen_in_a(&net, &args);
        assert_eq!(tx["packets"].as_u64(), Some(1000), "{kind:?}: {tx}");
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (rj, _) = rx.interrupt();
    assert_eq!(rj["not_test_frames"].as_u64(), Some(0), "{rj}");
    assert_eq!(rj["drops_total"].as_u64(), Some(0), "{rj}");
    let gens = rj["generators"].as_array().unwrap();
    assert_eq!(gens.len(), kinds.len(), "{rj}");
    for (i, g) in gens.iter().enumerate() {
        assert_eq!(g["generator"].as_u64(), Some(i as u64 + 2), "{rj}");
        for (field, want) in [
            ("received", 1000),
            ("unique", 1000),
            ("lost", 0),
            ("corrupt", 0),
        ] {
            assert_eq!(g[field].as_u64(), Some(want), "{:?} {field}: {g}", kinds[i]);
        }
    }
    net.assert_no_xdp();
}

/// Frames replayed in another order: the receiver names exactly the duplicate, the two
/// reordered frames and the lost one.
#[test]
fn duplicated_reordered_and_lost_frames_are_reported_exactly() {
    use common::pcaps::{TempDir, read_records, write_capture};
    let dir = TempDir::new("gdup");
    let made = dir.path("made.pcap");
    let to_file = format!("pcap:{made}");
    let g = run_json_here(&[
        "gen",
        "--port",
        &to_file,
        "--count",
        "100",
        "--generator-id",
        "5",
        "--json",
        "-q",
    ]);
    assert_eq!(g["packets"].as_u64(), Some(100), "{g}");
    let records = read_records(&made);
    let seq = |i: usize| records[i].clone();
    // 10 twice; 21 before 20; 30 never; 40 after 45.
    let mut order = Vec::new();
    for i in 0..100 {
        match i {
            10 => order.extend([seq(10), seq(10)]),
            20 => order.extend([seq(21), seq(20)]),
            21 | 30 | 40 => {}
            45 => order.extend([seq(45), seq(40)]),
            _ => order.push(seq(i)),
        }
    }
    let replayed = dir.path("replayed.pcap");
    write_capture(&replayed, wirespeed_capture::write::Format::Pcap, &order);
    let net = NetPair::new("gd");
    let rx = recv_in_b(&net, &["--expect", "100"]);
    let port = format!("xdp:{}", net.a);
    let tx = run_json(
        &net.ns_a,
        &[
            "gen", "--port", &port, "--pcap", &replayed, "--fast", "--rate", "20000", "--json",
            "-q",
        ],
    );
    assert_eq!(tx["packets"].as_u64(), Some(order.len() as u64), "{tx}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (rj, _) = rx.interrupt();
    let gens = rj["generators"].as_array().unwrap();
    assert_eq!(gens.len(), 1, "{rj}");
    let g5 = &gens[0];
    assert_eq!(g5["generator"].as_u64(), Some(5), "{rj}");
    assert_eq!(g5["received"].as_u64(), Some(100), "{rj}");
    assert_eq!(g5["unique"].as_u64(), Some(99), "{rj}");
    assert_eq!(g5["duplicated"].as_u64(), Some(1), "{rj}");
    assert_eq!(g5["reordered"].as_u64(), Some(2), "{rj}");
    assert_eq!(g5["lost"].as_u64(), Some(1), "{rj}");
    assert_eq!(
        g5["lost_ranges"].as_array().unwrap(),
        &vec![serde_json::json!([30, 30])],
        "{rj}"
    );
    net.assert_no_xdp();
}

/// recv's defaults are deep rings (16384 entries) and twice as many frames, so that a
/// receiver whose CPU is taken for a while loses nothing at modest rates (`recv --help`).
#[test]
fn recv_at_its_defaults_circulates_32768_frames() {
    let net = NetPair::new("gd");
    let port = format!("xdp:{}", net.b);
    let mut rx = spawn_in(
        &net.ns_b,
        &["recv", "--port", &port, "--duration", "60", "--json", "-q"],
    );
    rx.wait_ready();
    let g = gen_in_a(&net, &["--count", "20000", "--rate", "50000"]);
    assert_eq!(g["packets"].as_u64(), Some(20_000), "{g}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (rj, _) = rx.interrupt();
    assert_eq!(rj["frames"]["total"].as_u64(), Some(32_768), "{rj}");
    assert_eq!(rj["frames"]["balanced"].as_bool(), Some(true), "{rj}");
    assert_eq!(
        rj["generators"][0]["received"].as_u64(),
        Some(20_000),
        "{rj}"
    );
    assert_eq!(rj["drops_total"].as_u64(), Some(0), "{rj}");
    net.assert_no_xdp();
}

/// What the kernel delivered before the stop is received: a receiver held still (SIGSTOP)
/// while frames arrive, then stopped with SIGINT the moment it runs again, still takes every
/// frame waiting in its RX ring. Else a receiver whose CPU was taken loses frames that no
/// counter names, and its losses no longer equal the drops on the way.
#[test]
fn a_receiver_stopped_by_a_signal_takes_what_was_delivered() {
    let net = NetPair::new("gi");
    let rx = recv_in_b(&net, &["--expect", "3000"]);
    let pid = rx.pid().to_string();
    must(&["kill", "-STOP", &pid]);
    let g = gen_in_a(&net, &["--count", "3000", "--rate", "100000"]);
    assert_eq!(g["packets"].as_u64(), Some(3000), "{g}");
    // The SIGINT waits while the process is stopped, and is handled first when it goes on.
    must(&["kill", "-INT", &pid]);
    must(&["kill", "-CONT", &pid]);
    let (rj, log) = rx.finish();
    let g0 = &rj["generators"][0];
    assert_eq!(g0["received"].as_u64(), Some(3000), "{rj}\n{log}");
    assert_eq!(g0["lost"].as_u64(), Some(0), "{rj}");
    assert_eq!(rj["packets"].as_u64(), Some(3000), "{rj}");
    assert_eq!(rj["drops_total"].as_u64(), Some(0), "{rj}");
    net.assert_no_xdp();
}

/// With --expect, a run where nothing arrived is not clean: gen's default generator is
/// reported with every number lost, and a note says why. Without it nothing can be said.
#[test]
fn nothing_arriving_with_expect_is_every_packet_lost() {
    let net = NetPair::new("gx");
    let rx = recv_in_b(&net, &["--expect", "1000"]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let (rj, _) = rx.interrupt();
    let gens = rj["generators"].as_array().unwrap();
    assert_eq!(gens.len(), 1, "{rj}");
    assert_eq!(gens[0]["generator"].as_u64(), Some(1), "{rj}");
    assert_eq!(gens[0]["received"].as_u64(), Some(0), "{rj}");
    assert_eq!(gens[0]["lost"].as_u64(), Some(1000), "{rj}");
    assert_eq!(
        gens[0]["lost_ranges"],
        serde_json::json!([[0, 999]]),
        "{rj}"
    );
    let notes = rj["notes"].to_string();
    assert!(notes.contains("no generator's packet arrived"), "{rj}");
    // A script asks for the verdict in the exit status.
    let port = format!("xdp:{}", net.b);
    let fails_saying = |extra: &[&str], why: &str| {
        let mut args = vec!["recv", "--port", &port, "--duration", "0.2", "-q"];
        args.extend_from_slice(extra);
        let out = run_in(&net.ns_b, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    };
    fails_saying(
        &["--expect", "5", "--fail-on-loss"],
        "--fail-on-loss: generator 1 lost 5, duplicated 0, late 0, corrupt 0",
    );
    let rx = recv_in_b(&net, &[]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let (rj, _) = rx.interrupt();
    assert_eq!(rj["generators"], serde_json::json!([]), "{rj}");
    // ...but nothing at all is not a pass for --fail-on-loss.
    fails_saying(
        &["--fail-on-loss"],
        "--fail-on-loss: no generator's packet arrived",
    );
}

/// --spin keeps the receiver on its CPU between packets, where by default an idle receiver
/// sleeps in poll(): its busy share says which.
#[test]
fn recv_spin_never_sleeps() {
    let net = NetPair::new("gs");
    let busy = |extra: &[&str]| {
        let port = format!("xdp:{}", net.b);
        let mut args = vec!["recv", "--port", &port, "--duration", "1", "--json", "-q"];
        args.extend_from_slice(extra);
        let j = run_json(&net.ns_b, &args);
        j["cpu"]["busy"]
            .as_f64()
            .unwrap_or_else(|| panic!("no busy share: {j}"))
    };
    // Generous bounds: the tests beside this one share the machine's two CPUs (a spinning
    // switch among them), so the spinner may get much less than all of one.
    let (idle, spinning) = (busy(&[]), busy(&["--spin"]));
    assert!(idle < 0.1, "idle recv is busy {idle}");
    assert!(spinning > 0.2, "recv --spin is busy only {spinning}");
}

/// Frames sent without stamps (gen --no-stamp) carry no numbers: --expect does not count
/// them all lost, a note says why nothing can be told, and --fail-on-loss fails saying so
/// (it reported 1000 of 1000 lost and failed on that).
#[test]
fn unstamped_frames_are_not_counted_lost_and_fail_on_loss_says_why() {
    let net = NetPair::new("gu");
    let send = || {
        let tx = gen_in_a(
            &net,
            &["--engine", "kernel", "--no-stamp", "--count", "1000"],
        );
        assert_eq!(tx["packets"].as_u64(), Some(1000), "{tx}");
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    let rx = recv_in_b(&net, &["--expect", "1000"]);
    send();
    let (rj, _) = rx.interrupt();
    let g = &rj["generators"][0];
    assert_eq!(g["received"].as_u64(), Some(1000), "{rj}");
    assert_eq!(g["untracked"].as_u64(), Some(1000), "{rj}");
    assert_eq!(g["lost"].as_u64(), Some(0), "{rj}");
    assert!(
        rj["notes"]
            .to_string()
            .contains("its 1000 frames carry no sequence numbers or send times (gen --no-stamp)"),
        "{rj}"
    );
    let rx = recv_in_b(&net, &["--expect", "1000", "--fail-on-loss"]);
    send();
    must(&["kill", "-INT", &rx.pid().to_string()]);
    let (code, _, err) = rx.exit();
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--fail-on-loss: generator 1's frames carry no sequence numbers"),
        "{err}"
    );
}

/// gen --cpus sends a series a CPU, each under its own id; its summary gives what recv
/// --expect takes for them (ID=N each), and a generator named there that sent nothing is
/// all lost. (--expect N held for each generator, so 20,000 over two CPUs showed 10,000 of
/// each lost.)
#[test]
fn expect_names_each_series_of_a_gen_on_two_cpus() {
    let net = NetPair::with_queues("ge", 2);
    let port = format!("xdp:{}@all", net.b);
    let rx = common::traffic::recv_on_port_in_b(
        &net,
        &port,
        &["--cpus", "0,1", "--expect", "1=10000,2=10000,3=5"],
    );
    let tx = gen_in_a(
        &net,
        &[
            "--engine", "kernel", "--cpus", "0,1", "--count", "20000", "--rate", "40000",
        ],
    );
    assert_eq!(tx["recv_expect"], "1=10000,2=10000", "{tx}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (rj, _) = rx.interrupt();
    let gens = rj["generators"].as_array().unwrap();
    let summary: Vec<(u64, u64, u64)> = gens
        .iter()
        .map(|g| {
            let n = |k: &str| g[k].as_u64().unwrap();
            (n("generator"), n("received"), n("lost"))
        })
        .collect();
    let dropped = net.veth_drops();
    assert_eq!(
        summary,
        [
            (1, 10_000 - summary[0].2, summary[0].2),
            (2, 10_000 - summary[1].2, summary[1].2),
            (3, 0, 5)
        ],
        "{rj}"
    );
    assert_eq!(
        summary[0].2 + summary[1].2,
        dropped,
        "lost is what was dropped: {rj}"
    );
    assert!(
        rj["notes"]
            .to_string()
            .contains("generator 3: none of its 5 expected packets arrived"),
        "{rj}"
    );
}

/// recv tracks the first 16 generators it sees; frames of more are said in the text
/// summary (they were in the JSON only) and fail --fail-on-loss, which cannot vouch for
/// them.
#[test]
fn frames_of_more_generators_than_tracked_are_said_and_fail_on_loss_fails() {
    let dir = common::pcaps::TempDir::new("g17");
    let mut files = Vec::new();
    for id in 1..=17 {
        let file = dir.path(&format!("g{id}.pcap"));
        let port = format!("pcap:{file}");
        let id = id.to_string();
        let g = run_json_here(&[
            "gen",
            "--port",
            &port,
            "--count",
            "2",
            "--generator-id",
            &id,
            "--json",
            "-q",
        ]);
        assert_eq!(g["packets"].as_u64(), Some(2), "{g}");
        files.push(file);
    }
    let all = dir.path("all.pcap");
    let mut merge = vec!["mergecap", "-F", "pcap", "-w", &all];
    merge.extend(files.iter().map(String::as_str));
    must(&merge);
    let port = format!("pcap:{all}");
    let run = |extra: &[&str]| {
        let mut args = vec!["recv", "--port", &port, "-q"];
        args.extend_from_slice(extra);
        std::process::Command::new(wirespeed())
            .args(&args)
            .output()
            .unwrap()
    };
    let out = run(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("2 frames of generators beyond the first 16 seen: not tracked"),
        "{text}"
    );
    // No numbers expected of a generator is a mistake, not a check.
    for zero in ["0", "1=5,2=0"] {
        let out = run(&["--expect", zero]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{zero}: {err}");
        assert!(
            err.contains("--expect: a generator's sequence numbers are 0 to N-1"),
            "{err}"
        );
    }
    let out = run(&["--fail-on-loss"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--fail-on-loss: 2 frames came from generators beyond the first 16 seen"),
        "{err}"
    );
}
