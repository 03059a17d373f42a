//! ovs-ofctl's text syntax, in and out (OVS's ofp-parse / ofp-flow / ofp-actions): flows,
//! actions, and the `dump-flows` / `dump-cache` lines.

pub mod action_parse;
pub mod flow_format;
pub mod flow_parse;
