//! `jobhost prune`: drops the journals and delivered message bodies of
//! old DONE runs, keeping their rows.

use jiff::Timestamp;

use super::flags::{StoreFlags, named_job};
use crate::app::config::{JobConfig, RunFlags};
use crate::core::clock::rfc3339;
use crate::core::command::Target;
use crate::core::error::{Error, Result};
use crate::core::text::{printable, say};
use crate::core::window::JobName;
use crate::run::operate;
use crate::run::outputs::EventLine;
use crate::store::{self, Actor};

/// `jobhost prune`.
#[derive(Debug, clap::Args)]
pub(super) struct PruneArgs {
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

impl PruneArgs {
    /// How the commands this prints name the store.
    pub(super) fn target(&self) -> Target {
        self.store.target()
    }
}

/// `jobhost prune`: 0, or 2 for bad input.
pub(super) fn main(args: PruneArgs) -> Result<i32, Error> {
    let (job, now, before, p) = {
        let older_than = parse_age(&args.older_than)?;
        let now = match &args.now {
            Some(t) => crate::core::clock::parse_instant("--now", t)?,
            None => Timestamp::now(),
        };
        let job = match (&args.job, args.store.config()) {
            (Some(j), config) => Some(named_job(j, config)?),
            (None, Some(file)) => Some(
                JobConfig::load(&RunFlags {
                    config: Some(file.to_path_buf()),
                    ..RunFlags::default()
                })?
                .name()?,
            ),
            (None, None) => None,
        };
        let before = operate::prune_before(now, older_than)?;
        let mut store = store::open(&args.store.location()?)?;
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
        (job, now, before, pruned)
    };
    {
        {
            let line = EventLine::pruned(job.as_ref().map(JobName::as_str), now, before, &p);
            super::print_json(&line)?;
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
            Ok(0)
        }
    }
}

/// An age such as `90d`, `12h`, `2w` or `1d12h`: days are 24 hours.
///
/// # Errors
///
/// `Error::Input` naming the text and the form.
fn parse_age(text: &str) -> Result<std::time::Duration> {
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
