//! rxdrop: receive and drop. Measures how fast a port takes packets in.

use std::sync::atomic::AtomicBool;

use wirespeed_port::{Batch, Port, PortError, PortSpec};

use super::report::{Summary, Tally, summary_for};
use super::verify::Verifier;
use super::{BenchArgs, Mode, announce_ready};
use crate::run::clock::HOT_LOOP_CHECK;
use crate::run::idle::PortIdle;
use crate::run::meter::{Meter, RunLimit};
use crate::run::rx_drain::rx_drain;

pub fn run(args: &BenchArgs, spec: &PortSpec, stop: &AtomicBool) -> anyhow::Result<Summary> {
    let mut port =
        crate::run::open_port::open_port(spec, &args.port_options(&[&spec.iface], true, false))?;
    let mut verifier = match args.verify {
        true => Some(Verifier::new(args.template(spec)?, args.src_mac.is_some())),
        false => None,
    };
    announce_ready(Mode::Rxdrop, port.info(), args.port_flags.batch);
    let mut meter = Meter::new("rx", args.quiet, HOT_LOOP_CHECK);
    let mut tally = Tally::default();
    let ended = receive(
        args,
        &mut *port,
        verifier.as_mut(),
        stop,
        &mut meter,
        &mut tally,
    );
    let stats = port.stats();
    let mut s = summary_for(Mode::Rxdrop, args, Some(port.info()), spec);
    let seconds = meter.elapsed().as_secs_f64();
    s.set_measured(seconds, &meter, tally.packets, tally.bytes);
    s.set_stats(&stats);
    s.frames = port.audit();
    s.verify = verifier.map(|v| v.finish(args.expect));
    s.set_error(ended);
    Ok(s.finish())
}

/// Receives until the run ends, or the port fails (its interface gone); a run cut short
/// still takes what had arrived.
pub(super) fn receive(
    args: &BenchArgs,
    port: &mut dyn Port,
    mut verifier: Option<&mut Verifier>,
    stop: &AtomicBool,
    meter: &mut Meter,
    tally: &mut Tally,
) -> Result<(), PortError> {
    let mut batch = Batch::with_capacity(args.port_flags.batch as usize);
    let mut run = RunLimit::new(args.duration(), args.count, stop, HOT_LOOP_CHECK);
    let mut idle = PortIdle::new(port, args.port_flags.ring_size());
    // A packet of several frames is gathered here to be verified (never just to count it).
    let mut scratch = Vec::new();
    while run.running(tally.packets) {
        run.fit(tally.packets, &mut batch);
        let room = batch.room();
        let n = take_burst(
            port,
            &mut batch,
            verifier.as_deref_mut(),
            tally,
            &mut scratch,
        )?;
        if idle.after_burst(port, n, room, &mut run)?.is_break() {
            break;
        }
        if idle.waited() {
            meter.check_soon();
        }
        meter.tick_port(tally.packets, tally.bytes, port);
    }
    if run.cut_short() {
        rx_drain(port, run.remaining(tally.packets), |port| {
            run.fit(tally.packets, &mut batch);
            take_burst(
                port,
                &mut batch,
                verifier.as_deref_mut(),
                tally,
                &mut scratch,
            )
        })?;
    }
    Ok(())
}

/// One burst from `port`, counted (and verified, with a verifier); the packets it took.
#[inline]
fn take_burst(
    port: &mut dyn Port,
    batch: &mut Batch,
    verifier: Option<&mut Verifier>,
    tally: &mut Tally,
    scratch: &mut Vec<u8>,
) -> Result<usize, PortError> {
    let n = port.rx_burst(batch)?;
    match verifier {
        // Only lengths to count: a burst of one-frame packets reads nothing else.
        None if !batch.has_chains() => {
            tally.bytes += batch.iter().map(|(_, len)| u64::from(len)).sum::<u64>();
        }
        mut verifier => {
            for i in 0..batch.len() {
                tally.bytes += u64::from(batch.packet_len(i));
                if let Some(v) = verifier.as_deref_mut() {
                    v.check(port.packet_bytes(batch, i, scratch));
                }
            }
        }
    }
    tally.packets += n as u64;
    port.release(batch);
    Ok(n)
}
