//! Bundles: changes a controller stages and then commits as one, all or none, with no packet
//! switched by a table half changed. OpenFlow 1.4's, carried in 1.3 as ONF's extension 230
//! (the experimenter messages `ovs-ofctl -O OpenFlow13 --bundle` sends): BUNDLE_CONTROL opens,
//! closes, commits or discards a bundle of the connection's, BUNDLE_ADD_MESSAGE stages a
//! FLOW_MOD or GROUP_MOD in one. A commit applies the staged changes in order inside one
//! `Bridge::edit`; the first that fails puts the tables back as they were (each change
//! taken back, [`crate::RuleTables::roll_back`]: the cost is the bundle's, not the tables'),
//! its error is sent for its message and the commit answers MSG_FAILED, as Open vSwitch
//! does. Every bundle of a connection goes with it.

use core::time::Duration;
use std::collections::BTreeMap;
use std::time::Instant;

use crate::bridge::RemovedReason;
use crate::ofproto::rule_table::InstalledRule;
use crate::ofproto::state::Ofproto;
use crate::openflow::error::{ECHOED_BYTES, OfpError, bad_request, bundle_failed};
use crate::openflow::flow_mod::apply_flow_mod;
use crate::openflow::group_mod::apply_group_mod;
use crate::openflow::message::{GroupMod, Incoming, OfFlowMod, command, decode};
use crate::openflow::wire::{HEADER_LEN, Header, NO_BUFFER, OFP_VERSION, Reader, Writer, msg};

/// ONF's experimenter id, and its message types for bundles.
pub const ONF_EXPERIMENTER: u32 = 0x4f4e_4600;
pub const ONFT_BUNDLE_CONTROL: u32 = 2300;
pub const ONFT_BUNDLE_ADD_MESSAGE: u32 = 2301;

/// `ofp14_bundle_ctrl_type`: each request's reply is the next number.
pub mod control {
    pub const OPEN_REQUEST: u16 = 0;
    pub const CLOSE_REQUEST: u16 = 2;
    pub const COMMIT_REQUEST: u16 = 4;
    pub const DISCARD_REQUEST: u16 = 6;
}

/// `ofp14_bundle_flags`. A commit here is always both: in order, and all or none.
pub mod flag {
    pub const ATOMIC: u16 = 1;
    pub const ORDERED: u16 = 2;
}

/// Open bundles a connection may hold, and the bytes staged in them in all: past either, a
/// client is refused (OUT_OF_BUNDLES, MSG_TOO_MANY) before it fills the switch's memory.
pub const MAX_BUNDLES: usize = 64;
pub const MAX_STAGED_BYTES: usize = 16 << 20;

/// A BUNDLE_CONTROL request.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct BundleControl {
    pub bundle_id: u32,
    pub kind: u16,
    pub flags: u16,
}

/// A change a bundle can hold.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Staged {
    Flow(Box<OfFlowMod>),
    Group(GroupMod),
}

/// A BUNDLE_ADD_MESSAGE: the change it stages, and the message itself (an error about the
/// change at commit quotes it, as Open vSwitch's does).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct BundleAdd {
    pub bundle_id: u32,
    pub flags: u16,
    pub change: Staged,
    pub message: Vec<u8>,
}

/// An EXPERIMENTER message: a bundle's, or one this switch does not know.
pub fn decode_experimenter(
    header: &Header,
    r: &mut Reader<'_>,
    message: &[u8],
) -> Result<Incoming, OfpError> {
    let (experimenter, kind) = (r.u32()?, r.u32()?);
    let bundles = [ONFT_BUNDLE_CONTROL, ONFT_BUNDLE_ADD_MESSAGE];
    if experimenter != ONF_EXPERIMENTER || !bundles.contains(&kind) {
        return Ok(Incoming::Experimenter);
    }
    let (bundle_id, control_kind, flags) = (r.u32()?, r.u16()?, r.u16()?);
    match kind {
        // Properties may follow: none is defined that changes what a bundle does here.
        ONFT_BUNDLE_CONTROL => Ok(Incoming::BundleControl(BundleControl {
            bundle_id,
            kind: control_kind,
            flags,
        })),
        _ => {
            let change = staged_change(header, r.rest())?;
            Ok(Incoming::BundleAdd(BundleAdd {
                bundle_id,
                flags,
                change,
                message: message.to_vec(),
            }))
        }
    }
}

