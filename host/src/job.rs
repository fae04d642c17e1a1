//! One run of one job, in order: config -> clock -> window -> store ->
//! sandbox -> guest -> commit -> deliver -> finish -> receipt. This is the
//! only place that sequences those steps; a crash between any two of them
//! leaves the store in a state the next invocation continues from without a
//! second effect (DESIGN.md section 1).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use jiff::Timestamp;

use crate::config::Config;
use crate::core::clock::{Clock, FixedClock, SystemClock, VirtualClock, rfc3339};
use crate::core::error::{ErrorKind, Result};
use crate::core::failpoint::{Boundary, Failpoints};
use crate::core::window::{Window, WindowKey};
use crate::effects::delivery::{self, Delivery, Ended};
use crate::effects::digest::{DigestStatus, Wanted};
use crate::effects::ping::{PingStatus, Signal};
use crate::guest::cache::CompileCache;
use crate::guest::guest_log::GuestLog;
use crate::guest::outbox::Staging;
use crate::guest::sandbox::{ComponentFile, RunInput, Sandbox};
use crate::guest::source::SourceAccess;
use crate::receipt::{Event, MessageInfo, Receipt, ReportInfo};
use crate::store::durable::ephemeral_filesystem;
use crate::store::{
    Claim, ClaimRequest, Failure, Held, Lease, PendingMessage, RunRecord, RunState, Store,
    StoreLocation,
};

/// A finished invocation: the receipt to print and the exit code.
#[derive(Debug)]
pub struct Outcome {
    /// The receipt.
    pub receipt: Receipt,
    /// 0 ran/resumed/skipped, 1 failed or abandoned, 2 bad input.
    pub exit_code: i32,
    /// The digest still to make, when the runtime defers digests (see
    /// [`make_deferred_digest`]).
    pub digest: Option<DeferredDigest>,
}

/// A DONE run's digest, left for later so that a slow model holds up no
/// other run.
#[derive(Debug, Clone)]
pub struct DeferredDigest {
    /// The run.
    pub wanted: Wanted,
    /// The run's clock reading.
    pub at: Timestamp,
}

/// What a run takes from its surroundings besides its config. The default is
/// what the `jobhost` binary uses: the system clock (or a fixed one for
/// `--now`) and no failpoints.
#[derive(Debug, Default, Clone)]
pub struct Runtime {
    /// Waits advance the clock instead of sleeping (tests).
    pub virtual_time: bool,
    /// Stops at named boundaries (tests).
    pub failpoints: Option<Arc<dyn Failpoints>>,
    /// Set when the process is asked to stop (the daemon's signal
    /// handler): a delivery waiting to send again lets its claim go instead.
    pub stop: Option<&'static AtomicBool>,
    /// Leave a DONE run's digest in the outcome instead of making it (the
    /// daemon makes digests beside its runs).
    pub defer_digests: bool,
}

/// Runs the job described by `config` once.
pub fn run(config: &Config) -> Outcome {
    run_with(config, &Runtime::default())
}

/// Runs the job described by `config` once, in `runtime`.
pub fn run_with(config: &Config, runtime: &Runtime) -> Outcome {
    run_window(config, None, runtime)
}

