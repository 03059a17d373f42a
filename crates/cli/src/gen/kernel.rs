//! The kernel engine: BPF_PROG_RUN live frames repeat a prebuilt frame at XDP speed. With
//! one size and IPv4 UDP or TCP, the XDP program itself varies the source port and address
//! of every frame, so any number of flows goes out at full speed. Otherwise it can only
//! repeat what it is given, so `gen` prebuilds one frame per flow and size (at most
//! [`MAX_FRAMES`]) and cycles them across calls, each size sent in proportion to its weight
//! (IMIX stays 7:4:1). Sequence numbers are the prebuilt frame's index and timestamps 0: a
//! receiver counts them as untracked.

use std::sync::atomic::AtomicBool;

use anyhow::Context;
use wirespeed_port::PortSpec;

use super::report::GenSummary;
use super::{GenArgs, GenPlan};
use crate::r#gen::rate::Rate;
use crate::live::{self, LiveLoad, Prebuilt};
use wirespeed_xdp::LiveFrames;

/// Most prebuilt frames cycled.
pub const MAX_FRAMES: usize = 64;

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
    let mut frames = prebuild(&plan)?;
    let sizes = plan.sizes.representatives(8).len();
    let varied = plan.flows.flows > 1 && sizes == 1 && LiveFrames::can_vary(&frames[0].frame);
    let mut notes = plan.notes;
    // The flows that go out: all of them when the program varies them, else those prebuilt.
    let flows = if varied {
        plan.flows.flows
    } else {
        (frames.len() / sizes) as u32
    };
    if varied {
        // Flow 0's frame; the program makes the others from it.
        frames.truncate(1);
    } else if flows < plan.flows.flows {
        let note = format!(
            "kernel engine: {flows} of the {} flows asked for go out ({} prebuilt frames \
             cycled; only one size of IPv4 UDP or TCP is varied in the kernel)",
            plan.flows.flows,
            frames.len(),
        );
        eprintln!("wirespeed: note: {note}");
        notes.push(note);
    }
    let mut s = send(
        args,
        &plan.spec,
        &frames,
        plan.sizes.mean(),
        args.count,
        varied.then_some(plan.flows.flows),
        stop,
    )?;
    s.flows = flows;
    s.sequence_end = frames.len() as u64;
    s.notes = notes;
    Ok(s)
}

/// Sends `frames` in turn, each repeated by the kernel in proportion to its weight, until
/// `count` packets, the duration or a signal; `mean_wire` is their mean size on the wire.
/// With `flows`, the one frame is varied into that many flows in the kernel.
pub fn send(
    args: &GenArgs,
    spec: &PortSpec,
    frames: &[Prebuilt],
    mean_wire: f64,
    count: Option<u64>,
    flows: Option<u32>,
    stop: &AtomicBool,
) -> anyhow::Result<GenSummary> {
    let cpus = args.live.cpus(true)?;
    let pps = args.rate.map(|r| match r {
        Rate::PacketsPerSec(p) => p,
        Rate::BitsPerSec(b) => b / (mean_wire * 8.0),
    });
    let load = LiveLoad {
        iface: &spec.iface,
        frames,
        cpus: &cpus,
        batch: args.port_flags.batch,
        count,
        duration: args.duration(),
        pps,
        quiet: args.quiet,
        flows,
    };
    let totals = live::run(&load, stop, || {
        eprintln!(
            "wirespeed gen: {spec} ready (kernel engine, XDP live frames, {}, batch {}{})",
            match flows {
                Some(n) => format!("{n} flows varied in the kernel"),
                None => format!("{} frames cycled", frames.len()),
            },
            args.port_flags.batch,
            live::threads_note(&cpus)
        )
    })?;
    let mut s = GenSummary::new("kernel", spec, None);
    s.batch = args.port_flags.batch;
    s.engine_cpus = Some(cpus);
    s.seconds = totals.seconds;
    s.packets = totals.packets;
    s.bytes = totals.bytes;
    s.tx_packets = totals.packets;
    s.rate = args.rate.map(|r| r.to_string());
    s.generator = args.generator_id;
    Ok(s.finish())
}
