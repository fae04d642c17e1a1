//! Times written without a zone: a PostgreSQL `timestamp` (without time
//! zone) or `date`, and the text of a SQLite column declared as a date or
//! a timestamp. Such a value is an instant only once a zone is chosen, and
//! a source never chooses one itself: the job's `[source] naive_timestamps`
//! does ([`NaiveTimes`]), or the column is refused before the claim.
//!
//! A value is read through its wall time (its fields taken as if they
//! were UTC, in whole seconds): as it is for `"utc"`, and for `"job-zone"`
//! through the job's zone with PostgreSQL's rule for the local times a
//! change of the clocks skips or repeats. PostgreSQL gives a skipped time
//! the offset in effect just before the change and a repeated time the
//! offset in effect just after it: of the two instants a wall time could
//! be, always the later one. A source's window filter (PostgreSQL's own
//! conversion in the session's zone, or SQLite's text bounds from
//! [`NaiveTimes::bound_text`]) follows the same rule, so the rows a window
//! reads are exactly those whose values lie inside it.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use crate::core::window::Zone;

/// How a source reads a time written without a zone (`[source]
/// naive_timestamps`).
#[derive(Debug, Clone, PartialEq)]
pub enum NaiveTimes {
    /// It does not: a column of such values is refused before the claim
    /// (the default). The job's zone is named in the refusal's example.
    Refused(Zone),
    /// As UTC (`"utc"`).
    Utc,
    /// As local times in the job's zone (`"job-zone"`).
    JobZone(Zone),
}

impl NaiveTimes {
    /// The zone a source's session works in: the job's for `"job-zone"`,
    /// else UTC.
    pub(super) fn session_zone(&self) -> &str {
        match self {
            NaiveTimes::JobZone(zone) => zone.name(),
            NaiveTimes::Refused(_) | NaiveTimes::Utc => "UTC",
        }
    }

    /// Whether such values are refused.
    pub(super) fn refused(&self) -> bool {
        matches!(self, NaiveTimes::Refused(_))
    }

    /// The instant of a wall time, in Unix seconds: `wall` is the value's
    /// fields taken as UTC, rounded down to the second.
    ///
    /// # Errors
    ///
    /// A few words for a value outside the years jobhost reads (-9999 to
    /// 9999) in the job's zone, or when values are refused.
    pub(super) fn read(&self, wall: i64) -> Result<i64, String> {
        match self {
            NaiveTimes::Utc => Ok(wall),
            NaiveTimes::JobZone(zone) => {
                let out_of_range = |_| {
                    "holds a date-time outside the years -9999 to 9999, which jobhost cannot \
                     place in a zone"
                        .to_string()
                };
                let local =
                    TimeZone::UTC.to_datetime(Timestamp::from_second(wall).map_err(out_of_range)?);
                let at = zone
                    .time_zone()
                    .to_ambiguous_timestamp(local)
                    .later()
                    .map_err(out_of_range)?;
                Ok(at.as_second())
            }
            NaiveTimes::Refused(_) => Err("holds a time without a zone".to_string()),
        }
    }

    /// An instant as the wall time of the first value read at or after
    /// it, as text (`2026-11-04 00:00:00`): a column of such text is
    /// inside `[start, end)` exactly when it is at least the start's text
    /// and below the end's. `None` when such values are refused.
    pub(super) fn bound_text(&self, at: Timestamp) -> Option<String> {
        let wall = match self {
            NaiveTimes::Refused(_) => return None,
            NaiveTimes::Utc => TimeZone::UTC.to_datetime(at),
            NaiveTimes::JobZone(zone) => first_wall_at_or_after(zone.time_zone(), at),
        };
        Some(wall.strftime("%Y-%m-%d %H:%M:%S%.f").to_string())
    }

    /// The fix a refusal names: the setting, and what each value does
    /// with `them`.
    pub(super) fn setting_hint(&self, them: &str) -> String {
        format!(
            "set `naive_timestamps = \"job-zone\"` in `[source]` to read {them} as local times \
             in {}, or `\"utc\"` to read {them} as UTC",
            self.example_zone()
        )
    }

