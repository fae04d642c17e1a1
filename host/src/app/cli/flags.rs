//! What the commands a person runs on purpose share: the flags that name a
//! job (`JobFlags`) or only its store (`StoreFlags`), the receipt printed as
//! `run` prints it, and the reasons and notes a person types.

use std::path::PathBuf;

use super::Out;
use crate::app::config::{JobConfig, RunFlags};
use crate::core::command::Target;
use crate::core::error::{Error, Result};
use crate::core::text::say;
use crate::core::window::JobName;
use crate::run::Outcome;
use crate::run::receipt::{Event, ReceiptLevel};

/// What the commands that run a job's windows take besides their own flags.
#[derive(Debug, clap::Args)]
pub(super) struct JobFlags {
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
    pub(super) fn level(&self) -> Result<ReceiptLevel> {
        crate::app::args::receipt_level(self.receipt.as_deref())
    }

    /// The job's config, with these flags over it.
    pub(super) fn load(&self) -> Result<JobConfig> {
        self.load_file(&self.config)
    }

    /// Another job's config `file` with these flags' store, clock, cache
    /// and durability (and its own component): the jobs of a folder a
    /// command goes on to.
    pub(super) fn load_file(&self, file: &std::path::Path) -> Result<JobConfig> {
        let own = file == self.config;
        JobConfig::load(&RunFlags {
            config: Some(file.to_path_buf()),
            component: if own { self.component.clone() } else { None },
            store: self.store.clone(),
            now: self.now.clone(),
            cache_dir: self.cache_dir.clone(),
            require_durable_store: crate::app::args::require_durable_store(
                self.require_durable_store,
            )?,
            ..RunFlags::default()
        })
    }
}

/// Where a command that changes only the store finds it.
#[derive(Debug, clap::Args)]
pub(super) struct StoreFlags {
    /// The claim store: a SQLite file or a postgres:// URL [default: $JOBHOST_STORE, else the store of --config, else ~/.local/state/jobhost/jobhost.db].
    #[arg(long, value_name = "PATH|URL", env = "JOBHOST_STORE")]
    store: Option<PathBuf>,
    /// A job config whose store it is.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

impl StoreFlags {
    /// How the commands this process prints name the store.
    pub(super) fn target(&self) -> Target {
        crate::app::config::command_target(self.store.as_deref(), self.config.as_deref())
    }

    /// The store these flags name (`--store`, else `--config`'s).
    ///
    /// # Errors
    ///
    /// `Error::Input` for a config that cannot be read or a bad store.
    pub(super) fn location(&self) -> Result<crate::store::StoreLocation> {
        crate::app::args::store_location(self.store.clone(), self.config.as_deref())
    }

    /// The job config `--config` names, if any.
    pub(super) fn config(&self) -> Option<&std::path::Path> {
        self.config.as_deref()
    }
}

/// Prints a run's receipt as `run` does: its line on stdout, an error or
/// skip on stderr; returns its exit code.
///
/// # Errors
///
/// Standard output failing for another reason than a reader gone.
pub(super) fn print_receipt(outcome: &Outcome, level: ReceiptLevel) -> Result<i32> {
    if let Some(err) = &outcome.receipt.error {
        say("error", &err.message);
    } else if let (Event::Skipped, Some(detail)) = (outcome.receipt.event, &outcome.receipt.detail)
    {
        say("skipped", detail);
    }
    Out::stdout().line(&outcome.receipt.line(level))?;
    Ok(outcome.exit_code)
}

pub(super) use crate::run::operate::{needed_reason, reason_text};

/// The job name a person typed, checked against `--config`'s job.
pub(super) fn named_job(text: &str, config: Option<&std::path::Path>) -> Result<JobName> {
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

/// The job configs a command was given: the `--config` files, or every
/// `*.toml` of the `--jobs` folder.
///
/// # Errors
///
/// `Error::Input` when the folder cannot be read or holds no job file.
pub(super) fn configs(
    config: &[std::path::PathBuf],
    jobs: Option<&std::path::Path>,
) -> Result<Vec<std::path::PathBuf>, crate::core::error::Error> {
    let Some(dir) = jobs else {
        return Ok(config.to_vec());
    };
    let files = crate::app::config::folder::job_files(dir)?;
    if files.is_empty() {
        return Err(crate::core::error::Error::input(format!(
            "the job folder `{}` holds no job file (*.toml)",
            crate::core::text::printable(&dir.display().to_string())
        )));
    }
    Ok(files)
}

/// A file of a `--jobs` folder that does not load (`plan`, `status`): one
/// line on stderr naming it, while the other jobs are shown; the first
/// refusal is kept for the exit code.
pub(super) fn refuse_alone(
    file: &std::path::Path,
    e: crate::core::error::Error,
    first: &mut Option<crate::core::error::Error>,
) {
    crate::core::text::say(
        "error",
        &format!(
            "job file `{}` is left out: {}; the other jobs are shown",
            crate::core::text::printable(&file.display().to_string()),
            e.chain()
        ),
    );
    first.get_or_insert(e);
}
