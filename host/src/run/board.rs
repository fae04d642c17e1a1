//! The facts the dashboard shows, as plain serializable structs: every job
//! at a glance ([`overview`]), one job's windows as a grid ([`grid`]), and
//! one run in detail ([`run_detail`]). Each is computed from a bounded
//! number of indexed reads (counted in [`Reads`]), whatever the length of
//! the job's history; the HTML and the JSON of a page are two renderings
//! of the same struct. Text that came from a guest or a destination is kept
//! exactly here; whoever renders it escapes it.

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use crate::core::command::{Target, shell_quote};
use crate::core::error::Result;
use crate::core::schedule::Schedule;
use crate::core::text::cap;
use crate::core::window::{Window, WindowKey, WindowKind};
use crate::effects::digest::cache::{DigestCache, Lookup};
use crate::run::reads::Reads;
use crate::run::status::{Status, StatusReport, status_bounded};
use crate::store::{MessageRecord, MessageState, RangeQuery, RunRecord, RunState};

/// An instant as the dashboard shows it: RFC 3339 UTC to the second (the
/// store keeps when a row changed to the nanosecond, which no person
/// reads).
fn rfc3339(ts: Timestamp) -> String {
    Timestamp::from_second(ts.as_second()).map_or_else(|_| ts.to_string(), |t| t.to_string())
}

/// How many windows the overview's strip shows per job.
pub const STRIP: usize = 30;

/// The longest text a cell carries (its reason or error, as a tooltip).
const CELL_TEXT: usize = 200;

/// The longest text a run page shows of one field (a summary, an error).
const PAGE_TEXT: usize = 64 * 1024;

/// How many reads a page made.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ReadCount {
    /// Store queries.
    pub queries: u32,
    /// Rows they returned.
    pub rows: u64,
}

impl ReadCount {
    /// Adds what `reads` counted.
    pub fn add(&mut self, reads: &Reads<'_>) {
        self.queries += reads.queries;
        self.rows += reads.rows;
    }
}

/// A window named on a page.
#[derive(Debug, Clone, Serialize)]
pub struct WindowRef {
    /// Its key.
    pub key: String,
    /// Its label.
    pub label: String,
    /// Its start (RFC 3339).
    pub start: String,
    /// Its end.
    pub end: String,
    /// When it is or was due (left out where the page does not know the
    /// job's schedule: a run page).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due: Option<String>,
}

impl WindowRef {
    fn of(schedule: &Schedule, w: &Window) -> WindowRef {
        WindowRef {
            key: w.key().to_string(),
            label: w.label.clone(),
            start: rfc3339(w.start),
            end: rfc3339(w.end),
            due: Some(rfc3339(schedule.due_at(w))),
        }
    }

    /// The window of the row `r`, as `schedule` times it (its due moment
    /// left out when the row's window is not one of the schedule's: the
    /// job's zone or window changed since).
    fn of_row(schedule: &Schedule, r: &RunRecord) -> WindowRef {
        let due = Window::containing(&schedule.job, schedule.kind, &schedule.zone, r.window_start)
            .ok()
            .filter(|w| w.start == r.window_start && w.end == r.window_end)
            .map(|w| rfc3339(schedule.due_at(&w)));
        WindowRef {
            key: r.key.to_string(),
            label: label_of(&r.key),
            start: rfc3339(r.window_start),
            end: rfc3339(r.window_end),
            due,
        }
    }
}

/// One window as a cell of a strip or a grid.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Its key.
    pub key: String,
    /// Its label.
    pub label: String,
    /// Its start.
    pub start: String,
    /// What became of it.
    pub state: CellState,
    /// The skip's reason or the last error, shortened.
    pub detail: Option<String>,
    /// Whether the store holds a row for it (a run page exists).
    pub has_row: bool,
}

/// What a cell of the window grid shows, as its CSS class and its JSON
/// name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellState {
    Done,
    /// DONE, but an upstream window it used got a new revision since.
    Stale,
    Skipped,
    /// Due, and waiting for an upstream window it needs.
    Waiting,
    /// Failed, a retry pending.
    Retrying,
    Failed,
    Abandoned,
    Prepared,
    Claimed,
    /// The newest due window, with no row yet.
    Due,
    /// An older due window with no row, which nothing decides on its own
    /// (as `status` counts them).
    Hole,
    NotDue,
    /// Older than where the job's history starts: nothing was expected.
    Before,
}

