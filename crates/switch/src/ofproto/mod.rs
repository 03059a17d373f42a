//! The OpenFlow layer: the rule tables, translation of a flow through them (OVS's xlate), and
//! [`state::Ofproto`], what a bridge's threads share; it answers the datapath's upcalls
//! ([`crate::dpif::upcall`]).

pub mod learned;
pub mod rule_table;
pub mod state;
pub mod translate;
