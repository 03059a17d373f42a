//! A poll-mode thread: it owns the ports of one receive queue (a [`PortSet`]) and its own
//! [`FlowCache`], and loops: receive a burst on each port, run every frame through the
//! datapath ([`process`]: its cache, and the bridge's [`SharedState`] only when a burst
//! needs it), queue it where it goes (a descriptor move inside the UMEM, a copy otherwise),
//! send, and back off as every tool does when the ports give less than they can
//! ([`wirespeed_port::Idle`]: nap, then sleep in poll() after a millisecond of nothing).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use wirespeed_metrics::{Published, ThreadFigures};
use wirespeed_packet::checksum;
use wirespeed_port::{
    Batch, FrameAudit, Idle, MAX_SEGMENTS, PortError, PortInfo, PortStats, Step, ThreadClock, Waker,
};

use crate::dpif::figures::PmdFigures;
use crate::dpif::flow_cache::FlowCache;
use crate::dpif::packet_in::PacketInSink;
use crate::dpif::port_set::{LONGEST_PACKET, PortSet, Source};
use crate::dpif::process::{
    BurstLock, execute_given, may_complete_checksum, process, process_tunnelled,
};
use crate::dpif::thread_cache::ThreadCache;
pub use crate::dpif::thread_cache::lock;
use crate::dpif::upcall::SharedState;
use crate::execute::{DropCounters, DropReason, Verdict, controller_limit};
use crate::field::TunnelMeta;
use crate::field::TunnelOut;
use crate::frame::{Frame, Tail};
use crate::mac_learning::mac_view::MacView;
use crate::tunnel::{TunnelFigures, TunnelPlane};

mod tunnel_io;
use tunnel_io::Inner;

/// Bursts between looks at the request channel and the stop flag.
const CONTROL_EVERY: u32 = 64;
/// How often a thread publishes its figures for a scrape (when it looks at its requests).
const PUBLISH_EVERY: Duration = Duration::from_millis(100);
/// Room in front of a packet copied out of another backend's buffer, for a VLAN push.
const COPY_HEADROOM: usize = 64;
/// Largest packet a copy holds (a jumbo frame).
const COPY_MAX: usize = 9216;

/// What a poll-mode thread reaches beyond its own ports. Its cache is its own; it holds
/// the cache's lock through each round of bursts, and the control side takes it between
/// rounds to harvest and revalidate the cache ([`ThreadCache`]). The rest is the bridge's,
/// locked only when needed.
pub struct Shared {
    pub cache: Arc<ThreadCache>,
    /// What the bridge's threads share (the rules, the learning table, the offload).
    pub state: Arc<Mutex<dyn SharedState + Send>>,
    pub controller: Arc<Mutex<Box<dyn PacketInSink>>>,
    /// The bridge's ports, sorted (a copy of the datapath's, which do not change).
    pub ports: Vec<u32>,
    /// The bridge offloads flows to the kernel.
    pub offload: bool,
    /// The thread's view of the learning table.
    pub macs: MacView,
}

/// One round of bursts: the thread's cache, locked for it, and the shared state as far as
/// it was needed.
struct Round<'a> {
    cache: MutexGuard<'a, FlowCache>,
    shared: BurstLock<'a>,
    controller: &'a Mutex<Box<dyn PacketInSink>>,
}

