//! Several processes on one interface, one queue each (issue 32, part 4): the second joins the
//! redirect program the first attached instead of being refused, each receives only its own
//! queue's packets, whichever leaves first the other keeps receiving, and the last one out
//! takes the program away. A queue already taken is refused with the name of the process
//! holding it. Every process runs under `ip netns exec`, which hides the host's bpffs: none
//! of this may need it.

mod common;
use common::traffic::send_on_queue;
use common::*;

use std::time::Duration;

/// `bench rxdrop` on `port` in B's namespace, running until interrupted; ready.
fn rxdrop(net: &NetPair, port: &str, extra: &[&str]) -> Running {
    let mut argv = vec![
        "bench",
        "rxdrop",
        "--port",
        port,
        "--duration",
        "60",
        "--json",
        "-q",
    ];
    argv.extend_from_slice(extra);
    let mut rx = spawn_in(&net.ns_b, &argv);
    rx.wait_ready();
    rx
}

/// Whether B's end has an XDP program attached now.
fn xdp_attached(net: &NetPair) -> bool {
    must(&["ip", "-n", &net.ns_b, "-d", "link", "show", "dev", &net.b]).contains("prog/xdp")
}

fn packets(j: &serde_json::Value) -> u64 {
    j["packets"]
        .as_u64()
        .unwrap_or_else(|| panic!("no packets: {j}"))
}

fn settle() {
    std::thread::sleep(Duration::from_millis(800));
}

#[test]
fn two_processes_share_an_interface_by_queue_and_the_last_one_out_detaches() {
    // Both orders of leaving: the process that attached the program first, then the one
    // that joined it first.
    for owner_leaves_first in [true, false] {
        let net = NetPair::with_queues("sq", 2);
        let owner = rxdrop(&net, &format!("xdp:{}@0", net.b), &[]);
        let joiner = rxdrop(&net, &format!("xdp:{}@1", net.b), &[]);
        // Queue 0 carries 300 frames, queue 1 700: each process counts its own only.
        send_on_queue(&net, 0, 300);
        send_on_queue(&net, 1, 700);
        settle();
        let (first, second, first_q, second_q) = match owner_leaves_first {
            true => (owner, joiner, 0, 1),
            false => (joiner, owner, 1, 0),
        };
        let (j1, log1) = first.interrupt();
        let want1 = if first_q == 0 { 300 } else { 700 };
        assert_eq!(packets(&j1), want1, "queue {first_q}: {j1}\n{log1}");
        assert_frames_balanced(&j1);
        // The other one's program is still there, and its queue still reaches it; the
        // queue of the process that left goes to the stack again.
        assert!(
            xdp_attached(&net),
            "the program left with the first process"
        );
        send_on_queue(&net, second_q, 200);
        send_on_queue(&net, first_q, 50);
        settle();
        let (j2, log2) = second.interrupt();
        let want2 = if second_q == 0 { 300 + 200 } else { 700 + 200 };
        assert_eq!(packets(&j2), want2, "queue {second_q}: {j2}\n{log2}");
        assert_frames_balanced(&j2);
        // The last one out took the program with it.
        net.assert_no_xdp();
    }
}

#[test]
fn the_program_outlives_a_killed_owner_and_goes_with_the_last_process() {
    let net = NetPair::with_queues("sk", 2);
    let owner = rxdrop(&net, &format!("xdp:{}@0", net.b), &[]);
    let joiner = rxdrop(&net, &format!("xdp:{}@1", net.b), &[]);
    // SIGKILL: no exit path of ours runs; the kernel closes the owner's descriptors.
    must(&["kill", "-KILL", &owner.pid().to_string()]);
    let _ = owner.exit();
    assert!(xdp_attached(&net), "the program went with the killed owner");
    send_on_queue(&net, 1, 333);
    settle();
    let (j, log) = joiner.interrupt();
    assert_eq!(packets(&j), 333, "{j}\n{log}");
    net.assert_no_xdp();
}

