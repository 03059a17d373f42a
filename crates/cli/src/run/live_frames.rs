//! The kernel engine's runner (`bench txpush` and `gen`, `--engine kernel`): BPF_PROG_RUN
//! live frames repeat prebuilt frames at XDP speed, from two threads that take turns on one
//! CPU (see [`THREADS_PER_CPU`]), or two pinned to each CPU of `--cpus`. A live-frames run
//! sends from the CPU that makes the call, and on veth the peer's receive work runs there
//! too, into the peer's receive queue numbered CPU mod its queue count: so one CPU is one
//! engine's ceiling. The threads share the counters below and, when they stamp one frame,
//! their CPU's engine (its program numbers the CPU's frames as one series).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::ScopedJoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use wirespeed_port::{LinkState, PortError};
use wirespeed_xdp::{LiveFrames, TxDrops, TxWatch, Variation};

use crate::run::link_watch::settle_link_error;
use crate::run::meter::{Measured, Meter};

/// For the ready line: which CPUs send, when pinned.
pub fn threads_note(cpus: &[usize]) -> String {
    match cpus {
        [] => String::new(),
        [cpu] => format!(", on CPU {cpu}"),
        _ => {
            let list: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
            format!(", on CPUs {}", list.join(","))
        }
    }
}

/// A frame the kernel repeats, and its share of the packets.
pub struct Prebuilt {
    pub frame: Vec<u8>,
    pub weight: u64,
}

/// What to send, from where, and for how long.
pub struct LiveLoad<'a> {
    pub iface: &'a str,
    pub frames: &'a [Prebuilt],
    /// Threads pinned to each of these CPUs (empty: not pinned).
    pub cpus: &'a [usize],
    /// Frames per kernel batch (0: the kernel's default of 64).
    pub batch: u32,
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    /// Packets per second over all threads; none: as fast as the kernel sends.
    pub pps: Option<f64>,
    pub quiet: bool,
    /// What the kernel changes in each frame of each of `frames` (`LiveFrames::varied`).
    /// With stamps, each CPU's frames are one series: CPU i (in `cpus` order) stamps
    /// generator id `stamp.generator + i`.
    pub vary: Variation,
    /// Also count the frames a device's full queue leaves over, at about 5% of the rate
    /// (`TxWatch::watch_flushes`); refusals are counted either way.
    pub count_every_drop: bool,
}

/// What the threads sent together.
pub struct LiveTotals {
    pub packets: u64,
    /// Packets each engine sent (with stamps: each series), in CPU order.
    pub per_engine: Vec<u64>,
    pub bytes: u64,
    /// What the kernel did not send of them; None where its transmits cannot be watched
    /// (no BTF).
    pub drops: Option<TxDrops>,
    pub measured: Measured,
    /// Why sending stopped early, if it did: a call that failed (the interface went away, say).
    /// What was sent until then is counted above all the same.
    pub ended: anyhow::Result<()>,
    /// What the user should know of the counts (frames the device refused, or that its
    /// failures cannot be watched).
    pub notes: Vec<String>,
}

/// Whether `iface` may be one end of a veth pair: a virtual Ethernet interface of no named
/// device type (a VLAN, a macvlan, a bridge, a VXLAN name theirs in `uevent`), not a tap.
/// (Its peer, in another namespace as often as not, cannot be looked at from here.)
fn may_be_veth(iface: &str) -> bool {
    let at = format!("/sys/class/net/{iface}");
    let read = |file: &str| std::fs::read_to_string(format!("{at}/{file}"));
    let virtual_device =
        std::fs::read_link(&at).is_ok_and(|path| path.to_string_lossy().contains("/virtual/"));
    let ethernet = read("type").is_ok_and(|t| t.trim() == "1");
    let typed = read("uevent").is_ok_and(|u| u.contains("DEVTYPE="));
    let tap = std::fs::metadata(format!("{at}/tun_flags")).is_ok();
    virtual_device && ethernet && !typed && !tap
}

