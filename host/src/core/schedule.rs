//! When each window of a job is due, and what happens to windows that were
//! missed. A window is due once it has closed and the job's delay (data
//! often arrives late) and its jitter have passed; the jitter is a fixed
//! fraction of the allowed jitter derived from the window's key, so every
//! host, every replay and every `plan` agree on the same due moment, while
//! many jobs due at midnight still spread out.
//!
//! Catch-up decides over the windows that became due while nothing ran
//! them (a host down for three days): `all` runs the newest of them up to a
//! limit and skips the older ones, `latest` runs only the newest, `none`
//! runs only a window that has just become due. Every missed window gets a
//! decision; none is dropped silently.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use sha2::{Digest, Sha256};

use crate::core::error::{Error, Result};
use crate::core::window::{JobName, Window, WindowKind, Zone};

/// A job's windows and when each is due.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// The job.
    pub job: JobName,
    /// Window kind.
    pub kind: WindowKind,
    /// The zone whose calendar defines the windows.
    pub zone: Zone,
    /// How long after a window closes it becomes due.
    pub delay: Duration,
    /// The most a window's due moment is spread out after the delay.
    pub jitter: Duration,
    /// How long after its due moment a window still counts as on time.
    pub grace: Duration,
}

impl Schedule {
    /// When `w` is due: its end, plus the delay, plus its share of the
    /// jitter (fixed by its key).
    pub fn due_at(&self, w: &Window) -> Timestamp {
        let jitter_ms = u64::try_from(self.jitter.as_millis()).unwrap_or(u64::MAX);
        let share = match jitter_ms.checked_add(1) {
            Some(span) if jitter_ms > 0 => {
                let digest = Sha256::digest(w.key().as_str().as_bytes());
                let mut first = [0u8; 8];
                first.copy_from_slice(&digest[..8]);
                u64::from_be_bytes(first) % span
            }
            _ => 0,
        };
        let after = SignedDuration::try_from(self.delay)
            .unwrap_or(SignedDuration::MAX)
            .saturating_add(SignedDuration::from_millis(
                i64::try_from(share).unwrap_or(i64::MAX),
            ));
        w.end.checked_add(after).unwrap_or(Timestamp::MAX)
    }

    /// The window that contains `t`.
    fn containing(&self, t: Timestamp) -> Result<Window> {
        Window::containing(&self.job, self.kind, &self.zone, t)
    }

    /// The window before `w`.
    fn previous(&self, w: &Window) -> Result<Window> {
        let before = w
            .start
            .checked_sub(SignedDuration::from_nanos(1))
            .map_err(|e| {
                Error::input(format!("window `{}` is out of range", w.key())).because(e)
            })?;
        self.containing(before)
    }

    /// The newest window that is due at `now`.
    ///
    /// # Errors
    ///
    /// `Error::Input` when `now` is out of the supported range.
    pub fn last_due(&self, now: Timestamp) -> Result<Window> {
        let mut w = self.previous(&self.containing(now)?)?;
        while self.due_at(&w) > now {
            w = self.previous(&w)?;
        }
        Ok(w)
    }

    /// The first window that is not due yet at `now`, and when it is due.
    ///
    /// # Errors
    ///
    /// As [`Schedule::last_due`].
    pub fn next_due(&self, now: Timestamp) -> Result<(Window, Timestamp)> {
        let w = self.last_due(now)?.next()?;
        let at = self.due_at(&w);
        Ok((w, at))
    }

    /// The closed window a person names by its label (`2026-11-03`,
    /// `2026-W45`, `2026-11-01T01:00-05:00`, `2026-11`) or by an instant
    /// inside it (RFC 3339, or RFC 9557 with a zone), given as `what`
    /// (`--for`). It need not be due: a person running it by name has
    /// decided its data is there.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming `what` with an example of a valid label when the
    /// text names no window of the job's kind and zone, refusing a date and
    /// time without an offset as `--now` does, and saying when the window
    /// closes when it has not closed at `now`.
    pub fn named(&self, what: &str, text: &str, now: Timestamp) -> Result<Window> {
        let text = text.trim();
        let w = self.labelled_or_containing(what, text, now)?;
        if w.end > now {
            return Err(Error::input(format!(
                "{what} `{text}`: window `{}` has not closed: it closes at {} \
                 (now is {}); run it then, or name a window that has closed",
                w.key(),
                crate::core::clock::rfc3339(w.end),
                crate::core::clock::rfc3339(now)
            )));
        }
        Ok(w)
    }

