//! `wirespeed pcap-run`: unmodified libpcap programs on AF_XDP through libwirespeed_pcap.so.
//! The programs judge: tcpdump writes exactly the frames `wirespeed gen` sent (byte for byte,
//! filtered and cut as asked) and its closing counts agree; tshark (through dumpcap, which
//! gives up CAP_BPF first) captures to pcapng; Ctrl-C ends tcpdump with its counts and
//! nothing attached; a C program built against libpcap injects frames `wirespeed recv`
//! receives, every one; bad devices and filters fail as libpcap fails them; every other
//! device and file goes to the real libpcap.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;

use common::pcaps::*;
use common::traffic::send_on_queue;
use common::*;
use wirespeed_capture::write::Format;

/// `wirespeed pcap-run ARGS` in `ns`.
fn pcap_run(ns: &str, args: &[&str]) -> Running {
    assert_library_built();
    let mut all = vec!["pcap-run"];
    all.extend_from_slice(args);
    spawn_in(ns, &all)
}

/// The library pcap-run preloads is newer than the sources it is built from: `cargo test`
/// builds this crate's tests but not the library (`make test` builds it first).
fn assert_library_built() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let library = std::path::Path::new(wirespeed()).with_file_name("libwirespeed_pcap.so");
    let built = std::fs::metadata(&library)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| {
            panic!(
                "{} is missing: cargo build -p wirespeed-pcap-shim",
                library.display()
            )
        });
    let mut newest = std::time::SystemTime::UNIX_EPOCH;
    // Its own sources only: a file its build does not read (a crate's tests) would make
    // the check fail for ever.
    for krate in ["pcap-shim"] {
        let mut dirs = vec![std::path::PathBuf::from(format!(
            "{root}/crates/{krate}/src"
        ))];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let meta = entry.metadata().unwrap();
                if meta.is_dir() {
                    dirs.push(entry.path());
                } else {
                    newest = newest.max(meta.modified().unwrap());
                }
            }
        }
    }
    assert!(
        built >= newest,
        "{} is older than its sources: cargo build -p wirespeed-pcap-shim",
        library.display()
    );
}

/// A directory tcpdump can write in after it gives up root (Debian's runs as user tcpdump).
fn shared_dir(tag: &str) -> TempDir {
    let dir = TempDir::new(tag);
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

/// The mixed frames as records of a capture file at `path` (each whole).
fn frames_file(path: &str, count: usize) -> Vec<Rec> {
    let records: Vec<Rec> = mixed_frames(count)
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let len = f.len() as u32;
            (1_700_000_000_000_000_000 + i as u64 * 1000, f, len)
        })
        .collect();
    write_capture(path, Format::Pcap, &records);
    records
}

/// Replays `file` out of A, as fast as it goes; every frame must leave.
fn replay(net: &NetPair, file: &str, count: usize) {
    replay_at(net, file, count, &[]);
}

/// `replay`, with more of gen's flags (a --rate).
fn replay_at(net: &NetPair, file: &str, count: usize, extra: &[&str]) {
    let port = format!("xdp:{}", net.a);
    let mut args = vec![
        "gen", "--port", &port, "--pcap", file, "--fast", "--json", "-q",
    ];
    args.extend_from_slice(extra);
    let tx = run_json(&net.ns_a, &args);
    assert_eq!(tx["packets"].as_u64(), Some(count as u64), "{tx}");
}

/// tcpdump's closing count for `what` ("captured", "received by filter", "dropped by kernel").
fn count_of(stderr: &str, what: &str) -> u64 {
    let suffix = format!("packets {what}");
    let one = format!("packet {what}");
    stderr
        .lines()
        .find(|l| l.ends_with(&suffix) || l.ends_with(&one))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no '{what}' count in: {stderr}"))
}

/// tcpdump's lines without their time stamps (the first word).
fn untimed(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.split_once(' ').map_or(l, |(_, rest)| rest).to_string())
        .collect()
}

