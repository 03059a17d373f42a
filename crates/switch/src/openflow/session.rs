//! The OpenFlow connections a bridge has, as the rest of the switch reaches them: each
//! session's role, configuration and outgoing queue, shared between the connection threads,
//! the control side that answers requests, and the poll-mode threads that send PACKET_INs.
//!
//! Every send is a `try_send` into a bounded queue a writer thread empties: a slow or dead
//! controller costs a dropped (and counted) message, never a waiting poll-mode thread.

use core::time::Duration;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use wirespeed_port::LinkState;

use crate::bridge::{BridgeEvents, RemovedReason, link};
use crate::dpif::packet_in::PacketInSink;
use crate::dpif::thread_cache::lock;
use crate::ofproto::rule_table::InstalledRule;
use crate::openflow::bundle::Bundles;
use crate::openflow::message::AsyncConfig;
use crate::openflow::reply::{self, PortDesc, port_reason};
use crate::rule::PacketInOrigin;
use crate::rule::flow_flags::SEND_FLOW_REM;

/// `ofp_controller_role`.
pub mod role {
    pub const NOCHANGE: u32 = 0;
    pub const EQUAL: u32 = 1;
    pub const MASTER: u32 = 2;
    pub const SLAVE: u32 = 3;
}

/// Messages a session's queue holds before more are dropped.
pub const QUEUE_MESSAGES: usize = 1024;
/// PACKET_INs stop at half the queue, so a flood of them leaves room for the replies (a
/// dropped BARRIER_REPLY would leave a controller waiting).
pub const PACKET_IN_ROOM: usize = QUEUE_MESSAGES / 2;
/// Bytes queued for a peer past which its requests are not read (as Open vSwitch stops at
/// `OFCONN_REPLY_MAX` replies): one that sends ECHO_REQUESTs of 64 KiB and never reads gets
/// TCP's back-pressure, where up to [`QUEUE_MESSAGES`] replies of 64 KiB each (64 MiB) were
/// held for it.
pub const MAX_QUEUED_BYTES: usize = 4 << 20;
/// PACKET_INs also stop at half those bytes (large frames make large ones), so that those a
/// busy controller has not read yet never hold up its FLOW_MODs on their own.
pub const PACKET_IN_BYTES: usize = MAX_QUEUED_BYTES / 2;

/// What a session's queue holds and its writer has not written yet: messages, and their
/// bytes. The writer takes each off after its write ([`Queued::written`]).
#[derive(Default, Debug)]
pub struct Queued {
    messages: AtomicUsize,
    bytes: AtomicUsize,
}

impl Queued {
    fn add(&self, len: usize) {
        self.messages.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(len, Ordering::Relaxed);
    }

    /// A message of `len` bytes was written.
    pub fn written(&self, len: usize) {
        self.messages.fetch_sub(1, Ordering::Relaxed);
        self.bytes.fetch_sub(len, Ordering::Relaxed);
    }

    pub fn messages(&self) -> usize {
        self.messages.load(Ordering::Relaxed)
    }

    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// One connection's state.
pub struct Session {
    pub id: u64,
    out: SyncSender<Vec<u8>>,
    queued: Arc<Queued>,
    /// A `--controller` connection that said its HELLO (it counts for the fail mode), not a
    /// `--openflow` client.
    pub active: bool,
    pub role: u32,
    pub async_config: AsyncConfig,
    pub config_flags: u16,
    pub miss_send_len: u16,
    /// The connection's open bundles (gone with it).
    pub bundles: Bundles,
}

/// Which asynchronous message a mask in [`AsyncConfig`] is for.
#[derive(Clone, Copy)]
enum AsyncKind {
    PacketIn,
    PortStatus,
    FlowRemoved,
}

impl Session {
    fn wants(&self, kind: AsyncKind, reason: u8) -> bool {
        let slave = usize::from(self.role == role::SLAVE);
        let masks = match kind {
            AsyncKind::PacketIn => self.async_config.packet_in,
            AsyncKind::PortStatus => self.async_config.port_status,
            AsyncKind::FlowRemoved => self.async_config.flow_removed,
        };
        masks[slave] & (1 << reason) != 0
    }
}

/// Every session of the bridge, and what they have in common.
#[derive(Default)]
pub struct Sessions {
    list: Mutex<Vec<Session>>,
    next_id: AtomicU64,
    /// The generation id of the last master or slave request (§6.3.6), if any.
    pub generation: Mutex<Option<u64>>,
    /// The ports as controllers see them (names, addresses), kept for PORT_STATUS.
    pub ports: Mutex<Vec<PortDesc>>,
    /// Messages dropped because a session's queue was full.
    pub dropped: AtomicU64,
    /// PACKET_INs sent and dropped.
    pub packet_ins: AtomicU64,
    /// Sessions open, kept beside the list for a scrape, which must not take the list's
    /// lock (a poll-mode thread takes it for a PACKET_IN).
    open: AtomicUsize,
}

impl Sessions {
    pub fn new(ports: Vec<PortDesc>) -> Arc<Sessions> {
        Arc::new(Sessions {
            ports: Mutex::new(ports),
            ..Sessions::default()
        })
    }

