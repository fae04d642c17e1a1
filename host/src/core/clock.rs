//! Where a run's sense of time comes from. The host never reads the wall
//! clock anywhere else: a run takes one reading from a [`Clock`] and derives
//! its window, its lease times and the guest's wall clock from it. Parsing of
//! user-supplied instants lives here too, and it refuses naive timestamps: a
//! time without an offset means a different instant in every zone.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp, ZonedDateTime};

use crate::core::error::{Error, Result};

/// The accepted forms of a time value, shown whenever one is refused.
pub const ACCEPTED_FORMS: &str = "use RFC 3339 with an offset or Z (2026-11-09T00:05:00Z, \
     2026-11-09T09:05:00+09:00) or RFC 9557 with a zone (2026-11-09T09:05:00+09:00[Asia/Tokyo])";

/// A source of "now", and of waiting: the host waits (between delivery
/// retries) only through its clock, so a test clock can make waits free.
pub trait Clock: Send + Sync {
    /// The run's instant: what the window, the receipt and the guest see.
    fn now(&self) -> Timestamp;

    /// The instant leases and retry times are measured on. Other processes
    /// compare them with their own clocks, so this is real time, even when
    /// `now` was fixed with `--now`; only a virtual clock substitutes its own.
    fn lease_now(&self) -> Timestamp {
        Timestamp::now()
    }

    /// Waits for `d`.
    fn sleep(&self, d: Duration);

    /// A reading of a clock that only moves forward and counts every
    /// instant that passes for the rest of the world: while this process
    /// is stopped (SIGSTOP, a debugger) and while the machine is suspended.
    /// Only differences of two readings mean anything. A lease confirmed
    /// by the store is judged on it before a send ([`boot_time`] on real
    /// clocks; a virtual clock counts the time it was moved on).
    fn monotonic(&self) -> Duration {
        boot_time()
    }

    /// [`Clock::monotonic`] as a function that outlives this borrow of the
    /// clock (a connection takes it along to look at it before writing).
    fn monotonic_source(&self) -> MonotonicSource {
        Arc::new(boot_time)
    }
}

/// Readings of a clock's [`Clock::monotonic`], free of borrows.
pub type MonotonicSource = Arc<dyn Fn() -> Duration + Send + Sync>;

/// The time since the machine booted, suspended time included:
/// `CLOCK_BOOTTIME` on Linux. `std::time::Instant` reads `CLOCK_MONOTONIC`,
/// which also counts while a process is stopped but not while the machine
/// is suspended, and a store on another machine keeps counting then.
pub fn boot_time() -> Duration {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let id = rustix::time::ClockId::Boottime;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let id = rustix::time::ClockId::Monotonic;
    let t = rustix::time::clock_gettime(id);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// The host's real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }

    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// A clock that always reads the same instant (`--now`, replays), while its
/// waits and leases are real: a run for a past window against a live
/// endpoint still backs off in real time, and its claim expires when other
/// processes' clocks say so.
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub Timestamp);

impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        self.0
    }

    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// A clock that starts at a given instant and moves only when the host
/// waits, by exactly the time waited, without waiting; leases are measured
/// on it too. Tests of retries and leases run in no real time, whatever the
/// machine's clock says, and read back exactly where time went.
#[derive(Debug)]
pub struct VirtualClock {
    now: Arc<Mutex<Timestamp>>,
}

impl VirtualClock {
    /// A clock reading `start`.
    pub fn new(start: Timestamp) -> VirtualClock {
        VirtualClock {
            now: Arc::new(Mutex::new(start)),
        }
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Timestamp {
        *self
            .now
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lease_now(&self) -> Timestamp {
        self.now()
    }

    fn monotonic(&self) -> Duration {
        since_epoch(self.now())
    }

    fn monotonic_source(&self) -> MonotonicSource {
        let now = self.now.clone();
        Arc::new(move || {
            since_epoch(
                *now.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            )
        })
    }

    fn sleep(&self, d: Duration) {
        let mut now = self
            .now
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let step = SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
        *now = now.checked_add(step).unwrap_or(Timestamp::MAX);
    }
}

/// A virtual clock's monotonic reading: virtual time never goes back, it
/// moves only forward, by waits.
fn since_epoch(t: Timestamp) -> Duration {
    Duration::try_from(Timestamp::UNIX_EPOCH.duration_until(t)).unwrap_or_default()
}

/// `now + d`, saturating.
pub fn after(now: Timestamp, d: Duration) -> Timestamp {
    now.checked_add(SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX))
        .unwrap_or(Timestamp::MAX)
}

/// A real clock shifted to start at a given instant (`jobhost daemon
/// --now`, for demonstrations): it advances in real time.
#[derive(Debug)]
pub struct ShiftedClock {
    offset: SignedDuration,
}

impl ShiftedClock {
    /// A clock that reads `start` now.
    pub fn starting_at(start: Timestamp) -> ShiftedClock {
        ShiftedClock {
            offset: Timestamp::now().duration_until(start),
        }
    }
}

impl Clock for ShiftedClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
            .checked_add(self.offset)
            .unwrap_or(Timestamp::MAX)
    }

    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// Parses an instant given by a user: RFC 3339 with an offset or `Z`, or RFC
