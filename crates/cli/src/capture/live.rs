//! Capturing from a port: the receive loop. Per burst: filter each packet with our BPF
//! interpreter, encode the ones that pass into the writer's chunk, release the burst. The
//! disk is the writer thread's business; this loop never waits on it.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::Context;
use wirespeed_capture::LINKTYPE_ETHERNET;
use wirespeed_capture::filter::{Filter, Metadata, PACKET_OUTGOING};
use wirespeed_capture::recorder::{Outcome, Recorder};
use wirespeed_capture::rotate::Rotation;
use wirespeed_capture::write::Interface;
use wirespeed_port::{Backend, Batch, Port, PortError, PortSpec, SockFilter};

use super::counts::{Counts, receive_drops};
use super::filter_child::Target;
use super::{CaptureArgs, FLUSH_EVERY, describe_output};
use crate::run::clock::now_ns;
use crate::run::idle::{IDLE_SLEEP, Idle};
use crate::run::link_watch::LinkWatch;
use crate::run::meter::RunLimit;

/// Loop turns between looks at the clock and the stop flag.
const HOT_LOOP_CHECK: u32 = 128;

/// How long a stopped capture keeps taking what the port still holds. TPACKET_V3 hands a
/// partly filled block over only once the kernel retires it (1 ms, rounded up to a jiffy:
/// up to 10 ms), and a spilled packet may wait 10 ms for its place: both arrived before
/// the stop.
const DRAIN: std::time::Duration = std::time::Duration::from_millis(25);

pub fn run(
    args: &CaptureArgs,
    spec: &PortSpec,
    filter: Option<Filter>,
    rotation: Rotation,
    stop: &AtomicBool,
) -> anyhow::Result<Counts> {
    let expression = args.expression();
    let mut port = crate::run::open_port::open_port(spec, &args.port_options(spec))?;
    let mut counts = Counts::for_port(port.info());
    // Here xdp:IFACE means every queue: name the one queue of a one-queue capture.
    counts.source = spec.with_queue();
    counts.filter = expression.clone();
    counts.filter_location = filter.as_ref().map(|_| "user".to_string());
    if let Some(expr) = expression.as_deref()
        && spec.backend == Backend::Packet
        && !args.no_kernel_filter
    {
        match attach_in_kernel(&mut *port, expr, &spec.iface, stop) {
            Ok(true) => counts.filter_location = Some("user+kernel".to_string()),
            Ok(false) => {}
            Err(e) if stop.load(std::sync::atomic::Ordering::Relaxed) => return Err(e),
            Err(e) => eprintln!(
                "wirespeed capture: note: filtering in user space only: {}",
                crate::run::error_text::error_text(&e)
            ),
        }
    }
    let interface = Interface {
        link_type: LINKTYPE_ETHERNET,
        snaplen: args.snaplen(),
        name: Some(spec.iface.clone()),
    };
    let sink = args.recorder(rotation, interface, false);
    let mut recorder =
        Recorder::start(sink.config, sink.output, now_ns()).context("create the output")?;
    let info = port.info();
    eprintln!(
        "wirespeed capture: {} ready ({} backend, {} mode, batch {}), filter {}, {}",
        counts.source,
        info.backend.name(),
        info.mode,
        args.batch,
        counts.filter_location.as_deref().unwrap_or("none"),
        describe_output(args)
    );
    for n in &info.notes {
        eprintln!("wirespeed: note: {n}");
    }
    let started = Instant::now();
    // A port that fails (its interface deleted) ends the capture like a stop: what was
    // received is written, counted and reported, and the error comes after.
    let ended = receive_loop(
        args,
        &mut *port,
        wirespeed_xsk::if_index(&spec.iface).unwrap_or(0),
        filter.as_ref(),
        &mut recorder,
        &mut counts,
        stop,
    );
    counts.seconds = started.elapsed().as_secs_f64();
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
    if let Err(e) = ended {
        let port = crate::run::error_text::error_text(&e.into());
        counts.error = Some(match counts.error.take() {
            Some(writer) => format!("{port}; and {writer}"),
            None => port,
        });
    }
    Ok(counts)
}

