//! `--metrics` on bench, gen, recv and capture: each serves Prometheus' text format that
//! promtool accepts while it runs, with exactly the packets it took or sent (and recv what
//! each generator's packets showed: losses, latency).

mod common;
use common::prometheus::scrape_until as scrape_until_at;
use common::prometheus::{assert_promtool_accepts, sample, scrape};
use common::traffic::send_on_queue;
use common::*;

const ADDR: &str = "127.0.0.1:9468";

fn scrape_until(ns: &str, name: &str, labels: &[(&str, &str)], want: f64) -> String {
    scrape_until_at(ns, ADDR, name, labels, want)
}

fn loopback_up(ns: &str) {
    must(&["ip", "-n", ns, "link", "set", "lo", "up"]);
}

#[test]
fn gen_and_recv_serve_what_they_sent_and_received() {
    let net = NetPair::new("mg");
    loopback_up(&net.ns_a);
    loopback_up(&net.ns_b);
    let rx_port = format!("xdp:{}", net.b);
    let mut recv = spawn_in(
        &net.ns_b,
        &[
            "recv",
            "--port",
            &rx_port,
            "--json",
            "-q",
            "--metrics",
            "9468",
        ],
    );
    recv.wait_ready();
    let tx_port = format!("xdp:{}", net.a);
    let sender = spawn_in(
        &net.ns_a,
        &[
            "gen",
            "--port",
            &tx_port,
            "--count",
            "30000",
            "--rate",
            "20000",
            "--skip-every",
            "100",
            "--json",
            "-q",
            "--metrics",
            "9468",
        ],
    );
    std::thread::sleep(std::time::Duration::from_millis(700));
    let sending = scrape(&net.ns_a, ADDR);
    assert_promtool_accepts(&sending);
    let so_far = sample(
        &sending,
        "wirespeed_port_transmit_packets_total",
        &[("device", &net.a), ("queue", "0")],
    );
    assert!(so_far > 0.0 && so_far < 30000.0, "{so_far}\n{sending}");
    assert!(sending.contains("wirespeed_run_packets_total{thread=\"0\",counted=\"tx\"}"));
    let (g, _) = sender.finish();
    assert_eq!(g["packets"].as_u64(), Some(30000), "{g}");

    let text = scrape_until(
        &net.ns_b,
        "wirespeed_port_receive_packets_total",
        &[("device", &net.b), ("queue", "0")],
        30000.0,
    );
    assert_promtool_accepts(&text);
    assert_eq!(
        sample(&text, "wirespeed_run_packets_total", &[("counted", "rx")]),
        30000.0
    );
    assert!(
        sample(&text, "wirespeed_thread_bursts_total", &[("thread", "0")]) >= 1.0,
        "{text}"
    );
    assert!(
        text.contains("# TYPE wirespeed_umem_frames gauge"),
        "{text}"
    );
    // 30,000 frames with every 100th number left out: numbers 0 to 30302, 303 of them
    // never sent.
    let generator = [("generator", "1")];
    let text = scrape_until(
        &net.ns_b,
        "wirespeed_recv_received_packets_total",
        &generator,
        30000.0,
    );
    assert_promtool_accepts(&text);
    assert_eq!(
        sample(&text, "wirespeed_recv_lost_packets", &generator),
        303.0
    );
    for name in [
        "wirespeed_recv_duplicated_packets_total",
        "wirespeed_recv_corrupt_packets_total",
        "wirespeed_recv_late_packets_total",
    ] {
        assert_eq!(sample(&text, name, &generator), 0.0, "{name}");
    }
    let latency = |le: &str| {
        sample(
            &text,
            "wirespeed_recv_latency_seconds_bucket",
            &[("generator", "1"), ("le", le)],
        )
    };
    let count = sample(&text, "wirespeed_recv_latency_seconds_count", &generator);
    assert_eq!(count, 30000.0);
    assert_eq!(latency("+Inf"), 30000.0);
    // Over a veth, every packet in well under a second, and not one in under a microsecond.
    assert_eq!(
        (latency("1"), latency("0.000001")),
        (30000.0, 0.0),
        "{text}"
    );
    let sum = sample(&text, "wirespeed_recv_latency_seconds_sum", &generator);
    assert!(sum > 0.0 && sum < 30000.0, "{sum}");
    let (r, _) = recv.interrupt();
    assert_eq!(r["packets"].as_u64(), Some(30000), "{r}");
    let g = &r["generators"][0];
    assert_eq!(
        (g["lost"].as_u64(), g["unique"].as_u64()),
        (Some(303), Some(30000)),
        "{r}"
    );
    assert_eq!(g["latency_ns"]["samples"].as_u64(), Some(30000), "{r}");
}

