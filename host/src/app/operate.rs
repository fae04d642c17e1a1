//! The command line of what a person does on purpose: `backfill`, `rerun`,
//! `forget`, `pause`, `resume` and `prune` (clap types and printing; the
//! logic is in `run::operate` and the store). Each prints one JSON line per
//! window it acts on on stdout and a summary for a person on stderr.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use jiff::Timestamp;

use crate::app::args::{env, store_location};
use crate::app::config::{JobConfig, RunFlags};
use crate::core::clock::rfc3339;
use crate::core::error::{Error, Result};
use crate::core::text::{json_line, printable, say};
use crate::core::window::JobName;
use crate::run::operate::{self, Act, Only, Planned};
use crate::run::receipt::{Event, ReceiptLevel};
use crate::run::{Outcome, Runtime};
use crate::store::{self, Actor};

/// What the commands that run a job's windows take besides their own flags.
#[derive(Debug, clap::Args)]
pub struct JobFlags {
    /// The job's TOML config.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The claim store [default: $JOBHOST_STORE, else the config's `store`, else state/jobhost.db beside the config].
    #[arg(long, value_name = "PATH|URL", env = "JOBHOST_STORE")]
    store: Option<PathBuf>,
    /// Refuse a SQLite store on a filesystem that dies with its machine or
    /// container (tmpfs, ramfs, overlayfs) instead of warning [also:
    /// $JOBHOST_REQUIRE_DURABLE_STORE=1].
    #[arg(long)]
    require_durable_store: bool,
    /// The report component, instead of the config's `component`.
    #[arg(long, value_name = "PATH")]
    component: Option<PathBuf>,
    /// As if it were this instant (every run reads it) [default: the system clock].
    #[arg(long, value_name = "TIME")]
    now: Option<String>,
    /// Compiled-code cache folder [default: $XDG_CACHE_HOME/jobhost or ~/.cache/jobhost].
    #[arg(long, value_name = "DIR", env = "JOBHOST_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// How much each receipt tells: full, or brief (without the report's
    /// summary, what each send came to and the digest's text) [default:
    /// $JOBHOST_RECEIPT, else full].
    #[arg(long, value_name = "full|brief")]
    receipt: Option<String>,
}

impl JobFlags {
    /// `--receipt`, else `$JOBHOST_RECEIPT`, else full.
    fn level(&self) -> Result<ReceiptLevel> {
        crate::app::args::receipt_level(self.receipt.as_deref())
    }

    fn load(&self) -> Result<JobConfig> {
        JobConfig::load(&RunFlags {
            config: Some(self.config.clone()),
            store: self.store.clone(),
            component: self.component.clone(),
            now: self.now.clone(),
            cache_dir: self.cache_dir.clone(),
            require_durable_store: crate::app::args::require_durable_store(
                self.require_durable_store,
            )?,
            ..RunFlags::default()
        })
    }
}

/// `jobhost backfill`.
#[derive(Debug, clap::Args)]
pub struct BackfillArgs {
    #[command(flatten)]
    job: JobFlags,
    /// The first window: its label (2026-11-03) or an RFC 3339 instant.
    #[arg(long, value_name = "LABEL|INSTANT")]
    from: String,
    /// Where the range ends, exclusive: a label (its window is not run) or an instant.
    #[arg(long, value_name = "LABEL|INSTANT")]
    to: String,
    /// Which windows besides those with no row: `missing` (also SKIPPED
    /// and unfinished ones), `failed` (also FAILED and ABANDONED, as a new
    /// series of attempts), `all` (also DONE, each rerun as a new revision).
    #[arg(long, value_name = "WHICH", default_value = "missing")]
    only: String,
    /// Print what would run, one JSON line per window, and run nothing.
    #[arg(long)]
    dry_run: bool,
    /// Why (kept in the audit lines; needed with `--only all`).
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
}

