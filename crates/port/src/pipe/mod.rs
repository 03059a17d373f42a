//! The pipe backend (`pipe:NAME`): a port to another process through shared memory, as
//! netmap's pipes give one. The first process to open `pipe:NAME` makes it, the second is
//! its other end; what one sends, the other receives, with no system call and no copy.
//!
//! The two ends share one area of frames, half owned by each. A packet goes across as a
//! descriptor on the sender's ring of packets; the receiver hands the frame back on its
//! owner's ring of frames going home when it is done with it, or sends it on across the
//! pipe again (l2fwd on a pipe moves descriptors too). Everything the other process puts in
//! a ring is checked before use (DESIGN rule 6): a frame must be one that side may hand us,
//! at that moment. A process may leave and another take its place: the end that stayed
//! empties the rings and takes its frames back when the newcomer asks.
//!
//! The trust is not the kernel's: the other process can write the frames it handed over
//! while we read them, and one that shrinks the file under /dev/shm kills us with SIGBUS
//! (the file is 0600, so only its owner, or root, can): a pipe joins two processes that
//! already trust each other that far.

mod shm;

use std::os::fd::RawFd;
use std::time::Duration;

use wirespeed_ring::{Consumer, Producer};
use wirespeed_umem::FramePool;

use crate::{
    Backend, Batch, FrameAudit, Port, PortError, PortInfo, PortOptions, PortSpec, PortStats,
};
use shm::{CONTINUES, Config, PipeDesc, Shared};

/// The most frames one packet may span on a pipe (the bound of a `Batch` chain).
const MAX_SEGMENTS: usize = crate::MAX_SEGMENTS;

/// Empty receive polls before asking the sender for a wakeup: a receiver that keeps up
/// with a fast sender finds the ring empty now and then, and should not cost the sender a
/// system call each time.
const EMPTY_POLLS_BEFORE_WAKEUP: u32 = 16;

/// Where one of our own frames is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Own {
    Pool,
    /// Received or allocated: the application has it.
    App,
    /// With the other end: on its way, in its hands, or on its way home.
    Away,
}

/// Whether we hold one of the other end's frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    No,
    Yes,
    /// Received from a process that has left: never to be handed back.
    Orphan,
}

/// A frame address, classified.
enum Frame {
    Own(usize),
    Peer(usize),
}

/// One end of a pipe.
pub struct PipePort {
    info: PortInfo,
    // The ring ends come before `shm`: they unmap after it detaches.
    /// Packets we send.
    tx: Producer<PipeDesc>,
    /// Packets the other end sends.
    rx: Consumer<PipeDesc>,
    /// The other end's frames, going back to it.
    give: Producer<u64>,
    /// Our frames, coming back.
    back: Consumer<u64>,
    shm: Shared,
    frame_size: u32,
    /// log2 of the frame size (a power of two): frame numbers by shift, not division, which
    /// costs tens of cycles a packet.
    frame_shift: u32,
    headroom: u32,
    /// Index of our first frame, and of the other end's.
    own_first: usize,
    peer_first: usize,
    /// Frames each end owns.
    half: usize,
    pool: FramePool,
    own: Vec<Own>,
    held: Vec<Held>,
    /// Our frames the application has, and those with the other end.
    app_held: u64,
    away: u64,
    /// Frames to hand back, gathered over a burst.
    going_home: Vec<u64>,
    stats: PortStats,
    empty_polls: u32,
    asked_wakeup: bool,
    /// The application takes packets of several frames (`PortOptions::multi_buffer`).
    chains: bool,
    /// A received chain was too long: descriptors are dropped up to the one that ends it.
    rx_resync: bool,
}