#[test]
fn bench_rxdrop_serves_its_port() {
    let net = NetPair::new("mr");
    loopback_up(&net.ns_b);
    let port = format!("xdp:{}", net.b);
    // Rings deep enough for txpush's burst (a debug build on a loaded machine may still
    // lose some: every frame is then received or counted by reason).
    let mut rx = spawn_in(
        &net.ns_b,
        &[
            "bench",
            "rxdrop",
            "--port",
            &port,
            "--json",
            "-q",
            "--duration",
            "60",
            "--ring-size",
            "8192",
            "--frames",
            "16384",
            "--metrics",
            "9468",
        ],
    );
    rx.wait_ready();
    send_on_queue(&net, 0, 10000);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let (text, received) = loop {
        let text = scrape(&net.ns_b, ADDR);
        let device = [("device", net.b.as_str())];
        let received = sample(&text, "wirespeed_port_receive_packets_total", &device);
        let dropped: f64 = text
            .lines()
            .filter(|l| l.starts_with("wirespeed_port_drops_total{"))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum();
        if received + dropped == 10000.0 {
            break (text, received);
        }
        assert!(
            std::time::Instant::now() < until,
            "{received} + {dropped}:\n{text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_promtool_accepts(&text);
    let (j, _) = rx.interrupt();
    assert_eq!(j["rx_packets"].as_f64(), Some(received), "{j}");
}

#[test]
fn capture_serves_what_it_received_and_wrote() {
    let net = NetPair::new("mc");
    loopback_up(&net.ns_b);
    let file = ScratchFile::new("metrics.pcap");
    let port = format!("xdp:{}", net.b);
    let mut cap = spawn_in(
        &net.ns_b,
        &[
            "capture",
            "--port",
            &port,
            "-w",
            &file,
            "--json",
            "--metrics",
            "9468",
        ],
    );
    cap.wait_ready();
    send_on_queue(&net, 0, 10000);
    // The writer's count is read live, the receiving thread's once it goes idle.
    scrape_until(
        &net.ns_b,
        "wirespeed_capture_written_packets_total",
        &[],
        10000.0,
    );
    let text = scrape_until(
        &net.ns_b,
        "wirespeed_capture_received_packets_total",
        &[],
        10000.0,
    );
    assert_promtool_accepts(&text);
    for name in [
        "wirespeed_capture_received_packets_total",
        "wirespeed_capture_matched_packets_total",
        "wirespeed_port_receive_packets_total",
    ] {
        assert_eq!(sample(&text, name, &[]), 10000.0, "{name}\n{text}");
    }
    assert_eq!(
        sample(&text, "wirespeed_capture_writer_dropped_packets_total", &[]),
        0.0
    );
    assert_eq!(
        sample(&text, "wirespeed_capture_files_rotated_total", &[]),
        0.0
    );
    let (j, _) = cap.interrupt();
    assert_eq!(j["written"].as_u64(), Some(10000), "{j}");
    let bytes = sample(&text, "wirespeed_capture_written_bytes_total", &[]);
    // Each record: a 16-byte header and the 64-byte frame (txpush's default size, without
    // the frame check sequence: 60 bytes).
    let file_len = std::fs::metadata(&*file).unwrap().len() as f64;
    assert_eq!(
        bytes,
        file_len - 24.0,
        "the file less its 24-byte pcap header"
    );
}

/// The drops a capture counts are served while it runs, not only in its summary: with the
/// capture stopped (SIGSTOP) and no spill ring, the packets sent meanwhile overflow its
/// rings, and once it runs again a scrape shows exactly the kernel drops the summary ends
/// with.
#[test]
fn capture_serves_its_kernel_drops_while_it_runs() {
    let net = NetPair::new("md");
    loopback_up(&net.ns_b);
    let port = format!("xdp:{}", net.b);
    let mut cap = spawn_in(
        &net.ns_b,
        &[
            "capture",
            "--port",
            &port,
            "-w",
            "/dev/null",
            "--spill-mib",
            "0",
            "--ring-size",
            "256",
            "--json",
            "--metrics",
            "9468",
        ],
    );
    cap.wait_ready();
    let pid = cap.pid().to_string();
    must(&["kill", "-STOP", &pid]);
    send_on_queue(&net, 0, 10000);
    must(&["kill", "-CONT", &pid]);
    // Everything the rings held is received, the rest was dropped.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let text = scrape(&net.ns_b, ADDR);
    assert_promtool_accepts(&text);
    let received = sample(&text, "wirespeed_capture_received_packets_total", &[]);
    let dropped = sample(&text, "wirespeed_capture_kernel_dropped_packets_total", &[]);
    let (j, _) = cap.interrupt();
    assert!(dropped > 0.0, "{text}");
    assert_eq!(received + dropped, 10000.0, "{text}");
    assert_eq!(j["dropped_by_kernel"].as_f64(), Some(dropped), "{j}");
    assert_eq!(j["received"].as_f64(), Some(received), "{j}");
}
