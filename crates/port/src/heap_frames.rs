//! Frames in a buffer of our own, for backends whose packets move by system calls or file I/O
//! rather than through memory shared with the kernel (tap, pcap). A frame's address is its
//! offset in the buffer, as in a UMEM.

use std::ops::Range;

use crate::{Batch, FrameAudit, PortOptions};

pub(crate) struct HeapFrames {
    bytes: Vec<u8>,
    frame_size: u32,
    /// Free frames, by index, the last freed on top (still in the caches).
    free: Vec<u32>,
    /// Frames handed out by `take` and not given back.
    held: u64,
}

impl HeapFrames {
    pub fn new(count: u32, frame_size: u32) -> HeapFrames {
        HeapFrames {
            bytes: vec![0; count as usize * frame_size as usize],
            frame_size,
            free: (0..count).rev().collect(),
            held: 0,
        }
    }

    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    /// A free frame's address; none when every frame is out.
    #[inline]
    pub fn take(&mut self) -> Option<u64> {
        let index = self.free.pop()?;
        self.held += 1;
        Some(u64::from(index) * u64::from(self.frame_size))
    }

    /// Returns a frame `take` gave; false (and nothing changes) if `addr` is not one of ours.
    #[inline]
    pub fn give_back(&mut self, addr: u64) -> bool {
        if self.range(addr, 0).is_none() {
            return false;
        }
        self.free.push((addr / u64::from(self.frame_size)) as u32);
        self.held -= 1;
        true
    }

    /// Appends up to `n` free frames of `len` bytes to `batch` (none if `len` does not fit
    /// a frame); returns how many.
    pub fn alloc(&mut self, batch: &mut Batch, n: usize, len: u32) -> usize {
        if len > self.frame_size {
            return 0;
        }
        let mut count = 0;
        while count < n && batch.room() > 0 {
            let Some(addr) = self.take() else { break };
            batch.push(addr, len);
            count += 1;
        }
        count
    }

    /// Appends up to `n` chains of frames holding `len` bytes each (at most `most` frames
    /// a chain); returns how many.
    pub fn alloc_chains(&mut self, batch: &mut Batch, n: usize, len: u32, most: usize) -> usize {
        let k = len.div_ceil(self.frame_size) as usize;
        if k > most {
            return 0;
        }
        let mut segs = [(0u64, 0u32); crate::MAX_SEGMENTS];
        let mut count = 0;
        while count < n && batch.room() > 0 && batch.tail_room() >= k - 1 && self.free.len() >= k {
            for (j, s) in segs[..k].iter_mut().enumerate() {
                let this = (len - j as u32 * self.frame_size).min(self.frame_size);
                *s = (self.take().unwrap_or_default(), this);
            }
            batch.push_chain(&segs[..k]);
            count += 1;
        }
        count
    }

    /// Gives back every frame of `batch` (every segment of a chain) and empties it.
    pub fn release(&mut self, batch: &mut Batch) {
        for addr in batch.all_frames() {
            self.give_back(addr);
        }
        batch.clear();
    }

    /// Frames free now.
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Every frame there is.
    pub fn count(&self) -> usize {
        self.bytes.len() / self.frame_size as usize
    }

    /// Where the `len` bytes of the frame at `addr` are, if `addr` names a frame of ours and
    /// `len` fits in it.
    #[inline]
    pub fn range(&self, addr: u64, len: u32) -> Option<Range<usize>> {
        let ours = addr.is_multiple_of(u64::from(self.frame_size))
            && addr < self.bytes.len() as u64
            && len <= self.frame_size;
        ours.then(|| addr as usize..addr as usize + len as usize)
    }

    /// The bytes of a packet; empty if `addr` or `len` is not ours.
    pub fn packet(&self, addr: u64, len: u32) -> &[u8] {
        self.range(addr, len).map_or(&[], |r| &self.bytes[r])
    }

    /// The bytes of a packet, writable; empty if `addr` or `len` is not ours.
    pub fn packet_mut(&mut self, addr: u64, len: u32) -> &mut [u8] {
        match self.range(addr, len) {
            Some(r) => &mut self.bytes[r],
            None => &mut [],
        }
    }

    /// Where every frame is: free, or with the application.
    pub fn audit(&self) -> FrameAudit {
        FrameAudit {
            total: self.bytes.len() as u64 / u64::from(self.frame_size),
            pool: self.free.len() as u64,
            application: self.held,
            ..FrameAudit::default()
        }
    }
}

/// Options that mean nothing to a backend on frames of its own (`backend` names it), said
/// once rather than ignored silently.
pub(crate) fn unused_option_notes(opts: &PortOptions, backend: &str) -> Vec<String> {
    let mut notes = Vec::new();
    if opts.hugepages {
        notes.push(format!("hugepages: not used by the {backend} backend"));
    }
    if opts.headroom != 0 {
        notes.push(format!("headroom: not used by the {backend} backend"));
    }
    if opts.busy_poll {
        notes.push(format!(
            "busy poll: the {backend} backend has nothing to busy-poll"
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_go_out_and_come_back_once() {
        let mut f = HeapFrames::new(2, 2048);
        let a = f.take().unwrap();
        let b = f.take().unwrap();
        assert_eq!((a, b), (0, 2048));
        assert_eq!(f.take(), None);
        assert_eq!((f.audit().pool, f.audit().application), (0, 2));
        f.packet_mut(b, 3).copy_from_slice(b"abc");
        assert_eq!(f.packet(b, 3), b"abc");
        assert!(!f.give_back(1), "not a frame's start");
        assert!(!f.give_back(4096), "past the buffer");
        assert!(f.give_back(b));
        assert!(f.audit().balanced());
        assert_eq!(f.take(), Some(b), "the last freed goes out first");
        assert!(f.range(a, 2049).is_none() && f.packet(a, 2049).is_empty());
    }
}
