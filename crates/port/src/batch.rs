//! A burst of packets: frame handles and lengths in arrays of their own, indexed by slot.
//! The packet bytes stay in the port's buffer area (DESIGN rule 4: metadata out of the frames).

/// The default burst size (DESIGN rule 2).
pub const DEFAULT_BURST: usize = 64;

/// What a backend knows about a received packet besides its bytes, in an array of its own
/// indexed by slot (DESIGN rule 4). Zero means unknown: AF_XDP gives neither.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxMeta {
    /// Receive time, nanoseconds since the Unix epoch (AF_PACKET: the kernel's timestamp).
    pub ts_ns: u64,
    /// The packet's length on the wire, when the backend delivered fewer bytes than that.
    pub wire_len: u32,
    /// The interface sent this packet rather than received it (AF_PACKET capturing both
    /// directions: PACKET_OUTGOING).
    pub outgoing: bool,
}

/// A fixed-capacity burst of packets. Allocated once; the hot path only pushes and clears.
#[derive(Debug)]
pub struct Batch {
    addrs: Box<[u64]>,
    lens: Box<[u32]>,
    meta: Box<[RxMeta]>,
    count: usize,
}

impl Batch {
    /// A batch that holds at most `capacity` packets.
    pub fn with_capacity(capacity: usize) -> Batch {
        Batch {
            addrs: vec![0; capacity].into_boxed_slice(),
            lens: vec![0; capacity].into_boxed_slice(),
            meta: vec![RxMeta::default(); capacity].into_boxed_slice(),
            count: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.addrs.len()
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Free slots left.
    pub fn room(&self) -> usize {
        self.addrs.len() - self.count
    }

    pub fn clear(&mut self) {
        self.count = 0;
    }

    /// Appends a packet; false when the batch is full.
    #[inline]
    pub fn push(&mut self, addr: u64, len: u32) -> bool {
        if self.count == self.addrs.len() {
            return false;
        }
        self.addrs[self.count] = addr;
        self.lens[self.count] = len;
        self.meta[self.count] = RxMeta::default();
        self.count += 1;
        true
    }

    /// Appends a received packet with what the backend knows about it; false when full.
    #[inline]
    pub fn push_with_meta(&mut self, addr: u64, len: u32, meta: RxMeta) -> bool {
        if !self.push(addr, len) {
            return false;
        }
        self.meta[self.count - 1] = meta;
        true
    }

    /// The receive metadata of slot `i` (zeros where the backend knows nothing).
    #[inline]
    pub fn meta(&self, i: usize) -> RxMeta {
        self.meta[..self.count][i]
    }

    /// The frame handle of slot `i` (a backend-defined offset, never a pointer).
    #[inline]
    pub fn addr(&self, i: usize) -> u64 {
        self.addrs[..self.count][i]
    }

    /// The packet length of slot `i`.
    #[inline]
    pub fn frame_len(&self, i: usize) -> u32 {
        self.lens[..self.count][i]
    }

    #[inline]
    pub fn set_len(&mut self, i: usize, len: u32) {
        self.lens[..self.count][i] = len;
    }

    /// The handles and lengths of the packets held.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.addrs[..self.count]
            .iter()
            .copied()
            .zip(self.lens[..self.count].iter().copied())
    }

    /// Drops the first `n` packets, keeping the rest in order (used after a partial send).
    pub fn consume_front(&mut self, n: usize) {
        let n = n.min(self.count);
        self.addrs.copy_within(n..self.count, 0);
        self.lens.copy_within(n..self.count, 0);
        self.meta.copy_within(n..self.count, 0);
        self.count -= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_until_full_then_consume_front() {
        let mut b = Batch::with_capacity(3);
        assert!(b.push(10, 1));
        assert!(b.push(20, 2));
        assert!(b.push(30, 3));
        assert!(!b.push(40, 4));
        assert_eq!(b.len(), 3);
        b.consume_front(2);
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![(30, 3)]);
        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.room(), 3);
    }

    #[test]
    fn metadata_follows_its_slot() {
        let mut b = Batch::with_capacity(3);
        let meta = RxMeta {
            ts_ns: 5,
            wire_len: 1500,
            outgoing: true,
        };
        assert!(b.push_with_meta(10, 100, meta));
        assert!(b.push(20, 2));
        assert_eq!((b.meta(0), b.meta(1)), (meta, RxMeta::default()));
        b.clear();
        assert!(b.push(30, 3));
        assert_eq!(
            b.meta(0),
            RxMeta::default(),
            "a plain push clears old metadata"
        );
        assert!(b.push_with_meta(40, 4, meta));
        b.consume_front(1);
        assert_eq!(b.meta(0), meta);
    }
}
