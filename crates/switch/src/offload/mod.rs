//! Flows handed to the kernel (`wirespeed switch --offload`): when user space decides that a
//! packet only goes out of one other AF_XDP port (by `output:N`, or `normal` to a learned
//! address), it installs the packet's exact header fields in the fast path's table
//! (bpf/switch_fast_path.c), and the rest of that flow is forwarded by the XDP program
//! without reaching user space (seed 002's OVS-eBPF datapath).
//!
//! What stays exact:
//! - Decisions: an entry is installed only for the decision `[output:N]` (N not the input
//!   port), or `[normal]` when the destination is a learned unicast address on another port,
//!   from rules without timeouts, under a key that holds every byte the flow key is made
//!   from but TCP's flags, so every packet the kernel forwards would have got the same
//!   decision here (a megaflow that pins TCP's flags is no model for an entry: see
//!   `dpif::process`).
//! - MAC learning: a `normal` entry depends on where its destination was learned; when such
//!   an address moves or is forgotten ([`MacTable::changed_since`]) every entry is flushed
//!   (other addresses' changes leave the table alone), and the kernel's packets of a
//!   `normal` flow refresh its source address's entry when they are harvested, as if user
//!   space had seen them. (Between an address
//!   ageing out and the next housekeeping round, up to a second, its flows still go to the
//!   port it was last seen on rather than being flooded.)
//! - Rule changes: after a change, the entries whose packets it could decide otherwise
//!   (each tested on its own flow with its megaflow's lookups, [`crate::dpif::revalidate`])
//!   are stopped in one map write, with the rest of their classes: the entries fall in 64
//!   classes by a hash of their key, and the others go on forwarding. The kernel is waited
//!   for until no packet is being forwarded on a stopped entry any more, and the touched
//!   ones are counted and removed ([`Offload::resume`]). A run that found one just before
//!   its removal reads its class stopped after, so the class stays stopped until the
//!   program has been waited for again, which the bridge does outside its lock once no
//!   request waits, or requests have kept it waiting for a tick ([`Offload::settled_at`]):
//!   a BARRIER queued behind the change is answered first. So once `ctl` or a barrier
//!   returns, no packet is handled under the old rules. A change that takes away rules
//!   some entry counts for, or changes a group some entry passes through, stops those
//!   entries' classes before it instead ([`Offload::suspend_for`]), so their counts are
//!   complete; one that only adds rules or changes actions, or takes rules away no entry counts for, lets the kernel
//!   forward meanwhile ([`Offload::watch`]), and stops nothing if it touches no entry. A
//!   change the rules' log cannot say (the fail mode, a bundle rolled back) or more rule
//!   changes at once than are tested one by one still remove every entry
//!   ([`Offload::flush`]). A port going down or away takes the entries to and from it out
//!   the same way, counted, and leaves the rest ([`Offload::port_link`]). (A meter added,
//!   changed or deleted changes no entry: a metered decision is never offloaded; the rules
//!   a meter's delete takes had no entry either.) Rules with timeouts are never behind an
//!   entry, so expiry cannot change an offloaded decision.
//! - Counters: the kernel counts each entry's packets and bytes; [`Offload::harvest`] adds
//!   what is new to the entry's rules and ports before every `dump-flows` or `dump-ports`.
//! - Flow records (`--ipfix`): an entry's counts, as last credited, go into flow records too
//!   ([`Offload::take_flow_counts`]); an entry aged out or flushed keeps them until taken.
//! - Ageing: [`Offload::age`], once a second, looks at a share of the entries and removes
//!   those whose counts have not moved for [`IDLE_TIMEOUT`], so flows that ended do not fill
//!   the kernel's table (a flow's next packet installs it again). Inexact: a packet of such
//!   an idle flow arriving in the instant between the last look at its counts and the
//!   removal is forwarded but not counted.
//! - Reuse: the kernel's table preallocates its entries and hands a removed one to the next
//!   install at once, so a program run that found the entry just before its removal could
//!   read the new flow's action. After a removal nothing is installed until the program has
//!   been waited for ([`Offload::unsettled`], [`Offload::settled_at`]; the bridge waits
//!   outside its lock after housekeeping, after each `ctl` command, and when no request
//!   waits). A table that does not preallocate (BPF_F_NO_PREALLOC) would not need this,
//!   but forwarded 15-25 % fewer packets here.
//! - Transmit failures: the kernel counts a packet when it redirects it, so one whose
//!   transmit then fails (a veth peer without NAPI, a frame over the port's MTU) counts for
//!   its rule like any packet that matched it. The failures are counted per port
//!   ([`FastPortCounts::tx_failed`], from the kernel's tracepoints), and a port that refuses
//!   a whole batch is blocked at once: its flows go through user space
//!   ([`crate::offload::transmit_watch`]).

