//! Live capture over veth, both backends: 100,000 packets from `wirespeed bench txpush` are all
//! captured at a rate the writer sustains, the counts at exit add up exactly, and the files are
//! judged by tcpdump, tshark and capinfos. Filters live: the packet: backend runs them in the
//! kernel too, and replayed mixed traffic is selected exactly as tcpdump selects it.

mod common;

use common::pcaps::*;
use common::traffic::{gen_in_a, send_on_queue};
use common::*;
use wirespeed_capture::write::Format;

const COUNT: u64 = 100_000;

/// One capture at a time: "a rate the writer sustains" needs the CPU (two cores here) for the
/// capture, not for the other tests of this file.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
/// txpush's frames: 64 bytes on the wire, 60 without the FCS.
const FRAME_LEN: u64 = 60;

fn send(net: &NetPair, count: u64) {
    send_on_queue(net, 0, count);
}

fn n(j: &serde_json::Value, k: &str) -> u64 {
    j[k].as_u64().unwrap_or_else(|| panic!("no {k} in {j}"))
}

/// Asserts the identities every capture's counts obey.
fn assert_counts_add_up(j: &serde_json::Value) {
    assert_eq!(
        n(j, "received"),
        n(j, "filtered_out") + n(j, "matched") + n(j, "after_stop"),
        "{j}"
    );
    assert_eq!(
        n(j, "matched"),
        n(j, "written") + n(j, "dropped_by_writer"),
        "{j}"
    );
}

fn capture_100k(tag: &str, backend: &str, format: &str, stop_with_term: bool) {
    let _one = serial();
    let net = NetPair::new(tag);
    let dir = TempDir::new(tag);
    let file = dir.path(&format!("live.{format}"));
    let port = format!("{backend}:{}", net.b);
    let mut cap = spawn_in(
        &net.ns_b,
        &[
            "capture", "--port", &port, "-w", &file, "--format", format, "--json",
        ],
    );
    cap.wait_ready();
    send(&net, COUNT);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (j, log) = if stop_with_term {
        cap.terminate()
    } else {
        cap.interrupt()
    };
    assert_counts_add_up(&j);
    let kernel_drops = n(&j, "dropped_by_kernel");
    let veth_drops = net.veth_drops();
    // Every packet sent is received or counted as dropped somewhere...
    assert_eq!(n(&j, "received") + kernel_drops, COUNT, "{j}\n{log}");
    // ...and at this rate none is dropped at all.
    assert_eq!(
        (kernel_drops, veth_drops, n(&j, "dropped_by_writer")),
        (0, 0, 0),
        "{j}"
    );
    assert_eq!(n(&j, "written"), COUNT, "{j}");
    assert_eq!(
        judge(&file),
        (COUNT, COUNT * FRAME_LEN),
        "{backend} {format}"
    );
    if format == "pcapng" {
        assert_eq!(isb_counts(&std::fs::read(&file).unwrap()), (COUNT, 0));
        // The interface description names the interface and the snap length.
        let info = must(&["capinfos", &file]);
        assert!(info.contains(&format!("Name = {}", net.b)), "{info}");
        assert!(info.contains("Capture length = 262144"), "{info}");
        assert!(info.contains("nanoseconds (9)"), "{info}");
    }
    net.assert_no_xdp();
}

#[test]
fn xdp_captures_100k_to_pcapng() {
    capture_100k("cx1", "xdp", "pcapng", false);
}

#[test]
fn xdp_captures_100k_to_pcap_stopped_by_sigterm() {
    capture_100k("cx2", "xdp", "pcap", true);
}

#[test]
fn packet_captures_100k_to_pcapng_stopped_by_sigterm() {
    capture_100k("cp1", "packet", "pcapng", true);
}

#[test]
fn packet_captures_100k_to_pcap() {
    capture_100k("cp2", "packet", "pcap", false);
}

