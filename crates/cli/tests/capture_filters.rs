//! Filters, differential: for each expression, the packets `wirespeed capture -r` selects from
//! a mixed capture equal those `tcpdump -r FILE -w - EXPR` selects, packet for packet.

mod common;

use common::pcaps::*;
use wirespeed_capture::write::Format;

const EXPRESSIONS: &[&str] = &[
    "ip",
    "ip6",
    "arp",
    "not arp",
    "tcp",
    "udp",
    "icmp",
    "icmp6",
    "ip proto 47",
    "port 53",
    "tcp port 80",
    "udp dst port 9",
    "src port 1024",
    "portrange 1-1000",
    "tcp portrange 8000-9000 or udp port 5353",
    "host 10.0.0.1",
    "src host 192.168.1.10",
    "dst net 10.0.0.0/24",
    "net 172.16.0.0/12",
    "ip6 and udp",
    "ip6 host fd00::1",
    "ip6 dst net ff02::/16",
    "vlan",
    "vlan 100",
    "vlan 200 and tcp",
    "vlan and vlan 100",
    "len > 100",
    "len <= 64",
    "greater 500",
    "less 80",
    "tcp[tcpflags] & tcp-syn != 0",
    "tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn",
    "tcp[tcpflags] & tcp-rst != 0",
    "ip[6:2] & 0x1fff != 0",
    "ip[0] & 0xf > 5",
    "icmp[icmptype] == icmp-echo",
    "ether host 02:00:00:00:00:01 and ether dst 02:00:00:00:00:02",
    "ether broadcast",
    "ether proto 0x88cc",
    "ip broadcast or ip multicast",
    "udp and not port 53",
    "ip6 protochain 6",
    "ip protochain 17",
    "(tcp or udp) and not (port 22 or port 443)",
];

#[test]
fn our_selection_equals_tcpdumps_for_every_expression() {
    let dir = TempDir::new("filters");
    let input = dir.path("mixed.pcap");
    let records = mixed_records(1200);
    write_capture(&input, Format::Pcap, &records);
    assert_eq!(read_records(&input).len(), 1200);
    let mut nontrivial = 0;
    for expr in EXPRESSIONS {
        let ours_path = dir.path("ours.pcap");
        let (code, _, err) = wirespeed_out(&[
            "capture", "-r", &input, "-w", &ours_path, "--format", "pcap", expr,
        ]);
        assert_eq!(code, Some(0), "{expr}: {err}");
        let ours = read_records(&ours_path);
        let theirs = tcpdump_select(&input, expr, &dir);
        assert_eq!(
            ours.len(),
            theirs.len(),
            "{expr}: we kept {}, tcpdump {}",
            ours.len(),
            theirs.len()
        );
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(a, b, "{expr}: packet {i} differs");
        }
        if !ours.is_empty() && ours.len() < records.len() {
            nontrivial += 1;
        }
    }
    // The expressions must actually split the capture, not pass or reject everything.
    assert!(
        nontrivial >= EXPRESSIONS.len() - 2,
        "only {nontrivial} expressions split the capture"
    );
}

#[test]
fn our_selection_from_pcapng_equals_tcpdumps() {
    let dir = TempDir::new("filters-ng");
    let input = dir.path("mixed.pcapng");
    write_capture(&input, Format::Pcapng, &mixed_records(400));
    for expr in [
        "vlan and udp",
        "tcp[tcpflags] & tcp-syn != 0",
        "ip6",
        "not arp",
    ] {
        let out = dir.path("ours.pcapng");
        let (code, _, err) = wirespeed_out(&["capture", "-r", &input, "-w", &out, expr]);
        assert_eq!(code, Some(0), "{expr}: {err}");
        assert_eq!(
            read_records(&out),
            tcpdump_select(&input, expr, &dir),
            "{expr}"
        );
    }
}

/// Options after the filter's words, or between them, are options (as tcpdump's getopt takes
/// them: `tcpdump -r F tcp -c 3 -w O`), not words of the filter.
#[test]
fn options_may_follow_the_filter_as_in_tcpdump() {
    let dir = TempDir::new("filter-order");
    let input = dir.path("mixed.pcap");
    write_capture(&input, Format::Pcap, &mixed_records(400));
    let theirs = dir.path("theirs.pcap");
    let (ok, _, err) = run_tool(&[
        "tcpdump", "-r", &input, "tcp", "or", "udp", "-c", "7", "-w", &theirs,
    ]);
    assert!(ok, "tcpdump: {err}");
    let theirs = read_records(&theirs);
    assert_eq!(theirs.len(), 7);
    let ours = dir.path("ours.pcap");
    for args in [
        vec!["tcp", "or", "udp", "-c", "7", "-w", &ours],
        vec!["tcp", "-c", "7", "or", "udp", "-w", &ours],
    ] {
        let mut argv = vec!["capture", "-r", &input, "--format", "pcap"];
        argv.extend(args.iter().copied());
        let (code, _, err) = wirespeed_out(&argv);
        assert_eq!(code, Some(0), "{argv:?}: {err}");
        assert_eq!(read_records(&ours), theirs, "{argv:?}");
    }
}

