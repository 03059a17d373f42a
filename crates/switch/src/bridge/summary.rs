//! What a bridge has done, as one JSON object: each port's counters summed over the
//! threads (and what the kernel's fast path did for it), the tunnel ports', the bridge's
//! drops, each thread's receive counts and where the frames are. `switch --json` prints it
//! at exit and `ctl --json dump-ports` asks for it while the switch runs.

use std::collections::BTreeMap;

use crate::bridge::Bridge;
use crate::bridge::commands::{port_totals, tunnel_totals};
use crate::dpif::pmd::PmdSnapshot;
use crate::dpif::port_links::link_name;
use crate::execute::DropReason;

/// The exit summary: each port's counters summed over the threads, the bridge's counters,
/// each thread's receive counts and where the frames are.
pub fn summary_json(bridge: &mut Bridge, snapshots: &[PmdSnapshot]) -> serde_json::Value {
    let (totals, c) = port_totals(snapshots);
    let now = bridge.now();
    let (fast_ports, fast_path) = {
        let mut dp = bridge.ofproto();
        let harvested = dp.harvest_offload(now);
        match (&dp.offload, harvested) {
            (None, _) => (None, serde_json::Value::Null),
            (Some(_), Err(e)) => (None, serde_json::json!({ "error": e.to_string() })),
            (Some(o), Ok(())) => {
                let counts: BTreeMap<u32, _> =
                    dp.ports().iter().map(|&n| (n, o.port_counts(n))).collect();
                let summary = match o.summary() {
                    Ok(f) => serde_json::json!({
                        "flows": f.flows, "installed": f.installed, "table_full": f.table_full,
                        "aged": f.aged, "revalidated": f.revalidated,
                        "port_down": f.port_down, "flushes": f.flushes,
                        "stops": f.stops, "stopped_classes": f.stopped_classes,
                        "errors": f.errors, "kernel_hits": f.kernel.hits,
                        "sent_up": f.kernel.misses, "stale": f.kernel.stale,
                        "blocked": f.kernel.blocked,
                    }),
                    Err(e) => serde_json::json!({ "error": e.to_string() }),
                };
                (Some(counts), summary)
            }
        }
    };
    let infos = snapshots.first().map_or(Vec::new(), |s| s.ports.clone());
    let ports: Vec<serde_json::Value> = bridge
        .numbers()
        .iter()
        .zip(&totals)
        .zip(&infos)
        .enumerate()
        .map(|(i, ((n, s), (info, _, _)))| {
            serde_json::json!({
                "port": n, "spec": info.spec, "mode": info.mode,
                "link": link_name(bridge.link(i)),
                "multi_buffer": info.multi_buffer,
                "rx_packets": s.rx_packets, "rx_bytes": s.rx_bytes,
                "tx_packets": s.tx_packets, "tx_bytes": s.tx_bytes,
                "tx_stranded": s.tx_stranded, "copies": s.copies,
                "fast_path": fast_ports.as_ref().and_then(|f| f.get(n)).map(|f| serde_json::json!({
                    "rx_packets": f.rx_packets, "rx_bytes": f.rx_bytes,
                    "tx_packets": f.tx_packets, "tx_bytes": f.tx_bytes,
                    "tx_failed": f.tx_failed, "tx_blocked": f.tx_blocked,
                })),
                "drops": s.drops.by_reason().iter().map(|(k, v)| (k.to_string(), *v))
                    .collect::<BTreeMap<_, _>>(),
            })
        })
        .collect();
    let pmds: Vec<serde_json::Value> = snapshots
        .iter()
        .map(|s| {
            serde_json::json!({
                "cpu": s.cpu,
                "busy": s.busy,
                "rx_packets": s.ports.iter().map(|(_, st, rx)| if *rx { st.rx_packets } else { 0 })
                    .collect::<Vec<_>>(),
            })
        })
        .collect();
    let audits: Vec<_> = snapshots.iter().filter_map(|s| s.audit).collect();
    let tunnel_totals = tunnel_totals(snapshots);
    let tunnels: Vec<serde_json::Value> = bridge
        .tunnels()
        .ports
        .iter()
        .zip(&tunnel_totals.ports)
        .map(|(t, c)| {
            serde_json::json!({
                "port": t.number, "spec": t.config.to_string(), "kind": t.config.kind.name(),
                "underlay": t.underlay, "local_ip": t.local_ip.to_string(),
                "remote_ip": t.config.remote_ip.to_string(), "mtu": t.mtu.get(),
                "decap_packets": c.decap_packets, "decap_bytes": c.decap_bytes,
                "encap_packets": c.encap_packets, "encap_bytes": c.encap_bytes,
                "drops": { "no_route": c.no_route, "no_neighbour": c.no_neighbour,
                           "too_big": c.too_big },
                "too_big_answered": c.too_big_answered,
            })
        })
        .collect();
    serde_json::json!({
        "ports": ports,
        "tunnels": tunnels,
        "tunnel_malformed": tunnel_totals.malformed,
        "tunnel_unmatched": tunnel_totals.unmatched,
        "tunnel_endpoint": { "echoes_answered": tunnel_totals.echoes,
                             "other": tunnel_totals.to_endpoint },
        "pmds": pmds,
        "fast_path": fast_path,
        "unknown_port": c.unknown_port, "no_frame": c.no_frame, "to_controller": c.to_controller,
        "bridge_drops": DropReason::ALL.iter()
            .map(|r| (r.name().to_string(), c.drops.get(*r))).collect::<BTreeMap<_, _>>(),
        "frames": {
            "total": audits.iter().map(|a| a.total).sum::<u64>(),
            "lost": audits.iter().map(|a| a.lost).sum::<u64>(),
            "balanced": audits.iter().all(|a| a.balanced()),
        },
    })
}