    /// Adds a session whose messages go to `out`; its id, and what is queued for it, which
    /// its writer lowers after each write.
    pub fn open(&self, out: SyncSender<Vec<u8>>, active: bool) -> (u64, Arc<Queued>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let queued = Arc::new(Queued::default());
        lock(&self.list).push(Session {
            id,
            out,
            queued: queued.clone(),
            active,
            role: role::EQUAL,
            async_config: AsyncConfig::default(),
            config_flags: 0,
            bundles: Bundles::default(),
            miss_send_len: 128,
        });
        self.open.fetch_add(1, Ordering::Relaxed);
        (id, queued)
    }

    /// How many sessions are open.
    pub fn count(&self) -> usize {
        lock(&self.list).len()
    }

    /// How many sessions are open, without the list's lock.
    pub fn open_now(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    pub fn close(&self, id: u64) {
        let mut list = lock(&self.list);
        let before = list.len();
        list.retain(|s| s.id != id);
        self.open.fetch_sub(before - list.len(), Ordering::Relaxed);
    }

    /// How many `--controller` sessions are connected.
    pub fn active_count(&self) -> usize {
        lock(&self.list).iter().filter(|s| s.active).count()
    }

    /// Runs `f` on session `id`, if it is still open.
    pub fn with<R>(&self, id: u64, f: impl FnOnce(&mut Session) -> R) -> Option<R> {
        lock(&self.list).iter_mut().find(|s| s.id == id).map(f)
    }

    /// Runs `f` on every session.
    pub fn each(&self, mut f: impl FnMut(&mut Session)) {
        for s in lock(&self.list).iter_mut() {
            f(s);
        }
    }

    /// Queues `message` for session `id`.
    pub fn send(&self, id: u64, message: Vec<u8>) {
        let list = lock(&self.list);
        if let Some(s) = list.iter().find(|s| s.id == id) {
            self.push(s, message);
        }
    }

    fn push(&self, s: &Session, message: Vec<u8>) -> bool {
        let len = message.len();
        // Counted before it can be written (and taken off).
        s.queued.add(len);
        match s.out.try_send(message) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                s.queued.written(len);
                self.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
            Err(TrySendError::Disconnected(_)) => {
                s.queued.written(len);
                false
            }
        }
    }

    fn broadcast(&self, kind: AsyncKind, reason: u8, message: &[u8]) {
        for s in lock(&self.list).iter().filter(|s| s.wants(kind, reason)) {
            let full = s.queued.messages() >= PACKET_IN_ROOM
                || s.queued.bytes() + message.len() > PACKET_IN_BYTES;
            if matches!(kind, AsyncKind::PacketIn) && full {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            self.push(s, message.to_vec());
        }
    }

    /// Sends FLOW_REMOVED for each rule that asked for it.
    pub fn rules_removed(&self, removed: &[(InstalledRule, RemovedReason)], now: Duration) {
        for (r, reason) in removed {
            if r.rule.flags & SEND_FLOW_REM != 0 {
                let message = reply::flow_removed(r, *reason as u8, now);
                self.broadcast(AsyncKind::FlowRemoved, *reason as u8, &message);
            }
        }
    }
}

/// The bridge's controller while OpenFlow is on: each packet-in becomes a PACKET_IN to every
/// session that wants it.
pub struct PacketInOpenFlow {
    pub sessions: Arc<Sessions>,
}

impl PacketInSink for PacketInOpenFlow {
    fn packet_in(&mut self, in_port: u32, origin: PacketInOrigin, data: &[u8], len: usize) {
        let message = reply::packet_in(in_port, &origin, data, len);
        let reason = u8::from(!origin.table_miss);
        self.sessions.packet_ins.fetch_add(1, Ordering::Relaxed);
        self.sessions
            .broadcast(AsyncKind::PacketIn, reason, &message);
    }
}

/// Timeouts and port changes, told to the sessions.
pub struct OpenFlowEvents {
    pub sessions: Arc<Sessions>,
}

impl BridgeEvents for OpenFlowEvents {
    fn rules_removed(&mut self, removed: &[(InstalledRule, RemovedReason)], now: Duration) {
        self.sessions.rules_removed(removed, now);
    }