impl CellState {
    /// Its name, as the page and the JSON have it.
    pub fn as_str(self) -> &'static str {
        match self {
            CellState::Done => "done",
            CellState::Stale => "stale",
            CellState::Skipped => "skipped",
            CellState::Waiting => "waiting",
            CellState::Retrying => "retrying",
            CellState::Failed => "failed",
            CellState::Abandoned => "abandoned",
            CellState::Prepared => "prepared",
            CellState::Claimed => "claimed",
            CellState::Due => "due",
            CellState::Hole => "hole",
            CellState::NotDue => "not-due",
            CellState::Before => "before",
        }
    }
}

impl Serialize for CellState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

fn cell_state(r: &RunRecord) -> CellState {
    match r.state {
        RunState::Done => CellState::Done,
        RunState::Skipped => CellState::Skipped,
        RunState::Waiting => CellState::Waiting,
        RunState::Failed if r.retry_at.is_some() => CellState::Retrying,
        RunState::Failed => CellState::Failed,
        RunState::Abandoned => CellState::Abandoned,
        RunState::Prepared => CellState::Prepared,
        RunState::Claimed => CellState::Claimed,
    }
}

/// The cells of `windows`, given the rows read for them: a due window with
/// no row is a `hole` from `holes_from` on (where `status` counts holes
/// from), except `expected`, the newest due window, which `status` shows
/// apart and a cell shows as `due`.
fn cells(
    schedule: &Schedule,
    now: Timestamp,
    windows: &[Window],
    rows: &[RunRecord],
    holes_from: Option<Timestamp>,
    st: &Status,
) -> Vec<Cell> {
    let expected = &st.expected.key();
    let by_key: std::collections::HashMap<&str, &RunRecord> =
        rows.iter().map(|r| (r.key.as_str(), r)).collect();
    let stale: std::collections::HashMap<&str, &str> = st
        .stale
        .iter()
        .map(|m| (m.key.as_str(), m.cause.as_str()))
        .collect();
    windows
        .iter()
        .map(|w| {
            let key = w.key();
            let row = by_key.get(key.as_str());
            let (state, detail) = match row {
                Some(r) if r.state == RunState::Done && stale.contains_key(key.as_str()) => (
                    CellState::Stale,
                    stale
                        .get(key.as_str())
                        .map(|c| cap(c, CELL_TEXT).into_owned()),
                ),
                Some(r) => (
                    cell_state(r),
                    r.skip_reason
                        .as_deref()
                        .or(r.error.as_deref())
                        .map(|e| cap(e, CELL_TEXT).into_owned()),
                ),
                None if schedule.due_at(w) > now => (CellState::NotDue, None),
                None if key == *expected => (CellState::Due, None),
                None if holes_from.is_some_and(|f| w.start >= f) => (CellState::Hole, None),
                None => (CellState::Before, None),
            };
            Cell {
                key: key.to_string(),
                label: w.label.clone(),
                start: rfc3339(w.start),
                state,
                detail,
                has_row: row.is_some(),
            }
        })
        .collect()
}

/// Where `status` counts holes from: the point up to which a scheduler
/// decided every window, else the job's first row.
fn holes_from(schedule: &Schedule, reads: &mut Reads<'_>) -> Result<Option<Timestamp>> {
    match reads.decided_until(&schedule.job)? {
        Some(t) => Ok(Some(t)),
        None => history_from(schedule, reads),
    }
}

/// The start of the job's first row.
fn history_from(schedule: &Schedule, reads: &mut Reads<'_>) -> Result<Option<Timestamp>> {
    let oldest = reads.range(&RangeQuery {
        job: schedule.job.as_str(),
        from: None,
        until: None,
        states: &[],
        oldest_first: true,
        limit: 1,
    })?;
    Ok(oldest.first().map(|r| r.window_start))
}

/// The window `n` windows before `w` (or the oldest one reachable).
fn back(job: &crate::core::window::JobName, kind: WindowKind, w: &Window, n: usize) -> Window {
    let mut w = w.clone();
    for _ in 0..n {
        let Ok(before) = w.start.checked_sub(SignedDuration::from_nanos(1)) else {
            break;
        };
        match Window::containing(job, kind, &w.zone, before) {
            Ok(p) => w = p,
            Err(_) => break,
        }
    }
    w
}

