//! The statistics a controller asks for (MULTIPART requests), read from the bridge: flows
//! and their aggregate, tables, ports and their descriptions, groups, and the features
//! lists; each reply split into parts under 64 KiB by [`reply::multipart`].

use core::time::Duration;

use wirespeed_port::{Backend, PortSpec};

use crate::bridge::Bridge;
use crate::bridge::commands::{port_totals, tunnel_totals};
use crate::bridge::link::LinkState;
use crate::bridge::port_counts::{PortCounts, fast_port_counts, port_counts};
use crate::ofproto::rule_table::InstalledRule;
use crate::openflow::error::{OfpError, bad_request};
use crate::openflow::flow_mod::selector_of;
use crate::openflow::message::{FlowStatsRequest, MultipartRequest, multipart as mp};
use crate::openflow::meters;
use crate::openflow::reply::{self, PortDesc};
use crate::openflow::table_features::table_features_entry;
use crate::openflow::wire::{GROUP_ALL, TABLE_ALL, port};
use crate::rule::N_TABLES;

/// The reply to one MULTIPART request, in as many messages as it takes.
pub fn multipart(
    bridge: &mut Bridge,
    xid: u32,
    request: MultipartRequest,
) -> Result<Vec<Vec<u8>>, OfpError> {
    let (kind, entries) = match request {
        MultipartRequest::Desc => (mp::DESC, vec![reply::desc_body()]),
        MultipartRequest::Flow(req) => (mp::FLOW, flow_stats(bridge, &req)?),
        MultipartRequest::Aggregate(req) => {
            let now = bridge.now();
            let (mut packets, mut bytes, mut flows) = (0, 0, 0u32);
            selected_rules(bridge, &req, now, |r| {
                packets += r.stats.n_packets;
                bytes += r.stats.n_bytes;
                flows += 1;
            })?;
            (
                mp::AGGREGATE,
                vec![reply::aggregate_body(packets, bytes, flows)],
            )
        }
        MultipartRequest::Table => (mp::TABLE, table_stats(bridge)),
        MultipartRequest::PortStats(wanted) => (mp::PORT_STATS, port_stats(bridge, wanted)),
        // A port an entry, so that many ports split over messages as other replies do.
        MultipartRequest::PortDesc => {
            let descs = shown_port_descs(bridge);
            let entries = descs.iter().map(|desc| {
                let mut w = crate::openflow::wire::Writer::default();
                desc.write(&mut w);
                w.bytes
            });
            (mp::PORT_DESC, entries.collect())
        }
        MultipartRequest::TableFeatures => (
            mp::TABLE_FEATURES,
            (0..N_TABLES).map(table_features_entry).collect(),
        ),
        MultipartRequest::GroupFeatures => (mp::GROUP_FEATURES, vec![reply::group_features_body()]),
        MultipartRequest::MeterFeatures => (mp::METER_FEATURES, vec![meters::features_body()]),
        MultipartRequest::Group(id) => (mp::GROUP, group_stats(bridge, id)),
        MultipartRequest::GroupDesc => {
            let dp = bridge.ofproto();
            let entries = dp.tables.groups().map(reply::group_desc_entry).collect();
            (mp::GROUP_DESC, entries)
        }
        MultipartRequest::Meter(id) => {
            let now = bridge.now();
            (
                mp::METER,
                meters::stats_entries(&bridge.ofproto().tables, id, now),
            )
        }
        MultipartRequest::MeterConfig(id) => (
            mp::METER_CONFIG,
            meters::config_entries(&bridge.ofproto().tables, id),
        ),
        // No queues: an empty list.
        MultipartRequest::Queue => (mp::QUEUE, vec![]),
    };
    Ok(reply::multipart(xid, kind, &entries))
}

/// Runs `each` on the rules a FLOW or AGGREGATE request selects, in `dump-flows` order, with
/// every thread's and the kernel's counts harvested first.
fn selected_rules(
    bridge: &mut Bridge,
    req: &FlowStatsRequest,
    now: Duration,
    mut each: impl FnMut(&InstalledRule),
) -> Result<(), OfpError> {
    if req.table_id != TABLE_ALL && req.table_id >= N_TABLES {
        return Err(bad_request::BAD_TABLE_ID);
    }
    let selector = selector_of(
        req.table_id,
        req.flow_match,
        None,
        (req.cookie, req.cookie_mask),
        (req.out_port, req.out_group),
    );
    bridge.edit(|dp| {
        let _ = dp.harvest(now);
        for r in dp.tables.dump_order() {
            if selector.selects(&r.rule) {
                each(r);
            }
        }
    });
    Ok(())
}

fn flow_stats(bridge: &mut Bridge, req: &FlowStatsRequest) -> Result<Vec<Vec<u8>>, OfpError> {
    let now = bridge.now();
    let mut entries = Vec::new();
    selected_rules(bridge, req, now, |r| {
        entries.push(reply::flow_stats_entry(r, now))
    })?;
    Ok(entries)
}

/// Each table's rules, lookups and matches (the kernel's counts, with `--offload`, first).
fn table_stats(bridge: &mut Bridge) -> Vec<Vec<u8>> {
    let now = bridge.now();
    bridge.edit(|dp| {
        let _ = dp.harvest(now);
        dp.tables
            .table_stats()
            .iter()
            .take(usize::from(N_TABLES))
            .map(reply::table_stats_entry)
            .collect()
    })
}

