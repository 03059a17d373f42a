//! Link watch: a receiver notices its interface going away. An AF_XDP socket whose interface
//! is deleted just receives nothing more (the kernel unbinds it and says so to no one), so a
//! tool whose port has gone quiet asks, once a second, whether the interface is still there.

use std::time::{Duration, Instant};

use wirespeed_port::{LinkState, Port, PortError};

/// How often a quiet port's interface is looked up.
const EVERY: Duration = Duration::from_secs(1);
/// Empty bursts between looks at the clock.
const CALLS_PER_CLOCK: u32 = 64;

pub struct LinkWatch {
    next: Instant,
    calls: u32,
}

impl Default for LinkWatch {
    fn default() -> Self {
        LinkWatch {
            next: Instant::now() + EVERY,
            calls: 0,
        }
    }
}

impl LinkWatch {
    /// Called on each empty burst: once a second, an error if the port's interface is gone.
    #[inline]
    pub fn quiet(&mut self, port: &dyn Port) -> Result<(), PortError> {
        self.quiet_by(|| port.link(), || port.info().spec.clone())
    }

    /// `quiet` for a port that is not a `Port` (a member of a group): `link` asks about its
    /// interface, `spec` names it.
    #[inline]
    pub fn quiet_by(
        &mut self,
        link: impl FnOnce() -> LinkState,
        spec: impl FnOnce() -> String,
    ) -> Result<(), PortError> {
        self.calls += 1;
        if self.calls < CALLS_PER_CLOCK {
            return Ok(());
        }
        self.calls = 0;
        let now = Instant::now();
        if now < self.next {
            return Ok(());
        }
        self.next = now + EVERY;
        match link() {
            LinkState::Gone => Err(PortError::InterfaceGone(spec())),
            LinkState::Up | LinkState::Down => Ok(()),
        }
    }
}
