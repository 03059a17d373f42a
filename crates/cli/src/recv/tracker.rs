//! Sequence tracking for one generator in fixed memory: a sliding window of bits over the
//! last [`WINDOW`] sequence numbers. A number that falls out of the window unseen is lost
//! (and named, in ranges); one seen twice is a duplicate; one that comes after a higher
//! number is reordered; one older than the window comes too late to tell (counted as late).

use serde::Serialize;

/// Sequence numbers tracked at once: reordering deeper than this counts as loss + late.
pub const WINDOW: u64 = 1 << 20;
/// Lost ranges named in the report; more are counted, not named.
pub const MAX_LOST_RANGES: usize = 4096;

pub struct SeqTracker {
    seen: Box<[u64]>,
    /// Every number below `base` is decided (seen or lost).
    base: u64,
    /// One past the highest number seen.
    high: u64,
    pub unique: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub late: u64,
    pub lost: u64,
    lost_ranges: Vec<(u64, u64)>,
    lost_ranges_complete: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct SeqReport {
    pub unique: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub late: u64,
    /// One past the highest sequence number seen (or --expect, if higher).
    pub sequence_end: u64,
    /// The lost sequence numbers, as inclusive ranges [first, last].
    pub lost_ranges: Vec<(u64, u64)>,
    /// False when there were more ranges than the report names.
    pub lost_ranges_complete: bool,
}

impl Default for SeqTracker {
    fn default() -> SeqTracker {
        SeqTracker {
            seen: vec![0; (WINDOW / 64) as usize].into_boxed_slice(),
            base: 0,
            high: 0,
            unique: 0,
            duplicated: 0,
            reordered: 0,
            late: 0,
            lost: 0,
            lost_ranges: Vec::with_capacity(MAX_LOST_RANGES),
            lost_ranges_complete: true,
        }
    }
}

impl SeqTracker {
    #[inline]
    fn slot(seq: u64) -> (usize, u64) {
        let i = seq % WINDOW;
        ((i / 64) as usize, 1 << (i % 64))
    }

    #[inline]
    pub fn record(&mut self, seq: u64) {
        if seq < self.base {
            self.late += 1;
            return;
        }
        if seq - self.base >= WINDOW {
            self.decide_below(seq + 1 - WINDOW);
        }
        let (word, bit) = Self::slot(seq);
        if self.seen[word] & bit != 0 {
            self.duplicated += 1;
            return;
        }
        self.seen[word] |= bit;
        self.unique += 1;
        if seq < self.high {
            self.reordered += 1;
        } else {
            self.high = seq + 1;
        }
    }

    fn note_lost(&mut self, first: u64, count: u64) {
        self.lost += count;
        if let Some((_, last)) = self.lost_ranges.last_mut()
            && *last + 1 == first
        {
            *last += count;
        } else if self.lost_ranges.len() < MAX_LOST_RANGES {
            self.lost_ranges.push((first, first + count - 1));
        } else {
            self.lost_ranges_complete = false;
        }
    }

    /// Decides every number below `end`: unseen ones are lost; their bits are cleared for
    /// the numbers that take their place in the window.
    fn decide_below(&mut self, end: u64) {
        let in_window = end.min(self.base + WINDOW);
        let mut seq = self.base;
        while seq < in_window {
            let (word, bit) = Self::slot(seq);
            // A whole word seen: skip it at once (the usual case).
            if seq.is_multiple_of(64) && seq + 64 <= in_window && self.seen[word] == u64::MAX {
                self.seen[word] = 0;
                seq += 64;
                continue;
            }
            if self.seen[word] & bit == 0 {
                self.note_lost(seq, 1);
            } else {
                self.seen[word] &= !bit;
            }
            seq += 1;
        }
        if end > in_window {
            // Beyond the window nothing was ever recorded.
            self.note_lost(in_window, end - in_window);
        }
        self.base = self.base.max(end);
    }

