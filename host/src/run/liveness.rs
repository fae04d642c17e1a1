//! Whether the daemon's loop is still going: before each wake-up, each run
//! and each sleep, the loop says by when it will next be heard from (the
//! end of its sleep, or of a run's lease, plus a margin); the dashboard's
//! `/livez` compares that with the clock and reads nothing else, so a
//! scheduler stuck in a store call, a deadlock or an oversleep is seen
//! without touching the store.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::thread::ThreadId;
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
/// with the server's threads. Each of the loop's threads (the loop itself,
/// and its workers while a wake-up's runs go on at the same time) speaks
/// for itself: the loop is late as soon as any of them is.
#[derive(Debug, Default)]
pub struct Heartbeat {
    expected: Mutex<Said>,
}

/// What the loop's threads said, each its last word.
#[derive(Debug, Default)]
struct Said {
    by_thread: HashMap<ThreadId, Expected>,
    /// The last word of a thread that has since left (a wake-up's worker),
    /// for when none is speaking.
    last: Option<Expected>,
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
    /// This thread of the loop is `doing` something and will be heard from
    /// again by `until` (plus [`MARGIN`]).
    pub fn expect(&self, until: Timestamp, doing: impl Into<String>) {
        let by = after(until, MARGIN);
        let said = Expected {
            by,
            doing: doing.into(),
        };
        let mut all = self.lock();
        all.last = Some(said.clone());
        all.by_thread.insert(std::thread::current().id(), said);
    }

    /// This thread of the loop has finished (a wake-up's worker): it is
    /// no longer waited for.
    pub fn leave(&self) {
        self.lock().by_thread.remove(&std::thread::current().id());
    }

    /// The loop's state as seen at `now`: late when any thread is (the
    /// one the longest overdue is named), else alive until the soonest
    /// time any gave itself.
    pub fn check(&self, now: Timestamp) -> Pulse {
        let all = self.lock();
        let soonest = all
            .by_thread
            .values()
            .min_by_key(|e| e.by)
            .or(all.last.as_ref())
            .cloned();
        match soonest {
            None => Pulse::Starting,
            Some(Expected { by, doing }) if now <= by => Pulse::Alive { doing, by },
            Some(Expected { by, doing }) => Pulse::Late { doing, by },
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Said> {
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

    #[test]
    fn one_stuck_worker_makes_the_loop_late_and_a_worker_that_left_is_not_waited_for() {
        for b_leaves in [false, true] {
            let beat = Heartbeat::default();
            beat.expect(at("2026-11-10T00:00:00Z"), "waking up");
            std::thread::scope(|s| {
                s.spawn(|| {
                    beat.expect(at("2026-11-10T00:05:00Z"), "running `a`");
                    beat.leave();
                });
                s.spawn(|| {
                    beat.expect(at("2026-11-10T00:01:00Z"), "running `b`");
                    if b_leaves {
                        beat.leave();
                    }
                });
            });
            beat.expect(at("2026-11-10T00:10:00Z"), "sleeping");
            let pulse = beat.check(at("2026-11-10T00:02:01Z"));
            match (b_leaves, pulse) {
                (false, Pulse::Late { doing, .. }) => assert_eq!(doing, "running `b`"),
                (true, Pulse::Alive { doing, .. }) => assert_eq!(doing, "sleeping"),
                other => panic!("{other:?}"),
            }
        }
    }
}
