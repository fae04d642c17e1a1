//! `jobhost daemon`: one process that runs every job's due windows at the
//! right moments, through the same path as `jobhost run`. At each wake-up
//! it plans each job (see `plan`): missed windows the job's catch-up policy
//! skips are recorded in the store as SKIPPED, with the reason, and
//! reported; windows to run are run, one after another in window order,
//! while up to `max_concurrent_runs` jobs run at once; unfinished runs (a
//! retry whose backoff has passed, a dead owner's expired claim, a
//! committed report still to deliver) are run again. Then the store's
//! `decided_until` moves past every window that now has a row, so a
//! restarted daemon knows where to go on from, and a window that got no
//! row (its run failed before any claim) is decided again. Then it sleeps
//! until the earliest moment any job needs it.
//!
//! Several daemons on one store need no leader: each window's claim lets
//! one of them run it, a skip is recorded only where no row exists, and the
//! others find the row and leave it. The clock is injected, so tests
//! advance time instead of sleeping. A stop request (SIGTERM or SIGINT) is
//! honoured between runs: the run in progress finishes within its own time
//! limit (or, waiting to retry a delivery, lets its claim go), nothing new
//! is claimed, and the daemon returns.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use crate::core::clock::{Clock, rfc3339};
use crate::core::error::Result;
use crate::core::window::{JobName, Window, WindowKey};
use crate::guest::sandbox::Sandbox;
use crate::run::liveness::Heartbeat;
use crate::run::outputs::EventLine;
use crate::run::plan::{self, What};
use crate::run::receipt::{Event, ReceiptLevel, SkipReason};
use crate::run::{self as job, DeferredDigest, Job, Runtime};
use crate::store::{self, FreshClaims, Lease, LocalProcesses, RunRecord, Skip, Store};

/// How the daemon runs.
pub struct Options<'a> {
    /// The daemon's clock; every run it starts reads its `now` from it.
    pub clock: &'a dyn Clock,
    /// What each run takes besides its config (test hooks).
    pub runtime: &'a Runtime,
    /// On the first wake-up, also consider every window from this instant.
    pub since: Option<Timestamp>,
    /// Return once the next wake-up would be after this instant.
    pub until: Option<Timestamp>,
    /// Set by a signal handler: stop between runs.
    pub stop: &'a AtomicBool,
    /// The longest single sleep, so a stop request is seen promptly.
    pub sleep_slice: Duration,
    /// Told of every run's receipt and how long it took (the dashboard's
    /// metrics); it must not block.
    pub observer: Option<&'a dyn Observer>,
    /// Told, before each wake-up, run and sleep, by when the loop will be
    /// back (the dashboard's `/livez`).
    pub heartbeat: Option<&'a Heartbeat>,
    /// How much of each run its receipt (and a digest's line) tells.
    pub receipt: ReceiptLevel,
    /// At most this many jobs' runs go on at once (`--max-concurrent-runs`).
    pub max_concurrent_runs: std::num::NonZeroUsize,
}

/// The default `--max-concurrent-runs`: the machine's cores.
pub fn default_concurrency() -> std::num::NonZeroUsize {
    std::thread::available_parallelism().unwrap_or(std::num::NonZeroUsize::MIN)
}

/// What is told of each run the daemon makes.
pub trait Observer: Sync {
    /// A run of `job` ended with `receipt`, after `took`.
    fn ran(&self, job: &str, receipt: &crate::run::receipt::Receipt, took: Duration);
}

/// Where the daemon writes its JSON lines: shared by the loop and the
/// digest worker, a whole line at a time.
pub type Output = Arc<Mutex<dyn Write + Send>>;

/// Writes one line to `out`.
///
/// A daemon whose standard output was closed (its log collector went)
/// keeps running its jobs: what it would have printed is in the store, and
/// a failed write here must not stop a run half-way.
fn emit(out: &Output, line: &str) {
    let mut out = out.lock().unwrap_or_else(PoisonError::into_inner);
    let _ = writeln!(out, "{}", crate::core::text::json_line(line));
}

/// Writes `line` to `out` as one JSON line.
fn emit_line(out: &Output, line: &EventLine) {
    if let Ok(text) = serde_json::to_string(line) {
        emit(out, &text);
    }
}

/// The jobs a daemon runs. The loop takes them anew before every wake-up,
/// so a set that changes while the daemon runs (a folder of job files)
/// changes between runs, never in the middle of one: a job added is looked
/// at from the next wake-up (a fresh one runs its newest due window, as a
/// first `jobhost run` would), a changed one runs its next window with its
/// new settings, a removed one has finished its run and claims nothing
/// more. A job is the same (`Arc::ptr_eq`) until its settings change: a
/// wake-up looks only at the jobs that are due or changed.
pub trait JobSet {
    /// The jobs as they are now, having taken in any change.
    fn current(&mut self) -> Vec<Arc<Job>>;

    /// Whether a change waits to be taken in: the daemon's sleep ends early
    /// to take it in. Called about every `sleep_slice`; it must be cheap.
    fn changed(&mut self) -> bool {
        false
    }
}

/// A fixed list of jobs (`--config` files).
impl JobSet for Vec<Arc<Job>> {
    fn current(&mut self) -> Vec<Arc<Job>> {
        self.clone()
    }
}

/// Runs the daemon over `configs` until `until` passes or a stop is
/// requested, writing one JSON line per run (its receipt), skipped window
/// or digest to `out`. Digests of DONE runs are made by a worker thread
/// beside the runs, one after another, so a slow model holds up no run;
/// when the daemon ends by `until` it waits for them, and when it is asked
/// to stop it does not (a digest is a cache: `jobhost digest KEY` makes it
/// later).
///
/// Every run the daemon makes shares one engine and linker: the
/// runtime's (`jobhost daemon` builds it to check the components before
/// it starts), else one built here, once.
///
/// # Errors
///
/// Only when the engine cannot be built: a job whose store fails is
/// reported on stderr and tried again a minute later, and a failed run is
/// a receipt, not an error.
pub fn run(jobs: &mut dyn JobSet, opts: &Options<'_>, out: &Output) -> Result<()> {
    let runtime = opts.runtime.sharing_sandbox()?;
    let opts = &Options {
        runtime: &runtime,
        ..*opts
    };
    let (digests, worker) = Digests::start(opts.runtime, opts.receipt, out);
    let result = run_loop(jobs, opts, out, &digests);
    let left = digests.pending.load(Ordering::SeqCst);
    drop(digests);
    if stopping(opts) {
        if left > 0 {
            crate::core::text::say(
                "note",
                &format!(
                    "{left} digest(s) not made yet are dropped; \
                 `jobhost digest KEY` makes them"
                ),
            );
        }
    } else if worker.join().is_err() {
        crate::core::text::say("error", "the digest worker stopped unexpectedly");
    }
    result
}

