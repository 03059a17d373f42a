//! A TCP sender over a ring of buffers, with MSG_ZEROCOPY or with ordinary copying sends.
//!
//! With MSG_ZEROCOPY the kernel keeps the buffer's pages until its completion notice, so the
//! sender cycles through several buffers and writes into one only after every send that used
//! it has retired (`Completions`). The kernel may also copy after all (for instance when the
//! data is delivered to a socket on this host); the notice says so and `SendStats` counts it.

use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::completions::Completions;
use crate::sys::{self, Area, Notice};
use crate::{ZcopyError, io_err};

/// How long the sender waits for the kernel (room to send, a completion) without progress.
const STALL: Duration = Duration::from_secs(10);
/// One wait's poll timeout: how often a stop request is noticed.
const POLL_MS: u16 = 100;

/// What a sender did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SendStats {
    /// Bytes the kernel accepted.
    pub bytes: u64,
    /// send() calls that moved bytes.
    pub calls: u64,
    /// Times the sender had to wait for a completion before it could reuse a buffer.
    pub buffer_waits: u64,
    /// Times the kernel refused a zero-copy send for lack of option memory (ENOBUFS).
    pub enobufs: u64,
    /// Zero-copy sends completed without a copy, and completed with one.
    pub zerocopied: u64,
    pub copied: u64,
    /// Completion notices read.
    pub notices: u64,
}

/// A sender on a connected TCP socket.
pub struct Sender {
    stream: TcpStream,
    zerocopy: bool,
    area: Area,
    size: usize,
    /// Bytes from one buffer's start to the next's (size rounded up to whole pages).
    stride: usize,
    /// The number of the last zero-copy send that used each buffer.
    last_use: Vec<Option<u32>>,
    current: usize,
    account: Completions,
    stats: SendStats,
    stop: Arc<AtomicBool>,
}

impl Sender {
    /// A sender with `buffers` buffers of `size` bytes. `zerocopy` sets `SO_ZEROCOPY` and
    /// sends with MSG_ZEROCOPY. The socket is made non-blocking: waits are poll()s that notice
    /// `stop`.
    pub fn new(
        stream: TcpStream,
        zerocopy: bool,
        buffers: usize,
        size: usize,
        stop: Arc<AtomicBool>,
    ) -> Result<Sender, ZcopyError> {
        if size == 0 || size > 16 << 20 {
            return Err(ZcopyError::BufferSize(size));
        }
        let buffers = buffers.clamp(1, 1024);
        if zerocopy {
            sys::set_zerocopy(stream.as_raw_fd()).map_err(io_err("setsockopt(SO_ZEROCOPY)"))?;
        }
        stream
            .set_nonblocking(true)
            .map_err(io_err("set non-blocking"))?;
        // Each buffer starts on a page: a sender of whole pages hands over whole pages.
        let stride = size.div_ceil(4096) * 4096;
        let area = Area::new(buffers * stride).map_err(io_err("mmap the send buffers"))?;
        Ok(Sender {
            stream,
            zerocopy,
            area,
            size,
            stride,
            last_use: vec![None; buffers],
            current: 0,
            // A partial send needs another number for the rest: room for several per buffer.
            account: Completions::new(buffers * 8),
            stats: SendStats::default(),
            stop,
        })
    }

    /// The buffer to fill next, once the kernel has let go of it.
    pub fn buffer(&mut self) -> Result<&mut [u8], ZcopyError> {
        self.reap()?;
        if !self.buffer_free(self.current) {
            self.stats.buffer_waits += 1;
            let since = Instant::now();
            while !self.buffer_free(self.current) {
                self.wait_notice(since, true)?;
            }
        }
        let at = self.current * self.stride;
        Ok(&mut self.area.bytes_mut()[at..at + self.size])
    }

    /// Sends the first `len` bytes of the buffer `buffer` returned, all of them, then moves
    /// on to the next buffer.
    pub fn send(&mut self, len: usize) -> Result<(), ZcopyError> {
        let len = len.min(self.size);
        let start = self.current * self.stride;
        let (mut done, mut since) = (0, Instant::now());
        let flags = if self.zerocopy { libc::MSG_ZEROCOPY } else { 0 };
        while done < len {
            if self.zerocopy && !self.account.has_room() {
                self.wait_notice(since, true)?;
                continue;
            }
            let fd = self.stream.as_raw_fd();
            match sys::send(fd, &self.area.bytes()[start + done..start + len], flags) {
                Ok(n) => {
                    if self.zerocopy {
                        self.last_use[self.current] = Some(self.account.issue());
                    }
                    done += n;
                    self.stats.bytes += n as u64;
                    self.stats.calls += 1;
                    since = Instant::now();
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.reap()?;
                    self.wait(libc::POLLOUT, since, true)?;
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    self.stats.enobufs += 1;
                    self.wait_notice(since, true)?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(ZcopyError::Io {
                        step: "send",
                        source: e,
                    });
                }
            }
        }
        self.current = (self.current + 1) % self.last_use.len();
        Ok(())
    }

    /// Ends the stream (FIN) and waits until the kernel has completed every zero-copy send
    /// (also after a stop request: the account is complete when it returns).
    pub fn finish(&mut self) -> Result<(), ZcopyError> {
        self.stream
            .shutdown(std::net::Shutdown::Write)
            .map_err(io_err("shutdown"))?;
        let since = Instant::now();
        while self.account.in_flight() > 0 {
            self.wait_notice(since, false)?;
        }
        Ok(())
    }

    /// What the sender did so far.
    pub fn stats(&self) -> SendStats {
        SendStats {
            zerocopied: self.account.zerocopied(),
            copied: self.account.copied(),
            notices: self.account.notices(),
            ..self.stats
        }
    }

    /// Zero-copy sends not completed yet.
    pub fn in_flight(&self) -> u32 {
        self.account.in_flight()
    }

    fn buffer_free(&self, b: usize) -> bool {
        self.last_use[b].is_none_or(|id| self.account.retired(id))
    }

    /// Applies every notice waiting on the error queue.
    fn reap(&mut self) -> Result<(), ZcopyError> {
        if !self.zerocopy {
            return Ok(());
        }
        loop {
            match sys::read_notice(self.stream.as_raw_fd())
                .map_err(io_err("recvmsg(MSG_ERRQUEUE)"))?
            {
                None => return Ok(()),
                Some(Notice::Zerocopy { lo, hi, copied }) => {
                    self.account.complete(lo, hi, copied)?
                }
                Some(Notice::Error { errno, .. }) => {
                    return Err(ZcopyError::SendFailed(std::io::Error::from_raw_os_error(
                        errno as i32,
                    )));
                }
            }
        }
    }

    /// Waits for a completion notice (POLLERR) and applies what came.
    fn wait_notice(&mut self, since: Instant, stoppable: bool) -> Result<(), ZcopyError> {
        self.wait(0, since, stoppable)?;
        self.reap()
    }

    /// One poll for `events` (POLLERR always counts), failing after STALL without progress,
    /// or at once when `stoppable` and a stop was asked for.
    fn wait(&mut self, events: i16, since: Instant, stoppable: bool) -> Result<(), ZcopyError> {
        if stoppable && self.stop.load(Ordering::Relaxed) {
            return Err(ZcopyError::Stopped);
        }
        if since.elapsed() > STALL {
            return Err(ZcopyError::CompletionTimeout {
                outstanding: self.account.in_flight(),
                seconds: STALL.as_secs(),
            });
        }
        sys::poll_one(&self.stream, events, POLL_MS).map_err(io_err("poll"))?;
        Ok(())
    }
}
