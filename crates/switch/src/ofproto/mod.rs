//! The OpenFlow layer: the rule tables, translation of a flow through them (OVS's xlate), and
//! the state a bridge's threads share to reach them on a miss.

pub mod datapath;
pub mod rule_table;
pub mod translate;
