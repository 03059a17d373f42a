//! The kernel engine: BPF_PROG_RUN live frames repeat a prebuilt frame at XDP speed. It can
//! only repeat what it is given, so `gen` prebuilds one frame per flow and size (at most
//! [`MAX_FRAMES`]) and cycles them across calls, each size sent in proportion to its weight
//! (IMIX stays 7:4:1). Their sequence numbers are the frame's index and their timestamp 0:
//! a receiver counts them as untracked.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use wirespeed_port::PortSpec;
use wirespeed_xdp::LiveFrames;

use super::pacing::wait;
use super::report::GenSummary;
use super::{GenArgs, GenPlan};
use crate::r#gen::rate::Rate;
use crate::meter::{Meter, RunLimit};

/// Most prebuilt frames cycled.
pub const MAX_FRAMES: usize = 64;
/// Each call sets up a page pool (milliseconds): one frame gets calls this long...
const CALL_ONE_FRAME: Duration = Duration::from_millis(500);
/// ...several frames shorter ones, so the cycle comes round sooner.
const CALL_MANY_FRAMES: Duration = Duration::from_millis(100);
const CHUNK_MIN: u64 = 1 << 12;
const CHUNK_MAX: u64 = 1 << 26;

/// A frame the kernel repeats, and its share of the packets.
pub struct Prebuilt {
    pub frame: Vec<u8>,
    pub weight: u64,
}

fn prebuild(plan: &GenPlan) -> anyhow::Result<Vec<Prebuilt>> {
    let sizes = plan.sizes.representatives(8);
    let flows = (plan.flows.flows as usize).min((MAX_FRAMES / sizes.len()).max(1));
    let mut out = Vec::with_capacity(flows * sizes.len());
    for flow in 0..flows {
        let spec = plan.flows.flow(flow as u32);
        for &(size, weight) in &sizes {
            let len = size as usize - 4;
            let mut frame = vec![0u8; len];
            // Timestamp 0: not a send time (the frame is sent again and again).
            spec.write(&mut frame, len, out.len() as u64, 0)
                .context("build frame")?;
            out.push(Prebuilt {
                frame,
                weight: u64::from(weight),
            });
        }
    }
    Ok(out)
}

pub fn run(args: &GenArgs, plan: GenPlan, stop: &AtomicBool) -> anyhow::Result<GenSummary> {
    let frames = prebuild(&plan)?;
    if (plan.flows.flows as usize) * plan.sizes.representatives(8).len() > frames.len() {
        eprintln!(
            "wirespeed: note: kernel engine: cycling {} prebuilt frames (of {} flows)",
            frames.len(),
            plan.flows.flows
        );
    }
    let mut s = send(
        args,
        &plan.spec,
        &frames,
        plan.sizes.mean(),
        args.count,
        stop,
    )?;
    s.flows = args.flows;
    s.sequence_end = frames.len() as u64;
    s.notes = plan.notes;
    Ok(s)
}

/// Sends `frames` in turn, each repeated by the kernel in proportion to its weight, until
/// `count` packets, the duration or a signal; `mean_wire` is their mean size on the wire.
pub fn send(
    args: &GenArgs,
    spec: &PortSpec,
    frames: &[Prebuilt],
    mean_wire: f64,
    count: Option<u64>,
    stop: &AtomicBool,
) -> anyhow::Result<GenSummary> {
    let ifindex = wirespeed_xsk::if_index(&spec.iface)
        .with_context(|| format!("{}: no such interface", spec.iface))?;
    let mut engine = LiveFrames::new(&spec.iface, ifindex)?;
    eprintln!(
        "wirespeed gen: {spec} ready (kernel engine, XDP live frames, {} frames cycled, batch {})",
        frames.len(),
        args.port_flags.batch
    );
    let target = if frames.len() == 1 {
        CALL_ONE_FRAME
    } else {
        CALL_MANY_FRAMES
    };
    let pps = args.rate.map(|r| match r {
        Rate::PacketsPerSec(p) => p,
        Rate::BitsPerSec(b) => b / (mean_wire * 8.0),
    });
    let mut run = RunLimit::new(args.duration(), count, stop, 1);
    let mut meter = Meter::new("tx", args.quiet, 1);
    let started = Instant::now();
    let (mut sent, mut bytes) = (0u64, 0u64);
    // Packets per unit of weight in one call, adjusted to the time calls take.
    let mut unit = pps
        .map_or(1 << 18, |p| (p * target.as_secs_f64()) as u64)
        .max(1);
    let total_weight: u64 = frames.iter().map(|f| f.weight).sum();
    let (mut i, mut cycle_unit) = (0, u64::MAX);
    while run.running(sent) {
        if i % frames.len() == 0 {
            // A count that ends within this cycle is shared by all its frames, by weight.
            cycle_unit = (run.remaining(sent) / total_weight).max(1);
        }
        let f = &frames[i % frames.len()];
        i += 1;
        let n = run
            .remaining(sent)
            .min((unit.min(cycle_unit) * f.weight).clamp(1, CHUNK_MAX));
        let call = Instant::now();
        engine.send(&f.frame, n as u32, args.port_flags.batch)?;
        sent += n;
        bytes += n * f.frame.len() as u64;
        let took = call.elapsed().as_secs_f64().max(1e-6);
        match pps {
            // Average rate: wait until the packets sent so far are due.
            Some(p) => {
                let due = Duration::from_secs_f64(sent as f64 / p);
                while let Some(d) = due.checked_sub(started.elapsed()) {
                    if d.is_zero() || stop.load(Ordering::Relaxed) {
                        break;
                    }
                    wait(d);
                }
            }
            None => {
                unit = ((n as f64 / f.weight as f64 / took * target.as_secs_f64()) as u64)
                    .clamp(CHUNK_MIN, CHUNK_MAX);
            }
        }
        meter.tick(sent, bytes, String::new);
    }
    let mut s = GenSummary::new("kernel", spec, None);
    s.batch = args.port_flags.batch;
    s.seconds = meter.elapsed().as_secs_f64();
    s.packets = sent;
    s.bytes = bytes;
    s.tx_packets = sent;
    s.rate = args.rate.map(|r| r.to_string());
    s.generator = args.generator_id;
    Ok(s.finish())
}
