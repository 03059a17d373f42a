//! The per-burst path of an AF_XDP socket: top up the fill ring, take received descriptors,
//! queue descriptors for sending, reclaim completions, wake the kernel only when it asks.
//! No allocation, no lock; a system call only when the kernel needs one (DESIGN rules 1-2).

use std::io;

use wirespeed_umem::{FramePool, Umem};

use crate::chains::{self, CONTINUES, ChainOutcome};
use crate::{Desc, Socket, sys};

/// What one `recv` took from the RX ring.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RecvOutcome {
    /// Descriptors delivered to the caller.
    pub received: u32,
    /// Descriptors that failed validation (returned to the pool when their frame was valid).
    pub invalid: u32,
}

/// Where the frames handed to the kernel are, from the ring indices (see `Socket::ring_counts`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RingCounts {
    pub fill: u64,
    pub kernel: u64,
    pub rx: u64,
    pub tx: u64,
    pub completion: u64,
}

impl Socket {
    /// Moves up to `max` frames from `pool` into the fill ring; returns how many.
    #[inline]
    pub fn refill(&mut self, pool: &mut FramePool, max: u32) -> u32 {
        let Some(fill) = self.fill.as_mut() else {
            return 0;
        };
        let n = fill.reserve(max.min(pool.len() as u32));
        for i in 0..n {
            // n <= pool.len(), so alloc cannot fail here.
            fill.write(i, pool.alloc().unwrap_or_default());
        }
        fill.submit(n);
        n
    }

    /// Takes up to `max` received packets, calling `deliver(addr, len)` for each one whose
    /// descriptor lies inside `umem`. A descriptor that does not is never dereferenced: its
    /// frame goes back to `pool` if the address is a real frame, and it is counted invalid.
    #[inline]
    pub fn recv(
        &mut self,
        umem: &Umem,
        pool: &mut FramePool,
        max: u32,
        mut deliver: impl FnMut(u64, u32),
    ) -> RecvOutcome {
        let Some(rx) = self.rx.as_mut() else {
            return RecvOutcome::default();
        };
        let n = rx.peek(max);
        let mut out = RecvOutcome::default();
        for i in 0..n {
            let d: Desc = rx.read(i);
            if umem.is_valid(d.addr, d.len) {
                deliver(d.addr, d.len);
                out.received += 1;
            } else {
                if umem.is_valid(d.addr, 0) {
                    pool.free(umem.frame_base(d.addr));
                }
                out.invalid += 1;
            }
        }
        rx.release(n);
        out
    }

    /// Takes received packets, whole chains of descriptors, from at most `max_descs`
    /// descriptors: `deliver(segments)` gets each packet's segments, head first, and returns
    /// false when it has no room (that packet stays in the ring). A chain is never followed
    /// past a descriptor outside `umem`, nor past `chains::RX_MAX_SEGMENTS`; see
    /// `chains::assemble`. Pass at least `RX_MAX_SEGMENTS` descriptors so a burst always
    /// gets past a long chain.
    #[inline]
    pub fn recv_chains(
        &mut self,
        umem: &Umem,
        pool: &mut FramePool,
        max_descs: u32,
        deliver: impl FnMut(&[(u64, u32)]) -> bool,
    ) -> ChainOutcome {
        let Some(rx) = self.rx.as_mut() else {
            return ChainOutcome::default();
        };
        let n = rx.peek(max_descs);
        let rx_ref: &_ = rx;
        let out = chains::assemble(
            n,
            |i| rx_ref.read(i),
            &mut self.rx_resync,
            umem,
            pool,
            deliver,
        );
        rx.release(out.descs);
        out
    }

    /// Reserves up to `n` TX ring slots; write them with `tx_write` and publish the written
    /// ones with `tx_submit` (for packets of several descriptors, which go in whole or not
    /// at all: the kernel loses the frames of a chain it has to cut).
    #[inline]
    pub fn tx_reserve(&mut self, n: u32) -> u32 {
        self.tx.as_mut().map_or(0, |t| t.reserve(n))
    }

