//! Capturing from a port: the receive loop. Per burst: filter each packet with our BPF
//! interpreter, encode the ones that pass into the writer's chunk, release the burst. The
//! disk is the writer thread's business; this loop never waits on it.

use std::ops::ControlFlow;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Context;
use wirespeed_capture::LINKTYPE_ETHERNET;
use wirespeed_capture::filter::{Filter, Metadata, PACKET_OUTGOING};
use wirespeed_capture::merge::Feeder;
use wirespeed_capture::recorder::{Outcome, Recorder};
use wirespeed_capture::rotate::Rotation;
use wirespeed_capture::write::Interface;
use wirespeed_port::{Backend, Batch, Port, PortError, PortInfo, PortSpec, SockFilter};

use super::counts::{Counts, receive_drops};
use super::filter_child::Target;
use super::{CaptureArgs, FLUSH_EVERY, describe_output};
use crate::run::clock::now_ns;
use crate::run::idle::{Idle, Step};
use crate::run::link_watch::LinkWatch;
use crate::run::meter::RunLimit;
use crate::run::rx_drain::DRAIN;

/// Loop turns between looks at the clock and the stop flag.
const HOT_LOOP_CHECK: u32 = 128;

pub fn run(
    args: &CaptureArgs,
    spec: &PortSpec,
    filter: Option<Filter>,
    rotation: Rotation,
    stop: &AtomicBool,
) -> anyhow::Result<Counts> {
    let mut port = crate::run::open_port::open_port(spec, &args.port_options(spec))?;
    let mut counts = Counts::for_port(port.info());
    // Here xdp:IFACE means every queue: name the one queue of a one-queue capture.
    counts.source = spec.with_queue();
    counts.filter = args.expression();
    counts.filter_location = filter.as_ref().map(|_| "user".to_string());
    let live = live_filter(args, spec, &mut *port, &mut counts, stop)?;
    let filter = match (&live, &filter) {
        (Some(live), _) => Some(PacketFilter {
            filter: live,
            live: true,
        }),
        (None, Some(file)) => Some(PacketFilter {
            filter: file,
            live: false,
        }),
        (None, None) => None,
    };
    let interface = Interface {
        link_type: LINKTYPE_ETHERNET,
        snaplen: args.snaplen(),
        name: Some(spec.iface.clone()),
    };
    let sink = args.recorder(rotation, interface, false);
    let mut recorder =
        Recorder::start(sink.config, sink.output, now_ns()).context("create the output")?;
    super::metrics::watch_writer(recorder.writer_progress());
    print_ready(args, port.info(), &counts);
    let started = Instant::now();
    // A port that fails (its interface deleted) ends the capture like a stop: what was
    // received is written, counted and reported, and the error comes after.
    let ended = receive_loop(
        args,
        args.count.unwrap_or(u64::MAX),
        &mut *port,
        wirespeed_xsk::if_index(&spec.iface).unwrap_or(0),
        filter,
        &mut recorder,
        &mut counts,
        stop,
    );
    counts.seconds = started.elapsed().as_secs_f64();
    finish(args, &mut *port, recorder, &mut counts);
    if let Err(e) = ended {
        let port = crate::run::error_text::error_text(&e.into());
        counts.error = Some(match counts.error.take() {
            Some(writer) => format!("{port}; and {writer}"),
            None => port,
        });
    }
    Ok(counts)
}

/// On an AF_PACKET port the expression runs as tcpdump runs it live on Linux: compiled for
/// the interface, on each packet as the kernel's socket filter sees it (without the 802.1Q
/// tag the kernel took out, which the port puts back for the file; the tag as metadata), in
/// the kernel too unless --no-kernel-filter, so that what the capture drops never crosses
/// into user space, and the two agree. None elsewhere (the filter then sees packets as a
/// file holds them), or where the live program cannot be had (said in a note).
fn live_filter(
    args: &CaptureArgs,
    spec: &PortSpec,
    port: &mut dyn Port,
    counts: &mut Counts,
    stop: &AtomicBool,
) -> anyhow::Result<Option<Filter>> {
    let Some(expr) = counts.filter.clone() else {
        return Ok(None);
    };
    if spec.backend != Backend::Packet {
        return Ok(None);
    }
    let target = Target::Kernel { iface: &spec.iface };
    let live = match super::filter_child::compile(&expr, &target, stop) {
        Ok(live) => live,
        Err(e) if stop.load(std::sync::atomic::Ordering::Relaxed) => return Err(e.into()),
        Err(e) => {
            eprintln!(
                "wirespeed capture: note: filtering in user space only, on the packets as a \
                 file holds them (VLAN tags in their bytes): {}",
                crate::run::error_text::error_text(&e.into())
            );
            return Ok(None);
        }
    };
    if !args.no_kernel_filter {
        match attach_in_kernel(port, &live) {
            Ok(true) => counts.filter_location = Some("user+kernel".to_string()),
            Ok(false) => {}
            Err(e) => eprintln!(
                "wirespeed capture: note: filtering in user space only: {}",
                crate::run::error_text::error_text(&e)
            ),
        }
    }
    Ok(Some(live))
}

