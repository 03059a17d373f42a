//! Answers one OpenFlow message on the bridge's control side, in arrival order with
//! `wirespeed ctl`'s requests and over the same rule tables: a flow added either way shows
//! either way. Rule changes go through [`Bridge::edit`], so once a FLOW_MOD is handled no
//! cache entry from before it is used, and the BARRIER_REPLY that follows means "in effect".

use core::time::Duration;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use wirespeed_packet::flow_key::FlowKey;
use wirespeed_port::{Backend, PortSpec};

use crate::action::Action;
use crate::bridge::Bridge;
use crate::bridge::RemovedReason;
use crate::bridge::commands::port_totals;
use crate::bridge::link::LinkState;
use crate::field::FlowBits;
use crate::flow_match::Match;
use crate::group::{Group, GroupError, GroupType};
use crate::ofproto::rule_table::{InstalledRule, RuleSelector};
use crate::ofproto::translate::translate_actions;
use crate::openflow::error::*;
use crate::openflow::message::{
    FlowStatsRequest, GroupMod, Incoming, MultipartRequest, OfFlowMod, PacketOut, PortMod, command,
    decode, flow_flags, group_command, multipart as mp,
};
use crate::openflow::reply::{self, N_TABLES, PortCounts, PortDesc};
use crate::openflow::session::{Sessions, role};
use crate::openflow::wire::{GROUP_ANY, Header, NO_BUFFER, TABLE_ALL, msg, port};
use crate::rule::{Rule, check_actions};

/// What every session of a bridge shares on the control side.
pub struct Agent {
    pub sessions: Arc<Sessions>,
    pub datapath_id: u64,
    /// A PACKET_OUT went to a poll-mode thread since the last barrier.
    unsynced_sends: AtomicBool,
}

impl Agent {
    pub fn new(sessions: Arc<Sessions>, datapath_id: u64) -> Agent {
        Agent {
            sessions,
            datapath_id,
            unsynced_sends: AtomicBool::new(false),
        }
    }

    /// Handles one message of session `id` (exactly one framed message) and queues what
    /// it answers.
    pub fn handle(&self, bridge: &mut Bridge, id: u64, bytes: &[u8]) {
        let xid = Header::peek(bytes).map_or(0, |h| h.xid);
        let replies = decode(bytes)
            .and_then(|(header, incoming)| self.respond(bridge, id, header.xid, incoming));
        match replies {
            Ok(replies) => {
                for r in replies {
                    self.sessions.send(id, r);
                }
            }
            Err(e) => self.sessions.send(id, error_message(e, xid, bytes)),
        }
    }

    fn respond(
        &self,
        bridge: &mut Bridge,
        id: u64,
        xid: u32,
        incoming: Incoming,
    ) -> Result<Vec<Vec<u8>>, OfpError> {
        let is_slave = self.sessions.with(id, |s| s.role == role::SLAVE) == Some(true);
        let modifies = matches!(
            incoming,
            Incoming::FlowMod(_)
                | Incoming::PacketOut(_)
                | Incoming::PortMod(_)
                | Incoming::GroupMod(_)
                | Incoming::MeterMod
                | Incoming::TableMod
        );
        if is_slave && modifies {
            return Err(bad_request::IS_SLAVE);
        }
        Ok(match incoming {
            Incoming::Hello { .. } | Incoming::Error | Incoming::EchoReply => vec![],
            Incoming::EchoRequest(data) => vec![reply::echo(msg::ECHO_REPLY, xid, &data)],
            Incoming::FeaturesRequest => vec![reply::features(xid, self.datapath_id)],
            Incoming::GetConfigRequest => self
                .sessions
                .with(id, |s| reply::config(xid, s.config_flags, s.miss_send_len))
                .into_iter()
                .collect(),
            Incoming::SetConfig {
                flags,
                miss_send_len,
            } => {
                // Fragments are always handled normally (OFPC_FRAG_NORMAL).
                if flags & 0x3 != 0 {
                    return Err(switch_config_failed::BAD_FLAGS);
                }
                self.sessions.with(id, |s| {
                    s.config_flags = flags;
                    s.miss_send_len = miss_send_len;
                });
                vec![]
            }
            Incoming::Barrier => {
                if self.unsynced_sends.swap(false, Ordering::AcqRel) {
                    bridge.sync_sends();
                }
                vec![reply::empty(msg::BARRIER_REPLY, xid)]
            }
            Incoming::RoleRequest {
                role,
                generation_id,
            } => vec![self.role_request(id, xid, role, generation_id)?],
            Incoming::GetAsync => self
                .sessions
                .with(id, |s| reply::async_config(xid, &s.async_config))
                .into_iter()
                .collect(),
            Incoming::SetAsync(config) => {
                self.sessions.with(id, |s| s.async_config = config);
                vec![]
            }
            Incoming::FlowMod(fm) => {
                self.flow_mod(bridge, &fm)?;
                vec![]
            }
            Incoming::PacketOut(po) => {
                self.packet_out(bridge, po)?;
                vec![]
            }
            Incoming::PortMod(pm) => {
                port_mod(bridge, &pm)?;
                vec![]
            }
            Incoming::Multipart(request) => self.multipart(bridge, xid, request)?,
            Incoming::GroupMod(gm) => {
                self.group_mod(bridge, gm)?;
                vec![]
            }
            Incoming::MeterMod => return Err(meter_mod_failed::OUT_OF_METERS),
            // OpenFlow 1.3 deprecates the table configuration bits: nothing to do.
            Incoming::TableMod => vec![],
            Incoming::QueueGetConfig => return Err(bad_request::BAD_TYPE),
            Incoming::Experimenter => return Err(OfpError { kind: 1, code: 3 }),
        })
    }

