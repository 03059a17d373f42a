//! The kernel's entries around a change to the rules (see "Rule changes" in the module
//! above): [`Offload::watch`] or [`Offload::suspend_for`] before it, [`Offload::resume`]
//! after it, and [`Offload::flush`] where the change cannot be tested entry by entry.

use std::collections::HashSet;
use std::time::Duration;

use wirespeed_xdp::XdpError;
use wirespeed_xdp::fast_path::{Classes, FastKey};

use super::{Offload, Suspension, arrival_mask, credit};
use crate::classifier::RuleId;
use crate::dpif::digest::bits;
use crate::dpif::revalidate::{Arrival, Changes, MAX_PRECISE_CHANGES};
use crate::dpif::upcall::Upcall;
use crate::mac_learning::MacTable;

impl Offload {
    /// Before a change that takes no rule away (adds rules, changes their actions, or
    /// changes no rule): the kernel goes on forwarding, and [`Offload::resume`], which must
    /// follow the change ([`crate::ofproto::state::edit`] calls it), stops and removes the
    /// entries the change touched.
    pub fn watch(&mut self, tables: &dyn Upcall) {
        // With no entry there is nothing to revalidate (and nothing is installed until the
        // change is over: the caller holds the lock `consider` is called under).
        if self.suspension.is_none() && !self.entries.is_empty() {
            self.suspension = Some(Suspension::Watching(tables.generation()));
        }
    }

    /// Before a change that takes the rules `going` away, or resets their counts, or
    /// changes the groups `groups` (a modify starts a group's counts anew, a delete takes
    /// it away): if some entry's packets count for one of them, stops the kernel forwarding
    /// on those entries' classes and credits their counts while the rules and groups are as
    /// they were; otherwise as [`Offload::watch`] (an entry decided by other rules and
    /// groups is not decided otherwise by the change).
    pub fn suspend_for(
        &mut self,
        going: &[RuleId],
        groups: &[u32],
        tables: &mut dyn Upcall,
        macs: &mut MacTable,
        now: Duration,
    ) -> Result<(), XdpError> {
        let (rule_bits, group_bits) = (
            bits(going.iter().map(|r| r.0)),
            bits(groups.iter().copied()),
        );
        let going: HashSet<RuleId> = going.iter().copied().collect();
        let counting: Vec<FastKey> = self
            .digested(|digest| digest.may_name(rule_bits, group_bits, 0))
            .filter(|(_, entry)| {
                entry.rules.iter().any(|id| going.contains(id))
                    || entry.groups.iter().any(|v| groups.contains(&v.group))
            })
            .map(|(key, _)| *key)
            .collect();
        if counting.is_empty() {
            self.watch(tables);
            return Ok(());
        }
        self.stop_and_harvest(Some(&counting), tables, macs, now)
    }

    /// Before a change that may take any rule away: stops the kernel forwarding on every
    /// entry and credits their counts while the rules are all there, keeping the entries
    /// for [`Offload::resume`], which must follow the change.
    pub fn suspend(
        &mut self,
        tables: &mut dyn Upcall,
        macs: &mut MacTable,
        now: Duration,
    ) -> Result<(), XdpError> {
        if self.entries.is_empty() {
            return Ok(());
        }
        self.stop_and_harvest(None, tables, macs, now)
    }

    /// Stops the kernel forwarding on the classes of the entries of `harvest` (None: of
    /// every entry) not stopped already, then credits those entries' counts. A change made
    /// before, in the same edit, took no rule away ([`Suspension::Watching`]): their counts
    /// are still the rules'.
    fn stop_and_harvest(
        &mut self,
        harvest: Option<&[FastKey]>,
        tables: &mut dyn Upcall,
        macs: &mut MacTable,
        now: Duration,
    ) -> Result<(), XdpError> {
        let (generation, stopped) = match self.suspension {
            Some(Suspension::Stopped(generation, stopped)) => (generation, stopped),
            Some(Suspension::Watching(generation)) => (generation, Classes::NONE),
            None => (tables.generation(), Classes::NONE),
        };
        let picked = match harvest {
            Some(keys) => Classes::of(keys),
            None => Classes::of(&self.places),
        };
        let classes = picked.union(stopped);
        let result = self.stop(classes).and_then(|()| {
            self.suspension = Some(Suspension::Stopped(generation, classes));
            self.credit_picked(harvest, tables, macs, now)
        });
        if result.is_err() {
            // The flush owed is made at the resume (housekeeping retries one that fails);
            // until then the entries may be stale or forwarding.
            self.suspension = None;
            self.flush_failed = true;
        }
        result
    }

    /// After the rules changed: removes the entries whose packets the changes could decide
    /// otherwise (every one if they are not all known, or too many to test one by one), and
    /// lets the kernel forward on the rest of the classes it stopped again.
    pub fn resume(
        &mut self,
        tables: &mut dyn Upcall,
        macs: &mut MacTable,
        now: Duration,
    ) -> Result<(), XdpError> {
        let suspension = self.suspension.take();
        // No generation is written back while a flush is owed: entries a failed stop or
        // removal left stale would forward again, untested. And a stop that failed left no
        // suspension, but the change went ahead: the flush is made before the edit ends.
        if self.flush_failed {
            return self.flush(tables, macs, now);
        }
        let Some(suspension) = suspension else {
            return Ok(());
        };
        let result = self
            .remove_touched(suspension, tables, macs, now)
            .and_then(|stopped| self.resume_unremoved(stopped));
        if result.is_err() {
            self.flush_failed = true;
        }
        result
    }

