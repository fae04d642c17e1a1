//! Whether a job is keeping up, for a person or a monitor: its last DONE
//! window, the newest window that should be done by now, how late that one
//! is, and the windows that need a person (failed for good or abandoned,
//! however old: they stay until a person retries them (`backfill --only
//! failed`) or forgets them (`jobhost forget`)). A job is
//! `failed` when such a window exists; `late` when the newest due window is
//! not DONE more than the job's grace after it became due (a window the
//! scheduler skipped is not done either), or an older run is stuck (its
//! retry or its dead owner's lease more than the grace in the past);
//! `healthy` otherwise (a run in progress or waiting out a retry within the
//! grace is healthy). A hole (a due window older than the newest with no
//! row, which no daemon will decide: cron runs only the newest) makes the
//! job late once its grace has passed, like the newest due window. Retries
//! pending, holes and windows skipped since the last DONE one are listed
//! too, for a person. A paused job is `paused` rather than late (unless
//! a window of it needs a person: `failed` still wins).

use jiff::{SignedDuration, Timestamp};

use crate::core::error::Result;
use crate::core::schedule::Schedule;
use crate::core::window::Window;
use crate::run::plan::{HOLES_SCANNED, Holes, holes};
use crate::run::reads::Reads;
use crate::store::{Pause, RangeQuery, RunRecord, RunState};

/// How a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Health {
    /// Keeping up.
    Healthy,
    /// Paused by a person (`jobhost pause`): nothing runs, and it is not
    /// called late while paused.
    Paused,
    /// The newest due window is overdue by more than the grace.
    Late,
    /// A window failed for good or was abandoned: a person must look.
    Failed,
}

impl Health {
    /// Every health, best first.
    pub const ALL: [Health; 4] = [
        Health::Healthy,
        Health::Paused,
        Health::Late,
        Health::Failed,
    ];

    /// `healthy`, `paused`, `late` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "healthy",
            Health::Paused => "paused",
            Health::Late => "late",
            Health::Failed => "failed",
        }
    }

    /// The exit code `jobhost status` gives when this is the worst job:
    /// 0 healthy, 5 paused, 3 late, 4 failed (1 and 2 stay for errors and
    /// bad input), worst last.
    pub fn exit_code(self) -> i32 {
        match self {
            Health::Healthy => 0,
            Health::Paused => 5,
            Health::Late => 3,
            Health::Failed => 4,
        }
    }
}

/// One job's status at one instant.
#[derive(Debug, Clone)]
pub struct Status {
    /// How it stands.
    pub health: Health,
    /// The newest DONE window, if any.
    pub last_done: Option<RunRecord>,
    /// The newest window that should be done by now.
    pub expected: Window,
    /// When `expected` became due.
    pub expected_due: Timestamp,
    /// Where `expected` stands in the store (`None`: not claimed yet).
    pub expected_state: Option<RunState>,
    /// How long `expected`, or the oldest hole, has been due without being
    /// DONE (zero when `expected` is DONE and there is no hole): the larger
    /// of [`Status::expected_late`] and [`Status::hole_late`].
    pub late_by: SignedDuration,
    /// How long `expected` has been due without being DONE.
    pub expected_late: SignedDuration,
    /// How long the oldest hole has been due (zero without one).
    pub hole_late: SignedDuration,
    /// Windows a run holds or held: CLAIMED (running, or its owner died)
    /// or PREPARED (a committed report being delivered) with no retry
    /// pending, newest first; each can be taken over once its lease ends.
    pub unfinished: Vec<RunRecord>,
    /// Whether an unfinished run or a retry is stuck: ready to be taken
    /// over (its lease or its retry time passed) for longer than the grace,
    /// in a window past its grace.
    pub stuck: bool,
    /// Windows that failed for good or were abandoned, newest first.
    pub needs_a_person: Vec<RunRecord>,
    /// Windows whose last attempt failed and that wait for a retry (FAILED,
    /// or PREPARED with a delivery waiting out its backoff), newest first.
    pub retrying: Vec<RunRecord>,
    /// Windows the scheduler skipped (catch-up) since the last DONE one,
    /// newest first.
    pub skipped: Vec<RunRecord>,
    /// Due windows older than `expected` with no row that nothing will
    /// decide on its own (cron mode: `jobhost run` only runs the newest);
    /// one whose grace has passed makes the job late.
    pub holes: Holes,
    /// The job's grace: how long a window may be due before it is late.
    pub grace: SignedDuration,
    /// Whether the job is late for its oldest hole rather than for
    /// `expected` (which is within its grace, or DONE).
    pub late_for_hole: bool,
    /// The job's pause, when a person paused it.
    pub paused: Option<Pause>,
}

/// The most rows of each kind [`status_bounded`] reads: windows that need
/// a person, unfinished ones, and skipped ones since the last DONE window.
pub const BOUNDED_ROWS: usize = 200;