/// What cannot become valid while the daemon runs, refused before it
/// claims anything: a store that dies with its machine where a durable one
/// is required (before any store is opened or created), a component that
/// is missing or broken at start-up (loaded in `sandbox`, the one the
/// daemon's runs then share), a store that cannot be a jobhost store. (A
/// component replaced later, or a database that restarts, is retried.)
///
/// # Errors
///
/// `Error::Input` naming the job and what is wrong; the store's error.
pub fn check_before_start(jobs: &[Job], sandbox: &Sandbox) -> Result<()> {
    for j in jobs {
        job::refuse_ephemeral_store(j)
            .map_err(|e| crate::core::error::Error::input(format!("job `{}`: {e:#}", j.name())))?;
    }
    refuse_cycles(jobs)?;
    check_components(jobs, sandbox)?;
    open_stores(jobs)
}

/// Refuses jobs whose `[[needs]]` make a cycle: each job of it would wait
/// for the next forever.
///
/// # Errors
///
/// `Error::Input` naming the cycle.
pub fn refuse_cycles<'a>(jobs: impl IntoIterator<Item = &'a Job>) -> Result<()> {
    let list: Vec<(JobName, Vec<JobName>)> = jobs
        .into_iter()
        .map(|j| (j.name().clone(), j.needs.clone()))
        .collect();
    match crate::run::needs::cycle(&list) {
        None => Ok(()),
        Some(names) => {
            let path: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            Err(crate::core::error::Error::input(format!(
                "the jobs' `[[needs]]` make a cycle, {}: each would wait for the next forever; \
                 remove one of these needs",
                path.join(" needs ")
            )))
        }
    }
}

/// What a daemon has checked already: the components (by file, cache and
/// the file's size and modification time) and the stores. A folder of many
/// jobs that share a component and a store checks each once, and a
/// component replaced on disk is checked again.
#[derive(Debug, Default)]
pub struct Checked {
    components: HashSet<(
        std::path::PathBuf,
        Option<std::path::PathBuf>,
        u64,
        Option<std::time::SystemTime>,
    )>,
    stores: HashSet<String>,
}

/// [`check_before_start`] for one job, as a folder's new or changed file
/// is checked before the daemon takes it in, skipping what `checked`
/// holds.
///
/// # Errors
///
/// As [`check_before_start`]: what the job's file must fix.
pub fn check_job(job: &Job, sandbox: &Sandbox, checked: &mut Checked) -> Result<()> {
    job::refuse_ephemeral_store(job)
        .map_err(|e| crate::core::error::Error::input(format!("job `{}`: {e:#}", job.name())))?;
    let meta = std::fs::metadata(&job.component).ok();
    let key = (
        job.component.clone(),
        job.cache_dir.clone(),
        meta.as_ref().map_or(0, std::fs::Metadata::len),
        meta.and_then(|m| m.modified().ok()),
    );
    if !checked.components.contains(&key) {
        check_components(std::slice::from_ref(job), sandbox)?;
        checked.components.insert(key);
    }
    if checked.stores.contains(&job.store.to_string()) {
        job::say_local_destinations(job);
        return Ok(());
    }
    open_stores(std::slice::from_ref(job))?;
    checked.stores.insert(job.store.to_string());
    Ok(())
}

/// The daemon's clock: from `start` (`--now`) on, advancing in real time,
/// or the system's; virtual in tests (`virtual_time`).
pub fn clock(start: Option<Timestamp>, virtual_time: bool) -> Box<dyn Clock> {
    use crate::core::clock::{ShiftedClock, SystemClock, VirtualClock};
    match (start, virtual_time) {
        (Some(t), true) => Box::new(VirtualClock::new(t)),
        (Some(t), false) => Box::new(ShiftedClock::starting_at(t)),
        (None, true) => Box::new(VirtualClock::new(Timestamp::now())),
        (None, false) => Box::new(SystemClock),
    }
}

/// An [`Observer`] that passes every run on to another and keeps the keys
/// of the windows that failed for good or were abandoned, for `daemon
/// --until`'s exit code.
pub struct GaveUp<'a> {
    inner: Option<&'a dyn Observer>,
    keys: Mutex<Vec<String>>,
}

