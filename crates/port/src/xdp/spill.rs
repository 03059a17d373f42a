//! The spill ring: packets our program (bpf/xsk_spill.c) set aside while we were behind,
//! handed back in their place among the RX ring's.
//!
//! A receiver that must lose nothing rides out its stalls with frames waiting in the fill
//! ring, but the kernel takes those in order: a deep fill ring makes every copy land in a
//! frame untouched for the whole depth, a cache and TLB miss on the CPU doing the copy
//! (bench/README.md, capture). With a spill ring the fill ring stays shallow, and the depth
//! is a ring buffer the kernel writes in order. Each spilled record says how many packets of
//! its queue went to the socket before it; here a record waits until the RX ring has given
//! that many, so the packets come out in the order they arrived.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use wirespeed_umem::{FramePool, Umem};
use wirespeed_xdp::SpillRing;
use wirespeed_xsk::{Socket, SpillCounts, SpillLevels};

use crate::Batch;

/// How long a spilled packet waits for RX descriptors that neither come nor show in the
/// kernel's drop counters, before it goes out anyway. The kernel publishes RX descriptors at
/// the end of each NAPI poll, microseconds after our program counted them.
const BLOCKED_LIMIT: Duration = Duration::from_millis(10);

/// A spilled packet, copied into a frame of the pool, waiting for its place.
#[derive(Debug, Clone, Copy)]
struct Pending {
    before: u64,
    addr: u64,
    len: u32,
}

/// One member socket's side of the spill ring.
struct SpillQueue {
    queue: u32,
    pending: VecDeque<Pending>,
    /// Frames ever put in the fill ring (published to the program).
    fill_given: u64,
    /// RX descriptors ever taken.
    rx_taken: u64,
    /// Redirects the kernel dropped (its XDP_STATISTICS since `enable`), and its count then.
    lost: u64,
    lost_base: u64,
    /// Places given up on after BLOCKED_LIMIT.
    skipped: u64,
    blocked_since: Option<Instant>,
}

impl SpillQueue {
    /// Packets of this queue accounted for: taken from the RX ring or known lost. A spilled
    /// packet's place comes when this reaches its `before`.
    fn seq(&self) -> u64 {
        self.rx_taken + self.lost + self.skipped
    }
}

/// What `receive` delivered.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct SpillReceive {
    /// From the RX ring, valid and invalid descriptors.
    pub received: u32,
    pub invalid: u32,
    /// From the spill ring.
    pub spilled: u32,
    pub bytes: u64,
}

/// A spill ring and the counts shared with the program, for the members of one group (on
/// one interface). With several groups on one program (a thread each), each group has a
/// ring of its own: a ring buffer has one consumer.
pub(super) struct Spill {
    ring: SpillRing,
    levels: SpillLevels,
    queues: Vec<SpillQueue>,
    /// Where a spilled packet starts in its frame: where the kernel puts received ones.
    offset: u64,
    /// Records that were malformed, for a queue we do not serve, or too long for a frame.
    pub invalid: u64,
}

impl Spill {
    /// `queues[i]` is member i's queue; each pending list can hold every frame of the UMEM.
    pub fn new(ring: SpillRing, levels: SpillLevels, queues: &[u32], umem: &Umem) -> Spill {
        let frames = umem.frame_count() as usize;
        Spill {
            ring,
            levels,
            queues: queues
                .iter()
                .map(|&queue| SpillQueue {
                    queue,
                    pending: VecDeque::with_capacity(frames),
                    fill_given: 0,
                    rx_taken: 0,
                    lost: 0,
                    lost_base: 0,
                    skipped: 0,
                    blocked_since: None,
                })
                .collect(),
            offset: (super::XDP_PACKET_HEADROOM + umem.config().headroom) as u64,
            invalid: 0,
        }
    }

    /// Starts the program's counting for `member`, whose socket is not yet registered in its
    /// XSKMAP and holds `fill_given` frames in its fill ring; its packets spill to the
    /// program's ring `ring` (this one: the group's thread's).
    pub fn enable(
        &mut self,
        member: usize,
        socket: &Socket,
        rx_size: u32,
        fill_given: u64,
        ring: u32,
    ) {
        let q = &mut self.queues[member];
        q.fill_given = fill_given;
        q.lost_base = kernel_lost(socket).unwrap_or(0);
        self.levels.enable(q.queue, rx_size, fill_given, ring);
    }

