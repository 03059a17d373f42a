//! A rule as a user writes it (match, priority, actions...) and its counters once installed.

use core::time::Duration;

use crate::action::Action;
use crate::error::{FlowError, error};
use crate::flow_match::Match;

/// Tables a rule may be in: 0 to 254 (`table=254` is a rule's own, never a controller's).
pub const TABLE_COUNT: usize = 255;
/// Tables a controller may use: 0 to 253 (OpenFlow's `n_tables`; table 254 is not offered).
pub const N_TABLES: u8 = 254;

/// OpenFlow's `ofp_flow_mod_flags`, which a rule's `flags` keep.
pub mod flow_flags {
    pub const SEND_FLOW_REM: u16 = 1 << 0;
    pub const CHECK_OVERLAP: u16 = 1 << 1;
    pub const RESET_COUNTS: u16 = 1 << 2;
    pub const NO_PKT_COUNTS: u16 = 1 << 3;
    pub const NO_BYT_COUNTS: u16 = 1 << 4;
}

/// One flow-table entry in ovs-ofctl's terms (`table=0,priority=100,ip,actions=output:2`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Rule {
    pub table: u8,
    pub priority: u16,
    pub cookie: u64,
    /// Seconds without a packet before the rule expires; 0 = never.
    pub idle_timeout: u16,
    /// Seconds after installation before the rule expires; 0 = never.
    pub hard_timeout: u16,
    pub flow_match: Match,
    pub actions: Vec<Action>,
    /// OpenFlow's `ofp_flow_mod_flags` that describe the rule (send_flow_rem: a FLOW_REMOVED
    /// when it goes; no_packet_counts, no_byte_counts); flow syntax sets send_flow_rem.
    pub flags: u16,
}

impl Rule {
    /// ovs-ofctl's priority when none is given (OFP_DEFAULT_PRIORITY).
    pub const DEFAULT_PRIORITY: u16 = 32768;

    pub fn new(flow_match: Match, actions: Vec<Action>) -> Rule {
        Rule {
            table: 0,
            priority: Rule::DEFAULT_PRIORITY,
            cookie: 0,
            idle_timeout: 0,
            hard_timeout: 0,
            flow_match,
            actions,
            flags: 0,
        }
    }

    /// Whether the rule sends to output port `port` (OpenFlow's `out_port` filter; `None`
    /// filters nothing).
    pub fn outputs_to(&self, port: Option<u32>) -> bool {
        port.is_none_or(|port| self.output_ports().any(|p| p == port))
    }

    /// The meter its packets pass first, if it names one (`meter:N` is always first).
    pub fn meter(&self) -> Option<u32> {
        match self.actions.first() {
            Some(Action::Meter(id)) => Some(*id),
            _ => None,
        }
    }

    /// The output ports the actions name (`output:N`), for checking them against the bridge.
    pub fn output_ports(&self) -> impl Iterator<Item = u32> + '_ {
        self.actions.iter().filter_map(|action| match action {
            Action::Output(port) => Some(*port),
            _ => None,
        })
    }

    /// True once the hard timeout has passed at `now`.
    pub fn is_hard_expired(&self, stats: &RuleStats, now: Duration) -> bool {
        self.hard_timeout != 0
            && now.saturating_sub(stats.modified_at)
                >= Duration::from_secs(self.hard_timeout.into())
    }

    /// True once the idle or hard timeout has passed at `now`.
    pub fn is_expired(&self, stats: &RuleStats, now: Duration) -> bool {
        let hard = self.is_hard_expired(stats, now);
        let idle = self.idle_timeout != 0
            && now.saturating_sub(stats.last_used) >= Duration::from_secs(self.idle_timeout.into());
        hard || idle
    }
}