impl<'a> GaveUp<'a> {
    /// Counting, and telling `inner` too.
    pub fn new(inner: Option<&'a dyn Observer>) -> GaveUp<'a> {
        GaveUp {
            inner,
            keys: Mutex::new(Vec::new()),
        }
    }

    /// The windows that failed for good or were abandoned, in order.
    pub fn keys(self) -> Vec<String> {
        self.keys
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Observer for GaveUp<'_> {
    fn ran(&self, job: &str, receipt: &crate::run::receipt::Receipt, took: Duration) {
        use crate::run::receipt::Event;
        if let Some(inner) = self.inner {
            inner.ran(job, receipt, took);
        }
        let for_good = match receipt.event {
            Event::Abandoned => true,
            Event::Failed => receipt
                .error
                .as_ref()
                .is_some_and(|e| e.retryable == Some(false)),
            _ => false,
        };
        if for_good {
            let key = receipt.key.clone().unwrap_or_else(|| job.to_string());
            self.keys
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(key);
        }
    }
}

/// Loads (compiling, or finding in the compile cache) every job's
/// component once in `sandbox`, before anything runs: what is compiled
/// here is cached for the engine the runs then use.
///
/// # Errors
///
/// `Error::Input` naming the job and its component when one cannot be
/// read or does not fit the world: the daemon exits 2 instead of failing
/// that job's windows one by one.
pub fn check_components(jobs: &[Job], sandbox: &Sandbox) -> Result<()> {
    let mut seen = HashSet::new();
    for c in jobs {
        if !seen.insert((c.component.clone(), c.cache_dir.clone())) {
            continue;
        }
        let named = |e: crate::Error| match e {
            crate::Error::Input(_) => e.within(format!("job `{}`", c.name())),
            other => other,
        };
        let cache = crate::guest::cache::CompileCache::new(c.cache_dir.clone());
        let mut file =
            crate::guest::sandbox::ComponentFile::open(&c.component, &cache).map_err(named)?;
        sandbox.load(&mut file, &cache).map_err(named)?;
    }
    Ok(())
}

/// Opens every job's store once before anything runs, creating and
/// migrating it when needed, and says when one was created (and, once per
/// job, when a store hosts share goes with a file destination).
///
/// # Errors
///
/// `Error::Input` for a store that cannot be a jobhost store (a foreign
/// database, a newer schema, a bad URL). A store that cannot be reached
/// now is only reported: each wake-up tries it again.
pub fn open_stores(jobs: &[Job]) -> Result<()> {
    for c in jobs {
        job::say_local_destinations(c);
    }
    let mut seen = HashSet::new();
    for c in jobs {
        if !seen.insert(c.store.to_string()) {
            continue;
        }
        match store::open(&c.store) {
            Ok(s) if s.created() => crate::core::text::say("note", &job::store_created(&c.store)),
            Ok(_) => {}
            Err(e @ crate::Error::Input(_)) => return Err(e),
            Err(e) => crate::core::text::say(
                "error",
                &format!(
                    "job `{}`: {e:#}; trying again at its first wake-up",
                    c.name()
                ),
            ),
        }
    }
    Ok(())
}

/// The queue of digests the worker thread makes, in order.
struct Digests {
    tx: mpsc::Sender<(Job, DeferredDigest)>,
    /// Queued or in the making.
    pending: Arc<AtomicUsize>,
}

impl Digests {
    /// Starts the worker; it ends when the queue is dropped and empty,
    /// and makes nothing more once a stop is asked for.
    fn start(
        runtime: &Runtime,
        level: ReceiptLevel,
        out: &Output,
    ) -> (Digests, std::thread::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel::<(Job, DeferredDigest)>();
        let pending = Arc::new(AtomicUsize::new(0));
        let (runtime, out, left) = (runtime.clone(), out.clone(), pending.clone());
        let worker = std::thread::spawn(move || {
            for (job, deferred) in rx {
                let stopping = runtime.stop.is_some_and(|s| s.load(Ordering::SeqCst));
                if !stopping
                    && let Some(info) = job::make_deferred_digest(&job, &deferred, &runtime)
                {
                    let line = serde_json::to_value(EventLine::Digest {
                        job: job.name().as_str().to_string(),
                        key: deferred.wanted.key.to_string(),
                        now: rfc3339(deferred.at),
                        digest: info,
                    })
                    .unwrap_or_default();
                    let line = match level {
                        ReceiptLevel::Full => line,
                        ReceiptLevel::Brief => crate::run::receipt::brief(line),
                    };
                    emit(&out, &line.to_string());
                }
                left.fetch_sub(1, Ordering::SeqCst);
            }
        });
        (Digests { tx, pending }, worker)
    }

    fn queue(&self, job: &Job, deferred: DeferredDigest) {
        self.pending.fetch_add(1, Ordering::SeqCst);
        if self.tx.send((job.clone(), deferred)).is_err() {
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// What the daemon remembers between wake-ups besides the store: which
/// paused jobs it has said are paused, and when it last pruned each job.
#[derive(Default)]
struct Memory {
    paused_said: HashSet<String>,
    pruned_at: std::collections::HashMap<String, Timestamp>,
    /// Each job as last looked at, and when it needs the daemon next: a
    /// wake-up before then leaves it alone unless its settings changed.
    next: std::collections::HashMap<String, (Arc<Job>, Timestamp)>,
    /// When each job with `[freshness]` last had its DONE windows read
    /// again.
    checked_at: std::collections::HashMap<String, Timestamp>,
    /// When each job with `[[notify]]` or `pause_after_failures` last had
    /// its incidents kept in step between runs.
    noticed_at: std::collections::HashMap<String, Timestamp>,
}

/// How often, between runs, the daemon keeps the incidents of a job with
/// `[[notify]]` or `pause_after_failures` in step (a job that turns late
/// while nothing runs is noticed within this) and sends what is due.
const NOTICE_EVERY: Duration = Duration::from_secs(300);

/// How often a job's DONE windows are read again (`[freshness]`).
const RECHECK_EVERY: Duration = Duration::from_secs(6 * 3600);

/// A moment is quiet enough to read DONE windows again when the next
/// wake-up is at least this far; the check stops half this before it.
const QUIET: Duration = Duration::from_secs(60);

/// How often `[retention]` is applied.
const PRUNE_EVERY: Duration = Duration::from_secs(86_400);

fn run_loop(
    set: &mut dyn JobSet,
    opts: &Options<'_>,
    out: &Output,
    digests: &Digests,
) -> Result<()> {
    let mut since = opts.since;
    let owner = job::owner_id();
    let memory = Mutex::new(Memory::default());
    loop {
        if stopping(opts) {
            return Ok(());
        }
        let jobs = set.current();
        let now = opts.clock.now();
        let (due, later) = due_now(&jobs, now, since.is_some(), &memory);
        let round = Round {
            opts,
            owner: &owner,
            now,
            since,
            out,
            digests,
            memory: &memory,
        };
        // One span per wake-up that starts runs, which each run's trace
        // links to.
        let traced = if due.is_empty() {
            None
        } else {
            crate::effects::telemetry::span("jobhost.wake")
        };
        crate::effects::telemetry::set_wake(
            traced
                .as_ref()
                .map(crate::effects::telemetry::Step::span_context),
        );
        let wake = wake_all(&round, &due);
        crate::effects::telemetry::set_wake(None);
        drop(traced);
        let noticing = notice_between_runs(&jobs, opts, &memory);
        let wake = wake.into_iter().chain(later).chain(noticing).min();
        if let Some(w) = wake {
            recheck_if_quiet(&jobs, opts, w, out, &memory);
        }
        if stopping(opts) {
            return Ok(());
        }
        since = None;
        // With no job (an empty folder) the daemon waits for one.
        let wake = wake.unwrap_or_else(|| crate::core::clock::after(now, RETRY_SOON));
        if opts.until.is_some_and(|u| wake > u) {
            return Ok(());
        }
        if let Some(h) = opts.heartbeat {
            h.expect(wake, format!("sleeping until {}", rfc3339(wake)));
        }
        sleep_until(opts, wake, set);
    }
}

/// Keeps in step the incidents of each job with `[[notify]]` or
/// `pause_after_failures` whose last pass is [`NOTICE_EVERY`] old, and
/// sends its due notifications (see [`crate::run::notices`]); when the
/// next pass is due, if any job wants one. A store that fails is said and
/// tried at the next pass.
fn notice_between_runs(
    jobs: &[Arc<Job>],
    opts: &Options<'_>,
    memory: &Mutex<Memory>,
) -> Option<Timestamp> {
    let every = SignedDuration::try_from(NOTICE_EVERY).unwrap_or_default();
    let mut next: Option<Timestamp> = None;
    for job in jobs.iter().filter(|j| crate::run::notices::wanted(j)) {
        if stopping(opts) {
            return None;
        }
        let now = opts.clock.now();
        let last = memory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .noticed_at
            .get(job.name().as_str())
            .copied();
        let due = last.map_or(now, |t| t.checked_add(every).unwrap_or(now));
        if due <= now {
            let done = crate::store::open_with(&job.store, opts.runtime.failpoints.clone())
                .and_then(|mut store| crate::run::notices::notice(job, store.as_mut(), now));
            if let Err(e) = done {
                crate::core::text::say(
                    "error",
                    &format!(
                        "job `{}`: its incidents and notifications were not kept: {e:#}; \
                         trying again in {} minutes",
                        job.name(),
                        NOTICE_EVERY.as_secs() / 60
                    ),
                );
            }
            memory
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .noticed_at
                .insert(job.name().as_str().to_string(), now);
        }
        let again = if due <= now {
            now.checked_add(every).unwrap_or(now)
        } else {
            due
        };
        next = Some(next.map_or(again, |n| n.min(again)));
    }
    next
}

/// At a quiet moment (the next wake-up [`QUIET`] away or more), reads
/// again the DONE windows of the one job with `[freshness]` whose last
/// check is the oldest and at least [`RECHECK_EVERY`] ago, as `jobhost
/// check` does: one window at a time on the loop's thread (so one check
/// at a time), stopping before the next wake-up nears; a window whose
/// rows changed is marked STALE and said in a `check` line.
fn recheck_if_quiet(
    jobs: &[Arc<Job>],
    opts: &Options<'_>,
    wake: Timestamp,
    out: &Output,
    memory: &Mutex<Memory>,
) {
    let now = opts.clock.now();
    if stopping(opts)
        || now.duration_until(wake) < SignedDuration::try_from(QUIET).unwrap_or_default()
    {
        return;
    }
    let deadline = wake
        .checked_sub(SignedDuration::try_from(QUIET / 2).unwrap_or_default())
        .unwrap_or(wake);
    let job = {
        let mut m = memory.lock().unwrap_or_else(PoisonError::into_inner);
        let last = |j: &Job| m.checked_at.get(j.name().as_str()).copied();
        let every = SignedDuration::try_from(RECHECK_EVERY).unwrap_or_default();
        let pick = jobs
            .iter()
            .filter(|j| j.recheck.is_some())
            .filter(|j| last(j).is_none_or(|t| now.duration_since(t) >= every))
            .min_by_key(|j| last(j))
            .cloned();
        if let Some(j) = &pick {
            m.checked_at.insert(j.name().as_str().to_string(), now);
        }
        pick
    };
    let Some(job) = job else { return };
    let Some(back) = job.recheck.and_then(|r| SignedDuration::try_from(r).ok()) else {
        return;
    };
    let since = now.checked_sub(back).unwrap_or(now);
    expect(
        opts,
        job.lease,
        &format!("checking job `{}`'s DONE windows", job.name()),
    );
    let runtime = opts.runtime.at(Some(now));
    let checked = crate::run::check::check(&job, (Some(since), None), &runtime, &mut |c| {
        if c.result == "changed" {
            emit(out, &serde_json::to_string(c).unwrap_or_default());
        }
        !stopping(opts) && opts.clock.now() < deadline
    });
    if let Err(e) = checked {
        crate::core::text::say(
            "error",
            &format!(
                "job `{}`: cannot read its DONE windows again ([freshness]): {e:#}; trying \
                 again in {} h",
                job.name(),
                RECHECK_EVERY.as_secs() / 3600
            ),
        );
    }
}

/// One wake-up of the daemon, as every job of it sees it.
#[derive(Clone, Copy)]
struct Round<'a> {
    opts: &'a Options<'a>,
    owner: &'a str,
    /// The daemon's clock reading at the wake-up.
    now: Timestamp,
    /// The first wake-up's `--since`.
    since: Option<Timestamp>,
    out: &'a Output,
    digests: &'a Digests,
    memory: &'a Mutex<Memory>,
}

/// The jobs a wake-up at `now` looks at (those due by now, changed since
/// they were last looked at, or new; every job on a first wake-up with
/// `--since`), and the earliest moment one of the others needs the daemon.
/// A wake-up's reads then grow with the jobs due, not with the folder.
fn due_now(
    jobs: &[Arc<Job>],
    now: Timestamp,
    all: bool,
    memory: &Mutex<Memory>,
) -> (Vec<Arc<Job>>, Option<Timestamp>) {
    let mut memory = memory.lock().unwrap_or_else(PoisonError::into_inner);
    let mut due = Vec::new();
    let mut later: Option<Timestamp> = None;
    let mut current = HashSet::new();
    for job in jobs {
        let name = job.name().as_str();
        current.insert(name);
        match memory.next.get(name) {
            Some((seen, next)) if !all && Arc::ptr_eq(seen, job) && *next > now => {
                later = Some(later.map_or(*next, |l| l.min(*next)));
            }
            _ => due.push(Arc::clone(job)),
        }
    }
    // A job removed from the set is forgotten.
    memory
        .next
        .retain(|name, _| current.contains(name.as_str()));
    (due, later)
}

/// Where in a list of `len` jobs the host named `owner` starts a wake-up:
/// a place of its own, the same at every wake-up.
fn first_place(owner: &str, len: usize) -> usize {
    use sha2::Digest as _;
    if len == 0 {
        return 0;
    }
    let digest = sha2::Sha256::digest(owner.as_bytes());
    let mut eight = [0u8; 8];
    eight.copy_from_slice(&digest[..8]);
    usize::try_from(u64::from_le_bytes(eight) % len as u64).unwrap_or(0)
}

/// One wake-up of every job: up to `max_concurrent_runs` jobs at once,
/// each on a worker that takes the next job when it is done with one
/// (from this host's own place in the list, round to it). A
/// job's own windows run on one worker, one after another in window order
/// (its cursor, its retries and its `decided_until` go in that order), so
/// the cap counts jobs running, and a job with a backlog holds one worker
/// while the others go on. Returns the earliest moment any job needs the
/// daemon again (`None` for no job).
fn wake_all(round: &Round<'_>, jobs: &[Arc<Job>]) -> Option<Timestamp> {
    let Round {
        opts,
        owner,
        now,
        out,
        memory,
        ..
    } = *round;
    // Each host starts at a place of its own in the list (from its owner
    // id), so the hosts of a fleet working through one backlog spread over
    // different jobs instead of all contending for the first job's windows.
    let start = first_place(owner, jobs.len());
    let taken = AtomicUsize::new(0);
    let wake: Mutex<Option<Timestamp>> = Mutex::new(None);
    let one = |job: &Arc<Job>| {
        expect(opts, job.lease, &format!("looking at job `{}`", job.name()));
        prune_if_due(job, opts, now, out, memory);
        let next = match wake_job(round, job) {
            Ok((next, false)) => next,
            Ok((next, true)) => {
                // A window of this job became DONE: the jobs that need it
                // are looked at now, not at their next poll.
                let mut memory = memory.lock().unwrap_or_else(PoisonError::into_inner);
                let mut nudged = false;
                for (other, at) in memory.next.values_mut() {
                    if other.needs.contains(job.name()) {
                        *at = now;
                        nudged = true;
                    }
                }
                if nudged {
                    let mut wake = wake.lock().unwrap_or_else(PoisonError::into_inner);
                    *wake = Some(now);
                }
                next
            }
            Err(e) => {
                // One job's store failing stops none of the others.
                crate::core::text::say(
                    "error",
                    &format!("job `{}`: {e:#}; trying again in a minute", job.name()),
                );
                crate::core::clock::after(now, RETRY_SOON)
            }
        };
        (memory.lock().unwrap_or_else(PoisonError::into_inner))
            .next
            .insert(job.name().as_str().to_string(), (Arc::clone(job), next));
        let mut wake = wake.lock().unwrap_or_else(PoisonError::into_inner);
        *wake = Some(wake.map_or(next, |w| w.min(next)));
    };
    let work = || {
        while !stopping(opts) {
            let n = taken.fetch_add(1, Ordering::SeqCst);
            if n >= jobs.len() {
                break;
            }
            let Some(job) = jobs.get((start + n) % jobs.len()) else {
                break;
            };
            one(job);
        }
    };
    let workers = opts.max_concurrent_runs.get().min(jobs.len());
    if workers <= 1 {
        work();
    } else {
        // The workers speak for the loop while they run: what this thread
        // said before (its last sleep) must not make the loop look late.
        if let Some(h) = opts.heartbeat {
            h.leave();
        }
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| {
                    work();
                    if let Some(h) = opts.heartbeat {
                        h.leave();
                    }
                });
            }
        });
    }
    wake.into_inner().unwrap_or_else(PoisonError::into_inner)
}

