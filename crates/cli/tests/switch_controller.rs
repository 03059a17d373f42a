//! `actions=controller` with `--controller-pcap FILE`: the packets the rule sends to the
//! controller land in a pcap file that tcpdump, tshark and capinfos read, byte for byte as
//! sent; nothing else is written and nothing of them goes on to the far host. `-` is standard
//! output, as for the pcap ports.

mod common;
use common::pcaps::{self, MAC_A, MAC_B, TempDir, judge};
use common::switched::Switched;
use common::*;

#[test]
fn controller_packets_go_to_a_pcap_file() {
    let dir = TempDir::new("sctl");
    let file = dir.path("controller.pcap");
    let mut s = Switched::new("sc", &["--controller-pcap", &file]);
    s.ctl_ok(&["add-flow", "priority=100,udp,actions=controller"]);
    let at_b = Capture::tcpdump_inbound(&s.c.ns_b, &s.c.b, &dir.path("b.pcap"));
    let port = format!("xdp:{}", s.c.a);
    run_json(
        &s.c.ns_a,
        &[
            "bench", "txpush", "--port", &port, "--count", "100", "--size", "128", "--json", "-q",
        ],
    );
    let reached_b = at_b.stop(false).frames;
    // In the file while the switch runs (tcpdump took 1.3 s to stop), not only at its exit.
    assert_eq!(judge(&file), (100, 100 * 124), "written while running");
    let (j, log) = s.stop();
    assert_eq!(j["to_controller"], 100, "{j}");
    assert!(
        log.contains(&format!("controller: 100 packets written to {file}")),
        "{log}"
    );
    assert_eq!(
        reached_b
            .iter()
            .filter(|f| wirespeed_packet::read_test_payload(f).is_some())
            .count(),
        0,
        "controller packets must not be forwarded"
    );
    let (packets, bytes) = judge(&file);
    assert_eq!(
        (packets, bytes),
        (100, 100 * 124),
        "128-byte frames less the FCS"
    );
    let frames = read_pcap(&file);
    assert!(
        frames
            .iter()
            .all(|f| f.len() == 124 && wirespeed_packet::ipv4_udp_checksums_ok(f)),
        "frames as sent"
    );
}

/// A disk that fills up: the failure is said while the switch runs, which goes on
/// switching; at the end its summary comes, then the error and what the file holds, and the
/// exit status says it failed.
#[test]
fn a_full_disk_under_the_controller_file_is_said_at_once_and_the_switch_goes_on() {
    // In a directory of the test's own, removed with it.
    let dir = TempDir::new("controller-full");
    let disk = SmallDisk::mount(&dir.path("small"), "64k");
    let file = format!("{}/controller.pcap", disk.0);
    let mut s = Switched::new("sf", &["--controller-pcap", &file]);
    s.ctl_ok(&["add-flow", "priority=100,udp,actions=controller"]);
    let port = format!("xdp:{}", s.c.a);
    // 100 frames of 1000 bytes: about 100 KB for a 64 KiB disk.
    run_json(
        &s.c.ns_a,
        &[
            "bench", "txpush", "--port", &port, "--count", "100", "--size", "1000", "--json", "-q",
        ],
    );
    s.wait_for("packet-ins are no longer written (the switch goes on)");
    // Still switching: a rule's packets still go where it says.
    s.ctl_ok(&["add-flow", "priority=200,udp,actions=drop"]);
    let (code, stdout, log) = s.stop_as_it_ends();
    assert_eq!(code, Some(1), "{log}");
    let j: serde_json::Value = serde_json::from_str(stdout.trim()).expect("the summary");
    assert_eq!(j["to_controller"], 100, "{j}");
    let (packets, _) = judge(&file);
    let line = log
        .lines()
        .find(|l| l.contains("error: --controller-pcap"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        line.contains("No space left on device")
            && line.contains(&format!(
                "the file holds the first {packets} packets, each whole"
            )),
        "{line}"
    );
    assert!(packets > 0 && packets < 100, "{packets}");
    drop(disk);
}

#[test]
fn an_unwritable_controller_file_is_refused_before_start() {
    let c = NetChain::new("sd");
    let p1 = format!("1=xdp:{}", c.ma);
    let ctl = ScratchFile::new("sd.sock");
    let (code, _, err) = spawn_in(
        &c.ns_m,
        &[
            "switch",
            "--port",
            &p1,
            "--ctl",
            &ctl,
            "--controller-pcap",
            "/nonexistent-dir/c.pcap",
        ],
    )
    .exit();
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--controller-pcap /nonexistent-dir/c.pcap") && err.contains("No such file"),
        "{err}"
    );
    assert!(!exists(&ctl));
    c.assert_no_xdp_left();
}

