//! Bad input gets a message naming the problem, a non-zero exit, and leaves nothing behind.

mod common;
use common::*;

/// Runs wirespeed in `ns`, expects failure with `needle` in its message.
fn fails_with(ns: &str, args: &[&str], needle: &str) {
    let out = run_in(ns, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded; stderr: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected '{needle}' in: {err}"
    );
    assert!(
        out.stdout.is_empty(),
        "{args:?} printed to stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn bad_ports_and_options_are_refused() {
    let net = NetPair::new("be");
    let ns = &net.ns_b;
    let port = format!("xdp:{}", net.b);
    fails_with(
        ns,
        &["bench", "rxdrop", "--port", "xdp:nosuch0"],
        "nosuch0: no such interface",
    );
    fails_with(
        ns,
        &["bench", "rxdrop", "--port", "packet:nosuch0"],
        "nosuch0: no such interface",
    );
    fails_with(
        ns,
        &["bench", "rxdrop", "--port", &format!("{port}@3")],
        &format!("{}: interface has no queue 3 (it has 1)", net.b),
    );
    fails_with(
        ns,
        &["bench", "rxdrop", "--port", &net.b],
        "expected BACKEND:IFACE[@QUEUE]",
    );
    fails_with(
        ns,
        &["bench", "rxdrop", "--port", "dpdk:x"],
        "unknown backend 'dpdk'",
    );
    fails_with(
        ns,
        &["bench", "rxdrop", "--port", "xdp:veth0@q"],
        "queue 'q' is not a number",
    );
    fails_with(
        ns,
        &["bench", "rxdrop", "--port", "xdp:veth0@3-1"],
        "queue '3-1' is not a number, a range FIRST-LAST or 'all'",
    );
    // --cpus: a thread per queue, so a port of several queues and no more threads than them.
    fails_with(
        ns,
        &["bench", "rxdrop", "--port", &port, "--cpus", "0"],
        "one thread per queue needs a port on several queues",
    );
    fails_with(
        ns,
        &[
            "bench",
            "rxdrop",
            "--port",
            &format!("{port}@0-2"),
            "--cpus",
            "0",
        ],
        &format!("{}: interface has no queue 1 (it has 1)", net.b),
    );
    fails_with(
        ns,
        &[
            "bench",
            "rxdrop",
            "--port",
            &format!("{port}@all"),
            "--cpus",
            "0,1",
        ],
        "2 threads for 1 receive queue: give at most one thread a queue",
    );
    fails_with(
        ns,
        &[
            "bench",
            "rxdrop",
            "--port",
            &format!("{port}@all"),
            "--cpus",
            "0",
            "--count",
            "5",
        ],
        "--count goes with one thread: with --cpus, give --duration",
    );
    fails_with(
        ns,
        &[
            "bench",
            "rxdrop",
            "--port",
            &port,
            "--frame-size",
            "2048",
            "--headroom",
            "1800",
        ],
        "--headroom 1800: leaves no room for a packet in a 2048-byte frame",
    );
    fails_with(
        ns,
        &[
            "bench",
            "rxdrop",
            "--port",
            &port,
            "--headroom",
            "4294967295",
        ],
        "--headroom 4294967295: leaves no room for a packet in a 4096-byte frame",
    );
    fails_with(
        ns,
        &["bench", "rxdrop", "--port", &port, "--frame-size", "3000"],
        "frame size must be 2048 or 4096",
    );
    fails_with(
        ns,
        &["bench", "rxdrop", "--port", &port, "--batch", "0"],
        "--batch 0: must be between 1 and the ring size (1024)",
    );
    fails_with(
        ns,
        &["bench", "rxdrop", "--port", &port, "--batch", "4096"],
        "--batch 4096: must be between 1 and the ring size (1024)",
    );
    fails_with(
        ns,
        &["bench", "txpush", "--port", &port, "--size", "20"],
        "--size 20",
    );
    fails_with(
        ns,
        &["bench", "rxdrop", "--port", &port, "--xdp-mode", "fast"],
        "unknown XDP mode 'fast'",
    );
    fails_with(
        ns,
        &["bench", "xdpdrop", "--port", &format!("packet:{}", net.b)],
        "use an xdp: port",
    );
    fails_with(
        ns,
        &["bench", "txpush", "--port", &port, "--cpus", "0"],
        "--cpus 0 is for --engine kernel",
    );
    fails_with(
        ns,
        &[
            "bench", "txpush", "--port", &port, "--engine", "kernel", "--cpus", "0-x",
        ],
        "--cpus 0-x: expected a CPU list",
    );
    // One interface cannot be both ends of a two-port l2fwd, whatever the queues or backends.
    for peer in [
        port.clone(),
        format!("{port}@1"),
        format!("packet:{}", net.b),
    ] {
        fails_with(
            ns,
            &["bench", "l2fwd", "--port", &port, "--peer-port", &peer],
            &format!("--peer-port {peer}: {} is --port's interface too", net.b),
        );
    }
    // xdpdrop counts every queue in the kernel: a queue or CPUs named would mislead.
    fails_with(
        ns,
        &["bench", "xdpdrop", "--port", &format!("{port}@0")],
        "xdpdrop drops and counts on every queue of the interface: leave out @QUEUE",
    );
    fails_with(
        ns,
        &["bench", "xdpdrop", "--port", &port, "--cpus", "0"],
        "--cpus 0: xdpdrop runs in the kernel",
    );
    fails_with(
        ns,
        &["bench", "txpush", "--port", &port, "--verify"],
        "--verify checks what rxdrop receives: it goes with rxdrop",
    );
    net.assert_no_xdp();
}

/// rxdrop --verify with the sender's flags, as its help says (neither names a source MAC:
/// each side's default is its own interface's): every frame verifies. Told a source MAC
/// the sender did not use, every frame is corrupt, and the exit status says so.
#[test]
fn verify_takes_the_senders_own_mac_and_fails_on_corrupt_frames() {
    let net = NetPair::new("bv");
    let (rx_port, tx_port) = (format!("xdp:{}", net.b), format!("xdp:{}", net.a));
    let receive = |extra: &[&str]| {
        let mut args = vec![
            "bench",
            "rxdrop",
            "--port",
            &rx_port,
            "--duration",
            "60",
            "--verify",
            "--expect",
            "1000",
            "--size",
            "128",
            "--json",
            "-q",
        ];
        args.extend_from_slice(extra);
        let mut rx = spawn_in(&net.ns_b, &args);
        rx.wait_ready();
        let tx = run_json(
            &net.ns_a,
            &[
                "bench", "txpush", "--port", &tx_port, "--count", "1000", "--size", "128",
                "--json", "-q",
            ],
        );
        assert_eq!(tx["tx_packets"].as_u64(), Some(1000), "{tx}");
        std::thread::sleep(std::time::Duration::from_millis(300));
        must(&["kill", "-INT", &rx.pid().to_string()]);
        rx.exit()
    };
    let (code, out, err) = receive(&[]);
    assert_eq!(code, Some(0), "{err}");
    let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(j["verify"]["corrupt"], 0, "{j}");
    // Every frame received verified (drops on the way, the sender running flat out, are
    // the rxdrop tests' to account for).
    let unique = j["verify"]["unique"].as_u64().unwrap();
    assert!(unique > 0 && unique <= 1000, "{j}");
    assert_eq!(j["verify"]["received"].as_u64(), Some(unique), "{j}");
    assert_eq!(j["verify"]["duplicates"], 0, "{j}");
    let (code, out, err) = receive(&["--src-mac", "02:00:00:00:00:99"]);
    assert_eq!(code, Some(1), "{err}");
    let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let corrupt = j["verify"]["corrupt"].as_u64().unwrap();
    assert!(
        corrupt > 0 && corrupt == j["verify"]["received"].as_u64().unwrap(),
        "{j}"
    );
    assert!(
        err.contains(&format!(
            "--verify: {corrupt} of {corrupt} packets received were corrupt"
        )),
        "{err}"
    );
    net.assert_no_xdp();
}

#[test]
fn not_root_names_the_missing_capabilities() {
    let net = NetPair::new("bn");
    let out = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &net.ns_b,
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(wirespeed())
        .args(["bench", "rxdrop", "--port", &format!("xdp:{}", net.b)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("needs CAP_NET_RAW, CAP_NET_ADMIN, CAP_BPF"),
        "{err}"
    );
    assert!(err.contains("run it as root"), "{err}");
    net.assert_no_xdp();
}

#[test]
fn foreign_xdp_program_is_not_clobbered_unless_forced() {
    let net = NetPair::new("bf");
    let obj = foreign_object();
    must(&[
        "ip",
        "-n",
        &net.ns_b,
        "link",
        "set",
        "dev",
        &net.b,
        "xdpgeneric",
        "obj",
        &obj,
        "sec",
        FOREIGN_SECTION,
    ]);
    let _ = std::fs::remove_file(&obj);
    let port = format!("xdp:{}", net.b);
    fails_with(
        &net.ns_b,
        &["bench", "rxdrop", "--port", &port, "--duration", "1"],
        "another XDP program is attached",
    );
    fails_with(
        &net.ns_b,
        &["bench", "xdpdrop", "--port", &port, "--duration", "1"],
        "pass --force",
    );
    // Still there, untouched.
    let shown = must(&["ip", "-n", &net.ns_b, "-d", "link", "show", "dev", &net.b]);
    assert!(shown.contains("name xdp_drop"), "{shown}");
    // Forced: replaced, used, and detached at exit.
    let j = run_json(
        &net.ns_b,
        &[
            "bench",
            "rxdrop",
            "--port",
            &port,
            "--duration",
            "0.5",
            "--force",
            "--json",
            "-q",
        ],
    );
    assert_eq!(j["backend"], "xdp");
    net.assert_no_xdp();
}

#[test]
fn program_held_by_another_process_cannot_be_forced_out() {
    let net = NetPair::new("bl");
    let port = format!("xdp:{}", net.b);
    let mut sink = spawn_in(
        &net.ns_b,
        &[
            "bench",
            "xdpdrop",
            "--port",
            &port,
            "--duration",
            "30",
            "--json",
            "-q",
        ],
    );
    sink.wait_ready();
    // Named, and no --force offered: nothing can take a program from its link.
    let held = format!(
        "{}: process {} (wirespeed) holds an XDP program there",
        net.b,
        sink.pid()
    );
    fails_with(
        &net.ns_b,
        &["bench", "rxdrop", "--port", &port, "--duration", "1"],
        &held,
    );
    fails_with(
        &net.ns_b,
        &[
            "bench",
            "rxdrop",
            "--port",
            &port,
            "--duration",
            "1",
            "--force",
        ],
        &held,
    );
    let (j, _) = sink.interrupt();
    assert_eq!(j["mode"], "xdpdrop");
    // The other process's exit detached its program; nothing of ours was left either.
    net.assert_no_xdp();
}

#[test]
fn sigterm_detaches_and_reports() {
    let net = NetPair::new("bs");
    let mut rx = spawn_in(
        &net.ns_b,
        &[
            "bench",
            "rxdrop",
            "--port",
            &format!("xdp:{}", net.b),
            "--duration",
            "30",
            "--json",
            "-q",
        ],
    );
    rx.wait_ready();
    let shown = must(&["ip", "-n", &net.ns_b, "-d", "link", "show", "dev", &net.b]);
    assert!(
        shown.contains("name xsk_redirect"),
        "our program should be attached while running: {shown}"
    );
    let (j, _) = rx.terminate();
    assert_eq!(j["mode"], "rxdrop");
    net.assert_no_xdp();
}
