//! Every piece of user input, from flags, the TOML job config and the
//! environment, resolved into one validated [`Config`]. Flags override the
//! config file; `$JOBHOST_STORE` stands for `--store`. Paths in a config file
//! are relative to the file's folder; paths on the command line are relative
//! to the current directory. Unknown config keys are errors, so a typo cannot
//! silently fall back to a default.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use serde::Deserialize;

use crate::core::clock;
use crate::core::env::{Env, expand, expand_with};
use crate::core::error::{Error, Result};
use crate::core::redact::Redactor;
use crate::core::schedule::{CatchUp, DEFAULT_MAX_CATCH_UP, Schedule};
use crate::core::window::{JobName, WindowKind, Zone};
use crate::effects::destination::{DeliveryMode, Destination, HttpTarget, RetryPolicy, Target};
use crate::effects::ping::Pings;
use crate::guest::sandbox::GuestLimits;
use crate::guest::source::SourceSpec;
use crate::store::location::{is_postgres_url, url_scheme};
use crate::store::{PostgresUrl, StoreLocation};

/// Where a job keeps its store when neither `--store`, `$JOBHOST_STORE` nor
/// its config names one: this path beside the config file, so that a job
/// finds the same store from any working directory.
pub const DEFAULT_STORE: &str = "state/jobhost.db";

/// The store when neither `--store`, `$JOBHOST_STORE` nor a config names
/// one: [`DEFAULT_STORE`] beside the config file when there is one, never
/// beside the working directory (a job started from another folder would
/// find no claims there, and run its windows again); without a config, the
/// per-user state folder (`$XDG_STATE_HOME/jobhost/jobhost.db`, else
/// `~/.local/state/jobhost/jobhost.db`).
///
/// # Errors
///
/// `Error::Input` when there is no config and no home folder to keep a
/// store in.
pub fn default_store(config: Option<&Path>, env: &Env<'_>) -> Result<StoreLocation> {
    let path = match config {
        Some(file) => config_dir(file).join(DEFAULT_STORE),
        None => {
            let absolute = |name: &str| env(name).map(PathBuf::from).filter(|p| p.is_absolute());
            absolute("XDG_STATE_HOME")
                .or_else(|| absolute("HOME").map(|h| h.join(".local").join("state")))
                .ok_or_else(|| {
                    Error::input(
                        "no store given, and no home folder to keep one in (HOME is not set): \
                         pass --store PATH, set JOBHOST_STORE, or run with a job config",
                    )
                })?
                .join("jobhost")
                .join("jobhost.db")
        }
    };
    refuse_abandoning_the_old_default(&path)?;
    Ok(StoreLocation::Sqlite(path))
}

/// Before this version, the default store was `state/jobhost.db` in the
/// working directory. A store there, and none yet at the new default, is a
/// store this job most likely used: starting a new one beside it would run
/// every window it holds again, the very duplicate jobhost exists to
/// prevent. Refused, naming both and the fix.
fn refuse_abandoning_the_old_default(new: &Path) -> Result<()> {
    let old = Path::new(DEFAULT_STORE);
    if new.exists() || !old.is_file() {
        return Ok(());
    }
    let same = match (old.canonicalize(), new.parent().map(Path::canonicalize)) {
        (Ok(o), Some(Ok(dir))) => Some(o) == new.file_name().map(|f| dir.join(f)),
        _ => false,
    };
    if same || new == old {
        return Ok(());
    }
    Err(Error::input(format!(
        "the default store is now `{}` (beside the job's config, or in the per-user state \
         folder without one), and there is none there yet, but a store is at `{}` in the \
         working directory, where jobhost kept it before: name it with --store {} (or `store` \
         in the job config), or move it there with its -wal and -shm files, so that the windows \
         it holds do not run again",
        new.display(),
        old.display(),
        old.display()
    )))
}

/// The most guest memory a config may ask for, MiB.
pub const MAX_MEMORY_MIB: u64 = 4096;

/// The longest guest time limit a config may ask for, seconds.
pub const MAX_TIMEOUT_SECONDS: u64 = 86_400;

/// The journal's limit when the config names none: room for about sixteen
/// million rows of the reference report's kind.
pub const DEFAULT_JOURNAL_BYTES: u64 = 256 << 20;

/// The smallest journal limit a config may ask for: room for the context
/// and a few answers.
const MIN_JOURNAL_BYTES: u64 = 64 << 10;

/// The longest delay after a window closes that a config may ask for.
const MAX_DELAY_SECONDS: u64 = 7 * 86_400;

/// The widest jitter a config may ask for.
const MAX_JITTER_SECONDS: u64 = 86_400;

/// The longest grace a config may ask for.
const MAX_GRACE_SECONDS: u64 = 30 * 86_400;

/// The most missed windows `catch_up = "all"` may run.
const MAX_CATCH_UP: u32 = 1000;

/// The longest lease a config may ask for.
const MAX_LEASE_SECONDS: u64 = 7 * 86_400;

