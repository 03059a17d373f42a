//! How a receive loop spends the time packets do not fill (DESIGN rule 8), one policy every
//! tool and poll-mode thread shares. After each burst the loop asks [`Idle::after_burst`]
//! what to do before the next:
//!
//! - **spin** while bursts keep coming full or nearly: the ring holds more;
//! - **nap** once a burst comes back short: the loop is ahead of the load, so it sleeps a
//!   little (a timer on its own CPU, no wake-up from the sender) and lets a batch build up.
//!   The nap doubles while the naps bring less than an eighth of the ring and halves when
//!   they bring more than a quarter, between [`MIN_NAP`] and [`MAX_NAP`], so each wake-up
//!   takes a few bursts. But only where the ring outlasts a late wake-up at the load's
//!   rate ([`WAKE_TAIL`]): a sleeping vCPU is sometimes woken milliseconds late, and a ring
//!   too short for that spins instead, as it always did;
//! - **sleep** in poll() (with need_wakeup) once the port has been empty for [`IDLE_AFTER`]:
//!   the kernel wakes the loop at the next packet.
//!
//! Sleeping in poll() under load is what not to do: every packet after a sleep wakes the
//! loop from the sender's CPU (on veth the receiving side's kernel work runs there). A timed
//! nap costs the loop's own CPU a timer instead (bench/IDLE.md has the figures).

use std::time::{Duration, Instant};

/// The shortest nap: about what a timer wake-up costs.
pub const MIN_NAP: Duration = Duration::from_micros(20);
/// The longest nap: what a quiet but not idle port adds to a packet's latency at most. recv
/// on an even 0.5 Mpps took 19 % of a CPU with naps of at most 250 us, 12 % with 1 ms (its
/// p99 latency 0.5 ms, then 1.2 ms; bench/IDLE.md).
pub const MAX_NAP: Duration = Duration::from_micros(1000);
/// How late a nap may end: on the project's 2-CPU VMs a 20 µs sleep took 3.5 ms or more
/// once in a thousand and up to 14 ms (a halted vCPU waits for the host). A loop naps only
/// while its ring holds this long of its load; else it spins.
pub const WAKE_TAIL: Duration = Duration::from_millis(10);
/// The load's rate is measured over windows at least this long.
const RATE_WINDOW: Duration = Duration::from_micros(100);
/// How long a port must stay empty before the loop sleeps in poll().
pub const IDLE_AFTER: Duration = Duration::from_millis(1);
/// The longest sleep in poll(): short enough to notice a deadline or a stop soon.
pub const IDLE_SLEEP: Duration = Duration::from_millis(10);

/// What a receive loop does before its next burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Receive again at once.
    Spin,
    /// Sleep this long on a timer (`std::thread::sleep`), then receive.
    Nap(Duration),
    /// Sleep in poll() on the port's sockets, at most this long.
    Sleep(Duration),
}

/// Where the loop's time comes from: the monotonic clock, or a test's.
pub trait Clock {
    fn now(&self) -> Duration;
}

/// The monotonic clock (a vDSO read, no system call).
#[derive(Debug, Clone, Copy)]
pub struct Monotonic(Instant);

impl Default for Monotonic {
    fn default() -> Self {
        Monotonic(Instant::now())
    }
}

impl Clock for Monotonic {
    #[inline]
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// A receive loop's back-off state.
#[derive(Debug)]
pub struct Idle<C: Clock = Monotonic> {
    clock: C,
    /// Entries of the ring: what a nap and a late wake-up must not overflow.
    ring: usize,
    /// Packets a wake-up should find at most (a quarter of the ring) and at least (an
    /// eighth): more risks the ring filling during a nap, fewer wastes wake-ups.
    most_per_wake: usize,
    /// The load's rate in packets a second, over the last window, and the window so far.
    rate: f64,
    window_start: Duration,
    window_packets: usize,
    /// The next nap's length.
    nap: Duration,
    /// Packets taken since the loop last woke from a nap.
    since_wake: usize,
    /// When the port was first found empty with nothing after (None: it was not).
    empty_since: Option<Duration>,
    /// Whether the last step was a nap (what `since_wake` measures).
    napped: bool,
    /// Sleeping in poll() is off (busy-polling sockets): back off no further than naps.
    poll_sleep: bool,
}

impl Idle<Monotonic> {
    /// The policy for a loop over rings of `ring_size` entries.
    pub fn new(ring_size: u32) -> Idle<Monotonic> {
        Idle::with_clock(ring_size, Monotonic::default())
    }
}

impl Default for Idle<Monotonic> {
    /// For a loop whose ring size is unknown: the tools' default, 1024.
    fn default() -> Self {
        Idle::new(1024)
    }
}

impl<C: Clock> Idle<C> {
    pub fn with_clock(ring_size: u32, clock: C) -> Idle<C> {
        Idle {
            window_start: clock.now(),
            clock,
            ring: ring_size as usize,
            most_per_wake: (ring_size as usize / 4).max(1),
            rate: 0.0,
            window_packets: 0,
            nap: MIN_NAP,
            since_wake: 0,
            empty_since: None,
            napped: false,
            poll_sleep: true,
        }
    }

