//! `capture --cpus LIST` on a port of several queues: a receiving thread pinned to each CPU
//! of the list, owning its share of the queues (sockets, rings, UMEM, frame pool: see
//! `run::threads`), each running the one-thread receive loop into a feeder of its own; one
//! merging thread records what they feed into the one output (`wirespeed_capture::merge`:
//! each queue's packets in their order, rotation, -c and -W decided there as with one
//! thread). The counts are summed, and `--json` gives each thread's in `threads`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::Context;
use wirespeed_capture::LINKTYPE_ETHERNET;
use wirespeed_capture::filter::Filter;
use wirespeed_capture::merge::{Feeder, Merger, ThreadTally};
use wirespeed_capture::recorder::Recorder;
use wirespeed_capture::rotate::Rotation;
use wirespeed_capture::write::Interface;
use wirespeed_port::{Port, PortSpec, PortStats};

use super::CaptureArgs;
use super::counts::{Counts, ThreadCounts, drop_map, receive_drops};
use super::from_port::{PacketFilter, print_ready, receive_loop};
use crate::run::clock::now_ns;
use crate::run::threads::{self, ThreadClock};

/// Bytes of each feeder chunk: a thread's packets reach the merger a chunk at a time (or
/// every FLUSH_EVERY), and a thread has its share of the buffer (`--buffer`, `-B`) in these.
const FEED_CHUNK: usize = 1 << 20;

/// What one receiving thread did.
struct ThreadEnd {
    cpu: usize,
    queues: Vec<u32>,
    /// Its receive loop's counts: `matched` are the packets it fed (or dropped for want of
    /// a chunk), `after_stop` those it took after the merger ended the capture.
    counts: Counts,
    stats: PortStats,
    /// Packets dropped for want of a free chunk.
    fed_dropped: u64,
    seconds: f64,
    busy: f64,
    ended: anyhow::Result<()>,
}

pub fn run(
    args: &CaptureArgs,
    spec: &PortSpec,
    cpus: &[usize],
    filter: Option<Filter>,
    rotation: Rotation,
    stop: &AtomicBool,
) -> anyhow::Result<Counts> {
    let opts = args.thread_port_options(spec, cpus.len());
    let ports = threads::open_ports(spec, cpus, &opts)?;
    let info = threads::joint_info(spec, &ports, cpus);
    let mut counts = Counts::for_port(&info);
    counts.source = spec.with_queue();
    counts.filter = args.expression();
    counts.filter_location = filter.as_ref().map(|_| "user".to_string());
    let interface = Interface {
        link_type: LINKTYPE_ETHERNET,
        snaplen: args.snaplen(),
        name: Some(spec.iface.clone()),
    };
    let sink = args.recorder(rotation, interface, false);
    let recorder =
        Recorder::start(sink.config, sink.output, now_ns()).context("create the output")?;
    super::metrics::watch_writer(recorder.writer_progress());
    let chunks = (args.buffer_mib << 20) / cpus.len() / FEED_CHUNK;
    let (merger, feeders) =
        Merger::start(recorder, cpus.len(), chunks.max(4), FEED_CHUNK, args.count)
            .context("start the merging thread")?;
    let feeders: Vec<Mutex<Option<Feeder>>> =
        feeders.into_iter().map(|f| Mutex::new(Some(f))).collect();
    print_ready(args, &info, &counts);
    let ifindex = wirespeed_xsk::if_index(&spec.iface).unwrap_or(0);
    let started = Instant::now();
    let ends = threads::run(ports, cpus, "capture", true, |t, mut port, _progress| {
        let clock = ThreadClock::start();
        // Taken once, at the start: nothing on the per-packet path is shared.
        let feeder = feeders[t].lock().ok().and_then(|mut f| f.take());
        let mut c = Counts::default();
        let mut fed_dropped = 0;
        let ended = match feeder {
            Some(mut feeder) => {
                let ended = receive_loop(
                    args,
                    u64::MAX,
                    &mut port,
                    ifindex,
                    filter.as_ref().map(|filter| PacketFilter {
                        filter,
                        live: false,
                    }),
                    &mut feeder,
                    &mut c,
                    stop,
                );
                feeder.publish(c.received, receive_drops(&port.stats().drops));
                fed_dropped = feeder.dropped;
                // Dropping it hands the merger its last chunk.
                drop(feeder);
                ended.map_err(anyhow::Error::from)
            }
            None => Err(anyhow::anyhow!("thread {t} found no feeder")),
        };
        if ended.is_err() {
            // A failed port ends the capture, as with one thread: the others stop too.
            stop.store(true, Ordering::Relaxed);
        }
        ThreadEnd {
            cpu: cpus[t],
            queues: port.queues(),
            counts: c,
            stats: port.stats(),
            fed_dropped,
            seconds: clock.wall().as_secs_f64(),
            busy: clock.busy(),
            ended,
        }
    });
    // Feeders a thread that never started left behind: the merger ends once all are gone.
    drop(feeders);
    let report = merger.finish();
    let ends = ends?;
    counts.seconds = started.elapsed().as_secs_f64();
    add_up(&mut counts, &ends, &report.threads);
    let behind: u64 = ends.iter().map(|e| e.fed_dropped).sum::<u64>()
        + report.threads.iter().map(|t| t.writer_behind).sum::<u64>();
    counts.set_writer(report.writer, behind);
    if args.write.is_none() {
        counts.files.clear();
    }
    if let Some(e) = ends.into_iter().find_map(|e| e.ended.err()) {
        let port = crate::run::error_text::error_text(&e);
        counts.error = Some(match counts.error.take() {
            Some(writer) => format!("{port}; and {writer}"),
            None => port,
        });
    }
    Ok(counts)
}

/// Each thread's counts from its loop's and the merger's, summed into `counts` (all but
/// what the writer reports).
fn add_up(counts: &mut Counts, ends: &[ThreadEnd], tallies: &[ThreadTally]) {
    let mut stats = PortStats::default();
    let mut threads = Vec::with_capacity(ends.len());
    for (t, e) in ends.iter().enumerate() {
        let tally = tallies.get(t).copied().unwrap_or_default();
        stats.add(&e.stats);
        let c = &e.counts;
        let th = ThreadCounts {
            cpu: e.cpu,
            queues: e.queues.clone(),
            received: c.received,
            filtered_out: c.filtered_out,
            // The merger's after-stop packets were fed, not matched.
            matched: c.matched.saturating_sub(tally.after_stop),
            written: tally.queued,
            dropped_by_kernel: receive_drops(&e.stats.drops),
            dropped_by_writer: e.fed_dropped + tally.writer_behind,
            spilled: e.stats.spilled,
            after_stop: c.after_stop + tally.after_stop,
            drops: drop_map(&e.stats.drops),
            seconds: e.seconds,
            busy: e.busy,
        };
        counts.received += th.received;
        counts.filtered_out += th.filtered_out;
        counts.matched += th.matched;
        counts.after_stop += th.after_stop;
        threads.push(th);
    }
    counts.set_port_drops(&stats.drops);
    counts.spilled = stats.spilled;
    counts.threads = Some(threads);
}
