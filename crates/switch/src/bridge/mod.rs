//! A bridge: its ports, its poll-mode threads and the state they share. With one CPU (or
//! none) given there is one thread over every port; with N CPUs there are N threads and
//! thread `i` serves receive queue `i` of every AF_XDP port (each thread has a UMEM of its
//! own, shared by its sockets, so forwarding inside a thread moves descriptors). A port of
//! another backend is received by one thread and sent on by all.
//!
//! Each thread has a flow cache of its own and locks the bridge's shared [`Ofproto`] only
//! in a burst that needs it (see [`crate::ofproto::state`]). The control side (`wirespeed ctl`
//! requests, housekeeping) runs on the thread that calls [`Bridge::run`]; it changes the
//! rules with every thread's cache locked, harvests the counts the change needs and
//! revalidates them after ([`Bridge::edit`]), so once a request is answered no packet meets
//! a cache entry the change made wrong.

pub mod commands;
pub mod control;
pub mod ctl_json;
pub mod group_commands;
pub mod link;
pub mod meter_commands;
pub mod metrics;
mod open;
pub mod port_counts;
mod rejoin;
pub mod start_tables;
pub mod summary;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use wirespeed_port::{Backend, LinkState, PortError, PortOptions, PortSpec, Waker};
use wirespeed_xdp::ProgramBarrier;

use crate::dpif::figures::PmdFigures;
use crate::dpif::flow_cache::FlowCache;
use crate::dpif::packet_in::PacketInSink;
use crate::dpif::pmd::{self, Pmd, PmdRequest, PmdSnapshot, Shared, lock};
use crate::dpif::port_links::PortLinks;
use crate::dpif::thread_cache::{ControlGuard, ThreadCache};
use crate::ipfix::observe::{self, Seen};
use crate::ipfix::{ExportConfig, ExportStats, FlowExporter, IpfixError};
use crate::mac_learning::mac_view::MacView;
use crate::offload::Offload;
use crate::ofproto::learned;
use crate::ofproto::rule_table::InstalledRule;
use crate::ofproto::state::Ofproto;
use crate::tunnel::{TunnelConfig, TunnelPlane, Tunnels};
use control::{Job, Request, Response};
use metrics::BridgeFigures;
use open::{
    attach_fast_path, check_thread_count, ofproto_for, open_taps, open_xdp_groups,
    poll_mode_threads, port_links,
};
use wirespeed_metrics::Published;

/// Housekeeping (timeouts, MAC ageing, cache upkeep) this often.
const HOUSEKEEPING: Duration = Duration::from_secs(1);
/// How often the control side looks at the clock and its threads while no request comes.
const CONTROL_TICK: Duration = Duration::from_millis(50);
/// How long a snapshot may take a running thread (it answers between bursts).
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the control side is asked to do: a `wirespeed ctl` request, or a call another front
/// end (the OpenFlow agent) runs on the bridge itself, in arrival order with the rest.
pub enum Work {
    Ctl(Job),
    Call(Box<dyn FnOnce(&mut Bridge) + Send>),
}

impl From<Job> for Work {
    fn from(job: Job) -> Work {
        Work::Ctl(job)
    }
}

/// Why rules left the tables (OpenFlow's `ofp_flow_removed_reason`): they timed out, or a
/// `wirespeed ctl` request deleted them or their group or meter.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RemovedReason {
    IdleTimeout = 0,
    HardTimeout = 1,
    Delete = 2,
    GroupDelete = 3,
}

/// Who hears about what changes the bridge's controllers did not ask for: rules timing out
/// or deleted by `wirespeed ctl`, ports changing.
pub trait BridgeEvents: Send {
    fn rules_removed(&mut self, removed: &[(InstalledRule, RemovedReason)], now: Duration);
    /// Port `port`'s interface was `was` and is now up, down, or gone (until one is made
    /// again under its name).
    fn port_changed(&mut self, port: u32, was: LinkState, link: LinkState);
}

/// A thread at work, and how to reach it.
struct Running {
    handle: JoinHandle<Result<Pmd, PortError>>,
    requests: Sender<PmdRequest>,
    /// Rung after each request, so an idle thread asleep in poll() answers at once.
    waker: Option<Arc<Waker>>,
}

