//! A TCP sender over a ring of buffers, with zero-copy or with ordinary copying sends, made
//! by system calls (send with MSG_ZEROCOPY) or through io_uring (`uring.rs`).
//!
//! A zero-copy send leaves the buffer's pages with the kernel until its completion notice,
//! so the sender cycles through several buffers and writes into one only after every send
//! that used it has retired (`Completions`). The kernel may also copy after all (for instance
//! when the data is delivered to a socket on this host); the notice says so and `SendStats`
//! counts it.

use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::completions::Completions;
use crate::sys::{self, Area, Notice};
use crate::uring::{Event, Uring};
use crate::{ZcopyError, io_err};

/// How long the sender waits for the kernel (room to send, a completion) without progress.
const STALL: Duration = Duration::from_secs(10);
/// One wait's poll timeout: how often a stop request is noticed.
const POLL_MS: u16 = 100;

/// How a sender hands its sends to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendApi {
    /// send() system calls; zero-copy notices come on the socket's error queue.
    Syscalls,
    /// io_uring: IORING_OP_SEND_ZC from buffers registered once (or IORING_OP_SEND), notices
    /// on the completion queue.
    IoUring,
}

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
    /// Before `area`: the ring goes first, while its registered buffers are still mapped.
    uring: Option<Uring>,
    /// The last io_uring send's result, from the completion queue.
    uring_sent: Option<(u64, i32)>,
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
    /// A sender with `buffers` buffers of `size` bytes. `zerocopy` sends with MSG_ZEROCOPY
    /// (setting `SO_ZEROCOPY`) or IORING_OP_SEND_ZC, by `api`. Waits notice `stop`: with
    /// system calls the socket is made non-blocking and waits are poll()s; with io_uring
    /// they are waits on the ring, with a timeout.
    pub fn new(
        stream: TcpStream,
        zerocopy: bool,
        api: SendApi,
        buffers: usize,
        size: usize,
        stop: Arc<AtomicBool>,
    ) -> Result<Sender, ZcopyError> {
        if size == 0 || size > 16 << 20 {
            return Err(ZcopyError::BufferSize(size));
        }
        let buffers = buffers.clamp(1, 1024);
        if zerocopy && api == SendApi::Syscalls {
            sys::set_zerocopy(stream.as_raw_fd()).map_err(io_err("setsockopt(SO_ZEROCOPY)"))?;
        }
        // io_uring waits for room itself (it polls a socket whose send would block).
        stream
            .set_nonblocking(api == SendApi::Syscalls)
            .map_err(io_err("set non-blocking"))?;
        // Each buffer starts on a page: a sender of whole pages hands over whole pages.
        let stride = size.div_ceil(4096) * 4096;
        let area = Area::new(buffers * stride).map_err(io_err("mmap the send buffers"))?;
        let uring = match api {
            SendApi::IoUring => Some(
                Uring::new(&area, 64).map_err(io_err("set up io_uring (register the buffers)"))?,
            ),
            SendApi::Syscalls => None,
        };
        Ok(Sender {
            stream,
            zerocopy,
            uring,
            uring_sent: None,
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
        // Asked here too, not only while waiting: a sender that never waits (a fast peer)
        // would otherwise not see a stop.
        if self.stop.load(Ordering::Relaxed) {
            return Err(ZcopyError::Stopped);
        }
        self.reap()?;
        if !self.buffer_free(self.current) {
            self.stats.buffer_waits += 1;
            let mut progress = Progress::new(self.account.in_flight());
            while !self.buffer_free(self.current) {
                self.wait_notice(progress.since, true)?;
                progress.note(self.account.in_flight());
            }
        }
        let at = self.current * self.stride;
        Ok(&mut self.area.bytes_mut()[at..at + self.size])
    }

    /// Sends the first `len` bytes of the buffer `buffer` returned, all of them, then moves
    /// on to the next buffer.
    pub fn send(&mut self, len: usize) -> Result<(), ZcopyError> {
        if self.uring.is_some() {
            return self.send_uring(len);
        }
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
                    // With none of ours pinned, no notice will come to free anything: the
                    // kernel will not pin this send's pages at all.
                    if self.zerocopy && self.account.in_flight() == 0 {
                        return Err(ZcopyError::Unpinnable(len - done));
                    }
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

    /// `send` through io_uring: one send in flight at a time (two sends on one stream socket
    /// may otherwise be carried out out of order), its buffer held until its notice.
    fn send_uring(&mut self, len: usize) -> Result<(), ZcopyError> {
        let len = len.min(self.size);
        let start = self.current * self.stride;
        let (mut done, mut since) = (0, Instant::now());
        while done < len {
            if self.zerocopy && !self.account.has_room() {
                self.wait_notice(since, true)?;
                continue;
            }
            let id = match self.zerocopy {
                true => u64::from(self.account.issue()),
                false => self.stats.calls,
            };
            let fd = self.stream.as_raw_fd();
            let bytes = &self.area.bytes()[start + done..start + len];
            let uring = self.uring.as_mut().expect("an io_uring sender");
            uring
                .send(fd, bytes, self.zerocopy, id)
                .map_err(io_err("io_uring submit"))?;
            if self.zerocopy {
                self.last_use[self.current] = Some(id as u32);
            }
            let n = loop {
                match self.uring_sent.take() {
                    Some((sent, result)) if sent == id => break result,
                    _ => self.wait_notice(since, true)?,
                }
            };
            if n < 0 {
                return Err(ZcopyError::Io {
                    step: "io_uring send",
                    source: std::io::Error::from_raw_os_error(-n),
                });
            }
            done += n as usize;
            self.stats.bytes += n as u64;
            self.stats.calls += 1;
            since = Instant::now();
        }
        self.current = (self.current + 1) % self.last_use.len();
        Ok(())
    }

    /// Ends the stream (FIN) and waits until the kernel has completed every zero-copy send
    /// (also after a stop request: the account is complete when it returns), then reports
    /// a reset that came meanwhile (the kernel completes the sends a reset discards).
    pub fn finish(&mut self) -> Result<(), ZcopyError> {
        self.stream
            .shutdown(std::net::Shutdown::Write)
            .map_err(io_err("shutdown"))?;
        let mut progress = Progress::new(self.account.in_flight());
        while self.account.in_flight() > 0 {
            self.wait_notice(progress.since, false)?;
            progress.note(self.account.in_flight());
        }
        match self
            .stream
            .take_error()
            .map_err(io_err("getsockopt(SO_ERROR)"))?
        {
            Some(e) => Err(ZcopyError::Io {
                step: "the connection",
                source: e,
            }),
            None => Ok(()),
        }
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

    /// Applies every notice waiting on the error queue (or the io_uring completion queue).
    fn reap(&mut self) -> Result<(), ZcopyError> {
        if self.uring.is_some() {
            return self.reap_uring();
        }
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

    /// Applies every io_uring completion: a send's result is kept for `send_uring`; a
    /// zero-copy send's notice retires it.
    fn reap_uring(&mut self) -> Result<(), ZcopyError> {
        let uring = self.uring.as_mut().expect("an io_uring sender");
        while let Some(event) = uring.next_event() {
            match event {
                Event::Sent {
                    id,
                    result,
                    notice_follows,
                } => {
                    self.uring_sent = Some((id, result));
                    if self.zerocopy && !notice_follows {
                        // No notice will come (the send failed): the pages are free now.
                        self.account.complete(id as u32, id as u32, true)?;
                    }
                }
                Event::Released { id, copied } => {
                    self.account.complete(id as u32, id as u32, copied)?
                }
            }
        }
        Ok(())
    }

    /// Waits for a completion notice (POLLERR, or the completion queue) and applies what
    /// came.
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
        match self.uring.as_mut() {
            Some(uring) => uring
                .wait(Duration::from_millis(POLL_MS.into()))
                .map_err(io_err("io_uring wait"))?,
            None => {
                sys::poll_one(&self.stream, events, POLL_MS).map_err(io_err("poll"))?;
            }
        }
        Ok(())
    }
}

/// When a wait for notices last saw one: a slow path that completes sends a few at a time
/// makes progress, and only STALL without any times out.
struct Progress {
    since: Instant,
    in_flight: u32,
}

impl Progress {
    fn new(in_flight: u32) -> Progress {
        Progress {
            since: Instant::now(),
            in_flight,
        }
    }

    fn note(&mut self, in_flight: u32) {
        if in_flight < self.in_flight {
            self.since = Instant::now();
        }
        self.in_flight = in_flight;
    }
}
