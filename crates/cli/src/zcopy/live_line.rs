//! The live line of `zcopy send` and `recv`: throughput each second, and how much of it
//! went without a copy.

use std::time::{Duration, Instant};

use crate::run::meter::CpuTime;

pub struct Live {
    start: Instant,
    cpu_start: CpuTime,
    last: Instant,
    last_bytes: u64,
    quiet: bool,
    label: &'static str,
}

impl Live {
    pub fn new(label: &'static str, quiet: bool) -> Live {
        let now = Instant::now();
        Live {
            start: now,
            cpu_start: CpuTime::now(),
            last: now,
            last_bytes: 0,
            quiet,
            label,
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// CPU seconds this process used since the start, in user space and in the kernel.
    pub fn cpu_seconds(&self) -> (f64, f64) {
        let used = CpuTime::now().minus(&self.cpu_start);
        (used.user.as_secs_f64(), used.system.as_secs_f64())
    }

    /// Prints a line when a second has passed since the last one.
    pub fn tick(&mut self, bytes: u64, status: impl FnOnce() -> String) {
        let now = Instant::now();
        let dt = now.duration_since(self.last);
        if dt < Duration::from_secs(1) {
            return;
        }
        if !self.quiet {
            let gbps = (bytes - self.last_bytes) as f64 * 8.0 / dt.as_secs_f64() / 1e9;
            eprintln!(
                "{:>7.1}s  {} {:>7.2} Gbit/s  total {:>14} bytes  {}",
                now.duration_since(self.start).as_secs_f64(),
                self.label,
                gbps,
                bytes,
                status()
            );
        }
        self.last = now;
        self.last_bytes = bytes;
    }
}

/// Bits per second as Gbit/s over `seconds` (0 when no time passed).
pub fn gbps(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds / 1e9
    } else {
        0.0
    }
}

/// CPU milliseconds per GB moved (the figure zero copy is about), 0 when nothing moved.
pub fn cpu_ms_per_gb(cpu_seconds: f64, bytes: u64) -> f64 {
    if bytes > 0 {
        cpu_seconds * 1e3 / (bytes as f64 / 1e9)
    } else {
        0.0
    }
}