/// How soon a job is looked at again after its store failed or a run could
/// not claim its window (a database restart, a component being replaced).
const RETRY_SOON: Duration = Duration::from_secs(60);

/// Tells the heartbeat that the loop is `doing` something that takes at
/// most `bound` from now. A wake-up's reads and a run are given the job's
/// lease: a run that has not ended by then is one another host could
/// already take over, and one that delivers for longer (many messages to a
/// slow destination) needs a longer `lease_seconds`.
fn expect(opts: &Options<'_>, bound: Duration, doing: &str) {
    if let Some(h) = opts.heartbeat {
        h.expect(crate::core::clock::after(opts.clock.now(), bound), doing);
    }
}

fn stopping(opts: &Options<'_>) -> bool {
    opts.stop.load(Ordering::SeqCst)
}

/// Applies the job's `[retention]` once a day (the first wake-up, then
/// every [`PRUNE_EVERY`]); a failure is said and tried again the next day.
fn prune_if_due(
    job: &Job,
    opts: &Options<'_>,
    now: Timestamp,
    out: &Output,
    memory: &Mutex<Memory>,
) {
    let Some(retention) = job.retention else {
        return;
    };
    let name = job.name().as_str();
    {
        let mut memory = memory.lock().unwrap_or_else(PoisonError::into_inner);
        if memory.pruned_at.get(name).is_some_and(|t| {
            now.duration_since(*t) < SignedDuration::try_from(PRUNE_EVERY).unwrap_or_default()
        }) {
            return;
        }
        memory.pruned_at.insert(name.to_string(), now);
    }
    let result = crate::run::operate::prune_before(now, retention.older_than).and_then(|before| {
        let mut store = store::open(&job.store)?;
        let by = crate::run::operate::actor_id();
        let reason = format!(
            "[retention] older_than_days = {}",
            retention.older_than.as_secs() / 86_400
        );
        let pruned = store.prune(
            Some(name),
            before,
            retention.keep_journals,
            crate::store::Actor {
                by: &by,
                reason: &reason,
            },
            opts.clock.lease_now(),
        )?;
        Ok((before, pruned))
    });
    match result {
        Ok((_, p)) if p.runs == 0 => {}
        Ok((before, p)) => {
            emit_line(out, &EventLine::pruned(Some(name), now, before, &p));
        }
        Err(e) => crate::core::text::say(
            "error",
            &format!("job `{name}`: cannot apply [retention]: {e:#}; trying again tomorrow"),
        ),
    }
}

