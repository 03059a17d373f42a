//! recv's `--metrics`: what each generator's packets showed so far (received, lost,
//! duplicated, reordered, late, corrupt) and their one-way latency as a histogram. Each
//! receiving thread publishes its receiver's figures at most every [`PUBLISH_EVERY`], and at
//! once when it goes idle with new packets; a scrape adds up the threads' by generator (a
//! generator's packets may come on any queue).

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use wirespeed_metrics::{Exposition, Published};

use super::receiver::Receiver;
use crate::run::clock::HOT_LOOP_CHECK;

/// How often a receiving thread publishes.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// The latency histogram's upper bounds, in nanoseconds: 1 µs to 1 s in steps of 1, 2, 5.
pub const LATENCY_BOUNDS_NS: [u64; 19] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
];

/// One generator's figures in one thread's receiver.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GeneratorFigures {
    pub generator: u16,
    pub received: u64,
    /// One past the highest sequence number seen.
    pub high: u64,
    /// Sequence numbers seen (each once).
    pub unique: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub late: u64,
    pub corrupt: u64,
    pub untracked: u64,
    /// Latency samples at most each of [`LATENCY_BOUNDS_NS`].
    pub latency_at_most: Vec<u64>,
    pub latency_samples: u64,
    pub latency_sum_ns: u128,
}

impl GeneratorFigures {
    /// Adds another thread's figures of the same generator.
    fn add(&mut self, other: &GeneratorFigures) {
        self.received += other.received;
        self.high = self.high.max(other.high);
        self.unique += other.unique;
        self.duplicated += other.duplicated;
        self.reordered += other.reordered;
        self.late += other.late;
        self.corrupt += other.corrupt;
        self.untracked += other.untracked;
        for (mine, theirs) in self.latency_at_most.iter_mut().zip(&other.latency_at_most) {
            *mine += theirs;
        }
        self.latency_samples += other.latency_samples;
        self.latency_sum_ns += other.latency_sum_ns;
    }

    /// The numbers below the highest seen that have not come (yet), as the live line's
    /// "lost": a reordered packet may still fill a gap.
    fn missing(&self) -> u64 {
        // A number two threads both saw is counted in each one's `unique`.
        self.high.saturating_sub(self.unique)
    }
}

/// Every receiving thread's slot, read by the extra recv adds to scrapes.
type Slots = Mutex<Vec<Published<Vec<GeneratorFigures>>>>;

static SLOTS: OnceLock<Arc<Slots>> = OnceLock::new();

fn slots() -> Arc<Slots> {
    crate::run::metrics::tool_slots(&SLOTS, render)
}

/// A receiving thread's side; does nothing without `--metrics`.
pub struct Publisher {
    on: Option<On>,
}

struct On {
    slot: Published<Vec<GeneratorFigures>>,
    last: Option<Instant>,
    /// Packets received at the last publication.
    last_received: u64,
    /// Bursts with packets since the clock was last read.
    bursts: u32,
}

impl Publisher {
    pub fn new() -> Publisher {
        let on = crate::run::metrics::enabled().then(|| {
            let slot = Published::new();
            slots()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(slot.clone());
            On {
                slot,
                last: None,
                last_received: 0,
                bursts: 0,
            }
        });
        Publisher { on }
    }

    /// Offers the receiver's figures, at most every [`PUBLISH_EVERY`] while packets come
    /// (the clock read every [`HOT_LOOP_CHECK`] bursts, as the meter reads it); at once
    /// when the loop goes `idle` (it may sleep a while, or end) with packets not yet
    /// published.
    #[inline]
    pub fn publish(&mut self, receiver: &Receiver, received: u64, idle: bool) {
        let Some(on) = &mut self.on else {
            return;
        };
        if idle {
            if received == on.last_received {
                return;
            }
        } else {
            on.bursts += 1;
            if on.bursts < HOT_LOOP_CHECK {
                return;
            }
            on.bursts = 0;
            if on.last.is_some_and(|at| at.elapsed() < PUBLISH_EVERY) {
                return;
            }
        }
        on.bursts = 0;
        on.last = Some(Instant::now());
        on.last_received = received;
        on.slot.offer(|| receiver.figures());
    }
}

/// The generators of every thread, added up by generator id, in id order.
fn merged(parts: &[Vec<GeneratorFigures>]) -> Vec<GeneratorFigures> {
    let mut all: Vec<GeneratorFigures> = Vec::new();
    for g in parts.iter().flatten() {
        match all.iter_mut().find(|a| a.generator == g.generator) {
            Some(a) => a.add(g),
            None => all.push(g.clone()),
        }
    }
    all.sort_by_key(|g| g.generator);
    all
}