impl<'a> Round<'a> {
    /// Locks the thread's cache for a round; the shared state stays unlocked until needed.
    fn new(shared: &'a mut Shared) -> Round<'a> {
        Round {
            cache: shared.cache.for_round(),
            shared: BurstLock::new(
                &shared.state,
                &mut shared.macs,
                &shared.ports,
                shared.offload,
            ),
            controller: &shared.controller,
        }
    }
}

/// Switch-level counters on top of the ports' own.
#[derive(Debug, Default, Clone, Copy)]
pub struct BridgeCounters {
    /// Frames the datapath decided not to send, by reason.
    pub drops: DropCounters,
    /// Output to a port number the bridge does not have.
    pub unknown_port: u64,
    /// No free frame or slot for a copy (several outputs, a rewrite between outputs, or
    /// a port of another backend).
    pub no_frame: u64,
    /// Packets handed to the controller.
    pub to_controller: u64,
}

impl BridgeCounters {
    pub fn add(&mut self, other: &BridgeCounters) {
        self.drops.add(&other.drops);
        self.unknown_port += other.unknown_port;
        self.no_frame += other.no_frame;
        self.to_controller += other.to_controller;
    }
}

/// One thread's view, for `dump-ports`, `show` and the exit summary.
#[derive(Debug, Clone)]
pub struct PmdSnapshot {
    pub cpu: Option<usize>,
    /// The thread's CPU time over its wall time since it started (0 before it runs).
    pub busy: f64,
    /// Info and counters of each port, in the bridge's order; `receives` says whether this
    /// thread receives on it.
    pub ports: Vec<(PortInfo, PortStats, bool)>,
    pub counters: BridgeCounters,
    pub audit: Option<FrameAudit>,
    /// The tunnel ports' counters in this thread (empty without tunnels).
    pub tunnels: TunnelFigures,
}

/// What the control side can ask of a running thread.
pub enum PmdRequest {
    Snapshot(Sender<PmdSnapshot>),
    /// Send a packet: run `actions` on `data` as if it came in on `in_port`.
    PacketOut {
        in_port: u32,
        data: Vec<u8>,
        actions: Vec<crate::Action>,
    },
    /// Answer once every request before this one is done.
    Sync(Sender<()>),
    /// Bind port `member` (in the bridge's order), whose interface was deleted, to the
    /// interface made since under its name, index `ifindex` (`PortSet::rejoin`).
    Rejoin {
        member: usize,
        ifindex: u32,
        done: Sender<Result<(), PortError>>,
    },
}

/// A poll-mode thread's state; `run` consumes it on its thread and gives it back at exit.
pub struct Pmd {
    ports: PortSet,
    cpu: Option<usize>,
    clock: Instant,
    rx: Batch,
    verdict: Verdict,
    /// Frames `emit` produced during one packet (rewrites between outputs).
    emitted: Emitted,
    /// A packet from another backend, copied out with headroom in front.
    scratch: Vec<u8>,
    /// A copy of a chain's packet made whole (the head as `emit` kept it, then the tails).
    chain_bytes: Vec<u8>,
    pub counters: BridgeCounters,
    /// The thread's side of the bridge's tunnel ports, if it has any.
    tunnels: Option<TunnelPlane>,
    /// Where a copy for a tunnel port is pushed (outer headers, then the inner frame).
    encap: Vec<u8>,
    /// How the thread backs off when its ports give less than a burst, and how many ports
    /// brought packets in the last round (its room: see [`round_room`]).
    idle: Idle,
    ports_with_packets: usize,
    /// Since the thread started (set on it), and its busy share when it stopped.
    cpu_clock: Option<ThreadClock>,
    busy_at_stop: Option<f64>,
    /// Rounds that brought packets, and the packets they brought.
    bursts: u64,
    burst_packets: u64,
    /// Where the thread's figures go for a scrape, and when they last went.
    published: Published<PmdFigures>,
    last_published: Option<Instant>,
}

impl Pmd {
    /// A thread over `ports`, pinned to `cpu` when it runs; `clock` is the bridge's.
    pub fn new(
        ports: PortSet,
        cpu: Option<usize>,
        clock: Instant,
        burst: usize,
        idle: Idle,
    ) -> Pmd {
        Pmd {
            ports,
            cpu,
            clock,
            rx: Batch::with_capacity(burst),
            verdict: Verdict::default(),
            emitted: Emitted::with_capacity(),
            scratch: vec![0; COPY_HEADROOM + COPY_MAX],
            // The longest packet there is, so making a copy whole never allocates.
            chain_bytes: Vec::with_capacity(LONGEST_PACKET),
            counters: BridgeCounters::default(),
            tunnels: None,
            encap: Vec::new(),
            idle,
            ports_with_packets: 0,
            cpu_clock: None,
            busy_at_stop: None,
            bursts: 0,
            burst_packets: 0,
            published: Published::new(),
            last_published: None,
        }
    }

