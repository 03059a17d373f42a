//! The end of a receiving run that a signal or its duration cut short: what the kernel had
//! already delivered is still taken, so every frame sent is either received or counted as
//! dropped. (A receiver whose CPU was taken can hold a full RX ring at the stop; left
//! unread, those frames are lost with no counter naming them.)

use std::time::{Duration, Instant};

use wirespeed_port::{Port, PortError};

/// How long a stopped receiver keeps taking what the port still holds. TPACKET_V3 hands a
/// partly filled block over only once the kernel retires it (1 ms, rounded up to a jiffy:
/// up to 10 ms), and a spilled packet may wait 10 ms for its place: both arrived before
/// the stop.
pub const DRAIN: Duration = Duration::from_millis(25);

/// Takes bursts with `burst` (which returns the packets it took) for [`DRAIN`], waiting in
/// the port while it is empty; stops sooner once `most` packets are taken (what a count
/// still allows) or the port's input has ended. A port that keeps giving (the load goes
/// on) is left at the deadline.
pub fn rx_drain(
    port: &mut dyn Port,
    most: u64,
    mut burst: impl FnMut(&mut dyn Port) -> Result<usize, PortError>,
) -> Result<(), PortError> {
    let until = Instant::now() + DRAIN;
    let mut taken = 0u64;
    while taken < most {
        let n = burst(port)?;
        taken += n as u64;
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || (n == 0 && port.rx_ended()) {
            break;
        }
        if n == 0 {
            port.wait_rx(left)?;
        }
    }
    Ok(())
}
