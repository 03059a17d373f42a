//! txpush: send packets as fast as the port takes them. Each frame is a valid
//! Ethernet/IPv4/UDP packet carrying a sequence number (socket engine), or one frame the
//! kernel repeats at XDP speed (kernel engine).

use std::sync::atomic::AtomicBool;

use anyhow::Context;
use wirespeed_packet::UdpTemplate;
use wirespeed_port::{Batch, Port, PortSpec};

use super::report::{Summary, summary_for};
use super::{BenchArgs, Engine, Mode, announce_ready};
use crate::run::clock::{HOT_LOOP_CHECK, now_ns};
use crate::run::interface_drops::InterfaceTxDrops;
use crate::run::link_watch::settle_link_error;
use crate::run::live_frames::{self, LiveLoad, Prebuilt};
use crate::run::meter::{Meter, RunLimit};
use crate::run::open_port::drain;

pub fn run(args: &BenchArgs, spec: &PortSpec, stop: &AtomicBool) -> anyhow::Result<Summary> {
    match args.engine {
        Engine::Socket => run_socket(args, spec, stop),
        Engine::Kernel => run_kernel(args, spec, stop),
    }
}

fn run_socket(args: &BenchArgs, spec: &PortSpec, stop: &AtomicBool) -> anyhow::Result<Summary> {
    let template = args.template(spec)?;
    let mut port =
        crate::run::open_port::open_port(spec, &args.port_options(&[&spec.iface], false, true))?;
    announce_ready(Mode::Txpush, port.info(), args.port_flags.batch);
    let mut meter = Meter::new("tx", args.quiet, HOT_LOOP_CHECK);
    let mut sent = 0u64;
    let interface = InterfaceTxDrops::start(spec);
    let mut ended = push(args, &template, &mut *port, stop, &mut meter, &mut sent);
    if ended.is_ok() {
        ended = drain(&mut *port).context("send the last packets");
    }
    let ended = settle_link_error(ended, || port.link());
    let seconds = meter.elapsed().as_secs_f64();
    let frame_len = template.frame_len as u64;
    let stats = port.stats();
    let mut s = summary_for(Mode::Txpush, args, Some(port.info()), spec);
    s.engine = Some("socket");
    s.set_measured(seconds, &meter, sent, sent * frame_len);
    s.set_stats(&stats);
    // What the kernel dropped after the socket sent it (the rate is the socket's).
    if let Some(watch) = &interface {
        watch.account(&mut s.drops, &mut s.drops_total, &mut s.notes);
    }
    s.frames = port.audit();
    s.set_error(ended);
    Ok(s.finish())
}

/// Sends until the run ends or the port fails; `sent` counts what was queued.
fn push(
    args: &BenchArgs,
    template: &UdpTemplate,
    port: &mut dyn Port,
    stop: &AtomicBool,
    meter: &mut Meter,
    sent: &mut u64,
) -> anyhow::Result<()> {
    let mut batch = Batch::with_capacity(args.port_flags.batch as usize);
    let frame_len = template.frame_len as u32;
    let mut run = RunLimit::new(args.duration(), args.count, stop, HOT_LOOP_CHECK);
    let mut seq = 0u64;
    while run.running(*sent) {
        let want = run.remaining(*sent).min(args.port_flags.batch as u64) as usize;
        let n = port.alloc_tx(&mut batch, want, frame_len);
        if n == 0 {
            // Ring full or every frame in flight: let the kernel catch up.
            port.flush()?;
            meter.tick_port(*sent, *sent * frame_len as u64, port);
            continue;
        }
        let ts = now_ns();
        for i in 0..n {
            let addr = batch.addr(i);
            template
                .write(port.packet_mut(addr, frame_len), seq, ts)
                .context("build frame")?;
            seq += 1;
        }
        *sent += port.tx_burst(&mut batch)? as u64;
        meter.tick_port(*sent, *sent * frame_len as u64, port);
    }
    Ok(())
}

fn run_kernel(args: &BenchArgs, spec: &PortSpec, stop: &AtomicBool) -> anyhow::Result<Summary> {
    let template = args.template(spec)?;
    let cpus = args.live.cpus(true)?;
    let mut frame = vec![0u8; template.frame_len];
    template
        .write(&mut frame, 0, now_ns())
        .context("build frame")?;
    let frames = [Prebuilt { frame, weight: 1 }];
    let load = LiveLoad {
        iface: &spec.iface,
        frames: &frames,
        cpus: &cpus,
        batch: args.port_flags.batch,
        count: args.count,
        duration: args.duration(),
        pps: None,
        quiet: args.quiet,
        vary: Default::default(),
        // The load's ceiling is what is measured: the costly flush watch stays off.
        count_every_drop: false,
    };
    let totals = live_frames::run(&load, stop, || {
        eprintln!(
            "wirespeed bench txpush: {} ready (kernel engine, XDP live frames, batch {}{})",
            spec,
            args.port_flags.batch,
            live_frames::threads_note(&cpus)
        )
    })?;
    let mut s = summary_for(Mode::Txpush, args, None, spec);
    s.engine = Some("kernel");
    s.engine_cpus = Some(cpus);
    s.xdp_mode = "live-frames".to_string();
    s.seconds = totals.measured.seconds;
    s.cpu_time = Some(totals.measured.cpu);
    s.per_second_mpps = totals.measured.per_second_mpps;
    s.packets = totals.packets;
    s.bytes = totals.bytes;
    s.tx_packets = totals.packets;
    if let Some(d) = &totals.drops {
        s.drops = live_frames::drops_by_reason(d).into_iter().collect();
        s.drops_total = d.total();
    }
    s.notes.extend(totals.notes);
    s.set_error(totals.ended);
    Ok(s.finish())
}
