//! Window arithmetic: which time window an instant belongs to, in a job's
//! time zone, and the key that names it. Windows are civil: a day is the
//! span between two local midnights (23 or 25 hours across daylight saving
//! changes), an hour is one hour of local clock time, N minutes (a divisor
//! of an hour) are a slice of a local clock hour, a quarter is three civil
//! months from the 1st of January, April, July or October, a week runs Monday to
//! Monday (ISO 8601), a month runs from local midnight of its 1st to local
//! midnight of the next month's 1st (28 to 31 days, give or take a
//! daylight-saving shift). Consecutive windows tile time with no gap and no
//! overlap, because every window ends exactly where the next one starts.

use std::fmt;
use std::str::FromStr;

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, ZonedDateTime};

use crate::core::error::{Error, Result};

/// The length of a job's windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    /// N minutes of local clock time, N a divisor of 60 below it (1, 2, 3,
    /// 4, 5, 6, 10, 12, 15, 20 or 30), aligned to the clock's hours.
    Minutes(u8),
    /// One hour of local clock time.
    Hour,
    /// One civil day, local midnight to local midnight.
    Day,
    /// One ISO week, Monday 00:00 to the next Monday 00:00.
    Week,
    /// One civil month, local midnight of the 1st to local midnight of the
    /// next month's 1st.
    Month,
    /// One civil quarter: three months from local midnight of the 1st of
    /// January, April, July or October.
    Quarter,
}

/// The minute windows there are: the divisors of an hour below it.
pub const MINUTES: [u8; 11] = [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30];

impl FromStr for WindowKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<WindowKind> {
        if let Some(n) = s
            .strip_suffix('m')
            .and_then(|n| n.parse::<u8>().ok())
            .filter(|n| MINUTES.contains(n))
        {
            return Ok(WindowKind::Minutes(n));
        }
        match s {
            "hour" | "60m" => Ok(WindowKind::Hour),
            "day" => Ok(WindowKind::Day),
            "week" => Ok(WindowKind::Week),
            "month" => Ok(WindowKind::Month),
            "quarter" => Ok(WindowKind::Quarter),
            other => Err(Error::input(format!(
                "unknown window `{other}`: use `hour`, `day`, `week`, `month`, `quarter`, or \
                 minutes that divide an hour (`1m`, `2m`, `3m`, `4m`, `5m`, `6m`, `10m`, `12m`, \
                 `15m`, `20m`, `30m`)"
            ))),
        }
    }
}

impl fmt::Display for WindowKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WindowKind::Minutes(n) => write!(f, "{n}m"),
            WindowKind::Hour => f.write_str("hour"),
            WindowKind::Day => f.write_str("day"),
            WindowKind::Week => f.write_str("week"),
            WindowKind::Month => f.write_str("month"),
            WindowKind::Quarter => f.write_str("quarter"),
        }
    }
}

/// Written as configs name it (`hour`, `15m`).
impl serde::Serialize for WindowKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for WindowKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<WindowKind, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A job name: letters, digits, `.`, `_` and `-`, at most 64 characters, so
/// that keys are unambiguous (`:` separates the job from the label).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobName(String);

