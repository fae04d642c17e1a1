//! What a job would do now: the due windows nobody has decided yet, the
//! catch-up decision for each, and the next window to come due. `jobhost
//! plan` shows it without running anything; the scheduling daemon will act
//! on the same plan.
//!
//! Which windows count: those after the point up to which a scheduler
//! decided every window of the job (kept in the store); on a store without
//! that point, those after the newest due window the store holds (a row for
//! a window not due yet, run ahead with `--now`, does not count); on a
//! store that holds none, only the newest due window (a fresh store does
//! not back-fill history); with `since`, also every window from then on. A
//! window the store holds is shown as recorded, never decided again.

use jiff::Timestamp;

use crate::config::Config;
use crate::error::Result;
use crate::schedule::{Verdict, decide};
use crate::store::{ClaimStore, RunRecord, RunState};
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
    /// Where the store says every window was decided up to, if anywhere.
    pub decided_until: Option<Timestamp>,
}

impl Plan {
    /// The end of the newest window up to which every due window of this
    /// plan has a row, given which of the windows it decided now have one
    /// (`has_row`, by key): where the store's `decided_until` may move.
    pub fn decided_through(&self, has_row: &dyn Fn(&Entry) -> bool) -> Option<Timestamp> {
        self.entries
            .iter()
            .filter(|e| e.what != What::Next)
            .take_while(|e| matches!(e.what, What::Recorded(_)) || has_row(e))
            .map(|e| e.window.end)
            .last()
    }
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
    // One read of the job's rows (the newest due one, and the state of
    // every window the store holds: no query per window), and one of how
    // far a scheduler has decided them all.
    let (runs, decided_until) = match store {
        Some(s) => (
            s.history(Some(config.job.as_str()))?,
            s.decided_until(&config.job)?,
        ),
        None => (Vec::new(), None),
    };
    plan_over(config, now, since, &runs, decided_until)
}

/// [`plan`] over the job's rows as the store gave them (newest window
/// first) and its `decided_until`, read by the caller.
///
/// # Errors
///
/// `Error::Input` for instants out of range.
pub fn plan_over(
    config: &Config,
    now: Timestamp,
    since: Option<Timestamp>,
    runs: &[RunRecord],
    decided_until: Option<Timestamp>,
) -> Result<Plan> {
    let schedule = config.schedule();
    let last_due = schedule.last_due(now)?;
    let newest_known = runs.iter().find(|r| r.window_end <= last_due.end);
    let held: std::collections::HashMap<&str, RunState> =
        runs.iter().map(|r| (r.key.as_str(), r.state)).collect();
    // From where every window was decided; else (a store only `jobhost
    // run` wrote to) after the newest window it holds; else (a fresh
    // store) the newest due window alone.
    let default_from = match (decided_until, newest_known) {
        (Some(t), _) => t,
        (None, Some(run)) => run.window_end,
        (None, None) => last_due.start,
    };
    let from = since.map_or(default_from, |t| t.min(default_from));
    let mut due = schedule.due_since(from, now, MAX_WINDOWS + 1)?;
    let truncated = due.len() > MAX_WINDOWS;
    if truncated {
        due.remove(0);
    }
    // Windows between `from` and the newest one held may be held already
    // (by `jobhost run`, or another daemon): recorded, not decided again.
    let mut recorded = Vec::new();
    let mut open = Vec::new();
    for w in due {
        match held.get(w.key().as_str()) {
            Some(state) => recorded.push((w, *state)),
            None => open.push(w),
        }
    }
    let newest_recorded = newest_known.map(|r| r.window_start);
    let mut entries: Vec<Entry> = recorded
        .into_iter()
        .map(|(w, state)| Entry {
            due: schedule.due_at(&w),
            window: w,
            what: What::Recorded(state),
        })
        .chain(
            decide(&schedule, config.catch_up, &open, now, newest_recorded)
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
        decided_until,
    })
}
