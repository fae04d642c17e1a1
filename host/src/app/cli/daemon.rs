//! `jobhost daemon`: every job's due windows at the right moments, until
//! stopped or `--until`, with the dashboard on `--listen`. The loop and its
//! checks are `run::daemon`'s; this file reads the flags, starts the server
//! and says how it ended.

use std::path::PathBuf;
use std::sync::Arc;

use super::serve::{ListenArgs, page_target};
use crate::core::error::Error;
use crate::core::text::printable;
use crate::run::Runtime;
use crate::run::daemon::GaveUp;

/// `jobhost daemon`.
#[derive(Debug, clap::Args)]
pub(super) struct DaemonArgs {
    /// A TOML job config; give it once per job.
    #[arg(long, value_name = "FILE", required_unless_present = "jobs")]
    config: Vec<PathBuf>,
    /// A folder of job configs: every `*.toml` in it is a job. A file
    /// added, changed or removed takes effect without a restart (looked
    /// for about every second, and at once on SIGHUP); a file that does not
    /// load is refused alone.
    #[arg(long, value_name = "DIR", conflicts_with = "config")]
    jobs: Option<PathBuf>,
    /// The report component (.wasm) for every job, instead of each
    /// config's `component`.
    #[arg(long, value_name = "PATH")]
    component: Option<PathBuf>,
    /// The claim store, for every job [default: $JOBHOST_STORE, else each config's `store`, else state/jobhost.db beside each config].
    #[arg(long, value_name = "PATH|URL", env = "JOBHOST_STORE")]
    store: Option<PathBuf>,
    /// Refuse a SQLite store on a filesystem that dies with its machine or
    /// container (tmpfs, ramfs, overlayfs) instead of warning [also:
    /// $JOBHOST_REQUIRE_DURABLE_STORE=1].
    #[arg(long)]
    require_durable_store: bool,
    /// On start, also consider every window from this instant on that the
    /// store does not hold (a fresh store otherwise starts with the newest
    /// due window).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Stop once the next wake-up would be after this instant.
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    /// Start the daemon's clock at this instant (it then advances in real
    /// time) [default: the system clock].
    #[arg(long, value_name = "TIME")]
    now: Option<String>,
    /// Also serve the dashboard and metrics on this address (e.g.
    /// 127.0.0.1:8480), on threads of its own.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// How much each receipt tells: full, or brief (without the report's
    /// summary, what each send came to and the digest's text) [default:
    /// $JOBHOST_RECEIPT, else full].
    #[arg(long, value_name = "full|brief")]
    receipt: Option<String>,
    /// At most this many jobs run at once (each job's own windows still run
    /// one after another, in order) [default: $JOBHOST_MAX_CONCURRENT_RUNS,
    /// else the machine's cores].
    #[arg(long, value_name = "N", env = "JOBHOST_MAX_CONCURRENT_RUNS")]
    max_concurrent_runs: Option<String>,
    #[command(flatten)]
    auth: ListenArgs,
}

/// `--max-concurrent-runs`, checked.
///
/// # Errors
///
/// `Error::Input` naming the flag for anything but a number from 1 to 1024.
pub(super) fn concurrency(
    flag: &str,
    written: Option<&str>,
) -> Result<std::num::NonZeroUsize, Error> {
    let Some(text) = written else {
        return Ok(crate::run::daemon::default_concurrency());
    };
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=1024).contains(n))
        .and_then(std::num::NonZeroUsize::new)
        .ok_or_else(|| {
            Error::input(format!(
                "invalid {flag} `{}`: give a number from 1 to 1024",
                printable(&crate::core::text::echoed(text, 40))
            ))
        })
}

