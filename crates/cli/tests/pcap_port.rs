//! The pcap backend in the tools: `gen` writes a file tshark finds clean and `recv` counts
//! whole; `bench l2fwd` forwards one file into another; a switch replays a file onto a veth
//! (tcpdump on the far side sees every frame) and records in a file what arrives from it;
//! `pcap:-` reads standard input and writes standard output, the tools' reports kept off it.
//! And, a port needing no network, gen's live lines and JSON summary. (Signals while a tool
//! runs are in `signals_while_running.rs`.)

mod common;
use common::pcaps::{self, MAC_A, MAC_B, Rec, TempDir};
use common::tshark::{tshark_fields, tshark_problems};
use common::*;
use wirespeed_capture::write::Format;

#[test]
fn gen_writes_a_clean_file_and_recv_counts_it_whole() {
    let dir = TempDir::new("pgen");
    let file = dir.path("gen.pcapng");
    let port = format!("pcap:{file}");
    let j = run_json_here(&[
        "gen", "--port", &port, "--count", "3000", "--flows", "8", "--size", "64-1500", "--json",
        "-q",
    ]);
    assert_eq!(j["packets"].as_u64(), Some(3000), "{j}");
    let bytes = j["bytes"].as_u64().unwrap();
    assert_eq!(pcaps::judge(&file), (3000, bytes));
    assert_eq!(
        tshark_problems(&file),
        "",
        "tshark found problems in {file}"
    );
    let ports = tshark_fields(&file, &["udp.srcport"]);
    let mut flows: Vec<&str> = ports.iter().map(|f| f[0].as_str()).collect();
    flows.sort();
    flows.dedup();
    assert_eq!(flows.len(), 8, "{flows:?}");

    let r = run_json_here(&["recv", "--port", &port, "--json", "-q"]);
    let g = &r["generators"][0];
    assert_eq!(g["received"].as_u64(), Some(3000), "{r}");
    assert_eq!(
        (
            g["lost"].as_u64(),
            g["duplicated"].as_u64(),
            g["reordered"].as_u64()
        ),
        (Some(0), Some(0), Some(0)),
        "{r}"
    );
    assert_eq!(r["not_test_frames"].as_u64(), Some(0), "{r}");

    // The kernel engine sends from an interface: refused, and no file is made.
    let none = dir.path("none.pcap");
    let out = std::process::Command::new(wirespeed())
        .args(["gen", "--engine", "kernel", "--count", "5", "--port"])
        .arg(format!("pcap:{none}"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("kernel"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!exists(&none));
}

/// Frames of several kinds from MAC_A to MAC_B (and one the other way), different lengths.
fn mixed_frames() -> Vec<Rec> {
    let mut recs = Vec::new();
    for i in 0..300u32 {
        let payload = vec![i as u8; (i % 50) as usize * 20];
        let (src, dst) = if i % 7 == 0 {
            (MAC_B, MAC_A)
        } else {
            (MAC_A, MAC_B)
        };
        let l4 = pcaps::udp(1000 + i as u16, 53, &payload);
        let ip = pcaps::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, 0, 0, &l4);
        let frame = pcaps::eth(dst, src, &[], 0x0800, &ip);
        recs.push((
            1_700_000_000_000_000_000 + u64::from(i) * 1000,
            frame.clone(),
            frame.len() as u32,
        ));
    }
    recs
}

#[test]
fn l2fwd_forwards_one_file_into_another() {
    let dir = TempDir::new("pfwd");
    let (inp, out) = (dir.path("in.pcap"), dir.path("out.pcap"));
    let sent = mixed_frames();
    pcaps::write_capture(&inp, Format::Pcap, &sent);
    let port = format!("pcap:rx={inp},tx={out}");
    let j = run_json_here(&["bench", "l2fwd", "--port", &port, "--json", "-q"]);
    assert_eq!(j["packets"].as_u64(), Some(300), "{j}");
    assert_eq!(j["drops_total"].as_u64(), Some(0), "{j}");
    let total: usize = sent.iter().map(|r| r.1.len()).sum();
    assert_eq!(pcaps::judge(&out), (300, total as u64));
    let got = pcaps::read_records(&out);
    for (i, ((_, want, _), (_, have, _))) in sent.iter().zip(&got).enumerate() {
        let mut swapped = want.clone();
        swapped[..6].copy_from_slice(&want[6..12]);
        swapped[6..12].copy_from_slice(&want[..6]);
        assert_eq!(have, &swapped, "frame {i}");
    }

    // An empty file: nothing forwarded, an empty capture out, no per-packet CPU figures.
    let empty = dir.path("empty.pcap");
    pcaps::write_capture(&empty, Format::Pcap, &[]);
    let port = format!("pcap:rx={empty},tx={out}");
    let j = run_json_here(&["bench", "l2fwd", "--port", &port, "--json", "-q"]);
    assert_eq!(j["packets"].as_u64(), Some(0), "{j}");
    assert!(j["cpu"]["user_ns_per_packet"].is_null(), "{j}");
    assert!(j["cpu"]["user_cycles_per_packet"].is_null(), "{j}");
    assert!(j["cpu"]["user_seconds"].as_f64().is_some(), "{j}");
    assert_eq!(pcaps::judge(&out), (0, 0));

    // A tool that both receives and sends needs both files named.
    let bare = format!("pcap:{inp}");
    let o = std::process::Command::new(wirespeed())
        .args(["bench", "l2fwd", "--port", &bare])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("pcap:rx=IN,tx=OUT"),
        "{err}"
    );
}