#[test]
fn json_counts_add_up_offline() {
    let dir = TempDir::new("filters-json");
    let input = dir.path("mixed.pcap");
    write_capture(&input, Format::Pcap, &mixed_records(500));
    let out = dir.path("out.pcap");
    let (code, stdout, err) =
        wirespeed_out(&["capture", "-r", &input, "-w", &out, "--json", "udp"]);
    assert_eq!(code, Some(0), "{err}");
    let j: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let n = |k: &str| j[k].as_u64().unwrap();
    assert_eq!(n("received"), 500);
    assert_eq!(
        n("filtered_out") + n("matched") + n("after_stop"),
        500,
        "{j}"
    );
    assert_eq!(n("written") + n("dropped_by_writer"), n("matched"), "{j}");
    assert_eq!(n("written"), read_records(&out).len() as u64);
    assert_eq!(
        n("written"),
        tcpdump_select(&input, "udp", &dir).len() as u64
    );
}

#[test]
fn counts_on_stderr_at_exit_are_tcpdumps_lines() {
    let dir = TempDir::new("filters-counts");
    let input = dir.path("mixed.pcap");
    write_capture(&input, Format::Pcap, &mixed_records(500));
    let udp = tcpdump_select(&input, "udp", &dir).len();
    assert!(udp > 0 && udp < 500, "the mix has some UDP: {udp}");
    let out = dir.path("out.pcap");
    let (code, stdout, err) = wirespeed_out(&["capture", "-r", &input, "-w", &out, "udp"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(stdout.is_empty(), "{stdout}");
    let expected = format!(
        "500 packets received\n{udp} packets matched by filter\n{udp} packets written\n\
         0 packets dropped by writer\n"
    );
    assert!(err.ends_with(&expected), "expected\n{expected}in\n{err}");
    let (code, _, err) = wirespeed_out(&["capture", "-r", &input, "-w", &out]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.ends_with(
            "500 packets received\n500 packets matched (no filter)\n500 packets written\n\
             0 packets dropped by writer\n"
        ),
        "{err}"
    );
}

#[test]
fn invalid_expression_exits_2_with_libpcaps_message_and_no_file() {
    let dir = TempDir::new("filters-bad");
    let input = dir.path("mixed.pcap");
    write_capture(&input, Format::Pcap, &mixed_records(10));
    for (expr, says) in [
        ("tcp port", "syntax error"),
        ("port 99999", "99999"),
        ("ip6 host 10.0.0.1", "modifier applied to ip host"),
        // What only a live capture knows (tcpdump: "not supported ... reading savefiles").
        (
            "inbound",
            "a capture file of this link type (1) does not record",
        ),
        (
            "tcp and ifindex 2",
            "a capture file of this link type (1) does not record",
        ),
    ] {
        let out = dir.path("never.pcap");
        let (code, _, err) = wirespeed_out(&["capture", "-r", &input, "-w", &out, expr]);
        assert_eq!(code, Some(1), "{expr}: {err}");
        assert!(err.contains(says), "{expr}: {err}");
        assert!(!exists_path(&out), "{expr}: a file was created");
    }
}

/// On a live port too: the expression is compiled before anything is opened or attached, and
/// before the capabilities are asked for, so it is exit 1 for anyone (here root and nobody).
#[test]
fn invalid_expression_on_a_live_port_attaches_nothing() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("filters-bad-live");
    let out = dir.path("never.pcap");
    // A copy nobody can run: the build directory may be under a home only root can enter.
    let copy = dir.path("wirespeed");
    std::fs::copy(common::wirespeed(), &copy).unwrap();
    let mode = |path: &str, bits| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(bits)).unwrap()
    };
    mode(&dir.path(""), 0o755);
    mode(&copy, 0o755);
    let as_nobody = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ];
    for prefix in [&[][..], &as_nobody[..]] {
        let argv: Vec<&str> = prefix
            .iter()
            .copied()
            .chain([
                copy.as_str(),
                "capture",
                "--port",
                "xdp:lo",
                "-w",
                &out,
                "tcp port",
            ])
            .collect();
        let run = common::sh(&argv);
        let err = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{argv:?}: {err}");
        assert!(err.contains("syntax error"), "{argv:?}: {err}");
        assert!(!exists_path(&out), "{argv:?}: a file was created");
    }
    let link = common::sh(&["ip", "link", "show", "dev", "lo"]);
    let link = String::from_utf8_lossy(&link.stdout);
    assert!(!link.contains("xdp"), "a program is attached to lo: {link}");
}
