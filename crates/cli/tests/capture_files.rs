//! Capture files judged by the real tools: every file we write (pcap and pcapng, from a file
//! or to standard output) is read by tcpdump, tshark and capinfos with the exact packet count
//! and bytes; a full disk leaves a valid file and a clear error; lines print like tcpdump -n
//! and tcpdump -n -e.

mod common;

use std::process::{Child, Command, Stdio};

use common::pcaps::*;
use wirespeed_capture::write::Format;

fn total_bytes(recs: &[Rec]) -> u64 {
    recs.iter().map(|r| r.1.len() as u64).sum()
}

/// The interface name tshark reads for a file's first packet (empty when none).
fn interface_name(path: &str) -> String {
    let out = Command::new("tshark")
        .args([
            "-r",
            path,
            "-c",
            "1",
            "-T",
            "fields",
            "-e",
            "frame.interface_name",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "tshark -r {path}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn rewritten_files_are_read_by_tcpdump_tshark_and_capinfos() {
    let dir = TempDir::new("files");
    let records = mixed_records(3000);
    for in_format in [Format::Pcap, Format::Pcapng] {
        let input = dir.path("in.cap");
        write_capture(&input, in_format, &records);
        assert_eq!(judge(&input), (3000, total_bytes(&records)));
        for out_format in ["pcap", "pcapng"] {
            let out = dir.path(&format!("out.{out_format}"));
            let (code, _, err) =
                wirespeed_out(&["capture", "-r", &input, "-w", &out, "--format", out_format]);
            assert_eq!(code, Some(0), "{err}");
            assert_eq!(judge(&out), (3000, total_bytes(&records)), "{out_format}");
            // A pcapng file's interface name carries over into pcapng (tshark reads it; a
            // pcap file names none).
            if out_format == "pcapng" {
                let name = match in_format {
                    Format::Pcapng => "test0",
                    Format::Pcap => "unknown",
                };
                assert_eq!(interface_name(&out), name, "from {in_format:?}");
            }
            assert_eq!(
                read_records(&out),
                records,
                "{out_format}: not the same packets"
            );
        }
    }
}

#[test]
fn pcapng_carries_nanoseconds_interface_and_statistics() {
    let dir = TempDir::new("files-ng");
    let input = dir.path("in.pcap");
    let mut records = mixed_records(10);
    records[1].0 += 123_456_789; // a timestamp with nanoseconds
    write_capture(&input, Format::Pcap, &records);
    let out = dir.path("out.pcapng");
    let (code, _, err) = wirespeed_out(&["capture", "-r", &input, "-w", &out, "-s", "96"]);
    assert_eq!(code, Some(0), "{err}");
    let info = Command::new("capinfos").arg(&out).output().unwrap();
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(info.contains("nanoseconds (9)"), "{info}");
    assert!(info.contains("Capture length = 96"), "{info}");
    assert!(info.contains("Number of stat entries = 1"), "{info}");
    let got = read_records(&out);
    assert_eq!(got[1].0, records[1].0, "nanoseconds survive");
    for (g, r) in got.iter().zip(&records) {
        assert_eq!(g.1[..], r.1[..r.1.len().min(96)], "cut at the snap length");
        assert_eq!(g.2, r.2, "the wire length is kept");
    }
    // The last block is the interface statistics: 10 received, none dropped.
    let (ifrecv, ifdrop) = isb_counts(&std::fs::read(&out).unwrap());
    assert_eq!((ifrecv, ifdrop), (10, 0));
}

#[test]
fn pcap_has_the_nanosecond_magic() {
    let dir = TempDir::new("files-magic");
    let input = dir.path("in.pcapng");
    write_capture(&input, Format::Pcapng, &mixed_records(5));
    let out = dir.path("out.pcap");
    let (code, _, err) = wirespeed_out(&["capture", "-r", &input, "-w", &out, "--format", "pcap"]);
    assert_eq!(code, Some(0), "{err}");
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(
        u32::from_le_bytes(bytes[..4].try_into().unwrap()),
        0xa1b2_3c4d
    );
    assert_eq!(judge(&out).0, 5);
}

#[test]
fn without_format_a_pcap_name_gets_pcap_and_any_other_pcapng() {
    let dir = TempDir::new("files-ext");
    let input = dir.path("in.pcapng");
    write_capture(&input, Format::Pcapng, &mixed_records(5));
    const PCAP_NS: u32 = 0xa1b2_3c4d;
    const PCAPNG: u32 = 0x0a0d_0d0a;
    for (name, format, magic) in [
        ("a.pcap", None, PCAP_NS),
        ("b.PCAP", None, PCAP_NS),
        ("c.pcapng", None, PCAPNG),
        ("d.cap", None, PCAPNG),
        ("e", None, PCAPNG),
        // --format wins over the name.
        ("f.pcap", Some("pcapng"), PCAPNG),
        ("g.pcapng", Some("pcap"), PCAP_NS),
    ] {
        let out = dir.path(name);
        let mut args = vec!["capture", "-r", &input, "-w", &out];
        if let Some(f) = format {
            args.extend(["--format", f]);
        }
        let (code, _, err) = wirespeed_out(&args);
        assert_eq!(code, Some(0), "{name}: {err}");
        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(
            u32::from_le_bytes(bytes[..4].try_into().unwrap()),
            magic,
            "{name} with --format {format:?}"
        );
        assert_eq!(judge(&out).0, 5, "{name}");
    }
}

#[test]
fn standard_output_is_a_valid_stream() {
    let dir = TempDir::new("files-stdout");
    let input = dir.path("in.pcap");
    let records = mixed_records(700);
    write_capture(&input, Format::Pcap, &records);
    for format in ["pcap", "pcapng"] {
        let out = Command::new(common::wirespeed())
            .args([
                "capture", "-r", &input, "-w", "-", "--format", format, "-c", "500",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let file = dir.path("from-stdout.cap");
        std::fs::write(&file, &out.stdout).unwrap();
        assert_eq!(
            judge(&file),
            (500, total_bytes(&records[..500])),
            "{format}"
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("500 packets written"), "{err}");
    }
}

#[test]
fn a_full_disk_leaves_a_valid_file_and_a_clear_error() {
    let dir = TempDir::new("files-full");
    let input = dir.path("in.pcap");
    let records = mixed_records(3000);
    write_capture(&input, Format::Pcap, &records);
    let mnt = dir.path("small");
    let _disk = common::SmallDisk::mount(&mnt, "256k");
    for format in ["pcap", "pcapng"] {
        let out = format!("{mnt}/out.{format}");
        let (code, stdout, err) = wirespeed_out(&[
            "capture", "-r", &input, "-w", &out, "--format", format, "--json",
        ]);
        assert_eq!(code, Some(1), "{format}: {err}");
        assert!(err.contains("No space left on device"), "{format}: {err}");
        assert!(err.contains(&out), "the error names the file: {err}");
        let j: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
        let written = j["written"].as_u64().unwrap();
        assert!(written > 100 && written < 3000, "{j}");
        assert_eq!(j["matched"].as_u64(), Some(3000));
        assert_eq!(
            written + j["dropped_by_writer"].as_u64().unwrap(),
            3000,
            "{j}"
        );
        // Valid up to the last whole packet, and it holds exactly what we said we wrote.
        let (packets, bytes) = judge(&out);
        assert_eq!(
            (packets, bytes),
            (written, total_bytes(&records[..written as usize]))
        );
        std::fs::remove_file(&out).unwrap();
    }
}

#[test]
fn an_output_that_cannot_be_created_is_an_error_before_anything_else() {
    let dir = TempDir::new("files-nodir");
    let input = dir.path("in.pcap");
    write_capture(&input, Format::Pcap, &mixed_records(5));
    let (code, _, err) =
        wirespeed_out(&["capture", "-r", &input, "-w", "/nonexistent/dir/out.pcap"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("/nonexistent/dir/out.pcap"), "{err}");
    let (code, _, err) = wirespeed_out(&["capture", "-r", &dir.path("missing.pcap")]);
    assert_eq!(code, Some(1));
    assert!(err.contains("missing.pcap: cannot open"), "{err}");
}

#[test]
fn a_frame_size_other_than_2048_or_4096_is_refused_before_anything_is_written() {
    let dir = TempDir::new("files-framesize");
    let out = dir.path("out.pcap");
    let (code, _, err) = wirespeed_out(&[
        "capture",
        "-i",
        "wsnothere0",
        "-w",
        &out,
        "--frame-size",
        "3000",
    ]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("--frame-size 3000: frame size must be 2048 or 4096"),
        "{err}"
    );
    assert!(!std::path::Path::new(&out).exists(), "no file is created");
}

/// What only a live capture uses is refused with -r, not ignored; and -w naming the file
/// -r reads (or a link to it) is refused before it is truncated (it was, and the read
/// then ended "truncated", the input gone).
#[test]
fn reading_a_file_refuses_live_options_and_writing_over_itself() {
    let dir = TempDir::new("files-live-opts");
    let input = dir.path("in.pcap");
    let records = mixed_records(5000);
    write_capture(&input, Format::Pcap, &records);
    let before = std::fs::read(&input).unwrap();
    for flags in [
        &["--duration", "1"][..],
        &["--take"],
        &["-Q", "inout"],
        &["--xdp-mode", "skb"],
        &["--ring-size", "4096"],
        &["--frames", "8192"],
        &["--frame-size", "4096"],
        &["--spill-mib", "0"],
        &["--busy-poll"],
        &["--force"],
        &["--no-kernel-filter"],
        &["--batch", "32"],
    ] {
        let mut args = vec!["capture", "-r", &input];
        args.extend_from_slice(flags);
        let (code, _, err) = wirespeed_out(&args);
        assert_eq!(code, Some(2), "{flags:?}: {err}");
        assert!(
            err.contains(&format!(
                "the argument '-r <FILE>' cannot be used with '{}",
                flags[0]
            )),
            "{flags:?}: {err}"
        );
    }
    let link = dir.path("link.pcap");
    std::os::unix::fs::symlink(&input, &link).unwrap();
    for out in [&input, &link] {
        let (code, _, err) = wirespeed_out(&["capture", "-r", &input, "-w", out]);
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains(&format!(
                "-r {input} and -w {out} are one file: writing would destroy what is being read"
            )),
            "{err}"
        );
        assert_eq!(
            std::fs::read(&input).unwrap(),
            before,
            "the input is untouched"
        );
    }
}

/// Frames whose tcpdump -n and -n -e lines we print the same way (no application decoding),
/// truncated headers included.
fn plain_frames() -> Vec<Rec> {
    let udp_v4 = ipv4(
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        17,
        0x4000,
        0,
        &udp(1024, 9, &[0; 18]),
    );
    let frames = vec![
        eth(
            MAC_B,
            MAC_A,
            &[],
            0x0800,
            &ipv4(
                [10, 0, 0, 1],
                [10, 0, 0, 2],
                17,
                0x4000,
                0,
                &udp(1024, 9, &[0; 18]),
            ),
        ),
        eth(
            MAC_B,
            MAC_A,
            &[],
            0x0800,
            &ipv4(
                [10, 0, 0, 1],
                [10, 0, 0, 2],
                6,
                0x4000,
                0,
                &tcp(40000, 8080, 0x02, &[]),
            ),
        ),
        eth(
            MAC_B,
            MAC_A,
            &[],
            0x0800,
            &ipv4(
                [10, 0, 0, 2],
                [10, 0, 0, 1],
                6,
                0x4000,
                0,
                &tcp(8080, 40000, 0x12, &[]),
            ),
        ),
        eth(
            MAC_B,
            MAC_A,
            &[],
            0x0800,
            &ipv4(
                [10, 0, 0, 1],
                [10, 0, 0, 2],
                6,
                0x4000,
                0,
                &tcp(40001, 5001, 0x18, &[1; 10]),
            ),
        ),
        eth(
            MAC_B,
            MAC_A,
            &[],
            0x0800,
            &ipv4([10, 0, 0, 1], [10, 0, 0, 2], 1, 0, 0, &icmp(8, 0, &[0; 56])),
        ),
        eth(
            MAC_B,
            MAC_A,
            &[],
            0x0800,
            &ipv4([10, 0, 0, 2], [10, 0, 0, 1], 1, 0, 0, &icmp(0, 0, &[0; 56])),
        ),
        eth(
            BROADCAST,
            MAC_A,
            &[],
            0x0806,
            &arp(1, MAC_A, [10, 0, 0, 1], [10, 0, 0, 2]),
        ),
        eth(
            MAC_B,
            MAC_A,
            &[],
            0x0806,
            &arp(2, MAC_A, [10, 0, 0, 2], [10, 0, 0, 1]),
        ),
        eth(
            MAC_B,
            MAC_A,
            &[],
            0x86dd,
            &ipv6(
                [0xfd00, 0, 0, 0, 0, 0, 0, 1],
                [0xfd00, 0, 0, 0, 0, 0, 0, 2],
                17,
                &udp(1024, 9, &[0; 30]),
            ),
        ),
        eth(
            MAC_B,
            MAC_A,
            &[(0x8100, 100)],
            0x0800,
            &ipv4(
                [10, 0, 0, 1],
                [10, 0, 0, 2],
                17,
                0x4000,
                0,
                &udp(1024, 9, &[0; 18]),
            ),
        ),
        // Priority 5 and drop eligible; QinQ (802.1ad outside 802.1Q); the old QinQ types.
        eth(MAC_B, MAC_A, &[(0x8100, 0xb000 | 7)], 0x0800, &udp_v4),
        eth(
            MAC_B,
            MAC_A,
            &[(0x88a8, 10), (0x8100, 100)],
            0x0800,
            &udp_v4,
        ),
        eth(MAC_B, MAC_A, &[(0x9100, 5)], 0x0800, &udp_v4),
        eth(MAC_B, MAC_A, &[(0x9200, 7)], 0x0800, &udp_v4),
        // Headers cut short: IPv4, IPv6, ARP, a VLAN tag.
        eth(MAC_B, MAC_A, &[], 0x0800, &udp_v4[..10]),
        eth(MAC_B, MAC_A, &[], 0x86dd, &[0x60, 0, 0, 0, 0, 0x26]),
        eth(MAC_B, MAC_A, &[(0x8100, 100)], 0x0806, &[0, 1, 8, 0]),
        eth(MAC_B, MAC_A, &[], 0x8100, &[0]),
    ];
    frames
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let len = f.len() as u32;
            (1_700_000_000_000_000_000 + i as u64 * 1_234_567_891, f, len)
        })
        .collect()
}

#[test]
fn lines_print_like_tcpdump_n_and_n_e() {
    let dir = TempDir::new("files-lines");
    let input = dir.path("plain.pcap");
    let frames = plain_frames();
    write_capture(&input, Format::Pcap, &frames);
    // Local time, as tcpdump prints it: UTC, then zones 5:30 east and 3 hours west (POSIX TZ
    // strings, so no time zone database is needed).
    let cases = [
        (&[][..], "UTC"),
        (&["-e"][..], "UTC"),
        (&[][..], "XYZ-5:30"),
        (&["-e"][..], "ABC+3"),
    ];
    for (link, tz) in cases {
        let ours = Command::new(common::wirespeed())
            .args(["capture", "-r", &input])
            .args(link)
            .env("TZ", tz)
            .stderr(Stdio::null())
            .output()
            .unwrap();
        let theirs = Command::new("tcpdump")
            .args(["-n", "-r", &input])
            .args(link)
            .env("TZ", tz)
            .stderr(Stdio::null())
            .output()
            .unwrap();
        let ours = String::from_utf8_lossy(&ours.stdout).into_owned();
        let theirs = String::from_utf8_lossy(&theirs.stdout).into_owned();
        assert_eq!(ours.lines().count(), frames.len(), "{link:?}: {ours}");
        assert_eq!(theirs.lines().count(), frames.len(), "{link:?}: {theirs}");
        for (a, b) in ours.lines().zip(theirs.lines()) {
            assert_eq!(a, b, "{link:?} TZ={tz}");
        }
    }
}

/// Ten mixed records as a pcap file's bytes, and `capture -r - -w OUT --json ARGS` in `dir`
/// reading its standard input from a pipe: the records, the bytes, OUT, and the capture.
fn reading_a_pipe(dir: &TempDir, args: &[&str]) -> (Vec<Rec>, Vec<u8>, String, Child) {
    let records = mixed_records(10);
    let input = dir.path("in.pcap");
    write_capture(&input, Format::Pcap, &records);
    let bytes = std::fs::read(&input).unwrap();
    let out = dir.path("out.pcap");
    let child = Command::new(common::wirespeed())
        .args(["capture", "-r", "-", "-w", &out, "--json"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (records, bytes, out, child)
}

/// `-r -` from a pipe that stays open but idle: SIGINT ends the capture at once, with every
/// whole record that came written (as the end of the input would), the part of the next
/// one that came dropped, exit 0.
#[test]
fn sigint_ends_a_read_of_an_idle_pipe_with_what_came() {
    use std::io::Write;
    use std::time::{Duration, Instant};

    let dir = TempDir::new("stdin-stop");
    let (records, bytes, out, mut child) = reading_a_pipe(&dir, &["--format", "pcap"]);
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(&bytes).unwrap();
    // Half of an eleventh record: its 16-byte header and 10 bytes of data.
    pipe.write_all(&bytes[24..24 + 26]).unwrap();
    pipe.flush().unwrap();
    std::thread::sleep(Duration::from_secs(1));
    common::must(&["kill", "-INT", &child.id().to_string()]);
    let until = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            panic!("capture -r - still waits on the idle pipe 10 s after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(pipe);
    let done = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(0), "{err}");
    let counts: serde_json::Value = serde_json::from_slice(&done.stdout).unwrap();
    assert_eq!(counts["received"], 10, "{counts}");
    assert_eq!(counts["written"], 10, "{counts}");
    assert_eq!(judge(&out), (10, total_bytes(&records)));
    assert_eq!(read_records(&out), records);
}

/// SIGUSR1 during `-r -` prints the counts so far (no kernel's line: a file drops nothing)
/// and the read goes on, as for a port; the signal's default would end the capture.
#[test]
fn sigusr1_during_a_read_prints_the_counts_so_far() {
    use std::io::Write;
    use std::time::Duration;

    let dir = TempDir::new("stdin-usr1");
    let (records, bytes, out, mut child) = reading_a_pipe(&dir, &[]);
    let mut pipe = child.stdin.take().unwrap();
    let usr1 = || common::must(&["kill", "-USR1", &child.id().to_string()]);
    // Before the file's header came, too.
    std::thread::sleep(Duration::from_millis(500));
    usr1();
    std::thread::sleep(Duration::from_millis(300));
    pipe.write_all(&bytes).unwrap();
    pipe.flush().unwrap();
    std::thread::sleep(Duration::from_secs(1));
    usr1();
    std::thread::sleep(Duration::from_millis(300));
    // The same records once more, without the file header.
    pipe.write_all(&bytes[24..]).unwrap();
    drop(pipe);
    let done = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(0), "{err}");
    assert!(
        err.starts_with("0 packets received\n0 packets matched (no filter)\n"),
        "{err}"
    );
    assert!(
        err.contains("\n10 packets received\n10 packets matched (no filter)\n"),
        "{err}"
    );
    assert!(!err.contains("kernel"), "{err}");
    let counts: serde_json::Value = serde_json::from_slice(&done.stdout).unwrap();
    assert_eq!(counts["received"], 20, "{counts}");
    assert_eq!(counts["written"], 20, "{counts}");
    assert_eq!(judge(&out), (20, 2 * total_bytes(&records)));
}

/// `capture ... | head`: the reader closing the pipe ends the capture quietly, as it ends
/// tcpdump, whether packets go out as a file (`-w -`) or as lines; the counts say so.
#[test]
fn a_reader_closing_the_pipe_ends_the_capture_quietly() {
    use std::io::Read;
    let dir = TempDir::new("epipe");
    let input = dir.path("in.pcap");
    let records = mixed_records(20_000);
    write_capture(&input, Format::Pcap, &records);
    // capture -r with `args`, its output's reader gone after 100 bytes: exit status, stderr.
    let closed_early = |args: &[&str]| {
        let mut child = Command::new(common::wirespeed())
            .args(["capture", "-r", &input])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut head = [0u8; 100];
        child.stdout.take().unwrap().read_exact(&mut head).unwrap();
        let done = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&done.stderr).into_owned();
        (done.status.code(), err)
    };
    for write in [&["--json", "-w", "-"][..], &["--json"][..]] {
        let (code, err) = closed_early(write);
        assert_eq!(code, Some(0), "{write:?}: {err}");
        assert!(!err.contains("wirespeed: error"), "{write:?}: {err}");
        let json = err
            .lines()
            .rfind(|l| l.starts_with('{'))
            .unwrap_or_default();
        let counts: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(counts["output_closed"], true, "{counts}");
        assert_eq!(counts["error"], serde_json::Value::Null, "{counts}");
        let written = counts["written"].as_u64().unwrap();
        assert!(written < 20_000, "{counts}");
        assert_eq!(
            counts["matched"].as_u64(),
            Some(written + counts["dropped_by_writer"].as_u64().unwrap()),
            "{counts}"
        );
    }
    // Without --json: what was not written is not called dropped, and the lines say why.
    let (code, err) = closed_early(&["-w", "-"]);
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[lines.len() - 1]
            .ends_with(" packets not written: the output's reader closed the pipe"),
        "{err}"
    );
    // A file loses nothing on the way: the writer dropped none, the rest were not written.
    assert_eq!(
        lines[lines.len() - 2],
        "0 packets dropped by writer",
        "{err}"
    );
    assert!(!err.contains("dropped by kernel"), "{err}");
}