/// The status at `now` of the job whose windows `schedule` times, over
/// `store` (`None`: no store yet), from a bounded number of indexed reads,
/// whatever the length of the job's history: the newest DONE row, the
/// expected window's row, the rows that need a person or are unfinished,
/// the skipped ones since the last DONE one (at most [`BOUNDED_ROWS`] of
/// each), and for the holes a count of the rows in the range [`holes`]
/// scans, reading that range's rows only when the count says some window
/// in it has none. `jobhost status`, the dashboard and `/metrics` all
/// judge by it.
///
/// # Errors
///
/// `Error::Store` when the store cannot be read.
pub fn status_bounded(
    schedule: &Schedule,
    now: Timestamp,
    store: Option<&mut Reads<'_>>,
) -> Result<Status> {
    let expected = schedule.last_due(now)?;
    let Some(s) = store else {
        let holes = holes(schedule, now, &[], None, None)?;
        return judge(schedule, now, expected, &[], holes, None);
    };
    let job = schedule.job.as_str();
    let decided_until = s.decided_until(&schedule.job)?;
    let paused = s.paused(job)?;
    let q = |states: &'static [RunState], limit: usize| RangeQuery {
        job,
        from: None,
        until: None,
        states,
        oldest_first: false,
        limit,
    };
    let mut runs = s.range(&q(&[RunState::Done], 1))?;
    let last_done_start = runs.first().map(|r| r.window_start);
    runs.extend(s.range(&q(
        &[
            RunState::Abandoned,
            RunState::Failed,
            RunState::Claimed,
            RunState::Prepared,
        ],
        BOUNDED_ROWS,
    ))?);
    runs.extend(s.range(&RangeQuery {
        from: last_done_start,
        ..q(&[RunState::Skipped], BOUNDED_ROWS)
    })?);
    runs.extend(s.peek(&expected.key())?);
    // Holes: from where `holes` would start, count the rows; read them
    // only when a window there may have none.
    let from = match decided_until {
        Some(t) => Some(t),
        None => s
            .range(&RangeQuery {
                until: Some(expected.end),
                oldest_first: true,
                ..q(&[], 1)
            })?
            .first()
            .map(|r| r.window_start),
    };
    let holes = match from {
        None => Holes::default(),
        Some(from) => {
            let due = schedule.due_since(from, now, HOLES_SCANNED + 1)?;
            let truncated = due.len() > HOLES_SCANNED;
            let scanned = &due[usize::from(truncated)..];
            let wanted = scanned.iter().filter(|w| w.start < expected.start).count();
            let first = scanned.first().map_or(expected.start, |w| w.start);
            let held: u64 = s
                .counts(job, Some(first), Some(expected.start))?
                .iter()
                .map(|(_, n)| n)
                .sum();
            if held == wanted as u64 {
                Holes {
                    truncated,
                    ..Holes::default()
                }
            } else {
                let rows = s.range(&RangeQuery {
                    from: Some(first),
                    until: Some(expected.start),
                    ..q(&[], HOLES_SCANNED + 1)
                })?;
                holes(schedule, now, &rows, Some(from), None)?
            }
        }
    };
    runs.sort_by(|a, b| {
        b.window_start
            .cmp(&a.window_start)
            .then_with(|| a.key.as_str().cmp(b.key.as_str()))
    });
    runs.dedup_by(|a, b| a.key == b.key);
    judge(schedule, now, expected, &runs, holes, paused)
}

/// The status from the job's rows that matter (newest window first) and
/// its holes.
fn judge(
    schedule: &Schedule,
    now: Timestamp,
    expected: Window,
    runs: &[RunRecord],
    holes: Holes,
    paused: Option<Pause>,
) -> Result<Status> {
    let expected_due = schedule.due_at(&expected);
    let last_done = runs.iter().find(|r| r.state == RunState::Done).cloned();
    let needs_a_person: Vec<RunRecord> = runs
        .iter()
        .filter(|r| {
            r.state == RunState::Abandoned || (r.state == RunState::Failed && r.retry_at.is_none())
        })
        .cloned()
        .collect();
    let retrying: Vec<RunRecord> = runs
        .iter()
        .filter(|r| {
            matches!(r.state, RunState::Failed | RunState::Prepared) && r.retry_at.is_some()
        })
        .cloned()
        .collect();
    let unfinished: Vec<RunRecord> = runs
        .iter()
        .filter(|r| {
            matches!(r.state, RunState::Claimed | RunState::Prepared) && r.retry_at.is_none()
        })
        .cloned()
        .collect();
    let skipped: Vec<RunRecord> = runs
        .iter()
        .filter(|r| {
            r.state == RunState::Skipped
                && last_done
                    .as_ref()
                    .is_none_or(|d| r.window_start > d.window_start)
        })
        .cloned()
        .collect();
    let grace = SignedDuration::try_from(schedule.grace).unwrap_or(SignedDuration::MAX);
    // Leases and retry times are on the store's clock; real time stands in
    // for it here.
    let real_now = Timestamp::now().max(now);
    let stuck = runs.iter().any(|r| {
        let unfinished = matches!(r.state, RunState::Claimed | RunState::Prepared)
            || (r.state == RunState::Failed && r.retry_at.is_some());
        let ready = r.retry_at.unwrap_or(r.lease_until);
        unfinished
            && r.key != expected.key()
            && real_now.duration_since(ready) > grace
            && now.duration_since(r.window_end) > grace
    });
    let expected_state = runs
        .iter()
        .find(|r| r.key == expected.key())
        .map(|r| r.state);
    let expected_late = if expected_state == Some(RunState::Done) {
        SignedDuration::ZERO
    } else {
        now.duration_since(expected_due).max(SignedDuration::ZERO)
    };
    // The oldest hole has been due the longest.
    let hole_late = holes
        .first
        .first()
        .map_or(SignedDuration::ZERO, |h| now.duration_since(h.due));
    let late_by = expected_late.max(hole_late);
    let health = if !needs_a_person.is_empty() {
        Health::Failed
    } else if paused.is_some() {
        Health::Paused
    } else if late_by > grace || stuck {
        Health::Late
    } else {
        Health::Healthy
    };
    Ok(Status {
        health,
        last_done,
        expected,
        expected_due,
        expected_state,
        late_by,
        expected_late,
        hole_late,
        unfinished,
        stuck,
        needs_a_person,
        retrying,
        skipped,
        holes,
        grace,
        late_for_hole: expected_late <= grace && hole_late > grace,
        paused,
    })
}
