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
    #[arg(value_name = "KEY", required_unless_present_any = ["stale", "plan"])]
    key: Option<String>,
    /// Instead of one KEY: every DONE window of the job marked STALE (an
    /// upstream window it used got a new revision), oldest first, each as
    /// its next revision.
    #[arg(long, conflicts_with_all = ["key", "plan"])]
    stale: bool,
    /// Instead of one KEY: exactly the windows of a plan `jobhost replay
    /// --plan` wrote, each as its next revision, once the job runs the
    /// component the plan was made with.
    #[arg(long, value_name = "FILE", conflicts_with = "key")]
    plan: Option<std::path::PathBuf>,
    /// With --stale: then the stale windows of the jobs of this folder
    /// that need the job, directly or through others, in dependency order
    /// (a rerun can make the windows that used it stale in turn).
    #[arg(long, value_name = "DIR", requires = "stale")]
    jobs: Option<std::path::PathBuf>,
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

/// `jobhost rerun KEY`: exit codes as for `run`. `jobhost rerun --stale`:
/// one receipt per window, the worst exit code.
pub(super) fn rerun(args: RerunArgs, runtime: &Runtime) -> Result<i32, Error> {
    if let Some(plan) = &args.plan {
        return rerun_plan(&args, plan, runtime);
    }
    let Some(key) = &args.key else {
        return rerun_stale(&args, runtime);
    };
    one_receipt(&args.job, runtime, |job, runtime| {
        let reason = needed_reason("--reason", &args.reason)?;
        operate::rerun(job, key, &reason, &operate::actor_id(), runtime)
    })
}

/// `jobhost rerun --plan FILE`: one receipt per window, the worst exit
/// code.
fn rerun_plan(args: &RerunArgs, file: &std::path::Path, runtime: &Runtime) -> Result<i32, Error> {
    let (job, runtime, reason, mut receipts) = several(args, runtime)?;
    let plan = crate::run::replay::RerunPlan::read(file)?;
    operate::rerun_plan(&job, &plan, &reason, &runtime, &mut |o| receipts.print(o))?;
    receipts.worst()
}

/// What a rerun of several windows (`--plan`, `--stale`) starts from: the
/// job of `--config` (its store refused if it dies with its machine), the
/// runtime at the config's `now`, the reason, and where the receipts go.
fn several(args: &RerunArgs, runtime: &Runtime) -> Result<(Job, Runtime, String, Receipts), Error> {
    let receipts = Receipts::new(args.job.level()?);
    let reason = needed_reason("--reason", &args.reason)?;
    let config = args.job.load()?;
    let job = config.job(&env)?;
    crate::run::refuse_ephemeral_store(&job)?;
    let runtime = runtime.at(config.now()?.or(runtime.now));
    Ok((job, runtime, reason, receipts))
}

/// The receipts of a command that runs several windows, printed as each
/// run ends (until stdout fails), and the worst exit code among them.
struct Receipts {
    level: ReceiptLevel,
    printed: Result<i32, Error>,
    worst: i32,
}

impl Receipts {
    fn new(level: ReceiptLevel) -> Receipts {
        Receipts {
            level,
            printed: Ok(0),
            worst: 0,
        }
    }

    fn print(&mut self, outcome: &Outcome) {
        if self.printed.is_ok() {
            self.printed = print_receipt(outcome, self.level);
            if let Ok(code) = &self.printed {
                self.worst = self.worst.max(*code);
            }
        }
    }

    /// The worst exit code, or the error that stopped the printing.
    fn worst(self) -> Result<i32, Error> {
        self.printed.map(|_| self.worst)
    }
}

/// `jobhost rerun --stale [--jobs DIR]`.
fn rerun_stale(args: &RerunArgs, runtime: &Runtime) -> Result<i32, Error> {
    let (first, runtime, reason, mut receipts) = several(args, runtime)?;
    let mut jobs = vec![first];
    if let Some(dir) = &args.jobs {
        let mut all = Vec::new();
        for file in super::flags::configs(&[], Some(dir))? {
            let job = args.job.load_file(&file).and_then(|c| c.job(&env));
            all.push(job.map_err(|e| {
                Error::input(format!(
                    "job file `{}` of --jobs: {e:#}; fix it, or leave --jobs out to rerun only \
                     this job's stale windows",
                    crate::core::text::printable(&file.display().to_string())
                ))
            })?);
        }
        let names: Vec<_> = all
            .iter()
            .map(|j| (j.name().clone(), j.needs.clone()))
            .collect();
        let order = crate::run::needs::downstream_order(jobs[0].name(), &names);
        let mut all: Vec<Option<Job>> = all.into_iter().map(Some).collect();
        jobs.extend(
            order
                .into_iter()
                .filter_map(|i| all.get_mut(i).and_then(Option::take)),
        );
    }
    for job in &jobs {
        operate::rerun_stale(job, &reason, &runtime, &mut |o| receipts.print(o))?;
    }
    receipts.worst()
}

/// `jobhost retry KEY`: exit codes as for `run`.
pub(super) fn retry(args: RetryArgs, runtime: &Runtime) -> Result<i32, Error> {
    one_receipt(&args.job, runtime, |job, runtime| {
        let reason = match &args.reason {
            Some(r) => needed_reason("--reason", r)?,
            None => "jobhost retry".to_string(),
        };
        operate::retry(job, &args.key, &reason, &operate::actor_id(), runtime)
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