    /// Where the thread publishes its figures (a scrape reads them).
    pub fn published(&self) -> Published<PmdFigures> {
        self.published.clone()
    }

    /// Offers the thread's figures for a scrape, at most every [`PUBLISH_EVERY`]; skipped
    /// while a scrape is reading the last ones (`try_lock`), so it never waits for one.
    fn publish(&mut self, shared: &Shared, now: Instant) {
        if self
            .last_published
            .is_some_and(|at| now.duration_since(at) < PUBLISH_EVERY)
        {
            return;
        }
        self.last_published = Some(now);
        let Some(clock) = self.cpu_clock else {
            return;
        };
        // The thread's own cache: the lock it takes for every round anyway.
        let (cache, megaflows) = {
            let cache = shared.cache.for_round();
            (cache.stats, cache.megaflows().count())
        };
        let ports: Vec<PortStats> = (0..self.ports.len()).map(|m| self.ports.stats(m)).collect();
        let tunnels = self.tunnel_figures();
        let figures = || PmdFigures {
            cpu: self.cpu,
            time: ThreadFigures {
                busy: clock.cpu(),
                wall: clock.wall(),
                bursts: self.bursts,
                burst_packets: self.burst_packets,
            },
            ports,
            audit: self.ports.audit(),
            counters: self.counters,
            cache,
            megaflows,
            tunnels,
        };
        self.published.offer(figures);
    }

    /// Binds port `member`, whose interface was deleted, to the interface made since under
    /// its name (the bridge asks every thread, then marks the port up).
    pub fn rejoin(&mut self, member: usize, ifindex: u32) -> Result<(), PortError> {
        self.ports.rejoin(member, ifindex)
    }

    pub fn snapshot(&mut self) -> PmdSnapshot {
        let ports = (0..self.ports.len())
            .map(|m| {
                (
                    self.ports.info(m).clone(),
                    self.ports.stats(m),
                    self.ports.receives(m),
                )
            })
            .collect();
        // On the thread while it runs; its figure at the stop after.
        let busy = self
            .busy_at_stop
            .or_else(|| self.cpu_clock.map(|c| c.busy()))
            .unwrap_or(0.0);
        PmdSnapshot {
            cpu: self.cpu,
            busy,
            ports,
            counters: self.counters,
            audit: self.ports.audit(),
            tunnels: self.tunnel_figures(),
        }
    }

    fn tunnel_figures(&self) -> TunnelFigures {
        self.tunnels
            .as_ref()
            .map(TunnelPlane::figures)
            .unwrap_or_default()
    }

    /// Pins the thread to its CPU (if it has one), then polls until `stop` is set.
    pub fn run(
        mut self,
        shared: &mut Shared,
        (requests, waker): (&Receiver<PmdRequest>, Option<&Waker>),
        stop: &AtomicBool,
    ) -> Result<Pmd, PortError> {
        if let Some(cpu) = self.cpu {
            wirespeed_port::pin_thread(cpu)?;
        }
        self.cpu_clock = Some(ThreadClock::start());
        let mut turns = 0u32;
        loop {
            // A few atomic loads a round: a port that came up is used from its next packet.
            self.ports.sync_links();
            let moved = self.poll_once(shared)?;
            if moved > 0 {
                self.bursts += 1;
                self.burst_packets += moved as u64;
            }
            turns += 1;
            if moved == 0 || turns >= CONTROL_EVERY {
                turns = 0;
                self.publish(shared, Instant::now());
                // Silenced before the look: a request queued after it rings again.
                if let Some(waker) = waker {
                    waker.clear();
                }
                while let Ok(request) = requests.try_recv() {
                    match request {
                        PmdRequest::Snapshot(reply) => {
                            let _ = reply.send(self.snapshot());
                        }
                        PmdRequest::PacketOut {
                            in_port,
                            data,
                            actions,
                        } => self.packet_out(shared, in_port, &data, &actions)?,
                        PmdRequest::Sync(done) => {
                            let _ = done.send(());
                        }
                        PmdRequest::Rejoin {
                            member,
                            ifindex,
                            done,
                        } => {
                            let _ = done.send(self.rejoin(member, ifindex));
                        }
                    }
                }
                if stop.load(Ordering::Relaxed) {
                    // The last figures, whatever the time since the others.
                    self.last_published = None;
                    self.publish(shared, Instant::now());
                    self.busy_at_stop = self.cpu_clock.map(|c| c.busy());
                    return Ok(self);
                }
            }
            let room = round_room(self.rx.capacity(), self.ports_with_packets);
            match self.idle.after_burst(moved, room) {
                Step::Spin => {}
                Step::Nap(d) => std::thread::sleep(d),
                Step::Sleep(d) => self.ports.wait_rx_any(d, waker)?,
            }
        }
    }

