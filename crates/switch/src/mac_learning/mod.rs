//! The MAC learning table behind the `normal` action: (VLAN, MAC) → port, with ageing. Time is
//! passed in; nothing here reads a clock. The table is sized once; each port's list of what
//! it learned grows to at most about twice its share.
//!
//! A full table makes room as Open vSwitch's does (`evict_mac_entry_fairly`): the oldest
//! address of the port that holds the most goes. A port flooding made-up source addresses
//! then evicts its own, and hosts on other ports are still learned; each new address costs
//! the same whatever the table holds (it used to scan the whole table under the threads'
//! shared lock, learn nothing, and scan again for the next).

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
/// How often a full table looks for aged entries at most before it evicts live ones.
const EXPIRE_WHEN_FULL_EVERY: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MacEntry {
    pub port: u32,
    pub last_seen: Duration,
}

pub struct MacTable {
    entries: HashMap<(u16, MacAddr), Learned>,
    /// Joins so far (an address learned, or moved, on a port): each join's number.
    joins: u64,
    /// Per port, what it learned (see [`PortEntries`]).
    ports: HashMap<u32, PortEntries>,
    /// When a full table last looked for aged entries.
    expired_when_full: Option<Duration>,
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

/// An address's entry, and the number of its last join (see [`PortEntries`]).
#[derive(Clone, Copy)]
struct Learned {
    entry: MacEntry,
    joined: u64,
}

/// One port's addresses: how many, and the joins that made them its, oldest first. A join
/// whose address since moved (a later join) or was forgotten stays in the order until it
/// is met at the front, or the order is compacted once it is twice as long as the count;
/// an address that moved away and back is as new as its return.
#[derive(Default)]
struct PortEntries {
    count: usize,
    order: VecDeque<((u16, MacAddr), u64)>,
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
            joins: 0,
            ports: HashMap::new(),
            expired_when_full: None,
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

    /// Records that `mac` on `vlan` was seen on `port`. Group addresses are not learned. A
    /// full table forgets what aged first (looking at most once a second), else the oldest
    /// address of the port that holds the most.
    pub fn learn(&mut self, vlan: u16, mac: MacAddr, port: u32, now: Duration) {
        if mac.is_multicast() || self.capacity == 0 {
            return;
        }
        let key = (vlan, mac);
        let join = self.joins;
        if let Some(learned) = self.entries.get_mut(&key) {
            let was = learned.entry.port;
            learned.entry = MacEntry {
                port,
                last_seen: now,
            };
            if was != port {
                learned.joined = join;
                self.joins += 1;
                note_change(&mut self.changes, &mut self.log, &self.published, key);
                self.left(was);
                self.joined(port, key, join);
            }
            return;
        }
        if self.entries.len() >= self.capacity {
            let looked = self.expired_when_full;
            if looked.is_none_or(|at| now >= at + EXPIRE_WHEN_FULL_EVERY) {
                self.expired_when_full = Some(now);
                self.expire(now);
            }
            if self.entries.len() >= self.capacity {
                self.evict_fairly();
            }
        }
        let entry = MacEntry {
            port,
            last_seen: now,
        };
        self.entries.insert(
            key,
            Learned {
                entry,
                joined: join,
            },
        );
        self.joins += 1;
        self.joined(port, key, join);
    }

    /// `key` is now learned on `port`, by join number `join`.
    fn joined(&mut self, port: u32, key: (u16, MacAddr), join: u64) {
        let p = self.ports.entry(port).or_default();
        p.count += 1;
        p.order.push_back((key, join));
        if p.order.len() > 2 * p.count + 16 {
            let entries = &self.entries;
            p.order
                .retain(|(k, join)| entries.get(k).is_some_and(|l| l.joined == *join));
        }
    }

    /// An address learned on `port` moved or went.
    fn left(&mut self, port: u32) {
        if let Some(p) = self.ports.get_mut(&port) {
            p.count = p.count.saturating_sub(1);
            if p.count == 0 {
                self.ports.remove(&port);
            }
        }
    }

    /// Forgets the oldest address of the port that holds the most.
    fn evict_fairly(&mut self) {
        let Some((&port, _)) = self.ports.iter().max_by_key(|(_, p)| p.count) else {
            return;
        };
        while let Some((key, join)) = self.ports.get_mut(&port).and_then(|p| p.order.pop_front()) {
            if self.entries.get(&key).is_some_and(|l| l.joined == join) {
                self.entries.remove(&key);
                note_change(&mut self.changes, &mut self.log, &self.published, key);
                self.left(port);
                return;
            }
        }
    }

    /// Learning from packets seen earlier (the kernel's fast path, harvested): keeps the entry
    /// alive if it still says `port`, learns it if it is gone, but never moves an address
    /// that was since seen elsewhere.
    pub fn refresh(&mut self, vlan: u16, mac: MacAddr, port: u32, now: Duration) {
        match self.entries.get_mut(&(vlan, mac)).map(|l| &mut l.entry) {
            Some(entry) if entry.port == port => entry.last_seen = entry.last_seen.max(now),
            Some(_) => {}
            None => self.learn(vlan, mac, port, now),
        }
    }