/// A paused job's pause.
#[derive(Debug, Clone, Serialize)]
pub struct PauseFacts {
    /// The note given.
    pub note: String,
    /// Who paused it.
    pub by: String,
    /// Since when.
    pub since: String,
}

/// One job's line on the overview.
#[derive(Debug, Clone, Serialize)]
pub struct JobRow {
    /// The job.
    pub job: String,
    /// `healthy`, `paused`, `late` or `failed`, as `jobhost status` says.
    pub health: &'static str,
    /// Its windows: `hour`, `day`, `week` or `month`.
    pub window: String,
    /// Their zone.
    pub tz: String,
    /// The store, its password hidden.
    pub store: String,
    /// The newest DONE window.
    pub last_done: Option<WindowRef>,
    /// The newest window that should be done by now, and its state
    /// (`null`: not claimed).
    pub expected: WindowRef,
    /// Where `expected` stands.
    pub expected_state: Option<&'static str>,
    /// The next window to come due.
    pub next_due: WindowRef,
    /// How long `expected`, or the oldest hole, has been due undone.
    pub late_seconds: i64,
    /// The grace.
    pub grace_seconds: i64,
    /// Windows waiting to retry.
    pub retries_pending: usize,
    /// Windows that failed for good or were abandoned.
    pub needs_a_person: usize,
    /// Due windows with no row that nothing will decide.
    pub holes: usize,
    /// More holes may exist than were counted.
    pub holes_truncated: bool,
    /// The command that runs the oldest hole, with the flags that name the
    /// job.
    pub hole_command: Option<String>,
    /// The pause, when paused.
    pub paused: Option<PauseFacts>,
    /// The last [`STRIP`] due windows, oldest first.
    pub strip: Vec<Cell>,
    /// The job's status, exactly as `jobhost status --json` prints it.
    pub status: StatusReport,
}

/// A job the dashboard shows: its name, schedule and store.
pub struct BoardJob<'a> {
    /// Its schedule.
    pub schedule: &'a Schedule,
    /// Its store as shown (password hidden).
    pub store: String,
    /// How the commands a page prints name the job (`--config FILE`).
    pub target: &'a Target,
}

/// The overview of one job at `now`, from `reads` (`None`: no store yet).
///
/// # Errors
///
/// `Error::Store` when the store cannot be read.
pub fn job_row(
    job: &BoardJob<'_>,
    now: Timestamp,
    mut reads: Option<&mut Reads<'_>>,
) -> Result<(JobRow, Status)> {
    let schedule = job.schedule;
    let st = status_bounded(schedule, now, reads.as_deref_mut())?;
    let newest = back(&schedule.job, schedule.kind, &st.expected, 0);
    let oldest = back(&schedule.job, schedule.kind, &newest, STRIP - 1);
    let windows = schedule.between(oldest.start, newest.end, STRIP + 1)?;
    let (rows, from) = match reads {
        Some(r) => (
            r.range(&RangeQuery {
                job: schedule.job.as_str(),
                from: Some(oldest.start),
                until: Some(newest.end),
                states: &[],
                oldest_first: false,
                limit: STRIP + 1,
            })?,
            holes_from(schedule, r)?,
        ),
        None => (Vec::new(), None),
    };
    let (next, _) = schedule.next_due(now)?;
    let row = JobRow {
        job: schedule.job.to_string(),
        health: st.health.as_str(),
        window: schedule.kind.to_string(),
        tz: schedule.zone.name().to_string(),
        store: job.store.clone(),
        last_done: st
            .last_done
            .as_ref()
            .map(|r| WindowRef::of_row(schedule, r)),
        expected: WindowRef::of(schedule, &st.expected),
        expected_state: st.expected_state.map(RunState::as_str),
        next_due: WindowRef::of(schedule, &next),
        late_seconds: st.late_by.as_secs(),
        grace_seconds: st.grace.as_secs(),
        retries_pending: st.retrying.len(),
        needs_a_person: st.needs_a_person.len(),
        holes: st.holes.count,
        holes_truncated: st.holes.truncated,
        hole_command: st.holes.first.first().map(|h| {
            job.target
                .command(&format!("run --for {}", shell_quote(&h.window.label)))
        }),
        paused: st.paused.as_ref().map(|p| PauseFacts {
            note: p.note.clone(),
            by: p.by.clone(),
            since: rfc3339(p.since),
        }),
        strip: cells(schedule, now, &windows, &rows, from, &st),
        status: st.report(schedule, now, job.target),
    };
    Ok((row, st))
}