/// The message a BUNDLE_ADD_MESSAGE carries (then perhaps padding and properties): a
/// FLOW_MOD or GROUP_MOD of this version and transaction.
fn staged_change(outer: &Header, inner: &[u8]) -> Result<Staged, OfpError> {
    let header = Header::peek(inner).ok_or(bundle_failed::MSG_BAD_LEN)?;
    let len = usize::from(header.length);
    if len < HEADER_LEN || len > inner.len() {
        return Err(bundle_failed::MSG_BAD_LEN);
    }
    if header.version != OFP_VERSION || !matches!(header.kind, msg::FLOW_MOD | msg::GROUP_MOD) {
        return Err(bundle_failed::MSG_UNSUP);
    }
    if header.xid != outer.xid {
        return Err(bundle_failed::MSG_BAD_XID);
    }
    // The message's own errors (a bad match, say) are its own: said as they are.
    match decode(&inner[..len])?.1 {
        // There are no buffers: a staged flow cannot name a packet to send.
        Incoming::FlowMod(fm)
            if fm.buffer_id != NO_BUFFER && fm.command <= command::MODIFY_STRICT =>
        {
            Err(bad_request::BUFFER_UNKNOWN)
        }
        Incoming::FlowMod(fm) => Ok(Staged::Flow(Box::new(fm))),
        Incoming::GroupMod(gm) => Ok(Staged::Group(gm)),
        _ => Err(bundle_failed::MSG_UNSUP),
    }
}

impl BundleControl {
    /// The message (a request, or with `kind` one more, its reply).
    pub fn encode(&self, xid: u32) -> Vec<u8> {
        let mut w = Writer::message(msg::EXPERIMENTER, xid);
        w.u32(ONF_EXPERIMENTER).u32(ONFT_BUNDLE_CONTROL);
        w.u32(self.bundle_id).u16(self.kind).u16(self.flags);
        w.finish()
    }

    /// The reply to this request, once done.
    pub fn reply(&self, xid: u32) -> Vec<u8> {
        BundleControl {
            bundle_id: self.bundle_id,
            kind: self.kind + 1,
            flags: 0,
        }
        .encode(xid)
    }
}

impl BundleAdd {
    /// The message staging `change` (the inner message takes `xid` too).
    pub fn encode(bundle_id: u32, flags: u16, change: &Staged, xid: u32) -> Vec<u8> {
        let inner = match change {
            Staged::Flow(fm) => fm.encode(xid),
            Staged::Group(gm) => gm.encode(xid),
        };
        let mut w = Writer::message(msg::EXPERIMENTER, xid);
        w.u32(ONF_EXPERIMENTER).u32(ONFT_BUNDLE_ADD_MESSAGE);
        w.u32(bundle_id).u16(0).u16(flags);
        w.slice(&inner);
        w.finish()
    }
}

/// Applies a bundle's changes in order, all or none: the rules they deleted and why, or
/// which change failed and its error (the tables then as they were).
pub fn commit(
    dp: &mut Ofproto,
    staged: &[StagedMessage],
    now: Duration,
) -> Result<Vec<(InstalledRule, RemovedReason)>, (usize, OfpError)> {
    // The kernel's fast path goes on forwarding: each change takes the counts of the rules it
    // takes away first (`before_taking`), so a rollback, which puts them back in
    // their slots with their counts, loses none, and the others stay their rules'.
    dp.watch_offload();
    dp.begin_undo();
    let mut removed = Vec::new();
    for (i, (change, _)) in staged.iter().enumerate() {
        let done = match change {
            Staged::Flow(fm) => {
                apply_flow_mod(dp, fm, now).map(|rules| (rules, RemovedReason::Delete))
            }
            Staged::Group(gm) => {
                apply_group_mod(dp, gm, now).map(|rules| (rules, RemovedReason::GroupDelete))
            }
        };
        match done {
            Ok((rules, why)) => removed.extend(rules.into_iter().map(|r| (r, why))),
            Err(e) => {
                dp.tables.roll_back();
                return Err((i, e));
            }
        }
    }
    dp.tables.keep();
    Ok(removed)
}

/// A staged change and the BUNDLE_ADD_MESSAGE it came in.
pub type StagedMessage = (Staged, Vec<u8>);

struct Bundle {
    flags: u16,
    closed: bool,
    staged: Vec<StagedMessage>,
    /// When a message last touched it, and the start of the one that opened it (echoed in
    /// the TIMEOUT error if it goes idle).
    used: Instant,
    opener: Vec<u8>,
}

