//! The end-of-run summary of `gen`: a few lines for people, one JSON object for scripts
//! (the same fields as `bench`'s where they mean the same).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use wirespeed_port::{Backend, FrameAudit, PortInfo, PortSpec, PortStats};

use super::rate::Rate;
use crate::run::frame_audit::frames_json;
use crate::run::interface_drops::InterfaceTxDrops;
use crate::run::meter::{CpuReport, CpuTime, Measured};

/// Share of the asked rate a run must send to have reached it.
const RATE_REACHED: f64 = 0.95;

#[derive(Debug, Serialize)]
pub struct GenSummary {
    pub mode: &'static str,
    pub port: String,
    pub backend: &'static str,
    pub xdp_mode: String,
    /// Packets may span this many frames (AF_XDP multi-buffer); null: one frame each.
    pub multi_buffer: Option<u32>,
    pub engine: &'static str,
    pub batch: u32,
    /// The frame sizes asked for: `64`, `64-1500` or `imix` (none when replaying a file).
    pub size: Option<String>,
    pub seconds: f64,
    /// Each whole second's rate, as the live line showed it (of the frames handed over).
    pub per_second_mpps: Vec<f64>,
    /// Frames built and handed to the port (or the kernel), each with its sequence number.
    pub packets: u64,
    /// Bytes of them, without FCS (as `bench` counts them).
    pub bytes: u64,
    /// Of `packets`, those known not to have gone out (by reason in `drops`; see
    /// [`GenSummary::set_port_end`] for the socket engine's). The rates count the rest.
    pub not_sent: u64,
    pub mpps: f64,
    pub mbps: f64,
    /// Bits per second on the wire with the FCS (what a bit --rate asks for).
    pub wire_mbps: f64,
    /// The asked rate, as given; none when unlimited.
    pub rate: Option<String>,
    #[serde(skip)]
    pub asked: Option<Rate>,
    /// With a rate and a run of a second or more: whether what was sent came within 5 % of
    /// it, and what share of it was sent (a port or CPU that cannot go as fast falls short).
    pub rate_reached: Option<bool>,
    pub rate_share: Option<f64>,
    pub generator: u16,
    pub flows: u32,
    /// Sequence numbers used: 0 up to this, minus the `skipped` ones.
    pub sequence_end: u64,
    pub skipped: u64,
    /// Kernel engine with stamps: each sending thread's generator id and the sequence
    /// numbers it used (0 up to this).
    pub stamped: Option<Vec<StampedSeries>>,
    /// What to give `recv --expect` for this run: `sequence_end`, or with a series per
    /// CPU, `ID=N` for each.
    pub recv_expect: String,
    /// Frames of the file sent per replay loop (replay only).
    pub replay_frames: Option<u64>,
    pub loops_done: Option<u64>,
    pub tx_packets: u64,
    pub drops: BTreeMap<&'static str, u64>,
    pub drops_total: u64,
    #[serde(skip)]
    pub frames: Option<FrameAudit>,
    #[serde(rename = "frames")]
    pub frames_json: Option<serde_json::Value>,
    /// The CPUs the kernel engine was pinned to (empty: not pinned).
    pub engine_cpus: Option<Vec<usize>>,
    /// Peak resident memory of the process, as `bench` reports it.
    pub peak_rss_bytes: u64,
    #[serde(skip)]
    pub cpu_time: Option<CpuTime>,
    /// CPU time over the run, and per packet sent, as `bench` reports it.
    pub cpu: Option<CpuReport>,
    pub notes: Vec<String>,
    /// What ended the run early (the port failed: its interface went away...); the
    /// counts are what was sent until then.
    pub error: Option<String>,
    /// The reader of the recording on standard output closed the pipe, which ended the
    /// run (`gen --port pcap:- | head`): an end, not a failure, as for `capture -w -`;
    /// what it did not take is counted as `tx_error`.
    pub output_closed: bool,
}

#[derive(Debug, Serialize)]
pub struct StampedSeries {
    pub generator: u16,
    pub sequence_end: u64,
}

