//! One thread per share of a port's receive queues (`--cpus` with `xdp:IF@all` or
//! `xdp:IF@FIRST-LAST`): each thread pinned to its CPU and owning its port (sockets, rings,
//! UMEM, frame pool), so nothing on the per-packet path is shared (DESIGN rule 3). The
//! calling thread adds up their progress for the live line, once a second.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub use wirespeed_port::ThreadClock;

use anyhow::{Context, bail};
use serde::Serialize;
use wirespeed_port::xdp::XdpPort;
use wirespeed_port::{Backend, FrameAudit, PortInfo, PortOptions, PortSpec, PortStats};

/// A thread's counts as it last published them (every few hundred bursts), for the live
/// line. Aligned so that two threads' counters never share a cache line.
#[derive(Default)]
#[repr(align(128))]
pub struct Progress {
    packets: AtomicU64,
    bytes: AtomicU64,
    drops: AtomicU64,
    done: AtomicBool,
}

impl Progress {
    #[inline]
    pub fn publish(&self, packets: u64, bytes: u64) {
        self.packets.store(packets, Ordering::Relaxed);
        self.bytes.store(bytes, Ordering::Relaxed);
    }

    /// The thread's port's drops so far (read once a second: a system call).
    pub fn publish_drops(&self, drops: u64) {
        self.drops.store(drops, Ordering::Relaxed);
    }
}

/// The ports of `--cpus`: `spec`'s queues split between one port per CPU.
pub fn open_ports(
    spec: &PortSpec,
    cpus: &[usize],
    opts: &PortOptions,
) -> anyhow::Result<Vec<XdpPort>> {
    if spec.backend != Backend::Xdp || !spec.many_queues() {
        bail!(
            "--cpus {}: one thread per queue needs a port on several queues (xdp:IF@all or \
             xdp:IF@FIRST-LAST), not {spec}",
            list(cpus)
        );
    }
    // Given up on at a signal, as one port is (`open_port`): several UMEMs and spill rings
    // take seconds to set up.
    let opts = crate::run::open_port::cancellable(opts);
    XdpPort::open_threads(spec, cpus.len(), &opts)
        .with_context(|| format!("open {spec} for {} threads", cpus.len()))
}

/// What the ready line says of the threads' ports together: the first one's mode, the
/// notes once each, and which thread serves which queues.
pub fn joint_info(spec: &PortSpec, ports: &[XdpPort], cpus: &[usize]) -> PortInfo {
    let first = wirespeed_port::Port::info(&ports[0]);
    let mut notes: Vec<String> = Vec::new();
    for p in ports {
        for n in &wirespeed_port::Port::info(p).notes {
            if !n.starts_with("receiving on ") && !notes.contains(n) {
                notes.push(n.clone());
            }
        }
    }
    let shares: Vec<String> = ports
        .iter()
        .zip(cpus)
        .map(|(p, cpu)| format!("CPU {cpu}: queues {}", list(&p.queues())))
        .collect();
    notes.push(format!(
        "{} threads, each with its own UMEM: {}",
        ports.len(),
        shares.join("; ")
    ));
    PortInfo {
        spec: spec.to_string(),
        backend: first.backend,
        mode: first.mode.clone(),
        notes,
        busy_poll: first.busy_poll,
        multi_buffer: first.multi_buffer,
    }
}

/// Runs `body(thread, port, progress)` on a thread per port, pinned to its CPU of `cpus`,
/// and prints the live line `label` with their sum once a second unless `quiet`. Returns
/// each thread's result, in order.
pub fn run<R: Send>(
    ports: Vec<XdpPort>,
    cpus: &[usize],
    label: &str,
    quiet: bool,
    body: impl Fn(usize, XdpPort, Arc<Progress>) -> R + Sync,
) -> anyhow::Result<Vec<R>> {
    let progress: Vec<Arc<Progress>> = ports.iter().map(|_| Arc::default()).collect();
    let start = Instant::now();
    let results = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(ports.len());
        for (t, port) in ports.into_iter().enumerate() {
            let (cpu, progress, body) = (cpus[t], Arc::clone(&progress[t]), &body);
            let handle = std::thread::Builder::new()
                .name(format!("rx-cpu{cpu}"))
                .spawn_scoped(scope, move || {
                    let pinned = wirespeed_port::pin_thread(cpu);
                    let result = pinned.map(|()| body(t, port, Arc::clone(&progress)));
                    progress.done.store(true, Ordering::Release);
                    result
                })
                .context("start a receiving thread")?;
            handles.push(handle);
        }
        live_line(&progress, label, quiet, start);
        let mut out = Vec::with_capacity(handles.len());
        for h in handles {
            match h.join() {
                Ok(r) => out.push(r?),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        anyhow::Ok(out)
    })?;
    Ok(results)
}

