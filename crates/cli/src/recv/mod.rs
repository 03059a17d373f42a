//! `wirespeed recv`: receives what `wirespeed gen` sends and reports, per generator id,
//! packets received, lost (named by sequence number), duplicated and reordered, and the
//! one-way latency from the send timestamps (sender and receiver on one clock: the same
//! host, or hosts synchronised by PTP).

mod expect;
mod latency;
mod metrics;
mod receiver;
mod report;
mod threaded;
mod tracker;

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::bail;
use clap::Args;
use wirespeed_port::{Batch, Port, PortError, PortInfo, PortSpec};

use crate::args::port_flags::{PortFlags, SizeDefaults};
use crate::run::clock::HOT_LOOP_CHECK;
use crate::run::frame_audit::frames_json;
use crate::run::idle::PortIdle;
use crate::run::meter::{CpuReport, Measured, Meter, RunLimit, peak_rss_bytes, port_status};
use crate::run::rx_drain::rx_drain;
use expect::Expect;
use receiver::Receiver;
use report::{RecvSummary, print};

/// Generators tracked at once (each holds a 128 KiB window and a 22 KiB histogram).
pub const MAX_GENERATORS: usize = 16;
/// Options of `wirespeed recv`.
#[derive(Debug, Args)]
#[command(
    mut_arg("frames", |a| a.help("UMEM frames (AF_XDP) or ring frames per direction \
(AF_PACKET); default twice the ring size for each receive queue a port serves (see below); \
a count given here is shared out between the queues")),
    mut_arg("ring_size", |a| a.help("Entries per ring (a power of two); default 16384 (see \
below)")),
    after_help = "Counts per generator id (up to 16): received, lost, duplicated, \
reordered, late (arrived after being counted lost, more than 2^20 numbers behind), corrupt \
(a checksum fails), untracked (frames with no send time: the kernel engine's --no-stamp frames), and \
latency percentiles. Lost packets are named as ranges of sequence numbers. Without --expect, \
losses after the last packet received cannot be seen.\n\n\
Defaults: rings of 16384 entries and 32768 frames (gen has 1024 and 4096), so that a \
receiver whose CPU is taken away for tens of milliseconds (a busy neighbour, a VM's stolen \
time) loses nothing at modest rates. They cost 64 MiB of frames at 2048 bytes (128 MiB \
with 4096-byte frames, when the MTU is above 1,500-odd), against 8 MiB for 1024 and 4096. \
On a 2-CPU VM, 0.2 Mpps into a receiver sharing its CPU with a busy loop, a million packets: \
1024/4096 lost 328 to 24,806 in ten runs, these none. Smaller: --ring-size 1024 \
--frames 4096.\n\n\
Examples:\n  wirespeed recv --port xdp:veth1 --duration 10\n  \
wirespeed recv --port packet:veth1 --expect 1000000 --json\n  \
wirespeed recv --port xdp:eth0@all --cpus 2-5 --expect 1000000 --json"
)]
pub struct RecvArgs {
    /// The port: xdp:IFACE[@QUEUE] (AF_XDP on one queue, default 0), xdp:IFACE@all (every
    /// receive queue), xdp:IFACE@FIRST-LAST (those queues), packet:IFACE (AF_PACKET TPACKET_V3), tap:NAME (a tap device: the
    /// host's own stack), pipe:NAME (shared memory with the process at its other end) or
    /// pcap:FILE (a capture file, replayed to its end as fast as taken, or at its recorded
    /// pace with pcap:FILE,pace=1 (2: twice as fast); - is standard input).
    #[arg(long)]
    pub port: String,
    /// Stop after this many seconds (default: until --count or Ctrl-C). Either way, what
    /// had already arrived is still received (25 ms at most), so the losses reported are
    /// exactly the frames dropped on the way.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Stop after this many packets.
    #[arg(long)]
    pub count: Option<u64>,
    /// Every generator used sequence numbers 0 to N-1 (gen's `sequence_end`): the ones
    /// never received are lost, also after the last one that came. When no generator's
    /// packet arrives at all, gen's default generator (1) is reported with all N lost.
    /// ID=N,ID=N gives each generator its own (gen --cpus sends a series per CPU, each
    /// under its own id: its summary says which), and one named that sent nothing is
    /// reported with all its numbers lost. A generator whose frames carry no stamps (gen
    /// --no-stamp) has no numbers to lose: it gets a note instead, and --fail-on-loss fails.
    #[arg(long, value_name = "N|ID=N,...", value_parser = Expect::parse)]
    pub expect: Option<Expect>,
    /// Print one JSON object with the results on stdout at the end.
    #[arg(long)]
    pub json: bool,
    #[arg(long, value_name = "ADDR", help = crate::run::metrics::HELP)]
    pub metrics: Option<String>,
    /// No live line on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// With a port of several queues (xdp:IF@all, xdp:IF@0-3): a thread pinned to each CPU
    /// of this list (like 2,3 or 2-5), the queues shared out between them in turn, each
    /// thread with its own sockets, rings and frames. A generator's packets may arrive on
    /// any queue: the threads' counts are merged at the end (a number is lost where no
    /// thread saw it), and --json gives each thread's share under `threads`.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Receive again at once after every burst, never napping or sleeping: the thread keeps
    /// its CPU busy, and the latency measured is the path's, without the naps of up to 1 ms
    /// a receiver ahead of its load takes by default. At 20,000 packets a second over veth
    /// (bench/IDLE.md, Intel Xeon): p50 14-23 µs instead of 586-610, for 99.7 % of a CPU
    /// instead of 3 %.
    #[arg(long)]
    pub spin: bool,
    /// Exit with status 1 when a generator lost, duplicated or corrupted packets, or one
    /// came late, or no generator's packet came at all (after the summary is printed): for
    /// scripts and CI. Give --expect too, or losses after the last packet cannot be seen.
    #[arg(long)]
    pub fail_on_loss: bool,
    #[command(flatten)]
    pub port_flags: PortFlags,
}

