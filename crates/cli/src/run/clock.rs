//! The clock every command stamps with, how often a hot loop looks at it, and short waits.

use std::time::{Duration, Instant};

/// Loop turns between looks at the clock when nothing paces the loop.
pub const HOT_LOOP_CHECK: u32 = 128;

/// Nanoseconds since the Unix epoch (CLOCK_REALTIME through the vDSO: no system call).
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Waits shorter than this spin instead of sleeping (a sleep overshoots by tens of µs).
const SPIN_BELOW: Duration = Duration::from_micros(50);

/// The longest single wait, so a stop or the live line is never held up long at slow rates.
const LONGEST_WAIT: Duration = Duration::from_millis(50);

/// Waits `d` (at most [`LONGEST_WAIT`]): sleeps for long waits, spins for short ones.
pub fn wait(d: Duration) {
    let d = d.min(LONGEST_WAIT);
    if d >= SPIN_BELOW {
        std::thread::sleep(d - SPIN_BELOW / 2);
    } else {
        let until = Instant::now() + d;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }
}