#[test]
fn standard_input_and_output_carry_capture_files() {
    let dir = TempDir::new("pstd");

    // gen into standard output: the capture there, the summary on standard error.
    let gen_args = [
        "gen", "--port", "pcap:-", "--count", "300", "--flows", "3", "--json", "-q",
    ];
    let (stdout, j) = pcaps::run_piped(&dir, None, &gen_args);
    assert_eq!(j["packets"].as_u64(), Some(300), "{j}");
    let generated = dir.path("gen.pcapng");
    std::fs::write(&generated, stdout).unwrap();
    assert_eq!(
        pcaps::judge(&generated),
        (300, j["bytes"].as_u64().unwrap())
    );
    assert!(!exists(&dir.path("-")), "no file named '-'");

    // l2fwd as a filter: a capture in on standard input, out on standard output.
    let inp = dir.path("in.pcap");
    let sent = mixed_frames();
    pcaps::write_capture(&inp, Format::Pcap, &sent);
    let fwd_args = ["bench", "l2fwd", "--port", "pcap:rx=-,tx=-", "--json", "-q"];
    let (stdout, j) = pcaps::run_piped(&dir, Some(&inp), &fwd_args);
    assert_eq!(j["packets"].as_u64(), Some(300), "{j}");
    let forwarded = dir.path("fwd.pcapng");
    std::fs::write(&forwarded, stdout).unwrap();
    let total: usize = sent.iter().map(|r| r.1.len()).sum();
    assert_eq!(pcaps::judge(&forwarded), (300, total as u64));
    let got = pcaps::read_records(&forwarded);
    for (i, ((_, want, _), (_, have, _))) in sent.iter().zip(&got).enumerate() {
        assert_eq!(
            (&have[..6], &have[6..12]),
            (&want[6..12], &want[..6]),
            "frame {i}"
        );
        assert_eq!(have[12..], want[12..], "frame {i}");
    }

    // Two ports cannot share standard output: refused before either writes a byte.
    let rx_tx = format!("pcap:rx={inp},tx=-");
    let o = std::process::Command::new(wirespeed())
        .current_dir(&dir.0)
        .args(["bench", "l2fwd", "--port", &rx_tx, "--peer-port", &rx_tx])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("2 ports write standard output ('-')"),
        "{err}"
    );
    assert!(o.stdout.is_empty(), "{err}");
}

