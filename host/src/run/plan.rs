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

use crate::core::error::Result;
use crate::core::schedule::{CatchUp, Schedule, Verdict, decide};
use crate::core::window::Window;
use crate::store::{Ledger, RunRecord, RunState};

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
    /// It fell due, has no row, and nothing will decide it on its own
    /// (only in [`Plan::holes`]).
    Hole,
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
    /// Due windows with no row older than those the plan shows, which
    /// nothing decides on its own (filled in by [`plan`], for a person;
    /// [`plan_over`], the daemon's, leaves it empty).
    pub holes: Holes,
}

/// How many holes a listing names; the rest are counted.
pub const HOLES_LISTED: usize = 5;

/// The most windows [`holes`] looks at: the newest ones.
pub const HOLES_SCANNED: usize = 10_000;

/// Due windows with no row in the store that nothing will decide on its
/// own: after the point up to which every window of the job was decided
/// (or, on a store no daemon has used, after the job's oldest row), and
/// before the newest due window (which `status` and `plan` show apart) and
/// before `before`.
#[derive(Debug, Clone, Default)]
pub struct Holes {
    /// How many there are (at least, when `truncated`).
    pub count: usize,
    /// The oldest ones, oldest first, at most [`HOLES_LISTED`].
    pub first: Vec<Entry>,
    /// More than [`HOLES_SCANNED`] windows were looked at: older holes
    /// were not counted.
    pub truncated: bool,
}

/// The [`Holes`] at `now` of the job whose windows `schedule` times, given
/// its rows (any order) and its `decided_until`.
///
/// # Errors
///
/// `Error::Input` for instants out of range.
pub fn holes(
    schedule: &Schedule,
    now: Timestamp,
    runs: &[RunRecord],
    decided_until: Option<Timestamp>,
    before: Option<Timestamp>,
) -> Result<Holes> {
    let last_due = schedule.last_due(now)?;
    let before = before.map_or(last_due.start, |b| b.min(last_due.start));
    let Some(from) = decided_until.or_else(|| {
        runs.iter()
            .filter(|r| r.window_end <= last_due.end)
            .map(|r| r.window_start)
            .min()
    }) else {
        return Ok(Holes::default());
    };
    let held: std::collections::HashSet<&str> = runs.iter().map(|r| r.key.as_str()).collect();
    let due = schedule.due_since(from, now, HOLES_SCANNED + 1)?;
    let truncated = due.len() > HOLES_SCANNED;
    // Oldest first; past the limit, the oldest is the one left out.
    let open: Vec<Window> = due
        .into_iter()
        .skip(usize::from(truncated))
        .filter(|w| w.start < before && !held.contains(w.key().as_str()))
        .collect();
    Ok(Holes {
        count: open.len(),
        first: open
            .into_iter()
            .take(HOLES_LISTED)
            .map(|w| Entry {
                due: schedule.due_at(&w),
                window: w,
                what: What::Hole,
            })
            .collect(),
        truncated,
    })
}

impl Plan {
    /// The end of the newest window up to which every window has a row,
    /// given which of the windows this plan decided now have one
    /// (`has_row`): where the store's `decided_until` may move. It stops at
    /// the first window without a row, and at any gap between the windows
    /// (one not due yet while a later one is, in a zone whose clock hours
    /// are shorter than the jitter): no window is ever passed over. Only a
    /// truncated plan passes over what it left out, and says so.
    pub fn decided_through(&self, has_row: &dyn Fn(&Entry) -> bool) -> Option<Timestamp> {
        let mut through = None;
        let mut expected = if self.truncated {
            None
        } else {
            self.decided_until
        };
        for e in self.entries.iter().filter(|e| e.what != What::Next) {
            let contiguous = expected.is_none_or(|t| e.window.start <= t);
            if !contiguous || !(matches!(e.what, What::Recorded(_)) || has_row(e)) {
                break;
            }
            through = Some(e.window.end);
            expected = Some(e.window.end);
        }
        through
    }
}