/// One wake-up of one job: records the skipped windows, runs the
/// unfinished and the due ones, moves the store's `decided_until`, and
/// returns when the job next needs the daemon. A paused job is only
/// looked at again a minute later: nothing of it is claimed, skipped or
/// decided, so that on resume its catch-up policy decides the windows
/// that fell due meanwhile.
fn wake_job(round: &Round<'_>, job: &Job) -> Result<(Timestamp, bool)> {
    let Round {
        opts,
        owner,
        now,
        since,
        out,
        digests,
        memory,
    } = *round;
    let wake = Wake {
        job,
        opts,
        owner,
        now,
        out,
        digests,
    };
    let (mut store, plan, mut todo) = wake.look(since)?;
    let mut next = plan
        .entries
        .iter()
        .find(|e| e.what == What::Next)
        .map_or(Timestamp::MAX, |e| e.due);
    let name = job.name().as_str();
    if let Some(p) = store.paused(name)? {
        let first = (memory.lock().unwrap_or_else(PoisonError::into_inner))
            .paused_said
            .insert(name.to_string());
        if first {
            let detail = format!(
                "job `{name}` is paused (since {} by {}: {}); nothing of it runs until `{}`",
                rfc3339(p.since),
                p.by,
                p.note,
                job.target.command(&format!("resume {name}"))
            );
            emit_line(
                out,
                &EventLine::skipped(SkipReason::Paused, name, None, now, detail),
            );
        }
        return Ok((next.min(crate::core::clock::after(now, RETRY_SOON)), false));
    }
    (memory.lock().unwrap_or_else(PoisonError::into_inner))
        .paused_said
        .remove(name);
    wake.record_skips(store, &plan)?;
    todo.extend(plan.entries.iter().filter_map(|e| match e.what {
        What::Run => Some(Work::Run(e.window.clone())),
        _ => None,
    }));
    match wake.run_all(todo, &mut next) {
        Some(ran) => Ok((wake.settle(&plan, &ran, next)?, ran.done)),
        // Asked to stop: nothing more is written.
        None => Ok((next, false)),
    }
}