/// recv's rings when none are named: deep enough that a receiver on a VM whose CPU is taken
/// away for tens of milliseconds loses nothing at modest rates (see the help).
const RECV_SIZES: SizeDefaults = SizeDefaults {
    ring_size: 16384,
    frames: None,
};

fn validate(args: &RecvArgs) -> anyhow::Result<()> {
    args.port_flags.validate()?;
    crate::run::meter::check_seconds("--duration", args.duration)?;
    if args.count == Some(0) {
        bail!("--count 0: must be at least 1");
    }
    if args.expect.as_ref().is_some_and(|e| e.of_any_zero()) {
        bail!("--expect: a generator's sequence numbers are 0 to N-1: N must be at least 1");
    }
    if let Some(list) = &args.cpus {
        crate::args::cpus::parse("--cpus", list)?;
        if args.count.is_some() {
            bail!("--count goes with one thread: with --cpus, give --duration or stop with Ctrl-C");
        }
    }
    Ok(())
}

pub fn run(mut args: RecvArgs) -> anyhow::Result<()> {
    args.port_flags.defaults = RECV_SIZES;
    validate(&args)?;
    let spec: PortSpec = args.port.parse()?;
    crate::run::caps::require_for(&format!("recv on {spec}"), &[spec.backend])?;
    let stop = crate::run::signals::stop_flag()?;
    let _metrics = crate::run::metrics::start_for_meters("recv", args.metrics.as_deref())?;
    let summary = receive(&args, &spec, &stop)?;
    print(&summary, args.json);
    if let Some(e) = &summary.error {
        bail!("{e}");
    }
    if args.fail_on_loss && summary.generators.is_empty() {
        bail!("--fail-on-loss: no generator's packet arrived");
    }
    if args.fail_on_loss && summary.other_generators > 0 {
        bail!(
            "--fail-on-loss: {} frames came from generators beyond the first {MAX_GENERATORS} \
             seen, whose losses are not tracked",
            summary.other_generators
        );
    }
    if args.fail_on_loss
        && let Some(g) = summary.generators.iter().find(|g| g.unnumbered())
    {
        bail!(
            "--fail-on-loss: generator {}'s frames carry no sequence numbers (gen --no-stamp): \
             losses cannot be told",
            g.generator
        );
    }
    if args.fail_on_loss
        && let Some(g) = summary
            .generators
            .iter()
            .find(|g| g.seq.lost + g.seq.duplicated + g.seq.late + g.corrupt > 0)
    {
        bail!(
            "--fail-on-loss: generator {} lost {}, duplicated {}, late {}, corrupt {}",
            g.generator,
            g.seq.lost,
            g.seq.duplicated,
            g.seq.late,
            g.corrupt
        );
    }
    Ok(())
}

fn receive(args: &RecvArgs, spec: &PortSpec, stop: &AtomicBool) -> anyhow::Result<RecvSummary> {
    if let Some(list) = &args.cpus {
        let cpus = crate::args::cpus::parse("--cpus", list)?;
        return threaded::receive(args, spec, &cpus, stop);
    }
    let mut port = crate::run::open_port::open_port(spec, &port_options(args, spec))?;
    let mut receiver = Receiver::new();
    let info = port.info().clone();
    crate::run::ready::announce_ready("recv", &info, args.port_flags.batch, None);
    let mut meter = Meter::new("rx", args.quiet, HOT_LOOP_CHECK);
    let mut tally = Tally::default();
    let ended = receive_loop(
        args,
        &mut *port,
        &mut receiver,
        stop,
        &mut meter,
        &mut tally,
    );
    let totals = Totals {
        packets: tally.packets,
        bytes: tally.bytes,
        measured: meter.measured(),
    };
    let stats = port.stats();
    let audit = port.audit();
    let generators = receiver.finish(args.expect.as_ref());
    let mut s = summary(args, spec, &info, &stats, audit, generators, totals);
    s.error = ended
        .err()
        .map(|e| crate::run::error_text::error_text(&e.into()));
    Ok(s)
}

