//! `wirespeed recv`: receives what `wirespeed gen` sends and reports, per generator id,
//! packets received, lost (named by sequence number), duplicated and reordered, and the
//! one-way latency from the send timestamps (sender and receiver on one clock: the same
//! host, or hosts synchronised by PTP).

mod latency;
mod tracker;

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use serde::Serialize;
use wirespeed_packet::read_test_frame;
use wirespeed_port::{Backend, Batch, PortSpec};

use crate::r#gen::port_flags::PortFlags;
use crate::r#gen::report::frames_json;
use crate::idle::{IDLE_SLEEP, Idle};
use crate::meter::{Meter, RunLimit, peak_rss_bytes, port_status};
use latency::{Latency, LatencyReport};
use tracker::{SeqReport, SeqTracker};

/// Generators tracked at once (each holds a 128 KiB window and a 22 KiB histogram).
pub const MAX_GENERATORS: usize = 16;
/// Loop turns between looks at the clock and the stop flag.
const HOT_LOOP_CHECK: u32 = 128;

/// Options of `wirespeed recv`.
#[derive(Debug, Args)]
#[command(
    after_help = "Counts per generator id (up to 16): received, lost, duplicated, \
reordered, late (arrived after being counted lost, more than 2^20 numbers behind), corrupt \
(a checksum fails), untracked (frames of the kernel engine, which repeats fixed frames), and \
latency percentiles. Lost packets are named as ranges of sequence numbers. Without --expect, \
losses after the last packet received cannot be seen.\n\n\
Examples:\n  wirespeed recv --port xdp:veth1 --duration 10\n  \
wirespeed recv --port packet:veth1 --expect 1000000 --json"
)]
pub struct RecvArgs {
    /// The port: xdp:IFACE[@QUEUE] (AF_XDP) or packet:IFACE (AF_PACKET TPACKET_V3).
    #[arg(long)]
    pub port: String,
    /// Stop after this many seconds (default: until --count or Ctrl-C).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Stop after this many packets.
    #[arg(long)]
    pub count: Option<u64>,
    /// Every generator used sequence numbers 0 to N-1 (gen's `sequence_end`): the ones
    /// never received are lost, also after the last one that came.
    #[arg(long)]
    pub expect: Option<u64>,
    /// Print one JSON object with the results on stdout at the end.
    #[arg(long)]
    pub json: bool,
    /// No live line on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub port_flags: PortFlags,
}

/// What one generator's packets showed.
#[derive(Debug, Serialize)]
pub struct GeneratorReport {
    pub generator: u16,
    pub received: u64,
    #[serde(flatten)]
    pub seq: SeqReport,
    pub corrupt: u64,
    pub untracked: u64,
    pub latency_ns: LatencyReport,
}

#[derive(Default)]
struct GeneratorState {
    id: u16,
    received: u64,
    corrupt: u64,
    untracked: u64,
    seq: SeqTracker,
    latency: Latency,
}

/// Every generator's state, allocated before the first packet.
struct Receiver {
    generators: Vec<GeneratorState>,
    in_use: usize,
    last: usize,
    not_test_frames: u64,
    other_generators: u64,
}

impl Receiver {
    fn new() -> Receiver {
        Receiver {
            generators: (0..MAX_GENERATORS)
                .map(|_| GeneratorState::default())
                .collect(),
            in_use: 0,
            last: 0,
            not_test_frames: 0,
            other_generators: 0,
        }
    }

    #[inline]
    fn slot(&mut self, id: u16) -> Option<usize> {
        if self.last < self.in_use && self.generators[self.last].id == id {
            return Some(self.last);
        }
        let found = self.generators[..self.in_use]
            .iter()
            .position(|g| g.id == id);
        let i = match found {
            Some(i) => i,
            None if self.in_use < MAX_GENERATORS => {
                self.generators[self.in_use].id = id;
                self.in_use += 1;
                self.in_use - 1
            }
            None => return None,
        };
        self.last = i;
        Some(i)
    }

    #[inline]
    fn check(&mut self, frame: &[u8], now_ns: u64) {
        let Some(read) = read_test_frame(frame) else {
            self.not_test_frames += 1;
            return;
        };
        let Some(i) = self.slot(read.payload.generator) else {
            self.other_generators += 1;
            return;
        };
        let g = &mut self.generators[i];
        g.received += 1;
        if !read.checksums_ok {
            g.corrupt += 1;
        } else if read.payload.timestamp_ns == 0 {
            g.untracked += 1;
        } else {
            g.seq.record(read.payload.seq);
            g.latency.record(read.payload.latency_ns(now_ns));
        }
    }

    fn lost_so_far(&self) -> u64 {
        self.generators[..self.in_use]
            .iter()
            .map(|g| g.seq.lost)
            .sum()
    }

    fn finish(mut self, expect: Option<u64>) -> (Vec<GeneratorReport>, u64, u64) {
        let mut reports: Vec<GeneratorReport> = self.generators[..self.in_use]
            .iter_mut()
            .map(|g| GeneratorReport {
                generator: g.id,
                received: g.received,
                seq: g.seq.finish(expect),
                corrupt: g.corrupt,
                untracked: g.untracked,
                latency_ns: g.latency.report(),
            })
            .collect();
        reports.sort_by_key(|r| r.generator);
        (reports, self.not_test_frames, self.other_generators)
    }
}

