//! l2fwd: swap the MAC addresses and send each packet back out the port it came in on, by
//! moving its descriptor from the RX ring to the TX ring (no copy on AF_XDP).

use std::sync::atomic::AtomicBool;

use anyhow::Context;
use wirespeed_packet::swap_macs;
use wirespeed_port::{Batch, PortSpec};

use super::report::{Summary, summary_for};
use super::rxdrop::HOT_LOOP_CHECK;
use super::{BenchArgs, Mode, announce_ready};
use crate::idle::{IDLE_SLEEP, Idle};
use crate::meter::{Meter, RunLimit, port_status};
use crate::open_port::drain;

pub fn run(args: &BenchArgs, spec: &PortSpec, stop: &AtomicBool) -> anyhow::Result<Summary> {
    if let Some(peer) = &args.peer_port {
        let peer: PortSpec = peer.parse()?;
        return super::fwd2::run(args, spec, &peer, stop);
    }
    let mut port =
        crate::open_port::open_port(spec, &args.port_options(&[&spec.iface], true, true))?;
    let mut batch = Batch::with_capacity(args.port_flags.batch as usize);
    announce_ready(Mode::L2fwd, port.info(), args.port_flags.batch);
    let mut run = RunLimit::new(args.duration(), args.count, stop, HOT_LOOP_CHECK);
    let mut meter = Meter::new("fwd", args.quiet, HOT_LOOP_CHECK);
    let (mut forwarded, mut bytes, mut idle) = (0u64, 0u64, Idle::default());
    while run.running(forwarded) {
        let n = port.rx_burst(&mut batch)?;
        if n == 0 {
            // Nothing new: push out what is queued and reclaim completions, then idle.
            port.flush()?;
            if port.rx_ended() {
                break;
            }
            if idle.should_sleep() && !port.info().busy_poll {
                port.wait_rx(IDLE_SLEEP)?;
                run.check_soon();
            }
            meter.tick(forwarded, bytes, || port_status(&mut *port));
            continue;
        }
        idle.busy();
        for i in 0..batch.len() {
            let (addr, len) = (batch.addr(i), batch.frame_len(i));
            bytes += len as u64;
            swap_macs(port.packet_mut(addr, len));
        }
        forwarded += port.tx_burst(&mut batch)? as u64;
        meter.tick(forwarded, bytes, || port_status(&mut *port));
    }
    let seconds = meter.elapsed().as_secs_f64();
    drain(&mut *port).context("send the last packets")?;
    let stats = port.stats();
    let mut s = summary_for(Mode::L2fwd, args, Some(port.info()), spec);
    s.seconds = seconds;
    s.cpu_time = Some(meter.cpu_used());
    s.per_second_mpps = meter.per_second_mpps();
    s.packets = forwarded;
    s.bytes = bytes;
    s.set_stats(&stats);
    s.frames = port.audit();
    Ok(s.finish())
}
