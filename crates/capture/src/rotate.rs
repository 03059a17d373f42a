//! File rotation as tcpdump does it: `-G SECONDS` starts a new file after that much time (the
//! name is a strftime pattern), `-C SIZE` after that many bytes (a number is appended to the
//! name), `-W COUNT` keeps a ring of COUNT files with `-C`, or stops after COUNT files with
//! only `-G`.
//!
//! Time comes from the packets' timestamps, so rotating a file read with `-r` is reproducible.
//! Names are formatted in UTC.

use std::path::PathBuf;

/// When to start a new file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rotation {
    /// `-G`: seconds a file covers.
    pub seconds: Option<u64>,
    /// `-C`: bytes a file may hold.
    pub bytes: Option<u64>,
    /// `-W`: files in the ring (with `-C`) or files in all (with only `-G`).
    pub files: Option<u32>,
}

/// Parses `-C`'s size: a number of millions of bytes, or with a k, m or g suffix, of KiB, MiB
/// or GiB (tcpdump's units). Fractions are allowed: `-C 0.5` is 500,000 bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (num, unit) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1024.0),
        Some((i, 'm' | 'M')) => (&s[..i], 1024.0 * 1024.0),
        Some((i, 'g' | 'G')) => (&s[..i], 1024.0 * 1024.0 * 1024.0),
        _ => (s, 1_000_000.0),
    };
    let n: f64 = num.parse().map_err(|_| {
        format!("{s}: a size is a number of millions of bytes, or ends in k, m or g")
    })?;
    let bytes = n * unit;
    if !(1.0..1e18).contains(&bytes) {
        return Err(format!("{s}: the file size must be at least 1 byte"));
    }
    Ok(bytes as u64)
}

impl Rotation {
    pub fn is_none(&self) -> bool {
        self.seconds.is_none() && self.bytes.is_none()
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.seconds == Some(0) {
            return Err("-G 0: the rotation interval must be at least 1 second".to_string());
        }
        if self.files == Some(0) {
            return Err("-W 0: the number of files must be at least 1".to_string());
        }
        if self.files.is_some() && self.is_none() {
            return Err("-W goes with -C or -G".to_string());
        }
        Ok(())
    }

    /// Digits of the number appended with `-C` and `-W` (tcpdump pads to fit `COUNT - 1`).
    fn suffix_digits(&self) -> usize {
        match self.files {
            Some(w) if self.bytes.is_some() => (w.saturating_sub(1)).to_string().len(),
            _ => 0,
        }
    }
}

/// Names the files of a capture as they are started.
#[derive(Debug, Clone)]
pub struct Namer {
    pattern: String,
    rotation: Rotation,
}

impl Namer {
    pub fn new(pattern: &str, rotation: Rotation) -> Namer {
        Namer {
            pattern: pattern.to_string(),
            rotation,
        }
    }

    /// The name of the `index`-th size-rotated file of the interval that started at `ts_ns`.
    pub fn name(&self, ts_ns: u64, index: u64) -> PathBuf {
        let mut name = match self.rotation.seconds {
            Some(_) => strftime_local(&self.pattern, ts_ns / 1_000_000_000),
            None => self.pattern.clone(),
        };
        let digits = self.suffix_digits_for(index);
        if let Some(width) = digits {
            let index = match self.rotation.files {
                Some(w) if self.rotation.bytes.is_some() => index % u64::from(w),
                _ => index,
            };
            name.push_str(&format!("{index:0width$}"));
        }
        PathBuf::from(name)
    }

    fn suffix_digits_for(&self, index: u64) -> Option<usize> {
        let width = self.rotation.suffix_digits();
        match (self.rotation.bytes.is_some(), width, index) {
            (false, _, _) => None,
            // -C alone: the first file keeps the plain name, then name1, name2, ...
            (true, 0, 0) if self.rotation.files.is_none() => None,
            (true, w, _) => Some(w.max(1)),
        }
    }
}

