//! The socket engine: frames built in place in the port's buffer area, each with its own
//! sequence number and send time, sent in bursts, paced by the token bucket when asked.

use std::sync::atomic::AtomicBool;

use anyhow::{Context, bail};
use wirespeed_port::{Batch, Port, PortOptions};

use super::frames::PacketPlan;
use super::pacing::{Grant, Pacer, wait};
use super::report::GenSummary;
use super::{GenArgs, GenPlan};
use crate::run::clock::{HOT_LOOP_CHECK, now_ns};
use crate::run::interface_drops::InterfaceTxDrops;
use crate::run::link_watch::settle_link_error;
use crate::run::meter::{Meter, RunLimit};
use crate::run::open_port::drain;
use crate::run::ready::announce_ready;

pub fn run(args: &GenArgs, plan: GenPlan, stop: &AtomicBool) -> anyhow::Result<GenSummary> {
    let GenPlan {
        spec, flows, sizes, ..
    } = plan;
    let mut port = crate::run::open_port::open_port(
        &spec,
        &PortOptions {
            // Frames larger than a frame of the buffer area go out as chains.
            multi_buffer: true,
            ..args.port_flags.options(&[&spec.iface], false, true)
        },
    )?;
    let max_len = sizes.max() - 4;
    if max_len > port.max_chain_len() {
        let more = match port.info().multi_buffer {
            Some(_) => "",
            None => " (--frame-size 4096 for more)",
        };
        bail!(
            "--size {}: {spec} takes frames of at most {} bytes on the wire{more}",
            sizes.max(),
            port.max_chain_len() + 4
        );
    }
    let mut packets = PacketPlan::new(flows, sizes, args.skip_every);
    announce_ready(
        "gen",
        port.info(),
        args.port_flags.batch,
        Some("socket engine"),
    );
    let every = if args.rate.is_some() {
        1
    } else {
        HOT_LOOP_CHECK
    };
    let mut meter = Meter::new("tx", args.quiet, every);
    let mut tally = Tally::default();
    let interface = InterfaceTxDrops::start(&spec);
    let mut ended = generate(args, &mut *port, &mut packets, stop, &mut meter, &mut tally);
    if ended.is_ok() {
        ended = drain(&mut *port).context("send the last packets");
    }
    let ended = settle_link_error(ended, || port.link());
    let stats = port.stats();
    let mut s = GenSummary::new("socket", &spec, Some(port.info()));
    s.batch = args.port_flags.batch;
    s.set_measured(meter.measured());
    s.packets = tally.packets;
    s.bytes = tally.bytes;
    s.set_rate(args.rate);
    s.generator = args.generator_id;
    s.flows = args.flows;
    s.sequence_end = packets.next_seq;
    s.skipped = packets.skipped;
    s.set_port_end(&stats, spec.backend, interface.as_ref());
    s.frames = port.audit();
    s.set_error(ended);
    Ok(s.finish())
}

/// The send loop: builds bursts of frames in place and sends them, paced when asked, until
/// the run ends or the port fails. `tally` counts what was sent.
fn generate(
    args: &GenArgs,
    port: &mut dyn Port,
    packets: &mut PacketPlan,
    stop: &AtomicBool,
    meter: &mut Meter,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let batch_size = args.port_flags.batch as usize;
    let mut pacer = args
        .rate
        .map(|r| Pacer::new(r, packets.sizes().mean(), batch_size));
    let max_len = packets.sizes().max() - 4;
    // Packets larger than a frame: each gets a chain of its own length, built whole in
    // `scratch` and written over its segments.
    let chains = max_len > port.max_packet_len();
    let mut scratch = vec![0u8; if chains { max_len as usize } else { 0 }];
    let mut batch = Batch::with_capacity(batch_size);
    let every = if pacer.is_some() { 1 } else { HOT_LOOP_CHECK };
    let mut run = RunLimit::new(args.duration(), args.count, stop, every);
    while run.running(tally.packets) {
        let mut want = run.remaining(tally.packets).min(batch_size as u64) as usize;
        if let Some(p) = pacer.as_mut() {
            match p.grant(want) {
                Grant::Send(n) => want = n,
                Grant::Wait(d) => {
                    // Idle until the next burst: push out what is queued first.
                    port.flush()?;
                    wait(d);
                    meter.tick_port(tally.packets, tally.bytes, port);
                    continue;
                }
            }
        }
        let (n, burst_bytes) = match chains {
            true => build_sized(port, &mut batch, packets, want, &mut scratch)?,
            false => build_in_place(port, &mut batch, packets, want, max_len)?,
        };
        if n == 0 {
            // Ring full or every frame in flight: let the kernel catch up.
            port.flush()?;
            meter.tick_port(tally.packets, tally.bytes, port);
            continue;
        }
        let queued = port.tx_burst(&mut batch)? as u64;
        tally.packets += queued;
        tally.bytes += burst_bytes;
        if let Some(p) = pacer.as_mut() {
            p.charge(n as u64, burst_bytes + 4 * n as u64);
        }
        meter.tick_port(tally.packets, tally.bytes, port);
    }
    Ok(())
}

/// Builds up to `want` packets in frames of `max_len` bytes, in place; returns how many
/// and their bytes.
#[inline]
fn build_in_place(
    port: &mut dyn Port,
    batch: &mut Batch,
    packets: &mut PacketPlan,
    want: usize,
    max_len: u32,
) -> anyhow::Result<(usize, u64)> {
    let n = port.alloc_tx(batch, want, max_len);
    let ts = now_ns();
    let mut bytes = 0u64;
    for i in 0..n {
        let p = packets.next_packet();
        let len = p.frame_len as u32;
        batch.set_len(i, len);
        p.spec
            .write(port.packet_mut(batch.addr(i), len), p.frame_len, p.seq, ts)
            .context("build frame")?;
        bytes += len as u64;
    }
    Ok((n, bytes))
}

/// Builds up to `want` packets where some are larger than a frame: each gets frames for its
/// own length (a chain when it needs several), and one built whole in `scratch` is written
/// over its segments. Returns how many and their bytes.
fn build_sized(
    port: &mut dyn Port,
    batch: &mut Batch,
    packets: &mut PacketPlan,
    want: usize,
    scratch: &mut [u8],
) -> anyhow::Result<(usize, u64)> {
    let ts = now_ns();
    let mut bytes = 0u64;
    for i in 0..want {
        if port.alloc_tx(batch, 1, packets.peek_frame_len() as u32) == 0 {
            return Ok((i, bytes));
        }
        let p = packets.next_packet();
        let len = p.frame_len;
        match batch.more(i) {
            0 => p
                .spec
                .write(port.packet_mut(batch.addr(i), len as u32), len, p.seq, ts),
            _ => p.spec.write(scratch, len, p.seq, ts),
        }
        .context("build frame")?;
        if batch.more(i) > 0 {
            port.write_packet(batch, i, &scratch[..len]);
        }
        bytes += len as u64;
    }
    Ok((want, bytes))
}

/// What the send loop counted: reported however the loop ends.
#[derive(Default)]
pub struct Tally {
    pub packets: u64,
    pub bytes: u64,
}
