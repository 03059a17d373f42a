//! `bench l2fwd`: swap the MAC addresses and send each packet back out the port it came in
//! on, by moving its descriptor from the RX ring to the TX ring (no copy on AF_XDP). The
//! forwarding loop reads like `crates/port/examples/l2fwd.rs`; opening, measuring and the
//! summary sit around it.

use std::sync::atomic::AtomicBool;

use anyhow::Context;
use wirespeed_packet::swap_macs;
use wirespeed_port::{Batch, Port, PortSpec};

use super::report::{Summary, Tally, summary_for};
use super::{BenchArgs, Mode, announce_ready};
use crate::run::clock::HOT_LOOP_CHECK;
use crate::run::idle::PortIdle;
use crate::run::meter::{Meter, RunLimit};
use crate::run::open_port::{drain, open_port};

pub fn run(args: &BenchArgs, spec: &PortSpec, stop: &AtomicBool) -> anyhow::Result<Summary> {
    if let Some(peer) = &args.peer_port {
        let peer: PortSpec = peer.parse()?;
        return super::l2fwd_two_ports::run(args, spec, &peer, stop);
    }
    let mut port = open_port(spec, &args.port_options(&[&spec.iface], true, true))?;
    announce_ready(Mode::L2fwd, port.info(), args.port_flags.batch);
    let mut meter = Meter::new("fwd", args.quiet, HOT_LOOP_CHECK);
    let mut run = RunLimit::new(args.duration(), args.count, stop, HOT_LOOP_CHECK);
    let mut tally = Tally::default();
    let batch = Batch::with_capacity(args.port_flags.batch as usize);
    let idle = PortIdle::new(&*port, args.port_flags.ring_size());
    let mut ended = forward(&mut *port, batch, idle, &mut run, &mut meter, &mut tally);
    let seconds = meter.elapsed().as_secs_f64();
    if ended.is_ok() {
        ended = drain(&mut *port).context("send the last packets");
    }
    let mut s = summary_for(Mode::L2fwd, args, Some(port.info()), spec);
    s.set_measured(seconds, &meter, tally.packets, tally.bytes);
    s.set_stats(&port.stats());
    s.frames = port.audit();
    s.set_error(ended);
    Ok(s.finish())
}

/// The forwarder: receive a burst, swap each frame's MAC addresses, send the burst back out,
/// until the run ends or the port fails (its interface gone). The frames sent come back to
/// the port's pool as their sends complete.
pub(super) fn forward(
    port: &mut dyn Port,
    mut batch: Batch,
    mut idle: PortIdle,
    run: &mut RunLimit<'_>,
    meter: &mut Meter,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    while run.running(tally.packets) {
        let room = batch.room();
        let got = port.rx_burst(&mut batch)?;
        if got == 0 {
            // Nothing new: push out what is queued and reclaim completions, then idle.
            port.flush()?;
        } else {
            let chains = batch.has_chains();
            for i in 0..batch.len() {
                // The frame is the packet: swap its addresses in place, no copy. A packet
                // of several frames has its Ethernet header in the first.
                let (addr, len) = (batch.addr(i), batch.frame_len(i));
                tally.bytes += u64::from(if chains { batch.packet_len(i) } else { len });
                swap_macs(port.packet_mut(addr, len));
            }
            // Received frames go straight back out (move, never copy); a chain goes as
            // it came.
            tally.packets += port.tx_burst(&mut batch)? as u64;
        }
        if idle.after_burst(port, got, room, run)?.is_break() {
            break;
        }
        if idle.waited() {
            meter.check_soon();
        }
        meter.tick_port(tally.packets, tally.bytes, port);
    }
    Ok(())
}
