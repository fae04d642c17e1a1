//! One run of one job, in its phases:
//!
//! `open` -> [`Run::peek`] -> [`Run::prepare`] -> [`Run::claim`] ->
//! [`Run::execute`] -> [`Run::deliver`] -> `finish`.
//!
//! This is the only place that sequences them. Each phase's output is the
//! next one's input, and a crash between any two leaves the store in a
//! state the next invocation continues from without a second effect (see
//! "One run" in ARCHITECTURE.md).

use std::sync::Arc;

use jiff::Timestamp;

use crate::core::clock::{Clock, rfc3339};
use crate::core::error::{Error, ErrorKind, Result};
use crate::core::failpoint::Boundary;
use crate::core::window::{Window, WindowKey};
use crate::effects::delivery::{self, Delivery, Ended};
use crate::effects::digest::Wanted;
use crate::effects::ping::Signal;
use crate::effects::telemetry::{self, RunTrace, Step};
use crate::guest::cache::CompileCache;
use crate::guest::failure::GuestFailure;
use crate::guest::guest_log::GuestLog;
use crate::guest::outbox::Staging;
use crate::guest::sandbox::{ComponentFile, GuestSuccess, LoadedComponent, RunInput, Sandbox};
use crate::guest::source::{Source, SourceAccess};
use crate::run::answer::{self, Granted};
use crate::run::finish;
use crate::run::job::Job;
use crate::run::needs;
use crate::run::open::open_store;
use crate::run::receipt::{
    Event, MessageInfo, Receipt, ReportInfo, SkipReason, Warning, WarningKind,
};
use crate::run::replay::{Recording, Replayed, Verdict};
use crate::run::{Outcome, Runtime};
use crate::store::{
    ClaimRequest, Failure, Lease, LocalProcesses, PendingMessage, Purpose, RunHead, RunInputs,
    RunRecord, RunState, ShadowRun, Store, UpstreamUse, window_mismatch,
};

/// How often `run --wait` looks again at the upstream windows a window
/// needs.
const NEEDS_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// Runs the job's newest due window once, in `runtime`.
pub fn run(job: &Job, runtime: &Runtime) -> Outcome {
    run_window(job, None, runtime)
}

/// Runs `window` of the job (by default the newest due one) once, in
/// `runtime`: the scheduling daemon names the window, including missed
/// ones it catches up on; a person's `jobhost run` names none, and runs
/// even a window a scheduler skipped.
pub fn run_window(job: &Job, window: Option<&Window>, runtime: &Runtime) -> Outcome {
    let asked = if window.is_some() {
        Asked::Scheduled
    } else {
        Asked::Person
    };
    run_picked(job, window, &asked, None, runtime)
}

/// A window this process claimed ahead of its run (a daemon's batch of a
/// job's backlog, see [`crate::store::ClaimStore::claim_fresh`]).
#[derive(Debug, Clone)]
pub struct Preclaimed {
    /// The claim.
    pub lease: Lease,
    /// The component recorded with it.
    pub component: String,
    /// When the batch was claimed, on this process's monotonic clock.
    pub at: std::time::Instant,
}

/// Runs `window`, which this process claimed ahead with `claim`, as the
/// scheduler's run: the same phases without the peek and the claim. The
/// claim is used only if, once the component is loaded and the query
/// started, the job is not paused, the component is the one recorded
/// with the claim and less than half the lease has passed since it was
/// made; otherwise it is let go of (the window has no row again) and the
/// window is claimed as any other. A failure to prepare lets it go too,
/// as a run that fails before its claim leaves none.
pub fn run_claimed(job: &Job, window: &Window, claim: Preclaimed, runtime: &Runtime) -> Outcome {
    run_picked(job, Some(window), &Asked::Scheduled, Some(claim), runtime)
}

/// Why a window is run: who named it and what they asked for, which
/// decides what its claim may take over (see [`Purpose`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// The scheduler's own run: a window it skipped stays skipped.
    Scheduled,
    /// A person's `run` (of the newest due window, as a cron runs it): a
    /// window a scheduler skipped is run.
    Person,
    /// A window a person named (`run --for`, a backfill, the dashboard): as
    /// [`Asked::Person`], and a granted claim writes an audit line `run`
    /// saying who asked.
    Named {
        /// Who asked.
        by: String,
    },
    /// `backfill --only failed`: also a FAILED or ABANDONED window, as a
    /// new series of attempts.
    Retry {
        /// Why, for the audit line.
        reason: String,
        /// Who asked.
        by: String,
    },
    /// `rerun` and `backfill --only all`: also a DONE window, as its next
    /// revision.
    Rerun {
        /// Why, stored with the revision.
        reason: String,
        /// Only this revision is rerun (`None`: whichever is there).
        of_revision: Option<u32>,
        /// Who asked.
        by: String,
    },
}