/// How long a bundle may go untouched before it is dropped with a TIMEOUT error (Open
/// vSwitch's default): a controller that forgets one does not hold its changes for ever.
pub const BUNDLE_IDLE: Duration = Duration::from_secs(10);

/// A connection's open bundles. Each refusal that Open vSwitch answers by dropping the
/// bundle drops it here too, so a confused client starts again from nothing.
#[derive(Default)]
pub struct Bundles {
    open: BTreeMap<u32, Bundle>,
    bytes: usize,
}

impl Bundles {
    /// Opens bundle `id` for `opener`, the message that asked (its first bytes are kept).
    pub fn open(&mut self, id: u32, flags: u16, opener: &[u8]) -> Result<(), OfpError> {
        if self.open.contains_key(&id) {
            self.drop_bundle(id);
            return Err(bundle_failed::BAD_ID);
        }
        if flags & !(flag::ATOMIC | flag::ORDERED) != 0 {
            return Err(bundle_failed::BAD_FLAGS);
        }
        if self.open.len() >= MAX_BUNDLES {
            return Err(bundle_failed::OUT_OF_BUNDLES);
        }
        self.open.insert(
            id,
            Bundle {
                flags,
                closed: false,
                staged: Vec::new(),
                used: Instant::now(),
                opener: opener[..opener.len().min(ECHOED_BYTES)].to_vec(),
            },
        );
        Ok(())
    }

    pub fn close(&mut self, id: u32, flags: u16) -> Result<(), OfpError> {
        let bundle = self.open.get_mut(&id).ok_or(bundle_failed::BAD_ID)?;
        if bundle.closed {
            self.drop_bundle(id);
            return Err(bundle_failed::BUNDLE_CLOSED);
        }
        if bundle.flags != flags {
            self.drop_bundle(id);
            return Err(bundle_failed::BAD_FLAGS);
        }
        bundle.closed = true;
        bundle.used = Instant::now();
        Ok(())
    }

    pub fn discard(&mut self, id: u32) -> Result<(), OfpError> {
        match self.open.contains_key(&id) {
            true => {
                self.drop_bundle(id);
                Ok(())
            }
            false => Err(bundle_failed::BAD_ID),
        }
    }

    /// Stages `add`'s change, opening its bundle if it is not open (as Open vSwitch does).
    pub fn add(&mut self, add: BundleAdd) -> Result<(), OfpError> {
        if !self.open.contains_key(&add.bundle_id) {
            self.open(add.bundle_id, add.flags, &add.message)?;
        }
        let bundle = self.open.get(&add.bundle_id).expect("opened above");
        let refused = if bundle.closed {
            Some(bundle_failed::BUNDLE_CLOSED)
        } else if bundle.flags != add.flags {
            Some(bundle_failed::BAD_FLAGS)
        } else if self.bytes + add.message.len() > MAX_STAGED_BYTES {
            Some(bundle_failed::MSG_TOO_MANY)
        } else {
            None
        };
        if let Some(e) = refused {
            self.drop_bundle(add.bundle_id);
            return Err(e);
        }
        self.bytes += add.message.len();
        let bundle = self.open.get_mut(&add.bundle_id).expect("checked above");
        bundle.staged.push((add.change, add.message));
        bundle.used = Instant::now();
        Ok(())
    }

    /// Drops the bundles untouched for [`BUNDLE_IDLE`] at `now`; the messages that opened
    /// them (their first bytes), each to be answered TIMEOUT.
    pub fn expire(&mut self, now: Instant) -> Vec<Vec<u8>> {
        let idle: Vec<u32> = self
            .open
            .iter()
            .filter(|(_, b)| now.saturating_duration_since(b.used) >= BUNDLE_IDLE)
            .map(|(&id, _)| id)
            .collect();
        idle.into_iter()
            .map(|id| {
                let opener = self.open.get(&id).map(|b| b.opener.clone());
                self.drop_bundle(id);
                opener.unwrap_or_default()
            })
            .collect()
    }

    /// Takes bundle `id`'s changes to commit; the bundle is gone whatever the commit does.
    pub fn take(&mut self, id: u32, flags: u16) -> Result<Vec<StagedMessage>, OfpError> {
        let bundle = self.open.get(&id).ok_or(bundle_failed::BAD_ID)?;
        let flags_agree = bundle.flags == flags;
        let staged = self.drop_bundle(id);
        match flags_agree {
            true => Ok(staged),
            false => Err(bundle_failed::BAD_FLAGS),
        }
    }