/// Formats a Unix time in local time as strftime(3) does in the C locale, as tcpdump names
/// its `-G` files: the conversions of [`STRFTIME_CONVERSIONS`]; other text stays as is.
pub fn strftime_local(pattern: &str, unix_s: u64) -> String {
    let offset = crate::localtime::utc_offset_s(unix_s as i64);
    strftime_at(pattern, unix_s, offset)
}

/// True when `pattern` holds a conversion of the time (its `-G` files get names of their
/// own; without one each overwrites the last, as tcpdump's do).
pub fn names_a_time(pattern: &str) -> bool {
    // 400 days, an hour, a minute and a second apart: every conversion differs.
    strftime_utc(pattern, 0) != strftime_utc(pattern, 400 * 86400 + 3661)
}

/// `strftime_local` in UTC.
pub fn strftime_utc(pattern: &str, unix_s: u64) -> String {
    strftime_at(pattern, unix_s, 0)
}

/// The strftime conversions a `-G` name may use (after `%`). The time zone's name (`%Z`)
/// and the week numbers are not among them.
pub const STRFTIME_CONVERSIONS: &str = "YymdeHIMSpjsFTDRaAbBhuwzC%";

/// A `-G` name's conversions that [`strftime_local`] does not make, or None when it makes
/// them all: a name that would keep `%Z` as typed is refused, not written.
pub fn unknown_conversion(pattern: &str) -> Option<String> {
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.next() {
                Some(k) if STRFTIME_CONVERSIONS.contains(k) => {}
                Some(k) => return Some(format!("%{k}")),
                None => return Some("%".to_string()),
            }
        }
    }
    None
}

