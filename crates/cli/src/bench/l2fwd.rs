//! l2fwd: swap the MAC addresses and send each packet back out the port it came in on, by
//! moving its descriptor from the RX ring to the TX ring (no copy on AF_XDP).

use std::sync::atomic::AtomicBool;

use anyhow::Context;
use wirespeed_packet::swap_macs;
use wirespeed_port::{Batch, Port, PortSpec};

use super::report::{Summary, summary_for};
use super::rxdrop::Tally;
use super::{BenchArgs, Mode, announce_ready};
use crate::run::clock::HOT_LOOP_CHECK;
use crate::run::idle::{IDLE_SLEEP, Idle};
use crate::run::link_watch::LinkWatch;
use crate::run::meter::{Meter, RunLimit, port_status};
use crate::run::open_port::drain;

pub fn run(args: &BenchArgs, spec: &PortSpec, stop: &AtomicBool) -> anyhow::Result<Summary> {
    if let Some(peer) = &args.peer_port {
        let peer: PortSpec = peer.parse()?;
        return super::l2fwd_two_ports::run(args, spec, &peer, stop);
    }
    let mut port =
        crate::run::open_port::open_port(spec, &args.port_options(&[&spec.iface], true, true))?;
    announce_ready(Mode::L2fwd, port.info(), args.port_flags.batch);
    let mut meter = Meter::new("fwd", args.quiet, HOT_LOOP_CHECK);
    let mut tally = Tally::default();
    let mut ended = forward(args, &mut *port, stop, &mut meter, &mut tally);
    let seconds = meter.elapsed().as_secs_f64();
    if ended.is_ok() {
        ended = drain(&mut *port).context("send the last packets");
    }
    let stats = port.stats();
    let mut s = summary_for(Mode::L2fwd, args, Some(port.info()), spec);
    s.set_measured(seconds, &meter, tally.packets, tally.bytes);
    s.set_stats(&stats);
    s.frames = port.audit();
    s.set_error(ended);
    Ok(s.finish())
}

/// Forwards until the run ends, or the port fails (its interface gone): receive a burst,
/// swap its MAC addresses, send it back out; the port recycles the frames it has sent.
fn forward(
    args: &BenchArgs,
    port: &mut dyn Port,
    stop: &AtomicBool,
    meter: &mut Meter,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let mut batch = Batch::with_capacity(args.port_flags.batch as usize);
    let mut run = RunLimit::new(args.duration(), args.count, stop, HOT_LOOP_CHECK);
    let mut quiet = Quiet::default();
    while run.running(tally.packets) {
        if port.rx_burst(&mut batch)? == 0 {
            if !quiet.wait(port, &mut run)? {
                break;
            }
        } else {
            quiet.idle.busy();
            for i in 0..batch.len() {
                let (addr, len) = (batch.addr(i), batch.frame_len(i));
                tally.bytes += len as u64;
                swap_macs(port.packet_mut(addr, len));
            }
            tally.packets += port.tx_burst(&mut batch)? as u64;
        }
        meter.tick(tally.packets, tally.bytes, || port_status(port));
    }
    Ok(())
}

/// What the loop does when a burst comes back empty.
#[derive(Default)]
struct Quiet {
    idle: Idle,
    watch: LinkWatch,
}

impl Quiet {
    /// Pushes out what is queued and reclaims completions, notices the link going away, and
    /// sleeps once the port has been quiet a while. False when the port's input has ended.
    fn wait(&mut self, port: &mut dyn Port, run: &mut RunLimit) -> anyhow::Result<bool> {
        port.flush()?;
        if port.rx_ended() {
            return Ok(false);
        }
        self.watch.quiet(port)?;
        if self.idle.should_sleep() && !port.info().busy_poll {
            port.wait_rx(IDLE_SLEEP)?;
            run.check_soon();
        }
        Ok(true)
    }
}