    /// The port `mac` on `vlan` was last seen on, unless that was longer ago than the ageing time.
    pub fn lookup(&self, vlan: u16, mac: MacAddr, now: Duration) -> Option<u32> {
        let entry = self.entries.get(&(vlan, mac))?.entry;
        (now.saturating_sub(entry.last_seen) < self.ageing).then_some(entry.port)
    }

    /// The entry for `mac` on `vlan`, aged out or not.
    pub fn entry(&self, vlan: u16, mac: MacAddr) -> Option<MacEntry> {
        self.entries.get(&(vlan, mac)).map(|l| l.entry)
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
        let ports = &mut self.ports;
        self.entries.retain(|&key, Learned { entry, .. }| {
            let keep = !gone(entry);
            if !keep {
                note_change(changes, log, published, key);
                if let Some(p) = ports.get_mut(&entry.port) {
                    p.count = p.count.saturating_sub(1);
                }
            }
            keep
        });
        ports.retain(|_, p| p.count > 0);
        before - self.entries.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = (u16, MacAddr, MacEntry)> + '_ {
        self.entries
            .iter()
            .map(|(&(vlan, mac), learned)| (vlan, mac, learned.entry))
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
    fn a_full_table_forgets_what_aged_then_the_busiest_ports_oldest() {
        let mut table = MacTable::new(2, 10 * SECOND);
        table.learn(0, A, 1, SECOND);
        table.learn(0, B, 2, 2 * SECOND);
        let c = MacAddr([2, 0, 0, 0, 0, 3]);
        // A aged out: it goes, not B.
        let now = 11 * SECOND + SECOND / 2;
        table.learn(0, c, 3, now);
        assert_eq!(table.entry(0, A), None);
        assert_eq!(table.lookup(0, B, now), Some(2));
        assert_eq!(table.lookup(0, c, now), Some(3));
        table.flush_port(2);
        table.flush_port(3);
        assert!(table.is_empty());
    }

    /// An address that moved away and came back is as new as its return: a full table
    /// evicts the port's oldest other address first.
    #[test]
    fn an_address_back_on_its_port_is_as_new_as_its_return() {
        let mut table = MacTable::new(3, 300 * SECOND);
        let c = MacAddr([2, 0, 0, 0, 0, 3]);
        for (i, mac) in [A, B, c].into_iter().enumerate() {
            table.learn(0, mac, 1, (1 + i as u32) * SECOND);
        }
        table.learn(0, A, 2, 4 * SECOND);
        table.learn(0, A, 1, 5 * SECOND);
        let d = MacAddr([2, 0, 0, 0, 0, 4]);
        table.learn(0, d, 3, 6 * SECOND);
        assert_eq!(table.entry(0, B), None);
        for (mac, port) in [(A, 1), (c, 1), (d, 3)] {
            assert_eq!(table.lookup(0, mac, 6 * SECOND), Some(port));
        }
    }

    /// The review's flood: one port sends from more made-up addresses than the table holds,
    /// the others' hosts stay and a new host elsewhere is still learned, and the flood's
    /// addresses evict each other, oldest first.
    #[test]
    fn a_port_flooding_new_addresses_evicts_its_own() {
        let capacity = 64;
        let mut table = MacTable::new(capacity, 300 * SECOND);
        let host = |i: u8| MacAddr([2, 0, 0, 0, 1, i]);
        for i in 0..8 {
            table.learn(0, host(i), 1 + u32::from(i % 2), SECOND);
        }
        let made_up = |i: u32| MacAddr([2, 0xee, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8]);
        let changes = table.changes();
        for i in 0..10_000 {
            table.learn(0, made_up(i), 9, 2 * SECOND);
        }
        assert_eq!(table.len(), capacity);
        assert_eq!(table.changes(), changes + 10_000 - (capacity as u64 - 8));
        for i in 0..8 {
            assert_eq!(
                table.lookup(0, host(i), 2 * SECOND),
                Some(1 + u32::from(i % 2))
            );
        }
        // The newest of the flood are the ones kept.
        assert!(table.entry(0, made_up(9_999)).is_some());
        assert!(table.entry(0, made_up(10_000 - 56)).is_some());
        assert!(table.entry(0, made_up(10_000 - 57)).is_none());
        // A new host on another port: learned (the flooding port gives up one more).
        table.learn(0, host(100), 3, 3 * SECOND);
        assert_eq!(table.lookup(0, host(100), 3 * SECOND), Some(3));
        assert!(table.entry(0, made_up(10_000 - 56)).is_none());
        // Each port's order stays near its share, however many came and went.
        assert!(
            table
                .ports
                .values()
                .all(|p| p.order.len() <= 2 * p.count + 16)
        );
    }
}
