//! Rates over time: the live line on stderr once a second, and the totals at the end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wirespeed_port::Batch;

/// A time option (`--duration`, `--accept-timeout`...) checked the same way everywhere:
/// more than 0 seconds and at most a year.
pub fn check_seconds(flag: &str, value: Option<f64>) -> anyhow::Result<()> {
    if let Some(v) = value
        && !(v > 0.0 && v <= 86400.0 * 365.0)
    {
        anyhow::bail!("{flag} {v}: must be more than 0 seconds and at most a year");
    }
    Ok(())
}

/// When a run ends: a deadline, a packet count, or a signal. Hot loops ask every burst, so
/// the clock is read only every `every` calls (a clock read costs as much as a burst of
/// bookkeeping; at 128 bursts of 64 the deadline is still met within a millisecond).
pub struct RunLimit<'a> {
    deadline: Option<Instant>,
    limit: u64,
    stop: &'a AtomicBool,
    every: u32,
    calls: u32,
    expired: bool,
}

impl<'a> RunLimit<'a> {
    pub fn new(
        duration: Option<Duration>,
        limit: Option<u64>,
        stop: &'a AtomicBool,
        every: u32,
    ) -> RunLimit<'a> {
        RunLimit {
            deadline: duration.map(|d| Instant::now() + d),
            limit: limit.unwrap_or(u64::MAX),
            stop,
            every: every.max(1),
            calls: 0,
            expired: false,
        }
    }

    /// True while the run should go on, `done` packets into it.
    #[inline]
    pub fn running(&mut self, done: u64) -> bool {
        if done >= self.limit || self.expired {
            return false;
        }
        self.calls += 1;
        if self.calls < self.every {
            return true;
        }
        self.calls = 0;
        self.expired =
            self.stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d);
        !self.expired
    }

    /// Makes the next `running` look at the clock (after a sleep, when many turns' worth of
    /// time may have passed).
    pub fn check_soon(&mut self) {
        self.calls = self.every;
    }

    /// The run was cut short, by a signal or its deadline, rather than ending at its count:
    /// a receiver still takes what had arrived (`rx_drain`).
    pub fn cut_short(&self) -> bool {
        self.expired
    }

    /// Packets still to go before the count limit.
    pub fn remaining(&self, done: u64) -> u64 {
        self.limit.saturating_sub(done)
    }

    /// Makes an empty `batch` hold no more than the packets left before the count (a
    /// smaller one, once the count is near), so a receiver takes exactly its count, as
    /// `tcpdump -c` does, where a whole last burst overshot it.
    pub fn fit(&self, done: u64, batch: &mut Batch) {
        let left = self.remaining(done);
        if left > 0 && left < batch.capacity() as u64 && batch.is_empty() {
            *batch = Batch::with_capacity(left as usize);
        }
    }
}

/// Counts packets and bytes and prints a line a second.
pub struct Meter {
    start: Instant,
    cpu_start: CpuTime,
    last: Instant,
    last_packets: u64,
    last_bytes: u64,
    quiet: bool,
    label: &'static str,
    /// Calls to `tick` between clock reads.
    every: u32,
    calls: u32,
    /// The rate of each interval of a second or more, in packets per second.
    samples: Vec<f64>,
    /// Where a thread of several publishes its counts for the live line of them all.
    progress: Option<std::sync::Arc<super::threads::Progress>>,
    /// With `--metrics`: where the meter's figures go for a scrape.
    metrics: Option<MeterMetrics>,
}

/// A meter's side of `--metrics`: its slot, when it last published, and what
/// `tick_port` counts for it (bursts that brought packets, the thread's time).
struct MeterMetrics {
    slot: wirespeed_metrics::Published<super::metrics::MeterFigures>,
    last_published: Option<Instant>,
    /// Started on the thread that ticks, at its first tick.
    clock: Option<wirespeed_port::ThreadClock>,
    seen_packets: u64,
    bursts: u64,
    burst_packets: u64,
}

/// How often a meter publishes its figures for a scrape.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

