//! `jobhost digest KEY`: makes (or finds in the cache) a DONE run's digest
//! from the job's language model, and sends its message if the job names a
//! destination for it.

use std::path::PathBuf;

use crate::app::args::env;
use crate::app::config::{JobConfig, RunFlags};
use crate::core::clock::rfc3339;
use crate::core::command::Target;
use crate::core::error::Error;
use crate::effects::digest::DigestStatus;
use crate::run::Runtime;
use crate::run::outputs::EventLine;

/// `jobhost digest`.
#[derive(Debug, clap::Args)]
pub(super) struct DigestArgs {
    /// The run's window key, as `history` shows it.
    #[arg(value_name = "KEY")]
    key: String,
    /// The job's TOML config (its `[digest]` model and destinations).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The claim store [default: $JOBHOST_STORE, else the config's `store`, else state/jobhost.db beside the config].
    #[arg(long, value_name = "PATH|URL", env = "JOBHOST_STORE")]
    store: Option<PathBuf>,
    /// Ask the model even when the cache holds a fresh digest.
    #[arg(long)]
    refresh: bool,
    /// As if it were this instant (shown in the output; a digest's age is
    /// judged on the host's real clock, as when it was made).
    #[arg(long, value_name = "TIME")]
    now: Option<String>,
    /// Cache folder; digests are kept under `digests/` in it, unless the
    /// config's `digest.cache_dir` says otherwise.
    #[arg(long, value_name = "DIR", env = "JOBHOST_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
}

impl DigestArgs {
    /// How the commands this prints name the job.
    pub(super) fn target(&self) -> Target {
        crate::app::config::command_target(self.store.as_deref(), Some(&self.config))
    }
}

/// Makes a DONE run's digest (`jobhost digest KEY`) and prints its line: 0
/// when there is one, 1 when the model failed, 2 for bad input.
pub(super) fn main(args: DigestArgs, runtime: &Runtime) -> Result<i32, Error> {
    let config = JobConfig::load(&RunFlags {
        config: Some(args.config.clone()),
        store: args.store.clone(),
        now: args.now.clone(),
        cache_dir: args.cache_dir.clone(),
        ..RunFlags::default()
    })?;
    let key = crate::core::window::WindowKey::from_stored(args.key.clone());
    let name = config.name()?;
    let store = config.store(&env)?;
    let clock = runtime.at(config.now()?.or(runtime.now)).clock();
    let Some(settings) = config.digest(&env)? else {
        return Err(Error::input(format!(
            "job `{name}` has no [digest] section in `{}`; name a model there (base_url, model) \
             to make digests",
            args.config.display()
        )));
    };
    let again = crate::effects::digest::Again {
        job: &name,
        store: &store,
        config_file: &args.config,
        key: &key,
        refresh: args.refresh,
    };
    let info = crate::effects::digest::again(&settings, &again, clock.as_ref())?;
    let code = match info.status {
        DigestStatus::Generated | DigestStatus::Cached => 0,
        DigestStatus::Nothing => 2,
        DigestStatus::Failed => 1,
    };
    if let Some(why) = &info.error {
        crate::core::text::say("error", &format!("no digest of `{key}`: {why}"));
    }
    let line = EventLine::Digest {
        job: name.as_str().to_string(),
        key: key.to_string(),
        now: rfc3339(clock.now()),
        digest: info,
    };
    super::print_json(&line)?;
    Ok(code)
}
