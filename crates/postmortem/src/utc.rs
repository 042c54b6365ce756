//! UTC timestamps (`2026-11-23T18:40:12.345Z`), by Howard Hinnant's civil-from-days algorithm. It
//! must never read the local time zone and never panic on a clock before 1970.

use std::time::{SystemTime, UNIX_EPOCH};

/// `t` in UTC with milliseconds; a time before 1970 (a clock not yet set) prints as 1970-01-01.
pub(crate) fn format(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (y, m, day) = civil(i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2));
    let rem = secs % 86_400;
    format!("{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z", rem / 3600, rem % 3600 / 60, rem % 60, d.subsec_millis())
}

/// Year, month (1-12) and day (1-31) of `days` since 1970-01-01 (proleptic Gregorian).
pub fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097; // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March first
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, u32::try_from(month).unwrap_or(1), u32::try_from(day).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64, ms: u64) -> String {
        format(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(ms))
    }

    #[test]
    fn known_instants_match_python_datetime() {
        // Reference values from Python's datetime.fromtimestamp(t, timezone.utc).
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 0), "2000-02-29T00:00:00.000Z");
        assert_eq!(at(1_709_164_800, 0), "2024-02-29T00:00:00.000Z");
        assert_eq!(at(1_795_000_000, 123), "2026-11-18T11:06:40.123Z");
        assert_eq!(at(4_107_542_399, 999), "2100-02-28T23:59:59.999Z");
    }

    #[test]
    fn a_clock_before_1970_does_not_panic() {
        assert_eq!(format(UNIX_EPOCH - Duration::from_secs(5)), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn every_day_boundary_of_four_centuries_is_one_day_apart() {
        // Day n and day n+1 differ in the day field, or roll the month/year over, never repeat.
        let mut prev = civil(-1);
        for n in 0..146_097 {
            let cur = civil(n);
            assert_ne!(cur, prev, "day {n}");
            assert!((1..=12).contains(&cur.1) && (1..=31).contains(&cur.2), "day {n}: {cur:?}");
            prev = cur;
        }
        assert_eq!(civil(146_097), (2370, 1, 1));
    }
}