/// The port's options: packets larger than a frame are taken whole, as chains.
pub(crate) fn port_options(args: &RecvArgs, spec: &PortSpec) -> wirespeed_port::PortOptions {
    wirespeed_port::PortOptions {
        multi_buffer: true,
        ..args.port_flags.options(&[&spec.iface], true, false)
    }
}

/// What the loop counted: reported however it ends.
#[derive(Default)]
pub(crate) struct Tally {
    packets: u64,
    bytes: u64,
}

/// Receives until the run ends, or the port fails (its interface gone, its file cut short);
/// a run cut short still takes what had arrived.
pub(crate) fn receive_loop(
    args: &RecvArgs,
    port: &mut dyn Port,
    receiver: &mut Receiver,
    stop: &AtomicBool,
    meter: &mut Meter,
    tally: &mut Tally,
) -> Result<(), PortError> {
    let mut batch = Batch::with_capacity(args.port_flags.batch as usize);
    let duration = args.duration.map(Duration::from_secs_f64);
    let mut run = RunLimit::new(duration, args.count, stop, HOT_LOOP_CHECK);
    let mut idle = PortIdle::new(port, args.port_flags.ring_size());
    if args.spin {
        idle = idle.spinning();
    }
    // Where a packet of several frames is gathered to be checked.
    let mut scratch = Vec::new();
    let mut publisher = metrics::Publisher::new();
    let mut receive = || -> Result<(), PortError> {
        while run.running(tally.packets) {
            run.fit(tally.packets, &mut batch);
            let room = batch.room();
            let n = take_burst(port, &mut batch, receiver, tally, &mut scratch)?;
            publisher.publish(receiver, tally.packets, n == 0);
            if idle.after_burst(port, n, room, &mut run)?.is_break() {
                break;
            }
            if idle.waited() {
                meter.check_soon();
            }
            meter.tick_port_status(tally.packets, tally.bytes, port, |port| {
                format!("lost {}  {}", receiver.lost_so_far(), port_status(port))
            });
        }
        if run.cut_short() {
            rx_drain(port, run.remaining(tally.packets), |port| {
                run.fit(tally.packets, &mut batch);
                take_burst(port, &mut batch, receiver, tally, &mut scratch)
            })?;
        }
        Ok(())
    };
    let ended = receive();
    // However the run ended (its interface gone, say), the figures it came to are shown.
    publisher.publish(receiver, tally.packets, true);
    ended
}

/// One burst from `port`, each packet checked and counted; the packets it took.
#[inline]
fn take_burst(
    port: &mut dyn Port,
    batch: &mut Batch,
    receiver: &mut Receiver,
    tally: &mut Tally,
    scratch: &mut Vec<u8>,
) -> Result<usize, PortError> {
    let n = port.rx_burst(batch)?;
    if n > 0 {
        // One clock read a burst: the latency of a burst's packets differs by less. A
        // port's own receive time wins (AF_PACKET's kernel stamp; a replayed file's
        // recorded time, where the clock now would measure the file's age).
        let now = crate::run::clock::now_ns();
        for i in 0..n {
            let meta = batch.meta(i);
            tally.bytes += batch.packet_len(i) as u64;
            let at = if meta.ts_ns != 0 { meta.ts_ns } else { now };
            receiver.check(port.packet_bytes(batch, i, scratch), at);
        }
        tally.packets += n as u64;
        port.release(batch);
    }
    Ok(n)
}

pub(crate) struct Totals {
    packets: u64,
    bytes: u64,
    measured: Measured,
}

/// A receiver's report: its generators, other frames, and frames of generators beyond
/// [`MAX_GENERATORS`].
type Generators = (Vec<receiver::GeneratorReport>, u64, u64);

fn summary(
    args: &RecvArgs,
    spec: &PortSpec,
    info: &PortInfo,
    stats: &wirespeed_port::PortStats,
    audit: Option<wirespeed_port::FrameAudit>,
    (generators, not_test_frames, other_generators): Generators,
    t: Totals,
) -> RecvSummary {
    let s = t.measured.seconds.max(1e-9);
    let mut notes = info.notes.clone();
    notes.extend(report::generator_notes(&generators));
    RecvSummary {
        mode: "recv",
        port: spec.to_string(),
        backend: spec.backend.name(),
        xdp_mode: info.mode.clone(),
        multi_buffer: info.multi_buffer,
        batch: args.port_flags.batch,
        seconds: t.measured.seconds,
        per_second_mpps: t.measured.per_second_mpps,
        packets: t.packets,
        bytes: t.bytes,
        mpps: t.packets as f64 / s / 1e6,
        mbps: t.bytes as f64 * 8.0 / s / 1e6,
        rx_packets: stats.rx_packets,
        drops: stats.drops.by_reason().into_iter().collect(),
        drops_total: stats.drops.total(),
        not_test_frames,
        other_generators,
        generators,
        frames: audit.map(|a| frames_json(&a)),
        peak_rss_bytes: peak_rss_bytes(),
        cpu: CpuReport::new(t.measured.cpu, t.packets).over(t.measured.seconds),
        notes,
        error: None,
        threads: None,
    }
}