    /// PORT_STATUS: MODIFY when the link goes up or down (with PORT_DOWN in its config
    /// when the interface was set down, as `dump-ports-desc` says), DELETE when the
    /// interface is gone (the port is left out), ADD when the port was bound to an
    /// interface made again under its name (with that interface's address).
    fn port_changed(&mut self, port: u32, was: LinkState, link: LinkState) {
        let (reason, desc) = {
            let mut ports = lock(&self.sessions.ports);
            let Some(desc) = ports.iter_mut().find(|p| p.port_no == port) else {
                return;
            };
            let reason = match (was, link) {
                (_, LinkState::Gone) => port_reason::DELETE,
                (LinkState::Gone, _) => port_reason::ADD,
                _ => port_reason::MODIFY,
            };
            // A port gone is described as it last was: its interface has no more to say.
            if link != LinkState::Gone {
                let kernel = link::LinkState::of(&desc.name);
                let up = link == LinkState::Up;
                desc.carrier = up;
                desc.admin_up = up || kernel.admin_up;
                if reason == port_reason::ADD {
                    desc.hw_addr = kernel.mac.map_or([0; 6], |m| m.0);
                    desc.speed_mbps = kernel.speed_mbps.unwrap_or(0);
                }
            }
            (reason, desc.clone())
        };
        let message = reply::port_status(reason, &desc);
        self.sessions
            .broadcast(AsyncKind::PortStatus, reason, &message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::sync_channel;

    /// PACKET_INs of whole jumbo frames stop at half the bytes a peer may have waiting, so
    /// they never stop the reading of its requests on their own.
    #[test]
    fn large_packet_ins_stop_at_half_the_bytes() {
        let sessions = Sessions::new(vec![]);
        let (out, inbox) = sync_channel(QUEUE_MESSAGES);
        let (id, queued) = sessions.open(out, false);
        sessions.with(id, |s| s.miss_send_len = 0xffff);
        let mut controller = PacketInOpenFlow {
            sessions: sessions.clone(),
        };
        let frame = [0u8; 9000];
        for _ in 0..PACKET_IN_ROOM {
            controller.packet_in(1, PacketInOrigin::default(), &frame, frame.len());
        }
        let sent: Vec<Vec<u8>> = inbox.try_iter().collect();
        let each = sent[0].len();
        assert!(each > frame.len());
        assert_eq!(sent.len(), PACKET_IN_BYTES / each);
        assert!(queued.bytes() <= PACKET_IN_BYTES);
        assert_eq!(
            sessions.dropped.load(Ordering::Relaxed) as usize,
            PACKET_IN_ROOM - sent.len()
        );
    }

    #[test]
    fn packet_ins_stop_at_half_the_queue_and_are_counted() {
        let sessions = Sessions::new(vec![]);
        let (out, inbox) = sync_channel(QUEUE_MESSAGES);
        let (id, queued) = sessions.open(out, false);
        let mut controller = PacketInOpenFlow {
            sessions: sessions.clone(),
        };
        for _ in 0..PACKET_IN_ROOM + 3 {
            controller.packet_in(1, PacketInOrigin::default(), &[0; 14], 14);
        }
        assert_eq!(sessions.dropped.load(Ordering::Relaxed), 3);
        // Replies still have room.
        sessions.send(id, vec![1]);
        let sent: Vec<Vec<u8>> = inbox.try_iter().collect();
        assert_eq!(sent.len(), PACKET_IN_ROOM + 1);
        let bytes: usize = sent.iter().map(Vec::len).sum();
        assert_eq!((queued.messages(), queued.bytes()), (sent.len(), bytes));
        for message in &sent {
            queued.written(message.len());
        }
        assert_eq!((queued.messages(), queued.bytes()), (0, 0));
        // A slave gets no packet-ins by default.
        sessions.with(id, |s| s.role = role::SLAVE);
        controller.packet_in(1, PacketInOrigin::default(), &[0; 14], 14);
        assert_eq!(inbox.try_iter().count(), 0);
    }
}
