//! The transmit ring of the packet backend: fixed frames handed out, queued and reclaimed in
//! ring order, with holes (frames given back unsent) closed before each kick.

use super::mmap::{RingMap, TX_DATA_OFFSET};
use crate::PortStats;

/// Transmit ring state. The kernel sends frames strictly in ring order from its own head, so
/// frames are handed out in ring order and holes (frames given back unsent) are filled before
/// each kick. Positions are free-running counters: tail <= kernel_head <= head <= tail + n.
pub(super) struct TxRing {
    /// Offset of the first frame in the mapping.
    start: usize,
    frame_size: usize,
    frames: Vec<TxFrame>,
    /// Oldest frame the kernel may still be sending.
    tail: u64,
    /// The kernel's `tx_ring.head`: the next frame it looks at for TP_STATUS_SEND_REQUEST.
    kernel_head: u64,
    /// Next frame to hand out.
    head: u64,
    /// Frames in `Queued`.
    pub(super) queued: usize,
    /// Some frame in kernel_head..head may be `Free` (a hole the kernel would stop at).
    pub(super) holes: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TxFrame {
    Free,
    /// Handed out by `alloc_tx`; the application fills it.
    App,
    /// TP_STATUS_SEND_REQUEST, not yet taken by the kernel.
    Queued,
    /// Taken by the kernel, waiting for TP_STATUS_AVAILABLE.
    InFlight,
}

impl TxRing {
    pub(super) fn new(start: usize, frame_size: usize, frame_nr: usize) -> TxRing {
        TxRing {
            start,
            frame_size,
            frames: vec![TxFrame::Free; frame_nr],
            tail: 0,
            kernel_head: 0,
            head: 0,
            queued: 0,
            holes: false,
        }
    }

    fn slot(&self, position: u64) -> usize {
        (position % self.frames.len() as u64) as usize
    }

    fn frame_offset(&self, slot: usize) -> usize {
        self.start + slot * self.frame_size
    }

    pub(super) fn data_offset(&self, slot: usize) -> usize {
        self.frame_offset(slot) + TX_DATA_OFFSET
    }

    /// The frame whose data starts at `addr`, if any.
    pub(super) fn slot_of(&self, addr: usize) -> Option<usize> {
        let rel = addr.checked_sub(self.start + TX_DATA_OFFSET)?;
        let slot = rel / self.frame_size;
        (rel % self.frame_size == 0 && slot < self.frames.len()).then_some(slot)
    }

    /// True when the application holds `slot` (handed out by `alloc_tx`, not yet sent).
    pub(super) fn app_holds(&self, slot: usize) -> bool {
        self.frames[slot] == TxFrame::App
    }

    /// Hands out the next frame in ring order, if the ring has room.
    pub(super) fn take_free(&mut self) -> Option<usize> {
        if self.head - self.tail >= self.frames.len() as u64 {
            return None;
        }
        let slot = self.slot(self.head);
        debug_assert_eq!(self.frames[slot], TxFrame::Free);
        self.frames[slot] = TxFrame::App;
        self.head += 1;
        Some(slot)
    }

    /// A handed-out frame comes back unsent: it becomes a hole until filled or trimmed.
    pub(super) fn give_back(&mut self, slot: usize) {
        self.frames[slot] = TxFrame::Free;
        self.holes = true;
    }

    pub(super) fn submit(&mut self, map: &RingMap, slot: usize, len: u32) -> bool {
        if !map.tx_submit(self.frame_offset(slot), len) {
            self.give_back(slot);
            return false;
        }
        self.frames[slot] = TxFrame::Queued;
        self.queued += 1;
        true
    }

    /// Pulls `head` back over trailing holes, so the next frames handed out close them.
    pub(super) fn trim_head(&mut self) {
        while self.head > self.kernel_head && self.frames[self.slot(self.head - 1)] == TxFrame::Free
        {
            self.head -= 1;
        }
    }

    /// True when the frame at the kernel's head is waiting to be sent.
    pub(super) fn kernel_can_take(&self) -> bool {
        self.kernel_head < self.head && self.frames[self.slot(self.kernel_head)] == TxFrame::Queued
    }

    /// Moves queued frames down into holes, keeping their order, so the kernel (which stops
    /// at the first frame not requesting send) finds them contiguous from its head. A frame
    /// the application still holds stops the kernel until it is sent or released.
    pub(super) fn fill_holes(&mut self, map: &mut RingMap, stats: &mut PortStats) {
        let mut lo = self.kernel_head;
        let mut hi = lo;
        while lo < self.head {
            match self.frames[self.slot(lo)] {
                TxFrame::Queued => lo += 1,
                TxFrame::Free => {
                    hi = hi.max(lo + 1);
                    while hi < self.head && self.frames[self.slot(hi)] != TxFrame::Queued {
                        hi += 1;
                    }
                    if hi == self.head {
                        break;
                    }
                    let (to, from) = (self.slot(lo), self.slot(hi));
                    if !self.move_frame(map, from, to) {
                        break;
                    }
                    stats.copies += 1;
                    lo += 1;
                    hi += 1;
                }
                TxFrame::App | TxFrame::InFlight => break,
            }
        }
        self.trim_head();
        self.holes = (lo..self.head).any(|p| self.frames[self.slot(p)] == TxFrame::Free);
    }

