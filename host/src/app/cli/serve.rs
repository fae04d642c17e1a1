//! `jobhost serve`: the dashboard and `/metrics`, until stopped; read-only
//! unless `--allow-actions` lets an `operate` token act from it.

use std::path::{Path, PathBuf};

use crate::app::args::env;
use crate::app::config::{JobConfig, RunFlags};
use crate::core::error::Error;

/// `jobhost serve`.
#[derive(Debug, clap::Args)]
pub(super) struct ServeArgs {
    /// A TOML job config; give it once per job.
    #[arg(long, value_name = "FILE", required_unless_present = "jobs")]
    config: Vec<PathBuf>,
    /// A folder of job configs: every `*.toml` in it is a job; files
    /// added, changed or removed show without a restart, and a file that
    /// does not load is listed as refused.
    #[arg(long, value_name = "DIR", conflicts_with = "config")]
    jobs: Option<PathBuf>,
    /// The claim store, for every job [default: $JOBHOST_STORE, else each config's `store`, else state/jobhost.db beside each config].
    #[arg(long, value_name = "PATH|URL", env = "JOBHOST_STORE")]
    store: Option<PathBuf>,
    /// The address to listen on.
    #[arg(long, value_name = "ADDR", default_value = crate::app::serve::DEFAULT_LISTEN)]
    listen: String,
    /// Judge lateness as if it were this instant [default: the system clock].
    #[arg(long, value_name = "TIME")]
    now: Option<String>,
    #[command(flatten)]
    auth: ListenArgs,
}

/// Serves the dashboard until stopped: 0, or the error.
pub(super) fn main(args: ServeArgs, runtime: &crate::run::Runtime) -> Result<i32, Error> {
    // The dashboard never waits on a stderr nobody reads (`core::spool`);
    // it writes nothing to standard output.
    if let Err(e) = crate::core::spool::install_stderr() {
        crate::core::text::say(
            "warning",
            &format!(
                "cannot start the thread that writes standard error ({e}); it is written directly"
            ),
        );
    }
    let (addr, tokens) = crate::app::serve::check_listen(&args.listen, args.auth.access())?;
    let acts = args.auth.allow_actions;
    let mut jobs: Vec<crate::app::serve::ServedJob> = Vec::new();
    let mut now = args
        .now
        .as_deref()
        .map(|t| crate::core::clock::parse_instant("--now", t))
        .transpose()?;
    for file in &args.config {
        let (job, at) = served_job(file, args.store.as_deref(), args.now.as_deref(), acts)?;
        if jobs.iter().any(|j| j.schedule.job == job.schedule.job) {
            return Err(Error::input(format!(
                "job `{}` is named by two --config files (the second is `{}`): give each job once",
                job.schedule.job,
                file.display()
            )));
        }
        now = now.or(at);
        jobs.push(job);
    }
    let catalog = crate::app::serve::fixed(jobs);
    // A folder is read again by a thread of its own, about every second
    // and at once on SIGHUP.
    if let Some(dir) = &args.jobs {
        let (store, at) = (args.store.clone(), args.now.clone());
        let mut folder = crate::app::config::folder::JobFolder::open(
            dir,
            Box::new(move |file| {
                served_job(file, store.as_deref(), at.as_deref(), acts).map(|(job, _)| job)
            }),
            Some(crate::run::daemon::reload_on_hangup()?),
        )?
        .shows_only();
        let shared = catalog.clone();
        folder.on_change(Box::new(move |jobs, refused| {
            *shared
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = crate::app::serve::Listed {
                jobs: jobs.into_iter().map(|(_, j)| j).collect(),
                refused,
            };
        }));
        std::thread::Builder::new()
            .name("jobhost-job-folder".into())
            .spawn(move || {
                loop {
                    folder.take_waiting();
                    std::thread::sleep(std::time::Duration::from_millis(250));
                }
            })
            .map_err(|e| Error::host("cannot start the job folder's thread").because(e))?;
    }
    let stop = crate::run::daemon::stop_on_signals()?;
    // Runs started from the page share one engine and linker.
    let actions = if acts {
        Some(crate::app::serve::actions::Actions::new(
            runtime.sharing_sandbox()?,
        ))
    } else {
        None
    };
    let served = crate::app::serve::start(crate::app::serve::Settings {
        jobs: catalog,
        listen: addr,
        tokens,
        actions,
        clock: std::sync::Arc::new(move || now.unwrap_or_else(jiff::Timestamp::now)),
        daemon: None,
        liveness: None,
    })?;
    crate::core::text::say(
        "note",
        &format!("serving the dashboard on http://{}/", served.addr),
    );
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    served.stop();
    Ok(0)
}

