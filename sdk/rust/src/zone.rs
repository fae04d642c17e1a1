//! Local clock time in the run's time zone: [`Window::local`] turns an
//! instant into a [`LocalDateTime`] (the zone's date and time there, with
//! its offset), without a time zone database in the component.
//!
//! The host knows the window's zone (`Window::timezone`) and answers its
//! UTC offsets as spans of constant offset (WIT `zone.offsets`), each with
//! its true extent: the first call asks for the window's spans, keeps them
//! for the rest of the run, and asks again only for an instant none of
//! them holds. The arithmetic from an offset to a date is a few lines
//! (days since the epoch to a civil date).
//!
//! Natively (unit tests, no host) the zone comes from
//! [`testing::set_zone`](crate::testing::set_zone) or
//! [`testing::set_fixed_offset`](crate::testing::set_fixed_offset); `UTC`
//! needs neither.

#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;

use crate::{Error, Instant, Window};

/// A stretch `[start, end)` of time over which a zone's offset from UTC
/// does not change (WIT `offset-span`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OffsetSpan {
    /// The first instant with this offset.
    pub start: Instant,
    /// The first instant after it (exclusive).
    pub end: Instant,
    /// Local time minus UTC, in seconds, east positive (7200 for
    /// Europe/Berlin in summer).
    pub offset_seconds: i32,
}

impl OffsetSpan {
    fn holds(&self, at: Instant) -> bool {
        self.start <= at && at < self.end
    }
}

/// A civil date: a day of the proleptic Gregorian calendar. `Display`
/// writes it as `2026-10-25`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    /// The year (astronomical numbering: 0 is 1 BC).
    pub year: i32,
    /// The month, 1 to 12.
    pub month: u8,
    /// The day of the month, 1 to 31.
    pub day: u8,
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.year < 0 {
            write!(f, "-{:04}", -i64::from(self.year))?;
        } else {
            write!(f, "{:04}", self.year)?;
        }
        write!(f, "-{:02}-{:02}", self.month, self.day)
    }
}

/// What a zone's clocks read at an instant, with the zone's offset then.
///
/// Two instants an hour apart can read the same local time on the day the
/// clocks go back; they differ in their offset. `Display` writes RFC 3339,
/// `2026-10-25T02:00:00+02:00` (a fraction only when there is one, and
/// the offset's seconds only for the local mean times of the 19th century,
/// which have them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LocalDateTime {
    /// The year.
    pub year: i32,
    /// The month, 1 to 12.
    pub month: u8,
    /// The day of the month, 1 to 31.
    pub day: u8,
    /// The hour, 0 to 23.
    pub hour: u8,
    /// The minute, 0 to 59.
    pub minute: u8,
    /// The second, 0 to 59.
    pub second: u8,
    /// Nanoseconds past the second.
    pub nanosecond: u32,
    /// Local time minus UTC at that instant, in seconds, east positive.
    pub offset_seconds: i32,
}

impl LocalDateTime {
    /// The local time of `at` at the offset `offset_seconds`.
    pub fn at_offset(at: Instant, offset_seconds: i32) -> Self {
        let local = i128::from(at.seconds) + i128::from(offset_seconds);
        let days = local.div_euclid(86_400);
        let of_day = local.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        // Each part is below its bound by construction: the casts cut nothing.
        let part = |n: i128| u8::try_from(n).unwrap_or(u8::MAX);
        LocalDateTime {
            year: i32::try_from(year).unwrap_or(if year < 0 { i32::MIN } else { i32::MAX }),
            month: part(month),
            day: part(day),
            hour: part(of_day / 3600),
            minute: part(of_day % 3600 / 60),
            second: part(of_day % 60),
            nanosecond: at.nanoseconds,
            offset_seconds,
        }
    }

    /// The local date.
    pub fn date(&self) -> Date {
        Date {
            year: self.year,
            month: self.month,
            day: self.day,
        }
    }
}

impl fmt::Display for LocalDateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}T{:02}:{:02}:{:02}",
            self.date(),
            self.hour,
            self.minute,
            self.second
        )?;
        if self.nanosecond != 0 {
            let fraction = format!("{:09}", self.nanosecond);
            write!(f, ".{}", fraction.trim_end_matches('0'))?;
        }
        let sign = if self.offset_seconds < 0 { '-' } else { '+' };
        let offset = self.offset_seconds.unsigned_abs();
        write!(f, "{sign}{:02}:{:02}", offset / 3600, offset % 3600 / 60)?;
        if !offset.is_multiple_of(60) {
            write!(f, ":{:02}", offset % 60)?;
        }
        Ok(())
    }
}

