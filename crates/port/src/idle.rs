//! Idle back-off for receive loops (DESIGN rule 8), one policy every tool shares: busy-poll
//! while packets come, sleep in poll() once the port has been empty for a while. Sleeping
//! too soon costs packets, and the sender's CPU a wake-up each time (on veth the receiving
//! side's kernel work runs there): a vCPU woken from halt can take longer than a 2048-entry
//! ring lasts at 3 Mpps (0.7 ms), so only a port empty for a whole millisecond is idle.

use std::time::{Duration, Instant};

/// How long a port must stay empty before the loop sleeps.
const IDLE_AFTER: Duration = Duration::from_millis(1);
/// Empty bursts between looks at the clock.
const SPINS_PER_CHECK: u32 = 256;
/// The longest sleep: short enough to notice a deadline or a stop soon.
pub const IDLE_SLEEP: Duration = Duration::from_millis(10);

/// Where a receive loop is in backing off.
#[derive(Debug, Default)]
pub struct Idle {
    empty: u32,
    since: Option<Instant>,
}

impl Idle {
    /// A burst brought packets.
    #[inline]
    pub fn busy(&mut self) {
        self.empty = 0;
        self.since = None;
    }

    /// A burst came back empty; true when the port has been empty long enough to sleep.
    #[inline]
    pub fn should_sleep(&mut self) -> bool {
        self.empty += 1;
        if self.empty < SPINS_PER_CHECK {
            return false;
        }
        self.empty = 0;
        let now = Instant::now();
        match self.since {
            None => {
                self.since = Some(now);
                false
            }
            Some(t) => now.duration_since(t) >= IDLE_AFTER,
        }
    }
}