    /// §6.3.6: a master or slave request older than the newest generation seen is stale;
    /// a new master makes the others slaves.
    fn role_request(
        &self,
        id: u64,
        xid: u32,
        wanted: u32,
        generation_id: u64,
    ) -> Result<Vec<u8>, OfpError> {
        if wanted > role::SLAVE {
            return Err(role_request_failed::BAD_ROLE);
        }
        let mut generation = crate::dpif::thread_cache::lock(&self.sessions.generation);
        if wanted == role::MASTER || wanted == role::SLAVE {
            if let Some(seen) = *generation
                && (generation_id.wrapping_sub(seen) as i64) < 0
            {
                return Err(role_request_failed::STALE);
            }
            *generation = Some(generation_id);
        }
        let current = *generation;
        drop(generation);
        if wanted == role::MASTER {
            self.sessions.each(|s| {
                if s.id != id && s.role == role::MASTER {
                    s.role = role::SLAVE;
                }
            });
        }
        let now = self
            .sessions
            .with(id, |s| {
                if wanted != role::NOCHANGE {
                    s.role = wanted;
                }
                s.role
            })
            .unwrap_or(role::EQUAL);
        Ok(reply::role(xid, now, current.unwrap_or(0)))
    }

    fn flow_mod(&self, bridge: &mut Bridge, fm: &OfFlowMod) -> Result<(), OfpError> {
        if fm.table_id != TABLE_ALL && fm.table_id >= N_TABLES {
            return Err(flow_mod_failed::BAD_TABLE_ID);
        }
        let now = bridge.now();
        match fm.command {
            command::ADD => add_flow(bridge, fm, now)?,
            command::MODIFY | command::MODIFY_STRICT => modify_flows(bridge, fm)?,
            _ => {
                let removed = delete_flows(bridge, fm, now);
                let reasons: Vec<(InstalledRule, RemovedReason)> = removed
                    .into_iter()
                    .map(|r| (r, RemovedReason::Delete))
                    .collect();
                self.sessions.rules_removed(&reasons, now);
            }
        }
        // No buffers: the flow is in, the packet it names is not there to send.
        if fm.buffer_id != NO_BUFFER && fm.command <= command::MODIFY_STRICT {
            return Err(bad_request::BUFFER_UNKNOWN);
        }
        Ok(())
    }

