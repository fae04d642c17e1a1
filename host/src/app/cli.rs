//! The command line: clap types for `run` and `history`, and the glue that
//! turns them into library calls and prints the results. No domain logic
//! lives here.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::app::args::{env, store_location};
use crate::app::config::{JobConfig, RunFlags};
use crate::app::detail::{digest_view, history_json, human_bytes};
use crate::core::clock::rfc3339;
use crate::core::error::Error;
use crate::core::schedule::Schedule;
use crate::core::text::{json_line, printable};
use crate::effects::digest::DigestStatus;
use crate::run::receipt::{Event, Receipt, ReceiptLevel};
use crate::run::{Outcome, Runtime};
use crate::store::{self, RunRecord};

/// Run a report job exactly once per time window, as a sandboxed
/// WebAssembly component.
#[derive(Debug, Parser)]
#[command(name = "jobhost", version = version_text(), about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the job for the last window that closed before now; print one JSON receipt.
    Run(RunArgs),
    /// Show what the claim store holds.
    History(HistoryArgs),
    /// Run a recorded run's component again against its journal, with its
    /// recorded clock, and compare the report and messages it produces.
    Replay(ReplayArgs),
    /// Write a recorded run as a self-contained replay file (for fixtures).
    Export(ExportArgs),
    /// Show which due windows would run now, which missed ones would be
    /// skipped and why, and the next window to come due; runs nothing.
    Plan(PlanArgs),
    /// Say whether each job keeps up: exit 0 healthy, 5 paused, 3 late, 4 failed.
    Status(StatusArgs),
    /// Run every job's due windows at the right moments, until stopped;
    /// one JSON line per run or skipped window on stdout.
    Daemon(DaemonArgs),
    /// Serve a read-only dashboard of the jobs and Prometheus metrics over
    /// HTTP, until stopped.
    Serve(ServeArgs),
    /// Make (or find in the cache) the digest of a DONE run, and send its
    /// message if the job names a destination for it.
    Digest(DigestArgs),
    /// Compile report components into the compile cache ahead of time (an
    /// image build, a deploy step), so that no run pays for compiling.
    Compile(CompileArgs),
    /// Write a new report project (sources using the SDK, the WIT, a job
    /// config on the sample data, a build recipe and a test).
    New(NewArgs),
    /// Run every window of a range in order, as the daemon would: missing
    /// ones by default, also failed ones or every one with --only.
    Backfill(crate::app::operate::BackfillArgs),
    /// Run a DONE window again on purpose, as a new revision whose messages
    /// carry new idempotency keys.
    Rerun(crate::app::operate::RerunArgs),
    /// Try a FAILED or ABANDONED window, or a committed report whose
    /// delivery waits out its backoff, again now, as a new series of
    /// attempts (its messages keep their idempotency keys).
    Retry(crate::app::operate::RetryArgs),
    /// Remove a FAILED, ABANDONED or SKIPPED window's decision so that it
    /// runs again as if new; kept as an audit line.
    Forget(crate::app::operate::ForgetArgs),
    /// Stop claiming a job's windows, on every host sharing the store.
    Pause(crate::app::operate::PauseArgs),
    /// Let a paused job run again.
    Resume(crate::app::operate::ResumeArgs),
    /// Drop the journals and delivered message bodies of old DONE runs,
    /// keeping their rows.
    Prune(crate::app::operate::PruneArgs),
}

