//! A poll-mode thread's flow cache, and how the control side gets it. The thread holds the
//! cache's lock through each round of bursts and takes it again at once, so a plain mutex
//! would let the control side (a rule change, a harvest) wait behind it for many rounds while
//! it holds the other threads' caches. Instead the control side says it is coming, and the
//! thread lets it in before its next round.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::dpif::flow_cache::FlowCache;

const FREE: u8 = 0;
/// The control side waits for the lock: the thread does not take it again.
const WANTED: u8 = 1;
/// The control side holds the lock.
const HELD: u8 = 2;

#[derive(Default)]
pub struct ThreadCache {
    cache: Mutex<FlowCache>,
    control: AtomicU8,
}

impl ThreadCache {
    /// The cache for one round of the thread's bursts: after the control side, if it is
    /// waiting or working (the wait is the control side's, a few microseconds to take the
    /// lock, then as long as its change takes).
    pub fn for_round(&self) -> MutexGuard<'_, FlowCache> {
        while self.control.load(Ordering::Acquire) == WANTED {
            std::thread::yield_now();
        }
        lock(&self.cache)
    }

    /// The cache for the control side, between two of the thread's rounds.
    pub fn for_control(&self) -> ControlGuard<'_> {
        self.control.store(WANTED, Ordering::Release);
        let guard = lock(&self.cache);
        self.control.store(HELD, Ordering::Release);
        ControlGuard {
            control: &self.control,
            guard,
        }
    }
}

/// The control side's hold on a thread's cache; the thread goes on when it is dropped.
pub struct ControlGuard<'a> {
    control: &'a AtomicU8,
    guard: MutexGuard<'a, FlowCache>,
}

impl Drop for ControlGuard<'_> {
    fn drop(&mut self) {
        // The lock itself is released just after, when `guard` is dropped.
        self.control.store(FREE, Ordering::Release);
    }
}

impl Deref for ControlGuard<'_> {
    type Target = FlowCache;

    fn deref(&self) -> &FlowCache {
        &self.guard
    }
}

impl DerefMut for ControlGuard<'_> {
    fn deref_mut(&mut self) -> &mut FlowCache {
        &mut self.guard
    }
}

/// Shared state, even if a thread panicked holding it (the data stays consistent: every
/// change under a lock is a whole rule or a whole packet).
pub fn lock<T: ?Sized>(shared: &Mutex<T>) -> MutexGuard<'_, T> {
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};

    /// A thread that retakes its cache at once, round after round (each a 20 µs burst of
    /// work), begins no round while the control side waits, but the one it may have been
    /// taking the lock for as the wait began. With a plain mutex it went on for tens to
    /// hundreds of rounds per wait here (up to 12 ms).
    #[test]
    fn the_control_side_gets_in_between_rounds() {
        const VISITS: u64 = 20;
        let cache = Arc::new(ThreadCache::default());
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (cache, stop) = (cache.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut begun_while_waited_for = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let mut round = cache.for_round();
                    if cache.control.load(Ordering::Acquire) == WANTED {
                        begun_while_waited_for += 1;
                    }
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_micros(20) {}
                    round.stats.emc_hits += 1;
                }
                begun_while_waited_for
            })
        };
        let mut rounds = Vec::new();
        for _ in 0..VISITS {
            std::thread::sleep(Duration::from_millis(2));
            rounds.push(cache.for_control().stats.emc_hits);
        }
        stop.store(true, Ordering::Relaxed);
        let begun_while_waited_for = thread.join().unwrap();
        assert!(
            begun_while_waited_for <= VISITS,
            "rounds begun while the control side waited: {begun_while_waited_for}"
        );
        assert!(
            rounds[VISITS as usize - 1] >= VISITS,
            "the thread ran: {rounds:?}"
        );
    }
}