/// The note a veth gets: the kernel hands the frames to the peer, which drops them unless
/// it takes XDP frames, and tells this process nothing of it.
fn veth_note(iface: &str) -> Option<String> {
    may_be_veth(iface).then(|| {
        format!(
            "{iface} is a virtual interface: if a veth, its peer takes the kernel engine's \
             frames only if it runs an XDP program or has GRO on (ethtool -K PEER gro on), \
             and the kernel drops them otherwise, which no count here shows. The packets \
             counted are those handed to the kernel; the peer's counters say what arrived"
        )
    })
}

/// Each call sets up a page pool (milliseconds): one frame gets calls this long...
const CALL_ONE_FRAME: Duration = Duration::from_millis(500);
/// ...several frames shorter ones, so the cycle comes round sooner.
const CALL_MANY_FRAMES: Duration = Duration::from_millis(100);
/// A paced cycle of calls (one a frame, by weight) at first: this long's worth at the
/// asked rate. The kernel sends a call's frames at full speed, so a paced load is a burst
/// a call; short calls keep the bursts within what a receiver's ring takes. Calls that
/// cannot keep up (each costs a page pool's set-up and tear-down) grow, up to an unpaced
/// call's length ([`CALL_ONE_FRAME`], [`CALL_MANY_FRAMES`]), and shrink back once they
/// keep up with room to spare.
const PACED_CALL: Duration = Duration::from_millis(2);
const CHUNK_MIN: u64 = 1 << 12;
const CHUNK_MAX: u64 = 1 << 26;
/// Sending threads per CPU. A live-frames call ends by tearing down its page pool, which
/// waits for an RCU grace period: measured here, 20-25 ms of every 500 ms call left the CPU
/// idle. With a second thread on the CPU, one sends while the other waits.
const THREADS_PER_CPU: usize = 2;
/// How often the coordinating thread looks at the clock, the signal flag and the counters.
const TICK: Duration = Duration::from_millis(20);

/// Counters the sending threads add to, and the flag that ends them.
#[derive(Default)]
struct Progress {
    packets: AtomicU64,
    bytes: AtomicU64,
    halt: AtomicBool,
}

/// One thread's part of the load.
struct Share {
    count: Option<u64>,
    deadline: Option<Instant>,
    pps: Option<f64>,
    cpu: Option<usize>,
}

/// Sends `load` until its count, its duration or `stop`, printing the live line; `ready`
/// runs once the engines are loaded, before anything is sent.
pub fn run(load: &LiveLoad, stop: &AtomicBool, ready: impl FnOnce()) -> anyhow::Result<LiveTotals> {
    let ifindex = wirespeed_xsk::if_index(load.iface)
        .with_context(|| format!("{}: no such interface", load.iface))?;
    // Stamped frames are one series per CPU. With one frame, the CPU's threads share one
    // engine (its program keeps the series); several frames need an engine set up for
    // each call's frame, so the CPU gets one thread.
    let stamped = load.vary.stamp.is_some();
    let per_cpu = if stamped && load.frames.len() > 1 {
        1
    } else {
        THREADS_PER_CPU
    };
    let shared = stamped && per_cpu > 1;
    let threads = load.cpus.len().max(1) * per_cpu;
    let engine_of = |thread: usize| if shared { thread / per_cpu } else { thread };
    // Loaded here, so a failure ends the run before any thread sends.
    let mut engines = load_engines(load, ifindex, engine_of(threads - 1) + 1)?;
    let slots: Vec<ThreadEngine> = if shared {
        (0..threads)
            .map(|t| ThreadEngine::Shared(&engines[engine_of(t)]))
            .collect()
    } else {
        engines.iter_mut().map(ThreadEngine::Own).collect()
    };
    let (mut watch, mut notes) = start_watch(load, ifindex)?;
    ready();
    for note in &notes {
        eprintln!("wirespeed: note: {note}");
    }
    let said = notes.len();
    let progress = Progress::default();
    let mut meter = Meter::new("tx", load.quiet, 1);
    let deadline = load.duration.map(|d| Instant::now() + d);
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = slots
            .into_iter()
            .enumerate()
            .map(|(i, engine)| {
                let share = Share {
                    count: load.count.map(|c| share_of(c, threads, i)),
                    deadline,
                    pps: load.pps.map(|p| p / threads as f64),
                    cpu: load.cpus.get(i / per_cpu).copied(),
                };
                let progress = &progress;
                scope.spawn(move || {
                    let (sent, ended) = send(engine, load, &share, progress);
                    if ended.is_err() {
                        progress.halt.store(true, Ordering::Relaxed);
                    }
                    (sent, ended)
                })
            })
            .collect();
        follow(
            &handles, stop, deadline, &progress, &mut watch, ifindex, &mut meter, &mut notes,
        );
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| (0, Err(anyhow!("a kernel engine thread panicked"))))
            })
            .collect::<Vec<_>>()
    });
    let mut per_engine = vec![0u64; engine_of(threads - 1) + 1];
    let mut ended = Ok(());
    for (t, (sent, thread_ended)) in results.into_iter().enumerate() {
        per_engine[engine_of(t)] += sent;
        if ended.is_ok() {
            ended = thread_ended;
        }
    }
    let drops = match watch.as_ref().map(TxWatch::drops).transpose() {
        Ok(drops) => drops,
        Err(e) => {
            notes.push(format!(
                "the kernel's transmit failures could not be read: {e}"
            ));
            None
        }
    };
    notes.extend(drops.and_then(|d| refused_note(load.iface, &d)));
    for note in &notes[said..] {
        eprintln!("wirespeed: note: {note}");
    }
    let totals = LiveTotals {
        packets: progress.packets.load(Ordering::Relaxed),
        per_engine,
        bytes: progress.bytes.load(Ordering::Relaxed),
        drops,
        measured: meter.measured(),
        ended: ended.map_err(|e| link_error(e, load.iface, ifindex)),
        notes,
    };
    Ok(totals)
}