impl Running {
    /// Queues `request` and wakes the thread; false if the thread is gone.
    fn ask(&self, request: PmdRequest) -> bool {
        let sent = self.requests.send(request).is_ok();
        if let Some(waker) = &self.waker {
            waker.ring();
        }
        sent
    }
}

enum Threads {
    /// Not started, or stopped: the control side holds their state.
    Parked(Vec<Pmd>),
    Running(Vec<Running>),
}

pub struct Bridge {
    ofproto: Arc<Mutex<Ofproto>>,
    controller: Arc<Mutex<Box<dyn PacketInSink>>>,
    /// Each poll-mode thread's flow cache, in the threads' order.
    caches: Vec<Arc<ThreadCache>>,
    /// The bridge offloads flows to the kernel.
    offload: bool,
    /// Waits for the fast path's program outside the lock (see [`Bridge::settle_offload`]).
    barrier: Option<ProgramBarrier>,
    numbers: Vec<u32>,
    /// The tunnel ports (not in `numbers`: no device, no link of their own).
    tunnels: Arc<Tunnels>,
    /// Each port's spec, for messages.
    specs: Vec<String>,
    /// Whether each port's interface is up.
    links: Arc<PortLinks>,
    /// A thread keeps `links` fresh from the kernel's link messages; without it the
    /// control side asks every tick.
    links_watched: bool,
    /// Per port: its last try to bind again while gone ([`rejoin`]).
    rejoining: Vec<rejoin::Rejoining>,
    clock: Instant,
    /// The Unix time of `clock`'s start (what flow records' times count from).
    epoch: SystemTime,
    /// Flow records (IPFIX) go to a collector.
    flow_export: Option<FlowExporter>,
    /// The export's socket failed and the log said so (once).
    export_error_said: bool,
    threads: Threads,
    stop: Arc<AtomicBool>,
    events: Option<Box<dyn BridgeEvents>>,
    /// The datapath id OpenFlow controllers were given, for `show`.
    datapath_id: Option<u64>,
    /// Where each poll-mode thread publishes its figures, and the control side the
    /// bridge's, for a scrape ([`metrics`]).
    pmd_figures: Vec<Published<PmdFigures>>,
    figures: Published<BridgeFigures>,
    metrics_extra: Option<metrics::MetricsExtra>,
}

impl Bridge {
    /// Opens `ports` (number, spec) for one poll-mode thread per CPU of `pmd_cpus` (one
    /// unpinned thread when it is empty), with the learning-switch default rule. With
    /// `offload`, the AF_XDP ports get the kernel fast path (see [`crate::offload`]) instead
    /// of the plain redirect program.
    pub fn open(
        ports: &[(u32, PortSpec)],
        tunnels: &[(u32, TunnelConfig)],
        opts: &PortOptions,
        pmd_cpus: &[usize],
        controller: Box<dyn PacketInSink>,
        offload: bool,
    ) -> Result<Bridge, PortError> {
        let threads = pmd_cpus.len().max(1);
        check_thread_count(ports, threads)?;
        // Before any port opens: a tunnel without an underlay refuses the start.
        let tunnels = Arc::new(
            Tunnels::open(tunnels, ports).map_err(|e| PortError::Unsupported(e.to_string()))?,
        );
        let xdp: Vec<PortSpec> = ports
            .iter()
            .filter(|(_, s)| s.backend == Backend::Xdp)
            .map(|(_, s)| s.clone())
            .collect();
        let mut fast_path = match offload {
            true => Some(attach_fast_path(&xdp, opts)?),
            false => None,
        };
        let groups = open_xdp_groups(&xdp, opts, threads, fast_path.as_mut())?;
        let (clock, epoch) = (Instant::now(), SystemTime::now());
        // Tap devices before the links: a tap made now has its index from here on.
        let mut taps = open_taps(ports)?;
        let links = Arc::new(port_links(ports));
        let mut pmds = poll_mode_threads(ports, opts, groups, &mut taps, pmd_cpus, &links, clock)?;
        if !tunnels.ports.is_empty() {
            for pmd in &mut pmds {
                pmd.set_tunnels(TunnelPlane::new(tunnels.clone()));
            }
        }
        let pmd_figures = pmds.iter().map(Pmd::published).collect();
        let (mut ofproto, barrier) = ofproto_for(ports, fast_path)?;
        for tunnel in &tunnels.ports {
            ofproto.add_port(tunnel.number);
        }
        // Made at the rules' generation: the first change is the first to revalidate.
        let caches = (0..threads)
            .map(|_| {
                let cache = ThreadCache::default();
                cache.for_control().revalidate(&mut ofproto.tables);
                Arc::new(cache)
            })
            .collect();
        let mut bridge = Bridge {
            ofproto: Arc::new(Mutex::new(ofproto)),
            controller: Arc::new(Mutex::new(controller)),
            caches,
            offload,
            barrier,
            numbers: ports.iter().map(|(n, _)| *n).collect(),
            tunnels,
            specs: ports.iter().map(|(_, s)| s.to_string()).collect(),
            links_watched: crate::dpif::port_links::watch(&links).is_ok(),
            rejoining: vec![Default::default(); ports.len()],
            links,
            clock,
            epoch,
            flow_export: None,
            export_error_said: false,
            threads: Threads::Parked(pmds),
            stop: Arc::new(AtomicBool::new(false)),
            events: None,
            datapath_id: None,
            pmd_figures,
            figures: Published::new(),
            metrics_extra: None,
        };
        // A port already down (a tap device made just now) is known so from the start.
        bridge.links.read();
        bridge.announce_links(Duration::ZERO);
        Ok(bridge)
    }

