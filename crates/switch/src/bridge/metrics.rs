//! The switch's figures for Prometheus: each poll-mode thread's (published by the thread,
//! [`PmdFigures`]) and the bridge's (published by the control side once a second,
//! [`BridgeFigures`]), written out on a scrape by whoever asks (the `/metrics` listener,
//! or `ctl metrics`). Neither reader takes a lock a poll-mode thread waits on.

use std::collections::BTreeMap;
use std::sync::Arc;

use wirespeed_metrics::{
    Exposition, Published, device_and_queue, frame_figures, port_figures, thread_figures,
};

use crate::dpif::figures::PmdFigures;
use crate::dpif::pmd::lock;
use crate::execute::DropReason;
use crate::ipfix::exporter::ExportStats;
use crate::meter::MeterCounts;
use crate::offload::{FastPortCounts, OffloadSummary};
use crate::tunnel::TunnelFigures;

use super::Bridge;

/// What the control side publishes once a second.
#[derive(Debug, Clone, Default)]
pub struct BridgeFigures {
    /// Rules in each table that has any.
    pub rules: BTreeMap<u8, usize>,
    /// Addresses in the learning table.
    pub learned: usize,
    /// Rules `learn` actions built that a full queue dropped ([`crate::ofproto::learned`]).
    pub learned_rules_dropped: u64,
    pub fast_path: Option<FastPathFigures>,
    /// The flow export's counts (`--ipfix`).
    pub ipfix: Option<ExportStats>,
    /// Each meter's counts, by id.
    pub meters: Vec<(u32, MeterCounts)>,
    /// Each device port's number and whether its link is up.
    pub links: Vec<(u32, bool)>,
}

/// The kernel fast path's counts (`--offload`).
#[derive(Debug, Clone, Default)]
pub struct FastPathFigures {
    /// What `dump-cache` says of it.
    pub summary: OffloadSummary,
    /// Each port's packets forwarded in the kernel, as last credited.
    pub ports: Vec<(u32, FastPortCounts)>,
}

/// A port's labels on one thread: its number, interface and queue.
#[derive(Debug, Clone)]
struct PortLabels {
    port: String,
    device: String,
    queue: String,
}

/// Figures from beyond the bridge (the OpenFlow side's), added to every scrape; read
/// without a lock a poll-mode thread takes.
pub type MetricsExtra = Arc<dyn Fn(&mut Exposition) + Send + Sync>;

/// Everything a scrape of the switch reads; cheap to clone, for the listener's thread.
#[derive(Clone)]
pub struct SwitchMetrics {
    /// Each thread's ports' labels, in the bridge's order.
    labels: Vec<Vec<PortLabels>>,
    /// Each tunnel port's number and name (`vxlan10`), in the bridge's order.
    tunnels: Vec<(String, String)>,
    pmds: Vec<Published<PmdFigures>>,
    bridge: Published<BridgeFigures>,
    extra: Option<MetricsExtra>,
}

impl SwitchMetrics {
    /// The figures as Prometheus' text format.
    pub fn render(&self) -> String {
        let mut e = Exposition::new();
        for (t, (published, labels)) in self.pmds.iter().zip(&self.labels).enumerate() {
            let Some(f) = published.latest() else {
                continue;
            };
            let thread = t.to_string();
            let cpu = f.cpu.map(|c| c.to_string());
            for (stats, l) in f.ports.iter().zip(labels) {
                // The thread too: a packet: or tap: port is each thread's own copy of one
                // spec (one receives, all send), whose series would be one and the same.
                let labels = [
                    ("port", l.port.as_str()),
                    ("device", l.device.as_str()),
                    ("queue", l.queue.as_str()),
                    ("thread", thread.as_str()),
                ];
                port_figures(&mut e, &labels, stats);
            }
            let mut by_thread = vec![("thread", thread.as_str())];
            if let Some(cpu) = &cpu {
                by_thread.push(("cpu", cpu.as_str()));
            }
            thread_figures(&mut e, &by_thread, &f.time);
            if let Some(audit) = &f.audit {
                frame_figures(&mut e, &[("thread", thread.as_str())], audit);
            }
            pmd_figures(&mut e, &thread, &f);
            if !self.tunnels.is_empty() {
                tunnel_figures(&mut e, &thread, &f.tunnels, &self.tunnels);
            }
        }
        if let Some(b) = self.bridge.latest() {
            bridge_figures(&mut e, &b);
        }
        if let Some(extra) = &self.extra {
            extra(&mut e);
        }
        e.render()
    }
}

