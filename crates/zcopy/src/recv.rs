//! A TCP receiver with zero-copy receive (`TCP_ZEROCOPY_RECEIVE`) or ordinary copying reads.
//!
//! Zero-copy receive maps whole pages of payload into a window on the socket; the kernel
//! can do that only for payload that sits page-aligned in whole pages, which a sender produces
//! when each segment carries a multiple of 4096 bytes (`PAGE_MSS`). Anything else (a short
//! tail, segments of another size) is copied: into the copy buffer by the same call when it
//! is short, else by an ordinary recv(). `RecvStats` says how many bytes came each way.

use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::sys::{self, Window};
use crate::{ZcopyError, io_err};

/// The copy buffer offered to TCP_ZEROCOPY_RECEIVE: under a page.
const SMALL_COPY: usize = 4095;
/// One wait's poll timeout: how often a stop request is noticed.
const POLL_MS: u16 = 100;

/// What a receiver did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RecvStats {
    /// Bytes received in all.
    pub bytes: u64,
    /// Bytes that came as pages mapped into the window (no copy).
    pub mapped: u64,
    /// Bytes copied (by the zero-copy call's copy buffer or by recv()).
    pub copied: u64,
    /// TCP_ZEROCOPY_RECEIVE calls, and recv() calls.
    pub zc_calls: u64,
    pub recv_calls: u64,
}

/// Received bytes, as they came.
#[derive(Debug, PartialEq, Eq)]
pub enum Chunk<'a> {
    /// Pages the kernel mapped: valid until the next call.
    Mapped(&'a [u8]),
    /// Bytes copied into the receiver's buffer.
    Copied(&'a [u8]),
    /// Nothing within the poll interval (the stream is still open).
    Idle,
}

/// A receiver on a connected TCP socket.
pub struct Receiver {
    stream: TcpStream,
    window: Option<Window>,
    copybuf: Vec<u8>,
    /// Bytes of copybuf the last zero-copy call filled, not yet handed out.
    pending_copy: usize,
    /// Bytes at the head of the queue the kernel said it cannot map, for recv().
    unmappable: usize,
    stats: RecvStats,
    stop: Arc<AtomicBool>,
}

impl Receiver {
    /// A receiver; `window` bytes (rounded up to whole pages) of zero-copy window, or none
    /// for ordinary reads. `copy` is the size of the copy buffer.
    pub fn new(
        stream: TcpStream,
        window: Option<usize>,
        copy: usize,
        stop: Arc<AtomicBool>,
    ) -> Result<Receiver, ZcopyError> {
        if copy == 0 || copy > 16 << 20 {
            return Err(ZcopyError::BufferSize(copy));
        }
        stream
            .set_read_timeout(Some(std::time::Duration::from_millis(u64::from(POLL_MS))))
            .map_err(io_err("set the receive timeout"))?;
        let window = match window {
            Some(len) => {
                if len == 0 || len > 1 << 30 {
                    return Err(ZcopyError::BufferSize(len));
                }
                let len = len.div_ceil(4096) * 4096;
                // Wake when a quarter of the window is queued, not at the first segment: one
                // call then maps many pages (a stream's end and the poll timeout still wake).
                let lowat = (len / 4).min(i32::MAX as usize) as i32;
                sys::set_int_opt(
                    stream.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_RCVLOWAT,
                    lowat,
                )
                .map_err(io_err("setsockopt(SO_RCVLOWAT)"))?;
                Some(
                    Window::reserve(stream.as_raw_fd(), len)
                        .map_err(io_err("mmap on the TCP socket"))?,
                )
            }
            None => None,
        };
        Ok(Receiver {
            stream,
            window,
            copybuf: vec![0; copy],
            pending_copy: 0,
            unmappable: 0,
            stats: RecvStats::default(),
            stop,
        })
    }

    /// The next received bytes; `None` at the end of the stream.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk<'_>>, ZcopyError> {
        // Bytes received and counted are handed over first.
        if self.pending_copy > 0 {
            let n = std::mem::take(&mut self.pending_copy);
            return Ok(Some(Chunk::Copied(&self.copybuf[..n])));
        }
        // Asked before every receive, not only when the stream goes quiet: a sender faster
        // than the receiver would otherwise keep a stop from being seen at all.
        if self.stop.load(Ordering::Relaxed) {
            return Err(ZcopyError::Stopped);
        }
        if self.unmappable > 0 {
            let n = std::mem::take(&mut self.unmappable).min(self.copybuf.len());
            return self.recv_copy(n);
        }
        let fd = self.stream.as_raw_fd();
        let Some(window) = self.window.as_mut() else {
            // A blocking recv() (a poll first would cost a system call per read); the
            // socket's receive timeout brings it back to notice a stop.
            let want = self.copybuf.len();
            return self.recv_copy(want);
        };
        // The kernel copies everything queued when it all fits the copy buffer: offer it
        // less than a page, so that it copies only what cannot be mapped anyway.
        let small = SMALL_COPY.min(self.copybuf.len());
        let got = window
            .receive(fd, &mut self.copybuf[..small])
            .map_err(io_err("getsockopt(TCP_ZEROCOPY_RECEIVE)"))?;
        self.stats.zc_calls += 1;
        if got.eof {
            return Ok(None);
        }
        self.stats.copied += got.copied as u64;
        self.stats.mapped += got.mapped as u64;
        self.stats.bytes += (got.mapped + got.copied) as u64;
        // What follows, in stream order: the mapped pages, the bytes copied, then `skip`
        // bytes that cannot be mapped (recv() takes them, and no more, so that aligned pages
        // after them can be mapped again).
        self.pending_copy = got.copied;
        self.unmappable = got.skip;
        if got.mapped > 0 {
            let window = self.window.as_ref().expect("window");
            return Ok(Some(Chunk::Mapped(window.mapped())));
        }
        if self.pending_copy > 0 || self.unmappable > 0 {
            return self.next_chunk();
        }
        if !self.readable()? {
            return Ok(Some(Chunk::Idle));
        }
        // Readable, yet nothing came a moment ago: the stream has ended (recv() says 0), or
        // data came meanwhile (a page at most is copied; the rest waits to be mapped).
        let want = 4096.min(self.copybuf.len());
        self.recv_copy(want)
    }

    /// What the receiver did so far.
    pub fn stats(&self) -> RecvStats {
        self.stats
    }

    /// Waits up to one poll interval for data or the end of the stream.
    fn readable(&self) -> Result<bool, ZcopyError> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(ZcopyError::Stopped);
        }
        let ev = sys::poll_one(&self.stream, libc::POLLIN, POLL_MS).map_err(io_err("poll"))?;
        Ok(ev != 0)
    }

    fn recv_copy(&mut self, want: usize) -> Result<Option<Chunk<'_>>, ZcopyError> {
        let n = loop {
            match sys::recv(self.stream.as_raw_fd(), &mut self.copybuf[..want]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // The receive timeout ran out with nothing queued: a sender that paused
                // (a retransmission takes 200 ms), not a failure.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return Ok(Some(Chunk::Idle));
                }
                Err(e) => {
                    return Err(ZcopyError::Io {
                        step: "recv",
                        source: e,
                    });
                }
            }
        };
        self.stats.recv_calls += 1;
        if n == 0 {
            return Ok(None);
        }
        self.stats.copied += n as u64;
        self.stats.bytes += n as u64;
        Ok(Some(Chunk::Copied(&self.copybuf[..n])))
    }
}
