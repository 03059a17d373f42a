//! Rates from two readings: per port, per poll-mode thread, the switch's caches, the busiest
//! rules. A counter's change is `now - before`, or `now` where it went down (the tool
//! restarted) or was not there before (a series appears with its first event).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::flows::{RuleRate, busiest_rules};
use super::prom_text::Sample;
use super::scrape::Scrape;

/// Everything `top` shows for one interval, per second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Update {
    /// Seconds between the two readings.
    pub interval_seconds: f64,
    pub ports: Vec<PortRates>,
    pub threads: Vec<ThreadLoad>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub switch: Option<SwitchRates>,
    /// The busiest rules, most packets first (only with a switch's control socket).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flows: Option<Vec<RuleRate>>,
}

/// A port (or one of its queues), per second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortRates {
    /// The OpenFlow port number (a switch's ports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    pub device: String,
    /// The queue, when shown one by one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    pub receive_packets: f64,
    pub receive_bits: f64,
    pub transmit_packets: f64,
    pub transmit_bits: f64,
    pub drops: f64,
    pub drops_by_reason: BTreeMap<String, f64>,
}

/// A poll-mode thread's load over the interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadLoad {
    pub thread: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// Busy time over busy and idle time, 0 to 1 (None: the thread reported neither).
    pub busy_share: Option<f64>,
    pub bursts: f64,
    pub packets: f64,
    /// Packets per burst over the interval (None: no burst).
    pub packets_per_burst: Option<f64>,
}

/// The switch's datapath, per second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SwitchRates {
    pub caches: Vec<CacheRates>,
    pub upcalls: f64,
    /// Gauges: megaflows installed, rules per table, flows on the XDP fast path.
    pub megaflows: Option<f64>,
    pub rules: BTreeMap<String, f64>,
    pub fast_path_hits: f64,
    pub fast_path_flows: Option<f64>,
    pub drops: f64,
    pub drops_by_reason: BTreeMap<String, f64>,
}

/// One flow cache (exact_match, megaflow), per second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CacheRates {
    pub cache: String,
    pub hits: f64,
    pub misses: f64,
    /// Hits over lookups, 0 to 1 (None: no lookup).
    pub hit_rate: Option<f64>,
}

/// The rates from `before` to `now`; `by_queue` keeps a port's queues apart.
pub fn rates(before: &Scrape, now: &Scrape, by_queue: bool) -> Update {
    let seconds = now.at.duration_since(before.at).as_secs_f64().max(1e-6);
    let change = Changes::between(&before.samples, &now.samples, seconds);
    Update {
        interval_seconds: seconds,
        ports: port_rates(&change, by_queue),
        threads: thread_loads(&change),
        switch: switch_rates(&change, &now.samples),
        flows: match (&before.rules, &now.rules) {
            (Some(b), Some(n)) => Some(busiest_rules(b, n, seconds)),
            _ => None,
        },
    }
}

/// Each counter's change per second, by series.
struct Changes<'a> {
    per_second: Vec<(&'a Sample, f64)>,
}

impl<'a> Changes<'a> {
    fn between(before: &[Sample], now: &'a [Sample], seconds: f64) -> Changes<'a> {
        let old: HashMap<String, f64> = before.iter().map(|s| (series(s), s.value)).collect();
        let per_second = now
            .iter()
            .map(|s| {
                let change = match old.get(&series(s)) {
                    Some(&was) if s.value >= was => s.value - was,
                    _ => s.value,
                };
                (s, change / seconds)
            })
            .collect();
        Changes { per_second }
    }

    /// The series of metric `name`, with their change per second.
    fn of<'b>(&'b self, name: &'b str) -> impl Iterator<Item = (&'a Sample, f64)> + 'b {
        self.per_second
            .iter()
            .filter(move |(s, _)| s.name == name)
            .copied()
    }

    /// The sum of metric `name`'s changes per second over its series.
    fn sum(&self, name: &str) -> f64 {
        self.of(name).fold(0.0, |sum, (_, v)| sum + v)
    }
}