    /// One burst from every port this thread receives on, through the datapath and out;
    /// returns the frames received.
    pub fn poll_once(&mut self, shared: &mut Shared) -> Result<usize, PortError> {
        let mut round = Round::new(shared);
        // Read after the cache: a round that waited for the control side is timed after it.
        let now = self.clock.elapsed();
        let mut received = 0;
        self.ports_with_packets = 0;
        for member in 0..self.ports.len() {
            if !self.ports.receives(member) {
                self.ports.flush(member)?;
                continue;
            }
            if self.ports.rx_burst(member, &mut self.rx)? == 0 {
                self.ports.flush(member)?;
                continue;
            }
            received += self.rx.len();
            self.ports_with_packets += 1;
            let in_port = self.ports.number(member);
            // A burst without chains never looks at a packet's segments.
            let chains = self.rx.has_chains();
            let underlay = self.is_underlay(in_port);
            let umem = self.ports.source(member) == Source::Umem;
            for i in 0..self.rx.len() {
                let (addr, len) = (self.rx.addr(i), self.rx.frame_len(i));
                // The next packet's head on its way into the cache while this one is processed.
                if umem && i + 1 < self.rx.len() {
                    self.ports.prefetch_umem(self.rx.addr(i + 1));
                }
                match self.ports.source(member) {
                    Source::Umem if !chains || self.rx.more(i) == 0 => {
                        self.receive_umem(underlay, in_port, &mut [(addr, len)], now, &mut round)?
                    }
                    // A packet larger than a frame (multi-buffer): its segments, head first.
                    Source::Umem => {
                        let mut chain = [(0u64, 0u32); MAX_SEGMENTS];
                        let n = self.rx.more(i) + 1;
                        for (slot, segment) in chain.iter_mut().zip(self.rx.segments(i)) {
                            *slot = segment;
                        }
                        self.receive_umem(underlay, in_port, &mut chain[..n], now, &mut round)?
                    }
                    // Other backends deliver single frames.
                    Source::Own => {
                        self.forward_copy(member, in_port, addr, len, now, &mut round)?
                    }
                }
            }
            self.send_too_big_answers(now, &mut round)?;
            round.shared.release();
            match self.ports.source(member) {
                // Every UMEM frame was queued or freed one by one.
                Source::Umem => self.rx.clear(),
                Source::Own => self.ports.release_rx(member, &mut self.rx),
            }
            self.ports.send_all()?;
        }
        round.cache.stats.shared_bursts += round.shared.taken();
        Ok(received)
    }

    /// A packet received in the UMEM on `in_port`: to the tunnels first when the port is an
    /// `underlay`, else straight through the datapath.
    #[inline]
    fn receive_umem(
        &mut self,
        underlay: bool,
        in_port: u32,
        segments: &mut [(u64, u32)],
        now: Duration,
        round: &mut Round<'_>,
    ) -> Result<(), PortError> {
        match underlay {
            false => self.forward_in_place(in_port, segments, None, now, round),
            true => self.receive_on_underlay(in_port, segments, now, round),
        }
    }