/// A key's label: what follows the job's name.
fn label_of(key: &WindowKey) -> String {
    key.as_str()
        .split_once(':')
        .map_or_else(String::new, |(_, l)| l.to_string())
}

/// One row of a job's grid: a week of days, a day of hours, a year of
/// weeks or of months.
#[derive(Debug, Clone, Serialize)]
pub struct GridRow {
    /// What the row is: `2026-W45`, `2026-11-08`, `2026`.
    pub label: String,
    /// Its windows, oldest first.
    pub cells: Vec<Cell>,
}

/// One page of a job's windows.
#[derive(Debug, Clone, Serialize)]
pub struct Grid {
    /// The job's line, as on the overview.
    pub job: JobRow,
    /// The instant the page judges by.
    pub now: String,
    /// The first window start on the page.
    pub from: String,
    /// The first instant after the page.
    pub until: String,
    /// Rows, oldest first.
    pub rows: Vec<GridRow>,
    /// How many windows of the page are in each cell state.
    pub counts: std::collections::BTreeMap<&'static str, usize>,
    /// The `at` of the page before this one.
    pub older: Option<String>,
    /// The `at` of the page after this one, unless this one holds `now`.
    pub newer: Option<String>,
}

/// How many windows a page of a grid goes back, by window kind, and how
/// far a page's end is rounded up.
fn page_shape(kind: WindowKind) -> (WindowKind, usize) {
    match kind {
        // A day of hours, a row per hour.
        WindowKind::Minutes(_) => (WindowKind::Hour, 24),
        // 7 days of 24 hours.
        WindowKind::Hour => (WindowKind::Day, 7),
        // 6 calendar weeks.
        WindowKind::Day => (WindowKind::Week, 6),
        // A year of weeks, a row per calendar year.
        WindowKind::Week => (WindowKind::Week, 52),
        // 3 years of months.
        WindowKind::Month => (WindowKind::Month, 36),
        // 10 years of quarters.
        WindowKind::Quarter => (WindowKind::Quarter, 40),
    }
}

/// The page of `job`'s windows that holds `at` (default: `now`), from
/// a bounded number of reads.
///
/// # Errors
///
/// `Error::Store` when the store cannot be read; `Error::Input` for an
/// instant out of range.
pub fn grid(
    job: &BoardJob<'_>,
    now: Timestamp,
    at: Option<Timestamp>,
    mut reads: Option<&mut Reads<'_>>,
) -> Result<Grid> {
    let schedule = job.schedule;
    let (row, st) = job_row(job, now, reads.as_deref_mut())?;
    let anchor = at.unwrap_or(now);
    let (unit, n) = page_shape(schedule.kind);
    let last = Window::containing(&schedule.job, unit, &schedule.zone, anchor)?;
    let first = back(&schedule.job, unit, &last, n - 1);
    let (from, until) = (first.start, last.end);
    let windows = schedule.between(from, until, 2_000)?;
    let (rows, hist, holes) = match reads {
        Some(r) => (
            r.range(&RangeQuery {
                job: schedule.job.as_str(),
                from: Some(from),
                until: Some(until),
                states: &[],
                oldest_first: false,
                limit: windows.len() + 1,
            })?,
            history_from(schedule, r)?,
            holes_from(schedule, r)?,
        ),
        None => (Vec::new(), None, None),
    };
    let all = cells(schedule, now, &windows, &rows, holes, &st);
    let mut counts = std::collections::BTreeMap::new();
    for c in &all {
        *counts.entry(c.state.as_str()).or_insert(0) += 1;
    }
    let mut grid_rows: Vec<GridRow> = Vec::new();
    for (w, c) in windows.iter().zip(all) {
        let label = match schedule.kind {
            // The hour with its offset: the two 01:00 hours of a fall-back
            // night are two rows.
            WindowKind::Minutes(_) => {
                Window::containing(&schedule.job, WindowKind::Hour, &schedule.zone, w.start)
                    .map(|h| h.label)
                    .unwrap_or_default()
            }
            WindowKind::Hour => w.label.get(..10).unwrap_or(&w.label).to_string(),
            WindowKind::Day => {
                Window::containing(&schedule.job, WindowKind::Week, &schedule.zone, w.start)
                    .map(|wk| wk.label)
                    .unwrap_or_default()
            }
            WindowKind::Week | WindowKind::Month | WindowKind::Quarter => {
                w.label.get(..4).unwrap_or(&w.label).to_string()
            }
        };
        match grid_rows.last_mut() {
            Some(r) if r.label == label => r.cells.push(c),
            _ => grid_rows.push(GridRow {
                label,
                cells: vec![c],
            }),
        }
    }
    let span = until.duration_since(from);
    let older = from
        .checked_sub(SignedDuration::from_secs(1))
        .ok()
        .filter(|_| hist.is_some_and(|h| h < from))
        .map(rfc3339);
    let newer = (until <= now)
        .then(|| until.checked_add(span).ok())
        .flatten()
        .map(|t| rfc3339(t.min(now)));
    Ok(Grid {
        job: row,
        now: rfc3339(now),
        from: rfc3339(from),
        until: rfc3339(until),
        rows: grid_rows,
        counts,
        older,
        newer,
    })
}

