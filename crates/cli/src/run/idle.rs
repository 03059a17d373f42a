//! Idle back-off for the tools' receive loops: the policy (`wirespeed_port::Idle`, DESIGN
//! rule 8) with the tools' own concerns, a port whose input ends and an interface that
//! goes away.

use std::ops::ControlFlow;

pub use wirespeed_port::{Idle, Step};
use wirespeed_port::{Port, PortError};

use super::link_watch::LinkWatch;
use super::meter::RunLimit;

/// What a one-port receive loop does after each burst: spin, nap or sleep in poll() as the
/// policy says, stop at the end of the port's input (a recording read to its end), and fail
/// when its interface is gone (looked up once a second while nothing comes).
pub struct PortIdle {
    idle: Idle,
    watch: LinkWatch,
    /// The last burst was followed by a nap or a sleep.
    waited: bool,
    /// Never nap or sleep (`recv --spin`).
    spin: bool,
}

impl PortIdle {
    /// For a port with rings of `ring_size` entries; one whose sockets busy-poll never
    /// sleeps in poll().
    pub fn new(port: &dyn Port, ring_size: u32) -> PortIdle {
        let idle = Idle::new(ring_size);
        PortIdle {
            idle: match port.info().busy_poll {
                true => idle.without_poll_sleep(),
                false => idle,
            },
            watch: LinkWatch::default(),
            waited: false,
            spin: false,
        }
    }

    /// Receives again at once after every burst, the CPU busy all the time: what a
    /// latency measurement wants, where a nap would add its length to a packet's.
    pub fn spinning(mut self) -> PortIdle {
        self.spin = true;
        self
    }

    /// True when the last `after_burst` napped or slept: a loop's meter should look at the
    /// clock (`Meter::check_soon`), or its live line falls behind.
    #[inline]
    pub fn waited(&self) -> bool {
        self.waited
    }

    /// A burst took `got` packets of `room`: `Break` when the port's input has ended, else
    /// wait as the policy says.
    #[inline]
    pub fn after_burst(
        &mut self,
        port: &mut dyn Port,
        got: usize,
        room: usize,
        run: &mut RunLimit<'_>,
    ) -> Result<ControlFlow<()>, PortError> {
        if got == 0 {
            if port.rx_ended() {
                return Ok(ControlFlow::Break(()));
            }
            self.watch.quiet(port)?;
        }
        let step = match self.spin {
            true => Step::Spin,
            false => self.idle.after_burst(got, room),
        };
        self.waited = step != Step::Spin;
        match step {
            Step::Spin => {}
            Step::Nap(d) => std::thread::sleep(d),
            Step::Sleep(d) => {
                port.wait_rx(d)?;
                run.check_soon();
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}