/// Compiles the expression as libpcap does for a live capture on `iface` (VLAN tags read from
/// the kernel's metadata) and attaches it to the port's socket.
fn attach_in_kernel(
    port: &mut dyn Port,
    expression: &str,
    iface: &str,
    stop: &AtomicBool,
) -> anyhow::Result<bool> {
    let kernel = super::filter_child::compile(expression, &Target::Kernel { iface }, stop)?;
    let program: Vec<SockFilter> = kernel
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

/// `ifindex`: the interface every packet came through (for the filter's `ifindex`).
fn receive_loop(
    args: &CaptureArgs,
    port: &mut dyn Port,
    ifindex: u32,
    filter: Option<&Filter>,
    recorder: &mut Recorder,
    counts: &mut Counts,
    stop: &AtomicBool,
) -> Result<(), PortError> {
    let duration = args.duration.map(std::time::Duration::from_secs_f64);
    let mut run = RunLimit::new(duration, None, stop, HOT_LOOP_CHECK);
    let limit = args.count.unwrap_or(u64::MAX);
    let mut batch = Batch::with_capacity(args.batch as usize);
    let (mut idle, mut watch) = (Idle::default(), LinkWatch::default());
    let (mut queued, mut stopping) = (0u64, false);
    let mut last_flush = now_ns();
    let flush_ns = FLUSH_EVERY.as_nanos() as u64;
    // Set once a signal or --duration stops the capture: until then, what the port gives
    // is still written (a count reached or the last file done stops at once instead).
    let mut drain_until: Option<Instant> = None;
    while !stopping {
        let left = match drain_until {
            None if run.running(0) => None,
            None => {
                drain_until = Some(Instant::now() + DRAIN);
                Some(DRAIN)
            }
            // A port that keeps giving (the load goes on) is left at the deadline.
            Some(until) => match until.saturating_duration_since(Instant::now()) {
                left if left.is_zero() => break,
                left => Some(left),
            },
        };
        let n = port.rx_burst(&mut batch)?;
        if n == 0 {
            if let Some(left) = left {
                port.wait_rx(left)?;
                continue;
            }
            if recorder.writer_busy() {
                // Nothing to receive: the writer may be waiting for this CPU.
                std::thread::yield_now();
            }
            watch.quiet(port)?;
            if idle.should_sleep() && !port.info().busy_poll {
                recorder.flush();
                if recorder.failed() {
                    break;
                }
                port.wait_rx(IDLE_SLEEP)?;
                run.check_soon();
            }
            continue;
        }
        idle.busy();
        // AF_XDP gives no per-packet timestamp: read CLOCK_REALTIME once per burst (vDSO, no
        // system call) and stamp the burst with it. AF_PACKET's own timestamps win when set.
        let burst_ns = now_ns();
        counts.received += n as u64;
        for i in 0..n {
            if stopping {
                counts.after_stop += (n - i) as u64;
                break;
            }
            let (addr, len, meta) = (batch.addr(i), batch.frame_len(i), batch.meta(i));
            let data = port.packet(addr, len);
            let wire_len = meta.wire_len.max(len);
            // For `inbound` and `outbound`: a packet the port does not mark as sent was
            // received (PACKET_HOST, 0: libpcap compares with PACKET_OUTGOING only).
            let known = Metadata {
                pkttype: if meta.outgoing { PACKET_OUTGOING } else { 0 },
                ifindex,
            };
            if let Some(f) = filter
                && !f.matches_with(data, wire_len, known)
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
                    queued += 1;
                    stopping = queued >= limit;
                }
                Outcome::WriterBehind => counts.matched += 1,
                Outcome::FilesDone => {
                    counts.after_stop += 1;
                    stopping = true;
                }
            }
        }
        port.release(&mut batch);
        if burst_ns.saturating_sub(last_flush) >= flush_ns {
            last_flush = burst_ns;
            recorder.flush();
            recorder.stats.received = counts.received;
            recorder.stats.dropped = receive_drops(&port.stats().drops);
            if recorder.failed() {
                break;
            }
        }
    }
    Ok(())
}
