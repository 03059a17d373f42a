//! The receiver's state: one slot per generator id, allocated before the first packet, and
//! what each packet changes in it.

use serde::Serialize;
use wirespeed_packet::read_test_frame;

use super::expect::Expect;

use super::MAX_GENERATORS;
use super::latency::{Latency, LatencyReport};
use super::metrics::{GeneratorFigures, LATENCY_BOUNDS_NS};
use super::tracker::{SeqReport, SeqTracker};

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
pub struct Receiver {
    generators: Vec<GeneratorState>,
    in_use: usize,
    last: usize,
    not_test_frames: u64,
    other_generators: u64,
}

impl Receiver {
    pub fn new() -> Receiver {
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
    pub fn check(&mut self, frame: &[u8], now_ns: u64) {
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

    /// For the live line: what has not come below each generator's highest number, so a
    /// gap shows at once, not when it leaves the window (some may still come, reordered).
    pub fn lost_so_far(&self) -> u64 {
        self.generators[..self.in_use]
            .iter()
            .map(|g| g.seq.missing_so_far())
            .sum()
    }

    /// Each generator's figures so far, for `--metrics`.
    pub fn figures(&self) -> Vec<GeneratorFigures> {
        self.generators[..self.in_use]
            .iter()
            .map(|g| GeneratorFigures {
                generator: g.id,
                received: g.received,
                high: g.seq.high(),
                unique: g.seq.unique,
                duplicated: g.seq.duplicated,
                reordered: g.seq.reordered,
                late: g.seq.late,
                corrupt: g.corrupt,
                untracked: g.untracked,
                latency_at_most: g.latency.at_most(&LATENCY_BOUNDS_NS),
                latency_samples: g.latency.samples(),
                latency_sum_ns: g.latency.sum_ns(),
            })
            .collect()
    }

    /// The reports of receivers that each took part of the packets (a thread per queue):
    /// each generator's numbers are decided up to the same end in every one, then merged.
    pub fn finish_all(
        mut parts: Vec<Receiver>,
        expect: Option<&Expect>,
    ) -> (Vec<GeneratorReport>, u64, u64) {
        let mut ids: Vec<u16> = parts
            .iter()
            .flat_map(|r| r.generators[..r.in_use].iter().map(|g| g.id))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let mut reports = Vec::with_capacity(ids.len());
        for id in ids {
            let mut held: Vec<&mut GeneratorState> = parts
                .iter_mut()
                .filter_map(|r| r.generators[..r.in_use].iter_mut().find(|g| g.id == id))
                .collect();
            let untracked: u64 = held.iter().map(|g| g.untracked).sum();
            let numbered: u64 = held.iter().map(|g| g.numbered()).sum();
            let end = held
                .iter()
                .map(|g| g.seq.high())
                .max()
                .unwrap_or(0)
                .max(expected(untracked, numbered, expect, id).unwrap_or(0));
            let seq = match held.split_first_mut() {
                Some((first, rest)) if held_undecided(first, rest) => {
                    for g in rest.iter() {
                        first.seq.absorb(&g.seq);
                    }
                    first.seq.finish(Some(end))
                }
                // Some thread's span outgrew the window: its decided losses may be numbers
                // another thread saw, so only the numbers every thread lost are lost.
                _ => SeqReport::merge(held.iter_mut().map(|g| g.seq.finish(Some(end))).collect())
                    .unwrap_or_default(),
            };
            let mut latency = Latency::default();
            for g in &held {
                latency.merge(&g.latency);
            }
            reports.push(GeneratorReport {
                generator: id,
                received: held.iter().map(|g| g.received).sum(),
                seq,
                corrupt: held.iter().map(|g| g.corrupt).sum(),
                untracked: held.iter().map(|g| g.untracked).sum(),
                latency_ns: latency.report(),
            });
        }
        let not_test = parts.iter().map(|r| r.not_test_frames).sum();
        let other = parts.iter().map(|r| r.other_generators).sum();
        (none_arrived(reports, expect), not_test, other)
    }

    pub fn finish(mut self, expect: Option<&Expect>) -> (Vec<GeneratorReport>, u64, u64) {
        let mut reports: Vec<GeneratorReport> = self.generators[..self.in_use]
            .iter_mut()
            .map(|g| GeneratorReport {
                generator: g.id,
                received: g.received,
                seq: g
                    .seq
                    .finish(expected(g.untracked, g.numbered(), expect, g.id)),
                corrupt: g.corrupt,
                untracked: g.untracked,
                latency_ns: g.latency.report(),
            })
            .collect();
        reports.sort_by_key(|r| r.generator);
        (
            none_arrived(reports, expect),
            self.not_test_frames,
            self.other_generators,
        )
    }
}

impl GeneratorReport {
    /// Its frames came without stamps only (gen --no-stamp): no number to count losses by.
    pub fn unnumbered(&self) -> bool {
        self.untracked > 0 && self.untracked + self.corrupt == self.received
    }
}

impl GeneratorState {
    /// Frames whose number was recorded.
    fn numbered(&self) -> u64 {
        self.received - self.corrupt - self.untracked
    }
}

/// --expect for `generator`: none where its frames came without stamps only (gen
/// --no-stamp), which carry no number to count losses by.
fn expected(untracked: u64, numbered: u64, expect: Option<&Expect>, generator: u16) -> Option<u64> {
    match (untracked, numbered) {
        (1.., 0) => None,
        _ => expect.and_then(|e| e.of(generator)),
    }
}

/// The generators --expect names that not one packet came from, each with every number
/// lost, beside those that came (in generator order).
fn none_arrived(
    mut reports: Vec<GeneratorReport>,
    expect: Option<&Expect>,
) -> Vec<GeneratorReport> {
    let Some(expect) = expect else {
        return reports;
    };
    let seen: Vec<u16> = reports.iter().map(|r| r.generator).collect();
    for (generator, n) in expect.missing(&seen) {
        reports.push(GeneratorReport {
            generator,
            received: 0,
            seq: SeqTracker::default().finish(Some(n)),
            corrupt: 0,
            untracked: 0,
            latency_ns: Latency::default().report(),
        });
    }
    reports.sort_by_key(|r| r.generator);
    reports
}

/// True when no thread has decided any of a generator's numbers yet.
fn held_undecided(first: &GeneratorState, rest: &[&mut GeneratorState]) -> bool {
    first.seq.undecided() && rest.iter().all(|g| g.seq.undecided())
}