    /// Tells `events` about rules that time out and ports that change from now on.
    pub fn set_events(&mut self, events: Box<dyn BridgeEvents>) {
        self.events = Some(events);
    }

    /// Tells `events` about rules a `ctl` request deleted, as a controller's delete would
    /// be told (FLOW_REMOVED to the controllers, for the rules that asked for it).
    pub fn tell_removed(&mut self, removed: Vec<InstalledRule>, why: RemovedReason, now: Duration) {
        if let Some(events) = &mut self.events
            && !removed.is_empty()
        {
            let reasons: Vec<(InstalledRule, RemovedReason)> =
                removed.into_iter().map(|r| (r, why)).collect();
            events.rules_removed(&reasons, now);
        }
    }

    /// Tells `events` about the rules `delete_learned` learns took with them, whatever
    /// change took the learns (a delete, a timeout, a replace), as Open vSwitch tells them:
    /// deleted.
    fn tell_deleted_with_learns(&mut self) {
        let deleted = std::mem::take(&mut lock(&self.ofproto).deleted_with_learns);
        if !deleted.is_empty() {
            let now = self.now();
            self.tell_removed(deleted, RemovedReason::Delete, now);
        }
    }

    /// Sends flow records to an IPFIX collector as `config` says (see [`crate::ipfix`]).
    /// Call before [`Bridge::serve`]: the threads' megaflows are exact on a record's fields
    /// from their first packet on.
    pub fn export_flows(&mut self, config: ExportConfig) -> Result<(), IpfixError> {
        let exporter = FlowExporter::new(config, self.epoch)?;
        for cache in &self.caches {
            cache.for_control().keep_flow_records();
        }
        if let Some(offload) = &mut lock(&self.ofproto).offload {
            offload.keep_flow_records();
        }
        self.flow_export = Some(exporter);
        Ok(())
    }

    /// The flow export's settings and what it has sent, when there is one.
    pub fn flow_export(&self) -> Option<(ExportConfig, ExportStats)> {
        self.flow_export.as_ref().map(|e| (*e.config(), e.stats()))
    }

