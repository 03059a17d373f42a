//! ovs-ofctl's meter syntax, in and out: `meter=1,pktps,burst,stats,bands=type=drop,rate=10,
//! burst_size=5` (`add-meter`, `mod-meter`), `meter=1` (`del-meter`), and the lines of
//! `dump-meters` and `meter-stats`.

use core::time::Duration;

use crate::error::{FlowError, error};
use crate::meter::{Band, METER_CONTROLLER, Meter, MeterConfig, Unit};

/// A meter as `add-meter` takes it: `meter=ID` (or `controller`) first, then `kbps` or
/// `pktps` (kbps if neither), `burst`, `stats`, and at most one band,
/// `bands=type=drop,rate=R[,burst_size=B]`.
pub fn parse_meter(text: &str) -> Result<MeterConfig, FlowError> {
    let text = text.trim();
    let (head, band) = match text.split_once("bands=") {
        Some((head, band)) => (head, Some(band)),
        None => (text, None),
    };
    let mut words = head.split(',').map(str::trim).filter(|w| !w.is_empty());
    let id = match words.next() {
        Some(first) => parse_id(first)?,
        None => {
            return Err(error(
                "a meter starts with meter=ID, e.g. meter=1,pktps,bands=type=drop,rate=100",
            ));
        }
    };
    let mut config = MeterConfig {
        id: id.ok_or_else(|| error("meter=all names no one meter to add"))?,
        unit: Unit::Kilobits,
        band: None,
        burst: false,
        stats: false,
    };
    let mut unit = None;
    for word in words {
        match word {
            "kbps" | "pktps" if unit.is_some() => {
                return Err(error(format!("{word}: kbps or pktps, not both")));
            }
            "kbps" => unit = Some(Unit::Kilobits),
            "pktps" => unit = Some(Unit::Packets),
            "burst" => config.burst = true,
            "stats" => config.stats = true,
            other => {
                return Err(error(format!(
                    "{other}: not a meter flag (kbps, pktps, burst, stats, bands=...)"
                )));
            }
        }
    }
    config.unit = unit.unwrap_or(Unit::Kilobits);
    if let Some(band) = band {
        config.band = Some(parse_band(band)?);
    }
    config.check().map_err(|e| error(e.to_string()))?;
    Ok(config)
}

/// `type=drop,rate=R[,burst_size=B]`.
fn parse_band(text: &str) -> Result<Band, FlowError> {
    let (mut kind, mut rate, mut burst_size) = (None, None, 0);
    for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let (key, value) = word
            .split_once('=')
            .ok_or_else(|| error(format!("{word}: a band's settings are KEY=VALUE")))?;
        let number = || {
            value.parse::<u32>().map_err(|_| {
                error(format!(
                    "{word}: '{value}' is not a number up to 4294967295"
                ))
            })
        };
        match key {
            "type" => kind = Some(value),
            "rate" => rate = Some(number()?),
            "burst_size" => burst_size = number()?,
            _ => {
                return Err(error(format!(
                    "{word}: not a band setting (type, rate, burst_size)"
                )));
            }
        }
    }
    match kind {
        Some("drop") => {}
        Some(other) => {
            return Err(error(format!(
                "type={other}: only drop bands are taken (one a meter)"
            )));
        }
        None => return Err(error("a band needs type=drop")),
    }
    if text.matches("type=").count() > 1 {
        return Err(error("one band a meter"));
    }
    let rate = rate.ok_or_else(|| error("a band needs rate=R"))?;
    Ok(Band { rate, burst_size })
}

/// `meter=ID`, `meter=controller`, or `meter=all` (None): the meter a `del-meter` or a
/// `dump-meters` names.
pub fn parse_meter_selector(text: &str) -> Result<Option<u32>, FlowError> {
    match text.trim() {
        "" => Ok(None),
        text => parse_id(text),
    }
}

