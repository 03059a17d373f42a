//! capture's `--metrics` and SIGUSR1: each receiving thread publishes its counts (received,
//! matched, spilled, dropped) and, with `--metrics`, its port's figures and its time at the
//! loop's flush points; the writer's progress (written, bytes, files), and a read's (`-r`)
//! counts, are read from their atomics at each scrape and each SIGUSR1.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use wirespeed_capture::spool::WriterProgress;
use wirespeed_metrics::{Exposition, Published, ThreadFigures};
use wirespeed_port::{Port, ThreadClock};

use super::counts::{Counts, receive_drops};
use crate::run::metrics::{MeterFigures, PortFigures};

/// How often a receiving thread publishes.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// One receiving thread's capture counts.
#[derive(Debug, Clone, Default)]
struct CaptureFigures {
    received: u64,
    filtered_out: u64,
    matched: u64,
    dropped_by_kernel: u64,
    dropped_by_writer: u64,
    spilled: u64,
}

/// The capture's slots, and its writer's progress, read by the extra it adds to scrapes.
#[derive(Default)]
struct Slots {
    threads: Mutex<Vec<(usize, Published<CaptureFigures>)>>,
    writer: Mutex<Option<Arc<WriterProgress>>>,
    reader: Mutex<Option<Arc<ReadProgress>>>,
}

/// `-r`'s counts so far, stored after each record (a plain store, no lock on the way).
#[derive(Debug, Default)]
pub(super) struct ReadProgress {
    pub received: AtomicU64,
    pub matched: AtomicU64,
}

/// Adds a read's counts to [`so_far`] from now on.
pub(super) fn watch_reader(progress: Arc<ReadProgress>) {
    *slots().reader.lock().unwrap_or_else(|e| e.into_inner()) = Some(progress);
}

static SLOTS: OnceLock<Arc<Slots>> = OnceLock::new();

fn slots() -> Arc<Slots> {
    crate::run::metrics::tool_slots(&SLOTS, render)
}

/// Shows the writer's progress in scrapes and in [`so_far`] from now on.
pub(super) fn watch_writer(progress: Arc<WriterProgress>) {
    *slots().writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(progress);
}

/// A capture's counts so far, every thread's added up: what each last published (within
/// [`PUBLISH_EVERY`] while packets come) and what the writer has written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct SoFar {
    pub received: u64,
    pub matched: u64,
    pub written: u64,
    pub dropped_by_kernel: u64,
    pub dropped_by_writer: u64,
    pub spilled: u64,
}

pub(super) fn so_far() -> SoFar {
    let slots = slots();
    let mut sum = SoFar::default();
    for (_, slot) in slots
        .threads
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
    {
        if let Some(c) = slot.latest() {
            sum.received += c.received;
            sum.matched += c.matched;
            sum.dropped_by_kernel += c.dropped_by_kernel;
            sum.dropped_by_writer += c.dropped_by_writer;
            sum.spilled += c.spilled;
        }
    }
    if let Some(r) = slots
        .reader
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
    {
        sum.received += r.received.load(Relaxed);
        sum.matched += r.matched.load(Relaxed);
    }
    if let Some(w) = slots
        .writer
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
    {
        sum.written = w.written.load(Relaxed);
    }
    sum
}

/// A receiving thread's side: its capture counts, for [`so_far`] (SIGUSR1) and, with
/// `--metrics`, for scrapes with its port's figures and its time.
pub(super) struct Publisher {
    counts: Published<CaptureFigures>,
    meter: Option<Meter>,
    last: Option<Instant>,
    /// Packets received at the last publication.
    last_received: u64,
}

/// What `--metrics` adds.
struct Meter {
    meter: Published<MeterFigures>,
    clock: ThreadClock,
    bursts: u64,
    burst_packets: u64,
}

impl Publisher {
    /// Made on the receiving thread (its clock is the thread's).
    pub(super) fn new() -> Publisher {
        let counts = Published::new();
        let slots = slots();
        let mut threads = slots.threads.lock().unwrap_or_else(|e| e.into_inner());
        let meter = crate::run::metrics::register_meter();
        // Numbered as the meters are; without them, in the order the threads came.
        let thread = meter.as_ref().map_or(threads.len(), |(t, _)| *t);
        threads.push((thread, counts.clone()));
        Publisher {
            counts,
            meter: meter.map(|(_, meter)| Meter {
                meter,
                clock: ThreadClock::start(),
                bursts: 0,
                burst_packets: 0,
            }),
            last: None,
            last_received: 0,
        }
    }