/// Runs `window` of the job (by default the newest due one) once, in
/// `runtime`: the scheduling daemon names the window, including missed
/// ones it catches up on.
pub fn run_window(config: &Config, window: Option<&Window>, runtime: &Runtime) -> Outcome {
    let clock = clock_for(config, runtime);
    let mut receipt = Receipt::new(Event::Failed);
    let mut wanted = None;
    let result = run_inner(
        config,
        window,
        clock.as_ref(),
        runtime,
        &mut receipt,
        &mut wanted,
    );
    let exit_code = match result {
        Ok(()) => match receipt.event {
            Event::Failed | Event::Abandoned => 1,
            _ => 0,
        },
        Err(e) => {
            receipt.fail(e.kind(), e.to_string(), None);
            e.exit_code()
        }
    };
    // After everything else: a monitor hears of the outcome, and nothing
    // it does changes that outcome.
    match receipt.event {
        Event::Ran | Event::Resumed => ping(config, Signal::Success, &mut receipt, clock.as_ref()),
        Event::Failed | Event::Abandoned => {
            ping(config, Signal::Failure, &mut receipt, clock.as_ref());
        }
        Event::Skipped => {}
    }
    // Last of all, the digest: the run is DONE, delivered and announced,
    // and nothing the model does can change that.
    let mut deferred = None;
    if let (Some(settings), Some(wanted)) = (&config.digest, wanted) {
        if runtime.defer_digests {
            deferred = Some(DeferredDigest {
                wanted,
                at: clock.now(),
            });
        } else {
            receipt.digest = Some(digest(config, settings, &wanted, clock.as_ref()));
        }
    }
    Outcome {
        receipt,
        exit_code,
        digest: deferred,
    }
}

/// The clock an invocation for `config` reads: a fixed one for `--now`,
/// the system's otherwise, a virtual one (starting at `--now`) in a
/// runtime with virtual time.
pub fn clock_for(config: &Config, runtime: &Runtime) -> Box<dyn Clock> {
    match (config.now, runtime.virtual_time) {
        (start, true) => Box::new(VirtualClock::new(start.unwrap_or_else(Timestamp::now))),
        (Some(t), false) => Box::new(FixedClock(t)),
        (None, false) => Box::new(SystemClock),
    }
}

/// Makes a digest [`run_window`] left for later, on a clock like the
/// run's; `None` when the job has no model.
pub fn make_deferred_digest(
    config: &Config,
    deferred: &DeferredDigest,
    runtime: &Runtime,
) -> Option<crate::effects::digest::DigestInfo> {
    let settings = config.digest.as_ref()?;
    let clock: Box<dyn Clock> = if runtime.virtual_time {
        Box::new(VirtualClock::new(deferred.at))
    } else {
        Box::new(SystemClock)
    };
    Some(digest(config, settings, &deferred.wanted, clock.as_ref()))
}

/// Makes the digest of the DONE run `wanted` (see `digest`), and says on
/// stderr when there is none.
fn digest(
    config: &Config,
    settings: &crate::effects::digest::DigestSettings,
    wanted: &Wanted,
    clock: &dyn Clock,
) -> crate::effects::digest::DigestInfo {
    let info = match crate::store::open(&config.store) {
        Ok(mut store) => crate::effects::digest::make(settings, store.as_mut(), wanted, clock),
        Err(e) => crate::effects::digest::DigestInfo {
            status: DigestStatus::Failed,
            cache: None,
            model: settings.model.clone(),
            text: None,
            error: Some(format!("the model was not asked: {e}")),
            message: None,
        },
    };
    if let (Some(why), DigestStatus::Failed) = (&info.error, info.status) {
        crate::core::text::say(
            "warning",
            &format!(
                "no digest of `{}`: {why}; the run is done all the same, and \
             `jobhost digest {}` asks again",
                wanted.key, wanted.key
            ),
        );
    }
    info
}

/// Sends the job's `signal` ping, if it has one, and notes how it went in
/// the receipt (and on stderr when it failed). Its body is one line: the
/// event, the key and, for a failure, the error; never the report.
fn ping(config: &Config, signal: Signal, receipt: &mut Receipt, clock: &dyn Clock) {
    if config.pings.is_empty() {
        return;
    }
    let key = receipt.key.as_deref().unwrap_or("-");
    let line = match signal {
        Signal::Start => format!("start {key} attempt {}", receipt.attempt.unwrap_or(0)),
        Signal::Success | Signal::Failure => {
            let event = receipt.event.as_str();
            match &receipt.error {
                Some(e) => format!("{event} {key}: {}: {}", e.kind, e.message),
                None => format!("{event} {key}"),
            }
        }
    };
    // Error messages hold no credentials; scrubbed all the same, since the
    // line leaves for a third party, and escaped: it is shown on a page.
    let mut line = crate::core::text::printable(&config.redactor.scrub(&line)).into_owned();
    if line.len() > 2000 {
        let mut cut = 2000;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
    }
    let Some(info) = config.pings.send(signal, &line, clock, &config.redactor) else {
        return;
    };
    if let Some(detail) = info
        .detail
        .as_deref()
        .filter(|_| info.status != PingStatus::Sent)
    {
        crate::core::text::say(
            "warning",
            &format!(
                "{detail} (after {} request(s)); the run itself is not affected",
                info.attempts
            ),
        );
    }
    receipt.pings.insert(signal.as_str(), info);
}