/// A thread's datapath counts: its caches and what it dropped.
fn pmd_figures(e: &mut Exposition, thread: &str, f: &PmdFigures) {
    let c = &f.cache;
    // The exact-match cache's misses go on to the megaflows; theirs are upcalls.
    let caches = [
        ("exact_match", c.emc_hits, c.megaflow_hits + c.misses),
        ("megaflow", c.megaflow_hits, c.misses),
    ];
    for (cache, hits, misses) in caches {
        let labels = [("thread", thread), ("cache", cache)];
        e.counter(
            "wirespeed_switch_cache_hits_total",
            "Lookups the cache answered.",
            &labels,
            hits,
        );
        e.counter(
            "wirespeed_switch_cache_misses_total",
            "Lookups the cache did not answer (an exact-match miss goes on to the megaflows).",
            &labels,
            misses,
        );
    }
    let labels = [("thread", thread)];
    e.counter(
        "wirespeed_switch_upcalls_total",
        "Packets translated through the rule tables (each installs a megaflow).",
        &labels,
        c.misses,
    );
    e.counter(
        "wirespeed_switch_revalidations_total",
        "Times the thread's caches were emptied: the fail mode or many rules changed at \
         once, a bundle was rolled back, or the megaflow cache was full.",
        &labels,
        c.flushes,
    );
    e.counter(
        "wirespeed_switch_stale_megaflows_total",
        "Megaflows removed because a rule change could decide their packets otherwise.",
        &labels,
        c.stale,
    );
    e.gauge(
        "wirespeed_switch_megaflows",
        "Megaflows in the thread's cache.",
        &labels,
        f.megaflows as f64,
    );
    let k = &f.counters;
    for reason in DropReason::ALL {
        e.counter(
            "wirespeed_switch_drops_total",
            "Packets the datapath decided not to send, by reason.",
            &[("thread", thread), ("reason", reason.name())],
            k.drops.get(reason),
        );
    }
    for (reason, n) in [("unknown_port", k.unknown_port), ("no_frame", k.no_frame)] {
        e.counter(
            "wirespeed_switch_drops_total",
            "Packets the datapath decided not to send, by reason.",
            &[("thread", thread), ("reason", reason)],
            n,
        );
    }
    e.counter(
        "wirespeed_switch_controller_packets_total",
        "Packets handed to the controller (actions=controller).",
        &labels,
        k.to_controller,
    );
}

/// A thread's tunnel ports' counts, and the underlay packets it could not pop.
fn tunnel_figures(e: &mut Exposition, thread: &str, f: &TunnelFigures, ports: &[(String, String)]) {
    for ((port, name), c) in ports.iter().zip(&f.ports) {
        let labels = [
            ("thread", thread),
            ("port", port.as_str()),
            ("name", name.as_str()),
        ];
        let counts = [
            (
                "wirespeed_switch_tunnel_decapsulated_packets_total",
                "Packets that arrived through the tunnel port, outer headers taken off.",
                c.decap_packets,
            ),
            (
                "wirespeed_switch_tunnel_decapsulated_bytes_total",
                "Bytes of the inner frames that arrived through the tunnel port.",
                c.decap_bytes,
            ),
            (
                "wirespeed_switch_tunnel_encapsulated_packets_total",
                "Packets sent into the tunnel port, outer headers put on.",
                c.encap_packets,
            ),
            (
                "wirespeed_switch_tunnel_encapsulated_bytes_total",
                "Bytes of the inner frames sent into the tunnel port.",
                c.encap_bytes,
            ),
            (
                "wirespeed_switch_tunnel_too_big_answered_total",
                "Packets too big for the tunnel answered with ICMP fragmentation needed or \
                 ICMPv6 packet too big, so the sender lowers its path MTU.",
                c.too_big_answered,
            ),
        ];
        for (metric, help, n) in counts {
            e.counter(metric, help, &labels, n);
        }
        for (reason, n) in [
            ("no_route", c.no_route),
            ("no_neighbour", c.no_neighbour),
            ("too_big", c.too_big),
        ] {
            e.counter(
                "wirespeed_switch_tunnel_drops_total",
                "Packets the tunnel port could not send, by reason (no_route: the host's route \
                 to the far end is not through the underlay; no_neighbour: the next hop's \
                 address is not known yet; too_big: longer than the underlay's MTU once \
                 pushed).",
                &[
                    ("thread", thread),
                    ("port", port),
                    ("name", name),
                    ("reason", reason),
                ],
                n,
            );
        }
    }
    for (reason, n) in [
        ("tunnel_malformed", f.malformed),
        ("tunnel_unmatched", f.unmatched),
        ("tunnel_endpoint", f.to_endpoint),
    ] {
        e.counter(
            "wirespeed_switch_drops_total",
            "Packets the datapath decided not to send, by reason.",
            &[("thread", thread), ("reason", reason)],
            n,
        );
    }
    e.counter(
        "wirespeed_switch_tunnel_endpoint_echoes_total",
        "ICMP echo requests to a tunnel's own address (local_ip), answered.",
        &[("thread", thread)],
        f.echoes,
    );
}