    /// Takes what the datapath counted since the last call into the flow export and sends
    /// the reports due (all of them when `stopping`). The threads' caches are locked one at
    /// a time, each between two of its rounds; the shared state once.
    fn export_flow_records(&mut self, stopping: bool) {
        let Some(exporter) = &mut self.flow_export else {
            return;
        };
        let now = self.clock.elapsed();
        // Each megaflow looked at twice per idle timeout, a share each second (the thread
        // waits while its share is read); all of them when stopping.
        let idle = exporter.config().timeouts.idle.as_secs() as usize;
        let rounds = if stopping { 1 } else { (idle / 2).max(1) };
        let mut seen: Vec<Seen> = Vec::new();
        for cache in &self.caches {
            let lost = cache
                .for_control()
                .take_flow_counts(rounds, now, |megaflow, counts| {
                    seen.extend(observe::megaflow(megaflow, counts));
                });
            exporter.count_lost(lost);
        }
        {
            let mut ofproto = lock(&self.ofproto);
            // Stopping: the kernel's counts as they are now, not as last aged.
            if stopping
                && ofproto.harvest_offload(now).is_err()
                && let Some(offload) = &mut ofproto.offload
            {
                offload.count_error();
            }
            let dp = &mut *ofproto;
            for flow in seen {
                exporter.observe(flow.resolve(&dp.mac_table, &self.tunnels.ports));
            }
            if let Some(offload) = &mut dp.offload {
                offload.take_flow_counts(|counts| exporter.observe(observe::fast_flow(&counts)));
            }
        }
        match stopping {
            true => exporter.finish(now),
            false => exporter.tick(now),
        }
        if let Some(e) = exporter.take_error()
            && !self.export_error_said
        {
            self.export_error_said = true;
            eprintln!(
                "wirespeed switch: --ipfix {}: cannot send ({e}); records are lost until it \
                 can (dump-cache counts the failures)",
                exporter.config().collector
            );
        }
    }

    /// The datapath id `show` reports (by default, the first port's address).
    pub fn set_datapath_id(&mut self, id: u64) {
        self.datapath_id = Some(id);
    }

    pub fn datapath_id(&self) -> Option<u64> {
        self.datapath_id
    }

    /// Each port's spec as given (`xdp:veth1`...), in the bridge's order.
    pub fn specs(&self) -> &[String] {
        &self.specs
    }

    /// Hands a packet to the first poll-mode thread to send: `actions` (no table jumps) run
    /// on `data` as if it came in on `in_port`. Nothing is sent while the threads are parked.
    pub fn send_packet(&self, in_port: u32, data: Vec<u8>, actions: Vec<crate::Action>) {
        if let Threads::Running(running) = &self.threads
            && let Some(first) = running.first()
        {
            let _ = first.ask(PmdRequest::PacketOut {
                in_port,
                data,
                actions,
            });
        }
    }

    /// Waits (at most a second) until the first poll-mode thread has sent every packet
    /// handed to it before now (an OpenFlow barrier after PACKET_OUTs).
    pub fn sync_sends(&self) {
        if let Threads::Running(running) = &self.threads
            && let Some(first) = running.first()
        {
            let (done, wait) = mpsc::channel();
            if first.ask(PmdRequest::Sync(done)) {
                let _ = wait.recv_timeout(Duration::from_secs(1));
            }
        }
    }

    /// Port numbers in the bridge's order.
    pub fn numbers(&self) -> &[u32] {
        &self.numbers
    }

    /// The tunnel ports.
    pub fn tunnels(&self) -> &Tunnels {
        &self.tunnels
    }

    /// The state of the interface of port `i` (in the bridge's order), as last found.
    pub fn link(&self, i: usize) -> LinkState {
        self.links.get(i)
    }

    /// The bridge's clock: time since it opened (what rules and MAC entries age by).
    pub fn now(&self) -> Duration {
        self.clock.elapsed()
    }