/// The same lines; a difference is shown by its first line, not all of them.
fn assert_same_lines(got: &[String], want: &[String]) {
    if let Some(i) = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)) {
        panic!(
            "line {i} of {} differs: {:?} where tcpdump -r prints {:?} ({} lines)",
            got.len(),
            got.get(i),
            want.get(i),
            want.len()
        );
    }
}

/// The snapshot length in a pcap file's header.
fn pcap_snaplen(path: &str) -> u32 {
    let bytes = std::fs::read(path).unwrap();
    u32::from_le_bytes(bytes[16..20].try_into().unwrap())
}

#[test]
fn tcpdump_writes_exactly_the_frames_sent_filtered_and_cut_as_asked() {
    let net = NetPair::new("pt");
    let dir = shared_dir("pt");
    let input = dir.path("in.pcap");
    let sent = frames_file(&input, 10_000);
    let device = format!("xdp:{}", net.b);

    // Everything, -s 0 (libpcap's largest), 10,000 of them.
    let out = dir.path("all.pcap");
    let mut td = pcap_run(
        &net.ns_b,
        &[
            "tcpdump", "-i", &device, "-n", "-s", "0", "-c", "10000", "-w", &out,
        ],
    );
    td.wait_for("listening on");
    replay(&net, &input, sent.len());
    let (code, _, err) = td.exit_within(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(count_of(&err, "captured"), 10_000, "{err}");
    assert_eq!(count_of(&err, "received by filter"), 10_000, "{err}");
    assert_eq!(count_of(&err, "dropped by kernel"), 0, "{err}");
    let got = read_records(&out);
    assert_eq!(got.len(), sent.len());
    for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
        assert!(g.1 == s.1 && g.2 == s.2, "frame {i} differs");
    }
    assert_eq!(pcap_snaplen(&out), 262_144);
    // tcpdump gave up root once the device was open, and went on capturing as its own user.
    let owner = std::fs::metadata(&out).unwrap().uid();
    let tcpdump_uid = must(&["id", "-u", "tcpdump"])
        .trim()
        .parse::<u32>()
        .unwrap();
    assert_eq!(owner, tcpdump_uid, "tcpdump did not drop root (-Z)");
    net.assert_no_xdp();

    // A filter (compiled by the real libpcap, run by the shim) and -s 96: exactly what
    // tcpdump itself selects from the file, cut to 96 bytes; nanosecond time stamps.
    let expected = tcpdump_select(&input, "udp", &dir);
    let n = expected.len().to_string();
    let out = dir.path("udp.pcap");
    let nano = "--time-stamp-precision=nano";
    let mut td = pcap_run(
        &net.ns_b,
        &[
            "tcpdump", "-i", &device, "-n", "-s", "96", nano, "-c", &n, "-w", &out, "udp",
        ],
    );
    td.wait_for("listening on");
    replay(&net, &input, sent.len());
    let (code, _, err) = td.exit_within(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(count_of(&err, "captured"), expected.len() as u64, "{err}");
    assert_eq!(
        count_of(&err, "received by filter"),
        expected.len() as u64,
        "{err}"
    );
    let got = read_records(&out);
    assert_eq!(got.len(), expected.len());
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g.1, e.1[..e.1.len().min(96)], "frame {i}");
        assert_eq!(g.2, e.2, "frame {i}'s length on the wire");
    }
    assert_eq!(pcap_snaplen(&out), 96);
    let magic = u32::from_le_bytes(std::fs::read(&out).unwrap()[..4].try_into().unwrap());
    assert_eq!(magic, 0xa1b2_3c4d, "not a nanosecond pcap");
    net.assert_no_xdp();
}

