//! Meters over OpenFlow 1.3: METER_MOD read and checked, and the METER, METER_CONFIG and
//! METER_FEATURES replies. One drop band a meter, as [`crate::meter`] keeps them; a
//! controller asking for more is told so in the specification's own errors.

use core::time::Duration;

use crate::bridge::{Bridge, RemovedReason};
use crate::meter::{Band, MAX_METERS, MeterConfig, MeterError, MeterRef, Unit};
use crate::ofproto::rule_table::{InstalledRule, RuleTables};
use crate::ofproto::state::Ofproto;
use crate::openflow::error::{OfpError, meter_mod_failed};
use crate::openflow::wire::{Reader, Writer};

/// `ofp_meter_mod_command`.
pub mod meter_command {
    pub const ADD: u16 = 0;
    pub const MODIFY: u16 = 1;
    pub const DELETE: u16 = 2;
}

/// `ofp_meter_flags`.
mod flag {
    pub const KBPS: u16 = 1 << 0;
    pub const PKTPS: u16 = 1 << 1;
    pub const BURST: u16 = 1 << 2;
    pub const STATS: u16 = 1 << 3;
}

/// `OFPMBT_DROP`, the one band type taken.
const BAND_DROP: u16 = 1;
/// `OFPM_ALL`: every meter (a DELETE or a statistics request).
pub const METER_ALL: u32 = 0xffff_ffff;

/// A METER_MOD: its command and the meter it describes (a DELETE's names only the id).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MeterMod {
    pub command: u16,
    pub config: MeterConfig,
}

/// Reads a METER_MOD's body.
pub fn read_meter_mod(r: &mut Reader<'_>) -> Result<MeterMod, OfpError> {
    let command = r.u16()?;
    let flags = r.u16()?;
    let id = r.u32()?;
    let mut bands = Vec::new();
    while !r.is_empty() {
        let kind = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 16 || len % 8 != 0 {
            return Err(meter_mod_failed::BAD_BAND);
        }
        let mut body = r.nested(len, 4)?;
        let band = Band {
            rate: body.u32()?,
            burst_size: body.u32()?,
        };
        let _ = body.rest();
        bands.push((kind, band));
    }
    if command == meter_command::DELETE {
        let config = MeterConfig {
            id,
            unit: Unit::Packets,
            band: None,
            burst: false,
            stats: false,
        };
        return Ok(MeterMod { command, config });
    }
    if command > meter_command::DELETE {
        return Err(meter_mod_failed::BAD_COMMAND);
    }
    let known = flag::KBPS | flag::PKTPS | flag::BURST | flag::STATS;
    let unit = match flags & (flag::KBPS | flag::PKTPS) {
        _ if flags & !known != 0 => return Err(meter_mod_failed::BAD_FLAGS),
        flag::KBPS => Unit::Kilobits,
        flag::PKTPS => Unit::Packets,
        _ => return Err(meter_mod_failed::BAD_FLAGS),
    };
    let band = match bands.as_slice() {
        [] => None,
        [(BAND_DROP, band)] => Some(*band),
        [(_, _)] => return Err(meter_mod_failed::BAD_BAND),
        _ => return Err(meter_mod_failed::OUT_OF_BANDS),
    };
    let config = MeterConfig {
        id,
        unit,
        band,
        burst: flags & flag::BURST != 0,
        stats: flags & flag::STATS != 0,
    };
    Ok(MeterMod { command, config })
}

impl MeterMod {
    /// The message, for tests and tools that play the controller.
    pub fn encode(&self, xid: u32) -> Vec<u8> {
        let mut w = Writer::message(crate::openflow::wire::msg::METER_MOD, xid);
        w.u16(self.command)
            .u16(flags_of(&self.config))
            .u32(self.config.id);
        write_band(&mut w, &self.config);
        w.finish()
    }
}

fn flags_of(config: &MeterConfig) -> u16 {
    let unit = match config.unit {
        Unit::Packets => flag::PKTPS,
        Unit::Kilobits => flag::KBPS,
    };
    let burst = if config.burst { flag::BURST } else { 0 };
    let stats = if config.stats { flag::STATS } else { 0 };
    unit | burst | stats
}

fn write_band(w: &mut Writer, config: &MeterConfig) {
    if let Some(band) = config.band {
        w.u16(BAND_DROP).u16(16).u32(band.rate).u32(band.burst_size);
        w.zeros(4);
    }
}

/// Carries out a METER_MOD on the bridge: the rules a DELETE removed, with why (OpenFlow
/// 1.3 has no reason of its own for a meter's removal: a delete, as Open vSwitch says).
pub fn meter_mod(
    bridge: &mut Bridge,
    mm: &MeterMod,
) -> Result<Vec<(InstalledRule, RemovedReason)>, OfpError> {
    let now = bridge.now();
    let removed = bridge.edit(|dp| apply_meter_mod(dp, mm, now))?;
    let reason = RemovedReason::Delete;
    Ok(removed.into_iter().map(|r| (r, reason)).collect())
}

/// A METER_MOD of any command on `dp`'s meters; the rules a DELETE took with its meters.
pub fn apply_meter_mod(
    dp: &mut Ofproto,
    mm: &MeterMod,
    now: Duration,
) -> Result<Vec<InstalledRule>, OfpError> {
    let id = mm.config.id;
    if mm.command == meter_command::DELETE {
        let only = (id != METER_ALL).then_some(id);
        return Ok(dp.delete_meters(only, now));
    }
    let replace = mm.command == meter_command::MODIFY;
    dp.tables
        .set_meter(mm.config, replace, now)
        .map_err(|e| match e {
            MeterError::InvalidId => meter_mod_failed::INVALID_METER,
            MeterError::ZeroRate => meter_mod_failed::BAD_RATE,
            MeterError::Exists => meter_mod_failed::METER_EXISTS,
            MeterError::Unknown => meter_mod_failed::UNKNOWN_METER,
            MeterError::TooMany => meter_mod_failed::OUT_OF_METERS,
        })?;
    Ok(Vec::new())
}