#[test]
fn the_joining_process_says_whose_program_it_shares() {
    let net = NetPair::with_queues("sn", 2);
    let owner = rxdrop(&net, &format!("xdp:{}@0", net.b), &[]);
    let joiner = rxdrop(&net, &format!("xdp:{}@1", net.b), &[]);
    let (j, log) = joiner.interrupt();
    let notes = j["notes"].to_string();
    let want = format!("process {} (wirespeed)", owner.pid());
    assert!(
        notes.contains("shares the XDP program") && notes.contains(&want),
        "{j}\n{log}"
    );
    // Joined in the program's mode: native XDP, copy-mode bind on a veth.
    assert_eq!(j["xdp_mode"], "copy", "{j}");
    let (j, _) = owner.interrupt();
    assert!(
        !j["notes"].to_string().contains("shares the XDP program"),
        "{j}"
    );
    net.assert_no_xdp();
}

#[test]
fn a_queue_already_taken_is_refused_with_the_process_holding_it() {
    let net = NetPair::with_queues("st", 2);
    let q0 = rxdrop(&net, &format!("xdp:{}@0", net.b), &[]);
    let q1 = rxdrop(&net, &format!("xdp:{}@1", net.b), &[]);
    for (queue, holder) in [(1, q1.pid()), (0, q0.pid())] {
        let port = format!("xdp:{}@{queue}", net.b);
        let out = run_in(
            &net.ns_b,
            &["bench", "rxdrop", "--port", &port, "--duration", "1"],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "a second socket on queue {queue}: {err}"
        );
        let want = format!(
            "{} queue {queue}: process {holder} (wirespeed) has an AF_XDP socket there",
            net.b
        );
        assert!(err.contains(&want), "expected '{want}' in: {err}");
    }
    // The refused ones disturbed neither holder: each still gets its queue's packets.
    send_on_queue(&net, 0, 100);
    send_on_queue(&net, 1, 250);
    settle();
    let (j1, _) = q1.interrupt();
    assert_eq!(packets(&j1), 250, "{j1}");
    assert!(xdp_attached(&net));
    let (j0, _) = q0.interrupt();
    assert_eq!(packets(&j0), 100, "{j0}");
    net.assert_no_xdp();
}