#[derive(Debug, Serialize)]
pub struct RecvSummary {
    pub mode: &'static str,
    pub port: String,
    pub backend: &'static str,
    pub xdp_mode: String,
    pub batch: u32,
    pub seconds: f64,
    pub packets: u64,
    pub bytes: u64,
    pub mpps: f64,
    pub mbps: f64,
    pub rx_packets: u64,
    pub drops: std::collections::BTreeMap<&'static str, u64>,
    pub drops_total: u64,
    pub not_test_frames: u64,
    /// Test frames of generators beyond the first 16 seen.
    pub other_generators: u64,
    pub generators: Vec<GeneratorReport>,
    pub frames: Option<serde_json::Value>,
    pub peak_rss_bytes: u64,
    pub notes: Vec<String>,
}

fn validate(args: &RecvArgs) -> anyhow::Result<()> {
    args.port_flags.validate()?;
    if let Some(d) = args.duration
        && !(d > 0.0 && d <= 86400.0 * 365.0)
    {
        bail!("--duration {d}: must be more than 0 seconds and at most a year");
    }
    if args.count == Some(0) {
        bail!("--count 0: must be at least 1");
    }
    Ok(())
}

pub fn run(args: RecvArgs) -> anyhow::Result<()> {
    validate(&args)?;
    let spec: PortSpec = args.port.parse()?;
    crate::caps::require(&format!("recv on {spec}"), spec.backend == Backend::Xdp)?;
    let stop = crate::bench::stop_flag()?;
    let summary = receive(&args, &spec, &stop)?;
    print(&summary, args.json);
    Ok(())
}

fn receive(args: &RecvArgs, spec: &PortSpec, stop: &AtomicBool) -> anyhow::Result<RecvSummary> {
    let mut port = wirespeed_port::open(spec, &args.port_flags.options(true, false))
        .with_context(|| format!("open {spec}"))?;
    let mut receiver = Receiver::new();
    let mut batch = Batch::with_capacity(args.port_flags.batch as usize);
    let info = port.info().clone();
    eprintln!(
        "wirespeed recv: {} ready ({} backend, {} mode, batch {})",
        info.spec,
        info.backend.name(),
        info.mode,
        args.port_flags.batch
    );
    for n in &info.notes {
        eprintln!("wirespeed: note: {n}");
    }
    let duration = args.duration.map(Duration::from_secs_f64);
    let mut run = RunLimit::new(duration, args.count, stop, HOT_LOOP_CHECK);
    let mut meter = Meter::new("rx", args.quiet, HOT_LOOP_CHECK);
    let (mut packets, mut bytes, mut idle) = (0u64, 0u64, Idle::default());
    while run.running(packets) {
        let n = port.rx_burst(&mut batch)?;
        if n > 0 {
            // One clock read a burst: the latency of a burst's packets differs by less.
            let now = crate::r#gen::socket::now_ns();
            for (addr, len) in batch.iter() {
                bytes += len as u64;
                receiver.check(port.packet(addr, len), now);
            }
            packets += n as u64;
            port.release(&mut batch);
            idle.busy();
        } else if idle.should_sleep() && !args.port_flags.busy_poll {
            port.wait_rx(IDLE_SLEEP)?;
            run.check_soon();
        }
        meter.tick(packets, bytes, || {
            format!(
                "lost {}  {}",
                receiver.lost_so_far(),
                port_status(&mut *port)
            )
        });
    }
    let seconds = meter.elapsed().as_secs_f64();
    let stats = port.stats();
    let audit = port.audit();
    let (generators, not_test_frames, other_generators) = receiver.finish(args.expect);
    let s = seconds.max(1e-9);
    Ok(RecvSummary {
        mode: "recv",
        port: spec.to_string(),
        backend: spec.backend.name(),
        xdp_mode: info.mode.clone(),
        batch: args.port_flags.batch,
        seconds,
        packets,
        bytes,
        mpps: packets as f64 / s / 1e6,
        mbps: bytes as f64 * 8.0 / s / 1e6,
        rx_packets: stats.rx_packets,
        drops: stats.drops.by_reason().into_iter().collect(),
        drops_total: stats.drops.total(),
        not_test_frames,
        other_generators,
        generators,
        frames: audit.map(|a| frames_json(&a)),
        peak_rss_bytes: peak_rss_bytes(),
        notes: info.notes,
    })
}

fn print(s: &RecvSummary, json: bool) {
    if json {
        println!("{}", serde_json::to_string(s).expect("summary serialises"));
        return;
    }
    println!(
        "recv on {} ({} {}): {} packets in {:.2}s = {:.3} Mpps, {:.1} Mbit/s; {} not from a generator, {} receive drops",
        s.port,
        s.backend,
        s.xdp_mode,
        s.packets,
        s.seconds,
        s.mpps,
        s.mbps,
        s.not_test_frames,
        s.drops_total
    );
    for g in &s.generators {
        let l = &g.latency_ns;
        println!(
            "generator {}: received {}, lost {}, duplicated {}, reordered {}, late {}, corrupt {}, untracked {}",
            g.generator,
            g.received,
            g.seq.lost,
            g.seq.duplicated,
            g.seq.reordered,
            g.seq.late,
            g.corrupt,
            g.untracked
        );
        if l.samples > 0 {
            println!(
                "  latency us: p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
                l.p50 as f64 / 1e3,
                l.p99 as f64 / 1e3,
                l.p999 as f64 / 1e3,
                l.max as f64 / 1e3
            );
        }
        if !g.seq.lost_ranges.is_empty() {
            let shown: Vec<String> = g
                .seq
                .lost_ranges
                .iter()
                .take(10)
                .map(|&(a, b)| {
                    if a == b {
                        a.to_string()
                    } else {
                        format!("{a}-{b}")
                    }
                })
                .collect();
            let more = if g.seq.lost_ranges.len() > 10 {
                ", ..."
            } else {
                ""
            };
            println!("  lost: {}{more}", shown.join(", "));
        }
    }
}
