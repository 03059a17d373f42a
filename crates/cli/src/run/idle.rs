//! Idle back-off for receive loops (DESIGN rule 8): busy-poll while packets come, sleep in
//! poll() once the port has been empty for a while. Sleeping too soon costs packets: a vCPU
//! woken from halt can take longer than a 2048-entry ring lasts at 3 Mpps (0.7 ms), so only
//! a port empty for a whole millisecond is idle.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use wirespeed_port::{Port, PortError};

use super::link_watch::LinkWatch;
use super::meter::RunLimit;

/// How long a port must stay empty before the loop sleeps.
const IDLE_AFTER: Duration = Duration::from_millis(1);
/// Empty bursts between looks at the clock.
const SPINS_PER_CHECK: u32 = 256;
/// The longest sleep: short enough to notice a deadline or a stop soon.
pub const IDLE_SLEEP: Duration = Duration::from_millis(10);

#[derive(Default)]
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

/// What a one-port receive loop does when a burst comes back empty: stop at the end of the
/// port's input (a recording read to its end), fail when its interface is gone (looked up
/// once a second), and sleep in poll() once the port has been empty a while.
#[derive(Default)]
pub struct PortIdle {
    idle: Idle,
    watch: LinkWatch,
}

impl PortIdle {
    /// A burst brought packets.
    #[inline]
    pub fn busy(&mut self) {
        self.idle.busy();
    }

    /// A burst came back empty: `Break` when the port's input has ended, else back off.
    pub fn empty(
        &mut self,
        port: &mut dyn Port,
        run: &mut RunLimit<'_>,
    ) -> Result<ControlFlow<()>, PortError> {
        if port.rx_ended() {
            return Ok(ControlFlow::Break(()));
        }
        self.watch.quiet(port)?;
        if self.idle.should_sleep() && !port.info().busy_poll {
            port.wait_rx(IDLE_SLEEP)?;
            run.check_soon();
        }
        Ok(ControlFlow::Continue(()))
    }
}
