//! The smallest forwarder on wirespeed, to read first: open an AF_XDP port, then receive a
//! burst, swap each frame's MAC addresses and send the burst back out of the same port, until
//! Ctrl-C; then print how many packets went through.
//!
//! Run it as root on an interface that receives traffic (a veth whose peer sends, say):
//!
//! ```text
//! cargo run --release -p wirespeed-port --example l2fwd -- veth0
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wirespeed_packet::swap_macs;
use wirespeed_port::{Batch, DEFAULT_BURST, PortOptions, PortSpec};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iface = std::env::args().nth(1).ok_or("usage: l2fwd IFACE")?;
    let spec: PortSpec = format!("xdp:{iface}").parse()?;
    // The defaults: 4096 frames, 1024-entry rings, the best XDP mode the interface allows.
    let mut port = wirespeed_port::open(&spec, &PortOptions::default())?;
    println!("l2fwd: {spec} in {} mode; Ctrl-C ends", port.info().mode);

    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&stop))?;

    let mut batch = Batch::with_capacity(DEFAULT_BURST);
    let mut forwarded = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if port.rx_burst(&mut batch)? == 0 {
            // Idle: send what is queued, then sleep until packets come (poll(), rule 8).
            port.flush()?;
            port.wait_rx(Duration::from_millis(100))?;
            continue;
        }
        for i in 0..batch.len() {
            // The frame is the packet: swap its addresses in place, no copy.
            swap_macs(port.packet_mut(batch.addr(i), batch.frame_len(i)));
        }
        // Received frames go straight back out (rule 5: move, never copy).
        forwarded += port.tx_burst(&mut batch)? as u64;
    }
    port.flush()?;

    let stats = port.stats();
    println!(
        "l2fwd: forwarded {forwarded} packets (received {}, dropped {})",
        stats.rx_packets,
        stats.drops.total()
    );
    Ok(())
}
