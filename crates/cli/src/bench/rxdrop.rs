//! rxdrop: receive and drop. Measures how fast a port takes packets in.

use std::sync::atomic::AtomicBool;

use wirespeed_port::{Batch, PortSpec};

use super::report::{Summary, summary_for};
use super::{BenchArgs, Mode, announce_ready};
use crate::idle::{IDLE_SLEEP, Idle};
use crate::meter::{Meter, RunLimit, port_status};
use crate::verify::Verifier;

/// Loop turns between looks at the clock and the stop flag.
pub const HOT_LOOP_CHECK: u32 = 128;

pub fn run(args: &BenchArgs, spec: &PortSpec, stop: &AtomicBool) -> anyhow::Result<Summary> {
    let mut port =
        crate::open_port::open_port(spec, &args.port_options(&[&spec.iface], true, false))?;
    let mut verifier = match args.verify {
        true => Some(Verifier::new(args.template(spec)?)),
        false => None,
    };
    let mut batch = Batch::with_capacity(args.port_flags.batch as usize);
    announce_ready(Mode::Rxdrop, port.info(), args.port_flags.batch);
    let mut run = RunLimit::new(args.duration(), args.count, stop, HOT_LOOP_CHECK);
    let mut meter = Meter::new("rx", args.quiet, HOT_LOOP_CHECK);
    let (mut packets, mut bytes, mut idle) = (0u64, 0u64, Idle::default());
    while run.running(packets) {
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
            if port.rx_ended() {
                break;
            }
            if idle.should_sleep() && !port.info().busy_poll {
                port.wait_rx(IDLE_SLEEP)?;
                run.check_soon();
            }
        } else {
            idle.busy();
        }
        meter.tick(packets, bytes, || port_status(&mut *port));
    }
    let seconds = meter.elapsed().as_secs_f64();
    let stats = port.stats();
    let mut s = summary_for(Mode::Rxdrop, args, Some(port.info()), spec);
    s.seconds = seconds;
    s.cpu_time = Some(meter.cpu_used());
    s.per_second_mpps = meter.per_second_mpps();
    s.packets = packets;
    s.bytes = bytes;
    s.set_stats(&stats);
    s.frames = port.audit();
    s.verify = verifier.map(|v| v.finish(args.expect));
    Ok(s.finish())
}