impl GenSummary {
    pub fn new(engine: &'static str, spec: &PortSpec, info: Option<&PortInfo>) -> GenSummary {
        GenSummary {
            mode: "gen",
            port: spec.to_string(),
            backend: spec.backend.name(),
            xdp_mode: info.map_or_else(|| "live-frames".to_string(), |i| i.mode.clone()),
            multi_buffer: info.and_then(|i| i.multi_buffer),
            engine,
            batch: 0,
            size: None,
            seconds: 0.0,
            per_second_mpps: Vec::new(),
            packets: 0,
            bytes: 0,
            not_sent: 0,
            mpps: 0.0,
            mbps: 0.0,
            wire_mbps: 0.0,
            rate: None,
            asked: None,
            rate_reached: None,
            rate_share: None,
            generator: 0,
            flows: 0,
            sequence_end: 0,
            skipped: 0,
            stamped: None,
            recv_expect: String::new(),
            replay_frames: None,
            loops_done: None,
            tx_packets: 0,
            drops: BTreeMap::new(),
            drops_total: 0,
            frames: None,
            frames_json: None,
            engine_cpus: None,
            peak_rss_bytes: 0,
            cpu_time: None,
            cpu: None,
            notes: info.map_or_else(Vec::new, |i| i.notes.clone()),
            error: None,
            output_closed: false,
        }
    }

    /// The asked rate (--rate), judged against what was sent when the summary is finished.
    pub fn set_rate(&mut self, rate: Option<Rate>) {
        self.rate = rate.map(|r| r.to_string());
        self.asked = rate;
    }