/// A meter's counts: what reached it, and what its band dropped.
fn meter_figures(e: &mut Exposition, id: u32, c: &MeterCounts) {
    let id = id.to_string();
    let labels = [("meter", id.as_str())];
    let counts = [
        (
            "wirespeed_switch_meter_packets_total",
            "Packets that reached the meter (OpenFlow's packet_in_count).",
            c.packets,
        ),
        (
            "wirespeed_switch_meter_bytes_total",
            "Bytes of the packets that reached the meter.",
            c.bytes,
        ),
        (
            "wirespeed_switch_meter_dropped_packets_total",
            "Packets the meter's band dropped for being over its rate.",
            c.band_packets,
        ),
        (
            "wirespeed_switch_meter_dropped_bytes_total",
            "Bytes of the packets the meter's band dropped.",
            c.band_bytes,
        ),
    ];
    for (name, help, n) in counts {
        e.counter(name, help, &labels, n);
    }
}

fn bridge_figures(e: &mut Exposition, b: &BridgeFigures) {
    for (port, up) in &b.links {
        e.gauge(
            "wirespeed_switch_port_up",
            "1 while the port's interface is up with a carrier, 0 while it is down or gone.",
            &[("port", &port.to_string())],
            f64::from(u8::from(*up)),
        );
    }
    for (table, n) in &b.rules {
        e.gauge(
            "wirespeed_switch_rules",
            "Rules in the flow table.",
            &[("table", &table.to_string())],
            *n as f64,
        );
    }
    e.gauge(
        "wirespeed_switch_learned_addresses",
        "Addresses in the learning table (actions=normal).",
        &[],
        b.learned as f64,
    );
    e.counter(
        "wirespeed_switch_learned_rules_dropped_total",
        "Rules learn actions built, dropped because the queue to the rule tables was full \
         (their flows learn them again at their next packet).",
        &[],
        b.learned_rules_dropped,
    );
    if let Some(x) = &b.ipfix {
        ipfix_figures(e, x);
    }
    for (id, c) in &b.meters {
        meter_figures(e, *id, c);
    }
    let Some(f) = &b.fast_path else {
        return;
    };
    e.gauge(
        "wirespeed_switch_fast_path_flows",
        "Flows in the kernel fast path's table (--offload).",
        &[],
        f.summary.flows as f64,
    );
    let counts = [
        (
            "wirespeed_switch_fast_path_installs_total",
            "Flows installed in the kernel fast path.",
            f.summary.installed,
        ),
        (
            "wirespeed_switch_fast_path_table_full_total",
            "Installs refused because the kernel's table was full.",
            f.summary.table_full,
        ),
        (
            "wirespeed_switch_fast_path_evictions_total",
            "Flows removed from the kernel fast path for being idle.",
            f.summary.aged,
        ),
        (
            "wirespeed_switch_fast_path_revalidated_total",
            "Flows removed from the kernel fast path because a rule change could decide \
             their packets otherwise.",
            f.summary.revalidated,
        ),
        (
            "wirespeed_switch_fast_path_port_down_total",
            "Flows removed from the kernel fast path because a port they come from or go to \
             went down or away.",
            f.summary.port_down,
        ),
        (
            "wirespeed_switch_fast_path_flushes_total",
            "Times every flow left the kernel fast path at once (the fail mode changed, a \
             bundle rolled back, many rule changes at once, a learned address moved).",
            f.summary.flushes,
        ),
        (
            "wirespeed_switch_fast_path_stops_total",
            "Times a rule change or a port going down stopped the kernel fast path on some \
             flows (their packets went to user space meanwhile).",
            f.summary.stops,
        ),
        (
            "wirespeed_switch_fast_path_stopped_classes_total",
            "Classes of flows those stops took, of 64 each (a stop takes the classes, by a \
             hash of the flow, of the flows it needs).",
            f.summary.stopped_classes,
        ),
        (
            "wirespeed_switch_fast_path_errors_total",
            "Fast path table operations that failed.",
            f.summary.errors,
        ),
        (
            "wirespeed_switch_fast_path_hits_total",
            "Packets the kernel fast path forwarded without user space.",
            f.summary.kernel.hits,
        ),
        (
            "wirespeed_switch_fast_path_misses_total",
            "Packets the fast path sent up to a poll-mode thread.",
            f.summary.kernel.misses,
        ),
    ];
    for (name, help, n) in counts {
        e.counter(name, help, &[], n);
    }
    for (port, c) in &f.ports {
        let port = port.to_string();
        let labels = [("port", port.as_str())];
        let counts = [
            (
                "wirespeed_switch_fast_path_receive_packets_total",
                "Packets the kernel fast path took in on the port.",
                c.rx_packets,
            ),
            (
                "wirespeed_switch_fast_path_receive_bytes_total",
                "Bytes the kernel fast path took in on the port.",
                c.rx_bytes,
            ),
            (
                "wirespeed_switch_fast_path_transmit_packets_total",
                "Packets the kernel fast path sent out of the port.",
                c.tx_packets,
            ),
            (
                "wirespeed_switch_fast_path_transmit_bytes_total",
                "Bytes the kernel fast path sent out of the port.",
                c.tx_bytes,
            ),
        ];
        for (name, help, n) in counts {
            e.counter(name, help, &labels, n);
        }
    }
}

