//! Time formatting for the log: Go's `log` timestamp (`2006/01/02 15:04:05.000000`), RFC 3339
//! with nanoseconds, and Go's `time.Duration.String()`, all in UTC and without a time crate.
//!
//! Antrea's agent writes its np.log with Go's `log.Ldate|log.Lmicroseconds` in the container's
//! local time zone, which is UTC in Antrea's images; npagent always writes UTC.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Civil UTC date and time of a `SystemTime` (times before 1970 are clamped to the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Civil {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub nanos: u32,
}

impl Civil {
    /// Converts with the days-to-civil algorithm of the proleptic Gregorian calendar.
    pub(crate) fn from_system_time(t: SystemTime) -> Civil {
        let since = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
        let secs = since.as_secs();
        let days = secs / 86_400;
        let rem = secs % 86_400;
        // Shift the epoch to 0000-03-01 so leap days fall at the end of a year.
        let z = days + 719_468;
        let era = z / 146_097;
        let doe = z % 146_097;
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + u64::from(month <= 2);
        Civil {
            year: i64::try_from(year).unwrap_or(i64::MAX),
            month: month as u32,
            day: day as u32,
            hour: (rem / 3_600) as u32,
            minute: (rem / 60 % 60) as u32,
            second: (rem % 60) as u32,
            nanos: since.subsec_nanos(),
        }
    }

    /// The time of this date and clock (the inverse of [`Civil::from_system_time`], by the
    /// days-from-civil algorithm); `None` before the epoch or for a month outside 1..=12. The
    /// other fields are not range-checked: a second of 60 is the next minute's first.
    pub fn to_system_time(&self) -> Option<SystemTime> {
        if !(1..=12).contains(&self.month) {
            return None;
        }
        // i128: no year of an i64 overflows.
        let m = i128::from(self.month);
        let y = i128::from(self.year) - i128::from(m <= 2);
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let doy = (153 * ((m + 9) % 12) + 2) / 5 + i128::from(self.day) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        if days < 0 {
            return None;
        }
        let secs =
            days * 86_400 + i128::from(self.hour) * 3_600 + i128::from(self.minute) * 60 + i128::from(self.second);
        UNIX_EPOCH.checked_add(Duration::new(u64::try_from(secs).ok()?, self.nanos))
    }
}

/// Where formatted bytes go: a `Vec`, or a fixed buffer when no allocation is wanted.
pub(crate) trait ByteSink {
    fn push(&mut self, b: u8);
    fn extend_from_slice(&mut self, s: &[u8]) {
        for &b in s {
            self.push(b);
        }
    }
}

impl ByteSink for Vec<u8> {
    fn push(&mut self, b: u8) {
        Vec::push(self, b);
    }
    fn extend_from_slice(&mut self, s: &[u8]) {
        Vec::extend_from_slice(self, s);
    }
}

/// A small stack buffer; bytes beyond its capacity are dropped.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fixed {
    buf: [u8; 48],
    len: usize,
}

impl Default for Fixed {
    fn default() -> Self {
        Fixed { buf: [0; 48], len: 0 }
    }
}