/// The civil date `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, in eras of 400 years).
fn civil_from_days(days: i128) -> (i128, i128, i128) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i128::from(month <= 2);
    (year, month, day)
}

/// Why the zone's spans could not be had.
pub(crate) enum Refused {
    /// The host refused the range (WIT `invalid-range`).
    InvalidRange(String),
    /// There is no host to ask (natively, with no zone given).
    NoHost(String),
}

/// The spans of one zone known so far, sorted and not overlapping.
#[derive(Default)]
struct Cache {
    zone: String,
    spans: Vec<OffsetSpan>,
}

impl Cache {
    fn find(&self, at: Instant) -> Option<OffsetSpan> {
        let i = self.spans.partition_point(|s| s.end <= at);
        self.spans.get(i).copied().filter(|s| s.holds(at))
    }

    fn keep(&mut self, spans: Vec<OffsetSpan>) {
        for span in spans {
            if span.start < span.end && self.find(span.start).is_none() {
                let i = self.spans.partition_point(|s| s.start < span.start);
                self.spans.insert(i, span);
            }
        }
    }
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
    /// The zone of the run in progress, which the host answers for.
    static RUN_ZONE: RefCell<Option<String>> = const { RefCell::new(None) };
    /// A native test's zones (see `testing`), by name.
    pub(crate) static FAKE: RefCell<Fake> = RefCell::new(Fake::default());
}

/// What a native test gave: spans per zone name, and what was asked.
#[derive(Default)]
pub(crate) struct Fake {
    pub(crate) zones: BTreeMap<String, Vec<OffsetSpan>>,
    pub(crate) asked: Vec<(Instant, Instant)>,
}

/// Forgets what was kept: the spans of a zone a test gives anew.
pub(crate) fn forget() {
    CACHE.with(|c| *c.borrow_mut() = Cache::default());
}

/// Called as a run starts: its window's zone is the one the host answers.
pub(crate) fn begin_run(zone: &str) {
    RUN_ZONE.with(|z| *z.borrow_mut() = Some(zone.to_owned()));
    forget();
}

/// Whether `zone` is UTC by one of its names, answered without a host.
fn is_utc(zone: &str) -> bool {
    matches!(
        zone,
        "UTC" | "Etc/UTC" | "Etc/Universal" | "Universal" | "Zulu" | "Etc/Zulu"
    )
}

fn ask(zone: &str, from: Instant, to: Instant) -> Result<Vec<OffsetSpan>, Refused> {
    let faked = FAKE.with(|f| {
        let mut fake = f.borrow_mut();
        let spans = fake.zones.get(zone).cloned()?;
        fake.asked.push((from, to));
        Some(spans)
    });
    if let Some(spans) = faked {
        if to < from {
            return Err(Refused::InvalidRange("`end` is before `start`".to_owned()));
        }
        // As the host answers: the spans that meet `[from, to)`, the first
        // holding `from`.
        let answer: Vec<OffsetSpan> = spans
            .into_iter()
            .filter(|s| s.end > from && (s.start < to || s.holds(from)))
            .collect();
        return Ok(answer);
    }
    if is_utc(zone) {
        return Ok(vec![OffsetSpan {
            start: Instant::from_unix_seconds(i64::MIN),
            end: Instant::from_unix_seconds(i64::MAX),
            offset_seconds: 0,
        }]);
    }
    host_offsets(zone, from, to)
}

