//! The switch's logic: flow syntax, rule tables, the caches in front of them, and actions.
//!
//! The OVS-AFXDP datapath made small (seed 002): each packet is parsed once into its flow's
//! packed words ([`extract`] into [`FlowBits`], OVS's miniflow), looked up in an exact-match
//! cache, then a megaflow cache, and on a miss run through the OpenFlow-style rule tables (the
//! slow path), which installs a megaflow covering exactly the bits the lookup examined.
//!
//! One folder a layer, as in Open vSwitch, in this order; outside the tests, a layer's code
//! imports only the layers below it and the vocabulary (doc links may point anywhere):
//! - [`openflow`]: OpenFlow 1.3 for controllers, over the same tables as `ctl`;
//! - [`bridge`]: the ports, the poll-mode threads, the control socket ([`bridge::control`],
//!   whose request handler is passed in) and its commands ([`bridge::commands`]);
//! - [`ofctl`]: ovs-ofctl's text syntax in and out: flows, actions, `dump-flows` lines;
//! - [`ofproto`]: the rule tables, translation through them ([`translate()`], OVS's xlate),
//!   and [`Ofproto`], what a bridge's threads share (rules, learning table, offload);
//! - [`ipfix`]: IPFIX flow export, from the megaflows' and the fast path's counts;
//! - [`offload`]: flows handed to the kernel's XDP fast path, and its transmit watch;
//! - [`dpif`]: the per-frame [`dpif::process::process`], the caches (exact-match, megaflow,
//!   each thread's own), the poll-mode loop and the port sets. It reaches the rules only
//!   through the interface it defines, [`dpif::upcall`] ([`Upcall`],
//!   [`dpif::upcall::SharedState`], [`Decision`]), which `ofproto` implements: nothing in
//!   `dpif` imports `ofproto`, `ofctl` or `bridge`;
//! - [`tunnel`]: tunnel ports' options, the outer headers pushed and popped, each thread's
//!   tunnel work;
//! - [`classifier`], [`execute`] (actions and header rewrites on a frame), [`mac_learning`],
//!   [`meter`] (the rate limits rules name, shared by the threads);
//! - the vocabulary, which every layer uses: [`field`], [`flow_match`], [`extract`] (a
//!   frame's flow), [`action`], [`subfield`] (the bits `load` and `move` name), [`learn`],
//!   [`rule`] (with the tables' count and the rules' OpenFlow flags), [`group`], [`frame`],
//!   [`error`], [`tcp_flags`] (that field's flow syntax).
//!
//! How the pieces are driven:
//! - receive path, per frame: [`dpif::process::process`] (parse → the thread's own
//!   [`FlowCache`] → an upcall on a miss → [`execute::execute`]) fills a [`Verdict`] the
//!   caller reuses: output ports, a controller flag, or a [`DropReason`]; copies for rewrites
//!   between outputs go through `emit` into the thread's scratch space. The bridge's shared
//!   [`Ofproto`] is locked only in a burst with a miss, a `normal` action the thread's
//!   [`MacView`] cannot answer, or the offload ([`dpif::process::BurstLock`]). Nothing is
//!   allocated unless a miss is translated.
//! - control path: [`parse_rule`] / [`parse_flows`] / [`parse_flow_mod`] / [`parse_selector`] and
//!   [`RuleTables`]' `add` / `modify` / `delete`, always through [`Bridge::edit`]: every
//!   thread's cache is locked, harvested into the rules' counters where the change needs
//!   them (the rules it takes away, or all to show counters), and revalidated after a
//!   change ([`dpif::revalidate`]: the megaflows a rule added, gone or changed, a group or
//!   meter changed, or a watched port's liveness could decide otherwise go, the rest stay;
//!   the fail mode, a rolled-back bundle and many changes at once empty the caches), so
//!   no packet handled after it meets an entry the change made wrong;
//!   [`ofctl::flow_format::dump_flows`] for `dump-flows`, [`MegaflowLine`] for `dump-cache`.
//! - offload (`--offload`): [`Offload::consider`] after a decision installs the flow in the
//!   kernel's fast path when the kernel can carry it out exactly; the control path harvests its
//!   counters ([`Ofproto::harvest`]), and around each rule change
//!   ([`Ofproto::watch_offload`], [`Ofproto::before_taking`],
//!   [`Ofproto::before_groups`]) removes the entries the change touched as the
//!   caches' megaflows are ([`Offload::resume`]; a change the rules' log cannot say, such
//!   as the fail mode, empties it).
//! - flow export (`--ipfix`): [`ipfix`] reports flows from the megaflows' and the fast
//!   path's counters, taken by housekeeping ([`Bridge::export_flows`]).
//! - housekeeping, about once a second: [`RuleTables::expire`] (idle and hard timeouts, after
//!   a harvest), [`MacTable::expire`], [`FlowCache::optimize`].
#![forbid(unsafe_code)]

pub mod action;
pub mod bridge;
pub mod classifier;
pub mod dpif;
pub mod error;
pub mod execute;
pub mod extract;
pub mod field;
pub mod flow_match;
pub mod frame;
pub mod group;
pub mod ipfix;
pub mod learn;
pub mod mac_learning;
pub mod meter;
pub mod ofctl;
pub mod offload;
pub mod ofproto;
pub mod openflow;
pub mod rule;
pub mod subfield;
pub mod tcp_flags;
pub mod tunnel;

pub use action::Action;
pub use bridge::commands::{STRICT, STRICT_COMMANDS};
pub use bridge::control::{ControlError, ControlServer, DEFAULT_CTL, Job, Request, Response};
pub use bridge::ctl_json::{JSON, JSON_COMMANDS};
pub use bridge::{Bridge, BridgeEvents, RemovedReason, Work};
pub use classifier::RuleId;
pub use dpif::flow_cache::{CacheStats, FlowCache};
pub use dpif::packet_in::{PacketInLog, PacketInSink};
pub use dpif::pmd::{BridgeCounters, PmdSnapshot};
pub use dpif::upcall::{Decision, Upcall};
pub use error::FlowError;
pub use execute::{DropCounters, DropReason, Outputs, Verdict};
pub use field::{Field, FlowBits, PacketKey};
pub use flow_match::Match;
pub use frame::Frame;
pub use mac_learning::MacTable;
pub use mac_learning::mac_view::MacView;
pub use ofctl::action_parse::parse_actions;
pub use ofctl::flow_format::{DumpLine, MatchDisplay, MegaflowLine, RuleDisplay};
pub use ofctl::flow_parse::{
    FlowMod, parse_flow_mod, parse_flows, parse_match, parse_rule, parse_selector,
};
pub use offload::{FastPortCounts, Offload, OffloadSummary};
pub use ofproto::rule_table::{InstalledRule, RuleSelector, RuleTables};
pub use ofproto::state::Ofproto;
pub use ofproto::translate::translate;
pub use rule::{Rule, RuleStats};
