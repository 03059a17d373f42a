//! `switch --metrics`: Prometheus' text format on /metrics that promtool accepts, a real
//! Prometheus server scraping it over loopback and reading back exactly the packet counts
//! the switch's --json reports, and a full-rate run scraped many times a second that still
//! adds up exactly. `ctl metrics` answers the same figures through the control socket, the
//! OpenFlow side's and the flow export's among them.

mod common;
use common::prometheus::{Prometheus, assert_promtool_accepts, sample, scrape};
use common::switched::{Setup, Switched, field, send_on_cpu};
use common::*;

const METRICS: &str = "127.0.0.1:9464";

#[test]
fn prometheus_reads_the_counts_the_switch_reports() {
    let mut s = Switched::new("mp", &["--metrics", "9464"]);
    let b_mac = mac_of(&s.c.ns_b, &s.c.b);
    send_on_cpu(&s.c.ns_a, &s.c.a, 0, 3000, &b_mac, &[]);

    // Every frame gen sent is received or counted as dropped at port 1.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let text = loop {
        let text = scrape(&s.c.ns_m, METRICS);
        let port1 = [("port", "1"), ("device", s.c.ma.as_str()), ("queue", "0")];
        let rx = sample(&text, "wirespeed_port_receive_packets_total", &port1);
        let dropped: f64 = text
            .lines()
            .filter(|l| l.starts_with("wirespeed_port_drops_total{port=\"1\""))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum();
        if rx + dropped == 3000.0 {
            break text;
        }
        assert!(
            std::time::Instant::now() < until,
            "{rx} + {dropped}:\n{text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_promtool_accepts(&text);
    for family in [
        "wirespeed_port_receive_packets_total",
        "wirespeed_port_drops_total",
        "wirespeed_umem_frames",
        "wirespeed_thread_busy_seconds_total",
        "wirespeed_thread_bursts_total",
        "wirespeed_switch_cache_hits_total",
        "wirespeed_switch_upcalls_total",
        "wirespeed_switch_rules",
        "wirespeed_switch_learned_rules_dropped_total",
        "wirespeed_switch_port_up",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
    ] {
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "{family}:\n{text}"
        );
    }
    let rx1 = sample(
        &text,
        "wirespeed_port_receive_packets_total",
        &[("port", "1"), ("device", &s.c.ma), ("queue", "0")],
    );
    assert_eq!(
        sample(&text, "wirespeed_switch_rules", &[("table", "0")]),
        1.0,
        "the normal rule"
    );
    assert_eq!(
        sample(&text, "wirespeed_switch_learned_rules_dropped_total", &[]),
        0.0,
        "no learn, nothing dropped"
    );
    let via_ctl = s.ctl_ok(&["metrics"]);
    assert_promtool_accepts(&via_ctl);
    assert_eq!(
        sample(
            &via_ctl,
            "wirespeed_port_transmit_packets_total",
            &[("port", "2")]
        ),
        sample(
            &text,
            "wirespeed_port_transmit_packets_total",
            &[("port", "2")]
        ),
        "ctl metrics and /metrics agree"
    );

    let prometheus = Prometheus::start(&s.c.ns_m, METRICS, "127.0.0.1:9465");
    let tx2 = sample(
        &text,
        "wirespeed_port_transmit_packets_total",
        &[("port", "2")],
    );
    prometheus.wait_for_value("wirespeed_port_receive_packets_total{port=\"1\"}", rx1);
    prometheus.wait_for_value("wirespeed_port_transmit_packets_total{port=\"2\"}", tx2);
    // A port whose link goes down says so (figures are published once a second).
    assert_eq!(
        sample(&text, "wirespeed_switch_port_up", &[("port", "2")]),
        1.0
    );
    must(&["ip", "-n", &s.c.ns_m, "link", "set", &s.c.mb, "down"]);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while sample(
        &scrape(&s.c.ns_m, METRICS),
        "wirespeed_switch_port_up",
        &[("port", "2")],
    ) != 0.0
    {
        assert!(std::time::Instant::now() < until, "port 2 still up");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(
        sample(
            &scrape(&s.c.ns_m, METRICS),
            "wirespeed_switch_port_up",
            &[("port", "1")]
        ),
        1.0
    );
    let (j, _) = s.stop();
    assert_eq!(j["ports"][0]["rx_packets"].as_f64(), Some(rx1), "{j}");
    assert_eq!(j["ports"][1]["tx_packets"].as_f64(), Some(tx2), "{j}");
}

#[test]
fn scraping_a_full_rate_run_changes_no_count() {
    let mut s = Switched::new("ms", &["--metrics", "9464"]);
    let b_mac = mac_of(&s.c.ns_b, &s.c.b);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ns = s.c.ns_m.clone();
    let scraping = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut scrapes = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                scrape(&ns, METRICS);
                scrapes += 1;
            }
            scrapes
        })
    };
    // As fast as gen goes, from CPU 0 (the switch's kernel work runs there too).
    let port = format!("packet:{}", s.c.a);
    let sent = must(&[
        "ip",
        "netns",
        "exec",
        &s.c.ns_a,
        "taskset",
        "-c",
        "0",
        wirespeed(),
        "gen",
        "--port",
        &port,
        "--count",
        "200000",
        "--dst-mac",
        &b_mac,
        "--dst-ip",
        "10.9.0.2",
        "--json",
    ]);
    let sent: serde_json::Value = serde_json::from_str(&sent).unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let scrapes = scraping.join().unwrap();
    assert!(scrapes >= 2, "scraped {scrapes} times");
    // The threads publish their figures every 100 ms.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let text = scrape(&s.c.ns_m, METRICS);
    let (j, _) = s.stop();
    let rx = j["ports"][0]["rx_packets"].as_u64().unwrap();
    let tx = j["ports"][1]["tx_packets"].as_u64().unwrap();
    let drops: u64 = j["ports"][0]["drops"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    let sent = sent["packets"].as_u64().unwrap();
    assert!(
        rx > 0 && rx + drops <= sent,
        "{rx} received and {drops} dropped of {sent}: {j}"
    );
    assert_eq!(tx, rx, "every frame received went out: {j}");
    assert_eq!(
        sample(
            &text,
            "wirespeed_port_receive_packets_total",
            &[("port", "1")]
        ),
        rx as f64
    );
}

