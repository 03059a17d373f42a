//! Rotation: -C, -C with -W, -G (with -W) produce the named files, each valid (judged by
//! tcpdump, tshark and capinfos) and none over its size, and together they hold every packet
//! in order.

mod common;

use common::pcaps::*;
use common::*;
use wirespeed_capture::write::Format;

/// Runs `capture -r input ARGS --json` and returns its JSON.
fn rotate(input: &str, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["capture", "-r", input];
    all.extend_from_slice(args);
    all.push("--json");
    let (code, out, err) = wirespeed_out(&all);
    assert_eq!(code, Some(0), "{args:?}: {err}");
    serde_json::from_str(out.trim()).unwrap()
}

fn files_of(j: &serde_json::Value) -> Vec<String> {
    j["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect()
}

/// The records of `files` one after another, each file judged and checked against `limit`.
fn judged_records(files: &[String], limit: Option<u64>) -> Vec<Rec> {
    let mut all = Vec::new();
    for f in files {
        let size = std::fs::metadata(f).unwrap().len();
        if let Some(limit) = limit {
            assert!(size <= limit, "{f}: {size} bytes, over {limit}");
        }
        let recs = read_records(f);
        let bytes: u64 = recs.iter().map(|r| r.1.len() as u64).sum();
        assert_eq!(judge(f), (recs.len() as u64, bytes), "{f}");
        all.extend(recs);
    }
    all
}

#[test]
fn size_rotation_names_files_like_tcpdump_and_keeps_each_within_its_size() {
    let dir = TempDir::new("rot-size");
    let input = dir.path("in.pcap");
    let records = mixed_records(10_000);
    write_capture(&input, Format::Pcap, &records);
    for format in ["pcap", "pcapng"] {
        let base = dir.path(&format!("out.{format}"));
        let j = rotate(&input, &["-w", &base, "--format", format, "-C", "0.2"]);
        let files = files_of(&j);
        let expected: Vec<String> = (0..files.len())
            .map(|i| {
                if i == 0 {
                    base.clone()
                } else {
                    format!("{base}{i}")
                }
            })
            .collect();
        assert_eq!(files, expected);
        assert!(files.len() >= 10, "{format}: {} files", files.len());
        assert_eq!(judged_records(&files, Some(200_000)), records, "{format}");
        assert_eq!(j["written"].as_u64(), Some(10_000));
        if format == "pcapng" {
            // Each file's statistics count the packets read up to its end.
            let mut read = 0;
            for f in &files {
                read += read_records(f).len() as u64;
                let bytes = std::fs::read(f).unwrap();
                assert_eq!(isb_counts(&bytes), (read, 0), "{f}");
            }
        }
    }
}

#[test]
fn a_ring_of_files_keeps_the_last_ones() {
    let dir = TempDir::new("rot-ring");
    let input = dir.path("in.pcapng");
    let records = mixed_records(10_000);
    write_capture(&input, Format::Pcapng, &records);
    let base = dir.path("ring.pcapng");
    let j = rotate(&input, &["-w", &base, "-C", "100k", "-W", "3"]);
    let started = files_of(&j);
    assert_eq!(started, ["0", "1", "2"].map(|i| format!("{base}{i}")));
    let mut names: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ring"))
        .collect();
    names.sort();
    assert_eq!(names, ["ring.pcapng0", "ring.pcapng1", "ring.pcapng2"]);
    // The files, oldest first, hold the newest packets in order, ending with the last one.
    let mut files = started.clone();
    files.sort_by_key(|f| read_records(f).first().map(|r| r.0));
    let kept = judged_records(&files, Some(100 * 1024));
    assert!(!kept.is_empty());
    assert_eq!(kept[..], records[records.len() - kept.len()..]);
}

#[test]
fn time_rotation_names_files_by_strftime_and_splits_by_packet_time() {
    let dir = TempDir::new("rot-time");
    let input = dir.path("in.pcap");
    // 10,000 records 1 ms apart: 10 seconds starting on an even second.
    let records = mixed_records(10_000);
    write_capture(&input, Format::Pcap, &records);
    let pattern = dir.path("t-%Y%m%d-%H%M%S.pcap");
    // Named in local time, as tcpdump names them: here a zone 5:30 east of UTC.
    let out = std::process::Command::new(wirespeed())
        .args(["capture", "-r", &input, "-w", &pattern])
        .args(["--format", "pcap", "-G", "2", "--json"])
        .env("TZ", "XYZ-5:30")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let files = files_of(&j);
    let first_s = records[0].0 / 1_000_000_000;
    let local_s = first_s + 5 * 3600 + 30 * 60;
    let expected: Vec<String> = (0..5)
        .map(|i| {
            let t =
                wirespeed_capture::rotate::strftime_utc("t-%Y%m%d-%H%M%S.pcap", local_s + 2 * i);
            dir.path(&t)
        })
        .collect();
    assert_eq!(files, expected);
    assert_eq!(judged_records(&files, None), records);
    for (i, f) in files.iter().enumerate() {
        for r in read_records(f) {
            let s = r.0 / 1_000_000_000 - first_s;
            assert!(s / 2 == i as u64, "{f}: a packet {s} s in");
        }
    }
}

/// A -G name with a conversion strftime would make and ours does not (%Z, the zone's
/// name) is refused before anything is written, where it was kept as typed.
#[test]
fn time_rotation_refuses_a_conversion_it_cannot_make() {
    let dir = TempDir::new("rot-time-z");
    let input = dir.path("in.pcap");
    write_capture(&input, Format::Pcap, &mixed_records(10));
    let pattern = dir.path("z-%y%m%d-%Z.pcap");
    let (code, _, err) = wirespeed_out(&["capture", "-r", &input, "-w", &pattern, "-G", "60"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("%Z is not a conversion -G names take"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(&dir.0).unwrap().count(),
        1,
        "only the input"
    );
}

/// A -G name without a time conversion: each file overwrites the last, as tcpdump's do;
/// the capture says so, and the file holds the last interval's packets.
#[test]
fn time_rotation_without_a_time_in_the_name_says_each_file_overwrites_the_last() {
    let dir = TempDir::new("rot-time-fixed");
    let input = dir.path("in.pcap");
    let records = mixed_records(10_000);
    write_capture(&input, Format::Pcap, &records);
    let out = dir.path("fixed.pcap");
    let (code, _, err) = wirespeed_out(&["capture", "-r", &input, "-w", &out, "-G", "3"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains(&format!(
            "note: -w {out} has no time conversion, so each -G file overwrites the last"
        )),
        "{err}"
    );
    assert_eq!(read_records(&out)[..], records[9000..]);
}

#[test]
fn time_rotation_with_w_stops_after_that_many_files() {
    let dir = TempDir::new("rot-time-w");
    let input = dir.path("in.pcap");
    let records = mixed_records(10_000);
    write_capture(&input, Format::Pcap, &records);
    let pattern = dir.path("w-%s.pcapng");
    let j = rotate(&input, &["-w", &pattern, "-G", "3", "-W", "2"]);
    let files = files_of(&j);
    assert_eq!(files.len(), 2);
    let kept = judged_records(&files, None);
    assert_eq!(kept[..], records[..6000]);
    assert_eq!(j["written"].as_u64(), Some(6000));
    assert_eq!(j["after_stop"].as_u64(), Some(1), "{j}");
}

#[test]
fn live_capture_rotates_by_size_without_losing_a_packet() {
    let net = NetPair::new("crs");
    let dir = TempDir::new("rot-live");
    let base = dir.path("live.pcap");
    let port = format!("xdp:{}", net.b);
    let mut cap = spawn_in(
        &net.ns_b,
        &[
            "capture", "--port", &port, "-w", &base, "--format", "pcap", "-C", "1", "--json",
        ],
    );
    cap.wait_ready();
    let tx = run_json(
        &net.ns_a,
        &[
            "bench",
            "txpush",
            "--port",
            &format!("xdp:{}", net.a),
            "--count",
            "100000",
            "--json",
            "-q",
        ],
    );
    assert_eq!(tx["tx_packets"].as_u64(), Some(100_000));
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (j, _) = cap.interrupt();
    let received = j["received"].as_u64().unwrap();
    assert_eq!(
        received + j["dropped_by_kernel"].as_u64().unwrap(),
        100_000,
        "{j}"
    );
    let files = files_of(&j);
    // 100,000 records of 76 bytes: 7.6 MB in files of at most 1,000,000 bytes.
    assert!(files.len() >= 8, "{j}");
    let all = judged_records(&files, Some(1_000_000));
    assert_eq!(all.len() as u64, j["written"].as_u64().unwrap());
    assert_eq!(all.len() as u64, received, "{j}");
}
