//! The command line: the clap types of every command and the glue that
//! turns them into library calls and prints what they return, one file
//! per command (`run`, `history`, `replay`, `export`, `plan`, `status`,
//! `daemon`, `serve`, `digest`, `compile` and `new`, and what a person does
//! on purpose: `backfill`, `rerun` and `retry`, `forget`, `pause` and
//! `resume`, `prune`). No domain logic lives here. Every command ends
//! through one path ([`main_with`]): a value it returns is the exit code;
//! an error is said on stderr in one line and exits with its code.
//! Standard output goes through [`Out`], so a reader that stops reading
//! (`| head`) ends a listing quietly.

mod backfill;
mod check;
mod compile;
mod daemon;
mod digest;
mod export;
mod flags;
mod forget;
mod history;
mod new;
mod pause;
mod plan;
mod prune;
mod replay;
mod rerun;
mod run;
mod serve;
mod status;
mod verify;

use std::io::Write;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::app::args::env;
use crate::app::config::{JobConfig, RunFlags};
use crate::core::error::Error;
use crate::core::schedule::Schedule;
use crate::run::Runtime;
use crate::run::receipt::{Event, Receipt};
use crate::store;

use backfill::BackfillArgs;
use check::CheckArgs;
use compile::CompileArgs;
use daemon::DaemonArgs;
use digest::DigestArgs;
use export::ExportArgs;
use forget::ForgetArgs;
use history::HistoryArgs;
use new::NewArgs;
use pause::{PauseArgs, ResumeArgs};
use plan::PlanArgs;
use prune::PruneArgs;
use replay::ReplayArgs;
use rerun::{RerunArgs, RetryArgs};
use run::RunArgs;
use serve::ServeArgs;
use status::StatusArgs;
use verify::{KeygenArgs, VerifyArgs, VerifyMessageArgs};

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
    Backfill(BackfillArgs),
    /// Run a DONE window again on purpose, as a new revision whose messages
    /// carry new idempotency keys.
    Rerun(RerunArgs),
    /// Read each DONE window's source again and mark the windows whose rows
    /// changed since their run STALE: exit 0 none changed, 6 some did.
    Check(CheckArgs),
    /// Try a FAILED or ABANDONED window, or a committed report whose
    /// delivery waits out its backoff, again now, as a new series of
    /// attempts (its messages keep their idempotency keys).
    Retry(RetryArgs),
    /// Remove a FAILED, ABANDONED or SKIPPED window's decision so that it
    /// runs again as if new; kept as an audit line.
    Forget(ForgetArgs),
    /// Stop claiming a job's windows, on every host sharing the store.
    Pause(PauseArgs),
    /// Let a paused job run again.
    Resume(ResumeArgs),
    /// Drop the journals and delivered message bodies of old DONE runs,
    /// keeping their rows.
    Prune(PruneArgs),
    /// Make an Ed25519 key that signs the chain's entries and messages
    /// (`[signing] key_file`), and its public key beside it.
    Keygen(KeygenArgs),
    /// Check every job's chain against itself and the rows, or an exported
    /// run offline: exit 0 verified, 7 a broken link or a change made
    /// outside jobhost.
    Verify(VerifyArgs),
    /// Check a delivered message's signature with the job's public key:
    /// exit 0 verified, 7 not.
    VerifyMessage(VerifyMessageArgs),
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

/// Parses the command line, runs it, and returns the process exit code.
pub fn main() -> i32 {
    main_with(&Runtime::default())
}