// Watch, suspend, resume and flush around a change to the rules ("Rule changes" above).
mod rule_changes;
pub mod transmit_watch;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use wirespeed_packet::MacAddr;
use wirespeed_packet::flow_key::VLAN_VID_MASK;
use wirespeed_xdp::XdpError;
use wirespeed_xdp::fast_path::{
    Classes, FastKey, FastPath, FastPathCounters, FlowCounts, fast_key,
};

use crate::action::Action;
use crate::classifier::RuleId;
use crate::dpif::digest::Digest;
use crate::dpif::megaflow::Megaflow;
use crate::dpif::revalidate::TableLookup;
use crate::dpif::upcall::Upcall;
use crate::extract::extract;
use crate::field::{Field, FlowBits, PACKET_WORDS};
use crate::group::GroupVisit;
use crate::mac_learning::MacTable;
use transmit_watch::TransmitWatch;

/// A learned address: (VLAN, MAC).
type VlanMac = (u16, MacAddr);

/// An entry whose counts have not moved for this long is removed from the kernel's table.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Entries [`Offload::age`] looks at per call (a system call each, under the bridge's lock).
const AGE_BATCH: usize = 8192;

/// An installed entry: what it was decided from, what of its counts has been credited, and
/// when they last moved.
struct Entry {
    rules: Vec<RuleId>,
    groups: Vec<GroupVisit>,
    missed: Vec<u8>,
    /// Its flow's packet words as the packet arrived (TCP's flags aside, see
    /// [`arrival_mask`]) and its megaflow's table lookups, to revalidate it as the
    /// megaflow is, but on its own flow. (A lookup after a rewrite is kept without what it
    /// saw, [`TableLookup::unseen`]: 24 bytes, not 376.)
    arrival: [u64; PACKET_WORDS],
    lookups: Vec<TableLookup>,
    /// Its place in [`Offload::digests`] and [`Offload::places`].
    place: usize,
    in_port: u32,
    out_port: u32,
    credited: FlowCounts,
    last_moved: Duration,
    /// For a `normal` entry: the source address (VLAN, MAC) its packets teach the table,
    /// and the destination address its decision depends on.
    learns: Option<(u16, MacAddr)>,
    depends: Option<(u16, MacAddr)>,
    /// When its counts were last read from the kernel; and when the last read before its
    /// last flow record (IPFIX) was, or it was installed: the packets credited since came
    /// after that. How much of its counts (as credited) has gone into flow records.
    read_at: Duration,
    export_from: Duration,
    exported: FlowCounts,
}

impl Entry {
    fn has_unexported(&self) -> bool {
        self.credited != self.exported
    }
}

/// A fast-path flow's counts not yet in a flow record (IPFIX): what the kernel counted
/// for it, as last read (housekeeping reads each entry about once a second).
#[derive(Debug, Clone, Copy)]
pub struct FastFlowCounts<'a> {
    /// The exact header fields the entry was installed under.
    pub key: &'a FastKey,
    pub in_port: u32,
    pub out_port: u32,
    pub packets: u64,
    pub bytes: u64,
    /// TCP's flags of every packet the entry forwarded since it was installed (the kernel
    /// ORs them and cannot take them back without losing counts), not since the last time.
    pub tcp_flags: u16,
    /// Those packets came after this: the last read of its counts before they last went
    /// into a flow record, or its installation (the bridge's clock)...
    pub since: Duration,
    /// ...and by this read of them, the last that found them moved.
    pub last_moved: Duration,
}

/// Packets and bytes a port received and sent through the kernel's fast path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FastPortCounts {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Redirected to the port, including those the kernel then failed to send...
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// ...of which the kernel failed to send this many.
    pub tx_failed: u64,
    /// The port refused the fast path's packets: its flows go through user space for now.
    pub tx_blocked: bool,
}