#[derive(Debug, clap::Args)]
struct CompileArgs {
    /// The component files (.wasm).
    #[arg(value_name = "COMPONENT", required = true)]
    components: Vec<PathBuf>,
    /// The compile cache folder [default: $JOBHOST_CACHE_DIR, else $XDG_CACHE_HOME/jobhost, else ~/.cache/jobhost].
    #[arg(long, value_name = "DIR", env = "JOBHOST_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct NewArgs {
    /// The report's name: the project folder and the job's name.
    #[arg(value_name = "NAME")]
    name: String,
    /// The language of the report.
    #[arg(long, value_enum, default_value = "rust")]
    lang: crate::app::new::Lang,
    /// Where to make the project folder [default: the current folder].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct DigestArgs {
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

#[derive(Debug, clap::Args)]
struct DaemonArgs {
    /// A TOML job config; give it once per job.
    #[arg(long, value_name = "FILE", required = true)]
    config: Vec<PathBuf>,
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
    #[command(flatten)]
    auth: ListenArgs,
}

/// Where and to whom the dashboard is served.
#[derive(Debug, Clone, clap::Args)]
struct ListenArgs {
    /// A file whose first line is the bearer token every request (but
    /// /healthz) must carry; required to listen off loopback.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Serve off loopback without a token, to anyone who can reach it.
    #[arg(long, conflicts_with = "token_file")]
    insecure_no_auth: bool,
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// A TOML job config; give it once per job.
    #[arg(long, value_name = "FILE", required = true)]
    config: Vec<PathBuf>,
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

#[derive(Debug, clap::Args)]
struct StatusArgs {
    /// A TOML job config; give it once per job.
    #[arg(long, value_name = "FILE", required = true)]
    config: Vec<PathBuf>,
    /// As if it were this instant [default: the system clock].
    #[arg(long, value_name = "TIME")]
    now: Option<String>,
    /// The claim store, for every job [default: $JOBHOST_STORE, else each config's `store`, else state/jobhost.db beside each config].
    #[arg(long, value_name = "PATH|URL", env = "JOBHOST_STORE")]
    store: Option<PathBuf>,
    /// One JSON object per job instead of text.
    #[arg(long)]
    json: bool,
    /// Exit as a Nagios plugin does: 0 OK (healthy), 1 WARNING (late or
    /// paused), 2 CRITICAL (failed), 3 UNKNOWN (a store that cannot be
    /// read, bad input); the first line is `JOBHOST <STATE> - <summary>`.
    #[arg(long, conflicts_with = "json")]
    nagios: bool,
    /// Take a store that does not exist yet as one where nothing has run
    /// (a fresh deploy), instead of an error.
    #[arg(long)]
    allow_missing: bool,
}

#[derive(Debug, clap::Args)]
struct PlanArgs {
    /// A TOML job config; give it once per job.
    #[arg(long, value_name = "FILE", required = true)]
    config: Vec<PathBuf>,
    /// Plan as if it were this instant [default: the system clock].
    #[arg(long, value_name = "TIME")]
    now: Option<String>,
    /// Also consider every window from this instant on that the store does
    /// not hold yet (a fresh store otherwise considers only the newest due
    /// window).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// The claim store, for every job [default: $JOBHOST_STORE, else each config's `store`, else state/jobhost.db beside each config].
    #[arg(long, value_name = "PATH|URL", env = "JOBHOST_STORE")]
    store: Option<PathBuf>,
    /// One JSON object per window instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct ExportArgs {
    /// The run's window key, as `history` shows it.
    #[arg(value_name = "KEY")]
    key: String,
    /// The replay file to write.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// The claim store: a SQLite file or a postgres:// URL [default: $JOBHOST_STORE, else the store of --config, else ~/.local/state/jobhost/jobhost.db].
    #[arg(long, value_name = "PATH|URL", env = "JOBHOST_STORE")]
    store: Option<PathBuf>,
    /// A job config whose store holds the run (its `store`, or
    /// state/jobhost.db beside it); its `component` is embedded when it is
    /// the one that ran.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The component (.wasm) that ran, to embed in the file; refused unless
    /// its digest is the recorded one.
    #[arg(long, value_name = "PATH", conflicts_with = "without_component")]
    component: Option<PathBuf>,
    /// Write the file without the component (`replay --file` then needs
    /// --component, or the compile cache).
    #[arg(long)]
    without_component: bool,
}

#[derive(Debug, clap::Args)]
struct ReplayArgs {
    /// The run's window key, as `history` shows it.
    #[arg(value_name = "KEY", required_unless_present_any = ["file", "last"])]
    key: Option<String>,
    /// The claim store: a SQLite file or a postgres:// URL [default: $JOBHOST_STORE, else the store of --config, else ~/.local/state/jobhost/jobhost.db].
    #[arg(long, value_name = "PATH|URL", env = "JOBHOST_STORE")]
    store: Option<PathBuf>,
    /// A job config whose store holds the run (its `store`, or
    /// state/jobhost.db beside it); with --last, its job is the one replayed.
    #[arg(long, value_name = "FILE", conflicts_with = "file")]
    config: Option<PathBuf>,
    /// Replay a file written by `jobhost export` instead; no store needed
    /// (`--store` is then ignored). Its embedded component runs unless
    /// --component names another.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["key", "last"])]
    file: Option<PathBuf>,
    /// Replay the job's newest N windows that have a committed report and
    /// journal, all with the component --component names (a swap preview).
    #[arg(long, value_name = "N", conflicts_with = "key", requires = "component")]
    last: Option<String>,
    /// With --last: the job whose windows to replay [default: the config's
    /// job, else the store's only job].
    #[arg(long, value_name = "NAME", requires = "last")]
    job: Option<String>,
    /// Replay with this component instead of the recorded one.
    #[arg(long, value_name = "PATH")]
    component: Option<PathBuf>,
    /// Replay this revision of the window (`history KEY` lists them)
    /// [default: the newest].
    #[arg(long, value_name = "N", conflicts_with = "file", value_parser = clap::value_parser!(u32).range(1..))]
    revision: Option<u32>,
    /// Give the guest this value for a parameter instead of the recorded
    /// one (or add it); repeat for more.
    #[arg(long = "param", value_name = "KEY=VALUE")]
    params: Vec<String>,
    /// One JSON object per window replayed (and, with --last, a summary
    /// object last) instead of text.
    #[arg(long)]
    json: bool,
    /// Compiled-code cache folder, where the recorded component is looked up.
    #[arg(long, value_name = "DIR", env = "JOBHOST_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The report component (.wasm, built for wasm32-wasip2).
    #[arg(long, value_name = "PATH")]
    component: Option<PathBuf>,
    /// A TOML job config; flags override its values.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The job's name, part of every window key [default: daily-report].
    #[arg(long, value_name = "NAME")]
    job: Option<String>,
    /// Window length: hour, day, week or month [default: day].
    #[arg(long, value_name = "KIND")]
    window: Option<String>,
    /// IANA time zone whose calendar defines the windows [default: UTC].
    #[arg(long, value_name = "IANA_ZONE")]
    tz: Option<String>,
    /// The claim store: a SQLite file or a postgres:// URL [default: $JOBHOST_STORE, else the config's `store`, else state/jobhost.db beside the config, else ~/.local/state/jobhost/jobhost.db].
    #[arg(long, value_name = "PATH|URL", env = "JOBHOST_STORE")]
    store: Option<PathBuf>,
    /// Refuse a SQLite store on a filesystem that dies with its machine or
    /// container (tmpfs, ramfs, overlayfs) instead of warning [also:
    /// $JOBHOST_REQUIRE_DURABLE_STORE=1].
    #[arg(long)]
    require_durable_store: bool,
    /// Run as if it were this instant: RFC 3339 with an offset or Z, or RFC 9557 with a [Zone].
    #[arg(long, value_name = "TIME")]
    now: Option<String>,
    /// Run this window instead of the newest due one, if it has closed: its
    /// label (2026-11-03, 2026-W45, 2026-11-01T01:00-05:00, 2026-11) or an
    /// RFC 3339 instant inside it.
    #[arg(long = "for", value_name = "LABEL|INSTANT")]
    for_window: Option<String>,
    /// Compiled-code cache folder [default: $XDG_CACHE_HOME/jobhost or ~/.cache/jobhost].
    #[arg(long, value_name = "DIR", env = "JOBHOST_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// How much each receipt tells: full, or brief (without the report's
    /// summary, what each send came to and the digest's text) [default:
    /// $JOBHOST_RECEIPT, else full].
    #[arg(long, value_name = "full|brief")]
    receipt: Option<String>,
}

#[derive(Debug, clap::Args)]
struct HistoryArgs {
    /// One window in detail: every revision and attempt, each message, the
    /// digest, the journal and the component.
    #[arg(value_name = "KEY")]
    key: Option<String>,
    /// Also the audit lines: what people did on purpose (forget, rerun,
    /// retry, pause, resume, prune), who and why.
    #[arg(long)]
    all: bool,
    /// The claim store: a SQLite file or a postgres:// URL [default: $JOBHOST_STORE, else the store of --config, else ~/.local/state/jobhost/jobhost.db].
    #[arg(long, value_name = "PATH|URL", env = "JOBHOST_STORE")]
    store: Option<PathBuf>,
    /// Where runs' digests are looked up [default: the cache of the job
    /// --config names, else digests/ in $JOBHOST_CACHE_DIR, $XDG_CACHE_HOME/jobhost or ~/.cache/jobhost].
    #[arg(long, value_name = "DIR", conflicts_with = "config")]
    digest_cache: Option<PathBuf>,
    /// A job config: its store (unless --store names one) and its digest
    /// cache (`digest.cache_dir`, or its `cache_dir`).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Only this job's runs.
    #[arg(long, value_name = "NAME")]
    job: Option<String>,
    /// Only the newest N windows.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    limit: Option<u64>,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
}

/// What `--version` prints after the name: the crate's version and the WIT
/// package the host speaks (`jobhost:report@0.1.1`, from the world it links).
fn version_text() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        let world = crate::guest::sandbox::WORLD;
        // `jobhost:report/reporter@0.1.1` -> `jobhost:report@0.1.1`.
        let package = match (world.split_once('/'), world.rsplit_once('@')) {
            (Some((pkg, _)), Some((_, v))) => format!("{pkg}@{v}"),
            _ => world.to_string(),
        };
        format!("{} (WIT {package})", env!("CARGO_PKG_VERSION"))
    })
}

/// A duration as a person reads it: its two largest units, `18h58m`,
/// `2d3h`, `1m30s`, `45s` (`0s` for nothing or less).
pub(crate) fn human_duration(d: jiff::SignedDuration) -> String {
    crate::core::text::human_duration(d)
}

/// Parses the command line, runs it, and returns the process exit code.
pub fn main() -> i32 {
    main_with(&Runtime::default())
}

