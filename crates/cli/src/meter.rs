//! Rates over time: the live line on stderr once a second, and the totals at the end.

use std::time::{Duration, Instant};

/// Counts packets and bytes and prints a line a second.
pub struct Meter {
    start: Instant,
    last: Instant,
    last_packets: u64,
    last_bytes: u64,
    quiet: bool,
    label: &'static str,
}

impl Meter {
    pub fn new(label: &'static str, quiet: bool) -> Meter {
        let now = Instant::now();
        Meter {
            start: now,
            last: now,
            last_packets: 0,
            last_bytes: 0,
            quiet,
            label,
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Prints the live line when a second has passed since the last one.
    #[inline]
    pub fn tick(&mut self, packets: u64, bytes: u64, drops: impl FnOnce() -> u64) {
        let now = Instant::now();
        let dt = now.duration_since(self.last);
        if dt < Duration::from_secs(1) {
            return;
        }
        if !self.quiet {
            let secs = dt.as_secs_f64();
            let pps = (packets - self.last_packets) as f64 / secs;
            let mbps = (bytes - self.last_bytes) as f64 * 8.0 / secs / 1e6;
            eprintln!(
                "{:>7.1}s  {} {:>8.3} Mpps  {:>9.1} Mbit/s  total {:>12}  drops {}",
                now.duration_since(self.start).as_secs_f64(),
                self.label,
                pps / 1e6,
                mbps,
                packets,
                drops()
            );
        }
        self.last = now;
        self.last_packets = packets;
        self.last_bytes = bytes;
    }
}

/// The peak resident set size of this process, in bytes (VmHWM).
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}
