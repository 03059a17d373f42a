//! One-way latency: a log-linear histogram (HdrHistogram's idea) over nanoseconds, 64
//! buckets per power of two (under 1.6% error), preallocated: recording is an index and an
//! add, never an allocation.

use serde::Serialize;

/// Linear buckets per power of two.
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
/// Latencies are taken modulo 2^48 (the timestamp keeps 48 bits).
const MAX_BITS: u32 = 48;
const BUCKETS: usize = (SUB as usize) * (MAX_BITS - SUB_BITS + 2) as usize;

pub struct Latency {
    counts: Box<[u64]>,
    samples: u64,
    sum: u128,
    min: u64,
    max: u64,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct LatencyReport {
    pub samples: u64,
    pub min: u64,
    pub mean: u64,
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

fn bucket(v: u64) -> usize {
    let top = 63 - (v | 1).leading_zeros();
    let shift = top.saturating_sub(SUB_BITS);
    (SUB as usize) * shift as usize + (v >> shift) as usize
}

/// The lowest value of a bucket's range.
fn bucket_start(index: usize) -> u64 {
    if index < 2 * SUB as usize {
        return index as u64;
    }
    let shift = (index as u64 / SUB - 1) as u32;
    (index as u64 - SUB * u64::from(shift)) << shift
}

/// The middle of a bucket's range of values.
fn bucket_value(index: usize) -> u64 {
    if index < 2 * SUB as usize {
        return index as u64;
    }
    let shift = (index as u64 / SUB - 1) as u32;
    let mantissa = index as u64 - SUB * u64::from(shift);
    (mantissa << shift) + (1u64 << shift) / 2
}

impl Default for Latency {
    fn default() -> Latency {
        Latency {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            samples: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl Latency {
    #[inline]
    pub fn record(&mut self, ns: u64) {
        let ns = ns & ((1 << MAX_BITS) - 1);
        self.counts[bucket(ns)] += 1;
        self.samples += 1;
        self.sum += u128::from(ns);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    /// Adds another histogram's samples (another thread's, of the same generator).
    pub fn merge(&mut self, other: &Latency) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts.iter()) {
            *mine += theirs;
        }
        self.samples += other.samples;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// The value under which a fraction `q` of the samples fall.
    fn quantile(&self, q: f64) -> u64 {
        let rank = ((q * self.samples as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_value(i).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// For each of `bounds` (nanoseconds, increasing), how many samples were at most that:
    /// those of the buckets that start at or below it (a bucket spans under 1.6 % of its
    /// values).
    pub fn at_most(&self, bounds: &[u64]) -> Vec<u64> {
        let mut counts = vec![0; bounds.len()];
        let mut seen = 0;
        let mut next = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            let start = bucket_start(i);
            while next < bounds.len() && bounds[next] < start {
                counts[next] = seen;
                next += 1;
            }
            seen += c;
        }
        counts[next..].fill(seen);
        counts
    }

    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The samples' total, in nanoseconds.
    pub fn sum_ns(&self) -> u128 {
        self.sum
    }

    pub fn report(&self) -> LatencyReport {
        if self.samples == 0 {
            return LatencyReport::default();
        }
        LatencyReport {
            samples: self.samples,
            min: self.min,
            mean: (self.sum / u128::from(self.samples)) as u64,
            p50: self.quantile(0.50),
            p99: self.quantile(0.99),
            p999: self.quantile(0.999),
            max: self.max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for v in (0..1u64 << 20).step_by(7).chain([1 << 40, (1 << 48) - 1]) {
            let b = bucket(v);
            assert!(b >= last, "{v}");
            assert!(b < BUCKETS, "{v}");
            last = b;
            let start = bucket_start(b);
            assert!(start <= v && v - start <= v / 64, "{v} starts {start}");
            let back = bucket_value(b);
            assert!(
                back.abs_diff(v) as f64 <= v as f64 / 64.0 + 1.0,
                "{v} -> {back}"
            );
        }
    }

    #[test]
    fn percentiles_of_a_known_spread() {
        let mut l = Latency::default();
        for v in 1..=10_000u64 {
            l.record(v * 1000);
        }
        let r = l.report();
        assert_eq!((r.samples, r.min, r.max), (10_000, 1000, 10_000_000));
        let near = |got: u64, want: u64| (got as f64 - want as f64).abs() <= want as f64 * 0.02;
        assert!(near(r.p50, 5_000_000), "{r:?}");
        assert!(near(r.p99, 9_900_000), "{r:?}");
        assert!(near(r.p999, 9_990_000), "{r:?}");
        assert_eq!(r.mean, 5_000_500);
    }

    #[test]
    fn merged_histograms_report_as_one() {
        let (mut a, mut b, mut both) = (Latency::default(), Latency::default(), Latency::default());
        for v in 1..=1000u64 {
            let (half, ns) = (v % 2 == 0, v * 1000);
            if half {
                a.record(ns)
            } else {
                b.record(ns)
            }
            both.record(ns);
        }
        a.merge(&b);
        assert_eq!(a.report(), both.report());
    }

    #[test]
    fn at_most_counts_the_samples_up_to_each_bound() {
        let mut l = Latency::default();
        for v in [5, 100, 1000, 1000, 20_000, 3_000_000] {
            l.record(v);
        }
        assert_eq!(
            l.at_most(&[4, 5, 999, 1000, 10_000, 1_000_000, 1 << 47]),
            [0, 1, 2, 4, 4, 5, 6]
        );
        assert_eq!(Latency::default().at_most(&[1, 2]), [0, 0]);
        assert_eq!((l.samples(), l.sum_ns()), (6, 3_022_105));
    }

    #[test]
    fn empty_reports_zeros() {
        assert_eq!(Latency::default().report(), LatencyReport::default());
    }
}