/// [`main`] with a given runtime (the test suite's build of the command line
/// passes a virtual clock and failpoints).
pub fn main_with(runtime: &Runtime) -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            if !e.use_stderr() {
                return 0; // --help, --version
            }
            // `run` promises one receipt per invocation, even for bad flags.
            if std::env::args().nth(1).as_deref() == Some("run") {
                let mut receipt = Receipt::new(Event::Failed);
                let rendered = e.render().to_string();
                let first = rendered.lines().next().unwrap_or("invalid command line");
                let message = format!(
                    "{}; see `jobhost run --help`",
                    first.trim_start_matches("error: ")
                );
                receipt.fail(crate::core::error::ErrorKind::InvalidInput, message, None);
                println!("{}", receipt.to_json_line());
            }
            return 2;
        }
    };
    // The commands jobhost prints name the config or store this command
    // line gave, so that they paste (commands over several jobs name each
    // job's own config where they print one).
    let single = match &cli.command {
        Command::Run(a) => Some((a.store.as_deref(), a.config.as_deref())),
        Command::History(a) => Some((a.store.as_deref(), a.config.as_deref())),
        Command::Replay(a) => Some((a.store.as_deref(), a.config.as_deref())),
        Command::Export(a) => Some((a.store.as_deref(), a.config.as_deref())),
        Command::Digest(a) => Some((a.store.as_deref(), Some(a.config.as_path()))),
        _ => None,
    };
    if let Some((store, config)) = single {
        crate::core::command::set_process_target(crate::app::config::command_target(store, config));
    }
    match cli.command {
        Command::Run(args) => run(args, runtime),
        Command::Backfill(args) => crate::app::operate::backfill(args, runtime),
        Command::Rerun(args) => crate::app::operate::rerun(args, runtime),
        Command::Retry(args) => crate::app::operate::retry(args, runtime),
        Command::Forget(args) => crate::app::operate::forget(args),
        Command::Pause(args) => crate::app::operate::pause(args),
        Command::Resume(args) => crate::app::operate::resume(args),
        Command::Prune(args) => crate::app::operate::prune(args),
        Command::History(args) => match history(args) {
            Ok(()) => 0,
            Err(e) => {
                crate::core::text::say("error", &format!("{e:#}"));
                e.downcast_ref::<Error>().map_or(1, Error::exit_code)
            }
        },
        Command::Export(args) => match export(args) {
            Ok(()) => 0,
            Err(e) => {
                crate::core::text::say("error", &e.to_string());
                e.exit_code()
            }
        },
        Command::Digest(args) => digest(args, runtime),
        Command::Compile(args) => report_error(crate::app::compile::compile(
            crate::app::compile::CompileRequest {
                components: args.components,
                cache_dir: args.cache_dir,
            },
        )),
        Command::New(args) => report_error(crate::app::new::new(&crate::app::new::NewRequest {
            name: args.name,
            lang: args.lang,
            dir: args.dir,
        })),
        Command::Daemon(args) => match daemon(args, runtime) {
            Ok(code) => code,
            Err(e) => {
                crate::core::text::say("error", &e.to_string());
                e.exit_code()
            }
        },
        Command::Serve(args) => match serve(args) {
            Ok(()) => 0,
            Err(e) => {
                crate::core::text::say("error", &e.to_string());
                e.exit_code()
            }
        },
        Command::Status(args) => {
            let nagios = args.nagios;
            match status(args) {
                Ok(code) => code,
                Err(e) if nagios => {
                    let line = printable(&e.to_string()).into_owned();
                    println!("JOBHOST UNKNOWN - {line}");
                    crate::core::text::say("error", &line);
                    3
                }
                Err(e) => {
                    crate::core::text::say("error", &e.to_string());
                    e.exit_code()
                }
            }
        }
        Command::Plan(args) => match plan(args) {
            Ok(()) => 0,
            Err(e) => {
                crate::core::text::say("error", &e.to_string());
                e.exit_code()
            }
        },
        // 0 identical, 1 different, 2 bad input, 3 no comparable result
        // (the guest failed or diverged, or the host could not run it).
        Command::Replay(args) => match replay(args) {
            Ok(code) => code,
            Err(e) => {
                crate::core::text::say("error", &e.to_string());
                if e.exit_code() == 2 { 2 } else { 3 }
            }
        },
    }
}

/// Exit 0, or say the error on stderr and exit with its code.
fn report_error(result: crate::core::error::Result<()>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(e) => {
            crate::core::text::say("error", &e.to_string());
            e.exit_code()
        }
    }
}

fn run(args: RunArgs, runtime: &Runtime) -> i32 {
    let mut flags = RunFlags {
        component: args.component,
        config: args.config,
        job: args.job,
        window: args.window,
        tz: args.tz,
        store: args.store,
        require_durable_store: args.require_durable_store,
        now: args.now,
        cache_dir: args.cache_dir,
    };
    let mut level = ReceiptLevel::Full;
    let job = crate::app::args::receipt_level(args.receipt.as_deref())
        .and_then(|l| {
            level = l;
            crate::app::args::require_durable_store(flags.require_durable_store)
        })
        .and_then(|require| {
            flags.require_durable_store = require;
            JobConfig::load(&flags)
        })
        .and_then(|c| Ok((c.job(&env)?, c.now()?)));
    let outcome = match job {
        Ok((job, now)) => {
            let runtime = runtime.at(now.or(runtime.now));
            match &args.for_window {
                Some(text) => crate::run::run_for(&job, text, &runtime),
                None => crate::run::run(&job, &runtime),
            }
        }
        Err(e) => Outcome::refused(&e),
    };
    if let Some(err) = &outcome.receipt.error {
        crate::core::text::say("error", &err.message);
    } else if let (Event::Skipped, Some(detail)) = (outcome.receipt.event, &outcome.receipt.detail)
    {
        crate::core::text::say("skipped", &detail.to_string());
    }
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{}", outcome.receipt.line(level)).is_err() {
        return 1;
    }
    outcome.exit_code
}

fn history(args: HistoryArgs) -> anyhow::Result<()> {
    let location = store_location(args.store, args.config.as_deref())?;
    let mut store = store::open_read_only(&location)?;
    let mut runs = if args.key.is_some() {
        Vec::new()
    } else {
        store
            .history(args.job.as_deref())
            .with_context(|| format!("cannot list store `{location}`"))?
    };
    if let Some(n) = args.limit {
        // Newest window first: the newest N.
        runs.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    }
    let from_config = match &args.config {
        Some(file) => JobConfig::load(&RunFlags {
            config: Some(file.clone()),
            ..RunFlags::default()
        })?
        .digest_cache_dir(),
        None => None,
    };
    let cache = args
        .digest_cache
        .or(from_config)
        .or_else(|| {
            std::env::var_os("JOBHOST_CACHE_DIR")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(crate::guest::cache::CompileCache::default_dir)
                .map(|d| crate::effects::digest::digest_dir(&d))
        })
        .map(crate::effects::digest::cache::DigestCache::new);
    let mut out = std::io::stdout().lock();
    if let Some(key) = &args.key {
        let key = crate::run::operate::typed_key(key)?;
        crate::app::detail::show(store.as_mut(), &key, cache.as_ref(), args.json, &mut out)?;
        if args.all {
            let lines: Vec<_> = store
                .audit(None)?
                .into_iter()
                .filter(|a| a.key.as_deref() == Some(key.as_str()))
                .collect();
            crate::app::detail::audit(&lines, args.json, &mut out)?;
        }
        return Ok(());
    }
    if args.json {
        for r in &runs {
            let mut line = history_json(r);
            if let Some(d) = digest_view(r, cache.as_ref()) {
                line["digest"] = d;
            }
            writeln!(out, "{}", json_line(&line.to_string()))?;
        }
    } else {
        write_table(&mut out, &runs, cache.as_ref())?;
    }
    if args.all {
        let lines = store.audit(args.job.as_deref())?;
        crate::app::detail::audit(&lines, args.json, &mut out)?;
    }
    Ok(())
}

/// Makes a DONE run's digest (`jobhost digest KEY`): 0 when there is one,
/// 1 when the model failed, 2 for bad input.
fn digest(args: DigestArgs, runtime: &Runtime) -> i32 {
    match digest_inner(args, runtime) {
        Ok((line, code)) => {
            println!("{}", json_line(&line.to_string()));
            code
        }
        Err(e) => {
            crate::core::text::say("error", &e.to_string());
            e.exit_code()
        }
    }
}

fn digest_inner(args: DigestArgs, runtime: &Runtime) -> Result<(serde_json::Value, i32), Error> {
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
    let line = serde_json::json!({
        "event": "digest",
        "job": name.as_str(),
        "key": key.as_str(),
        "now": rfc3339(clock.now()),
        "digest": info,
    });
    Ok((line, code))
}

/// Counts, for `daemon --until`, the runs that failed for good or were
/// abandoned, and passes every run on to the metrics.
struct GaveUp<'a> {
    metrics: &'a crate::app::serve::DaemonMetrics,
    keys: std::sync::Mutex<Vec<String>>,
}