impl Fixed {
    /// The bytes written.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}

impl ByteSink for Fixed {
    fn push(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }
}

/// Appends `YYYY/MM/DD HH:MM:SS.uuuuuu` (Go's `log.Ldate|log.Lmicroseconds`, UTC).
pub(crate) fn push_go_log_timestamp(out: &mut impl ByteSink, t: SystemTime) {
    let c = Civil::from_system_time(t);
    push_date(out, &c, b'/');
    out.push(b' ');
    push_clock(out, &c);
    out.push(b'.');
    push_padded(out, (c.nanos / 1_000).into(), 6);
}

/// `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`: RFC 3339 in UTC with all nine fraction digits.
pub fn rfc3339_nanos(t: SystemTime) -> String {
    let mut out = Vec::with_capacity(30);
    push_rfc3339_nanos(&mut out, t);
    // Only ASCII digits and separators were pushed.
    String::from_utf8(out).unwrap_or_default()
}

/// Appends [`rfc3339_nanos`]'s text.
pub(crate) fn push_rfc3339_nanos(out: &mut impl ByteSink, t: SystemTime) {
    let c = Civil::from_system_time(t);
    push_date(out, &c, b'-');
    out.push(b'T');
    push_clock(out, &c);
    out.push(b'.');
    push_padded(out, c.nanos.into(), 9);
    out.push(b'Z');
}

/// `2006-01-02T15-04-05.000` in UTC: the time in a backup's name, lumberjack's format.
pub(crate) fn backup_timestamp(t: SystemTime) -> String {
    let c = Civil::from_system_time(t);
    let mut v = Vec::with_capacity(23);
    push_padded(&mut v, c.year as u64, 4);
    v.push(b'-');
    push_padded(&mut v, c.month.into(), 2);
    v.push(b'-');
    push_padded(&mut v, c.day.into(), 2);
    v.push(b'T');
    push_padded(&mut v, c.hour.into(), 2);
    v.push(b'-');
    push_padded(&mut v, c.minute.into(), 2);
    v.push(b'-');
    push_padded(&mut v, c.second.into(), 2);
    v.push(b'.');
    push_padded(&mut v, (c.nanos / 1_000_000).into(), 3);
    String::from_utf8(v).unwrap_or_default()
}

/// Reads [`backup_timestamp`]'s text back: exactly its 23 characters.
pub(crate) fn parse_backup_timestamp(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    let seps = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b'-'), (16, b'-'), (19, b'.')];
    if b.len() != 23 || seps.iter().any(|&(i, c)| b.get(i) != Some(&c)) {
        return None;
    }
    parse_civil(s.get(..10)?, '-', s.get(11..)?, '-')
}

/// Reads [`push_go_log_timestamp`]'s date and clock back (`2006/01/02`, `15:04:05[.fraction]`,
/// UTC); `None` for what is no time from 1970 on.
pub(crate) fn parse_go_log_timestamp(date: &str, clock: &str) -> Option<SystemTime> {
    parse_civil(date, '/', clock, ':')
}

/// Reads [`rfc3339_nanos`]'s text back (`2006-01-02T15:04:05[.fraction]Z`); `None` for what is
/// no time from 1970 on.
pub(crate) fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let (date, clock) = s.strip_suffix('Z')?.split_once('T')?;
    parse_civil(date, '-', clock, ':')
}

/// A `YYYY<sep>MM<sep>DD` date and a `HH<clock_sep>MM<clock_sep>SS[.fraction]` clock (at
/// most nine fraction digits) as a time.
fn parse_civil(date: &str, sep: char, clock: &str, clock_sep: char) -> Option<SystemTime> {
    let mut d = date.split(sep);
    let (year, month, day) = (d.next()?.parse().ok()?, d.next()?.parse().ok()?, d.next()?.parse().ok()?);
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, ""));
    let mut t = hms.split(clock_sep);
    let (hour, minute, second) = (t.next()?.parse().ok()?, t.next()?.parse().ok()?, t.next()?.parse().ok()?);
    let in_range = (1..=31).contains(&day) && hour <= 23 && minute <= 59 && second <= 60;
    if !in_range || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let nanos = if frac.is_empty() { 0 } else { format!("{frac:0<9}").parse().ok()? };
    Civil { year, month, day, hour, minute, second, nanos }.to_system_time()
}

/// `YYYY<sep>MM<sep>DD`.
fn push_date(out: &mut impl ByteSink, c: &Civil, sep: u8) {
    push_padded(out, c.year as u64, 4);
    out.push(sep);
    push_padded(out, c.month.into(), 2);
    out.push(sep);
    push_padded(out, c.day.into(), 2);
}

fn push_clock(out: &mut impl ByteSink, c: &Civil) {
    push_padded(out, c.hour.into(), 2);
    out.push(b':');
    push_padded(out, c.minute.into(), 2);
    out.push(b':');
    push_padded(out, c.second.into(), 2);
}

/// Appends `v` in decimal, zero-padded to at least `width` digits.
pub(crate) fn push_padded(out: &mut impl ByteSink, v: u64, width: usize) {
    let mut digits = [0u8; 20];
    let mut n = 0;
    let mut v = v;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for _ in n..width {
        out.push(b'0');
    }
    for &d in digits[..n].iter().rev() {
        out.push(d);
    }
}

