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
    /// The source MAC address is checked only where the receiver was told the sender's;
    /// else it is taken from each frame (the sender's default is its own interface's).
    check_src_mac: bool,
    seen: Vec<u64>,
    expected: Vec<u8>,
    report: VerifyReport,
}

impl Verifier {
    pub fn new(template: UdpTemplate, check_src_mac: bool) -> Verifier {
        Verifier {
            expected: vec![0; template.frame_len],
            template,
            check_src_mac,
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
        let written = self
            .template
            .write(&mut self.expected, p.seq, p.timestamp_ns)
            .is_ok();
        if written && !self.check_src_mac && frame.len() >= 12 {
            self.expected[6..12].copy_from_slice(&frame[6..12]);
        }
        if !written || frame != &self.expected[..] {
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