/// Per-rule counters, and the times its timeouts count from (the caller's clock).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct RuleStats {
    pub n_packets: u64,
    pub n_bytes: u64,
    pub installed_at: Duration,
    /// When it was installed, or last learned again: the hard timeout counts from here (Open
    /// vSwitch's `modified`, which a `learn` of the same rule moves on).
    pub modified_at: Duration,
    pub last_used: Duration,
}

impl RuleStats {
    pub fn new(now: Duration) -> RuleStats {
        RuleStats {
            installed_at: now,
            modified_at: now,
            last_used: now,
            ..RuleStats::default()
        }
    }

    pub fn credit(&mut self, bytes: usize, now: Duration) {
        self.credit_many(1, bytes as u64, now);
    }

    /// Counts `packets` packets of `bytes` in all (the kernel's fast path counts in bulk).
    pub fn credit_many(&mut self, packets: u64, bytes: u64, now: Duration) {
        self.n_packets += packets;
        self.n_bytes += bytes;
        self.last_used = self.last_used.max(now);
    }
}

/// Where a packet sent to the controller was sent from: the table and cookie of the rule,
/// and whether it is a table-miss rule (priority 0, matching everything: OpenFlow's
/// `OFPR_NO_MATCH` rather than `OFPR_ACTION`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct PacketInOrigin {
    pub table: u8,
    pub cookie: u64,
    pub table_miss: bool,
}

impl PacketInOrigin {
    /// The origin of a `controller` action of `rule`; none for a PACKET_OUT's actions.
    pub fn of(rule: Option<&Rule>) -> PacketInOrigin {
        match rule {
            Some(rule) => PacketInOrigin {
                table: rule.table,
                cookie: rule.cookie,
                table_miss: rule.priority == 0 && rule.flow_match == Match::ANY,
            },
            None => PacketInOrigin {
                cookie: u64::MAX,
                ..PacketInOrigin::default()
            },
        }
    }
}

/// The checks that need the whole rule: prerequisites of set actions, `goto_table` placement.
pub fn check_actions(rule: &Rule) -> Result<(), FlowError> {
    for (index, action) in rule.actions.iter().enumerate() {
        for prerequisite in action.prerequisites() {
            if !prerequisite.is_met_by(&rule.flow_match) {
                return Err(error(format!(
                    "{action} requires {}",
                    prerequisite.describe()
                )));
            }
        }
        // As OpenFlow's instruction: once, after the actions, before a goto_table.
        if let Action::WriteMetadata(..) = *action {
            let rest = &rule.actions[index + 1..];
            if !matches!(rest, [] | [Action::GotoTable(_)]) {
                return Err(error(format!(
                    "{action}: write_metadata comes last, or just before goto_table"
                )));
            }
        }
        // As OpenFlow's instruction: before the actions (it runs first).
        if let Action::Meter(_) = *action
            && index != 0
        {
            return Err(error(format!("{action}: a meter comes first")));
        }
        if let Action::GotoTable(table) = *action {
            if index + 1 != rule.actions.len() {
                return Err(error(format!(
                    "{action}: goto_table must be the last action"
                )));
            }
            if table <= rule.table {
                return Err(error(format!(
                    "{action}: must go to a later table than this rule's table {}",
                    rule.table
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts() {
        let mut rule = Rule::new(Match::ANY, vec![]);
        let mut stats = RuleStats::new(Duration::from_secs(100));
        assert!(!rule.is_expired(&stats, Duration::from_secs(1000)));
        rule.idle_timeout = 10;
        stats.credit(60, Duration::from_secs(105));
        assert!(!rule.is_expired(&stats, Duration::from_secs(114)));
        assert!(rule.is_expired(&stats, Duration::from_secs(115)));
        rule.idle_timeout = 0;
        rule.hard_timeout = 30;
        assert!(!rule.is_expired(&stats, Duration::from_secs(129)));
        assert!(rule.is_expired(&stats, Duration::from_secs(130)));
        assert_eq!((stats.n_packets, stats.n_bytes), (1, 60));
    }
}
