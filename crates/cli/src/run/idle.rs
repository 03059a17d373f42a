//! Idle back-off for the tools' receive loops: the policy (`wirespeed_port::Idle`, DESIGN
//! rule 8) with the tools' own concerns, a port whose input ends and an interface that
//! goes away.

use std::ops::ControlFlow;

pub use wirespeed_port::{IDLE_SLEEP, Idle};
use wirespeed_port::{Port, PortError};

use super::link_watch::LinkWatch;
use super::meter::RunLimit;

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
