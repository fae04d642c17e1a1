//! What a person does to a job's windows on purpose: `backfill` a range,
//! `rerun` a DONE window as its next revision, `forget` a window that did
//! not finish, `pause` and `resume` a job, `prune` old journals and bodies.
//! None is a side door: every run goes through [`run_asked`] (the same
//! claim, fence, outbox and journal as `run`), and every change to the
//! store is one of its transactions with an audit line.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jiff::Timestamp;

use crate::core::command::shell_quote;
use crate::core::error::{Error, Result};
use crate::core::window::{Window, WindowKey};
use crate::run::phases::{Asked, run_asked};
use crate::run::receipt::{Event, SkipReason};
use crate::run::{Job, Outcome, Runtime};
use crate::store::{RunRecord, RunState, Store};

/// The most windows one backfill takes on (a year of hour windows is
/// 8,784); a wider range is refused, naming it.
pub const MAX_BACKFILL: usize = 100_000;

/// Which windows a backfill runs besides those with no row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Only {
    /// Windows with no row, SKIPPED ones, and unfinished runs (a dead
    /// owner's claim, a committed report still to deliver).
    Missing,
    /// Also FAILED and ABANDONED windows, each as a new series of attempts.
    Failed,
    /// Also DONE windows, each rerun as its next revision.
    All,
    /// Only DONE windows marked stale (an upstream window they used got a
    /// new revision), each rerun as its next revision.
    Stale,
}

impl Only {
    /// Parses `missing`, `failed` or `all`.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the three.
    pub fn parse(text: &str) -> Result<Only> {
        match text {
            "missing" => Ok(Only::Missing),
            "failed" => Ok(Only::Failed),
            "all" => Ok(Only::All),
            "stale" => Ok(Only::Stale),
            other => Err(Error::input(format!(
                "invalid --only `{}`: give `missing`, `failed`, `all` or `stale`",
                crate::core::text::printable(other)
            ))),
        }
    }
}

/// What a backfill does with one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// Run it as `jobhost run --for` would.
    Run,
    /// Start a new series of attempts (FAILED, ABANDONED).
    Retry,
    /// Rerun it as its next revision (DONE).
    Rerun,
    /// Leave it: its state is not one `--only` asked for.
    Leave,
    /// Leave it: it has not closed yet.
    Open,
}

impl Act {
    /// `run`, `retry`, `rerun`, `leave`, `open`.
    pub fn as_str(self) -> &'static str {
        match self {
            Act::Run => "run",
            Act::Retry => "retry",
            Act::Rerun => "rerun",
            Act::Leave => "leave",
            Act::Open => "open",
        }
    }
}

/// One window of a backfill's plan.
#[derive(Debug, Clone)]
pub struct Planned {
    /// The window.
    pub window: Window,
    /// Its state in the store (`None`: no row).
    pub state: Option<RunState>,
    /// Its revision, when it has a row.
    pub revision: Option<u32>,
    /// What the backfill does with it.
    pub act: Act,
}