impl Meter {
    /// A meter whose `tick` reads the clock every `every` calls.
    pub fn new(label: &'static str, quiet: bool, every: u32) -> Meter {
        let now = Instant::now();
        Meter {
            start: now,
            cpu_start: CpuTime::now(),
            last: now,
            last_packets: 0,
            last_bytes: 0,
            quiet,
            label,
            every: every.max(1),
            calls: 0,
            samples: Vec::new(),
            progress: None,
            metrics: super::metrics::register_meter().map(|(_, slot)| MeterMetrics {
                slot,
                last_published: None,
                clock: None,
                seen_packets: 0,
                bursts: 0,
                burst_packets: 0,
            }),
        }
    }

    /// A quiet meter for one thread of several, publishing its counts to `progress`.
    pub fn for_thread(
        label: &'static str,
        every: u32,
        progress: std::sync::Arc<super::threads::Progress>,
    ) -> Meter {
        Meter {
            progress: Some(progress),
            ..Meter::new(label, true, every)
        }
    }

    /// The rate of each whole second so far, in Mpps (the live line's figures): what a
    /// benchmark takes a steady-state figure from, as from other tools' per-second lines.
    pub fn per_second_mpps(&self) -> Vec<f64> {
        self.samples.iter().map(|pps| pps / 1e6).collect()
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// CPU time this process used since the meter started.
    pub fn cpu_used(&self) -> CpuTime {
        CpuTime::now().minus(&self.cpu_start)
    }

    /// The run so far, for a summary.
    pub fn measured(&self) -> Measured {
        Measured {
            seconds: self.elapsed().as_secs_f64(),
            per_second_mpps: self.per_second_mpps(),
            cpu: self.cpu_used(),
        }
    }

    /// Makes the next `tick` look at the clock (after a nap or a sleep, when many turns'
    /// worth of time may have passed).
    #[inline]
    pub fn check_soon(&mut self) {
        self.calls = self.every;
    }

    /// Prints the live line when a second has passed since the last one.
    #[inline]
    pub fn tick(&mut self, packets: u64, bytes: u64, status: impl FnOnce() -> String) {
        if !self.clock_due() {
            return;
        }
        let now = Instant::now();
        if self.metrics.is_some() {
            self.publish(now, packets, bytes, None);
        }
        self.on_clock(now, packets, bytes, status);
    }

    /// [`Self::tick`] for a loop over `port`: with `--metrics`, also counts the bursts
    /// that brought packets and publishes the port's counters and frames.
    #[inline]
    pub fn tick_port(&mut self, packets: u64, bytes: u64, port: &mut dyn wirespeed_port::Port) {
        self.tick_port_status(packets, bytes, port, port_status);
    }

    /// [`Self::tick_port`] with a live line of the caller's (`status` of the port).
    #[inline]
    pub fn tick_port_status(
        &mut self,
        packets: u64,
        bytes: u64,
        port: &mut dyn wirespeed_port::Port,
        status: impl FnOnce(&mut dyn wirespeed_port::Port) -> String,
    ) {
        if let Some(m) = &mut self.metrics
            && packets != m.seen_packets
        {
            m.bursts += 1;
            m.burst_packets += packets.wrapping_sub(m.seen_packets);
            m.seen_packets = packets;
        }
        if !self.clock_due() {
            return;
        }
        let now = Instant::now();
        if self.metrics.is_some() {
            self.publish(now, packets, bytes, Some(port));
        }
        // A thread of several: the live line the coordinator prints sums their drops.
        if let Some(p) = &self.progress
            && now.duration_since(self.last) >= Duration::from_secs(1)
        {
            p.publish_drops(port.stats().drops.total());
        }
        self.on_clock(now, packets, bytes, || status(port));
    }

    /// True every `every` calls: time to read the clock.
    #[inline]
    fn clock_due(&mut self) -> bool {
        self.calls += 1;
        if self.calls < self.every {
            return false;
        }
        self.calls = 0;
        true
    }

    /// Offers the meter's figures for a scrape, at most every [`PUBLISH_EVERY`].
    #[cold]
    fn publish(
        &mut self,
        now: Instant,
        packets: u64,
        bytes: u64,
        port: Option<&mut dyn wirespeed_port::Port>,
    ) {
        let counted = self.label;
        let Some(m) = &mut self.metrics else {
            return;
        };
        let clock = *m
            .clock
            .get_or_insert_with(wirespeed_port::ThreadClock::start);
        if m.last_published
            .is_some_and(|at| now.duration_since(at) < PUBLISH_EVERY)
        {
            return;
        }
        m.last_published = Some(now);
        let port = port.map(|port| {
            let (device, queue) = wirespeed_metrics::device_and_queue(&port.info().spec);
            super::metrics::PortFigures {
                device,
                queue,
                stats: port.stats(),
                audit: port.audit(),
            }
        });
        let time = port.is_some().then(|| wirespeed_metrics::ThreadFigures {
            busy: clock.cpu(),
            wall: clock.wall(),
            bursts: m.bursts,
            burst_packets: m.burst_packets,
        });
        m.slot.offer(|| super::metrics::MeterFigures {
            counted,
            packets,
            bytes,
            port,
            time,
        });
    }

    /// Once the clock is read: the threads' progress, and the live line each second.
    fn on_clock(
        &mut self,
        now: Instant,
        packets: u64,
        bytes: u64,
        status: impl FnOnce() -> String,
    ) {
        if let Some(p) = &self.progress {
            p.publish(packets, bytes);
        }
        let dt = now.duration_since(self.last);
        if dt < Duration::from_secs(1) {
            return;
        }
        let secs = dt.as_secs_f64();
        let pps = (packets - self.last_packets) as f64 / secs;
        self.samples.push(pps);
        if !self.quiet {
            let mbps = (bytes - self.last_bytes) as f64 * 8.0 / secs / 1e6;
            eprintln!(
                "{:>7.1}s  {} {:>8.3} Mpps  {:>9.1} Mbit/s  total {:>12}  {}",
                now.duration_since(self.start).as_secs_f64(),
                self.label,
                pps / 1e6,
                mbps,
                packets,
                status()
            );
        }
        self.last = now;
        self.last_packets = packets;
        self.last_bytes = bytes;
    }
}

/// What a meter saw over a run: how long, each whole second's rate, and the CPU time.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    pub seconds: f64,
    pub per_second_mpps: Vec<f64>,
    pub cpu: CpuTime,
}

