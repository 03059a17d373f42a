//! The account of MSG_ZEROCOPY sends and their completions.
//!
//! Every send call that the kernel accepts with MSG_ZEROCOPY gets the next number of a 32-bit
//! counter, starting at 0 for each socket. A completion notice names an inclusive range of
//! those numbers, `lo..=hi`, whose pages the kernel no longer holds, and whether it copied
//! them after all. Sends complete out of order in general, so each number still in flight
//! has a flag; the oldest retire together once they are all done. A notice outside the
//! numbers in flight, or naming one twice, is refused: it comes from the kernel, and rule 6
//! says we check before we trust.

/// Sends in flight and what their completions said.
#[derive(Debug, Clone)]
pub struct Completions {
    /// The number the kernel gives the next accepted send.
    next: u32,
    /// The oldest number not yet retired: `oldest..next` are in flight.
    oldest: u32,
    /// `done[n % capacity]` for each number `n` in flight.
    done: Box<[bool]>,
    zerocopied: u64,
    copied: u64,
    notices: u64,
}

/// A completion notice that does not fit the sends in flight.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("range {lo}..={hi}, with sends {oldest}..{next} in flight")]
pub struct BadCompletion {
    pub lo: u32,
    pub hi: u32,
    pub oldest: u32,
    pub next: u32,
}

impl Completions {
    /// An account that holds at most `capacity` sends in flight.
    pub fn new(capacity: usize) -> Self {
        assert!(capacity > 0 && capacity <= 1 << 20, "capacity out of range");
        Completions {
            next: 0,
            oldest: 0,
            done: vec![false; capacity].into_boxed_slice(),
            zerocopied: 0,
            copied: 0,
            notices: 0,
        }
    }

    /// How many sends are in flight (issued, not retired).
    pub fn in_flight(&self) -> u32 {
        self.next.wrapping_sub(self.oldest)
    }

    /// Whether another send can be recorded.
    pub fn has_room(&self) -> bool {
        (self.in_flight() as usize) < self.done.len()
    }

    /// Records a send the kernel accepted; returns its number. The caller checks `has_room`.
    pub fn issue(&mut self) -> u32 {
        assert!(
            self.has_room(),
            "more sends in flight than the account holds"
        );
        let id = self.next;
        self.next = id.wrapping_add(1);
        id
    }

    /// Whether send `id` (an issued number) has retired: it and every older one are done.
    pub fn retired(&self, id: u32) -> bool {
        id.wrapping_sub(self.oldest) >= self.in_flight()
    }

    /// Applies a notice for `lo..=hi`; `copied` when the kernel says it copied the data.
    pub fn complete(&mut self, lo: u32, hi: u32, copied: bool) -> Result<(), BadCompletion> {
        let bad = BadCompletion {
            lo,
            hi,
            oldest: self.oldest,
            next: self.next,
        };
        let (first, last) = (lo.wrapping_sub(self.oldest), hi.wrapping_sub(self.oldest));
        if first > last || last >= self.in_flight() {
            return Err(bad);
        }
        let cap = self.done.len();
        let slot = |n: u32| (self.oldest.wrapping_add(n) as usize) % cap;
        if (first..=last).any(|n| self.done[slot(n)]) {
            return Err(bad);
        }
        for n in first..=last {
            self.done[slot(n)] = true;
        }
        let count = u64::from(last - first) + 1;
        if copied {
            self.copied += count;
        } else {
            self.zerocopied += count;
        }
        self.notices += 1;
        while self.in_flight() > 0 && self.done[self.oldest as usize % cap] {
            self.done[self.oldest as usize % cap] = false;
            self.oldest = self.oldest.wrapping_add(1);
        }
        Ok(())
    }

    /// Sends the kernel completed without copying.
    pub fn zerocopied(&self) -> u64 {
        self.zerocopied
    }

    /// Sends the kernel completed but had copied (`SO_EE_CODE_ZEROCOPY_COPIED`).
    pub fn copied(&self) -> u64 {
        self.copied
    }