fn ipfix_figures(e: &mut Exposition, x: &ExportStats) {
    let counts = [
        (
            "wirespeed_switch_ipfix_records_total",
            "IPFIX flow records sent (--ipfix).",
            x.records,
        ),
        (
            "wirespeed_switch_ipfix_messages_total",
            "IPFIX messages sent, template messages included.",
            x.messages,
        ),
        (
            "wirespeed_switch_ipfix_template_messages_total",
            "IPFIX template messages sent.",
            x.templates,
        ),
        (
            "wirespeed_switch_ipfix_send_errors_total",
            "IPFIX messages the socket refused.",
            x.send_errors,
        ),
        (
            "wirespeed_switch_ipfix_lost_records_total",
            "IPFIX flow records in the messages the socket refused.",
            x.lost_records,
        ),
        (
            "wirespeed_switch_ipfix_sampled_out_packets_total",
            "Packets of flows --ipfix-sampling left out.",
            x.sampled_out_packets,
        ),
        (
            "wirespeed_switch_ipfix_lost_megaflows_total",
            "Megaflows emptied out of a full cache before their counts could be kept.",
            x.lost_megaflows,
        ),
    ];
    for (name, help, n) in counts {
        e.counter(name, help, &[], n);
    }
    e.gauge(
        "wirespeed_switch_ipfix_flows",
        "Flows the IPFIX export keeps now.",
        &[],
        x.flows as f64,
    );
}

impl Bridge {
    /// What a scrape reads; made before the threads start (from the parked threads).
    pub fn metrics(&mut self) -> SwitchMetrics {
        self.publish_figures();
        let numbers = self.numbers.clone();
        let labels = self
            .snapshots()
            .iter()
            .map(|s| {
                s.ports
                    .iter()
                    .zip(&numbers)
                    .map(|((info, _, _), n)| {
                        let (device, queue) = device_and_queue(&info.spec);
                        PortLabels {
                            port: n.to_string(),
                            device,
                            queue,
                        }
                    })
                    .collect()
            })
            .collect();
        let tunnels = self
            .tunnels
            .ports
            .iter()
            .map(|t| (t.number.to_string(), t.name()))
            .collect();
        SwitchMetrics {
            labels,
            tunnels,
            pmds: self.published_pmds(),
            bridge: self.figures.clone(),
            extra: self.metrics_extra.clone(),
        }
    }

    /// Adds figures from beyond the bridge to every scrape (`/metrics` and `ctl metrics`).
    pub fn set_metrics_extra(&mut self, extra: MetricsExtra) {
        self.metrics_extra = Some(extra);
    }

    /// The bridge's figures for a scrape (the control side, once a second).
    pub(super) fn publish_figures(&self) {
        let dp = lock(&self.ofproto);
        let mut rules = BTreeMap::new();
        for (_, r) in dp.tables.iter() {
            *rules.entry(r.rule.table).or_insert(0) += 1;
        }
        let learned = dp.mac_table.len();
        let learned_rules_dropped = dp.tables.learned.dropped;
        let meters = dp
            .tables
            .meters()
            .map(|m| (m.0.config.id, m.0.counts()))
            .collect();
        let fast_path = dp.offload.as_ref().and_then(|o| {
            let s = o.summary().ok()?;
            Some(FastPathFigures {
                summary: s,
                ports: dp.ports().iter().map(|&n| (n, o.port_counts(n))).collect(),
            })
        });
        drop(dp);
        let links = (self.numbers().iter().enumerate())
            .map(|(i, &n)| (n, self.link(i) == wirespeed_port::LinkState::Up))
            .collect();
        let figures = BridgeFigures {
            links,
            rules,
            learned,
            learned_rules_dropped,
            fast_path,
            ipfix: self.flow_export().map(|(_, stats)| stats),
            meters,
        };
        self.figures.offer(|| figures);
    }
}