#[test]
fn a_switch_replays_a_file_onto_a_veth_and_records_what_comes_back() {
    let net = NetPair::new("psw");
    let dir = TempDir::new("psw");
    let (inp, out) = (dir.path("in.pcap"), dir.path("out.pcapng"));
    let sent = mixed_frames();
    pcaps::write_capture(&inp, Format::Pcap, &sent);
    let flows = dir.path("flows");
    std::fs::write(
        &flows,
        "in_port=1,actions=output:2\nin_port=2,actions=output:1\n",
    )
    .unwrap();
    let id = std::process::id();
    let at_a =
        Capture::tcpdump_inbound(&net.ns_a, &net.a, &format!("/tmp/wirespeed-psw-{id}.pcap"));
    let p1 = format!("1=pcap:rx={inp},tx={out}");
    let p2 = format!("2=xdp:{}", net.b);
    let ctl = dir.path("ctl.sock");
    let mut switch = spawn_in(
        &net.ns_b,
        &[
            "switch", "--port", &p1, "--port", &p2, "--flows", &flows, "--ctl", &ctl, "--json",
        ],
    );
    switch.wait_ready();
    let seen = at_a.stop(false);
    assert_eq!(seen.dropped_by_tcpdump, 0);
    let want: Vec<&Vec<u8>> = sent.iter().map(|r| &r.1).collect();
    let have: Vec<&Vec<u8>> = seen.frames.iter().collect();
    assert_eq!(
        have, want,
        "tcpdump on the far side sees the file, frame for frame"
    );

    // From the veth into the recording: numbered frames from A.
    let a_port = format!("packet:{}", net.a);
    let g = run_json(
        &net.ns_a,
        &[
            "gen", "--port", &a_port, "--count", "500", "--rate", "50000", "--json", "-q",
        ],
    );
    assert_eq!(g["packets"].as_u64(), Some(500), "{g}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (j, _) = switch.terminate();
    let ports = &j["ports"];
    assert_eq!(ports[0]["rx_packets"].as_u64(), Some(300), "{j}");
    assert_eq!(ports[0]["tx_packets"].as_u64(), Some(500), "{j}");
    let recorded = pcaps::read_records(&out);
    let numbered = recorded
        .iter()
        .filter(|r| wirespeed_packet::read_test_payload(&r.1).is_some())
        .count();
    assert_eq!((recorded.len(), numbered), (500, 500));
    assert_eq!(pcaps::judge(&out).0, 500);
}

/// gen's progress: a live line each second on stderr (rate, total, drops), and at the end
/// one JSON object on stdout with the fields `bench` gives.
#[test]
fn gen_prints_a_line_a_second_and_one_json_summary() {
    let dir = TempDir::new("pgenlive");
    let port = format!("pcap:{}", dir.path("out.pcapng"));
    let out = std::process::Command::new(wirespeed())
        .args([
            "gen", "--port", &port, "--count", "2500", "--rate", "1000", "--json",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains(" tx ")).collect();
    assert!(lines.len() >= 2, "{err}");
    let mut last_total = 0;
    for (i, line) in lines.iter().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[0], format!("{}.0s", i + 1), "{line}");
        assert_eq!(
            (words[1], words[3], words[6], words[8]),
            ("tx", "Mpps", "total", "drops")
        );
        let total: u64 = words[7].parse().unwrap();
        assert!(total >= last_total && total <= 2500, "{err}");
        assert_eq!(words[9], "0", "{line}");
        last_total = total;
    }
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "mode", "port", "backend", "xdp_mode", "batch", "size", "seconds", "packets", "bytes",
        "mpps", "drops",
    ] {
        assert!(!j[key].is_null(), "{key} missing: {j}");
    }
    assert_eq!(j["packets"].as_u64(), Some(2500), "{j}");
    assert_eq!(j["port"].as_str(), Some(port.as_str()), "{j}");
    assert!(j["drops"].is_object(), "{j}");
}