/// Runs steps 3 to 9; sets `wanted` when the run is DONE and its digest
/// should be made.
fn run_inner(
    config: &Config,
    window: Option<&Window>,
    clock: &dyn Clock,
    runtime: &Runtime,
    receipt: &mut Receipt,
    wanted: &mut Option<Wanted>,
) -> Result<()> {
    let reach = |b: Boundary| {
        if let Some(f) = &runtime.failpoints {
            f.reached(b);
        }
    };
    let now = clock.now();
    receipt.now = Some(rfc3339(now));
    // The scheduler names its windows; a run without one is asked for by a
    // person (or cron), and runs even a window the scheduler skipped.
    let scheduled = window.is_some();
    // The newest window that is due: closed, and past the job's delay.
    let window = match window {
        Some(w) => w.clone(),
        None => config.schedule().last_due(now)?,
    };
    receipt.set_window(&window);
    let key = window.key();
    // A missing or unreadable component is bad input, unless the window's
    // report is already committed: finishing its delivery needs no component.
    let file = ComponentFile::read(&config.component);
    if let Ok(f) = &file {
        receipt.component = Some(f.digest());
    }
    receipt.store = Some(config.store.to_string());
    // Before the store is created: a refusal must leave nothing behind.
    check_durable(config, receipt)?;

    let mut store = crate::store::open_with(&config.store, runtime.failpoints.clone())?;
    if store.created() {
        note_store_created(&config.store, receipt);
    }
    let store = store.as_mut();
    // The common case for a scheduled job is a window that is already done:
    // answer it without compiling anything.
    let peeked = store.peek(&key)?;
    if let Some(run) = &peeked {
        check_same_window(run, &window)?;
        if run.state == RunState::Done {
            skip_done(receipt, &key);
            note_claim(receipt, run.attempt, run.fence.0);
            return Ok(());
        }
        if run.state == RunState::Skipped && scheduled {
            skip_skipped(receipt, &key, run.error.as_deref());
            note_claim(receipt, run.attempt, run.fence.0);
            return Ok(());
        }
    }

    // Everything the user supplied is checked before the claim, so bad input
    // never leaves a claim behind. A run whose report is already committed
    // needs no component: it only delivers what is stored.
    let sandbox = Sandbox::new()?;
    let resuming = peeked
        .as_ref()
        .is_some_and(|r| r.state == RunState::Prepared);
    let file = match file {
        Ok(f) => Some(f),
        Err(_) if resuming => None,
        Err(e) => return Err(e),
    };
    let recorded_component = peeked.map(|r| r.component);
    let mut component = None;
    let mut source = SourceAccess::new(
        config.source.clone(),
        window.start,
        window.end,
        config.batch_rows,
    );
    if let (false, Some(file)) = (resuming, &file) {
        // The query starts now and reads ahead while the host compiles,
        // claims and instantiates; a bad query fails here, before the claim.
        source.start_early()?;
        let loaded = sandbox.load(file, &CompileCache::new(config.cache_dir.clone()))?;
        receipt.compiled = Some(loaded.cache);
        component = Some(loaded);
    }

    // Leases are measured after compiling, so compiling does not eat into
    // the lease.
    let claim_now = clock.lease_now();
    let owner = owner_id();
    let claim = store.claim(&ClaimRequest {
        window: &window,
        owner: &owner,
        // A resumed run keeps the component recorded with its report.
        component: &file
            .as_ref()
            .map_or_else(String::new, ComponentFile::digest),
        now: claim_now,
        lease: config.lease,
        max_attempts: config.max_attempts,
        take_skipped: !scheduled,
    })?;
    let lease = match claim {
        Claim::Done { attempt, fence } => {
            skip_done(receipt, &key);
            note_claim(receipt, attempt, fence.0);
            return Ok(());
        }
        Claim::Skipped { reason } => {
            skip_skipped(receipt, &key, reason.as_deref());
            note_claim(receipt, 0, 0);
            return Ok(());
        }
        Claim::Busy {
            owner,
            lease_until,
            attempt,
            fence,
        } => {
            note_claim(receipt, attempt, fence.0);
            skipped(
                receipt,
                "busy",
                format!(
                    "`{owner}` holds the claim on `{key}` until {}",
                    rfc3339(lease_until)
                ),
            );
            return Ok(());
        }
        Claim::Locked { held, waited } => {
            let what = match held {
                Held::Row => format!("the row of `{key}`"),
                Held::Store => "the store's write lock".to_string(),
            };
            skipped(
                receipt,
                "busy",
                format!(
                    "another process has held {what} for more than {} s without finishing its \
                     write (paused or cut off in the middle of it); nothing was claimed, and a \
                     later invocation tries again",
                    waited.as_secs_f64()
                ),
            );
            return Ok(());
        }
        Claim::Wait {
            until,
            fence,
            attempts,
            error,
        } => {
            note_claim(receipt, attempts, fence.0);
            skipped(
                receipt,
                "retry-later",
                format!(
                    "attempt {attempts} at window `{key}` failed; the next attempt waits until {}{}",
                    rfc3339(until),
                    last_error(error.as_deref())
                ),
            );
            return Ok(());
        }
        Claim::GaveUp {
            fence,
            attempts,
            error,
            abandoned_now,
        } => {
            note_claim(receipt, attempts, fence.0);
            if abandoned_now {
                receipt.fail_as(
                    Event::Abandoned,
                    ErrorKind::Abandoned,
                    format!(
                        "gave up on window `{key}` after {attempts} attempt(s){}; \
                         look at it, then remove its row or rename the job to run it again",
                        last_error(error.as_deref())
                    ),
                );
                return Ok(());
            }
            skipped(
                receipt,
                "gave-up",
                format!(
                    "window `{key}` is not attempted again after {attempts} attempt(s){}",
                    last_error(error.as_deref())
                ),
            );
            return Ok(());
        }
        Claim::Resume { lease } => {
            receipt.event = Event::Resumed;
            note_lease(receipt, &lease);
            ping(config, Signal::Start, receipt, clock);
            // The messages were rendered by the component recorded with the run.
            if let Some(component) = recorded_component {
                receipt.component = Some(component);
            }
            let mut prompt = None;
            if let Some(report) = store.report(&key)? {
                prompt = report.prompt;
                receipt.report = Some(ReportInfo {
                    summary: report.summary,
                    cursor: report.cursor,
                });
            }
            let pending = store.pending_messages(&key)?;
            deliver(
                config, store, &lease, clock, runtime, &key, &pending, true, receipt,
            )?;
            *wanted = done(receipt).then(|| Wanted::new(key, prompt));
            return Ok(());
        }
        Claim::Run { lease, .. } => lease,
    };
    note_lease(receipt, &lease);
    ping(config, Signal::Start, receipt, clock);
    reach(Boundary::AfterClaim);
    let component = match component {
        Some(c) => c,
        // The committed report was withdrawn between the peek and the claim.
        None => match file
            .ok_or_else(|| {
                crate::Error::input(format!(
                    "cannot read component `{}`; restore it or point --component at another",
                    config.component.display()
                ))
            })
            .and_then(|f| sandbox.load(&f, &CompileCache::new(config.cache_dir.clone())))
        {
            Ok(c) => c,
            Err(e) => {
                let now = clock.lease_now();
                store.fail(
                    &lease,
                    &e.to_string(),
                    config.attempts().after_failure(lease.attempt),
                    None,
                    now,
                )?;
                return Err(e);
            }
        },
    };

    let cursor = store.cursor(&config.job)?;
    let destinations: Vec<String> = config.destinations.keys().cloned().collect();
    let input = RunInput {
        window: window.clone(),
        now,
        cursor,
        attempt: lease.attempt,
        params: config.params.clone(),
        source,
        outbox: Staging::new(
            key.clone(),
            destinations.clone(),
            config.max_messages,
            config.max_message_bytes,
            config.max_staged_bytes,
        )
        .with_failpoints(runtime.failpoints.clone()),
        destinations,
        log: GuestLog::new(config.job.as_str(), config.log_bytes),
        limits: config.limits,
        seed: None,
    };
    let success = match sandbox.run(&component, input) {
        Ok(s) => s,
        Err(failure) => {
            let now = clock.lease_now();
            let how = if failure.retryable {
                config.attempts().after_failure(lease.attempt)
            } else {
                Failure::Permanent
            };
            store.fail(&lease, &failure.message, how, None, now)?;
            match how {
                Failure::Abandon => receipt.fail_as(
                    Event::Abandoned,
                    failure.kind,
                    format!(
                        "{}; that was attempt {} of {}, so the window is abandoned",
                        failure.message, lease.attempt, config.max_attempts
                    ),
                ),
                _ => receipt.fail(
                    failure.kind,
                    failure.message,
                    Some(matches!(how, Failure::Retry { .. })),
                ),
            }
            return Ok(());
        }
    };
    receipt.event = Event::Ran;
    receipt.stats = Some(success.stats);
    if let Some(why) = &success.describe_error {
        receipt.warnings.push(crate::receipt::Warning {
            kind: "describe",
            message: format!("{why}; the run stands, with nothing for a model to describe"),
        });
    }
    let prompt = success.report.prompt.clone();
    receipt.report = Some(ReportInfo {
        summary: success.report.summary.clone(),
        cursor: success.report.cursor.clone(),
    });
    store.prepare(
        &lease,
        &success.report,
        &success.messages,
        &success.journal,
        clock.lease_now(),
    )?;
    reach(Boundary::AfterPrepare);
    let pending: Vec<PendingMessage> = success
        .messages
        .into_iter()
        .map(|message| PendingMessage {
            message,
            attempts: 0,
            in_flight: false,
        })
        .collect();
    deliver(
        config, store, &lease, clock, runtime, &key, &pending, false, receipt,
    )?;
    *wanted = done(receipt).then(|| Wanted::new(key, prompt));
    Ok(())
}