    /// A packet in the UMEM (`segments`: its frame, or the frames of a chain, head first):
    /// processed where it lies, headers in the head; the last AF_XDP output gets the packet
    /// itself (its descriptors move: netmap's swap), the others copies.
    fn forward_in_place(
        &mut self,
        in_port: u32,
        segments: &mut [(u64, u32)],
        tunnel: Option<&TunnelMeta>,
        now: Duration,
        round: &mut Round<'_>,
    ) -> Result<(), PortError> {
        let (addr, len) = segments[0];
        let tail = match segments.len() {
            1 => Tail::default(),
            _ => self.tail_of(segments),
        };
        let base = self.ports.umem_frame_base(addr);
        let (start, new_len) = {
            let (whole, offset) = self.ports.umem_frame_mut(addr);
            let Some(frame) = Frame::new(whole, offset, len as usize) else {
                self.ports.free_umem(segments);
                return Ok(());
            };
            let mut frame = frame.with_tail(tail);
            decide(
                round,
                &mut frame,
                in_port,
                tunnel,
                now,
                &mut self.verdict,
                &mut self.emitted,
            )
        };
        // The head as the actions left it (a VLAN tag pushed or popped moves its start).
        segments[0] = (base + start as u64, new_len as u32);
        let segments = &*segments;
        self.after_process(in_port, round, PacketPlace::Umem(segments))?;
        let outputs = self.verdict.outputs;
        let ports = outputs.as_slice();
        // A tunnel port's packet moves to its underlay, an AF_XDP port.
        let last_moved = ports.iter().rposition(|&p| match self.ports.member_of(p) {
            Some(m) => self.ports.is_group_member(m),
            None => self.tunnel_of(p).is_some(),
        });
        for (i, &port) in ports.iter().enumerate() {
            if controller_limit(port).is_some() {
                continue; // handed to the controller in after_process
            }
            let Some(member) = self.ports.member_of(port) else {
                match self.tunnel_of(port) {
                    Some(t) => self.push_in_place(t, segments, Some(i) == last_moved, now)?,
                    None => self.counters.unknown_port += 1,
                }
                continue;
            };
            let queued = if Some(i) == last_moved {
                self.ports.queue_move(member, segments)?
            } else {
                self.ports.queue_duplicate(member, segments)?
            };
            if !queued {
                self.counters.no_frame += 1;
            }
        }
        if last_moved.is_none() {
            self.ports.free_umem(segments);
        }
        Ok(())
    }

    /// The continuation segments of a chain (`segments`, head first) as the datapath needs
    /// them: their length, and their sum when the head is one whose transport checksum may
    /// need completing (the only time the datapath reads past the head).
    #[inline(never)]
    fn tail_of(&self, segments: &[(u64, u32)]) -> Tail {
        let (&(addr, len), tails) = segments.split_first().expect("a head segment");
        let sum = may_complete_checksum(self.ports.umem_packet(addr, len)).then(|| {
            checksum::data_chained(
                tails
                    .iter()
                    .map(|&(addr, len)| self.ports.umem_packet(addr, len)),
            )
        });
        Tail {
            len: tails.iter().map(|&(_, len)| len as usize).sum(),
            sum,
        }
    }

    /// A frame in another backend's buffer: copied out (with headroom for a VLAN push),
    /// processed, and copied to every output.
    fn forward_copy(
        &mut self,
        member: usize,
        in_port: u32,
        addr: u64,
        len: u32,
        now: Duration,
        round: &mut Round<'_>,
    ) -> Result<(), PortError> {
        let bytes = self.ports.own_packet(member, addr, len);
        if bytes.len() > COPY_MAX {
            self.counters.no_frame += 1;
            return Ok(());
        }
        self.scratch[COPY_HEADROOM..COPY_HEADROOM + bytes.len()].copy_from_slice(bytes);
        self.forward_scratch(in_port, len as usize, None, now, round)
    }

    /// The packet of `len` bytes copied into the scratch space (after its headroom),
    /// processed as if it came in on `in_port` (out of a tunnel: `tunnel`), and sent.
    fn forward_scratch(
        &mut self,
        in_port: u32,
        len: usize,
        tunnel: Option<&TunnelMeta>,
        now: Duration,
        round: &mut Round<'_>,
    ) -> Result<(), PortError> {
        let (start, new_len) = {
            let Some(mut frame) = Frame::new(&mut self.scratch, COPY_HEADROOM, len) else {
                return Ok(());
            };
            decide(
                round,
                &mut frame,
                in_port,
                tunnel,
                now,
                &mut self.verdict,
                &mut self.emitted,
            )
        };
        self.send_scratch(in_port, start, new_len, round)
    }

