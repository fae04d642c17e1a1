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
//! a window of it needs a person: `failed` still wins). The job's open
//! incidents (`[[notify]]`) are listed with what each notification came
//! to, so a person sees what was told, to whom, and what was not.

use jiff::{SignedDuration, Timestamp};

use crate::core::error::Result;
use crate::core::schedule::Schedule;
use crate::core::window::Window;
use crate::run::plan::{HOLES_SCANNED, Holes, holes};
use crate::run::reads::Reads;
use crate::store::{Incident, Notification, Pause, RangeQuery, RunRecord, RunState, StaleMark};

/// How a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Health {
    /// Keeping up.
    Healthy,
    /// Keeping up, but a DONE window's answer may be wrong: an upstream
    /// window it used got a new revision (`jobhost rerun --stale` runs it
    /// again).
    Stale,
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
    pub const ALL: [Health; 5] = [
        Health::Healthy,
        Health::Stale,
        Health::Paused,
        Health::Late,
        Health::Failed,
    ];

    /// `healthy`, `paused`, `late` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "healthy",
            Health::Stale => "stale",
            Health::Paused => "paused",
            Health::Late => "late",
            Health::Failed => "failed",
        }
    }

    /// The exit code `jobhost status` gives when this is the worst job:
    /// 0 healthy, 6 stale, 5 paused, 3 late, 4 failed (1 and 2 stay for
    /// errors and bad input), worst last.
    pub fn exit_code(self) -> i32 {
        match self {
            Health::Healthy => 0,
            Health::Stale => 6,
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
    /// Windows WAITING for upstream windows they need, newest first.
    pub waiting: Vec<RunRecord>,
    /// Of those, the ones other than `expected` waiting past the grace:
    /// they make the job late, naming what they wait for.
    pub waiting_late: Vec<RunRecord>,
    /// What `expected` waits for, when it is WAITING.
    pub expected_waits_for: Option<String>,
    /// Stale marks on DONE windows, newest window first (at most
    /// [`BOUNDED_ROWS`]).
    pub stale: Vec<StaleMark>,
    /// How many `[shadow]` runs of current revisions ended each way
    /// (`None`: the job has none).
    pub shadow: Option<ShadowCounts>,
    /// The job's open incidents, oldest first, each with its
    /// notifications.
    pub incidents: Vec<(Incident, Vec<Notification>)>,
}

/// The most notifications of a job's open incidents [`status_bounded`]
/// reads (each incident's first ones: one per `[[notify]]` block, a job
/// having at most one open incident of each of five kinds).
pub const NOTIFICATIONS_READ: usize = 200;

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
            RunState::Waiting,
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
    let stale = s.stale(Some(job), None, BOUNDED_ROWS)?;
    let shadow = ShadowCounts::of(&s.shadow_counts(job)?);
    // The open incidents, and their notifications in one more read.
    let open = s.open_incidents(job)?;
    let told = if open.is_empty() {
        Vec::new()
    } else {
        s.open_notifications(job, NOTIFICATIONS_READ)?
    };
    let incidents = open
        .into_iter()
        .map(|i| {
            let of: Vec<Notification> = told
                .iter()
                .filter(|n| n.incident == i.id)
                .cloned()
                .collect();
            (i, of)
        })
        .collect();
    let mut status = judge(schedule, now, expected, &runs, holes, paused)?;
    if status.health == Health::Healthy && !stale.is_empty() {
        status.health = Health::Stale;
    }
    status.stale = stale;
    status.shadow = shadow;
    status.incidents = incidents;
    Ok(status)
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
    let delay = SignedDuration::try_from(schedule.delay).unwrap_or(SignedDuration::MAX);
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
    let waiting: Vec<RunRecord> = runs
        .iter()
        .filter(|r| r.state == RunState::Waiting)
        .cloned()
        .collect();
    let waiting_late: Vec<RunRecord> = waiting
        .iter()
        .filter(|r| {
            r.key != expected.key()
                && now.duration_since(r.window_end) > grace.saturating_add(delay)
        })
        .cloned()
        .collect();
    let expected_waits_for = runs
        .iter()
        .find(|r| r.key == expected.key() && r.state == RunState::Waiting)
        .and_then(|r| r.skip_reason.clone());
    let health = if !needs_a_person.is_empty() {
        Health::Failed
    } else if paused.is_some() {
        Health::Paused
    } else if late_by > grace || stuck || !waiting_late.is_empty() {
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
        waiting,
        waiting_late,
        expected_waits_for,
        stale: Vec::new(),
        shadow: None,
        incidents: Vec::new(),
    })
}

