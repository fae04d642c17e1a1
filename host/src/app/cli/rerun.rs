//! `jobhost rerun KEY` (a DONE window again, as its next revision) and
//! `jobhost retry KEY` (a failed window, or a delivery waiting out its
//! backoff, again now): one receipt each, as `run` prints it.

use super::flags::{JobFlags, needed_reason, print_receipt};
use crate::app::args::env;
use crate::core::error::Error;
use crate::run::job::Job;
use crate::run::operate;
use crate::run::receipt::ReceiptLevel;
use crate::run::{Outcome, Runtime};

/// `jobhost rerun`.
#[derive(Debug, clap::Args)]
pub(super) struct RerunArgs {
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
pub(super) struct RetryArgs {
    /// The window's key, as `history` shows it (or its label).
    #[arg(value_name = "KEY")]
    key: String,
    #[command(flatten)]
    job: JobFlags,
    /// Why (kept in the audit line) [default: `jobhost retry`].
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
}

/// `jobhost rerun KEY`: exit codes as for `run`.
pub(super) fn rerun(args: RerunArgs, runtime: &Runtime) -> Result<i32, Error> {
    one_receipt(&args.job, runtime, |job, runtime| {
        let reason = needed_reason("--reason", &args.reason)?;
        operate::rerun(job, &args.key, &reason, runtime)
    })
}

/// `jobhost retry KEY`: exit codes as for `run`.
pub(super) fn retry(args: RetryArgs, runtime: &Runtime) -> Result<i32, Error> {
    one_receipt(&args.job, runtime, |job, runtime| {
        let reason = match &args.reason {
            Some(r) => needed_reason("--reason", r)?,
            None => "jobhost retry".to_string(),
        };
        operate::retry(job, &args.key, &reason, runtime)
    })
}

/// Loads the job `flags` name, refuses an ephemeral store, runs `act` on
/// the job at the config's `now`, and prints its receipt (a refusal's, for
/// an error before it ran) at the level the flags ask for.
fn one_receipt(
    flags: &JobFlags,
    runtime: &Runtime,
    act: impl FnOnce(&Job, &Runtime) -> Result<Outcome, Error>,
) -> Result<i32, Error> {
    let mut level = ReceiptLevel::Full;
    let result = (|| {
        level = flags.level()?;
        let config = flags.load()?;
        let job = config.job(&env)?;
        crate::run::refuse_ephemeral_store(&job)?;
        act(&job, &runtime.at(config.now()?.or(runtime.now)))
    })();
    let outcome = result.unwrap_or_else(|e| Outcome::refused(&e));
    print_receipt(&outcome, level)
}