    /// Completion notices read.
    pub fn notices(&self) -> u64 {
        self.notices
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn in_order_ranges_retire_everything() {
        let mut c = Completions::new(8);
        for want in 0..5 {
            assert_eq!(c.issue(), want);
        }
        c.complete(0, 2, false).unwrap();
        assert!(c.retired(2) && !c.retired(3));
        c.complete(3, 4, true).unwrap();
        assert_eq!(
            (c.in_flight(), c.zerocopied(), c.copied(), c.notices()),
            (0, 3, 2, 2)
        );
    }

    #[test]
    fn out_of_order_waits_for_the_oldest() {
        let mut c = Completions::new(8);
        (0..4).for_each(|_| {
            c.issue();
        });
        c.complete(2, 3, false).unwrap();
        assert_eq!(c.in_flight(), 4);
        assert!(!c.retired(3), "3 is done but 0 and 1 are not");
        c.complete(0, 1, false).unwrap();
        assert_eq!(c.in_flight(), 0);
    }

    #[test]
    fn refuses_what_was_not_sent_or_is_repeated() {
        let mut c = Completions::new(4);
        c.issue();
        c.issue();
        assert!(c.complete(0, 2, false).is_err(), "2 was never sent");
        assert!(c.complete(1, 0, false).is_err(), "backwards range");
        c.complete(1, 1, false).unwrap();
        assert!(c.complete(1, 1, false).is_err(), "1 twice");
        assert!(c.complete(0, 1, false).is_err(), "overlaps 1");
        c.complete(0, 0, false).unwrap();
        assert!(c.complete(0, 0, false).is_err(), "already retired");
        assert_eq!(c.notices(), 2);
    }

    #[test]
    fn room_is_the_capacity() {
        let mut c = Completions::new(2);
        c.issue();
        c.issue();
        assert!(!c.has_room());
        c.complete(0, 0, false).unwrap();
        assert!(c.has_room());
    }

    #[test]
    fn numbers_wrap_at_32_bits() {
        let mut c = Completions::new(4);
        c.next = u32::MAX - 1;
        c.oldest = u32::MAX - 1;
        let ids: Vec<u32> = (0..3).map(|_| c.issue()).collect();
        assert_eq!(ids, [u32::MAX - 1, u32::MAX, 0]);
        c.complete(u32::MAX, 0, false).unwrap();
        assert!(!c.retired(0));
        c.complete(u32::MAX - 1, u32::MAX - 1, false).unwrap();
        assert!(c.retired(0) && c.in_flight() == 0);
    }

    proptest! {
        /// Any split of the issued numbers into ranges, applied in any order, retires all of
        /// them exactly once, and counts each number once.
        #[test]
        fn any_ranges_in_any_order_retire_all(
            start in any::<u32>(),
            cuts in proptest::collection::vec(1u32..6, 1..40),
            order in any::<u64>(),
        ) {
            let total: u32 = cuts.iter().sum();
            let mut c = Completions::new(256);
            c.next = start;
            c.oldest = start;
            for _ in 0..total { c.issue(); }
            let mut ranges = Vec::new();
            let mut lo = start;
            for len in &cuts {
                ranges.push((lo, lo.wrapping_add(len - 1)));
                lo = lo.wrapping_add(*len);
            }
            // A fixed pseudo-random permutation from `order`.
            let mut seed = order | 1;
            for i in (1..ranges.len()).rev() {
                seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
                ranges.swap(i, (seed % (i as u64 + 1)) as usize);
            }
            for (i, &(lo, hi)) in ranges.iter().enumerate() {
                c.complete(lo, hi, i % 2 == 0).unwrap();
                prop_assert!(c.complete(lo, hi, false).is_err());
            }
            prop_assert_eq!(c.in_flight(), 0);
            prop_assert_eq!(c.zerocopied() + c.copied(), u64::from(total));
        }
    }
}