fn render(e: &mut Exposition, slots: &Slots) {
    let published: Vec<Vec<GeneratorFigures>> = slots
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(Published::latest)
        .collect();
    for g in merged(&published) {
        let id = g.generator.to_string();
        let labels = [("generator", id.as_str())];
        let counts = [
            (
                "wirespeed_recv_received_packets_total",
                "Test frames of this generator received (corrupt and untracked ones too).",
                g.received,
            ),
            (
                "wirespeed_recv_duplicated_packets_total",
                "Sequence numbers received more than once (each extra copy).",
                g.duplicated,
            ),
            (
                "wirespeed_recv_reordered_packets_total",
                "Packets that came after a higher sequence number.",
                g.reordered,
            ),
            (
                "wirespeed_recv_late_packets_total",
                "Packets that came after being counted lost (more than 2^20 numbers behind).",
                g.late,
            ),
            (
                "wirespeed_recv_corrupt_packets_total",
                "Packets whose checksums fail.",
                g.corrupt,
            ),
            (
                "wirespeed_recv_untracked_packets_total",
                "Packets with no send time (the kernel engine's --no-stamp frames): no \
                 sequence number or latency is taken from them.",
                g.untracked,
            ),
        ];
        for (name, help, n) in counts {
            e.counter(name, help, &labels, n);
        }
        e.gauge(
            "wirespeed_recv_lost_packets",
            "Sequence numbers below the highest received that have not come: the live \
             line's lost. It falls when a reordered packet fills a gap; losses after the \
             last packet received are not seen.",
            &labels,
            g.missing() as f64,
        );
        let buckets: Vec<(f64, u64)> = LATENCY_BOUNDS_NS
            .iter()
            .zip(&g.latency_at_most)
            .map(|(&ns, &n)| (ns as f64 / 1e9, n))
            .collect();
        e.histogram(
            "wirespeed_recv_latency_seconds",
            "One-way latency, send time (in the frame) to receipt, of the packets with a \
             sequence number (buckets within 1.6 %).",
            &labels,
            &buckets,
            g.latency_sum_ns as f64 / 1e9,
            g.latency_samples,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(generator: u16, high: u64, unique: u64, at_most: [u64; 19]) -> GeneratorFigures {
        GeneratorFigures {
            generator,
            received: unique,
            high,
            unique,
            latency_at_most: at_most.to_vec(),
            latency_samples: at_most[18],
            latency_sum_ns: 1_000 * u128::from(at_most[18]),
            ..GeneratorFigures::default()
        }
    }

    #[test]
    fn threads_add_up_by_generator_and_lost_is_what_no_thread_saw() {
        // Generator 1's numbers 0..100 split between two threads, 3 of them missing;
        // generator 2 on one thread only.
        let a = vec![figures(2, 10, 10, [10; 19]), figures(1, 100, 50, [50; 19])];
        let b = vec![figures(1, 98, 47, [47; 19])];
        let all = merged(&[a, b]);
        assert_eq!(all.len(), 2);
        let (one, two) = (&all[0], &all[1]);
        assert_eq!((one.generator, one.received, one.missing()), (1, 97, 3));
        assert_eq!(one.latency_at_most, vec![97; 19]);
        assert_eq!((one.latency_samples, one.latency_sum_ns), (97, 97_000));
        assert_eq!((two.generator, two.missing()), (2, 0));
    }

    #[test]
    fn a_scrape_names_each_generator_with_a_histogram() {
        let mut e = Exposition::new();
        let mut at_most = [0; 19];
        at_most[3..].fill(4);
        let slots: Slots = Mutex::new(vec![Published::new()]);
        slots.lock().unwrap()[0].offer(|| vec![figures(7, 6, 4, at_most)]);
        render(&mut e, &slots);
        let text = e.render();
        for line in [
            "wirespeed_recv_received_packets_total{generator=\"7\"} 4\n",
            "wirespeed_recv_lost_packets{generator=\"7\"} 2\n",
            "wirespeed_recv_latency_seconds_bucket{generator=\"7\",le=\"0.000005\"} 0\n",
            "wirespeed_recv_latency_seconds_bucket{generator=\"7\",le=\"0.00001\"} 4\n",
            "wirespeed_recv_latency_seconds_bucket{generator=\"7\",le=\"+Inf\"} 4\n",
            "wirespeed_recv_latency_seconds_sum{generator=\"7\"} 0.000004\n",
            "wirespeed_recv_latency_seconds_count{generator=\"7\"} 4\n",
            "# TYPE wirespeed_recv_latency_seconds histogram\n",
            "# TYPE wirespeed_recv_lost_packets gauge\n",
        ] {
            assert!(text.contains(line), "{line}in\n{text}");
        }
    }
}
