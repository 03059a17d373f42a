//! A frame inside a larger buffer, with room in front (headroom) and behind (tailroom), so a
//! VLAN tag can be pushed by moving 12 bytes of addresses instead of the whole payload — the way
//! XDP frames keep `XDP_PACKET_HEADROOM` in front of the data.

/// The frame is `buffer[start..start + len]`. A packet larger than a UMEM frame (AF_XDP
/// multi-buffer) is the head segment here and `tail` more bytes in continuation segments the
/// datapath reads headers without: actions edit headers, which are all in the head.
#[derive(Debug)]
pub struct Frame<'a> {
    buffer: &'a mut [u8],
    start: usize,
    len: usize,
    tail: Tail,
}

/// The continuation segments of a packet, as far as a parse and a checksum need them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tail {
    /// Bytes after the head segment.
    pub len: usize,
    /// Their ones' complement sum (as if they started at an even offset), when the caller
    /// worked it out: only a packet whose transport checksum may need completing needs it.
    pub sum: Option<u16>,
}

impl<'a> Frame<'a> {
    /// None if `start + len` is past the buffer's end.
    pub fn new(buffer: &'a mut [u8], start: usize, len: usize) -> Option<Frame<'a>> {
        (start.checked_add(len)? <= buffer.len()).then_some(Frame {
            buffer,
            start,
            len,
            tail: Tail::default(),
        })
    }

    /// A frame filling the whole buffer (no room to grow).
    pub fn whole(buffer: &'a mut [u8]) -> Frame<'a> {
        let len = buffer.len();
        Frame {
            buffer,
            start: 0,
            len,
            tail: Tail::default(),
        }
    }

    /// The head segment of a longer packet, followed by `tail`.
    pub fn with_tail(mut self, tail: Tail) -> Frame<'a> {
        self.tail = tail;
        self
    }

    /// What follows the head segment (nothing for a packet of one frame).
    #[inline]
    pub fn tail(&self) -> Tail {
        self.tail
    }

    /// The whole packet's length: the head segment and its tail.
    #[inline]
    pub fn packet_len(&self) -> usize {
        self.len + self.tail.len
    }

    pub fn data(&self) -> &[u8] {
        &self.buffer[self.start..self.start + self.len]
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer[self.start..self.start + self.len]
    }

    /// Offset of the frame in the buffer (changes when headers are pushed or popped).
    pub fn start(&self) -> usize {
        self.start
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn headroom(&self) -> usize {
        self.start
    }

    pub fn tailroom(&self) -> usize {
        self.buffer.len() - self.start - self.len
    }

    /// Opens a gap of `size` zero bytes at `offset` in the frame, moving the bytes before it into
    /// the headroom, or if that is too small, the bytes after it into the tailroom. False (and
    /// nothing changed) if `offset` is past the end or there is room for neither.
    pub fn insert_gap(&mut self, offset: usize, size: usize) -> bool {
        if offset > self.len {
            return false;
        }
        if self.headroom() >= size {
            let from = self.start;
            self.buffer.copy_within(from..from + offset, from - size);
            self.start -= size;
        } else if self.tailroom() >= size {
            let at = self.start + offset;
            self.buffer
                .copy_within(at..self.start + self.len, at + size);
        } else {
            return false;
        }
        self.len += size;
        self.buffer[self.start + offset..self.start + offset + size].fill(0);
        true
    }

    /// Removes `size` bytes at `offset`, moving the bytes before them forward. False (and nothing
    /// changed) if the range is not inside the frame.
    pub fn remove_range(&mut self, offset: usize, size: usize) -> bool {
        if offset.checked_add(size).is_none_or(|end| end > self.len) {
            return false;
        }
        let from = self.start;
        self.buffer.copy_within(from..from + offset, from + size);
        self.start += size;
        self.len -= size;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gap_uses_headroom_first_then_tailroom() {
        let mut buffer = [0, 0, 1, 2, 3, 4, 9];
        let mut frame = Frame::new(&mut buffer, 2, 4).unwrap();
        assert_eq!((frame.headroom(), frame.tailroom()), (2, 1));
        assert!(frame.insert_gap(1, 2));
        assert_eq!(frame.data(), &[1, 0, 0, 2, 3, 4]);
        assert_eq!(frame.start(), 0);
        assert!(frame.insert_gap(6, 1), "at the end, into the tailroom");
        assert_eq!(frame.data(), &[1, 0, 0, 2, 3, 4, 0]);
        assert!(!frame.insert_gap(0, 1), "no room left");
        assert!(frame.remove_range(1, 2));
        assert_eq!(frame.data(), &[1, 2, 3, 4, 0]);
        assert_eq!(frame.start(), 2);
        assert!(!frame.remove_range(4, 2));
    }

    #[test]
    fn gap_in_the_middle_through_tailroom() {
        let mut buffer = [1, 2, 3, 0, 0];
        let mut frame = Frame::new(&mut buffer, 0, 3).unwrap();
        assert!(frame.insert_gap(1, 2));
        assert_eq!(frame.data(), &[1, 0, 0, 2, 3]);
        assert!(Frame::new(&mut [0u8; 4], 3, 2).is_none());
    }
}