/// A change to the rules in progress, from the rules' generation before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Suspension {
    /// The kernel goes on forwarding: no rule an entry counts for goes, so the entries'
    /// counts still have their rules after the change.
    Watching(u64),
    /// The kernel stopped forwarding on the entries of these classes, and their counts
    /// were taken before the change, which may take rules away (the other entries' counts
    /// have their rules still).
    Stopped(u64, Classes),
}

/// The state of the offload, for `dump-cache`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffloadSummary {
    /// Entries in the kernel's table now.
    pub flows: usize,
    /// Entries ever installed.
    pub installed: u64,
    /// Installs refused because the kernel's table was full.
    pub table_full: u64,
    /// Entries removed for being idle.
    pub aged: u64,
    /// Entries removed because a rule change could decide their packets otherwise.
    pub revalidated: u64,
    /// Entries removed because a port they come from or go to went down or away.
    pub port_down: u64,
    /// Times every entry was removed at once (a change the rules' log cannot say, more rule
    /// changes at once than are tested one by one, a learned address moved).
    pub flushes: u64,
    /// Times the kernel was stopped forwarding on classes of entries not stopped already
    /// (their packets went to user space meanwhile): before rules some entry counted for
    /// went, and after a change that touched an entry (one change may do both); and a port
    /// going down that some entry used.
    pub stops: u64,
    /// The classes of entries those stops took in all (of
    /// [`wirespeed_xdp::fast_path::CLASSES`] each: a stop takes the classes of the entries it
    /// needs, each a share of all the entries, by a hash of their keys).
    pub stopped_classes: u64,
    /// Map operations that failed otherwise.
    pub errors: u64,
    pub kernel: FastPathCounters,
}

pub struct Offload {
    fast_path: FastPath,
    /// Port number → (ifindex, the program's slot), for the ports it is attached to.
    ifindex: HashMap<u32, (u32, u32)>,
    transmits: TransmitWatch,
    entries: HashMap<FastKey, Entry>,
    /// Each entry's decision in bits, and its key, in a dense array of their own: a pass
    /// over every entry after a change reads these (about 80 bytes an entry, not the 400
    /// of an entry) and looks into the entry only where the change may be there.
    digests: Vec<Digest>,
    places: Vec<FastKey>,
    ports: HashMap<u32, FastPortCounts>,
    installed: u64,
    table_full: u64,
    aged: u64,
    revalidated: u64,
    port_down: u64,
    flushes: u64,
    stops: u64,
    stopped_classes: u64,
    errors: u64,
    /// The rules' generation before the change being made, if entries are to be
    /// revalidated after it ([`Offload::resume`]).
    suspension: Option<Suspension>,
    /// The kernel refused an install for want of room: none is tried until one is freed.
    full: bool,
    /// Keys [`Offload::age`] has still to look at in this round.
    to_age: Vec<FastKey>,
    /// The destinations installed `normal` entries depend on (with how many entries each),
    /// and the learning table's change count up to which they are known to be unchanged.
    dsts: HashMap<(u16, MacAddr), u32>,
    macs_seen: u64,
    /// Rounds of removals so far, and how many of them the program has been waited for
    /// since: installs wait until they are equal (see Reuse above).
    removals: u64,
    settled: u64,
    /// Classes stopped whose entries were removed: they resume once the program has been
    /// waited for after removal round `resume_after`.
    to_resume: Classes,
    resume_after: u64,
    /// The last flush failed: housekeeping retries it, not every packet.
    flush_failed: bool,
    /// Ports whose interface is down or gone: no entry goes to or comes from them.
    down: HashSet<u32>,
    /// Flow records (IPFIX) are made from the entries: those removed keep their counts
    /// until [`Offload::take_flow_counts`] takes them.
    flow_records: bool,
    removed: Vec<(FastKey, Entry)>,
}

