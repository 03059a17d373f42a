//! A binary trie of the address prefixes a table's rules match on one field (OVS's classifier
//! tries): it tells a lookup which prefix lengths can match a flow's address, and how few of
//! the address's leading bits prove it, so a megaflow need not pin the whole address.
//!
//! Example: rules on `nw_dst=172.16.0.0/16` and `nw_dst=172.16.5.0/24`; a flow to 10.1.2.3
//! leaves the trie at its first bit, so "no /16 or /24 rule matches" needs only that bit.

/// What a walk of the trie along one address found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PrefixMatch {
    /// Bit `n` set: some rule's prefix of length `n` matches the address.
    pub lengths: u128,
    /// Leading bits of the address that decided `lengths` (the walk stopped after them).
    pub checked_bits: u32,
    /// Set when a rule's prefix covers the whole width (length = width, bit 128 for IPv6).
    pub full_length: bool,
}

impl PrefixMatch {
    pub fn has_length(&self, length: u32, width: u32) -> bool {
        if length == width {
            self.full_length
        } else {
            self.lengths & (1u128 << length) != 0
        }
    }
}

#[derive(Clone, Copy, Default)]
struct Node {
    children: [Option<u32>; 2],
    /// Prefixes ending at this node.
    ends: u32,
    /// Prefixes ending at or below this node (0: the node is dead).
    below: u32,
}

/// The prefixes of one field of width `width` (32 or 128), most significant bit first.
pub struct PrefixTrie {
    width: u32,
    nodes: Vec<Node>,
}

impl PrefixTrie {
    pub fn new(width: u32) -> PrefixTrie {
        PrefixTrie {
            width,
            nodes: vec![Node::default()],
        }
    }

    fn bit(&self, value: u128, depth: u32) -> usize {
        ((value >> (self.width - 1 - depth)) & 1) as usize
    }

    /// Adds the prefix of `length` leading bits of `value`.
    pub fn insert(&mut self, value: u128, length: u32) {
        let mut node = 0usize;
        self.nodes[node].below += 1;
        for depth in 0..length {
            let bit = self.bit(value, depth);
            let child = match self.nodes[node].children[bit] {
                Some(child) => child as usize,
                None => {
                    self.nodes.push(Node::default());
                    let child = self.nodes.len() - 1;
                    self.nodes[node].children[bit] = Some(child as u32);
                    child
                }
            };
            node = child;
            self.nodes[node].below += 1;
        }
        self.nodes[node].ends += 1;
    }

    /// Removes one prefix added by [`Self::insert`] (dead nodes stay, unreachable by walks).
    pub fn remove(&mut self, value: u128, length: u32) {
        let mut node = 0usize;
        self.nodes[node].below -= 1;
        for depth in 0..length {
            let bit = self.bit(value, depth);
            let Some(child) = self.nodes[node].children[bit] else {
                return;
            };
            node = child as usize;
            self.nodes[node].below -= 1;
        }
        self.nodes[node].ends -= 1;
    }

    /// Walks along `value`: which prefix lengths match it, and how many bits that took.
    pub fn lookup(&self, value: u128) -> PrefixMatch {
        let mut found = PrefixMatch {
            lengths: 0,
            checked_bits: 0,
            full_length: false,
        };
        let mut node = 0usize;
        for depth in 0..=self.width {
            if self.nodes[node].ends > 0 {
                if depth == self.width {
                    found.full_length = true;
                } else {
                    found.lengths |= 1u128 << depth;
                }
            }
            if depth == self.width {
                found.checked_bits = self.width;
                break;
            }
            let live_child = self.nodes[node].children[self.bit(value, depth)]
                .filter(|&child| self.nodes[child as usize].below > 0);
            match live_child {
                Some(child) => node = child as usize,
                None => {
                    // Bit `depth` is where the address leaves every longer prefix.
                    found.checked_bits = depth + 1;
                    break;
                }
            }
        }
        found
    }
}

/// The length of `mask` as a prefix of a `width`-bit field; None if it is not a prefix.
pub fn prefix_length(mask: u128, width: u32) -> Option<u32> {
    let full = if width == 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    let host = !mask & full;
    (mask & !full == 0 && host & host.wrapping_add(1) == 0).then(|| width - host.count_ones())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NET_172_16: u128 = 0xac10_0000;

    #[test]
    fn lengths_and_checked_bits() {
        let mut trie = PrefixTrie::new(32);
        trie.insert(NET_172_16, 16);
        trie.insert(0xac10_0500, 24);
        let inside = trie.lookup(0xac10_0501);
        assert!(inside.has_length(16, 32) && inside.has_length(24, 32));
        assert!(!inside.has_length(8, 32));
        assert_eq!(inside.checked_bits, 25);
        let other = trie.lookup(0x0a01_0203);
        assert_eq!(other.lengths, 0);
        assert_eq!(
            other.checked_bits, 1,
            "10.x differs from 172.x in the first bit"
        );
        let sibling = trie.lookup(0xac10_0601);
        assert!(sibling.has_length(16, 32) && !sibling.has_length(24, 32));
        // 6 = 0b110 leaves 5 = 0b101 at bit 6 of the third octet, bit 22 of the address.
        assert_eq!(sibling.checked_bits, 23);
    }

    #[test]
    fn full_length_and_default_route() {
        let mut trie = PrefixTrie::new(32);
        trie.insert(0x0a00_0001, 32);
        trie.insert(0, 0);
        let hit = trie.lookup(0x0a00_0001);
        assert!(hit.full_length && hit.has_length(0, 32));
        assert_eq!(hit.checked_bits, 32);
        assert!(!trie.lookup(0x0a00_0002).full_length);
    }

    #[test]
    fn removed_prefixes_stop_matching_and_stop_the_walk() {
        let mut trie = PrefixTrie::new(32);
        trie.insert(NET_172_16, 16);
        trie.remove(NET_172_16, 16);
        let walk = trie.lookup(NET_172_16);
        assert_eq!((walk.lengths, walk.checked_bits), (0, 1));
    }

    #[test]
    fn prefix_lengths() {
        assert_eq!(prefix_length(0xffff_ff00, 32), Some(24));
        assert_eq!(prefix_length(0xffff_ffff, 32), Some(32));
        assert_eq!(prefix_length(0, 32), Some(0));
        assert_eq!(prefix_length(0xff00_ff00, 32), None);
        assert_eq!(prefix_length(u128::MAX << 64, 128), Some(64));
    }
}