/// On an interface with a 9000-byte MTU, packets larger than a frame reach the program
/// whole (a chain of frames, gathered), none dropped, as tcpdump on the plain interface
/// gets them.
#[test]
fn tcpdump_gets_packets_larger_than_a_frame_whole() {
    let net = NetPair::new("pj");
    for (ns, dev) in [(&net.ns_a, &net.a), (&net.ns_b, &net.b)] {
        must(&["ip", "-n", ns, "link", "set", dev, "mtu", "9000"]);
    }
    let dir = shared_dir("pj");
    let input = dir.path("jumbo.pcap");
    let sent: Vec<Rec> = [60usize, 1514, 4000, 4097, 8000, 9014, 100]
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let payload: Vec<u8> = (0..len - 14).map(|b| (b * 7 + i) as u8).collect();
            let frame = eth(MAC_B, MAC_A, &[], 0x88b5, &payload);
            (1_700_000_000_000_000_000 + i as u64, frame, len as u32)
        })
        .collect();
    write_capture(&input, Format::Pcap, &sent);
    let out = dir.path("got.pcap");
    let device = format!("xdp:{}", net.b);
    let n = sent.len().to_string();
    let mut td = pcap_run(
        &net.ns_b,
        &[
            "tcpdump", "-i", &device, "-n", "-s", "0", "-c", &n, "-w", &out,
        ],
    );
    td.wait_for("listening on");
    // gen sends a frame at most (AF_PACKET, as tcpdump's peers would, sends them whole).
    let send = format!(
        "import socket, struct\n\
         data = open('{input}', 'rb').read()\n\
         s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n\
         s.bind(('{dev}', 0))\n\
         at = 24\n\
         while at < len(data):\n    \
             n = struct.unpack_from('<I', data, at + 8)[0]\n    \
             s.send(data[at + 16:at + 16 + n])\n    \
             at += 16 + n",
        dev = net.a
    );
    must(&[
        "ip",
        "netns",
        "exec",
        &net.ns_a,
        "/usr/bin/python3",
        "-c",
        &send,
    ]);
    let (code, _, err) = td.exit_within(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(count_of(&err, "captured"), sent.len() as u64, "{err}");
    assert_eq!(count_of(&err, "dropped by kernel"), 0, "{err}");
    let got = read_records(&out);
    assert_eq!(got.len(), sent.len());
    for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
        assert!(
            g.1 == s.1 && g.2 == s.2,
            "frame {i} ({} bytes) differs",
            s.2
        );
    }
    net.assert_no_xdp();
}

/// The interface deleted under a running tcpdump: its read fails with libpcap's words and
/// tcpdump exits 1, as tcpdump alone does, instead of waiting for packets for ever.
#[test]
fn tcpdump_ends_when_its_interface_is_deleted() {
    let net = NetPair::new("pg");
    let device = format!("xdp:{}", net.b);
    let mut td = pcap_run(&net.ns_b, &["tcpdump", "-i", &device, "-n", "-l"]);
    td.wait_for("listening on");
    must(&["ip", "-n", &net.ns_b, "link", "del", &net.b]);
    let (code, _, err) = td.exit_within(Duration::from_secs(10));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("tcpdump: pcap_loop: The interface disappeared"),
        "{err}"
    );
}

/// ngrep's Ctrl-C handler closes the handle its pcap_loop is reading, prints its counts
/// and exits: every match printed, exit 0, as on the plain interface (it aborted, 134,
/// with its last lines lost).
#[test]
fn ngrep_closes_its_handle_from_its_ctrl_c_handler() {
    let net = NetPair::new("pn");
    let device = format!("xdp:{}", net.b);
    let mut ng = pcap_run(&net.ns_b, &["ngrep", "-q", "-d", &device, "", "udp"]);
    // Its last word before it reads (the veth has no address to look up).
    ng.wait_for("no IPv4 address assigned");
    std::thread::sleep(Duration::from_millis(300));
    traffic::send_on_queue(&net, 0, 300);
    // ngrep prints each match as it reads it; the lines are in its buffer by then.
    std::thread::sleep(Duration::from_millis(1000));
    must(&["kill", "-INT", &ng.pid().to_string()]);
    let (code, out, err) = ng.exit_within(Duration::from_secs(10));
    assert_eq!(code, Some(0), "{err}");
    let matches = out.lines().filter(|l| l.starts_with("U ")).count();
    assert_eq!(matches, 300, "{out}");
    net.assert_no_xdp();
}

