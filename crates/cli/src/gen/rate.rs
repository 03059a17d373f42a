//! `--rate`: packets per second (`100000`, `2.5M`, `1.2Mpps`) or bits per second on the wire
//! (`500Mbit`, `10Gbit`; each frame counted with its 4-byte FCS, without preamble and gap).

use std::fmt;

/// Highest packet rate accepted: well above what any single port here can send.
pub const MAX_PPS: f64 = 100e6;
/// Highest bit rate accepted (400 Gbit/s).
pub const MAX_BPS: f64 = 400e9;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    PacketsPerSec(f64),
    BitsPerSec(f64),
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rate::PacketsPerSec(pps) => write!(f, "{pps} pps"),
            Rate::BitsPerSec(bps) => write!(f, "{} Mbit/s", bps / 1e6),
        }
    }
}

fn multiplier(prefix: &str) -> Option<f64> {
    match prefix {
        "" => Some(1.0),
        "k" | "K" => Some(1e3),
        "M" | "m" => Some(1e6),
        "G" | "g" => Some(1e9),
        _ => None,
    }
}

/// Parses a rate and checks its range.
pub fn parse_rate(text: &str) -> Result<Rate, String> {
    let bad = || {
        format!(
            "--rate {text}: expected packets per second (100000, 2.5M, 1Mpps) or bits per second (500Mbit, 10Gbit)"
        )
    };
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E'))
        .unwrap_or(t.len());
    // "1e6" is a number, but "1e" followed by nothing is not: let the parse decide.
    let (number, unit) = t.split_at(split);
    let value: f64 = number.parse().map_err(|_| bad())?;
    let (prefix, bits) = if let Some(p) = unit.strip_suffix("bit").or(unit.strip_suffix("bps")) {
        (p, true)
    } else if let Some(p) = unit.strip_suffix("pps") {
        (p, false)
    } else {
        (unit, false)
    };
    let value = value * multiplier(prefix).ok_or_else(bad)?;
    if bits {
        if !(1e3..=MAX_BPS).contains(&value) {
            return Err(format!(
                "--rate {text}: out of range, a bit rate must be from 1kbit to 400Gbit"
            ));
        }
        Ok(Rate::BitsPerSec(value))
    } else {
        if !(1.0..=MAX_PPS).contains(&value) {
            return Err(format!(
                "--rate {text}: out of range, a packet rate must be from 1 to 100M packets per second"
            ));
        }
        Ok(Rate::PacketsPerSec(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_rates() {
        assert_eq!(parse_rate("100000"), Ok(Rate::PacketsPerSec(100000.0)));
        assert_eq!(parse_rate("2.5M"), Ok(Rate::PacketsPerSec(2.5e6)));
        assert_eq!(parse_rate("1Mpps"), Ok(Rate::PacketsPerSec(1e6)));
        assert_eq!(parse_rate("10kpps"), Ok(Rate::PacketsPerSec(1e4)));
        assert_eq!(parse_rate("1e5"), Ok(Rate::PacketsPerSec(1e5)));
    }

    #[test]
    fn bit_rates() {
        assert_eq!(parse_rate("500Mbit"), Ok(Rate::BitsPerSec(500e6)));
        assert_eq!(parse_rate("10Gbit"), Ok(Rate::BitsPerSec(10e9)));
        assert_eq!(parse_rate("64kbps"), Ok(Rate::BitsPerSec(64e3)));
    }

    #[test]
    fn out_of_range_and_garbage() {
        for bad in [
            "0", "-5", "200M", "0.5", "1Tbit", "10bit", "fast", "", "5Xbit", "1..2",
        ] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert!(parse_rate("0").unwrap_err().contains("out of range"));
    }
}