    /// The state the poll-mode threads share (a thread that needs it waits while it is
    /// held). Change the rule tables through [`Bridge::edit`] instead.
    pub fn ofproto(&self) -> MutexGuard<'_, Ofproto> {
        lock(&self.ofproto)
    }

    /// Runs `change` on the datapath with every thread's cache locked (each thread between
    /// two rounds of bursts): the change credits the caches' counts it needs to the rules
    /// ([`crate::ofproto::state::edit`] says how), and if the rules changed the caches are
    /// revalidated before the threads go on, so no packet they handle afterwards meets an
    /// entry the change made wrong.
    pub fn edit<R>(&self, change: impl FnOnce(&mut Ofproto) -> R) -> R {
        let mut caches: Vec<ControlGuard<'_>> =
            self.caches.iter().map(|c| c.for_control()).collect();
        crate::ofproto::state::edit(&mut lock(&self.ofproto), &mut caches, self.now(), change)
    }

    /// Runs `read` on each thread's cache in turn (locked, between two of its rounds).
    pub fn each_cache(&self, mut read: impl FnMut(&mut FlowCache)) {
        for cache in &self.caches {
            read(&mut cache.for_control());
        }
    }

    /// Starts the poll-mode threads and serves `jobs` with `handler` until `keep_going` says
    /// stop or a thread fails; then stops the threads (their state stays for
    /// [`Bridge::snapshots`]). The handler is passed in (`Bridge::run` passes the commands),
    /// so the bridge does not depend on the commands that drive it.
    pub fn serve(
        &mut self,
        jobs: &Receiver<Work>,
        mut handler: impl FnMut(&mut Bridge, &Request) -> Response,
        mut keep_going: impl FnMut() -> bool,
    ) -> Result<(), PortError> {
        self.start();
        // The templates go out at once.
        self.export_flow_records(false);
        self.publish_figures();
        let mut last_housekeeping = Instant::now();
        let mut kept_waiting: Option<Instant> = None;
        while keep_going() && !self.a_thread_ended() {
            // The fast path settles when nothing waits, not between an OpenFlow change and
            // the BARRIER behind it (the change is in force when it is answered), and once
            // requests have kept it waiting for a tick.
            let next = jobs.try_recv();
            let waited = kept_waiting.get_or_insert_with(Instant::now).elapsed();
            if next.is_err() || waited >= CONTROL_TICK {
                self.settle_offload();
                kept_waiting = None;
            }
            let work = match next {
                Ok(work) => Ok(work),
                Err(TryRecvError::Empty) => jobs.recv_timeout(CONTROL_TICK),
                Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
            };
            match work {
                // A job its client's side withdrew is not done: the client was told so.
                Ok(Work::Ctl(job)) if job.take() => {
                    let response = self.answer(&job.request, &mut handler);
                    let _ = job.reply.send(response);
                }
                Ok(Work::Ctl(_)) => {}
                Ok(Work::Call(call)) => call(self),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => std::thread::sleep(CONTROL_TICK),
            }
            lock(&self.controller).tick();
            self.add_learned();
            if !self.links_watched {
                self.links.read();
            }
            self.rejoin_ports();
            self.announce_links(self.now());
            if last_housekeeping.elapsed() >= HOUSEKEEPING {
                last_housekeeping = Instant::now();
                // Besides the kernel's word, in case some was lost.
                self.links.read();
                self.housekeeping();
                self.publish_figures();
            }
            self.tell_deleted_with_learns();
        }
        let parked = self.park();
        // Every flow's last report, from the threads' final counts.
        self.export_flow_records(true);
        self.publish_figures();
        parked
    }

    fn start(&mut self) {
        let Threads::Parked(pmds) = &mut self.threads else {
            return;
        };
        self.stop.store(false, Ordering::Relaxed);
        let ofproto = lock(&self.ofproto);
        // A port that carries tunnels is left out of floods (normal's too): a broadcast it
        // received would otherwise go into a tunnel, out of the far side's underlay and back,
        // a loop between the two switches. output:N to it still sends there.
        let underlays: Vec<u32> = self.tunnels.ports.iter().map(|t| t.underlay).collect();
        let mut ports = ofproto.ports().to_vec();
        ports.retain(|p| !underlays.contains(p));
        let views: Vec<MacView> = self
            .caches
            .iter()
            .map(|_| MacView::new(&ofproto.mac_table))
            .collect();
        drop(ofproto);
        let running = std::mem::take(pmds)
            .into_iter()
            .zip(&self.caches)
            .zip(views)
            .map(|((pmd, cache), macs)| {
                let (requests, inbox) = mpsc::channel();
                // Without one (no eventfd), requests wait for the thread's sleep to end.
                let waker = Waker::new().ok().map(Arc::new);
                let shared = Shared {
                    cache: cache.clone(),
                    state: self.ofproto.clone(),
                    controller: self.controller.clone(),
                    ports: ports.clone(),
                    offload: self.offload,
                    macs,
                };
                let handle = pmd::spawn(pmd, shared, (inbox, waker.clone()), self.stop.clone());
                Running {
                    handle,
                    requests,
                    waker,
                }
            })
            .collect();
        self.threads = Threads::Running(running);
    }

    fn a_thread_ended(&self) -> bool {
        match &self.threads {
            Threads::Running(running) => running.iter().any(|r| r.handle.is_finished()),
            Threads::Parked(_) => true,
        }
    }

    /// Stops the threads and takes their state back; the first error a thread met.
    fn park(&mut self) -> Result<(), PortError> {
        let Threads::Running(running) =
            std::mem::replace(&mut self.threads, Threads::Parked(vec![]))
        else {
            return Ok(());
        };
        self.stop.store(true, Ordering::Relaxed);
        // A thread asleep in poll() sees the flag now, not after its sleep.
        for waker in running.iter().filter_map(|r| r.waker.as_ref()) {
            waker.ring();
        }
        let mut first_error = None;
        let mut pmds = Vec::new();
        for r in running {
            match r.handle.join() {
                Ok(Ok(pmd)) => pmds.push(pmd),
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        self.threads = Threads::Parked(pmds);
        first_error.map_or(Ok(()), Err)
    }

    /// Where each poll-mode thread publishes its figures.
    fn published_pmds(&self) -> Vec<Published<PmdFigures>> {
        self.pmd_figures.clone()
    }

    /// Every thread's ports, counters and frames, asked of running threads between bursts.
    pub fn snapshots(&mut self) -> Vec<PmdSnapshot> {
        match &mut self.threads {
            Threads::Parked(pmds) => pmds.iter_mut().map(Pmd::snapshot).collect(),
            Threads::Running(running) => {
                let answers: Vec<Receiver<PmdSnapshot>> = running
                    .iter()
                    .map(|r| {
                        let (reply, answer) = mpsc::channel();
                        let _ = r.ask(PmdRequest::Snapshot(reply));
                        answer
                    })
                    .collect();
                answers
                    .iter()
                    .filter_map(|a| a.recv_timeout(SNAPSHOT_TIMEOUT).ok())
                    .collect()
            }
        }
    }

    fn housekeeping(&mut self) {
        let now = self.now();
        self.forget_down_ports();
        self.expire_rules(now);
        let mut ofproto = self.ofproto();
        // A failure shows in dump-cache's error count; the next round tries again.
        if ofproto.age_offload(now).is_err()
            && let Some(offload) = &mut ofproto.offload
        {
            offload.count_error();
        }
        ofproto.mac_table.expire(now);
        if ofproto.sync_offload_macs(now).is_err()
            && let Some(offload) = &mut ofproto.offload
        {
            offload.count_error();
        }
        if let Some(offload) = &mut ofproto.offload {
            match offload.check_transmits(now) {
                Ok(messages) => {
                    for m in messages {
                        eprintln!("wirespeed switch: {m}");
                    }
                }
                Err(_) => offload.count_error(),
            }
        }
        drop(ofproto);
        self.each_cache(FlowCache::optimize);
        self.settle_offload();
        self.export_flow_records(false);
    }

    /// Acts on the ports whose link changed: one no longer up forgets the addresses learned
    /// on it (as Open vSwitch does: its hosts may turn up elsewhere) and leaves the fast
    /// path; one back up may be used there again. Each change is said on stderr.
    fn announce_links(&mut self, now: Duration) {
        let changes = self.links.changes();
        if changes.is_empty() {
            return;
        }
        let mut ofproto = self.ofproto();
        for change in &changes {
            let n = self.numbers[change.port];
            let up = change.now == LinkState::Up;
            if !up {
                ofproto.mac_table.flush_port(n);
            }
            let dp = &mut *ofproto;
            if let Some(offload) = &mut dp.offload {
                let gone = change.now == LinkState::Gone;
                let failed = offload
                    .port_link(n, up, &mut dp.tables, &mut dp.mac_table, now)
                    .is_err()
                    | (gone && offload.port_gone(n).is_err());
                if failed {
                    offload.count_error();
                }
            }
        }
        drop(ofproto);
        // Groups' buckets that watch a port follow its link (in the kernel too: a bucket
        // may watch a port other than the one it outputs to).
        self.edit(|dp| {
            dp.watch_offload();
            for change in &changes {
                let up = change.now == LinkState::Up;
                dp.tables.set_port_live(self.numbers[change.port], up);
            }
        });
        if let Some(events) = &mut self.events {
            for change in &changes {
                events.port_changed(self.numbers[change.port], change.was, change.now);
            }
        }
        // Said outside the lock: a stderr that blocks must not hold up the threads.
        for change in changes {
            let (n, spec) = (self.numbers[change.port], &self.specs[change.port]);
            let what = match (change.was, change.now) {
                (LinkState::Gone, LinkState::Up) => {
                    "interface made again: bound to it, forwarding again"
                }
                (LinkState::Gone, LinkState::Down) => {
                    "interface made again: bound to it, and forwarding once it is up"
                }
                (_, LinkState::Up) => "link up: forwarding again",
                (_, LinkState::Down) => {
                    "link down: what is meant for it is dropped (link_down) until it is up"
                }
                (_, LinkState::Gone) => {
                    "interface gone: the port is left out until an interface is made again \
                     under its name (what is meant for it is dropped, link_down)"
                }
            };
            eprintln!("wirespeed switch: port {n} ({spec}): {what}");
        }
    }

    /// Forgets again what was learned on ports that are not up: a thread that had not yet
    /// seen a port go down may have learned from one more burst of it.
    fn forget_down_ports(&self) {
        let down: Vec<u32> = (0..self.numbers.len())
            .filter(|&i| self.links.get(i) != LinkState::Up)
            .map(|i| self.numbers[i])
            .collect();
        if down.is_empty() {
            return;
        }
        let mut ofproto = self.ofproto();
        for n in down {
            ofproto.mac_table.flush_port(n);
        }
    }

    /// Adds what the threads' `learn` actions learned ([`crate::ofproto::learned`]), with
    /// every cache locked if that changes the rules (a rule installed meanwhile only has
    /// its hard timeout restarted, under the rules' lock alone).
    fn add_learned(&mut self) {
        let now = self.now();
        let changes = {
            let tables = &mut lock(&self.ofproto).tables;
            tables.learned.is_pending() && learned::learn_again(tables, now)
        };
        if changes {
            self.edit(|ofproto| ofproto.add_learned(now));
            self.settle_offload();
        }
    }

    /// Idle and hard timeouts. An idle timeout goes by when the rule's packets last came, and
    /// a learned rule's hard timeout restarts when packets learn it again (at a harvest), so
    /// with such rules each thread's cache is harvested first, one thread stopped at a time;
    /// all of them are stopped together only when a rule is due to go.
    fn expire_rules(&mut self, now: Duration) {
        if lock(&self.ofproto).tables.has_timeouts() {
            for cache in &self.caches {
                cache.for_control().harvest(&mut lock(&self.ofproto).tables);
            }
        }
        if lock(&self.ofproto).tables.any_expired(now) {
            let removed = self.edit(|ofproto| {
                // Packets since the harvest above may keep a rule.
                ofproto.harvest_caches();
                ofproto.tables.expire_taking(now)
            });
            if let Some(events) = &mut self.events {
                let reasons: Vec<(InstalledRule, RemovedReason)> = removed
                    .into_iter()
                    .map(|r| {
                        let reason = match r.rule.is_hard_expired(&r.stats, now) {
                            true => RemovedReason::HardTimeout,
                            false => RemovedReason::IdleTimeout,
                        };
                        (r, reason)
                    })
                    .collect();
                events.rules_removed(&reasons, now);
            }
        }
    }

    /// Answers one control request with `handler`, then lets the offload settle.
    pub fn answer(
        &mut self,
        request: &Request,
        handler: impl FnOnce(&mut Bridge, &Request) -> Response,
    ) -> Response {
        let response = handler(self, request);
        self.settle_offload();
        response
    }

    /// After the fast path removed entries (ageing, a flush, a rule change's revalidation):
    /// waits for its program outside the lock, about 10 ms in which the poll-mode threads go
    /// on but install nothing, then lets them install again (see "Reuse" in
    /// [`crate::offload`]) and the kernel forward on the classes of the entries a rule
    /// change removed.
    fn settle_offload(&mut self) {
        let Some(barrier) = &mut self.barrier else {
            return;
        };
        let pending = lock(&self.ofproto)
            .offload
            .as_ref()
            .and_then(Offload::unsettled);
        let Some(round) = pending else {
            return;
        };
        let waited = barrier.wait();
        if let Some(offload) = &mut lock(&self.ofproto).offload
            && waited.and_then(|()| offload.settled_at(round)).is_err()
        {
            offload.count_error();
        }
    }

    /// Closes the controller (flushes its file); what it reports.
    pub fn close_controller(&mut self) -> Result<String, String> {
        lock(&self.controller).close()
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.park();
    }
}
