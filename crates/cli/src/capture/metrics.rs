//! capture's `--metrics`: each receiving thread publishes its port's figures, its time and
//! its counts (received, matched, spilled, dropped) at the loop's flush points, and the
//! writer's progress (written, bytes, files) is read from its atomics at each scrape.

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
}

static SLOTS: OnceLock<Arc<Slots>> = OnceLock::new();

fn slots() -> Arc<Slots> {
    crate::run::metrics::tool_slots(&SLOTS, render)
}

/// Shows the writer's progress in scrapes from now on (nothing without `--metrics`).
pub(super) fn watch_writer(progress: Arc<WriterProgress>) {
    if crate::run::metrics::enabled() {
        *slots().writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(progress);
    }
}

/// A receiving thread's side; does nothing without `--metrics`.
pub(super) struct Publisher {
    on: Option<On>,
}

struct On {
    meter: Published<MeterFigures>,
    counts: Published<CaptureFigures>,
    clock: ThreadClock,
    last: Option<Instant>,
    /// Packets received at the last publication.
    last_received: u64,
    bursts: u64,
    burst_packets: u64,
}

impl Publisher {
    /// Made on the receiving thread (its clock is the thread's).
    pub(super) fn new() -> Publisher {
        let on = crate::run::metrics::register_meter().map(|(thread, meter)| {
            let counts = Published::new();
            slots()
                .threads
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((thread, counts.clone()));
            On {
                meter,
                counts,
                clock: ThreadClock::start(),
                last: None,
                last_received: 0,
                bursts: 0,
                burst_packets: 0,
            }
        });
        Publisher { on }
    }

    /// A burst that brought `n` packets.
    #[inline]
    pub(super) fn burst(&mut self, n: usize) {
        if let Some(on) = &mut self.on {
            on.bursts += 1;
            on.burst_packets += n as u64;
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
        let Some(on) = &mut self.on else {
            return;
        };
        let now = Instant::now();
        let unpublished = counts.received != on.last_received;
        let recent = on
            .last
            .is_some_and(|at| now.duration_since(at) < PUBLISH_EVERY);
        if recent && !(idle && unpublished) {
            return;
        }
        on.last = Some(now);
        on.last_received = counts.received;
        let stats = port.stats();
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
                busy: on.clock.cpu(),
                wall: on.clock.wall(),
                bursts: on.bursts,
                burst_packets: on.burst_packets,
            }),
        };
        on.meter.offer(|| figures);
        on.counts.offer(|| CaptureFigures {
            received: counts.received,
            filtered_out: counts.filtered_out,
            matched: counts.matched,
            dropped_by_kernel: receive_drops(&stats.drops),
            dropped_by_writer,
            spilled: stats.spilled,
        });
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