/// One message of a run.
#[derive(Debug, Clone, Serialize)]
pub struct MessageFacts {
    /// Its place in the run, from 1.
    pub seq: u32,
    /// The destination's name.
    pub destination: String,
    /// Its idempotency key.
    pub idempotency_key: String,
    /// Its content type.
    pub content_type: String,
    /// Its body's size.
    pub bytes: u64,
    /// What became of it.
    pub status: MessageState,
    /// Sends made.
    pub attempts: u32,
    /// The last HTTP status (or transport's detail).
    pub last_status: Option<String>,
    /// A send is in flight whose fate is unknown.
    pub in_flight: bool,
    /// The body as text, its first [`BODY_TEXT`] bytes, when it is UTF-8
    /// and still stored (a current revision's only; pruned bodies are
    /// gone).
    pub body: Option<String>,
}

impl MessageFacts {
    fn of(m: &MessageRecord) -> MessageFacts {
        MessageFacts {
            seq: m.seq,
            destination: m.destination.clone(),
            idempotency_key: m.idempotency_key.clone(),
            content_type: m.content_type.clone(),
            bytes: m.bytes,
            status: m.state,
            attempts: m.attempts,
            last_status: m.last_status.clone(),
            in_flight: m.in_flight,
            body: None,
        }
    }
}

/// The most of a message body a run page shows.
pub const BODY_TEXT: usize = 16 * 1024;

/// A body as a page shows it: its text, cut at [`BODY_TEXT`], when it is
/// UTF-8 (binary bodies show only their size).
fn shown_body(body: &[u8]) -> Option<String> {
    if body.is_empty() {
        return None;
    }
    let text = match std::str::from_utf8(body) {
        Ok(t) => t,
        // A body cut inside a character by an earlier limit: show the
        // part that is text.
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&body[..e.valid_up_to()]).ok()?,
        Err(_) => return None,
    };
    Some(cap(text, BODY_TEXT).into_owned())
}

/// A run's digest as the host's cache holds it.
#[derive(Debug, Clone, Serialize)]
pub struct DigestFacts {
    /// `cached`, `missing` (`jobhost digest KEY` makes it again) or
    /// `failed`.
    pub status: &'static str,
    /// The model.
    pub model: Option<String>,
    /// The digest text, when cached.
    pub text: Option<String>,
    /// When the cached text was made.
    pub created_at: Option<String>,
    /// Why the last attempt failed.
    pub error: Option<String>,
    /// When its message went out.
    pub sent_at: Option<String>,
}

/// A run's digest, from the store's note and the host's cache.
pub fn digest_facts(r: &RunRecord, cache: Option<&DigestCache>) -> Option<DigestFacts> {
    let d = r.digest.as_ref()?;
    let found = match (&d.cache_key, cache) {
        (Some(k), Some(c)) => c.get(k, Timestamp::now(), std::time::Duration::MAX),
        _ => Lookup::Missing,
    };
    let (status, text, created_at) = match found {
        Lookup::Fresh(e) | Lookup::Expired(e) => {
            ("cached", Some(e.text), Some(rfc3339(e.created_at)))
        }
        _ if d.cache_key.is_none() => ("failed", None, None),
        _ => ("missing", None, None),
    };
    Some(DigestFacts {
        status,
        model: d.model.clone(),
        text,
        created_at,
        error: d.error.clone(),
        sent_at: d.sent_at.map(rfc3339),
    })
}