impl Asked {
    fn purpose(&self) -> Purpose<'_> {
        match self {
            Asked::Scheduled => Purpose::Scheduled,
            Asked::Person => Purpose::Asked,
            Asked::Named { by } => Purpose::Named { by },
            Asked::Retry { reason, by } => Purpose::Retry { reason, by },
            Asked::Rerun {
                reason,
                of_revision,
                by,
            } => Purpose::Rerun {
                reason,
                of_revision: *of_revision,
                by,
            },
        }
    }
}

/// Runs `window` once for the reason `asked`, in `runtime` (`backfill`
/// and `rerun`): the same phases, claim, fence and outbox rules as `run`.
pub fn run_asked(job: &Job, window: &Window, asked: &Asked, runtime: &Runtime) -> Outcome {
    run_picked(job, Some(window), asked, None, runtime)
}

/// Runs the window a person (`by`) names with `jobhost run --for TEXT` (a
/// label or an instant inside it, see
/// [`crate::core::schedule::Schedule::named`]) once, in `runtime`, exactly
/// as a plain `run` runs its window: a window a scheduler skipped is run
/// too, and a claim granted is audited as `run` by `by`. A window that
/// names nothing or has not closed at the clock's reading is refused (exit
/// 2) before the store is opened.
pub fn run_for(job: &Job, text: &str, by: &str, runtime: &Runtime) -> Outcome {
    let now = runtime.clock().now();
    let asked = Asked::Named { by: by.to_string() };
    match job.schedule.named("--for", text, now) {
        Ok(window) => run_picked(job, Some(&window), &asked, None, runtime),
        Err(e) => {
            let mut outcome = Outcome::refused(&e);
            outcome.receipt.now = Some(rfc3339(now));
            outcome
        }
    }
}

/// Runs `window` (by default the newest due one) for the reason `asked`,
/// under `preclaimed` if this process claimed it already.
fn run_picked(
    job: &Job,
    window: Option<&Window>,
    asked: &Asked,
    preclaimed: Option<Preclaimed>,
    runtime: &Runtime,
) -> Outcome {
    let clock = runtime.clock();
    let mut receipt = Receipt::new(Event::Failed);
    // One trace per run, when the process exports traces; a run the
    // daemon's wake-up started links to it.
    let trace = telemetry::run_trace("jobhost.run", job.name().as_str(), &telemetry::wake_links());
    receipt.trace_id = trace.as_ref().map(RunTrace::trace_id);
    let result = Run::start(job, window, asked, clock.as_ref(), runtime, &mut receipt)
        .and_then(|run| run.traced(trace.as_ref()).phases(preclaimed, &mut receipt));
    let (exit_code, wanted) = match result {
        Ok(wanted) => (receipt.exit_code(), wanted),
        Err(e) => {
            receipt.fail(e.kind(), e.chain(), None);
            (e.exit_code(), None)
        }
    };
    // After everything else: a monitor hears of the outcome, the job's
    // incidents are kept in step (and a person hears of them), then the
    // digest is made; nothing any of them does changes the outcome.
    finish::announce(job, &mut receipt, clock.as_ref());
    {
        let _step = trace
            .as_ref()
            .filter(|_| crate::run::notices::wanted(job) && receipt.event != Event::Skipped)
            .map(|t| t.step("notices"));
        finish::notify(job, runtime, clock.as_ref(), &mut receipt);
    }
    let digest = {
        let _step = trace
            .as_ref()
            .filter(|_| wanted.is_some())
            .map(|t| t.step("digest"));
        finish::digest(job, wanted, runtime, clock.as_ref(), &mut receipt)
    };
    if let Some(t) = trace {
        if let Some(k) = &receipt.key {
            t.attr("jobhost.window", k.clone());
        }
        t.attr("jobhost.event", receipt.event.as_str());
        if let Some(a) = receipt.attempt {
            t.attr("jobhost.attempt", i64::from(a));
        }
        t.end(receipt.error.as_ref().map(|e| e.message.as_str()));
    }
    Outcome {
        receipt,
        exit_code,
        digest,
    }
}

/// One run under way: its job, clock, runtime and window.
struct Run<'a> {
    job: &'a Job,
    clock: &'a dyn Clock,
    runtime: &'a Runtime,
    /// The run's clock reading.
    now: Timestamp,
    window: Window,
    key: WindowKey,
    /// Why the window is run.
    asked: &'a Asked,
    /// The run's trace, when the process exports traces.
    trace: Option<&'a RunTrace>,
}

/// What [`Run::peek`] found.
enum Peeked {
    /// Nothing to do: the receipt says why.
    Answered,
    /// The window's row, if it has one, to claim.
    Open(Option<Box<RunRecord>>),
}