/// The drops by reason, as the summaries list them: `tx_not_queued`, and `tx_refused` and
/// `tx_queue_full` where flushes were watched (not listed where they are not known).
pub fn drops_by_reason(d: &TxDrops) -> Vec<(&'static str, u64)> {
    let mut reasons = vec![("tx_not_queued", d.not_queued)];
    if d.flushes_watched {
        reasons.extend([("tx_refused", d.refused), ("tx_queue_full", d.queue_full)]);
    }
    reasons
}

/// What a user should know when the device refused frames, and what to do about it where
/// the error says.
fn refused_note(iface: &str, d: &TxDrops) -> Option<String> {
    let failed = d.refused + d.not_queued;
    if failed == 0 {
        return None;
    }
    let errno = nix::errno::Errno::from_raw(-d.last_err);
    let why = match d.last_err {
        0 => String::new(),
        _ => format!(" ({errno})"),
    };
    let hint = match errno {
        nix::errno::Errno::EOPNOTSUPP if may_be_veth(iface) => {
            ": a veth's peer takes the kernel engine's frames only if it runs an XDP program \
             or has GRO on (ethtool -K PEER gro on)"
        }
        nix::errno::Errno::ENXIO => ": its link was down (a veth whose peer is down)",
        nix::errno::Errno::ENETDOWN => ": it was down",
        nix::errno::Errno::EMSGSIZE => ": the frames are longer than its MTU",
        _ => "",
    };
    Some(format!(
        "the kernel did not send {failed} of the frames handed to it on {iface}{why}{hint}"
    ))
}

/// A call that failed as its interface went down or away says so: deleting an interface
/// takes it down first, and the calls in between fail ([`settle_link_error`] tells the two
/// apart). With the interface up, the call's own error stands.
fn link_error(e: anyhow::Error, iface: &str, ifindex: u32) -> anyhow::Error {
    let link = || wirespeed_port::link_state(ifindex);
    if link() == LinkState::Up {
        return e;
    }
    let down = PortError::InterfaceDown(iface.to_string());
    match settle_link_error(Err(down.into()), link) {
        Err(e) => e,
        Ok(()) => e,
    }
}

