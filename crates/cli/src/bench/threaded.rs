//! rxdrop and l2fwd with `--cpus` on a port of several queues: a thread per CPU, each with
//! its share of the queues on a UMEM of its own (`run::threads`), running the loop one
//! thread runs; the figures are summed and each thread's given in `threads`.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::Context;
use wirespeed_port::{Batch, PortSpec};

use super::report::{Summary, Tally, summary_for};
use super::{BenchArgs, Mode, announce_ready};
use crate::run::clock::HOT_LOOP_CHECK;
use crate::run::idle::PortIdle;
use crate::run::meter::{CpuTime, Meter, RunLimit};
use crate::run::open_port::drain;
use crate::run::threads::{self, ThreadClock, ThreadReport};

pub fn run(
    args: &BenchArgs,
    spec: &PortSpec,
    cpus: &[usize],
    stop: &AtomicBool,
) -> anyhow::Result<Summary> {
    let sends = args.mode == Mode::L2fwd;
    let opts = args.port_options(&[&spec.iface], true, sends);
    let ports = threads::open_ports(spec, cpus, &opts)?;
    let info = threads::joint_info(spec, &ports, cpus);
    announce_ready(args.mode, &info, args.port_flags.batch);
    let label = if sends { "fwd" } else { "rx" };
    let (start, cpu_start) = (Instant::now(), CpuTime::now());
    let results = threads::run(ports, cpus, label, args.quiet, |t, mut port, progress| {
        let clock = ThreadClock::start();
        let mut meter = Meter::for_thread(label, HOT_LOOP_CHECK, progress);
        let mut tally = Tally::default();
        let ended = match args.mode {
            Mode::L2fwd => {
                let mut run = RunLimit::new(args.duration(), None, stop, HOT_LOOP_CHECK);
                let batch = Batch::with_capacity(args.port_flags.batch as usize);
                let idle = PortIdle::new(&port, args.port_flags.ring_size());
                super::l2fwd::forward(&mut port, batch, idle, &mut run, &mut meter, &mut tally)
                    .and_then(|()| drain(&mut port).context("send the last packets"))
            }
            _ => super::rxdrop::receive(args, &mut port, None, stop, &mut meter, &mut tally)
                .map_err(anyhow::Error::from),
        };
        let report = ThreadReport::of(
            cpus[t],
            &mut port,
            tally.packets,
            tally.bytes,
            &clock,
            &meter,
        );
        (report, ended)
    })?;
    let seconds = start.elapsed().as_secs_f64();
    let mut s = summary_for(args.mode, args, Some(&info), spec);
    let (reports, ended): (Vec<ThreadReport>, Vec<anyhow::Result<()>>) =
        results.into_iter().unzip();
    let (stats, audit, per_second) = threads::totals(&reports);
    s.seconds = seconds;
    s.cpu_time = Some(CpuTime::now().minus(&cpu_start));
    s.per_second_mpps = per_second;
    s.packets = reports.iter().map(|r| r.packets).sum();
    s.bytes = reports.iter().map(|r| r.bytes).sum();
    s.set_stats(&stats);
    s.frames = audit;
    s.set_error(ended.into_iter().find(Result::is_err).unwrap_or(Ok(())));
    s.threads = Some(reports);
    Ok(s.finish())
}
