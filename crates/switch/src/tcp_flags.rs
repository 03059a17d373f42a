//! The `tcp_flags` match field in flow syntax, as ovs-ofctl reads and prints it: exact as
//! flag names joined by `|` (`syn|ack`, `0` for none) or a number; masked as the flags that
//! must be set and not set (`+syn-ack`: SYN set, ACK clear, the rest ignored) or
//! `VALUE/MASK`. The three reserved bits above NS are named `[200]`, `[400]` and `[800]`,
//! as Open vSwitch names them.

use core::fmt;

use crate::field::parse_uint;

/// Every bit the field holds.
pub const ALL: u16 = 0x0fff;

/// Each bit's name, from the lowest.
const NAMES: [&str; 12] = [
    "fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns", "[200]", "[400]", "[800]",
];

fn bit_named(name: &str) -> Option<u16> {
    NAMES.iter().position(|&n| n == name).map(|bit| 1 << bit)
}

/// An exact value: names or numbers joined by `|`, OR'ed.
pub fn parse_exact(text: &str) -> Option<u16> {
    text.split('|').try_fold(0u16, |flags, part| {
        let bits = match bit_named(part) {
            Some(bit) => bit,
            None => u16::try_from(parse_uint(part)?).ok()?,
        };
        (bits & !ALL == 0).then_some(flags | bits)
    })
}

/// A value and mask: `+name-name...` (each flag at most once), `VALUE/MASK`, or an exact
/// value (all twelve bits).
pub fn parse_masked(text: &str) -> Option<(u16, u16)> {
    if let Some((value, mask)) = text.split_once('/') {
        let number = |text: &str| {
            u16::try_from(parse_uint(text)?)
                .ok()
                .filter(|n| n & !ALL == 0)
        };
        let (value, mask) = (number(value)?, number(mask)?);
        return Some((value & mask, mask));
    }
    if !text.starts_with(['+', '-']) {
        return Some((parse_exact(text)?, ALL));
    }
    let (mut value, mut mask) = (0u16, 0u16);
    // Each step starts at a sign: the text's first character, then where the last name ended.
    let mut rest = text;
    while let Some(sign) = rest.chars().next() {
        let after = &rest[1..];
        let end = after.find(['+', '-']).unwrap_or(after.len());
        let bit = bit_named(&after[..end])?;
        if mask & bit != 0 {
            return None;
        }
        mask |= bit;
        if sign == '+' {
            value |= bit;
        }
        rest = &after[end..];
    }
    Some((value, mask))
}

/// Writes an exact value as ovs-ofctl prints it: the names of its bits, lowest first, joined
/// by `|`; `0` for none.
pub fn write_exact(f: &mut fmt::Formatter<'_>, flags: u16) -> fmt::Result {
    if flags == 0 {
        return f.write_str("0");
    }
    let mut first = true;
    for (bit, name) in NAMES.iter().enumerate() {
        if flags & (1 << bit) != 0 {
            if !first {
                f.write_str("|")?;
            }
            first = false;
            f.write_str(name)?;
        }
    }
    Ok(())
}

/// A value under a mask as ovs-ofctl prints it: each bit of the mask, lowest first, `+` if
/// set and `-` if clear; exact (all twelve bits) as [`write_exact`] does.
pub struct Masked {
    pub value: u16,
    pub mask: u16,
}

impl fmt::Display for Masked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.mask & ALL == ALL {
            return write_exact(f, self.value);
        }
        for (bit, name) in NAMES.iter().enumerate() {
            let bit = 1 << bit;
            if self.mask & bit != 0 {
                let sign = if self.value & bit != 0 { '+' } else { '-' };
                write!(f, "{sign}{name}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(value: u16, mask: u16) -> String {
        Masked { value, mask }.to_string()
    }

    #[test]
    fn exact_values_as_ovs_ofctl() {
        assert_eq!(parse_exact("syn|ack"), Some(0x012));
        assert_eq!(parse_exact("0x012"), Some(0x012));
        assert_eq!(parse_exact("0x002|ack"), Some(0x012));
        assert_eq!(parse_exact("0"), Some(0));
        assert_eq!(parse_exact("[800]|ns"), Some(0x900));
        for bad in ["", "SYN", "syn|", "0x1000", "syn+ack", "-1"] {
            assert_eq!(parse_exact(bad), None, "{bad}");
        }
        assert_eq!(masked(0x012, ALL), "syn|ack");
        assert_eq!(masked(0, ALL), "0");
        assert_eq!(masked(ALL, ALL), NAMES.join("|"));
    }

    #[test]
    fn masked_values_as_ovs_ofctl() {
        assert_eq!(parse_masked("+syn-ack"), Some((0x002, 0x012)));
        assert_eq!(parse_masked("-ack+syn"), Some((0x002, 0x012)));
        assert_eq!(parse_masked("+syn+fin-rst"), Some((0x003, 0x007)));
        assert_eq!(parse_masked("0x012/0x0ff"), Some((0x012, 0x0ff)));
        assert_eq!(parse_masked("0x013/0x002"), Some((0x002, 0x002)));
        assert_eq!(parse_masked("syn"), Some((0x002, ALL)));
        for bad in [
            "+syn+syn", "+syn-syn", "+", "+SYN", "+syn|ack", "0x1000/1", "1/0x1000",
        ] {
            assert_eq!(parse_masked(bad), None, "{bad}");
        }
        // ovs-ofctl prints the mask's bits from the lowest.
        assert_eq!(masked(0x002, 0x012), "+syn-ack");
        assert_eq!(masked(0x003, 0x007), "+fin+syn-rst");
        assert_eq!(masked(0x012, 0x0ff), "-fin+syn-rst-psh+ack-urg-ece-cwr");
        assert_eq!(masked(0, 0x002), "-syn");
        assert_eq!(masked(0x200, 0x200), "+[200]");
    }
}