impl Offload {
    /// Takes over `fast_path`, attached to the ports `ports` (number, ifindex, slot).
    pub fn new(fast_path: FastPath, ports: &[(u32, u32, u32)]) -> Offload {
        let slots: Vec<(u32, u32)> = ports.iter().map(|&(n, _, slot)| (n, slot)).collect();
        Offload {
            fast_path,
            ifindex: ports.iter().map(|&(n, i, slot)| (n, (i, slot))).collect(),
            transmits: TransmitWatch::new(&slots),
            entries: HashMap::new(),
            digests: Vec::new(),
            places: Vec::new(),
            ports: HashMap::new(),
            installed: 0,
            table_full: 0,
            aged: 0,
            revalidated: 0,
            port_down: 0,
            flushes: 0,
            stops: 0,
            stopped_classes: 0,
            errors: 0,
            suspension: None,
            full: false,
            to_age: Vec::new(),
            dsts: HashMap::new(),
            macs_seen: 0,
            removals: 0,
            settled: 0,
            to_resume: Classes::NONE,
            resume_after: 0,
            flush_failed: false,
            down: HashSet::new(),
            flow_records: false,
            removed: Vec::new(),
        }
    }

    /// Keeps the counts of removed entries for flow records from now on.
    pub fn keep_flow_records(&mut self) {
        self.flow_records = true;
    }