    /// Never sleep in poll(): for busy-polling sockets, whose poll() would spin in the
    /// kernel (naps still apply).
    pub fn without_poll_sleep(mut self) -> Self {
        self.poll_sleep = false;
        self
    }

    /// The nap the next short burst gets.
    pub fn nap(&self) -> Duration {
        self.nap
    }

    /// A burst took `got` packets of the `room` it had: what to do before the next.
    #[inline]
    pub fn after_burst(&mut self, got: usize, room: usize) -> Step {
        self.since_wake += got;
        self.window_packets += got;
        // At least half a burst: the ring had a backlog, or the load comes as fast as
        // the loop. Keep going (no clock read).
        if got > 0 && 2 * got >= room {
            self.empty_since = None;
            return Step::Spin;
        }
        self.short_burst(got)
    }

    /// The loop is ahead of the load: adapt the nap to what the last one brought, or sleep
    /// in poll() once the port has been empty a while.
    #[cold]
    fn short_burst(&mut self, got: usize) -> Step {
        let now = self.clock.now();
        let window = now.saturating_sub(self.window_start);
        if window >= RATE_WINDOW {
            self.rate = self.window_packets as f64 / window.as_secs_f64();
            self.window_start = now;
            self.window_packets = 0;
        }
        if got > 0 {
            self.empty_since = None;
        } else {
            let since = *self.empty_since.get_or_insert(now);
            if self.poll_sleep && now.saturating_sub(since) >= IDLE_AFTER {
                self.napped = false;
                self.nap = MIN_NAP;
                return Step::Sleep(IDLE_SLEEP);
            }
        }
        if self.napped {
            if self.since_wake > self.most_per_wake {
                self.nap = (self.nap / 2).max(MIN_NAP);
            } else if 2 * self.since_wake < self.most_per_wake {
                self.nap = (self.nap * 2).min(MAX_NAP);
            }
        }
        self.since_wake = 0;
        // What arrives during the nap and a late wake-up must fit in the ring.
        let worst = self.rate * (self.nap + WAKE_TAIL).as_secs_f64();
        self.napped = worst <= self.ring as f64;
        match self.napped {
            true => Step::Nap(self.nap),
            false => Step::Spin,
        }
    }