impl JobName {
    /// Validates a job name.
    ///
    /// # Errors
    ///
    /// `Error::Input` when the name is empty, too long or has other characters.
    pub fn new(name: &str) -> Result<JobName> {
        let ok = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if ok {
            Ok(JobName(name.to_string()))
        } else {
            Err(Error::input(format!(
                "invalid job name `{name}`: use 1 to 64 letters, digits, `.`, `_` or `-`"
            )))
        }
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The key of one window of one job: `<job>:<label>`. Exactly one run per
/// key succeeds; it is the claim store's primary key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WindowKey(String);

impl WindowKey {
    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Wraps a key read back from the store.
    pub fn from_stored(key: String) -> WindowKey {
        WindowKey(key)
    }
}

impl fmt::Display for WindowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A named IANA time zone, resolved against the tz database bundled into the
/// binary (so a run computes the same windows on every machine).
#[derive(Debug, Clone, PartialEq)]
pub struct Zone {
    name: String,
    tz: TimeZone,
}

impl Zone {
    /// Looks up an IANA zone name such as `Europe/Berlin` or `UTC`.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the zone when the database does not know it.
    pub fn new(name: &str) -> Result<Zone> {
        match TimeZone::get(name) {
            Ok(tz) => Ok(Zone {
                name: name.to_string(),
                tz,
            }),
            Err(_) => Err(Error::input(format!(
                "unknown time zone `{name}`: use an IANA name such as `UTC`, \
                 `Europe/Berlin` or `America/New_York`"
            ))),
        }
    }

    /// UTC.
    pub fn utc() -> Zone {
        Zone {
            name: "UTC".to_string(),
            tz: TimeZone::UTC,
        }
    }

    /// The zone's IANA name as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The zone's rules.
    pub fn time_zone(&self) -> &TimeZone {
        &self.tz
    }
}

/// One window of one job: `[start, end)` in UTC, with its civil label.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// The job the window belongs to.
    pub job: JobName,
    /// What kind of window this is.
    pub kind: WindowKind,
    /// The zone whose calendar defines the window.
    pub zone: Zone,
    /// The first instant inside the window.
    pub start: Timestamp,
    /// The first instant after the window.
    pub end: Timestamp,
    /// The civil label: `2026-11-08`, `2026-11-08T13:00+01:00`, `2026-W45`
    /// or `2026-11`.
    pub label: String,
}

impl Window {
    /// The window's key, `<job>:<label>`.
    pub fn key(&self) -> WindowKey {
        WindowKey(format!("{}:{}", self.job, self.label))
    }

    /// The window that contains `instant`.
    ///
    /// # Errors
    ///
    /// `Error::Input` if the instant is so close to the ends of the supported
    /// range (years -9999 and 9999) that the window cannot be computed.
    pub fn containing(
        job: &JobName,
        kind: WindowKind,
        zone: &Zone,
        instant: Timestamp,
    ) -> Result<Window> {
        let out_of_range = |e: jiff::Error| {
            Error::input(format!("instant `{instant}` is out of range")).because(e)
        };
        let local = instant.to_zoned_datetime(zone.tz.clone());
        let (start, end, label) = match kind {
            WindowKind::Day => {
                let start = local.start_of_day().map_err(out_of_range)?;
                let end = start
                    .tomorrow()
                    .and_then(|t| t.start_of_day())
                    .map_err(out_of_range)?;
                let label = start.datetime().date().to_string();
                (start.timestamp(), end.timestamp(), label)
            }
            WindowKind::Week => {
                let back = i64::from(local.weekday().to_monday_zero_offset());
                let monday = local
                    .datetime()
                    .date()
                    .checked_sub(jiff::Span::new().days(back))
                    .map_err(out_of_range)?;
                let start = civil_start(monday.to_datetime(jiff::civil::Time::midnight()), zone)?;
                let next = monday
                    .checked_add(jiff::Span::new().days(7))
                    .map_err(out_of_range)?;
                let end = civil_start(next.to_datetime(jiff::civil::Time::midnight()), zone)?;
                let iso = monday.iso_week_date();
                let label = format!("{:04}-W{:02}", iso.year(), iso.week());
                (start, end, label)
            }
            WindowKind::Hour | WindowKind::Minutes(_) => {
                let seconds = match kind {
                    WindowKind::Minutes(n) => i64::from(n) * 60,
                    _ => 3600,
                };
                let (start, end) =
                    clock_bounds(&zone.tz, instant, seconds).map_err(out_of_range)?;
                let start_local = start.to_zoned_datetime(zone.tz.clone());
                (start, end, hour_label(&start_local))
            }
            WindowKind::Quarter => {
                let date = local.datetime().date();
                let first = jiff::civil::Date::new(date.year(), (date.month() - 1) / 3 * 3 + 1, 1)
                    .map_err(out_of_range)?;
                let start = civil_start(first.to_datetime(jiff::civil::Time::midnight()), zone)?;
                let next = first
                    .checked_add(jiff::Span::new().months(3))
                    .map_err(out_of_range)?;
                let end = civil_start(next.to_datetime(jiff::civil::Time::midnight()), zone)?;
                let label = format!("{:04}-Q{}", first.year(), (first.month() - 1) / 3 + 1);
                (start, end, label)
            }
            WindowKind::Month => {
                let first = local.datetime().date().first_of_month();
                let start = civil_start(first.to_datetime(jiff::civil::Time::midnight()), zone)?;
                let next = first
                    .checked_add(jiff::Span::new().months(1))
                    .map_err(out_of_range)?;
                let end = civil_start(next.to_datetime(jiff::civil::Time::midnight()), zone)?;
                let label = format!("{:04}-{:02}", first.year(), first.month());
                (start, end, label)
            }
        };
        Ok(Window {
            job: job.clone(),
            kind,
            zone: zone.clone(),
            start,
            end,
            label,
        })
    }