const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// The fields of `unix_s` (`%s` itself) in a zone `offset_s` seconds east of UTC.
fn strftime_at(pattern: &str, unix_s: u64, offset_s: i64) -> String {
    let local = (unix_s as i64).saturating_add(offset_s);
    let days = local.div_euclid(86_400);
    let secs = local.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let yday = days - days_from_civil(y, 1, 1) + 1;
    let (hh, mm, ss) = (secs / 3600, secs / 60 % 60, secs % 60);
    // 1970-01-01 was a Thursday.
    let weekday = (days + 4).rem_euclid(7) as usize;
    let month = MONTHS[m as usize - 1];
    let hour12 = match hh % 12 {
        0 => 12,
        h => h,
    };
    let zone = {
        let (sign, off) = if offset_s < 0 {
            ('-', -offset_s)
        } else {
            ('+', offset_s)
        };
        format!("{sign}{:02}{:02}", off / 3600, off / 60 % 60)
    };
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&format!("{y:04}")),
            Some('y') => out.push_str(&format!("{:02}", y.rem_euclid(100))),
            Some('C') => out.push_str(&format!("{:02}", y.div_euclid(100))),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('e') => out.push_str(&format!("{d:2}")),
            Some('H') => out.push_str(&format!("{hh:02}")),
            Some('I') => out.push_str(&format!("{hour12:02}")),
            Some('p') => out.push_str(if hh < 12 { "AM" } else { "PM" }),
            Some('M') => out.push_str(&format!("{mm:02}")),
            Some('S') => out.push_str(&format!("{ss:02}")),
            Some('j') => out.push_str(&format!("{yday:03}")),
            Some('s') => out.push_str(&unix_s.to_string()),
            Some('F') => out.push_str(&format!("{y:04}-{m:02}-{d:02}")),
            Some('T') => out.push_str(&format!("{hh:02}:{mm:02}:{ss:02}")),
            Some('D') => out.push_str(&format!("{m:02}/{d:02}/{:02}", y.rem_euclid(100))),
            Some('R') => out.push_str(&format!("{hh:02}:{mm:02}")),
            Some('a') => out.push_str(&WEEKDAYS[weekday][..3]),
            Some('A') => out.push_str(WEEKDAYS[weekday]),
            Some('b' | 'h') => out.push_str(&month[..3]),
            Some('B') => out.push_str(month),
            Some('u') => out.push_str(&(if weekday == 0 { 7 } else { weekday }).to_string()),
            Some('w') => out.push_str(&weekday.to_string()),
            Some('z') => out.push_str(&zone),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_tcpdump_units() {
        assert_eq!(parse_size("1"), Ok(1_000_000));
        assert_eq!(parse_size("0.25"), Ok(250_000));
        assert_eq!(parse_size("64k"), Ok(65_536));
        assert_eq!(parse_size("2M"), Ok(2 << 20));
        assert!(parse_size("0").is_err());
        assert!(parse_size("x").is_err());
        assert!(parse_size("-1").is_err());
    }

    #[test]
    fn a_name_without_a_time_conversion_is_told() {
        for timed in ["cap-%Y%m%d-%H%M%S.pcap", "%s.pcap", "x-%H.pcap", "%a.pcap"] {
            assert!(names_a_time(timed), "{timed}");
        }
        for fixed in ["cap.pcap", "100%%.pcap", "%q.pcap", ""] {
            assert!(!names_a_time(fixed), "{fixed}");
        }
    }

    #[test]
    fn strftime_in_utc() {
        // 2026-11-22 05:03:53 UTC
        let t = 1_795_323_833;
        assert_eq!(
            strftime_utc("cap-%Y%m%d-%H%M%S.pcap", t),
            "cap-20261122-050353.pcap"
        );
        assert_eq!(
            strftime_utc("%F %T %s %j %% %q", t),
            "2026-11-22 05:03:53 1795323833 326 % %q"
        );
        assert_eq!(strftime_utc("%Y-%m-%d", 0), "1970-01-01");
        // The C locale's names and the other conversions tcpdump users put in -G names.
        assert_eq!(
            strftime_utc("%y %C %e %I%p %D %R %a %A %b %h %B %u %w %z", t),
            "26 20 22 05AM 11/22/26 05:03 Sun Sunday Nov Nov November 7 0 +0000"
        );
        assert_eq!(
            strftime_at("%z %I%p", t + 12 * 3600, -5 * 3600 - 1800),
            "-0530 11AM"
        );
        assert_eq!(unknown_conversion("cap-%Y%m%d-%H.pcap"), None);
        assert_eq!(unknown_conversion("cap-%Z.pcap"), Some("%Z".to_string()));
        assert_eq!(unknown_conversion("cap-%"), Some("%".to_string()));
        assert_eq!(strftime_utc("%Y-%m-%d %j", 951_782_400), "2000-02-29 060");
    }

    #[test]
    fn names_like_tcpdump() {
        let c = Rotation {
            bytes: Some(1),
            ..Rotation::default()
        };
        let n = Namer::new("out.pcap", c);
        assert_eq!(n.name(0, 0), PathBuf::from("out.pcap"));
        assert_eq!(n.name(0, 1), PathBuf::from("out.pcap1"));
        assert_eq!(n.name(0, 12), PathBuf::from("out.pcap12"));
        let ring = Rotation {
            files: Some(3),
            ..c
        };
        let n = Namer::new("out.pcap", ring);
        let names: Vec<_> = (0..4).map(|i| n.name(0, i)).collect();
        assert_eq!(
            names,
            ["out.pcap0", "out.pcap1", "out.pcap2", "out.pcap0"].map(PathBuf::from)
        );
        let ring = Rotation {
            files: Some(12),
            ..c
        };
        assert_eq!(Namer::new("f", ring).name(0, 3), PathBuf::from("f03"));
        let g = Rotation {
            seconds: Some(2),
            ..Rotation::default()
        };
        assert_eq!(
            Namer::new("f-%s", g).name(7_500_000_000, 0),
            PathBuf::from("f-7")
        );
    }

    #[test]
    fn validation() {
        assert!(
            Rotation {
                files: Some(2),
                ..Rotation::default()
            }
            .validate()
            .is_err()
        );
        assert!(
            Rotation {
                seconds: Some(0),
                ..Rotation::default()
            }
            .validate()
            .is_err()
        );
        assert!(
            Rotation {
                seconds: Some(1),
                files: Some(2),
                ..Rotation::default()
            }
            .validate()
            .is_ok()
        );
    }
}