    /// The load's rate as last measured, in packets a second.
    pub fn rate(&self) -> f64 {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use super::*;

    /// A clock the test moves by hand.
    #[derive(Clone, Default)]
    struct FakeClock(Rc<Cell<Duration>>);

    impl FakeClock {
        fn advance(&self, by: Duration) {
            self.0.set(self.0.get() + by);
        }
    }

    impl Clock for FakeClock {
        fn now(&self) -> Duration {
            self.0.get()
        }
    }

    const ROOM: usize = 64;

    fn idle() -> (Idle<FakeClock>, FakeClock) {
        idle_on(1024)
    }

    fn idle_on(ring: u32) -> (Idle<FakeClock>, FakeClock) {
        let clock = FakeClock::default();
        (Idle::with_clock(ring, clock.clone()), clock)
    }

    /// Plays a load of `pps` packets a second: each step's wait lets packets build up, and
    /// the loop takes them a burst at a time. Returns the steps of the last `keep` turns.
    fn play(idle: &mut Idle<FakeClock>, clock: &FakeClock, pps: u64, turns: usize) -> Vec<Step> {
        let mut waiting = 0.0f64;
        let mut steps = Vec::new();
        for _ in 0..turns {
            let got = waiting.min(ROOM as f64) as usize;
            waiting -= got as f64;
            // A burst takes a microsecond.
            clock.advance(Duration::from_micros(1));
            let step = idle.after_burst(got, ROOM);
            let waited = match step {
                Step::Spin => Duration::from_micros(1),
                Step::Nap(d) | Step::Sleep(d) => d,
            };
            waiting += pps as f64 * (waited + Duration::from_micros(1)).as_secs_f64();
            clock.advance(waited);
            steps.push(step);
        }
        steps
    }

    #[test]
    fn full_bursts_spin_without_reading_the_clock() {
        let (mut idle, clock) = idle();
        for _ in 0..1000 {
            assert_eq!(idle.after_burst(ROOM, ROOM), Step::Spin);
            assert_eq!(idle.after_burst(ROOM / 2, ROOM), Step::Spin);
        }
        assert_eq!(clock.now(), Duration::ZERO);
    }

    #[test]
    fn a_short_burst_naps_and_the_nap_doubles_while_naps_bring_little() {
        let (mut idle, _clock) = idle();
        assert_eq!(idle.after_burst(3, ROOM), Step::Nap(MIN_NAP));
        // Each nap brought 3 packets, far below an eighth of the ring (128): double.
        let mut want = MIN_NAP;
        for _ in 0..10 {
            want = (want * 2).min(MAX_NAP);
            assert_eq!(idle.after_burst(3, ROOM), Step::Nap(want));
        }
        assert_eq!(idle.nap(), MAX_NAP);
    }

    #[test]
    fn the_nap_halves_when_a_wake_up_finds_more_than_a_quarter_of_the_ring() {
        let (mut idle, _clock) = idle();
        for _ in 0..10 {
            idle.after_burst(1, ROOM);
        }
        assert_eq!(idle.nap(), MAX_NAP);
        // The nap brought 276 packets (over 256): four full bursts, then a short one.
        for _ in 0..4 {
            assert_eq!(idle.after_burst(ROOM, ROOM), Step::Spin);
        }
        assert_eq!(idle.after_burst(20, ROOM), Step::Nap(MAX_NAP / 2));
        // Between an eighth and a quarter: the nap stays.
        assert_eq!(idle.after_burst(ROOM, ROOM), Step::Spin);
        assert_eq!(idle.after_burst(ROOM, ROOM), Step::Spin);
        assert_eq!(idle.after_burst(20, ROOM), Step::Nap(MAX_NAP / 2));
    }

    #[test]
    fn an_empty_port_sleeps_in_poll_after_a_millisecond_and_starts_over_after() {
        let (mut idle, clock) = idle();
        let mut slept_at = None;
        for turn in 0..100 {
            match idle.after_burst(0, ROOM) {
                Step::Nap(d) => clock.advance(d),
                Step::Sleep(d) => {
                    assert_eq!(d, IDLE_SLEEP);
                    slept_at = Some((turn, clock.now()));
                    break;
                }
                Step::Spin => panic!("an empty port never spins"),
            }
        }
        let (turns, at) = slept_at.expect("sleeps in poll");
        assert!(at >= IDLE_AFTER && at < IDLE_AFTER + MAX_NAP, "{at:?}");
        // 20, 40, 80, 160, 320, 640 us: a handful of naps first.
        assert!((5..=10).contains(&turns), "{turns}");
        // Still nothing: sleep again. A packet: back to the shortest nap.
        assert_eq!(idle.after_burst(0, ROOM), Step::Sleep(IDLE_SLEEP));
        assert_eq!(idle.after_burst(1, ROOM), Step::Nap(MIN_NAP));
    }

    #[test]
    fn busy_polling_loops_nap_but_never_sleep_in_poll() {
        let (idle, clock) = idle();
        let mut idle = idle.without_poll_sleep();
        for _ in 0..1000 {
            match idle.after_burst(0, ROOM) {
                Step::Nap(d) => clock.advance(d),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_steady_load_settles_on_a_few_bursts_a_wake_up() {
        // Rings that hold a late wake-up's packets at 2 Mpps (10.25 ms: 20,500).
        for pps in [500_000u64, 2_000_000] {
            let (mut idle, clock) = idle_on(32768);
            let steps = play(&mut idle, &clock, pps, 20_000);
            let last = &steps[10_000..];
            let naps = last.iter().filter(|s| matches!(s, Step::Nap(_))).count();
            assert!(
                !last.iter().any(|s| matches!(s, Step::Sleep(_))),
                "{pps}: never idle"
            );
            // Packets a wake-up: the load over the wake-ups.
            let time: Duration = last
                .iter()
                .map(|s| match s {
                    Step::Spin => Duration::from_micros(2),
                    Step::Nap(d) | Step::Sleep(d) => *d + Duration::from_micros(1),
                })
                .sum();
            let per_wake = pps as f64 * time.as_secs_f64() / naps as f64;
            // An eighth to a quarter of the ring, or as many as the longest nap brings.
            let fewest = (pps as f64 * MAX_NAP.as_secs_f64()).min(4096.0) * 0.9;
            assert!((fewest..=8192.0).contains(&per_wake), "{pps}: {per_wake}");
            let rate = idle.rate();
            assert!(
                (rate - pps as f64).abs() < 0.2 * pps as f64,
                "{pps}: {rate}"
            );
        }
    }

    #[test]
    fn a_ring_too_short_for_a_late_wake_up_spins_instead_of_napping() {
        // 1024 entries last 2 ms at 0.5 Mpps, less than a late wake-up: spin. At 50,000
        // packets a second they last 20 ms: nap.
        for (pps, naps) in [(500_000u64, false), (50_000, true)] {
            let (mut idle, clock) = idle_on(1024);
            let steps = play(&mut idle, &clock, pps, 20_000);
            let napped = steps[10_000..].iter().any(|s| matches!(s, Step::Nap(_)));
            assert_eq!(napped, naps, "{pps}");
            assert!(!steps[10_000..].iter().any(|s| matches!(s, Step::Sleep(_))));
        }
    }
}