/// A job's status as `jobhost status --json` prints it and the dashboard's
/// job object carries it (`status`): one struct, so the two cannot drift.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StatusReport {
    /// The job.
    pub job: String,
    /// `healthy`, `paused`, `late` or `failed`.
    pub health: &'static str,
    /// The instant judged by.
    pub now: String,
    /// The newest window that should be done by now.
    pub expected: String,
    /// When it became due.
    pub expected_due: String,
    /// Where it stands (`not claimed` without a row).
    pub expected_state: &'static str,
    /// How long it has been due without being DONE.
    pub expected_late_seconds: i64,
    /// The larger of that and the oldest hole's lateness.
    pub late_seconds: i64,
    /// The job's grace.
    pub grace_seconds: u64,
    /// The newest DONE window's key.
    pub last_done: Option<String>,
    /// Windows that failed for good or were abandoned, newest first.
    pub needs_a_person: Vec<NeedsAPerson>,
    /// Windows waiting out a retry, newest first.
    pub retrying: Vec<Retrying>,
    /// Windows CLAIMED or PREPARED with no retry pending, newest first.
    pub unfinished: Vec<Unfinished>,
    /// Whether an older run is stuck past the grace.
    pub stuck: bool,
    /// Windows skipped by catch-up since the last DONE one, newest first.
    pub skipped_since_last_done: Vec<SkippedWindow>,
    /// The holes.
    pub holes: HolesReport,
    /// The pause, when a person paused the job.
    pub paused: Option<PauseReport>,
    /// What the newest due window waits for, when it is WAITING.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_waits_for: Option<String>,
    /// Windows WAITING for upstream windows they need, newest first.
    pub waiting: Vec<WaitingWindow>,
    /// DONE windows whose answer may be wrong now, newest first.
    pub stale: Vec<StaleWindow>,
    /// `jobhost rerun --stale ...`: runs them again, when there are any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerun_stale_command: Option<String>,
    /// How many `[shadow]` runs agreed with, differed from and failed
    /// beside the live ones (current revisions); absent with none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowCounts>,
    /// Open incidents (`[[notify]]`), oldest first, with what their
    /// notifications came to.
    pub incidents: Vec<IncidentReport>,
}

/// An open incident, as `status` and the dashboard show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IncidentReport {
    /// Its id (in the notifications' idempotency keys).
    pub id: i64,
    /// `failed`, `abandoned`, `late`, `stale` or `paused`.
    pub kind: String,
    /// The window that opened it, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// What opened it, one line.
    pub detail: String,
    /// When it opened.
    pub opened_at: String,
    /// Its notifications, oldest first.
    pub notifications: Vec<NotificationReport>,
}

