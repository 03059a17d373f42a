//! pcap_inject: one frame into the port's transmit ring.

use std::time::{Duration, Instant};

use crate::handle::Handle;
use crate::live::Live;

/// How long pcap_inject waits for the transmit ring to have room, as a blocking send would.
const ROOM_WAIT: Duration = Duration::from_secs(1);

/// Copies `frame` into a frame of the port and sends it. Each call kicks the kernel: a
/// program that injects gives no later moment to do it (libpcap's own send is a system
/// call a packet too).
pub fn inject(h: &Handle, live: &mut Live, frame: &[u8]) -> Result<usize, String> {
    let max = live.port.max_packet_len() as usize;
    if frame.len() > max {
        return Err(format!(
            "{}: a frame of {} bytes is larger than the port's frames hold ({max} bytes)",
            h.device,
            frame.len()
        ));
    }
    let until = Instant::now() + ROOM_WAIT;
    while live.port.alloc_tx(&mut live.tx, 1, frame.len() as u32) == 0 {
        live.port
            .flush()
            .map_err(|e| format!("{}: send: {e}", h.device))?;
        if Instant::now() >= until {
            return Err(format!(
                "{}: send: the transmit ring stayed full for {} s",
                h.device,
                ROOM_WAIT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    let addr = live.tx.addr(0);
    live.port
        .packet_mut(addr, frame.len() as u32)
        .copy_from_slice(frame);
    let queued = live
        .port
        .tx_burst(&mut live.tx)
        .map_err(|e| format!("{}: send: {e}", h.device))?;
    live.port
        .flush()
        .map_err(|e| format!("{}: send: {e}", h.device))?;
    match queued {
        1 => Ok(frame.len()),
        _ => Err(format!("{}: send: the transmit ring is full", h.device)),
    }
}