/// [`main`] with a given runtime (the test suite's build of the command line
/// passes a virtual clock and failpoints).
pub fn main_with(runtime: &Runtime) -> i32 {
    let cli = match parse(std::env::args_os().collect()) {
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
                let _ = Out::stdout().line(&receipt.to_json_line());
            }
            return 2;
        }
    };
    // The commands jobhost prints name the config or store this command
    // line gave, so that they paste (commands over several jobs name each
    // job's own config where they print one).
    let single = match &cli.command {
        Command::Run(a) => Some(a.target()),
        Command::History(a) => Some(a.target()),
        Command::Replay(a) => Some(a.target()),
        Command::Export(a) => Some(a.target()),
        Command::Digest(a) => Some(a.target()),
        Command::Forget(a) => Some(a.target()),
        Command::Pause(a) => Some(a.target()),
        Command::Resume(a) => Some(a.target()),
        Command::Prune(a) => Some(a.target()),
        _ => None,
    };
    if let Some(target) = single {
        crate::core::command::set_process_target(target);
    }
    // What this process writes to a store is signed with the key
    // $JOBHOST_SIGNING_KEY names, unless a job's `[signing]` names one.
    let checks = matches!(
        cli.command,
        Command::Keygen(_) | Command::Verify(_) | Command::VerifyMessage(_)
    );
    if !checks && let Err(e) = crate::store::chain::sign_with_env() {
        crate::core::text::say("error", &crate::core::text::printable(&e.chain()));
        return e.exit_code();
    }
    // What a daemon or the dashboard still has to write gets a bounded time
    // when the command ends, however it ends.
    let _finish = crate::core::spool::Finish;
    let ended = match cli.command {
        Command::Run(args) => run::main(args, runtime),
        Command::Backfill(args) => backfill::main(args, runtime),
        Command::Rerun(args) => rerun::rerun(args, runtime),
        Command::Retry(args) => rerun::retry(args, runtime),
        Command::Check(args) => check::main(args, runtime),
        Command::Forget(args) => forget::main(args),
        Command::Pause(args) => pause::pause(args),
        Command::Resume(args) => pause::resume(args),
        Command::Prune(args) => prune::main(args),
        Command::History(args) => history::main(args),
        Command::Export(args) => export::main(args),
        Command::Digest(args) => digest::main(args, runtime),
        Command::Compile(args) => compile::main(args),
        Command::New(args) => new::main(args),
        Command::Daemon(args) => daemon::main(args, runtime),
        Command::Serve(args) => serve::main(args, runtime),
        Command::Status(args) => status::main(args),
        Command::Plan(args) => plan::main(args),
        Command::Replay(args) => replay::main(args),
        Command::Keygen(args) => verify::keygen(args),
        Command::Verify(args) => verify::verify(args),
        Command::VerifyMessage(args) => verify::verify_message(args),
    };
    crate::store::close_idle();
    // The traces of this command's runs get a short, bounded time to go.
    crate::effects::telemetry::flush(crate::effects::telemetry::FLUSH_AT_EXIT);
    match ended {
        Ok(code) => code,
        Err(e) => {
            crate::core::text::say("error", &crate::core::text::printable(&e.chain()));
            e.exit_code()
        }
    }
}

/// The command line, parsed. `jobhost run` (the command a scheduler starts
/// every tick, mostly to learn its window is done) is read first without
/// clap ([`RunArgs::plain`]): building every command's flags cost a
/// process a tenth of what answering "done" does, and clap's setup of
/// `run`'s own flags a twentieth. Anything that reading does not take
/// (help, a bad flag, another command) is parsed by clap, so what is
/// printed and refused is the same.
fn parse(args: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
    if args.get(1).is_some_and(|a| a == "run")
        && let Some(run) = RunArgs::plain(&args[2..], |name| std::env::var_os(name))
    {
        return Ok(Cli {
            command: Command::Run(run),
        });
    }
    Cli::try_parse_from(args)
}

/// Standard output for a command's lines. A reader that stopped reading
/// (a closed pipe: `jobhost history | head -1`) is not an error: what is
/// written after it is dropped, [`Out::closed`] says so, a listing stops
/// there, and the command exits as it would have.
pub(crate) struct Out {
    inner: std::io::Stdout,
    closed: bool,
}

impl Out {
    /// The process's standard output.
    pub(crate) fn stdout() -> Out {
        Out {
            inner: std::io::stdout(),
            closed: false,
        }
    }

    /// Writes `text` and a newline.
    ///
    /// # Errors
    ///
    /// `Error::Host` when standard output fails for another reason than a
    /// reader gone (a full disk, say).
    pub(crate) fn line(&mut self, text: &str) -> Result<(), Error> {
        writeln!(self, "{text}").map_err(written)
    }

    /// Whether the reader has gone: nothing more will be read.
    pub(crate) fn closed(&self) -> bool {
        self.closed
    }

    /// What a closed pipe does to a write: nothing, once it is known.
    fn gone<T>(&mut self, result: std::io::Result<T>, all: T) -> std::io::Result<T> {
        match result {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(all)
            }
            other => other,
        }
    }
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.closed {
            return Ok(buf.len());
        }
        let written = self.inner.write(buf);
        self.gone(written, buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let flushed = self.inner.flush();
        self.gone(flushed, ())
    }
}

/// Writes `value` to `out` as one JSON line.
///
/// # Errors
///
/// `Error::Host` when standard output fails (not when its reader went).
pub(crate) fn write_json(out: &mut Out, value: &impl serde::Serialize) -> Result<(), Error> {
    let text = serde_json::to_string(value)
        .map_err(|e| Error::host("cannot write a JSON line").because(e))?;
    out.line(&crate::core::text::json_line(&text))
}

/// Prints `value` on standard output as one JSON line.
///
/// # Errors
///
/// As [`write_json`].
pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<(), Error> {
    write_json(&mut Out::stdout(), value)
}

/// A write to standard output that failed for another reason than a
/// reader gone.
fn written(e: std::io::Error) -> Error {
    Error::host("cannot write to standard output").because(e)
}

/// What the commands that only read (`plan`, `status`) take of a job.
pub(super) struct JobView {
    pub(super) config: JobConfig,
    pub(super) schedule: Schedule,
    /// The instant to look at it: `--now`, else the clock.
    pub(super) now: jiff::Timestamp,
    /// Its store, if it exists.
    pub(super) store: Option<Box<dyn store::Store>>,
}

