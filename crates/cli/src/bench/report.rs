//! The end-of-run summary: a few lines for people, one JSON object for scripts.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use wirespeed_port::{FrameAudit, PortStats};

use super::verify::VerifyReport;
use crate::run::meter::{CpuReport, Meter};

/// What a measured loop has counted so far: all of it is reported, however the loop ends.
#[derive(Default)]
pub struct Tally {
    pub packets: u64,
    pub bytes: u64,
}

#[derive(Debug, Serialize)]
pub struct FramesJson {
    pub total: u64,
    pub pool: u64,
    pub fill: u64,
    pub kernel: u64,
    pub rx: u64,
    pub application: u64,
    pub tx: u64,
    pub completion: u64,
    pub balanced: bool,
}

/// Everything one run measured.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub mode: &'static str,
    pub port: String,
    pub backend: &'static str,
    pub xdp_mode: String,
    /// Packets may span this many frames (AF_XDP multi-buffer); null: one frame each.
    pub multi_buffer: Option<u32>,
    pub engine: Option<&'static str>,
    pub batch: u32,
    pub size: u32,
    pub seconds: f64,
    /// Packets received (rxdrop, xdpdrop), sent (txpush) or forwarded (l2fwd).
    pub packets: u64,
    pub bytes: u64,
    /// Over the whole run, from start to stop (idle seconds before the load included).
    pub mpps: f64,
    pub mbps: f64,
    /// Each whole second's rate, as the live line showed it.
    pub per_second_mpps: Vec<f64>,
    pub rx_packets: u64,
    pub tx_packets: u64,
    /// Packets copied between buffer areas (0 when everything moved by descriptor).
    pub copies: u64,
    pub drops: BTreeMap<&'static str, u64>,
    pub drops_total: u64,
    pub peak_rss_bytes: u64,
    /// CPU time over the measured window, and per packet.
    #[serde(skip)]
    pub cpu_time: Option<crate::run::meter::CpuTime>,
    pub cpu: Option<CpuReport>,
    #[serde(skip)]
    pub frames: Option<FrameAudit>,
    #[serde(rename = "frames")]
    pub frames_json: Option<FramesJson>,
    pub verify: Option<VerifyReport>,
    /// The CPUs the kernel engine was pinned to (empty: not pinned).
    pub engine_cpus: Option<Vec<usize>>,
    pub notes: Vec<String>,
    /// What ended the run early (the port failed: its interface went away...); the
    /// counts are what was done until then.
    pub error: Option<String>,
    /// With --cpus: each thread's share (its queues, rate, drops, busy share).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<Vec<crate::run::threads::ThreadReport>>,
}

impl Summary {
    /// Fills the rate fields from packets, bytes and seconds.
    pub fn finish(mut self) -> Summary {
        let s = self.seconds.max(1e-9);
        self.mpps = self.packets as f64 / s / 1e6;
        self.mbps = self.bytes as f64 * 8.0 / s / 1e6;
        self.peak_rss_bytes = crate::run::meter::peak_rss_bytes();
        self.cpu = self
            .cpu_time
            .map(|t| CpuReport::new(t, self.packets).over(self.seconds));
        self.frames_json = self.frames.map(|a| FramesJson {
            total: a.total,
            pool: a.pool,
            fill: a.fill,
            kernel: a.kernel,
            rx: a.rx,
            application: a.application,
            tx: a.tx,
            completion: a.completion,
            balanced: a.balanced(),
        });
        self
    }

    /// The measured window: its length, the CPU it took, each second's rate, and what moved.
    pub fn set_measured(&mut self, seconds: f64, meter: &Meter, packets: u64, bytes: u64) {
        self.seconds = seconds;
        self.cpu_time = Some(meter.cpu_used());
        self.per_second_mpps = meter.per_second_mpps();
        self.packets = packets;
        self.bytes = bytes;
    }

    /// Records how the loop ended: an error is reported after the summary.
    pub fn set_error(&mut self, ended: Result<(), impl Into<anyhow::Error>>) {
        self.error = ended
            .err()
            .map(|e| crate::run::error_text::error_text(&e.into()));
    }

    pub fn set_stats(&mut self, s: &PortStats) {
        self.rx_packets = s.rx_packets;
        self.tx_packets = s.tx_packets;
        self.copies = s.copies;
        self.drops = s.drops.by_reason().into_iter().collect();
        self.drops_total = s.drops.total();
    }