/// Prints the threads' summed rate once a second until every thread is done.
fn live_line(progress: &[Arc<Progress>], label: &str, quiet: bool, start: Instant) {
    let (mut last_at, mut last_packets, mut last_bytes) = (start, 0u64, 0u64);
    loop {
        std::thread::sleep(Duration::from_millis(50));
        if progress.iter().all(|p| p.done.load(Ordering::Acquire)) {
            return;
        }
        let now = Instant::now();
        let secs = now.duration_since(last_at).as_secs_f64();
        if secs < 1.0 || quiet {
            continue;
        }
        let packets: u64 = progress
            .iter()
            .map(|p| p.packets.load(Ordering::Relaxed))
            .sum();
        let bytes: u64 = progress
            .iter()
            .map(|p| p.bytes.load(Ordering::Relaxed))
            .sum();
        let drops: u64 = progress
            .iter()
            .map(|p| p.drops.load(Ordering::Relaxed))
            .sum();
        eprintln!(
            "{:>7.1}s  {} {:>8.3} Mpps  {:>9.1} Mbit/s  total {:>12}  drops {drops}  {} threads",
            now.duration_since(start).as_secs_f64(),
            label,
            (packets - last_packets) as f64 / secs / 1e6,
            (bytes - last_bytes) as f64 * 8.0 / secs / 1e6,
            packets,
            progress.len()
        );
        (last_at, last_packets, last_bytes) = (now, packets, bytes);
    }
}

/// One thread's part of a run, for `--json`'s `threads`.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadReport {
    pub cpu: usize,
    pub queues: Vec<u32>,
    pub packets: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub mpps: f64,
    pub per_second_mpps: Vec<f64>,
    pub drops: std::collections::BTreeMap<&'static str, u64>,
    pub drops_total: u64,
    /// The thread's CPU time over its run's wall time: 1.0 never slept.
    pub busy: f64,
    #[serde(skip)]
    pub stats: PortStats,
    #[serde(skip)]
    pub audit: Option<FrameAudit>,
}

impl ThreadReport {
    /// What the thread on `cpu` did with `port`: `packets` and `bytes` its loop counted,
    /// its meter's seconds, its clock's busy share; read on the thread, at its end.
    pub fn of(
        cpu: usize,
        port: &mut XdpPort,
        packets: u64,
        bytes: u64,
        clock: &ThreadClock,
        meter: &super::meter::Meter,
    ) -> ThreadReport {
        let stats = wirespeed_port::Port::stats(port);
        let seconds = clock.wall().as_secs_f64();
        ThreadReport {
            cpu,
            queues: port.queues(),
            packets,
            bytes,
            seconds,
            mpps: packets as f64 / seconds.max(1e-9) / 1e6,
            per_second_mpps: meter.per_second_mpps(),
            drops: stats.drops.by_reason().into_iter().collect(),
            drops_total: stats.drops.total(),
            busy: clock.busy(),
            stats,
            audit: wirespeed_port::Port::audit(port),
        }
    }
}

/// The threads' stats and frame audits added up, and each second's rate summed over them.
pub fn totals(reports: &[ThreadReport]) -> (PortStats, Option<FrameAudit>, Vec<f64>) {
    let mut stats = PortStats::default();
    let mut audit: Option<FrameAudit> = None;
    let seconds = reports
        .iter()
        .map(|r| r.per_second_mpps.len())
        .min()
        .unwrap_or(0);
    let mut per_second = vec![0.0; seconds];
    for r in reports {
        stats.add(&r.stats);
        if let Some(a) = r.audit {
            let sum = audit.get_or_insert_with(FrameAudit::default);
            sum.total += a.total;
            sum.pool += a.pool;
            sum.fill += a.fill;
            sum.kernel += a.kernel;
            sum.rx += a.rx;
            sum.application += a.application;
            sum.tx += a.tx;
            sum.completion += a.completion;
        }
        for (sum, rate) in per_second.iter_mut().zip(&r.per_second_mpps) {
            *sum += rate;
        }
    }
    (stats, audit, per_second)
}

/// CPUs or queues as people write them: 0,2,4.
fn list<T: ToString>(items: &[T]) -> String {
    let names: Vec<String> = items.iter().map(T::to_string).collect();
    names.join(",")
}