    /// The last window that had fully closed at `now`: the one that ends at or
    /// before `now` and has no closed window after it.
    ///
    /// # Errors
    ///
    /// As [`Window::containing`].
    pub fn last_closed(
        job: &JobName,
        kind: WindowKind,
        zone: &Zone,
        now: Timestamp,
    ) -> Result<Window> {
        let current = Window::containing(job, kind, zone, now)?;
        let just_before = current
            .start
            .checked_sub(SignedDuration::from_nanos(1))
            .map_err(|e| Error::input(format!("instant `{now}` is out of range")).because(e))?;
        Window::containing(job, kind, zone, just_before)
    }

    /// The window whose label is `label` (as [`Window::label`] prints it for
    /// `kind` in `zone`), or `None` when no window of that kind and zone has
    /// it.
    pub fn labelled(job: &JobName, kind: WindowKind, zone: &Zone, label: &str) -> Option<Window> {
        let midnight = jiff::civil::Time::midnight();
        let inside = match kind {
            WindowKind::Day => {
                let date = label.parse::<jiff::civil::Date>().ok()?;
                civil_start(date.to_datetime(midnight), zone).ok()?
            }
            WindowKind::Month => {
                let (year, month) = label.split_once('-')?;
                let date =
                    jiff::civil::Date::new(year.parse().ok()?, month.parse().ok()?, 1).ok()?;
                civil_start(date.to_datetime(midnight), zone).ok()?
            }
            WindowKind::Week => {
                let (year, week) = label.split_once("-W")?;
                let iso = jiff::civil::ISOWeekDate::new(
                    year.parse().ok()?,
                    week.parse().ok()?,
                    jiff::civil::Weekday::Monday,
                )
                .ok()?;
                civil_start(iso.date().to_datetime(midnight), zone).ok()?
            }
            WindowKind::Quarter => {
                let (year, q) = label.split_once("-Q")?;
                let q: i8 = q.parse().ok().filter(|q| (1..=4).contains(q))?;
                let date = jiff::civil::Date::new(year.parse().ok()?, (q - 1) * 3 + 1, 1).ok()?;
                civil_start(date.to_datetime(midnight), zone).ok()?
            }
            // `2026-11-01T01:00-05:00`: an instant, once seconds are added.
            WindowKind::Hour | WindowKind::Minutes(_) => {
                let (date_hour, offset) = label.split_at_checked(16)?;
                format!("{date_hour}:00{offset}")
                    .parse::<Timestamp>()
                    .ok()?
            }
        };
        let w = Window::containing(job, kind, zone, inside).ok()?;
        (w.label == label).then_some(w)
    }