/// The plan at `now` of the job whose windows `schedule` times, catching
/// up by `catch_up`, over `store` (`None`: a store that does not exist
/// yet).
///
/// # Errors
///
/// `Error::Store` when the store cannot be read; `Error::Input` for
/// instants out of range.
pub fn plan(
    schedule: &Schedule,
    catch_up: CatchUp,
    now: Timestamp,
    since: Option<Timestamp>,
    store: Option<&mut dyn Ledger>,
) -> Result<Plan> {
    let (runs, decided_until) = match store {
        Some(s) => {
            let decided_until = s.decided_until(&schedule.job)?;
            let runs = s.history_from(schedule.job.as_str(), rows_from(since, decided_until))?;
            (runs, decided_until)
        }
        None => (Vec::new(), None),
    };
    let mut plan = plan_over(schedule, catch_up, now, since, &runs, decided_until)?;
    // The windows the plan shows itself are not listed again as holes.
    let shown = plan
        .entries
        .iter()
        .filter(|e| e.what != What::Next)
        .map(|e| e.window.start)
        .min();
    let holes = holes(schedule, now, &runs, decided_until, shown)?;
    plan.holes = holes;
    Ok(plan)
}

/// Which of a job's rows a plan reads: one read (no query per window) of
/// those a plan can meet, the windows from where every window was decided
/// (and from `since`), so that a wake-up costs the same however long the
/// history; without that point (a store only `jobhost run` wrote to), all
/// of them, to find the newest.
pub fn rows_from(since: Option<Timestamp>, decided_until: Option<Timestamp>) -> Option<Timestamp> {
    let d = decided_until?;
    Some(since.map_or(d, |s| s.min(d)))
}

/// [`plan`] over the job's rows as the store gave them (newest window
/// first; at least those ending after [`rows_from`]) and its
/// `decided_until`, read by the caller.
///
/// # Errors
///
/// `Error::Input` for instants out of range.
pub fn plan_over(
    schedule: &Schedule,
    catch_up: CatchUp,
    now: Timestamp,
    since: Option<Timestamp>,
    runs: &[RunRecord],
    decided_until: Option<Timestamp>,
) -> Result<Plan> {
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
            decide(schedule, catch_up, &open, now, newest_recorded)
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
        holes: Holes::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::window::{JobName, WindowKind, Zone};

    fn hour(h: u32) -> Window {
        let t: Timestamp = format!("2026-11-09T{h:02}:30:00Z").parse().unwrap();
        Window::containing(
            &JobName::new("j").unwrap(),
            WindowKind::Hour,
            &Zone::utc(),
            t,
        )
        .unwrap()
    }

    fn entry(h: u32, what: What) -> Entry {
        let window = hour(h);
        Entry {
            due: window.end,
            window,
            what,
        }
    }

    fn plan(entries: Vec<Entry>, decided_until: Option<u32>, truncated: bool) -> Plan {
        Plan {
            now: hour(23).end,
            entries,
            truncated,
            decided_until: decided_until.map(|h| hour(h).end),
            holes: Holes::default(),
        }
    }

    #[test]
    fn decided_until_moves_over_windows_with_rows_and_stops_at_the_first_without_one() {
        let p = plan(
            vec![
                entry(3, What::Recorded(RunState::Done)),
                entry(4, What::Skip("missed".into())),
                entry(5, What::Run),
                entry(6, What::Run),
                entry(7, What::Next),
            ],
            Some(2),
            false,
        );
        let all = p.decided_through(&|_| true);
        assert_eq!(all, Some(hour(6).end));
        // The run of 05:00 failed before its claim: 06:00 ran, but the
        // mark stops before the hole.
        let hole = p.decided_through(&|e| e.window.start != hour(5).start);
        assert_eq!(hole, Some(hour(4).end));
    }

    #[test]
    fn decided_until_never_passes_over_a_window_missing_from_the_plan() {
        // 03:00 is not due yet (a long jitter in a short clock hour) while
        // 04:00 is: the mark stays where it was.
        let p = plan(vec![entry(4, What::Run)], Some(2), false);
        assert_eq!(p.decided_through(&|_| true), None);
        let p = plan(
            vec![entry(3, What::Run), entry(5, What::Run)],
            Some(2),
            false,
        );
        assert_eq!(p.decided_through(&|_| true), Some(hour(3).end));
        // A truncated plan says what it left out, and moves on.
        let p = plan(vec![entry(9, What::Run)], Some(2), true);
        assert_eq!(p.decided_through(&|_| true), Some(hour(9).end));
    }
}
