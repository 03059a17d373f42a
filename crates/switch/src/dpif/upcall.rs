//! The datapath's one way up: what it asks of the layer that owns the rules when its caches
//! cannot answer (OVS's upcall), and what it keeps of the answer, a [`Decision`]. Defined here,
//! implemented by `ofproto`, so the datapath imports nothing above it.

use core::time::Duration;

use crate::action::Action;
use crate::classifier::RuleId;
use crate::dpif::megaflow::Megaflow;
use crate::dpif::revalidate::{RuleChange, TableLookup};
use crate::field::FlowBits;
use crate::group::GroupVisit;
use crate::mac_learning::MacTable;
use crate::meter::MeterRef;
use crate::rule::{PacketInOrigin, Rule};

/// What happens to every packet of a flow: the datapath actions, in order (no table jumps; an
/// empty list drops), and the rules that matched, as handles to credit their counters.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Decision {
    pub actions: Vec<Action>,
    pub rules: Vec<RuleId>,
    /// Set when a translation limit was hit (resubmit depth, table lookups and group
    /// visits, datapath actions, actions run); the packet is dropped.
    pub too_deep: bool,
    /// The rule whose `controller` action came first, for OpenFlow's PACKET_IN.
    pub packet_in: Option<PacketInOrigin>,
    /// The meters `actions` name, and the controller meter for its packet-ins when there was
    /// one, as they were when the flow was translated.
    pub meters: Vec<MeterRef>,
    /// The groups the packets pass through and the buckets they take, to credit theirs.
    pub groups: Vec<GroupVisit>,
    /// The tables whose lookup found no rule (a table miss), for the tables' counts; those
    /// that found one are the tables of `rules`.
    pub missed: Vec<u8>,
    /// The rules its `learn` actions built, for the bridge to add (see [`Upcall::translate`]),
    /// and to learn again while packets come ([`Upcall::learned_again`]).
    pub learned: Vec<Rule>,
    /// Each table lookup, in order, for revalidation after a rule change.
    pub lookups: Vec<TableLookup>,
}

/// The rules, as the datapath reaches them on a miss and when it hands back counts.
pub trait Upcall {
    /// The decision for `flow`; every bit of `flow` it depended on is set in `wildcards`.
    /// The rules its `learn` actions built are kept for the control side to add, which
    /// it does between rounds, as any change to the rules.
    fn translate(&mut self, flow: &FlowBits, wildcards: &mut FlowBits) -> Decision;
    /// A cached decision's `learn`s learned `rules` again: packets took it since the last
    /// harvest, the last at `used`.
    fn learned_again(&mut self, rules: &[Rule], used: Duration);
    /// Changes with every change to the rules: a cache made before it revalidates.
    fn generation(&self) -> u64;
    /// The changes to the rules since `generation`, one a generation, if each is a rule's
    /// (see [`crate::dpif::revalidate`]); None if some other change came between, or it was
    /// too long ago.
    fn changes_since(&self, generation: u64) -> Option<&[RuleChange]>;
    /// Credits `packets` and `bytes`, last seen at `used`, to rule `rule` (if it is still
    /// there), and a lookup that found it to its table.
    fn credit(&mut self, rule: RuleId, packets: u64, bytes: u64, used: Duration);
    /// Credits `packets` and `bytes` to a group and the buckets they took (if it is still there).
    fn credit_group(&mut self, visit: GroupVisit, packets: u64, bytes: u64);
    /// Counts `packets` that looked up `table` and found no rule.
    fn credit_miss(&mut self, table: u8, packets: u64);
    /// Whether `rule` has an idle or hard timeout (or is gone): its counters need every packet.
    fn times_out(&self, rule: RuleId) -> bool;
}

/// What a bridge's poll-mode threads share, as the datapath needs it: the rules (through the
/// upcall), the learning table, and the kernel's fast path if the bridge offloads.
pub trait SharedState {
    fn rules(&mut self) -> &mut dyn Upcall;
    fn mac_table(&mut self) -> &mut MacTable;
    /// After a frame's decision (its megaflow's) ran: offers it to the kernel's fast path
    /// (unless the frame is `unfit` to model an entry: rewritten on the way, one of several
    /// frames, or decided by TCP's flags), and flushes the fast path if a learned address
    /// it used moved.
    fn after_decision(
        &mut self,
        frame: &[u8],
        in_port: u32,
        megaflow: &Megaflow,
        unfit: bool,
        now: Duration,
    );
}
