//! OpenFlow meters: a rule's `meter:N` instruction runs its packets through meter N before
//! its actions, and the meter's band drops those over its rate. A meter has at most one
//! band, of type drop; its rate is in packets or in kilobits a second, with a burst. They
//! live beside the rules ([`crate::RuleTables`]); a translated flow keeps the meters it
//! names, so every poll-mode thread charges the same bucket.
//!
//! As in Open vSwitch, the bucket holds thousandths of a packet (packets) or bits
//! (kilobits), up to the burst, and refills at the rate; a packet passes if it can take
//! its cost. Shared
//! by the threads, it is a few atomics: a metered packet pays for them, no other does.

use core::fmt;
use core::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use core::time::Duration;
use std::sync::Arc;

/// The largest meter id (OpenFlow's `OFPM_MAX`); ids above it are virtual meters.
pub const METER_MAX: u32 = 0xffff_0000;
/// The virtual meter every packet-in passes (`OFPM_CONTROLLER`, ovs-ofctl's
/// `meter=controller`): it rate-limits what the datapath sends to the controllers.
pub const METER_CONTROLLER: u32 = 0xffff_fffe;
/// Meters a bridge holds at most (METER_FEATURES' `max_meter`).
pub const MAX_METERS: usize = 4096;
/// A rate of one unit a second earns a thousandth of a packet (or one bit, of a kilobit)
/// in this many ns.
const NS_PER_UNIT: u64 = 1_000_000;

/// What a meter's rate and burst count.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Unit {
    Packets,
    Kilobits,
}

/// A meter as a controller configures it (METER_MOD).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MeterConfig {
    pub id: u32,
    pub unit: Unit,
    /// The drop band, if the meter has one (a meter without bands passes everything).
    pub band: Option<Band>,
    /// The controller asked for the burst to be used (`OFPMF_BURST`).
    pub burst: bool,
    /// The controller asked for statistics (`OFPMF_STATS`); they are kept either way.
    pub stats: bool,
}

/// A drop band: packets over `rate` (in the meter's unit a second) are dropped.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Band {
    pub rate: u32,
    pub burst_size: u32,
}

/// Why a meter cannot be installed as given.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MeterError {
    /// Id 0, or a virtual meter's id other than the controller's.
    InvalidId,
    /// A band's rate of 0.
    ZeroRate,
    /// An add for a meter the bridge has.
    Exists,
    /// A modify for a meter the bridge does not have.
    Unknown,
    /// An add past [`MAX_METERS`].
    TooMany,
}

impl fmt::Display for MeterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MeterError::InvalidId => "meter ids are 1 to 4294901760, or the controller's",
            MeterError::ZeroRate => "a band's rate must be above 0",
            MeterError::Exists => "the meter exists (mod-meter changes it)",
            MeterError::Unknown => "no such meter",
            MeterError::TooMany => "the bridge holds 4096 meters at most",
        })
    }
}

impl MeterConfig {
    pub fn check(&self) -> Result<(), MeterError> {
        if self.id == 0 || (self.id > METER_MAX && self.id != METER_CONTROLLER) {
            return Err(MeterError::InvalidId);
        }
        match self.band {
            Some(band) if band.rate == 0 => Err(MeterError::ZeroRate),
            _ => Ok(()),
        }
    }

    /// What the bucket holds at most, in its units: the burst where the controller gave one,
    /// else one second at the rate (as Open vSwitch does).
    fn capacity(band: &Band, burst: bool) -> i64 {
        let size = match burst && band.burst_size > 0 {
            true => band.burst_size,
            false => band.rate,
        };
        i64::from(size) * 1000
    }
}

/// What a meter counted: everything that reached it, and what its band dropped.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct MeterCounts {
    pub packets: u64,
    pub bytes: u64,
    pub band_packets: u64,
    pub band_bytes: u64,
}

/// An installed meter: its configuration, its bucket and its counts, shared by every
/// thread through the flows that name it.
#[derive(Debug)]
pub struct Meter {
    pub config: MeterConfig,
    /// When it was installed, on the bridge's clock.
    pub installed_at: Duration,
    capacity: i64,
    /// How long the rate takes to fill an empty bucket, in ns: a longer wait fills it, and
    /// a shorter one earns little enough for the arithmetic to stay in 64 bits.
    fill_ns: u64,
    /// Thousandths of a packet, or bits.
    tokens: AtomicI64,
    /// The bridge clock (ns) up to which the bucket has been refilled.
    filled_to: AtomicU64,
    packets: AtomicU64,
    bytes: AtomicU64,
    band_packets: AtomicU64,
    band_bytes: AtomicU64,
}