/// A job's schedule, instant and store, and nothing else of its config: a
/// monitoring host needs neither its component nor its credentials.
pub(super) fn job_view(
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

/// A store that may not exist, lent out for reading.
pub(super) fn lend(store: &mut Option<Box<dyn store::Store>>) -> Option<&mut dyn store::Ledger> {
    store.as_mut().map(|s| s.as_mut() as &mut dyn store::Ledger)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_names_the_wit_package() {
        assert!(version_text().ends_with("(WIT jobhost:report@0.1.1)"));
        assert!(version_text().starts_with(env!("CARGO_PKG_VERSION")));
    }

    /// `run`'s own parser takes a command line exactly as the whole one
    /// does, and what it does not take is refused (or helped) in the whole
    /// one's words.
    #[test]
    fn run_is_parsed_as_the_whole_command_line_parses_it() {
        let lines: &[&[&str]] = &[
            &["run"],
            &["run", "--config", "job.toml"],
            &[
                "run",
                "--config=job.toml",
                "--store",
                "s.db",
                "--now",
                "2026-11-09T00:05:00Z",
            ],
            &[
                "run",
                "--component",
                "r.wasm",
                "--job",
                "j",
                "--window",
                "hour",
                "--tz",
                "UTC",
            ],
            &[
                "run",
                "--for",
                "2026-11-08",
                "--receipt",
                "brief",
                "--wait",
                "30",
            ],
            &[
                "run",
                "--require-durable-store",
                "--cache-dir",
                "c",
                "--",
                "x",
            ],
            &["run", "--wait", "0"],
            &["run", "--wait", "86401"],
            &["run", "--wait", "+5"],
            &["run", "--wait", "007"],
            &["run", "--wait=86400", "--tz=Europe/Berlin"],
            &["run", "--config", "a.toml", "--config", "b.toml"],
            &["run", "--require-durable-store", "--require-durable-store"],
            &["run", "--require-durable-store=true"],
            &["run", "--config="],
            &["run", "--config", "-x"],
            &["run", "--config=-x"],
            &["run", "--store=a=b.db", "--job", "jö"],
            &["run", "--job", ""],
            &["run", "--Config", "a.toml"],
            &["run", "-config", "a.toml"],
            &["run", "--nope"],
            &["run", "--config"],
            &["run", "extra"],
            &["run", "--help"],
            &["run", "-h"],
            &["run", "--version"],
            &["run", "help"],
            &["history", "--config", "job.toml"],
            &["runs"],
            &[],
        ];
        for line in lines {
            let args: Vec<std::ffi::OsString> = std::iter::once("jobhost")
                .chain(line.iter().copied())
                .map(Into::into)
                .collect();
            let fast = parse(args.clone());
            let whole = Cli::try_parse_from(args.clone());
            let left_to_clap = line
                .iter()
                .any(|a| a.is_empty() || a.ends_with("-x") || *a == "+5");
            if whole.is_ok() && line.first() == Some(&"run") && !left_to_clap {
                // Every line clap takes is read without it, but for a value
                // that is empty or starts with `-` or a sign (left to clap).
                assert!(RunArgs::plain(&args[2..], |_| None).is_some(), "{line:?}");
            }
            match (fast, whole) {
                (Ok(a), Ok(b)) => assert_eq!(format!("{a:?}"), format!("{b:?}"), "{line:?}"),
                (Err(a), Err(b)) => {
                    assert_eq!(a.kind(), b.kind(), "{line:?}");
                    assert_eq!(a.render().to_string(), b.render().to_string(), "{line:?}");
                }
                (a, b) => panic!("{line:?}: run's parser gave {a:?}, the whole one {b:?}"),
            }
        }
    }

    /// Read without clap, `--store` and `--cache-dir` come from their
    /// variables when the flags are absent, as clap takes them; an empty
    /// variable is left to clap, which refuses it.
    #[test]
    fn run_read_without_clap_takes_the_store_and_cache_from_the_environment() {
        let env = |name: &str| match name {
            "JOBHOST_STORE" => Some("from-env.db".into()),
            "JOBHOST_CACHE_DIR" => Some("cache-from-env".into()),
            _ => None,
        };
        let args: Vec<std::ffi::OsString> = vec!["--store".into(), "flag.db".into()];
        let run = RunArgs::plain(&args, env).expect("a plain line");
        let shown = format!("{run:?}");
        assert!(shown.contains("\"flag.db\""), "{shown}");
        assert!(shown.contains("\"cache-from-env\""), "{shown}");
        assert!(!shown.contains("from-env.db"), "{shown}");
        let run = RunArgs::plain(&[], env).expect("a plain line");
        assert!(format!("{run:?}").contains("\"from-env.db\""));
        let empty = |name: &str| (name == "JOBHOST_STORE").then(std::ffi::OsString::new);
        assert!(RunArgs::plain(&[], empty).is_none());
    }
}
