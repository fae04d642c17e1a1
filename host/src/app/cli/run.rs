//! `jobhost run`: one window, once, and one JSON receipt on stdout whatever
//! happened.

use std::path::PathBuf;

use super::Out;
use crate::app::args::env;
use crate::app::config::{JobConfig, RunFlags};
use crate::core::command::Target;
use crate::core::error::Error;
use crate::run::receipt::{Event, ReceiptLevel};
use crate::run::{Outcome, Runtime};

/// `jobhost run`.
#[derive(Debug, Default, clap::Args)]
pub(super) struct RunArgs {
    /// The report component (.wasm, built for wasm32-wasip2).
    #[arg(long, value_name = "PATH")]
    component: Option<PathBuf>,
    /// A TOML job config; flags override its values.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The job's name, part of every window key [default: daily-report].
    #[arg(long, value_name = "NAME")]
    job: Option<String>,
    /// Window length: 1m to 30m (a divisor of an hour), hour, day, week, month or quarter [default: day].
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
    /// For a job with `[[needs]]`: when an upstream window the window needs
    /// is not DONE yet, wait up to this many seconds for it, looking again
    /// every second, and run the window as soon as it is (else answer
    /// `waiting`) [default: answer at once].
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    wait: Option<u64>,
}

impl RunArgs {
    /// `run`'s flags (`args`: what follows `run`) read without clap, for
    /// the plain lines a scheduler starts every tick: each flag at most
    /// once, as `--flag value` or `--flag=value`, every value non-empty
    /// and not starting with `-`, `--wait` whole seconds from 1 to 86400;
    /// `--store` and `--cache-dir` from `env` when absent, as clap reads
    /// them. `None` for anything else (help, a bad or repeated flag, a
    /// value clap might refuse, an empty variable), which the whole parser
    /// then reads, and answers or refuses in its own words.
    pub(super) fn plain(
        args: &[std::ffi::OsString],
        env: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Option<RunArgs> {
        let mut run = RunArgs::default();
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            let flag = arg.to_str()?.strip_prefix("--")?;
            if flag == "require-durable-store" {
                if run.require_durable_store {
                    return None;
                }
                run.require_durable_store = true;
                continue;
            }
            let (name, value) = match flag.split_once('=') {
                Some((name, value)) => (name, value),
                None => (flag, rest.next()?.to_str()?),
            };
            if value.is_empty() || value.starts_with('-') {
                return None;
            }
            let path = || PathBuf::from(value);
            let text = || value.to_string();
            match name {
                "component" => once(&mut run.component, path())?,
                "config" => once(&mut run.config, path())?,
                "store" => once(&mut run.store, path())?,
                "cache-dir" => once(&mut run.cache_dir, path())?,
                "job" => once(&mut run.job, text())?,
                "window" => once(&mut run.window, text())?,
                "tz" => once(&mut run.tz, text())?,
                "now" => once(&mut run.now, text())?,
                "for" => once(&mut run.for_window, text())?,
                "receipt" => once(&mut run.receipt, text())?,
                "wait" => {
                    let seconds = value
                        .bytes()
                        .all(|b| b.is_ascii_digit())
                        .then(|| value.parse::<u64>().ok())
                        .flatten()
                        .filter(|s| (1..=86_400).contains(s))?;
                    once(&mut run.wait, seconds)?;
                }
                _ => return None,
            }
        }
        for (slot, var) in [
            (&mut run.store, "JOBHOST_STORE"),
            (&mut run.cache_dir, "JOBHOST_CACHE_DIR"),
        ] {
            if slot.is_none()
                && let Some(value) = env(var)
            {
                if value.is_empty() {
                    return None;
                }
                *slot = Some(PathBuf::from(value));
            }
        }
        Some(run)
    }

    /// How the commands this run prints name its job.
    pub(super) fn target(&self) -> Target {
        crate::app::config::command_target(self.store.as_deref(), self.config.as_deref())
    }
}

/// Fills `slot` with `value` if it was empty; `None` if it was not (a flag
/// given twice, which clap refuses).
fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    slot.replace(value).is_none().then_some(())
}

/// Runs the window; the receipt is printed even for bad input. Exit codes
/// as the receipt's outcome says.
pub(super) fn main(args: RunArgs, runtime: &Runtime) -> Result<i32, Error> {
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
            let mut runtime = runtime.at(now.or(runtime.now));
            runtime.wait_for_needs = args.wait.map(std::time::Duration::from_secs);
            match &args.for_window {
                Some(text) => {
                    crate::run::run_for(&job, text, &crate::run::operate::actor_id(), &runtime)
                }
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
    Out::stdout().line(&outcome.receipt.line(level))?;
    Ok(outcome.exit_code)
}