impl Meter {
    /// A meter installed at `now`, its bucket full.
    pub fn new(config: MeterConfig, now: Duration) -> Meter {
        let capacity = config
            .band
            .map_or(0, |band| MeterConfig::capacity(&band, config.burst));
        let rate = config.band.map_or(1, |band| u64::from(band.rate.max(1)));
        Meter {
            config,
            installed_at: now,
            capacity,
            fill_ns: (capacity as u64 * NS_PER_UNIT).div_ceil(rate),
            tokens: AtomicI64::new(capacity),
            filled_to: AtomicU64::new(now.as_nanos() as u64),
            packets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            band_packets: AtomicU64::new(0),
            band_bytes: AtomicU64::new(0),
        }
    }

    /// A packet of `bytes` at `now` (the bridge clock): whether it passes. A dropped one is
    /// counted against the band.
    #[inline]
    pub fn admit(&self, bytes: u32, now: Duration) -> bool {
        self.packets.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(u64::from(bytes), Ordering::Relaxed);
        let Some(band) = self.config.band else {
            return true;
        };
        self.refill(band.rate, now);
        let cost = match self.config.unit {
            Unit::Packets => 1000,
            Unit::Kilobits => i64::from(bytes) * 8,
        };
        let taken = self
            .tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                (t >= cost).then_some(t - cost)
            })
            .is_ok();
        if !taken {
            self.band_packets.fetch_add(1, Ordering::Relaxed);
            self.band_bytes
                .fetch_add(u64::from(bytes), Ordering::Relaxed);
        }
        taken
    }

    /// Adds what the time since the last refill earned at `rate` units a second: `rate`
    /// thousandths of a packet (or bits) per 10^6 ns. Only the time paid for is used up, so
    /// a slow rate asked often still refills.
    #[inline]
    fn refill(&self, rate: u32, now: Duration) {
        let now = now.as_nanos() as u64;
        let last = self.filled_to.load(Ordering::Relaxed);
        let Some(elapsed) = now.checked_sub(last) else {
            return;
        };
        let capacity = self.capacity;
        let (earned, to) = match elapsed >= self.fill_ns {
            // A full bucket keeps no credit for the time after it filled.
            true => (capacity, now),
            // Under fill_ns, elapsed * rate is at most the capacity times 10^6 (< 2^63).
            false => {
                let rate = u64::from(rate);
                let earned = elapsed * rate / NS_PER_UNIT;
                if earned == 0 {
                    return;
                }
                (earned as i64, last + earned * NS_PER_UNIT / rate)
            }
        };
        // One thread takes the interval; another that raced it adds nothing.
        if self
            .filled_to
            .compare_exchange(last, to, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        let _ = self
            .tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some((t + earned).min(capacity))
            });
    }

    pub fn counts(&self) -> MeterCounts {
        MeterCounts {
            packets: self.packets.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            band_packets: self.band_packets.load(Ordering::Relaxed),
            band_bytes: self.band_bytes.load(Ordering::Relaxed),
        }
    }
}

/// A meter as a translated flow keeps it: the same meter for every thread and cache entry
/// (two are equal when they are the same meter, not when they count alike).
#[derive(Clone, Debug)]
pub struct MeterRef(pub Arc<Meter>);

