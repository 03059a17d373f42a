//! The end-of-run summary of `recv`: a few lines for people, one JSON object for scripts.

use serde::Serialize;

use wirespeed_packet::DEFAULT_GENERATOR_ID;

use super::MAX_GENERATORS;
use super::receiver::GeneratorReport;

#[derive(Debug, Serialize)]
pub struct RecvSummary {
    pub mode: &'static str,
    pub port: String,
    pub backend: &'static str,
    pub xdp_mode: String,
    /// Packets may span this many frames (AF_XDP multi-buffer); null: one frame each.
    pub multi_buffer: Option<u32>,
    pub batch: u32,
    pub seconds: f64,
    /// Each whole second's rate, as the live line showed it.
    pub per_second_mpps: Vec<f64>,
    pub packets: u64,
    pub bytes: u64,
    pub mpps: f64,
    pub mbps: f64,
    pub rx_packets: u64,
    pub drops: std::collections::BTreeMap<&'static str, u64>,
    pub drops_total: u64,
    pub not_test_frames: u64,
    /// Test frames of generators beyond the first 16 seen.
    pub other_generators: u64,
    pub generators: Vec<GeneratorReport>,
    pub frames: Option<serde_json::Value>,
    pub peak_rss_bytes: u64,
    /// CPU time over the run, and per packet received, as `bench` reports it.
    pub cpu: crate::run::meter::CpuReport,
    pub notes: Vec<String>,
    /// What ended the run early (the port failed: its interface went away, a replayed file
    /// was cut short...); the counts are what was received until then.
    pub error: Option<String>,
    /// With --cpus: each thread's share (its queues, rate, drops, busy share).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<Vec<crate::run::threads::ThreadReport>>,
}

pub fn print(s: &RecvSummary, json: bool) {
    if json {
        println!("{}", serde_json::to_string(s).expect("summary serialises"));
        return;
    }
    println!(
        "recv on {} ({} {}): {} packets in {:.2}s = {}, {:.1} Mbit/s; {} not from a generator, {} receive drops",
        s.port,
        s.backend,
        s.xdp_mode,
        s.packets,
        s.seconds,
        crate::run::meter::rate_text(s.mpps),
        s.mbps,
        s.not_test_frames,
        s.drops_total
    );
    if s.other_generators > 0 {
        println!(
            "{} frames of generators beyond the first {MAX_GENERATORS} seen: not tracked",
            s.other_generators
        );
    }
    for g in &s.generators {
        let l = &g.latency_ns;
        println!(
            "generator {}: received {}, lost {}, duplicated {}, reordered {}, late {}, corrupt {}, untracked {}",
            g.generator,
            g.received,
            g.seq.lost,
            g.seq.duplicated,
            g.seq.reordered,
            g.seq.late,
            g.corrupt,
            g.untracked
        );
        if l.samples > 0 {
            println!(
                "  latency us: p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
                l.p50 as f64 / 1e3,
                l.p99 as f64 / 1e3,
                l.p999 as f64 / 1e3,
                l.max as f64 / 1e3
            );
        }
        if !g.seq.lost_ranges.is_empty() {
            let shown: Vec<String> = g
                .seq
                .lost_ranges
                .iter()
                .take(10)
                .map(|&(a, b)| {
                    if a == b {
                        a.to_string()
                    } else {
                        format!("{a}-{b}")
                    }
                })
                .collect();
            let more = if g.seq.lost_ranges.len() > 10 {
                ", ..."
            } else {
                ""
            };
            println!("  lost: {}{more}", shown.join(", "));
        }
    }
    for note in generator_notes(&s.generators) {
        println!("note: {note}");
    }
}

/// The first numbers missing, at least, for a note that the receiver may have started late.
const LATE_START: u64 = 1000;

/// What the generators' counts alone do not say: that nothing came at all (--expect), or
/// that a generator's first numbers never came, as when recv starts after gen.
pub fn generator_notes(generators: &[GeneratorReport]) -> Vec<String> {
    let none_came = generators.iter().all(|g| g.received == 0);
    generators
        .iter()
        .filter_map(|g| match g.seq.lost_ranges.first() {
            Some(&(0, last))
                if g.received == 0
                    && none_came
                    && generators.len() == 1
                    && g.generator == DEFAULT_GENERATOR_ID =>
            {
                Some(format!(
                    "no generator's packet arrived: generator {} (gen's default \
                     --generator-id) is reported with all {} expected lost",
                    g.generator,
                    last + 1
                ))
            }
            Some(&(0, last)) if g.received == 0 => Some(format!(
                "generator {}: none of its {} expected packets arrived",
                g.generator,
                last + 1
            )),
            _ if g.unnumbered() => Some(format!(
                "generator {}: its {} frames carry no sequence numbers or send times (gen \
                 --no-stamp): losses, order and latency cannot be told",
                g.generator, g.untracked
            )),
            // (Frames without a send time carry no number the receiver tracks; a few lost at
            // the start are a loss like any other.)
            Some(&(0, last)) if g.untracked == 0 && last + 1 >= LATE_START => Some(format!(
                "generator {}: nothing numbered below {} arrived (0-{last} are counted lost): \
                 was recv started after gen?",
                g.generator,
                last + 1
            )),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recv::tracker::SeqTracker;

    fn report(generator: u16, received: u64, seqs: std::ops::Range<u64>) -> GeneratorReport {
        let mut seq = SeqTracker::default();
        seqs.for_each(|s| seq.record(s));
        GeneratorReport {
            generator,
            received,
            seq: seq.finish(None),
            corrupt: 0,
            untracked: 0,
            latency_ns: Default::default(),
        }
    }

    /// A generator --expect named that sent nothing: all its numbers lost.
    fn missing(generator: u16, expected: u64) -> GeneratorReport {
        GeneratorReport {
            seq: SeqTracker::default().finish(Some(expected)),
            ..report(generator, 0, 0..0)
        }
    }

    #[test]
    fn a_generator_that_sent_nothing_is_named_as_such() {
        // Nothing came, --expect N: gen's default generator stands in.
        assert_eq!(
            generator_notes(&[missing(DEFAULT_GENERATOR_ID, 100)]),
            [
                "no generator's packet arrived: generator 1 (gen's default --generator-id) is \
                 reported with all 100 expected lost"
            ]
        );
        // --expect 5=100: generator 5 is not the default one.
        assert_eq!(
            generator_notes(&[missing(5, 100)]),
            ["generator 5: none of its 100 expected packets arrived"]
        );
        assert_eq!(
            generator_notes(&[report(1, 10, 0..10), missing(2, 7)]),
            ["generator 2: none of its 7 expected packets arrived"]
        );
    }

    #[test]
    fn a_generator_whose_first_numbers_never_came_gets_a_note() {
        // Generator 5 lost its first 3 (a warm-up loss, no note); 4 came in at 2000.
        let notes = generator_notes(&[
            report(3, 10, 0..10),
            report(4, 5, 2000..2005),
            report(5, 7, 3..10),
        ]);
        assert_eq!(
            notes,
            [
                "generator 4: nothing numbered below 2000 arrived (0-1999 are counted lost): \
              was recv started after gen?"
            ]
        );
    }
}
