//! Local time as tcpdump shows it (its lines and `-G` file names go through localtime(3)):
//! the offset from UTC that TZ, else /etc/localtime, gives at a moment.

use chrono::{Local, LocalResult, Offset, TimeZone};

/// Seconds east of UTC of local time at `unix_s`; 0 where the zone does not say.
pub fn utc_offset_s(unix_s: i64) -> i64 {
    match Local.timestamp_opt(unix_s, 0) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => {
            i64::from(t.offset().fix().local_minus_utc())
        }
        LocalResult::None => 0,
    }
}

/// `utc_offset_s`, looked up once per quarter hour (zones change offset on those) for a
/// caller that asks for every packet.
#[derive(Debug, Default)]
pub struct LocalOffset {
    quarter: Option<i64>,
    offset_s: i64,
}

impl LocalOffset {
    pub fn at(&mut self, unix_s: i64) -> i64 {
        let quarter = unix_s.div_euclid(900);
        if self.quarter != Some(quarter) {
            self.quarter = Some(quarter);
            self.offset_s = utc_offset_s(unix_s);
        }
        self.offset_s
    }
}
