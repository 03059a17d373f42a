//! The switch's logic: flow syntax, rule tables, the caches in front of them, and actions.
//!
//! The OVS-AFXDP datapath made small (seed 002): each packet is parsed once into a flow key
//! ([`wirespeed_packet::flow_key::FlowKey`]), looked up in an exact-match cache, then a megaflow
//! cache, and on a miss run through the OpenFlow-style rule tables (the slow path), which installs
//! a megaflow covering exactly the bits the lookup examined. Packet I/O lives in [`bridge`]
//! (the ports and the poll-mode threads), [`pmd`] (one thread's loop), [`port_set`] (one
//! thread's ports: AF_XDP on one UMEM, others copied to and from) and [`control`] (the socket
//! `wirespeed ctl` talks to).
//!
//! How the pieces are driven:
//! - receive path, per frame: [`datapath::process`] (parse → the thread's own [`FlowCache`] →
//!   [`translate()`] on a miss → [`execute::execute`]) fills a [`Verdict`] the caller reuses:
//!   output ports, a controller flag, or a [`DropReason`]; copies for rewrites between outputs
//!   go through `emit`. The bridge's shared [`Datapath`] (rules, learning table, offload) is
//!   locked only in a burst with a miss, a `normal` action the thread's [`MacView`] cannot
//!   answer, or the offload ([`datapath::SlowPath`]). Nothing is allocated unless the slow path runs.
//! - control path: [`parse_rule`] / [`parse_flows`] / [`parse_flow_mod`] / [`parse_selector`] and
//!   [`RuleTables`]' `add` / `modify` / `delete`, always through [`Bridge::edit`]: every
//!   thread's cache is locked, harvested into the rules' counters, and emptied after a change,
//!   so no packet handled after it meets an entry made before it; [`ofctl::flow_format::dump_flows`]
//!   for `dump-flows`, [`MegaflowLine`] for `dump-cache`.
//! - offload (`--offload`): [`Offload::consider`] after a decision installs the flow in the
//!   kernel's fast path when the kernel can carry it out exactly; the control path harvests its
//!   counters ([`Datapath::harvest_offload`]) and flushes it before any rule change
//!   ([`Datapath::flush_offload`]).
//! - housekeeping, about once a second: [`RuleTables::expire`] (idle and hard timeouts, after
//!   a harvest), [`MacTable::expire`], [`FlowCache::optimize`].
#![forbid(unsafe_code)]

pub mod action;
pub mod bridge;
pub mod classifier;
pub mod dpif;
pub mod error;
pub mod execute;
pub mod field;
pub mod flow_match;
pub mod frame;
pub mod mac_learning;
pub mod ofctl;
pub mod offload;
pub mod ofproto;
pub mod rule;

pub use action::Action;
pub use bridge::Bridge;
pub use bridge::commands::{STRICT, STRICT_COMMANDS};
pub use bridge::control::{ControlError, ControlServer, DEFAULT_CTL, Job, Request, Response};
pub use classifier::RuleId;
pub use dpif::flow_cache::{CacheStats, FlowCache};
pub use dpif::pmd::{BridgeCounters, Controller, LogController, PmdSnapshot};
pub use error::FlowError;
pub use execute::{DropCounters, DropReason, Outputs, Verdict};
pub use field::{Field, FlowBits};
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
pub use ofproto::datapath::Datapath;
pub use ofproto::rule_table::{InstalledRule, RuleSelector, RuleTables};
pub use ofproto::translate::{Decision, translate};
pub use rule::{Rule, RuleStats};
