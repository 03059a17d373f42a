//! The fill and RX positions of each queue's socket, shared with the spill program
//! (bpf/xsk_spill.c) through an mmap'd BPF array: the program sends a packet to the socket
//! only while the fill ring has frames and the RX ring has room, by these counts, and to its
//! spill ring otherwise. One entry a queue, two cache lines: user space writes the first as
//! it goes, the program the second (but for the set-up in `enable`).

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sys::{RingMap, map_ring};

/// `struct level` of bpf/xsk_spill.c: 16 u64 words.
const LEVEL_WORDS: usize = 16;
const FILL_GIVEN: usize = 0;
const RX_DONE: usize = 1;
const RING: usize = 2;
const RX_SIZE: usize = 8;
const REDIRECTED: usize = 9;
const SPILLED: usize = 10;
const SPILL_FULL: usize = 11;
const SEEN_FILL_GIVEN: usize = 12;
const SEEN_RX_DONE: usize = 13;

/// What the program counted for one queue.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SpillCounts {
    /// Packets sent on to the socket.
    pub redirected: u64,
    /// Packets written to the spill ring.
    pub spilled: u64,
    /// Packets the spill ring had no room for (lost).
    pub spill_full: u64,
}

/// The program's `levels` array, mapped.
pub struct SpillLevels {
    map: RingMap,
    queues: u32,
    _fd: OwnedFd,
}

impl SpillLevels {
    /// Maps the array `fd` (BPF_F_MMAPABLE, `queues` entries of `struct level`).
    pub fn map(fd: OwnedFd, queues: u32) -> io::Result<SpillLevels> {
        let len = (queues as usize * LEVEL_WORDS * 8).next_multiple_of(4096);
        let map = map_ring(&fd, len, 0)?;
        Ok(SpillLevels {
            map,
            queues,
            _fd: fd,
        })
    }

    fn word(&self, queue: u32, word: usize) -> &AtomicU64 {
        assert!(queue < self.queues, "queue {queue} beyond the levels array");
        let offset = (queue as usize * LEVEL_WORDS + word) * 8;
        // SAFETY: the offset is inside the mapping (checked above), 8-byte aligned (the
        // mapping is page-aligned), and the mapping lives as long as `self`; the program
        // reads and writes these words too, so they are only ever touched atomically here.
        unsafe { &*self.map.ptr.add(offset).cast::<AtomicU64>() }
    }

    /// Starts spilling for `queue` into the program's spill ring `ring` (that of the thread
    /// that owns the queue), whose socket (registered in the program's XSKMAP) has an RX
    /// ring of `rx_size` entries and has taken and been given nothing yet.
    pub fn enable(&self, queue: u32, rx_size: u32, fill_given: u64, ring: u32) {
        for (word, value) in [
            (RING, u64::from(ring)),
            (FILL_GIVEN, fill_given),
            (RX_DONE, 0),
            (SEEN_FILL_GIVEN, fill_given),
            (SEEN_RX_DONE, 0),
            (REDIRECTED, 0),
            (SPILLED, 0),
            (SPILL_FULL, 0),
            // Last: the program starts counting when it sees this.
            (RX_SIZE, rx_size as u64),
        ] {
            self.word(queue, word).store(value, Ordering::Release);
        }
    }

    /// Frames ever put in `queue`'s fill ring (after they are submitted there).
    #[inline]
    pub fn publish_fill(&self, queue: u32, fill_given: u64) {
        self.word(queue, FILL_GIVEN)
            .store(fill_given, Ordering::Release);
    }

    /// RX descriptors ever taken from `queue`'s socket, plus the redirects the kernel lost.
    #[inline]
    pub fn publish_rx(&self, queue: u32, rx_done: u64) {
        self.word(queue, RX_DONE).store(rx_done, Ordering::Release);
    }

    pub fn counts(&self, queue: u32) -> SpillCounts {
        SpillCounts {
            redirected: self.word(queue, REDIRECTED).load(Ordering::Acquire),
            spilled: self.word(queue, SPILLED).load(Ordering::Acquire),
            spill_full: self.word(queue, SPILL_FULL).load(Ordering::Acquire),
        }
    }
}
