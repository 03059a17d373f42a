//! The messages the switch sends: replies, statistics (split into parts under 64 KiB), and
//! the asynchronous PACKET_IN, FLOW_REMOVED and PORT_STATUS.

use core::time::Duration;

use crate::action::Action;
use crate::bridge::port_counts::PortCounts;
use crate::flow_match::Match;
use crate::group::{Group, GroupUsage, MAX_GROUPS};
use crate::ofproto::rule_table::{InstalledRule, TableStats};
use crate::openflow::actions::{MatchFacts, write_instructions};
use crate::openflow::message::{AsyncConfig, write_buckets};
use crate::openflow::oxm::{write_in_port_match, write_match};
use crate::openflow::wire::{HEADER_LEN, NO_BUFFER, OFP_VERSION, Writer, msg};
use crate::rule::{N_TABLES, PacketInOrigin};

/// The most a message may be; statistics are split into parts below it.
pub const MAX_MESSAGE: usize = 65_535;
/// `OFPMPF_REPLY_MORE`.
const REPLY_MORE: u16 = 1;

/// `ofp_port_config` / `ofp_port_state` bits used here.
pub mod port_bits {
    pub const CONFIG_PORT_DOWN: u32 = 1 << 0;
    pub const STATE_LINK_DOWN: u32 = 1 << 0;
    pub const STATE_LIVE: u32 = 1 << 2;
    /// `OFPPF_10GB_FD | OFPPF_COPPER`: what a veth says it is.
    pub const FEATURES_10GB: u32 = (1 << 6) | (1 << 11);
}

/// One port as `ofp_port` describes it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PortDesc {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    pub name: String,
    pub admin_up: bool,
    pub carrier: bool,
    pub speed_mbps: u32,
}

impl PortDesc {
    pub fn write(&self, w: &mut Writer) {
        let config = match self.admin_up {
            true => 0,
            false => port_bits::CONFIG_PORT_DOWN,
        };
        let state = match self.carrier && self.admin_up {
            true => port_bits::STATE_LIVE,
            false => port_bits::STATE_LINK_DOWN,
        };
        w.u32(self.port_no).zeros(4).slice(&self.hw_addr).zeros(2);
        w.text(&self.name, 16).u32(config).u32(state);
        let features = match self.speed_mbps {
            0 => 0,
            _ => port_bits::FEATURES_10GB,
        };
        w.u32(features).u32(0).u32(0).u32(0);
        w.u32(self.speed_mbps.saturating_mul(1000))
            .u32(self.speed_mbps.saturating_mul(1000));
    }
}

pub fn hello(xid: u32) -> Vec<u8> {
    let mut w = Writer::message(msg::HELLO, xid);
    // One version-bitmap element: 1.3 only.
    w.u16(1).u16(8).u32(1 << OFP_VERSION);
    w.finish()
}

pub fn echo(kind: u8, xid: u32, data: &[u8]) -> Vec<u8> {
    let mut w = Writer::message(kind, xid);
    w.slice(data);
    w.finish()
}

pub fn empty(kind: u8, xid: u32) -> Vec<u8> {
    Writer::message(kind, xid).finish()
}

/// QUEUE_GET_CONFIG_REPLY for `port`: no queues.
pub fn queue_config(xid: u32, port: u32) -> Vec<u8> {
    let mut w = Writer::message(msg::QUEUE_GET_CONFIG_REPLY, xid);
    w.u32(port).zeros(4);
    w.finish()
}

pub fn features(xid: u32, datapath_id: u64) -> Vec<u8> {
    let mut w = Writer::message(msg::FEATURES_REPLY, xid);
    // No buffers; FLOW_STATS, TABLE_STATS, PORT_STATS, GROUP_STATS (a controller may look
    // for the bit before it asks for group statistics).
    w.u64(datapath_id).u32(0).u8(N_TABLES).u8(0).zeros(2);
    w.u32(0b1111).u32(0);
    w.finish()
}

pub fn config(xid: u32, flags: u16, miss_send_len: u16) -> Vec<u8> {
    let mut w = Writer::message(msg::GET_CONFIG_REPLY, xid);
    w.u16(flags).u16(miss_send_len);
    w.finish()
}