impl PipePort {
    pub fn open(spec: &PortSpec, opts: &PortOptions) -> Result<PipePort, PortError> {
        let name = spec.iface.as_str();
        let wanted = Config {
            frame_size: opts.frame_size,
            frame_count: opts.frame_count,
            data_ring: opts.ring_size,
        };
        let shm = Shared::open(name, wanted)?;
        let config = shm.config();
        // The frame size may be the other end's choice.
        if opts.headroom >= config.frame_size / 2 {
            return Err(PortError::Unsupported(format!(
                "pipe:{name}: headroom {} leaves too little of a {}-byte frame",
                opts.headroom, config.frame_size
            )));
        }
        let mut notes = option_notes(opts);
        if config != wanted {
            notes.push(format!(
                "pipe:{name}: the process at its other end (pid {}) made it with {} frames of \
                 {} bytes and {}-entry rings, which this end takes",
                shm.peer_pid(),
                config.frame_count,
                config.frame_size,
                config.data_ring
            ));
        }
        let end = shm.end();
        let half = config.frame_count as usize / 2;
        let own_first = end * half;
        let size = u64::from(config.frame_size);
        debug_assert!(config.frame_size.is_power_of_two());
        Ok(PipePort {
            info: PortInfo {
                spec: spec.to_string(),
                backend: Backend::Pipe,
                mode: "shm".to_string(),
                notes,
                busy_poll: false,
                multi_buffer: opts.multi_buffer.then_some(MAX_SEGMENTS as u32),
            },
            tx: Producer::new(shm.data_ring(end)),
            rx: Consumer::new(shm.data_ring(1 - end)),
            give: Producer::new(shm.home_ring(1 - end)),
            back: Consumer::new(shm.home_ring(end)),
            frame_size: config.frame_size,
            frame_shift: config.frame_size.trailing_zeros(),
            headroom: opts.headroom,
            own_first,
            peer_first: (1 - end) * half,
            half,
            pool: FramePool::new((own_first..own_first + half).rev().map(|i| i as u64 * size)),
            own: vec![Own::Pool; half],
            held: vec![Held::No; half],
            app_held: 0,
            away: 0,
            going_home: Vec::with_capacity(256),
            stats: PortStats::default(),
            empty_polls: 0,
            asked_wakeup: false,
            chains: opts.multi_buffer,
            rx_resync: false,
            shm,
        })
    }

    /// Which end of the pipe this is (0: the one that made it, unless it has left).
    pub fn end(&self) -> usize {
        self.shm.end()
    }

    /// A packet of `len` bytes at `addr` that fits in one frame, and whose frame that is.
    #[inline]
    fn classify(&self, addr: u64, len: u32) -> Option<Frame> {
        let size = u64::from(self.frame_size);
        let index = (addr >> self.frame_shift) as usize;
        if len == 0 || (addr & (size - 1)) + u64::from(len) > size {
            return None;
        }
        if (self.own_first..self.own_first + self.half).contains(&index) {
            Some(Frame::Own(index - self.own_first))
        } else if (self.peer_first..self.peer_first + self.half).contains(&index) {
            Some(Frame::Peer(index - self.peer_first))
        } else {
            None
        }
    }

    fn frame_addr(&self, first: usize, i: usize) -> u64 {
        ((first + i) as u64) << self.frame_shift
    }

    /// One of our frames back in the pool.
    fn pool_frame(&mut self, i: usize) {
        self.own[i] = Own::Pool;
        self.pool.free(self.frame_addr(self.own_first, i));
    }

    /// Takes back our frames the other end is done with.
    fn take_back(&mut self) {
        let n = self.back.peek(self.back.size());
        for k in 0..n {
            let addr = self.back.read(k);
            match self.classify(addr, 1) {
                Some(Frame::Own(i)) if self.own[i] == Own::Away => {
                    self.away -= 1;
                    self.pool_frame(i);
                }
                _ => self.stats.drops.rx_invalid_desc += 1,
            }
        }
        if n > 0 {
            self.back.release(n);
        }
    }

    /// Hands back the other end's frames gathered in `going_home`.
    fn send_home(&mut self) {
        if self.going_home.is_empty() {
            return;
        }
        // The ring holds every frame the other end owns, so it has room unless that end
        // broke the protocol; what does not fit is its loss.
        let n = self.give.reserve(self.going_home.len() as u32);
        for (k, addr) in self.going_home.iter().take(n as usize).enumerate() {
            self.give.write(k as u32, *addr);
        }
        self.give.submit(n);
        self.going_home.clear();
    }

    /// A new process at the other end waits: empty the rings, take our frames back, and
    /// forget the ones the last process left with us.
    fn take_new_peer(&mut self) {
        if !self.shm.join_requested() {
            return;
        }
        self.shm.reset_rings();
        let end = self.shm.end();
        self.tx = Producer::new(self.shm.data_ring(end));
        self.rx = Consumer::new(self.shm.data_ring(1 - end));
        self.give = Producer::new(self.shm.home_ring(1 - end));
        self.back = Consumer::new(self.shm.home_ring(end));
        for i in 0..self.half {
            if self.own[i] == Own::Away {
                self.pool_frame(i);
            }
            if self.held[i] == Held::Yes {
                self.held[i] = Held::Orphan;
            }
        }
        self.away = 0;
        self.going_home.clear();
        self.asked_wakeup = false;
        self.empty_polls = 0;
        self.shm.answer_join();
    }

