//! `jobhost backfill`: every window of a range in order, as the daemon
//! would (or up to `--parallel` at once), with one receipt per window it
//! runs on stdout and its progress and a summary by outcome on stderr.

use std::io::IsTerminal;

use jiff::Timestamp;

use super::Out;
use super::flags::JobFlags;
use crate::app::args::env;
use crate::core::error::{Error, Result};
use crate::core::text::{printable, say};
use crate::run::operate::{self, Only, Planned};
use crate::run::outputs::EventLine;
use crate::run::{Outcome, Runtime};
use crate::store;

/// `jobhost backfill`.
#[derive(Debug, clap::Args)]
pub(super) struct BackfillArgs {
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
    /// series of attempts), `all` (also DONE, each rerun as a new revision),
    /// or `stale` (only DONE windows marked STALE, each rerun as a new
    /// revision).
    #[arg(long, value_name = "WHICH", default_value = "missing")]
    only: String,
    /// Print what would run, one JSON line per window, and run nothing.
    #[arg(long)]
    dry_run: bool,
    /// Why (kept in the audit lines; needed with `--only all` and `stale`).
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    /// Run up to N windows at once (1 to 1024). A job that keeps a cursor
    /// still runs its windows one after another, in order: its first window
    /// runs alone and tells.
    #[arg(long, value_name = "N", default_value = "1")]
    parallel: String,
}

/// `jobhost backfill`: 0 when every run it made succeeded, 1 when one
/// failed, 2 for bad input, 130 when a signal stopped it first.
pub(super) fn main(args: BackfillArgs, runtime: &Runtime) -> Result<i32> {
    let only = Only::parse(&args.only)?;
    let parallel = super::daemon::concurrency("--parallel", Some(&args.parallel))?;
    let level = args.job.level()?;
    let config = args.job.load()?;
    let job = config.job(&env)?;
    crate::run::refuse_ephemeral_store(&job)?;
    let now = config.now()?.or(runtime.now).unwrap_or_else(Timestamp::now);
    let operate::Prepared {
        plan,
        reason,
        summary,
        todo,
    } = {
        let mut store = store::open(&job.store)?;
        operate::prepare_backfill(
            &job,
            store.as_mut(),
            (&args.from, &args.to),
            only,
            args.reason.as_deref(),
            now,
        )?
    };
    let mut out = Out::stdout();
    if args.dry_run {
        for p in &plan {
            if out.closed() {
                break;
            }
            super::write_json(&mut out, &EventLine::planned(p, now))?;
        }
        say("plan", &summary);
        return Ok(0);
    }
    say("backfill", &summary);
    let stop = crate::run::daemon::stop_on_signals()?;
    // Its windows run on one engine and linker.
    let runtime = Runtime {
        now: Some(now),
        stop: Some(stop),
        ..runtime.clone()
    }
    .sharing_sandbox()?;
    let progress = Progress::new(todo as u64);
    let mut n = 0;
    // A receipt that cannot be written does not stop the runs (their
    // effects are what matters); the first such error ends the command.
    let mut unwritten: Option<Error> = None;
    let ended = operate::backfill(
        &job,
        &plan,
        &reason,
        &runtime,
        Some(stop),
        parallel,
        &operate::actor_id(),
        &mut |_, p, outcome| {
            n += 1;
            if let Err(e) = out.line(&outcome.receipt.line(level)) {
                unwritten.get_or_insert(e);
            }
            progress.step(n, todo, p, outcome);
        },
    );
    progress.finish();
    if let Some(e) = unwritten {
        return Err(e);
    }
    match &ended.in_order {
        Some(crate::run::operate::InOrder::Cursor) => say(
            "note",
            &format!(
                "job `{}` keeps a cursor (each run is given the one its last window returned), so \
                 its windows ran one after another in window order, not {} at once",
                job.name(),
                parallel
            ),
        ),
        Some(crate::run::operate::InOrder::Unread(why)) => say(
            "note",
            &format!(
                "could not read whether job `{}` keeps a cursor ({}), so its windows ran one \
                 after another in window order, not {} at once",
                job.name(),
                crate::core::text::printable(why),
                parallel
            ),
        ),
        None => {}
    }
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