/// Whether the run this receipt tells of is DONE.
fn done(receipt: &Receipt) -> bool {
    matches!(receipt.event, Event::Ran | Event::Resumed) && receipt.error.is_none()
}

/// Delivers a PREPARED run's messages and fills in the receipt.
#[allow(clippy::too_many_arguments)]
fn deliver(
    config: &Config,
    store: &mut dyn Store,
    lease: &Lease,
    clock: &dyn Clock,
    runtime: &Runtime,
    key: &WindowKey,
    pending: &[PendingMessage],
    resumed: bool,
    receipt: &mut Receipt,
) -> Result<()> {
    let mut infos: Vec<MessageInfo> = Vec::new();
    let result = delivery::deliver(
        Delivery {
            settings: config.delivery(),
            store,
            lease,
            clock,
            failpoints: runtime.failpoints.as_deref(),
            resumed,
            stop: runtime.stop,
        },
        key,
        pending,
        &mut infos,
    );
    let modes = |name: &str| config.destinations.get(name).map(|d| d.mode.as_str());
    receipt.set_messages(infos, &modes);
    match result? {
        Ended::Done => {}
        Ended::Retry(why) => receipt.fail(ErrorKind::Delivery, why, Some(true)),
        Ended::Permanent(why) => receipt.fail(ErrorKind::Delivery, why, Some(false)),
        Ended::Abandoned(why) => receipt.fail_as(Event::Abandoned, ErrorKind::Delivery, why),
    }
    Ok(())
}

