//! Taking back a bundle's changes: while a journal is kept ([`RuleTables::begin_undo`]),
//! each change to the rules and groups notes how to undo it, and a failed commit rolls them
//! all back, newest first.

use super::{InstalledGroup, InstalledRule, RuleTables};
use crate::classifier::RuleId;
use crate::rule::{Rule, RuleStats};

/// How to take back one change to the tables. The changes a bundle can hold (rules added,
/// modified, deleted; their counts; groups set and deleted) note these while a journal is
/// kept; meters, the fail mode and port liveness never change inside one.
#[derive(Debug)]
pub(super) enum Undo {
    /// A rule went into this slot: one that was free, or a new one at the end.
    Added { id: RuleId, was_free: bool },
    /// This rule left its slot.
    Removed(RuleId, Box<InstalledRule>),
    /// This rule's actions, cookie or counts were these.
    Changed(RuleId, Box<(Rule, RuleStats)>),
    /// A group's entry was this (None: there was none).
    Group(u32, Option<Box<InstalledGroup>>),
}

impl RuleTables {
    /// Starts noting how to take back each change (a bundle's commit).
    pub fn begin_undo(&mut self) {
        self.journal = Some(Vec::new());
        self.released_before_journal = self.released_learns.len();
    }

    /// Keeps the changes made since [`RuleTables::begin_undo`].
    pub fn keep(&mut self) {
        self.journal = None;
    }

    /// Takes back every change made since [`RuleTables::begin_undo`], newest first: each
    /// rule back in its slot with its rank and counts, each group as it was. Costs what
    /// the changes did, not what the tables hold.
    pub fn roll_back(&mut self) {
        let Some(journal) = self.journal.take() else {
            return;
        };
        self.released_learns.truncate(self.released_before_journal);
        for undo in journal.into_iter().rev() {
            match undo {
                Undo::Added { id, was_free } => {
                    if let Some(installed) = self.rules[id.0 as usize].take() {
                        let table = usize::from(installed.rule.table);
                        self.tables[table].remove(&installed.rule.flow_match, id);
                    }
                    // Every later change is taken back: a new slot is the last one.
                    match was_free {
                        true => self.free.push(id.0),
                        false => {
                            self.rules.pop();
                        }
                    }
                }
                Undo::Removed(id, installed) => {
                    // Every later change is taken back: its slot is the last one freed.
                    if let Some(at) = self.free.iter().rposition(|&slot| slot == id.0) {
                        self.free.remove(at);
                    }
                    let table = usize::from(installed.rule.table);
                    self.tables[table].insert(&installed.rule.flow_match, installed.rank, id);
                    self.rules[id.0 as usize] = Some(*installed);
                }
                Undo::Changed(id, before) => {
                    if let Some(Some(installed)) = self.rules.get_mut(id.0 as usize) {
                        (installed.rule, installed.stats) = *before;
                    }
                }
                Undo::Group(id, before) => {
                    match before {
                        Some(entry) => self.groups.insert(id, *entry),
                        None => self.groups.remove(&id),
                    };
                }
            }
        }
        self.changed_everything();
    }

    pub(super) fn journaling(&self) -> bool {
        self.journal.is_some()
    }

    /// Notes how to take back a change, while a journal is kept.
    pub(super) fn note(&mut self, undo: Undo) {
        if let Some(journal) = &mut self.journal {
            journal.push(undo);
        }
    }

    /// Notes rule `id` as it is, before a change to it.
    pub(super) fn note_changed(&mut self, id: RuleId) {
        if !self.journaling() {
            return;
        }
        if let Some(installed) = self.get(id) {
            let before = Box::new((installed.rule.clone(), installed.stats));
            self.note(Undo::Changed(id, before));
        }
    }
}