    fn group_mod(&self, bridge: &mut Bridge, gm: GroupMod) -> Result<(), OfpError> {
        const GROUP_ALL: u32 = 0xffff_fffc;
        let now = bridge.now();
        if gm.command == group_command::DELETE {
            let removed = bridge.edit(|dp| {
                let _ = dp.flush_offload(now);
                let ids: Vec<u32> = match gm.group_id {
                    GROUP_ALL => dp.tables.groups().map(|g| g.id).collect(),
                    id => vec![id],
                };
                ids.into_iter()
                    .flat_map(|id| dp.tables.delete_group(id))
                    .collect::<Vec<_>>()
            });
            let reasons: Vec<(InstalledRule, RemovedReason)> = removed
                .into_iter()
                .map(|r| (r, RemovedReason::GroupDelete))
                .collect();
            self.sessions.rules_removed(&reasons, now);
            return Ok(());
        }
        if gm.command != group_command::ADD && gm.command != group_command::MODIFY {
            return Err(group_mod_failed::BAD_COMMAND);
        }
        let kind = GroupType::from_number(gm.kind).ok_or(group_mod_failed::BAD_TYPE)?;
        if gm.group_id > port::MAX {
            return Err(group_mod_failed::INVALID_GROUP);
        }
        let group = Group {
            id: gm.group_id,
            kind,
            buckets: gm.buckets,
        };
        group.check().map_err(|e| match e {
            GroupError::IndirectBuckets => group_mod_failed::INVALID_GROUP,
            GroupError::NoWatch => group_mod_failed::BAD_WATCH,
            GroupError::Chained => group_mod_failed::CHAINING_UNSUPPORTED,
        })?;
        {
            let dp = bridge.ofproto();
            for bucket in &group.buckets {
                dp.check_output_ports(&bucket.actions)
                    .map_err(|_| bad_action::BAD_OUT_PORT)?;
            }
            let exists = dp.tables.group(group.id).is_some();
            match gm.command {
                group_command::ADD if exists => return Err(group_mod_failed::GROUP_EXISTS),
                group_command::MODIFY if !exists => return Err(group_mod_failed::UNKNOWN_GROUP),
                _ => {}
            }
        }
        bridge.edit(|dp| {
            let _ = dp.flush_offload(now);
            dp.tables.set_group(group);
        });
        Ok(())
    }

    fn packet_out(&self, bridge: &mut Bridge, po: PacketOut) -> Result<(), OfpError> {
        if po.buffer_id != NO_BUFFER {
            return Err(bad_request::BUFFER_UNKNOWN);
        }
        if po.in_port != port::CONTROLLER && !bridge.numbers().contains(&po.in_port) {
            return Err(bad_request::BAD_PORT);
        }
        if po.data.len() < 14 {
            return Err(bad_request::BAD_PACKET);
        }
        let decision = {
            let ofproto = bridge.ofproto();
            ofproto
                .check_output_ports(&po.actions)
                .map_err(|_| bad_action::BAD_OUT_PORT)?;
            let key = FlowKey::parse(&po.data, po.in_port);
            translate_actions(&ofproto.tables, &FlowBits::from_key(&key), &po.actions)
        };
        bridge.send_packet(po.in_port, po.data, decision.actions);
        self.unsynced_sends.store(true, Ordering::Release);
        Ok(())
    }

    fn multipart(
        &self,
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
            MultipartRequest::Table => {
                let mut active = vec![0u32; usize::from(N_TABLES)];
                for (_, r) in bridge.ofproto().tables.iter() {
                    if let Some(count) = active.get_mut(usize::from(r.rule.table)) {
                        *count += 1;
                    }
                }
                let entries = (0..N_TABLES)
                    .map(|t| reply::table_stats_entry(t, active[usize::from(t)]))
                    .collect();
                (mp::TABLE, entries)
            }
            MultipartRequest::PortStats(wanted) => (mp::PORT_STATS, port_stats(bridge, wanted)?),
            MultipartRequest::PortDesc => {
                let mut w = crate::openflow::wire::Writer::default();
                for desc in port_descs(bridge) {
                    desc.write(&mut w);
                }
                (mp::PORT_DESC, vec![w.bytes])
            }
            MultipartRequest::TableFeatures => (
                mp::TABLE_FEATURES,
                (0..N_TABLES).map(reply::table_features_entry).collect(),
            ),
            MultipartRequest::GroupFeatures => {
                (mp::GROUP_FEATURES, vec![reply::group_features_body()])
            }
            MultipartRequest::MeterFeatures => {
                (mp::METER_FEATURES, vec![reply::meter_features_body()])
            }
            MultipartRequest::Group => (mp::GROUP, group_stats(bridge)),
            MultipartRequest::GroupDesc => {
                let dp = bridge.ofproto();
                let entries = dp.tables.groups().map(reply::group_desc_entry).collect();
                (mp::GROUP_DESC, entries)
            }
            // No meters or queues: empty lists.
            MultipartRequest::Meter => (mp::METER, vec![]),
            MultipartRequest::MeterConfig => (mp::METER_CONFIG, vec![]),
            MultipartRequest::Queue => (mp::QUEUE, vec![]),
        };
        Ok(reply::multipart(xid, kind, &entries))
    }
}

/// True if some packet could match both (they agree wherever both look).
fn overlaps(a: &Match, b: &Match) -> bool {
    let both = a.mask().and(b.mask());
    a.value().and(&both) == b.value().and(&both)
}

