//! One run of one job, in order: config -> clock -> window -> store ->
//! sandbox -> guest -> commit -> deliver -> finish -> receipt. This is the
//! only place that sequences those steps; a crash between any two of them
//! leaves the store in a state the next invocation continues from without a
//! second effect (DESIGN.md section 1).

use jiff::{SignedDuration, Timestamp};

use crate::cache::CompileCache;
use crate::clock::{Clock, FixedClock, SystemClock, rfc3339};
use crate::config::Config;
use crate::error::Result;
use crate::guest_log::GuestLog;
use crate::outbox::{self, Staging};
use crate::receipt::{Event, MessageInfo, Receipt, ReportInfo};
use crate::sandbox::{ComponentFile, RunInput, Sandbox};
use crate::source::SourceAccess;
use crate::store::{
    Claim, ClaimRequest, ClaimStore, Lease, RunRecord, RunState, SqliteStore, StagedMessage,
};
use crate::window::{Window, WindowKey};

/// A finished invocation: the receipt to print and the exit code.
#[derive(Debug)]
pub struct Outcome {
    /// The receipt.
    pub receipt: Receipt,
    /// 0 ran/resumed/skipped, 1 failed, 2 bad input.
    pub exit_code: i32,
}

/// Runs the job described by `config` once.
pub fn run(config: &Config) -> Outcome {
    let clock: Box<dyn Clock> = match config.now {
        Some(t) => Box::new(FixedClock(t)),
        None => Box::new(SystemClock),
    };
    let mut receipt = Receipt::new(Event::Failed);
    let result = run_inner(config, clock.as_ref(), &mut receipt);
    let exit_code = match result {
        Ok(()) => match receipt.event {
            Event::Failed => 1,
            _ => 0,
        },
        Err(e) => {
            receipt.fail(e.kind(), e.to_string(), None);
            e.exit_code()
        }
    };
    Outcome { receipt, exit_code }
}