/// A capture stopped right after the last packet arrived still writes it: TPACKET_V3 hands a
/// partly filled block to user space only when the kernel retires it, a jiffy or more later.
#[test]
fn a_capture_interrupted_at_once_keeps_what_arrived_before() {
    let _one = serial();
    let net = NetPair::new("ci");
    net.address("10.7.1.1/24", "10.7.1.2/24");
    let dir = TempDir::new("interrupted");
    let port = format!("packet:{}", net.b);
    for round in 0..6 {
        let file = dir.path(&format!("{round}.pcap"));
        let argv = [
            "capture", "--port", &port, "-Q", "inout", "-w", &file, "--json", "icmp",
        ];
        let mut cap = spawn_in(&net.ns_b, &argv);
        cap.wait_ready();
        // One shell: SIGINT a moment after ping's reply (a test's own kill comes later).
        let script = format!(
            "ip netns exec {} ping -n -c 1 -W 1 10.7.1.2 >/dev/null && kill -INT {}",
            net.ns_a,
            cap.pid()
        );
        must(&["sh", "-c", &script]);
        let (j, log) = cap.finish();
        assert_counts_add_up(&j);
        // The request and the reply.
        assert_eq!(n(&j, "written"), 2, "round {round}: {j}\n{log}");
        assert_eq!(judge(&file).0, 2, "round {round}");
    }
}

#[test]
fn xdp_captures_every_queue_unless_the_spec_names_one() {
    let _one = serial();
    let net = NetPair::with_queues("cq", 3);
    let dir = TempDir::new("queues");
    // Queue q carries 1000 * (q + 1) packets, so each count says which queues were captured.
    let sent = |q: u32| 1000 * (q as u64 + 1);
    let all = sent(0) + sent(1) + sent(2);
    let cases = [
        // tcpdump's way: -i and a bare interface name.
        ("-i", net.b.clone(), all),
        ("--port", format!("xdp:{}", net.b), all),
        ("--port", format!("xdp:{}@all", net.b), all),
        ("--port", format!("xdp:{}@2", net.b), sent(2)),
    ];
    for (i, (flag, port, want)) in cases.iter().enumerate() {
        let file = dir.path(&format!("q{i}.pcapng"));
        let mut cap = spawn_in(
            &net.ns_b,
            &["capture", flag, port, "-w", &file, "--json", "-n"],
        );
        cap.wait_ready();
        for q in 0..3 {
            send_on_queue(&net, q, sent(q));
        }
        std::thread::sleep(std::time::Duration::from_millis(1000));
        let (j, log) = cap.interrupt();
        assert_counts_add_up(&j);
        assert_eq!(
            (
                n(&j, "received"),
                n(&j, "written"),
                n(&j, "dropped_by_kernel")
            ),
            (*want, *want, 0),
            "{port}: {j}\n{log}"
        );
        assert_eq!(judge(&file), (*want, *want * FRAME_LEN), "{port}");
        let all = !port.ends_with("@2");
        let source = format!("xdp:{}@{}", net.b, if all { "all" } else { "2" });
        assert_eq!(j["source"], source, "{j}");
        assert_eq!(
            log.contains("receiving on all 3 queues"),
            all,
            "{port}: {log}"
        );
        net.assert_no_xdp();
    }
}