/// The ready line on standard error, then the port's notes.
pub(super) fn print_ready(args: &CaptureArgs, info: &PortInfo, counts: &Counts) {
    let multi_buffer = crate::run::ready::multi_buffer_text(info);
    eprintln!(
        "wirespeed capture: {} ready ({} backend, {} mode, batch {}{multi_buffer}), {}, {}",
        counts.source,
        info.backend.name(),
        info.mode,
        args.batch,
        match counts.filter_location.as_deref() {
            None => "no filter",
            Some("user+kernel") => "filter in the kernel and user space",
            Some(_) => "filter in user space",
        },
        describe_output(args)
    );
    for n in &info.notes {
        eprintln!("wirespeed: note: {n}");
    }
}

/// After the loop: the port's drops into the counts and the file's statistics, then the
/// writer finished (its files and errors into the counts).
fn finish(args: &CaptureArgs, port: &mut dyn Port, mut recorder: Recorder, counts: &mut Counts) {
    let stats = port.stats();
    counts.set_port_drops(&stats.drops);
    counts.spilled = stats.spilled;
    recorder.stats.received = counts.received;
    recorder.stats.dropped = counts.dropped_by_kernel;
    recorder.stats.end_ns = now_ns();
    let behind = recorder.dropped_by_writer;
    counts.set_writer(recorder.finish(), behind);
    if args.write.is_none() {
        counts.files.clear();
    }
}

/// Attaches `live` (compiled as libpcap does for a live capture: VLAN tags read from the
/// kernel's metadata) to the port's socket.
fn attach_in_kernel(port: &mut dyn Port, live: &Filter) -> anyhow::Result<bool> {
    let program: Vec<SockFilter> = live
        .insns()
        .iter()
        .map(|i| SockFilter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect();
    Ok(port.attach_filter(&program)?)
}

/// A filter, and how it sees a packet: as a capture file holds it (VLAN tags in its bytes),
/// or, `live`, as the kernel's socket filter does: a tag the port restored taken out again,
/// and given as metadata (AF_PACKET).
#[derive(Clone, Copy)]
pub(super) struct PacketFilter<'a> {
    pub filter: &'a Filter,
    pub live: bool,
}

impl PacketFilter<'_> {
    /// Whether the packet passes; `view` holds a live view's bytes.
    fn passes(
        &self,
        data: &[u8],
        wire_len: u32,
        known: Metadata,
        restored: bool,
        view: &mut Vec<u8>,
    ) -> bool {
        if self.live && restored && data.len() >= 16 {
            let word = |at: usize| u16::from_be_bytes([data[at], data[at + 1]]);
            view.clear();
            view.extend_from_slice(&data[..12]);
            view.extend_from_slice(&data[16..]);
            let known = Metadata {
                vlan: Some((word(12), word(14))),
                ..known
            };
            return self
                .filter
                .matches_with(view, wire_len.saturating_sub(4), known);
        }
        self.filter.matches_with(data, wire_len, known)
    }
}