    /// A burst that brought `n` packets.
    #[inline]
    pub(super) fn burst(&mut self, n: usize) {
        if let Some(m) = &mut self.meter {
            m.bursts += 1;
            m.burst_packets += n as u64;
        }
    }

    /// Offers the thread's figures, at most every [`PUBLISH_EVERY`] while packets come;
    /// at once when the loop goes `idle` (it may sleep a while, or end) with packets not
    /// yet published.
    /// `dropped_by_writer`: the matched packets the writer had no room for so far (the
    /// port's drops and spills are read from the port: `counts` has them only at the end).
    pub(super) fn publish(
        &mut self,
        counts: &Counts,
        port: &mut dyn Port,
        dropped_by_writer: u64,
        idle: bool,
    ) {
        let now = Instant::now();
        let unpublished = counts.received != self.last_received;
        let recent = self
            .last
            .is_some_and(|at| now.duration_since(at) < PUBLISH_EVERY);
        if recent && !(idle && unpublished) {
            return;
        }
        self.last = Some(now);
        self.last_received = counts.received;
        let stats = port.stats();
        self.counts.offer(|| CaptureFigures {
            received: counts.received,
            filtered_out: counts.filtered_out,
            matched: counts.matched,
            dropped_by_kernel: receive_drops(&stats.drops),
            dropped_by_writer,
            spilled: stats.spilled,
        });
        let Some(m) = &mut self.meter else {
            return;
        };
        let (device, queue) = wirespeed_metrics::device_and_queue(&port.info().spec);
        let figures = MeterFigures {
            counted: "rx",
            packets: counts.received,
            bytes: stats.rx_bytes,
            port: Some(PortFigures {
                device,
                queue,
                stats,
                audit: port.audit(),
            }),
            time: Some(ThreadFigures {
                busy: m.clock.cpu(),
                wall: m.clock.wall(),
                bursts: m.bursts,
                burst_packets: m.burst_packets,
            }),
        };
        m.meter.offer(|| figures);
    }
}

fn render(e: &mut Exposition, slots: &Slots) {
    let threads = slots
        .threads
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    for (thread, slot) in threads {
        let Some(c) = slot.latest() else {
            continue;
        };
        let thread = thread.to_string();
        let labels = [("thread", thread.as_str())];
        let counts = [
            (
                "wirespeed_capture_received_packets_total",
                "Packets taken from the port.",
                c.received,
            ),
            (
                "wirespeed_capture_filtered_out_packets_total",
                "Packets the filter rejected.",
                c.filtered_out,
            ),
            (
                "wirespeed_capture_matched_packets_total",
                "Packets the filter accepted (all, without one).",
                c.matched,
            ),
            (
                "wirespeed_capture_kernel_dropped_packets_total",
                "Packets lost before the capture saw them (the kernel, the rings).",
                c.dropped_by_kernel,
            ),
            (
                "wirespeed_capture_writer_dropped_packets_total",
                "Matched packets not written: the writer was behind.",
                c.dropped_by_writer,
            ),
            (
                "wirespeed_capture_spilled_packets_total",
                "Packets the XDP program set aside in the spill ring while the capture was \
                 behind (late, not lost).",
                c.spilled,
            ),
        ];
        for (name, help, n) in counts {
            e.counter(name, help, &labels, n);
        }
    }
    let writer = slots
        .writer
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    if let Some(w) = writer {
        e.counter(
            "wirespeed_capture_written_packets_total",
            "Packets whole in the output.",
            &[],
            w.written.load(Relaxed),
        );
        e.counter(
            "wirespeed_capture_written_bytes_total",
            "Bytes of the packet records written.",
            &[],
            w.bytes.load(Relaxed),
        );
        e.counter(
            "wirespeed_capture_files_rotated_total",
            "Files started after the first (-C, -G).",
            &[],
            w.files.load(Relaxed).saturating_sub(1),
        );
    }
}