    /// Sends the processed packet in the scratch space (`start`, `len`) to its outputs and
    /// the controller.
    fn send_scratch(
        &mut self,
        in_port: u32,
        start: usize,
        new_len: usize,
        round: &mut Round<'_>,
    ) -> Result<(), PortError> {
        let scratch = std::mem::take(&mut self.scratch);
        let packet = &scratch[start..start + new_len];
        let result = self
            .after_process(in_port, round, PacketPlace::Bytes(packet))
            .and_then(|()| {
                let outputs = self.verdict.outputs;
                for &port in outputs.as_slice() {
                    if controller_limit(port).is_some() {
                        continue; // handed to the controller in after_process
                    }
                    match self.ports.member_of(port) {
                        None => match self.tunnel_of(port) {
                            Some(t) => {
                                let (tunnel, now) = (self.verdict.tunnel, self.clock.elapsed());
                                self.push_copy(t, Inner::Bytes(packet), tunnel, now)?
                            }
                            None => self.counters.unknown_port += 1,
                        },
                        Some(out) => {
                            if !self.ports.queue_copy(out, packet)? {
                                self.counters.no_frame += 1;
                            }
                        }
                    }
                }
                Ok(())
            });
        self.scratch = scratch;
        result
    }

    /// An OpenFlow PACKET_OUT: `actions` run on a copy of `data` as if it came in on
    /// `in_port`, and the result is sent now.
    fn packet_out(
        &mut self,
        shared: &mut Shared,
        in_port: u32,
        data: &[u8],
        actions: &[crate::Action],
    ) -> Result<(), PortError> {
        if data.len() > COPY_MAX {
            self.counters.no_frame += 1;
            return Ok(());
        }
        let mut round = Round::new(shared);
        let now = self.clock.elapsed();
        self.scratch[COPY_HEADROOM..COPY_HEADROOM + data.len()].copy_from_slice(data);
        let (start, new_len) = {
            let Some(mut frame) = Frame::new(&mut self.scratch, COPY_HEADROOM, data.len()) else {
                return Ok(());
            };
            let emitted = &mut self.emitted;
            self.verdict.reset();
            execute_given(
                &mut round.shared,
                &mut frame,
                in_port,
                actions,
                now,
                &mut self.verdict,
                &mut |bytes: &[u8], ports: &[u32], tunnel: TunnelOut| {
                    emitted.push(bytes, ports, tunnel)
                },
            );
            (frame.start(), frame.len())
        };
        let sent = self
            .send_scratch(in_port, start, new_len, &mut round)
            .and_then(|()| self.send_too_big_answers(now, &mut round));
        round.shared.release();
        sent?;
        self.ports.send_all()
    }

    /// What every frame needs once the datapath has decided: the copies `emit` asked for,
    /// the controller, and the drop counters.
    fn after_process(
        &mut self,
        in_port: u32,
        round: &mut Round<'_>,
        packet: PacketPlace<'_>,
    ) -> Result<(), PortError> {
        if !self.emitted.is_empty() {
            // Taken out (no allocation: its buffers come back below) so the loop can queue.
            let mut emitted = std::mem::take(&mut self.emitted);
            let tails = match packet {
                PacketPlace::Umem(segments) => &segments[1..],
                PacketPlace::Bytes(_) => &[],
            };
            let sent = self.send_emitted(in_port, round, &emitted, tails);
            emitted.clear();
            self.emitted = emitted;
            sent?;
        }
        let outputs = self.verdict.outputs;
        for limit in outputs
            .as_slice()
            .iter()
            .filter_map(|&o| controller_limit(o))
        {
            self.counters.to_controller += 1;
            let bytes = match packet {
                // A chain is gathered: the controller gets the packet's first bytes and its
                // whole length, as for any other.
                PacketPlace::Umem(segments) => self.ports.umem_packet_bytes(segments),
                PacketPlace::Bytes(bytes) => bytes,
            };
            let kept = &bytes[..bytes.len().min(usize::from(limit))];
            lock(round.controller).packet_in(in_port, self.verdict.packet_in, kept, bytes.len());
        }
        if let Some(reason) = self.verdict.dropped {
            self.counters.drops.count(reason);
        } else if self.verdict.outputs.is_empty() {
            self.counters.drops.count(DropReason::NoOutput);
        }
        Ok(())
    }