    fn move_frame(&mut self, map: &mut RingMap, from: usize, to: usize) -> bool {
        let Some(len) = map.tx_len(self.frame_offset(from)) else {
            return false;
        };
        let len = len.min((self.frame_size - TX_DATA_OFFSET) as u32);
        if !map.copy_within(self.data_offset(from), self.data_offset(to), len as usize)
            || !map.tx_submit(self.frame_offset(to), len)
        {
            return false;
        }
        map.tx_make_available(self.frame_offset(from));
        self.frames[to] = TxFrame::Queued;
        self.frames[from] = TxFrame::Free;
        true
    }

    /// After a kick: frames the kernel took move to `InFlight` (counted as sent). Returns true
    /// when the kernel rejected the frame at its head (counted in `tx_error`, now a hole).
    pub(super) fn account_kick(&mut self, map: &RingMap, stats: &mut PortStats) -> bool {
        while self.kernel_can_take() {
            let slot = self.slot(self.kernel_head);
            let frame = self.frame_offset(slot);
            let status = map.tx_status(frame).unwrap_or(libc::TP_STATUS_SEND_REQUEST);
            if status & libc::TP_STATUS_WRONG_FORMAT != 0 {
                stats.drops.tx_error += 1;
                map.tx_make_available(frame);
                self.frames[slot] = TxFrame::Free;
                self.queued -= 1;
                self.holes = true;
                return true;
            }
            if status & libc::TP_STATUS_SEND_REQUEST != 0 {
                break;
            }
            // SENDING, or AVAILABLE again: the kernel took it and moved its head on.
            self.frames[slot] = TxFrame::InFlight;
            self.queued -= 1;
            self.kernel_head += 1;
            stats.tx_packets += 1;
            stats.tx_bytes += u64::from(map.tx_len(frame).unwrap_or(0));
        }
        false
    }

    /// The interface went away: frames queued and not taken by the kernel never will be.
    /// They become free again; returns how many.
    pub(super) fn abandon(&mut self, map: &RingMap) -> u64 {
        let mut given_up = 0;
        for position in self.kernel_head..self.head {
            let slot = self.slot(position);
            if self.frames[slot] == TxFrame::Queued {
                map.tx_make_available(self.frame_offset(slot));
                self.frames[slot] = TxFrame::Free;
                given_up += 1;
            }
        }
        self.queued = 0;
        self.holes = given_up > 0;
        given_up
    }

    /// Frames the kernel has finished with become free again, in ring order.
    pub(super) fn reclaim(&mut self, map: &RingMap) {
        while self.tail < self.kernel_head {
            let slot = self.slot(self.tail);
            if busy(map.tx_status(self.frame_offset(slot))) {
                break;
            }
            self.frames[slot] = TxFrame::Free;
            self.tail += 1;
        }
    }

    pub(super) fn pending(&self, map: &RingMap) -> bool {
        self.queued > 0
            || (self.tail..self.kernel_head)
                .any(|p| busy(map.tx_status(self.frame_offset(self.slot(p)))))
    }
}

/// True while the kernel still owns a transmit frame.
fn busy(status: Option<u32>) -> bool {
    let owned =
        libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING | libc::TP_STATUS_WRONG_FORMAT;
    status.is_none_or(|s| s & owned != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_handles_name_frame_data_only() {
        let tx = TxRing::new(1 << 20, 2048, 4);
        assert_eq!(tx.slot_of((1 << 20) + 48), Some(0));
        assert_eq!(tx.slot_of((1 << 20) + 3 * 2048 + 48), Some(3));
        assert_eq!(tx.slot_of((1 << 20) + 4 * 2048 + 48), None);
        assert_eq!(tx.slot_of((1 << 20) + 49), None);
        assert_eq!(tx.slot_of(1 << 20), None);
    }

    #[test]
    fn trimming_closes_trailing_holes_only() {
        let mut tx = TxRing::new(0, 2048, 8);
        let slots: Vec<usize> = (0..4).filter_map(|_| tx.take_free()).collect();
        assert_eq!(slots, vec![0, 1, 2, 3]);
        tx.give_back(3);
        tx.give_back(1);
        tx.trim_head();
        assert_eq!(tx.head, 3);
        assert_eq!(tx.take_free(), Some(3));
    }
}
