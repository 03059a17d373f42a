//! OpenFlow groups: a set of action buckets a rule's `group:N` action hands the packet to.
//! `all` runs every bucket (each on the packet as the rule left it), `indirect` its one
//! bucket, `select` one live bucket chosen by a hash of the flow (weighted, and the same
//! for a flow while the buckets stay), `fast_failover` the first bucket whose watched port
//! is live. They live beside the rules ([`crate::RuleTables`]) and are flattened into the
//! datapath's actions when a flow is translated, as Open vSwitch does; the translation notes
//! each group a flow passes and the buckets it takes ([`GroupVisit`]), so the caches' counts
//! come back to them as they come back to the rules.

use core::fmt;
use core::time::Duration;

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

    /// ovs-ofctl's word for it as it prints it (`type=select`, `type=ff`).
    pub fn name(self) -> &'static str {
        match self {
            GroupType::All => "all",
            GroupType::Select => "select",
            GroupType::Indirect => "indirect",
            GroupType::FastFailover => "ff",
        }
    }

    /// The type a word names, as ovs-ofctl reads it (`ff` or `fast_failover`).
    pub fn from_name(name: &str) -> Option<GroupType> {
        Some(match name {
            "all" => GroupType::All,
            "select" => GroupType::Select,
            "indirect" => GroupType::Indirect,
            "ff" | "fast_failover" => GroupType::FastFailover,
            _ => return None,
        })
    }

    /// The weight a bucket has when none is given: 1 in a `select` group, else 0 (as
    /// ovs-ofctl writes them, and leaves them out when printing).
    pub fn default_weight(self) -> u16 {
        u16::from(self == GroupType::Select)
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

/// Packets and bytes.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct Counts {
    pub packets: u64,
    pub bytes: u64,
}

impl Counts {
    fn add(&mut self, packets: u64, bytes: u64) {
        self.packets += packets;
        self.bytes += bytes;
    }
}

/// Which of a group's buckets a flow's packets take.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BucketsTaken {
    /// Every bucket (`all`).
    Every,
    /// This one (`indirect`, and the bucket `select` or `fast_failover` chose).
    One(u32),
    /// None: no bucket was live (or of weight above 0); the packet ends in the group.
    Nothing,
}

/// A group a flow's packets pass through and the buckets they take there, as the
/// translation found them; the datapath hands its counts back along these.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct GroupVisit {
    pub group: u32,
    pub taken: BucketsTaken,
}

/// What passed through a group since it was installed (or last modified, as in Open
/// vSwitch): every visit's packets, and each bucket's share.
#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct GroupCounts {
    pub total: Counts,
    pub buckets: Vec<Counts>,
}

impl GroupCounts {
    /// Zero, for a group of `buckets` buckets.
    pub fn new(buckets: usize) -> GroupCounts {
        GroupCounts {
            total: Counts::default(),
            buckets: vec![Counts::default(); buckets],
        }
    }

    /// Adds `packets` and `bytes` that took `taken` (a bucket the group no longer has is
    /// counted in the total alone).
    pub fn credit(&mut self, taken: BucketsTaken, packets: u64, bytes: u64) {
        self.total.add(packets, bytes);
        match taken {
            BucketsTaken::Every => self.buckets.iter_mut().for_each(|b| b.add(packets, bytes)),
            BucketsTaken::One(i) => {
                if let Some(bucket) = self.buckets.get_mut(i as usize) {
                    bucket.add(packets, bytes);
                }
            }
            BucketsTaken::Nothing => {}
        }
    }
}

/// A group's statistics: the rules that send to it (its reference count), what passed
/// through it, and how long it has been there (its statistics' duration).
#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct GroupUsage {
    pub rules: u32,
    pub counts: GroupCounts,
    pub age: Duration,
}

/// The largest group id (`OFPG_MAX`); the ids above it name no one group.
pub const GROUP_MAX: u32 = 0xffff_ff00;

/// Groups a bridge holds at most: a controller's or a script's runaway adds are refused
/// (OUT_OF_GROUPS) before they fill the memory the translation walks.
pub const MAX_GROUPS: usize = 65_536;

/// Why a group cannot be installed as given.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum GroupError {
    /// `indirect` takes exactly one bucket.
    IndirectBuckets,
    /// A `fast_failover` bucket watches no port.
    NoWatch,
    /// A bucket sends to a group or a table, writes the action set or names a meter (no
    /// chaining here).
    Chained,
    /// An id above [`GROUP_MAX`].
    InvalidId,
    /// An add for a group the bridge has.
    Exists,
    /// A modify for a group the bridge does not have.
    Unknown,
    /// An add past [`MAX_GROUPS`].
    TooMany,
    /// A bucket outputs to a port the bridge does not have (the message names it).
    BadOutPort(String),
    /// Its description or statistics would not fit one OpenFlow reply.
    TooLong,
}

impl fmt::Display for GroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GroupError::IndirectBuckets => "an indirect group has exactly one bucket",
            GroupError::NoWatch => "each bucket of a fast_failover group needs watch_port",
            GroupError::Chained => {
                "a bucket holds actions only: no group, table, action set or meter (no chaining)"
            }
            GroupError::InvalidId => "group ids are 0 to 4294967040",
            GroupError::Exists => "the group exists (mod-group changes it)",
            GroupError::Unknown => "no such group",
            GroupError::TooMany => "the bridge holds 65536 groups at most",
            GroupError::BadOutPort(why) => why,
            GroupError::TooLong => {
                "too many buckets or actions: the group's statistics or description would not \
                 fit one OpenFlow reply (64 KiB)"
            }
        })
    }
}

impl std::error::Error for GroupError {}

impl Group {
    /// What a group must be whatever the bridge holds: its id, and buckets its type takes.
    pub fn check(&self) -> Result<(), GroupError> {
        if self.id > GROUP_MAX {
            return Err(GroupError::InvalidId);
        }
        if self.kind == GroupType::Indirect && self.buckets.len() != 1 {
            return Err(GroupError::IndirectBuckets);
        }
        if self.kind == GroupType::FastFailover
            && self.buckets.iter().any(|b| b.watch_port.is_none())
        {
            return Err(GroupError::NoWatch);
        }
        let chained = |a: &Action| a.is_table_jump() || matches!(a, Action::Meter(_));
        if self.buckets.iter().any(|b| b.actions.iter().any(chained)) {
            return Err(GroupError::Chained);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_visit_counts_in_the_group_and_the_buckets_it_took() {
        let mut counts = GroupCounts::new(3);
        counts.credit(BucketsTaken::Every, 2, 200);
        counts.credit(BucketsTaken::One(1), 5, 500);
        counts.credit(BucketsTaken::Nothing, 7, 700);
        // A bucket past the end (the group changed since the flow was translated).
        counts.credit(BucketsTaken::One(3), 11, 1100);
        let c = |packets, bytes| Counts { packets, bytes };
        assert_eq!(counts.total, c(25, 2500));
        assert_eq!(counts.buckets, vec![c(2, 200), c(7, 700), c(2, 200)]);
    }
}
