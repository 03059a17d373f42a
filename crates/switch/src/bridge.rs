//! One bridge over AF_XDP ports sharing a UMEM, and its poll-mode loop: receive a burst on
//! each port, run every frame through the [`Datapath`], move its descriptor to the output
//! ports' transmit batches (a copy only for the second and later outputs), send, repeat.
//! Control requests are applied between bursts, so once one is answered no packet is
//! handled by a cache entry from before it.

use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use wirespeed_port::xdp::XdpGroup;
use wirespeed_port::{Batch, PortError, PortOptions, PortSpec, PortStats};

use crate::control::{Request, Response};
use crate::datapath::Datapath;
use crate::execute::{DropCounters, DropReason, Verdict};
use crate::frame::Frame;

/// Bursts between looks at the control channel and the clock.
const CONTROL_EVERY: u32 = 64;
/// Housekeeping (timeouts, MAC ageing, cache upkeep) this often.
const HOUSEKEEPING: Duration = Duration::from_secs(1);
/// A port empty this long lets the loop sleep in poll() (DESIGN rule 8).
const IDLE_AFTER: Duration = Duration::from_millis(1);
const IDLE_SLEEP: Duration = Duration::from_millis(5);

/// A control request and where its answer goes.
pub struct Job {
    pub request: Request,
    pub reply: Sender<Response>,
}

/// Switch-level counters on top of the ports' own.
#[derive(Debug, Default, Clone, Copy)]
pub struct BridgeCounters {
    /// Frames the datapath decided not to send, by reason.
    pub drops: DropCounters,
    /// Output to a port number the bridge does not have.
    pub unknown_port: u64,
    /// No free frame for a copy (several outputs, or a rewrite between outputs).
    pub no_frame: u64,
    /// Packets handed to the controller (logged).
    pub to_controller: u64,
}

/// A bridge: its ports (one UMEM), its datapath and its counters. One thread owns it.
pub struct Bridge {
    group: XdpGroup,
    /// OpenFlow port number of each group member.
    numbers: Vec<u32>,
    pub datapath: Datapath,
    pub counters: BridgeCounters,
    rx: Batch,
    tx: Vec<Batch>,
    free: Batch,
    verdict: Verdict,
    /// Frames `emit` produced during one packet (rewrites between outputs): bytes, ports.
    emitted: Vec<(Vec<u8>, Vec<u32>)>,
    start: Instant,
}

impl Bridge {
    /// Opens the ports (`number`, spec) on one UMEM, with the learning-switch default rule.
    pub fn open(ports: &[(u32, PortSpec)], opts: &PortOptions) -> Result<Bridge, PortError> {
        let specs: Vec<PortSpec> = ports.iter().map(|(_, s)| s.clone()).collect();
        let group = XdpGroup::open(&specs, opts)?;
        let mut datapath = Datapath::new();
        for (n, _) in ports {
            datapath.add_port(*n);
        }
        let burst = opts.batch as usize;
        Ok(Bridge {
            numbers: ports.iter().map(|(n, _)| *n).collect(),
            tx: (0..ports.len())
                .map(|_| Batch::with_capacity(burst * 4))
                .collect(),
            free: Batch::with_capacity(burst),
            rx: Batch::with_capacity(burst),
            verdict: Verdict::default(),
            emitted: Vec::new(),
            start: Instant::now(),
            counters: BridgeCounters::default(),
            datapath,
            group,
        })
    }

    pub fn group(&self) -> &XdpGroup {
        &self.group
    }

    /// Port numbers in member order.
    pub fn numbers(&self) -> &[u32] {
        &self.numbers
    }

    /// The bridge's clock: time since it opened (what rules and MAC entries age by).
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Counters of the port with this member index (a system call).
    pub fn port_stats(&mut self, member: usize) -> PortStats {
        self.group.stats(member)
    }

    /// Runs until `keep_going` says stop, serving control jobs between bursts.
    pub fn run(
        &mut self,
        jobs: &Receiver<Job>,
        mut keep_going: impl FnMut() -> bool,
    ) -> Result<(), PortError> {
        let mut turns = 0u32;
        let mut last_housekeeping = Instant::now();
        let mut idle_since: Option<Instant> = None;
        loop {
            let moved = self.poll_once()?;
            turns += 1;
            if moved == 0 || turns >= CONTROL_EVERY {
                turns = 0;
                while let Ok(job) = jobs.try_recv() {
                    let response = self.handle(&job.request);
                    let _ = job.reply.send(response);
                }
                if !keep_going() {
                    return Ok(());
                }
                let now = Instant::now();
                if now.duration_since(last_housekeeping) >= HOUSEKEEPING {
                    last_housekeeping = now;
                    self.housekeeping();
                }
            }
            if moved > 0 {
                idle_since = None;
                continue;
            }
            let now = Instant::now();
            match idle_since {
                None => idle_since = Some(now),
                Some(t) if now.duration_since(t) >= IDLE_AFTER => {
                    self.group.wait_rx_any(IDLE_SLEEP)?
                }
                Some(_) => {}
            }
        }
    }

