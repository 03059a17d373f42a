//! `bench rxdrop --verify`: checks received test frames against what the sender built:
//! every sequence number once, with the very bytes the template gives for it.

use serde::Serialize;
use wirespeed_packet::{UdpTemplate, read_test_payload};

/// Highest sequence number tracked (2 MiB of bitmap); later ones count as out of range.
const MAX_TRACKED: u64 = 1 << 24;

#[derive(Debug, Default, Clone, Serialize)]
pub struct VerifyReport {
    pub received: u64,
    pub unique: u64,
    pub duplicates: u64,
    /// Frames that carry no test payload (not from a wirespeed sender).
    pub not_test_frames: u64,
    /// Test frames whose bytes differ from the template's frame for their number.
    pub corrupt: u64,
    pub out_of_range: u64,
    /// Sequence numbers below --expect never seen (None without --expect).
    pub missing: Option<u64>,
    pub first_missing: Option<u64>,
}

pub struct Verifier {
    template: UdpTemplate,
    seen: Vec<u64>,
    expected: Vec<u8>,
    report: VerifyReport,
}

impl Verifier {
    pub fn new(template: UdpTemplate) -> Verifier {
        Verifier {
            expected: vec![0; template.frame_len],
            template,
            seen: vec![0; (MAX_TRACKED / 64) as usize],
            report: VerifyReport::default(),
        }
    }

    #[inline]
    pub fn check(&mut self, frame: &[u8]) {
        self.report.received += 1;
        let Some(p) = read_test_payload(frame) else {
            self.report.not_test_frames += 1;
            return;
        };
        if self
            .template
            .write(&mut self.expected, p.seq, p.timestamp_ns)
            .is_err()
            || frame != &self.expected[..]
        {
            self.report.corrupt += 1;
            return;
        }
        if p.seq >= MAX_TRACKED {
            self.report.out_of_range += 1;
            return;
        }
        let (word, bit) = ((p.seq / 64) as usize, p.seq % 64);
        if self.seen[word] & (1 << bit) != 0 {
            self.report.duplicates += 1;
        } else {
            self.seen[word] |= 1 << bit;
            self.report.unique += 1;
        }
    }

    pub fn finish(mut self, expect: Option<u64>) -> VerifyReport {
        if let Some(n) = expect {
            let n = n.min(MAX_TRACKED);
            let mut missing = 0;
            for seq in 0..n {
                if self.seen[(seq / 64) as usize] & (1 << (seq % 64)) == 0 {
                    missing += 1;
                    self.report.first_missing.get_or_insert(seq);
                }
            }
            self.report.missing = Some(missing);
        }
        self.report
    }
}
