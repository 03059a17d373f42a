//! The bridge's groups (OpenFlow's GROUP_MOD): each with when it was added and what
//! passed through it, the rules that send to one, and what a change to one takes away.

use core::time::Duration;

use std::collections::{HashMap, HashSet};

use super::{InstalledRule, RuleId, RuleSelector, RuleTables, Undo};
use crate::action::Action;
use crate::dpif::revalidate::RuleChange;
use crate::group::{Group, GroupCounts, GroupError, GroupUsage, GroupVisit, MAX_GROUPS};

/// A group, when it was added (a modify keeps the time, as Open vSwitch does), and what
/// passed through it since it was added or last modified (a modify starts its counts anew,
/// as Open vSwitch's does: the buckets may be others).
#[derive(Clone, Debug)]
pub(super) struct InstalledGroup {
    pub(super) group: Group,
    pub(super) added: Duration,
    pub(super) counts: GroupCounts,
}

impl RuleTables {
    pub fn group(&self, id: u32) -> Option<&Group> {
        self.groups.get(&id).map(|g| &g.group)
    }

    /// Every group, by id.
    pub fn groups(&self) -> impl Iterator<Item = &Group> {
        self.groups.values().map(|g| &g.group)
    }

    /// Whether [`Self::set_group`] would take `group`: well formed, and added if new (and
    /// room is left) or replacing one there.
    pub fn check_group(&self, group: &Group, replace: bool) -> Result<(), GroupError> {
        group.check()?;
        match (self.groups.contains_key(&group.id), replace) {
            (true, false) => Err(GroupError::Exists),
            (false, true) => Err(GroupError::Unknown),
            (false, false) if self.groups.len() >= MAX_GROUPS => Err(GroupError::TooMany),
            _ => Ok(()),
        }
    }

    /// Installs a group (`replace`: replaces one; OpenFlow's GROUP_MOD add and modify). The
    /// bridge's ports are not checked here: [`crate::Ofproto::set_group`] does that.
    pub fn set_group(
        &mut self,
        group: Group,
        replace: bool,
        now: Duration,
    ) -> Result<(), GroupError> {
        self.check_group(&group, replace)?;
        let added = self.groups.get(&group.id).map_or(now, |g| g.added);
        let id = group.id;
        let counts = GroupCounts::new(group.buckets.len());
        let installed = InstalledGroup {
            group,
            added,
            counts,
        };
        let before = self.groups.insert(id, installed);
        self.note(Undo::Group(id, before.map(Box::new)));
        self.changed(RuleChange::Group(id));
        Ok(())
    }

    /// Removes group `only`, or every group (None), and the rules that send to them: one
    /// pass over the rules, however many groups go (a controller deleting every group of
    /// thousands under 100,000 rules read them once, not once a group).
    pub fn delete_groups(&mut self, only: Option<u32>) -> Vec<InstalledRule> {
        let Some(id) = only else {
            let mut ids: Vec<u32> = self.groups.keys().copied().collect();
            ids.sort_unstable();
            let going = self.sending_to_groups(&ids.iter().copied().collect());
            for id in ids {
                let before = self.groups.remove(&id);
                self.note(Undo::Group(id, before.map(Box::new)));
                self.changed(RuleChange::Group(id));
            }
            return self.remove_all(going);
        };
        self.delete_group(id)
    }

    /// The rules with a `group` action to one of `groups`.
    pub fn sending_to_groups(&self, groups: &HashSet<u32>) -> Vec<RuleId> {
        let sends = |a: &Action| matches!(a, Action::Group(g) if groups.contains(g));
        self.iter()
            .filter(|(_, installed)| installed.rule.actions.iter().any(sends))
            .map(|(id, _)| id)
            .collect()
    }

    /// How many rules send to each group (the groups no rule sends to left out); a rule
    /// counts once a group, as [`Self::group_usage`] counts it.
    pub fn group_references(&self) -> HashMap<u32, u32> {
        let mut counts = HashMap::new();
        let mut sent_to = Vec::new();
        for (_, installed) in self.iter() {
            sent_to.clear();
            for action in &installed.rule.actions {
                if let Action::Group(g) = action
                    && !sent_to.contains(g)
                {
                    sent_to.push(*g);
                    *counts.entry(*g).or_insert(0) += 1;
                }
            }
        }
        counts
    }

    /// A group's statistics at `now`: how many rules send to it (its reference count), what
    /// the datapath credited to it and its buckets, and how long it has been there.
    pub fn group_usage(&self, id: u32, now: Duration) -> GroupUsage {
        let rules = self
            .rules
            .iter()
            .flatten()
            .filter(|installed| installed.rule.actions.contains(&Action::Group(id)))
            .count() as u32;
        self.group_usage_of(id, rules, now)
    }

    /// [`Self::group_usage`] with the rules that send to it counted already
    /// ([`Self::group_references`]).
    pub fn group_usage_of(&self, id: u32, rules: u32, now: Duration) -> GroupUsage {
        let Some(installed) = self.groups.get(&id) else {
            return GroupUsage {
                rules,
                ..GroupUsage::default()
            };
        };
        GroupUsage {
            rules,
            counts: installed.counts.clone(),
            age: now.saturating_sub(installed.added),
        }
    }

    /// Adds packets that passed through a group to its counts and its buckets'; a group
    /// gone since the flow was translated is passed over.
    pub fn credit_group(&mut self, visit: GroupVisit, packets: u64, bytes: u64) {
        if let Some(installed) = self.groups.get_mut(&visit.group) {
            installed.counts.credit(visit.taken, packets, bytes);
        }
    }

    /// Removes a group and the rules that send to it (as OpenFlow says); the rules removed.
    pub fn delete_group(&mut self, id: u32) -> Vec<InstalledRule> {
        let Some(before) = self.groups.remove(&id) else {
            return Vec::new();
        };
        self.note(Undo::Group(id, Some(Box::new(before))));
        self.changed(RuleChange::Group(id));
        self.delete_taking(&RuleSelector::sending_to_group(id))
    }
}
