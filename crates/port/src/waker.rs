//! A poll-mode thread's doorbell: whoever queues the thread a request rings it, and the
//! thread, asleep in poll() on its sockets for up to [`crate::IDLE_SLEEP`], wakes at once
//! instead of at the sleep's end (an idle switch answered each statistics request, packet
//! out and barrier 10 ms late).

use std::os::fd::{AsRawFd, RawFd};

use nix::sys::eventfd::{EfdFlags, EventFd};

/// An eventfd: readable while rung.
#[derive(Debug)]
pub struct Waker(EventFd);

impl Waker {
    pub fn new() -> std::io::Result<Waker> {
        let flags = EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC;
        EventFd::from_flags(flags)
            .map(Waker)
            .map_err(std::io::Error::from)
    }

    /// Wakes the thread, or keeps it from sleeping next time it would.
    pub fn ring(&self) {
        let _ = self.0.write(1);
    }

    /// Silences it: call before looking at what the ring was for, so that a ring after the
    /// look is not lost.
    pub fn clear(&self) {
        let _ = self.0.read();
    }

    /// The descriptor to poll beside the sockets.
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_ring_ends_a_poll_and_a_clear_silences_it() {
        let waker = Waker::new().unwrap();
        assert_eq!(crate::poll_any(&[waker.fd()], Duration::ZERO).unwrap(), 0);
        waker.ring();
        waker.ring();
        assert_eq!(
            crate::poll_any(&[waker.fd()], Duration::from_secs(5)).unwrap(),
            1
        );
        waker.clear();
        assert_eq!(crate::poll_any(&[waker.fd()], Duration::ZERO).unwrap(), 0);
    }
}