/// One wake-up of one job under way.
struct Wake<'a> {
    job: &'a Job,
    opts: &'a Options<'a>,
    owner: &'a str,
    /// The daemon's clock reading at the wake-up.
    now: Timestamp,
    out: &'a Output,
    digests: &'a Digests,
}

/// What the runs of a wake-up found.
struct Ran {
    /// Windows that have a row now.
    claimed: HashSet<WindowKey>,
    /// Windows another process holds or that wait out a retry: on the
    /// store's clock, which may disagree with this host's, so they are
    /// looked at again after a while, not at once.
    deferred: HashSet<WindowKey>,
    /// Whether anything ran at all.
    any: bool,
    /// Windows that wait for an upstream window they need: looked at
    /// again after [`crate::run::needs::WAITING_POLL`].
    waiting: HashSet<WindowKey>,
    /// Whether a window of the job became DONE: the jobs that need it
    /// are looked at again at once.
    done: bool,
}

impl Wake<'_> {
    /// The job's plan and its unfinished runs: unfinished runs first (they
    /// are older than anything newly due), then the plan; neither reads
    /// more of the history than it needs.
    fn look(&self, since: Option<Timestamp>) -> Result<(Box<dyn Store>, plan::Plan, Vec<Work>)> {
        let (job, name) = (self.job, self.job.name());
        let mut store = store::open(&job.store)?;
        let todo = unfinished_work(job, &store.unfinished(name.as_str())?, self.opts.clock)?;
        let decided_until = store.decided_until(name)?;
        let runs = store.history_from(name.as_str(), plan::rows_from(since, decided_until))?;
        let (schedule, catch_up) = (&job.schedule, job.catch_up);
        let plan = plan::plan_over(schedule, catch_up, self.now, since, &runs, decided_until)?;
        if plan.truncated
            && let Some(first) = plan.entries.first()
        {
            crate::core::text::say(
                "warning",
                &format!(
                    "job `{name}`: more than {} windows fell due while no scheduler ran; \
                     windows before `{}` were not considered and have no decision",
                    plan::MAX_WINDOWS,
                    first.window.key()
                ),
            );
        }
        Ok((store, plan, todo))
    }

    /// Every skip of this wake-up in one transaction, before any run: they
    /// are older than the windows that run. A window another daemon
    /// decided in the meantime keeps its decision, and is not reported
    /// again here. The store is let go of afterwards, before any run.
    fn record_skips(&self, mut store: Box<dyn Store>, plan: &plan::Plan) -> Result<()> {
        let skips: Vec<Skip<'_>> = plan
            .entries
            .iter()
            .filter_map(|e| match &e.what {
                What::Skip(reason) => Some(Skip {
                    window: &e.window,
                    reason,
                }),
                _ => None,
            })
            .collect();
        let recorded = store.record_skips(&skips, self.owner, self.opts.clock.lease_now())?;
        for (skip, _) in skips.iter().zip(&recorded).filter(|(_, mine)| **mine) {
            emit_line(
                self.out,
                &EventLine::skipped(
                    SkipReason::CatchUp,
                    self.job.name().as_str(),
                    Some(skip.window.key().as_str()),
                    self.now,
                    skip.reason.to_string(),
                ),
            );
        }
        Ok(())
    }

    /// Runs the windows of `todo` in order, one receipt line each, and
    /// lowers `next` to when a deferred one should be looked at; `None`
    /// when a stop was asked for. Once a run has shown that the job's
    /// component and source work and how long a run takes, the windows
    /// after it are claimed in batches ([`Wake::claim_ahead`]).
    fn run_all(&self, todo: Vec<Work>, next: &mut Timestamp) -> Option<Ran> {
        let soon = crate::core::clock::after(self.now, RETRY_SOON);
        let mut ran = Ran {
            claimed: HashSet::new(),
            deferred: HashSet::new(),
            any: false,
            waiting: HashSet::new(),
            done: false,
        };
        // Windows another host decided since the look (read at once when
        // one of them answers so, rather than found window by window).
        let mut decided_elsewhere: HashSet<WindowKey> = HashSet::new();
        let mut batch = Batch::default();
        // Set when this host leaves the job's later windows (another process
        // works through them, or they would fail as the last one did): only
        // the windows it holds claims on still run.
        let mut leaving = false;
        let mut queue: VecDeque<Work> = todo.into();
        while let Some(item) = queue.pop_front() {
            let window = match item {
                Work::Run(window) => window,
                Work::Later(t) => {
                    *next = (*next).min(t);
                    continue;
                }
            };
            if stopping(self.opts) {
                self.release(&mut batch);
                return None;
            }
            let mut claimed = batch.held.remove(&window.key());
            if claimed.is_none() {
                if leaving {
                    continue;
                }
                if decided_elsewhere.contains(&window.key()) {
                    ran.claimed.insert(window.key());
                    continue;
                }
                claimed = self.claim_ahead(&window, &queue, &decided_elsewhere, &mut batch);
            }
            let doing = format!("running `{}`", window.key());
            expect(self.opts, self.job.lease, &doing);
            let at_now = self.opts.runtime.at(Some(self.opts.clock.now()));
            let started = std::time::Instant::now();
            let held = claimed.is_some();
            let mut outcome = match claimed {
                Some(claim) => job::run_claimed(self.job, &window, claim, &at_now),
                None => job::run_window(self.job, Some(&window), &at_now),
            };
            batch.ran(&outcome, started.elapsed());
            if let Some(o) = self.opts.observer {
                o.ran(
                    self.job.name().as_str(),
                    &outcome.receipt,
                    started.elapsed(),
                );
            }
            emit(self.out, &outcome.receipt.line(self.opts.receipt));
            if let Some(d) = outcome.digest.take() {
                self.digests.queue(self.job, d);
            }
            ran.any = true;
            if held && outcome.exit_code != 0 {
                // What failed this window may fail the rest of the batch
                // (a query, a component being replaced): each is claimed
                // on its own when its turn comes, with its own checks.
                self.release(&mut batch);
            }
            let (reason, fence) = (outcome.receipt.reason, outcome.receipt.fence);
            ran.done |= outcome.receipt.done();
            if reason == Some(SkipReason::Waiting) {
                // It has a row (WAITING, or the one it had): decided, and
                // looked at again until its upstream windows are DONE.
                ran.claimed.insert(window.key());
                ran.waiting.insert(window.key());
            }
            if reason == Some(SkipReason::Done) {
                // Another host works through this job's windows too (a
                // fleet on one store): what else it decided since the look
                // is read in one query, not peeked at one window at a time.
                decided_elsewhere.extend(self.decided_from(&window));
            }
            if matches!(reason, Some(SkipReason::Busy | SkipReason::RetryLater)) {
                ran.deferred.insert(window.key());
                if fence.is_none() {
                    // Held by a process stuck in the middle of a write,
                    // with no row of its own yet: nothing in the store says
                    // when to look again, so soon.
                    *next = (*next).min(soon);
                }
            }
            if fence.is_some() {
                ran.claimed.insert(window.key());
                if reason == Some(SkipReason::Busy) {
                    // Another process runs this job's windows now (a host
                    // of the fleet working through its backlog, a backfill):
                    // it goes on to the next ones, so this host leaves the
                    // job to it rather than contend window by window. It
                    // looks again when that claim's lease would run out,
                    // or at the job's next window.
                    leaving = true;
                } else if held && batch.held.is_empty() {
                    // The last window this host claimed ahead: the windows
                    // after it are no other host's to go on with (one that
                    // found these claimed has left the job), so this one
                    // goes on with them.
                    leaving = false;
                }
            } else if outcome.exit_code != 0 {
                // It failed before any claim (the store unreachable, the
                // component missing): so would the job's later windows.
                // They stay undecided, and the job is looked at again soon.
                *next = (*next).min(soon);
                leaving = true;
            }
            if leaving && batch.held.is_empty() {
                break;
            }
        }
        Some(ran)
    }

    /// Claims the windows this worker runs next (`window`, then those of
    /// `queue` not decided elsewhere) in one batch, once a run of this
    /// wake-up has shown that the job's component and source work: as
    /// many as start within half a lease at the pace of the slowest run
    /// so far, at most [`FreshClaims::MOST`], so this host holds no claim
    /// it will not start well before its lease ends. The windows that had
    /// no row are granted (the others are claimed on their own when their
    /// turn comes); `window`'s lease, if it was granted. No new batch is
    /// made while claims of the last are still to run: they already use
    /// the half lease.
    fn claim_ahead(
        &self,
        window: &Window,
        queue: &VecDeque<Work>,
        decided: &HashSet<WindowKey>,
        batch: &mut Batch,
    ) -> Option<job::Preclaimed> {
        // A window that needs upstream windows is claimed only once they
        // are DONE, each on its own.
        if !batch.held.is_empty() || !self.job.needs.is_empty() {
            return None;
        }
        let component = batch.component.as_deref()?;
        let pace = batch.slowest.max(Duration::from_millis(1));
        let fits = self.job.lease.as_secs_f64() / 2.0 / pace.as_secs_f64();
        // Truncation wanted: whole windows that fit.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let most = (fits as usize).min(FreshClaims::MOST);
        let later = queue.iter().filter_map(|w| match w {
            Work::Run(w) if !decided.contains(&w.key()) => Some(w.clone()),
            _ => None,
        });
        let windows: Vec<Window> = std::iter::once(window.clone())
            .chain(later)
            .take(most)
            .collect();
        if windows.len() < 2 {
            return None;
        }
        // A batch that fails claims nothing: each window is then claimed on
        // its own, and says what is wrong.
        let at = std::time::Instant::now();
        let leases = store::open(&self.job.store)
            .and_then(|mut store| {
                store.claim_fresh(&FreshClaims {
                    job: self.job.name(),
                    windows: &windows,
                    owner: self.owner,
                    component,
                    now: self.opts.clock.lease_now(),
                    lease: self.job.lease,
                    probe: &LocalProcesses,
                })
            })
            .ok()?;
        let mut first = None;
        for lease in leases {
            let claim = job::Preclaimed {
                lease,
                component: component.to_string(),
                at,
            };
            if claim.lease.key == window.key() {
                first = Some(claim);
            } else {
                batch.held.insert(claim.lease.key.clone(), claim);
            }
        }
        first
    }

    /// Lets go of the claims of a batch that will not start now (the
    /// daemon is stopping, or a run of the batch failed), so that another
    /// host, or this one, claims them at once instead of after their lease.
    fn release(&self, batch: &mut Batch) {
        let held: Vec<Lease> = batch.held.drain().map(|(_, c)| c.lease).collect();
        if held.is_empty() {
            return;
        }
        let released = store::open(&self.job.store)
            .and_then(|mut store| store.release(&held, self.opts.clock.lease_now()));
        if let Err(e) = released {
            crate::core::text::say(
                "warning",
                &format!(
                    "job `{}`: could not let go of {} claimed window(s) not started ({e:#}); \
                     they are taken over when their lease runs out",
                    self.job.name(),
                    held.len()
                ),
            );
        }
    }

    /// The windows of the job from `window` on that now have a decision in
    /// the store (DONE or SKIPPED); none when the store cannot say (each
    /// window is then asked on its own, as before).
    fn decided_from(&self, window: &Window) -> Vec<WindowKey> {
        let rows = store::open(&self.job.store)
            .and_then(|mut s| s.history_from(self.job.name().as_str(), Some(window.start)));
        rows.map(|rows| {
            rows.into_iter()
                .filter(|r| matches!(r.state, store::RunState::Done | store::RunState::Skipped))
                .map(|r| r.key)
                .collect()
        })
        .unwrap_or_default()
    }

    /// Moves the store's `decided_until` past every window that now has a
    /// row, and looks again when a retry or a deferred window is due, not
    /// only at the next window.
    fn settle(&self, plan: &plan::Plan, ran: &Ran, mut next: Timestamp) -> Result<Timestamp> {
        let (job, clock) = (self.job, self.opts.clock);
        let through = plan.decided_through(&|e| match &e.what {
            What::Skip(_) => true,
            What::Run => ran.claimed.contains(&e.window.key()),
            _ => false,
        });
        let moves = through.is_some_and(|t| plan.decided_until.is_none_or(|d| t > d));
        if !ran.waiting.is_empty() {
            next = next.min(crate::core::clock::after(
                clock.now(),
                crate::run::needs::WAITING_POLL,
            ));
        }
        if !(ran.any || moves) {
            return Ok(next);
        }
        let mut store = store::open(&job.store)?;
        if let (true, Some(t)) = (moves, through) {
            store.set_decided_until(job.name(), t, clock.lease_now())?;
        }
        if ran.any {
            let runs = store.unfinished(job.name().as_str())?;
            for w in unfinished_work(job, &runs, clock)? {
                next = next.min(match w {
                    Work::Later(t) => t,
                    Work::Run(w) if ran.deferred.contains(&w.key()) => {
                        crate::core::clock::after(clock.now(), RETRY_SOON)
                    }
                    // Still waiting for its upstream: looked at again
                    // after the poll above, not at once.
                    Work::Run(w) if ran.waiting.contains(&w.key()) => next,
                    Work::Run(_) => crate::core::clock::after(clock.now(), Duration::from_secs(1)),
                });
            }
        }
        Ok(next)
    }
}