/// The plan of `backfill --from from --to to --only only` at `now`: every
/// window overlapping `[from, to)`, oldest first, with its state and what
/// the backfill does with it.
///
/// # Errors
///
/// `Error::Input` for a range of more than [`MAX_BACKFILL`] windows;
/// `Error::Store`.
pub fn backfill_plan(
    job: &Job,
    store: &mut dyn Store,
    (from, to): (Timestamp, Timestamp),
    only: Only,
    now: Timestamp,
) -> Result<Vec<Planned>> {
    let windows = job.schedule.between(from, to, MAX_BACKFILL)?;
    let Some(first) = windows.first() else {
        return Ok(Vec::new());
    };
    let rows = store.history_from(job.name().as_str(), Some(first.start))?;
    let by_key: std::collections::HashMap<&str, &RunRecord> =
        rows.iter().map(|r| (r.key.as_str(), r)).collect();
    let stale: std::collections::HashSet<WindowKey> = if only == Only::Stale {
        store
            .stale(Some(job.name().as_str()), None, MAX_BACKFILL)?
            .into_iter()
            .map(|m| m.key)
            .collect()
    } else {
        std::collections::HashSet::new()
    };
    Ok(windows
        .into_iter()
        .map(|window| {
            let row = by_key.get(window.key().as_str());
            let state = row.map(|r| r.state);
            let act = if window.end > now {
                Act::Open
            } else {
                let backing_off = row.is_some_and(|r| r.retry_at.is_some());
                match (state, only) {
                    (Some(RunState::Done), Only::Stale) if stale.contains(&window.key()) => {
                        Act::Rerun
                    }
                    (_, Only::Stale) => Act::Leave,
                    // A delivery waiting out its backoff goes now when
                    // failed windows are asked for.
                    (Some(RunState::Prepared), Only::Failed | Only::All) if backing_off => {
                        Act::Retry
                    }
                    (None | Some(RunState::Skipped | RunState::Waiting), _)
                    | (Some(RunState::Claimed | RunState::Prepared), _) => Act::Run,
                    (Some(RunState::Failed | RunState::Abandoned), Only::Failed | Only::All) => {
                        Act::Retry
                    }
                    (Some(RunState::Done), Only::All) => Act::Rerun,
                    _ => Act::Leave,
                }
            };
            Planned {
                revision: row.map(|r| r.revision),
                window,
                state,
                act,
            }
        })
        .collect())
}

/// How a backfill ended: each window it took on counted once, by what
/// its run did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Backfilled {
    /// Windows it asked to run (or retry, or rerun), whatever came of it.
    pub attempted: usize,
    /// Of those, the ones that ran (or resumed a committed report's
    /// delivery) and succeeded.
    pub ran: usize,
    /// Of those, the ones whose run failed or was abandoned (or refused).
    pub failed: usize,
    /// Of those, the ones the claim answered without running, by reason
    /// (another process holds it, a retry is pending, ...).
    pub skipped: std::collections::BTreeMap<SkipReason, usize>,
    /// Windows the plan left as they were (a state `--only` did not ask for).
    pub left: usize,
    /// Windows the plan left because they have not closed yet.
    pub not_closed: usize,
    /// Whether a stop request ended it before the plan's end.
    pub stopped: bool,
    /// Why `--parallel` was given but the windows ran one after another
    /// in order, if they did.
    pub in_order: Option<InOrder>,
    /// The worst exit code of its runs (0, 1 or 2).
    pub exit_code: i32,
}

/// Why a `--parallel` backfill ran its windows one after another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InOrder {
    /// The job keeps a cursor: each run is given the one before it
    /// returned.
    Cursor,
    /// Whether it keeps one could not be read (the error).
    Unread(String),
}

impl Backfilled {
    /// How many of the windows it asked to run were answered with a skip.
    pub fn skipped_total(&self) -> usize {
        self.skipped.values().sum()
    }

    /// Counts one run's outcome.
    fn count(&mut self, outcome: &Outcome) {
        self.attempted += 1;
        match (outcome.receipt.event, outcome.receipt.reason) {
            (Event::Skipped, Some(reason)) => *self.skipped.entry(reason).or_default() += 1,
            (Event::Ran | Event::Resumed, _) if outcome.exit_code == 0 => self.ran += 1,
            _ => self.failed += 1,
        }
        self.exit_code = self.exit_code.max(outcome.exit_code);
    }
}