    /// Prints the summary; on standard error when a port records on standard output.
    pub fn print(&self, json: bool, quiet: bool, to_stderr: bool) {
        let mut text = String::new();
        if json {
            let _ = writeln!(
                text,
                "{}",
                serde_json::to_string(self).expect("summary serialises")
            );
            return crate::run::report_to::report(&text, to_stderr);
        }
        let _ = quiet;
        self.write_text(&mut text);
        crate::run::report_to::report(&text, to_stderr);
    }

    /// The lines for people: the rate, the drops, then CPU time, checks and frames where
    /// the run has them.
    fn write_text(&self, text: &mut String) {
        let _ = writeln!(
            text,
            "{} on {} ({} {}): {} packets in {:.2}s = {}, {:.1} Mbit/s",
            self.mode,
            self.port,
            self.backend,
            self.xdp_mode,
            self.packets,
            self.seconds,
            crate::run::meter::rate_text(self.mpps),
            self.mbps
        );
        let nonzero: Vec<String> = self
            .drops
            .iter()
            .filter(|(_, v)| **v > 0)
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(
            text,
            "drops: {}",
            if nonzero.is_empty() {
                "none".to_string()
            } else {
                nonzero.join(", ")
            }
        );
        if let Some(c) = &self.cpu {
            write_cpu(text, c);
        }
        for t in self.threads.iter().flatten() {
            let queues: Vec<String> = t.queues.iter().map(u32::to_string).collect();
            let _ = writeln!(
                text,
                "  CPU {} (queues {}): {} packets = {}, drops {}, busy {:.0}%",
                t.cpu,
                queues.join(","),
                t.packets,
                crate::run::meter::rate_text(t.mpps),
                t.drops_total,
                t.busy * 100.0
            );
        }
        if let Some(v) = &self.verify {
            let _ = writeln!(
                text,
                "verify: {} unique, {} duplicate, {} corrupt, {} missing",
                v.unique,
                v.duplicates,
                v.corrupt,
                v.missing.map_or("?".to_string(), |m| m.to_string())
            );
        }
        if let Some(a) = &self.frames_json {
            let _ = writeln!(
                text,
                "frames: {} total = pool {} + fill {} + kernel {} + rx {} + app {} + tx {} + completion {} ({})",
                a.total,
                a.pool,
                a.fill,
                a.kernel,
                a.rx,
                a.application,
                a.tx,
                a.completion,
                if a.balanced {
                    "balanced"
                } else {
                    "NOT BALANCED"
                }
            );
        }
    }
}

/// `cpu:` time per packet (and cycles, where the clock rate is known).
fn write_cpu(text: &mut String, c: &CpuReport) {
    let cycles = match (c.user_cycles_per_packet, c.mhz) {
        (Some(cy), Some(mhz)) => format!(" ({cy:.0} cycles at {mhz:.0} MHz)"),
        _ => String::new(),
    };
    let busy = c
        .busy
        .map(|b| format!(", busy {:.0}%", b * 100.0))
        .unwrap_or_default();
    let _ = match (c.user_ns_per_packet, c.system_ns_per_packet) {
        (Some(user), Some(system)) => writeln!(
            text,
            "cpu: user {user:.1} ns/packet{cycles}, system {system:.1} ns/packet{busy}"
        ),
        _ => writeln!(
            text,
            "cpu: user {:.3} s, system {:.3} s (no packets)",
            c.user_seconds, c.system_seconds
        ),
    };
}

/// A summary with the common fields set and the counters zero.
pub fn summary_for(
    mode: super::Mode,
    args: &super::BenchArgs,
    info: Option<&wirespeed_port::PortInfo>,
    spec: &wirespeed_port::PortSpec,
) -> Summary {
    Summary {
        mode: super::mode_name(mode),
        port: spec.to_string(),
        backend: spec.backend.name(),
        xdp_mode: info.map_or_else(|| "native".to_string(), |i| i.mode.clone()),
        multi_buffer: info.and_then(|i| i.multi_buffer),
        engine: None,
        batch: args.port_flags.batch,
        size: args.size,
        seconds: 0.0,
        packets: 0,
        bytes: 0,
        mpps: 0.0,
        mbps: 0.0,
        per_second_mpps: Vec::new(),
        rx_packets: 0,
        tx_packets: 0,
        copies: 0,
        drops: BTreeMap::new(),
        drops_total: 0,
        peak_rss_bytes: 0,
        cpu_time: None,
        cpu: None,
        frames: None,
        frames_json: None,
        verify: None,
        engine_cpus: None,
        notes: info.map_or_else(Vec::new, |i| i.notes.clone()),
        error: None,
        threads: None,
    }
}