impl crate::run::daemon::Observer for GaveUp<'_> {
    fn ran(&self, job: &str, receipt: &Receipt, took: std::time::Duration) {
        crate::run::daemon::Observer::ran(self.metrics, job, receipt, took);
        let for_good = match receipt.event {
            Event::Abandoned => true,
            Event::Failed => receipt
                .error
                .as_ref()
                .is_some_and(|e| e.retryable == Some(false)),
            _ => false,
        };
        if for_good {
            let key = receipt.key.clone().unwrap_or_else(|| job.to_string());
            self.keys
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(key);
        }
    }
}

/// Runs the daemon until `--until`, or a signal: 0, or with `--until` 1
/// when a run in it failed for good or was abandoned (a batch's exit code
/// says so, as `backfill`'s does).
fn daemon(args: DaemonArgs, runtime: &Runtime) -> Result<i32, Error> {
    use crate::core::clock::{Clock, SystemClock, VirtualClock, parse_instant};
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
    let jobs = args
        .config
        .iter()
        .map(|file| {
            JobConfig::load(&RunFlags {
                config: Some(file.clone()),
                store: args.store.clone(),
                component: args.component.clone(),
                require_durable_store,
                ..RunFlags::default()
            })?
            .job(&env)
        })
        .collect::<Result<Vec<_>, Error>>()?;
    // Refused before any store is opened (or created).
    for c in &jobs {
        if let (true, Some(path)) = (c.require_durable_store, c.store.sqlite_path())
            && let Some(fs) = crate::store::durable::ephemeral_filesystem(path)
        {
            return Err(Error::input(format!(
                "store `{}` of job `{}` is on {}: {}; put it on a persistent volume or use a \
                 PostgreSQL store (refused because a durable store is required)",
                path.display(),
                c.name(),
                fs.name(),
                fs.dies_with()
            )));
        }
    }
    // What cannot become valid while the daemon runs is refused now, not
    // retried once a minute: a component that is missing or broken at
    // start-up, and a store that cannot be a jobhost store. (A component
    // replaced later, or a database that restarts, is retried.)
    let listen = args
        .listen
        .as_deref()
        .map(|l| {
            crate::app::serve::check_listen(
                l,
                args.auth.token_file.as_deref(),
                args.auth.insecure_no_auth,
            )
        })
        .transpose()?;
    crate::run::daemon::check_components(&jobs)?;
    crate::run::daemon::open_stores(&jobs)?;
    let metrics = std::sync::Arc::new(crate::app::serve::DaemonMetrics::default());
    let heartbeat = std::sync::Arc::new(crate::run::liveness::Heartbeat::default());
    let _server = match listen {
        Some((addr, token)) => {
            let origin = jiff::Timestamp::now();
            let shift = start.map(|t| t.duration_since(origin));
            let served = crate::app::serve::start(crate::app::serve::Settings {
                jobs: jobs
                    .iter()
                    .zip(&args.config)
                    .map(|(j, file)| crate::app::serve::ServedJob {
                        schedule: j.schedule.clone(),
                        location: j.store.clone(),
                        digest_cache: j.digest.as_ref().map(|d| d.cache_dir.clone()),
                        target: page_target(args.store.as_deref(), file),
                    })
                    .collect(),
                listen: addr,
                token,
                clock: std::sync::Arc::new(move || {
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
    let clock: Box<dyn Clock> = match (start, runtime.virtual_time) {
        (Some(t), true) => Box::new(VirtualClock::new(t)),
        (Some(t), false) => Box::new(crate::core::clock::ShiftedClock::starting_at(t)),
        (None, true) => Box::new(VirtualClock::new(jiff::Timestamp::now())),
        (None, false) => Box::new(SystemClock),
    };
    let stop = crate::run::daemon::stop_on_signals()?;
    let runtime = Runtime {
        stop: Some(stop),
        defer_digests: true,
        ..runtime.clone()
    };
    let gave_up = GaveUp {
        metrics: metrics.as_ref(),
        keys: std::sync::Mutex::new(Vec::new()),
    };
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
    };
    let out: crate::run::daemon::Output =
        std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
    crate::run::daemon::run(&jobs, &opts, &out)?;
    let keys = gave_up
        .keys
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
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

/// What the commands that only read (`plan`, `status`) take of a job.
struct JobView {
    config: JobConfig,
    schedule: Schedule,
    /// The instant to look at it: `--now`, else the clock.
    now: jiff::Timestamp,
    /// Its store, if it exists.
    store: Option<Box<dyn store::Store>>,
}

/// A job's schedule, instant and store, and nothing else of its config: a
/// monitoring host needs neither its component nor its credentials.
fn job_view(
    file: &std::path::Path,
    store: &Option<PathBuf>,
    now: &Option<String>,
) -> Result<JobView, Error> {
    let config = JobConfig::load(&RunFlags {
        config: Some(file.to_path_buf()),
        store: store.clone(),
        now: now.clone(),
        ..RunFlags::default()
    })?;
    let schedule = config.schedule()?;
    let now = config.now()?.unwrap_or_else(jiff::Timestamp::now);
    let store = store::open_if_exists(&config.store(&env)?)?;
    Ok(JobView {
        config,
        schedule,
        now,
        store,
    })
}

/// How a dashboard page names the job of the config `file` in the commands
/// it prints: by its absolute path, since whoever reads the page is not in
/// the folder the server was started from.
fn page_target(store: Option<&Path>, file: &Path) -> crate::core::command::Target {
    let absolute = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    crate::app::config::command_target(store, Some(&absolute))
}

/// A store that may not exist, lent out for reading.
fn lend(store: &mut Option<Box<dyn store::Store>>) -> Option<&mut dyn store::Ledger> {
    store.as_mut().map(|s| s.as_mut() as &mut dyn store::Ledger)
}

/// Serves the dashboard until stopped.
fn serve(args: ServeArgs) -> Result<(), Error> {
    let (addr, token) = crate::app::serve::check_listen(
        &args.listen,
        args.auth.token_file.as_deref(),
        args.auth.insecure_no_auth,
    )?;
    let mut jobs: Vec<crate::app::serve::ServedJob> = Vec::new();
    let mut now = None;
    for file in &args.config {
        let config = JobConfig::load(&RunFlags {
            config: Some(file.clone()),
            store: args.store.clone(),
            now: args.now.clone(),
            ..RunFlags::default()
        })?;
        let schedule = config.schedule()?;
        if jobs.iter().any(|j| j.schedule.job == schedule.job) {
            return Err(Error::input(format!(
                "job `{}` is named by two --config files (the second is `{}`): give each job once",
                schedule.job,
                file.display()
            )));
        }
        now = config.now()?;
        jobs.push(crate::app::serve::ServedJob {
            location: config.store(&env)?,
            digest_cache: config.digest_cache_dir(),
            target: page_target(args.store.as_deref(), file),
            schedule,
        });
    }
    let stop = crate::run::daemon::stop_on_signals()?;
    let served = crate::app::serve::start(crate::app::serve::Settings {
        jobs,
        listen: addr,
        token,
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
    Ok(())
}

/// Prints each job's status; returns the worst job's exit code.
fn status(args: StatusArgs) -> Result<i32, Error> {
    use crate::run::status::Health;
    let mut worst = Health::Healthy;
    let mut out = std::io::stdout().lock();
    let real_now = jiff::Timestamp::now();
    // With --nagios the job lines follow the one-line summary a plugin
    // prints first.
    let mut lines: Vec<String> = Vec::new();
    let mut by_health: Vec<(Health, String)> = Vec::new();
    for file in &args.config {
        let JobView {
            config,
            schedule,
            now,
            mut store,
        } = job_view(file, &args.store, &args.now)?;
        if store.is_none() && !args.allow_missing {
            return Err(Error::Store(format!(
                "store `{}` of job `{}` does not exist: a mistyped path would read as a job \
                 that never ran; check --store or the config's `store`, or pass \
                 --allow-missing where nothing has run yet (a fresh deploy)",
                config.store(&env)?,
                schedule.job
            )));
        }
        let target = crate::app::config::command_target(args.store.as_deref(), Some(file));
        let st = crate::run::status::status(&schedule, now, lend(&mut store))?;
        worst = worst.max(st.health);
        by_health.push((st.health, schedule.job.to_string()));
        let expected_state = st.expected_state.map_or("not claimed", |s| s.as_str());
        let last_done = st.last_done.as_ref().map(|r| r.key.to_string());
        let retry = |key: &crate::core::window::WindowKey| {
            target.command(&format!(
                "retry {}",
                crate::core::command::shell_quote(key.as_str())
            ))
        };
        // When an unfinished run can be taken over: its lease's end (on
        // the store's clock, which real time stands in for here).
        let resumable = |r: &RunRecord| {
            if r.lease_until <= real_now {
                "now".to_string()
            } else {
                format!("at {}", rfc3339(r.lease_until))
            }
        };
        if args.json {
            let people: Vec<serde_json::Value> = st
                .needs_a_person
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "key": r.key.as_str(), "state": r.state.as_str(), "error": r.error,
                        "retry_command": retry(&r.key),
                    })
                })
                .collect();
            let retrying: Vec<serde_json::Value> = st
                .retrying
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "key": r.key.as_str(), "state": r.state.as_str(), "attempt": r.attempt,
                        "retry_at": r.retry_at.map(rfc3339), "error": r.error,
                        "retry_command": retry(&r.key),
                    })
                })
                .collect();
            let unfinished: Vec<serde_json::Value> = st
                .unfinished
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "key": r.key.as_str(), "state": r.state.as_str(), "owner": r.owner,
                        "attempt": r.attempt, "lease_until": rfc3339(r.lease_until),
                        "messages": r.messages, "delivered": r.delivered,
                        "resumable_at": rfc3339(r.lease_until),
                        "retry_command": retry(&r.key),
                    })
                })
                .collect();
            let skipped: Vec<serde_json::Value> = st
                .skipped
                .iter()
                .map(|r| serde_json::json!({"key": r.key.as_str(), "reason": r.error}))
                .collect();
            let listed: Vec<serde_json::Value> = st
                .holes
                .first
                .iter()
                .map(|h| {
                    serde_json::json!({
                        "key": h.window.key().as_str(),
                        "start": rfc3339(h.window.start),
                        "end": rfc3339(h.window.end),
                        "due": rfc3339(h.due),
                        "late_seconds": now.duration_since(h.due).as_secs().max(0),
                        "run_command": target.command(&format!(
                            "run --for {}",
                            crate::core::command::shell_quote(&h.window.label)
                        )),
                    })
                })
                .collect();
            let line = serde_json::json!({
                "job": schedule.job.as_str(),
                "health": st.health.as_str(),
                "now": rfc3339(now),
                "expected": st.expected.key().as_str(),
                "expected_due": rfc3339(st.expected_due),
                "expected_state": expected_state,
                "expected_late_seconds": st.expected_late.as_secs(),
                "late_seconds": st.late_by.as_secs(),
                "grace_seconds": schedule.grace.as_secs(),
                "last_done": last_done,
                "needs_a_person": people,
                "retrying": retrying,
                "unfinished": unfinished,
                "stuck": st.stuck,
                "skipped_since_last_done": skipped,
                "holes": {
                    "count": st.holes.count,
                    "listed": listed,
                    "truncated": st.holes.truncated,
                    "oldest_late_seconds": st.hole_late.as_secs(),
                },
                "paused": st.paused.as_ref().map(|p| serde_json::json!({
                    "note": p.note, "by": p.by, "since": rfc3339(p.since),
                })),
            });
            let _ = writeln!(out, "{}", json_line(&line.to_string()));
            continue;
        }
        let last = last_done.unwrap_or_else(|| "none".to_string());
        let expected = format!(
            "{} due {} is {expected_state}",
            st.expected.key(),
            rfc3339(st.expected_due)
        );
        let line = match st.health {
            Health::Healthy => format!("{}: healthy; {expected}; last done {last}", schedule.job),
            Health::Paused => {
                let (since, by, note) = st
                    .paused
                    .as_ref()
                    .map(|p| (rfc3339(p.since), p.by.clone(), p.note.clone()))
                    .unwrap_or_default();
                format!(
                    "{}: paused since {since} by {by}: {note}; {expected}; last done {last}; \
                     `{}` lets it run",
                    schedule.job,
                    target.command(&format!("resume {}", schedule.job))
                )
            }
            Health::Late => {
                // Each late thing with its own age, the latest first: the
                // newest due window, the oldest hole.
                let mut late = Vec::new();
                if st.expected_late > st.grace {
                    late.push((st.expected_late, expected.clone()));
                }
                if let Some(h) = st.holes.first.first().filter(|_| st.hole_late > st.grace) {
                    late.push((
                        st.hole_late,
                        format!(
                            "{} due {} has no run (the oldest of {}{} hole(s))",
                            h.window.key(),
                            rfc3339(h.due),
                            if st.holes.truncated { "at least " } else { "" },
                            st.holes.count
                        ),
                    ));
                }
                late.sort_by_key(|l| std::cmp::Reverse(l.0));
                let mut parts: Vec<String> = late
                    .iter()
                    .enumerate()
                    .map(|(i, (by, what))| {
                        if i == 0 {
                            what.clone()
                        } else {
                            format!("also {what}, late by {}", human_duration(*by))
                        }
                    })
                    .collect();
                if st.stuck {
                    parts.push(
                        "an older run is stuck past the grace (its lease or retry time passed)"
                            .to_string(),
                    );
                }
                if st.expected_late <= st.grace {
                    parts.push(expected.clone());
                }
                let head = match late.first() {
                    Some((by, _)) => format!("late by {}", human_duration(*by)),
                    None => "late".to_string(),
                };
                format!(
                    "{}: {head} (grace {}): {}; last done {last}",
                    schedule.job,
                    human_duration(st.grace),
                    parts.join("; ")
                )
            }
            Health::Failed => {
                let people: Vec<String> = st
                    .needs_a_person
                    .iter()
                    .map(|r| {
                        format!(
                            "{} {}{} (`{}` tries it again)",
                            r.key,
                            r.state,
                            r.error
                                .as_deref()
                                .map(|e| format!(": {e}"))
                                .unwrap_or_default(),
                            retry(&r.key)
                        )
                    })
                    .collect();
                format!(
                    "{}: failed, a person must look: {}; last done {last}",
                    schedule.job,
                    people.join("; ")
                )
            }
        };
        let mut notes = Vec::new();
        for r in st.unfinished.iter().take(3) {
            let what = match r.state {
                crate::store::RunState::Prepared => format!(
                    "PREPARED (report committed, {} of {} message(s) delivered)",
                    r.delivered, r.messages
                ),
                _ => format!("CLAIMED (attempt {})", r.attempt),
            };
            let when = resumable(r);
            notes.push(format!(
                "{} is {what}, held by {} until {}; it can be taken over {when} (the daemon \
                 does, or `{}`)",
                r.key,
                r.owner,
                rfc3339(r.lease_until),
                retry(&r.key)
            ));
        }
        if st.unfinished.len() > 3 {
            notes.push(format!(
                "{} more window(s) CLAIMED or PREPARED",
                st.unfinished.len() - 3
            ));
        }
        if let Some(r) = st.retrying.first() {
            notes.push(format!(
                "{} window(s) waiting to retry, the newest {} ({}attempt {}) at {}; `{}` tries \
                 it now",
                st.retrying.len(),
                r.key,
                if r.state == crate::store::RunState::Prepared {
                    "delivery of its committed report, "
                } else {
                    ""
                },
                r.attempt,
                r.retry_at.map(rfc3339).unwrap_or_default(),
                retry(&r.key)
            ));
        }
        if !st.skipped.is_empty() {
            notes.push(format!(
                "{} window(s) skipped by catch-up since the last done one",
                st.skipped.len()
            ));
        }
        if st.holes.count > 0 {
            notes.push(hole_note(&st.holes, &target));
        }
        // The line quotes errors a guest or a destination wrote.
        let line = if notes.is_empty() {
            line
        } else {
            format!("{line}; {}", notes.join("; "))
        };
        lines.push(printable(&line).into_owned());
    }
    if args.nagios {
        let _ = writeln!(out, "{}", nagios_summary(worst, &by_health));
    }
    for line in &lines {
        let _ = writeln!(out, "{line}");
    }
    Ok(if args.nagios {
        nagios_code(worst)
    } else {
        worst.exit_code()
    })
}

