//! `gen --pcap FILE`: sends the frames of a capture file as they are, at their recorded
//! timing (the gaps between records), or as fast as the port takes them (`--fast`, or paced
//! by `--rate`), `--loop` times. The file is read into memory first, so a bad file is
//! refused before anything is sent and the send loop never waits on the disk.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use wirespeed_capture::{CaptureReader, LINKTYPE_ETHERNET};
use wirespeed_port::{Backend, Batch, Port, PortSpec};

use super::GenArgs;
use super::kernel_engine;
use super::pacing::{Grant, Pacer, wait};
use super::report::GenSummary;
use crate::args::engine::Engine;
use crate::run::interface_drops::InterfaceTxDrops;
use crate::run::live_frames::Prebuilt;
use crate::run::meter::{Meter, RunLimit};
use crate::run::open_port::drain;
use crate::run::ready::announce_ready;

/// Ethernet, the only link type a port sends.
/// Most bytes of frames held in memory.
const MAX_FILE_BYTES: usize = 1 << 30;
/// Shortest frame sent: an Ethernet header.
const MIN_FRAME: usize = 14;

/// The frames of a file, back to back, with their offsets and recorded times.
pub struct Trace {
    data: Vec<u8>,
    /// (offset into data, length, time since the first record in ns).
    records: Vec<(usize, u32, u64)>,
    pub truncated: u64,
    pub too_short: u64,
}

impl Trace {
    pub fn load(path: &Path) -> anyhow::Result<Trace> {
        let mut reader = CaptureReader::open(path)?;
        if reader.link_type() != LINKTYPE_ETHERNET {
            return Err(wirespeed_capture::CaptureError::unsupported_link_type(
                path,
                reader.link_type(),
            )
            .into());
        }
        let mut t = Trace {
            data: Vec::new(),
            records: Vec::new(),
            truncated: 0,
            too_short: 0,
        };
        let mut first_ts = None;
        while let Some(r) = reader.next_record()? {
            if r.data.len() < MIN_FRAME {
                t.too_short += 1;
                continue;
            }
            if (r.data.len() as u32) < r.orig_len {
                t.truncated += 1;
            }
            if t.data.len() + r.data.len() > MAX_FILE_BYTES {
                bail!(
                    "{}: more than 1 GiB of frames; replay a part of it",
                    path.display()
                );
            }
            let first = *first_ts.get_or_insert(r.ts_ns);
            t.records.push((
                t.data.len(),
                r.data.len() as u32,
                r.ts_ns.saturating_sub(first),
            ));
            t.data.extend_from_slice(r.data);
        }
        if t.records.is_empty() {
            bail!("{}: no Ethernet frames to replay", path.display());
        }
        Ok(t)
    }

    /// What the user should know about the file before it is sent.
    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.truncated > 0 {
            notes.push(format!(
                "{} frames were cut short by the capture: sent as captured",
                self.truncated
            ));
        }
        if self.too_short > 0 {
            notes.push(format!(
                "{} records shorter than an Ethernet header left out",
                self.too_short
            ));
        }
        notes
    }

    fn frame(&self, i: usize) -> &[u8] {
        let (offset, len, _) = self.records[i];
        &self.data[offset..offset + len as usize]
    }

    fn longest(&self) -> u32 {
        self.records.iter().map(|r| r.1).max().unwrap_or(0)
    }

    /// How long the file lasts, first record to last.
    fn span(&self) -> Duration {
        Duration::from_nanos(self.records.iter().map(|r| r.2).max().unwrap_or(0))
    }
}