#[cfg(target_arch = "wasm32")]
fn host_offsets(zone: &str, from: Instant, to: Instant) -> Result<Vec<OffsetSpan>, Refused> {
    use crate::bindings::jobhost::report::{types, zone as wit};
    let run_zone = RUN_ZONE.with(|z| z.borrow().clone());
    if run_zone.as_deref() != Some(zone) {
        return Err(Refused::NoHost(format!(
            "the host answers only the run's zone `{}`, not `{zone}`",
            run_zone.unwrap_or_default()
        )));
    }
    let wit_instant = |t: Instant| types::Instant {
        seconds: t.seconds,
        nanoseconds: t.nanoseconds,
    };
    match wit::offsets(wit_instant(from), wit_instant(to)) {
        Ok(spans) => Ok(spans
            .into_iter()
            .map(|s| OffsetSpan {
                start: s.start.into(),
                end: s.end.into(),
                offset_seconds: s.offset_seconds,
            })
            .collect()),
        Err(wit::OffsetError::InvalidRange(m)) => Err(Refused::InvalidRange(m)),
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn host_offsets(zone: &str, _: Instant, _: Instant) -> Result<Vec<OffsetSpan>, Refused> {
    Err(Refused::NoHost(format!(
        "no host to ask for the offsets of `{zone}`: in a native test, give the zone with \
         jobhost_sdk::testing::set_zone or set_fixed_offset"
    )))
}

/// The span of `window`'s zone holding `at`: from what was kept, else
/// asked for (the window's spans the first time, then the span of `at`).
fn span_at(window: &Window, at: Instant) -> Result<OffsetSpan, Error> {
    let zone = window.timezone.as_str();
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        if cache.zone != zone {
            *cache = Cache {
                zone: zone.to_owned(),
                spans: Vec::new(),
            };
        }
        if let Some(span) = cache.find(at) {
            return Ok(span);
        }
        let fail = |refused: Refused| match refused {
            Refused::InvalidRange(m) => Error::invalid_data(format!(
                "cannot tell the local time of {}: {m}",
                rfc3339_utc(at)
            )),
            Refused::NoHost(m) => Error::programming(m),
        };
        if cache.spans.is_empty() && window.start < window.end {
            cache.keep(ask(zone, window.start, window.end).map_err(fail)?);
            if let Some(span) = cache.find(at) {
                return Ok(span);
            }
        }
        cache.keep(ask(zone, at, at).map_err(fail)?);
        cache.find(at).ok_or_else(|| {
            Error::source_failed(format!(
                "the host gave no offset of `{zone}` for {}",
                rfc3339_utc(at)
            ))
        })
    })
}

fn rfc3339_utc(at: Instant) -> String {
    let mut text = LocalDateTime::at_offset(at, 0).to_string();
    text.truncate(text.len() - "+00:00".len());
    text + "Z"
}

impl Window {
    /// What the clocks of the window's zone ([`Window::timezone`]) read at
    /// `at`, with the zone's offset then: `2026-10-25T02:30:00+02:00` and,
    /// an hour later, `2026-10-25T02:30:00+01:00` on the day Berlin's
    /// clocks go back. `at` may be any instant, inside the window or not.
    ///
    /// The offsets come from the host, once per run for the window and
    /// again only for an instant outside the spans it already gave (an
    /// offset holds for months, so rows of any age cost a call or two).
    ///
    /// ```
    /// use jobhost_sdk::{Instant, Window, testing};
    ///
    /// testing::set_fixed_offset("Asia/Kolkata", 5 * 3600 + 1800);
    /// let window = Window { timezone: "Asia/Kolkata".into(), ..Window::default() };
    /// let local = window.local(Instant::from_unix_seconds(1_793_837_100))?;
    /// assert_eq!(local.to_string(), "2026-11-05T05:35:00+05:30");
    /// assert_eq!((local.hour, local.date().to_string()), (5, "2026-11-05".to_owned()));
    /// # Ok::<(), jobhost_sdk::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// Kind [`InvalidData`](crate::ErrorKind::InvalidData) when `at` is
    /// outside the years -9999 to 9999 (a timestamp column gone wrong,
    /// say); kind [`Programming`](crate::ErrorKind::Programming) natively
    /// when the test gave no zone, or inside a component for a window of
    /// another zone than the run's.
    pub fn local(&self, at: Instant) -> Result<LocalDateTime, Error> {
        let span = span_at(self, at)?;
        Ok(LocalDateTime::at_offset(at, span.offset_seconds))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_since_the_epoch_are_civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_751), (2026, 10, 25));
        assert_eq!(civil_from_days(-719_468), (0, 3, 1));
    }

    #[test]
    fn a_local_time_prints_as_rfc_3339() {
        let at = Instant::from_unix_seconds(1_792_886_400); // 2026-10-25T00:00:00Z
        assert_eq!(
            LocalDateTime::at_offset(at, 7200).to_string(),
            "2026-10-25T02:00:00+02:00"
        );
        let fraction = Instant {
            seconds: 0,
            nanoseconds: 120_000_000,
        };
        assert_eq!(
            LocalDateTime::at_offset(fraction, -18_000).to_string(),
            "1969-12-31T19:00:00.12-05:00"
        );
        // Berlin's local mean time, before 1893.
        assert_eq!(
            LocalDateTime::at_offset(Instant::from_unix_seconds(-2_422_054_409), 3208).to_string(),
            "1893-03-31T23:59:59+00:53:28"
        );
        assert_eq!(rfc3339_utc(at), "2026-10-25T00:00:00Z");
    }
}