    /// The zone a refusal's example names: the job's.
    pub(super) fn example_zone(&self) -> &str {
        match self {
            NaiveTimes::Refused(zone) | NaiveTimes::JobZone(zone) => zone.name(),
            NaiveTimes::Utc => "UTC",
        }
    }
}

/// The earliest wall time that reads (by the later of its instants) as
/// `at` or after it. Usually `at`'s own wall time; but when `at` falls in
/// the first pass through a repeated hour, every repeated wall time reads
/// as the second pass, so the bound is where they begin; and when the
/// clocks jump forward at `at`, the skipped wall times read as `at` and
/// the instants after it, so the bound is where they begin.
///
/// Wall times read this way do not rise everywhere with their instants:
/// those just after a skipped gap read as earlier instants than the end
/// of the gap. For `at` strictly inside the gap's length after a jump, no
/// text bound is exact, and `at`'s own wall time is given. No window bound
/// falls there unless the clocks skip more than an hour at once: a bound
/// is a change of offset or a local `hh:00`, and the wall times of the
/// gap's length after a jump of at most an hour hold no `hh:00`.
fn first_wall_at_or_after(tz: &TimeZone, at: Timestamp) -> DateTime {
    let offset_at = |t: Timestamp| SignedDuration::from_secs(i64::from(tz.to_offset(t).seconds()));
    let before_change = |t: Timestamp| {
        t.checked_sub(SignedDuration::from_nanos(1))
            .map_or(offset_at(t), offset_at)
    };
    // A repeat ahead: `at` inside the first pass of the wall times to come again.
    if let Some(next) = tz.following(at).next() {
        let (before, after) = (offset_at(at), offset_at(next.timestamp()));
        if after < before && next.timestamp().duration_since(at) <= before - after {
            return tz.to_datetime(next.timestamp());
        }
    }
    // A jump forward at `at`: the bound is the skipped gap's start.
    let before = before_change(at);
    if offset_at(at) > before
        && let Ok(wall) = at.checked_add(before)
    {
        return TimeZone::UTC.to_datetime(wall);
    }
    tz.to_datetime(at)
}

/// A date-time as a SQLite column holds it in text, read by the grammar of
/// SQLite's date functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Written {
    /// With `Z` or an offset: the instant, in Unix seconds rounded down.
    Instant(i64),
    /// Without a zone: its wall time (its fields as UTC), in whole
    /// seconds rounded down.
    Wall(i64),
}

