//! OpenFlow 1.3, the switch side: controllers (faucet, os-ken applications, `ovs-ofctl`)
//! program the bridge over TCP, beside `wirespeed ctl`'s text syntax and over the same rule
//! tables.
//!
//! - [`wire`], [`error`]: framing, numbers, a reader that never reads past a message;
//! - [`oxm`], [`actions`]: matches, actions and instructions to and from the switch's own;
//! - [`message`]: what a switch receives, decoded; [`reply`]: what it sends;
//! - [`agent`]: one message handled on the bridge's control side, with [`flow_mod`] and
//!   [`group_mod`] (the rule tables' changes), [`bundle`] (changes staged, then committed
//!   all or none), [`meters`] (METER_MOD and the meters' replies) and [`stats`] (the
//!   MULTIPART replies);
//! - [`session`]: each connection's role and queue, PACKET_IN from the poll-mode threads
//!   ([`session::PacketInOpenFlow`]), FLOW_REMOVED and PORT_STATUS;
//! - [`connmgr`]: the sockets, HELLO and ECHO, reconnecting to controllers; [`tls`]: `ssl:`
//!   and `pssl:`, with certificates on both sides.
//!
//! Groups ([`crate::group`]: all, select, indirect, fast failover) are flattened into the
//! datapath's actions like the tables, and so is the action set (`write_actions`,
//! `clear_actions`), run in the specification's order when the pipeline ends; and
//! `write_metadata` only changes the flow later tables look up (the metadata is a word of
//! [`crate::FlowBits`], zero as every packet arrives). Meters ([`crate::meter`]) are not:
//! a flow keeps the meter it names, and every thread charges that one bucket.

pub mod actions;
pub mod agent;
pub mod bundle;
pub mod connmgr;
pub mod error;
pub mod flow_mod;
pub mod group_mod;
pub mod learn_wire;
pub mod message;
pub mod meters;
pub mod oxm;
pub mod reply;
pub mod session;
pub mod stats;
pub mod table_features;
pub mod tls;
pub mod wire;