#[test]
fn a_metrics_address_in_use_or_malformed_refuses_the_start() {
    let c = NetChain::new("mb");
    // Something else listens on the address already.
    let mut taken = std::process::Command::new("ip")
        .args(["netns", "exec", &c.ns_m, "python3", "-c"])
        .arg(
            "import socket,time; s=socket.socket(); s.bind(('127.0.0.1',9464)); s.listen(); \
             print('bound', flush=True); time.sleep(60)",
        )
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(taken.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "bound\n");
    for (flag, says) in [
        (
            "nonsense",
            "--metrics nonsense: 'nonsense' is not an address to listen on",
        ),
        ("1.2.3.4:99999", "is not an address to listen on"),
        ("no-such-host.invalid:9464", "no such host"),
        (
            "9464",
            "--metrics 9464: listen on 127.0.0.1:9464: Address already in use",
        ),
    ] {
        let p1 = format!("1=xdp:{}", c.ma);
        let out = sh(&[
            "ip",
            "netns",
            "exec",
            &c.ns_m,
            wirespeed(),
            "switch",
            "--port",
            &p1,
            "--metrics",
            flag,
            "--duration",
            "1",
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag}: {err}");
        assert!(err.contains(says), "{flag}: {err}");
        assert!(
            !err.contains(" ready "),
            "refused before the ports opened: {err}"
        );
    }
    let _ = taken.kill();
    let _ = taken.wait();
}

/// Two poll-mode threads over packet: ports, each of which every thread has a copy of (one
/// receives, all send): each copy is a series of its own, by thread (they were one series
/// twice, and Prometheus kept the first: a receive count of 0 for ever).
#[test]
fn each_threads_copy_of_a_port_is_a_series_of_its_own() {
    let setup = Setup {
        backends: ["packet", "packet"],
        queues: 1,
    };
    let s = Switched::with("mt", setup, &["--pmd-cpus", "0,1"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let text = s.ctl_ok(&["metrics"]);
    assert_promtool_accepts(&text);
    let mut seen = std::collections::HashSet::new();
    for series in text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' ').map(|(series, _)| series))
    {
        assert!(seen.insert(series), "{series} twice:\n{text}");
    }
    let received: f64 = text
        .lines()
        .filter(|l| l.starts_with("wirespeed_port_receive_packets_total{port=\"1\""))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    let ports = s.ctl_ok(&["dump-ports", "1"]);
    assert_eq!(
        received as u64,
        field(&ports, "port  1: rx", "pkts"),
        "{ports}\n{text}"
    );
}

#[test]
fn the_openflow_side_and_the_flow_export_are_in_both_scrapes() {
    let s = Switched::new(
        "mo",
        &[
            "--openflow",
            "ptcp:",
            "--metrics",
            "9464",
            "--ipfix",
            "127.0.0.1:4739",
        ],
    );
    // A client that stays connected while the scrapes look.
    let monitor = s.monitor();
    let text = common::prometheus::scrape_until(
        &s.c.ns_m,
        METRICS,
        "wirespeed_switch_openflow_connections",
        &[],
        1.0,
    );
    assert_promtool_accepts(&text);
    let via_ctl = s.ctl_ok(&["metrics"]);
    assert_eq!(
        sample(&via_ctl, "wirespeed_switch_openflow_connections", &[]),
        1.0,
        "{via_ctl}"
    );
    // The templates went out at the start.
    assert!(
        sample(
            &via_ctl,
            "wirespeed_switch_ipfix_template_messages_total",
            &[]
        ) >= 1.0,
        "{via_ctl}"
    );
    drop(monitor);
}