/// `jobhost rerun`.
#[derive(Debug, clap::Args)]
pub struct RerunArgs {
    /// The DONE window's key, as `history` shows it (or its label).
    #[arg(value_name = "KEY")]
    key: String,
    #[command(flatten)]
    job: JobFlags,
    /// Why it is run again: stored with the new revision and shown by `history`.
    #[arg(long, value_name = "TEXT")]
    reason: String,
}

/// `jobhost retry`.
#[derive(Debug, clap::Args)]
pub struct RetryArgs {
    /// The window's key, as `history` shows it (or its label).
    #[arg(value_name = "KEY")]
    key: String,
    #[command(flatten)]
    job: JobFlags,
    /// Why (kept in the audit line) [default: `jobhost retry`].
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
}

/// Where a command that changes only the store finds it.
#[derive(Debug, clap::Args)]
pub struct StoreFlags {
    /// The claim store: a SQLite file or a postgres:// URL [default: $JOBHOST_STORE, else the store of --config, else ~/.local/state/jobhost/jobhost.db].
    #[arg(long, value_name = "PATH|URL", env = "JOBHOST_STORE")]
    store: Option<PathBuf>,
    /// A job config whose store it is.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

impl StoreFlags {
    /// Makes the commands this process prints name the same store.
    fn name_in_printed_commands(&self) {
        crate::core::command::set_process_target(crate::app::config::command_target(
            self.store.as_deref(),
            self.config.as_deref(),
        ));
    }
}

/// `jobhost forget`.
#[derive(Debug, clap::Args)]
pub struct ForgetArgs {
    /// The window's key, as `history` shows it.
    #[arg(value_name = "KEY")]
    key: String,
    /// Why (kept in the audit line `history --all` shows).
    #[arg(long, value_name = "TEXT")]
    reason: String,
    /// Also forget a PREPARED window whose claim ran out: its undelivered
    /// messages are then never delivered.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    store: StoreFlags,
}

/// `jobhost pause`.
#[derive(Debug, clap::Args)]
pub struct PauseArgs {
    /// The job's name.
    #[arg(value_name = "JOB")]
    job: String,
    /// Why, shown by `status` and in every skipped receipt.
    #[arg(long, value_name = "TEXT")]
    note: String,
    #[command(flatten)]
    store: StoreFlags,
}

/// `jobhost resume`.
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// The job's name.
    #[arg(value_name = "JOB")]
    job: String,
    /// Why (kept in the audit line).
    #[arg(long, value_name = "TEXT", default_value = "")]
    note: String,
    #[command(flatten)]
    store: StoreFlags,
}

/// `jobhost prune`.
#[derive(Debug, clap::Args)]
pub struct PruneArgs {
    /// Prune DONE runs whose window ended longer ago than this (`90d`, `12h`, `2w`).
    #[arg(long, value_name = "DURATION")]
    older_than: String,
    /// Measure the age from this instant [default: the system clock].
    #[arg(long, value_name = "TIME")]
    now: Option<String>,
    /// Keep the journals (replay stays possible); drop only delivered message bodies.
    #[arg(long)]
    keep_journals: bool,
    /// Only this job's runs [default: the job of --config, else every job].
    #[arg(long, value_name = "NAME")]
    job: Option<String>,
    #[command(flatten)]
    store: StoreFlags,
}

/// Says `e` on stderr and returns its exit code.
fn refused(e: &Error) -> i32 {
    say("error", &e.to_string());
    e.exit_code()
}