impl PartialEq for MeterRef {
    fn eq(&self, other: &MeterRef) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for MeterRef {}

impl fmt::Display for MeterConfig {
    /// ovs-ofctl's `dump-meters` spelling: `meter=1 pktps burst stats bands=type=drop
    /// rate=10 burst_size=5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.unit {
            Unit::Packets => "pktps",
            Unit::Kilobits => "kbps",
        };
        match self.id {
            METER_CONTROLLER => write!(f, "meter=controller {unit}")?,
            id => write!(f, "meter={id} {unit}")?,
        }
        if self.burst {
            f.write_str(" burst")?;
        }
        if self.stats {
            f.write_str(" stats")?;
        }
        if let Some(band) = self.band {
            write!(f, " bands=type=drop rate={}", band.rate)?;
            if self.burst {
                write!(f, " burst_size={}", band.burst_size)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meter(unit: Unit, rate: u32, burst: Option<u32>) -> Meter {
        let config = MeterConfig {
            id: 1,
            unit,
            band: Some(Band {
                rate,
                burst_size: burst.unwrap_or(0),
            }),
            burst: burst.is_some(),
            stats: true,
        };
        Meter::new(config, Duration::ZERO)
    }

    fn passed(m: &Meter, packets: usize, bytes: u32, at: Duration) -> usize {
        (0..packets).filter(|_| m.admit(bytes, at)).count()
    }

    #[test]
    fn a_full_bucket_passes_the_burst_then_the_rate() {
        let m = meter(Unit::Packets, 100, Some(10));
        assert_eq!(passed(&m, 50, 60, Duration::ZERO), 10);
        // 100 a second: 5 more after 50 ms, and no more than the burst after a long pause.
        assert_eq!(passed(&m, 50, 60, Duration::from_millis(50)), 5);
        assert_eq!(passed(&m, 50, 60, Duration::from_secs(60)), 10);
        let c = m.counts();
        assert_eq!(
            c,
            MeterCounts {
                packets: 150,
                bytes: 9000,
                band_packets: 125,
                band_bytes: 7500,
            }
        );
    }

    #[test]
    fn a_slow_rate_refills_from_time_that_earned_little_each_packet() {
        // One packet a second, asked every millisecond: the second's worth is not lost in
        // thousands of refills too small to count.
        let m = meter(Unit::Packets, 1, Some(1));
        assert!(m.admit(60, Duration::ZERO));
        let mut passed = 0;
        for ms in 1..=2000u64 {
            passed += usize::from(m.admit(60, Duration::from_millis(ms)));
        }
        assert_eq!(passed, 2);
    }

    #[test]
    fn kilobits_count_the_bytes() {
        // 800 kbit/s with a burst of 8 kbit: eight 125-byte packets (1000 bits each).
        let m = meter(Unit::Kilobits, 800, Some(8));
        assert_eq!(passed(&m, 20, 125, Duration::ZERO), 8);
        // 1 ms at 800 kbit/s is 800 bits: not yet one packet; 2 ms is one.
        assert_eq!(passed(&m, 5, 125, Duration::from_millis(1)), 0);
        assert_eq!(passed(&m, 5, 125, Duration::from_millis(2)), 1);
    }

    #[test]
    fn the_largest_rates_and_bursts_stay_in_64_bits() {
        for (rate, burst) in [
            (u32::MAX, Some(u32::MAX)),
            (u32::MAX, None),
            (1, Some(u32::MAX)),
        ] {
            let m = meter(Unit::Kilobits, rate, burst);
            assert!(m.admit(1500, Duration::ZERO));
            assert!(m.admit(1500, Duration::from_nanos(1)));
            assert!(m.admit(1500, Duration::from_secs(3600 * 24 * 365)));
        }
        // A full bucket at the slowest rate: one packet a second, but a burst of 2^32 - 1.
        let m = meter(Unit::Packets, 1, Some(u32::MAX));
        assert_eq!(passed(&m, 1000, 60, Duration::ZERO), 1000);
    }

    #[test]
    fn without_a_burst_the_bucket_holds_one_second() {
        let m = meter(Unit::Packets, 20, None);
        assert_eq!(passed(&m, 100, 60, Duration::ZERO), 20);
    }

    #[test]
    fn a_meter_without_bands_passes_and_counts() {
        let config = MeterConfig {
            id: 7,
            unit: Unit::Packets,
            band: None,
            burst: false,
            stats: false,
        };
        let m = Meter::new(config, Duration::ZERO);
        assert_eq!(passed(&m, 30, 100, Duration::ZERO), 30);
        assert_eq!(m.counts().packets, 30);
        assert_eq!(m.counts().band_packets, 0);
    }

    #[test]
    fn ids_and_rates_are_checked() {
        let mut config = meter(Unit::Packets, 1, None).config;
        assert_eq!(config.check(), Ok(()));
        config.id = 0;
        assert_eq!(config.check(), Err(MeterError::InvalidId));
        config.id = METER_MAX + 1;
        assert_eq!(config.check(), Err(MeterError::InvalidId));
        config.id = METER_CONTROLLER;
        assert_eq!(config.check(), Ok(()));
        config.id = 1;
        config.band = Some(Band {
            rate: 0,
            burst_size: 0,
        });
        assert_eq!(config.check(), Err(MeterError::ZeroRate));
    }

    #[test]
    fn prints_as_ovs_ofctl_dump_meters() {
        let m = meter(Unit::Packets, 1, Some(10));
        assert_eq!(
            m.config.to_string(),
            "meter=1 pktps burst stats bands=type=drop rate=1 burst_size=10"
        );
        let k = meter(Unit::Kilobits, 1000, None);
        assert_eq!(
            k.config.to_string(),
            "meter=1 kbps stats bands=type=drop rate=1000"
        );
    }
}