    /// An instant a person gives as one end of a range (`backfill --from`,
    /// `--to`): a window label stands for its window's start, an RFC 3339
    /// instant for itself.
    ///
    /// # Errors
    ///
    /// As [`Schedule::named`], but for a window that has not closed.
    pub fn bound(&self, what: &str, text: &str, now: Timestamp) -> Result<Timestamp> {
        let text = text.trim();
        match Window::labelled(&self.job, self.kind, &self.zone, text) {
            Some(w) => Ok(w.start),
            None => match crate::core::clock::parse_instant(what, text) {
                Ok(t) => Ok(t),
                // Not an instant either: the error names both forms.
                Err(_) => self
                    .labelled_or_containing(what, text, now)
                    .map(|w| w.start),
            },
        }
    }

    /// Every window that overlaps `[from, to)`, oldest first, refusing more
    /// than `limit` of them.
    ///
    /// # Errors
    ///
    /// `Error::Input` for more than `limit` windows (naming the range) or
    /// windows the calendar cannot hold.
    pub fn between(&self, from: Timestamp, to: Timestamp, limit: usize) -> Result<Vec<Window>> {
        let mut out = Vec::new();
        if from >= to {
            return Ok(out);
        }
        let mut w = self.containing(from)?;
        while w.start < to {
            if out.len() == limit {
                return Err(Error::input(format!(
                    "the range from {from} to {to} holds more than {limit} {} windows; \
                     give a narrower --from and --to",
                    self.kind
                )));
            }
            let next = w.next()?;
            out.push(w);
            w = next;
        }
        Ok(out)
    }

    /// The window a label names, or the one containing an instant, closed
    /// or not.
    fn labelled_or_containing(&self, what: &str, text: &str, now: Timestamp) -> Result<Window> {
        let w = match Window::labelled(&self.job, self.kind, &self.zone, text) {
            Some(w) => w,
            None => match crate::core::clock::parse_instant(what, text) {
                Ok(t) => self.containing(t)?,
                Err(naive) if crate::core::clock::is_naive_date_time(text) => return Err(naive),
                Err(_) => {
                    let example = Window::last_closed(&self.job, self.kind, &self.zone, now)
                        .map(|w| w.label)
                        .unwrap_or_default();
                    return Err(Error::input(format!(
                        "invalid {what} `{text}`: no {} window in {} has that label; \
                         give a label such as `{example}` or an RFC 3339 instant inside \
                         the window such as `2026-11-03T12:00:00Z`",
                        self.kind,
                        self.zone.name()
                    )));
                }
            },
        };
        if w.start.as_second() < 0 {
            return Err(Error::input(format!(
                "invalid {what} `{text}`: windows before 1970-01-01T00:00:00Z are not supported"
            )));
        }
        Ok(w)
    }

    /// Every window that starts at or after `from` and is due at `now`,
    /// oldest first; at most `limit` of them (the newest, when there are
    /// more).
    ///
    /// # Errors
    ///
    /// As [`Schedule::last_due`].
    pub fn due_since(&self, from: Timestamp, now: Timestamp, limit: usize) -> Result<Vec<Window>> {
        let mut out = Vec::new();
        let mut w = self.last_due(now)?;
        while w.start >= from && out.len() < limit {
            if self.due_at(&w) <= now {
                out.push(w.clone());
            }
            w = self.previous(&w)?;
        }
        out.reverse();
        Ok(out)
    }
}

/// What to do with windows that became due while nothing ran them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatchUp {
    /// Run the newest `max` missed windows, oldest of them first; skip the
    /// older ones.
    All {
        /// How many missed windows run at most.
        max: u32,
    },
    /// Run the newest missed window only.
    Latest,
    /// Run a window only while it is the newest due one and became due no
    /// longer ago than the job's grace: windows that fell due while
    /// nothing ran are skipped.
    None,
}

impl CatchUp {
    /// Parses `all`, `latest` or `none`; `max` applies to `all`.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the value and the accepted ones.
    pub fn parse(text: &str, max: u32) -> Result<CatchUp> {
        match text {
            "all" => Ok(CatchUp::All { max }),
            "latest" => Ok(CatchUp::Latest),
            "none" => Ok(CatchUp::None),
            other => Err(Error::input(format!(
                "invalid `catch_up = \"{other}\"`: use \"all\", \"latest\" or \"none\""
            ))),
        }
    }
}