    /// Hands `each` every entry (removed ones too) whose counts, as last read from the
    /// kernel, are not all in a flow record yet, with those counts; marks them as taken.
    pub fn take_flow_counts(&mut self, mut each: impl FnMut(FastFlowCounts<'_>)) {
        for (key, mut entry) in std::mem::take(&mut self.removed) {
            take_unexported(&key, &mut entry, &mut each);
        }
        for (key, entry) in &mut self.entries {
            take_unexported(key, entry, &mut each);
        }
    }

    /// Keeps `entry`, just removed, for its flow record if it has counts not in one yet.
    fn keep_removed(&mut self, key: FastKey, entry: Entry) {
        if self.flow_records && entry.has_unexported() {
            self.removed.push((key, entry));
        }
    }

    /// Port `port`'s interface went down or away (`up` false), or came back: while it is
    /// not up no entry is installed to or from it, and those there are removed (their
    /// counts credited), so its flows go through user space, which counts them. The other
    /// entries stay.
    pub fn port_link(
        &mut self,
        port: u32,
        up: bool,
        tables: &mut dyn Upcall,
        macs: &mut MacTable,
        now: Duration,
    ) -> Result<(), XdpError> {
        if up {
            self.down.remove(&port);
            return Ok(());
        }
        self.down.insert(port);
        if self.flush_failed {
            return self.flush(tables, macs, now);
        }
        let using: Vec<FastKey> = self
            .entries
            .iter()
            .filter(|(_, e)| e.in_port == port || e.out_port == port)
            .map(|(key, _)| *key)
            .collect();
        let n = using.len() as u64;
        let result = self
            .remove_entries(using, Classes::NONE, tables, macs, now)
            .and_then(|stopped| self.resume_unremoved(stopped));
        match result {
            Ok(()) => self.port_down += n,
            // Housekeeping retries it as a flush.
            Err(_) => self.flush_failed = true,
        }
        result
    }

    /// Port `port`'s interface is gone (after [`Offload::port_link`]): the program comes off
    /// it, which may be in another network namespace by now and would otherwise send all it
    /// receives to our socket there, bound to nothing.
    pub fn port_gone(&mut self, port: u32) -> Result<(), XdpError> {
        match self.ifindex.get(&port) {
            Some(&(_, slot)) => self.fast_path.detach_port(slot),
            None => Ok(()),
        }
    }

    /// Installs an entry for `frame` (received on `in_port`, its megaflow's decision just
    /// executed) if the decision is one the kernel can carry out exactly, and the frame is
    /// one the fast path parses.
    pub fn consider(
        &mut self,
        frame: &[u8],
        in_port: u32,
        megaflow: &Megaflow,
        tables: &dyn Upcall,
        macs: &MacTable,
        now: Duration,
    ) {
        let decision = &megaflow.decision;
        let (out_port, learns, depends) = match decision.actions.as_slice() {
            [Action::Output(port)] => (*port, None, None),
            [Action::Normal] => match learned_destination(frame, macs, now) {
                Some((port, learns, depends)) => (port, Some(learns), Some(depends)),
                None => return,
            },
            _ => return,
        };
        // (During a change to the rules an entry would skip its revalidation; the lock
        // `consider` is called under keeps it from running then anyway.)
        if self.full || self.removals != self.settled || self.suspension.is_some() {
            return;
        }
        if decision.too_deep || out_port == in_port {
            return;
        }
        if self.down.contains(&in_port) || self.down.contains(&out_port) {
            return;
        }
        let (Some(&(in_if, _)), Some(&(_, out_slot))) =
            (self.ifindex.get(&in_port), self.ifindex.get(&out_port))
        else {
            return;
        };
        let timed = decision.rules.iter().any(|&id| tables.times_out(id));
        // A flow that learns must pass the harvest, which learns again (see
        // `crate::ofproto::learned`): the kernel's counts would not.
        if timed || !decision.learned.is_empty() {
            return;
        }
        let Some(key) = fast_key(frame, in_if) else {
            return;
        };
        if self.entries.contains_key(&key) {
            return;
        }
        match self.fast_path.install(&key, out_slot) {
            Ok(true) => {
                self.installed += 1;
                if let Some(dst) = depends {
                    if self.dsts.is_empty() {
                        self.macs_seen = macs.changes();
                    }
                    *self.dsts.entry(dst).or_default() += 1;
                }
                self.digests.push(Digest::of(decision));
                self.places.push(key);
                self.entries.insert(
                    key,
                    Entry {
                        rules: decision.rules.clone(),
                        groups: decision.groups.clone(),
                        missed: decision.missed.clone(),
                        arrival: *extract(frame, in_port).0.packet_words(),
                        lookups: decision.lookups.iter().map(TableLookup::unseen).collect(),
                        place: self.places.len() - 1,
                        in_port,
                        out_port,
                        credited: FlowCounts::default(),
                        last_moved: now,
                        learns,
                        depends,
                        read_at: now,
                        export_from: now,
                        exported: FlowCounts::default(),
                    },
                );
            }
            Ok(false) => {
                self.table_full += 1;
                self.full = true;
            }
            Err(_) => self.errors += 1,
        }
    }

    /// Credits what the kernel counted since the last harvest to the entries' rules and ports.
    pub fn harvest(
        &mut self,
        tables: &mut dyn Upcall,
        macs: &mut MacTable,
        now: Duration,
    ) -> Result<(), XdpError> {
        self.credit_picked(None, tables, macs, now)?;
        self.read_transmits()
    }

    /// Credits what the kernel counted since their last credit for the entries of `keys`
    /// (None: every entry).
    fn credit_picked(
        &mut self,
        keys: Option<&[FastKey]>,
        tables: &mut dyn Upcall,
        macs: &mut MacTable,
        now: Duration,
    ) -> Result<(), XdpError> {
        let Some(keys) = keys else {
            for (key, entry) in &mut self.entries {
                let counts = self.fast_path.counts(key)?;
                credit(entry, counts, &mut self.ports, tables, macs, now);
            }
            return Ok(());
        };
        for key in keys {
            if let Some(entry) = self.entries.get_mut(key) {
                let counts = self.fast_path.counts(key)?;
                credit(entry, counts, &mut self.ports, tables, macs, now);
            }
        }
        Ok(())
    }

    /// The entries whose digest `may` says a change may concern, with their keys.
    fn digested(&self, may: impl Fn(&Digest) -> bool) -> impl Iterator<Item = (&FastKey, &Entry)> {
        (self.digests.iter().zip(&self.places))
            .filter(move |(digest, _)| may(digest))
            .map(|(_, key)| (key, &self.entries[key]))
    }

    /// Whether an address a `normal` entry depends on moved or was forgotten (then call
    /// `flush`). Changes to other addresses are taken note of and change nothing.
    pub fn macs_changed(&mut self, macs: &MacTable) -> bool {
        if self.dsts.is_empty() || macs.changes() == self.macs_seen {
            return false;
        }
        let changed = match macs.changed_since(self.macs_seen) {
            Some(mut keys) => keys.any(|key| self.dsts.contains_key(key)),
            None => true,
        };
        if !changed {
            self.macs_seen = macs.changes();
        }
        changed
    }

    /// Housekeeping: looks at the next share of the entries, crediting their counts, and
    /// removes those idle for [`IDLE_TIMEOUT`]; every entry is looked at about every
    /// entries / 8192 calls.
    pub fn age(
        &mut self,
        tables: &mut dyn Upcall,
        macs: &mut MacTable,
        now: Duration,
    ) -> Result<(), XdpError> {
        if self.to_age.is_empty() {
            self.to_age = self.entries.keys().copied().collect();
        }
        let keep = self.to_age.len().saturating_sub(AGE_BATCH);
        let aged = self.aged;
        let result = self.age_keys(keep, tables, macs, now);
        if self.aged != aged {
            self.removals += 1;
        }
        result
    }

    fn age_keys(
        &mut self,
        keep: usize,
        tables: &mut dyn Upcall,
        macs: &mut MacTable,
        now: Duration,
    ) -> Result<(), XdpError> {
        for key in self.to_age.split_off(keep) {
            let Some(entry) = self.entries.get_mut(&key) else {
                continue;
            };
            let counts = self.fast_path.counts(&key)?;
            if credit(entry, counts, &mut self.ports, tables, macs, now) {
                continue;
            }
            if now.saturating_sub(entry.last_moved) >= IDLE_TIMEOUT {
                self.remove(key)?;
                self.aged += 1;
            }
        }
        Ok(())
    }

    /// Removes the entry of `key` from the kernel's table and from those kept here.
    fn remove(&mut self, key: FastKey) -> Result<(), XdpError> {
        self.fast_path.remove(&key)?;
        let Some(entry) = self.entries.remove(&key) else {
            return Ok(());
        };
        // The last entry's digest and key move to its place.
        self.digests.swap_remove(entry.place);
        self.places.swap_remove(entry.place);
        if let Some(moved) = self.places.get(entry.place) {
            let moved = self.entries.get_mut(moved).expect("a place an entry");
            moved.place = entry.place;
        }
        if let Some(dst) = entry.depends
            && let Some(count) = self.dsts.get_mut(&dst)
        {
            *count -= 1;
            if *count == 0 {
                self.dsts.remove(&dst);
            }
        }
        self.keep_removed(key, entry);
        self.full = false;
        Ok(())
    }

    /// Some(round) when entries were removed and the program has not been waited for since:
    /// wait with [`wirespeed_xdp::ProgramBarrier::wait`], then call `settled_at(round)`.
    pub fn unsettled(&self) -> Option<u64> {
        (self.removals != self.settled).then_some(self.removals)
    }

    /// The program was waited for after removal round `round`: installs may reuse entries,
    /// and the classes stopped while entries of theirs were removed forward again.
    pub fn settled_at(&mut self, round: u64) -> Result<(), XdpError> {
        self.settled = self.settled.max(round);
        // While a flush is owed, a removal may have failed and left a touched entry: its
        // class stays stopped until the flush (which leaves none stopped).
        if round < self.resume_after || self.to_resume.is_empty() || self.flush_failed {
            return Ok(());
        }
        let classes = std::mem::take(&mut self.to_resume);
        let resumed = self.fast_path.resume(classes);
        if resumed.is_err() {
            // Housekeeping's flush leaves nothing stopped.
            self.flush_failed = true;
        }
        resumed
    }

    /// What port `port` moved through the fast path, as of the last harvest.
    pub fn port_counts(&self, port: u32) -> FastPortCounts {
        self.ports.get(&port).copied().unwrap_or_default()
    }

    /// Housekeeping: retries ports blocked for refusing the kernel's frames, and lets those
    /// that take them again go back to the kernel; lines for the log when a port's state
    /// changes.
    pub fn check_transmits(&mut self, now: Duration) -> Result<Vec<String>, XdpError> {
        self.read_transmits()?;
        let ports = &self.ports;
        let sent = |port| ports.get(&port).map_or(0, |c| c.tx_packets);
        self.transmits.check(&mut self.fast_path, now, sent)
    }

    /// Reads what the kernel failed to send out of each port, and which ports are blocked.
    fn read_transmits(&mut self) -> Result<(), XdpError> {
        for (&port, &(_, slot)) in &self.ifindex {
            let tx = self.fast_path.tx_failures(slot)?;
            let counts = self.ports.entry(port).or_default();
            counts.tx_failed = tx.frames;
            counts.tx_blocked = tx.blocked;
        }
        Ok(())
    }

    /// Counts a map operation that failed outside `consider` (housekeeping).
    pub fn count_error(&mut self) {
        self.errors += 1;
    }

    pub fn summary(&self) -> Result<OffloadSummary, XdpError> {
        Ok(OffloadSummary {
            flows: self.entries.len(),
            installed: self.installed,
            table_full: self.table_full,
            aged: self.aged,
            revalidated: self.revalidated,
            port_down: self.port_down,
            flushes: self.flushes,
            stops: self.stops,
            stopped_classes: self.stopped_classes,
            errors: self.errors,
            kernel: self.fast_path.counters()?,
        })
    }
}

/// The bits an entry's packets have alike: every packet word's but TCP's flags, which the
/// kernel's key leaves out (an entry is made only from a megaflow that does not pin them).
fn arrival_mask() -> [u64; PACKET_WORDS] {
    let mut mask = FlowBits::ALL_ONES;
    Field::TcpFlags.set(&mut mask, 0);
    *mask.packet_words()
}

/// Adds what the kernel counted for `entry` since its last credit to its rules and ports;
/// whether anything had moved. The kernel adds a packet's count and its bytes one after the
/// other, so a read can fall between them: bytes that come without a packet are still
/// credited.
fn credit(
    entry: &mut Entry,
    counts: FlowCounts,
    ports: &mut HashMap<u32, FastPortCounts>,
    tables: &mut dyn Upcall,
    macs: &mut MacTable,
    now: Duration,
) -> bool {
    let packets = counts.packets.saturating_sub(entry.credited.packets);
    let bytes = counts.bytes.saturating_sub(entry.credited.bytes);
    entry.credited = counts;
    entry.read_at = now;
    if packets == 0 && bytes == 0 {
        return false;
    }
    entry.last_moved = now;
    if let Some((vlan, src)) = entry.learns {
        macs.refresh(vlan, src, entry.in_port, now);
    }
    for &id in &entry.rules {
        tables.credit(id, packets, bytes, now);
    }
    for &visit in &entry.groups {
        tables.credit_group(visit, packets, bytes);
    }
    for &table in &entry.missed {
        tables.credit_miss(table, packets);
    }
    let rx = ports.entry(entry.in_port).or_default();
    rx.rx_packets += packets;
    rx.rx_bytes += bytes;
    let tx = ports.entry(entry.out_port).or_default();
    tx.tx_packets += packets;
    tx.tx_bytes += bytes;
    true
}

/// Hands `each` what `entry` counted that is not in a flow record yet, marked as taken.
fn take_unexported(key: &FastKey, entry: &mut Entry, each: &mut impl FnMut(FastFlowCounts<'_>)) {
    if !entry.has_unexported() {
        return;
    }
    let packets = entry
        .credited
        .packets
        .saturating_sub(entry.exported.packets);
    let bytes = entry.credited.bytes.saturating_sub(entry.exported.bytes);
    entry.exported = entry.credited;
    let since = std::mem::replace(&mut entry.export_from, entry.read_at);
    each(FastFlowCounts {
        key,
        in_port: entry.in_port,
        out_port: entry.out_port,
        packets,
        bytes,
        tcp_flags: entry.credited.tcp_flags,
        since,
        last_moved: entry.last_moved,
    });
}

/// For a `normal` decision on `frame`: the port its destination was learned on, the source
/// address the frame teaches and the destination address (each VLAN, MAC); `None` when the
/// destination is a group address or unknown (the frame was flooded), as `execute`'s
/// `normal` decides.
fn learned_destination(
    frame: &[u8],
    macs: &MacTable,
    now: Duration,
) -> Option<(u32, VlanMac, VlanMac)> {
    let dst = MacAddr(frame.get(0..6)?.try_into().ok()?);
    let src = MacAddr(frame.get(6..12)?.try_into().ok()?);
    let vlan = match frame.get(12..16)? {
        [0x81, 0x00, hi, lo] => u16::from_be_bytes([*hi, *lo]) & VLAN_VID_MASK,
        _ => 0,
    };
    if dst.is_multicast() {
        return None;
    }
    Some((macs.lookup(vlan, dst, now)?, (vlan, src), (vlan, dst)))
}

#[cfg(test)]
mod tests;