pub fn role(xid: u32, role: u32, generation_id: u64) -> Vec<u8> {
    let mut w = Writer::message(msg::ROLE_REPLY, xid);
    w.u32(role).zeros(4).u64(generation_id);
    w.finish()
}

pub fn async_config(xid: u32, c: &AsyncConfig) -> Vec<u8> {
    let mut w = Writer::message(msg::GET_ASYNC_REPLY, xid);
    for v in [c.packet_in, c.port_status, c.flow_removed]
        .iter()
        .flatten()
    {
        w.u32(*v);
    }
    w.finish()
}

/// Whether an entry of `len` bytes fits a statistics reply of its own: past that, its
/// message's 16-bit length would wrap. FLOW_MOD and GROUP_MOD refuse what could not be
/// dumped so.
pub fn fits_a_reply(len: usize) -> bool {
    HEADER_LEN + 8 + len <= MAX_MESSAGE
}

/// Whether a rule of `flow_match` and `actions` can be dumped: every way of adding one
/// (FLOW_MOD, ctl, the start files, learn) refuses or skips one that cannot.
pub fn dumpable_rule(flow_match: &Match, actions: &[Action]) -> bool {
    fits_a_reply(flow_stats_len(flow_match, actions))
}

/// What a refusal of a rule [`dumpable_rule`] says no to says.
pub const RULE_TOO_LONG: &str =
    "too many actions: the flow's statistics would not fit one OpenFlow reply (64 KiB)";

/// The length of the `ofp_flow_stats` entry of a rule of `flow_match` and `actions`.
pub fn flow_stats_len(flow_match: &Match, actions: &[Action]) -> usize {
    let mut w = Writer::default();
    w.zeros(FLOW_STATS_FIXED);
    write_match(&mut w, flow_match);
    write_instructions(&mut w, actions, MatchFacts::of(flow_match));
    w.len()
}

/// The length of group `g`'s longer entry: its description (`ofp_group_desc`) or its
/// statistics (`ofp_group_stats`, 16 bytes a bucket).
pub fn group_entry_len(g: &Group) -> usize {
    group_desc_entry(g).len().max(40 + 16 * g.buckets.len())
}

/// A statistics reply of `kind`, its `entries` packed into as many messages as it takes.
/// An entry that fits no message ([`fits_a_reply`]; one a `ctl` command added may not) is
/// left out, where it would have broken the connection's framing.
pub fn multipart(xid: u32, kind: u16, entries: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let start = |more: bool| {
        let mut w = Writer::message(msg::MULTIPART_REPLY, xid);
        w.u16(kind).u16(if more { REPLY_MORE } else { 0 }).zeros(4);
        w
    };
    let mut messages = Vec::new();
    let mut w = start(false);
    for entry in entries.iter().filter(|e| fits_a_reply(e.len())) {
        if w.len() + entry.len() > MAX_MESSAGE && w.len() > HEADER_LEN + 8 {
            // This part is full: it says more follow.
            w.bytes[10..12].copy_from_slice(&REPLY_MORE.to_be_bytes());
            messages.push(w.finish());
            w = start(false);
        }
        w.slice(entry);
    }
    messages.push(w.finish());
    messages
}

pub fn desc_body() -> Vec<u8> {
    let mut w = Writer::default();
    w.text("wirespeed", 256);
    w.text("wirespeed switch (AF_XDP)", 256);
    w.text(env!("CARGO_PKG_VERSION"), 256);
    w.text("None", 32);
    w.text("wirespeed switch", 256);
    w.bytes
}

/// Seconds and nanoseconds since `since`, to the millisecond as Open vSwitch sends them (so
/// ovs-ofctl prints `duration=41.212s`, not nine digits).
fn duration(now: Duration, since: Duration) -> (u32, u32) {
    let d = now.saturating_sub(since);
    (d.as_secs() as u32, d.subsec_millis() * 1_000_000)
}

/// `ofp_flow_stats` before its match: length to byte counts.
const FLOW_STATS_FIXED: usize = 48;

