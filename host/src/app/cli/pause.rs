//! `jobhost pause JOB` and `jobhost resume JOB`: stop claiming a job's
//! windows on every host sharing the store, and let it run again.

use jiff::Timestamp;

use super::flags::{StoreFlags, named_job, reason_text};
use crate::core::clock::rfc3339;
use crate::core::command::Target;
use crate::core::error::Error;
use crate::core::text::{printable, say};
use crate::run::operate;
use crate::run::outputs::EventLine;
use crate::store::{self, Actor};

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
    let (name, note, by, before) = {
        let name = named_job(job, flags.config())?;
        let note = reason_text("--note", note)?;
        if pausing && note.is_empty() {
            return Err(Error::input(
                "--note is empty: say why the job is paused, for whoever finds it so".to_string(),
            ));
        }
        let location = flags.location()?;
        let mut store = store::open(&location)?;
        // A typo pauses nothing that exists: without --config (which names
        // the job), the store must know the job.
        if flags.config().is_none()
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
        (name, note, by, before)
    };
    let line = EventLine::paused(pausing, name.as_str(), &note, &by, before.as_ref());
    super::print_json(&line)?;
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
    Ok(0)
}