/// A SQLite store on a filesystem that dies with its machine or container
/// loses every claim with it, and the next host runs every window again:
/// warn in the receipt and on stderr, or refuse when the job requires a
/// durable store.
///
/// # Errors
///
/// `Error::Input` when the store is ephemeral and a durable one is required.
fn check_durable(config: &Config, receipt: &mut Receipt) -> Result<()> {
    let StoreLocation::Sqlite(path) = &config.store else {
        return Ok(());
    };
    let Some(fs) = ephemeral_filesystem(path) else {
        return Ok(());
    };
    let problem = format!(
        "store `{}` is on {}: {}, and with it every claim, so a later host would run \
         every window again",
        path.display(),
        fs.name(),
        fs.dies_with()
    );
    let fix = "put the store on a persistent volume, or use a PostgreSQL store \
               (--store postgres://...)";
    if config.require_durable_store {
        return Err(crate::Error::input(format!(
            "{problem}; {fix} (refused because a durable store is required)"
        )));
    }
    crate::core::text::say(
        "warning",
        &format!("{problem}; {fix}, or pass --require-durable-store to refuse such a store"),
    );
    receipt.warnings.push(crate::receipt::Warning {
        kind: "ephemeral-store",
        message: format!("{problem}; {fix}"),
    });
    Ok(())
}