/// The meters a statistics or configuration request names: one, or all.
fn selected(tables: &RuleTables, id: u32) -> Vec<&MeterRef> {
    match id {
        METER_ALL => tables.meters().collect(),
        id => tables.meter(id).into_iter().collect(),
    }
}

/// METER_CONFIG's entries: each meter's flags, id and band.
pub fn config_entries(tables: &RuleTables, id: u32) -> Vec<Vec<u8>> {
    selected(tables, id)
        .iter()
        .map(|m| {
            let config = &m.0.config;
            let mut w = Writer::default();
            w.u16(0).u16(flags_of(config)).u32(config.id);
            write_band(&mut w, config);
            w.set_len(0, 0);
            w.bytes
        })
        .collect()
}

/// METER's entries: each meter's flows, counts, age and band counts.
pub fn stats_entries(tables: &RuleTables, id: u32, now: Duration) -> Vec<Vec<u8>> {
    selected(tables, id)
        .iter()
        .map(|m| {
            let meter = &m.0;
            let counts = meter.counts();
            let alive = now.saturating_sub(meter.installed_at);
            let mut w = Writer::default();
            w.u32(meter.config.id).u16(0).zeros(6);
            w.u32(tables.meter_flow_count(meter.config.id) as u32);
            w.u64(counts.packets).u64(counts.bytes);
            w.u32(alive.as_secs() as u32).u32(alive.subsec_nanos());
            if meter.config.band.is_some() {
                w.u64(counts.band_packets).u64(counts.band_bytes);
            }
            w.set_len(4, 0);
            w.bytes
        })
        .collect()
}

/// METER_FEATURES: how many meters, drop bands only, both units, burst and statistics,
/// one band a meter, no colours.
pub fn features_body() -> Vec<u8> {
    let mut w = Writer::default();
    w.u32(MAX_METERS as u32).u32(1 << BAND_DROP);
    let capabilities = flag::KBPS | flag::PKTPS | flag::BURST | flag::STATS;
    w.u32(u32::from(capabilities)).u8(1).u8(0).zeros(2);
    w.bytes
}

/// The meter id a METER or METER_CONFIG request names (`OFPM_ALL` for every one).
pub fn read_request_id(r: &mut Reader<'_>) -> Result<u32, OfpError> {
    let id = r.u32()?;
    r.skip(4)?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mod_bytes(command: u16, flags: u16, id: u32, bands: &[(u16, u32, u32)]) -> Vec<u8> {
        let mut w = Writer::default();
        w.u16(command).u16(flags).u32(id);
        for &(kind, rate, burst) in bands {
            w.u16(kind).u16(16).u32(rate).u32(burst).zeros(4);
        }
        w.bytes
    }

    fn read(bytes: &[u8]) -> Result<MeterMod, OfpError> {
        read_meter_mod(&mut Reader::new(bytes))
    }

    #[test]
    fn a_meter_mod_round_trips() {
        let sent = MeterMod {
            command: meter_command::ADD,
            config: MeterConfig {
                id: 3,
                unit: Unit::Kilobits,
                band: Some(Band {
                    rate: 1000,
                    burst_size: 64,
                }),
                burst: true,
                stats: true,
            },
        };
        let bytes = sent.encode(7);
        assert_eq!(bytes.len(), 16 + 16);
        assert_eq!(&bytes[8..16], &[0, 0, 0, 0b1101, 0, 0, 0, 3]);
        assert_eq!(read(&bytes[8..]), Ok(sent));
    }

    #[test]
    fn what_a_meter_mod_may_not_ask_for() {
        let pktps = flag::PKTPS;
        assert_eq!(
            read(&mod_bytes(0, pktps, 1, &[(2, 10, 0)])),
            Err(meter_mod_failed::BAD_BAND)
        );
        assert_eq!(
            read(&mod_bytes(0, pktps, 1, &[(1, 10, 0), (1, 20, 0)])),
            Err(meter_mod_failed::OUT_OF_BANDS)
        );
        assert_eq!(
            read(&mod_bytes(0, flag::KBPS | flag::PKTPS, 1, &[])),
            Err(meter_mod_failed::BAD_FLAGS)
        );
        assert_eq!(
            read(&mod_bytes(0, 0x10 | pktps, 1, &[])),
            Err(meter_mod_failed::BAD_FLAGS)
        );
        assert_eq!(
            read(&mod_bytes(3, pktps, 1, &[])),
            Err(meter_mod_failed::BAD_COMMAND)
        );
        // A band shorter than its header says.
        let mut short = mod_bytes(0, pktps, 1, &[(1, 10, 0)]);
        short[11] = 8;
        assert_eq!(read(&short), Err(meter_mod_failed::BAD_BAND));
        // A DELETE names the meter alone.
        assert_eq!(
            read(&mod_bytes(2, 0, METER_ALL, &[])).unwrap().config.id,
            METER_ALL
        );
    }

    #[test]
    fn features_say_drop_bands_both_units_one_band() {
        assert_eq!(
            features_body(),
            [0, 0, 0x10, 0, 0, 0, 0, 2, 0, 0, 0, 0x0f, 1, 0, 0, 0]
        );
    }
}