/// One `ofp_flow_stats` entry.
pub fn flow_stats_entry(r: &InstalledRule, now: Duration) -> Vec<u8> {
    let mut w = Writer::default();
    let (sec, nsec) = duration(now, r.stats.installed_at);
    w.u16(0).u8(r.rule.table).u8(0).u32(sec).u32(nsec);
    w.u16(r.rule.priority)
        .u16(r.rule.idle_timeout)
        .u16(r.rule.hard_timeout);
    w.u16(r.rule.flags).zeros(4).u64(r.rule.cookie);
    w.u64(r.stats.n_packets).u64(r.stats.n_bytes);
    write_match(&mut w, &r.rule.flow_match);
    write_instructions(&mut w, &r.rule.actions, MatchFacts::of(&r.rule.flow_match));
    w.set_len(0, 0);
    w.bytes
}

pub fn aggregate_body(packets: u64, bytes: u64, flows: u32) -> Vec<u8> {
    let mut w = Writer::default();
    w.u64(packets).u64(bytes).u32(flows).zeros(4);
    w.bytes
}

/// A table's statistics: its rules, and the packets that looked it up and found one.
pub fn table_stats_entry(stats: &TableStats) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(stats.table).zeros(3).u32(stats.active);
    w.u64(stats.counts.lookups).u64(stats.counts.matched);
    w.bytes
}

pub fn port_stats_entry(port: u32, c: &PortCounts, alive: Duration) -> Vec<u8> {
    let mut w = Writer::default();
    w.u32(port).zeros(4);
    for v in [
        c.rx_packets,
        c.tx_packets,
        c.rx_bytes,
        c.tx_bytes,
        c.rx_dropped,
        c.tx_dropped,
        c.rx_errors,
        c.tx_errors,
        0,
        0,
        0,
        0,
    ] {
        w.u64(v);
    }
    w.u32(alive.as_secs() as u32).u32(alive.subsec_nanos());
    w.bytes
}

/// All four group types, weighted and live-aware `select`, no chaining; the actions a
/// bucket may hold.
pub fn group_features_body() -> Vec<u8> {
    let mut w = Writer::default();
    let actions: u32 = [0u32, 17, 18, 21, 23, 24, 25].iter().map(|t| 1 << t).sum();
    w.u32(0b1111).u32(0b11);
    for _ in 0..4 {
        w.u32(MAX_GROUPS as u32);
    }
    for _ in 0..4 {
        w.u32(actions);
    }
    w.bytes
}

pub fn group_desc_entry(g: &Group) -> Vec<u8> {
    let mut w = Writer::default();
    w.u16(0).u8(g.kind.number()).u8(0).u32(g.id);
    write_buckets(&mut w, &g.buckets);
    w.set_len(0, 0);
    w.bytes
}

/// A group's counters and each bucket's.
pub fn group_stats_entry(g: &Group, usage: &GroupUsage) -> Vec<u8> {
    let total = usage.counts.total;
    let mut w = Writer::default();
    w.u16(0).zeros(2).u32(g.id).u32(usage.rules).zeros(4);
    w.u64(total.packets).u64(total.bytes);
    w.u32(usage.age.as_secs() as u32)
        .u32(usage.age.subsec_nanos());
    for bucket in usage.counts.buckets.iter().take(g.buckets.len()) {
        w.u64(bucket.packets).u64(bucket.bytes);
    }
    w.set_len(0, 0);
    w.bytes
}

/// A PACKET_IN (never buffered): the packet's first `data.len()` bytes of `total_len`.
pub fn packet_in(in_port: u32, origin: &PacketInOrigin, data: &[u8], total_len: usize) -> Vec<u8> {
    let mut w = Writer::message(msg::PACKET_IN, 0);
    let reason = u8::from(!origin.table_miss);
    w.u32(NO_BUFFER)
        .u16(total_len.min(0xffff) as u16)
        .u8(reason);
    w.u8(origin.table).u64(origin.cookie);
    write_in_port_match(&mut w, in_port);
    w.zeros(2);
    let room = MAX_MESSAGE - w.len();
    w.slice(&data[..data.len().min(room)]);
    w.finish()
}

