//! A slot one thread fills with its latest figures and a scrape reads: the filling thread
//! uses `try_lock` and skips a turn when a scrape holds the slot, so a poll-mode thread
//! never waits for a scrape.

use std::sync::{Arc, Mutex, TryLockError};

/// The latest figures of one thread (none before its first publication).
pub struct Published<T> {
    slot: Arc<Mutex<Option<T>>>,
}

impl<T> Clone for Published<T> {
    fn clone(&self) -> Self {
        Published {
            slot: self.slot.clone(),
        }
    }
}

impl<T> Default for Published<T> {
    fn default() -> Self {
        Published {
            slot: Arc::new(Mutex::new(None)),
        }
    }
}

impl<T: Clone> Published<T> {
    pub fn new() -> Published<T> {
        Published::default()
    }

    /// Puts `figures` in the slot unless a reader holds it; true if it did. `figures` is
    /// made only when the slot is free.
    pub fn offer(&self, figures: impl FnOnce() -> T) -> bool {
        match self.slot.try_lock() {
            Ok(mut slot) => {
                *slot = Some(figures());
                true
            }
            Err(TryLockError::Poisoned(e)) => {
                *e.into_inner() = Some(figures());
                true
            }
            Err(TryLockError::WouldBlock) => false,
        }
    }

    /// The latest figures, for a scrape.
    pub fn latest(&self) -> Option<T> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offer_skips_while_a_reader_holds_the_slot() {
        let p = Published::new();
        assert_eq!(p.latest(), None);
        assert!(p.offer(|| 1));
        let held = p.slot.lock().unwrap();
        let mut made = false;
        assert!(!p.offer(|| {
            made = true;
            2
        }));
        assert!(!made, "the figures are not made when the slot is busy");
        drop(held);
        assert_eq!(p.latest(), Some(1));
        assert!(p.offer(|| 3));
        assert_eq!(p.latest(), Some(3));
    }
}