/// A series' identity: its name and its labels, sorted.
fn series(s: &Sample) -> String {
    let mut labels: Vec<_> = s.labels.iter().collect();
    labels.sort();
    let mut key = s.name.clone();
    for (n, v) in labels {
        key.push_str(&format!("\0{n}\0{v}"));
    }
    key
}

/// Adds a series' change per second to its port's row.
type AddToPort = fn(&mut PortRates, f64, &Sample);

fn port_rates(change: &Changes<'_>, by_queue: bool) -> Vec<PortRates> {
    // Ordered by port number (as a number), then device and queue.
    let mut ports: BTreeMap<(u64, String, String, u64, String), PortRates> = BTreeMap::new();
    let receive: AddToPort = |p, v, _| p.receive_packets += v;
    let receive_bytes: AddToPort = |p, v, _| p.receive_bits += 8.0 * v;
    let transmit: AddToPort = |p, v, _| p.transmit_packets += v;
    let transmit_bytes: AddToPort = |p, v, _| p.transmit_bits += 8.0 * v;
    let drops: AddToPort = |p, v, s| {
        p.drops += v;
        let reason = s.label("reason").unwrap_or("unknown").to_string();
        *p.drops_by_reason.entry(reason).or_default() += v;
    };
    // A switch's tunnel port is a row too, named as its ports show it (`vxlan10`): what it
    // popped is what it received, what it pushed what it sent.
    let fields: [(&str, AddToPort); 10] = [
        ("wirespeed_port_receive_packets_total", receive),
        ("wirespeed_port_receive_bytes_total", receive_bytes),
        ("wirespeed_port_transmit_packets_total", transmit),
        ("wirespeed_port_transmit_bytes_total", transmit_bytes),
        ("wirespeed_port_drops_total", drops),
        (
            "wirespeed_switch_tunnel_decapsulated_packets_total",
            receive,
        ),
        (
            "wirespeed_switch_tunnel_decapsulated_bytes_total",
            receive_bytes,
        ),
        (
            "wirespeed_switch_tunnel_encapsulated_packets_total",
            transmit,
        ),
        (
            "wirespeed_switch_tunnel_encapsulated_bytes_total",
            transmit_bytes,
        ),
        ("wirespeed_switch_tunnel_drops_total", drops),
    ];
    for (name, add) in fields {
        for (sample, per_second) in change.of(name) {
            let port = sample.label("port").map(str::to_string);
            let device = sample
                .label("device")
                .or_else(|| sample.label("name"))
                .unwrap_or("?")
                .to_string();
            let queue = by_queue
                .then(|| sample.label("queue").map(str::to_string))
                .flatten();
            let key = (
                number_or_max(port.as_deref()),
                port.clone().unwrap_or_default(),
                device.clone(),
                number_or_max(queue.as_deref()),
                queue.clone().unwrap_or_default(),
            );
            let row = ports.entry(key).or_insert_with(|| PortRates {
                port,
                device,
                queue,
                receive_packets: 0.0,
                receive_bits: 0.0,
                transmit_packets: 0.0,
                transmit_bits: 0.0,
                drops: 0.0,
                drops_by_reason: BTreeMap::new(),
            });
            add(row, per_second, sample);
        }
    }
    ports.into_values().collect()
}

fn number_or_max(text: Option<&str>) -> u64 {
    text.and_then(|t| t.parse().ok()).unwrap_or(u64::MAX)
}