/// CPU time of this process (all threads), in user space and in the kernel on its behalf.
/// The kernel accounts it per tick, so a run of a few seconds is good to a few percent.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuTime {
    pub user: Duration,
    pub system: Duration,
}

impl CpuTime {
    pub fn now() -> CpuTime {
        use nix::sys::resource::{UsageWho, getrusage};
        let to_duration = |t: nix::sys::time::TimeVal| {
            Duration::from_secs(t.tv_sec().max(0) as u64)
                + Duration::from_micros(t.tv_usec().max(0) as u64)
        };
        getrusage(UsageWho::RUSAGE_SELF).map_or(CpuTime::default(), |u| CpuTime {
            user: to_duration(u.user_time()),
            system: to_duration(u.system_time()),
        })
    }

    pub fn minus(&self, earlier: &CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

/// Where this process's CPU time went, per packet, for a summary's `cpu`: user space is
/// ours (the loop, the rings, the packet work); system is the kernel on our behalf
/// (wake-ups, transmit kicks, poll, the kernel engine's sending). The per-packet figures are
/// none when no packet was counted.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CpuReport {
    pub user_seconds: f64,
    pub system_seconds: f64,
    pub user_ns_per_packet: Option<f64>,
    pub system_ns_per_packet: Option<f64>,
    /// The clock the cycles are counted at (/proc/cpuinfo).
    pub mhz: Option<f64>,
    pub user_cycles_per_packet: Option<f64>,
    /// CPU time over the run's wall time: 1.0 is a CPU never idle (with --cpus, the
    /// threads' sum: each thread's own is under `threads`).
    pub busy: Option<f64>,
}

impl CpuReport {
    pub fn new(t: CpuTime, packets: u64) -> CpuReport {
        let per_packet = (packets > 0).then(|| 1e9 / packets as f64);
        let mhz = cpu_mhz();
        let user_ns = per_packet.map(|p| t.user.as_secs_f64() * p);
        CpuReport {
            user_seconds: t.user.as_secs_f64(),
            system_seconds: t.system.as_secs_f64(),
            user_ns_per_packet: user_ns,
            system_ns_per_packet: per_packet.map(|p| t.system.as_secs_f64() * p),
            mhz,
            user_cycles_per_packet: user_ns.zip(mhz).map(|(ns, m)| ns * m / 1e3),
            busy: None,
        }
    }

