//! Replay at the recorded pace (`,pace=SPEED`): each packet is due its recorded distance from
//! the file's first packet, divided by SPEED, after the first was delivered. A packet read
//! before its time waits in its frame.

use std::time::{Duration, Instant};

use crate::RxMeta;

pub(crate) struct Pace {
    speed: f64,
    /// When the first packet was delivered, and its recorded time.
    start: Option<(Instant, u64)>,
    /// A packet read before its time, in its frame.
    held: Option<Held>,
}

#[derive(Clone, Copy)]
pub(crate) struct Held {
    pub addr: u64,
    pub len: u32,
    pub meta: RxMeta,
    pub due: Instant,
}

impl Pace {
    pub fn new(speed: f64) -> Pace {
        Pace {
            speed,
            start: None,
            held: None,
        }
    }

    /// When the packet recorded at `ts_ns` is due; the first one asked about is due `now`. A
    /// packet recorded before the first is due at once.
    pub fn due(&mut self, ts_ns: u64, now: Instant) -> Instant {
        let (start, first_ts) = *self.start.get_or_insert((now, ts_ns));
        let late = ts_ns.saturating_sub(first_ts) as f64 / self.speed;
        start + Duration::from_nanos(late as u64)
    }

    /// Keeps a packet read before its time.
    pub fn hold(&mut self, held: Held) {
        debug_assert!(self.held.is_none());
        self.held = Some(held);
    }

    /// The packet held, if any.
    pub fn held(&self) -> Option<Held> {
        self.held
    }

    /// The packet held, taken if its time has come by `now`.
    pub fn take_due(&mut self, now: Instant) -> Option<Held> {
        self.held.take_if(|h| h.due <= now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_are_due_at_their_recorded_distance_over_the_speed() {
        let now = Instant::now();
        let mut pace = Pace::new(2.0);
        assert_eq!(pace.due(5_000_000_000, now), now);
        let later = now + Duration::from_millis(1);
        assert_eq!(
            pace.due(5_100_000_000, later),
            now + Duration::from_millis(50)
        );
        assert_eq!(pace.due(4_000_000_000, later), now, "before the first");
        let held = Held {
            addr: 4096,
            len: 60,
            meta: RxMeta::default(),
            due: now + Duration::from_millis(50),
        };
        pace.hold(held);
        assert!(pace.take_due(now + Duration::from_millis(49)).is_none());
        assert_eq!(pace.held().map(|h| h.addr), Some(4096));
        let got = pace.take_due(now + Duration::from_millis(50)).unwrap();
        assert_eq!((got.addr, got.len), (4096, 60));
        assert!(pace.held().is_none());
    }
}
