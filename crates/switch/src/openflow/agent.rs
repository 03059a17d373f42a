//! Answers one OpenFlow message on the bridge's control side, in arrival order with
//! `wirespeed ctl`'s requests and over the same rule tables: a flow added either way shows
//! either way. Rule changes go through [`Bridge::edit`], so once a FLOW_MOD is handled no
//! cache entry from before it is used, and the BARRIER_REPLY that follows means "in effect".

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use wirespeed_packet::flow_key::FlowKey;

use crate::bridge::Bridge;
use crate::bridge::RemovedReason;
use crate::field::FlowBits;
use crate::group::{Group, GroupError, GroupType};
use crate::ofproto::rule_table::InstalledRule;
use crate::ofproto::translate::translate_actions;
use crate::openflow::error::*;
use crate::openflow::flow_mod::{add_flow, delete_flows, modify_flows};
use crate::openflow::message::{
    GroupMod, Incoming, OfFlowMod, PacketOut, PortMod, command, decode, group_command,
};
use crate::openflow::meters;
use crate::openflow::reply::{self, N_TABLES};
use crate::openflow::session::{Sessions, role};
use crate::openflow::stats::{interface, multipart, port_descs};
use crate::openflow::wire::{Header, NO_BUFFER, TABLE_ALL, msg, port};

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
                self.group_mod(bridge, gm)?;
                vec![]
            }
            Incoming::MeterMod(mm) => {
                let removed = meters::meter_mod(bridge, &mm)?;
                self.sessions.rules_removed(&removed, bridge.now());
                vec![]
            }
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
            let only = (gm.group_id != GROUP_ALL).then_some(gm.group_id);
            let removed = bridge.edit(|dp| {
                let _ = dp.flush_offload(now);
                dp.tables.delete_groups(only)
            });
            let reasons: Vec<(InstalledRule, RemovedReason)> = removed
                .into_iter()
                .map(|r| (r, RemovedReason::GroupDelete))
                .collect();
            self.sessions.rules_removed(&reasons, now);
            return Ok(());
        }
        let replace = match gm.command {
            group_command::ADD => false,
            group_command::MODIFY => true,
            _ => return Err(group_mod_failed::BAD_COMMAND),
        };
        let kind = GroupType::from_number(gm.kind).ok_or(group_mod_failed::BAD_TYPE)?;
        let group = Group {
            id: gm.group_id,
            kind,
            buckets: gm.buckets,
        };
        bridge
            .edit(|dp| dp.set_group(group, replace, now))
            .map_err(|e| match e {
                GroupError::IndirectBuckets | GroupError::InvalidId => {
                    group_mod_failed::INVALID_GROUP
                }
                GroupError::NoWatch => group_mod_failed::BAD_WATCH,
                GroupError::Chained => group_mod_failed::CHAINING_UNSUPPORTED,
                GroupError::Exists => group_mod_failed::GROUP_EXISTS,
                GroupError::Unknown => group_mod_failed::UNKNOWN_GROUP,
                GroupError::TooMany => group_mod_failed::OUT_OF_GROUPS,
                GroupError::BadOutPort(_) => bad_action::BAD_OUT_PORT,
            })
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