    /// With the busy share over a run of `seconds`.
    pub fn over(mut self, seconds: f64) -> CpuReport {
        let cpu = self.user_seconds + self.system_seconds;
        self.busy = (seconds > 0.0).then(|| cpu / seconds);
        self
    }
}

/// A summary's packet rate: Mpps from 10 kpps up, else kpps or packets a second, so that
/// a slow run (a ping's rate) does not read `0.000 Mpps`. (`--json` has `mpps` as it is.)
pub fn rate_text(mpps: f64) -> String {
    let pps = mpps * 1e6;
    if pps >= 10_000.0 || pps == 0.0 {
        format!("{mpps:.3} Mpps")
    } else if pps >= 1_000.0 {
        format!("{:.2} kpps", pps / 1e3)
    } else {
        format!("{pps:.1} pps")
    }
}

/// The CPU clock in MHz as the kernel reports it (/proc/cpuinfo): on a VM, the host's
/// nominal clock, which turns CPU time into cycles.
pub fn cpu_mhz() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("cpu MHz"))
        .and_then(|rest| {
            rest.trim_start_matches([' ', '\t', ':'])
                .trim()
                .parse()
                .ok()
        })
}

/// The peak resident set size of this process, in bytes (VmHWM).
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// The live status of a port: its drops and the frame audit (every frame accounted for).
pub fn port_status(port: &mut dyn wirespeed_port::Port) -> String {
    let drops = port.stats().drops.total();
    match port.audit() {
        Some(a) if a.balanced() => format!("drops {drops}  frames ok ({} in pool)", a.pool),
        Some(a) => format!(
            "drops {drops}  FRAMES UNACCOUNTED: {} of {}",
            a.accounted(),
            a.total
        ),
        None => format!("drops {drops}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_rates_read_in_their_own_unit() {
        assert_eq!(rate_text(14.2), "14.200 Mpps");
        assert_eq!(rate_text(0.01), "0.010 Mpps");
        assert_eq!(rate_text(0.0025), "2.50 kpps");
        assert_eq!(rate_text(0.000_1), "100.0 pps");
        assert_eq!(rate_text(0.0), "0.000 Mpps");
    }

    #[test]
    fn a_batch_near_the_count_holds_only_what_is_left() {
        let stop = AtomicBool::new(false);
        let run = RunLimit::new(None, Some(1000), &stop, 1);
        let mut batch = Batch::with_capacity(64);
        run.fit(900, &mut batch);
        assert_eq!(batch.capacity(), 64, "100 left: the whole batch");
        run.fit(990, &mut batch);
        assert_eq!(batch.capacity(), 10);
        run.fit(1000, &mut batch);
        assert_eq!(batch.capacity(), 10, "none left: the loop ends anyway");
        let unlimited = RunLimit::new(None, None, &stop, 1);
        let mut batch = Batch::with_capacity(64);
        unlimited.fit(u64::MAX - 1, &mut batch);
        assert_eq!(batch.capacity(), 1);
    }

    #[test]
    fn each_second_gets_the_rate_of_its_own_packets() {
        let mut meter = Meter::new("rx", true, 1);
        meter.tick(0, 0, String::new);
        assert!(meter.per_second_mpps().is_empty(), "not a second yet");
        std::thread::sleep(Duration::from_millis(1050));
        meter.tick(3_000_000, 0, String::new);
        std::thread::sleep(Duration::from_millis(1050));
        meter.tick(4_000_000, 0, String::new);
        let rates = meter.per_second_mpps();
        assert_eq!(rates.len(), 2, "{rates:?}");
        // 3 and then 1 million packets, each over a second or a little more (a busy machine
        // oversleeps).
        assert!((2.0..3.0).contains(&rates[0]), "{rates:?}");
        assert!((0.6..1.0).contains(&rates[1]), "{rates:?}");
    }
}
