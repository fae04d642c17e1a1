//! `jobhost rerun KEY` (a DONE window again, as its next revision) and
//! `jobhost retry KEY` (a failed window, or a delivery waiting out its
//! backoff, again now): one receipt each, as `run` prints it.

use super::flags::{JobFlags, needed_reason, print_receipt};
use crate::app::args::env;
use crate::core::error::Error;
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
    let outcome = result.unwrap_or_else(|e| Outcome::refused(&e));
    print_receipt(&outcome, level)
}

/// `jobhost retry KEY`: exit codes as for `run`.
pub(super) fn retry(args: RetryArgs, runtime: &Runtime) -> Result<i32, Error> {
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
    print_receipt(&outcome, level)
}
