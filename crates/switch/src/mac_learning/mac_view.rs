//! A poll-mode thread's view of the bridge's learning table, so that `normal` between known
//! hosts reads and writes nothing another thread writes (DESIGN rule 3). The view keeps the
//! answers the shared [`MacTable`] gave this thread while no address has moved or been
//! forgotten there: the table publishes its change count, and a view made at another count is
//! emptied. New addresses do not count as changes, so the view never keeps a "not known"
//! answer: an unknown destination is asked of the shared table every time.
//!
//! What stays exact: a destination the view knows is one the shared table would give the same
//! port for, since the view keeps the table's `last_seen` (the table's is later, or earlier
//! by at most the time between two threads' clock readings) and any move or removal empties
//! the view. What is approximate: a source the thread saw on the
//! same port less than [`REFRESH`] ago is not written back, so its `last_seen` in the shared
//! table may run up to that much early, and it may age out that much sooner than exactly
//! [`MacTable::ageing`] after its last packet.

use core::time::Duration;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use wirespeed_packet::MacAddr;

use crate::mac_learning::{MacEntry, MacTable};

/// A source seen again on the same port within this time is not written back.
pub const REFRESH: Duration = Duration::from_secs(1);
/// Addresses a view holds; a full view is emptied and refilled.
const VIEW_CAPACITY: usize = 4096;

pub struct MacView {
    /// The shared table's change count (see [`MacTable::published_changes`]).
    changes: Arc<AtomicU64>,
    /// The count the entries were taken at.
    seen: u64,
    known: HashMap<(u16, MacAddr), MacEntry>,
    ageing: Duration,
}

impl MacView {
    /// An empty view of `table`.
    pub fn new(table: &MacTable) -> MacView {
        let changes = table.published_changes();
        MacView {
            seen: changes.load(Ordering::Acquire),
            changes,
            known: HashMap::with_capacity(VIEW_CAPACITY),
            ageing: table.ageing(),
        }
    }

    /// Empties the view if the shared table changed since its entries were taken.
    pub fn revalidate(&mut self) {
        let changes = self.changes.load(Ordering::Acquire);
        if changes != self.seen {
            self.known.clear();
            self.seen = changes;
        }
    }

    /// Whether learning `mac` on `vlan` from `port` at `now` can be skipped: the shared table
    /// says that already, as of less than [`REFRESH`] ago.
    pub fn knows_source(&self, vlan: u16, mac: MacAddr, port: u32, now: Duration) -> bool {
        self.known
            .get(&(vlan, mac))
            .is_some_and(|e| e.port == port && now.saturating_sub(e.last_seen) < REFRESH)
    }

    /// The port of `mac` on `vlan`, if the view knows it and it has not aged out by `now`.
    pub fn lookup(&self, vlan: u16, mac: MacAddr, now: Duration) -> Option<u32> {
        let entry = self.known.get(&(vlan, mac))?;
        (now.saturating_sub(entry.last_seen) < self.ageing).then_some(entry.port)
    }

    /// Keeps what the shared table said about `mac` on `vlan` (with its lock held).
    pub fn record(&mut self, vlan: u16, mac: MacAddr, entry: MacEntry) {
        if self.known.len() >= VIEW_CAPACITY {
            self.known.clear();
        }
        self.known.insert((vlan, mac), entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn answers_until_the_table_changes() {
        let mut table = MacTable::new(8, 10 * SECOND);
        let mut view = MacView::new(&table);
        table.learn(0, A, 1, SECOND);
        view.revalidate();
        assert_eq!(view.lookup(0, A, SECOND), None, "nothing recorded yet");
        view.record(0, A, table.entry(0, A).unwrap());
        assert_eq!(view.lookup(0, A, 2 * SECOND), Some(1));
        assert!(view.knows_source(0, A, 1, SECOND + SECOND / 2));
        assert!(!view.knows_source(0, A, 1, 2 * SECOND), "due a refresh");
        assert!(!view.knows_source(0, A, 2, SECOND), "another port");
        assert_eq!(view.lookup(0, A, 11 * SECOND), None, "aged out");
        table.learn(0, A, 2, 3 * SECOND);
        assert_eq!(
            view.lookup(0, A, 3 * SECOND),
            Some(1),
            "stale until revalidated"
        );
        view.revalidate();
        assert_eq!(
            view.lookup(0, A, 3 * SECOND),
            None,
            "a move empties the view"
        );
    }
}