/// One notification of an incident: to whom, and how it went.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NotificationReport {
    /// `failed`, `late`, ..., as the receiver was told.
    pub event: String,
    /// The `[[notify]]` URL, as written.
    pub to: String,
    /// `sent`, `pending` (to be tried, or tried again at a later pass) or
    /// `failed` (given up).
    pub state: String,
    /// Sends tried so far.
    pub attempts: u32,
    /// The receiver's last answer, or why there was none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl IncidentReport {
    /// The report of `incident` and its notifications `told`.
    pub fn of(incident: &Incident, told: &[Notification]) -> IncidentReport {
        IncidentReport {
            id: incident.id,
            kind: incident.kind.clone(),
            key: incident.key.clone(),
            detail: incident.detail.clone(),
            opened_at: crate::core::clock::rfc3339(incident.opened_at),
            notifications: told
                .iter()
                .map(|n| NotificationReport {
                    event: n.event.clone(),
                    to: n.target.clone(),
                    state: n.state.to_ascii_lowercase(),
                    attempts: n.attempts,
                    detail: n.detail.clone(),
                })
                .collect(),
        }
    }

    /// The incident in words, for a person: what, since when, and what
    /// each notification came to.
    pub fn words(&self) -> String {
        let told: Vec<String> = self
            .notifications
            .iter()
            .map(|n| {
                let answer = n
                    .detail
                    .as_deref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default();
                match (n.state.as_str(), n.attempts) {
                    ("sent", _) => format!("{} sent", n.to),
                    ("pending", 0) => format!("{} not sent yet", n.to),
                    ("pending", tries) => {
                        format!("{} not delivered yet ({tries} attempt(s){answer})", n.to)
                    }
                    (_, tries) => format!("{} given up ({tries} attempt(s){answer})", n.to),
                }
            })
            .collect();
        format!(
            "incident `{}` open since {}{}: {}{}",
            self.kind,
            self.opened_at,
            self.key
                .as_deref()
                .map(|k| format!(" ({k})"))
                .unwrap_or_default(),
            self.detail,
            if told.is_empty() {
                String::new()
            } else {
                format!(" [told: {}]", told.join(", "))
            }
        )
    }
}

/// Shadow runs by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ShadowCounts {
    /// The candidate's report and messages were the live run's, bit for bit.
    pub agreed: u64,
    /// They differed (`history KEY` shows how).
    pub differed: u64,
    /// The candidate failed, trapped or ran out of time.
    pub failed: u64,
}

impl ShadowCounts {
    /// From the store's counts by verdict; `None` when there are none.
    pub fn of(counts: &[(String, u64)]) -> Option<ShadowCounts> {
        let n = |v: &str| counts.iter().find(|(w, _)| w == v).map_or(0, |(_, n)| *n);
        (!counts.is_empty()).then(|| ShadowCounts {
            agreed: n("agreed"),
            differed: n("differed"),
            failed: n("failed"),
        })
    }

    /// Each verdict with its count.
    pub fn by_verdict(&self) -> [(&'static str, u64); 3] {
        [
            ("agreed", self.agreed),
            ("differed", self.differed),
            ("failed", self.failed),
        ]
    }
}

/// A DONE window marked stale.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StaleWindow {
    /// Its key.
    pub key: String,
    /// Its revision found stale.
    pub revision: u32,
    /// Why.
    pub cause: String,
    /// Since when.
    pub since: String,
}

/// A window WAITING for upstream windows.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WaitingWindow {
    /// Its key.
    pub key: String,
    /// What it waits for, in words.
    pub waits_for: Option<String>,
    /// Whether it has waited past the job's grace.
    pub late: bool,
}

/// A window that needs a person.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NeedsAPerson {
    /// Its key.
    pub key: String,
    /// `FAILED` or `ABANDONED`.
    pub state: &'static str,
    /// Its last error.
    pub error: Option<String>,
    /// `jobhost retry KEY ...`.
    pub retry_command: String,
}

/// A window waiting out a retry.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Retrying {
    /// Its key.
    pub key: String,
    /// `FAILED`, or `PREPARED` with a delivery in backoff.
    pub state: &'static str,
    /// The attempt that failed.
    pub attempt: u32,
    /// When the next one is due.
    pub retry_at: Option<String>,
    /// Its last error.
    pub error: Option<String>,
    /// `jobhost retry KEY ...`: tries it now.
    pub retry_command: String,
}

/// A window a run holds or held.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Unfinished {
    /// Its key.
    pub key: String,
    /// `CLAIMED` or `PREPARED`.
    pub state: &'static str,
    /// Who holds (or held) it.
    pub owner: String,
    /// The attempt.
    pub attempt: u32,
    /// When its lease ends.
    pub lease_until: String,
    /// Messages staged.
    pub messages: u32,
    /// Messages delivered.
    pub delivered: u32,
    /// When it can be taken over: the lease's end.
    pub resumable_at: String,
    /// `jobhost retry KEY ...`: takes it over then.
    pub retry_command: String,
}