    /// Removes the entries the changes since `suspension` touched, their last counts
    /// credited (to rules still there, or to rules that went whose counts were taken before:
    /// nothing new then); the classes stopped at the end.
    fn remove_touched(
        &mut self,
        suspension: Suspension,
        tables: &mut dyn Upcall,
        macs: &mut MacTable,
        now: Duration,
    ) -> Result<Classes, XdpError> {
        let (generation, stopped) = match suspension {
            Suspension::Watching(generation) => (generation, Classes::NONE),
            Suspension::Stopped(generation, stopped) => (generation, stopped),
        };
        let arrival_mask = arrival_mask();
        let touched: Vec<FastKey> = match tables.changes_since(generation) {
            Some(changes) if changes.len() <= MAX_PRECISE_CHANGES => {
                let changes = Changes::new(changes);
                self.digested(|digest| changes.may_touch(digest))
                    .filter(|(_, e)| {
                        let arrival = Arrival {
                            value: &e.arrival,
                            mask: &arrival_mask,
                        };
                        changes.touches(arrival, &e.rules, &e.lookups, &e.groups)
                    })
                    .map(|(key, _)| *key)
                    .collect()
            }
            _ if self.entries.is_empty() => Vec::new(),
            // (It leaves the kernel on a new generation: nothing to resume.)
            _ => {
                return self
                    .flush_entries(tables, macs, now)
                    .map(|()| Classes::NONE);
            }
        };
        let n = touched.len() as u64;
        let stopped = self.remove_entries(touched, stopped, tables, macs, now)?;
        self.revalidated += n;
        Ok(stopped)
    }

    /// Removes the entries of `keys`, their last counts credited, the kernel stopped first
    /// on their classes (those not in `stopped` already) so no packet is missed; the classes
    /// stopped at the end. Their classes stay stopped until the program has been waited for
    /// ([`Offload::settled_at`]); the caller resumes the others.
    pub(super) fn remove_entries(
        &mut self,
        keys: Vec<FastKey>,
        stopped: Classes,
        tables: &mut dyn Upcall,
        macs: &mut MacTable,
        now: Duration,
    ) -> Result<Classes, XdpError> {
        if keys.is_empty() {
            return Ok(stopped);
        }
        let removed = Classes::of(&keys);
        let stopped = removed.union(stopped);
        self.stop(stopped)?;
        for key in &keys {
            if let Some(entry) = self.entries.get_mut(key) {
                let counts = self.fast_path.counts(key)?;
                credit(entry, counts, &mut self.ports, tables, macs, now);
            }
        }
        self.removals += 1;
        // A run that found a removed entry before its removal reads the classes stopped
        // after it, so it forwards nothing as long as they stay stopped: until the program
        // has been waited for, which settles the removals too. The bridge waits outside its
        // lock: after answering the OpenFlow messages queued (unless they kept coming for a
        // tick), before answering `ctl`.
        self.to_resume = self.to_resume.union(removed);
        self.resume_after = self.removals;
        for key in keys {
            self.remove(key)?;
        }
        Ok(stopped)
    }

    /// Lets the kernel forward again on the classes `stopped` whose entries were not
    /// removed (those that were resume once the program has been waited for).
    pub(super) fn resume_unremoved(&mut self, stopped: Classes) -> Result<(), XdpError> {
        self.fast_path.resume(stopped.minus(self.to_resume))
    }

    /// Stops the kernel forwarding on the entries of `classes` until [`FastPath::resume`]
    /// (a stop only if some were not stopped).
    fn stop(&mut self, classes: Classes) -> Result<(), XdpError> {
        let new = classes.minus(self.fast_path.stopped());
        if !new.is_empty() {
            self.stops += 1;
            self.stopped_classes += u64::from(new.len());
        }
        self.fast_path.suspend(classes)
    }

    /// Stops the kernel forwarding on any entry, credits their counts, and removes them (the
    /// next packets of those flows are decided afresh): when a learned address moved, or
    /// after a change the rules' log cannot say.
    pub fn flush(
        &mut self,
        tables: &mut dyn Upcall,
        macs: &mut MacTable,
        now: Duration,
    ) -> Result<(), XdpError> {
        let result = self.flush_entries(tables, macs, now);
        self.flush_failed = result.is_err();
        result
    }

    /// Whether the last flush failed (a poll-mode thread then leaves the retry to
    /// housekeeping: a flush waits for the kernel, about 10 ms).
    pub fn flush_failed(&self) -> bool {
        self.flush_failed
    }

    fn flush_entries(
        &mut self,
        tables: &mut dyn Upcall,
        macs: &mut MacTable,
        now: Duration,
    ) -> Result<(), XdpError> {
        self.fast_path.invalidate_all()?;
        self.harvest(tables, macs, now)?;
        if !self.entries.is_empty() {
            self.removals += 1;
            self.flushes += 1;
        }
        for key in self.entries.keys() {
            self.fast_path.remove(key)?;
        }
        for (key, entry) in std::mem::take(&mut self.entries) {
            self.keep_removed(key, entry);
        }
        self.digests.clear();
        self.places.clear();
        // (invalidate_all left no class stopped.)
        self.to_resume = Classes::NONE;
        self.to_age.clear();
        self.full = false;
        self.dsts.clear();
        self.macs_seen = macs.changes();
        Ok(())
    }
}