/// What [`Run::prepare`] readied before the claim.
struct Prepared {
    /// The runtime's shared sandbox, or this run's own.
    sandbox: Arc<Sandbox>,
    /// The component file, unless it is missing and not needed.
    file: Option<ComponentFile>,
    /// The compiled component, for a window whose guest is to run.
    component: Option<LoadedComponent>,
    /// The window's data, its query already started.
    source: SourceAccess,
    /// The trace's step of reading the source, from the query's start to
    /// the guest's end.
    source_step: Option<Step>,
    /// The component recorded with a committed report still to deliver.
    recorded_component: Option<String>,
    /// The upstream windows the run uses, recorded with its report.
    uses: Vec<UpstreamUse>,
}

/// What [`Run::execute`] committed: the messages to deliver and the
/// report's prompt for a digest.
struct Executed {
    pending: Vec<PendingMessage>,
    prompt: Option<String>,
    /// What a `[shadow]` candidate is run on, once the live run is
    /// delivered: the live run's report, messages and journal.
    shadow: Option<crate::run::replay::Recording>,
}

impl<'a> Run<'a> {
    /// Picks the window: the one named, else the newest due one (closed,
    /// and past the job's delay).
    fn start(
        job: &'a Job,
        window: Option<&Window>,
        asked: &'a Asked,
        clock: &'a dyn Clock,
        runtime: &'a Runtime,
        receipt: &mut Receipt,
    ) -> Result<Run<'a>> {
        let now = clock.now();
        receipt.now = Some(rfc3339(now));
        let window = match window {
            Some(w) => w.clone(),
            None => job.schedule.last_due(now)?,
        };
        receipt.set_window(&window);
        Ok(Run {
            job,
            clock,
            runtime,
            now,
            key: window.key(),
            window,
            asked,
            trace: None,
        })
    }

    /// This run, its steps traced in `trace`.
    fn traced(self, trace: Option<&'a RunTrace>) -> Run<'a> {
        Run { trace, ..self }
    }

    /// Starts the step `name` of the run's trace, if it has one.
    fn step(&self, name: &'static str) -> Option<Step> {
        self.trace.map(|t| t.step(name))
    }

    /// The phases in order (a window claimed already, `preclaimed`, skips
    /// the peek and the claim); the DONE run whose digest is wanted, if
    /// any, with the store the run used, for the digest to read and record
    /// in.
    fn phases(
        self,
        preclaimed: Option<Preclaimed>,
        receipt: &mut Receipt,
    ) -> Result<Option<(Wanted, Box<dyn Store>)>> {
        let mut opened = open_store(self.job, self.runtime.failpoints.clone(), receipt)?;
        let store = opened.as_mut();
        // The store answers first: a window already done is answered
        // without opening the component, however large it is.
        let row = match &preclaimed {
            // Claimed by this process a moment ago, with no row before.
            Some(_) => None,
            None => match self.peek(store, receipt)? {
                Peeked::Open(row) => row,
                Peeked::Answered => return Ok(None),
            },
        };
        // A window of a job that builds on other jobs runs only once the
        // upstream windows it covers are DONE.
        let used = if preclaimed.is_none() && !self.job.needs.is_empty() {
            match self.needs(store, row.as_deref(), receipt)? {
                Some(used) => used,
                None => return Ok(None),
            }
        } else {
            Vec::new()
        };
        // A missing or unreadable component is bad input, unless the
        // window's report is already committed (see `prepare`).
        let file = ComponentFile::open(&self.job.component, &self.cache());
        if let Ok(f) = &file {
            receipt.component = Some(f.digest());
        }
        let prepared = match (self.prepare(file, row, &used, receipt), &preclaimed) {
            (Ok(prepared), _) => prepared,
            (Err(e), Some(claim)) => {
                // Bad input: as a run that fails before its claim leaves
                // none, the claim made ahead is let go of.
                self.let_go(store, claim);
                return Err(e);
            }
            (Err(e), None) => return Err(e),
        };
        let usable = match preclaimed {
            Some(claim) if self.still_good(store, &claim, receipt)? => Some(claim.lease),
            Some(claim) => {
                self.let_go(store, &claim);
                None
            }
            None => None,
        };
        let granted = match usable {
            Some(lease) => {
                self.granted(&lease, receipt);
                Granted::Run(lease)
            }
            None => match self.claim(store, &prepared, receipt)? {
                Some(granted) => granted,
                None => return Ok(None),
            },
        };
        let (lease, executed, resumed) = match granted {
            Granted::Resume(lease) => {
                let executed = self.resume(store, prepared.recorded_component, receipt)?;
                (lease, executed, true)
            }
            Granted::Run(lease) => match self.execute(store, &lease, prepared, receipt)? {
                Some(executed) => (lease, executed, false),
                None => return Ok(None),
            },
        };
        self.deliver(store, &lease, &executed.pending, resumed, receipt)?;
        if let Some(recording) = &executed.shadow {
            self.shadow(store, &lease, recording, receipt);
        }
        Ok(receipt
            .done()
            .then(|| (Wanted::new(self.key, executed.prompt), opened)))
    }

    /// The common case for a scheduled job is a window already done: it is
    /// answered from the head of its row (a narrow read), without
    /// compiling anything. Otherwise the whole row is read for the phases
    /// that follow, and looked at again (it may have changed between).
    fn peek(&self, store: &mut dyn Store, receipt: &mut Receipt) -> Result<Peeked> {
        match store.peek_head(&self.key)? {
            None => return Ok(Peeked::Open(None)),
            Some(head) if self.answered(&head, receipt)? => return Ok(Peeked::Answered),
            Some(_) => {}
        }
        let row = store.peek(&self.key)?;
        if let Some(run) = &row {
            let head = run.head();
            if self.answered(&head, receipt)? {
                return Ok(Peeked::Answered);
            }
            decided_by(&head, receipt);
        }
        Ok(Peeked::Open(row.map(Box::new)))
    }

    /// Answers the run from its row's head when the window is decided for
    /// this run (DONE, unless rerun; SKIPPED, for the scheduler); whether
    /// it did.
    fn answered(&self, run: &RunHead, receipt: &mut Receipt) -> Result<bool> {
        check_same_window(run, &self.key, &self.window)?;
        let answers = match run.state {
            RunState::Done => !matches!(self.asked, Asked::Rerun { .. }),
            RunState::Skipped => *self.asked == Asked::Scheduled,
            _ => false,
        };
        if !answers {
            return Ok(false);
        }
        decided_by(run, receipt);
        if run.state == RunState::Done {
            answer::done(receipt, &self.key, run.attempt, run.fence.0);
        } else {
            answer::skipped_by_scheduler(
                receipt,
                &self.key,
                &self.window.label,
                &self.job.target,
                run.skip_reason.as_deref(),
                run.attempt,
                run.fence.0,
            );
        }
        Ok(true)
    }

    /// The upstream windows the window uses, all DONE; `None` when it
    /// waits for one it needs (see [`crate::run::needs`]): then the receipt
    /// says which, and a window with no row, or WAITING already, is
    /// recorded WAITING with the same words. A committed report is
    /// delivered whatever its upstream does now (and uses none).
    fn needs(
        &self,
        store: &mut dyn Store,
        row: Option<&RunRecord>,
        receipt: &mut Receipt,
    ) -> Result<Option<Vec<needs::Used>>> {
        let committed = row.is_some_and(|r| {
            r.report.is_some()
                && matches!(
                    r.state,
                    RunState::Prepared | RunState::Failed | RunState::Abandoned
                )
        });
        if committed {
            return Ok(Some(Vec::new()));
        }
        let mut needs = needs::check(store, &self.window, &self.job.needs)?;
        if needs.met() {
            return Ok(Some(needs.done));
        }
        if let Some(wait) = self.runtime.wait_for_needs {
            // Recorded WAITING first, so every host sees what it waits for;
            // then looked at again until the upstream is DONE or the wait
            // is over.
            self.record_wait(store, row, &needs.words())?;
            let until = std::time::Instant::now() + wait;
            let stop = self.runtime.stop;
            while std::time::Instant::now() < until
                && !stop.is_some_and(|s| s.load(std::sync::atomic::Ordering::SeqCst))
            {
                std::thread::sleep(
                    NEEDS_POLL.min(until.saturating_duration_since(std::time::Instant::now())),
                );
                needs = needs::check(store, &self.window, &self.job.needs)?;
                if needs.met() {
                    return Ok(Some(needs.done));
                }
            }
        }
        let words = needs.words();
        let row = if self.runtime.wait_for_needs.is_some() {
            // Recorded before the wait: read again.
            store.peek(&self.key)?.map(Box::new)
        } else {
            row.cloned().map(Box::new)
        };
        let recorded = self.record_wait(store, row.as_deref(), &words)?;
        receipt.waits_for = Some(needs.waits_for());
        receipt.skip(
            SkipReason::Waiting,
            format!(
                "window `{}` waits for {words}; it runs once every upstream window it needs is \
                 DONE{}",
                self.key,
                if recorded {
                    " (it is WAITING: a daemon of the job starts it then)"
                } else {
                    ""
                }
            ),
        );
        Ok(None)
    }

    /// Records the window WAITING with `words` when it has no row, or is
    /// WAITING with other words; whether it is WAITING now.
    fn record_wait(
        &self,
        store: &mut dyn Store,
        row: Option<&RunRecord>,
        words: &str,
    ) -> Result<bool> {
        Ok(match row.map(|r| (r.state, r.skip_reason.as_deref())) {
            // Looked at again and still waiting for the same: nothing to
            // write.
            Some((RunState::Waiting, Some(was))) if was == words => true,
            None | Some((RunState::Waiting, _)) => store.record_waiting(
                &self.window,
                words,
                &crate::run::owner_id(),
                self.clock.lease_now(),
            )?,
            Some(_) => false,
        })
    }

    /// Everything the user supplied is checked before the claim, so bad
    /// input never leaves a claim behind: the component is compiled (or
    /// found in the cache) and the query started. A run whose report is
    /// already committed needs neither: it only delivers what is stored.
    fn prepare(
        &self,
        file: Result<ComponentFile>,
        row: Option<Box<RunRecord>>,
        used: &[needs::Used],
        receipt: &mut Receipt,
    ) -> Result<Prepared> {
        let sandbox = self.runtime.sandbox()?;
        // A committed report is delivered, not rendered again: PREPARED, or
        // a FAILED or ABANDONED one a person retries.
        let retrying = matches!(self.asked, Asked::Retry { .. } | Asked::Rerun { .. });
        let resuming = row.as_ref().is_some_and(|r| {
            r.state == RunState::Prepared
                || (retrying
                    && r.report.is_some()
                    && matches!(r.state, RunState::Failed | RunState::Abandoned))
        });
        let mut file = match file {
            Ok(f) => Some(f),
            Err(_) if resuming => None,
            Err(e) => return Err(e),
        };
        let guest = &self.job.guest;
        let (start, end) = (self.window.start, self.window.end);
        // An upstream source is the committed reports of the windows just
        // seen DONE, read here.
        let spec = match &self.job.source {
            Some(s) if s.is_upstream() => Some(Source::from(needs::table(used))),
            other => other.clone(),
        };
        let mut source = SourceAccess::new(spec, start, end, guest.batch_rows);
        let mut component = None;
        let mut source_step = None;
        if let (false, Some(file)) = (resuming, &mut file) {
            // The query starts now and reads ahead while the host compiles,
            // claims and instantiates; a bad query fails here. Its step
            // lasts until the guest has had every row.
            source_step = self.step("source");
            if let Err(e) = source.start_early() {
                if let Some(s) = source_step.as_mut() {
                    s.fail(&format!("{e:#}"));
                }
                return Err(e);
            }
            let mut step = self.step("component");
            let loaded = sandbox.load(file, &self.cache());
            if let (Some(s), Ok(l)) = (step.as_mut(), &loaded) {
                s.attr("jobhost.compiled", format!("{:?}", l.cache).to_lowercase());
            }
            drop(step);
            let loaded = loaded?;
            receipt.compiled = Some(loaded.cache);
            receipt.component = Some(loaded.digest.clone());
            component = Some(loaded);
        }
        Ok(Prepared {
            sandbox,
            file,
            component,
            source,
            source_step,
            recorded_component: row.map(|r| r.component),
            uses: used
                .iter()
                .map(|u| UpstreamUse {
                    key: u.key.clone(),
                    revision: u.revision,
                    report_digest: u.report_digest(),
                })
                .collect(),
        })
    }

    /// Claims the window. The lease is measured from after compiling, so
    /// compiling does not eat into it; once granted, the start ping goes out.
    fn claim(
        &self,
        store: &mut dyn Store,
        prepared: &Prepared,
        receipt: &mut Receipt,
    ) -> Result<Option<Granted>> {
        let owner = crate::run::owner_id();
        let step = self.step("claim");
        let claim = store.claim(&ClaimRequest {
            window: &self.window,
            owner: &owner,
            // A resumed run keeps the component recorded with its report.
            component: &prepared
                .file
                .as_ref()
                .map_or_else(String::new, ComponentFile::digest),
            now: self.clock.lease_now(),
            lease: self.job.lease,
            max_attempts: self.job.attempts.max_attempts,
            purpose: self.asked.purpose(),
            probe: &LocalProcesses,
        })?;
        drop(step);
        let granted = answer::answer(
            claim,
            &self.key,
            &self.window.label,
            &self.job.target,
            receipt,
        );
        if let Some(Granted::Run(lease) | Granted::Resume(lease)) = &granted {
            self.granted(lease, receipt);
        }
        Ok(granted)
    }

    /// Whether a claim made ahead is still good to run under: the job is
    /// not paused, the component loaded is the one recorded with it, and
    /// less than half its lease has passed.
    fn still_good(
        &self,
        store: &mut dyn Store,
        claim: &Preclaimed,
        receipt: &Receipt,
    ) -> Result<bool> {
        let fresh = claim.at.elapsed() < self.job.lease / 2;
        let same = receipt.component.as_deref() == Some(claim.component.as_str());
        Ok(fresh && same && store.paused(self.job.name().as_str())?.is_none())
    }

    /// Lets go of a claim made ahead that this run will not use; a failure
    /// to is said, and the claim is then taken over after its lease.
    fn let_go(&self, store: &mut dyn Store, claim: &Preclaimed) {
        let released = store.release(std::slice::from_ref(&claim.lease), self.clock.lease_now());
        if let Err(e) = released {
            crate::core::text::say(
                "warning",
                &format!(
                    "could not let go of the claim on `{}` made ahead of its run ({e:#}); \
                     it is taken over when its lease runs out",
                    claim.lease.key
                ),
            );
        }
    }

    /// A claim granted: the receipt says so, and the start ping goes out.
    fn granted(&self, lease: &Lease, receipt: &mut Receipt) {
        receipt.note_takeover(lease.taken_from.as_ref());
        receipt.note_claim(lease.attempt, lease.fence.0);
        receipt.note_revision(lease.revision, self.asked.purpose().reason());
        finish::ping(self.job, Signal::Start, receipt, self.clock);
    }

    /// Picks up a report another invocation committed: its messages are
    /// delivered as stored, rendered by the component recorded with them.
    fn resume(
        &self,
        store: &mut dyn Store,
        recorded_component: Option<String>,
        receipt: &mut Receipt,
    ) -> Result<Executed> {
        receipt.event = Event::Resumed;
        if let Some(component) = recorded_component {
            receipt.component = Some(component);
        }
        let mut prompt = None;
        if let Some(report) = store.report(&self.key)? {
            prompt = report.prompt;
            receipt.report = Some(ReportInfo {
                summary: report.summary,
                cursor: report.cursor,
            });
        }
        Ok(Executed {
            pending: store.pending_messages(&self.key)?,
            prompt,
            shadow: None,
        })
    }

    /// Runs the guest under the lease and commits its report and messages
    /// (PREPARED); `None` when the guest failed, the failure recorded.
    fn execute(
        &self,
        store: &mut dyn Store,
        lease: &Lease,
        prepared: Prepared,
        receipt: &mut Receipt,
    ) -> Result<Option<Executed>> {
        self.reach(Boundary::AfterClaim);
        let component = match prepared.component {
            Some(c) => c,
            None => self.load_late(store, lease, &prepared.sandbox, prepared.file)?,
        };
        // A rerun is given what the window's first run would have been:
        // the cursor of the newest DONE window before it (the job's own
        // cursor moves only with its newest window). Any other run is
        // given the job's cursor.
        let cursor = if lease.revision > 1 && matches!(self.asked, Asked::Rerun { .. }) {
            store.cursor_before(self.job.name(), self.window.start)?
        } else {
            store.cursor(self.job.name())?
        };
        let input = self.input(lease, cursor, prepared.source);
        let mut step = self.step("guest");
        let ran = prepared.sandbox.run(&component, input);
        let mut source_step = prepared.source_step;
        match &ran {
            Ok(success) => {
                if let Some(s) = source_step.as_mut() {
                    s.attr(
                        "jobhost.rows",
                        i64::try_from(success.stats.rows).unwrap_or(i64::MAX),
                    );
                }
            }
            Err(failure) => {
                if let Some(s) = step.as_mut() {
                    s.fail(&failure.message);
                }
            }
        }
        drop((step, source_step));
        match ran {
            Ok(success) => {
                let mut step = self.step("commit");
                let committed = self.commit(store, lease, success, &prepared.uses, receipt);
                if let (Some(s), Err(e)) = (step.as_mut(), &committed) {
                    s.fail(&format!("{e:#}"));
                }
                committed.map(Some)
            }
            Err(failure) => {
                self.guest_failed(store, lease, failure, receipt)?;
                Ok(None)
            }
        }
    }

    /// The committed report was withdrawn between the peek and the claim:
    /// the component is loaded now, and a failure to is recorded against
    /// the claim.
    fn load_late(
        &self,
        store: &mut dyn Store,
        lease: &Lease,
        sandbox: &Sandbox,
        mut file: Option<ComponentFile>,
    ) -> Result<LoadedComponent> {
        let loaded = file
            .as_mut()
            .ok_or_else(|| {
                Error::input(format!(
                    "cannot read component `{}`; restore it or point --component at another",
                    self.job.component.display()
                ))
            })
            .and_then(|f| sandbox.load(f, &self.cache()));
        if let Err(e) = &loaded {
            let how = self.job.attempts.after_failure(lease.attempt);
            store.fail(lease, &e.chain(), how, None, self.clock.lease_now())?;
        }
        loaded
    }

    /// What the guest is handed.
    fn input(&self, lease: &Lease, cursor: Option<String>, source: SourceAccess) -> RunInput {
        let guest = &self.job.guest;
        let destinations = self.job.destination_names();
        let outbox = Staging::new(self.key.clone(), destinations.clone(), guest.outbox)
            .for_revision(lease.revision)
            .with_failpoints(self.runtime.failpoints.clone());
        RunInput {
            window: self.window.clone(),
            now: self.now,
            cursor,
            attempt: lease.attempt,
            revision: lease.revision,
            params: guest.params.clone(),
            source,
            outbox,
            destinations,
            log: GuestLog::new(self.job.name().as_str(), guest.log_bytes),
            limits: guest.limits,
            seed: None,
        }
    }

    /// Records a failed guest run: retried later, abandoned after its last
    /// attempt, or failed for good when running again cannot help.
    fn guest_failed(
        &self,
        store: &mut dyn Store,
        lease: &Lease,
        failure: GuestFailure,
        receipt: &mut Receipt,
    ) -> Result<()> {
        let how = if failure.retryable {
            self.job.attempts.after_failure(lease.attempt)
        } else {
            Failure::Permanent
        };
        store.fail(lease, &failure.message, how, None, self.clock.lease_now())?;
        receipt.entry = store.last_entry();
        match how {
            Failure::Abandon => receipt.fail_as(
                Event::Abandoned,
                failure.kind,
                format!(
                    "{}; that was attempt {} of {}, so the window is abandoned",
                    failure.message, lease.attempt, self.job.attempts.max_attempts
                ),
            ),
            _ => receipt.fail(
                failure.kind,
                failure.message,
                Some(matches!(how, Failure::Retry { .. })),
            ),
        }
        Ok(())
    }

    /// Commits the guest's report, messages and journal (PREPARED).
    fn commit(
        &self,
        store: &mut dyn Store,
        lease: &Lease,
        success: GuestSuccess,
        uses: &[UpstreamUse],
        receipt: &mut Receipt,
    ) -> Result<Executed> {
        receipt.event = Event::Ran;
        receipt.stats = Some(success.stats);
        if let Some(why) = &success.describe_error {
            receipt.warnings.push(Warning {
                kind: WarningKind::Describe,
                message: format!("{why}; the run stands, with nothing for a model to describe"),
            });
        }
        receipt.report = Some(ReportInfo {
            summary: success.report.summary.clone(),
            cursor: success.report.cursor.clone(),
        });
        let now = self.clock.lease_now();
        // What the guest read of a source that `jobhost check` can read
        // again: the rows' fingerprint, and which query read them.
        let fingerprint = self
            .job
            .source
            .as_ref()
            .and_then(Source::query_digest)
            .map(|query| format!("{} query={query}", success.read.text()));
        let read = RunInputs {
            uses: uses.to_vec(),
            fingerprint,
        };
        store.prepare_using(
            lease,
            &success.report,
            &success.messages,
            &success.journal,
            &read,
            now,
        )?;
        self.reach(Boundary::AfterPrepare);
        let shadow = self.job.shadow.as_ref().and_then(|_| {
            let journal = crate::guest::journal::Journal::decode(&success.journal).ok()?;
            Some(crate::run::replay::Recording {
                journal,
                stored_journal: success.journal.clone(),
                component: receipt.component.clone().unwrap_or_default(),
                report: success.report.clone(),
                messages: success.messages.clone(),
                embedded: None,
                bodies_pruned: false,
                chain: Vec::new(),
            })
        });
        // The messages go on with the entry that committed them, which a
        // signed delivery names.
        let entry = store.last_entry();
        let pending = success
            .messages
            .into_iter()
            .map(|message| PendingMessage {
                message,
                attempts: 0,
                in_flight: false,
                entry: entry.clone(),
            })
            .collect();
        Ok(Executed {
            pending,
            prompt: success.report.prompt,
            shadow,
        })
    }

    /// Runs the job's `[shadow]` candidate on the live run's journaled
    /// input, as a replay does (no source, no delivery), and records what
    /// it gave beside the live run: agreed, differed (with the
    /// differences) or failed. Nothing of it changes the live run's
    /// outcome; a failure to record it is said on stderr.
    fn shadow(
        &self,
        store: &mut dyn Store,
        lease: &Lease,
        recording: &Recording,
        receipt: &mut Receipt,
    ) {
        let Some(path) = &self.job.shadow else { return };
        let now = self.clock.lease_now();
        let ran = (|| -> Result<ShadowRun> {
            let sandbox = self.runtime.sandbox()?;
            let cache = self.cache();
            let candidate = sandbox.load(&mut ComponentFile::open(path, &cache)?, &cache)?;
            let replayed = crate::run::replay::replay(&sandbox, &candidate, recording)?;
            let (report, messages) = match &replayed {
                Replayed::Report { report, messages } => {
                    (Some(report.summary.clone()), Some(shown_messages(messages)))
                }
                Replayed::Failed { .. } => (None, None),
            };
            let (verdict, differences, error) = match crate::run::replay::judge(recording, replayed)
            {
                Verdict::Identical { .. } => ("agreed", Vec::new(), None),
                Verdict::Different(d) => ("differed", d, None),
                Verdict::Diverged(why) | Verdict::Failed(why) => ("failed", Vec::new(), Some(why)),
            };
            Ok(ShadowRun {
                key: self.key.clone(),
                revision: lease.revision,
                component: candidate.digest.clone(),
                verdict: verdict.to_string(),
                report,
                messages,
                differences,
                error,
                at: now,
            })
        })();
        let run = ran.unwrap_or_else(|e| ShadowRun {
            key: self.key.clone(),
            revision: lease.revision,
            component: path.display().to_string(),
            verdict: "failed".to_string(),
            report: None,
            messages: None,
            differences: Vec::new(),
            error: Some(e.chain()),
            at: now,
        });
        if let Err(e) = store.record_shadow(&run, now) {
            crate::core::text::say(
                "warning",
                &format!("could not record the shadow run of `{}`: {e:#}", self.key),
            );
        }
        receipt.shadow = Some(crate::run::receipt::ShadowInfo {
            component: run.component,
            verdict: run.verdict,
            differences: run.differences.len(),
            error: run.error,
        });
    }

    /// Delivers a PREPARED run's messages and fills in the receipt.
    fn deliver(
        &self,
        store: &mut dyn Store,
        lease: &Lease,
        pending: &[PendingMessage],
        resumed: bool,
        receipt: &mut Receipt,
    ) -> Result<()> {
        let mut infos: Vec<MessageInfo> = Vec::new();
        let result = delivery::deliver(
            Delivery {
                settings: self.job.delivery(),
                store,
                lease,
                clock: self.clock,
                failpoints: self.runtime.failpoints.as_deref(),
                resumed,
                stop: self.runtime.stop,
                trace: self.trace,
            },
            &self.key,
            pending,
            &mut infos,
        );
        let modes = |name: &str| self.job.destinations.get(name).map(|d| d.mode);
        receipt.set_messages(infos, &modes);
        // The chain entry of the last decision: DONE, or the failure.
        receipt.entry = store.last_entry();
        match result? {
            Ended::Done => {}
            Ended::Retry(why) => receipt.fail(ErrorKind::Delivery, why, Some(true)),
            Ended::Permanent(why) => receipt.fail(ErrorKind::Delivery, why, Some(false)),
            Ended::Abandoned(why) => receipt.fail_as(Event::Abandoned, ErrorKind::Delivery, why),
        }
        Ok(())
    }

    fn cache(&self) -> CompileCache {
        let cache = CompileCache::new(self.job.cache_dir.clone());
        match self.runtime.racy_window {
            Some(window) => cache.with_racy_window(window),
            None => cache,
        }
    }

    fn reach(&self, boundary: Boundary) {
        if let Some(f) = &self.runtime.failpoints {
            f.reached(boundary);
        }
    }
}

/// A key names one window; the store must not hold it for another.
/// Names in the receipt the component that decided a DONE or SKIPPED
/// window, as recorded.
fn decided_by(run: &RunHead, receipt: &mut Receipt) {
    if matches!(run.state, RunState::Done | RunState::Skipped) && !run.component.is_empty() {
        receipt.component = Some(run.component.clone());
    }
}

fn check_same_window(run: &RunHead, key: &WindowKey, window: &Window) -> Result<()> {
    if (run.window_start, run.window_end, run.timezone.as_str())
        == (window.start, window.end, window.zone.name())
    {
        return Ok(());
    }
    Err(window_mismatch(
        key,
        run.window_start,
        run.window_end,
        &run.timezone,
    ))
}

/// A shadow run's messages as stored: one JSON object each, the body as
/// text (a body that is not UTF-8 has its bytes replaced).
fn shown_messages(messages: &[crate::store::StagedMessage]) -> String {
    let list: Vec<serde_json::Value> = messages
        .iter()
        .map(|m| {
            serde_json::json!({
                "seq": m.seq,
                "destination": m.destination,
                "content_type": m.content_type,
                "body": String::from_utf8_lossy(&m.body),
            })
        })
        .collect();
    serde_json::Value::from(list).to_string()
}