/// Runs the daemon until `--until`, or a signal: 0, or with `--until` 1
/// when a run in it failed for good or was abandoned (a batch's exit code
/// says so, as `backfill`'s does).
pub(super) fn main(args: DaemonArgs, runtime: &Runtime) -> Result<i32, Error> {
    use crate::core::clock::parse_instant;
    // A daemon never waits on an output nobody reads: its lines go through
    // threads of their own (`core::spool`).
    let lines = crate::core::spool::install();
    let instant =
        |what: &str, t: &Option<String>| t.as_deref().map(|t| parse_instant(what, t)).transpose();
    let (since, until, start) = (
        instant("--since", &args.since)?,
        instant("--until", &args.until)?,
        instant("--now", &args.now)?,
    );
    let require_durable_store =
        crate::app::args::require_durable_store(args.require_durable_store)?;
    let level = crate::app::args::receipt_level(args.receipt.as_deref())?;
    let max_concurrent_runs =
        concurrency("--max-concurrent-runs", args.max_concurrent_runs.as_deref())?;
    let loading = crate::app::config::folder::Loading {
        store: args.store.clone(),
        component: args.component.clone(),
        require_durable_store,
    };
    let jobs = args
        .config
        .iter()
        .map(|file| loading.load(file))
        .collect::<Result<Vec<_>, Error>>()?;
    let auth = &args.auth;
    if args.listen.is_none()
        && (auth.allow_actions || auth.token_file.is_some() || auth.tokens_file.is_some())
    {
        return Err(Error::input(
            "--allow-actions, --token-file and --tokens-file are for the dashboard: give \
             --listen ADDR too"
                .to_string(),
        ));
    }
    let listen = args
        .listen
        .as_deref()
        .map(|l| crate::app::serve::check_listen(l, args.auth.access()))
        .transpose()?;
    // One engine and linker for the daemon's life: the components are
    // checked in it, and every run shares it.
    let sandbox = Arc::new(crate::guest::sandbox::Sandbox::new()?);
    crate::run::daemon::check_before_start(&jobs, &sandbox)?;
    // A folder's files are checked one by one, as it takes each in: a bad
    // one is refused alone.
    let mut folder = match &args.jobs {
        Some(dir) => {
            let sandbox = sandbox.clone();
            let mut checked = crate::run::daemon::Checked::default();
            Some(crate::app::config::folder::JobFolder::open(
                dir,
                Box::new(move |file| {
                    let job = loading.load(file)?;
                    crate::run::daemon::check_job(&job, &sandbox, &mut checked)?;
                    Ok(Arc::new(job))
                }),
                Some(crate::run::daemon::reload_on_hangup()?),
            )?)
        }
        None => None,
    };
    if let Some(f) = &folder {
        let held = f.jobs();
        crate::run::daemon::refuse_cycles(jobs.iter().chain(held.iter().map(|j| &**j)))?;
    }
    // The dashboard's list of jobs: a folder keeps it current.
    // With --allow-actions, a window run from the page is run as the
    // daemon runs it: the job it loaded.
    let acts = args.auth.allow_actions;
    let served =
        move |store: Option<&std::path::Path>, file: &std::path::Path, j: &Arc<crate::run::Job>| {
            let load: Option<crate::app::serve::actions::LoadJob> = acts.then(|| {
                let j = j.clone();
                Arc::new(move || Ok(j.clone())) as crate::app::serve::actions::LoadJob
            });
            crate::app::serve::ServedJob {
                schedule: j.schedule.clone(),
                location: j.store.clone(),
                digest_cache: j.digest.as_ref().map(|d| d.cache_dir.clone()),
                target: page_target(store, file),
                load,
            }
        };
    let catalog = crate::app::serve::fixed(
        jobs.iter()
            .zip(&args.config)
            .map(|(j, file)| served(args.store.as_deref(), file, &Arc::new(j.clone())))
            .collect(),
    );
    if let Some(f) = &mut folder {
        let (catalog, store) = (catalog.clone(), args.store.clone());
        f.on_change(Box::new(move |jobs, refused| {
            let listed = crate::app::serve::Listed {
                jobs: jobs
                    .iter()
                    .map(|(file, j)| served(store.as_deref(), file, j))
                    .collect(),
                refused,
            };
            *catalog
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = listed;
        }));
    }
    let metrics = Arc::new(crate::app::serve::DaemonMetrics::default());
    let heartbeat = Arc::new(crate::run::liveness::Heartbeat::default());
    let _server = match listen {
        Some((addr, tokens)) => {
            let origin = jiff::Timestamp::now();
            let shift = start.map(|t| t.duration_since(origin));
            let actions = acts.then(|| {
                crate::app::serve::actions::Actions::new(Runtime {
                    sandbox: Some(sandbox.clone()),
                    ..runtime.clone()
                })
            });
            let served = crate::app::serve::start(crate::app::serve::Settings {
                jobs: catalog,
                listen: addr,
                tokens,
                actions,
                clock: Arc::new(move || {
                    let now = jiff::Timestamp::now();
                    shift.map_or(now, |d| now.checked_add(d).unwrap_or(now))
                }),
                daemon: Some(metrics.clone()),
                liveness: Some(heartbeat.clone()),
            })?;
            crate::core::text::say(
                "note",
                &format!("serving the dashboard on http://{}/", served.addr),
            );
            Some(served)
        }
        None => None,
    };
    let clock = crate::run::daemon::clock(start, runtime.virtual_time);
    let stop = crate::run::daemon::stop_on_signals()?;
    let runtime = Runtime {
        stop: Some(stop),
        defer_digests: true,
        sandbox: Some(sandbox),
        ..runtime.clone()
    };
    let gave_up = GaveUp::new(Some(metrics.as_ref()));
    let opts = crate::run::daemon::Options {
        clock: clock.as_ref(),
        runtime: &runtime,
        since,
        until,
        stop,
        sleep_slice: if runtime.virtual_time {
            std::time::Duration::MAX
        } else {
            std::time::Duration::from_millis(500)
        },
        observer: Some(&gave_up),
        heartbeat: Some(&heartbeat),
        receipt: level,
        max_concurrent_runs,
    };
    let out: crate::run::daemon::Output = match lines {
        Ok(lines) => Arc::new(std::sync::Mutex::new(lines)),
        Err(e) => {
            crate::core::text::say(
                "warning",
                &format!(
                    "cannot start the thread that writes standard output ({e}); it is written directly"
                ),
            );
            Arc::new(std::sync::Mutex::new(std::io::stdout()))
        }
    };
    match &mut folder {
        Some(f) => crate::run::daemon::run(f, &opts, &out)?,
        None => crate::run::daemon::run(
            &mut jobs.iter().cloned().map(Arc::new).collect::<Vec<_>>(),
            &opts,
            &out,
        )?,
    }
    let keys = gave_up.keys();
    if until.is_some() && !keys.is_empty() {
        crate::core::text::say(
            "error",
            &printable(&format!(
                "{} window(s) failed for good or were abandoned while the daemon ran: {}; \
                 `jobhost status` says what each needs",
                keys.len(),
                keys.join(", ")
            )),
        );
        return Ok(1);
    }
    Ok(0)
}