impl fmt::Display for CatchUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CatchUp::All { max } => write!(f, "all (at most {max})"),
            CatchUp::Latest => f.write_str("latest"),
            CatchUp::None => f.write_str("none"),
        }
    }
}

impl FromStr for CatchUp {
    type Err = Error;

    fn from_str(s: &str) -> Result<CatchUp> {
        CatchUp::parse(s, DEFAULT_MAX_CATCH_UP)
    }
}

/// The default limit of `catch_up = "all"`: small, so a long outage does not
/// flood downstream.
pub const DEFAULT_MAX_CATCH_UP: u32 = 3;

/// The decision for one due window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Run,
    /// Do not run it, for this reason.
    Skip(String),
}

/// The widest jitter a kind of window allows: less than its shortest
/// length (a 23-hour day, a 167-hour week, a 671-hour February, a quarter
/// of 90 days less an hour), so due moments keep the windows' order.
pub fn max_jitter(kind: WindowKind) -> Duration {
    match kind {
        // A half-hour offset change (Lord Howe Island) can cut a slice of
        // n minutes down to the greatest common divisor of n and 30.
        WindowKind::Minutes(n) => {
            let (mut a, mut b) = (u64::from(n), 30);
            while b != 0 {
                (a, b) = (b, a % b);
            }
            Duration::from_secs(a * 60 - 1)
        }
        WindowKind::Hour => Duration::from_secs(3600 - 1),
        WindowKind::Day => Duration::from_secs(23 * 3600 - 1),
        WindowKind::Week => Duration::from_secs(167 * 3600 - 1),
        WindowKind::Month => Duration::from_secs(671 * 3600 - 1),
        // January to March of a common year, less a daylight-saving hour.
        WindowKind::Quarter => Duration::from_secs((90 * 24 - 1) * 3600 - 1),
    }
}