/// The job config file, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// The job's name; part of every window key.
    pub job: Option<String>,
    /// The report component (`.wasm`).
    pub component: Option<PathBuf>,
    /// `hour`, `day` or `week`.
    pub window: Option<String>,
    /// IANA zone whose calendar defines the windows.
    #[serde(alias = "tz")]
    pub timezone: Option<String>,
    /// The claim store: a SQLite file path, or a `postgres://` URL (which
    /// may take its password from `${VAR}`).
    pub store: Option<String>,
    /// Refuse to run with a SQLite store on a filesystem that dies with its
    /// machine or container (tmpfs, ramfs, overlayfs), instead of warning.
    pub require_durable_store: Option<bool>,
    /// A fixed clock reading (mostly for tests and demos).
    pub now: Option<String>,
    /// Attempts before a failing window is given up.
    pub max_attempts: Option<u32>,
    /// Seconds before a failed window is attempted again (default 60),
    /// doubled after each further failure.
    pub retry_delay_seconds: Option<u64>,
    /// The longest wait between two attempts of a window (default 3600).
    pub max_retry_delay_seconds: Option<u64>,
    /// Seconds after a window closes before it is due (default 0): for data
    /// that arrives late.
    pub delay_seconds: Option<u64>,
    /// The most seconds a window's due moment is spread out after the delay
    /// (default 0), a fixed share per window.
    pub jitter_seconds: Option<u64>,
    /// What to do with windows missed while nothing ran them: `all` (the
    /// newest `max_catch_up` of them), `latest` or `none`.
    pub catch_up: Option<String>,
    /// How many missed windows `catch_up = "all"` runs (default 3).
    pub max_catch_up: Option<u32>,
    /// Seconds a due window may stay undone before `jobhost status` calls
    /// the job late (default 3600).
    pub grace_seconds: Option<u64>,
    /// The compiled-code cache folder.
    pub cache_dir: Option<PathBuf>,
    /// The data source.
    pub source: Option<SourceFile>,
    /// Named destinations.
    #[serde(default)]
    pub destinations: BTreeMap<String, DestinationFile>,
    /// Limits for the guest.
    #[serde(default)]
    pub limits: LimitsFile,
    /// Free-form parameters handed to the guest.
    #[serde(default)]
    pub params: BTreeMap<String, toml::Value>,
    /// URLs pinged when a run starts, succeeds or fails.
    pub ping: Option<crate::effects::ping::PingFile>,
    /// A language model that writes a digest of each DONE run.
    pub digest: Option<crate::effects::digest::DigestFile>,
}

/// `[source]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceFile {
    /// SQLite database file.
    pub path: PathBuf,
    /// The query.
    pub query: String,
}

/// `[destinations.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, tag = "type", rename_all = "lowercase")]
pub enum DestinationFile {
    /// Append JSON lines to a file.
    File {
        /// The file.
        path: PathBuf,
        /// `at-least-once` (default) or `at-most-once`.
        delivery: Option<DeliveryMode>,
    },
    /// POST each message to a URL.
    Http {
        /// `http://` or `https://` URL; `${VAR}` takes a value from the
        /// host's environment.
        url: String,
        /// Extra request headers; `${VAR}` as in `url`.
        #[serde(default)]
        headers: BTreeMap<String, String>,
        /// `at-least-once` (default) or `at-most-once`.
        delivery: Option<DeliveryMode>,
        /// Seconds one request may take, connection included (default 30).
        timeout_seconds: Option<f64>,
        /// Sends of one message per invocation, the first included (default 5).
        tries: Option<u32>,
        /// Seconds before the second send; doubled for each later one, with
        /// full jitter (default 1).
        backoff_seconds: Option<f64>,
        /// The longest wait between two sends, `Retry-After` included
        /// (default 60).
        max_backoff_seconds: Option<f64>,
    },
}

/// `[limits]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    /// Guest memory, MiB (default 256).
    pub memory_mib: Option<u64>,
    /// Guest compute time, seconds (default 30).
    pub timeout_seconds: Option<f64>,
    /// Messages a run may stage (default 100).
    pub max_messages: Option<u32>,
    /// Bytes per message (default 4 MiB).
    pub max_message_bytes: Option<u64>,
    /// Bytes of report summary plus cursor (default 1 MiB).
    pub max_report_bytes: Option<usize>,
    /// Bytes of all of a run's messages together (default 16 MiB).
    pub max_staged_bytes: Option<u64>,
    /// Bytes of guest log messages shown (default 64 KiB).
    pub log_bytes: Option<usize>,
    /// Bytes of guest stdout and of stderr kept (default 64 KiB).
    pub output_bytes: Option<usize>,
    /// Rows per batch, at most (default 8192).
    pub batch_rows: Option<u32>,
    /// Seconds a claim stays live without renewal (default: the timeout plus 5 minutes).
    pub lease_seconds: Option<u64>,
    /// Bytes the run's journal may hold before the run is stopped
    /// (default 256 MiB).
    pub max_journal_bytes: Option<u64>,
}