    /// The window that follows this one.
    ///
    /// # Errors
    ///
    /// As [`Window::containing`].
    pub fn next(&self) -> Result<Window> {
        Window::containing(&self.job, self.kind, &self.zone, self.end)
    }
}

/// The slice of `seconds` (an hour, or minutes that divide one) of local
/// clock time containing `t`: it starts at the later of the last local
/// boundary (`hh:00`, `hh:15`, ...) and the last offset change, and ends at
/// the earlier of the next ones. Whole-hour offset changes land on a
/// boundary anyway (the repeated hour of a fall-back night is a second set
/// of slices, with the other offset in their labels); a half-hour change
/// (Lord Howe Island) makes one hour window half an hour long instead of
/// leaving a gap or an overlap.
fn clock_bounds(
    tz: &TimeZone,
    t: Timestamp,
    seconds: i64,
) -> std::result::Result<(Timestamp, Timestamp), jiff::Error> {
    let offset = i64::from(tz.to_offset(t).seconds());
    let aligned = (t.as_second() + offset).div_euclid(seconds) * seconds - offset;
    let mut start = Timestamp::from_second(aligned)?;
    let mut end = start.checked_add(SignedDuration::from_secs(seconds))?;
    let after = t.checked_add(SignedDuration::from_nanos(1))?;
    if let Some(change) = tz.preceding(after).next() {
        start = start.max(change.timestamp());
    }
    if let Some(change) = tz.following(t).next() {
        end = end.min(change.timestamp());
    }
    Ok((start, end))
}

/// `2026-11-08T13:00+01:00` (an hour) or `2026-11-08T13:15+01:00` (a
/// slice of one): the offset keeps the two 01:00 hours of a daylight-saving
/// fall-back night apart.
fn hour_label(start: &ZonedDateTime) -> String {
    let dt = start.datetime();
    let offset = start.offset().seconds();
    let sign = if offset < 0 { '-' } else { '+' };
    let abs = offset.unsigned_abs();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}{}{:02}:{:02}",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        sign,
        abs / 3600,
        (abs % 3600) / 60
    )
}

/// The first instant of a civil date-time in `zone`. Midnight can fall in a
/// daylight-saving gap in a few zones; then the day starts at the first
/// instant after the gap, as `start_of_day` does.
fn civil_start(dt: DateTime, zone: &Zone) -> Result<Timestamp> {
    let zoned = dt
        .to_zoned_datetime(zone.tz.clone())
        .and_then(|z| z.start_of_day())
        .map_err(|e| Error::input(format!("date `{dt}` is out of range")).because(e))?;
    Ok(zoned.timestamp())
}