/// 9557 with a `[Zone]` annotation (with or without an offset).
///
/// # Errors
///
/// `Error::Input` naming `what` (for example `--now`) and the value when the
/// text is malformed, lacks an offset and a zone, or names an unknown zone.
pub fn parse_instant(what: &str, text: &str) -> Result<Timestamp> {
    let text = text.trim();
    let parsed = if text.contains('[') {
        crate::core::window::parse_zoned(text).map(|z: ZonedDateTime| z.timestamp())
    } else {
        text.parse::<Timestamp>().map_err(|e| e.to_string())
    };
    match parsed {
        Ok(ts) if ts.as_second() < 0 => Err(Error::input(format!(
            "invalid {what} `{text}`: instants before 1970-01-01T00:00:00Z are not supported"
        ))),
        Ok(ts) => Ok(ts),
        Err(_) if looks_naive(text) => Err(Error::input(format!(
            "invalid {what} `{text}`: a time without an offset is ambiguous; {ACCEPTED_FORMS}"
        ))),
        Err(e) => Err(Error::input(format!(
            "invalid {what} `{text}`: {e}; {ACCEPTED_FORMS}"
        ))),
    }
}

/// True when `text` parses as a civil date-time with no offset and no zone.
fn looks_naive(text: &str) -> bool {
    text.parse::<jiff::civil::DateTime>().is_ok()
}

/// True when `text` is a date and a time of day with no offset and no zone
/// (`2026-11-04T12:00:00`), which no window label is: a person who names a
/// window with it is refused as [`parse_instant`] refuses it, not told that
/// no window has that label. A date alone may be a label, so it is not one.
pub fn is_naive_date_time(text: &str) -> bool {
    let text = text.trim();
    looks_naive(text)
        && text.parse::<Timestamp>().is_err()
        && !text.contains('[')
        && text
            .get(10..)
            .is_some_and(|time| time.starts_with(['T', 't', ' ']))
}

/// Formats an instant as RFC 3339 in UTC with `Z`, the form every receipt
/// and store row uses.
pub fn rfc3339(ts: Timestamp) -> String {
    ts.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_real_time_unless_the_clock_is_virtual() {
        let past: Timestamp = "2026-11-09T00:05:00Z".parse().unwrap();
        let fixed = FixedClock(past);
        assert_eq!(fixed.now(), past);
        let drift = fixed.lease_now().duration_since(Timestamp::now()).abs();
        assert!(drift < SignedDuration::from_secs(60), "{drift}");

        let virt = VirtualClock::new(past);
        virt.sleep(Duration::from_secs(90));
        let later: Timestamp = "2026-11-09T00:06:30Z".parse().unwrap();
        assert_eq!((virt.now(), virt.lease_now()), (later, later));
    }

    #[test]
    fn the_monotonic_reading_moves_with_virtual_waits_and_with_real_time() {
        let virt = VirtualClock::new("2026-11-09T00:05:00Z".parse().unwrap());
        let before = virt.monotonic();
        virt.sleep(Duration::from_secs(90));
        assert_eq!(virt.monotonic() - before, Duration::from_secs(90));
        let source = virt.monotonic_source();
        virt.sleep(Duration::from_secs(1));
        assert_eq!(source() - before, Duration::from_secs(91));
        let real = SystemClock.monotonic();
        std::thread::yield_now();
        assert!(SystemClock.monotonic() >= real);
    }

    #[test]
    fn utc_and_offset_forms_are_accepted() {
        let a = parse_instant("--now", "2026-11-09T00:05:00Z").unwrap();
        let b = parse_instant("--now", "2026-11-09T09:05:00+09:00").unwrap();
        assert_eq!(a, b);
        assert_eq!(rfc3339(a), "2026-11-09T00:05:00Z");
    }

    #[test]
    fn rfc9557_zone_annotation_is_accepted_with_and_without_offset() {
        let a = parse_instant("--now", "2026-11-09T09:05:00+09:00[Asia/Tokyo]").unwrap();
        let b = parse_instant("--now", "2026-11-09T09:05:00[Asia/Tokyo]").unwrap();
        assert_eq!(rfc3339(a), "2026-11-09T00:05:00Z");
        assert_eq!(a, b);
    }

    #[test]
    fn naive_timestamp_is_refused_with_the_accepted_forms() {
        let err = parse_instant("--now", "2026-11-09T00:05:00").unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Input(_)));
        assert!(msg.contains("without an offset"), "{msg}");
        assert!(msg.contains("2026-11-09T00:05:00Z"), "{msg}");
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn a_date_and_time_without_an_offset_is_told_from_a_date_or_an_instant() {
        for naive in [
            "2026-11-04T12:00:00",
            "2026-11-04 12:00",
            " 2026-11-04t00:00 ",
        ] {
            assert!(is_naive_date_time(naive), "{naive}");
        }
        for not in [
            "2026-11-04",
            "2026-W45",
            "2026-11",
            "2026-11-04T12:00:00Z",
            "2026-11-04T12:00-05:00",
            "2026-11-04T12:00[Europe/Berlin]",
            "yesterday",
        ] {
            assert!(!is_naive_date_time(not), "{not}");
        }
    }

    #[test]
    fn garbage_and_unknown_zones_are_refused() {
        assert!(parse_instant("--now", "yesterday").is_err());
        let err = parse_instant("--now", "2026-11-09T00:05:00Z[Mars/Olympus]").unwrap_err();
        assert!(err.to_string().contains("Mars/Olympus"), "{err}");
    }
}