#[test]
fn xdp_takes_what_it_captures_and_asks_first_packet_only_watches() {
    let _one = serial();
    let net = NetPair::new("ct");
    net.address("10.7.0.1/24", "10.7.0.2/24");
    let dir = TempDir::new("take");
    let file = dir.path("refused.pcap");
    let out = run_in(&net.ns_b, &["capture", "-i", &net.b, "-w", &file]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let want = format!("{} has addresses (10.7.0.2): an xdp: capture takes", net.b);
    assert!(err.contains(&want) && err.contains("--take"), "{err}");
    assert!(!exists(&file), "no file is created");
    net.assert_no_xdp();
    // packet: watches: ping is answered, and the capture has the three requests (with -Q
    // inout the three replies too; `outbound` only those, `inbound` only the requests).
    // xdp: with --take takes them: the capture has them, B's stack never answers.
    let watch = format!("packet:{}", net.b);
    let index = must(&[
        "ip",
        "netns",
        "exec",
        &net.ns_b,
        "cat",
        &format!("/sys/class/net/{}/ifindex", net.b),
    ]);
    let (this_if, other_if) = (
        format!("icmp and ifindex {}", index.trim()),
        format!(
            "icmp and ifindex {}",
            index.trim().parse::<u32>().unwrap() + 1
        ),
    );
    for (i, (how, expr, replies, written)) in [
        (vec!["--port", &watch, "-n"], "icmp", 3, 3),
        (vec!["--port", &watch, "-Q", "inout"], "icmp", 3, 6),
        (
            vec!["--port", &watch, "-Q", "inout"],
            "icmp and outbound",
            3,
            3,
        ),
        (
            vec!["--port", &watch, "-Q", "inout"],
            "icmp and inbound",
            3,
            3,
        ),
        (vec!["-i", &net.b, "--take"], "icmp", 0, 3),
        (vec!["-i", &net.b, "--take"], "icmp and inbound", 0, 3),
        (vec!["-i", &net.b, "--take"], &this_if, 0, 3),
        (vec!["-i", &net.b, "--take"], &other_if, 0, 0),
    ]
    .into_iter()
    .enumerate()
    {
        let file = dir.path(&format!("case-{i}.pcap"));
        let mut argv = vec!["capture"];
        argv.extend(how);
        argv.extend(["-w", &file, "--json", expr]);
        let mut cap = spawn_in(&net.ns_b, &argv);
        cap.wait_ready();
        assert_eq!(ping(&net.ns_a, "10.7.0.2", 3), replies, "{argv:?}");
        let (j, log) = cap.interrupt();
        assert_eq!(n(&j, "written"), written, "{argv:?}: {j}\n{log}");
        assert_eq!(judge(&file).0, written, "{argv:?}");
    }
    let out = run_in(
        &net.ns_b,
        &["capture", "-i", &net.b, "--take", "-Q", "inout", "-c", "1"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("-Q inout: xdp:"), "{err}");
    net.assert_no_xdp();
}

/// A capture on an interface that is down says so (tcpdump refuses one), and takes what
/// arrives once it is up.
#[test]
fn a_capture_on_a_down_interface_says_so_and_waits_for_it() {
    let _one = serial();
    let net = NetPair::new("cd");
    must(&["ip", "-n", &net.ns_b, "link", "set", &net.b, "down"]);
    let port = format!("xdp:{}", net.b);
    let cap = spawn_in(
        &net.ns_b,
        &[
            "capture",
            "--port",
            &port,
            "-w",
            "/dev/null",
            "-c",
            "100",
            "--json",
        ],
    );
    let mut cap = cap;
    cap.wait_ready();
    // A quiet port's interface is looked at once a second.
    std::thread::sleep(std::time::Duration::from_millis(3000));
    must(&["ip", "-n", &net.ns_b, "link", "set", &net.b, "up"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    send(&net, 500);
    let (j, log) = cap.finish();
    assert!(
        log.contains(&format!(
            "wirespeed: {port}: the interface is down (or has no carrier): nothing arrives \
             until it is up"
        )),
        "{log}"
    );
    assert_eq!(n(&j, "written"), 100, "{j}");
}

/// SIGUSR1 prints the counts so far and the capture goes on, as tcpdump's does.
#[test]
fn sigusr1_prints_the_counts_so_far_and_the_capture_goes_on() {
    let _one = serial();
    let net = NetPair::new("cu");
    let port = format!("xdp:{}", net.b);
    let mut cap = spawn_in(
        &net.ns_b,
        &[
            "capture",
            "--port",
            &port,
            "-w",
            "/dev/null",
            "--json",
            "udp",
        ],
    );
    cap.wait_ready();
    send(&net, 1000);
    // The counts a thread publishes once it goes idle.
    std::thread::sleep(std::time::Duration::from_millis(500));
    must(&["kill", "-USR1", &cap.pid().to_string()]);
    for line in [
        "1000 packets received",
        "1000 packets matched by filter",
        "1000 packets written",
        "0 packets dropped by kernel or ring",
    ] {
        cap.wait_for(line);
    }
    send(&net, 500);
    let (j, _) = cap.interrupt();
    assert_eq!(n(&j, "received"), 1500, "{j}");
    assert_eq!(n(&j, "written"), 1500, "{j}");
}

#[test]
fn count_ends_the_capture_with_a_valid_file() {
    let _one = serial();
    for backend in ["xdp", "packet"] {
        let net = NetPair::new("cc");
        let dir = TempDir::new("count");
        let file = dir.path("first.pcapng");
        let port = format!("{backend}:{}", net.b);
        let cap = spawn_in(
            &net.ns_b,
            &[
                "capture", "--port", &port, "-w", &file, "-c", "1000", "--json",
            ],
        );
        let mut cap = cap;
        cap.wait_ready();
        send(&net, 5000);
        let (j, _) = cap.finish();
        assert_counts_add_up(&j);
        assert_eq!(n(&j, "written"), 1000, "{backend}: {j}");
        assert_eq!(judge(&file), (1000, 1000 * FRAME_LEN), "{backend}");
    }
}

#[test]
fn packet_backend_filters_in_the_kernel_too() {
    let _one = serial();
    let net = NetPair::new("ck");
    let dir = TempDir::new("kernel-filter");
    let port = format!("packet:{}", net.b);
    let (keep, skip) = (dir.path("keep.pcap"), dir.path("skip.pcap"));
    let mut a = spawn_in(
        &net.ns_b,
        &[
            "capture", "--port", &port, "-w", &keep, "--json", "udp", "dst", "port", "9",
        ],
    );
    let mut b = spawn_in(
        &net.ns_b,
        &[
            "capture",
            "--port",
            &port,
            "-w",
            &skip,
            "--json",
            "udp port 10",
        ],
    );
    a.wait_ready();
    b.wait_ready();
    send(&net, 10_000);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (ja, _) = a.interrupt();
    let (jb, _) = b.interrupt();
    assert_eq!(ja["filter_location"], "user+kernel", "{ja}");
    assert_eq!(
        (n(&ja, "received"), n(&ja, "written")),
        (10_000, 10_000),
        "{ja}"
    );
    // The kernel rejected every packet: none even reached the ring.
    assert_eq!((n(&jb, "received"), n(&jb, "written")), (0, 0), "{jb}");
    assert_eq!(judge(&keep).0, 10_000);
    assert_eq!(judge(&skip).0, 0);
}

/// Mixed frames (VLAN-tagged, IPv6, ARP...) replayed over the veth: each backend's filtered
/// capture holds exactly the frames tcpdump selects. An xdp: capture filters the frames as
/// they came, tags in their bytes, as tcpdump filters the replayed file; a packet: capture
/// as tcpdump live on the same interface (the kernel takes the outer tag out before the
/// filter: `ip6 or arp` takes tagged IPv6 too), with tcpdump beside it.
#[test]
fn replayed_mixed_traffic_is_filtered_like_tcpdump() {
    let _one = serial();
    let dir = TempDir::new("replay");
    let input = dir.path("mixed.pcap");
    let frames = mixed_frames(600);
    let records: Vec<Rec> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            (
                1_700_000_000_000_000_000 + i as u64 * 1000,
                f.clone(),
                f.len() as u32,
            )
        })
        .collect();
    write_capture(&input, Format::Pcap, &records);
    for backend in ["xdp", "packet"] {
        for expr in [
            "vlan 100 and udp",
            "ip6 or arp",
            "tcp[tcpflags] & tcp-syn != 0",
        ] {
            let net = NetPair::new("cr");
            let out = dir.path("live.pcap");
            let port = format!("{backend}:{}", net.b);
            let mut cap = spawn_in(
                &net.ns_b,
                &[
                    "capture", "--port", &port, "-w", &out, "--format", "pcap", "--json", expr,
                ],
            );
            cap.wait_ready();
            let reference = dir.path("tcpdump.pcap");
            let live = (backend == "packet").then(|| {
                Capture::tcpdump_filtered(&net.ns_b, &net.b, "in", &reference, Some(expr))
            });
            let replay = run_in(
                &net.ns_a,
                &[
                    "gen",
                    "--port",
                    &format!("xdp:{}", net.a),
                    "--pcap",
                    &input,
                    "--fast",
                    "--rate",
                    "50000",
                    "-q",
                ],
            );
            assert!(
                replay.status.success(),
                "{}",
                String::from_utf8_lossy(&replay.stderr)
            );
            std::thread::sleep(std::time::Duration::from_millis(500));
            let (j, _) = cap.interrupt();
            assert_counts_add_up(&j);
            let got: Vec<Vec<u8>> = read_records(&out).into_iter().map(|r| r.1).collect();
            let want: Vec<Vec<u8>> = match live {
                Some(tcpdump) => {
                    let seen = tcpdump.stop(false);
                    assert_eq!(seen.dropped_by_tcpdump, 0, "{backend} '{expr}'");
                    seen.frames
                }
                None => tcpdump_select(&input, expr, &dir)
                    .into_iter()
                    .map(|r| r.1)
                    .collect(),
            };
            assert!(!want.is_empty());
            assert_eq!(got.len(), want.len(), "{backend} '{expr}': {j}");
            assert!(
                got == want,
                "{backend} '{expr}': other frames than tcpdump's"
            );
            // Live, tagged IPv6 and ARP frames match too (as a file, they never do).
            let tagged = got.iter().filter(|f| f[12..14] == [0x81, 0]).count();
            match (backend, expr) {
                ("packet", "ip6 or arp") => assert!(tagged > 0, "{j}"),
                (_, "ip6 or arp") => assert_eq!(tagged, 0, "{j}"),
                _ => {}
            }
        }
    }
}

/// A disk that fills during a live capture: the capture stops by itself, exits non-zero with
/// the file named in a clear error, and the file is valid with exactly the packets it reports.
#[test]
fn a_full_disk_stops_a_live_capture_with_a_valid_file() {
    let _one = serial();
    let net = NetPair::new("cf");
    let dir = TempDir::new("live-full");
    let mnt = dir.path("small");
    let _disk = SmallDisk::mount(&mnt, "256k");
    let file = format!("{mnt}/live.pcapng");
    let port = format!("xdp:{}", net.b);
    let mut cap = spawn_in(
        &net.ns_b,
        &["capture", "--port", &port, "-w", &file, "--json"],
    );
    cap.wait_ready();
    send(&net, 20_000);
    let (code, stdout, log) = cap.exit();
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("No space left on device") && log.contains(&file),
        "{log}"
    );
    let j: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_counts_add_up(&j);
    let written = n(&j, "written");
    assert!(written > 1000 && written < 20_000, "{j}");
    assert_eq!(judge(&file), (written, written * FRAME_LEN));
}

/// Runs a capture of `net`'s B end into `file` with 256 RX entries, 512 frames in the fill
/// ring and `extra` flags, stopped with SIGSTOP while 2000 packets are sent, then let go;
/// returns its counts (checked to add up) and its log.
fn stopped_capture(net: &NetPair, file: &str, extra: &[&str]) -> (serde_json::Value, String) {
    let port = format!("xdp:{}", net.b);
    let mut argv = vec![
        "capture",
        "--port",
        &port,
        "-w",
        file,
        "--frames",
        "2048",
        "--ring-size",
        "256",
        "--json",
    ];
    argv.extend_from_slice(extra);
    let mut cap = spawn_in(&net.ns_b, &argv);
    cap.wait_ready();
    let pid = cap.pid().to_string();
    must(&["kill", "-STOP", &pid]);
    let sent = gen_in_a(net, &["--count", "2000", "--rate", "100000"]);
    assert_eq!(sent["packets"].as_u64(), Some(2000), "{sent}");
    must(&["kill", "-CONT", &pid]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (j, log) = cap.interrupt();
    assert_counts_add_up(&j);
    (j, log)
}

#[test]
fn kernel_drops_reach_the_counts_and_the_file() {
    let _one = serial();
    let net = NetPair::new("cd");
    let dir = TempDir::new("cd");
    let file = dir.path("stopped.pcapng");
    // No spill ring: while the capture is stopped, the kernel fills the RX ring and turns
    // the rest away.
    let (j, log) = stopped_capture(&net, &file, &["--spill-mib", "0"]);
    assert_eq!(
        (
            n(&j, "received"),
            n(&j, "dropped_by_kernel"),
            n(&j, "written")
        ),
        (256, 1744, 256),
        "{j}\n{log}"
    );
    assert_eq!(
        ethtool_stat(&net.ns_b, &net.b, "rx_queue_0_drops"),
        1744,
        "veth's failed redirects"
    );
    assert_eq!(judge(&file), (256, 256 * FRAME_LEN));
    assert_eq!(
        isb_counts(&std::fs::read(&file).unwrap()),
        (256, 1744),
        "isb_ifrecv and isb_ifdrop"
    );
    net.assert_no_xdp();
}

#[test]
fn a_stopped_capture_loses_nothing_with_its_spill_ring() {
    let _one = serial();
    let net = NetPair::new("cs");
    let dir = TempDir::new("cs");
    let file = dir.path("stopped.pcapng");
    // The default spill ring holds what the rings cannot while the capture is stopped.
    let (j, log) = stopped_capture(&net, &file, &[]);
    assert_eq!(
        (
            n(&j, "received"),
            n(&j, "dropped_by_kernel"),
            n(&j, "written")
        ),
        (2000, 0, 2000),
        "{j}\n{log}"
    );
    // The RX ring held at most 256 - 128 (the program keeps a NAPI poll's room).
    assert!(n(&j, "spilled") >= 2000 - 128, "{j}");
    assert_eq!(ethtool_stat(&net.ns_b, &net.b, "rx_queue_0_drops"), 0);
    assert_eq!(judge(&file), (2000, 2000 * FRAME_LEN));
    net.assert_no_xdp();
}

/// `-w -` into a pipe: each packet's record reaches the reader when it is captured, not when
/// the next packet comes (as `tcpdump -U -w - | tcpdump -r -` shows each at once).
#[test]
fn a_packet_written_to_a_pipe_reaches_its_reader_before_the_next() {
    use std::io::Read;
    let _one = serial();
    let net = NetPair::new("cp");
    let port = format!("packet:{}", net.b);
    let mut cap = spawn_in(
        &net.ns_b,
        &["capture", "--port", &port, "-w", "-", "--format", "pcap"],
    );
    let mut out = cap.take_stdout();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = out.read(&mut buf) {
            if tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    cap.wait_ready();
    const HEADER: usize = 24;
    const RECORD: usize = 16 + FRAME_LEN as usize;
    let mut got = Vec::new();
    for packets in 1..=2 {
        send(&net, 1);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.len() < HEADER + packets * RECORD && std::time::Instant::now() < until {
            if let Ok(bytes) = rx.recv_timeout(std::time::Duration::from_millis(50)) {
                got.extend(bytes);
            }
        }
        assert_eq!(
            got.len(),
            HEADER + packets * RECORD,
            "packet {packets}: the pipe holds the header and {packets} whole records"
        );
    }
    must(&["kill", "-INT", &cap.pid().to_string()]);
    let (code, _, log) = cap.exit();
    assert_eq!(code, Some(0), "{log}");
    while let Ok(bytes) = rx.recv_timeout(std::time::Duration::from_millis(200)) {
        got.extend(bytes);
    }
    assert_eq!(
        got.len(),
        HEADER + 2 * RECORD,
        "nothing more at the end: {log}"
    );
    assert_eq!(
        &got[..4],
        &0xa1b2_3c4du32.to_le_bytes(),
        "a pcap header (nanosecond) first"
    );
}
