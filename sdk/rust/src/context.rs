//! What the host tells a report about its run, as plain values:
//! [`Context`], [`Window`] and [`Instant`].

#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use crate::bindings::jobhost::report::types;

/// A point in time, in UTC: whole seconds since 1970-01-01T00:00:00Z plus a
/// fraction. Never a local time: the host applies time zones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant {
    /// Seconds since the Unix epoch (negative before 1970).
    pub seconds: i64,
    /// Nanoseconds past `seconds`, below 1,000,000,000.
    pub nanoseconds: u32,
}

impl Instant {
    /// The instant `seconds` after the epoch, with no fraction.
    pub fn from_unix_seconds(seconds: i64) -> Self {
        Instant {
            seconds,
            nanoseconds: 0,
        }
    }

    /// Whole seconds since the epoch: the floor of the exact value (the
    /// fraction always counts forward from `seconds`).
    pub fn unix_seconds(&self) -> i64 {
        self.seconds
    }

    /// Milliseconds since the epoch, the floor of the exact value, saturating
    /// at the ends of `i64`.
    pub fn unix_millis(&self) -> i64 {
        let millis = i128::from(self.seconds) * 1000 + i128::from(self.nanoseconds / 1_000_000);
        i64::try_from(millis).unwrap_or(if millis < 0 { i64::MIN } else { i64::MAX })
    }
}

impl From<types::Instant> for Instant {
    fn from(t: types::Instant) -> Self {
        Instant {
            seconds: t.seconds,
            nanoseconds: t.nanoseconds,
        }
    }
}

/// The time window a run reports on: the half-open interval `[start, end)`,
/// closed before the run started.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Window {
    /// The job's name from its configuration, for example `daily-report`.
    pub job: String,
    /// The window key, `<job>:<label>`, for example
    /// `daily-report:2026-11-08`. Exactly one run per key succeeds.
    pub key: String,
    /// The window's label in its time zone: `2026-11-08` for a day,
    /// `2026-11-08T13:00+01:00` for an hour, `2026-W45` for a week.
    pub label: String,
    /// The first instant inside the window.
    pub start: Instant,
    /// The first instant after the window (exclusive).
    pub end: Instant,
    /// The IANA time zone whose civil calendar defines the window, for
    /// example `Europe/Berlin`.
    pub timezone: String,
}

impl From<types::Window> for Window {
    fn from(w: types::Window) -> Self {
        Window {
            job: w.job,
            key: w.key,
            label: w.label,
            start: w.start.into(),
            end: w.end.into(),
            timezone: w.timezone,
        }
    }
}

/// Everything the host tells a report about the run it is part of.
///
/// Plain values, so a report's logic can be tested natively with a
/// `Context` built by hand (every field is public, and
/// [`Default`] fills in the rest).
///
/// ```
/// use jobhost_sdk::Context;
///
/// let mut ctx = Context::default();
/// ctx.params.insert("top".to_owned(), "5".to_owned());
/// assert_eq!(ctx.param("top"), Some("5"));
/// assert_eq!(ctx.param("destination"), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Context {
    /// The window being reported.
    pub window: Window,
    /// The run's clock reading: the instant the host decided to run. The
    /// guest's wall clock reads the same instant for the whole run.
    pub now: Instant,
    /// The cursor the last completed (DONE) run of this job returned, or
    /// `None` if there was none. Opaque to the host.
    pub cursor: Option<String>,
    /// Which attempt at this window this is, starting at 1.
    pub attempt: u32,
    /// Names of the destinations the job declares, in alphabetical order.
    /// [`send`](crate::send) accepts only these.
    pub destinations: Vec<String>,
    /// The job configuration's `[params]`, by name; the host gives them no
    /// meaning.
    pub params: BTreeMap<String, String>,
}

impl Context {
    /// The value of the job parameter `name`, if set.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.get(name).map(String::as_str)
    }
}

impl From<types::RunContext> for Context {
    fn from(ctx: types::RunContext) -> Self {
        let mut params = BTreeMap::new();
        for (name, value) in ctx.params {
            // The host sends each name once; should one repeat, the first
            // counts, as a search of the list would find it.
            params.entry(name).or_insert(value);
        }
        Context {
            window: ctx.window.into(),
            now: ctx.now.into(),
            cursor: ctx.cursor,
            attempt: ctx.attempt,
            destinations: ctx.destinations,
            params,
        }
    }
}
