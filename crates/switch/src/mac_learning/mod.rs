//! The MAC learning table behind the `normal` action: (VLAN, MAC) → port, with ageing. Time is
//! passed in; nothing here reads a clock. Sized once, so learning never allocates.

pub mod mac_view;

use core::time::Duration;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use wirespeed_packet::MacAddr;

/// OVS's defaults: `mac-aging-time` 300 s, `mac-table-size` 8192.
pub const DEFAULT_AGEING: Duration = Duration::from_secs(300);
pub const DEFAULT_CAPACITY: usize = 8192;
/// Changed addresses remembered for [`MacTable::changed_since`].
const CHANGE_LOG: usize = 4096;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MacEntry {
    pub port: u32,
    pub last_seen: Duration,
}

pub struct MacTable {
    entries: HashMap<(u16, MacAddr), MacEntry>,
    capacity: usize,
    ageing: Duration,
    /// Bumped whenever a learned address moves or is forgotten: what was looked up before
    /// may now be answered differently (the fast path's `normal` entries depend on it).
    changes: u64,
    /// `changes`, for the threads' views ([`crate::mac_learning::mac_view::MacView`]) to read without the
    /// table's lock.
    published: Arc<AtomicU64>,
    /// The last addresses that moved or were forgotten, the newest last: the one of change
    /// number `changes` is at the back.
    log: VecDeque<(u16, MacAddr)>,
}

impl Default for MacTable {
    fn default() -> Self {
        MacTable::new(DEFAULT_CAPACITY, DEFAULT_AGEING)
    }
}

impl MacTable {
    pub fn new(capacity: usize, ageing: Duration) -> MacTable {
        MacTable {
            entries: HashMap::with_capacity(capacity),
            capacity,
            ageing,
            changes: 0,
            published: Arc::new(AtomicU64::new(0)),
            log: VecDeque::with_capacity(CHANGE_LOG),
        }
    }

    /// The addresses (VLAN, MAC) that moved or were forgotten after change number `since`
    /// (a value of [`MacTable::changes`]), or None when more have changed since than the
    /// table remembers.
    pub fn changed_since(&self, since: u64) -> Option<impl Iterator<Item = &(u16, MacAddr)>> {
        let count = usize::try_from(self.changes.checked_sub(since)?).ok()?;
        (count <= self.log.len()).then(|| self.log.iter().skip(self.log.len() - count))
    }

    /// Moves and removals so far (see the field).
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// The change count as other threads may read it, kept equal to [`MacTable::changes`].
    pub fn published_changes(&self) -> Arc<AtomicU64> {
        self.published.clone()
    }