/// A window skipped by catch-up.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SkippedWindow {
    /// Its key.
    pub key: String,
    /// Why.
    pub reason: Option<String>,
}

/// The holes, as [`Holes`] counts them.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HolesReport {
    /// How many (at least, when `truncated`).
    pub count: usize,
    /// The oldest, oldest first.
    pub listed: Vec<HoleReport>,
    /// Not every window was looked at.
    pub truncated: bool,
    /// How long the oldest has been due.
    pub oldest_late_seconds: i64,
}

/// One hole.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HoleReport {
    /// Its key.
    pub key: String,
    /// Its start.
    pub start: String,
    /// Its end.
    pub end: String,
    /// When it became due.
    pub due: String,
    /// How long ago.
    pub late_seconds: i64,
    /// `jobhost run --for LABEL ...`: runs it.
    pub run_command: String,
}

/// A pause.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PauseReport {
    /// The note given.
    pub note: String,
    /// Who paused it.
    pub by: String,
    /// Since when.
    pub since: String,
}

impl Status {
    /// This status as [`StatusReport`] says it, for the job `schedule`
    /// times, at `now`, its commands naming the job as `target` does.
    pub fn report(
        &self,
        schedule: &Schedule,
        now: Timestamp,
        target: &crate::core::command::Target,
    ) -> StatusReport {
        use crate::core::clock::rfc3339;
        use crate::core::command::shell_quote;
        let retry =
            |r: &RunRecord| target.command(&format!("retry {}", shell_quote(r.key.as_str())));
        StatusReport {
            job: schedule.job.to_string(),
            health: self.health.as_str(),
            now: rfc3339(now),
            expected: self.expected.key().to_string(),
            expected_due: rfc3339(self.expected_due),
            expected_state: self.expected_state.map_or("not claimed", RunState::as_str),
            expected_late_seconds: self.expected_late.as_secs(),
            late_seconds: self.late_by.as_secs(),
            grace_seconds: schedule.grace.as_secs(),
            last_done: self.last_done.as_ref().map(|r| r.key.to_string()),
            needs_a_person: self
                .needs_a_person
                .iter()
                .map(|r| NeedsAPerson {
                    key: r.key.to_string(),
                    state: r.state.as_str(),
                    error: r.error.clone(),
                    retry_command: retry(r),
                })
                .collect(),
            retrying: self
                .retrying
                .iter()
                .map(|r| Retrying {
                    key: r.key.to_string(),
                    state: r.state.as_str(),
                    attempt: r.attempt,
                    retry_at: r.retry_at.map(rfc3339),
                    error: r.error.clone(),
                    retry_command: retry(r),
                })
                .collect(),
            unfinished: self
                .unfinished
                .iter()
                .map(|r| Unfinished {
                    key: r.key.to_string(),
                    state: r.state.as_str(),
                    owner: r.owner.clone(),
                    attempt: r.attempt,
                    lease_until: rfc3339(r.lease_until),
                    messages: r.messages,
                    delivered: r.delivered,
                    resumable_at: rfc3339(r.lease_until),
                    retry_command: retry(r),
                })
                .collect(),
            stuck: self.stuck,
            skipped_since_last_done: self
                .skipped
                .iter()
                .map(|r| SkippedWindow {
                    key: r.key.to_string(),
                    reason: r.skip_reason.clone(),
                })
                .collect(),
            holes: HolesReport {
                count: self.holes.count,
                listed: self
                    .holes
                    .first
                    .iter()
                    .map(|h| HoleReport {
                        key: h.window.key().to_string(),
                        start: rfc3339(h.window.start),
                        end: rfc3339(h.window.end),
                        due: rfc3339(h.due),
                        late_seconds: now.duration_since(h.due).as_secs().max(0),
                        run_command: target
                            .command(&format!("run --for {}", shell_quote(&h.window.label))),
                    })
                    .collect(),
                truncated: self.holes.truncated,
                oldest_late_seconds: self.hole_late.as_secs(),
            },
            paused: self.paused.as_ref().map(|p| PauseReport {
                note: p.note.clone(),
                by: p.by.clone(),
                since: rfc3339(p.since),
            }),
            expected_waits_for: self.expected_waits_for.clone(),
            waiting: self
                .waiting
                .iter()
                .map(|r| WaitingWindow {
                    key: r.key.to_string(),
                    waits_for: r.skip_reason.clone(),
                    late: self.waiting_late.iter().any(|l| l.key == r.key)
                        || (r.key == self.expected.key() && self.expected_late > self.grace),
                })
                .collect(),
            stale: self
                .stale
                .iter()
                .map(|m| StaleWindow {
                    key: m.key.to_string(),
                    revision: m.revision,
                    cause: m.cause.clone(),
                    since: rfc3339(m.since),
                })
                .collect(),
            rerun_stale_command: (!self.stale.is_empty())
                .then(|| target.command("rerun --stale --reason TEXT")),
            shadow: self.shadow,
            incidents: self
                .incidents
                .iter()
                .map(|(i, told)| IncidentReport::of(i, told))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::core::window::{JobName, WindowKind, Zone};
    use crate::store::Fence;

    /// A daily job in UTC, due at midnight, late an hour after.
    fn schedule() -> Schedule {
        Schedule {
            job: JobName::new("daily").unwrap(),
            kind: WindowKind::Day,
            zone: Zone::utc(),
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            grace: Duration::from_secs(3600),
        }
    }

    fn at(t: &str) -> Timestamp {
        t.parse().unwrap()
    }

    /// A row of day `label` in `state`, its lease long over.
    fn row(label: &str, state: RunState) -> RunRecord {
        let s = schedule();
        let w = Window::labelled(&s.job, s.kind, &s.zone, label).unwrap();
        RunRecord {
            key: w.key(),
            job: "daily".into(),
            window_start: w.start,
            window_end: w.end,
            timezone: "UTC".into(),
            state,
            fence: Fence(1),
            attempt: 1,
            owner: "host-a".into(),
            lease_until: w.end,
            retry_at: None,
            component: "sha256:00".into(),
            report: None,
            error: None,
            skip_reason: None,
            journal_bytes: None,
            messages: 0,
            delivered: 0,
            created_at: w.end,
            updated_at: w.end,
            digest: None,
            revision: 1,
            reason: None,
            pruned_at: None,
        }
    }

    fn retrying(mut r: RunRecord, at_: &str) -> RunRecord {
        r.retry_at = Some(at(at_));
        r
    }

    fn status(now: &str, rows: &[RunRecord], paused: bool) -> Status {
        let s = schedule();
        let now = at(now);
        let mut rows = rows.to_vec();
        rows.sort_by_key(|r| std::cmp::Reverse(r.window_start));
        let holes = holes(&s, now, &rows, None, None).unwrap();
        let pause = paused.then(|| Pause {
            job: "daily".into(),
            note: "maintenance".into(),
            by: "ops".into(),
            since: at("2026-11-09T12:00:00Z"),
        });
        judge(&s, now, s.last_due(now).unwrap(), &rows, holes, pause).unwrap()
    }

    use RunState::{Abandoned, Claimed, Done, Failed, Prepared, Skipped};

    #[test]
    fn health_follows_the_rules_worst_first() {
        // (what, now, rows, paused) -> health. The newest due window at
        // these instants is 2026-11-09, due at 2026-11-10T00:00Z.
        let cases: Vec<(&str, &str, Vec<RunRecord>, bool, Health)> = vec![
            (
                "newest window done",
                "2026-11-10T05:00:00Z",
                vec![row("2026-11-09", Done)],
                false,
                Health::Healthy,
            ),
            (
                "not done yet, within the grace",
                "2026-11-10T00:30:00Z",
                vec![row("2026-11-08", Done)],
                false,
                Health::Healthy,
            ),
            (
                "not done past the grace",
                "2026-11-10T05:00:00Z",
                vec![row("2026-11-08", Done)],
                false,
                Health::Late,
            ),
            (
                "a retry waiting past the grace is late, not failed",
                "2026-11-10T05:00:00Z",
                vec![
                    retrying(row("2026-11-09", Failed), "2026-11-10T06:00:00Z"),
                    row("2026-11-08", Done),
                ],
                false,
                Health::Late,
            ),
            (
                "failed for good",
                "2026-11-10T00:30:00Z",
                vec![row("2026-11-09", Failed), row("2026-11-08", Done)],
                false,
                Health::Failed,
            ),
            (
                "an older abandoned window fails a job whose newest is done",
                "2026-11-10T05:00:00Z",
                vec![row("2026-11-09", Done), row("2026-11-08", Abandoned)],
                false,
                Health::Failed,
            ),
            (
                "paused is not called late",
                "2026-11-10T05:00:00Z",
                vec![row("2026-11-08", Done)],
                true,
                Health::Paused,
            ),
            (
                "failed beats paused",
                "2026-11-10T05:00:00Z",
                vec![row("2026-11-09", Abandoned)],
                true,
                Health::Failed,
            ),
            (
                "an older run a dead owner holds, ready past the grace, is stuck",
                "2026-11-10T05:00:00Z",
                vec![
                    row("2026-11-09", Done),
                    row("2026-11-08", Prepared),
                    row("2026-11-07", Done),
                ],
                false,
                Health::Late,
            ),
            (
                "a hole past its grace makes the job late",
                "2026-11-10T05:00:00Z",
                vec![row("2026-11-09", Done), row("2026-11-07", Done)],
                false,
                Health::Late,
            ),
            (
                "a skipped window is no hole",
                "2026-11-10T05:00:00Z",
                vec![
                    row("2026-11-09", Done),
                    row("2026-11-08", Skipped),
                    row("2026-11-07", Done),
                ],
                false,
                Health::Healthy,
            ),
        ];
        for (what, now, rows, paused, health) in cases {
            let st = status(now, &rows, paused);
            assert_eq!(st.health, health, "{what}: {st:?}");
            assert_eq!(
                st.health.exit_code(),
                [0, 6, 5, 3, 4][Health::ALL.iter().position(|h| *h == health).unwrap()],
                "{what}"
            );
        }
    }

    #[test]
    fn each_row_is_listed_where_a_person_looks_for_it() {
        let st = status(
            "2026-11-10T05:00:00Z",
            &[
                retrying(row("2026-11-09", Prepared), "2026-11-10T06:00:00Z"),
                row("2026-11-08", Claimed),
                row("2026-11-07", Skipped),
                retrying(row("2026-11-06", Failed), "2026-11-10T06:00:00Z"),
                row("2026-11-05", Failed),
                row("2026-11-04", Done),
                row("2026-11-03", Skipped),
            ],
            false,
        );
        let keys = |rs: &[RunRecord]| {
            rs.iter()
                .map(|r| r.key.as_str().trim_start_matches("daily:").to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(keys(&st.retrying), ["2026-11-09", "2026-11-06"]);
        assert_eq!(keys(&st.unfinished), ["2026-11-08"]);
        assert_eq!(keys(&st.needs_a_person), ["2026-11-05"]);
        // Skipped since the last DONE window only.
        assert_eq!(keys(&st.skipped), ["2026-11-07"]);
        assert_eq!(
            st.last_done.as_ref().map(|r| r.key.as_str()),
            Some("daily:2026-11-04")
        );
        assert_eq!(st.expected_state, Some(Prepared));
    }

    #[test]
    fn the_newest_late_window_and_the_oldest_hole_each_keep_their_own_age() {
        // 2026-11-07 has no row: a hole due since 2026-11-08T00:00Z.
        let st = status(
            "2026-11-10T00:30:00Z",
            &[row("2026-11-08", Done), row("2026-11-06", Done)],
            false,
        );
        assert_eq!(st.holes.count, 1);
        assert_eq!(st.expected_late, SignedDuration::from_mins(30));
        assert_eq!(
            st.hole_late,
            SignedDuration::from_hours(48) + SignedDuration::from_mins(30)
        );
        assert_eq!(st.late_by, st.hole_late);
        // Late for the hole, not for the newest window, still within its grace.
        assert!(st.late_for_hole);
        assert_eq!(st.health, Health::Late);
    }
}
