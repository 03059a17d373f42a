//! The fast path's entries fall in [`CLASSES`] classes by a hash of their key, so that a rule
//! change stops the kernel forwarding on the classes of the entries it touches (their
//! packets go to user space meanwhile) and leaves the others forwarding.

use super::FastKey;

/// How many classes (FP_CLASSES in bpf/switch_fast_path.c): the bits of one word.
pub const CLASSES: u32 = 64;

/// The class of the entry for `key`: FNV-1a over its bytes, so the same key always falls in
/// the same class and keys that differ in one field spread over all of them.
pub fn class_of(key: &FastKey) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for &byte in key {
        hash = (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193);
    }
    (hash ^ (hash >> 16)) % CLASSES
}

/// A set of classes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Classes(u64);

impl Classes {
    pub const NONE: Classes = Classes(0);
    pub const ALL: Classes = Classes(u64::MAX);

    /// The classes of the entries for `keys`.
    pub fn of<'a>(keys: impl IntoIterator<Item = &'a FastKey>) -> Classes {
        Classes(
            keys.into_iter()
                .fold(0, |bits, key| bits | 1 << class_of(key)),
        )
    }

    pub fn contains(self, key: &FastKey) -> bool {
        self.0 >> class_of(key) & 1 == 1
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn union(self, other: Classes) -> Classes {
        Classes(self.0 | other.0)
    }

    /// Those of `self` not in `other`.
    pub fn minus(self, other: Classes) -> Classes {
        Classes(self.0 & !other.0)
    }

    /// How many classes.
    pub fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// The word the program reads (bit c for class c).
    pub(super) fn bits(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(host: u8) -> FastKey {
        let mut key = [0; 36];
        key[27] = host;
        key
    }

    #[test]
    fn keys_spread_over_every_class() {
        let all = Classes::of((0..=255).map(key).collect::<Vec<_>>().iter());
        assert_eq!(all, Classes::ALL);
        // No class takes much more than its share of 256 keys (4).
        let mut sizes = [0; CLASSES as usize];
        for host in 0..=255 {
            sizes[class_of(&key(host)) as usize] += 1;
        }
        assert!(sizes.iter().all(|&n| n <= 12), "{sizes:?}");
    }

    #[test]
    fn sets_of_classes() {
        let (a, b) = (key(1), key(2));
        assert_ne!(class_of(&a), class_of(&b));
        let one = Classes::of([&a]);
        let both = Classes::of([&a, &b]);
        assert!(one.contains(&a) && !one.contains(&b));
        assert_eq!((one.len(), both.len(), Classes::ALL.len()), (1, 2, 64));
        assert_eq!(both.minus(one), Classes::of([&b]));
        assert_eq!(one.union(Classes::of([&b])), both);
        assert!(Classes::NONE.is_empty() && both.minus(both).is_empty());
        assert_eq!(both.bits(), 1 << class_of(&a) | 1 << class_of(&b));
    }
}