fn parse_id(word: &str) -> Result<Option<u32>, FlowError> {
    let value = word
        .strip_prefix("meter=")
        .ok_or_else(|| error(format!("{word}: a meter starts with meter=ID")))?;
    match value {
        "all" => Ok(None),
        "controller" => Ok(Some(METER_CONTROLLER)),
        n => match n.parse::<u32>() {
            Ok(id) => Ok(Some(id)),
            Err(_) => Err(error(format!(
                "{word}: the id is a number, controller or all"
            ))),
        },
    }
}

/// A `meter-stats` line, in ovs-ofctl's words: `meter:1 flow_count:1 packet_in_count:1000
/// byte_in_count:60000 duration:1.500s bands: 0: packet_count:990 byte_count:59400`.
pub fn meter_stats_line(meter: &Meter, flow_count: usize, now: Duration) -> String {
    let c = meter.counts();
    let id = match meter.config.id {
        METER_CONTROLLER => "controller".to_string(),
        id => id.to_string(),
    };
    let alive = now.saturating_sub(meter.installed_at);
    let mut line = format!(
        "meter:{id} flow_count:{flow_count} packet_in_count:{} byte_in_count:{} \
         duration:{:.3}s bands:",
        c.packets,
        c.bytes,
        alive.as_secs_f64()
    );
    if meter.config.band.is_some() {
        line += &format!(
            " 0: packet_count:{} byte_count:{}",
            c.band_packets, c.band_bytes
        );
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meters_parse_and_print_as_ovs_ofctl_writes_them() {
        for (written, printed) in [
            (
                "meter=1,pktps,burst,stats,bands=type=drop,rate=1,burst_size=10",
                "meter=1 pktps burst stats bands=type=drop rate=1 burst_size=10",
            ),
            (
                "meter=7,bands=type=drop,rate=1000",
                "meter=7 kbps bands=type=drop rate=1000",
            ),
            (
                "meter=controller,pktps,bands=type=drop,rate=100",
                "meter=controller pktps bands=type=drop rate=100",
            ),
        ] {
            let config = parse_meter(written).unwrap_or_else(|e| panic!("{written}: {e}"));
            assert_eq!(config.to_string(), printed);
        }
        assert_eq!(parse_meter("meter=3").unwrap().band, None);
    }

    #[test]
    fn what_a_meter_may_not_say() {
        let refused = |text: &str| parse_meter(text).unwrap_err().to_string();
        assert!(refused("pktps,meter=1").contains("starts with meter=ID"));
        assert!(refused("meter=1,kbps,pktps").contains("not both"));
        assert!(refused("meter=1,fast").contains("not a meter flag"));
        assert!(refused("meter=1,bands=type=dscp_remark,rate=1").contains("only drop bands"));
        assert!(refused("meter=1,bands=type=drop,rate=1,type=drop,rate=2").contains("one band"));
        assert!(refused("meter=1,bands=type=drop").contains("rate=R"));
        assert!(refused("meter=1,bands=type=drop,rate=0").contains("above 0"));
        assert!(refused("meter=0,pktps").contains("meter ids"));
        assert!(refused("meter=all,pktps").contains("meter=all"));
        assert!(refused("meter=x").contains("a number, controller or all"));
        assert_eq!(parse_meter_selector(""), Ok(None));
        assert_eq!(parse_meter_selector("meter=all"), Ok(None));
        assert_eq!(parse_meter_selector("meter=4"), Ok(Some(4)));
    }

    #[test]
    fn a_stats_line() {
        let config =
            parse_meter("meter=2,pktps,burst,bands=type=drop,rate=1,burst_size=1").unwrap();
        let meter = Meter::new(config, Duration::ZERO);
        assert!(meter.admit(60, Duration::ZERO));
        assert!(!meter.admit(60, Duration::ZERO));
        assert_eq!(
            meter_stats_line(&meter, 3, Duration::from_millis(1500)),
            "meter:2 flow_count:3 packet_in_count:2 byte_in_count:120 duration:1.500s bands: \
             0: packet_count:1 byte_count:60"
        );
    }
}