/// A Nagios plugin's exit code for the worst job's health: 0 OK, 1
/// WARNING (late, paused), 2 CRITICAL (failed); 3, UNKNOWN, is for an
/// error.
fn nagios_code(worst: crate::run::status::Health) -> i32 {
    use crate::run::status::Health;
    match worst {
        Health::Healthy => 0,
        Health::Paused | Health::Late => 1,
        Health::Failed => 2,
    }
}

/// The line a Nagios plugin prints first: `JOBHOST CRITICAL - 1 failed
/// (sales), 1 late (weekly), 3 healthy`.
fn nagios_summary(
    worst: crate::run::status::Health,
    jobs: &[(crate::run::status::Health, String)],
) -> String {
    use crate::run::status::Health;
    let state = ["OK", "WARNING", "CRITICAL"][nagios_code(worst) as usize];
    let mut parts = Vec::new();
    for h in [
        Health::Failed,
        Health::Late,
        Health::Paused,
        Health::Healthy,
    ] {
        let names: Vec<&str> = jobs
            .iter()
            .filter(|(j, _)| *j == h)
            .map(|(_, n)| n.as_str())
            .collect();
        if names.is_empty() {
            continue;
        }
        parts.push(if h == Health::Healthy {
            format!("{} healthy", names.len())
        } else {
            format!("{} {} ({})", names.len(), h.as_str(), names.join(", "))
        });
    }
    format!("JOBHOST {state} - {}", parts.join(", "))
}