    /// Writes the `i`-th reserved TX slot: a segment, which `more` says the next continues.
    #[inline]
    pub fn tx_write(&mut self, i: u32, addr: u64, len: u32, more: bool) {
        if let Some(tx) = self.tx.as_mut() {
            let options = if more { CONTINUES } else { 0 };
            tx.write(i, Desc { addr, len, options });
        }
    }

    /// Publishes the first `n` reserved TX slots to the kernel.
    #[inline]
    pub fn tx_submit(&mut self, n: u32) {
        if let Some(tx) = self.tx.as_mut() {
            tx.submit(n);
        }
    }

    /// Queues up to `n` packets for sending, `desc_at(i)` giving the address and length of
    /// the i-th; returns how many fit in the TX ring. Call `kick_tx` after the burst.
    #[inline]
    pub fn send(&mut self, n: u32, desc_at: impl Fn(u32) -> (u64, u32)) -> u32 {
        let Some(tx) = self.tx.as_mut() else {
            return 0;
        };
        let n = tx.reserve(n);
        for i in 0..n {
            let (addr, len) = desc_at(i);
            tx.write(
                i,
                Desc {
                    addr,
                    len,
                    options: 0,
                },
            );
        }
        tx.submit(n);
        n
    }

    /// Free slots in the TX ring.
    #[inline]
    pub fn tx_free(&mut self, wanted: u32) -> u32 {
        self.tx.as_mut().map_or(0, |t| t.free(wanted))
    }

    /// Moves completed transmit frames back to `pool`; returns (reclaimed, invalid).
    #[inline]
    pub fn complete(&mut self, umem: &Umem, pool: &mut FramePool, max: u32) -> (u32, u32) {
        let Some(comp) = self.completion.as_mut() else {
            return (0, 0);
        };
        let n = comp.peek(max);
        let mut invalid = 0;
        for i in 0..n {
            let addr = comp.read(i);
            if !umem.is_valid(addr, 0) || !pool.free(umem.frame_base(addr)) {
                invalid += 1;
            }
        }
        comp.release(n);
        (n - invalid, invalid)
    }

    /// True when descriptors sit in the TX ring that the kernel has not taken yet.
    #[inline]
    pub fn tx_queued(&self) -> bool {
        self.tx.as_ref().is_some_and(|t| t.pending() > 0)
    }