fn add_flow(bridge: &mut Bridge, fm: &OfFlowMod, now: Duration) -> Result<(), OfpError> {
    let rule = Rule {
        table: fm.table_id,
        priority: fm.priority,
        cookie: fm.cookie,
        idle_timeout: fm.idle_timeout,
        hard_timeout: fm.hard_timeout,
        flow_match: fm.flow_match,
        actions: fm.actions.clone(),
        flags: fm.flags,
    };
    check_actions(&rule).map_err(|_| bad_action::MATCH_INCONSISTENT)?;
    check_targets(bridge, &rule.actions)?;
    bridge.edit(|dp| {
        if fm.flags & flow_flags::CHECK_OVERLAP != 0 {
            let clash = dp.tables.iter().any(|(_, r)| {
                r.rule.table == rule.table
                    && r.rule.priority == rule.priority
                    && r.rule.flow_match != rule.flow_match
                    && overlaps(&r.rule.flow_match, &rule.flow_match)
            });
            if clash {
                return Err(flow_mod_failed::OVERLAP);
            }
        }
        // The kernel's fast path stops forwarding under the old rules first.
        let _ = dp.flush_offload(now);
        let replaced = dp
            .tables
            .find_exact(rule.table, &rule.flow_match, rule.priority)
            .and_then(|id| dp.tables.get(id))
            .map(|r| r.stats);
        let keep = fm.flags & flow_flags::RESET_COUNTS == 0;
        let id = dp.tables.add(rule, now);
        if let Some(old) = replaced.filter(|_| keep) {
            dp.tables
                .credit_many(id, old.n_packets, old.n_bytes, old.last_used);
        }
        Ok(())
    })
}

/// The ports and groups `actions` send to exist.
fn check_targets(bridge: &Bridge, actions: &[Action]) -> Result<(), OfpError> {
    let dp = bridge.ofproto();
    let missing_group = actions
        .iter()
        .any(|a| matches!(a, Action::Group(g) if dp.tables.group(*g).is_none()));
    if missing_group {
        return Err(bad_action::BAD_OUT_GROUP);
    }
    dp.check_output_ports(actions)
        .map_err(|_| bad_action::BAD_OUT_PORT)
}

fn selector_of(
    table: u8,
    flow_match: Match,
    strict: Option<u16>,
    cookie: u64,
    cookie_mask: u64,
) -> RuleSelector {
    RuleSelector {
        table: (table != TABLE_ALL).then_some(table),
        flow_match,
        strict_priority: strict,
        cookie: (cookie_mask != 0).then_some((cookie, cookie_mask)),
        out_port: None,
        out_group: None,
    }
}

fn modify_flows(bridge: &mut Bridge, fm: &OfFlowMod) -> Result<(), OfpError> {
    let strict = (fm.command == command::MODIFY_STRICT).then_some(fm.priority);
    let selector = selector_of(
        fm.table_id,
        fm.flow_match,
        strict,
        fm.cookie,
        fm.cookie_mask,
    );
    check_targets(bridge, &fm.actions)?;
    let now = bridge.now();
    bridge.edit(|dp| {
        let _ = dp.flush_offload(now);
        dp.tables
            .modify(&selector, &fm.actions, None)
            .map_err(|_| bad_action::MATCH_INCONSISTENT)?;
        if fm.flags & flow_flags::RESET_COUNTS != 0 {
            let ids: Vec<_> = dp
                .tables
                .iter()
                .filter(|(_, r)| selector.selects(&r.rule))
                .map(|(id, _)| id)
                .collect();
            for id in ids {
                dp.tables.reset_counts(id);
            }
        }
        Ok(())
    })
}

