//! The receiver's state: one slot per generator id, allocated before the first packet, and
//! what each packet changes in it.

use serde::Serialize;
use wirespeed_packet::read_test_frame;

use super::MAX_GENERATORS;
use super::latency::{Latency, LatencyReport};
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

    pub fn lost_so_far(&self) -> u64 {
        self.generators[..self.in_use]
            .iter()
            .map(|g| g.seq.lost)
            .sum()
    }

    pub fn finish(mut self, expect: Option<u64>) -> (Vec<GeneratorReport>, u64, u64) {
        let mut reports: Vec<GeneratorReport> = self.generators[..self.in_use]
            .iter_mut()
            .map(|g| GeneratorReport {
                generator: g.id,
                received: g.received,
                seq: g.seq.finish(expect),
                corrupt: g.corrupt,
                untracked: g.untracked,
                latency_ns: g.latency.report(),
            })
            .collect();
        reports.sort_by_key(|r| r.generator);
        (reports, self.not_test_frames, self.other_generators)
    }
}