#[test]
fn a_queue_a_sender_holds_is_refused_and_nothing_is_left_attached() {
    let net = NetPair::with_queues("sg", 2);
    // A generator sends from queue 1: its socket holds the queue, with no program attached.
    let q1 = format!("xdp:{}@1", net.b);
    let mut sender = spawn_in(
        &net.ns_b,
        &[
            "gen", "--port", &q1, "--rate", "100", "--count", "1000000", "--json", "-q",
        ],
    );
    sender.wait_ready();
    assert!(!xdp_attached(&net));
    let out = run_in(
        &net.ns_b,
        &["bench", "rxdrop", "--port", &q1, "--duration", "1"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let want = format!(
        "{} queue 1: process {} (wirespeed) has an AF_XDP socket there",
        net.b,
        sender.pid()
    );
    assert!(err.contains(&want), "expected '{want}' in: {err}");
    // The program the refused process attached for its socket went with it.
    assert!(!xdp_attached(&net));
    let (j, _) = sender.interrupt();
    assert!(j["packets"].as_u64().unwrap() > 0, "{j}");
    net.assert_no_xdp();
}

#[test]
fn a_joiner_takes_the_program_s_mode_or_says_why_not() {
    let net = NetPair::with_queues("sm", 2);
    // The program in skb mode, serving queue 1. (A veth's generic XDP sees every packet on
    // queue 0: veth records no receive queue on the skb it passes up without NAPI. So the
    // joiner takes queue 0 here, and gets everything.)
    let owner = rxdrop(&net, &format!("xdp:{}@1", net.b), &["--xdp-mode", "skb"]);
    let q0 = format!("xdp:{}@0", net.b);
    // Asked for native XDP where the program runs in skb mode: refused, saying so.
    let out = run_in(
        &net.ns_b,
        &[
            "bench",
            "rxdrop",
            "--port",
            &q0,
            "--xdp-mode",
            "native",
            "--duration",
            "1",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let want = format!(
        "xdp:{b}: {b}'s queues share the XDP program process {} (wirespeed) holds, which \
         runs in skb mode, and --xdp-mode native asks for native XDP: use --xdp-mode auto \
         (or skb) to share it",
        owner.pid(),
        b = net.b
    );
    assert!(err.contains(&want), "expected '{want}' in: {err}");
    // auto (the default) joins in skb mode.
    let joiner = rxdrop(&net, &q0, &[]);
    send_on_queue(&net, 0, 50);
    send_on_queue(&net, 1, 70);
    settle();
    let (j, log) = joiner.interrupt();
    assert_eq!(j["xdp_mode"], "skb", "{j}");
    assert_eq!(packets(&j), 120, "{j}\n{log}");
    let (j, _) = owner.interrupt();
    assert_eq!(packets(&j), 0, "{j}");
    net.assert_no_xdp();
}

#[test]
fn a_spill_ring_needs_the_interface_to_itself_and_capture_goes_without() {
    let net = NetPair::with_queues("ss", 2);
    // A capture with a spill ring next to a shared redirect program: refused, with why.
    let owner = rxdrop(&net, &format!("xdp:{}@0", net.b), &[]);
    let file = ScratchFile::new("spill.pcap");
    let q1 = format!("xdp:{}@1", net.b);
    let out = run_in(
        &net.ns_b,
        &["capture", "--port", &q1, "--spill-mib", "4", "-w", &file],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("a spill ring needs the XDP program to itself")
            && err.contains(&format!("process {} (wirespeed)", owner.pid())),
        "{err}"
    );
    // Without --spill-mib it goes without one, says so, and captures its queue side by
    // side with the other process.
    let mut cap = spawn_in(
        &net.ns_b,
        &["capture", "--port", &q1, "-w", &file, "--json"],
    );
    cap.wait_ready();
    let said = cap.log.join("\n");
    assert!(
        said.contains(&format!(
            "note: {q1} shares {}'s XDP program with process {} (wirespeed): no spill ring",
            net.b,
            owner.pid()
        )),
        "{said}"
    );
    send_on_queue(&net, 1, 40);
    send_on_queue(&net, 0, 60);
    settle();
    let (j, log) = cap.interrupt();
    assert_eq!(j["written"].as_u64(), Some(40), "{j}\n{log}");
    assert_eq!(read_pcap(&file).len(), 40);
    let (j, _) = owner.interrupt();
    assert_eq!(packets(&j), 60, "{j}");
    net.assert_no_xdp();
}

#[test]
fn a_spill_program_and_foreign_programs_are_still_not_joined() {
    let net = NetPair::with_queues("sf", 2);
    // The capture's spill program (xsk_spill) serves its own queues only: not shared.
    let file = ScratchFile::new("spilling.pcap");
    let mut cap = spawn_in(
        &net.ns_b,
        &[
            "capture",
            "--port",
            &format!("xdp:{}@0", net.b),
            "-w",
            &file,
            "--json",
        ],
    );
    cap.wait_ready();
    let out = run_in(
        &net.ns_b,
        &[
            "bench",
            "rxdrop",
            "--port",
            &format!("xdp:{}@1", net.b),
            "--duration",
            "1",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let held = format!(
        "{}: process {} (wirespeed) holds the interface with a capture's spill-ring program",
        net.b,
        cap.pid()
    );
    assert!(err.contains(&held), "expected '{held}' in: {err}");
    assert!(err.contains("each runs with --spill-mib 0"), "{err}");
    let _ = cap.interrupt();
    net.assert_no_xdp();
}
