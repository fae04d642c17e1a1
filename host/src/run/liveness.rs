//! Whether the daemon's loop is still going: before each wake-up, each run
//! and each sleep, the loop says by when it will next be heard from (the
//! end of its sleep, or of a run's lease, plus a margin); the dashboard's
//! `/livez` compares that with the clock and reads nothing else, so a
//! scheduler stuck in a store call, a deadlock or an oversleep is seen
//! without touching the store.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use jiff::Timestamp;

use crate::core::clock::{after, rfc3339};

/// How long past the moment it expected to be heard from the loop is still
/// counted alive: a slow store call, a busy machine, a clock step.
pub const MARGIN: Duration = Duration::from_secs(60);

/// What the loop last said of itself.
#[derive(Debug, Clone)]
struct Expected {
    by: Timestamp,
    doing: String,
}

/// The daemon loop's last word on when it will next be heard from, shared
/// with the server's threads.
#[derive(Debug, Default)]
pub struct Heartbeat {
    expected: Mutex<Option<Expected>>,
}

/// What `/livez` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pulse {
    /// The loop has not said anything yet (the daemon is starting).
    Starting,
    /// The loop is within the time it gave itself.
    Alive {
        /// What it is doing.
        doing: String,
        /// By when it will be heard from again (margin included).
        by: Timestamp,
    },
    /// The loop has not been heard from by the time it gave itself.
    Late {
        /// What it said it was doing.
        doing: String,
        /// The time it gave itself (margin included).
        by: Timestamp,
    },
}

impl Pulse {
    /// Whether a liveness probe should pass.
    pub fn is_alive(&self) -> bool {
        !matches!(self, Pulse::Late { .. })
    }

    /// One line for the probe's answer.
    pub fn line(&self) -> String {
        match self {
            Pulse::Starting => "ok: the daemon is starting\n".to_string(),
            Pulse::Alive { doing, by } => {
                format!("ok: {doing}; expected back by {}\n", rfc3339(*by))
            }
            Pulse::Late { doing, by } => format!(
                "stuck: the daemon's loop was to be back by {} ({doing}) and has not been; \
                 restart it\n",
                rfc3339(*by)
            ),
        }
    }
}

impl Heartbeat {
    /// The loop is `doing` something and will be heard from again by
    /// `until` (plus [`MARGIN`]).
    pub fn expect(&self, until: Timestamp, doing: impl Into<String>) {
        let by = after(until, MARGIN);
        *self.lock() = Some(Expected {
            by,
            doing: doing.into(),
        });
    }

    /// The loop's state as seen at `now`.
    pub fn check(&self, now: Timestamp) -> Pulse {
        match self.lock().clone() {
            None => Pulse::Starting,
            Some(Expected { by, doing }) if now <= by => Pulse::Alive { doing, by },
            Some(Expected { by, doing }) => Pulse::Late { doing, by },
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Expected>> {
        self.expected.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_loop_is_alive_until_a_minute_past_the_time_it_gave_itself() {
        let beat = Heartbeat::default();
        assert_eq!(beat.check(at("2026-11-09T00:00:00Z")), Pulse::Starting);
        assert!(Pulse::Starting.is_alive());
        beat.expect(at("2026-11-10T00:00:00Z"), "sleeping");
        assert!(beat.check(at("2026-11-10T00:00:59Z")).is_alive());
        assert!(beat.check(at("2026-11-10T00:01:00Z")).is_alive());
        let late = beat.check(at("2026-11-10T00:01:01Z"));
        assert!(!late.is_alive());
        assert_eq!(
            late.line(),
            "stuck: the daemon's loop was to be back by 2026-11-10T00:01:00Z (sleeping) and \
             has not been; restart it\n"
        );
        beat.expect(at("2026-11-11T00:00:00Z"), "sleeping");
        assert!(beat.check(at("2026-11-10T00:01:01Z")).is_alive());
    }
}
