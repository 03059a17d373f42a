//! l2fwd between two ports (`--peer-port`): what one receives the other sends, both ways,
//! frames unchanged. Two xdp: ports share one UMEM (XdpGroup) and forward by moving the
//! descriptor; any other pair copies each frame into the other port's buffer (counted).

use std::sync::atomic::AtomicBool;

use anyhow::Context;
use wirespeed_port::xdp::XdpGroup;
use wirespeed_port::{Backend, Batch, Port, PortError, PortOptions, PortSpec, PortStats};

use super::report::{Summary, Tally, summary_for};
use super::{BenchArgs, Mode, announce_ready};
use crate::run::clock::HOT_LOOP_CHECK;
use crate::run::idle::{Idle, Step};
use crate::run::link_watch::LinkWatch;
use crate::run::meter::{Meter, RunLimit};
use crate::run::open_port::drain;

pub fn run(
    args: &BenchArgs,
    a: &PortSpec,
    b: &PortSpec,
    stop: &AtomicBool,
) -> anyhow::Result<Summary> {
    if a.backend == Backend::Xdp && b.backend == Backend::Xdp {
        run_shared(args, a, b, stop)
    } else {
        run_copying(args, a, b, stop)
    }
}

fn run_shared(
    args: &BenchArgs,
    a: &PortSpec,
    b: &PortSpec,
    stop: &AtomicBool,
) -> anyhow::Result<Summary> {
    let mut group = XdpGroup::open(
        &[a.clone(), b.clone()],
        &args.port_options(&[&a.iface, &b.iface], true, true),
    )
    .with_context(|| format!("open {a} and {b} on one UMEM"))?;
    announce_ready(Mode::L2fwd, group.info(0), args.port_flags.batch);
    announce_ready(Mode::L2fwd, group.info(1), args.port_flags.batch);
    let mut meter = Meter::new("fwd", args.quiet, HOT_LOOP_CHECK);
    let mut tally = Tally::default();
    let mut ended = forward_shared(args, &mut group, stop, &mut meter, &mut tally);
    let seconds = meter.elapsed().as_secs_f64();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while ended.is_ok()
        && (group.tx_pending(0) || group.tx_pending(1))
        && std::time::Instant::now() < until
    {
        ended = group.flush(0).and_then(|()| group.flush(1));
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    let stats = sum(group.stats(0), group.stats(1));
    let mut s = summary_for(Mode::L2fwd, args, Some(group.info(0)), a);
    s.port = format!("{a}<->{b}");
    s.set_measured(seconds, &meter, tally.packets, tally.bytes);
    s.set_stats(&stats);
    s.frames = Some(group.audit());
    s.set_error(ended);
    Ok(s.finish())
}

/// Moves descriptors both ways until the run ends or a port fails.
fn forward_shared(
    args: &BenchArgs,
    group: &mut XdpGroup,
    stop: &AtomicBool,
    meter: &mut Meter,
    tally: &mut Tally,
) -> Result<(), PortError> {
    let mut batch = Batch::with_capacity(args.port_flags.batch as usize);
    let mut run = RunLimit::new(args.duration(), args.count, stop, HOT_LOOP_CHECK);
    let mut idle = Idle::new(args.port_flags.ring_size());
    if group.info(0).busy_poll && group.info(1).busy_poll {
        idle = idle.without_poll_sleep();
    }
    let mut watch = [LinkWatch::default(), LinkWatch::default()];
    // Both ports' bursts are one round's room.
    let room = 2 * batch.room();
    while run.running(tally.packets) {
        let mut moved = 0;
        for (from, to) in [(0, 1), (1, 0)] {
            if group.rx_burst(from, &mut batch)? == 0 {
                group.flush(to)?;
                continue;
            }
            tally.bytes += (0..batch.len())
                .map(|i| batch.packet_len(i) as u64)
                .sum::<u64>();
            moved += group.tx_burst(to, &mut batch)?;
        }
        tally.packets += moved as u64;
        if moved == 0 {
            for (port, watch) in watch.iter_mut().enumerate() {
                watch.quiet_by(|| group.link(port), || group.info(port).spec.clone())?;
            }
        }
        match idle.after_burst(moved, room) {
            Step::Spin => {}
            Step::Nap(d) => std::thread::sleep(d),
            Step::Sleep(d) => {
                group.wait_rx(0, d / 10)?;
                group.wait_rx(1, d / 10)?;
                run.check_soon();
            }
        }
        meter.tick(tally.packets, tally.bytes, || {
            let a = group.audit();
            format!("frames {}", if a.balanced() { "ok" } else { "UNACCOUNTED" })
        });
    }
    Ok(())
}

fn run_copying(
    args: &BenchArgs,
    a: &PortSpec,
    b: &PortSpec,
    stop: &AtomicBool,
) -> anyhow::Result<Summary> {
    let opts = PortOptions {
        // Each packet is copied into one frame of the other port.
        multi_buffer: false,
        ..args.port_options(&[&a.iface, &b.iface], true, true)
    };
    let mut ports: [Box<dyn Port>; 2] = [
        crate::run::open_port::open_port(a, &opts)?,
        crate::run::open_port::open_port(b, &opts)?,
    ];
    announce_ready(Mode::L2fwd, ports[0].info(), args.port_flags.batch);
    announce_ready(Mode::L2fwd, ports[1].info(), args.port_flags.batch);
    let mut meter = Meter::new("fwd", args.quiet, HOT_LOOP_CHECK);
    let mut tally = CopyTally::default();
    let mut ended = forward_copying(args, &mut ports, stop, &mut meter, &mut tally);
    let seconds = meter.elapsed().as_secs_f64();
    for port in &mut ports {
        if ended.is_ok() {
            ended = drain(&mut **port).context("send the last packets");
        }
    }
    let mut stats = sum(ports[0].stats(), ports[1].stats());
    stats.copies += tally.copies;
    stats.drops.tx_ring_full += tally.no_room;
    let mut s = summary_for(Mode::L2fwd, args, Some(ports[0].info()), a);
    s.port = format!("{a}<->{b}");
    s.set_measured(seconds, &meter, tally.moved.packets, tally.moved.bytes);
    s.set_stats(&stats);
    s.set_error(ended);
    Ok(s.finish())
}

/// What copying between two buffer areas counted.
#[derive(Default)]
struct CopyTally {
    moved: Tally,
    copies: u64,
    /// Received, but the other port had no frame to copy it into.
    no_room: u64,
}

/// Copies both ways until the run ends or a port fails.
fn forward_copying(
    args: &BenchArgs,
    ports: &mut [Box<dyn Port>; 2],
    stop: &AtomicBool,
    meter: &mut Meter,
    tally: &mut CopyTally,
) -> anyhow::Result<()> {
    let mut rx = Batch::with_capacity(args.port_flags.batch as usize);
    let mut tx = Batch::with_capacity(args.port_flags.batch as usize);
    let mut run = RunLimit::new(args.duration(), args.count, stop, HOT_LOOP_CHECK);
    let mut idle = Idle::new(args.port_flags.ring_size());
    if ports[0].info().busy_poll && ports[1].info().busy_poll {
        idle = idle.without_poll_sleep();
    }
    let mut watch = [LinkWatch::default(), LinkWatch::default()];
    let room = 2 * rx.room();
    while run.running(tally.moved.packets) {
        let mut moved = 0;
        for from in [0, 1] {
            let [p0, p1] = &mut *ports;
            let (src, dst) = if from == 0 { (p0, p1) } else { (p1, p0) };
            if src.rx_burst(&mut rx)? == 0 {
                dst.flush()?;
                continue;
            }
            // Different buffer areas: each frame is copied (DESIGN rule 5: count the copies).
            let n = dst.alloc_tx(&mut tx, rx.len(), 0);
            for i in 0..n {
                let (addr, len) = (rx.addr(i), rx.frame_len(i));
                tx.set_len(i, len);
                dst.packet_mut(tx.addr(i), len)
                    .copy_from_slice(src.packet(addr, len));
                tally.moved.bytes += len as u64;
            }
            tally.copies += n as u64;
            tally.no_room += (rx.len() - n) as u64;
            moved += dst.tx_burst(&mut tx)?;
            src.release(&mut rx);
        }
        tally.moved.packets += moved as u64;
        if moved == 0 {
            if ports.iter().all(|p| p.rx_ended()) {
                break;
            }
            for (port, watch) in ports.iter().zip(&mut watch) {
                watch.quiet(&**port)?;
            }
        }
        match idle.after_burst(moved, room) {
            Step::Spin => {}
            Step::Nap(d) => std::thread::sleep(d),
            Step::Sleep(d) => {
                ports[0].wait_rx(d / 10)?;
                ports[1].wait_rx(d / 10)?;
                run.check_soon();
            }
        }
        meter.tick(tally.moved.packets, tally.moved.bytes, String::new);
    }
    Ok(())
}

/// The counters of two ports added up.
fn sum(mut a: PortStats, b: PortStats) -> PortStats {
    a.add(&b);
    a
}