/// The holes of a job in one sentence: how many, the first few, and the
/// command that runs the oldest.
fn hole_note(holes: &crate::run::plan::Holes, target: &crate::core::command::Target) -> String {
    let keys: Vec<String> = holes
        .first
        .iter()
        .map(|h| h.window.key().to_string())
        .collect();
    let more = holes.count.saturating_sub(keys.len());
    let run = holes.first.first().map_or_else(String::new, |h| {
        format!(
            "; `{}` runs the oldest",
            target.command(&format!(
                "run --for {}",
                crate::core::command::shell_quote(&h.window.label)
            ))
        )
    });
    format!(
        "{}{} window(s) due with no run (holes): {}{}{run}",
        if holes.truncated { "at least " } else { "" },
        holes.count,
        keys.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

/// Prints each job's plan.
fn plan(args: PlanArgs) -> Result<(), Error> {
    use crate::run::plan::What;
    let since = args
        .since
        .as_deref()
        .map(|t| crate::core::clock::parse_instant("--since", t))
        .transpose()?;
    let mut out = std::io::stdout().lock();
    for file in &args.config {
        let JobView {
            config,
            schedule: s,
            now,
            mut store,
        } = job_view(file, &args.store, &args.now)?;
        let catch_up = config.catch_up()?;
        let plan = crate::run::plan::plan(&s, catch_up, now, since, lend(&mut store))?;
        let target = crate::app::config::command_target(args.store.as_deref(), Some(file));
        // Runs another invocation started and did not finish, and
        // deliveries waiting out a backoff: when each can go on.
        let unfinished = match lend(&mut store) {
            Some(st) => st.unfinished(s.job.as_str())?,
            None => Vec::new(),
        };
        if !args.json {
            let _ = writeln!(
                out,
                "{}: {} windows in {}, delay {} s, jitter up to {} s, catch_up {catch_up}; now {}",
                s.job,
                s.kind,
                s.zone.name(),
                s.delay.as_secs(),
                s.jitter.as_secs(),
                rfc3339(now)
            );
            if plan.truncated {
                let _ = writeln!(
                    out,
                    "  (only the newest {} due windows are shown)",
                    crate::run::plan::MAX_WINDOWS
                );
            }
        }
        for e in plan.holes.first.iter().chain(&plan.entries) {
            let (what, detail) = match &e.what {
                What::Hole => (
                    "hole",
                    format!(
                        "due with no run; `{}` runs it",
                        target.command(&format!(
                            "run --for {}",
                            crate::core::command::shell_quote(&e.window.label)
                        ))
                    ),
                ),
                What::Run => ("run", String::new()),
                What::Skip(why) => ("skip", why.clone()),
                What::Recorded(state) => ("recorded", state.to_string()),
                What::Next => ("next", String::new()),
            };
            if args.json {
                let mut line = serde_json::json!({
                    "job": s.job.as_str(),
                    "key": e.window.key().as_str(),
                    "due": rfc3339(e.due),
                    "decision": what,
                    "now": rfc3339(now),
                });
                if !detail.is_empty() {
                    line["detail"] = detail.into();
                }
                if plan.truncated {
                    line["truncated"] = true.into();
                }
                if e.what == What::Hole {
                    line["holes"] = plan.holes.count.into();
                    if plan.holes.truncated {
                        line["holes_truncated"] = true.into();
                    }
                }
                let _ = writeln!(out, "{}", json_line(&line.to_string()));
            } else {
                let line = format!(
                    "  {what:<9} {:<32} due {}{}",
                    e.window.key().as_str(),
                    rfc3339(e.due),
                    if detail.is_empty() {
                        String::new()
                    } else {
                        format!("  {detail}")
                    }
                );
                let _ = writeln!(out, "{}", printable(&line));
            }
            let last_hole = plan.holes.first.last().map(|h| h.window.key());
            let more = plan.holes.count.saturating_sub(plan.holes.first.len());
            if !args.json && more > 0 && last_hole.is_some_and(|k| k == e.window.key()) {
                let _ = writeln!(
                    out,
                    "  {:<9} and {}{more} more hole(s) after these",
                    "",
                    if plan.holes.truncated {
                        "at least "
                    } else {
                        ""
                    }
                );
            }
        }
        for r in &unfinished {
            let retry = target.command(&format!(
                "retry {}",
                crate::core::command::shell_quote(r.key.as_str())
            ));
            let (what, at, detail) = match r.retry_at {
                Some(t) => (
                    "retry",
                    t,
                    format!(
                        "{} attempt {} failed; the next one at this time; `{retry}` tries it now",
                        r.state, r.attempt
                    ),
                ),
                None => (
                    "resume",
                    r.lease_until,
                    format!(
                        "{} by {}: can be taken over when its lease ends, at this time; `{retry}` \
                         then",
                        r.state, r.owner
                    ),
                ),
            };
            if args.json {
                let line = serde_json::json!({
                    "job": s.job.as_str(),
                    "key": r.key.as_str(),
                    "decision": what,
                    "state": r.state.as_str(),
                    "owner": r.owner,
                    "at": rfc3339(at),
                    "detail": detail,
                    "now": rfc3339(now),
                });
                let _ = writeln!(out, "{}", json_line(&line.to_string()));
            } else {
                let line = format!(
                    "  {what:<9} {:<32} at  {}  {detail}",
                    r.key.as_str(),
                    rfc3339(at)
                );
                let _ = writeln!(out, "{}", printable(&line));
            }
        }
    }
    Ok(())
}

/// Writes a run's replay file, with the component that ran unless
/// `--without-component`.
fn export(args: ExportArgs) -> Result<(), Error> {
    let mut store =
        store::open_read_only(&store_location(args.store.clone(), args.config.as_deref())?)?;
    let key = crate::core::window::WindowKey::from_stored(args.key);
    let mut recording = crate::run::replay::Recording::from_store(store.as_mut(), &key)?;
    if recording.bodies_pruned {
        return Err(Error::input(format!(
            "run `{key}` was pruned (`jobhost prune --keep-journals` kept its journal, not its \
             delivered message bodies): a replay file of it could not compare its messages; \
             export runs before they are pruned"
        )));
    }
    if !args.without_component {
        // `--component`, else the config's `component`.
        let from_config = match (&args.component, &args.config) {
            (None, Some(file)) => JobConfig::load(&RunFlags {
                config: Some(file.clone()),
                ..RunFlags::default()
            })?
            .component()
            .ok(),
            _ => None,
        };
        let Some(path) = args.component.clone().or(from_config) else {
            return Err(Error::input(format!(
                "run `{key}` was recorded with component {}, which export embeds: pass \
                 --component with its .wasm file or --config with the job's config, or \
                 --without-component to write the file without it",
                recording.component
            )));
        };
        recording.embed_file(&path)?;
    }
    let bytes = recording.to_file()?;
    let out = &args.output;
    let tmp = out.with_extension("partial");
    std::fs::write(&tmp, &bytes)
        .and_then(|()| std::fs::rename(&tmp, out))
        .map_err(|e| Error::input(format!("cannot write `{}`: {e}", out.display())))?;
    let carried = match &recording.embedded {
        Some(wasm) => format!("embedded ({} bytes)", wasm.len()),
        None => "not embedded".to_string(),
    };
    println!(
        "{}",
        printable(&format!(
            "wrote {} ({} bytes): {key}, component {} {carried}, {} message(s)",
            out.display(),
            bytes.len(),
            recording.component,
            recording.messages.len()
        ))
    );
    Ok(())
}

/// One replayed window as a JSON object.
fn verdict_json(
    key: &str,
    verdict: &crate::run::replay::Verdict,
    recorded: Option<&str>,
    component: &str,
    overridden: &[crate::run::replay::Overridden],
) -> serde_json::Value {
    use crate::run::replay::Verdict;
    let (differences, reason, messages) = match verdict {
        Verdict::Identical { messages, .. } => (&[][..], None, Some(*messages)),
        Verdict::Different(d) => (&d[..], None, None),
        Verdict::Diverged(r) | Verdict::Failed(r) => (&[][..], Some(r.as_str()), None),
    };
    serde_json::json!({
        "key": key,
        "verdict": verdict.name(),
        "differences": differences,
        "reason": reason,
        "messages": messages,
        "recorded_component": recorded,
        "component": component,
        "overridden": overridden.iter().map(|o| serde_json::json!({
            "name": o.name,
            "recorded": o.recorded,
            "replayed": o.replayed,
        })).collect::<Vec<_>>(),
    })
}

/// Writes `line` as one JSON line.
fn print_json(out: &mut impl Write, line: &serde_json::Value) {
    let _ = writeln!(out, "{}", json_line(&line.to_string()));
}

/// Replays a run (or with `--last`, a job's newest windows) and prints the
/// verdicts; 0 identical, 1 different, 3 no comparable result.
fn replay(args: ReplayArgs) -> Result<i32, Error> {
    use crate::guest::sandbox::ComponentFile;
    use crate::run::replay::{self, Recording, Tally, Verdict};
    let params = replay::parse_params(&args.params)?;
    let last = args.last.as_deref().map(last_count).transpose()?;
    let sandbox = crate::guest::sandbox::Sandbox::new()?;
    let cache = crate::guest::cache::CompileCache::new(
        args.cache_dir
            .clone()
            .or_else(crate::guest::cache::CompileCache::default_dir),
    );
    if let Some(n) = last {
        return replay_last(&args, n, &params, &sandbox, &cache);
    }
    let (key, mut recording) = match (&args.file, &args.key) {
        (Some(file), _) => {
            let recording = Recording::from_file(&Recording::read_file(file)?)?;
            (recording.journal.context.key.clone(), recording)
        }
        (None, key) => {
            let mut store = store::open_read_only(&store_location(
                args.store.clone(),
                args.config.as_deref(),
            )?)?;
            let key = key.clone().unwrap_or_default();
            let window_key = crate::core::window::WindowKey::from_stored(key.clone());
            let recording = match args.revision {
                Some(n) => Recording::from_revision(store.as_mut(), &window_key, n)?,
                None => Recording::from_store(store.as_mut(), &window_key)?,
            };
            (key, recording)
        }
    };
    let embedded = recording.embedded.take();
    let (component, whence) = match (&args.component, embedded) {
        (Some(p), _) => (
            sandbox.load(&mut ComponentFile::open(p, &cache)?, &cache)?,
            "",
        ),
        // Checked against the recorded digest when the file was read.
        (None, Some(wasm)) => {
            let shown = format!(
                "the component in {}",
                args.file.as_deref().unwrap_or(Path::new("")).display()
            );
            (
                sandbox.load(&mut ComponentFile::in_memory(shown, wasm), &cache)?,
                " (the one the file carries)",
            )
        }
        (None, None) => {
            let hex = recording
                .component
                .strip_prefix("sha256:")
                .unwrap_or(&recording.component);
            (sandbox.load_cached(hex, &cache)?, "")
        }
    };
    let overridden = recording.override_params(&params);
    let mut out = std::io::stdout().lock();
    if !args.json {
        // A replay file is input: its key and texts are shown escaped.
        let _ = writeln!(
            out,
            "{}",
            printable(&format!(
                "replaying {key} (recorded with {}) with {}{whence}",
                recording.component, component.digest
            ))
        );
        for o in &overridden {
            let _ = writeln!(out, "{}", printable(&o.to_string()));
        }
    }
    let verdict = replay::judge(
        &recording,
        replay::replay(&sandbox, &component, &recording)?,
    );
    let mut tally = Tally::default();
    tally.add(&verdict);
    if args.json {
        print_json(
            &mut out,
            &verdict_json(
                &key,
                &verdict,
                Some(&recording.component),
                &component.digest,
                &overridden,
            ),
        );
        return Ok(tally.exit_code());
    }
    match &verdict {
        Verdict::Identical { messages, bytes } => {
            let _ = writeln!(
                out,
                "identical: the report and {messages} message(s) ({bytes} bytes) are bit for bit what was recorded"
            );
        }
        Verdict::Different(diffs) => {
            let _ = writeln!(out, "different: {} difference(s)", diffs.len());
            for d in diffs {
                let _ = writeln!(out, "  {}", printable(d));
            }
        }
        Verdict::Diverged(reason) | Verdict::Failed(reason) => {
            let _ = writeln!(out, "{}: {}", verdict.name(), printable(reason));
        }
    }
    Ok(tally.exit_code())
}

/// `--last N`: a number of windows, at least 1.
fn last_count(text: &str) -> Result<usize, Error> {
    match text.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Error::input(format!(
            "invalid `--last {}`: give how many windows to replay, 1 or more (for example \
             --last 7)",
            crate::core::text::cap(text, 200)
        ))),
    }
}

