//! What a job would do now: the due windows nobody has decided yet, the
//! catch-up decision for each, and the next window to come due. `jobhost
//! plan` shows it without running anything; the scheduling daemon will act
//! on the same plan.
//!
//! Which windows count: those after the newest due window the store knows
//! for the job (a row for a window not due yet, run ahead with `--now`,
//! does not count); on a store that knows none, only the newest due window
//! (a fresh store does not back-fill history); with `since`, every window
//! from then on. A window the store holds is shown as recorded, never
//! decided again.

use jiff::Timestamp;

use crate::config::Config;
use crate::error::Result;
use crate::schedule::{Verdict, decide};
use crate::store::{ClaimStore, RunState};
use crate::window::Window;

/// The most windows one plan considers; older ones are left out (and the
/// plan says so).
pub const MAX_WINDOWS: usize = 10_000;

/// One window in a plan.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The window.
    pub window: Window,
    /// When it is (or was) due.
    pub due: Timestamp,
    /// What happens to it.
    pub what: What,
}

/// What happens to a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// It runs now.
    Run,
    /// It is skipped, for this reason.
    Skip(String),
    /// The store already holds it, in this state (only with `since`).
    Recorded(RunState),
    /// It is the next window to come due.
    Next,
}

/// A job's plan at one instant.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The instant planned for.
    pub now: Timestamp,
    /// Due windows, oldest first, then the next one to come due.
    pub entries: Vec<Entry>,
    /// Windows older than these were left out ([`MAX_WINDOWS`]).
    pub truncated: bool,
}

/// The plan of `config`'s job at `now`, over `store` (`None`: a store that
/// does not exist yet).
///
/// # Errors
///
/// `Error::Store` when the store cannot be read; `Error::Input` for
/// instants out of range.
pub fn plan(
    config: &Config,
    now: Timestamp,
    since: Option<Timestamp>,
    store: Option<&mut dyn ClaimStore>,
) -> Result<Plan> {
    plan_after(config, now, since, None, store)
}

/// [`plan`], leaving out windows that start before `decided_until` (the
/// daemon's memory of what it already decided in this process).
///
/// # Errors
///
/// As [`plan`].
pub fn plan_after(
    config: &Config,
    now: Timestamp,
    since: Option<Timestamp>,
    decided_until: Option<Timestamp>,
    store: Option<&mut dyn ClaimStore>,
) -> Result<Plan> {
    let schedule = config.schedule();
    let last_due = schedule.last_due(now)?;
    // One read of the job's rows: the newest due one, and the state of every
    // window the store holds (no query per window).
    let runs = match store {
        Some(s) => s.history(Some(config.job.as_str()))?,
        None => Vec::new(),
    };
    let newest_known = runs.iter().find(|r| r.window_end <= last_due.end);
    let held: std::collections::HashMap<&str, RunState> =
        runs.iter().map(|r| (r.key.as_str(), r.state)).collect();
    let from = match (since, &newest_known) {
        (Some(t), _) => t,
        (None, Some(run)) => run.window_end,
        (None, None) => last_due.start,
    };
    let from = decided_until.map_or(from, |d| from.max(d));
    let mut due = schedule.due_since(from, now, MAX_WINDOWS + 1)?;
    let truncated = due.len() > MAX_WINDOWS;
    if truncated {
        due.remove(0);
    }
    // With `since`, some of these may be recorded already.
    let mut recorded = Vec::new();
    let mut open = Vec::new();
    for w in due {
        match held.get(w.key().as_str()) {
            Some(state) => recorded.push((w, *state)),
            None => open.push(w),
        }
    }
    let mut entries: Vec<Entry> = recorded
        .into_iter()
        .map(|(w, state)| Entry {
            due: schedule.due_at(&w),
            window: w,
            what: What::Recorded(state),
        })
        .chain(
            decide(&schedule, config.catch_up, &open, now)
                .into_iter()
                .map(|(w, verdict)| Entry {
                    due: schedule.due_at(&w),
                    window: w,
                    what: match verdict {
                        Verdict::Run => What::Run,
                        Verdict::Skip(why) => What::Skip(why),
                    },
                }),
        )
        .collect();
    entries.sort_by_key(|e| e.window.start);
    let (next, at) = schedule.next_due(now)?;
    entries.push(Entry {
        window: next,
        due: at,
        what: What::Next,
    });
    Ok(Plan {
        now,
        entries,
        truncated,
    })
}