/// Prints a run's receipt as `run` does: its line on stdout, an error or
/// skip on stderr.
fn print_receipt(outcome: &Outcome, level: ReceiptLevel) {
    if let Some(err) = &outcome.receipt.error {
        say("error", &err.message);
    } else if let (Event::Skipped, Some(detail)) = (outcome.receipt.event, &outcome.receipt.detail)
    {
        say("skipped", detail);
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", outcome.receipt.line(level));
}

/// `jobhost rerun KEY`: exit codes as for `run`.
pub fn rerun(args: RerunArgs, runtime: &Runtime) -> i32 {
    let mut level = ReceiptLevel::Full;
    let result = (|| {
        level = args.job.level()?;
        let config = args.job.load()?;
        let job = config.job(&env)?;
        crate::run::refuse_ephemeral_store(&job)?;
        let runtime = runtime.at(config.now()?.or(runtime.now));
        let reason = needed_reason("--reason", &args.reason)?;
        operate::rerun(&job, &args.key, &reason, &runtime)
    })();
    match result {
        Ok(outcome) => {
            print_receipt(&outcome, level);
            outcome.exit_code
        }
        Err(e) => {
            let outcome = Outcome::refused(&e);
            print_receipt(&outcome, level);
            outcome.exit_code
        }
    }
}

/// `jobhost retry KEY`: exit codes as for `run`.
pub fn retry(args: RetryArgs, runtime: &Runtime) -> i32 {
    let mut level = ReceiptLevel::Full;
    let result = (|| {
        level = args.job.level()?;
        let config = args.job.load()?;
        let job = config.job(&env)?;
        crate::run::refuse_ephemeral_store(&job)?;
        let runtime = runtime.at(config.now()?.or(runtime.now));
        let reason = match &args.reason {
            Some(r) => needed_reason("--reason", r)?,
            None => "jobhost retry".to_string(),
        };
        operate::retry(&job, &args.key, &reason, &runtime)
    })();
    let outcome = result.unwrap_or_else(|e| Outcome::refused(&e));
    print_receipt(&outcome, level);
    outcome.exit_code
}

/// A reason a person must give: not empty.
fn needed_reason(what: &str, text: &str) -> Result<String> {
    let text = reason_text(what, text)?;
    if text.is_empty() {
        return Err(Error::input(format!(
            "{what} is empty: say why, for whoever reads the history later"
        )));
    }
    Ok(text)
}

/// A reason or note a person typed: one line, bounded.
fn reason_text(what: &str, text: &str) -> Result<String> {
    let text = text.trim();
    if text.chars().count() > 500 {
        return Err(Error::input(format!(
            "{what} is longer than 500 characters; say it in fewer"
        )));
    }
    Ok(printable(text).into_owned())
}

/// `jobhost backfill`: 0 when every run it made succeeded, 1 when one
/// failed, 2 for bad input, 130 when a signal stopped it first.
pub fn backfill(args: BackfillArgs, runtime: &Runtime) -> i32 {
    match backfill_inner(args, runtime) {
        Ok(code) => code,
        Err(e) => refused(&e),
    }
}

fn backfill_inner(args: BackfillArgs, runtime: &Runtime) -> Result<i32> {
    let only = Only::parse(&args.only)?;
    let level = args.job.level()?;
    let config = args.job.load()?;
    let job = config.job(&env)?;
    crate::run::refuse_ephemeral_store(&job)?;
    let now = config.now()?.or(runtime.now).unwrap_or_else(Timestamp::now);
    let from = job.schedule.bound("--from", &args.from, now)?;
    let to = job.schedule.bound("--to", &args.to, now)?;
    if from >= to {
        return Err(Error::input(format!(
            "--from {} is not before --to {}: the range [from, to) holds no window; \
             give a --to after --from",
            printable(&args.from),
            printable(&args.to)
        )));
    }
    let reason = match (&args.reason, only) {
        (Some(r), Only::All) => needed_reason("--reason", r)?,
        (Some(r), _) => reason_text("--reason", r)?,
        (None, Only::All) => {
            return Err(Error::input(
                "--only all reruns DONE windows as new revisions: say why with --reason TEXT"
                    .to_string(),
            ));
        }
        (None, _) => format!("backfill --only {}", args.only),
    };
    let plan = {
        let mut store = store::open(&job.store)?;
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
        operate::backfill_plan(&job, store.as_mut(), (from, to), only, now)?
    };
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
    if args.dry_run {
        let mut out = std::io::stdout().lock();
        for p in &plan {
            let _ = writeln!(out, "{}", json_line(&plan_line(p, now).to_string()));
        }
        say("plan", &summary);
        return Ok(0);
    }
    say("backfill", &summary);
    let stop = crate::run::daemon::stop_on_signals()?;
    let runtime = Runtime {
        now: Some(now),
        stop: Some(stop),
        ..runtime.clone()
    };
    let progress = Progress::new(todo as u64);
    let mut n = 0;
    let ended = operate::backfill(
        &job,
        &plan,
        &reason,
        &runtime,
        Some(stop),
        &mut |_, p, outcome| {
            n += 1;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", outcome.receipt.line(level));
            drop(out);
            progress.step(n, todo, p, outcome);
        },
    );
    progress.finish();
    let end = ended_summary(&ended);
    if ended.stopped {
        say(
            "stopped",
            &format!(
                "asked to stop after {} of {todo} window(s) ({end}); the same backfill again \
                 goes on from there",
                ended.attempted
            ),
        );
        return Ok(130);
    }
    say("backfill", &format!("done: {end}"));
    Ok(ended.exit_code)
}

/// What a backfill did, counted by outcome: `3 ran, 1 skipped (busy), 0
/// failed, 2 left as they were`.
fn ended_summary(ended: &operate::Backfilled) -> String {
    let mut text = format!("{} ran", ended.ran);
    let skipped = ended.skipped_total();
    if skipped > 0 {
        let reasons: Vec<String> = ended
            .skipped
            .iter()
            .map(|(reason, n)| {
                if *n == skipped {
                    reason.as_str().to_string()
                } else {
                    format!("{n} {}", reason.as_str())
                }
            })
            .collect();
        text.push_str(&format!(", {skipped} skipped ({})", reasons.join(", ")));
    } else {
        text.push_str(", 0 skipped");
    }
    text.push_str(&format!(
        ", {} failed, {} left as they were",
        ended.failed, ended.left
    ));
    if ended.not_closed > 0 {
        text.push_str(&format!(", {} not closed yet", ended.not_closed));
    }
    text
}

fn plan_line(p: &Planned, now: Timestamp) -> serde_json::Value {
    serde_json::json!({
        "event": "plan",
        "job": p.window.job.as_str(),
        "key": p.window.key().as_str(),
        "window": {"start": rfc3339(p.window.start), "end": rfc3339(p.window.end)},
        "state": p.state.map(|s| s.as_str()),
        "revision": p.revision,
        "action": p.act.as_str(),
        "now": rfc3339(now),
    })
}

/// A backfill's progress on stderr: a bar with the ETA on a terminal,
/// one plain line per window otherwise (a log, CI).
struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new(total: u64) -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = indicatif::ProgressBar::new(total);
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{bar:30} {pos}/{len} windows, {elapsed} so far, about {eta} left  {msg}",
        ) {
            bar.set_style(style);
        }
        Progress { bar: Some(bar) }
    }

    fn step(&self, n: usize, total: usize, p: &Planned, outcome: &Outcome) {
        let what = match outcome.receipt.reason {
            Some(reason) => format!("{} ({})", outcome.receipt.event.as_str(), reason.as_str()),
            None => outcome.receipt.event.as_str().to_string(),
        };
        let key = p.window.key();
        match &self.bar {
            Some(bar) => {
                bar.set_message(printable(&format!("{key} {what}")).into_owned());
                bar.inc(1);
            }
            None => say(
                "backfill",
                &format!(
                    "{n}/{total} {key} {}: {what} (exit {})",
                    p.act.as_str(),
                    outcome.exit_code
                ),
            ),
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// `jobhost forget KEY`: 0 forgotten, 2 refused.
pub fn forget(args: ForgetArgs) -> i32 {
    args.store.name_in_printed_commands();
    let config_given = args.store.config.is_some();
    let result = (|| {
        let reason = needed_reason("--reason", &args.reason)?;
        let key = operate::typed_key(&args.key)?;
        let location = store_location(args.store.store, args.store.config.as_deref())?;
        let mut store = store::open(&location)?;
        let by = operate::actor_id();
        let actor = Actor {
            by: &by,
            reason: &reason,
        };
        let now = Timestamp::now();
        let f = store.forget(&key, args.force, actor, now)?;
        Ok((key, f, by, reason))
    })();
    match result {
        Ok((key, f, by, reason)) => {
            let line = serde_json::json!({
                "event": "forgotten",
                "key": key.as_str(),
                "old_state": f.old_state.as_str(),
                "undelivered": f.undelivered,
                "archived_revision": f.archived,
                "decided_until": f.decided_until.map(rfc3339),
                "reason": reason,
                "by": by,
            });
            println!("{}", json_line(&line.to_string()));
            let label = key
                .as_str()
                .split_once(':')
                .map_or(key.as_str(), |(_, l)| l);
            let run = crate::core::command::process_target().command(&format!(
                "run --for {}{}",
                crate::core::command::shell_quote(label),
                if config_given { "" } else { " --config FILE" }
            ));
            let mut said = format!(
                "forgot {key} ({}); the daemon decides it again by the job's catch_up policy, \
                 and `{run}` runs it as if new",
                f.old_state
            );
            if f.undelivered > 0 {
                said.push_str(&format!(
                    "; {} message(s) of its committed report will never be delivered",
                    f.undelivered
                ));
            }
            if f.archived {
                said.push_str("; its report is kept as an earlier revision, and its next run sends with new idempotency keys");
            }
            say("forget", &printable(&said));
            0
        }
        Err(e) => refused(&e),
    }
}

/// The job name a person typed, checked against `--config`'s job.
fn named_job(text: &str, config: Option<&std::path::Path>) -> Result<JobName> {
    let name = JobName::new(text)?;
    if let Some(file) = config {
        let of_config = JobConfig::load(&RunFlags {
            config: Some(file.to_path_buf()),
            ..RunFlags::default()
        })?
        .name()?;
        if of_config != name {
            return Err(Error::input(format!(
                "job `{name}` is not the job of `{}` (`{of_config}`); name that job, or drop \
                 --config and give --store",
                file.display()
            )));
        }
    }
    Ok(name)
}

/// `jobhost pause JOB` and `jobhost resume JOB`: 0, or 2 for bad input.
pub fn pause(args: PauseArgs) -> i32 {
    pause_or_resume(&args.job, &args.note, &args.store, true)
}

/// See [`pause`].
pub fn resume(args: ResumeArgs) -> i32 {
    pause_or_resume(&args.job, &args.note, &args.store, false)
}

fn pause_or_resume(job: &str, note: &str, flags: &StoreFlags, pausing: bool) -> i32 {
    flags.name_in_printed_commands();
    let result = (|| {
        let name = named_job(job, flags.config.as_deref())?;
        let note = reason_text("--note", note)?;
        if pausing && note.is_empty() {
            return Err(Error::input(
                "--note is empty: say why the job is paused, for whoever finds it so".to_string(),
            ));
        }
        let location = store_location(flags.store.clone(), flags.config.as_deref())?;
        let mut store = store::open(&location)?;
        // A typo pauses nothing that exists: without --config (which names
        // the job), the store must know the job.
        if flags.config.is_none()
            && store.history_from(name.as_str(), None)?.is_empty()
            && store.paused(name.as_str())?.is_none()
        {
            return Err(Error::input(format!(
                "store `{location}` holds no run of job `{name}`; check the name (`jobhost \
                 history` lists the jobs), or give --config FILE of the job to {} it before its \
                 first run",
                if pausing { "pause" } else { "resume" }
            )));
        }
        let by = operate::actor_id();
        let actor = Actor {
            by: &by,
            reason: &note,
        };
        let now = Timestamp::now();
        let before = if pausing {
            store.pause(name.as_str(), actor, now)?
        } else {
            store.resume(name.as_str(), actor, now)?
        };
        Ok((name, note, by, before))
    })();
    let (name, note, by, before) = match result {
        Ok(r) => r,
        Err(e) => return refused(&e),
    };
    let line = serde_json::json!({
        "event": if pausing { "paused" } else { "resumed" },
        "job": name.as_str(),
        "note": (!note.is_empty()).then_some(&note),
        "by": by,
        "was_paused": before.is_some(),
    });
    println!("{}", json_line(&line.to_string()));
    let said = match (pausing, &before) {
        (true, None) => format!(
            "paused {name}: nothing of it is claimed, on any host sharing the store, until `{}`",
            crate::core::command::process_target().command(&format!("resume {name}"))
        ),
        (true, Some(p)) => format!(
            "{name} was already paused (since {} by {}); its note is now: {note}",
            rfc3339(p.since),
            p.by
        ),
        (false, Some(p)) => format!(
            "resumed {name} (paused since {} by {}: {}); the windows that fell due meanwhile \
             are decided by its catch_up policy",
            rfc3339(p.since),
            p.by,
            p.note
        ),
        (false, None) => format!("{name} was not paused; nothing changed"),
    };
    say(if pausing { "pause" } else { "resume" }, &printable(&said));
    0
}

/// `jobhost prune`: 0, or 2 for bad input.
pub fn prune(args: PruneArgs) -> i32 {
    args.store.name_in_printed_commands();
    let result = (|| {
        let older_than = parse_age(&args.older_than)?;
        let now = match &args.now {
            Some(t) => crate::core::clock::parse_instant("--now", t)?,
            None => Timestamp::now(),
        };
        let job = match (&args.job, &args.store.config) {
            (Some(j), config) => Some(named_job(j, config.as_deref())?),
            (None, Some(file)) => Some(
                JobConfig::load(&RunFlags {
                    config: Some(file.clone()),
                    ..RunFlags::default()
                })?
                .name()?,
            ),
            (None, None) => None,
        };
        let before = operate::prune_before(now, older_than)?;
        let location = store_location(args.store.store.clone(), args.store.config.as_deref())?;
        let mut store = store::open(&location)?;
        let by = operate::actor_id();
        let reason = format!("prune --older-than {}", printable(&args.older_than));
        let actor = Actor {
            by: &by,
            reason: &reason,
        };
        let pruned = store.prune(
            job.as_ref().map(JobName::as_str),
            before,
            args.keep_journals,
            actor,
            now,
        )?;
        Ok((job, before, pruned))
    })();
    match result {
        Ok((job, before, p)) => {
            let line = serde_json::json!({
                "event": "pruned",
                "job": job.as_ref().map(JobName::as_str),
                "before": rfc3339(before),
                "runs": p.runs,
                "journal_bytes": p.journal_bytes,
                "body_bytes": p.body_bytes,
            });
            println!("{}", json_line(&line.to_string()));
            say(
                "prune",
                &format!(
                    "pruned {} DONE run(s) and revision(s) whose window ended before {}: freed \
                     {} journal byte(s) and {} delivered message byte(s); their rows, receipts \
                     and digests stay",
                    p.runs,
                    rfc3339(before),
                    p.journal_bytes,
                    p.body_bytes
                ),
            );
            0
        }
        Err(e) => refused(&e),
    }
}

/// An age such as `90d`, `12h`, `2w` or `1d12h`: days are 24 hours.
///
/// # Errors
///
/// `Error::Input` naming the text and the form.
pub fn parse_age(text: &str) -> Result<std::time::Duration> {
    let bad = || {
        Error::input(format!(
            "invalid duration `{}`: give a number and a unit, such as `90d`, `12h` or `2w`",
            printable(text)
        ))
    };
    let span: jiff::Span = text.trim().parse().map_err(|_| bad())?;
    let d = span
        .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .map_err(|_| bad())?;
    std::time::Duration::try_from(d).map_err(|_| bad())
}