    /// Takes a received segment: true when its frame is one the other end may hand us now
    /// (then it is ours to hold), false when it is not (then it is left alone).
    fn claim(&mut self, addr: u64, len: u32) -> bool {
        match self.classify(addr, len) {
            Some(Frame::Peer(i)) if self.held[i] == Held::No => {
                self.held[i] = Held::Yes;
                true
            }
            // One of ours, sent back across.
            Some(Frame::Own(i)) if self.own[i] == Own::Away => {
                self.own[i] = Own::App;
                self.away -= 1;
                self.app_held += 1;
                true
            }
            _ => false,
        }
    }

    /// Gives up a frame the application holds: ours to the pool, the other end's home.
    fn give_up(&mut self, addr: u64, len: u32) {
        match self.classify(addr, len.max(1)) {
            Some(Frame::Own(i)) if self.own[i] == Own::App => {
                self.app_held -= 1;
                self.pool_frame(i);
            }
            Some(Frame::Peer(i)) if self.held[i] == Held::Yes => {
                self.held[i] = Held::No;
                self.going_home.push(self.frame_addr(self.peer_first, i));
            }
            Some(Frame::Peer(i)) if self.held[i] == Held::Orphan => self.held[i] = Held::No,
            _ => {}
        }
    }

    /// Takes up to `n` received descriptors whose packets may span several (see
    /// `rx_burst`); returns how many packets went into `batch`.
    fn rx_chains(&mut self, batch: &mut Batch, n: u32) -> usize {
        let mut count = 0;
        let mut done = 0;
        let mut segs = [(0u64, 0u32); MAX_SEGMENTS];
        while done < n {
            let first = self.rx.read(done);
            if self.rx_resync {
                if self.claim(first.addr, first.len) {
                    self.give_up(first.addr, first.len);
                }
                self.rx_resync = first.flags & CONTINUES != 0;
                done += 1;
                continue;
            }
            // Where the packet ends, reading no further than a packet may go.
            let mut k = 0;
            let ends = loop {
                if done + k as u32 == n || k == MAX_SEGMENTS {
                    break false;
                }
                let d = self.rx.read(done + k as u32);
                segs[k] = (d.addr, d.len);
                k += 1;
                if d.flags & CONTINUES == 0 {
                    break true;
                }
            };
            if !ends && k < MAX_SEGMENTS {
                // Cut by the window: taken whole once the rest is read.
                break;
            }
            if !ends || (k > 1 && !self.chains) {
                // Longer than any packet, or several frames for an application that takes
                // one: dropped, every frame that was lent sent home.
                for &(addr, len) in &segs[..k] {
                    if self.claim(addr, len) {
                        self.give_up(addr, len);
                    }
                }
                self.stats.drops.rx_bad_chain += 1;
                self.rx_resync = !ends;
                done += k as u32;
                continue;
            }
            if batch.room() == 0 || batch.tail_room() < k - 1 {
                break;
            }
            // Every frame lent is taken, so that each goes home even when the packet is
            // dropped for another segment.
            let mut claimed = [false; MAX_SEGMENTS];
            for (c, &(addr, len)) in claimed.iter_mut().zip(&segs[..k]) {
                *c = self.claim(addr, len);
            }
            done += k as u32;
            if claimed[..k].contains(&false) {
                for (&(addr, len), _) in segs[..k].iter().zip(claimed).filter(|(_, c)| *c) {
                    self.give_up(addr, len);
                }
                self.stats.drops.rx_invalid_desc += 1;
                continue;
            }
            match k {
                1 => batch.push(segs[0].0, segs[0].1),
                _ => batch.push_chain(&segs[..k]),
            };
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += segs[..k].iter().map(|&(_, l)| u64::from(l)).sum::<u64>();
            count += 1;
        }
        self.rx.release(done);
        self.send_home();
        count
    }

