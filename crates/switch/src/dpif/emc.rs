//! The exact-match cache: full flow → megaflow, in a fixed array sized once (OVS's EMC: 8192
//! entries, two candidate slots per hash). A hit costs one hash and one 80-byte compare (the
//! [`PacketKey`]).

use crate::dpif::megaflow::MegaflowId;
use crate::field::PacketKey;

pub const DEFAULT_EMC_ENTRIES: usize = 8192;

#[derive(Clone, Copy)]
struct EmcEntry {
    key: PacketKey,
    megaflow: MegaflowId,
}

pub struct ExactMatchCache {
    slots: Vec<Option<EmcEntry>>,
    /// `slots.len() - 1`; the length is a power of two.
    index_mask: usize,
}

impl ExactMatchCache {
    /// A cache of `entries` slots (rounded up to a power of two); 0 disables it.
    pub fn new(entries: usize) -> ExactMatchCache {
        let len = if entries == 0 {
            0
        } else {
            entries.next_power_of_two()
        };
        ExactMatchCache {
            slots: vec![None; len],
            index_mask: len.saturating_sub(1),
        }
    }

    pub fn is_enabled(&self) -> bool {
        !self.slots.is_empty()
    }

    fn candidates(&self, hash: u64) -> [usize; 2] {
        [
            hash as usize & self.index_mask,
            (hash >> 32) as usize & self.index_mask,
        ]
    }

    /// `hash` is `key.hash64()`, computed once per packet by the caller.
    pub fn lookup(&self, key: &PacketKey, hash: u64) -> Option<MegaflowId> {
        if !self.is_enabled() {
            return None;
        }
        self.candidates(hash)
            .into_iter()
            .find_map(|slot| match &self.slots[slot] {
                Some(entry) if entry.key == *key => Some(entry.megaflow),
                _ => None,
            })
    }

    /// Caches `flow → megaflow`, in a free candidate slot or else over the second one.
    pub fn insert(&mut self, key: &PacketKey, hash: u64, megaflow: MegaflowId) {
        if !self.is_enabled() {
            return;
        }
        let [first, second] = self.candidates(hash);
        let slot = if self.slots[first].is_none_or(|entry| entry.key == *key) {
            first
        } else {
            second
        };
        self.slots[slot] = Some(EmcEntry {
            key: *key,
            megaflow,
        });
    }

    pub fn clear(&mut self) {
        self.slots.fill(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::PACKET_WORDS;

    #[test]
    fn hit_miss_and_clear() {
        let mut emc = ExactMatchCache::new(4);
        let mut flow = PacketKey([0; PACKET_WORDS]);
        flow.0[3] = 42;
        let hash = flow.hash64();
        assert_eq!(emc.lookup(&flow, hash), None);
        emc.insert(&flow, hash, MegaflowId(7));
        assert_eq!(emc.lookup(&flow, hash), Some(MegaflowId(7)));
        let mut other = flow;
        other.0[9] = 1;
        assert_eq!(emc.lookup(&other, hash), None, "same slots, different flow");
        emc.clear();
        assert_eq!(emc.lookup(&flow, hash), None);
    }

    #[test]
    fn disabled_cache_never_hits() {
        let mut emc = ExactMatchCache::new(0);
        let key = PacketKey([0; PACKET_WORDS]);
        emc.insert(&key, 0, MegaflowId(1));
        assert_eq!(emc.lookup(&key, 0), None);
    }
}