/// One revision of a window: the current row or an archived one.
#[derive(Debug, Clone, Serialize)]
pub struct RevisionFacts {
    /// From 1.
    pub revision: u32,
    /// Its state.
    pub state: RunState,
    /// Attempts made.
    pub attempt: u32,
    /// Its fence.
    pub fence: i64,
    /// Its last owner.
    pub owner: String,
    /// `sha256:...` of its component.
    pub component: String,
    /// The report's summary.
    pub summary: Option<String>,
    /// The report's cursor.
    pub cursor: Option<String>,
    /// The text the component asked a model to describe.
    pub describe: Option<String>,
    /// The last error (not for a skipped window).
    pub error: Option<String>,
    /// Why the scheduler skipped it.
    pub skip_reason: Option<String>,
    /// Why this revision was made (a rerun).
    pub revision_reason: Option<String>,
    /// The stored journal's size.
    pub journal_bytes: Option<u64>,
    /// When its row was made.
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
    /// When its journal was pruned.
    pub pruned_at: Option<String>,
    /// Its messages.
    pub messages: Vec<MessageFacts>,
    /// `jobhost replay ... --revision N` for an earlier revision with a
    /// report (the current one's is [`RunDetail::replay`]).
    pub replay: Option<String>,
}

/// One run in detail.
#[derive(Debug, Clone, Serialize)]
pub struct RunDetail {
    /// The window key.
    pub key: String,
    /// The job.
    pub job: String,
    /// The window, when the store has a current row.
    pub window: Option<WindowRef>,
    /// The window's zone.
    pub tz: Option<String>,
    /// The current revision (`None`: forgotten; see `earlier`).
    pub current: Option<RevisionFacts>,
    /// Lease expiry of the current revision, while it is CLAIMED or
    /// PREPARED (a finished run holds no lease).
    pub lease_until: Option<String>,
    /// Next attempt, after a retryable failure.
    pub retry_at: Option<String>,
    /// Messages delivered, of those staged.
    pub delivered: Option<u32>,
    /// The digest.
    pub digest: Option<DigestFacts>,
    /// Earlier revisions, oldest first.
    pub earlier: Vec<RevisionFacts>,
    /// `jobhost replay KEY` with the flags that name the job, when the
    /// current revision has a report to replay.
    pub replay: Option<String>,
    /// Why the current revision's answer may be wrong now (its stale
    /// marks' causes).
    pub stale: Vec<String>,
    /// The upstream windows the current revision used (`[[needs]]`).
    pub used: Vec<UsedFacts>,
    /// The `[shadow]` candidate's run beside the current revision.
    pub shadow: Option<ShadowFacts>,
}

/// A `[shadow]` candidate's run beside a window's live run.
#[derive(Debug, Clone, Serialize)]
pub struct ShadowFacts {
    /// `sha256:<hex>` of the candidate.
    pub component: String,
    /// `agreed`, `differed` or `failed`.
    pub verdict: String,
    /// What differs from the live run, as `replay` says it.
    pub differences: Vec<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// Its report (`null` once pruned, or when it failed).
    pub summary: Option<String>,
    /// When it ran.
    pub at: String,
}

/// An upstream window a run used.
#[derive(Debug, Clone, Serialize)]
pub struct UsedFacts {
    /// Its key.
    pub key: String,
    /// The revision read.
    pub revision: u32,
    /// `sha256:<hex>` of the report read.
    pub report_digest: String,
}

/// `jobhost replay KEY` (with `--revision N` for an earlier one) and the
/// flags `target` names the job or store with, the key quoted for a shell.
pub fn replay_command(key: &WindowKey, revision: Option<u32>, target: &Target) -> String {
    let quoted = shell_quote(key.as_str());
    match revision {
        Some(n) => target.command(&format!("replay {quoted} --revision {n}")),
        None => target.command(&format!("replay {quoted}")),
    }
}

fn long(text: Option<&str>) -> Option<String> {
    text.map(|t| cap(t, PAGE_TEXT).into_owned())
}

