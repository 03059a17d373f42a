//! `recv --cpus`: a thread per CPU, each with its share of the port's queues and a receiver
//! of its own (`run::threads`); their generators' counts, sequence numbers and latency
//! histograms are merged at the end, since a generator's packets may come on any queue.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use wirespeed_port::PortSpec;

use super::receiver::Receiver;
use super::report::RecvSummary;
use super::{RecvArgs, Tally, Totals, receive_loop, summary};
use crate::run::clock::HOT_LOOP_CHECK;
use crate::run::meter::{CpuTime, Measured, Meter};
use crate::run::threads::{self, ThreadClock, ThreadReport};

pub fn receive(
    args: &RecvArgs,
    spec: &PortSpec,
    cpus: &[usize],
    stop: &AtomicBool,
) -> anyhow::Result<RecvSummary> {
    let opts = super::port_options(args, spec);
    let ports = threads::open_ports(spec, cpus, &opts)?;
    let info = threads::joint_info(spec, &ports, cpus);
    crate::run::ready::announce_ready("recv", &info, args.port_flags.batch, None);
    let (start, cpu_start) = (Instant::now(), CpuTime::now());
    let results = threads::run(ports, cpus, "rx", args.quiet, |t, mut port, progress| {
        let clock = ThreadClock::start();
        let mut meter = Meter::for_thread("rx", HOT_LOOP_CHECK, progress);
        let (mut receiver, mut tally) = (Receiver::new(), Tally::default());
        let ended = receive_loop(args, &mut port, &mut receiver, stop, &mut meter, &mut tally);
        let report = ThreadReport::of(
            cpus[t],
            &mut port,
            tally.packets,
            tally.bytes,
            &clock,
            &meter,
        );
        (report, receiver, ended)
    })?;
    let mut reports = Vec::with_capacity(results.len());
    let mut receivers = Vec::with_capacity(results.len());
    let mut error = None;
    for (report, receiver, ended) in results {
        reports.push(report);
        receivers.push(receiver);
        if let (None, Err(e)) = (&error, ended) {
            error = Some(crate::run::error_text::error_text(&e.into()));
        }
    }
    let (stats, audit, per_second_mpps) = threads::totals(&reports);
    let totals = Totals {
        packets: reports.iter().map(|r| r.packets).sum(),
        bytes: reports.iter().map(|r| r.bytes).sum(),
        measured: Measured {
            seconds: start.elapsed().as_secs_f64(),
            per_second_mpps,
            cpu: CpuTime::now().minus(&cpu_start),
        },
    };
    let generators = Receiver::finish_all(receivers, args.expect.as_ref());
    let mut s = summary(args, spec, &info, &stats, audit, generators, totals);
    s.error = error;
    s.threads = Some(reports);
    Ok(s)
}
