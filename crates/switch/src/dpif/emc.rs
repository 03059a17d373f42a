//! The exact-match cache: full flow → megaflow, in fixed arrays sized once (OVS's EMC: 8192
//! entries, two candidate slots per hash). A hit costs one hash, a check of 32 bits of it and
//! one 80-byte compare (the [`PacketKey`]).
//!
//! The slots' hash checks and megaflows live apart from their keys, 8 bytes a slot (64 KiB
//! for the default size), and a slot's two candidates are neighbours: a lookup reads one
//! cache line of checks, and a key only where its check matches. With more flows than
//! slots nearly every lookup misses, and a miss then costs that one line (it fits in the
//! core's L2), not two of the 80-byte keys.

use crate::dpif::megaflow::MegaflowId;
use crate::field::{PACKET_WORDS, PacketKey, words_equal};

pub const DEFAULT_EMC_ENTRIES: usize = 8192;

/// No megaflow: the slot is free.
const FREE: u32 = u32::MAX;

/// A slot's bits of its key's hash and its megaflow ([`FREE`] if none).
#[derive(Clone, Copy)]
struct EmcSlot {
    check: u32,
    megaflow: u32,
}

const FREE_SLOT: EmcSlot = EmcSlot {
    check: 0,
    megaflow: FREE,
};

pub struct ExactMatchCache {
    slots: Vec<EmcSlot>,
    /// The key of each slot (stale where the slot is free).
    keys: Vec<PacketKey>,
    /// `slots.len() - 1`; the length is a power of two.
    index_mask: usize,
}

impl ExactMatchCache {
    /// A cache of `entries` slots (rounded up to a power of two, at least two); 0 disables
    /// it.
    pub fn new(entries: usize) -> ExactMatchCache {
        let len = if entries == 0 {
            0
        } else {
            entries.next_power_of_two().max(2)
        };
        ExactMatchCache {
            slots: vec![FREE_SLOT; len],
            keys: vec![PacketKey([0; PACKET_WORDS]); len],
            index_mask: len.saturating_sub(1),
        }
    }

    pub fn is_enabled(&self) -> bool {
        !self.slots.is_empty()
    }

    /// The two neighbouring slots for `hash`, and the check their entries for it carry (hash
    /// bits the index does not use).
    #[inline]
    fn candidates(&self, hash: u64) -> ([usize; 2], u32) {
        let first = hash as usize & self.index_mask;
        ([first, first ^ 1], (hash >> 32) as u32)
    }

    /// `key` is a [`PacketKey`]'s words (an arriving flow's, in place) and `hash` their
    /// [`hash_packet_words`](crate::field::hash_packet_words), computed once per packet by the caller.
    #[inline]
    pub fn lookup(&self, key: &[u64; PACKET_WORDS], hash: u64) -> Option<MegaflowId> {
        if !self.is_enabled() {
            return None;
        }
        let (candidates, check) = self.candidates(hash);
        candidates.into_iter().find_map(|i| {
            let slot = self.slots[i];
            (slot.megaflow != FREE && slot.check == check && words_equal(&self.keys[i].0, key))
                .then_some(MegaflowId(slot.megaflow))
        })
    }

    /// Caches `flow → megaflow`, in a free candidate slot or else over the second one.
    pub fn insert(&mut self, key: &PacketKey, hash: u64, megaflow: MegaflowId) {
        if !self.is_enabled() {
            return;
        }
        let ([first, second], check) = self.candidates(hash);
        let slot = self.slots[first];
        let i = if slot.megaflow == FREE || (slot.check == check && self.keys[first] == *key) {
            first
        } else {
            second
        };
        self.slots[i] = EmcSlot {
            check,
            megaflow: megaflow.0,
        };
        self.keys[i] = *key;
    }

    pub fn clear(&mut self) {
        self.slots.fill(FREE_SLOT);
    }

    /// Points each entry at its megaflow's new id (`moved[old]`), and frees those whose
    /// megaflow went (None), after [`crate::dpif::megaflow::MegaflowCache::remove_where`].
    pub fn remap(&mut self, moved: &[Option<MegaflowId>]) {
        for slot in &mut self.slots {
            if slot.megaflow == FREE {
                continue;
            }
            *slot = match moved.get(slot.megaflow as usize).copied().flatten() {
                Some(id) => EmcSlot {
                    check: slot.check,
                    megaflow: id.0,
                },
                None => FREE_SLOT,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hit_miss_and_clear() {
        let mut emc = ExactMatchCache::new(4);
        let mut flow = PacketKey([0; PACKET_WORDS]);
        flow.0[3] = 42;
        let hash = flow.hash64();
        assert_eq!(emc.lookup(&flow.0, hash), None);
        emc.insert(&flow, hash, MegaflowId(7));
        assert_eq!(emc.lookup(&flow.0, hash), Some(MegaflowId(7)));
        let mut other = flow;
        other.0[9] = 1;
        assert_eq!(
            emc.lookup(&other.0, hash),
            None,
            "same slots, different flow"
        );
        emc.clear();
        assert_eq!(emc.lookup(&flow.0, hash), None);
    }

    #[test]
    fn disabled_cache_never_hits() {
        let mut emc = ExactMatchCache::new(0);
        let key = PacketKey([0; PACKET_WORDS]);
        emc.insert(&key, 0, MegaflowId(1));
        assert_eq!(emc.lookup(&key.0, 0), None);
    }
}
