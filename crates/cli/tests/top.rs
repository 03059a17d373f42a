//! `wirespeed top`: under tmux, watching a switch while gen sends, the screen shows the ports
//! with rates that move and the busiest rule, repaints whole at a new size, and `q` (or
//! Ctrl-C) gives the terminal back as it was; piped, it prints plain lines (or JSON) and stops
//! after --count; a wrong address or a page that is not Prometheus text ends it with an error
//! naming the address; a switch's busiest rules come from its control socket alone too.

mod common;
use common::switched::Switched;
use common::tmux::Tmux;
use common::*;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A stand-in for a tool's `/metrics`: the k-th answer counts 1000 * k(k+1)/2 packets, so
/// each interval's rate is larger than the last one's.
struct FakeExporter {
    addr: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// What the fake answers.
#[derive(Clone, Copy)]
enum Answer {
    Metrics,
    Html,
    NotFound,
}

impl FakeExporter {
    fn start(answer: Answer) -> FakeExporter {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let answers = AtomicU64::new(0);
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                conn.set_nonblocking(false).unwrap();
                conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                // The request, up to its blank line.
                let mut request = Vec::new();
                let mut byte = [0u8; 1];
                while !request.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap_or(0) == 1 {
                    request.push(byte[0]);
                }
                let k = answers.fetch_add(1, Ordering::Relaxed) + 1;
                let reply = match answer {
                    Answer::Metrics => format!(
                        "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n\r\n{}",
                        metrics_page(k)
                    ),
                    Answer::Html => "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n\
                                     <html><body>It works!</body></html>\n"
                        .to_string(),
                    Answer::NotFound => "HTTP/1.0 404 Not Found\r\n\r\nno such page\n".to_string(),
                };
                let _ = conn.write_all(reply.as_bytes());
            }
        });
        FakeExporter {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeExporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The k-th page: ports wsport1 (receives) and wsport2 (sends), a thread, the caches.
fn metrics_page(k: u64) -> String {
    let packets = 1000 * k * (k + 1) / 2;
    let bytes = 64 * packets;
    let drops = k * (k + 1) / 2;
    format!(
        "# HELP wirespeed_port_receive_packets_total Packets received.\n\
         # TYPE wirespeed_port_receive_packets_total counter\n\
         wirespeed_port_receive_packets_total{{device=\"wsport1\",queue=\"0\",port=\"1\"}} {packets}\n\
         wirespeed_port_receive_bytes_total{{device=\"wsport1\",queue=\"0\",port=\"1\"}} {bytes}\n\
         wirespeed_port_transmit_packets_total{{device=\"wsport1\",queue=\"0\",port=\"1\"}} 0\n\
         wirespeed_port_receive_packets_total{{device=\"wsport2\",queue=\"0\",port=\"2\"}} 0\n\
         wirespeed_port_transmit_packets_total{{device=\"wsport2\",queue=\"0\",port=\"2\"}} {packets}\n\
         wirespeed_port_transmit_bytes_total{{device=\"wsport2\",queue=\"0\",port=\"2\"}} {bytes}\n\
         wirespeed_port_drops_total{{device=\"wsport1\",queue=\"0\",port=\"1\",reason=\"fill_ring_empty\"}} {drops}\n\
         wirespeed_thread_busy_seconds_total{{thread=\"pmd0\",cpu=\"1\"}} {}\n\
         wirespeed_thread_idle_seconds_total{{thread=\"pmd0\",cpu=\"1\"}} {}\n\
         wirespeed_switch_cache_hits_total{{cache=\"exact_match\"}} {}\n\
         wirespeed_switch_cache_misses_total{{cache=\"exact_match\"}} {}\n",
        k as f64 * 0.25,
        k as f64 * 0.75,
        packets * 9 / 10,
        packets / 10,
    )
}

/// The words of the screen's (or text's) row that names `device`, borders dropped.
fn row_of<'a>(text: &'a str, device: &str) -> Option<Vec<&'a str>> {
    let line = text.lines().find(|l| l.contains(device))?;
    Some(
        line.split(|c: char| c.is_whitespace() || c == '│')
            .filter(|w| !w.is_empty())
            .collect(),
    )
}