fn run_inner(config: &Config, clock: &dyn Clock, receipt: &mut Receipt) -> Result<()> {
    let now = clock.now();
    receipt.now = Some(rfc3339(now));
    let window = Window::last_closed(&config.job, config.window, &config.zone, now)?;
    receipt.set_window(&window);
    let key = window.key();
    let file = ComponentFile::read(&config.component)?;
    receipt.component = Some(file.digest());
    receipt.store = Some(config.store.display().to_string());

    let mut store = SqliteStore::open(&config.store)?;
    // The common case for a scheduled job is a window that is already done:
    // answer it without compiling anything.
    let peeked = store.peek(&key)?;
    if let Some(run) = &peeked {
        check_same_window(run, &window)?;
        if run.state == RunState::Done {
            skip_done(receipt, &key);
            receipt.attempt = Some(run.attempt);
            receipt.fence = Some(run.fence.0);
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
    let recorded_component = peeked.map(|r| r.component);
    let mut component = None;
    let mut source = SourceAccess::new(
        config.source.clone(),
        window.start,
        window.end,
        config.batch_rows,
    );
    if !resuming {
        // The query starts now and reads ahead while the host compiles,
        // claims and instantiates; a bad query fails here, before the claim.
        source.start_early()?;
        let loaded = sandbox.load(&file, &CompileCache::new(config.cache_dir.clone()))?;
        receipt.compiled = Some(loaded.cache);
        component = Some(loaded);
    }

    // Leases are measured on the earlier of the run's clock, read again now
    // (so compiling does not eat into the lease), and the host's: a --now in
    // the future must not expire a claim that is live in fact.
    let lease_now = clock.now().min(Timestamp::now());
    let lease_until = lease_now
        .checked_add(SignedDuration::try_from(config.lease).unwrap_or(SignedDuration::MAX))
        .unwrap_or(Timestamp::MAX);
    let owner = owner_id();
    let claim = store.claim(&ClaimRequest {
        window: &window,
        owner: &owner,
        component: &file.digest(),
        now: lease_now,
        lease_until,
        max_attempts: config.max_attempts,
    })?;
    let lease = match claim {
        Claim::Done => {
            skip_done(receipt, &key);
            return Ok(());
        }
        Claim::Busy { owner, lease_until } => {
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
        Claim::GaveUp { attempts, error } => {
            skipped(
                receipt,
                "gave-up",
                format!(
                    "window `{key}` failed {attempts} time(s) and is not retried{}",
                    error
                        .map(|e| format!("; last error: {e}"))
                        .unwrap_or_default()
                ),
            );
            return Ok(());
        }
        Claim::Resume { lease } => {
            receipt.event = Event::Resumed;
            // The messages were rendered by the component recorded with the run.
            if let Some(component) = recorded_component {
                receipt.component = Some(component);
            }
            note_lease(receipt, &lease);
            if let Some(report) = store.report(&key)? {
                receipt.report = Some(ReportInfo {
                    summary: report.summary,
                    cursor: report.cursor,
                });
            }
            let pending = store.pending_messages(&key)?;
            return deliver_and_finish(config, &mut store, &lease, &key, pending, now, receipt);
        }
        Claim::Run { lease, .. } => lease,
    };
    note_lease(receipt, &lease);
    let component = match component {
        Some(c) => c,
        // The committed report was withdrawn between the peek and the claim.
        None => match sandbox.load(&file, &CompileCache::new(config.cache_dir.clone())) {
            Ok(c) => c,
            Err(e) => {
                store.fail(&lease, &e.to_string(), true, now)?;
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
        ),
        destinations,
        log: GuestLog::new(config.job.as_str(), config.log_bytes),
        limits: config.limits,
    };
    let success = match sandbox.run(&component, input) {
        Ok(s) => s,
        Err(failure) => {
            let retryable = failure.retryable && lease.attempt < config.max_attempts;
            store.fail(&lease, &failure.message, failure.retryable, now)?;
            receipt.fail(failure.kind, failure.message, Some(retryable));
            return Ok(());
        }
    };
    receipt.event = Event::Ran;
    receipt.stats = Some(success.stats);
    receipt.report = Some(ReportInfo {
        summary: success.report.summary.clone(),
        cursor: success.report.cursor.clone(),
    });
    store.prepare(&lease, &success.report, &success.messages, now)?;
    deliver_and_finish(
        config,
        &mut store,
        &lease,
        &key,
        success.messages,
        now,
        receipt,
    )
}

/// Delivers `pending` in order, recording each, then marks the run DONE.
fn deliver_and_finish(
    config: &Config,
    store: &mut SqliteStore,
    lease: &Lease,
    key: &WindowKey,
    pending: Vec<StagedMessage>,
    now: Timestamp,
    receipt: &mut Receipt,
) -> Result<()> {
    let mut infos: Vec<MessageInfo> = pending
        .iter()
        .map(|m| MessageInfo {
            seq: m.seq,
            destination: m.destination.clone(),
            idempotency_key: m.idempotency_key.clone(),
            bytes: m.body.len(),
            status: "pending".to_string(),
        })
        .collect();
    // Each delivery but the last is recorded on its own, so a crash repeats
    // as little as possible; the last is recorded with DONE.
    let mut last = None;
    for (i, (m, info)) in pending.iter().zip(infos.iter_mut()).enumerate() {
        match outbox::deliver(&config.destinations, key, m) {
            Ok(status) => {
                info.status.clone_from(&status);
                if i + 1 < pending.len()
                    && let Err(e) = store.mark_delivered(lease, m.seq, &status, now)
                {
                    receipt.messages = Some(infos);
                    return Err(e);
                }
                last = Some((m.seq, status));
            }
            Err(e) => {
                info.status = format!("failed: {e}");
                receipt.messages = Some(infos);
                // The report stays PREPARED and the claim is let go: the next
                // invocation delivers the stored bytes, never re-renders.
                store.delivery_failed(lease, &e.to_string(), now)?;
                receipt.fail(e.kind(), e.to_string(), Some(true));
                return Ok(());
            }
        }
    }
    receipt.messages = Some(infos);
    store.finish(lease, last.as_ref().map(|(seq, s)| (*seq, s.as_str())), now)
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

fn skipped(receipt: &mut Receipt, reason: &str, detail: String) {
    receipt.event = Event::Skipped;
    receipt.reason = Some(reason.to_string());
    receipt.detail = Some(detail);
}

fn note_lease(receipt: &mut Receipt, lease: &Lease) {
    receipt.attempt = Some(lease.attempt);
    receipt.fence = Some(lease.fence.0);
}

/// `<host>:<pid>:<start nanos>`: unique per process, readable in `history`.
fn owner_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{host}:{}:{nanos:08x}", std::process::id())
}