pub fn run(args: &GenArgs, path: &Path) -> anyhow::Result<GenSummary> {
    args.check_run()?;
    if args.rate.is_some() && !args.fast {
        bail!("--rate with --pcap paces the replay: add --fast (recorded timing has its own rate)");
    }
    let trace = Trace::load(path)?;
    let spec: PortSpec = args.port.parse()?;
    if args.engine == Engine::Kernel {
        return replay_kernel(args, path, &spec, &trace);
    }
    crate::run::caps::require_for(&format!("gen --pcap on {spec}"), &[spec.backend])?;
    let stop = crate::run::signals::stop_flag()?;
    let opts = args.port_flags.options(&[&spec.iface], false, true);
    // No port sends more than a frame: refused before a port opens (a recording would be
    // cut to its header), and again once open, against what the port can send.
    too_long(path, &spec, &trace, opts.frame_size)?;
    let mut port = crate::run::open_port::open_port(&spec, &opts)?;
    too_long(path, &spec, &trace, port.max_packet_len())?;
    let notes = trace.notes();
    for n in &notes {
        eprintln!("wirespeed: note: {n}");
    }
    announce_ready(
        "gen",
        port.info(),
        args.port_flags.batch,
        Some(&format!("replaying {} frames", trace.records.len())),
    );
    let mut meter = Meter::new("tx", args.quiet, 1);
    let mut done = Sent::default();
    let interface = InterfaceTxDrops::start(&spec);
    let mut ended = send_trace(args, &mut *port, &trace, &stop, &mut meter, &mut done);
    if ended.is_ok() {
        ended = drain(&mut *port).context("send the last packets");
    }
    let stats = port.stats();
    let mut s = GenSummary::new("socket", &spec, Some(port.info()));
    s.batch = args.port_flags.batch;
    s.set_measured(meter.measured());
    s.packets = done.sent;
    s.bytes = done.bytes;
    s.set_rate(args.rate);
    s.replay_frames = Some(trace.records.len() as u64);
    s.loops_done = Some(done.loops);
    s.set_port_end(&stats, spec.backend, interface.as_ref());
    s.frames = port.audit();
    s.notes.extend(notes);
    s.set_error(ended);
    Ok(s.finish())
}

/// Refuses a trace with a frame longer than `max` bytes, what `spec` can send.
fn too_long(path: &Path, spec: &PortSpec, trace: &Trace, max: u32) -> anyhow::Result<()> {
    if trace.longest() > max {
        bail!(
            "{}: a frame of {} bytes is longer than {spec} can send ({max} bytes)",
            path.display(),
            trace.longest(),
        );
    }
    Ok(())
}

/// What a replay sent: reported however the loop ends.
#[derive(Default)]
struct Sent {
    sent: u64,
    bytes: u64,
    loops: u64,
}

/// How many of the `want` frames from `next` on are due `now` into the loop; or, if none
/// is, how long until the first one is.
fn frames_due(trace: &Trace, next: usize, want: usize, now: Duration) -> Result<usize, Duration> {
    let due = trace.records[next..next + want]
        .iter()
        .take_while(|r| Duration::from_nanos(r.2) <= now)
        .count();
    match due {
        0 => Err(Duration::from_nanos(trace.records[next].2) - now),
        n => Ok(n),
    }
}