/// Runs `plan`, each window through [`run_asked`], calling `each` after
/// every window it runs with the window's index and outcome (in the order
/// the runs end). A stop request (`stop`) is honoured between runs: those
/// in progress finish, and a second backfill over the same range picks up
/// where this one stopped (what is DONE is left, by the claims).
///
/// With `parallel` above 1, up to that many windows run at once, taken in
/// window order, unless the job keeps a cursor: the first window runs
/// alone, and when the store then holds a cursor for the job, every other
/// window runs one after another in window order, as each is given the
/// cursor of the one before it (`Backfilled::in_order` says so). A job
/// whose component returns no cursor has windows that do not depend on one
/// another, and runs them in any order.
#[allow(clippy::too_many_arguments)]
pub fn backfill(
    job: &Job,
    plan: &[Planned],
    reason: &str,
    runtime: &Runtime,
    stop: Option<&AtomicBool>,
    parallel: std::num::NonZeroUsize,
    by: &str,
    each: &mut (dyn FnMut(usize, &Planned, &Outcome) + Send),
) -> Backfilled {
    let mut done = Backfilled::default();
    let mut todo = Vec::new();
    for (i, p) in plan.iter().enumerate() {
        let asked = match p.act {
            Act::Run => Asked::Named { by: by.to_string() },
            Act::Retry => Asked::Retry {
                reason: reason.to_string(),
                by: by.to_string(),
            },
            Act::Rerun => Asked::Rerun {
                reason: reason.to_string(),
                of_revision: p.revision,
                by: by.to_string(),
            },
            Act::Leave => {
                done.left += 1;
                continue;
            }
            Act::Open => {
                done.not_closed += 1;
                continue;
            }
        };
        todo.push((i, p, asked));
    }
    let stopping = || stop.is_some_and(|s| s.load(Ordering::SeqCst));
    let done = std::sync::Mutex::new(done);
    let each = std::sync::Mutex::new(each);
    let run_one = |(i, p, asked): &(usize, &Planned, Asked)| {
        let outcome = run_asked(job, &p.window, asked, runtime);
        lock(&done).count(&outcome);
        (lock(&each))(*i, p, &outcome);
    };
    let mut rest = todo.iter();
    let workers = parallel.get().min(todo.len());
    if workers > 1 {
        // The first window alone: whether the job keeps a cursor decides
        // how the others run.
        if let Some(first) = rest.next() {
            if stopping() {
                lock(&done).stopped = true;
                return into_inner(done);
            }
            run_one(first);
        }
        let in_order = match crate::store::open(&job.store).and_then(|mut s| s.cursor(job.name())) {
            Ok(Some(_)) => Some(InOrder::Cursor),
            Ok(None) => None,
            // Not known: in order is the safe choice.
            Err(e) => Some(InOrder::Unread(e.chain())),
        };
        let parallel = in_order.is_none();
        lock(&done).in_order = in_order;
        if parallel {
            let rest = std::sync::Mutex::new(rest);
            std::thread::scope(|s| {
                for _ in 0..workers {
                    s.spawn(|| {
                        loop {
                            if stopping() {
                                if lock(&rest).len() > 0 {
                                    lock(&done).stopped = true;
                                }
                                return;
                            }
                            let Some(item) = lock(&rest).next() else {
                                return;
                            };
                            run_one(item);
                        }
                    });
                }
            });
            return into_inner(done);
        }
    }
    for item in rest {
        if stopping() {
            lock(&done).stopped = true;
            break;
        }
        run_one(item);
    }
    into_inner(done)
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn into_inner<T>(m: std::sync::Mutex<T>) -> T {
    m.into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `jobhost rerun KEY`: runs the DONE window `key` of `job` again on
/// purpose, as its next revision, with `reason` stored beside it.
///
/// # Errors
///
/// `Error::Input` for a key that is not one of the job's windows, a
/// window that is not DONE (naming what to use instead) or has not
/// closed; `Error::Store`.
pub fn rerun(job: &Job, key: &str, reason: &str, by: &str, runtime: &Runtime) -> Result<Outcome> {
    let window = window_of(job, key, runtime)?;
    let key = window.key();
    let mut store = crate::store::open(&job.store)?;
    let row = store.peek(&key)?;
    let revision = match &row {
        Some(r) if r.state == RunState::Done => r.revision,
        Some(r) => {
            return Err(Error::input(format!(
                "window `{key}` is {}, not DONE: rerun is for a window that finished; `{}` {}",
                r.state,
                if matches!(
                    r.state,
                    RunState::Failed | RunState::Abandoned | RunState::Prepared
                ) {
                    job.target
                        .command(&format!("retry {}", shell_quote(key.as_str())))
                } else {
                    job.target
                        .command(&format!("run --for {}", shell_quote(&window.label)))
                },
                if matches!(
                    r.state,
                    RunState::Failed | RunState::Abandoned | RunState::Prepared
                ) {
                    "tries it again now"
                } else {
                    "runs it"
                }
            )));
        }
        None => {
            return Err(Error::input(format!(
                "window `{key}` has never run: there is nothing to rerun; `{}` runs it",
                job.target
                    .command(&format!("run --for {}", shell_quote(&window.label)))
            )));
        }
    };
    drop(store);
    let asked = Asked::Rerun {
        reason: reason.to_string(),
        of_revision: Some(revision),
        by: by.to_string(),
    };
    Ok(run_asked(job, &window, &asked, runtime))
}

/// `jobhost rerun --stale`: reruns each of the job's DONE windows marked
/// stale (an upstream window it used got a new revision), oldest first,
/// each as its next revision, with `reason`; `each` hears of every run as
/// it ends. Windows of jobs that need this one may be marked stale in
/// turn.
///
/// # Errors
///
/// `Error::Store` when the marks cannot be read.
pub fn rerun_stale(
    job: &Job,
    reason: &str,
    runtime: &Runtime,
    each: &mut dyn FnMut(&Outcome),
) -> Result<Vec<Outcome>> {
    let mut store = crate::store::open(&job.store)?;
    let mut marks = store.stale(Some(job.name().as_str()), None, MAX_BACKFILL)?;
    drop(store);
    // Oldest window first; one rerun per window, whatever its causes.
    marks.reverse();
    let mut seen = std::collections::HashSet::new();
    let mut outcomes = Vec::new();
    for m in marks {
        if !seen.insert(m.key.clone()) {
            continue;
        }
        let label = m.key.as_str().split_once(':').map_or("", |(_, l)| l);
        let Some(window) = Window::labelled(
            &job.schedule.job,
            job.schedule.kind,
            &job.schedule.zone,
            label,
        ) else {
            // The job's window or zone changed since: not this config's.
            continue;
        };
        let asked = Asked::Rerun {
            reason: reason.to_string(),
            of_revision: Some(m.revision),
            by: actor_id(),
        };
        let outcome = run_asked(job, &window, &asked, runtime);
        each(&outcome);
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// `jobhost rerun --plan FILE`: reruns exactly the windows of `plan`,
/// each only at the revision the plan replayed (a window rerun since is
/// answered `done`), as `rerun` does, once the job runs the component the
/// plan was made with; `each` hears of every run as it ends.
///
/// # Errors
///
/// `Error::Input` for a plan of another job, or made with another
/// component than the job's (naming both), or a key that is not one of
/// the job's windows.
pub fn rerun_plan(
    job: &Job,
    plan: &crate::run::replay::RerunPlan,
    reason: &str,
    runtime: &Runtime,
    each: &mut dyn FnMut(&Outcome),
) -> Result<Vec<Outcome>> {
    if plan.job != job.name().as_str() {
        return Err(Error::input(format!(
            "the plan is for job `{}`, not `{}`: give the config of the job it was made for",
            crate::core::text::printable(&plan.job),
            job.name()
        )));
    }
    let cache = crate::guest::cache::CompileCache::new(job.cache_dir.clone());
    let digest = crate::guest::sandbox::ComponentFile::open(&job.component, &cache)?.digest();
    if digest != plan.component {
        return Err(Error::input(format!(
            "the job runs component {digest}, and the plan was made with {}: point the \
             config's `component` at the component the plan was made with (or give it with \
             --component) before rerunning",
            crate::core::text::printable(&plan.component)
        )));
    }
    let windows = plan
        .windows
        .iter()
        .map(|w| Ok((window_of(job, &w.key, runtime)?, w.revision)))
        .collect::<Result<Vec<_>>>()?;
    let mut outcomes = Vec::new();
    for (window, revision) in windows {
        let asked = Asked::Rerun {
            reason: reason.to_string(),
            of_revision: Some(revision),
            by: actor_id(),
        };
        let outcome = run_asked(job, &window, &asked, runtime);
        each(&outcome);
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// `jobhost retry KEY`: tries the window `key` of `job` again now, as a
/// new series of attempts: a FAILED or ABANDONED window runs again (or, with
/// its report committed, delivers it), and a committed report whose
/// delivery waits out its backoff is delivered now, its messages keeping
/// their idempotency keys. The claim decides, as for `backfill --only
/// failed`: a window another process holds is answered `busy`.
///
/// # Errors
///
/// `Error::Input` for a key that is not one of the job's windows, a window
/// that has never run, is DONE or SKIPPED (naming the verb that fits);
/// `Error::Store`.
pub fn retry(job: &Job, key: &str, reason: &str, by: &str, runtime: &Runtime) -> Result<Outcome> {
    let window = window_of(job, key, runtime)?;
    let key = window.key();
    let mut store = crate::store::open(&job.store)?;
    let row = store.peek(&key)?;
    drop(store);
    let fits = |verb: &str| {
        Err(Error::input(format!(
            "window `{key}` is {}: retry is for a window that failed or waits to deliver; {verb}",
            row.as_ref()
                .map_or("not run yet".to_string(), |r| r.state.to_string()),
        )))
    };
    match row.as_ref().map(|r| r.state) {
        None | Some(RunState::Skipped | RunState::Waiting) => {
            return fits(&format!(
                "`{}` runs it",
                job.target
                    .command(&format!("run --for {}", shell_quote(&window.label)))
            ));
        }
        Some(RunState::Done) => {
            return fits(&format!(
                "`{}` runs it again as a new revision",
                job.target.command(&format!(
                    "rerun {} --reason TEXT",
                    shell_quote(key.as_str())
                ))
            ));
        }
        Some(RunState::Failed | RunState::Abandoned | RunState::Prepared | RunState::Claimed) => {}
    }
    let asked = Asked::Retry {
        reason: reason.to_string(),
        by: by.to_string(),
    };
    Ok(run_asked(job, &window, &asked, runtime))
}

/// The closed window of `job` that `key` (`<job>:<label>`, or the label
/// alone) names.
fn window_of(job: &Job, key: &str, runtime: &Runtime) -> Result<Window> {
    let name = job.name().as_str();
    let now = runtime.clock().now();
    match key.strip_prefix(name).and_then(|k| k.strip_prefix(':')) {
        Some(label) => job.schedule.named("KEY", label, now),
        None => job.schedule.named("KEY", key, now).map_err(|e| {
            Error::input(format!(
                "{e:#} (window keys of job `{name}` are `{name}:<label>`; `{}` lists them)",
                job.target.command("history")
            ))
        }),
    }
}

/// Who a person is, for audit lines: `user@host`.
pub fn actor_id() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.is_empty() && u.len() <= 64)
        .unwrap_or_else(|| format!("uid{}", rustix::process::getuid().as_raw()));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string());
    crate::core::text::printable(&format!("{user}@{host}")).into_owned()
}

/// How far back `prune --older-than` keeps: `before` is `now` minus it.
///
/// # Errors
///
/// `Error::Input` for an age the calendar cannot subtract.
pub fn prune_before(now: Timestamp, older_than: Duration) -> Result<Timestamp> {
    let d = jiff::SignedDuration::try_from(older_than)
        .map_err(|_| Error::input("--older-than is too large".to_string()))?;
    now.checked_sub(d)
        .map_err(|_| Error::input("--older-than reaches before year -9999".to_string()))
}

/// A window key a person typed, checked for what keys can hold.
///
/// # Errors
///
/// `Error::Input` for an empty or overlong key, or one whose label is a
/// date and time without an offset, which no window's label is (a day's is
/// its date, an hour's carries its offset).
pub fn typed_key(text: &str) -> Result<WindowKey> {
    let label = text.split_once(':').map_or(text, |(_, label)| label);
    let naive = crate::core::clock::is_naive_date_time(label);
    if naive || text.is_empty() || text.len() > 256 || text.chars().any(char::is_control) {
        return Err(Error::input(format!(
            "invalid window key `{}`: {}give a key as `jobhost history` shows it, such as \
             `daily-sales:2026-11-03` or `hourly-sales:2026-11-03T14:00+01:00`",
            crate::core::text::printable(text),
            if naive {
                "a time without an offset is ambiguous; "
            } else {
                ""
            }
        )));
    }
    Ok(WindowKey::from_stored(text.to_string()))
}

/// A reason or note a person typed: trimmed, one printable line of at most
/// 500 characters (`what` names the field in the refusal).
///
/// # Errors
///
/// `Error::Input` for a longer one.
pub fn reason_text(what: &str, text: &str) -> Result<String> {
    let text = text.trim();
    if text.chars().count() > 500 {
        return Err(Error::input(format!(
            "{what} is longer than 500 characters; say it in fewer"
        )));
    }
    Ok(crate::core::text::printable(text).into_owned())
}

/// A reason a person must give: as [`reason_text`], and not empty.
///
/// # Errors
///
/// `Error::Input` for an empty or overlong one.
pub fn needed_reason(what: &str, text: &str) -> Result<String> {
    let text = reason_text(what, text)?;
    if text.is_empty() {
        return Err(Error::input(format!(
            "{what} is empty: say why, for whoever reads the history later"
        )));
    }
    Ok(text)
}

/// A backfill ready to run: its plan, the reason its audit lines carry, a
/// sentence counting what it will do, and how many windows it runs.
#[derive(Debug)]
pub struct Prepared {
    /// Every window of the range, oldest first, with what is done with it.
    pub plan: Vec<Planned>,
    /// The reason given, or `backfill --only WHICH`.
    pub reason: String,
    /// `N window(s) from .. to ..: N to run, ...`.
    pub summary: String,
    /// How many windows it runs (runs, retries and reruns).
    pub todo: usize,
}

/// `jobhost backfill --from --to --only [--reason]` up to the runs: the
/// range's bounds read as the job's labels or instants, the reason (needed
/// with `only` all and stale), a paused job refused, and the plan.
///
/// # Errors
///
/// `Error::Input` for bounds that name no window or are out of order, a
/// missing reason, a paused job, a range too wide; `Error::Store`.
pub fn prepare_backfill(
    job: &Job,
    store: &mut dyn Store,
    (from_text, to_text): (&str, &str),
    only: Only,
    reason: Option<&str>,
    now: Timestamp,
) -> Result<Prepared> {
    use crate::core::clock::rfc3339;
    use crate::core::text::printable;
    let from = job.schedule.bound("--from", from_text, now)?;
    let to = job.schedule.bound("--to", to_text, now)?;
    if from >= to {
        return Err(Error::input(format!(
            "--from {} is not before --to {}: the range [from, to) holds no window; \
             give a --to after --from",
            printable(from_text),
            printable(to_text)
        )));
    }
    let which = match only {
        Only::Missing => "missing",
        Only::Failed => "failed",
        Only::All => "all",
        Only::Stale => "stale",
    };
    let reason = match (reason.filter(|r| !r.trim().is_empty()), only) {
        (Some(r), Only::All | Only::Stale) => needed_reason("--reason", r)?,
        (Some(r), _) => reason_text("--reason", r)?,
        (None, Only::All | Only::Stale) => {
            return Err(Error::input(format!(
                "--only {which} reruns DONE windows as new revisions: say why with --reason TEXT"
            )));
        }
        (None, _) => format!("backfill --only {which}"),
    };
    if let Some(p) = store.paused(job.name().as_str())? {
        return Err(Error::input(format!(
            "job `{}` is paused (since {} by {}: {}); nothing of it runs, so nothing would be \
             backfilled: `{}` first",
            job.name(),
            rfc3339(p.since),
            p.by,
            p.note,
            job.target.command(&format!("resume {}", job.name()))
        )));
    }
    let plan = backfill_plan(job, store, (from, to), only, now)?;
    let count = |a: Act| plan.iter().filter(|p| p.act == a).count();
    let todo = count(Act::Run) + count(Act::Retry) + count(Act::Rerun);
    let summary = format!(
        "{} window(s) from {} to {}: {} to run, {} to retry, {} to rerun, {} left as they are, \
         {} not closed yet",
        plan.len(),
        rfc3339(from),
        rfc3339(to),
        count(Act::Run),
        count(Act::Retry),
        count(Act::Rerun),
        count(Act::Leave),
        count(Act::Open)
    );
    Ok(Prepared {
        plan,
        reason,
        summary,
        todo,
    })
}