    /// `tx_burst` of a batch holding chains: each goes across whole or not at all.
    fn tx_chains(&mut self, batch: &mut Batch) -> usize {
        let room = self.tx.reserve(batch.frames() as u32);
        let mut put = 0u32;
        let mut sent = 0;
        // Once a packet did not fit, the later ones wait behind it (their order is kept).
        let mut full = false;
        for i in 0..batch.len() {
            let segments = batch.more(i) + 1;
            let sendable = batch
                .segments(i)
                .all(|(addr, len)| match self.classify(addr, len) {
                    Some(Frame::Own(f)) => self.own[f] == Own::App,
                    Some(Frame::Peer(f)) => self.held[f] == Held::Yes,
                    None => false,
                });
            full |= sendable && put + segments as u32 > room;
            let fits = !full;
            if !sendable || !fits || (segments > 1 && !self.chains) {
                for (addr, len) in batch.segments(i) {
                    self.give_up(addr, len);
                }
                match (sendable, fits) {
                    (false, _) => self.stats.drops.tx_invalid_desc += 1,
                    _ if segments > 1 && !self.chains => self.stats.drops.tx_bad_chain += 1,
                    _ => self.stats.drops.tx_ring_full += 1,
                }
                continue;
            }
            for (j, (addr, len)) in batch.segments(i).enumerate() {
                match self.classify(addr, len) {
                    Some(Frame::Own(f)) => {
                        self.own[f] = Own::Away;
                        self.app_held -= 1;
                        self.away += 1;
                    }
                    Some(Frame::Peer(f)) => self.held[f] = Held::No,
                    None => {}
                }
                let flags = if j + 1 < segments { CONTINUES } else { 0 };
                self.tx.write(put, PipeDesc { addr, len, flags });
                put += 1;
            }
            sent += 1;
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += u64::from(batch.packet_len(i));
        }
        batch.clear();
        self.publish_tx(put);
        sent
    }

    /// After a send: hands home what the burst gave up, and publishes the `put` descriptors
    /// written, waking the other end if it sleeps.
    fn publish_tx(&mut self, put: u32) {
        self.send_home();
        if put > 0 {
            self.tx.submit(put);
            if self.tx.needs_wakeup_after_submit() {
                self.shm.ring_peer();
            }
        }
    }

    fn ask_wakeup(&mut self) {
        if !self.asked_wakeup {
            self.rx.set_needs_wakeup(true);
            self.asked_wakeup = true;
        }
    }
}

impl Port for PipePort {
    fn info(&self) -> &PortInfo {
        &self.info
    }

    fn rx_burst(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        // A packet may span several descriptors: enough of them for the batch's tails too.
        let n = self.rx.peek((batch.room() + batch.tail_room()) as u32);
        if n == 0 {
            self.empty_polls = self.empty_polls.saturating_add(1);
            if self.empty_polls >= EMPTY_POLLS_BEFORE_WAKEUP {
                self.ask_wakeup();
            }
            self.take_new_peer();
            return Ok(0);
        }
        self.empty_polls = 0;
        if self.asked_wakeup {
            self.rx.set_needs_wakeup(false);
            self.asked_wakeup = false;
        }
        Ok(self.rx_chains(batch, n))
    }

    fn tx_burst(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        if batch.has_chains() {
            return Ok(self.tx_chains(batch));
        }
        let room = self.tx.reserve(batch.len() as u32);
        let mut put = 0;
        for (addr, len) in batch.iter() {
            let fits = put < room;
            match self.classify(addr, len) {
                Some(Frame::Own(i)) if self.own[i] == Own::App => {
                    self.app_held -= 1;
                    if fits {
                        self.own[i] = Own::Away;
                        self.away += 1;
                    } else {
                        self.pool_frame(i);
                    }
                }
                Some(Frame::Peer(i)) if self.held[i] == Held::Yes => {
                    self.held[i] = Held::No;
                    if !fits {
                        self.going_home.push(self.frame_addr(self.peer_first, i));
                    }
                }
                Some(Frame::Peer(i)) if self.held[i] == Held::Orphan => {
                    self.held[i] = Held::No;
                    self.stats.drops.tx_error += 1;
                    continue;
                }
                _ => {
                    self.stats.drops.tx_invalid_desc += 1;
                    continue;
                }
            }
            if !fits {
                self.stats.drops.tx_ring_full += 1;
                continue;
            }
            self.tx.write(
                put,
                PipeDesc {
                    addr,
                    len,
                    flags: 0,
                },
            );
            put += 1;
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += u64::from(len);
        }
        batch.clear();
        self.publish_tx(put);
        Ok(put as usize)
    }

    fn release(&mut self, batch: &mut Batch) {
        for i in 0..batch.len() {
            for (addr, len) in batch.segments(i) {
                self.give_up(addr, len);
            }
        }
        batch.clear();
        self.send_home();
    }