/// The claims a worker made ahead for a job's windows, and what decides
/// how many it makes.
#[derive(Default)]
struct Batch {
    /// Windows claimed in a batch and not started yet.
    held: HashMap<WindowKey, job::Preclaimed>,
    /// The component of the last run that ran the guest and succeeded
    /// (`None`: no batch until one does).
    component: Option<String>,
    /// The longest run of this wake-up so far.
    slowest: Duration,
}

impl Batch {
    fn ran(&mut self, outcome: &job::Outcome, took: Duration) {
        self.slowest = self.slowest.max(took);
        let receipt = &outcome.receipt;
        self.component = if receipt.event == Event::Ran && outcome.exit_code == 0 {
            receipt.component.clone()
        } else {
            None
        };
    }
}

/// One thing to do for a job at a wake-up.
enum Work {
    /// Run this window.
    Run(Window),
    /// Wake up again at this instant (a retry or a lease runs out then).
    Later(Timestamp),
}

/// What the job's unfinished runs (as [`store::ClaimStore::unfinished`] gives
/// them) need: to run now (a retry whose backoff passed, a dead owner's
/// expired claim, a committed report to deliver), or a later moment to
/// look again. Leases and retry times are judged on the store's
/// clock as the host sees it (`lease_now`), and a wait is capped at one
/// lease, so a clock that disagrees cannot make the daemon oversleep.
fn unfinished_work(job: &Job, runs: &[RunRecord], clock: &dyn Clock) -> Result<Vec<Work>> {
    // Oldest first (the store lists the newest window first).
    let rows = runs.iter().rev();
    let now = clock.now();
    let lease_now = clock.lease_now();
    let mut todo = Vec::new();
    for r in rows {
        let ready = r.retry_at.unwrap_or(r.lease_until);
        let s = &job.schedule;
        let window = Window::containing(&s.job, s.kind, &s.zone, r.window_start)?;
        if window.key() != r.key {
            // The job's window or zone changed since: not this config's to run.
            continue;
        }
        if ready <= lease_now {
            todo.push(Work::Run(window));
        } else {
            let wait = lease_now.duration_until(ready) + SignedDuration::from_secs(1);
            let wait = Duration::try_from(wait).unwrap_or(job.lease).min(job.lease);
            todo.push(Work::Later(crate::core::clock::after(now, wait)));
        }
    }
    Ok(todo)
}

