//! OpenFlow groups: a set of action buckets a rule's `group:N` action hands the packet to.
//! `all` runs every bucket (each on the packet as the rule left it), `indirect` its one
//! bucket, `select` one live bucket chosen by a hash of the flow (weighted, and the same
//! for a flow while the buckets stay), `fast_failover` the first bucket whose watched port
//! is live. They live beside the rules ([`crate::RuleTables`]) and are flattened into the
//! datapath's actions when a flow is translated, as Open vSwitch does.

use crate::action::Action;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum GroupType {
    All,
    Select,
    Indirect,
    FastFailover,
}

impl GroupType {
    /// OpenFlow's number (`ofp_group_type`).
    pub fn number(self) -> u8 {
        match self {
            GroupType::All => 0,
            GroupType::Select => 1,
            GroupType::Indirect => 2,
            GroupType::FastFailover => 3,
        }
    }

    pub fn from_number(n: u8) -> Option<GroupType> {
        Some(match n {
            0 => GroupType::All,
            1 => GroupType::Select,
            2 => GroupType::Indirect,
            3 => GroupType::FastFailover,
            _ => return None,
        })
    }
}

/// One bucket: its actions, its weight (`select`), and the port whose liveness it depends
/// on (`fast_failover`; also skips a dead bucket in `select`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Bucket {
    pub weight: u16,
    pub watch_port: Option<u32>,
    pub actions: Vec<Action>,
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Group {
    pub id: u32,
    pub kind: GroupType,
    pub buckets: Vec<Bucket>,
}

/// Why a group cannot be installed as given.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum GroupError {
    /// `indirect` takes exactly one bucket.
    IndirectBuckets,
    /// A `fast_failover` bucket watches no port.
    NoWatch,
    /// A bucket sends to a group or a table (no chaining here).
    Chained,
}

impl Group {
    pub fn check(&self) -> Result<(), GroupError> {
        if self.kind == GroupType::Indirect && self.buckets.len() != 1 {
            return Err(GroupError::IndirectBuckets);
        }
        if self.kind == GroupType::FastFailover
            && self.buckets.iter().any(|b| b.watch_port.is_none())
        {
            return Err(GroupError::NoWatch);
        }
        let chained = |a: &Action| {
            matches!(
                a,
                Action::Group(_)
                    | Action::GotoTable(_)
                    | Action::Resubmit(_)
                    | Action::WriteMetadata(..)
            )
        };
        if self.buckets.iter().any(|b| b.actions.iter().any(chained)) {
            return Err(GroupError::Chained);
        }
        Ok(())
    }
}