/// A start that is refused touches no file: not a capture file a running switch still
/// writes, not one a bad flow file would have replaced.
#[test]
fn a_refused_start_leaves_every_file_as_it_was() {
    let dir = TempDir::new("srefuse");
    let (ctl, kept, controller) = (
        dir.path("sw.sock"),
        dir.path("kept.pcap"),
        dir.path("controller.pcap"),
    );
    let before = b"not to be touched".to_vec();
    let (first_tx, flows) = (dir.path("first.pcap"), dir.path("bad.flows"));
    std::fs::write(&flows, "priority=10,foo=1,actions=drop\n").unwrap();
    let mut running = spawn(&[
        "switch",
        "--port",
        &format!("1=pcap:tx={first_tx}"),
        "--ctl",
        &ctl,
        "--duration",
        "60",
        "--json",
    ]);
    running.wait_ready();
    let (b_sock, c_sock, port_flows) = (
        dir.path("b.sock"),
        dir.path("c.sock"),
        dir.path("port.flows"),
    );
    let cases: [(&[&str], &str); 3] = [
        // The control socket is the running switch's.
        (
            &["--ctl", &ctl],
            "another wirespeed switch is listening there",
        ),
        // A flow that does not parse.
        (
            &["--ctl", &b_sock, "--flows", &flows],
            "unknown field 'foo'",
        ),
        // A flow that names a port the bridge does not have.
        (
            &["--ctl", &c_sock, "--flows", &port_flows],
            "output:7: no such port",
        ),
    ];
    std::fs::write(&port_flows, "actions=output:7\n").unwrap();
    for (extra, want) in cases {
        std::fs::write(&kept, &before).unwrap();
        std::fs::write(&controller, &before).unwrap();
        let port = format!("1=pcap:tx={kept}");
        let mut args = vec!["switch", "--port", &port, "--controller-pcap", &controller];
        args.extend_from_slice(extra);
        let out = std::process::Command::new(wirespeed())
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {err}");
        assert!(err.contains(want), "{extra:?}: {err}");
        assert_eq!(
            std::fs::read(&kept).unwrap(),
            before,
            "{extra:?}: port file"
        );
        assert_eq!(
            std::fs::read(&controller).unwrap(),
            before,
            "{extra:?}: controller file"
        );
    }
    assert!(exists(&ctl), "the running switch keeps its socket");
    running.interrupt();
}

/// OpenFlow's packet-in: the packet as it is when `controller` runs, one for each such
/// action, and a later drop does not take it back.
#[test]
fn the_controller_gets_the_packet_as_it_is_at_its_action() {
    let dir = TempDir::new("sctlat");
    let (inp, out, file) = (
        dir.path("in.pcap"),
        dir.path("out.pcap"),
        dir.path("c.pcap"),
    );
    let mut sent = Vec::new();
    for i in 0..20u16 {
        let dport = if i % 2 == 0 { 53 } else { 54 };
        let ip = pcaps::ipv4(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            17,
            0,
            0,
            &pcaps::udp(1000 + i, dport, &[i as u8; 30]),
        );
        let mut frame = pcaps::eth(MAC_B, MAC_A, &[], 0x0800, &ip);
        if dport == 53 {
            frame[22] = 1; // ttl 1: dec_ttl drops it
        }
        let len = frame.len() as u32;
        sent.push((1_700_000_000_000_000_000 + u64::from(i) * 1000, frame, len));
    }
    pcaps::write_capture(&inp, wirespeed_capture::write::Format::Pcap, &sent);
    let flows = dir.path("flows");
    std::fs::write(
        &flows,
        "priority=100,udp,tp_dst=53,actions=controller,dec_ttl,output:2\n\
         priority=100,udp,tp_dst=54,actions=controller:20,mod_nw_dst:10.9.9.9,controller,output:2\n",
    )
    .unwrap();
    let (p1, p2) = (format!("1=pcap:rx={inp}"), format!("2=pcap:tx={out}"));
    let args = [
        "switch",
        "--port",
        &p1,
        "--port",
        &p2,
        "--flows",
        &flows,
        "--ctl",
        &dir.path("ctl.sock"),
        "--controller-pcap",
        &file,
        "--duration",
        "1.5",
        "--json",
    ];
    let j = run_json_here(&args);
    assert_eq!(j["to_controller"], 30, "{j}");
    let got: Vec<(Vec<u8>, u32)> = pcaps::read_records(&file)
        .into_iter()
        .map(|r| (r.1, r.2))
        .collect();
    let forwarded = read_pcap(&out);
    assert_eq!(forwarded.len(), 10, "the ttl-1 packets are dropped");
    let mut want = Vec::new();
    for (i, (_, frame, len)) in sent.iter().enumerate() {
        if i % 2 == 0 {
            want.push((frame.clone(), *len));
        } else {
            want.push((frame[..20].to_vec(), *len));
            let rewritten = &forwarded[i / 2];
            assert_eq!(rewritten[30..34], [10, 9, 9, 9], "packet {i}");
            want.push((rewritten.clone(), *len));
        }
    }
    assert_eq!(got, want, "each packet-in as the packet was at its action");
}