/// The job of config `file` as the dashboard shows it (its schedule, store
/// and digest cache: no credential is needed), and the instant its config
/// names (`now`). With `acts`, what it changes is signed with the job's
/// key, and its full job (credentials filled in) is loaded from the file
/// each time an action runs it, so that a changed credential is read.
fn served_job(
    file: &Path,
    store: Option<&Path>,
    now: Option<&str>,
    acts: bool,
) -> Result<(crate::app::serve::ServedJob, Option<jiff::Timestamp>), Error> {
    let flags = RunFlags {
        config: Some(file.to_path_buf()),
        store: store.map(Path::to_path_buf),
        now: now.map(str::to_string),
        ..RunFlags::default()
    };
    let config = JobConfig::load(&flags)?;
    let schedule = config.schedule()?;
    let load: Option<crate::app::serve::actions::LoadJob> = if acts {
        config.use_signing_key()?;
        Some(std::sync::Arc::new(move || {
            JobConfig::load(&flags)
                .and_then(|c| c.job(&env))
                .map(std::sync::Arc::new)
        }))
    } else {
        None
    };
    let job = crate::app::serve::ServedJob {
        location: config.store(&env)?,
        digest_cache: config.digest_cache_dir(),
        target: page_target(store, file),
        schedule,
        load,
    };
    Ok((job, config.now()?))
}

/// Where and to whom the dashboard is served.
#[derive(Debug, Clone, clap::Args)]
pub(super) struct ListenArgs {
    /// A file whose first line is a bearer token every request (but
    /// /healthz) may carry to read; a token (this or --tokens-file) is
    /// required to listen off loopback.
    #[arg(long, value_name = "FILE")]
    pub(super) token_file: Option<PathBuf>,
    /// A file of `NAME ROLE SHA256` lines: tokens by name, each `read` or
    /// `operate`, known by the SHA-256 of their text (`printf %s "$TOKEN" |
    /// sha256sum`); every request must then carry one (a bearer header, or
    /// a session from signing in at /login).
    #[arg(long, value_name = "FILE")]
    pub(super) tokens_file: Option<PathBuf>,
    /// Let a person with an `operate` token run, rerun, retry, forget,
    /// backfill, pause and resume from the dashboard and its JSON API
    /// under /api/ (each audited with the token's name).
    #[arg(long)]
    pub(super) allow_actions: bool,
    /// Serve off loopback without a token, to anyone who can reach it.
    #[arg(long, conflicts_with_all = ["token_file", "tokens_file"])]
    pub(super) insecure_no_auth: bool,
}

impl ListenArgs {
    /// The flags as the server checks them.
    pub(super) fn access(&self) -> crate::app::serve::Access<'_> {
        crate::app::serve::Access {
            token_file: self.token_file.as_deref(),
            tokens_file: self.tokens_file.as_deref(),
            insecure_no_auth: self.insecure_no_auth,
            allow_actions: self.allow_actions,
        }
    }
}

/// How a dashboard page names the job of the config `file` in the commands
/// it prints: by its absolute path, since whoever reads the page is not in
/// the folder the server was started from.
pub(super) fn page_target(store: Option<&Path>, file: &Path) -> crate::core::command::Target {
    let absolute = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    crate::app::config::command_target(store, Some(&absolute))
}