    /// Records how the loop ended: an error is reported after the summary, unless it is
    /// the recording's reader going away ([`GenSummary::output_closed`]).
    pub fn set_error(&mut self, ended: Result<(), impl Into<anyhow::Error>>) {
        let Err(e) = ended.map_err(Into::into) else {
            return;
        };
        let broken_pipe = e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        });
        if broken_pipe && self.port == "pcap:-" {
            self.output_closed = true;
            return;
        }
        self.error = Some(crate::run::error_text::error_text(&e));
    }

    pub fn set_stats(&mut self, s: &PortStats) {
        self.tx_packets = s.tx_packets;
        self.drops = s.drops.by_reason().into_iter().collect();
        self.drops_total = s.drops.total();
    }

    /// A socket engine's end: the port's counts, then what did not go out of `packets`
    /// (frames the port queued), by backend. AF_XDP: descriptors the kernel found invalid
    /// (`tx_invalid_desc`), frames its interface went away with in flight (`tx_stranded`;
    /// a chain's frames each), and what the kernel dropped after the socket handed it over
    /// (`interface`). AF_PACKET counts a frame sent when the kernel takes it from the
    /// ring: the rest were refused (`tx_error`) or still queued at the end (`tx_unsent`).
    /// A tap or a recording: what the device or the file refused (`tx_error`). (A pipe's
    /// `tx_error` and the others' `tx_invalid_desc` are frames never queued.)
    pub fn set_port_end(
        &mut self,
        s: &PortStats,
        backend: Backend,
        interface: Option<&InterfaceTxDrops>,
    ) {
        self.set_stats(s);
        let mut lost = |reason: &'static str, n: u64, not_sent: &mut u64| {
            if n > 0 {
                *self.drops.entry(reason).or_default() += n;
                self.drops_total += n;
                *not_sent += n;
            }
        };
        let mut not_sent = 0;
        match backend {
            Backend::Xdp => {
                not_sent += s.drops.tx_invalid_desc;
                lost("tx_stranded", s.tx_stranded, &mut not_sent);
                if let Some(watch) = interface {
                    not_sent +=
                        watch.account(&mut self.drops, &mut self.drops_total, &mut self.notes);
                }
            }
            Backend::Packet => {
                not_sent += s.drops.tx_error;
                let unsent = self.packets.saturating_sub(s.tx_packets + s.drops.tx_error);
                lost("tx_unsent", unsent, &mut not_sent);
            }
            Backend::Tap | Backend::Pcap => not_sent += s.drops.tx_error,
            Backend::Pipe => {}
        }
        self.not_sent = not_sent.min(self.packets);
    }

    /// Takes the run's length, per-second rates and CPU time from its meter.
    pub fn set_measured(&mut self, m: Measured) {
        self.seconds = m.seconds;
        self.per_second_mpps = m.per_second_mpps;
        self.cpu_time = Some(m.cpu);
    }

    /// Fills the rates from packets, bytes and seconds.
    pub fn finish(mut self) -> GenSummary {
        let s = self.seconds.max(1e-9);
        let sent = self.packets - self.not_sent.min(self.packets);
        // The frames not sent are not known one by one: their bytes are taken at the mean.
        let sent_bytes = match self.packets {
            0 => 0,
            all => (self.bytes as u128 * u128::from(sent) / u128::from(all)) as u64,
        };
        self.mpps = sent as f64 / s / 1e6;
        self.mbps = sent_bytes as f64 * 8.0 / s / 1e6;
        self.wire_mbps = (sent_bytes + 4 * sent) as f64 * 8.0 / s / 1e6;
        self.recv_expect = match self.stamped.as_deref() {
            Some(series) if series.len() > 1 => {
                let pairs: Vec<String> = series
                    .iter()
                    .map(|s| format!("{}={}", s.generator, s.sequence_end))
                    .collect();
                pairs.join(",")
            }
            _ => self.sequence_end.to_string(),
        };
        self.frames_json = self.frames.map(|a| frames_json(&a));
        self.peak_rss_bytes = crate::run::meter::peak_rss_bytes();
        self.cpu = self.cpu_time.map(|t| CpuReport::new(t, self.packets));
        // A run shorter than a second says too little about a rate.
        if let Some(asked) = self.asked.filter(|_| self.seconds >= 1.0) {
            let share = match asked {
                Rate::PacketsPerSec(pps) => self.mpps * 1e6 / pps,
                Rate::BitsPerSec(bps) => self.wire_mbps * 1e6 / bps,
            };
            self.rate_share = Some(share);
            self.rate_reached = Some(share >= RATE_REACHED);
        }
        self
    }

    /// The line that says the asked rate was not reached, if it was not. None for a run an
    /// error cut short (the interface went down, say): the error is the reason, said after.
    pub fn shortfall(&self) -> Option<String> {
        let (Some(false), Some(share), Some(rate), None) =
            (self.rate_reached, self.rate_share, &self.rate, &self.error)
        else {
            return None;
        };
        // The drops are why where they alone miss the rate: more than its tolerance of the
        // frames handed over (a few, the host's own packets in the interface's count, are not).
        let dropped_share = self.not_sent as f64 / self.packets.max(1) as f64;
        let why = match dropped_share > 1.0 - RATE_REACHED {
            true => format!(
                "{} of the frames handed over were not sent (drops)",
                self.not_sent
            ),
            false => "the port or this CPU cannot go faster".to_string(),
        };
        Some(format!(
            "the asked rate was not reached: {rate} asked, {} ({:.1} Mbit/s on the \
             wire) sent, {:.0} % of it: {why}",
            crate::run::meter::rate_text(self.mpps),
            self.wire_mbps,
            share * 100.0
        ))
    }

    /// Prints the summary; on standard error when a port records on standard output.
    pub fn print(&self, json: bool, to_stderr: bool) {
        let mut text = String::new();
        if let Some(line) = self.shortfall().filter(|_| json) {
            eprintln!("wirespeed gen: note: {line}");
        }
        if json {
            let _ = writeln!(
                text,
                "{}",
                serde_json::to_string(self).expect("summary serialises")
            );
            return crate::run::report_to::report(&text, to_stderr);
        }
        let _ = write!(
            text,
            "gen on {} ({} {}, {} engine): {} packets in {:.2}s = {}, {:.1} Mbit/s on the wire",
            self.port,
            self.backend,
            self.xdp_mode,
            self.engine,
            self.packets - self.not_sent.min(self.packets),
            self.seconds,
            crate::run::meter::rate_text(self.mpps),
            self.wire_mbps
        );
        let _ = match self.not_sent {
            0 => writeln!(text),
            n => writeln!(
                text,
                " ({} handed to the port, {n} of them not sent: drops below)",
                self.packets
            ),
        };
        if let Some(series) = self.stamped.as_deref().filter(|s| s.len() > 1) {
            let ids: Vec<String> = series.iter().map(|s| s.generator.to_string()).collect();
            let _ = writeln!(
                text,
                "generators {} (a series a CPU): recv --expect {}",
                ids.join(", "),
                self.recv_expect
            );
        }
        if self.output_closed {
            let _ = writeln!(
                text,
                "the reader of standard output closed the pipe, which ended the run (what it \
                 did not take: tx_error below)"
            );
        }
        if self.skipped > 0 {
            let _ = writeln!(
                text,
                "sequence numbers 0..{} used, {} left out on purpose (--skip-every)",
                self.sequence_end, self.skipped
            );
        }
        let nonzero: Vec<String> = self
            .drops
            .iter()
            .filter(|(_, v)| **v > 0)
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        if !nonzero.is_empty() {
            let _ = writeln!(text, "drops: {}", nonzero.join(", "));
        }
        if let Some(line) = self.shortfall() {
            let _ = writeln!(text, "{line}");
        }
        crate::run::report_to::report(&text, to_stderr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A summary of 1000 frames of 100 bytes handed to `spec` in 1 s at --rate 1000, and
    /// the port's counts `stats`.
    fn ended(spec: &str, stats: PortStats) -> GenSummary {
        let spec: PortSpec = spec.parse().unwrap();
        let mut s = GenSummary::new("socket", &spec, None);
        (s.packets, s.bytes, s.seconds) = (1000, 100_000, 1.0);
        s.set_rate(Some(Rate::PacketsPerSec(1000.0)));
        s.set_port_end(&stats, spec.backend, None);
        s.finish()
    }

    #[test]
    fn what_did_not_go_out_by_backend() {
        let mut stats = PortStats::default();
        stats.drops.tx_error = 10;
        stats.drops.tx_invalid_desc = 5;
        // A packet: port: refused and never taken; the kernel took 900.
        stats.tx_packets = 900;
        let packet = ended("packet:lo", stats);
        assert_eq!((packet.not_sent, packet.drops["tx_unsent"]), (100, 90));
        // A recording: what the file refused; its invalid descriptors were never queued.
        assert_eq!(ended("pcap:x.pcap", stats).not_sent, 10);
        // A pipe's errors are frames never queued.
        assert_eq!(ended("pipe:x", stats).not_sent, 0);
        // AF_XDP: invalid descriptors and stranded frames.
        stats.tx_stranded = 3;
        let xdp = ended("xdp:lo", stats);
        assert_eq!((xdp.not_sent, xdp.drops["tx_stranded"]), (8, 3));
        assert!((xdp.mpps - 0.000992).abs() < 1e-9, "{}", xdp.mpps);
    }

    #[test]
    fn a_missed_rate_is_put_on_the_drops_only_when_they_alone_miss_it() {
        let mut stats = PortStats::default();
        stats.drops.tx_error = 200;
        let dropped = ended("pcap:x.pcap", stats);
        assert_eq!(dropped.rate_reached, Some(false));
        let line = dropped.shortfall().unwrap();
        assert!(
            line.ends_with("200 of the frames handed over were not sent (drops)"),
            "{line}"
        );
        // Half the rate handed over and a few dropped: the CPU or port.
        stats.drops.tx_error = 3;
        let mut slow = ended("pcap:x.pcap", stats);
        slow.seconds = 2.0;
        let slow = slow.finish();
        let line = slow.shortfall().unwrap();
        assert!(
            line.ends_with("the port or this CPU cannot go faster"),
            "{line}"
        );
    }
}