#[test]
fn controller_packets_go_to_standard_output() {
    let dir = TempDir::new("sco");
    // 40 UDP frames for the controller, 10 ARP frames the rule leaves alone.
    let mut sent = Vec::new();
    for i in 0..50u32 {
        let frame = match i % 5 {
            4 => pcaps::arp(1, MAC_A, [10, 0, 0, 1], [10, 0, 0, i as u8]),
            _ => {
                let l4 = pcaps::udp(2000 + i as u16, 53, &vec![i as u8; i as usize * 3]);
                let ip = pcaps::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 0, 0, &l4);
                pcaps::eth(MAC_B, MAC_A, &[], 0x0800, &ip)
            }
        };
        let len = frame.len() as u32;
        sent.push((1_700_000_000_000_000_000 + u64::from(i) * 1000, frame, len));
    }
    let inp = dir.path("in.pcap");
    pcaps::write_capture(&inp, wirespeed_capture::write::Format::Pcap, &sent);
    let udp: Vec<&Vec<u8>> = sent
        .iter()
        .filter(|r| r.1[12] == 0x08 && r.1[13] == 0)
        .map(|r| &r.1)
        .collect();
    let (p1, ctl) = (format!("1=pcap:rx={inp}"), dir.path("ctl.sock"));
    // All of each packet, then at most 60 bytes of it (controller:MAX_LEN), its length kept.
    for (action, max_len) in [("controller", 65535), ("controller:60", 60)] {
        let flows = dir.path("flows");
        std::fs::write(&flows, format!("priority=100,udp,actions={action}\n")).unwrap();
        let args = [
            "switch",
            "--port",
            &p1,
            "--flows",
            &flows,
            "--ctl",
            &ctl,
            "--controller-pcap",
            "-",
            "--duration",
            "1.5",
            "--json",
        ];
        let (stdout, j) = pcaps::run_piped(&dir, None, &args);
        assert_eq!(j["to_controller"], 40, "{action}: {j}");
        let file = dir.path("controller.pcap");
        std::fs::write(&file, stdout).unwrap();
        let want: Vec<(Vec<u8>, u32)> = udp
            .iter()
            .map(|f| (f[..f.len().min(max_len)].to_vec(), f.len() as u32))
            .collect();
        let bytes: usize = want.iter().map(|w| w.0.len()).sum();
        assert_eq!(judge(&file), (40, bytes as u64), "{action}");
        let got: Vec<(Vec<u8>, u32)> = pcaps::read_records(&file)
            .into_iter()
            .map(|r| (r.1, r.2))
            .collect();
        assert_eq!(got, want, "{action}: the UDP frames, in order");
    }
    assert!(!exists(&dir.path("-")), "no file named '-'");

    // A port recording to standard output as well: refused before anything is written.
    let p1 = format!("1=pcap:rx={inp},tx=-");
    let o = std::process::Command::new(wirespeed())
        .current_dir(&dir.0)
        .args([
            "switch",
            "--port",
            &p1,
            "--ctl",
            &ctl,
            "--controller-pcap",
            "-",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("a port and --controller-pcap both write standard output ('-')"),
        "{err}"
    );
    assert!(o.stdout.is_empty(), "{err}");
}

/// Without `--controller-pcap` each packet-in is a line on standard error, at most 20 a
/// second, and each second with more says how many it did not show: 5000 packet-ins in a
/// tenth of a second are all counted, 20 (or, across a second's end, up to 40) lines and
/// the rest in the summaries.
#[test]
fn the_controller_log_shows_at_most_20_lines_a_second_and_counts_the_rest() {
    let mut s = Switched::new("sl", &[]);
    s.ctl_ok(&["add-flow", "priority=100,udp,actions=controller"]);
    let port = format!("xdp:{}", s.c.a);
    run_json(
        &s.c.ns_a,
        &[
            "gen", "--port", &port, "--count", "5000", "--rate", "50000", "--json", "-q",
        ],
    );
    let (j, log) = s.stop();
    assert_eq!(j["to_controller"], 5000, "{j}");
    let shown = log
        .lines()
        .filter(|l| l.starts_with("wirespeed switch: controller: in_port=1 len="))
        .count() as u64;
    let unshown: u64 = log
        .lines()
        .filter_map(|l| {
            l.strip_prefix("wirespeed switch: controller: ")?
                .strip_suffix(" more packet-ins not shown (at most 20 lines a second)")?
                .parse::<u64>()
                .ok()
        })
        .sum();
    assert!((20..=40).contains(&shown), "{shown} lines: {log}");
    assert_eq!(shown + unshown, 5000, "{log}");
}
