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
    /// The backend put back the 802.1Q tag (bytes 12..16) that the kernel had taken out of
    /// the packet into its metadata (AF_PACKET): a filter that runs as the kernel's does sees
    /// the packet without it, and the tag as metadata.
    pub vlan_restored: bool,
}

/// A fixed-capacity burst of packets. Allocated once; the hot path only pushes and clears.
///
/// A packet larger than a frame (AF_XDP multi-buffer) is a chain: its slot holds the head
/// segment, and `more(i)` continuation segments wait in a tail array shared by the batch.
/// `addr`, `frame_len` and `iter` see head segments only, so code that never asks for
/// chains (a port opened without `PortOptions::multi_buffer` never delivers one) runs as
/// before; code that takes chains reads `packet_len` and `segments`.
#[derive(Debug)]
pub struct Batch {
    addrs: Box<[u64]>,
    lens: Box<[u32]>,
    meta: Box<[RxMeta]>,
    /// Continuation segments after each slot's head (0: the packet is one frame).
    more: Box<[u8]>,
    /// Where each chain's continuation segments start in `tails`.
    tail_at: Box<[u16]>,
    tails: Box<[(u64, u32)]>,
    tail_count: usize,
    count: usize,
}

/// Tail segments a batch holds for each packet slot: room for a full batch of 9000-byte
/// packets in 2048-byte frames (5 tails each).
const TAILS_PER_SLOT: usize = 5;

/// Room for at least one longest chain; no more than a u16 `tail_at` can index.
fn tail_capacity(slots: usize) -> usize {
    (slots * TAILS_PER_SLOT)
        .max(crate::MAX_SEGMENTS)
        .min(u16::MAX as usize)
}

impl Batch {
    /// A batch that holds at most `capacity` packets.
    pub fn with_capacity(capacity: usize) -> Batch {
        Batch {
            addrs: vec![0; capacity].into_boxed_slice(),
            lens: vec![0; capacity].into_boxed_slice(),
            meta: vec![RxMeta::default(); capacity].into_boxed_slice(),
            more: vec![0; capacity].into_boxed_slice(),
            tail_at: vec![0; capacity].into_boxed_slice(),
            tails: vec![(0, 0); tail_capacity(capacity)].into_boxed_slice(),
            tail_count: 0,
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
        self.tail_count = 0;
    }

    /// Continuation segments the batch still has room for.
    pub fn tail_room(&self) -> usize {
        self.tails.len() - self.tail_count
    }

    /// True when some packet held is a chain of several frames.
    #[inline]
    pub fn has_chains(&self) -> bool {
        self.tail_count > 0
    }

    /// Frames the packets held occupy: one a packet plus every continuation segment.
    #[inline]
    pub fn frames(&self) -> usize {
        self.count + self.tail_count
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
        self.more[self.count] = 0;
        self.count += 1;
        true
    }

    /// Appends a packet of several segments, head first; false (and nothing appended) when
    /// the batch has no slot or no tail room for it, or `segments` is empty or longer than
    /// `MAX_SEGMENTS`.
    pub fn push_chain(&mut self, segments: &[(u64, u32)]) -> bool {
        let Some((&(addr, len), tails)) = segments.split_first() else {
            return false;
        };
        if tails.len() > self.tail_room() || segments.len() > crate::MAX_SEGMENTS {
            return false;
        }
        if !self.push(addr, len) {
            return false;
        }
        let slot = self.count - 1;
        self.more[slot] = tails.len() as u8;
        self.tail_at[slot] = self.tail_count as u16;
        self.tails[self.tail_count..self.tail_count + tails.len()].copy_from_slice(tails);
        self.tail_count += tails.len();
        true
    }

    /// Continuation segments of slot `i` (0 when its packet is one frame).
    #[inline]
    pub fn more(&self, i: usize) -> usize {
        self.more[..self.count][i] as usize
    }

    /// The continuation segments of slot `i`, in order (empty for a one-frame packet).
    #[inline]
    pub fn tails(&self, i: usize) -> &[(u64, u32)] {
        match self.more(i) {
            0 => &[],
            n => {
                let at = self.tail_at[i] as usize;
                &self.tails[at..at + n]
            }
        }
    }

    /// Every segment of slot `i`'s packet, head first.
    #[inline]
    pub fn segments(&self, i: usize) -> impl Iterator<Item = (u64, u32)> + '_ {
        std::iter::once((self.addr(i), self.frame_len(i))).chain(self.tails(i).iter().copied())
    }

    /// The whole length of slot `i`'s packet, every segment counted.
    #[inline]
    pub fn packet_len(&self, i: usize) -> u32 {
        let head = self.frame_len(i);
        match self.more[i] {
            0 => head,
            _ => head + self.tails(i).iter().map(|&(_, len)| len).sum::<u32>(),
        }
    }