/// dumpcap (under tshark) waits on the selectable descriptor, not in pcap_loop: a deleted
/// interface must wake it and its read end with libpcap's error, so it stops at once, as
/// tshark on the plain interface does (it waited for ever).
#[test]
fn tshark_ends_when_its_interface_is_deleted() {
    let net = NetPair::new("pt");
    let dir = shared_dir("pt");
    let out = dir.path("out.pcapng");
    let device = format!("xdp:{}", net.b);
    let mut ts = pcap_run(&net.ns_b, &["tshark", "-i", &device, "-w", &out]);
    ts.wait_for("Capture started");
    must(&["ip", "-n", &net.ns_b, "link", "del", &net.b]);
    let (_, _, err) = ts.exit_within(Duration::from_secs(10));
    // tshark's words for libpcap's "The interface disappeared", as on the plain interface.
    assert!(
        err.contains(&format!(
            "The network adapter \"{device}\" is no longer attached; the capture has stopped"
        )),
        "{err}"
    );
}

#[test]
fn tshark_captures_through_dumpcap() {
    let net = NetPair::new("ps");
    let dir = shared_dir("ps");
    let input = dir.path("in.pcap");
    let sent = frames_file(&input, 2000);
    let out = dir.path("out.pcapng");
    let device = format!("xdp:{}", net.b);
    let mut ts = pcap_run(
        &net.ns_b,
        &["tshark", "-i", &device, "-c", "2000", "-w", &out],
    );
    // tshark says "Capturing on" before dumpcap has the device open; this comes after.
    ts.wait_for("Capture started");
    // dumpcap runs without CAP_IPC_LOCK, and this VM's root cannot raise RLIMIT_MEMLOCK
    // (no CAP_SYS_RESOURCE): its port gets 6 MiB of frames, so a moderate rate.
    replay_at(&net, &input, sent.len(), &["--rate", "20000"]);
    let (code, _, err) = ts.exit_within(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{err}");
    let got = read_records(&out);
    assert_eq!(got.len(), sent.len(), "{err}");
    for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
        assert!(g.1 == s.1 && g.2 == s.2, "frame {i} differs");
    }
    let info = must(&["capinfos", "-c", "-M", &out]);
    assert!(info.contains("Number of packets:   2000"), "{info}");
    net.assert_no_xdp();
}

