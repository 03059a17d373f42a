//! The kernel engine: BPF_PROG_RUN live frames repeat a prebuilt frame at XDP speed. `gen`
//! prebuilds one frame per flow and size (at most [`MAX_FRAMES`]) and the runner sends them
//! in turn, a call each, each size in proportion to its weight (IMIX stays 7:4:1). The XDP
//! program stamps every frame with the next sequence number and the send time (unless
//! --no-stamp), whatever the frame; with IPv4 UDP or TCP it also varies the source port and
//! address of every frame, so only flow 0's frames are prebuilt and any number of flows goes
//! out at full speed. Other flows (IPv6, ICMP) are the prebuilt ones cycled.

use std::sync::atomic::AtomicBool;

use anyhow::Context;
use wirespeed_port::PortSpec;

use super::report::{GenSummary, StampedSeries};
use super::{GenArgs, GenPlan};
use crate::r#gen::rate::Rate;
use crate::run::live_frames::{self, LiveLoad, Prebuilt};
use wirespeed_packet::L4Kind;
use wirespeed_xdp::{LiveFrames, Stamp, Variation};

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
    // Flow 0's frames, one per size, come first.
    let varied = plan.flows.flows > 1
        && frames[..sizes]
            .iter()
            .all(|f| LiveFrames::can_vary(&f.frame));
    let mut notes = plan.notes;
    // The flows that go out: all of them when the program varies them, else those prebuilt.
    let flows = if varied {
        plan.flows.flows
    } else {
        (frames.len() / sizes) as u32
    };
    if varied {
        // Flow 0's frames; the program makes the others from them.
        frames.truncate(sizes);
    } else if flows < plan.flows.flows {
        let note = format!(
            "kernel engine: {flows} of the {} flows asked for go out ({} prebuilt frames \
             cycled; only IPv4 UDP or TCP flows are varied in the kernel)",
            plan.flows.flows,
            frames.len(),
        );
        eprintln!("wirespeed: note: {note}");
        notes.push(note);
    }
    // Every flow's and size's frame has its payload and checksum at the same offsets.
    let stamp = if !args.no_stamp {
        let spec = plan.flows.flow(0);
        Some(Stamp {
            payload_at: spec.headers_len(),
            check_at: Some(spec.checksum_at()),
            udp: spec.l4 == L4Kind::Udp,
            generator: args.generator_id,
            clock_offset_ns: realtime_minus_tai()?,
        })
    } else {
        None
    };
    let vary = Variation {
        flows: varied.then_some(plan.flows.flows),
        stamp,
    };
    let mut s = send(
        args,
        &plan.spec,
        &frames,
        plan.sizes.mean(),
        args.count,
        vary,
        stop,
    )?;
    s.flows = flows;
    if s.stamped.is_none() {
        s.sequence_end = frames.len() as u64;
    }
    notes.append(&mut s.notes);
    s.notes = notes;
    Ok(s)
}

/// CLOCK_REALTIME minus CLOCK_TAI in ns: the program reads the TAI clock and adds this to
/// stamp real time, the clock receivers compare with.
fn realtime_minus_tai() -> anyhow::Result<i64> {
    use nix::time::{ClockId, clock_gettime};
    let tai = clock_gettime(ClockId::CLOCK_TAI).context("read CLOCK_TAI")?;
    let real = clock_gettime(ClockId::CLOCK_REALTIME).context("read CLOCK_REALTIME")?;
    let ns = |t: nix::sys::time::TimeSpec| t.tv_sec() * 1_000_000_000 + t.tv_nsec();
    Ok(ns(real) - ns(tai))
}

/// Sends `frames` in turn, each repeated by the kernel in proportion to its weight, until
/// `count` packets, the duration or a signal; `mean_wire` is their mean size on the wire.
/// `vary` says what the kernel changes in each frame when there is one.
pub fn send(
    args: &GenArgs,
    spec: &PortSpec,
    frames: &[Prebuilt],
    mean_wire: f64,
    count: Option<u64>,
    vary: Variation,
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
        vary,
        // A receiver checks its losses against gen's counts: every drop is counted.
        count_every_drop: true,
    };
    let totals = live_frames::run(&load, stop, || {
        eprintln!(
            "wirespeed gen: {spec} ready (kernel engine, XDP live frames, {}, batch {}{})",
            {
                let what = match (vary.flows, frames.len()) {
                    (Some(n), 1) => format!("{n} flows varied"),
                    (Some(n), sizes) => format!("{n} flows varied, {sizes} sizes in turn"),
                    (None, 1) => "one frame".to_string(),
                    (None, k) => format!("{k} frames cycled"),
                };
                if vary.stamp.is_some() {
                    format!("{what}, stamped in the kernel")
                } else {
                    what
                }
            },
            args.port_flags.batch,
            live_frames::threads_note(&cpus)
        )
    })?;
    let mut s = GenSummary::new("kernel", spec, None);
    s.batch = args.port_flags.batch;
    s.engine_cpus = Some(cpus);
    s.set_measured(totals.measured);
    s.packets = totals.packets;
    s.bytes = totals.bytes;
    s.tx_packets = totals.packets;
    if let Some(d) = &totals.drops {
        s.drops = live_frames::drops_by_reason(d).into_iter().collect();
        s.drops_total = d.total();
        // Every frame the kernel did not send was handed to it.
        s.not_sent = d.total().min(totals.packets);
        s.tx_packets = totals.packets - s.not_sent;
    }
    s.notes.extend(totals.notes.iter().cloned());
    if let Some(stamp) = &vary.stamp {
        s.sequence_end = totals.packets;
        s.stamped = Some(
            totals
                .per_engine
                .iter()
                .enumerate()
                .map(|(i, &sent)| StampedSeries {
                    generator: stamp.generator.wrapping_add(i as u16),
                    sequence_end: sent,
                })
                .collect(),
        );
    }
    s.set_rate(args.rate);
    s.generator = args.generator_id;
    s.set_error(totals.ended);
    Ok(s.finish())
}
