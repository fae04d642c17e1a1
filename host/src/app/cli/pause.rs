//! `jobhost pause JOB` and `jobhost resume JOB`: stop claiming a job's
//! windows on every host sharing the store, and let it run again.

use jiff::Timestamp;

use super::flags::{StoreFlags, named_job, reason_text};
use crate::core::command::Target;
use crate::core::error::Error;
use crate::core::text::say;
use crate::run::operate;
use crate::store;

/// `jobhost pause`.
#[derive(Debug, clap::Args)]
pub(super) struct PauseArgs {
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
pub(super) struct ResumeArgs {
    /// The job's name.
    #[arg(value_name = "JOB")]
    job: String,
    /// Why (kept in the audit line).
    #[arg(long, value_name = "TEXT", default_value = "")]
    note: String,
    #[command(flatten)]
    store: StoreFlags,
}

impl PauseArgs {
    /// How the commands this prints name the store.
    pub(super) fn target(&self) -> Target {
        self.store.target()
    }
}

impl ResumeArgs {
    /// How the commands this prints name the store.
    pub(super) fn target(&self) -> Target {
        self.store.target()
    }
}

/// `jobhost pause JOB` and `jobhost resume JOB`: 0, or 2 for bad input.
pub(super) fn pause(args: PauseArgs) -> Result<i32, Error> {
    pause_or_resume(&args.job, &args.note, &args.store, true)
}

/// See [`pause`].
pub(super) fn resume(args: ResumeArgs) -> Result<i32, Error> {
    pause_or_resume(&args.job, &args.note, &args.store, false)
}

fn pause_or_resume(job: &str, note: &str, flags: &StoreFlags, pausing: bool) -> Result<i32, Error> {
    let name = named_job(job, flags.config())?;
    let note = reason_text("--note", note)?;
    if pausing && note.is_empty() {
        return Err(Error::input(
            "--note is empty: say why the job is paused, for whoever finds it so".to_string(),
        ));
    }
    let location = flags.location()?;
    let changed = {
        let mut store = store::open(&location)?;
        crate::run::verbs::pause_or_resume(
            store.as_mut(),
            &name,
            &note,
            &operate::actor_id(),
            pausing,
            flags.config().is_some(),
            &crate::core::command::process_target(),
            Timestamp::now(),
        )
        .map_err(|e| match e {
            Error::Input(m) => Error::input(format!("store `{location}`: {m}")),
            other => other,
        })?
    };
    super::print_json(&changed.line)?;
    say(if pausing { "pause" } else { "resume" }, &changed.said);
    Ok(0)
}