fn delete_flows(bridge: &mut Bridge, fm: &OfFlowMod, now: Duration) -> Vec<InstalledRule> {
    let strict = (fm.command == command::DELETE_STRICT).then_some(fm.priority);
    let mut selector = selector_of(
        fm.table_id,
        fm.flow_match,
        strict,
        fm.cookie,
        fm.cookie_mask,
    );
    selector.out_port = (fm.out_port != port::ANY).then_some(fm.out_port);
    selector.out_group = (fm.out_group != GROUP_ANY).then_some(fm.out_group);
    bridge.edit(|dp| {
        let _ = dp.flush_offload(now);
        dp.tables.delete_taking(&selector)
    })
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
    let mut selector = selector_of(
        req.table_id,
        req.flow_match,
        None,
        req.cookie,
        req.cookie_mask,
    );
    selector.out_port = (req.out_port != port::ANY).then_some(req.out_port);
    selector.out_group = (req.out_group != GROUP_ANY).then_some(req.out_group);
    bridge.edit(|dp| {
        let _ = dp.harvest_offload(now);
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

/// Each group's statistics: the rules that send to it (its reference count) and their
/// packets, which are the group's (every packet of such a rule goes through the group).
fn group_stats(bridge: &mut Bridge) -> Vec<Vec<u8>> {
    let now = bridge.now();
    bridge.edit(|dp| {
        let _ = dp.harvest_offload(now);
        dp.tables
            .groups()
            .map(|g| {
                let users: Vec<&InstalledRule> = dp
                    .tables
                    .iter()
                    .map(|(_, r)| r)
                    .filter(|r| r.rule.actions.contains(&Action::Group(g.id)))
                    .collect();
                let packets = users.iter().map(|r| r.stats.n_packets).sum();
                let bytes = users.iter().map(|r| r.stats.n_bytes).sum();
                reply::group_stats_entry(g, users.len() as u32, packets, bytes, now)
            })
            .collect()
    })
}

fn port_stats(bridge: &mut Bridge, wanted: u32) -> Result<Vec<Vec<u8>>, OfpError> {
    let numbers = bridge.numbers().to_vec();
    if wanted != port::ANY && !numbers.contains(&wanted) {
        return Err(bad_request::BAD_PORT);
    }
    let (totals, _) = port_totals(&bridge.snapshots());
    let alive = bridge.now();
    Ok(numbers
        .iter()
        .zip(&totals)
        .filter(|(n, _)| wanted == port::ANY || **n == wanted)
        .map(|(n, s)| {
            let d = &s.drops;
            let counts = PortCounts {
                rx_packets: s.rx_packets,
                tx_packets: s.tx_packets,
                rx_bytes: s.rx_bytes,
                tx_bytes: s.tx_bytes,
                rx_dropped: d.fill_ring_empty + d.rx_ring_full + d.kernel_dropped,
                tx_dropped: d.tx_ring_full + d.tx_error + d.link_down,
                rx_errors: d.rx_invalid_desc,
                tx_errors: d.tx_invalid_desc,
            };
            reply::port_stats_entry(*n, &counts, alive)
        })
        .collect())
}

/// The interface behind a port, if it has one.
fn interface(spec: &str) -> Option<String> {
    let spec: PortSpec = spec.parse().ok()?;
    matches!(spec.backend, Backend::Xdp | Backend::Packet | Backend::Tap).then_some(spec.iface)
}

/// Each port as `ofp_port` describes it: its interface's name, address and state (a port
/// on no interface is named by its spec and always up).
pub fn port_descs(bridge: &Bridge) -> Vec<PortDesc> {
    bridge
        .numbers()
        .iter()
        .zip(bridge.specs())
        .map(|(&port_no, spec)| match interface(spec) {
            Some(iface) => {
                let link = LinkState::of(&iface);
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
                name: spec.clone(),
                admin_up: true,
                carrier: true,
                speed_mbps: 0,
            },
        })
        .collect()
}

/// PORT_MOD: only `OFPPC_PORT_DOWN`, which sets the interface down or up (as Open vSwitch
/// does); the link watch then sends the PORT_STATUS.
fn port_mod(bridge: &Bridge, pm: &PortMod) -> Result<(), OfpError> {
    const PORT_DOWN: u32 = 1;
    let descs = port_descs(bridge);
    let desc = descs
        .iter()
        .find(|d| d.port_no == pm.port_no)
        .ok_or(port_mod_failed::BAD_PORT)?;
    if desc.hw_addr != pm.hw_addr {
        return Err(port_mod_failed::BAD_HW_ADDR);
    }
    if pm.mask & !PORT_DOWN != 0 {
        return Err(port_mod_failed::BAD_CONFIG);
    }
    if pm.mask & PORT_DOWN == 0 {
        return Ok(());
    }
    let i = bridge.numbers().iter().position(|&n| n == pm.port_no);
    let iface = i
        .and_then(|i| interface(&bridge.specs()[i]))
        .ok_or(port_mod_failed::BAD_CONFIG)?;
    let state = if pm.config & PORT_DOWN != 0 {
        "down"
    } else {
        "up"
    };
    let done = std::process::Command::new("ip")
        .args(["link", "set", "dev", &iface, state])
        .status()
        .is_ok_and(|s| s.success());
    match done {
        true => Ok(()),
        false => Err(port_mod_failed::BAD_CONFIG),
    }
}
