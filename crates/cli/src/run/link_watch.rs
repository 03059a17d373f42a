//! Link watch: a receiver notices its interface going away. An AF_XDP socket whose interface
//! is deleted just receives nothing more (the kernel unbinds it and says so to no one), so a
//! tool whose port has gone quiet asks, once a second, whether the interface is still there.
//! And a sender that failed as its interface went down learns whether it was being deleted.
//! The same look notices an MTU raised past what the port's frames take (a port without
//! multi-buffer loses every larger packet in the kernel) and says so once, and an interface
//! down (tcpdump refuses one; a receiver here waits for it), once each time it goes down.

use std::time::{Duration, Instant};

use wirespeed_port::{Backend, LinkState, Port, PortError, PortSpec};

/// How often a quiet port's interface is looked up.
const EVERY: Duration = Duration::from_secs(1);
/// Empty bursts between looks at the clock.
const CALLS_PER_CLOCK: u32 = 64;
/// How long an interface that failed a send as down is given to turn out deleted.
const DELETION_SETTLES: Duration = Duration::from_millis(200);

pub struct LinkWatch {
    next: Instant,
    calls: u32,
    /// The MTU raised past the port's frames has been said.
    mtu_said: bool,
    /// The interface down has been said (until it is seen up again).
    down_said: bool,
}

impl Default for LinkWatch {
    fn default() -> Self {
        LinkWatch {
            next: Instant::now() + EVERY,
            calls: 0,
            mtu_said: false,
            down_said: false,
        }
    }
}

impl LinkWatch {
    /// Called on each empty burst: once a second, an error if the port's interface is gone
    /// (and a note, once, if its MTU now asks for frames larger than the port's).
    #[inline]
    pub fn quiet(&mut self, port: &dyn Port) -> Result<(), PortError> {
        let mut looked = false;
        self.quiet_by(
            || {
                looked = true;
                port.link()
            },
            || port.info().spec.clone(),
        )?;
        if looked && !self.mtu_said {
            self.mtu_said = mtu_outgrew(port);
        }
        Ok(())
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
            LinkState::Down if !self.down_said => {
                self.down_said = true;
                eprintln!(
                    "wirespeed: {}: the interface is down (or has no carrier): nothing \
                     arrives until it is up",
                    spec()
                );
                Ok(())
            }
            LinkState::Down => Ok(()),
            LinkState::Up => {
                self.down_said = false;
                Ok(())
            }
        }
    }
}

/// Whether the MTU of `port`'s interface asks for packets longer than its frames take, with
/// no multi-buffer to chain them; said on stderr when it does.
#[cold]
fn mtu_outgrew(port: &dyn Port) -> bool {
    let info = port.info();
    if info.multi_buffer.is_some() || info.backend != Backend::Xdp {
        return false;
    }
    let Some(iface) = info.spec.parse::<PortSpec>().ok().map(|s| s.iface) else {
        return false;
    };
    let Some(mtu) = wirespeed_port::interface_mtu(&iface) else {
        return false;
    };
    // Ethernet and a VLAN tag around the MTU's packet.
    let longest = port.max_packet_len();
    if mtu + 18 <= longest {
        return false;
    }
    eprintln!(
        "wirespeed: {}: the interface's MTU is now {mtu}, but this port's frames take packets \
         of {longest} bytes at most, without multi-buffer: the kernel drops longer ones. Start \
         again to take them (multi-buffer is set up when the MTU asks for it)",
        info.spec
    );
    true
}

/// A run that ended as its interface went down: deleting an interface takes it down first,
/// and a send in between fails as down. If `link` (the port's) says gone within
/// [`DELETION_SETTLES`], the error says the interface went away; any other error is kept.
pub fn settle_link_error(
    ended: anyhow::Result<()>,
    link: impl Fn() -> LinkState,
) -> anyhow::Result<()> {
    let Err(e) = ended else {
        return Ok(());
    };
    let Some(PortError::InterfaceDown(spec)) = e.downcast_ref::<PortError>() else {
        return Err(e);
    };
    let until = Instant::now() + DELETION_SETTLES;
    while Instant::now() < until {
        if link() == LinkState::Gone {
            return Err(PortError::InterfaceGone(spec.clone()).into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn down() -> anyhow::Result<()> {
        Err(PortError::InterfaceDown("xdp:veth0".into()).into())
    }

    #[test]
    fn a_send_that_failed_as_down_says_gone_once_the_interface_is() {
        let looks = Cell::new(0);
        let deleted_on_third_look = || {
            looks.set(looks.get() + 1);
            match looks.get() {
                3 => LinkState::Gone,
                _ => LinkState::Down,
            }
        };
        let e = settle_link_error(down(), deleted_on_third_look).unwrap_err();
        assert_eq!(
            e.to_string(),
            "xdp:veth0: the interface went away (deleted)"
        );
        let e = settle_link_error(down(), || LinkState::Down).unwrap_err();
        assert_eq!(e.to_string(), "xdp:veth0: the interface is down");
        let other: anyhow::Result<()> = Err(anyhow::anyhow!("no room"));
        let e = settle_link_error(other, || LinkState::Gone).unwrap_err();
        assert_eq!(e.to_string(), "no room");
        assert!(settle_link_error(Ok(()), || LinkState::Gone).is_ok());
    }
}