    /// `member` put `n` more frames in its fill ring.
    #[inline]
    pub fn gave_fill(&mut self, member: usize, n: u32) {
        if n > 0 {
            let q = &mut self.queues[member];
            q.fill_given += n as u64;
            self.levels.publish_fill(q.queue, q.fill_given);
        }
    }

    /// Moves up to `max` records from the ring into frames of `pool` (leaving it `keep`),
    /// onto their member's pending list; returns the frames taken.
    pub fn drain(&mut self, umem: &mut Umem, pool: &mut FramePool, keep: usize, max: usize) -> u64 {
        let mut taken = 0;
        while (taken as usize) < max && pool.len() > keep {
            let Some(frame) = pool.alloc() else { break };
            let addr = frame + self.offset;
            let queues = &mut self.queues;
            let placed = self.ring.pop(|r| {
                let Some(q) = queues.iter_mut().find(|q| q.queue == r.queue) else {
                    return false;
                };
                let Some(dst) = umem.packet_mut(addr, r.packet.len() as u32) else {
                    return false;
                };
                dst.copy_from_slice(r.packet);
                q.pending.push_back(Pending {
                    before: r.before,
                    addr,
                    len: r.packet.len() as u32,
                });
                true
            });
            match placed {
                None => {
                    pool.free(frame);
                    break;
                }
                Some(Ok(true)) => taken += 1,
                Some(_) => {
                    pool.free(frame);
                    self.invalid += 1;
                }
            }
        }
        taken
    }

    /// Fills `batch` from `member`'s RX ring and its pending spilled packets, in arrival
    /// order, and tells the program how far we got.
    #[inline]
    pub fn receive(
        &mut self,
        member: usize,
        socket: &mut Socket,
        umem: &Umem,
        pool: &mut FramePool,
        batch: &mut Batch,
    ) -> SpillReceive {
        let q = &mut self.queues[member];
        let mut out = SpillReceive::default();
        loop {
            while let Some(p) = q.pending.front().copied() {
                if p.before > q.seq() || batch.room() == 0 {
                    break;
                }
                q.pending.pop_front();
                batch.push(p.addr, p.len);
                out.spilled += 1;
                out.bytes += p.len as u64;
            }
            let room = batch.room() as u64;
            if room == 0 {
                break;
            }
            let limit = match q.pending.front() {
                Some(p) => (p.before - q.seq()).min(room),
                None => room,
            } as u32;
            let mut bytes = 0u64;
            let r = socket.recv(umem, pool, limit, |addr, len| {
                batch.push(addr, len);
                bytes += len as u64;
            });
            out.received += r.received;
            out.invalid += r.invalid;
            out.bytes += bytes;
            let got = r.received + r.invalid;
            q.rx_taken += got as u64;
            if got > 0 {
                q.blocked_since = None;
                continue;
            }
            if !unblock(q, socket) {
                break;
            }
        }
        self.levels.publish_rx(q.queue, q.seq());
        out
    }

    /// What the program counted for `member`'s queue.
    pub fn counts(&self, member: usize) -> SpillCounts {
        self.levels.counts(self.queues[member].queue)
    }
}

/// The RX ring is empty and a spilled packet waits for descriptors before it: they are
/// either still in the kernel's hands (published at the end of its poll) or were dropped
/// there. True when the wait is over: the kernel's counters account for them, or the wait
/// has lasted BLOCKED_LIMIT (the packet goes out, a little early at worst).
fn unblock(q: &mut SpillQueue, socket: &Socket) -> bool {
    let Some(front) = q.pending.front().copied() else {
        return false;
    };
    if let Some(lost) = kernel_lost(socket) {
        q.lost = lost.saturating_sub(q.lost_base);
    }
    if front.before <= q.seq() {
        q.blocked_since = None;
        return true;
    }
    let now = Instant::now();
    match q.blocked_since {
        None => {
            q.blocked_since = Some(now);
            false
        }
        Some(t) if now.duration_since(t) >= BLOCKED_LIMIT => {
            q.skipped += front.before - q.seq();
            q.blocked_since = None;
            true
        }
        Some(_) => false,
    }
}

/// Packets the kernel dropped after our program sent them to `socket` (a system call).
fn kernel_lost(socket: &Socket) -> Option<u64> {
    socket
        .statistics()
        .ok()
        .map(|k| k.rx_dropped + k.rx_ring_full)
}