#[test]
fn ctrl_c_ends_tcpdump_with_its_lines_and_counts_and_nothing_attached() {
    let net = NetPair::new("pc");
    let dir = shared_dir("pc");
    let input = dir.path("in.pcap");
    let sent = frames_file(&input, 300);
    let device = format!("xdp:{}", net.b);
    let mut td = pcap_run(&net.ns_b, &["tcpdump", "-i", &device, "-n", "-l"]);
    td.wait_for("listening on");
    replay(&net, &input, sent.len());
    std::thread::sleep(Duration::from_millis(500));
    must(&["kill", "-INT", &td.pid().to_string()]);
    let (code, out, err) = td.exit_within(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(count_of(&err, "captured"), 300, "{err}");
    assert_eq!(count_of(&err, "dropped by kernel"), 0, "{err}");
    // The same lines tcpdump prints reading the file, but for the time stamps.
    let (ok, from_file, e) = run_tool(&["tcpdump", "-r", &input, "-n"]);
    assert!(ok, "{e}");
    assert_same_lines(&untimed(&out), &untimed(&from_file));
    net.assert_no_xdp();
}

/// Builds tests/pcap/inject.c against the system's libpcap.
fn build_inject(dir: &TempDir) -> String {
    let exe = dir.path("inject");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pcap/inject.c");
    must(&["cc", "-O2", "-Wall", "-o", &exe, source, "-lpcap"]);
    exe
}

#[test]
fn a_program_built_against_libpcap_injects_frames_recv_receives() {
    let net = NetPair::new("pi");
    let dir = shared_dir("pi");
    let inject = build_inject(&dir);
    let frames = dir.path("gen.pcap");
    let to_file = format!("pcap:{frames}");
    let g = run_json_here(&[
        "gen",
        "--port",
        &to_file,
        "--count",
        "5000",
        "--generator-id",
        "7",
        "--json",
        "-q",
    ]);
    assert_eq!(g["packets"].as_u64(), Some(5000), "{g}");
    let rx = traffic::recv_in_b(&net, &["--expect", "5000"]);
    let device = format!("xdp:{}", net.a);
    assert_library_built();
    let out = run_in(&net.ns_a, &["pcap-run", &inject, &device, &frames]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), "sent 5000 failed 0");
    std::thread::sleep(Duration::from_millis(300));
    let (rj, _) = rx.interrupt();
    let gens = rj["generators"].as_array().unwrap();
    assert_eq!(gens.len(), 1, "{rj}");
    assert_eq!(gens[0]["generator"].as_u64(), Some(7), "{rj}");
    assert_eq!(gens[0]["received"].as_u64(), Some(5000), "{rj}");
    assert_eq!(gens[0]["lost"].as_u64(), Some(0), "{rj}");

    // A frame larger than the interface's MTU: pcap_inject fails, pcap_geterr says why, the
    // program's own error path runs, and the next frame still goes.
    let big = dir.path("big.pcap");
    let first = read_records(&frames).remove(0);
    let records = vec![(0, vec![0x55u8; 3000], 3000), first];
    write_capture(&big, Format::Pcap, &records);
    let out = run_in(&net.ns_a, &["pcap-run", &inject, &device, &big]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "record 1: {device}: a frame of 3000 bytes is larger than the interface sends \
             (1514 bytes)"
        )),
        "{stderr}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "sent 1 failed 1"
    );
    net.assert_no_xdp();
}