/// Go's `time.Duration.String()`: `0s`, `999ns`, `1.5µs`, `1.234567ms`, `1.000000001s`,
/// `1m0s`, `1h2m3.5s`. Go's Duration is a signed 64-bit count of nanoseconds; longer
/// durations than Go can hold are printed the same way, only with more hours.
pub fn go_duration(d: Duration) -> String {
    let mut buf = Vec::with_capacity(24);
    push_go_duration(&mut buf, d);
    String::from_utf8(buf).unwrap_or_default()
}

/// Appends [`go_duration`]'s text.
pub(crate) fn push_go_duration(out: &mut impl ByteSink, d: Duration) {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    let mut u = d.as_nanos();
    // Built backwards, as Go does, into a buffer large enough for u128 hours.
    let mut buf = [0u8; 64];
    let mut w = buf.len();
    let put = |buf: &mut [u8; 64], w: &mut usize, b: u8| {
        *w -= 1;
        buf[*w] = b;
    };
    if u < NANOS_PER_SEC {
        put(&mut buf, &mut w, b's');
        let prec = if u == 0 {
            out.extend_from_slice(b"0s");
            return;
        } else if u < 1_000 {
            put(&mut buf, &mut w, b'n');
            0
        } else if u < 1_000_000 {
            // U+00B5 MICRO SIGN, as Go prints it.
            put(&mut buf, &mut w, 0xb5);
            put(&mut buf, &mut w, 0xc2);
            3
        } else {
            put(&mut buf, &mut w, b'm');
            6
        };
        u = frac(&mut buf, &mut w, u, prec);
        int(&mut buf, &mut w, u);
    } else {
        put(&mut buf, &mut w, b's');
        u = frac(&mut buf, &mut w, u, 9);
        int(&mut buf, &mut w, u % 60);
        u /= 60;
        if u > 0 {
            put(&mut buf, &mut w, b'm');
            int(&mut buf, &mut w, u % 60);
            u /= 60;
            if u > 0 {
                put(&mut buf, &mut w, b'h');
                int(&mut buf, &mut w, u);
            }
        }
    }
    out.extend_from_slice(&buf[w..]);
}

/// Writes the low `prec` decimal digits of `v` as a fraction without trailing zeros (and
/// without the point when all are zero); returns `v` with those digits removed.
fn frac(buf: &mut [u8; 64], w: &mut usize, mut v: u128, prec: u32) -> u128 {
    let mut print = false;
    for _ in 0..prec {
        let digit = (v % 10) as u8;
        print = print || digit != 0;
        if print {
            *w -= 1;
            buf[*w] = b'0' + digit;
        }
        v /= 10;
    }
    if print {
        *w -= 1;
        buf[*w] = b'.';
    }
    v
}