#[test]
fn under_tmux_a_switch_s_rates_move_resize_repaints_and_q_restores_the_terminal() {
    let s = Switched::new("tt", &["--metrics", "9464"]);
    s.ctl_ok(&["add-flow", "priority=10,in_port=1,actions=output:2"]);
    s.ctl_ok(&["add-flow", "priority=10,in_port=2,actions=output:1"]);
    let tmux = Tmux::shell("top", 120, 40);
    let (before, after) = (
        ScratchFile::new("stty-before"),
        ScratchFile::new("stty-after"),
    );
    tmux.type_line(&format!(
        "stty -g > {before}; echo BEFORE-TOP-$((6 * 7)); ip netns exec {} {} top \
         --metrics 127.0.0.1:9464 --ctl {}; echo top-exit:$?; stty -g > {after}",
        s.c.ns_m,
        wirespeed(),
        s.ctl
    ));
    // A row for each port (port, device, rx pkt/s, rx bit/s, tx pkt/s...), quiet so far.
    let (ma, mb) = (s.c.ma.as_str(), s.c.mb.as_str());
    let quiet = tmux.wait_for("the ports, after one interval", |screen| {
        screen.contains(" over ") && row_of(screen, mb).is_some()
    });
    assert!(quiet.starts_with("wirespeed top"), "{quiet}");
    assert_eq!(row_of(&quiet, ma).unwrap()[..3], ["1", ma, "0"], "{quiet}");
    assert!(quiet.contains("┌ poll-mode threads"), "{quiet}");
    assert!(
        quiet.contains("exact-match") && quiet.contains("megaflow"),
        "{quiet}"
    );

    let port = format!("packet:{}", s.c.a);
    let sender = spawn_in(
        &s.c.ns_a,
        &[
            "gen",
            "--port",
            &port,
            "--rate",
            "20000",
            "--duration",
            "8",
            "--dst-ip",
            "10.9.0.2",
        ],
    );
    // gen's 20000 packets a second: into port 1, out of port 2, through the rule for port 1.
    let busy = tmux.wait_for("port 1 receiving at gen's rate", |screen| {
        row_of(screen, ma).is_some_and(|r| r[2].starts_with("2") && r[2].ends_with('k'))
            && row_of(screen, mb).is_some_and(|r| r[4] != "0")
    });
    let rx = kilo(row_of(&busy, ma).unwrap()[2]);
    assert!((15.0..25.0).contains(&rx), "{busy}");
    let tx = kilo(row_of(&busy, mb).unwrap()[4]);
    assert!((15.0..25.0).contains(&tx), "{busy}");
    assert!(
        busy.contains("priority=10,in_port=1 actions=output:2"),
        "{busy}"
    );
    let flows = busy.split("┌ busiest flows").nth(1).expect("a flows table");
    let first_rule = flows.lines().nth(2).unwrap_or_default();
    assert!(first_rule.contains("in_port=1 actions=output:2"), "{busy}");

    tmux.resize(80, 24);
    let resized = tmux.wait_for("a whole frame 80 x 24", |screen| {
        frame_is_whole(screen, 80, 24)
    });
    assert!(
        resized.contains(ma) && resized.contains("┌ switch caches"),
        "{resized}"
    );

    tmux.press("q");
    let back = tmux.wait_for("the shell after top", exit_status_shown);
    assert!(back.contains("top-exit:0"), "{back}");
    // The alternate screen left: what the shell printed before top is there again, and
    // nothing of top's frame.
    assert!(back.contains("BEFORE-TOP-42"), "{back}");
    assert!(!back.contains("┌") && !back.contains(ma), "{back}");
    assert_eq!(tmux.query("#{alternate_on}"), "0");
    assert_eq!(tmux.query("#{cursor_flag}"), "1", "the cursor is shown");
    // Raw mode off: the terminal's settings are those from before, exactly.
    let settings = |path: &str| {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            match std::fs::read_to_string(path) {
                Ok(text) if !text.is_empty() => return text,
                _ if Instant::now() < until => std::thread::sleep(Duration::from_millis(50)),
                _ => panic!("no {path}"),
            }
        }
    };
    assert_eq!(settings(&before), settings(&after));
    assert!(settings(&after).len() > 20);
    let _ = sender.exit_within(Duration::from_secs(15));
}

/// `20.1k` as 20.1 (thousands).
fn kilo(rate: &str) -> f64 {
    rate.strip_suffix('k')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not thousands: {rate}"))
}

/// Whether the shell printed top's exit status (`top-exit:N`; the typed line has `$?`).
fn exit_status_shown(screen: &str) -> bool {
    screen
        .split("top-exit:")
        .skip(1)
        .any(|after| after.starts_with(|c: char| c.is_ascii_digit()))
}

