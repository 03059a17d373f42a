//! The counts at exit, tcpdump-like on standard error, or one JSON object with `--json`.
//! They add up: received = filtered out + matched + after stop; matched = written + dropped
//! by the writer.

use std::path::PathBuf;

use serde::Serialize;
use wirespeed_capture::spool::WriterReport;
use wirespeed_port::{DropCounters, PortInfo};

#[derive(Debug, Default, Serialize)]
pub struct Counts {
    /// The port (or file) and how it was opened.
    pub source: String,
    pub backend: Option<String>,
    pub mode: Option<String>,
    /// Packets may span this many frames (AF_XDP multi-buffer); null: one frame each.
    pub multi_buffer: Option<u32>,
    /// Where the filter ran: "user", "user+kernel", or none.
    pub filter: Option<String>,
    pub filter_location: Option<String>,
    pub seconds: f64,
    /// Packets taken from the port or file.
    pub received: u64,
    /// Rejected by the filter.
    pub filtered_out: u64,
    /// Accepted by the filter (all, without one).
    pub matched: u64,
    /// Whole in the output.
    pub written: u64,
    /// Lost before reaching us: the kernel, the rings, bad descriptors (by reason in `drops`).
    pub dropped_by_kernel: u64,
    /// Matched but not written: the writer was behind, a write failed, or the output's
    /// reader closed the pipe (`output_closed`).
    pub dropped_by_writer: u64,
    /// Of `received`, those the XDP program set aside in the spill ring while we were
    /// behind (AF_XDP with a spill ring): late, but not lost.
    pub spilled: u64,
    /// Received after -c or -W ended the capture, in the same burst: not examined.
    pub after_stop: u64,
    pub drops: serde_json::Map<String, serde_json::Value>,
    pub files: Vec<PathBuf>,
    pub error: Option<String>,
    /// The output's reader closed the pipe, which ended the capture.
    pub output_closed: bool,
    /// Of `dropped_by_writer`, those left unwritten when the reader closed the pipe.
    #[serde(skip)]
    pub unwritten_at_close: u64,
    /// With --cpus: each receiving thread's part (they add up to the counts above, but
    /// for `written` after a failed write: the file's count is exact, the threads' are what
    /// each handed to the writer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<Vec<ThreadCounts>>,
}

/// One receiving thread's counts (`--cpus`), with the same identities as the whole's.
#[derive(Debug, Default, Serialize)]
pub struct ThreadCounts {
    pub cpu: usize,
    pub queues: Vec<u32>,
    pub received: u64,
    pub filtered_out: u64,
    pub matched: u64,
    pub written: u64,
    pub dropped_by_kernel: u64,
    pub dropped_by_writer: u64,
    pub spilled: u64,
    pub after_stop: u64,
    pub drops: serde_json::Map<String, serde_json::Value>,
    pub seconds: f64,
    /// The thread's CPU time over its wall time: 1.0 never slept.
    pub busy: f64,
}

impl Counts {
    pub fn for_port(info: &PortInfo) -> Counts {
        Counts {
            source: info.spec.clone(),
            backend: Some(info.backend.name().to_string()),
            mode: Some(info.mode.clone()),
            multi_buffer: info.multi_buffer,
            ..Counts::default()
        }
    }

    /// Receive-side drops of a port, by reason.
    pub fn set_port_drops(&mut self, drops: &DropCounters) {
        self.dropped_by_kernel = receive_drops(drops);
        self.drops = drop_map(drops);
    }

    /// Adds what the writer thread did; `behind` is what the recorder dropped itself.
    pub fn set_writer(&mut self, report: WriterReport, behind: u64) {
        self.written = report.written;
        self.dropped_by_writer = behind + report.lost;
        self.files = report.files;
        dedup_keep_order(&mut self.files);
        self.output_closed = report.reader_gone;
        if report.reader_gone {
            self.unwritten_at_close = report.lost;
            return;
        }
        self.error = report.error.map(|e| {
            format!(
                "write {e}; the output holds the first {} packets, each whole",
                report.written
            )
        });
    }

    pub fn print(&self, json: bool, json_to_stderr: bool) {
        if json {
            let text = serde_json::to_string(self).unwrap_or_default();
            match json_to_stderr {
                true => eprintln!("{text}"),
                false => println!("{text}"),
            }
            return;
        }
        eprint!("{}", self.lines());
    }

    /// The counts for people, tcpdump-like, a line each (what SIGUSR1 prints too).
    pub fn lines(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let matched = match self.filter {
            Some(_) => "matched by filter",
            None => "matched (no filter)",
        };
        let _ = writeln!(out, "{} packets received", self.received);
        let _ = writeln!(out, "{} packets {matched}", self.matched);
        let _ = writeln!(out, "{} packets written", self.written);
        // A file (-r) has no kernel or ring to lose packets in.
        if self.backend.is_some() {
            let _ = writeln!(
                out,
                "{} packets dropped by kernel or ring",
                self.dropped_by_kernel
            );
        }
        let at_close = self.unwritten_at_close;
        let _ = writeln!(
            out,
            "{} packets dropped by writer",
            self.dropped_by_writer - at_close
        );
        if self.output_closed {
            // Not lost on the way: the capture stopped before writing them.
            let _ = writeln!(
                out,
                "{at_close} packets not written: the output's reader closed the pipe"
            );
        }
        if self.spilled > 0 {
            let _ = writeln!(
                out,
                "{} packets received late, through the spill ring",
                self.spilled
            );
        }
        if self.after_stop > 0 {
            let _ = writeln!(
                out,
                "{} packets after the stop, not examined",
                self.after_stop
            );
        }
        out
    }
}

/// Receive-side drops by reason, for the JSON.
pub fn drop_map(drops: &DropCounters) -> serde_json::Map<String, serde_json::Value> {
    drops
        .by_reason()
        .iter()
        .filter(|(name, _)| !name.starts_with("tx_"))
        .map(|(name, v)| (name.to_string(), (*v).into()))
        .collect()
}

/// Drops on the receive side (every reason but the transmit ones).
pub fn receive_drops(d: &DropCounters) -> u64 {
    d.fill_ring_empty + d.rx_ring_full + d.kernel_dropped + d.rx_invalid_desc + d.spill_full
}

fn dedup_keep_order(files: &mut Vec<PathBuf>) {
    let mut seen = std::collections::HashSet::new();
    files.retain(|f| seen.insert(f.clone()));
}
