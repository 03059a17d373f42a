//! Signals while a tool runs: a second SIGINT ends a replay blocked on an idle pipe at once,
//! and two signals that arrive together are one clean stop, summary printed. (Signals during
//! set-up are in `signals_in_setup.rs`.)

mod common;
use common::pcaps::{self, Rec, TempDir};
use common::*;
use wirespeed_capture::write::Format;

/// A replay of `pcap:-` waits in read() while the pipe is idle, where the first SIGINT (which
/// only asks the loop to stop) cannot reach it; a second one ends the process at once, with
/// the shell's status for SIGINT.
#[test]
fn a_second_sigint_ends_a_replay_waiting_on_an_idle_pipe() {
    use std::io::Write;
    use std::time::Duration;
    let dir = TempDir::new("pidle");
    let file = dir.path("head.pcap");
    let records: Vec<Rec> = pcaps::mixed_frames(3)
        .into_iter()
        .enumerate()
        .map(|(i, frame)| {
            let len = frame.len() as u32;
            (1_700_000_000_000_000_000 + i as u64 * 1000, frame, len)
        })
        .collect();
    pcaps::write_capture(&file, Format::Pcap, &records);
    let mut child = std::process::Command::new(wirespeed())
        .args(["bench", "rxdrop", "--port", "pcap:-", "-q"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(&std::fs::read(&file).unwrap()).unwrap();
    let pid = child.id().to_string();
    std::thread::sleep(Duration::from_millis(500));
    must(&["kill", "-INT", &pid]);
    // The second signal counts when it comes half a second or more after the first.
    let status = match wait_within(&mut child, Duration::from_millis(700)) {
        // Ended by the first: a clean stop.
        Some(status) => {
            assert!(status.success(), "{status}");
            return;
        }
        None => {
            must(&["kill", "-INT", &pid]);
            wait_within(&mut child, Duration::from_secs(5))
        }
    };
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    drop(pipe);
    assert_eq!(status.and_then(|s| s.code()), Some(130), "{status:?}");
}

/// Two signals at once are one request to stop (GNU timeout signals the child and then its
/// process group): the tool still finishes cleanly, its summary printed.
#[test]
fn two_sigterms_at_once_stop_a_tool_cleanly() {
    for round in 0..3 {
        let child = std::process::Command::new(wirespeed())
            .args([
                "gen",
                "--port",
                "pcap:/dev/null",
                "--rate",
                "1000",
                "--json",
                "-q",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let pid = child.id();
        must(&["sh", "-c", &format!("kill -TERM {pid}; kill -TERM {pid}")]);
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "round {round}: {}: {err}", out.status);
        let j: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("round {round}: no JSON summary ({e}): {err}"));
        assert_eq!(j["mode"].as_str(), Some("gen"), "{j}");
    }
}

/// `gen` writing `pcap:FILE` at 1,000 packets a second, its JSON summary on standard output,
/// with SIGHUP as `hup` says (`env --default-signal=HUP` or `--ignore-signal=HUP`: the
/// test may itself run with hangups ignored, under nohup). The child, once it said it is
/// ready (its handlers are in place then), and the file.
fn gen_to_file(dir: &TempDir, hup: &str) -> (std::process::Child, String) {
    use std::io::BufRead;
    let file = dir.path("out.pcap");
    let port = format!("pcap:{file}");
    let mut child = std::process::Command::new("env")
        .args([
            hup,
            wirespeed(),
            "gen",
            "--port",
            &port,
            "--rate",
            "1000",
            "--json",
            "-q",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Its standard error read on a thread of its own (to the end, so it never blocks on a
    // full pipe), which says when gen is ready; 10 s at most.
    let stderr = child.stderr.take().unwrap();
    let (said, ready) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains(" ready ") {
                let _ = said.send(());
            }
        }
    });
    if ready
        .recv_timeout(std::time::Duration::from_secs(10))
        .is_err()
    {
        let _ = child.kill();
        panic!("gen never said it was ready");
    }
    (child, file)
}

/// `child`'s exit status if it ends within `within`.
fn wait_within(
    child: &mut std::process::Child,
    within: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let start = std::time::Instant::now();
    while start.elapsed() < within {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    None
}

/// Waits up to 10 s for `child` to end (killed then, failing the test).
fn ended(child: &mut std::process::Child) -> std::process::ExitStatus {
    wait_within(child, std::time::Duration::from_secs(10)).unwrap_or_else(|| {
        let _ = child.kill();
        panic!("still running 10 s after the signal");
    })
}

/// A hangup (the terminal closed, an ssh session dropped) stops a tool as SIGINT does, as
/// tcpdump's does: the output whole, the summary printed, exit 0; the file holds exactly
/// the packets the summary counts.
#[test]
fn a_hangup_stops_a_tool_cleanly() {
    use std::io::Read;
    let dir = TempDir::new("hup");
    let (mut child, file) = gen_to_file(&dir, "--default-signal=HUP");
    std::thread::sleep(std::time::Duration::from_millis(500));
    must(&["kill", "-HUP", &child.id().to_string()]);
    let status = ended(&mut child);
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    assert!(status.success(), "{status}");
    let j: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("no JSON summary ({e})"));
    let sent = j["packets"].as_u64().unwrap();
    assert!(sent > 0, "{j}");
    assert_eq!(pcaps::read_records(&file).len() as u64, sent, "{j}");
}

/// A tool started with hangups ignored (`nohup`) keeps them ignored, as tcpdump does: it
/// runs on until SIGTERM.
#[test]
fn a_hangup_ignored_when_started_stays_ignored() {
    let dir = TempDir::new("nohup");
    let (mut child, _file) = gen_to_file(&dir, "--ignore-signal=HUP");
    let pid = child.id().to_string();
    must(&["kill", "-HUP", &pid]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let running = child.try_wait().unwrap().is_none();
    must(&["kill", "-TERM", &pid]);
    let status = ended(&mut child);
    assert!(running, "ended by the ignored hangup: {status}");
    assert!(status.success(), "{status}");
}