/// A store this invocation created has never seen a run: said in the
/// receipt and on stderr, since a job that ran before used another store
/// (the field report's duplicate starts exactly like this).
pub fn note_store_created(store: &StoreLocation, receipt: &mut Receipt) {
    receipt.store_created = true;
    crate::core::text::say("note", &store_created(store));
}

/// What is said of a store that was just created.
pub fn store_created(store: &StoreLocation) -> String {
    format!(
        "created a new store `{store}`; nothing has run in it yet, so if this \
         job ran before, it kept its claims in another store: pass that one with --store (or \
         `store` in the job config) before its windows run twice"
    )
}

fn last_error(error: Option<&str>) -> String {
    error
        .map(|e| format!("; last error: {e}"))
        .unwrap_or_default()
}

/// A key names one window; the store must not hold it for another.
fn check_same_window(run: &RunRecord, window: &Window) -> Result<()> {
    if (run.window_start, run.window_end, run.timezone.as_str())
        == (window.start, window.end, window.zone.name())
    {
        return Ok(());
    }
    Err(crate::store::window_mismatch(
        &run.key,
        run.window_start,
        run.window_end,
        &run.timezone,
    ))
}

fn skip_done(receipt: &mut Receipt, key: &WindowKey) {
    skipped(
        receipt,
        "done",
        format!("window `{key}` was already reported"),
    );
}

fn skip_skipped(receipt: &mut Receipt, key: &WindowKey, why: Option<&str>) {
    skipped(
        receipt,
        "catch-up",
        format!(
            "window `{key}` was skipped by a scheduler ({}); `jobhost run` for that window runs \
             it on purpose",
            why.unwrap_or("no reason recorded")
        ),
    );
}

fn skipped(receipt: &mut Receipt, reason: &str, detail: String) {
    receipt.event = Event::Skipped;
    receipt.reason = Some(reason.to_string());
    receipt.detail = Some(detail);
}

fn note_lease(receipt: &mut Receipt, lease: &Lease) {
    note_claim(receipt, lease.attempt, lease.fence.0);
}

fn note_claim(receipt: &mut Receipt, attempt: u32, fence: i64) {
    receipt.attempt = Some(attempt);
    receipt.fence = Some(fence);
}

/// `<host>:<pid>:<start nanos>`: unique per process, readable in `history`.
pub fn owner_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{host}:{}:{nanos:08x}", std::process::id())
}