/// Whether every row of `screen` belongs to one frame `width` x `height`: the heading,
/// boxes whose borders reach the right edge, the keys line; nothing of an earlier, wider
/// frame (which the terminal merely crops until the program repaints).
fn frame_is_whole(screen: &str, width: usize, height: usize) -> bool {
    let lines: Vec<&str> = screen.lines().collect();
    let edges = [('┌', '┐'), ('│', '│'), ('└', '┘')];
    lines.len() == height
        && lines[0].starts_with("wirespeed top")
        && lines[height - 1].starts_with("q quit")
        && lines[1..height - 1].iter().all(|line| {
            let chars: Vec<char> = line.chars().collect();
            chars.is_empty()
                || (chars.len() == width && edges.contains(&(chars[0], chars[chars.len() - 1])))
        })
}

#[test]
fn keys_show_drop_reasons_and_queues_and_ctrl_c_quits() {
    let exporter = FakeExporter::start(Answer::Metrics);
    let tmux = Tmux::shell("tpk", 100, 30);
    tmux.type_line(&format!(
        "{} top --metrics {} --interval 0.2; echo top-exit:$?",
        wirespeed(),
        exporter.addr
    ));
    let summed = tmux.wait_for("the view", |s| s.contains("┌ ports"));
    assert!(!summed.contains("fill_ring_empty"), "{summed}");
    tmux.press("d");
    tmux.wait_for("drops by reason", |s| {
        s.contains("fill_ring_empty") && s.contains("drops by reason (on)")
    });
    tmux.press("s");
    let queues = tmux.wait_for("a row per queue", |s| s.contains("queues (on)"));
    assert_eq!(
        row_of(&queues, " device ").unwrap()[..4],
        ["port", "device", "queue", "rx"],
        "{queues}"
    );
    assert_eq!(
        row_of(&queues, "wsport1").unwrap()[..3],
        ["1", "wsport1", "0"]
    );
    tmux.press("C-c");
    let back = tmux.wait_for("the shell after top", exit_status_shown);
    assert!(back.contains("top-exit:0"), "{back}");
    assert_eq!(tmux.query("#{alternate_on}"), "0");
}