    /// How long an address is remembered after it was last seen.
    pub fn ageing(&self) -> Duration {
        self.ageing
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Records that `mac` on `vlan` was seen on `port`. Group addresses are not learned; when the
    /// table is full of live entries a new address is not learned either (its frames flood).
    pub fn learn(&mut self, vlan: u16, mac: MacAddr, port: u32, now: Duration) {
        if mac.is_multicast() {
            return;
        }
        if let Some(entry) = self.entries.get_mut(&(vlan, mac)) {
            if entry.port != port {
                note_change(
                    &mut self.changes,
                    &mut self.log,
                    &self.published,
                    (vlan, mac),
                );
            }
            *entry = MacEntry {
                port,
                last_seen: now,
            };
            return;
        }
        if self.entries.len() >= self.capacity {
            self.expire(now);
            if self.entries.len() >= self.capacity {
                return;
            }
        }
        self.entries.insert(
            (vlan, mac),
            MacEntry {
                port,
                last_seen: now,
            },
        );
    }

    /// Learning from packets seen earlier (the kernel's fast path, harvested): keeps the entry
    /// alive if it still says `port`, learns it if it is gone, but never moves an address
    /// that was since seen elsewhere.
    pub fn refresh(&mut self, vlan: u16, mac: MacAddr, port: u32, now: Duration) {
        match self.entries.get_mut(&(vlan, mac)) {
            Some(entry) if entry.port == port => entry.last_seen = entry.last_seen.max(now),
            Some(_) => {}
            None => self.learn(vlan, mac, port, now),
        }
    }

    /// The port `mac` on `vlan` was last seen on, unless that was longer ago than the ageing time.
    pub fn lookup(&self, vlan: u16, mac: MacAddr, now: Duration) -> Option<u32> {
        let entry = self.entries.get(&(vlan, mac))?;
        (now.saturating_sub(entry.last_seen) < self.ageing).then_some(entry.port)
    }

    /// The entry for `mac` on `vlan`, aged out or not.
    pub fn entry(&self, vlan: u16, mac: MacAddr) -> Option<MacEntry> {
        self.entries.get(&(vlan, mac)).copied()
    }

    /// Drops entries older than the ageing time; returns how many.
    pub fn expire(&mut self, now: Duration) -> usize {
        let ageing = self.ageing;
        self.forget(|entry| now.saturating_sub(entry.last_seen) >= ageing)
    }

    /// Forgets everything learned on `port` (it went away).
    pub fn flush_port(&mut self, port: u32) {
        self.forget(|entry| entry.port == port);
    }

    /// Removes the entries `gone` says, each a change; returns how many.
    fn forget(&mut self, gone: impl Fn(&MacEntry) -> bool) -> usize {
        let before = self.entries.len();
        let (changes, log, published) = (&mut self.changes, &mut self.log, &self.published);
        self.entries.retain(|&key, entry| {
            let keep = !gone(entry);
            if !keep {
                note_change(changes, log, published, key);
            }
            keep
        });
        before - self.entries.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = (u16, MacAddr, MacEntry)> + '_ {
        self.entries
            .iter()
            .map(|(&(vlan, mac), &entry)| (vlan, mac, entry))
    }
}

/// Counts a change to `key` and remembers it (the oldest is forgotten when the log is full).
fn note_change(
    changes: &mut u64,
    log: &mut VecDeque<(u16, MacAddr)>,
    published: &AtomicU64,
    key: (u16, MacAddr),
) {
    *changes += 1;
    published.store(*changes, Ordering::Release);
    if log.len() == CHANGE_LOG {
        log.pop_front();
    }
    log.push_back(key);
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const B: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn moves_and_removals_count_as_changes() {
        let mut t = MacTable::new(4, 10 * SECOND);
        t.learn(0, A, 1, SECOND);
        t.learn(0, A, 1, 2 * SECOND);
        t.learn(0, B, 2, 2 * SECOND);
        assert_eq!(t.changes(), 0, "learning and refreshing change no answer");
        t.learn(0, A, 3, 3 * SECOND);
        assert_eq!(t.changes(), 1, "a move");
        assert_eq!(t.expire(5 * SECOND), 0);
        assert_eq!(t.changes(), 1);
        assert_eq!(t.expire(12 * SECOND), 1);
        assert_eq!(t.changes(), 2, "B aged out");
        t.flush_port(3);
        assert_eq!((t.changes(), t.len()), (3, 0));
        assert_eq!(t.published_changes().load(Ordering::Relaxed), 3);
        let changed: Vec<_> = t.changed_since(0).unwrap().copied().collect();
        assert_eq!(changed, [(0, A), (0, B), (0, A)]);
        let changed: Vec<_> = t.changed_since(2).unwrap().copied().collect();
        assert_eq!(changed, [(0, A)]);
        assert_eq!(t.changed_since(3).unwrap().count(), 0);
    }

    /// More changes than the log keeps: the caller learns it cannot tell which.
    #[test]
    fn changes_beyond_the_log_are_unknown() {
        let mut t = MacTable::new(4, 10 * SECOND);
        for i in 0..=CHANGE_LOG as u32 {
            t.learn(0, A, i % 2, SECOND);
        }
        let changes = t.changes();
        assert_eq!(changes, CHANGE_LOG as u64);
        assert_eq!(t.changed_since(0).map(Iterator::count), Some(CHANGE_LOG));
        t.learn(0, B, 1, SECOND);
        t.learn(0, B, 2, SECOND);
        assert!(t.changed_since(0).is_none());
        assert_eq!(t.changed_since(changes).unwrap().count(), 1);
    }

    #[test]
    fn refresh_never_moves_an_address() {
        let mut t = MacTable::new(4, 10 * SECOND);
        t.learn(0, A, 1, SECOND);
        t.learn(0, A, 2, 2 * SECOND);
        t.refresh(0, A, 1, 3 * SECOND);
        assert_eq!(t.lookup(0, A, 3 * SECOND), Some(2));
        t.refresh(0, A, 2, 9 * SECOND);
        assert_eq!(t.lookup(0, A, 15 * SECOND), Some(2), "kept alive");
        t.refresh(0, B, 3, 15 * SECOND);
        assert_eq!(t.lookup(0, B, 15 * SECOND), Some(3), "learned when absent");
        assert_eq!(t.changes(), 1);
    }

    #[test]
    fn learn_move_and_age() {
        let mut table = MacTable::new(8, 10 * SECOND);
        table.learn(0, A, 1, SECOND);
        assert_eq!(table.lookup(0, A, 5 * SECOND), Some(1));
        assert_eq!(table.lookup(7, A, 5 * SECOND), None, "other VLAN");
        table.learn(0, A, 2, 6 * SECOND);
        assert_eq!(table.lookup(0, A, 15 * SECOND), Some(2));
        assert_eq!(table.lookup(0, A, 16 * SECOND), None, "aged out");
        assert_eq!(table.expire(16 * SECOND), 1);
        table.learn(0, MacAddr::BROADCAST, 1, SECOND);
        assert!(table.is_empty());
    }

    #[test]
    fn full_table_expires_then_refuses() {
        let mut table = MacTable::new(1, 10 * SECOND);
        table.learn(0, A, 1, SECOND);
        table.learn(0, B, 2, 2 * SECOND);
        assert_eq!(table.lookup(0, B, 2 * SECOND), None);
        table.learn(0, B, 2, 20 * SECOND);
        assert_eq!(table.lookup(0, B, 20 * SECOND), Some(2));
        table.flush_port(2);
        assert!(table.is_empty());
    }
}
