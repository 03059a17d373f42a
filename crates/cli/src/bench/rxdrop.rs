//! rxdrop: receive and drop. Measures how fast a port takes packets in.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Context;
use wirespeed_port::{Batch, PortSpec};

use super::report::{Summary, summary_for};
use super::{BenchArgs, Mode, announce_ready, stopped};
use crate::meter::Meter;
use crate::verify::Verifier;

/// Empty polls before sleeping in poll() (DESIGN rule 8: idle politely).
pub const IDLE_SPINS: u32 = 1024;
pub const IDLE_SLEEP: Duration = Duration::from_millis(10);

pub fn run(args: &BenchArgs, spec: &PortSpec, stop: &AtomicBool) -> anyhow::Result<Summary> {
    let mut port = wirespeed_port::open(spec, &args.port_options(true, false))
        .with_context(|| format!("open {spec}"))?;
    let mut verifier = match args.verify {
        true => Some(Verifier::new(args.template(&spec.iface)?)),
        false => None,
    };
    let mut batch = Batch::with_capacity(args.batch as usize);
    let deadline = args.duration().map(|d| Instant::now() + d);
    let limit = args.count.unwrap_or(u64::MAX);
    announce_ready(Mode::Rxdrop, port.info(), args.batch);
    let mut meter = Meter::new("rx", args.quiet);
    let (mut packets, mut bytes, mut idle) = (0u64, 0u64, 0u32);
    while !stopped(stop) && packets < limit && deadline.is_none_or(|d| Instant::now() < d) {
        let n = port.rx_burst(&mut batch)?;
        for (addr, len) in batch.iter() {
            bytes += len as u64;
            if let Some(v) = verifier.as_mut() {
                v.check(port.packet(addr, len));
            }
        }
        packets += n as u64;
        port.release(&mut batch);
        if n == 0 {
            idle += 1;
            if idle >= IDLE_SPINS && !args.busy_poll {
                port.wait_rx(IDLE_SLEEP)?;
            }
        } else {
            idle = 0;
        }
        meter.tick(packets, bytes, || port.stats().drops.total());
    }
    let seconds = meter.elapsed().as_secs_f64();
    let stats = port.stats();
    let mut s = summary_for(Mode::Rxdrop, args, Some(port.info()), spec);
    s.seconds = seconds;
    s.packets = packets;
    s.bytes = bytes;
    s.set_stats(&stats);
    s.frames = port.audit();
    s.verify = verifier.map(|v| v.finish(args.expect));
    Ok(s.finish())
}