    /// Queues the copies `emit` made before a rewrite, or hands them to the controller. A
    /// copy of a chain's packet is its head as it was then followed by `tails`, which no
    /// action changes.
    fn send_emitted(
        &mut self,
        in_port: u32,
        round: &mut Round<'_>,
        emitted: &Emitted,
        tails: &[(u64, u32)],
    ) -> Result<(), PortError> {
        let mut whole = std::mem::take(&mut self.chain_bytes);
        let sent = self.send_emitted_copies(in_port, round, emitted, tails, &mut whole);
        self.chain_bytes = whole;
        sent
    }

    fn send_emitted_copies(
        &mut self,
        in_port: u32,
        round: &mut Round<'_>,
        emitted: &Emitted,
        tails: &[(u64, u32)],
        whole: &mut Vec<u8>,
    ) -> Result<(), PortError> {
        for (head, ports, tunnel) in emitted.iter() {
            let bytes = match tails {
                [] => head,
                _ => {
                    whole.clear();
                    whole.extend_from_slice(head);
                    for &(addr, len) in tails {
                        whole.extend_from_slice(self.ports.umem_packet(addr, len));
                    }
                    &whole[..]
                }
            };
            for &port in ports {
                if let Some(limit) = controller_limit(port) {
                    self.counters.to_controller += 1;
                    let kept = &bytes[..bytes.len().min(usize::from(limit))];
                    lock(round.controller).packet_in(
                        in_port,
                        self.verdict.packet_in,
                        kept,
                        bytes.len(),
                    );
                    continue;
                }
                match self.ports.member_of(port) {
                    None => match self.tunnel_of(port) {
                        Some(t) => {
                            let now = self.clock.elapsed();
                            self.push_copy(t, Inner::Bytes(bytes), tunnel, now)?
                        }
                        None => self.counters.unknown_port += 1,
                    },
                    Some(member) => {
                        if !self.ports.queue_copy(member, bytes)? {
                            self.counters.no_frame += 1;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// The copies of one packet made before a rewrite (`emit`), in scratch space a thread
/// allocates once and reuses: all the copies' bytes one after another, all their ports one
/// after another, and where each copy's share of both ends. Cleared, never freed, between
/// packets, so the per-packet path allocates nothing once the buffers have their size.
#[derive(Default)]
struct Emitted {
    bytes: Vec<u8>,
    ports: Vec<u32>,
    /// Per copy: the flow's `tun_id` and `tun_dst` when its outputs ran.
    tunnels: Vec<TunnelOut>,
    /// Per copy: the end of its bytes and the end of its ports.
    ends: Vec<(usize, usize)>,
}

impl Emitted {
    /// Room for a few jumbo copies and their ports before anything grows.
    fn with_capacity() -> Emitted {
        Emitted {
            bytes: Vec::with_capacity(4 * COPY_MAX),
            ports: Vec::with_capacity(64),
            tunnels: Vec::with_capacity(16),
            ends: Vec::with_capacity(16),
        }
    }

    #[inline]
    fn push(&mut self, bytes: &[u8], ports: &[u32], tunnel: TunnelOut) {
        self.bytes.extend_from_slice(bytes);
        self.ports.extend_from_slice(ports);
        self.tunnels.push(tunnel);
        self.ends.push((self.bytes.len(), self.ports.len()));
    }

    fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.ports.clear();
        self.tunnels.clear();
        self.ends.clear();
    }

    /// Each copy: its bytes, the ports it goes to, and its flow's tunnel fields.
    fn iter(&self) -> impl Iterator<Item = (&[u8], &[u32], TunnelOut)> {
        let mut from = (0, 0);
        self.ends
            .iter()
            .zip(&self.tunnels)
            .map(move |(&(bytes_end, ports_end), &tunnel)| {
                let copy = (
                    &self.bytes[from.0..bytes_end],
                    &self.ports[from.1..ports_end],
                    tunnel,
                );
                from = (bytes_end, ports_end);
                copy
            })
    }
}

/// Runs one frame through the datapath into `verdict` (and `emitted`, for copies made
/// before a rewrite, into the thread's reused scratch space); where the frame now starts in
/// its buffer, and its length.
#[inline]
fn decide(
    round: &mut Round<'_>,
    frame: &mut Frame<'_>,
    in_port: u32,
    tunnel: Option<&TunnelMeta>,
    now: Duration,
    verdict: &mut Verdict,
    emitted: &mut Emitted,
) -> (usize, usize) {
    verdict.reset();
    let emit =
        &mut |bytes: &[u8], ports: &[u32], tunnel: TunnelOut| emitted.push(bytes, ports, tunnel);
    let (cache, shared) = (&mut round.cache, &mut round.shared);
    match tunnel {
        None => process(cache, shared, frame, in_port, now, verdict, emit),
        Some(meta) => process_tunnelled(cache, shared, frame, in_port, meta, now, verdict, emit),
    }
    (frame.start(), frame.len())
}

/// Where a processed packet is, for the controller.
#[derive(Clone, Copy)]
enum PacketPlace<'a> {
    /// In the UMEM: its frame, or a chain's frames, head first.
    Umem(&'a [(u64, u32)]),
    Bytes(&'a [u8]),
}

/// Starts `pmd` on a thread of its own; its requests come through `requests`, each with a
/// ring of `waker` (None: it finds them within [`wirespeed_port::IDLE_SLEEP`]).
pub fn spawn(
    pmd: Pmd,
    mut shared: Shared,
    (requests, waker): (Receiver<PmdRequest>, Option<Arc<Waker>>),
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Result<Pmd, PortError>> {
    let name = match pmd.cpu {
        Some(cpu) => format!("pmd-cpu{cpu}"),
        None => "pmd".to_string(),
    };
    std::thread::Builder::new()
        .name(name)
        .spawn(move || pmd.run(&mut shared, (&requests, waker.as_deref()), &stop))
        .expect("spawn a poll-mode thread")
}

/// The room a round had, to judge whether the load keeps up with the loop: a burst from
/// each port that brought packets. (A burst from every port would make one busy port of
/// three look idle: its full bursts a third of the room, the loop napped after each, and
/// the port's ring overflowed at 55 kpps.)
fn round_room(burst: usize, ports_with_packets: usize) -> usize {
    burst * ports_with_packets.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_bursts_from_one_port_of_several_keep_the_loop_spinning() {
        let mut idle = Idle::new(1024);
        for _ in 0..1000 {
            assert_eq!(idle.after_burst(64, round_room(64, 1)), Step::Spin);
        }
        // Three busy ports, each a full burst: spinning too.
        assert_eq!(idle.after_burst(192, round_room(64, 3)), Step::Spin);
        // A trickle from three ports naps (a fresh policy: no rate measured yet), and so did
        // one port's full burst when the room was a burst from every port.
        assert_ne!(
            Idle::new(1024).after_burst(3, round_room(64, 3)),
            Step::Spin
        );
        assert_ne!(Idle::new(1024).after_burst(64, 64 * 3), Step::Spin);
    }

    #[test]
    fn emitted_copies_come_back_in_order_and_reuse_their_space() {
        let mut emitted = Emitted::with_capacity();
        let capacity = emitted.bytes.capacity();
        let vni = |id| TunnelOut {
            id,
            ..TunnelOut::default()
        };
        for _ in 0..3 {
            emitted.push(&[1, 2, 3], &[7], vni(0));
            emitted.push(&[4], &[8, 9], vni(5));
            let copies: Vec<_> = emitted.iter().collect();
            assert_eq!(
                copies,
                [
                    (&[1u8, 2, 3][..], &[7u32][..], vni(0)),
                    (&[4u8][..], &[8u32, 9][..], vni(5))
                ]
            );
            emitted.clear();
            assert!(emitted.is_empty());
            assert_eq!(emitted.bytes.capacity(), capacity);
        }
    }
}