/// Where the receive loop puts the packets it takes: the recorder (one receiving thread) or
/// a feeder of the merger (one of several, `--cpus`).
pub(super) trait PacketSink {
    fn record(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> Outcome;
    /// Passes what is encoded on (the loop goes idle, or every FLUSH_EVERY).
    fn flush(&mut self);
    /// True when the loop must end: the writer failed (or, with several threads, the
    /// merger ended the capture).
    fn failed(&self) -> bool;
    /// True while the writer has work: a loop with nothing to receive yields to it.
    fn writer_busy(&self) -> bool;
    /// The packets received and dropped so far, for the pcapng statistics.
    fn progress(&mut self, received: u64, dropped: u64);
    /// The matched packets dropped so far because the writer was behind.
    fn dropped_by_writer(&self) -> u64;
}

impl PacketSink for Recorder {
    #[inline]
    fn record(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> Outcome {
        Recorder::record(self, ts_ns, data, orig_len)
    }

    fn flush(&mut self) {
        Recorder::flush(self);
    }

    fn failed(&self) -> bool {
        Recorder::failed(self)
    }

    #[inline]
    fn writer_busy(&self) -> bool {
        Recorder::writer_busy(self)
    }

    fn progress(&mut self, received: u64, dropped: u64) {
        self.stats.received = received;
        self.stats.dropped = dropped;
    }

    fn dropped_by_writer(&self) -> u64 {
        self.dropped_by_writer
    }
}

impl PacketSink for Feeder {
    #[inline]
    fn record(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> Outcome {
        Feeder::record(self, ts_ns, data, orig_len)
    }

    fn flush(&mut self) {
        Feeder::flush(self);
    }

    fn failed(&self) -> bool {
        self.done()
    }

    #[inline]
    fn writer_busy(&self) -> bool {
        Feeder::writer_busy(self)
    }

    fn progress(&mut self, received: u64, dropped: u64) {
        self.publish(received, dropped);
    }

    fn dropped_by_writer(&self) -> u64 {
        self.dropped
    }
}

/// `limit`: -c, the packets to take (with several threads the merger counts them instead);
/// `ifindex`: the interface every packet came through (for the filter's `ifindex`).
#[allow(clippy::too_many_arguments)]
pub(super) fn receive_loop<S: PacketSink>(
    args: &CaptureArgs,
    limit: u64,
    port: &mut dyn Port,
    ifindex: u32,
    filter: Option<PacketFilter>,
    recorder: &mut S,
    counts: &mut Counts,
    stop: &AtomicBool,
) -> Result<(), PortError> {
    let duration = args.duration.map(Duration::from_secs_f64);
    let mut run = RunLimit::new(duration, None, stop, HOT_LOOP_CHECK);
    let mut batch = Batch::with_capacity(args.batch as usize);
    let mut idle = Idle::new(args.ring_size());
    if port.info().busy_poll {
        idle = idle.without_poll_sleep();
    }
    let mut watch = LinkWatch::default();
    let mut take = Take {
        filter,
        ifindex,
        limit,
        queued: 0,
        stopping: false,
        scratch: Vec::new(),
        view: Vec::new(),
    };
    let mut last_flush = now_ns();
    let flush_ns = FLUSH_EVERY.as_nanos() as u64;
    let mut metrics = super::metrics::Publisher::new();
    // Set once a signal or --duration stops the capture: until then, what the port gives
    // is still written (a count reached or the last file done stops at once instead).
    let mut drain_until: Option<Instant> = None;
    while !take.stopping {
        let ControlFlow::Continue(left) = drain_left(&mut drain_until, &mut run) else {
            break;
        };
        let room = batch.room();
        let n = port.rx_burst(&mut batch)?;
        let step = idle.after_burst(n, room);
        if n == 0 {
            if let Some(left) = left {
                port.wait_rx(left)?;
                continue;
            }
            metrics.publish(counts, port, recorder.dropped_by_writer(), true);
            if wait_when_empty(port, recorder, step, &mut watch, &mut run)?.is_break() {
                break;
            }
            continue;
        }
        // AF_XDP gives no per-packet timestamp: read CLOCK_REALTIME once per burst (vDSO, no
        // system call) and stamp the burst with it. AF_PACKET's own timestamps win when set.
        let burst_ns = now_ns();
        counts.received += n as u64;
        metrics.burst(n);
        take.burst(&*port, &batch, n, burst_ns, recorder, counts);
        port.release(&mut batch);
        if burst_ns.saturating_sub(last_flush) >= flush_ns {
            last_flush = burst_ns;
            recorder.flush();
            recorder.progress(counts.received, receive_drops(&port.stats().drops));
            if recorder.failed() {
                break;
            }
            metrics.publish(counts, port, recorder.dropped_by_writer(), false);
        }
        if let Step::Nap(d) = step {
            std::thread::sleep(d);
        }
    }
    metrics.publish(counts, port, recorder.dropped_by_writer(), true);
    Ok(())
}

/// How long the loop may still take packets: `None` while the capture runs, the time left
/// to drain once it was stopped, and `Break` when that is up.
fn drain_left(
    drain_until: &mut Option<Instant>,
    run: &mut RunLimit,
) -> ControlFlow<(), Option<Duration>> {
    ControlFlow::Continue(match *drain_until {
        None if run.running(0) => None,
        None => {
            *drain_until = Some(Instant::now() + DRAIN);
            Some(DRAIN)
        }
        // A port that keeps giving (the load goes on) is left at the deadline.
        Some(until) => match until.saturating_duration_since(Instant::now()) {
            left if left.is_zero() => return ControlFlow::Break(()),
            left => Some(left),
        },
    })
}

/// A running capture's empty burst: watch the link, and wait as the idle policy says,
/// giving the writer the CPU; before sleeping in the port, pass the chunk on. `Break` when
/// the writer failed.
fn wait_when_empty<S: PacketSink>(
    port: &mut dyn Port,
    recorder: &mut S,
    step: Step,
    watch: &mut LinkWatch,
    run: &mut RunLimit,
) -> Result<ControlFlow<()>, PortError> {
    watch.quiet(port)?;
    match step {
        // Nothing to receive: the writer may be waiting for this CPU.
        Step::Spin if recorder.writer_busy() => std::thread::yield_now(),
        Step::Spin => {}
        Step::Nap(d) => std::thread::sleep(d),
        Step::Sleep(d) => {
            recorder.flush();
            if recorder.failed() {
                return Ok(ControlFlow::Break(()));
            }
            port.wait_rx(d)?;
            run.check_soon();
        }
    }
    Ok(ControlFlow::Continue(()))
}

/// What the loop takes of each burst: the packets the filter passes, up to -c of them.
struct Take<'a> {
    filter: Option<PacketFilter<'a>>,
    /// The interface every packet came through (for the filter's `ifindex`).
    ifindex: u32,
    /// -c: the packets to queue for the writer, at most.
    limit: u64,
    queued: u64,
    /// Set when -c is reached or the last file is done: the rest is counted, not taken.
    stopping: bool,
    /// Where a packet of several frames is gathered, and where a live filter's view of a
    /// packet without its restored tag is made.
    scratch: Vec<u8>,
    view: Vec<u8>,
}

impl Take<'_> {
    /// Filters the burst's `n` packets and hands the ones that pass to the writer, stamped
    /// with the port's time or else `burst_ns`.
    fn burst<S: PacketSink>(
        &mut self,
        port: &dyn Port,
        batch: &Batch,
        n: usize,
        burst_ns: u64,
        recorder: &mut S,
        counts: &mut Counts,
    ) {
        for i in 0..n {
            if self.stopping {
                counts.after_stop += (n - i) as u64;
                break;
            }
            let meta = batch.meta(i);
            // A packet of several frames is gathered: filters and files see it whole.
            let data = port.packet_bytes(batch, i, &mut self.scratch);
            let wire_len = meta.wire_len.max(data.len() as u32);
            // For `inbound` and `outbound`: a packet the port does not mark as sent was
            // received (PACKET_HOST, 0: libpcap compares with PACKET_OUTGOING only).
            let known = Metadata {
                pkttype: if meta.outgoing { PACKET_OUTGOING } else { 0 },
                ifindex: self.ifindex,
                vlan: None,
            };
            if let Some(f) = self.filter
                && !f.passes(data, wire_len, known, meta.vlan_restored, &mut self.view)
            {
                counts.filtered_out += 1;
                continue;
            }
            let ts = if meta.ts_ns != 0 {
                meta.ts_ns
            } else {
                burst_ns
            };
            match recorder.record(ts, data, wire_len) {
                Outcome::Queued => {
                    counts.matched += 1;
                    self.queued += 1;
                    self.stopping = self.queued >= self.limit;
                }
                Outcome::WriterBehind => counts.matched += 1,
                Outcome::FilesDone => {
                    counts.after_stop += 1;
                    self.stopping = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tagged IPv4 frame whose tag the port put back: a live filter sees it without the
    /// tag (as the kernel's did), a file's filter with it.
    #[test]
    fn a_live_filter_sees_a_restored_tag_as_metadata() {
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a, 0x08, 0x00]);
        frame.extend_from_slice(&[0x45; 20]);
        let ip = Filter::compile("ip", LINKTYPE_ETHERNET).unwrap();
        let vlan = Filter::compile("vlan 10", LINKTYPE_ETHERNET).unwrap();
        let mut view = Vec::new();
        let len = frame.len() as u32;
        let live = |filter| PacketFilter { filter, live: true };
        let file = |filter| PacketFilter {
            filter,
            live: false,
        };
        let known = Metadata::default();
        assert!(live(&ip).passes(&frame, len, known, true, &mut view));
        assert_eq!(view.len(), frame.len() - 4);
        assert!(!file(&ip).passes(&frame, len, known, true, &mut view));
        assert!(file(&vlan).passes(&frame, len, known, true, &mut view));
        // A tag the port did not put back (a second one, say) stays in the bytes.
        assert!(!live(&ip).passes(&frame, len, known, false, &mut view));
    }
}
