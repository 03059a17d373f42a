//! The kernel's zero-copy socket features (seed 004), for TCP:
//!
//! - **MSG_ZEROCOPY send** (`send.rs`): the kernel pins the sender's buffer instead of copying
//!   it, and says on the socket's error queue when each send's pages are free again, and
//!   whether it had to copy after all. `completions.rs` keeps that account.
//! - **io_uring zero-copy send** (`uring.rs`): the same through `IORING_OP_SEND_ZC`, from
//!   buffers registered with the ring once, with notices on its completion queue.
//! - **TCP zero-copy receive** (`recv.rs`): the kernel maps the pages that hold received
//!   payload into a window `mmap`'d on the socket (`TCP_ZEROCOPY_RECEIVE`); what does not
//!   fill whole pages is copied as usual.
//!
//! The raw system calls, and all of this crate's unsafe code, are in `sys.rs` and, for the
//! ring's registered buffers and submissions, `uring.rs`: the receive window is memory the
//! kernel maps from a socket, like a UMEM, and the send buffers are memory it reads later.

mod completions;
mod recv;
mod send;
mod sys;
mod uring;

pub use completions::{BadCompletion, Completions};
pub use recv::{Chunk, Receiver, RecvStats};
pub use send::{SendApi, SendStats, Sender};

use std::io;
use std::os::fd::AsRawFd;

/// The TCP maximum segment size that makes every segment carry exactly one 4096-byte page of
/// payload: 4096 plus the 12 bytes of the timestamp option. Zero-copy receive maps whole
/// pages only, so a receiver asks its peer for this (`TCP_MAXSEG` before `listen`).
pub const PAGE_MSS: u32 = 4096 + 12;

/// Sets the TCP maximum segment size of `socket` (`TCP_MAXSEG`): before `connect`, or on a
/// listener before `listen` so that it is what the listener's connections ask their peer for.
pub fn set_mss(socket: &impl AsRawFd, mss: u32) -> Result<(), ZcopyError> {
    let mss = i32::try_from(mss).map_err(|_| ZcopyError::Mss(mss))?;
    sys::set_int_opt(socket.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_MAXSEG, mss)
        .map_err(|_| ZcopyError::Mss(mss as u32))
}

/// The maximum segment size `socket` sends with now (`TCP_MAXSEG`).
pub fn mss(socket: &impl AsRawFd) -> Result<u32, ZcopyError> {
    let v = sys::get_int_opt(socket.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_MAXSEG)
        .map_err(io_err("getsockopt(TCP_MAXSEG)"))?;
    Ok(v.max(0) as u32)
}

/// What can go wrong; each names the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum ZcopyError {
    #[error("{step}: {source}")]
    Io {
        step: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("the kernel's completion notice is not one we sent: {0}")]
    BadCompletion(#[from] BadCompletion),
    #[error("error queue: {0}")]
    SendFailed(#[source] io::Error),
    #[error("no progress for {seconds} s ({outstanding} zero-copy sends not completed)")]
    CompletionTimeout { outstanding: u32, seconds: u64 },
    #[error("TCP maximum segment size {0} refused (the kernel takes 88 to 32767)")]
    Mss(u32),
    #[error("stopped")]
    Stopped,
    #[error("buffer size {0} is out of range (1 to 16 MiB)")]
    BufferSize(usize),
    /// ENOBUFS with no zero-copy send of ours in flight: the pages would put the user over
    /// its locked-memory limit (the kernel counts them against RLIMIT_MEMLOCK unless the
    /// process has CAP_IPC_LOCK).
    #[error(
        "the kernel will not pin a {0}-byte send (ENOBUFS with none in flight): it is over \
         the locked-memory limit (ulimit -l) of a process without CAP_IPC_LOCK; raise the \
         limit, send less at a time or copy"
    )]
    Unpinnable(usize),
}

pub(crate) fn io_err(step: &'static str) -> impl FnOnce(io::Error) -> ZcopyError {
    move |source| ZcopyError::Io { step, source }
}