    /// One past the highest number seen.
    pub fn high(&self) -> u64 {
        self.high
    }

    /// The numbers below the highest seen that have not come (yet): the losses decided,
    /// and the gaps still in the window, which a reordered packet may fill.
    pub fn missing_so_far(&self) -> u64 {
        // Each number seen is below `high` and counted in `unique` once.
        self.high - self.unique
    }

    /// True while no number has been decided (the span seen fits the window).
    pub fn undecided(&self) -> bool {
        self.base == 0 && self.late == 0
    }

    /// Takes in another thread's numbers of the same generator, where neither has decided
    /// any yet (both spans fit the window): the one tracker then names every loss exactly.
    /// False, changing nothing, where one has (a report merge must do).
    pub fn absorb(&mut self, other: &SeqTracker) -> bool {
        if !self.undecided() || !other.undecided() {
            return false;
        }
        let mut both = 0u64;
        for (mine, theirs) in self.seen.iter_mut().zip(other.seen.iter()) {
            both += u64::from((*mine & theirs).count_ones());
            *mine |= theirs;
        }
        // A number both threads saw came twice.
        self.unique += other.unique - both;
        self.duplicated += other.duplicated + both;
        self.reordered += other.reordered;
        self.high = self.high.max(other.high);
        true
    }

    /// Decides the rest: numbers up to the highest seen, or `expect` (the numbers the
    /// sender used) if higher.
    pub fn finish(&mut self, expect: Option<u64>) -> SeqReport {
        let end = self.high.max(expect.unwrap_or(0));
        self.decide_below(end);
        SeqReport {
            unique: self.unique,
            lost: self.lost,
            duplicated: self.duplicated,
            reordered: self.reordered,
            late: self.late,
            sequence_end: end,
            lost_ranges: self.lost_ranges.clone(),
            lost_ranges_complete: self.lost_ranges_complete,
        }
    }
}

impl SeqReport {
    /// One generator's reports from threads that each saw part of its numbers (each
    /// decided up to the same end): a number is lost where every thread lost it, so the
    /// lost ranges are those all the threads name. The counts add up.
    pub fn merge(parts: Vec<SeqReport>) -> Option<SeqReport> {
        let mut parts = parts.into_iter();
        let mut all = parts.next()?;
        for p in parts {
            all.unique += p.unique;
            all.duplicated += p.duplicated;
            all.reordered += p.reordered;
            all.late += p.late;
            all.sequence_end = all.sequence_end.max(p.sequence_end);
            all.lost_ranges = intersect(&all.lost_ranges, &p.lost_ranges);
            all.lost_ranges_complete &= p.lost_ranges_complete;
        }
        all.lost = match all.lost_ranges_complete {
            true => all.lost_ranges.iter().map(|(a, b)| b - a + 1).sum(),
            false => all.sequence_end.saturating_sub(all.unique),
        };
        Some(all)
    }
}

/// The numbers in both lists of sorted, disjoint inclusive ranges.
fn intersect(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        let (first, last) = (a[i].0.max(b[j].0), a[i].1.min(b[j].1));
        if first <= last {
            out.push((first, last));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seqs: impl IntoIterator<Item = u64>, expect: Option<u64>) -> SeqReport {
        let mut t = SeqTracker::default();
        for s in seqs {
            t.record(s);
        }
        t.finish(expect)
    }

    #[test]
    fn in_order_without_loss() {
        let r = run(0..10_000, None);
        assert_eq!(
            (r.unique, r.lost, r.duplicated, r.reordered),
            (10_000, 0, 0, 0)
        );
        assert!(r.lost_ranges.is_empty());
    }

    #[test]
    fn names_exactly_the_missing_numbers() {
        let r = run(
            (0..5000).filter(|s| s % 1000 != 999 && !(2000..2005).contains(s)),
            Some(5002),
        );
        assert_eq!(r.lost, 5 + 5 + 2);
        assert_eq!(
            r.lost_ranges,
            vec![
                (999, 999),
                (1999, 2004),
                (2999, 2999),
                (3999, 3999),
                (4999, 5001)
            ]
        );
    }

    /// What the live line shows: a gap counts at once, and stops counting when a reordered
    /// packet fills it; a duplicate changes nothing.
    #[test]
    fn missing_so_far_counts_gaps_still_in_the_window() {
        let mut t = SeqTracker::default();
        for s in [0, 1, 5, 5, 9] {
            t.record(s);
        }
        assert_eq!((t.missing_so_far(), t.lost), (6, 0));
        t.record(3);
        assert_eq!(t.missing_so_far(), 5);
        let far = 2 * WINDOW;
        t.record(far);
        // 0..=far but the six seen, whether decided (out of the window) or not.
        assert_eq!(t.missing_so_far(), far + 1 - 6);
        assert_eq!(t.finish(None).lost, far + 1 - 6);
    }

    #[test]
    fn duplicates_and_reordering() {
        let r = run([0, 1, 3, 2, 3, 4, 4, 6, 5], None);
        assert_eq!((r.unique, r.duplicated, r.reordered, r.lost), (7, 2, 2, 0));
    }

    #[test]
    fn losses_across_and_beyond_the_window() {
        let far = 3 * WINDOW + 17;
        let r = run([0, 1, far, 2], Some(far + 3));
        // 2 arrives after it fell out of the window: lost, then late.
        assert_eq!(r.late, 1);
        assert_eq!(r.lost, far + 3 - 3);
        assert_eq!(r.lost_ranges, vec![(2, far - 1), (far + 1, far + 2)]);
        assert_eq!(r.unique, 3);
    }

    #[test]
    fn threads_that_each_saw_part_of_the_numbers_merge_into_one_report() {
        // Evens on one queue, odds on the other; 7 and 10-12 never came.
        let lost = |s: &u64| *s == 7 || (10..=12).contains(s);
        let mut even = SeqTracker::default();
        let mut odd = SeqTracker::default();
        for s in (0..20u64).filter(|s| !lost(s)) {
            match s % 2 {
                0 => even.record(s),
                _ => odd.record(s),
            }
        }
        let end = even.high().max(odd.high());
        let r = SeqReport::merge(vec![even.finish(Some(end)), odd.finish(Some(end))]).unwrap();
        assert_eq!((r.unique, r.lost, r.sequence_end), (16, 4, 20));
        assert_eq!(r.lost_ranges, vec![(7, 7), (10, 12)]);
        assert!(r.lost_ranges_complete);
    }

    #[test]
    fn trackers_within_the_window_absorb_each_other_and_name_every_loss() {
        let lost = |s: &u64| s % 100 == 99;
        let (mut even, mut odd) = (SeqTracker::default(), SeqTracker::default());
        for s in (0..20_000u64).filter(|s| !lost(s)) {
            match s % 2 {
                0 => even.record(s),
                _ => odd.record(s),
            }
        }
        odd.record(1); // one number on both queues
        assert!(even.absorb(&odd));
        let r = even.finish(Some(20_000));
        assert_eq!((r.unique, r.lost, r.duplicated), (19_800, 200, 1));
        assert_eq!(r.lost_ranges.len(), 200);
        assert!(r.lost_ranges_complete);
        // Once a tracker has decided numbers, it cannot take another's in.
        let mut far = SeqTracker::default();
        far.record(3 * WINDOW);
        assert!(!far.absorb(&SeqTracker::default()));
    }

    #[test]
    fn a_long_run_through_the_window_keeps_the_count() {
        let n = 3 * WINDOW;
        let r = run((0..n).filter(|s| s % 100_003 != 0), None);
        let lost = n.div_ceil(100_003);
        assert_eq!(r.lost, lost);
        assert_eq!(r.unique, n - lost);
        assert_eq!(r.lost_ranges.len() as u64, lost);
    }
}