/// Until every sending thread is done: halts them at a stop request or the deadline, and
/// shows the live line (with the kernel's drops, where watched).
#[allow(clippy::too_many_arguments)]
fn follow<T>(
    handles: &[ScopedJoinHandle<'_, T>],
    stop: &AtomicBool,
    deadline: Option<Instant>,
    progress: &Progress,
    watch: &mut Option<TxWatch>,
    ifindex: u32,
    meter: &mut Meter,
    notes: &mut Vec<String>,
) {
    while !handles.iter().all(|h| h.is_finished()) {
        std::thread::sleep(TICK);
        if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
            progress.halt.store(true, Ordering::Relaxed);
        }
        watch_flushes_if_down(watch, ifindex, true, notes);
        meter.tick(
            progress.packets.load(Ordering::Relaxed),
            progress.bytes.load(Ordering::Relaxed),
            || match watch.as_ref().map(TxWatch::drops) {
                Some(Ok(d)) => format!("drops {}", d.total()),
                _ => String::new(),
            },
        );
    }
}

/// The watch on what the kernel fails to send, and what the user should know of it: where
/// it cannot be had, a veth gets a note that no count shows its peer's refusals.
fn start_watch(load: &LiveLoad, ifindex: u32) -> anyhow::Result<(Option<TxWatch>, Vec<String>)> {
    let mut watch = match TxWatch::new(ifindex, wirespeed_xsk::netns_cookie()?) {
        Ok(watch) => watch,
        Err(e) => {
            let notes = veth_note(load.iface)
                .map(|note| format!("{note} (its transmit failures cannot be watched: {e})"))
                .into_iter()
                .collect();
            return Ok((None, notes));
        }
    };
    let mut notes = Vec::new();
    if load.count_every_drop
        && let Err(e) = watch.watch_flushes()
    {
        notes.push(format!(
            "frames a full queue leaves over cannot be counted: {e}"
        ));
    }
    let mut watch = Some(watch);
    watch_flushes_if_down(&mut watch, ifindex, false, &mut notes);
    if watch.as_ref().is_some_and(|w| !w.watches_flushes()) && may_be_veth(load.iface) {
        notes.push(format!(
            "{}: frames the veth refuses when it flushes its queue (its peer's ring full; on \
             kernels before about 6.4, every frame a peer without XDP refuses) are not in the \
             drops (watching for them costs about 5% of the rate; gen does): the peer's \
             counters say what arrived",
            load.iface
        ));
    }
    Ok((watch, notes))
}

/// With the link down (a veth whose peer is down), the device refuses frames when its
/// queue is flushed, which only the costlier flush watch sees: it starts then.
/// `sending`: the engines are running, so some frames went uncounted until the link was seen
/// down (it is looked at every [`TICK`]).
fn watch_flushes_if_down(
    watch: &mut Option<TxWatch>,
    ifindex: u32,
    sending: bool,
    notes: &mut Vec<String>,
) {
    let Some(w) = watch else { return };
    if w.watches_flushes() || wirespeed_port::link_state(ifindex) == LinkState::Up {
        return;
    }
    match w.watch_flushes() {
        Ok(()) if sending => notes.push(format!(
            "the link went down during the run: frames it refused before that was seen (it is \
             looked at every {} ms, and the kernel marks it down moments after its carrier \
             goes) are not in the drops",
            TICK.as_millis()
        )),
        Ok(()) => {}
        Err(e) => {
            notes.push(format!(
                "the link is down, and the frames it refuses cannot be counted: {e}"
            ));
            *watch = None;
        }
    }
}