    fn alloc_tx(&mut self, batch: &mut Batch, n: usize, len: u32) -> usize {
        if self.chains && len > self.max_packet_len() {
            return self.alloc_chains(batch, n, len);
        }
        if len == 0 || len > self.max_packet_len() {
            return 0;
        }
        // No more than the ring has room for now (the other end is behind otherwise).
        let n = n.min(self.tx.free(n as u32) as usize);
        if self.pool.len() < n {
            self.take_back();
        }
        let mut count = 0;
        while count < n && batch.room() > 0 {
            let Some(addr) = self.pool.alloc() else { break };
            let i = (addr >> self.frame_shift) as usize - self.own_first;
            self.own[i] = Own::App;
            self.app_held += 1;
            batch.push(addr + u64::from(self.headroom), len);
            count += 1;
        }
        count
    }

    fn packet(&self, addr: u64, len: u32) -> &[u8] {
        match self.classify(addr, len.max(1)) {
            Some(_) => self.shm.bytes(addr, len),
            None => &[],
        }
    }

    fn packet_mut(&mut self, addr: u64, len: u32) -> &mut [u8] {
        match self.classify(addr, len.max(1)) {
            Some(_) => self.shm.bytes_mut(addr, len),
            None => &mut [],
        }
    }

    fn max_packet_len(&self) -> u32 {
        self.frame_size - self.headroom
    }

    fn max_chain_len(&self) -> u32 {
        match self.chains {
            true => MAX_SEGMENTS as u32 * self.max_packet_len(),
            false => self.max_packet_len(),
        }
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.take_new_peer();
        self.take_back();
        Ok(())
    }

    fn wait_rx(&mut self, timeout: Duration) -> Result<(), PortError> {
        self.take_new_peer();
        self.ask_wakeup();
        if self.rx.peek(1) > 0 {
            return Ok(());
        }
        let woken = crate::poll_any(&[self.shm.bell_fd()], timeout);
        self.shm.drain_bell();
        woken.map(|_| ()).map_err(|source| PortError::Io {
            iface: self.info.spec.clone(),
            what: "poll",
            source,
        })
    }

    fn poll_fds(&self) -> Vec<RawFd> {
        vec![self.shm.bell_fd()]
    }

    fn tx_pending(&self) -> bool {
        self.tx.pending() > 0
    }

    fn stats(&mut self) -> PortStats {
        self.stats
    }

    fn audit(&self) -> Option<FrameAudit> {
        Some(FrameAudit {
            total: self.half as u64,
            pool: self.pool.len() as u64,
            application: self.app_held,
            // With the other end: in its ring, in its hands, or on the way home.
            tx: self.away,
            ..FrameAudit::default()
        })
    }
}

impl PipePort {
    /// `alloc_tx` of packets longer than a frame: chains of frames, each filled after the
    /// headroom.
    fn alloc_chains(&mut self, batch: &mut Batch, n: usize, len: u32) -> usize {
        let seg = self.max_packet_len();
        if len > self.max_chain_len() {
            return 0;
        }
        let k = len.div_ceil(seg) as usize;
        let n = n.min(self.tx.free((n * k) as u32) as usize / k);
        if self.pool.len() < n * k {
            self.take_back();
        }
        let mut segs = [(0u64, 0u32); MAX_SEGMENTS];
        let mut count = 0;
        while count < n && batch.room() > 0 && batch.tail_room() >= k - 1 && self.pool.len() >= k {
            for (j, s) in segs[..k].iter_mut().enumerate() {
                let addr = self.pool.alloc().unwrap_or_default();
                let i = (addr >> self.frame_shift) as usize - self.own_first;
                self.own[i] = Own::App;
                self.app_held += 1;
                *s = (
                    addr + u64::from(self.headroom),
                    (len - j as u32 * seg).min(seg),
                );
            }
            batch.push_chain(&segs[..k]);
            count += 1;
        }
        count
    }
}

/// Options that mean nothing to this backend, said once rather than ignored silently.
fn option_notes(opts: &PortOptions) -> Vec<String> {
    let mut notes = Vec::new();
    if opts.hugepages {
        notes.push("hugepages: not used by the pipe backend (its frames are in /dev/shm)".into());
    }
    if opts.busy_poll {
        notes.push("busy poll: a pipe has no kernel side to busy-poll".to_string());
    }
    notes
}