/// Run `key` in detail, or `None` when the store knows nothing of it.
///
/// # Errors
///
/// `Error::Store` when the store cannot be read.
pub fn run_detail(
    key: &WindowKey,
    reads: &mut Reads<'_>,
    cache: Option<&DigestCache>,
    target: &Target,
) -> Result<Option<RunDetail>> {
    let run = reads.peek(key)?;
    let revisions = reads.revisions(key)?;
    if run.is_none() && revisions.is_empty() {
        return Ok(None);
    }
    let (stale, used, shadow) = match &run {
        Some(_) => (
            reads.stale(None, Some(key), 100)?,
            reads.uses(key)?,
            reads.shadow(key)?,
        ),
        None => (Vec::new(), Vec::new(), None),
    };
    let (messages, bodies) = match &run {
        Some(_) => (reads.message_records(key)?, reads.messages(key)?),
        None => (Vec::new(), Vec::new()),
    };
    let body_of = |seq: u32| {
        bodies
            .iter()
            .find(|b| b.seq == seq)
            .and_then(|b| shown_body(&b.body))
    };
    let current = run.as_ref().map(|r| RevisionFacts {
        revision: r.revision,
        state: r.state,
        attempt: r.attempt,
        fence: r.fence.0,
        owner: r.owner.clone(),
        component: r.component.clone(),
        summary: long(r.report.as_ref().map(|p| p.summary.as_str())),
        cursor: long(r.report.as_ref().and_then(|p| p.cursor.as_deref())),
        describe: long(r.report.as_ref().and_then(|p| p.prompt.as_deref())),
        error: long(r.error.as_deref()),
        skip_reason: long(r.skip_reason.as_deref()),
        revision_reason: long(r.reason.as_deref()),
        journal_bytes: r.journal_bytes,
        created_at: rfc3339(r.created_at),
        updated_at: rfc3339(r.updated_at),
        pruned_at: r.pruned_at.map(rfc3339),
        messages: messages
            .iter()
            .map(|m| MessageFacts {
                body: body_of(m.seq),
                ..MessageFacts::of(m)
            })
            .collect(),
        replay: None,
    });
    let earlier = revisions
        .iter()
        .map(|r| RevisionFacts {
            revision: r.revision,
            state: r.state,
            attempt: r.attempt,
            fence: r.fence.0,
            owner: r.owner.clone(),
            component: r.component.clone(),
            summary: long(r.report.as_ref().map(|p| p.summary.as_str())),
            cursor: long(r.report.as_ref().and_then(|p| p.cursor.as_deref())),
            describe: long(r.report.as_ref().and_then(|p| p.prompt.as_deref())),
            error: long(r.error.as_deref()),
            skip_reason: None,
            revision_reason: long(r.reason.as_deref()),
            journal_bytes: r.journal_bytes,
            created_at: rfc3339(r.created_at),
            updated_at: rfc3339(r.updated_at),
            pruned_at: r.pruned_at.map(rfc3339),
            messages: r.messages.iter().map(MessageFacts::of).collect(),
            replay: r
                .report
                .as_ref()
                .map(|_| replay_command(key, Some(r.revision), target)),
        })
        .collect();
    Ok(Some(RunDetail {
        key: key.to_string(),
        job: key
            .as_str()
            .split_once(':')
            .map_or_else(|| key.to_string(), |(j, _)| j.to_string()),
        window: run.as_ref().map(|r| WindowRef {
            key: r.key.to_string(),
            label: label_of(&r.key),
            start: rfc3339(r.window_start),
            end: rfc3339(r.window_end),
            due: None,
        }),
        tz: run.as_ref().map(|r| r.timezone.clone()),
        lease_until: run
            .as_ref()
            .filter(|r| matches!(r.state, RunState::Claimed | RunState::Prepared))
            .map(|r| rfc3339(r.lease_until)),
        retry_at: run.as_ref().and_then(|r| r.retry_at.map(rfc3339)),
        delivered: run.as_ref().map(|r| r.delivered),
        digest: run.as_ref().and_then(|r| digest_facts(r, cache)),
        current,
        earlier,
        replay: run
            .as_ref()
            .and_then(|r| r.report.as_ref())
            .map(|_| replay_command(key, None, target)),
        stale: stale.into_iter().map(|m| m.cause).collect(),
        used: used
            .into_iter()
            .map(|u| UsedFacts {
                key: u.key,
                revision: u.revision,
                report_digest: u.report_digest,
            })
            .collect(),
        shadow: shadow.map(|sh| ShadowFacts {
            component: sh.component,
            verdict: sh.verdict,
            differences: sh.differences,
            error: sh.error,
            summary: long(sh.report.as_deref()),
            at: rfc3339(sh.at),
        }),
    }))
}
