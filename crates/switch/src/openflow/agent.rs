//! Answers one OpenFlow message on the bridge's control side, in arrival order with
//! `wirespeed ctl`'s requests and over the same rule tables: a flow added either way shows
//! either way. Rule changes go through [`Bridge::edit`], so once a FLOW_MOD is handled no
//! cache entry from before it is used, and the BARRIER_REPLY that follows means "in effect".

use core::time::Duration;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use wirespeed_packet::flow_key::FlowKey;

use crate::bridge::Bridge;
use crate::bridge::RemovedReason;
use crate::field::FlowBits;
use crate::ofproto::rule_table::InstalledRule;
use crate::ofproto::translate::translate_actions;
use crate::openflow::bundle::{self, BundleControl, Bundles, control};
use crate::openflow::error::*;
use crate::openflow::flow_mod::apply_flow_mod;
use crate::openflow::group_mod::apply_group_mod;
use crate::openflow::message::{
    GroupMod, Incoming, OfFlowMod, PacketOut, PortMod, command, decode,
};
use crate::openflow::meters;
use crate::openflow::reply;
use crate::openflow::session::{Sessions, role};
use crate::openflow::stats::{interface, multipart, shown_port_descs};
use crate::openflow::wire::{Header, NO_BUFFER, msg, port};

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
                | Incoming::MeterMod(_)
                | Incoming::TableMod
                | Incoming::BundleControl(_)
                | Incoming::BundleAdd(_)
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
            Incoming::Multipart(request) => multipart(bridge, xid, request)?,
            Incoming::GroupMod(gm) => {
                self.group_mod(bridge, &gm)?;
                vec![]
            }
            Incoming::BundleControl(request) => {
                vec![self.bundle_control(bridge, id, xid, &request)?]
            }
            Incoming::BundleAdd(add) => {
                self.in_bundles(id, |b| b.add(add))?;
                vec![]
            }
            Incoming::MeterMod(mm) => {
                let removed = meters::meter_mod(bridge, &mm)?;
                self.sessions.rules_removed(&removed, bridge.now());
                vec![]
            }
            // OpenFlow 1.3 deprecates the table configuration bits: nothing to do.
            Incoming::TableMod => vec![],
            // No port has queues (QoS is not configured here): an empty list for a port the
            // controller is shown, or for all of them, as Open vSwitch answers for ports
            // without QoS; BAD_PORT for another.
            Incoming::QueueGetConfig { port: wanted } => {
                let shown = shown_port_descs(bridge).iter().any(|d| d.port_no == wanted);
                if wanted != port::ANY && !shown {
                    return Err(queue_op_failed::BAD_PORT);
                }
                vec![reply::queue_config(xid, wanted)]
            }
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
        let now = bridge.now();
        let removed = bridge.edit(|dp| apply_flow_mod(dp, fm, now))?;
        self.rules_removed(removed, RemovedReason::Delete, now);
        // No buffers: the flow is in, the packet it names is not there to send.
        if fm.buffer_id != NO_BUFFER && fm.command <= command::MODIFY_STRICT {
            return Err(bad_request::BUFFER_UNKNOWN);
        }
        Ok(())
    }

    fn group_mod(&self, bridge: &mut Bridge, gm: &GroupMod) -> Result<(), OfpError> {
        let now = bridge.now();
        let removed = bridge.edit(|dp| apply_group_mod(dp, gm, now))?;
        self.rules_removed(removed, RemovedReason::GroupDelete, now);
        Ok(())
    }

    fn rules_removed(&self, removed: Vec<InstalledRule>, why: RemovedReason, now: Duration) {
        let reasons: Vec<(InstalledRule, RemovedReason)> =
            removed.into_iter().map(|r| (r, why)).collect();
        self.sessions.rules_removed(&reasons, now);
    }

    /// Drops session `id`'s bundles idle for [`bundle::BUNDLE_IDLE`] at `now`, answering
    /// each one's opening message TIMEOUT (as Open vSwitch does).
    pub fn expire_bundles(&self, id: u64, now: Instant) {
        let expired = self
            .sessions
            .with(id, |s| s.bundles.expire(now))
            .unwrap_or_default();
        for opener in expired {
            let xid = Header::peek(&opener).map_or(0, |h| h.xid);
            let error = error_message(bundle_failed::TIMEOUT, xid, &opener);
            self.sessions.send(id, error);
        }
    }

    /// `f` on session `id`'s bundles (a session gone has none).
    fn in_bundles<R>(
        &self,
        id: u64,
        f: impl FnOnce(&mut Bundles) -> Result<R, OfpError>,
    ) -> Result<R, OfpError> {
        self.sessions
            .with(id, |s| f(&mut s.bundles))
            .unwrap_or(Err(bundle_failed::BAD_ID))
    }

    /// BUNDLE_CONTROL: a bundle of session `id` opened, closed, committed or discarded.
    /// A commit that fails sends the failed change's own error before the commit's.
    fn bundle_control(
        &self,
        bridge: &mut Bridge,
        id: u64,
        xid: u32,
        request: &BundleControl,
    ) -> Result<Vec<u8>, OfpError> {
        let BundleControl {
            bundle_id, flags, ..
        } = *request;
        match request.kind {
            control::OPEN_REQUEST => {
                let opener = request.encode(xid);
                self.in_bundles(id, |b| b.open(bundle_id, flags, &opener))?
            }
            control::CLOSE_REQUEST => self.in_bundles(id, |b| b.close(bundle_id, flags))?,
            control::DISCARD_REQUEST => self.in_bundles(id, |b| b.discard(bundle_id))?,
            control::COMMIT_REQUEST => {
                let staged = self.in_bundles(id, |b| b.take(bundle_id, flags))?;
                let now = bridge.now();
                match bridge.edit(|dp| bundle::commit(dp, &staged, now)) {
                    Ok(removed) => self.sessions.rules_removed(&removed, now),
                    Err((i, e)) => {
                        let message = &staged[i].1;
                        let xid = Header::peek(message).map_or(xid, |h| h.xid);
                        self.sessions.send(id, error_message(e, xid, message));
                        return Err(bundle_failed::MSG_FAILED);
                    }
                }
            }
            _ => return Err(bundle_failed::BAD_TYPE),
        }
        Ok(request.reply(xid))
    }

    fn packet_out(&self, bridge: &mut Bridge, po: PacketOut) -> Result<(), OfpError> {
        if po.buffer_id != NO_BUFFER {
            return Err(bad_request::BUFFER_UNKNOWN);
        }
        // From the controller, or from no port (OFPP_ANY: ovs-ofctl's in_port=none, which
        // Open vSwitch takes too), or as if from one of the bridge's.
        let from_nowhere = po.in_port == port::CONTROLLER || po.in_port == port::ANY;
        if !from_nowhere && !bridge.numbers().contains(&po.in_port) {
            return Err(bad_request::BAD_PORT);
        }
        if po.data.len() < 14 {
            return Err(bad_request::BAD_PACKET);
        }
        let mut decision = {
            let ofproto = bridge.ofproto();
            // Any port number, as for a FLOW_MOD (`flow_mod::check_targets`).
            ofproto
                .check_groups_and_meters(&po.actions)
                .map_err(|_| bad_action::BAD_OUT_GROUP)?;
            let key = FlowKey::parse(&po.data, po.in_port);
            translate_actions(&ofproto.tables, &FlowBits::from_key(&key), &po.actions)
        };
        // Now, not through the threads' bounded queue: a BARRIER after it means the rule is
        // there.
        // What the threads learned before goes first (`add_learned` harvests the caches,
        // which queues what cached flows learn again), so it cannot overwrite this later.
        if !decision.learned.is_empty() {
            let (rules, now) = (std::mem::take(&mut decision.learned), bridge.now());
            bridge.edit(|ofproto| {
                ofproto.add_learned(now);
                ofproto.add_learned_rules(rules, now)
            });
        }
        bridge.send_packet(po.in_port, po.data, decision.actions);
        self.unsynced_sends.store(true, Ordering::Release);
        Ok(())
    }
}

/// PORT_MOD: `OFPPC_PORT_DOWN`, which sets the interface down or up (as Open vSwitch
/// does); the link watch then sends the PORT_STATUS. `NO_RECV`, `NO_FWD` and
/// `NO_PACKET_IN` are never set here: clearing them (`mod-port P forward`) is done already,
/// setting them is refused.
fn port_mod(bridge: &Bridge, pm: &PortMod) -> Result<(), OfpError> {
    const PORT_DOWN: u32 = 1;
    const NEVER_SET: u32 = 0x4 | 0x20 | 0x40;
    let descs = shown_port_descs(bridge);
    let desc = descs
        .iter()
        .find(|d| d.port_no == pm.port_no)
        .ok_or(port_mod_failed::BAD_PORT)?;
    if desc.hw_addr != pm.hw_addr {
        return Err(port_mod_failed::BAD_HW_ADDR);
    }
    if pm.mask & !(PORT_DOWN | NEVER_SET) != 0 || pm.mask & pm.config & NEVER_SET != 0 {
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