    /// Tells the kernel to send what is queued, if it asked for that (need_wakeup) or if it
    /// cannot ask (sockets bound without need_wakeup). In copy mode a kick sends at most its
    /// budget, synchronously (the ring, or 32 frames on kernels before 6.17, see
    /// `XDP_MAX_TX_SKB_BUDGET`), and less when the completion ring is full, so kick again
    /// while frames remain (bounded by the ring size).
    /// Busy or out-of-buffer answers are not errors: the descriptors stay queued and the
    /// next kick sends them.
    #[inline]
    pub fn kick_tx(&mut self) -> io::Result<()> {
        let Some(tx) = self.tx.as_ref() else {
            return Ok(());
        };
        if self.need_wakeup && !tx.needs_wakeup() {
            return Ok(());
        }
        let rounds = if self.is_zerocopy() {
            1
        } else {
            tx.size() / 32 + 1
        };
        for _ in 0..rounds {
            if let Err(e) = sys::kick_tx(self.raw_fd()) {
                return match e.raw_os_error() {
                    // Copy mode answers EAGAIN when its budget ran out, or the completion
                    // ring filled, with frames left (__xsk_generic_xmit): the frames before
                    // were sent, and this is the cue to kick again.
                    Some(libc::EAGAIN) if tx.pending() > 0 => continue,
                    Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS) => Ok(()),
                    _ => Err(e),
                };
            }
            if tx.pending() == 0 {
                break;
            }
        }
        Ok(())
    }

    /// Wakes the kernel's receive side when the fill ring asks for it, or always when busy
    /// polling (the syscall is what runs the busy poll).
    #[inline]
    pub fn wake_rx(&mut self) -> io::Result<()> {
        let wanted = self.busy_poll || self.fill.as_ref().is_some_and(|f| f.needs_wakeup());
        if !wanted {
            return Ok(());
        }
        match sys::kick_rx(self.raw_fd()) {
            Ok(()) => Ok(()),
            Err(e) => match e.raw_os_error() {
                Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS) => Ok(()),
                _ => Err(e),
            },
        }
    }

    /// Sleeps in poll() until the RX ring has packets or `timeout_ms` passes.
    pub fn poll_rx(&self, timeout_ms: i32) -> io::Result<bool> {
        Ok(sys::poll_one(self.raw_fd(), libc::POLLIN, timeout_ms)? & libc::POLLIN != 0)
    }

    /// For a socket whose interface was deleted, when the kernel neither fills nor sends
    /// for it any more: moves every frame its rings still hold back to `pool` (completions,
    /// received packets not taken, fill and TX entries the kernel never consumed) and
    /// returns how many, and how many the kernel consumed and never gave back (lost with
    /// the socket: `RingCounts::kernel`). Close the socket after: its fill and TX rings
    /// still list the frames taken back.
    pub fn take_back_frames(&mut self, umem: &Umem, pool: &mut FramePool) -> (u64, u64) {
        let mut taken = 0u64;
        let mut give = |addr: u64| {
            if umem.is_valid(addr, 0) && pool.free(umem.frame_base(addr)) {
                taken += 1;
            }
        };
        // Drained up to the producer indices read once: what the kernel kept is counted
        // from those, so a frame it gives back meanwhile is neither freed and lost nor
        // neither (it stays in a ring that closes).
        let mut comp_done = None;
        if let Some(comp) = self.completion.as_mut() {
            let n = comp.peek(comp.size());
            (0..n).for_each(|i| give(comp.read(i)));
            comp.release(n);
            comp_done = Some(comp.consumer_index());
        }
        let mut rx_done = None;
        if let Some(rx) = self.rx.as_mut() {
            let n = rx.peek(rx.size());
            (0..n).for_each(|i| give(rx.read(i).addr));
            rx.release(n);
            rx_done = Some(rx.consumer_index());
        }
        let kept = |taken_by_kernel: Option<u32>, given_back: Option<u32>| -> u64 {
            taken_by_kernel.map_or(0, |t| t.wrapping_sub(given_back.unwrap_or(t)) as u64)
        };
        let lost = kept(self.fill.as_ref().map(|f| f.consumer_index()), rx_done)
            + kept(self.tx.as_ref().map(|t| t.consumer_index()), comp_done);
        if let Some(fill) = self.fill.as_mut() {
            (0..fill.pending().min(fill.size())).for_each(|i| give(fill.read_pending(i)));
        }
        if let Some(tx) = self.tx.as_mut() {
            (0..tx.pending().min(tx.size())).for_each(|i| give(tx.read_pending(i).addr));
        }
        self.rx_resync = false;
        (taken, lost)
    }

    /// Where the frames this socket handed to the kernel are, from the ring indices. Kernel
    /// indices are read so that `kernel` never comes out negative (RX producer before fill
    /// consumer: the kernel takes a fill entry before it produces an RX entry).
    pub fn ring_counts(&self) -> RingCounts {
        let mut c = RingCounts::default();
        let rx_prod = self.rx.as_ref().map(|r| r.producer_index());
        let comp_prod = self.completion.as_ref().map(|r| r.producer_index());
        if let Some(fill) = &self.fill {
            let cons = fill.consumer_index();
            c.fill = fill.producer_index().wrapping_sub(cons) as u64;
            c.kernel += cons.wrapping_sub(rx_prod.unwrap_or(cons)) as u64;
        }
        if let (Some(rx), Some(p)) = (&self.rx, rx_prod) {
            c.rx = p.wrapping_sub(rx.consumer_index()) as u64;
        }
        if let Some(tx) = &self.tx {
            let cons = tx.consumer_index();
            c.tx = tx.producer_index().wrapping_sub(cons) as u64;
            c.kernel += cons.wrapping_sub(comp_prod.unwrap_or(cons)) as u64;
        }
        if let (Some(comp), Some(p)) = (&self.completion, comp_prod) {
            c.completion = p.wrapping_sub(comp.consumer_index()) as u64;
        }
        c
    }
}