fn thread_loads(change: &Changes<'_>) -> Vec<ThreadLoad> {
    // (busy, idle, bursts, packets) per second, by (thread, cpu).
    let mut threads: BTreeMap<(String, Option<String>), [f64; 4]> = BTreeMap::new();
    for (i, name) in [
        "wirespeed_thread_busy_seconds_total",
        "wirespeed_thread_idle_seconds_total",
        "wirespeed_thread_bursts_total",
        "wirespeed_thread_burst_packets_total",
    ]
    .into_iter()
    .enumerate()
    {
        for (sample, per_second) in change.of(name) {
            let key = (
                sample.label("thread").unwrap_or("?").to_string(),
                sample.label("cpu").map(str::to_string),
            );
            threads.entry(key).or_default()[i] += per_second;
        }
    }
    threads
        .into_iter()
        .map(
            |((thread, cpu), [busy, idle, bursts, packets])| ThreadLoad {
                thread,
                cpu,
                busy_share: (busy + idle > 0.0).then(|| busy / (busy + idle)),
                bursts,
                packets,
                packets_per_burst: (bursts > 0.0).then(|| packets / bursts),
            },
        )
        .collect()
}

fn switch_rates(change: &Changes<'_>, now: &[Sample]) -> Option<SwitchRates> {
    if !now.iter().any(|s| s.name.starts_with("wirespeed_switch_")) {
        return None;
    }
    let mut caches: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for (sample, v) in change.of("wirespeed_switch_cache_hits_total") {
        caches.entry(cache_name(sample)).or_default().0 += v;
    }
    for (sample, v) in change.of("wirespeed_switch_cache_misses_total") {
        caches.entry(cache_name(sample)).or_default().1 += v;
    }
    let gauge = |name: &str| {
        now.iter()
            .filter(|s| s.name == name)
            .map(|s| s.value)
            .reduce(|a, b| a + b)
    };
    let mut rules = BTreeMap::new();
    for s in now.iter().filter(|s| s.name == "wirespeed_switch_rules") {
        *rules
            .entry(s.label("table").unwrap_or("0").to_string())
            .or_default() += s.value;
    }
    let mut drops_by_reason = BTreeMap::new();
    for (sample, v) in change.of("wirespeed_switch_drops_total") {
        let reason = sample.label("reason").unwrap_or("unknown").to_string();
        *drops_by_reason.entry(reason).or_default() += v;
    }
    Some(SwitchRates {
        // Exact match first: it is looked up first.
        caches: order_caches(caches),
        upcalls: change.sum("wirespeed_switch_upcalls_total"),
        megaflows: gauge("wirespeed_switch_megaflows"),
        rules,
        fast_path_hits: change.sum("wirespeed_switch_fast_path_hits_total"),
        fast_path_flows: gauge("wirespeed_switch_fast_path_flows"),
        drops: drops_by_reason.values().fold(0.0, |sum, v| sum + v),
        drops_by_reason,
    })
}

fn cache_name(sample: &Sample) -> String {
    sample.label("cache").unwrap_or("?").to_string()
}