/// The send loop: bursts of the file's frames, copied into the port's frames, at the
/// recorded timing, at --rate, or as fast as the port takes them, until the run ends or the
/// port fails. `done` counts what was sent.
fn send_trace(
    args: &GenArgs,
    port: &mut dyn Port,
    trace: &Trace,
    stop: &AtomicBool,
    meter: &mut Meter,
    done: &mut Sent,
) -> anyhow::Result<()> {
    let batch_size = args.port_flags.batch as usize;
    let (n_records, longest) = (trace.records.len(), trace.longest());
    let mean = trace.data.len() as f64 / n_records as f64 + 4.0;
    let mut pacer = args.rate.map(|r| Pacer::new(r, mean, batch_size));
    let mut batch = Batch::with_capacity(batch_size);
    let mut run = RunLimit::new(args.duration(), args.count, stop, 1);
    let mut next = 0usize;
    let mut loop_start = Instant::now();
    while run.running(done.sent) && (args.loops == 0 || done.loops < args.loops) {
        let mut want = run
            .remaining(done.sent)
            .min((n_records - next).min(batch_size) as u64) as usize;
        if !args.fast {
            // The next loop's start lies ahead of now until its first frame is due (elapsed()
            // would say zero and send it at once).
            let due = match Instant::now().checked_duration_since(loop_start) {
                Some(now) => frames_due(trace, next, want, now),
                None => Err(loop_start - Instant::now()),
            };
            match due {
                Ok(n) => want = n,
                Err(until) => {
                    port.flush()?;
                    wait(until);
                    meter.tick_port(done.sent, done.bytes, port);
                    continue;
                }
            }
        }
        if let Some(p) = pacer.as_mut() {
            match p.grant(want) {
                Grant::Send(n) => want = n,
                Grant::Wait(d) => {
                    port.flush()?;
                    wait(d);
                    continue;
                }
            }
        }
        let n = port.alloc_tx(&mut batch, want, longest);
        if n == 0 {
            port.flush()?;
            meter.tick_port(done.sent, done.bytes, port);
            continue;
        }
        let burst_bytes = copy_frames(port, &mut batch, trace, next, n);
        done.sent += port.tx_burst(&mut batch)? as u64;
        done.bytes += burst_bytes;
        if let Some(p) = pacer.as_mut() {
            p.charge(n as u64, burst_bytes + 4 * n as u64);
        }
        next += n;
        if next == n_records {
            next = 0;
            done.loops += 1;
            // The next loop starts one average gap after the last frame of this one.
            loop_start += trace.span() + trace.span() / n_records as u32;
        }
        meter.tick_port(done.sent, done.bytes, port);
    }
    Ok(())
}

/// Copies the trace's frames from `first` into the `n` frames of `batch`; returns their bytes.
#[inline]
fn copy_frames(
    port: &mut dyn Port,
    batch: &mut Batch,
    trace: &Trace,
    first: usize,
    n: usize,
) -> u64 {
    let mut bytes = 0u64;
    for i in 0..n {
        let frame = trace.frame(first + i);
        batch.set_len(i, frame.len() as u32);
        port.packet_mut(batch.addr(i), frame.len() as u32)
            .copy_from_slice(frame);
        bytes += frame.len() as u64;
    }
    bytes
}

/// The kernel engine repeats frames: each frame of the file is sent `--loop` times in a
/// burst of its own (so the order of the file holds only with `--loop 1`).
fn replay_kernel(
    args: &GenArgs,
    path: &Path,
    spec: &PortSpec,
    trace: &Trace,
) -> anyhow::Result<GenSummary> {
    let n = trace.records.len();
    if !args.fast {
        bail!("--engine kernel cannot keep the recorded timing: add --fast");
    }
    if spec.backend != Backend::Xdp {
        bail!("--engine kernel sends through XDP: use an xdp: port, not {spec}");
    }
    if n > kernel_engine::MAX_FRAMES {
        bail!(
            "{}: {n} frames, the kernel engine cycles at most {}: use --engine socket",
            path.display(),
            kernel_engine::MAX_FRAMES
        );
    }
    crate::run::caps::require(&format!("gen --pcap on {spec}"), true)?;
    let stop = crate::run::signals::stop_flag()?;
    let frames: Vec<Prebuilt> = (0..n)
        .map(|i| Prebuilt {
            frame: trace.frame(i).to_vec(),
            weight: 1,
        })
        .collect();
    let per_loop = n as u64;
    let count = match (args.loops, args.count) {
        (0, c) => c,
        (l, None) => Some(l * per_loop),
        (l, Some(c)) => Some(c.min(l * per_loop)),
    };
    let mean = trace.data.len() as f64 / n as f64 + 4.0;
    let mut s = kernel_engine::send(args, spec, &frames, mean, count, Default::default(), &stop)?;
    s.replay_frames = Some(per_loop);
    s.loops_done = Some(s.packets / per_loop);
    Ok(s)
}