/// Reads `YYYY-MM-DD`, or `YYYY-MM-DD HH:MM[:SS[.fff]]` (a `T` for the
/// space too) optionally followed by `Z` or `±HH:MM`, as SQLite's date
/// functions do; `None` for anything else.
pub(super) fn parse_text(text: &str) -> Option<Written> {
    let t = text
        .trim_matches(|c: char| c.is_ascii_whitespace())
        .as_bytes();
    let digits = |at: usize, n: usize| -> Option<i32> {
        let d = t.get(at..at + n)?;
        d.iter()
            .all(u8::is_ascii_digit)
            .then(|| d.iter().fold(0, |v, b| v * 10 + i32::from(b - b'0')))
    };
    let sep = |at: usize, c: u8| (t.get(at) == Some(&c)).then_some(());
    let year = digits(0, 4)?;
    sep(4, b'-')?;
    let month = digits(5, 2)?;
    sep(7, b'-')?;
    let day = digits(8, 2)?;
    let date = Date::new(year as i16, month as i8, day as i8).ok()?;
    if t.len() == 10 {
        return wall_seconds(date.to_datetime(Time::midnight())).map(Written::Wall);
    }
    if !matches!(t[10], b' ' | b'T') {
        return None;
    }
    let hour = digits(11, 2)?;
    sep(13, b':')?;
    let minute = digits(14, 2)?;
    let mut i = 16;
    let mut second = 0;
    if sep(i, b':').is_some() {
        second = digits(i + 1, 2)?;
        i += 3;
        if sep(i, b'.').is_some() {
            let n = t[i + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
            if n == 0 {
                return None;
            }
            // Only whole seconds are kept: the fraction only has to be digits.
            i += 1 + n;
        }
    }
    let time = Time::new(hour as i8, minute as i8, second as i8, 0).ok()?;
    let wall = wall_seconds(date.to_datetime(time))?;
    while t.get(i) == Some(&b' ') {
        i += 1;
    }
    match t.get(i) {
        None => Some(Written::Wall(wall)),
        Some(b'Z' | b'z') if i + 1 == t.len() => Some(Written::Instant(wall)),
        Some(&sign @ (b'+' | b'-')) => {
            let hours = digits(i + 1, 2)?;
            sep(i + 3, b':')?;
            let minutes = digits(i + 4, 2)?;
            if i + 6 != t.len() || hours > 23 || minutes > 59 {
                return None;
            }
            let offset = i64::from(hours * 3600 + minutes * 60);
            let offset = if sign == b'-' { -offset } else { offset };
            Some(Written::Instant(wall - offset))
        }
        Some(_) => None,
    }
}

/// A civil date-time's fields as UTC, in Unix seconds.
fn wall_seconds(dt: DateTime) -> Option<i64> {
    TimeZone::UTC.to_timestamp(dt).ok().map(|t| t.as_second())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn berlin() -> NaiveTimes {
        NaiveTimes::JobZone(Zone::new("Europe/Berlin").unwrap())
    }

    fn wall(text: &str) -> i64 {
        at(&format!("{text}Z")).as_second()
    }

    #[test]
    fn a_wall_time_reads_as_utc_or_in_the_job_zone_by_postgresqls_rule() {
        let utc = NaiveTimes::Utc;
        let berlin = berlin();
        let read =
            |n: &NaiveTimes, w: &str| Timestamp::from_second(n.read(wall(w)).unwrap()).unwrap();
        assert_eq!(
            read(&utc, "2026-11-04T00:30:00"),
            at("2026-11-04T00:30:00Z")
        );
        assert_eq!(
            read(&berlin, "2026-11-04T00:30:00"),
            at("2026-11-03T23:30:00Z")
        );
        assert_eq!(
            read(&berlin, "2026-07-01T12:00:00"),
            at("2026-07-01T10:00:00Z")
        );
        // Repeated (02:00 to 03:00 on 2026-10-25): the offset after the
        // change, +01:00; the server answers the same (a test against it is
        // in the end-to-end tests).
        assert_eq!(
            read(&berlin, "2026-10-25T02:30:00"),
            at("2026-10-25T01:30:00Z")
        );
        assert_eq!(
            read(&berlin, "2026-10-25T02:00:00"),
            at("2026-10-25T01:00:00Z")
        );
        assert_eq!(
            read(&berlin, "2026-10-25T01:59:59"),
            at("2026-10-24T23:59:59Z")
        );
        // Skipped (02:00 to 03:00 on 2026-03-29): the offset before, +01:00.
        assert_eq!(
            read(&berlin, "2026-03-29T02:30:00"),
            at("2026-03-29T01:30:00Z")
        );
        assert_eq!(
            read(&berlin, "2026-03-29T03:30:00"),
            at("2026-03-29T01:30:00Z")
        );
        let refused = NaiveTimes::Refused(Zone::utc());
        assert!(refused.read(0).is_err());
        let far = berlin.read(i64::MAX).unwrap_err();
        assert!(far.contains("-9999 to 9999"), "{far}");
        assert_eq!(utc.read(i64::MAX), Ok(i64::MAX));
    }

    #[test]
    fn a_text_bound_admits_exactly_the_wall_times_that_read_inside_the_window() {
        // Around every change of Berlin's clocks in 2026 and New York's,
        // for bounds every 10 minutes and wall times every 10 minutes: a
        // wall time is at or after the bound's text exactly when it reads
        // as an instant at or after the bound.
        for (zone, day) in [
            ("Europe/Berlin", "2026-03-29"),
            ("Europe/Berlin", "2026-10-25"),
            ("America/New_York", "2026-03-08"),
            ("America/New_York", "2026-11-01"),
            ("Australia/Lord_Howe", "2026-04-05"),
        ] {
            let naive = NaiveTimes::JobZone(Zone::new(zone).unwrap());
            let start = wall(&format!("{day}T00:00:00")) - 86_400;
            let walls: Vec<i64> = (0..3 * 144).map(|i| start + i * 600).collect();
            let tz = TimeZone::get(zone).unwrap();
            for b in 0..3 * 144 {
                let bound = Timestamp::from_second(start + b * 600 - 86_400 / 2).unwrap();
                // Strictly inside a gap's length after a jump: no text
                // bound is exact (and no window bound falls there).
                let jumped = tz.preceding(bound).next().map(|c| {
                    (
                        c.timestamp(),
                        c.offset().seconds()
                            - tz.to_offset(c.timestamp() - SignedDuration::from_nanos(1))
                                .seconds(),
                    )
                });
                if jumped.is_some_and(|(t, gap)| {
                    gap > 0 && bound.as_second() < t.as_second() + i64::from(gap)
                }) {
                    continue;
                }
                let text = naive.bound_text(bound).unwrap();
                for &w in &walls {
                    let shown = TimeZone::UTC
                        .to_datetime(Timestamp::from_second(w).unwrap())
                        .strftime("%Y-%m-%d %H:%M:%S")
                        .to_string();
                    let inside = naive.read(w).unwrap() >= bound.as_second();
                    assert_eq!(
                        shown.as_str() >= text.as_str(),
                        inside,
                        "{zone}: wall {shown} against bound {bound} (text {text})"
                    );
                }
            }
        }
        assert_eq!(
            NaiveTimes::Utc
                .bound_text(at("2026-11-04T00:00:00Z"))
                .as_deref(),
            Some("2026-11-04 00:00:00")
        );
        assert_eq!(
            berlin().bound_text(at("2026-11-03T23:00:00Z")).as_deref(),
            Some("2026-11-04 00:00:00")
        );
        assert_eq!(
            NaiveTimes::Refused(Zone::utc()).bound_text(at("2026-11-04T00:00:00Z")),
            None
        );
    }

    #[test]
    fn text_is_read_by_the_grammar_of_sqlites_date_functions() {
        let w = |s: &str| Some(Written::Wall(wall(s)));
        let i = |s: &str| Some(Written::Instant(at(s).as_second()));
        assert_eq!(parse_text("2026-11-04"), w("2026-11-04T00:00:00"));
        assert_eq!(parse_text("2026-11-04 12:30"), w("2026-11-04T12:30:00"));
        assert_eq!(parse_text("2026-11-04T12:30:45"), w("2026-11-04T12:30:45"));
        assert_eq!(
            parse_text(" 2026-11-04 12:30:45.999 "),
            w("2026-11-04T12:30:45")
        );
        assert_eq!(
            parse_text("2026-11-04 12:30:45Z"),
            i("2026-11-04T12:30:45Z")
        );
        assert_eq!(
            parse_text("2026-11-04T12:30:45.5+01:00"),
            i("2026-11-04T11:30:45Z")
        );
        assert_eq!(
            parse_text("2026-11-04 12:30 -05:30"),
            i("2026-11-04T18:00:00Z")
        );
        assert_eq!(parse_text("1969-12-31 23:59:59.5"), Some(Written::Wall(-1)));
        for bad in [
            "",
            "yesterday",
            "2026-11-4",
            "2026-02-30",
            "2026-11-04 24:00",
            "2026-11-04t12:00",
            "2026-11-04 12",
            "2026-11-04 12:00:00.",
            "2026-11-04 12:00+0100",
            "2026-11-04 12:00Z!",
            "2026-11-04T12:00:00[Europe/Berlin]",
            "20261104T120000",
            "12:00",
            "2461000.5",
            "2026-11-04 12:00:00+24:00",
            "२०२६-११-०४",
        ] {
            assert_eq!(parse_text(bad), None, "{bad:?}");
        }
    }
}
