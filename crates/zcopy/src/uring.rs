//! Sends through io_uring: `IORING_OP_SEND_ZC` from the send buffers, registered once with
//! the ring as a fixed buffer (pinned once, not at every send as MSG_ZEROCOPY pins them), or
//! plain `IORING_OP_SEND` as the copying baseline. Completions arrive on the ring's
//! completion queue: one for the send, and for a zero-copy send a notification once the
//! kernel has let go of the pages (saying whether it copied them after all), which
//! MSG_ZEROCOPY delivers on the socket's error queue instead. This file's unsafe code is
//! the buffer registration and the submission, whose buffers must outlive the kernel's use.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use io_uring::types::{Fd, SubmitArgs, Timespec};
use io_uring::{IoUring, cqueue, opcode};

use crate::sys::Area;

/// `IORING_SEND_ZC_REPORT_USAGE` and `IORING_NOTIF_USAGE_ZC_COPIED` (linux/io_uring.h).
const SEND_ZC_REPORT_USAGE: u16 = 1 << 3;
const NOTIF_USAGE_ZC_COPIED: i32 = 1 << 31;

/// What the completion queue said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// Send `id` finished: bytes sent, or a negative errno. `notice_follows`: a zero-copy
    /// send's pages are still the kernel's until its `Released`.
    Sent {
        id: u64,
        result: i32,
        notice_follows: bool,
    },
    /// The kernel let go of zero-copy send `id`'s pages; `copied` if it copied them.
    Released { id: u64, copied: bool },
}

/// A ring for one socket's sends, with the send buffers registered as fixed buffer 0.
pub(crate) struct Uring {
    ring: IoUring,
}

impl Uring {
    /// A ring of `entries` whose fixed buffer 0 is `area`. The caller keeps `area` mapped
    /// while the ring lives (drops the ring first).
    pub(crate) fn new(area: &Area, entries: u32) -> io::Result<Uring> {
        let ring = IoUring::new(entries)?;
        let bytes = area.bytes();
        let iov = libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        // SAFETY: the iovec describes our own mapping, which the caller keeps alive while
        // the ring lives; the kernel pins its pages for as long as they are registered.
        unsafe { ring.submitter().register_buffers(&[iov])? };
        Ok(Uring { ring })
    }

    /// Submits one send of all of `bytes` (MSG_WAITALL: the kernel retries a short send
    /// itself) on `fd`, tagged `id`. `bytes` must lie in the registered area; the caller
    /// leaves them unchanged until `Sent` (copying) or `Released` (zero-copy) for `id`.
    pub(crate) fn send(
        &mut self,
        fd: RawFd,
        bytes: &[u8],
        zerocopy: bool,
        id: u64,
    ) -> io::Result<()> {
        let len = u32::try_from(bytes.len()).map_err(io::Error::other)?;
        let entry = if zerocopy {
            opcode::SendZc::new(Fd(fd), bytes.as_ptr(), len)
                .buf_index(Some(0))
                .flags(libc::MSG_WAITALL)
                .zc_flags(SEND_ZC_REPORT_USAGE)
                .build()
        } else {
            opcode::Send::new(Fd(fd), bytes.as_ptr(), len)
                .flags(libc::MSG_WAITALL)
                .build()
        }
        .user_data(id);
        // SAFETY: the bytes are in the registered area, which outlives the ring, and the
        // caller leaves them alone until the kernel reports it is done with them.
        unsafe { self.ring.submission().push(&entry) }
            .map_err(|_| io::Error::other("the submission queue is full"))?;
        self.ring.submit()?;
        Ok(())
    }

    /// Waits until a completion is there or `timeout` passes (a signal also ends it).
    pub(crate) fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        let ts = Timespec::from(timeout);
        let args = SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The next completion, if one is waiting.
    pub(crate) fn next_event(&mut self) -> Option<Event> {
        let cqe = self.ring.completion().next()?;
        let (id, result, flags) = (cqe.user_data(), cqe.result(), cqe.flags());
        Some(if cqueue::notif(flags) {
            Event::Released {
                id,
                copied: result & NOTIF_USAGE_ZC_COPIED != 0,
            }
        } else {
            Event::Sent {
                id,
                result,
                notice_follows: cqueue::more(flags),
            }
        })
    }
}