/// `replay --last N`: the job's newest N recorded windows against one
/// component, compiled once; one line (or JSON object) per window and a
/// summary.
fn replay_last(
    args: &ReplayArgs,
    asked: usize,
    params: &[(String, String)],
    sandbox: &crate::guest::sandbox::Sandbox,
    cache: &crate::guest::cache::CompileCache,
) -> Result<i32, Error> {
    use crate::run::replay::{self, Recording, Tally, Verdict};
    let mut store =
        store::open_read_only(&store_location(args.store.clone(), args.config.as_deref())?)?;
    let job = match (&args.job, &args.config) {
        (Some(j), _) => Some(j.clone()),
        (None, Some(file)) => Some(
            JobConfig::load(&RunFlags {
                config: Some(file.clone()),
                ..RunFlags::default()
            })?
            .name()?
            .as_str()
            .to_string(),
        ),
        (None, None) => None,
    };
    let job = replay::pick_job(store.as_mut(), job.as_deref())?;
    let keys = replay::last_recorded(store.as_mut(), &job, asked)?;
    // Clap makes --last require --component.
    let path = args.component.clone().unwrap_or_default();
    let component = sandbox.load(
        &mut crate::guest::sandbox::ComponentFile::open(&path, cache)?,
        cache,
    )?;
    let mut out = std::io::stdout().lock();
    if !args.json {
        let fewer = if keys.len() < asked {
            format!(
                " (only {} of the {asked} asked for have a committed report and journal)",
                keys.len()
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{}",
            printable(&format!(
                "replaying the last {} window(s) of {job}{fewer} with {} ({})",
                keys.len(),
                component.digest,
                path.display()
            ))
        );
    }
    let mut tally = Tally::default();
    let mut said: Option<Vec<replay::Overridden>> = None;
    for key in &keys {
        let replayed = Recording::from_store(store.as_mut(), key).and_then(|mut recording| {
            let overridden = recording.override_params(params);
            let replayed = replay::replay(sandbox, &component, &recording)?;
            Ok((
                replay::judge(&recording, replayed),
                overridden,
                Some(recording.component),
            ))
        });
        // A window that cannot be replayed is said as such; the others go on.
        let (verdict, overridden, recorded) =
            replayed.unwrap_or_else(|e| (Verdict::Failed(e.to_string()), Vec::new(), None));
        tally.add(&verdict);
        if args.json {
            print_json(
                &mut out,
                &verdict_json(
                    key.as_str(),
                    &verdict,
                    recorded.as_deref(),
                    &component.digest,
                    &overridden,
                ),
            );
            continue;
        }
        // Overrides are said before the first window they apply to, and
        // again when the recorded values they replace change.
        if !overridden.is_empty() && said.as_ref() != Some(&overridden) {
            for o in &overridden {
                let _ = writeln!(out, "{}", printable(&o.to_string()));
            }
            said = Some(overridden);
        }
        let line = match &verdict {
            Verdict::Identical { .. } => format!("{key}: identical"),
            Verdict::Different(diffs) => {
                let more = match diffs.len() {
                    0 | 1 => String::new(),
                    n => format!(" (and {} more)", n - 1),
                };
                format!(
                    "{key}: different: {}{more}",
                    diffs.first().map_or("", String::as_str)
                )
            }
            Verdict::Diverged(reason) | Verdict::Failed(reason) => {
                format!("{key}: {}: {reason}", verdict.name())
            }
        };
        let _ = writeln!(out, "{}", printable(&line));
    }
    if args.json {
        let mut summary = serde_json::to_value(tally).unwrap_or_default();
        summary["job"] = job.into();
        summary["component"] = component.digest.clone().into();
        print_json(&mut out, &summary);
    } else {
        let _ = writeln!(out, "{tally}");
    }
    Ok(tally.exit_code())
}

/// A run's digest in a table cell: its status and the start of its text.
fn digest_cell(
    r: &RunRecord,
    cache: Option<&crate::effects::digest::cache::DigestCache>,
) -> String {
    let Some(v) = digest_view(r, cache) else {
        return String::new();
    };
    let mut status = v["status"].as_str().unwrap_or_default().to_string();
    if status != "failed" && v.get("error").is_some() {
        status.push_str(" (the last try failed)");
    }
    match v["text"].as_str() {
        Some(text) => {
            // The start of a model's text (the table escapes it, as every
            // cell).
            let short: String = text.chars().take(40).collect();
            let more = if text.chars().count() > 40 { "…" } else { "" };
            format!("{status}: {short}{more}")
        }
        None => status,
    }
}

fn write_table(
    out: &mut impl Write,
    runs: &[RunRecord],
    cache: Option<&crate::effects::digest::cache::DigestCache>,
) -> std::io::Result<()> {
    if runs.is_empty() {
        return writeln!(out, "no runs recorded");
    }
    // Every cell is escaped: errors and reasons quote guests and
    // destinations, and a store is a file anyone with access can edit.
    let rows: Vec<[String; 13]> = runs
        .iter()
        .map(|r| {
            let component = r.component.strip_prefix("sha256:").unwrap_or(&r.component);
            let component = if component.is_empty() {
                "-".to_string()
            } else {
                format!("sha256:{}", component.chars().take(12).collect::<String>())
            };
            [
                r.key.to_string(),
                rfc3339(r.window_start),
                rfc3339(r.window_end),
                r.state.to_string(),
                r.revision.to_string(),
                if r.state == store::RunState::Skipped {
                    "-".to_string()
                } else {
                    rfc3339(r.updated_at)
                },
                r.attempt.to_string(),
                r.fence.to_string(),
                format!("{}/{}", r.delivered, r.messages),
                component,
                r.journal_bytes.map(human_bytes).unwrap_or_default(),
                digest_cell(r, cache),
                r.error.clone().unwrap_or_default(),
            ]
            .map(|cell| printable(&cell).into_owned())
        })
        .collect();
    let header = [
        "KEY",
        "START",
        "END",
        "STATE",
        "REV",
        "RAN",
        "ATTEMPT",
        "FENCE",
        "SENT",
        "COMPONENT",
        "JOURNAL",
        "DIGEST",
        "DETAIL",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[&str]| {
        let mut s = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        s.trim_end().to_string()
    };
    writeln!(out, "{}", line(&header))?;
    for row in &rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        writeln!(out, "{}", line(&cells))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nagios_states_follow_the_worst_job() {
        use crate::run::status::Health;
        let jobs = [
            (Health::Healthy, "a".to_string()),
            (Health::Failed, "sales".to_string()),
            (Health::Late, "weekly".to_string()),
            (Health::Healthy, "b".to_string()),
        ];
        assert_eq!(
            nagios_summary(Health::Failed, &jobs),
            "JOBHOST CRITICAL - 1 failed (sales), 1 late (weekly), 2 healthy"
        );
        assert_eq!(
            [
                Health::Healthy,
                Health::Paused,
                Health::Late,
                Health::Failed
            ]
            .map(nagios_code),
            [0, 1, 1, 2]
        );
    }

    #[test]
    fn lateness_reads_as_its_two_largest_units() {
        let d = |s: i64| human_duration(jiff::SignedDuration::from_secs(s));
        assert_eq!(d(45), "45s");
        assert_eq!(d(18 * 3600 + 58 * 60 + 30), "18h58m");
        assert_eq!(d(2 * 86_400 + 3 * 3600 + 59), "2d3h");
        assert_eq!(d(3600), "1h");
        assert_eq!(d(90), "1m30s");
        assert_eq!(d(0), "0s");
        assert_eq!(d(-5), "0s");
    }

    #[test]
    fn the_version_names_the_wit_package() {
        assert!(version_text().ends_with("(WIT jobhost:report@0.1.1)"));
        assert!(version_text().starts_with(env!("CARGO_PKG_VERSION")));
    }
}