    /// One burst from every port through the datapath and out; returns the frames received.
    pub fn poll_once(&mut self) -> Result<usize, PortError> {
        let now = self.now();
        let mut received = 0;
        for member in 0..self.numbers.len() {
            if self.group.rx_burst(member, &mut self.rx)? == 0 {
                self.group.flush(member)?;
                continue;
            }
            received += self.rx.len();
            for i in 0..self.rx.len() {
                let (addr, len) = (self.rx.addr(i), self.rx.frame_len(i));
                self.forward(self.numbers[member], addr, len, now);
            }
            self.rx.clear();
            self.send_all()?;
        }
        Ok(received)
    }

    /// Runs one frame through the datapath and queues it where it goes.
    fn forward(&mut self, in_port: u32, addr: u64, len: u32, now: Duration) {
        let base = self.group.frame_base(addr);
        let (start, new_len) = {
            let (whole, offset) = self.group.frame_mut(addr);
            let Some(mut frame) = Frame::new(whole, offset, len as usize) else {
                self.free.push(addr, len);
                return;
            };
            self.verdict.reset();
            let emitted = &mut self.emitted;
            self.datapath.process(
                &mut frame,
                in_port,
                now,
                &mut self.verdict,
                &mut |bytes: &[u8], ports: &[u32]| {
                    emitted.push((bytes.to_vec(), ports.to_vec()));
                },
            );
            (frame.start(), frame.len())
        };
        let (addr, len) = (base + start as u64, new_len as u32);
        self.send_emitted();
        if self.verdict.to_controller {
            self.counters.to_controller += 1;
            eprintln!("wirespeed switch: controller: in_port={in_port} len={len}");
        }
        if let Some(reason) = self.verdict.dropped {
            self.counters.drops.count(reason);
        }
        let outputs = self.verdict.outputs;
        let ports = outputs.as_slice();
        let Some((&last, rest)) = ports.split_last() else {
            if self.verdict.dropped.is_none() && !self.verdict.to_controller {
                self.counters.drops.count(DropReason::NoOutput);
            }
            return self.release_one(addr, len);
        };
        for &port in rest {
            let Some(member) = self.member_of(port) else {
                self.counters.unknown_port += 1;
                continue;
            };
            match self.group.duplicate(member, addr, len) {
                Some(copy) => self.queue(member, copy, len),
                None => self.counters.no_frame += 1,
            }
        }
        match self.member_of(last) {
            // The last output gets the frame itself: its descriptor moves (netmap's swap).
            Some(member) => self.queue(member, addr, len),
            None => {
                self.counters.unknown_port += 1;
                self.release_one(addr, len);
            }
        }
    }

    /// Frames `emit` asked for (the packet as it was before a later rewrite), each copied
    /// into a fresh frame per output port.
    fn send_emitted(&mut self) {
        for (bytes, ports) in std::mem::take(&mut self.emitted) {
            for port in ports {
                let Some(member) = self.member_of(port) else {
                    self.counters.unknown_port += 1;
                    continue;
                };
                match self.group.alloc_copy(member, &bytes) {
                    Some(copy) => self.queue(member, copy, bytes.len() as u32),
                    None => self.counters.no_frame += 1,
                }
            }
        }
    }

    fn member_of(&self, port: u32) -> Option<usize> {
        self.numbers.iter().position(|&n| n == port)
    }

    fn queue(&mut self, member: usize, addr: u64, len: u32) {
        if !self.tx[member].push(addr, len) {
            // The batch is full: send it now and start another.
            let _ = self.group.tx_burst(member, &mut self.tx[member]);
            self.tx[member].push(addr, len);
        }
    }

    fn release_one(&mut self, addr: u64, len: u32) {
        if !self.free.push(addr, len) {
            self.group.release(&mut self.free);
            self.free.push(addr, len);
        }
    }

    fn send_all(&mut self) -> Result<(), PortError> {
        for member in 0..self.tx.len() {
            if !self.tx[member].is_empty() {
                self.group.tx_burst(member, &mut self.tx[member])?;
            }
        }
        if !self.free.is_empty() {
            self.group.release(&mut self.free);
        }
        Ok(())
    }

    fn housekeeping(&mut self) {
        let now = self.now();
        self.datapath.tables.expire(now);
        self.datapath.mac_table.expire(now);
        self.datapath.cache.optimize();
    }

    /// Answers one control request (see `control` for the commands).
    pub fn handle(&mut self, request: &Request) -> Response {
        crate::commands::execute(self, request)
    }
}