/// Each group's statistics and its buckets' ([`crate::Ofproto::group_stats`]).
/// Group `id`'s statistics (none when there is no such group, as Open vSwitch answers), or
/// every group's.
fn group_stats(bridge: &mut Bridge, id: u32) -> Vec<Vec<u8>> {
    let now = bridge.now();
    let only = (id != GROUP_ALL).then_some(id);
    bridge
        .edit(|dp| dp.group_stats(only, now))
        .iter()
        .map(|(group, usage)| reply::group_stats_entry(group, usage))
        .collect()
}

/// Each port's counts; a tunnel port's are its packets popped (received) and pushed (sent),
/// and the ones it could not push (dropped). A port not on the bridge, or whose interface
/// is gone (it has no description: [`shown_port_descs`]), has none: asked for, the reply
/// is empty, as Open vSwitch's is.
fn port_stats(bridge: &mut Bridge, wanted: u32) -> Vec<Vec<u8>> {
    let numbers = bridge.numbers().to_vec();
    let gone = gone_ports(bridge);
    let tunnel_numbers: Vec<u32> = bridge.tunnels().ports.iter().map(|t| t.number).collect();
    let snapshots = bridge.snapshots();
    let (totals, _) = port_totals(&snapshots);
    let tunnels = tunnel_totals(&snapshots);
    let fast = fast_port_counts(bridge);
    let devices = numbers
        .iter()
        .zip(&totals)
        .enumerate()
        .map(|(i, (&n, s))| (n, port_counts(s, fast.as_ref().map(|f| &f[i]))));
    let tunnelled = tunnel_numbers.iter().zip(&tunnels.ports).map(|(&n, t)| {
        let counts = PortCounts {
            rx_packets: t.decap_packets,
            tx_packets: t.encap_packets,
            rx_bytes: t.decap_bytes,
            tx_bytes: t.encap_bytes,
            tx_dropped: t.drops(),
            ..PortCounts::default()
        };
        (n, counts)
    });
    let alive = bridge.now();
    devices
        .chain(tunnelled)
        .filter(|(n, _)| (wanted == port::ANY || *n == wanted) && !gone.contains(n))
        .map(|(n, counts)| reply::port_stats_entry(n, &counts, alive))
        .collect()
}

/// The interface behind a port, if it has one.
pub(crate) fn interface(spec: &str) -> Option<String> {
    let spec: PortSpec = spec.parse().ok()?;
    matches!(spec.backend, Backend::Xdp | Backend::Packet | Backend::Tap).then_some(spec.iface)
}

/// A port's name, as PORT_DESC gives it and flows may name it: its interface's, or its
/// spec where it has none.
pub(crate) fn port_name_of(spec: &str) -> String {
    interface(spec).unwrap_or_else(|| spec.to_string())
}

/// The numbers of the ports whose interface was deleted and not yet made again.
fn gone_ports(bridge: &Bridge) -> Vec<u32> {
    let numbers = bridge.numbers().iter().enumerate();
    numbers
        .filter(|&(i, _)| bridge.link(i) == wirespeed_port::LinkState::Gone)
        .map(|(_, &n)| n)
        .collect()
}

/// The ports a controller is shown (PORT_DESC, PORT_MOD): every port but those whose
/// interface is gone. Open vSwitch removes such a port, and adds it back when an interface
/// is made again under its name; PORT_STATUS tells of both.
pub fn shown_port_descs(bridge: &Bridge) -> Vec<PortDesc> {
    let gone = gone_ports(bridge);
    let mut descs = port_descs(bridge);
    descs.retain(|d| !gone.contains(&d.port_no));
    descs
}

/// Each port as `ofp_port` describes it: its interface's name, address and state (a port
/// on no interface is named by its spec and always up; one whose interface was deleted is
/// down, whatever interface has its name now, until the port is bound to it, as `show`
/// says), then the tunnel
/// ports (`vxlan10`, no address, always up: they have no link of their own).
pub fn port_descs(bridge: &Bridge) -> Vec<PortDesc> {
    bridge
        .numbers()
        .iter()
        .zip(bridge.specs())
        .enumerate()
        .map(|(i, (&port_no, spec))| match interface(spec) {
            Some(iface) => {
                let link = match bridge.link(i) {
                    wirespeed_port::LinkState::Gone => LinkState::default(),
                    _ => LinkState::of(&iface),
                };
                PortDesc {
                    port_no,
                    hw_addr: link.mac.map_or([0; 6], |m| m.0),
                    name: iface,
                    admin_up: link.admin_up,
                    carrier: link.carrier,
                    speed_mbps: link.speed_mbps.unwrap_or(0),
                }
            }
            None => PortDesc {
                port_no,
                hw_addr: [0; 6],
                name: port_name_of(spec),
                admin_up: true,
                carrier: true,
                speed_mbps: 0,
            },
        })
        .chain(bridge.tunnels().ports.iter().map(|t| PortDesc {
            port_no: t.number,
            hw_addr: [0; 6],
            name: t.name(),
            admin_up: true,
            carrier: true,
            speed_mbps: 0,
        }))
        .collect()
}