    /// The length of a continuation segment of slot `i` (for a sender that trims a chain).
    pub fn set_tail_len(&mut self, i: usize, tail: usize, len: u32) {
        assert!(tail < self.more(i), "slot {i} has no tail segment {tail}");
        self.tails[self.tail_at[i] as usize + tail].1 = len;
    }

    /// Every frame the packets held occupy (heads and tails), for giving them back.
    pub fn all_frames(&self) -> impl Iterator<Item = u64> + '_ {
        self.addrs[..self.count]
            .iter()
            .copied()
            .chain(self.tails[..self.tail_count].iter().map(|&(addr, _)| addr))
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

    /// Sets the receive metadata of slot `i` (a chain's, pushed with `push_chain`).
    #[inline]
    pub fn set_meta(&mut self, i: usize, meta: RxMeta) {
        self.meta[..self.count][i] = meta;
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
        if self.tail_count > 0 {
            let gone: usize = self.more[..n].iter().map(|&m| m as usize).sum();
            self.tails.copy_within(gone..self.tail_count, 0);
            self.tail_count -= gone;
            for at in &mut self.tail_at[n..self.count] {
                *at = at.saturating_sub(gone as u16);
            }
            self.tail_at.copy_within(n..self.count, 0);
        }
        self.addrs.copy_within(n..self.count, 0);
        self.lens.copy_within(n..self.count, 0);
        self.meta.copy_within(n..self.count, 0);
        self.more.copy_within(n..self.count, 0);
        self.count -= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_keep_their_tails_through_consume_front() {
        let mut b = Batch::with_capacity(4);
        assert!(b.push(1, 60));
        assert!(b.push_chain(&[(2, 3840), (3, 3840), (4, 1334)]));
        assert!(b.push_chain(&[(5, 100), (6, 7)]));
        assert!(b.push(7, 64));
        assert_eq!((b.len(), b.frames(), b.has_chains()), (4, 7, true));
        assert_eq!(b.packet_len(1), 3840 * 2 + 1334);
        assert_eq!(b.frame_len(1), 3840, "frame_len is the head segment");
        assert_eq!(
            b.iter().map(|(a, _)| a).collect::<Vec<_>>(),
            vec![1, 2, 5, 7]
        );
        let mut frames: Vec<u64> = b.all_frames().collect();
        frames.sort();
        assert_eq!(frames, (1..=7).collect::<Vec<_>>());
        b.consume_front(2);
        assert_eq!(b.segments(0).collect::<Vec<_>>(), vec![(5, 100), (6, 7)]);
        assert_eq!(b.segments(1).collect::<Vec<_>>(), vec![(7, 64)]);
        assert_eq!(b.frames(), 3);
        b.clear();
        assert!(!b.has_chains());
    }

    proptest::proptest! {
        /// Chains pushed, consumed from the front and cleared in any order: the frames held
        /// are always exactly those pushed and not yet consumed, each once, in order.
        #[test]
        fn every_frame_is_held_once_through_any_pushes_and_consumes(
            steps in proptest::collection::vec((0usize..20, 0usize..4), 1..60)
        ) {
            let mut b = Batch::with_capacity(8);
            let mut model: std::collections::VecDeque<Vec<u64>> = Default::default();
            let mut next = 0u64;
            for (segments, consume) in steps {
                let segs: Vec<(u64, u32)> =
                    (0..=segments as u64).map(|k| (next + k, 1 + k as u32)).collect();
                if b.push_chain(&segs) {
                    model.push_back(segs.iter().map(|s| s.0).collect());
                    next += segs.len() as u64;
                }
                b.consume_front(consume);
                for _ in 0..consume.min(model.len()) {
                    model.pop_front();
                }
                let held: Vec<u64> = (0..b.len()).flat_map(|i| b.segments(i).map(|s| s.0)).collect();
                let want: Vec<u64> = model.iter().flatten().copied().collect();
                proptest::prop_assert_eq!(&held, &want);
                proptest::prop_assert_eq!(b.frames(), want.len());
                let mut all: Vec<u64> = b.all_frames().collect();
                all.sort();
                let mut sorted = want.clone();
                sorted.sort();
                proptest::prop_assert_eq!(all, sorted);
                for i in 0..b.len() {
                    let lens: u32 = b.segments(i).map(|s| s.1).sum();
                    proptest::prop_assert_eq!(b.packet_len(i), lens);
                }
            }
        }
    }

    #[test]
    fn a_chain_needs_a_slot_and_tail_room() {
        let mut b = Batch::with_capacity(1);
        let long: Vec<(u64, u32)> = (0..crate::MAX_SEGMENTS as u64 + 1)
            .map(|a| (a, 1))
            .collect();
        assert!(!b.push_chain(&long), "longer than any packet");
        assert!(!b.push_chain(&[]));
        assert!(b.push_chain(&long[..crate::MAX_SEGMENTS]));
        assert!(!b.push_chain(&[(1, 1), (2, 2)]), "no slot left");
        assert_eq!(b.frames(), crate::MAX_SEGMENTS);
    }

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
            vlan_restored: true,
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