#[test]
fn next_ex_nonblocking_mode_and_a_breakloop_from_another_thread() {
    let net = NetPair::new("pn");
    let dir = shared_dir("pn");
    let reader = dir.path("reader");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pcap/reader.c");
    must(&[
        "cc",
        "-O2",
        "-Wall",
        "-o",
        &reader,
        source,
        "-lpcap",
        "-lpthread",
    ]);
    let input = dir.path("in.pcap");
    let sent = frames_file(&input, 500);
    let bytes: usize = sent.iter().map(|r| r.1.len()).sum();
    let device = format!("xdp:{}", net.b);
    let mut run = pcap_run(&net.ns_b, &[&reader, &device, "500"]);
    run.wait_for("ready");
    replay_at(&net, &input, sent.len(), &["--rate", "20000"]);
    let (code, out, err) = run.exit_within(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{out} {err}");
    // Before pcap_activate: PCAP_ERROR_NOT_ACTIVATED, as libpcap says. Nothing waited in
    // non-blocking mode; then every packet, whole; the stats from the
    // other thread while the loop blocked (all 500 passed no filter, none dropped); and the
    // breakloop from that thread woke the blocked loop, which says PCAP_ERROR_BREAK.
    let want = format!(
        "unactivated -3\ncompile -1: not-yet-activated pcap_t passed to pcap_compile\nnonblock 0\nnext 500 bytes {bytes}\nstats 0 recv 500 drop 0\nloop -2\n"
    );
    assert_eq!(out, want, "{err}");
    net.assert_no_xdp();
}

#[test]
fn a_responder_sends_from_inside_its_callback() {
    let net = NetPair::new("pr");
    let dir = shared_dir("pr");
    let inject = build_inject(&dir);
    let input = dir.path("in.pcap");
    // Frames of 60 bytes and more, as a responder sends them. The mixed set's 18-byte
    // VLAN-tagged frames (nothing after the tag) come back too, but A's stack drops them
    // while untagging, before tcpdump's socket sees them.
    let sent: Vec<Rec> = frames_file(&input, 1400)
        .into_iter()
        .filter(|r| r.1.len() >= 60)
        .take(1000)
        .collect();
    write_capture(&input, Format::Pcap, &sent);
    assert_eq!(sent.len(), 1000);
    // What comes back to A, seen by tcpdump on its own (AF_PACKET).
    let back = dir.path("back.pcap");
    let cap = Capture::tcpdump_inbound(&net.ns_a, &net.a, &back);
    let device = format!("xdp:{}", net.b);
    // -v: the library says when the device is open (its sockets registered).
    let mut echo = pcap_run(&net.ns_b, &["-v", &inject, "-e", &device, "1000"]);
    echo.wait_for(" open (");
    replay_at(&net, &input, sent.len(), &["--rate", "20000"]);
    let (code, out, err) = echo.exit_within(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{out} {err}");
    assert_eq!(out.trim(), "echoed 1000 failed 0");
    let seen = cap.stop(false);
    assert_eq!(seen.dropped_by_tcpdump, 0);
    let frames: Vec<Vec<u8>> = sent.into_iter().map(|r| r.1).collect();
    let missing: Vec<(usize, usize)> = frames
        .iter()
        .enumerate()
        .filter(|(_, f)| !seen.frames.contains(f))
        .map(|(i, f)| (i, f.len()))
        .collect();
    assert!(
        seen.frames == frames,
        "{} frames came back; missing (index, length): {missing:?}",
        seen.frames.len()
    );
    net.assert_no_xdp();
}

fn build_threads(dir: &TempDir) -> String {
    let exe = dir.path("threads");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pcap/threads.c");
    must(&[
        "cc",
        "-O2",
        "-Wall",
        "-o",
        &exe,
        source,
        "-lpcap",
        "-lpthread",
    ]);
    exe
}

/// One handle, two threads, as libpcap takes them: a second thread sends 1,000 frames with
/// pcap_inject while the first waits in pcap_loop, every one goes out (they failed "in
/// use" while the read waited, and the two threads raced on the port unguarded); empty
/// frames are refused; and a pcap_breakloop from the callback at the last packet a
/// count allowed ends that pcap_loop with PCAP_ERROR_BREAK, the next read reading on (it
/// used to return the count, the break left to end the next read at once); and a filter
/// a callback sets holds from the next packet on.
#[test]
fn a_second_thread_sends_while_the_first_reads_and_a_break_at_the_count_ends_that_loop() {
    let net = NetPair::new("pt");
    let dir = shared_dir("pt");
    let exe = build_threads(&dir);
    let back = dir.path("back.pcap");
    let cap = Capture::tcpdump_filtered(&net.ns_a, &net.a, "in", &back, Some("ether proto 0x88b5"));
    let input = dir.path("in.pcap");
    let arriving = frames_file(&input, 10);
    let device = format!("xdp:{}", net.b);
    let mut run = pcap_run(&net.ns_b, &[&exe, &device, "1000"]);
    run.wait_for("ready");
    replay_at(&net, &input, arriving.len(), &["--rate", "20000"]);
    let (code, out, err) = run.exit_within(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{out} {err}");
    assert_eq!(
        out,
        "empty -1 -1\nsent 1000 failed 0 loop -2\ncount-break -2 then 1\n\
         filtered-in-callback 1\n",
        "{err}"
    );
    let seen = cap.stop(false);
    assert_eq!(seen.dropped_by_tcpdump, 0);
    let frame = |seq: u32| {
        let mut f = vec![0u8; 60];
        f[..6].fill(0xff);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
        f[12..14].copy_from_slice(&[0x88, 0xb5]);
        f[14..18].copy_from_slice(&seq.to_be_bytes());
        f
    };
    let want: Vec<Vec<u8>> = (0..1000).map(frame).collect();
    assert_eq!(seen.frames.len(), want.len());
    assert!(seen.frames == want, "the frames came back otherwise");
    net.assert_no_xdp();
}

/// A SIGALRM handler closes the handle and exits while the program sends in a loop: the
/// close lands in a pcap_inject nearly every time. It is put off and the program exits 0,
/// as with libpcap; the port's state was taken twice (a panic, an abort: 134).
#[test]
fn a_signal_handler_closes_the_handle_a_send_is_using() {
    let net = NetPair::new("pk");
    let dir = shared_dir("pk");
    let exe = build_threads(&dir);
    let device = format!("xdp:{}", net.b);
    for _ in 0..3 {
        let out = run_in(&net.ns_b, &["pcap-run", &exe, "-c", &device]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "closed\n", "{stderr}");
    }
    net.assert_no_xdp();
}

#[test]
fn an_interface_the_host_uses_needs_take() {
    let net = NetPair::new("pk");
    net.address("10.77.0.1/24", "10.77.0.2/24");
    let device = format!("xdp:{}", net.b);
    let (code, _, err) = pcap_run(&net.ns_b, &["tcpdump", "-i", &device, "-c", "1"])
        .exit_within(Duration::from_secs(20));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!("{} has addresses (10.77.0.2)", net.b)) && err.contains("--take"),
        "{err}"
    );
    net.assert_no_xdp();
    let mut td = pcap_run(
        &net.ns_b,
        &["--take", "tcpdump", "-i", &device, "-n", "-w", "/dev/null"],
    );
    td.wait_for("listening on");
    must(&["kill", "-INT", &td.pid().to_string()]);
    let (code, _, err) = td.exit_within(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
    net.assert_no_xdp();
}

/// An interface another process holds is refused, and the program says why: once, not
/// again by pcap-run beside it.
#[test]
fn an_interface_held_by_another_process_is_refused_once() {
    let net = NetPair::new("ph");
    let device = format!("xdp:{}", net.b);
    let mut holder = spawn_in(
        &net.ns_b,
        &["capture", "--port", &device, "-w", "/dev/null"],
    );
    holder.wait_ready();
    let (code, _, err) = pcap_run(&net.ns_b, &["tcpdump", "-i", &device, "-c", "1"])
        .exit_within(Duration::from_secs(20));
    assert_eq!(code, Some(1), "{err}");
    // The capture's spill ring: its program is its own, which nobody joins.
    let says = format!(
        "process {} (wirespeed) holds the interface with a capture's spill-ring program",
        holder.pid()
    );
    assert_eq!(err.matches(&says).count(), 1, "{err}");
    assert!(err.starts_with("tcpdump: "), "{err}");
}

#[test]
fn bad_devices_and_filters_fail_as_libpcap_fails_them_leaving_nothing_attached() {
    let net = NetPair::new("pe");
    let dev = format!("xdp:{}", net.b);
    let queue = format!("xdp:{}@5", net.b);
    let cases: [(&[&str], &str); 4] = [
        (
            &["tcpdump", "-i", "xdp:wsnosuch0", "-c", "1"],
            "wsnosuch0: no such interface",
        ),
        (
            &["tcpdump", "-i", &queue, "-c", "1"],
            "interface has no queue 5 (it has 1)",
        ),
        (
            &["tcpdump", "-i", &dev, "-c", "1", "udp and"],
            "syntax error",
        ),
        (
            &["tcpdump", "-i", &dev, "-c", "1", "-Q", "out"],
            "direction out is not supported",
        ),
    ];
    for (args, says) in cases {
        let (code, _, err) = pcap_run(&net.ns_b, args).exit_within(Duration::from_secs(20));
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        net.assert_no_xdp();
    }
    // An interface that is down, as tcpdump on the plain interface says (it waited).
    must(&["ip", "-n", &net.ns_b, "link", "set", &net.b, "down"]);
    let (code, _, err) = pcap_run(&net.ns_b, &["tcpdump", "-i", &dev, "-c", "1"])
        .exit_within(Duration::from_secs(20));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!("tcpdump: {dev}: That device is not up")),
        "{err}"
    );
    net.assert_no_xdp();
}