/// Sleeps on the daemon's clock until `wake`, in slices, watching for a
/// stop request.
fn sleep_until(opts: &Options<'_>, wake: Timestamp, set: &mut dyn JobSet) {
    loop {
        if opts.stop.load(Ordering::SeqCst) || set.changed() {
            return;
        }
        let left = opts.clock.now().duration_until(wake);
        if left <= SignedDuration::ZERO {
            return;
        }
        let left = Duration::try_from(left).unwrap_or(Duration::MAX);
        opts.clock.sleep(left.min(opts.sleep_slice));
    }
}

/// Set by SIGHUP: a folder of job files is read again at once.
static HANGUP: std::sync::LazyLock<std::sync::Arc<AtomicBool>> =
    std::sync::LazyLock::new(|| std::sync::Arc::new(AtomicBool::new(false)));

/// Installs a SIGHUP handler that sets the flag it returns (a job folder
/// takes the flag and reads the folder again).
///
/// # Errors
///
/// `Error::Host` when the handler cannot be installed.
pub fn reload_on_hangup() -> Result<Arc<AtomicBool>> {
    static INSTALLED: std::sync::OnceLock<std::result::Result<(), String>> =
        std::sync::OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&HANGUP))
                .map(drop)
                .map_err(|e| format!("cannot install a SIGHUP handler: {e}"))
        })
        .clone()
        .map_err(crate::Error::host)?;
    Ok(Arc::clone(&HANGUP))
}

/// Set by the first SIGTERM or SIGINT, in the signal handler itself.
static STOP: std::sync::LazyLock<std::sync::Arc<AtomicBool>> =
    std::sync::LazyLock::new(|| std::sync::Arc::new(AtomicBool::new(false)));

/// Set by the signal thread once it has counted a first signal.
static COUNTED: AtomicBool = AtomicBool::new(false);

/// Installs SIGTERM and SIGINT handlers: the first asks the daemon to stop
/// between runs, a second exits at once (130). Returns the flag they set.
/// The handlers restart interrupted reads and writes, so the run in
/// progress goes on undisturbed.
///
/// The signals are counted on one thread of their own, in the order they
/// arrive: two signals delivered at the same moment to two of the
/// process's threads would otherwise each find the flag still clear, and
/// the second would not exit. The flag itself is set in the handler, so a
/// run that checks it right after the signal arrives (a process stopped,
/// signalled, then continued runs on before the signal thread is
/// scheduled) sees it.
///
/// # Errors
///
/// `Error::Host` when a handler cannot be installed.
pub fn stop_on_signals() -> Result<&'static AtomicBool> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    static INSTALLED: std::sync::OnceLock<std::result::Result<(), String>> =
        std::sync::OnceLock::new();
    let installed = INSTALLED.get_or_init(|| {
        for sig in [SIGTERM, SIGINT] {
            signal_hook::flag::register(sig, std::sync::Arc::clone(&STOP))
                .map_err(|e| format!("cannot install a signal handler: {e}"))?;
        }
        let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])
            .map_err(|e| format!("cannot install a signal handler: {e}"))?;
        std::thread::Builder::new()
            .name("jobhost-signals".into())
            .spawn(move || {
                for _ in signals.forever() {
                    if COUNTED.swap(true, Ordering::SeqCst) {
                        // At once, but what was said (a receipt of a run
                        // that just committed) gets a moment to go.
                        crate::core::spool::finish(std::time::Duration::from_millis(200));
                        signal_hook::low_level::exit(130);
                    }
                }
            })
            .map(drop)
            .map_err(|e| format!("cannot start the signal thread: {e}"))
    });
    installed.clone().map_err(crate::Error::host)?;
    Ok(&STOP)
}
