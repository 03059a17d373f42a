//! ovs-ofctl's text syntax, in and out (OVS's ofp-parse / ofp-flow / ofp-actions /
//! ofp-meter / ofp-group): flows, actions, meters, groups, and the `dump-flows` /
//! `dump-cache` / `dump-groups` / `meter-stats` lines.

pub mod action_parse;
pub mod flow_format;
pub mod flow_parse;
pub mod group_text;
pub mod learn_text;
pub mod meter_text;
pub mod port_names;