/// A program that cannot be run ends pcap-run as the shell, env and nohup end: 127 when
/// there is no such program, 126 when it is not executable, its name and why said once.
#[test]
fn a_program_that_cannot_run_exits_as_the_shell_says() {
    assert_library_built();
    let dir = TempDir::new("noexec");
    let text = dir.path("notes.txt");
    std::fs::write(&text, "not a program\n").unwrap();
    let not_executable = format!("run {text}: Permission denied");
    for (program, code, says) in [
        (
            "wsnosuchprogram",
            127,
            "run wsnosuchprogram: No such file or directory",
        ),
        (text.as_str(), 126, not_executable.as_str()),
    ] {
        let out = std::process::Command::new(wirespeed())
            .args(["pcap-run", program, "-i", "lo"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{program}: {err}");
        assert_eq!(err.matches(says).count(), 1, "{program}: {err}");
    }
}

#[test]
fn other_devices_and_files_go_to_the_real_libpcap() {
    let net = NetPair::new("po");
    let dir = shared_dir("po");
    let input = dir.path("in.pcap");
    frames_file(&input, 20);
    // A file: the very lines tcpdump prints without the shim.
    assert_library_built();
    let out = run_in(&net.ns_b, &["pcap-run", "tcpdump", "-r", &input, "-n"]);
    assert!(out.status.success());
    let (_, plain, _) = run_tool(&["tcpdump", "-r", &input, "-n"]);
    assert_same_lines(
        &untimed(&String::from_utf8_lossy(&out.stdout)),
        &untimed(&plain),
    );
    // The device list: libpcap's own, and an xdp: device for each interface.
    let out = run_in(&net.ns_b, &["pcap-run", "tcpdump", "-D"]);
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(list.contains(&format!(".{} [", net.b)), "{list}");
    assert!(list.contains(&format!(".xdp:{} (", net.b)), "{list}");
    // A live device of the kernel's: loopback, through AF_PACKET as always.
    must(&["ip", "-n", &net.ns_b, "link", "set", "lo", "up"]);
    let mut td = pcap_run(&net.ns_b, &["tcpdump", "-i", "lo", "-n", "-c", "2", "icmp"]);
    td.wait_for("listening on");
    must(&[
        "ip",
        "netns",
        "exec",
        &net.ns_b,
        "ping",
        "-c",
        "1",
        "127.0.0.1",
    ]);
    let (code, out, err) = td.exit_within(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("ICMP echo request") && out.contains("ICMP echo reply"),
        "{out}"
    );
}

#[test]
fn two_tcpdumps_share_an_interface_by_queue() {
    let net = NetPair::with_queues("pq", 2);
    let q0 = format!("xdp:{}@0", net.b);
    let q1 = format!("xdp:{}@1", net.b);
    let mut first = pcap_run(&net.ns_b, &["tcpdump", "-i", &q0, "-n", "-w", "/dev/null"]);
    first.wait_for("listening on");
    let mut second = pcap_run(&net.ns_b, &["tcpdump", "-i", &q1, "-n", "-w", "/dev/null"]);
    second.wait_for("listening on");
    // A queue already taken: refused, naming who has it.
    let (code, _, err) = pcap_run(&net.ns_b, &["tcpdump", "-i", &q1, "-c", "1"])
        .exit_within(Duration::from_secs(20));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!("process {} (tcpdump)", second.pid())),
        "{err}"
    );

    send_on_queue(&net, 0, 300);
    send_on_queue(&net, 1, 200);
    std::thread::sleep(Duration::from_millis(300));
    must(&["kill", "-INT", &first.pid().to_string()]);
    let (code, _, err) = first.exit_within(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(count_of(&err, "captured"), 300, "{err}");
    // The other goes on: the program stays while it holds it.
    send_on_queue(&net, 1, 100);
    std::thread::sleep(Duration::from_millis(300));
    must(&["kill", "-INT", &second.pid().to_string()]);
    let (code, _, err) = second.exit_within(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(count_of(&err, "captured"), 300, "{err}");
    // The last one out took the program with it.
    net.assert_no_xdp();
}