/// A recording that fills its disk keeps every record the failed write got out whole, and
/// a closed pipe at the last write is an error naming standard output, not a quiet exit 0.
#[test]
fn a_failed_recording_keeps_its_whole_records_and_says_so() {
    let dir = TempDir::new("pfull");
    let mnt = dir.path("small");
    let _disk = SmallDisk::mount(&mnt, "512k");
    let file = format!("{mnt}/gen.pcap");
    let port = format!("pcap:{file}");
    let (code, _, err) = pcaps::wirespeed_out(&[
        "gen", "--port", &port, "--count", "5000", "--size", "1500", "-q",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "{file}: write the capture file: No space left on device"
        )),
        "{err}"
    );
    // The 24-byte header, then as many 16-byte record headers and 1496-byte frames as fit.
    let whole = (512 * 1024 - 24) / (16 + 1496);
    assert_eq!(pcaps::judge(&file), (whole, whole * 1496));

    // bench's tools too, where the one write is the last flush (less than 1 MiB in all).
    let input = dir.path("in.pcap");
    let (code, _, err) = pcaps::wirespeed_out(&[
        "gen",
        "--port",
        &format!("pcap:{input}"),
        "--count",
        "500",
        "--size",
        "1500",
        "-q",
    ]);
    assert_eq!(code, Some(0), "{err}");
    for (tool, out) in [("l2fwd", "l2fwd.pcap"), ("txpush", "txpush.pcap")] {
        let file = format!("{mnt}/{out}");
        let _ = std::fs::remove_file(format!("{mnt}/gen.pcap"));
        let port = match tool {
            "l2fwd" => format!("pcap:rx={input},tx={file}"),
            _ => format!("pcap:{file}"),
        };
        let (code, _, err) = pcaps::wirespeed_out(&[
            "bench", tool, "--port", &port, "--count", "500", "--size", "1500", "-q",
        ]);
        assert_eq!(code, Some(1), "{tool}: {err}");
        assert!(
            err.contains(&format!(
                "{file}: write the capture file: No space left on device"
            )),
            "{tool}: {err}"
        );
        assert_eq!(pcaps::judge(&file), (whole, whole * 1496), "{tool}");
        std::fs::remove_file(&file).unwrap();
    }

    // A reader that goes away ends the recording, as it ends `capture -w -`: said, not a
    // failure (it was "error: ... Broken pipe", exit 1).
    let piped = std::process::Command::new("bash")
        .args([
            "-c",
            &format!(
                "{} gen --port pcap:- --count 50000 -q | head -c 100 >/dev/null; \
                 exit ${{PIPESTATUS[0]}}",
                wirespeed()
            ),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&piped.stderr);
    assert_eq!(piped.status.code(), Some(0), "{err}");
    assert!(
        err.contains("the reader of standard output closed the pipe, which ended the run")
            && !err.contains("error:"),
        "{err}"
    );
    // What gen handed over is what was written and what was not: the batch whose write
    // failed counted once (it was left out of the packets handed over).
    let json = std::process::Command::new("bash")
        .args([
            "-c",
            &format!(
                "{} gen --port pcap:- --count 50000 --json -q | head -c 100 >/dev/null",
                wirespeed()
            ),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&json.stderr);
    let j: serde_json::Value = err
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no summary: {err}"));
    assert_eq!(j["output_closed"], true, "{j}");
    let (handed, written, lost) = (
        j["packets"].as_u64().unwrap(),
        j["tx_packets"].as_u64().unwrap(),
        j["drops"]["tx_error"].as_u64().unwrap(),
    );
    assert!(lost > 0 && written + lost == handed, "{j}");
    assert_eq!(j["not_sent"].as_u64(), Some(lost), "{j}");
}
