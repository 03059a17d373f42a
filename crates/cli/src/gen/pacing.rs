//! Pacing: a token bucket that hands out whole bursts. Tokens are packets or wire bits; a
//! burst is granted when the bucket holds its cost, and is charged what it really cost (the
//! bucket may go into debt), so the long-run rate is exact whatever the sizes and however
//! late the sleeps wake.

use std::time::{Duration, Instant};

use super::rate::Rate;
pub use crate::run::clock::wait;

/// Bursts last at most this long at the asked rate: a batch of 64 at 10 kpps would otherwise
/// go out as one 6 ms clump.
const BURST_SPAN: Duration = Duration::from_millis(1);
/// Tokens saved up while the sender could not send (the port was full, or the scheduler ran
/// something else: on a busy 2-core host that takes tens of ms) are kept for at most this
/// long, so a stall is made up for soon after, but never as a long line-rate burst.
const CATCH_UP: Duration = Duration::from_millis(50);

pub struct Pacer {
    /// Tokens per second.
    rate: f64,
    /// Tokens one average packet costs (1 for a packet rate, its bits for a bit rate).
    mean_cost: f64,
    bits: bool,
    tokens: f64,
    cap: f64,
    /// Packets in a full burst.
    burst: usize,
    last: Instant,
}

/// What the pacer allows now.
pub enum Grant {
    /// Send this many packets.
    Send(usize),
    /// Nothing yet: come back after this long.
    Wait(Duration),
}

impl Pacer {
    /// A pacer for `rate`, packets of `mean_wire_len` bytes on average, bursts of at most
    /// `batch`.
    pub fn new(rate: Rate, mean_wire_len: f64, batch: usize) -> Pacer {
        let (rate, mean_cost, bits) = match rate {
            Rate::PacketsPerSec(pps) => (pps, 1.0, false),
            Rate::BitsPerSec(bps) => (bps, mean_wire_len * 8.0, true),
        };
        let pps = rate / mean_cost;
        let burst = ((pps * BURST_SPAN.as_secs_f64()) as usize).clamp(1, batch.max(1));
        let burst_cost = burst as f64 * mean_cost;
        Pacer {
            rate,
            mean_cost,
            bits,
            tokens: burst_cost,
            cap: burst_cost + rate * CATCH_UP.as_secs_f64(),
            burst,
            last: Instant::now(),
        }
    }

    /// Packets the bucket allows now, at most `want`; or how long to wait for a burst.
    pub fn grant(&mut self, want: usize) -> Grant {
        let now = Instant::now();
        let dt = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.rate).min(self.cap);
        let need = self.burst.min(want).max(1) as f64 * self.mean_cost;
        if self.tokens >= need {
            let n = (self.tokens / self.mean_cost) as usize;
            return Grant::Send(n.clamp(1, want.max(1)));
        }
        Grant::Wait(Duration::from_secs_f64((need - self.tokens) / self.rate))
    }

    /// Charges what was sent: `packets` packets of `wire_bytes` bytes in all.
    pub fn charge(&mut self, packets: u64, wire_bytes: u64) {
        self.tokens -= if self.bits {
            wire_bytes as f64 * 8.0
        } else {
            packets as f64
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a pacer against the real clock for `secs`, sending what it grants.
    fn run(rate: Rate, wire_len: u64, batch: usize, secs: f64) -> (u64, u64) {
        let mut p = Pacer::new(rate, wire_len as f64, batch);
        let start = Instant::now();
        let (mut packets, mut bytes) = (0u64, 0u64);
        while start.elapsed().as_secs_f64() < secs {
            match p.grant(batch) {
                Grant::Send(n) => {
                    packets += n as u64;
                    bytes += n as u64 * wire_len;
                    p.charge(n as u64, n as u64 * wire_len);
                }
                Grant::Wait(d) => wait(d),
            }
        }
        (packets, bytes)
    }

    #[test]
    fn packet_rate_within_two_percent() {
        let (packets, _) = run(Rate::PacketsPerSec(50_000.0), 64, 64, 0.5);
        assert!((packets as f64 - 25_000.0).abs() < 500.0, "{packets}");
    }

    #[test]
    fn bit_rate_within_two_percent() {
        // 100 Mbit/s of 1250-byte frames: 10000 pps.
        let (_, bytes) = run(Rate::BitsPerSec(100e6), 1250, 64, 0.5);
        let bits = bytes as f64 * 8.0;
        assert!((bits - 50e6).abs() < 1e6, "{bits}");
    }

    #[test]
    fn slow_rates_send_one_at_a_time() {
        let mut p = Pacer::new(Rate::PacketsPerSec(100.0), 64.0, 64);
        assert!(matches!(p.grant(64), Grant::Send(1)));
        p.charge(1, 64);
        match p.grant(64) {
            Grant::Wait(d) => assert!(d <= Duration::from_millis(10), "{d:?}"),
            Grant::Send(n) => panic!("sent {n} right after a charge"),
        }
    }
}