fn int(buf: &mut [u8; 64], w: &mut usize, mut v: u128) {
    loop {
        *w -= 1;
        buf[*w] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, nanos: u32) -> SystemTime {
        UNIX_EPOCH + Duration::new(secs, nanos)
    }

    fn log_ts(t: SystemTime) -> String {
        let mut v = Vec::new();
        push_go_log_timestamp(&mut v, t);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn go_log_timestamps() {
        // 2023-07-04T12:31:02.801442Z = 1688473862.801442
        assert_eq!(log_ts(at(1_688_473_862, 801_442_999)), "2023/07/04 12:31:02.801442");
        assert_eq!(log_ts(at(0, 0)), "1970/01/01 00:00:00.000000");
        // Leap day and the last second of a leap year.
        assert_eq!(log_ts(at(951_782_400, 5_000)), "2000/02/29 00:00:00.000005");
        assert_eq!(log_ts(at(1_735_689_599, 0)), "2024/12/31 23:59:59.000000");
        assert_eq!(log_ts(UNIX_EPOCH - Duration::from_secs(5)), "1970/01/01 00:00:00.000000");
    }

    #[test]
    fn rfc3339() {
        assert_eq!(rfc3339_nanos(at(1_688_473_862, 801_442_013)), "2023-07-04T12:31:02.801442013Z");
        assert_eq!(rfc3339_nanos(at(4_102_444_800, 0)), "2100-01-01T00:00:00.000000000Z");
    }

    #[test]
    fn times_read_back_as_written() {
        let t = UNIX_EPOCH + Duration::new(1_688_473_862, 801_442_000);
        assert_eq!(parse_go_log_timestamp("2023/07/04", "12:31:02.801442"), Some(t));
        assert_eq!(parse_rfc3339(&rfc3339_nanos(t)), Some(t));
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(UNIX_EPOCH));
        for bad in ["2023/13/04", "2023/07/04x", "x/y/z"] {
            assert_eq!(parse_go_log_timestamp(bad, "12:31:02"), None, "{bad}");
        }
        assert_eq!(parse_go_log_timestamp("2023/07/04", "25:00:00"), None);
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59Z"), None);
    }

    #[test]
    fn backup_timestamps_round_trip() {
        let t = UNIX_EPOCH + Duration::from_millis(1_688_473_862_801);
        assert_eq!(backup_timestamp(t), "2023-07-04T12-31-02.801");
        assert_eq!(parse_backup_timestamp("2023-07-04T12-31-02.801"), Some(t));
        assert_eq!(parse_backup_timestamp("2023-07-04T12:31:02.801"), None);
        assert_eq!(parse_backup_timestamp("2023-13-04T12-31-02.801"), None);
        for days in [0u64, 59, 60, 365, 11_016, 20_000, 47_482] {
            let t = UNIX_EPOCH + Duration::from_secs(days * 86_400 + 3_723) + Duration::from_millis(5);
            assert_eq!(parse_backup_timestamp(&backup_timestamp(t)), Some(t), "day {days}");
        }
    }

    #[test]
    fn civil_to_system_time_refuses_what_has_no_time() {
        let c = Civil { year: 1970, month: 1, day: 1, hour: 0, minute: 0, second: 0, nanos: 0 };
        assert_eq!(c.to_system_time(), Some(UNIX_EPOCH));
        assert_eq!(
            Civil { year: 1969, month: 12, day: 31, hour: 23, minute: 59, second: 60, ..c }.to_system_time(),
            None
        );
        assert_eq!(Civil { month: 0, ..c }.to_system_time(), None);
        assert_eq!(Civil { month: 13, ..c }.to_system_time(), None);
        assert_eq!(Civil { year: i64::MIN, ..c }.to_system_time(), None);
        assert!(Civil { year: i64::MAX, ..c }.to_system_time().is_none_or(|t| t > UNIX_EPOCH));
    }

    #[test]
    fn civil_matches_a_day_by_day_count() {
        // Walk 800 years day by day with a naive calendar and compare.
        let (mut y, mut m, mut d) = (1970i64, 1u32, 1u32);
        let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        for day in 0..(800 * 366) {
            let t = at(day * 86_400 + 86_399, 7);
            let c = Civil::from_system_time(t);
            assert_eq!((c.year, c.month, c.day, c.hour, c.minute, c.second), (y, m, d, 23, 59, 59), "day {day}");
            assert_eq!(c.to_system_time(), Some(t), "day {day} back");
            let len = match m {
                2 if leap(y) => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            d += 1;
            if d > len {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
    }

    #[test]
    fn go_duration_strings() {
        // Expected strings are those of Go's time.Duration.String() for the same values
        // (Go's own format_test cases and Antrea-style aggregate durations).
        let cases: &[(u64, &str)] = &[
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1µs"),
            (2_200_000, "2.2ms"),
            (3_300_000_000, "3.3s"),
            (4 * 60 * 1_000_000_000 + 5_000_000_000, "4m5s"),
            (4 * 60 * 1_000_000_000 + 5_001_000_000, "4m5.001s"),
            (5 * 3_600 * 1_000_000_000 + 6 * 60 * 1_000_000_000 + 7_001_000_000, "5h6m7.001s"),
            (8 * 60 * 1_000_000_000 + 1, "8m0.000000001s"),
            (999, "999ns"),
            (999_500, "999.5µs"),
            (1_000, "1µs"),
            (1_000_000, "1ms"),
            (1_234_567, "1.234567ms"),
            (1_000_000_000, "1s"),
            (1_200_000_000, "1.2s"),
            (1_000_512_345, "1.000512345s"),
            (60_000_000_000, "1m0s"),
            (3_600_000_000_000, "1h0m0s"),
            (i64::MAX as u64, "2562047h47m16.854775807s"),
        ];
        for &(ns, want) in cases {
            assert_eq!(go_duration(Duration::from_nanos(ns)), want, "{ns} ns");
        }
    }
}