/// Parses an RFC 9557 zoned date-time such as `2026-11-09T09:05:00[Asia/Tokyo]`.
pub(crate) fn parse_zoned(text: &str) -> std::result::Result<ZonedDateTime, String> {
    text.parse::<ZonedDateTime>().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn job() -> JobName {
        JobName::new("daily-report").unwrap()
    }

    fn closed(kind: WindowKind, zone: &str, now: &str) -> Window {
        Window::last_closed(&job(), kind, &Zone::new(zone).unwrap(), ts(now)).unwrap()
    }

    #[test]
    fn just_after_utc_midnight_reports_the_previous_utc_day() {
        let w = closed(WindowKind::Day, "UTC", "2026-11-09T00:05:00Z");
        assert_eq!(w.key().as_str(), "daily-report:2026-11-08");
        assert_eq!(w.start, ts("2026-11-08T00:00:00Z"));
        assert_eq!(w.end, ts("2026-11-09T00:00:00Z"));
    }

    #[test]
    fn exactly_at_midnight_the_day_that_just_ended_is_reported() {
        let w = closed(WindowKind::Day, "UTC", "2026-11-09T00:00:00Z");
        assert_eq!(w.label, "2026-11-08");
    }

    #[test]
    fn tokyo_days_start_at_tokyo_midnight() {
        let w = closed(WindowKind::Day, "Asia/Tokyo", "2026-11-09T00:30:00+09:00");
        assert_eq!(w.label, "2026-11-08");
        assert_eq!(w.start, ts("2026-11-07T15:00:00Z"));
        assert_eq!(w.end, ts("2026-11-08T15:00:00Z"));
    }

    #[test]
    fn the_day_daylight_saving_starts_in_berlin_lasts_23_hours() {
        let w = closed(
            WindowKind::Day,
            "Europe/Berlin",
            "2026-03-30T00:05:00+02:00",
        );
        assert_eq!(w.label, "2026-03-29");
        assert_eq!(
            w.end.duration_since(w.start),
            SignedDuration::from_hours(23)
        );
    }

    #[test]
    fn the_day_daylight_saving_ends_in_new_york_lasts_25_hours() {
        let w = closed(
            WindowKind::Day,
            "America/New_York",
            "2026-11-02T00:05:00-05:00",
        );
        assert_eq!(w.label, "2026-11-01");
        assert_eq!(w.start, ts("2026-11-01T04:00:00Z"));
        assert_eq!(
            w.end.duration_since(w.start),
            SignedDuration::from_hours(25)
        );
    }

    #[test]
    fn fall_back_night_has_two_distinct_one_oclock_hours() {
        let zone = Zone::new("America/New_York").unwrap();
        let first = Window::containing(&job(), WindowKind::Hour, &zone, ts("2026-11-01T05:30:00Z"))
            .unwrap();
        let second = first.next().unwrap();
        assert_eq!(first.label, "2026-11-01T01:00-04:00");
        assert_eq!(second.label, "2026-11-01T01:00-05:00");
        assert_ne!(first.key(), second.key());
    }

    #[test]
    fn hours_across_both_dst_days_number_23_and_25() {
        for (zone, spring, fall) in [
            ("America/New_York", "2026-03-08", "2026-11-01"),
            ("Europe/Berlin", "2026-03-29", "2026-10-25"),
        ] {
            let z = Zone::new(zone).unwrap();
            for (day, expected) in [(spring, 23), (fall, 25)] {
                let day_w = Window::containing(
                    &job(),
                    WindowKind::Day,
                    &z,
                    format!("{day}T12:00:00[{zone}]")
                        .parse::<ZonedDateTime>()
                        .unwrap()
                        .timestamp(),
                )
                .unwrap();
                let mut w = Window::containing(&job(), WindowKind::Hour, &z, day_w.start).unwrap();
                let mut n = 0;
                let mut keys = std::collections::BTreeSet::new();
                while w.start < day_w.end {
                    keys.insert(w.key());
                    n += 1;
                    w = w.next().unwrap();
                }
                assert_eq!(w.start, day_w.end, "hours end exactly at the day's end");
                assert_eq!((zone, day, n), (zone, day, expected));
                assert_eq!(keys.len(), expected);
            }
        }
    }

    #[test]
    fn weeks_run_monday_to_monday_with_iso_labels() {
        let w = closed(WindowKind::Week, "UTC", "2026-11-11T10:00:00Z");
        assert_eq!(w.label, "2026-W45");
        assert_eq!(w.start, ts("2026-11-02T00:00:00Z"));
        assert_eq!(w.end, ts("2026-11-09T00:00:00Z"));
        // ISO week 1 of 2027 starts on Monday 2027-01-04; 2027-01-02 is in 2026-W53.
        let z = Zone::utc();
        let w =
            Window::containing(&job(), WindowKind::Week, &z, ts("2027-01-02T12:00:00Z")).unwrap();
        assert_eq!(w.label, "2026-W53");
    }

    #[test]
    fn windows_tile_time_without_gap_or_overlap() {
        for zone in [
            "UTC",
            "America/New_York",
            "Europe/Berlin",
            "Asia/Kolkata",
            "Australia/Lord_Howe",
        ] {
            let z = Zone::new(zone).unwrap();
            // (Minute windows are tiled across the DST days by their own
            // tests; a year of them here would take seconds.)
            for kind in [
                WindowKind::Hour,
                WindowKind::Day,
                WindowKind::Week,
                WindowKind::Month,
                WindowKind::Quarter,
            ] {
                let mut w =
                    Window::containing(&job(), kind, &z, ts("2026-01-01T00:00:00Z")).unwrap();
                let stop = ts("2027-01-10T00:00:00Z");
                let mut keys = std::collections::HashSet::new();
                while w.start < stop {
                    assert!(w.start < w.end, "{zone} {kind} {}", w.label);
                    // Every instant inside maps back to this window.
                    let mid = w.start + (w.end.duration_since(w.start) / 2);
                    let again = Window::containing(&job(), kind, &z, mid).unwrap();
                    assert_eq!(again.start, w.start, "{zone} {kind} {}", w.label);
                    let last =
                        Window::containing(&job(), kind, &z, w.end - SignedDuration::from_nanos(1))
                            .unwrap();
                    assert_eq!(last.start, w.start, "{zone} {kind} {}", w.label);
                    assert!(keys.insert(w.key()), "duplicate key {}", w.key());
                    let next = w.next().unwrap();
                    assert_eq!(next.start, w.end, "gap or overlap after {zone} {}", w.label);
                    w = next;
                }
            }
        }
    }

    /// The months of 2026 in `zone`: label, start and length in minutes.
    fn months_of_2026(zone: &str) -> Vec<(String, Timestamp, i64)> {
        let z = Zone::new(zone).unwrap();
        let first = format!("2026-01-01T00:00:00[{zone}]")
            .parse::<ZonedDateTime>()
            .unwrap()
            .timestamp();
        let mut w = Window::containing(&job(), WindowKind::Month, &z, first).unwrap();
        let mut out = Vec::new();
        while w.label.starts_with("2026") {
            let minutes = w.end.duration_since(w.start).as_secs() / 60;
            out.push((w.label.clone(), w.start, minutes));
            w = w.next().unwrap();
        }
        out
    }

    const DAYS_2026: [i64; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

    #[test]
    fn months_run_from_the_first_to_the_first_with_28_to_31_days_in_utc() {
        let months = months_of_2026("UTC");
        assert_eq!(months.len(), 12);
        for (i, (label, start, minutes)) in months.iter().enumerate() {
            assert_eq!(label, &format!("2026-{:02}", i + 1));
            assert_eq!(*start, ts(&format!("2026-{:02}-01T00:00:00Z", i + 1)));
            assert_eq!(*minutes, DAYS_2026[i] * 24 * 60, "{label}");
        }
        let w = closed(WindowKind::Month, "UTC", "2026-03-01T00:00:00Z");
        assert_eq!(w.key().as_str(), "daily-report:2026-02");
        assert_eq!(w.end, ts("2026-03-01T00:00:00Z"));
        let leap = Window::containing(
            &job(),
            WindowKind::Month,
            &Zone::utc(),
            ts("2028-02-29T23:59:59Z"),
        )
        .unwrap();
        assert_eq!(leap.label, "2028-02");
        assert_eq!(leap.end, ts("2028-03-01T00:00:00Z"));
    }

    #[test]
    fn months_start_at_local_midnight_and_absorb_the_daylight_saving_shift() {
        // (zone, month, its first instant, how many minutes it differs from
        // its days times 24 hours)
        let cases = [
            ("Europe/Berlin", "2026-01", "2025-12-31T23:00:00Z", 0),
            ("Europe/Berlin", "2026-02", "2026-01-31T23:00:00Z", 0),
            ("Europe/Berlin", "2026-03", "2026-02-28T23:00:00Z", -60),
            ("Europe/Berlin", "2026-04", "2026-03-31T22:00:00Z", 0),
            ("Europe/Berlin", "2026-10", "2026-09-30T22:00:00Z", 60),
            ("Europe/Berlin", "2026-11", "2026-10-31T23:00:00Z", 0),
            ("America/New_York", "2026-02", "2026-02-01T05:00:00Z", 0),
            ("America/New_York", "2026-03", "2026-03-01T05:00:00Z", -60),
            ("America/New_York", "2026-04", "2026-04-01T04:00:00Z", 0),
            ("America/New_York", "2026-11", "2026-11-01T04:00:00Z", 60),
            ("America/New_York", "2026-12", "2026-12-01T05:00:00Z", 0),
            // Lord Howe moves its clocks by half an hour: back on 5 April,
            // forward on 4 October.
            ("Australia/Lord_Howe", "2026-02", "2026-01-31T13:00:00Z", 0),
            ("Australia/Lord_Howe", "2026-04", "2026-03-31T13:00:00Z", 30),
            ("Australia/Lord_Howe", "2026-05", "2026-04-30T13:30:00Z", 0),
            (
                "Australia/Lord_Howe",
                "2026-10",
                "2026-09-30T13:30:00Z",
                -30,
            ),
            ("Australia/Lord_Howe", "2026-11", "2026-10-31T13:00:00Z", 0),
        ];
        for (zone, label, start, shift) in cases {
            let months = months_of_2026(zone);
            assert_eq!(months.len(), 12, "{zone}");
            let i = months.iter().position(|m| m.0 == label).unwrap();
            assert_eq!(months[i].1, ts(start), "{zone} {label} starts");
            assert_eq!(
                months[i].2,
                DAYS_2026[i] * 24 * 60 + shift,
                "{zone} {label} lasts"
            );
        }
        for zone in ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe"] {
            let total: i64 = months_of_2026(zone).iter().map(|m| m.2).sum();
            assert_eq!(
                total,
                365 * 24 * 60,
                "{zone}: the shifts cancel over the year"
            );
        }
    }

    #[test]
    fn every_label_names_its_window_and_nothing_else_does() {
        let zones = [
            "UTC",
            "Europe/Berlin",
            "America/New_York",
            "Australia/Lord_Howe",
        ];
        for zone in zones {
            let z = Zone::new(zone).unwrap();
            // (Minute windows' labels are checked across a fall-back night by
            // their own test; a year of them here would take seconds.)
            for kind in [
                WindowKind::Hour,
                WindowKind::Day,
                WindowKind::Week,
                WindowKind::Month,
                WindowKind::Quarter,
            ] {
                let mut w =
                    Window::containing(&job(), kind, &z, ts("2026-01-01T00:00:00Z")).unwrap();
                let stop = ts("2027-01-01T00:00:00Z");
                while w.start < stop {
                    let again = Window::labelled(&job(), kind, &z, &w.label);
                    assert_eq!(again.as_ref(), Some(&w), "{zone} {kind} {}", w.label);
                    w = w.next().unwrap();
                }
            }
        }
        let ny = Zone::new("America/New_York").unwrap();
        let second =
            Window::labelled(&job(), WindowKind::Hour, &ny, "2026-11-01T01:00-05:00").unwrap();
        assert_eq!(second.start, ts("2026-11-01T06:00:00Z"));
        for (kind, label) in [
            (WindowKind::Month, "2026-13"),
            (WindowKind::Month, "2026-1"),
            (WindowKind::Month, "2026-11-03"),
            (WindowKind::Day, "2026-02-30"),
            (WindowKind::Day, "2026-11"),
            (WindowKind::Week, "2026-W54"),
            (WindowKind::Week, "2026-11-03"),
            // Not an hour in New York's calendar: wrong offset, not on the hour.
            (WindowKind::Hour, "2026-07-01T01:00-05:00"),
            (WindowKind::Hour, "2026-07-01T01:30-04:00"),
            (WindowKind::Hour, "2026-07-01T01:00"),
            (WindowKind::Hour, "2026-07-01T01:00-04:00\u{e9}"),
            (WindowKind::Day, ""),
        ] {
            assert_eq!(
                Window::labelled(&job(), kind, &ny, label),
                None,
                "{kind} {label}"
            );
        }
    }

    #[test]
    fn unknown_zones_and_bad_job_names_are_named_in_the_error() {
        let err = Zone::new("Mars/Olympus_Mons").unwrap_err().to_string();
        assert!(err.contains("`Mars/Olympus_Mons`"), "{err}");
        assert!(JobName::new("a:b").is_err());
        assert!(JobName::new("").is_err());
        assert!(JobName::new("daily_report-2.v1").is_ok());
    }

    #[test]
    fn minute_windows_slice_the_clock_hour_and_the_fall_back_night_has_two_sets() {
        let zone = Zone::new("America/New_York").unwrap();
        let w = Window::containing(
            &job(),
            WindowKind::Minutes(15),
            &zone,
            ts("2026-11-08T19:20:00Z"),
        )
        .unwrap();
        assert_eq!(w.label, "2026-11-08T14:15-05:00");
        assert_eq!(w.end.duration_since(w.start).as_secs(), 900);
        // 00:00 to 03:00 local on the fall-back night: 4 hours of clock
        // time, 16 quarter-hours, the 01:xx ones twice with their offsets.
        let mut w = Window::containing(
            &job(),
            WindowKind::Minutes(15),
            &zone,
            ts("2026-11-01T04:00:00Z"),
        )
        .unwrap();
        let mut labels = Vec::new();
        while w.start < ts("2026-11-01T08:00:00Z") {
            labels.push(w.label.clone());
            let next = w.next().unwrap();
            assert_eq!(next.start, w.end, "no gap, no overlap");
            w = next;
        }
        assert_eq!(labels.len(), 16, "{labels:?}");
        assert!(labels.contains(&"2026-11-01T01:45-04:00".to_string()));
        assert!(labels.contains(&"2026-11-01T01:45-05:00".to_string()));
        let unique: std::collections::BTreeSet<_> = labels.iter().collect();
        assert_eq!(unique.len(), 16, "the repeated hour's slices are distinct");
        for l in &labels {
            let back = Window::labelled(&job(), WindowKind::Minutes(15), &zone, l).unwrap();
            assert_eq!(&back.label, l);
        }
    }

    #[test]
    fn every_minute_length_tiles_a_day_across_spring_forward() {
        let zone = Zone::new("Europe/Berlin").unwrap();
        for n in MINUTES {
            let kind = WindowKind::Minutes(n);
            let mut w =
                Window::containing(&job(), kind, &zone, ts("2026-03-28T23:00:00Z")).unwrap();
            let mut count = 0;
            while w.start < ts("2026-03-29T22:00:00Z") {
                assert_eq!(w.end.duration_since(w.start).as_secs(), i64::from(n) * 60);
                w = w.next().unwrap();
                count += 1;
            }
            // A 23-hour local day.
            assert_eq!(count, 23 * 60 / usize::from(n), "{n}m");
        }
    }

    #[test]
    fn a_half_hour_shift_cuts_a_slice_short_without_a_gap() {
        // Lord Howe Island moves its clocks by 30 minutes.
        let zone = Zone::new("Australia/Lord_Howe").unwrap();
        let mut w = Window::containing(
            &job(),
            WindowKind::Minutes(20),
            &zone,
            ts("2026-04-04T12:00:00Z"),
        )
        .unwrap();
        let mut shortest = i64::MAX;
        while w.start < ts("2026-04-05T12:00:00Z") {
            let next = w.next().unwrap();
            assert_eq!(next.start, w.end);
            shortest = shortest.min(w.end.duration_since(w.start).as_secs());
            w = next;
        }
        assert_eq!(shortest, 600, "gcd(20, 30) minutes");
        assert!(
            crate::core::schedule::max_jitter(WindowKind::Minutes(20)).as_secs() < 600,
            "the jitter keeps the due moments in order"
        );
    }

    #[test]
    fn quarters_run_from_the_first_of_their_first_month_with_q_labels() {
        let zone = Zone::new("Europe/Berlin").unwrap();
        let w = Window::containing(
            &job(),
            WindowKind::Quarter,
            &zone,
            ts("2026-11-09T12:00:00Z"),
        )
        .unwrap();
        assert_eq!(w.label, "2026-Q4");
        assert_eq!(
            w.start,
            ts("2026-09-30T22:00:00Z"),
            "local midnight, summer time"
        );
        assert_eq!(w.end, ts("2026-12-31T23:00:00Z"));
        let q1 = Window::last_closed(
            &job(),
            WindowKind::Quarter,
            &zone,
            ts("2027-04-01T00:00:00Z"),
        )
        .unwrap();
        assert_eq!(q1.label, "2027-Q1");
        assert_eq!(
            Window::labelled(&job(), WindowKind::Quarter, &zone, "2026-Q2")
                .unwrap()
                .start,
            ts("2026-03-31T22:00:00Z")
        );
        for bad in ["2026-Q0", "2026-Q5", "2026-4", "2026-Q1x"] {
            assert!(
                Window::labelled(&job(), WindowKind::Quarter, &zone, bad).is_none(),
                "{bad}"
            );
        }
    }

    #[test]
    fn window_lengths_parse_and_print_as_configs_write_them() {
        for n in MINUTES {
            let kind: WindowKind = format!("{n}m").parse().unwrap();
            assert_eq!(kind, WindowKind::Minutes(n));
            assert_eq!(kind.to_string(), format!("{n}m"));
        }
        assert_eq!(
            "quarter".parse::<WindowKind>().unwrap(),
            WindowKind::Quarter
        );
        for bad in ["7m", "0m", "45m", "90m", "m", "15", "15min"] {
            let err = bad.parse::<WindowKind>().unwrap_err().to_string();
            assert!(err.contains(bad) && err.contains("15m"), "{bad}: {err}");
        }
    }
}