fn order_caches(caches: BTreeMap<String, (f64, f64)>) -> Vec<CacheRates> {
    let mut list: Vec<CacheRates> = caches
        .into_iter()
        .map(|(cache, (hits, misses))| CacheRates {
            hit_rate: (hits + misses > 0.0).then(|| hits / (hits + misses)),
            cache,
            hits,
            misses,
        })
        .collect();
    list.sort_by_key(|c| c.cache != "exact_match");
    list
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::top::prom_text::parse;
    use std::time::{Duration, Instant};

    fn scrape(at: Instant, text: &str, rules: Option<&str>) -> Scrape {
        Scrape {
            at,
            samples: parse(text).unwrap(),
            rules: rules.map(crate::top::flows::parse_dump_flows),
            no_metrics: None,
        }
    }

    const BEFORE: &str = r#"
wirespeed_port_receive_packets_total{device="veth1",queue="0",port="2"} 100
wirespeed_port_receive_packets_total{device="veth1",queue="1",port="2"} 50
wirespeed_port_receive_bytes_total{device="veth1",queue="0",port="2"} 6000
wirespeed_port_receive_packets_total{device="veth0",queue="0",port="1"} 1000
wirespeed_port_receive_bytes_total{device="veth0",queue="0",port="1"} 64000
wirespeed_port_transmit_packets_total{device="veth0",queue="0",port="1"} 10
wirespeed_port_transmit_bytes_total{device="veth0",queue="0",port="1"} 600
wirespeed_port_drops_total{device="veth0",queue="0",port="1",reason="fill_ring_empty"} 5
wirespeed_thread_busy_seconds_total{thread="pmd0",cpu="2"} 1.0
wirespeed_thread_idle_seconds_total{thread="pmd0",cpu="2"} 3.0
wirespeed_thread_bursts_total{thread="pmd0",cpu="2"} 100
wirespeed_thread_burst_packets_total{thread="pmd0",cpu="2"} 1000
wirespeed_switch_cache_hits_total{cache="exact_match"} 900
wirespeed_switch_cache_misses_total{cache="exact_match"} 100
wirespeed_switch_cache_hits_total{cache="megaflow"} 90
wirespeed_switch_cache_misses_total{cache="megaflow"} 10
wirespeed_switch_upcalls_total 10
"#;

    const AFTER: &str = r#"
wirespeed_port_receive_packets_total{device="veth1",queue="0",port="2"} 300
wirespeed_port_receive_packets_total{device="veth1",queue="1",port="2"} 150
wirespeed_port_receive_bytes_total{device="veth1",queue="0",port="2"} 18000
wirespeed_port_receive_packets_total{device="veth0",queue="0",port="1"} 5000
wirespeed_port_receive_bytes_total{device="veth0",queue="0",port="1"} 320000
wirespeed_port_transmit_packets_total{device="veth0",queue="0",port="1"} 30
wirespeed_port_transmit_bytes_total{device="veth0",queue="0",port="1"} 1800
wirespeed_port_drops_total{device="veth0",queue="0",port="1",reason="fill_ring_empty"} 9
wirespeed_port_drops_total{device="veth0",queue="0",port="1",reason="tx_ring_full"} 2
wirespeed_thread_busy_seconds_total{thread="pmd0",cpu="2"} 2.5
wirespeed_thread_idle_seconds_total{thread="pmd0",cpu="2"} 3.5
wirespeed_thread_bursts_total{thread="pmd0",cpu="2"} 300
wirespeed_thread_burst_packets_total{thread="pmd0",cpu="2"} 9000
wirespeed_switch_cache_hits_total{cache="megaflow"} 130
wirespeed_switch_cache_misses_total{cache="megaflow"} 10
wirespeed_switch_cache_hits_total{cache="exact_match"} 1700
wirespeed_switch_cache_misses_total{cache="exact_match"} 140
wirespeed_switch_upcalls_total 4
wirespeed_switch_megaflows 7
wirespeed_switch_rules{table="0"} 3
wirespeed_switch_rules{table="1"} 1
"#;

    #[test]
    fn rates_over_two_seconds() {
        let t0 = Instant::now();
        let update = rates(
            &scrape(t0, BEFORE, None),
            &scrape(t0 + Duration::from_secs(2), AFTER, None),
            false,
        );
        assert_eq!(update.interval_seconds, 2.0);
        let port1 = &update.ports[0];
        assert_eq!(
            (port1.port.as_deref(), port1.device.as_str(), &port1.queue),
            (Some("1"), "veth0", &None)
        );
        assert_eq!(
            [
                port1.receive_packets,
                port1.receive_bits,
                port1.transmit_packets,
                port1.transmit_bits,
                port1.drops
            ],
            [2000.0, 1_024_000.0, 10.0, 4800.0, 3.0]
        );
        assert_eq!(
            port1.drops_by_reason,
            BTreeMap::from([
                ("fill_ring_empty".to_string(), 2.0),
                // Not there before: counted from zero.
                ("tx_ring_full".to_string(), 1.0)
            ])
        );
        // Port 2's two queues summed.
        let port2 = &update.ports[1];
        assert_eq!(
            (port2.receive_packets, port2.receive_bits),
            (150.0, 48000.0)
        );
        assert_eq!(update.ports.len(), 2);

        let pmd = &update.threads[0];
        assert_eq!(
            (pmd.thread.as_str(), pmd.cpu.as_deref()),
            ("pmd0", Some("2"))
        );
        assert_eq!(pmd.busy_share, Some(0.75));
        assert_eq!((pmd.bursts, pmd.packets), (100.0, 4000.0));
        assert_eq!(pmd.packets_per_burst, Some(40.0));

        let switch = update.switch.unwrap();
        assert_eq!(
            switch.caches,
            vec![
                CacheRates {
                    cache: "exact_match".into(),
                    hits: 400.0,
                    misses: 20.0,
                    hit_rate: Some(800.0 / 840.0)
                },
                CacheRates {
                    cache: "megaflow".into(),
                    hits: 20.0,
                    misses: 0.0,
                    hit_rate: Some(1.0)
                },
            ]
        );
        // Went down: the switch restarted, so all 4 are new.
        assert_eq!(switch.upcalls, 2.0);
        assert_eq!(switch.megaflows, Some(7.0));
        assert_eq!(
            switch.rules,
            BTreeMap::from([("0".to_string(), 3.0), ("1".to_string(), 1.0)])
        );
        assert_eq!(switch.fast_path_flows, None);
        assert_eq!(update.flows, None);
    }

    #[test]
    fn queues_apart() {
        let t0 = Instant::now();
        let update = rates(
            &scrape(t0, BEFORE, None),
            &scrape(t0 + Duration::from_secs(2), AFTER, None),
            true,
        );
        let port2: Vec<_> = update
            .ports
            .iter()
            .filter(|p| p.port.as_deref() == Some("2"))
            .map(|p| (p.queue.as_deref(), p.receive_packets))
            .collect();
        assert_eq!(port2, vec![(Some("0"), 100.0), (Some("1"), 50.0)]);
    }

    #[test]
    fn a_tunnel_port_is_a_row_of_its_own_summed_over_threads() {
        let t0 = Instant::now();
        let before = r#"
wirespeed_switch_tunnel_decapsulated_packets_total{thread="0",port="10",name="vxlan10"} 100
wirespeed_switch_tunnel_decapsulated_packets_total{thread="1",port="10",name="vxlan10"} 50
wirespeed_switch_tunnel_encapsulated_bytes_total{thread="0",port="10",name="vxlan10"} 1000
wirespeed_switch_tunnel_drops_total{thread="0",port="10",name="vxlan10",reason="no_neighbour"} 1
"#;
        let after = r#"
wirespeed_switch_tunnel_decapsulated_packets_total{thread="0",port="10",name="vxlan10"} 300
wirespeed_switch_tunnel_decapsulated_packets_total{thread="1",port="10",name="vxlan10"} 250
wirespeed_switch_tunnel_encapsulated_bytes_total{thread="0",port="10",name="vxlan10"} 3000
wirespeed_switch_tunnel_drops_total{thread="0",port="10",name="vxlan10",reason="no_neighbour"} 5
wirespeed_port_receive_packets_total{device="veth0",queue="0",port="1"} 7
"#;
        let update = rates(
            &scrape(t0, before, None),
            &scrape(t0 + Duration::from_secs(2), after, None),
            false,
        );
        assert_eq!(update.ports.len(), 2);
        let tunnel = &update.ports[1];
        assert_eq!(
            (tunnel.port.as_deref(), tunnel.device.as_str()),
            (Some("10"), "vxlan10")
        );
        assert_eq!(
            [tunnel.receive_packets, tunnel.transmit_bits, tunnel.drops],
            [200.0, 8000.0, 2.0]
        );
        assert_eq!(
            tunnel.drops_by_reason,
            BTreeMap::from([("no_neighbour".to_string(), 2.0)])
        );
    }

    #[test]
    fn no_switch_without_switch_metrics() {
        let t0 = Instant::now();
        let text = "wirespeed_port_receive_packets_total{device=\"veth0\",queue=\"0\"} 1\n";
        let update = rates(
            &scrape(t0, text, None),
            &scrape(t0 + Duration::from_secs(1), text, None),
            false,
        );
        assert_eq!(update.switch, None);
        assert_eq!(update.ports[0].port, None);
        assert_eq!(update.ports[0].receive_packets, 0.0);
    }
}