pub fn flow_removed(r: &InstalledRule, reason: u8, now: Duration) -> Vec<u8> {
    let mut w = Writer::message(msg::FLOW_REMOVED, 0);
    let (sec, nsec) = duration(now, r.stats.installed_at);
    w.u64(r.rule.cookie)
        .u16(r.rule.priority)
        .u8(reason)
        .u8(r.rule.table);
    w.u32(sec).u32(nsec);
    w.u16(r.rule.idle_timeout).u16(r.rule.hard_timeout);
    w.u64(r.stats.n_packets).u64(r.stats.n_bytes);
    write_match(&mut w, &r.rule.flow_match);
    w.finish()
}

/// `ofp_port_reason`.
pub mod port_reason {
    pub const ADD: u8 = 0;
    pub const DELETE: u8 = 1;
    pub const MODIFY: u8 = 2;
}

pub fn port_status(reason: u8, port: &PortDesc) -> Vec<u8> {
    let mut w = Writer::message(msg::PORT_STATUS, 0);
    w.u8(reason).zeros(7);
    port.write(&mut w);
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_go_to_the_millisecond() {
        let at = Duration::new(41, 212_737_678);
        assert_eq!(duration(at, Duration::ZERO), (41, 212_000_000));
        assert_eq!(duration(Duration::ZERO, at), (0, 0), "never negative");
    }

    #[test]
    fn fixed_sizes_match_the_specification() {
        assert_eq!(features(1, 2).len(), 32);
        assert_eq!(desc_body().len(), 1056);
        assert_eq!(table_stats_entry(&TableStats::default()).len(), 24);
        assert_eq!(
            port_stats_entry(1, &PortCounts::default(), Duration::ZERO).len(),
            112
        );
        let port = PortDesc {
            port_no: 1,
            hw_addr: [2, 0, 0, 0, 0, 1],
            name: "veth1".into(),
            admin_up: true,
            carrier: true,
            speed_mbps: 10_000,
        };
        assert_eq!(port_status(port_reason::ADD, &port).len(), 80);
    }

    #[test]
    fn statistics_are_split_under_64_kib() {
        let entries: Vec<Vec<u8>> = (0..5000).map(|_| vec![0u8; 40]).collect();
        let parts = multipart(7, 1, &entries);
        assert_eq!(parts.len(), 4);
        let mut total = 0;
        for (i, part) in parts.iter().enumerate() {
            assert!(part.len() <= MAX_MESSAGE);
            assert_eq!(
                usize::from(u16::from_be_bytes([part[2], part[3]])),
                part.len()
            );
            let more = u16::from_be_bytes([part[10], part[11]]) == REPLY_MORE;
            assert_eq!(more, i + 1 < parts.len());
            total += (part.len() - 16) / 40;
        }
        assert_eq!(total, 5000);
    }

    /// An entry too long for a message of its own is left out: its length would wrap the
    /// message's, and the controller would read the rest of the connection wrong.
    #[test]
    fn an_entry_no_message_holds_is_left_out() {
        let too_long = MAX_MESSAGE - 16 + 8;
        let entries = vec![
            vec![1u8; 40],
            vec![2u8; too_long],
            vec![3u8; MAX_MESSAGE - 16],
        ];
        let parts = multipart(7, 1, &entries);
        assert_eq!(parts.len(), 2);
        for part in &parts {
            let len = u16::from_be_bytes([part[2], part[3]]);
            assert_eq!(usize::from(len), part.len());
            assert!(!part.contains(&2));
        }
        assert_eq!(parts[1].len(), MAX_MESSAGE);
    }

    #[test]
    fn entry_lengths_are_the_entries() {
        let rule = crate::ofctl::flow_parse::parse_rule("udp,tp_dst=53,actions=output:1").unwrap();
        let mut tables = crate::ofproto::rule_table::RuleTables::new();
        let id = tables.add(rule.clone(), Duration::ZERO);
        let entry = flow_stats_entry(tables.get(id).unwrap(), Duration::ZERO);
        assert_eq!(flow_stats_len(&rule.flow_match, &rule.actions), entry.len());
    }
}
