//! pcap_inject: one frame into the port's transmit ring.

use std::time::{Duration, Instant};

use crate::handle::Handle;
use crate::live::Live;

/// How long pcap_inject waits for the transmit ring to have room, as a blocking send would.
const ROOM_WAIT: Duration = Duration::from_secs(1);

/// Copies `frame` into a frame of the port (a chain of them when it is larger than one,
/// on a multi-buffer port) and sends it. Each call kicks the kernel: a program that injects
/// gives no later moment to do it (libpcap's own send is a system call a packet too).
pub fn inject(h: &Handle, live: &mut Live, frame: &[u8]) -> Result<usize, String> {
    // What the interface sends: its MTU, the Ethernet header and a VLAN tag if the frame has
    // one (as libpcap's AF_PACKET send allows); and what the port's frames hold.
    let tagged = matches!(frame.get(12..14), Some([0x81, 0x00] | [0x88, 0xa8]));
    let wire = live
        .mtu
        .map_or(u32::MAX, |mtu| mtu + 14 + if tagged { 4 } else { 0 });
    let max = live.port.max_chain_len().min(wire) as usize;
    if frame.len() > max {
        return Err(format!(
            "{}: a frame of {} bytes is larger than the interface sends ({max} bytes)",
            h.device,
            frame.len()
        ));
    }
    // A non-blocking handle's send does not wait for room (libpcap's gets EAGAIN).
    let wait = if h.settings().nonblock {
        Duration::ZERO
    } else {
        ROOM_WAIT
    };
    let until = Instant::now() + wait;
    while live.port.alloc_tx(&mut live.tx, 1, frame.len() as u32) == 0 {
        live.port
            .flush()
            .map_err(|e| format!("{}: send: {e}", h.device))?;
        if live.port.alloc_tx(&mut live.tx, 1, frame.len() as u32) == 1 {
            break;
        }
        if Instant::now() >= until {
            return Err(format!(
                "{}: send: the transmit ring is full (waited {} ms)",
                h.device,
                wait.as_millis()
            ));
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    live.port.write_packet(&live.tx, 0, frame);
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

/// How long pcap_close waits for injected frames still on their way out.
const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// Pushes out what pcap_inject queued and the kernel has not sent yet (a kick sends a
/// batch of the ring, not all of it), so that closing loses none; at most a second.
pub fn drain(live: &mut Live) {
    let until = Instant::now() + DRAIN_WAIT;
    while live.port.tx_pending() && Instant::now() < until {
        if live.port.flush().is_err() {
            return;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}
