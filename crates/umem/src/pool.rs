//! The per-queue frame pool: a LIFO array of free frame addresses with one owner and no lock
//! (OVS-AFXDP's measured choice: a LIFO pointer array beats a ring or a linked list, and the
//! most recently freed frame is the one still in cache).

/// Free frames of one queue, most recently freed on top.
#[derive(Debug)]
pub struct FramePool {
    free: Vec<u64>,
    capacity: usize,
}

impl FramePool {
    /// A pool holding the given frames; it can never hold more than that many.
    pub fn new(frames: impl IntoIterator<Item = u64>) -> FramePool {
        let free: Vec<u64> = frames.into_iter().collect();
        let capacity = free.len();
        FramePool { free, capacity }
    }

    /// An empty pool able to hold `capacity` frames (for a queue that receives its frames
    /// from another pool).
    pub fn with_capacity(capacity: usize) -> FramePool {
        FramePool {
            free: Vec::with_capacity(capacity),
            capacity,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.free.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.free.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    #[inline]
    pub fn alloc(&mut self) -> Option<u64> {
        self.free.pop()
    }

    /// Returns a frame. A pool never grows past its capacity (that would mean a frame was
    /// freed twice): such a frame is refused and false returned, so the caller can count it.
    #[inline]
    pub fn free(&mut self, addr: u64) -> bool {
        if self.free.len() == self.capacity {
            return false;
        }
        self.free.push(addr);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lifo_order_and_capacity() {
        let mut p = FramePool::new([0, 4096, 8192]);
        assert_eq!(p.alloc(), Some(8192));
        assert!(p.free(8192));
        assert!(!p.free(12288), "a full pool refuses a fourth frame");
        assert_eq!(p.alloc(), Some(8192));
        assert_eq!(p.alloc(), Some(4096));
        assert_eq!(p.alloc(), Some(0));
        assert_eq!(p.alloc(), None);
    }

    proptest! {
        #[test]
        fn frames_are_conserved(ops in prop::collection::vec(any::<bool>(), 0..500)) {
            let total = 16u64;
            let mut p = FramePool::new((0..total).map(|i| i * 2048));
            let mut held = Vec::new();
            for alloc in ops {
                if alloc {
                    if let Some(a) = p.alloc() { held.push(a) }
                } else if let Some(a) = held.pop() {
                    prop_assert!(p.free(a));
                }
                prop_assert_eq!(p.len() + held.len(), total as usize);
            }
            let mut all: Vec<u64> = held;
            while let Some(a) = p.alloc() { all.push(a) }
            all.sort();
            prop_assert_eq!(all, (0..total).map(|i| i * 2048).collect::<Vec<_>>());
        }
    }
}