/// What `jobhost run` was given on the command line.
#[derive(Debug, Default, Clone)]
pub struct RunFlags {
    /// `--component`.
    pub component: Option<PathBuf>,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--job`.
    pub job: Option<String>,
    /// `--window`.
    pub window: Option<String>,
    /// `--tz`.
    pub tz: Option<String>,
    /// `--store`, or `$JOBHOST_STORE`.
    pub store: Option<PathBuf>,
    /// `--require-durable-store`.
    pub require_durable_store: bool,
    /// `--now`.
    pub now: Option<String>,
    /// `--cache-dir`, or `$JOBHOST_CACHE_DIR`.
    pub cache_dir: Option<PathBuf>,
}

/// The validated configuration of one run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The job.
    pub job: JobName,
    /// The component file.
    pub component: PathBuf,
    /// Window kind.
    pub window: WindowKind,
    /// Time zone.
    pub zone: Zone,
    /// The claim store.
    pub store: StoreLocation,
    /// Refuse an ephemeral SQLite store instead of warning about it.
    pub require_durable_store: bool,
    /// A fixed `now`, if given.
    pub now: Option<Timestamp>,
    /// Attempts before giving up on a window.
    pub max_attempts: u32,
    /// Compiled-code cache folder (`None`: no cache).
    pub cache_dir: Option<PathBuf>,
    /// The data source.
    pub source: Option<SourceSpec>,
    /// Destinations by name.
    pub destinations: BTreeMap<String, Destination>,
    /// The environment values the destinations use, to scrub from messages.
    pub redactor: Redactor,
    /// The first wait after a failed attempt of a window, doubled for each
    /// later attempt up to `max_retry_delay`.
    pub retry_delay: Duration,
    /// The longest wait between two attempts of a window.
    pub max_retry_delay: Duration,
    /// How long after a window closes it is due.
    pub delay: Duration,
    /// The most a window's due moment is spread out after the delay.
    pub jitter: Duration,
    /// What happens to missed windows.
    pub catch_up: CatchUp,
    /// How long a due window may stay undone before the job is late.
    pub grace: Duration,
    /// Guest limits.
    pub limits: GuestLimits,
    /// Messages per run.
    pub max_messages: u32,
    /// Bytes per message.
    pub max_message_bytes: u64,
    /// Bytes of all of a run's messages.
    pub max_staged_bytes: u64,
    /// Guest log bytes.
    pub log_bytes: usize,
    /// Rows per batch.
    pub batch_rows: u32,
    /// Lease length.
    pub lease: Duration,
    /// Guest parameters, sorted.
    pub params: Vec<(String, String)>,
    /// URLs pinged when a run starts, succeeds or fails.
    pub pings: Pings,
    /// The language model that writes a digest of each DONE run, if any.
    pub digest: Option<crate::effects::digest::DigestSettings>,
}

impl Config {
    /// How many attempts a window gets, and the waits between them.
    pub fn attempts(&self) -> crate::store::Attempts {
        crate::store::Attempts {
            max_attempts: self.max_attempts,
            retry_delay: self.retry_delay,
            max_retry_delay: self.max_retry_delay,
        }
    }

    /// What delivering the job's messages needs of it.
    pub fn delivery(&self) -> crate::effects::delivery::DeliverySettings<'_> {
        crate::effects::delivery::DeliverySettings {
            destinations: &self.destinations,
            redactor: &self.redactor,
            lease: self.lease,
            attempts: self.attempts(),
        }
    }

    /// When the job's windows are due.
    pub fn schedule(&self) -> Schedule {
        Schedule {
            job: self.job.clone(),
            kind: self.window,
            zone: self.zone.clone(),
            delay: self.delay,
            jitter: self.jitter,
            grace: self.grace,
        }
    }

    /// Resolves flags and the optional config file into a `Config`.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the flag, key or file that is wrong.
    pub fn resolve(flags: &RunFlags) -> Result<Config> {
        Config::resolve_with_env(flags, &|name| std::env::var_os(name))
    }

    /// The store named by `flags` alone (`--store`, else the `store` of
    /// the config `--config` names, else [`default_store`]), for commands
    /// that need nothing else (`history`, `export`, `replay`). Nothing but
    /// the store is resolved: a config's credentials need not be set.
    ///
    /// # Errors
    ///
    /// `Error::Input` when the config cannot be read or a `${VAR}` in a
    /// store URL cannot be filled in.
    pub fn store_only(flags: &RunFlags) -> Result<StoreLocation> {
        let env = |name: &str| std::env::var_os(name);
        let mut redactor = Redactor::default();
        if let Some(p) = &flags.store {
            return match p.to_str() {
                Some(text) => store_location("--store", text, Path::new(""), &env, &mut redactor),
                None => Ok(StoreLocation::Sqlite(p.clone())),
            };
        }
        let Some(file) = &flags.config else {
            return default_store(None, &env);
        };
        match load_file(file)?.store {
            Some(text) => store_location(
                "`store` in the job config",
                &text,
                &config_dir(file),
                &env,
                &mut redactor,
            ),
            None => default_store(Some(file), &env),
        }
    }

    /// [`Config::resolve`], taking `${VAR}` values from `env` instead of the
    /// process environment.
    ///
    /// # Errors
    ///
    /// As [`Config::resolve`].
    pub fn resolve_with_env(flags: &RunFlags, env: &Env<'_>) -> Result<Config> {
        let (file, base) = match &flags.config {
            Some(path) => (load_file(path)?, config_dir(path)),
            None => (ConfigFile::default(), PathBuf::new()),
        };
        let from_file = |p: &Path| base.join(p);

        let component = match (&flags.component, &file.component) {
            (Some(p), _) => p.clone(),
            (None, Some(p)) => from_file(p),
            (None, None) => {
                return Err(Error::input(
                    "no component given: pass --component PATH or set `component` in the job config",
                ));
            }
        };
        let job = JobName::new(
            flags
                .job
                .as_deref()
                .or(file.job.as_deref())
                .unwrap_or("daily-report"),
        )?;
        let window: WindowKind = flags
            .window
            .as_deref()
            .or(file.window.as_deref())
            .unwrap_or("day")
            .parse()?;
        let zone = Zone::new(
            flags
                .tz
                .as_deref()
                .or(file.timezone.as_deref())
                .unwrap_or("UTC"),
        )?;
        let mut redactor = Redactor::default();
        let store = match (&flags.store, &file.store) {
            (Some(p), _) => match p.to_str() {
                Some(text) => store_location("--store", text, Path::new(""), env, &mut redactor)?,
                None => StoreLocation::Sqlite(p.clone()),
            },
            (None, Some(text)) => {
                store_location("`store` in the job config", text, &base, env, &mut redactor)?
            }
            (None, None) => default_store(flags.config.as_deref(), env)?,
        };
        let require_durable_store =
            flags.require_durable_store || file.require_durable_store.unwrap_or(false);
        let now = match (&flags.now, &file.now) {
            (Some(t), _) => Some(clock::parse_instant("--now", t)?),
            (None, Some(t)) => Some(clock::parse_instant("`now` in the job config", t)?),
            (None, None) => None,
        };
        let max_attempts = file.max_attempts.unwrap_or(3);
        if max_attempts == 0 {
            return Err(Error::input("invalid `max_attempts = 0`: use 1 or more"));
        }
        let cache_dir = match (&flags.cache_dir, &file.cache_dir) {
            (Some(p), _) => Some(p.clone()),
            (None, Some(p)) => Some(from_file(p)),
            (None, None) => crate::guest::cache::CompileCache::default_dir(),
        };
        let source = file.source.map(|s| SourceSpec {
            path: from_file(&s.path),
            query: s.query,
        });
        let mut destinations = BTreeMap::new();
        for (name, d) in file.destinations {
            if name.is_empty()
                || name.len() > 64
                || name.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return Err(Error::input(format!(
                    "invalid destination name `{name}`: use 1 to 64 characters without spaces"
                )));
            }
            let d = destination(&name, d, &from_file, env, &mut redactor)?;
            destinations.insert(name, d);
        }
        let delay = file.delay_seconds.unwrap_or(0);
        if delay > MAX_DELAY_SECONDS {
            return Err(Error::input(format!(
                "invalid `delay_seconds = {delay}`: at most {MAX_DELAY_SECONDS} (7 days)"
            )));
        }
        let jitter = file.jitter_seconds.unwrap_or(0);
        let widest = crate::core::schedule::max_jitter(window)
            .as_secs()
            .min(MAX_JITTER_SECONDS);
        if jitter > widest {
            return Err(Error::input(format!(
                "invalid `jitter_seconds = {jitter}`: at most {widest} for {window} windows, \
                 less than the shortest window, so windows stay due in order"
            )));
        }
        let max_catch_up = file.max_catch_up.unwrap_or(DEFAULT_MAX_CATCH_UP);
        if !(1..=MAX_CATCH_UP).contains(&max_catch_up) {
            return Err(Error::input(format!(
                "invalid `max_catch_up = {max_catch_up}`: use 1 to {MAX_CATCH_UP}"
            )));
        }
        let catch_up = CatchUp::parse(file.catch_up.as_deref().unwrap_or("all"), max_catch_up)?;
        let grace = file.grace_seconds.unwrap_or(3600);
        if grace > MAX_GRACE_SECONDS {
            return Err(Error::input(format!(
                "invalid `grace_seconds = {grace}`: at most {MAX_GRACE_SECONDS} (30 days)"
            )));
        }
        let retry_delay = Duration::from_secs(file.retry_delay_seconds.unwrap_or(60));
        let max_retry_delay = Duration::from_secs(file.max_retry_delay_seconds.unwrap_or(3600));
        if max_retry_delay < retry_delay || max_retry_delay > Duration::from_secs(MAX_LEASE_SECONDS)
        {
            return Err(Error::input(format!(
                "invalid `max_retry_delay_seconds = {}`: use at least `retry_delay_seconds` ({}) \
                 and at most {MAX_LEASE_SECONDS}",
                max_retry_delay.as_secs(),
                retry_delay.as_secs()
            )));
        }
        let l = file.limits;
        let timeout_s = l.timeout_seconds.unwrap_or(30.0);
        if !(timeout_s.is_finite() && timeout_s > 0.0 && timeout_s <= MAX_TIMEOUT_SECONDS as f64) {
            return Err(Error::input(format!(
                "invalid `limits.timeout_seconds = {timeout_s}`: use a number of seconds above 0 and at most {MAX_TIMEOUT_SECONDS}"
            )));
        }
        let memory_mib = l.memory_mib.unwrap_or(256);
        if !(1..=MAX_MEMORY_MIB).contains(&memory_mib) {
            return Err(Error::input(format!(
                "invalid `limits.memory_mib = {memory_mib}`: use 1 to {MAX_MEMORY_MIB}"
            )));
        }
        let timeout = Duration::from_secs_f64(timeout_s);
        let report_bytes = l.max_report_bytes.unwrap_or(1 << 20);
        let journal_bytes = l.max_journal_bytes.unwrap_or(DEFAULT_JOURNAL_BYTES);
        // The journal starts with the context, which holds the cursor (up
        // to the report's limit).
        let least = MIN_JOURNAL_BYTES + report_bytes as u64;
        if !(least..=crate::guest::journal::MAX_PLAIN).contains(&journal_bytes) {
            return Err(Error::input(format!(
                "invalid `limits.max_journal_bytes = {journal_bytes}`: use {least} (64 KiB more \
                 than `limits.max_report_bytes`, which a cursor may fill) to {} (1 GiB, the most a \
                 replay reads)",
                crate::guest::journal::MAX_PLAIN
            )));
        }
        let pings = Pings::from_file(file.ping.unwrap_or_default(), env, &mut redactor)?;
        let digest = file
            .digest
            .map(|d| {
                crate::effects::digest::DigestSettings::from_file(
                    d,
                    env,
                    &mut redactor,
                    &destinations,
                    cache_dir.clone(),
                    &from_file,
                )
            })
            .transpose()?;
        // A lease is renewed before every send, so it must cover the longer
        // of the guest's run and one send plus the wait before it.
        let send_window = destinations
            .values()
            .map(|d| d.retry.max_backoff + d.timeout())
            .max()
            .unwrap_or_default();
        // The start ping is sent under the claim, before the guest runs.
        let run_time = timeout + pings.start_budget();
        let must_outlive = run_time.max(send_window);
        let lease = match l.lease_seconds {
            Some(s) if Duration::from_secs(s) <= must_outlive => {
                return Err(Error::input(format!(
                    "invalid `limits.lease_seconds = {s}`: a lease must outlive the guest's time limit \
                     ({timeout_s} s{}) and a destination's timeout plus its longest backoff ({} s); \
                     raise it above {} s",
                    if pings.start_budget().is_zero() {
                        String::new()
                    } else {
                        format!(
                            " plus {} s for the start ping",
                            pings.start_budget().as_secs_f64()
                        )
                    },
                    send_window.as_secs_f64(),
                    must_outlive.as_secs_f64()
                )));
            }
            Some(s) if s > MAX_LEASE_SECONDS => {
                return Err(Error::input(format!(
                    "invalid `limits.lease_seconds = {s}`: at most {MAX_LEASE_SECONDS} (7 days), \
                     or a crashed run would keep its window busy that long"
                )));
            }
            Some(s) => Duration::from_secs(s),
            None => must_outlive + Duration::from_secs(300),
        };
        let mut params = Vec::new();
        for (k, v) in file.params {
            let v = match v {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(Error::input(format!(
                        "invalid `params.{k}`: use a string, number or boolean, not {}",
                        other.type_str()
                    )));
                }
            };
            params.push((k, v));
        }
        Ok(Config {
            job,
            component,
            window,
            zone,
            store,
            require_durable_store,
            now,
            max_attempts,
            cache_dir,
            source,
            destinations,
            redactor,
            retry_delay,
            max_retry_delay,
            delay: Duration::from_secs(delay),
            jitter: Duration::from_secs(jitter),
            catch_up,
            grace: Duration::from_secs(grace),
            limits: GuestLimits {
                memory_bytes: (memory_mib as usize) << 20,
                timeout,
                output_bytes: l.output_bytes.unwrap_or(64 << 10),
                report_bytes,
                journal_bytes,
            },
            max_messages: l.max_messages.unwrap_or(100),
            max_message_bytes: l.max_message_bytes.unwrap_or(4 << 20),
            max_staged_bytes: l.max_staged_bytes.unwrap_or(16 << 20),
            log_bytes: l.log_bytes.unwrap_or(64 << 10),
            batch_rows: l.batch_rows.unwrap_or(8192).clamp(1, 1 << 20),
            lease,
            params,
            pings,
            digest,
        })
    }
}

/// One `[destinations.NAME]`, validated, its `${VAR}`s taken from the
/// environment now: a missing credential is bad input at start, not a
/// failed delivery after the report was rendered.
fn destination(
    name: &str,
    d: DestinationFile,
    from_file: &dyn Fn(&Path) -> PathBuf,
    env: &Env<'_>,
    redactor: &mut Redactor,
) -> Result<Destination> {
    let seconds = |what: &str, v: Option<f64>, default: f64, max: f64| -> Result<Duration> {
        let v = v.unwrap_or(default);
        if v.is_finite() && v >= 0.0 && v <= max {
            Ok(Duration::from_secs_f64(v))
        } else {
            Err(Error::input(format!(
                "invalid `destinations.{name}.{what} = {v}`: use 0 to {max} seconds"
            )))
        }
    };
    Ok(match d {
        DestinationFile::File { path, delivery } => Destination {
            target: Target::File {
                path: from_file(&path),
            },
            mode: delivery.unwrap_or_default(),
            retry: RetryPolicy::once(),
        },
        DestinationFile::Http {
            url,
            headers,
            delivery,
            timeout_seconds,
            tries,
            backoff_seconds,
            max_backoff_seconds,
        } => {
            let timeout = seconds("timeout_seconds", timeout_seconds, 30.0, 3600.0)?;
            if timeout.is_zero() {
                return Err(Error::input(format!(
                    "invalid `destinations.{name}.timeout_seconds = 0`: use a positive number of seconds"
                )));
            }
            let tries = tries.unwrap_or(5);
            if !(1..=100).contains(&tries) {
                return Err(Error::input(format!(
                    "invalid `destinations.{name}.tries = {tries}`: use 1 to 100"
                )));
            }
            let backoff = seconds("backoff_seconds", backoff_seconds, 1.0, 3600.0)?;
            let max_backoff = seconds("max_backoff_seconds", max_backoff_seconds, 60.0, 3600.0)?;
            let full_url = expand(&format!("`destinations.{name}.url`"), &url, env, redactor)?;
            let mut target = HttpTarget::new(full_url, url)
                .map_err(|why| Error::input(format!("invalid `destinations.{name}.url`: {why}")))?;
            for (header, value) in headers {
                let what = format!("`destinations.{name}.headers.{header}`");
                let value = expand(&what, &value, env, redactor)?;
                target
                    .add_header(&header, value)
                    .map_err(|why| Error::input(format!("invalid {what}: {why}")))?;
            }
            target.timeout = timeout;
            Destination {
                target: Target::Http(target),
                mode: delivery.unwrap_or_default(),
                retry: RetryPolicy {
                    tries,
                    backoff,
                    max_backoff: max_backoff.max(backoff),
                },
            }
        }
    })
}

/// A store named by a flag or the config. `${VAR}` is filled in from the
/// environment:
///
/// - in a `postgres://` URL, values in the user part and the query are
///   percent-encoded (a password with `@`, `/`, `?`, `&` or `%` arrives as
///   it is) and scrubbed from every message; values in the host and path
///   are put in as they are (`${PGHOST}` may list `db1,db2`). The URL is
///   shown as written, with `${VAR}` in place and a literal password as
///   `***`;
/// - a value that is one `${VAR}` alone may hold a whole URL or a path;
/// - anything else is a SQLite path, relative to `base`; another URL
///   scheme is refused rather than taken for a file name.
fn store_location(
    what: &str,
    text: &str,
    base: &Path,
    env: &Env<'_>,
    redactor: &mut Redactor,
) -> Result<StoreLocation> {
    if is_postgres_url(text) {
        let url = expand_url(what, text, env, redactor)?;
        add_url_password(&url, redactor);
        return Ok(StoreLocation::Postgres(PostgresUrl::shown_as(url, text)));
    }
    // A path's values are not secrets; a whole URL's password is added below.
    let expanded = expand(what, text, env, &mut Redactor::default())?;
    if is_postgres_url(&expanded) {
        add_url_password(&expanded, redactor);
        return Ok(StoreLocation::Postgres(PostgresUrl::new(expanded)));
    }
    if let Some(scheme) = url_scheme(&expanded) {
        return Err(Error::input(format!(
            "invalid {what} `{}`: a `{scheme}://` URL is not a store jobhost can use; give a \
             SQLite file path or a postgres:// URL",
            crate::store::location::redacted(&expanded)
        )));
    }
    if expanded.is_empty() {
        return Err(Error::input(format!(
            "invalid {what}: it is empty; give a SQLite file path or a postgres:// URL"
        )));
    }
    Ok(StoreLocation::parse(&expanded, base))
}

/// Fills in a `postgres://` URL's `${VAR}` references part by part (see
/// [`store_location`]).
fn expand_url(what: &str, text: &str, env: &Env<'_>, redactor: &mut Redactor) -> Result<String> {
    let encode = |v: &str| {
        percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    let plain = |v: &str| v.to_string();
    let scheme_end = text.find("://").map_or(0, |i| i + 3);
    let (scheme, rest) = text.split_at(scheme_end);
    let (user, rest) = match rest.find('@') {
        Some(at) => rest.split_at(at),
        None => ("", rest),
    };
    let (host, query) = match rest.find('?') {
        Some(q) => rest.split_at(q),
        None => (rest, ""),
    };
    Ok(format!(
        "{scheme}{}{}{}",
        expand_with(what, user, env, redactor, &encode)?,
        expand_with(what, host, env, &mut Redactor::default(), &plain)?,
        expand_with(what, query, env, redactor, &encode)?
    ))
}

/// A password written into the URL itself is scrubbed from messages too.
fn add_url_password(url: &str, redactor: &mut Redactor) {
    if let Some(password) = url
        .parse::<postgres::Config>()
        .ok()
        .and_then(|c| {
            c.get_password()
                .map(|p| String::from_utf8_lossy(p).into_owned())
        })
        .filter(|p| !p.is_empty())
    {
        redactor.add(password);
    }
}

fn config_dir(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Reads and parses a job config file.
///
/// # Errors
///
/// `Error::Input` naming the file, and the line and key for a TOML error.
pub fn load_file(path: &Path) -> Result<ConfigFile> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::input(format!("cannot read job config `{}`: {e}", path.display())))?;
    toml::from_str(&text).map_err(|e| {
        let detail = e.message().to_string();
        let at = e
            .span()
            .map(|s| {
                format!(
                    " (line {})",
                    text[..s.start.min(text.len())].matches('\n').count() + 1
                )
            })
            .unwrap_or_default();
        Error::input(format!(
            "invalid job config `{}`{at}: {detail}",
            path.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("job.toml");
        std::fs::write(&p, text).unwrap();
        (dir, p)
    }

    #[test]
    fn flags_override_the_file_and_file_paths_are_relative_to_it() {
        let (_dir, p) = write(
            "job = \"sales\"\ncomponent = \"r.wasm\"\ntimezone = \"Asia/Tokyo\"\n\
             [source]\npath = \"d.db\"\nquery = \"SELECT 1 WHERE :start < :end\"\n\
             [destinations.digest]\ntype = \"file\"\npath = \"out/d.jsonl\"\n[params]\ntop = 5\n",
        );
        let flags = RunFlags {
            config: Some(p.clone()),
            tz: Some("UTC".into()),
            ..RunFlags::default()
        };
        let c = Config::resolve(&flags).unwrap();
        let dir = p.parent().unwrap();
        assert_eq!(c.job.as_str(), "sales");
        assert_eq!(c.zone.name(), "UTC");
        assert_eq!(c.component, dir.join("r.wasm"));
        assert_eq!(c.source.unwrap().path, dir.join("d.db"));
        assert_eq!(
            c.destinations["digest"].target,
            Target::File {
                path: dir.join("out/d.jsonl")
            }
        );
        assert_eq!(c.destinations["digest"].mode, DeliveryMode::AtLeastOnce);
        assert_eq!(c.params, vec![("top".to_string(), "5".to_string())]);
        assert_eq!(c.store, StoreLocation::Sqlite(dir.join(DEFAULT_STORE)));
    }

    #[test]
    fn a_misspelled_key_is_an_error_naming_it_and_its_line() {
        let (_dir, p) = write("job = \"x\"\ncomponent = \"r.wasm\"\ntimezon = \"UTC\"\n");
        let err = Config::resolve(&RunFlags {
            config: Some(p),
            ..RunFlags::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("timezon"), "{err}");
        assert!(err.contains("line 3"), "{err}");
    }

    /// The README's TOML block that starts with `first`.
    fn readme_toml(first: &str) -> &'static str {
        let readme = include_str!("../../README.md");
        let start = readme
            .find(&format!("```toml\n{first}"))
            .unwrap_or_else(|| panic!("the README shows a config starting `{first}`"));
        let body = &readme[start + "```toml\n".len()..];
        &body[..body.find("```").expect("closed code block")]
    }

    #[test]
    fn the_config_shown_in_the_readme_is_valid() {
        let (_dir, p) = write(readme_toml("job = "));
        let env = |name: &str| match name {
            "LEDGER_TOKEN" => Some("t0ken-from-env".into()),
            "HC_UUID" => Some("hc-uuid-from-env".into()),
            _ => None,
        };
        let c = Config::resolve_with_env(
            &RunFlags {
                config: Some(p),
                ..RunFlags::default()
            },
            &env,
        )
        .unwrap();
        assert_eq!(c.zone.name(), "Europe/Berlin");
        let Target::Http(ledger) = &c.destinations["ledger"].target else {
            panic!("ledger is an HTTP destination")
        };
        assert_eq!(ledger.headers()[0].1, "Bearer t0ken-from-env");
        assert!(
            !format!("{c:?}").contains("t0ken-from-env"),
            "Debug hides credentials"
        );
        assert_eq!(c.redactor.scrub("sent t0ken-from-env"), "sent ***");
        assert!(!c.pings.is_empty());
        assert_eq!(c.redactor.scrub("hc-uuid-from-env"), "***");
        assert_eq!(c.limits.report_bytes, 1 << 20);
        assert_eq!(c.params, vec![("top".to_string(), "5".to_string())]);
    }

    #[test]
    fn the_digest_config_shown_in_the_readme_is_valid() {
        let toml = readme_toml("[digest]");
        let (_dir, p) = write(&format!(
            "component = \"r.wasm\"\ncache_dir = \"c\"\n{toml}"
        ));
        let env = |name: &str| (name == "OPENAI_API_KEY").then(|| "sk-readme".into());
        let c = Config::resolve_with_env(
            &RunFlags {
                config: Some(p),
                ..RunFlags::default()
            },
            &env,
        )
        .unwrap();
        let d = c.digest.expect("a digest model");
        assert_eq!(d.model, "gpt-4o-mini");
        assert_eq!(c.redactor.scrub("sk-readme"), "***");
    }

    #[test]
    fn a_store_password_from_the_environment_arrives_whole_and_is_never_shown() {
        let password = "p@ss/w?rd&x=%41 :";
        let env = |name: &str| match name {
            "PGPW" => Some(password.into()),
            "DATABASE_URL" => Some("postgres://jobs:lit%40eral@db.internal/jobs".into()),
            "STATE" => Some("/var/lib/jobhost".into()),
            "HOSTS" => Some("db1,db2".into()),
            _ => None,
        };
        let mut r = Redactor::default();
        let store = |text: &str, r: &mut Redactor| {
            store_location("`store`", text, Path::new("cfg"), &env, r).unwrap()
        };
        let StoreLocation::Postgres(url) =
            store("postgres://jobs:${PGPW}@db.internal:5432/jobs", &mut r)
        else {
            panic!("a postgres URL")
        };
        let parsed: postgres::Config = url.secret().parse().unwrap();
        assert_eq!(parsed.get_password(), Some(password.as_bytes()));
        assert_eq!(parsed.get_user(), Some("jobs"));
        assert_eq!(url.to_string(), "postgres://jobs:***@db.internal:5432/jobs");
        assert_eq!(r.scrub(&format!("said {password}")), "said ***");

        let StoreLocation::Postgres(url) =
            store("postgres://jobs@db/jobs?password=${PGPW}", &mut r)
        else {
            panic!("a postgres URL")
        };
        let parsed: postgres::Config = url.secret().parse().unwrap();
        assert_eq!(parsed.get_password(), Some(password.as_bytes()));
        assert_eq!(url.to_string(), "postgres://jobs@db/jobs?password=***");

        // A whole URL in one variable is a PostgreSQL store, not a file
        // named `${DATABASE_URL}`.
        let StoreLocation::Postgres(url) = store("${DATABASE_URL}", &mut r) else {
            panic!("a whole URL from the environment is a PostgreSQL store")
        };
        assert_eq!(url.to_string(), "postgres://jobs:***@db.internal/jobs");
        assert_eq!(
            r.scrub("lit@eral"),
            "***",
            "its literal password is scrubbed"
        );

        assert_eq!(
            store("${STATE}/jobhost.db", &mut r),
            StoreLocation::Sqlite(PathBuf::from("/var/lib/jobhost/jobhost.db"))
        );
        assert_eq!(
            store("state/$${HOME}.db", &mut r),
            StoreLocation::Sqlite(PathBuf::from("cfg/state/${HOME}.db"))
        );
        assert_eq!(
            r.scrub("/var/lib/jobhost"),
            "/var/lib/jobhost",
            "a path is no secret"
        );

        // Hosts from the environment go in as they are.
        let StoreLocation::Postgres(url) = store("postgres://jobs:${PGPW}@${HOSTS}/jobs", &mut r)
        else {
            panic!("a postgres URL")
        };
        assert!(url.secret().ends_with("@db1,db2/jobs"), "{url}");

        // Another scheme is refused, its password hidden, not taken for a
        // file named after it.
        let err = store_location(
            "`store`",
            "postgresql+asyncpg://jobs:hunter2@db/jobs",
            Path::new(""),
            &env,
            &mut r,
        )
        .unwrap_err();
        assert!(matches!(err, Error::Input(_)), "{err}");
        assert!(
            err.to_string().contains("`postgresql+asyncpg://` URL"),
            "{err}"
        );
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[test]
    fn header_values_cannot_smuggle_line_breaks_or_replace_the_idempotency_key() {
        let env = |name: &str| (name == "EVIL").then(|| "x\r\nX-Injected: 1".into());
        for (headers, want) in [
            ("{ X-A = \"${EVIL}\" }", "line break"),
            (
                "{ Idempotency-Key = \"mine\" }",
                "sets `Idempotency-Key` itself",
            ),
        ] {
            let (_dir, p) = write(&format!(
                "component = \"r.wasm\"\n[destinations.d]\ntype = \"http\"\n\
                 url = \"https://example.com/in\"\nheaders = {headers}\n"
            ));
            let err = Config::resolve_with_env(
                &RunFlags {
                    config: Some(p),
                    ..RunFlags::default()
                },
                &env,
            )
            .unwrap_err();
            assert!(matches!(err, Error::Input(_)));
            assert!(err.to_string().contains(want), "{err}");
            assert!(!err.to_string().contains("Injected"), "{err}");
        }
    }

    #[test]
    fn a_lease_shorter_than_the_timeout_is_refused() {
        let (_dir, p) =
            write("component = \"r.wasm\"\n[limits]\ntimeout_seconds = 60\nlease_seconds = 30\n");
        let err = Config::resolve(&RunFlags {
            config: Some(p),
            ..RunFlags::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("must outlive"), "{err}");
    }
}