#[test]
fn a_tool_gone_is_said_and_sigterm_gives_the_terminal_back() {
    let exporter = FakeExporter::start(Answer::Metrics);
    let tmux = Tmux::shell("tps", 100, 30);
    let (before, after) = (
        ScratchFile::new("stty-before"),
        ScratchFile::new("stty-after"),
    );
    tmux.type_line(&format!(
        "stty -g > {before}; {} top --metrics {}; echo top-exit:$?; stty -g > {after}",
        wirespeed(),
        exporter.addr
    ));
    tmux.wait_for("the view", |s| s.contains("┌ ports"));
    // The tool gone: top says so on its last line, with the figures it had.
    let addr = exporter.addr.clone();
    drop(exporter);
    let gone = tmux.wait_for("the scrape's error", |s| {
        s.lines()
            .last()
            .is_some_and(|l| l.contains("nothing listening"))
    });
    assert!(
        gone.contains(&format!("{addr}: nothing listening")),
        "{gone}"
    );
    assert!(gone.contains("wsport1"), "{gone}");
    // top is the one child of the pane's shell.
    let shell: u32 = tmux.query("#{pane_pid}").parse().unwrap();
    let top = children_of(shell);
    assert_eq!(top.len(), 1, "{top:?}");
    must(&["kill", "-TERM", &top[0].to_string()]);
    let back = tmux.wait_for("the shell after top", exit_status_shown);
    assert!(back.contains("top-exit:0"), "{back}");
    assert!(!back.contains("┌"), "{back}");
    assert_eq!(tmux.query("#{alternate_on}"), "0");
    assert_eq!(tmux.query("#{cursor_flag}"), "1");
    let until = Instant::now() + Duration::from_secs(5);
    while std::fs::metadata(&*after).map_or(true, |m| m.len() == 0) {
        assert!(Instant::now() < until, "no {after}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        std::fs::read_to_string(&*before).unwrap(),
        std::fs::read_to_string(&*after).unwrap()
    );
}

#[test]
fn a_terminal_closed_under_it_ends_top() {
    let exporter = FakeExporter::start(Answer::Metrics);
    let tmux = Tmux::shell("tpc", 100, 30);
    tmux.type_line(&format!("{} top --metrics {}", wirespeed(), exporter.addr));
    tmux.wait_for("the view", |s| s.contains("┌ ports"));
    let shell: u32 = tmux.query("#{pane_pid}").parse().unwrap();
    let top = children_of(shell);
    assert_eq!(top.len(), 1, "{top:?}");
    // The terminal goes away (kill-server): top must end, not spin on a dead terminal.
    drop(tmux);
    let until = Instant::now() + Duration::from_secs(5);
    while std::path::Path::new(&format!("/proc/{}", top[0])).exists() {
        if Instant::now() >= until {
            let _ = sh(&["kill", "-KILL", &top[0].to_string()]);
            panic!("top outlived its terminal");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}

fn top(args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(wirespeed())
        .arg("top")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A terminal that gives no size (`script` with none, a serial console) gets the view at
/// 80 by 24, as top and htop draw there, not a blank screen.
#[test]
fn a_terminal_without_a_size_is_drawn_at_80_by_24() {
    let exporter = FakeExporter::start(Answer::Metrics);
    let screen = ScratchFile::new("top-nosize.out");
    let command = format!("{} top --metrics {}", wirespeed(), exporter.addr);
    // script's terminal has no size when its own input is not one; `q` after two scrapes.
    let mut script = std::process::Command::new("script")
        .args(["-qefc", &command, &screen.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("script (util-linux)");
    std::thread::sleep(Duration::from_millis(2500));
    script.stdin.take().unwrap().write_all(b"q").unwrap();
    let status = script.wait().unwrap();
    assert!(status.success(), "{status}");
    let drawn = String::from_utf8_lossy(&std::fs::read(&screen).unwrap()).into_owned();
    assert!(drawn.contains("wsport1"), "nothing drawn: {drawn:?}");
}

#[test]
fn piped_it_prints_plain_lines_and_stops_after_count() {
    let exporter = FakeExporter::start(Answer::Metrics);
    // A port alone, as the tools' --metrics take it: on loopback.
    let port = exporter.addr.rsplit(':').next().unwrap();
    let (code, out, err) = top(&["--metrics", port, "--count", "2", "--interval", "0.5"]);
    assert_eq!(code, Some(0), "{err}");
    let blocks: Vec<&str> = out.split_terminator("\n\n").collect();
    assert_eq!(blocks.len(), 2, "{out}");
    for block in blocks {
        let heading = format!("wirespeed top: {}, over ", exporter.addr);
        let seconds: f64 = block
            .strip_prefix(&heading)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no heading {heading:?}: {block}"));
        assert!((0.3..0.8).contains(&seconds), "{block}");
        assert!(
            block.contains(
                "\nports\n  port  device   rx pkt/s  rx bit/s  tx pkt/s  tx bit/s  drops/s\n"
            ),
            "{block}"
        );
        let rx = row_of(block, "wsport1").expect("a row for wsport1");
        let tx = row_of(block, "wsport2").expect("a row for wsport2");
        assert_eq!(rx[..2], ["1", "wsport1"], "{block}");
        assert_ne!(rx[2], "0", "{block}");
        // What port 1 receives, port 2 sends.
        assert_eq!(rx[2..4], tx[4..6], "{block}");
        assert!(block.contains("\npoll-mode threads\n"), "{block}");
        assert!(block.contains("25.0%"), "{block}");
        assert!(block.contains("exact-match     90.0%"), "{block}");
    }
}

/// With --count, a tool gone for good is not waited for for ever: each failed reading is
/// one of the updates asked for, and top then exits with the failure (it said the failure
/// each interval and never ended, holding up the script that waited for its count).
#[test]
fn a_count_ends_when_the_tool_is_gone() {
    let exporter = FakeExporter::start(Answer::Metrics);
    let port = exporter.addr.rsplit(':').next().unwrap().to_string();
    let mut child = std::process::Command::new(wirespeed())
        .args([
            "top",
            "--metrics",
            &port,
            "--count",
            "5",
            "--interval",
            "0.2",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    drop(exporter);
    let until = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("top --count 5 went on after its tool was gone");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("wirespeed: error:"), "{err}");
}

#[test]
fn json_lines_hold_exact_rates() {
    let exporter = FakeExporter::start(Answer::Metrics);
    let (code, out, err) = top(&[
        "--metrics",
        &exporter.addr,
        "--count",
        "3",
        "--interval",
        "0.3",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{out}");
    for (i, j) in lines.iter().enumerate() {
        // Answer k+1 counts 1000 * (k+1) packets more than answer k (the first is k = 1).
        let k = i as f64 + 2.0;
        let seconds = j["interval_seconds"].as_f64().unwrap();
        let port = &j["ports"][0];
        assert_eq!(port["device"], "wsport1", "{j}");
        let packets = port["receive_packets"].as_f64().unwrap() * seconds;
        assert!((packets - 1000.0 * k).abs() < 1e-6, "{packets} {j}");
        let bits = port["receive_bits"].as_f64().unwrap() * seconds;
        assert!((bits - 512_000.0 * k).abs() < 1e-3, "{bits} {j}");
        let drops = port["drops_by_reason"]["fill_ring_empty"].as_f64().unwrap() * seconds;
        assert!((drops - k).abs() < 1e-9, "{drops} {j}");
        assert_eq!(j["switch"]["caches"][0]["cache"], "exact_match", "{j}");
    }
}

#[test]
fn nothing_listening_is_an_error_naming_the_address() {
    // A port nothing listens on: bound, then let go.
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let (code, out, err) = top(&["--metrics", &addr, "--count", "1"]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(out, "");
    let said = format!("{addr}: nothing listening (is the tool running with --metrics {addr}?)");
    assert_eq!(err.trim(), format!("wirespeed: error: {said}"));
    // With --json the failure is a line on standard output too, for the script reading it.
    let (code, out, _) = top(&["--metrics", &addr, "--count", "1", "--json"]);
    assert_eq!(code, Some(1));
    assert_eq!(out, format!("{}\n", serde_json::json!({ "error": said })));
}

#[test]
fn bad_addresses_are_named() {
    let (code, _, err) = top(&["--metrics", "localhost", "--count", "1"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        err.trim(),
        "wirespeed: error: --metrics: localhost: not HOST:PORT or PORT (e.g. 127.0.0.1:9464)"
    );
    let (code, _, err) = top(&["--metrics", "300.1.2.3:9100", "--count", "1"]);
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with("wirespeed: error: --metrics: 300.1.2.3:9100: not an address to scrape"),
        "{err}"
    );
    let (code, _, err) = top(&["--ctl", "/nonexistent/switch.sock", "--count", "1"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("/nonexistent/switch.sock"), "{err}");
}

#[test]
fn a_page_that_is_not_prometheus_text_is_refused() {
    let html = FakeExporter::start(Answer::Html);
    let (code, _, err) = top(&["--metrics", &html.addr, "--count", "1"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        err.trim(),
        format!(
            "wirespeed: error: {}: /metrics is not Prometheus text: line 1: not a metric name: \
             '<html><body>It works!</body></html>'",
            html.addr
        )
    );
    let missing = FakeExporter::start(Answer::NotFound);
    let (code, _, err) = top(&["--metrics", &missing.addr, "--count", "1"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        err.trim(),
        format!(
            "wirespeed: error: {}: GET /metrics: answered 'HTTP/1.0 404 Not Found'",
            missing.addr
        )
    );
}

#[test]
fn a_switch_s_busiest_rules_while_gen_sends() {
    let s = Switched::new("tf", &[]);
    s.ctl_ok(&["add-flow", "priority=10,in_port=1,actions=output:2"]);
    s.ctl_ok(&["add-flow", "priority=10,in_port=2,actions=output:1"]);
    let port = format!("packet:{}", s.c.a);
    let sender = spawn_in(
        &s.c.ns_a,
        &[
            "gen",
            "--port",
            &port,
            "--rate",
            "20000",
            "--duration",
            "6",
            "--dst-ip",
            "10.9.0.2",
        ],
    );
    // Traffic flowing before top's first reading.
    std::thread::sleep(Duration::from_millis(500));
    let (code, out, err) = top(&["--ctl", &s.ctl, "--count", "2", "--interval", "1"]);
    assert_eq!(code, Some(0), "{err}");
    let blocks: Vec<&str> = out.split_terminator("\n\n").collect();
    assert_eq!(blocks.len(), 2, "{out}");
    for block in blocks {
        // The ports from the switch's `metrics` command, through the same socket.
        let port1 = row_of(block, &s.c.ma).expect("a row for port 1");
        assert_eq!(port1[..2], ["1", s.c.ma.as_str()], "{block}");
        assert_ne!(port1[2], "0", "{block}");
        assert!(block.contains("\nbusiest flows\n"), "{block}");
        // The rule gen's packets match comes first, at about gen's rate.
        let flows = block.split("\nbusiest flows\n").nth(1).unwrap();
        let first = flows.lines().nth(1).expect("a busiest rule");
        assert!(
            first.ends_with("table=0, priority=10,in_port=1 actions=output:2"),
            "{block}"
        );
        let rate: f64 = first
            .split_whitespace()
            .next()
            .unwrap()
            .trim_end_matches('k')
            .parse()
            .unwrap();
        assert!((15.0..25.0).contains(&rate), "{first}");
    }
    // --no-flows: the ports, and no dump-flows asked for.
    let (code, out, err) = top(&["--ctl", &s.ctl, "--count", "1", "--no-flows"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(row_of(&out, &s.c.ma).is_some(), "{out}");
    assert!(!out.contains("busiest flows"), "{out}");
    let _ = sender.exit_within(Duration::from_secs(10));
}