/// `count` kernel engines on `load`'s interface, each with its frames: plain, varied (a
/// stamping one numbering its own series), or restoring the VLAN tags the kernel strips.
fn load_engines(load: &LiveLoad, ifindex: u32, count: usize) -> anyhow::Result<Vec<LiveFrames>> {
    let templates: Vec<&[u8]> = load.frames.iter().map(|f| f.frame.as_slice()).collect();
    let engines = (0..count)
        .map(|i| {
            if load.vary != Variation::default() {
                let mut vary = load.vary;
                if let Some(stamp) = &mut vary.stamp {
                    stamp.generator = stamp.generator.wrapping_add(i as u16);
                }
                LiveFrames::varied(load.iface, ifindex, &templates, &vary)
            } else if templates.iter().any(|f| LiveFrames::needs_restoring(f)) {
                // Tagged frames need their tag written back each time (see LiveFrames::varied).
                LiveFrames::varied(load.iface, ifindex, &templates, &Variation::default())
            } else {
                LiveFrames::new(load.iface, ifindex)
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(engines)
}

/// A sending thread's engine: its own, or the one its CPU's threads share.
enum ThreadEngine<'a> {
    Own(&'a mut LiveFrames),
    Shared(&'a LiveFrames),
}

impl ThreadEngine<'_> {
    fn send(
        &mut self,
        frame: &[u8],
        repeat: u32,
        batch: u32,
    ) -> Result<(), wirespeed_xdp::XdpError> {
        match self {
            ThreadEngine::Own(engine) => engine.send(frame, repeat, batch),
            ThreadEngine::Shared(engine) => engine.send_shared(frame, repeat, batch),
        }
    }
}

/// Thread `i`'s part of `count` packets split over `threads`: the first ones take the rest.
fn share_of(count: u64, threads: usize, i: usize) -> u64 {
    let threads = threads as u64;
    count / threads + u64::from((i as u64) < count % threads)
}

/// One thread: sends the frames in turn, each repeated in proportion to its weight, until
/// its share of the count or the halt flag; returns how many it sent, and why it stopped
/// early if a call failed.
fn send(
    mut engine: ThreadEngine,
    load: &LiveLoad,
    share: &Share,
    progress: &Progress,
) -> (u64, anyhow::Result<()>) {
    if let Some(cpu) = share.cpu
        && let Err(e) = wirespeed_port::pin_thread(cpu)
    {
        return (0, Err(e.into()));
    }
    let frames = load.frames;
    let target = if frames.len() == 1 {
        CALL_ONE_FRAME
    } else {
        CALL_MANY_FRAMES
    };
    let limit = share.count.unwrap_or(u64::MAX);
    let started = Instant::now();
    let mut sent = 0u64;
    let total_weight: u64 = frames.iter().map(|f| f.weight).sum();
    // Packets per unit of weight in one call, adjusted to the time calls take; paced, a
    // whole cycle of calls is PACED_CALL's worth at first, and at most `target`'s.
    let units_of = |p: f64, d: Duration| ((p * d.as_secs_f64()) as u64 / total_weight).max(1);
    let paced_start = share.pps.map(|p| units_of(p, PACED_CALL));
    let mut unit = paced_start.unwrap_or(1 << 18);
    // A paced thread sends what is due by the deadline, no more.
    let due_by_deadline = match (share.pps, share.deadline) {
        (Some(p), Some(d)) => Some((p * d.saturating_duration_since(started).as_secs_f64()) as u64),
        _ => None,
    };
    let (mut i, mut cycle_unit) = (0, u64::MAX);
    // Packets a second the last call sent at, to size a call that would outlast the deadline.
    let mut call_rate: Option<f64> = None;
    // The deadline is looked at here too: a paced thread wakes exactly when its next call
    // is due, and a call due at the deadline must not go out.
    let over = || {
        progress.halt.load(Ordering::Relaxed) || share.deadline.is_some_and(|d| Instant::now() >= d)
    };
    // A paced cycle's packets and its calls' time (not the waits between): the calls' size
    // changes only between cycles, so every frame of one is sent at the same size, by
    // weight (IMIX stays 7:4:1).
    let (mut cycle_sent, mut cycle_took) = (0u64, 0f64);
    while sent < limit && !over() {
        if i % frames.len() == 0 {
            // A count that ends within this cycle is shared by all its frames, by weight.
            cycle_unit = ((limit - sent) / total_weight).max(1);
            if let (Some(p), true) = (share.pps, cycle_sent > 0) {
                let sizes = (paced_start.unwrap_or(1), units_of(p, target));
                unit = paced_unit(unit, cycle_sent, cycle_took, p, sizes);
                (cycle_sent, cycle_took) = (0, 0.0);
            }
        }
        let f = &frames[i % frames.len()];
        i += 1;
        let mut n = (limit - sent).min((unit.min(cycle_unit) * f.weight).clamp(1, CHUNK_MAX));
        if let (Some(d), Some(r), None) = (share.deadline, call_rate, share.pps) {
            let left = d.saturating_duration_since(Instant::now()).as_secs_f64();
            n = n.min(((r * left) as u64).max(1));
        }
        if let Some(due) = due_by_deadline {
            if sent >= due {
                break;
            }
            n = n.min(due - sent);
        }
        let call = Instant::now();
        if let Err(e) = engine.send(&f.frame, n as u32, load.batch) {
            return (sent, Err(e.into()));
        }
        sent += n;
        progress.packets.fetch_add(n, Ordering::Relaxed);
        progress
            .bytes
            .fetch_add(n * f.frame.len() as u64, Ordering::Relaxed);
        let took = call.elapsed().as_secs_f64().max(1e-6);
        call_rate = Some(n as f64 / took);
        match share.pps {
            // Average rate: wait until the packets sent so far are due. A cycle of calls
            // slower than the rate (their set-up and tear-down) makes the next larger.
            Some(p) => {
                let due = Duration::from_secs_f64(sent as f64 / p);
                cycle_sent += n;
                cycle_took += took;
                while let Some(d) = due.checked_sub(started.elapsed()) {
                    if d.is_zero() || over() {
                        break;
                    }
                    crate::run::clock::wait(d);
                }
            }
            None => {
                unit = ((n as f64 / f.weight as f64 / took * target.as_secs_f64()) as u64)
                    .clamp(CHUNK_MIN, CHUNK_MAX);
            }
        }
    }
    (sent, Ok(()))
}

/// A paced thread's next call size (per unit of weight): twice `unit` when the last cycle
/// of calls sent its `n` packets in `took` seconds of calls slower than `pps` (each call's
/// fixed cost), up to `longest`; half when it kept up four times over, down to `start`;
/// else the same. So the bursts stay as short as the calls allow, and a cycle slowed once
/// (the CPU taken away) costs no more than a few longer ones.
fn paced_unit(unit: u64, n: u64, took: f64, pps: f64, (start, longest): (u64, u64)) -> u64 {
    let rate = n as f64 / took;
    if rate < pps {
        (unit * 2).min(longest.max(start))
    } else if rate >= 4.0 * pps {
        (unit / 2).max(start)
    } else {
        unit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paced_calls_grow_while_they_cannot_keep_up_and_shrink_back() {
        // 10 kpps: 20 packets in 2 ms to start with, 5000 (half a second) at most.
        let sizes = (20, 5000);
        // A call of 20 that took 1.5 ms kept up, not four times over; one of 30 ms did not.
        assert_eq!(paced_unit(20, 20, 0.0015, 10_000.0, sizes), 20);
        assert_eq!(paced_unit(20, 20, 0.030, 10_000.0, sizes), 40);
        assert_eq!(paced_unit(4000, 4000, 1.0, 10_000.0, sizes), 5000);
        assert_eq!(paced_unit(5000, 5000, 1.0, 10_000.0, sizes), 5000);
        // Fast again: back down, never below the start.
        assert_eq!(paced_unit(640, 640, 0.001, 10_000.0, sizes), 320);
        assert_eq!(paced_unit(20, 20, 0.0001, 10_000.0, sizes), 20);
        // At 1 pps a call is one packet.
        assert_eq!(paced_unit(1, 1, 2.0, 1.0, (1, 1)), 1);
    }

    #[test]
    fn shares_add_up_to_the_count() {
        for (count, threads) in [(0, 1), (7, 1), (7, 2), (1_000_001, 2), (5, 8), (100, 3)] {
            let shares: Vec<u64> = (0..threads).map(|i| share_of(count, threads, i)).collect();
            assert_eq!(shares.iter().sum::<u64>(), count, "{count} over {threads}");
            assert!(shares.iter().max().unwrap() - shares.iter().min().unwrap() <= 1);
        }
    }
}
