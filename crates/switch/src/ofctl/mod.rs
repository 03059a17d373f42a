//! ovs-ofctl's text syntax, in and out (OVS's ofp-parse / ofp-flow / ofp-actions /
//! ofp-meter): flows, actions, meters, and the `dump-flows` / `dump-cache` / `meter-stats`
//! lines.

pub mod action_parse;
pub mod flow_format;
pub mod flow_parse;
pub mod meter_text;