    fn drop_bundle(&mut self, id: u32) -> Vec<StagedMessage> {
        let staged = self.open.remove(&id).map(|b| b.staged).unwrap_or_default();
        self.bytes -= staged.iter().map(|(_, m)| m.len()).sum::<usize>();
        staged
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::Action;
    use crate::flow_match::Match;
    use crate::openflow::error::error_message;

    fn flow_mod(command: u8, port: u32) -> OfFlowMod {
        OfFlowMod {
            cookie: 0,
            cookie_mask: 0,
            table_id: 0,
            command,
            idle_timeout: 0,
            hard_timeout: 0,
            priority: 10,
            buffer_id: NO_BUFFER,
            out_port: crate::openflow::wire::port::ANY,
            out_group: crate::openflow::wire::GROUP_ANY,
            flags: 0,
            flow_match: Match::ANY,
            actions: vec![Action::Output(port)],
        }
    }

    fn add(bundle_id: u32, flags: u16, port: u32) -> BundleAdd {
        let change = Staged::Flow(Box::new(flow_mod(command::ADD, port)));
        let message = BundleAdd::encode(bundle_id, flags, &change, 7);
        BundleAdd {
            bundle_id,
            flags,
            change,
            message,
        }
    }

    #[test]
    fn bundle_messages_decode_as_ovs_ofctl_sends_them() {
        let open = BundleControl {
            bundle_id: 3,
            kind: control::OPEN_REQUEST,
            flags: flag::ATOMIC | flag::ORDERED,
        };
        let bytes = open.encode(5);
        assert_eq!(
            &bytes[..24],
            &[
                4, 4, 0, 24, 0, 0, 0, 5, 0x4f, 0x4e, 0x46, 0, 0, 0, 0x08, 0xfc, 0, 0, 0, 3, 0, 0,
                0, 3
            ]
        );
        assert_eq!(
            decode(&bytes).unwrap().1,
            Incoming::BundleControl(open.clone())
        );
        let reply = open.reply(5);
        assert_eq!(
            &reply[16..24],
            &[0, 0, 0, 3, 0, 1, 0, 0],
            "OPEN_REPLY, no flags"
        );

        let staged = add(3, flag::ATOMIC, 2);
        assert_eq!(
            decode(&staged.message).unwrap().1,
            Incoming::BundleAdd(staged)
        );
    }

    #[test]
    fn what_a_bundle_cannot_hold_is_refused() {
        let inner_is = |inner: Vec<u8>, xid: u32| {
            let mut w = Writer::message(msg::EXPERIMENTER, xid);
            w.u32(ONF_EXPERIMENTER).u32(ONFT_BUNDLE_ADD_MESSAGE);
            w.u32(1).u16(0).u16(0).slice(&inner);
            decode(&w.finish()).map(|(_, m)| m)
        };
        let fm = flow_mod(command::ADD, 2);
        assert!(matches!(
            inner_is(fm.encode(9), 9),
            Ok(Incoming::BundleAdd(_))
        ));
        assert_eq!(inner_is(fm.encode(8), 9), Err(bundle_failed::MSG_BAD_XID));
        let barrier = Writer::message(msg::BARRIER_REQUEST, 9).finish();
        assert_eq!(inner_is(barrier, 9), Err(bundle_failed::MSG_UNSUP));
        let mut long = fm.encode(9);
        long[3] += 8;
        assert_eq!(inner_is(long, 9), Err(bundle_failed::MSG_BAD_LEN));
        assert_eq!(inner_is(vec![4, 14], 9), Err(bundle_failed::MSG_BAD_LEN));
        let buffered = OfFlowMod {
            buffer_id: 1,
            ..fm.clone()
        };
        assert_eq!(
            inner_is(buffered.encode(9), 9),
            Err(bad_request::BUFFER_UNKNOWN)
        );
        // Another experimenter's message is still one this switch does not know.
        let mut other = Writer::message(msg::EXPERIMENTER, 1);
        other.u32(0x2320).u32(ONFT_BUNDLE_CONTROL);
        assert_eq!(decode(&other.finish()).unwrap().1, Incoming::Experimenter);
        let mut onf_other = Writer::message(msg::EXPERIMENTER, 1);
        onf_other.u32(ONF_EXPERIMENTER).u32(2400);
        assert_eq!(
            decode(&onf_other.finish()).unwrap().1,
            Incoming::Experimenter
        );
    }

    #[test]
    fn bundles_open_stage_close_and_are_taken_once() {
        let mut bundles = Bundles::default();
        assert_eq!(bundles.close(1, 0), Err(bundle_failed::BAD_ID));
        assert_eq!(bundles.open(1, 4, &[]), Err(bundle_failed::BAD_FLAGS));
        bundles.open(1, flag::ATOMIC, &[]).unwrap();
        bundles.add(add(1, flag::ATOMIC, 2)).unwrap();
        // An add to a bundle not open opens it.
        bundles.add(add(2, 0, 1)).unwrap();
        assert_eq!(bundles.add(add(1, 0, 1)), Err(bundle_failed::BAD_FLAGS));
        assert_eq!(
            bundles.take(1, flag::ATOMIC).err(),
            Some(bundle_failed::BAD_ID),
            "dropped"
        );
        bundles.close(2, 0).unwrap();
        assert_eq!(bundles.add(add(2, 0, 1)), Err(bundle_failed::BUNDLE_CLOSED));
        bundles.open(3, 0, &[]).unwrap();
        assert_eq!(
            bundles.open(3, 0, &[]),
            Err(bundle_failed::BAD_ID),
            "opened twice"
        );
        bundles.open(4, 0, &[]).unwrap();
        bundles.add(add(4, 0, 1)).unwrap();
        bundles.add(add(4, 0, 2)).unwrap();
        assert_eq!(
            bundles.take(4, flag::ORDERED).err(),
            Some(bundle_failed::BAD_FLAGS)
        );
        bundles.open(4, 0, &[]).unwrap();
        bundles.add(add(4, 0, 1)).unwrap();
        let staged = bundles.take(4, 0).unwrap();
        assert_eq!(staged.len(), 1);
        assert_eq!(bundles.take(4, 0).err(), Some(bundle_failed::BAD_ID));
        assert_eq!(bundles.discard(4), Err(bundle_failed::BAD_ID));
        assert_eq!(bundles.bytes, 0, "every staged byte is let go");
    }

    /// A bundle untouched for BUNDLE_IDLE goes, handing back what opened it; one touched
    /// since stays.
    #[test]
    fn idle_bundles_expire_with_their_opener() {
        let mut bundles = Bundles::default();
        let opened = Instant::now();
        let request = BundleControl {
            bundle_id: 1,
            kind: control::OPEN_REQUEST,
            flags: 0,
        }
        .encode(7);
        bundles.open(1, 0, &request).unwrap();
        // Opened by its first add, which is kept whole up to the bytes an error echoes.
        let first = add(2, 0, 1);
        bundles.add(first.clone()).unwrap();
        assert!(bundles.expire(opened + BUNDLE_IDLE / 2).is_empty());
        // From now, not from `opened`: the add took its own time, later on a busy host (make
        // test once saw it more than a millisecond on).
        let later = Instant::now() + BUNDLE_IDLE + Duration::from_millis(1);
        let mut expired = bundles.expire(later);
        expired.sort();
        let mut want = vec![request, first.message.clone()];
        want.sort();
        assert_eq!(expired, want);
        assert_eq!((bundles.open.len(), bundles.bytes), (0, 0));
        assert_eq!(bundles.take(1, 0).err(), Some(bundle_failed::BAD_ID));
    }

    #[test]
    fn a_client_cannot_hold_more_than_its_share() {
        let mut bundles = Bundles::default();
        for id in 0..MAX_BUNDLES as u32 {
            bundles.open(id, 0, &[]).unwrap();
        }
        assert_eq!(
            bundles.open(MAX_BUNDLES as u32, 0, &[]),
            Err(bundle_failed::OUT_OF_BUNDLES)
        );
        let one = add(0, 0, 1);
        let fits = MAX_STAGED_BYTES / one.message.len();
        for _ in 0..fits {
            bundles.add(one.clone()).unwrap();
        }
        assert_eq!(bundles.add(one), Err(bundle_failed::MSG_TOO_MANY));
        assert_eq!(bundles.bytes, 0, "the bundle went, and its bytes");
    }

    #[test]
    fn bundle_errors_name_onf() {
        let bytes = error_message(bundle_failed::MSG_FAILED, 3, &[1, 2]);
        assert_eq!(
            &bytes[8..18],
            &[0xff, 0xff, 0x09, 0x09, 0x4f, 0x4e, 0x46, 0, 1, 2]
        );
    }
}