/// Decides over `due`: the undecided windows due at `now`, oldest first.
/// The newest one, when it became due no longer ago than the schedule's
/// grace, counts as on time, not missed: it runs under every policy.
/// `newest_recorded` is the start of the newest due window the store
/// already holds: an undecided window older than it (a hole left while no
/// scheduler ran) is never "the newest" for `latest`.
pub fn decide(
    schedule: &Schedule,
    policy: CatchUp,
    due: &[Window],
    now: Timestamp,
    newest_recorded: Option<Timestamp>,
) -> Vec<(Window, Verdict)> {
    let n = due.len();
    due.iter()
        .enumerate()
        .map(|(i, w)| {
            let newest = i + 1 == n && newest_recorded.is_none_or(|t| w.start > t);
            let grace = SignedDuration::try_from(schedule.grace).unwrap_or(SignedDuration::MAX);
            let on_time = newest && now.duration_since(schedule.due_at(w)) <= grace;
            let verdict = match policy {
                CatchUp::All { max } if n - i <= max as usize => Verdict::Run,
                CatchUp::All { max } => Verdict::Skip(format!(
                    "missed, and older than the {max} newest missed window(s) that catch_up = \"all\" runs"
                )),
                CatchUp::Latest if newest => Verdict::Run,
                CatchUp::Latest if i + 1 == n => Verdict::Skip(
                    "missed, and a newer window has run already (catch_up = \"latest\")"
                        .to_string(),
                ),
                CatchUp::Latest => Verdict::Skip(
                    "missed, and a newer window is due (catch_up = \"latest\")".to_string(),
                ),
                CatchUp::None if on_time => Verdict::Run,
                CatchUp::None => {
                    Verdict::Skip("missed while nothing ran it (catch_up = \"none\")".to_string())
                }
            };
            (w.clone(), verdict)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(kind: WindowKind, zone: &str, delay: u64, jitter: u64) -> Schedule {
        Schedule {
            job: JobName::new("j").unwrap(),
            kind,
            zone: Zone::new(zone).unwrap(),
            delay: Duration::from_secs(delay),
            jitter: Duration::from_secs(jitter),
            grace: Duration::from_secs(3600),
        }
    }

    fn at(t: &str) -> Timestamp {
        t.parse().unwrap()
    }

    /// The windows due within one local day, by the schedule's own walk.
    fn windows_of_day(s: &Schedule, day_start: &str, day_end: &str) -> Vec<Window> {
        let from = at(day_start);
        s.due_since(from, at(day_end), 1000)
            .unwrap()
            .into_iter()
            .filter(|w| w.end <= at(day_end))
            .collect()
    }

    #[test]
    fn hourly_windows_number_23_and_25_on_the_daylight_saving_days_with_unique_keys() {
        for (zone, spring, fall) in [
            (
                "America/New_York",
                ("2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"),
                ("2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z"),
            ),
            (
                "Europe/Berlin",
                ("2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"),
                ("2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z"),
            ),
        ] {
            let s = schedule(WindowKind::Hour, zone, 0, 0);
            let short = windows_of_day(&s, spring.0, spring.1);
            let long = windows_of_day(&s, fall.0, fall.1);
            assert_eq!(short.len(), 23, "{zone} spring-forward day");
            assert_eq!(long.len(), 25, "{zone} fall-back day");
            let mut keys: Vec<_> = long.iter().map(Window::key).collect();
            keys.sort_by(|a, b| a.as_str().cmp(b.as_str()));
            keys.dedup();
            assert_eq!(
                keys.len(),
                25,
                "{zone}: the two repeated hours have two keys"
            );
            let d = schedule(WindowKind::Day, zone, 0, 0);
            assert_eq!(
                windows_of_day(&d, fall.0, fall.1).len(),
                1,
                "{zone}: one day"
            );
            assert_eq!(
                windows_of_day(&d, spring.0, spring.1).len(),
                1,
                "{zone}: one day"
            );
        }
    }

    #[test]
    fn a_window_is_due_after_its_delay_and_its_fixed_share_of_the_jitter() {
        let s = schedule(WindowKind::Day, "UTC", 3600, 600);
        let w = Window::containing(&s.job, s.kind, &s.zone, at("2026-11-08T12:00:00Z")).unwrap();
        let due = s.due_at(&w);
        let after_delay = at("2026-11-09T01:00:00Z");
        assert!(
            due >= after_delay && due <= at("2026-11-09T01:10:00Z"),
            "{due}"
        );
        assert_eq!(
            due,
            at("2026-11-09T01:00:52.482Z"),
            "the same on every host and every version: the share comes from the key"
        );
        // At 00:30 the window has closed but is not due: the one before is.
        assert_eq!(
            s.last_due(at("2026-11-09T00:30:00Z")).unwrap().label,
            "2026-11-07"
        );
        assert_eq!(s.last_due(due).unwrap().label, "2026-11-08");
        let (next, when) = s.next_due(at("2026-11-09T00:30:00Z")).unwrap();
        assert_eq!((next.label.as_str(), when), ("2026-11-08", due));
        // Jitter spreads windows: not every day gets the same share.
        let shares: std::collections::BTreeSet<_> = (1..=20)
            .map(|d| {
                let w = Window::containing(
                    &s.job,
                    s.kind,
                    &s.zone,
                    at(&format!("2026-10-{d:02}T12:00:00Z")),
                )
                .unwrap();
                s.due_at(&w).duration_since(w.end).as_secs()
            })
            .collect();
        assert!(shares.len() > 10, "{shares:?}");
        assert!(
            shares.iter().all(|s| (3600..=4200).contains(s)),
            "{shares:?}"
        );
    }

    #[test]
    fn without_delay_the_last_due_window_is_the_last_closed_one() {
        let s = schedule(WindowKind::Hour, "Asia/Tokyo", 0, 0);
        let now = at("2026-11-09T00:05:00Z");
        assert_eq!(
            s.last_due(now).unwrap(),
            Window::last_closed(&s.job, s.kind, &s.zone, now).unwrap()
        );
    }

    #[test]
    fn latest_never_goes_back_for_a_hole_older_than_a_window_that_ran() {
        let s = schedule(WindowKind::Day, "UTC", 0, 0);
        let now = at("2026-11-09T00:05:00Z");
        // The 5th and 6th have no row; the 7th and 8th ran already.
        let holes = s
            .due_since(at("2026-11-05T00:00:00Z"), at("2026-11-07T00:00:00Z"), 10)
            .unwrap();
        assert_eq!(holes.len(), 2);
        let ran_already = Some(at("2026-11-08T00:00:00Z"));
        let latest = decide(&s, CatchUp::Latest, &holes, now, ran_already);
        assert!(
            latest
                .iter()
                .all(|(_, v)| matches!(v, Verdict::Skip(why) if why.contains("run already") || why.contains("newer window is due"))),
            "{latest:?}"
        );
        let all = decide(&s, CatchUp::All { max: 3 }, &holes, now, ran_already);
        assert!(all.iter().all(|(_, v)| *v == Verdict::Run), "{all:?}");
        let none = decide(&s, CatchUp::None, &holes, now, ran_already);
        assert!(none.iter().all(|(_, v)| matches!(v, Verdict::Skip(_))));
    }

    #[test]
    fn months_fall_due_after_their_delay_in_every_zone_over_2026() {
        for zone in [
            "UTC",
            "Europe/Berlin",
            "America/New_York",
            "Australia/Lord_Howe",
        ] {
            let s = schedule(WindowKind::Month, zone, 3600, 0);
            let year_start = format!("2026-01-01T00:00:00[{zone}]")
                .parse::<jiff::ZonedDateTime>()
                .unwrap()
                .timestamp();
            let months = s
                .due_since(year_start, at("2027-01-02T00:00:00Z"), 100)
                .unwrap();
            let labels: Vec<_> = months.iter().map(|w| w.label.clone()).collect();
            let want: Vec<_> = (1..=12).map(|m| format!("2026-{m:02}")).collect();
            assert_eq!(labels, want, "{zone}");
            for w in &months {
                let due = s.due_at(w);
                assert_eq!(
                    due,
                    w.end + SignedDuration::from_hours(1),
                    "{zone} {}",
                    w.label
                );
                // A second before it is due, the month before is the newest due one.
                let before = s.last_due(due - SignedDuration::from_secs(1)).unwrap();
                assert_eq!(before.end, w.start, "{zone} {}", w.label);
                assert_eq!(s.last_due(due).unwrap(), *w, "{zone} {}", w.label);
                assert_eq!(
                    s.next_due(due - SignedDuration::from_secs(1)).unwrap(),
                    (w.clone(), due)
                );
                // The widest jitter still keeps months due in order.
                let length = w.end.duration_since(w.start);
                assert!(
                    SignedDuration::try_from(max_jitter(WindowKind::Month)).unwrap() < length,
                    "{zone} {}",
                    w.label
                );
            }
        }
        // February in Berlin: closes at local midnight of 1 March, due an hour later.
        let s = schedule(WindowKind::Month, "Europe/Berlin", 3600, 0);
        let (w, due) = s.next_due(at("2026-02-28T23:30:00Z")).unwrap();
        assert_eq!(
            (w.label.as_str(), due),
            ("2026-02", at("2026-03-01T00:00:00Z"))
        );
    }

    #[test]
    fn a_window_named_by_a_date_and_time_without_an_offset_is_refused_as_now_refuses_it() {
        let now = at("2026-11-09T00:05:00Z");
        let day = schedule(WindowKind::Day, "Europe/Berlin", 0, 0);
        let as_now = crate::core::clock::parse_instant("--for", "2026-11-04T12:00:00")
            .unwrap_err()
            .to_string();
        for text in ["2026-11-04T12:00:00", " 2026-11-04 12:00 "] {
            let err = day.named("--for", text, now).unwrap_err();
            assert_eq!(err.exit_code(), 2);
            let m = err.to_string();
            assert!(m.contains("a time without an offset is ambiguous"), "{m}");
            assert!(!m.contains("has that label"), "{m}");
            let err = day.bound("--from", text, now).unwrap_err().to_string();
            assert!(err.contains("invalid --from"), "{err}");
            assert!(err.contains("without an offset"), "{err}");
        }
        assert_eq!(
            day.named("--for", "2026-11-04T12:00:00", now)
                .unwrap_err()
                .to_string(),
            as_now
        );
        // A date alone is still a label (or, for another kind, not one).
        assert_eq!(
            day.named("--for", "2026-11-04", now).unwrap().label,
            "2026-11-04"
        );
        let week = schedule(WindowKind::Week, "UTC", 0, 0);
        let m = week
            .named("--for", "2026-11-04", now)
            .unwrap_err()
            .to_string();
        assert!(m.contains("has that label"), "{m}");
    }

    #[test]
    fn a_window_named_by_label_or_instant_runs_once_closed() {
        let now = at("2026-12-02T02:00:00Z");
        let month = schedule(WindowKind::Month, "UTC", 0, 0);
        assert_eq!(
            month.named("--for", "2026-11", now).unwrap().label,
            "2026-11"
        );
        assert_eq!(
            month
                .named("--for", "2026-02-14T12:00:00+01:00", now)
                .unwrap()
                .label,
            "2026-02"
        );
        let open = month.named("--for", "2026-12", now).unwrap_err();
        assert_eq!(open.exit_code(), 2);
        let text = open.to_string();
        assert!(text.contains("closes at 2027-01-01T00:00:00Z"), "{text}");
        let wrong = month.named("--for", "2026-W45", now).unwrap_err();
        assert_eq!(wrong.exit_code(), 2);
        let text = wrong.to_string();
        assert!(
            text.contains("--for") && text.contains("`2026-W45`") && text.contains("`2026-11`"),
            "{text}"
        );
        let day = schedule(WindowKind::Day, "America/New_York", 0, 0);
        let w = day.named("--for", " 2026-11-01 ", now).unwrap();
        assert_eq!(
            w.end.duration_since(w.start),
            SignedDuration::from_hours(25)
        );
        let hour = schedule(WindowKind::Hour, "America/New_York", 0, 0);
        let w = hour.named("--for", "2026-11-01T01:00-05:00", now).unwrap();
        assert_eq!(w.start, at("2026-11-01T06:00:00Z"));
        let w = hour.named("--for", "2026-11-01T06:59:59Z", now).unwrap();
        assert_eq!(w.label, "2026-11-01T01:00-05:00");
        let week = schedule(WindowKind::Week, "UTC", 0, 0);
        assert_eq!(
            week.named("--for", "2026-W45", now).unwrap().start,
            at("2026-11-02T00:00:00Z")
        );
        // Out of range or before 1970: refused, never a panic.
        for text in [
            "1969-12",
            "9999-12",
            "-0001-01",
            "2026-\u{e9}",
            "9999-12-31T23:59:59Z",
        ] {
            let err = month.named("--for", text, now).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{text}: {err}");
        }
        // Closed but not yet due: a person may still run it.
        let late = schedule(WindowKind::Day, "UTC", 7200, 0);
        assert!(late.named("--for", "2026-12-01", now).is_ok());
    }

    #[test]
    fn each_policy_decides_every_missed_window_once() {
        let s = schedule(WindowKind::Day, "UTC", 0, 0);
        // Down from the 3rd to the 9th: windows 3..=8 are due on the 9th.
        let now = at("2026-11-09T00:05:00Z");
        let due = s.due_since(at("2026-11-03T00:00:00Z"), now, 100).unwrap();
        assert_eq!(due.len(), 6);
        let runs = |policy| -> Vec<String> {
            decide(&s, policy, &due, now, None)
                .into_iter()
                .filter(|(_, v)| *v == Verdict::Run)
                .map(|(w, _)| w.label)
                .collect()
        };
        assert_eq!(
            runs(CatchUp::All { max: 3 }),
            ["2026-11-06", "2026-11-07", "2026-11-08"]
        );
        assert_eq!(runs(CatchUp::All { max: 10 }).len(), 6);
        assert_eq!(runs(CatchUp::Latest), ["2026-11-08"]);
        assert_eq!(runs(CatchUp::None), ["2026-11-08"], "the 8th is on time");
        for policy in [CatchUp::All { max: 3 }, CatchUp::Latest, CatchUp::None] {
            let decided = decide(&s, policy, &due, now, None);
            assert_eq!(decided.len(), 6, "{policy}: every window has a decision");
            assert!(decided.iter().all(|(_, v)| match v {
                Verdict::Run => true,
                Verdict::Skip(why) => why.contains("missed"),
            }));
        }
        // Past the grace (an hour), `none` skips even the newest; `latest`
        // runs it.
        let late = at("2026-11-10T01:00:01Z");
        let due = s.due_since(at("2026-11-08T00:00:00Z"), late, 100).unwrap();
        let decided = decide(&s, CatchUp::None, &due, late, None);
        assert_eq!(due.len(), 2);
        assert!(
            decided.iter().all(|(_, v)| matches!(v, Verdict::Skip(_))),
            "{decided:?}"
        );
        assert_eq!(
            decide(&s, CatchUp::Latest, &due, late, None)[1].1,
            Verdict::Run
        );
        let late = at("2026-11-11T00:05:00Z");
        let due = s.due_since(at("2026-11-08T00:00:00Z"), late, 100).unwrap();
        let decided = decide(&s, CatchUp::None, &due, late, None);
        assert_eq!(decided.len(), 3);
        assert_eq!(
            decided.last().unwrap().1,
            Verdict::Run,
            "the 10th is on time"
        );
        assert!(matches!(decided[0].1, Verdict::Skip(_)));
    }
}
