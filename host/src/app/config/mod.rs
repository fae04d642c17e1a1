//! The job config file, and every piece of user input that goes with it
//! (flags and the environment), turned into each capability's settings
//! when a command asks for them. Flags override the config file;
//! `$JOBHOST_STORE` stands for `--store`. Paths in a config file are
//! relative to the file's folder; paths on the command line are relative
//! to the current directory. Unknown config keys are errors, so a typo
//! cannot silently fall back to a default.
//!
//! A command resolves only what it uses: `status` and `plan` read the
//! schedule and the store, `history` the store and the digest cache, and
//! only `run` and `daemon` need the component, the destinations and the
//! pings, whose `${VAR}` credentials are filled in then (see [`JobConfig`]).

pub mod destinations;
pub mod digest;
pub mod folder;
pub mod limits;
pub mod notify;
pub mod ping;
pub mod source;
pub mod store;
pub mod telemetry;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use serde::Deserialize;

use crate::core::clock;
use crate::core::command::Target;
use crate::core::env::Env;
use crate::core::error::{Error, Result};
use crate::core::redact::Redactor;
use crate::core::schedule::{CatchUp, DEFAULT_MAX_CATCH_UP, Schedule};
use crate::core::window::{JobName, WindowKind, Zone};
use crate::effects::digest::{DigestSettings, digest_dir};
use crate::guest::cache::CompileCache;
use crate::guest::source::Source;
use crate::run::Job;
use crate::store::{Attempts, StoreLocation};
pub use store::{DEFAULT_STORE, default_store};

/// The longest delay after a window closes that a config may ask for.
const MAX_DELAY_SECONDS: u64 = 7 * 86_400;

/// The widest jitter a config may ask for.
const MAX_JITTER_SECONDS: u64 = 86_400;

/// The longest grace a config may ask for.
const MAX_GRACE_SECONDS: u64 = 30 * 86_400;

/// The most missed windows `catch_up = "all"` may run.
const MAX_CATCH_UP: u32 = 1000;

/// The job config file, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// The job's name; part of every window key.
    pub job: Option<String>,
    /// The report component (`.wasm`).
    pub component: Option<PathBuf>,
    /// `15m` (minutes dividing an hour), `hour`, `day`, `week`, `month` or `quarter`.
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
    pub source: Option<source::SourceFile>,
    /// Named destinations.
    #[serde(default)]
    pub destinations: BTreeMap<String, destinations::DestinationFile>,
    /// Limits for the guest.
    #[serde(default)]
    pub limits: limits::LimitsFile,
    /// Free-form parameters handed to the guest.
    #[serde(default)]
    pub params: BTreeMap<String, toml::Value>,
    /// URLs pinged when a run starts, succeeds or fails.
    pub ping: Option<ping::PingFile>,
    /// A language model that writes a digest of each DONE run.
    pub digest: Option<digest::DigestFile>,
    /// How long the daemon keeps DONE runs' journals and delivered bodies.
    pub retention: Option<RetentionFile>,
    /// Upstream jobs in the same store whose windows must be DONE before
    /// a window of this job runs.
    #[serde(default)]
    pub needs: Vec<NeedFile>,
    /// What the daemon reads again of DONE windows to find rows that
    /// changed after their run.
    pub freshness: Option<FreshnessFile>,
    /// A candidate component run beside each live run, never delivered.
    pub shadow: Option<ShadowFile>,
    /// The key that signs the job's chain entries and messages.
    pub signing: Option<SigningFile>,
    /// Who hears of the job's trouble.
    #[serde(default)]
    pub notify: Vec<notify::NotifyFile>,
    /// The dashboard's address as people reach it.
    pub dashboard: Option<notify::DashboardFile>,
    /// Pause the job after this many windows in a row end FAILED or
    /// ABANDONED.
    pub pause_after_failures: Option<u32>,
    /// Where the traces of the job's runs go.
    pub telemetry: Option<telemetry::TelemetryFile>,
}

/// `[signing]`: the Ed25519 key that signs chain entries and messages.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SigningFile {
    /// The private key (PKCS#8 PEM, as `jobhost keygen` writes it),
    /// relative to the config file.
    pub key_file: PathBuf,
}

/// `[shadow]`: a candidate component run on each live run's input.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShadowFile {
    /// The candidate `.wasm`, relative to the config file.
    pub component: PathBuf,
}

/// `[freshness]`: the daemon's `jobhost check` of recent DONE windows.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FreshnessFile {
    /// DONE windows that started up to this long ago are read again:
    /// `12h`, `3d` (hours or days).
    pub recheck: String,
}

/// The longest `[freshness] recheck`.
const MAX_RECHECK_DAYS: u64 = 90;

/// `[[needs]]`: one upstream job.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeedFile {
    /// The upstream job's name, as its own config gives it.
    pub job: String,
}

/// The most upstream jobs a job may need.
const MOST_NEEDS: usize = 32;

/// `[retention]`: what the daemon prunes once a day.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionFile {
    /// Prune DONE runs whose window ended more than this many days ago.
    pub older_than_days: u32,
    /// Keep the journals (replay stays possible), drop only delivered
    /// message bodies.
    #[serde(default)]
    pub keep_journals: bool,
}

/// The longest retention a config may ask for: 100 years.
const MAX_RETENTION_DAYS: u32 = 36_525;

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

/// The flags a command jobhost prints must carry to act on what this
/// invocation was given: its `--config`, and its `--store` unless that
/// came from `$JOBHOST_STORE` (which a pasted command reads as well).
/// A store URL shows its password as `***`.
pub fn command_target(store_flag: Option<&Path>, config: Option<&Path>) -> Target {
    let from_env = std::env::var_os("JOBHOST_STORE");
    let store = store_flag
        .filter(|s| from_env.as_deref() != Some(s.as_os_str()))
        .map(|s| match s.to_str() {
            Some(text) if crate::store::location::is_postgres_url(text) => {
                crate::store::location::redacted(text)
            }
            _ => s.to_string_lossy().into_owned(),
        });
    Target::new(config, store.as_deref())
}

/// A job's config file and flags, read and parsed; each part is
/// validated (and its `${VAR}`s filled in) when a command asks for it.
#[derive(Debug)]
pub struct JobConfig {
    flags: RunFlags,
    file: ConfigFile,
    /// The config file's folder: paths in the file are relative to it.
    base: PathBuf,
}

impl JobConfig {
    /// Reads the config `flags` name, if any.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the file, and the line and key for a TOML error.
    pub fn load(flags: &RunFlags) -> Result<JobConfig> {
        let (file, base) = match &flags.config {
            Some(path) => (load_file(path)?, store::config_dir(path)),
            None => (ConfigFile::default(), PathBuf::new()),
        };
        Ok(JobConfig {
            flags: flags.clone(),
            file,
            base,
        })
    }

    /// A path written in the config file, relative to its folder.
    fn relative(&self, p: &Path) -> PathBuf {
        self.base.join(p)
    }

    /// The job's name.
    ///
    /// # Errors
    ///
    /// `Error::Input` for a name jobhost cannot use in a window key.
    pub fn name(&self) -> Result<JobName> {
        JobName::new(
            self.flags
                .job
                .as_deref()
                .or(self.file.job.as_deref())
                .unwrap_or("daily-report"),
        )
    }

    /// When the job's windows are due.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the key that is wrong.
    pub fn schedule(&self) -> Result<Schedule> {
        let (flags, file) = (&self.flags, &self.file);
        let kind: WindowKind = flags
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
        let delay = file.delay_seconds.unwrap_or(0);
        if delay > MAX_DELAY_SECONDS {
            return Err(Error::input(format!(
                "invalid `delay_seconds = {delay}`: at most {MAX_DELAY_SECONDS} (7 days)"
            )));
        }
        let jitter = file.jitter_seconds.unwrap_or(0);
        let widest = crate::core::schedule::max_jitter(kind)
            .as_secs()
            .min(MAX_JITTER_SECONDS);
        if jitter > widest {
            return Err(Error::input(format!(
                "invalid `jitter_seconds = {jitter}`: at most {widest} for {kind} windows, \
                 less than the shortest window, so windows stay due in order"
            )));
        }
        let grace = file.grace_seconds.unwrap_or(3600);
        if grace > MAX_GRACE_SECONDS {
            return Err(Error::input(format!(
                "invalid `grace_seconds = {grace}`: at most {MAX_GRACE_SECONDS} (30 days)"
            )));
        }
        Ok(Schedule {
            job: self.name()?,
            kind,
            zone,
            delay: Duration::from_secs(delay),
            jitter: Duration::from_secs(jitter),
            grace: Duration::from_secs(grace),
        })
    }

    /// What a scheduler does with missed windows.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming `catch_up` or `max_catch_up`.
    pub fn catch_up(&self) -> Result<CatchUp> {
        let max = self.file.max_catch_up.unwrap_or(DEFAULT_MAX_CATCH_UP);
        if !(1..=MAX_CATCH_UP).contains(&max) {
            return Err(Error::input(format!(
                "invalid `max_catch_up = {max}`: use 1 to {MAX_CATCH_UP}"
            )));
        }
        CatchUp::parse(self.file.catch_up.as_deref().unwrap_or("all"), max)
    }

    /// The fixed clock reading `--now` (or the config's `now`) gives.
    ///
    /// # Errors
    ///
    /// `Error::Input` for an instant that does not parse.
    pub fn now(&self) -> Result<Option<Timestamp>> {
        match (&self.flags.now, &self.file.now) {
            (Some(t), _) => clock::parse_instant("--now", t).map(Some),
            (None, Some(t)) => clock::parse_instant("`now` in the job config", t).map(Some),
            (None, None) => Ok(None),
        }
    }

    /// The flags a command printed for this job carries (see
    /// [`command_target`]).
    pub fn target(&self) -> Target {
        command_target(self.flags.store.as_deref(), self.flags.config.as_deref())
    }

    /// The claim store; only its own `${VAR}`s are filled in.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the flag or key (see [`store::resolve`]).
    pub fn store(&self, env: &Env<'_>) -> Result<StoreLocation> {
        self.store_with(env, &mut Redactor::default())
    }

    fn store_with(&self, env: &Env<'_>, redactor: &mut Redactor) -> Result<StoreLocation> {
        store::resolve(
            self.flags.store.as_deref(),
            self.file.store.as_deref(),
            self.flags.config.as_deref(),
            env,
            redactor,
        )
    }

    /// The compiled-code cache folder: `--cache-dir` (or
    /// `$JOBHOST_CACHE_DIR`), else the config's `cache_dir`, else the
    /// per-user cache folder.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        match (&self.flags.cache_dir, &self.file.cache_dir) {
            (Some(p), _) => Some(p.clone()),
            (None, Some(p)) => Some(self.relative(p)),
            (None, None) => CompileCache::default_dir(),
        }
    }

    /// Where the job's digests are cached, when it has a `[digest]` model.
    pub fn digest_cache_dir(&self) -> Option<PathBuf> {
        let d = self.file.digest.as_ref()?;
        match &d.cache_dir {
            Some(dir) => Some(self.relative(dir)),
            None => self.cache_dir().map(|c| digest_dir(&c)),
        }
    }

    /// The component file.
    ///
    /// # Errors
    ///
    /// `Error::Input` when neither `--component` nor the config names one.
    pub fn component(&self) -> Result<PathBuf> {
        match (&self.flags.component, &self.file.component) {
            (Some(p), _) => Ok(p.clone()),
            (None, Some(p)) => Ok(self.relative(p)),
            (None, None) => Err(Error::input(
                "no component given: pass --component PATH or set `component` in the job config",
            )),
        }
    }

    /// Everything running the job needs, every `${VAR}` it uses filled in
    /// from `env`: a missing credential is bad input now, before any claim.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the flag, key or variable that is wrong.
    pub fn job(&self, env: &Env<'_>) -> Result<Job> {
        let file = &self.file;
        let component = self.component()?;
        let schedule = self.schedule()?;
        let catch_up = self.catch_up()?;
        let mut redactor = Redactor::default();
        let store = self.store_with(env, &mut redactor)?;
        let from_file = |p: &Path| self.relative(p);
        let destinations =
            destinations::destinations(&file.destinations, &from_file, env, &mut redactor)?;
        let guest = limits::guest(&file.limits, &file.params)?;
        let pings = ping::pings(&file.ping.clone().unwrap_or_default(), env, &mut redactor)?;
        let lease = limits::lease(&file.limits, guest.limits.timeout, &pings, &destinations)?;
        let notify = notify::notify(&file.notify, file.dashboard.as_ref(), env, &mut redactor)?;
        let pause_after_failures = notify::pause_after(file.pause_after_failures)?;
        if let Some(t) = &file.telemetry {
            telemetry::telemetry(t, env, &mut redactor)?;
        }
        let source = match &file.source {
            Some(s) => Some(source::source(
                s,
                &from_file,
                env,
                &mut redactor,
                guest.limits.timeout,
                &schedule.zone,
            )?),
            None => None,
        };
        let digest = match &file.digest {
            Some(d) => Some(digest::digest(
                d,
                env,
                &mut redactor,
                &destinations,
                self.cache_dir(),
                &from_file,
            )?),
            None => None,
        };
        let needs = self.needs()?;
        if needs.is_empty() && source.as_ref().is_some_and(Source::is_upstream) {
            return Err(Error::input(
                "`[source] type = \"upstream\"` reads the reports of the jobs in `[[needs]]`, \
                 and the job names none: add `[[needs]] job = \"NAME\"` for each job it builds on",
            ));
        }
        self.use_signing_key()?;
        let recheck = self.recheck()?;
        if recheck.is_some() && source.as_ref().is_none_or(Source::is_upstream) {
            return Err(Error::input(
                "`[freshness] recheck` reads the job's `[source]` again, and the job reads none \
                 (or reads its upstream jobs' reports, whose changes mark it STALE on their \
                 own): remove `[freshness]`",
            ));
        }
        Ok(Job {
            schedule,
            catch_up,
            component,
            cache_dir: self.cache_dir(),
            store,
            require_durable_store: self.flags.require_durable_store
                || file.require_durable_store.unwrap_or(false),
            source,
            guest,
            destinations,
            redactor,
            attempts: self.attempts()?,
            lease,
            pings,
            notify,
            pause_after_failures,
            digest,
            retention: self.retention()?,
            needs,
            recheck,
            shadow: file.shadow.as_ref().map(|s| from_file(&s.component)),
            target: self.target(),
        })
    }

    /// Makes the job's `[signing] key_file`, if it names one, the key this
    /// process signs with.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the key file when it cannot be used, or when
    /// another job of this process signs with another key.
    pub fn use_signing_key(&self) -> Result<()> {
        match &self.file.signing {
            Some(s) => crate::store::chain::sign_with_file(&self.relative(&s.key_file)),
            None => Ok(()),
        }
    }

    /// How far back the daemon reads DONE windows again (`[freshness]
    /// recheck`), if it does.
    ///
    /// # Errors
    ///
    /// `Error::Input` for a duration that is not hours or days from an hour
    /// to [`MAX_RECHECK_DAYS`] days.
    pub fn recheck(&self) -> Result<Option<Duration>> {
        let Some(f) = &self.file.freshness else {
            return Ok(None);
        };
        let text = f.recheck.trim();
        let seconds = text
            .strip_suffix('d')
            .and_then(|n| n.parse::<u64>().ok())
            .map(|n| n.saturating_mul(86_400))
            .or_else(|| {
                text.strip_suffix('h')
                    .and_then(|n| n.parse::<u64>().ok())
                    .map(|n| n.saturating_mul(3600))
            });
        match seconds {
            Some(s) if (3600..=MAX_RECHECK_DAYS * 86_400).contains(&s) => {
                Ok(Some(Duration::from_secs(s)))
            }
            _ => Err(Error::input(format!(
                "invalid `freshness.recheck = \"{}\"`: give hours or days, from \"1h\" to \
                 \"{MAX_RECHECK_DAYS}d\" (\"3d\": DONE windows of the last 3 days are read again)",
                crate::core::text::printable(&crate::core::text::echoed(text, 40))
            ))),
        }
    }

    /// The upstream jobs the job needs (`[[needs]]`), in the file's order.
    ///
    /// # Errors
    ///
    /// `Error::Input` for a name that is not a job name, the job itself, a
    /// job named twice, or more than [`MOST_NEEDS`] of them.
    pub fn needs(&self) -> Result<Vec<JobName>> {
        let own = self.name()?;
        let mut out: Vec<JobName> = Vec::new();
        if self.file.needs.len() > MOST_NEEDS {
            return Err(Error::input(format!(
                "job `{own}` has {} `[[needs]]`: at most {MOST_NEEDS}",
                self.file.needs.len()
            )));
        }
        for need in &self.file.needs {
            let name = JobName::new(&need.job)
                .map_err(|e| Error::input(format!("invalid `[[needs]] job`: {e}")))?;
            if name == own {
                return Err(Error::input(format!(
                    "job `{own}` names itself in `[[needs]]`: a job cannot wait for its own \
                     windows; remove that entry"
                )));
            }
            if out.contains(&name) {
                return Err(Error::input(format!(
                    "job `{own}` names `{name}` twice in `[[needs]]`: remove one"
                )));
            }
            out.push(name);
        }
        Ok(out)
    }

    /// What the daemon prunes once a day, if anything.
    ///
    /// # Errors
    ///
    /// `Error::Input` for an age of 0 or past [`MAX_RETENTION_DAYS`].
    pub fn retention(&self) -> Result<Option<crate::run::job::Retention>> {
        let Some(r) = &self.file.retention else {
            return Ok(None);
        };
        if r.older_than_days == 0 || r.older_than_days > MAX_RETENTION_DAYS {
            return Err(Error::input(format!(
                "invalid `retention.older_than_days = {}`: use 1 to {MAX_RETENTION_DAYS}",
                r.older_than_days
            )));
        }
        Ok(Some(crate::run::job::Retention {
            older_than: Duration::from_secs(u64::from(r.older_than_days) * 86_400),
            keep_journals: r.keep_journals,
        }))
    }

    /// How many attempts a window gets, and the waits between them.
    fn attempts(&self) -> Result<Attempts> {
        let file = &self.file;
        let max_attempts = file.max_attempts.unwrap_or(3);
        if max_attempts == 0 {
            return Err(Error::input("invalid `max_attempts = 0`: use 1 or more"));
        }
        let retry_delay = Duration::from_secs(file.retry_delay_seconds.unwrap_or(60));
        let max_retry_delay = Duration::from_secs(file.max_retry_delay_seconds.unwrap_or(3600));
        let longest = Duration::from_secs(limits::MAX_LEASE_SECONDS);
        if max_retry_delay < retry_delay || max_retry_delay > longest {
            return Err(Error::input(format!(
                "invalid `max_retry_delay_seconds = {}`: use at least `retry_delay_seconds` ({}) \
                 and at most {}",
                max_retry_delay.as_secs(),
                retry_delay.as_secs(),
                longest.as_secs()
            )));
        }
        Ok(Attempts {
            max_attempts,
            retry_delay,
            max_retry_delay,
        })
    }

    /// The job's `[digest]` model, for `jobhost digest`: only the digest's
    /// own `${VAR}`s, the store's, and those of the destination that gets
    /// digests are filled in; `None` without a `[digest]` section.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the key or variable that is wrong.
    pub fn digest(&self, env: &Env<'_>) -> Result<Option<DigestSettings>> {
        let Some(d) = &self.file.digest else {
            return Ok(None);
        };
        let mut redactor = Redactor::default();
        self.store_with(env, &mut redactor)?;
        let from_file = |p: &Path| self.relative(p);
        let mut wanted = BTreeMap::new();
        if let Some((name, written)) = d
            .destination
            .as_ref()
            .and_then(|name| self.file.destinations.get_key_value(name))
        {
            let dest = destinations::destination(name, written, &from_file, env, &mut redactor)?;
            wanted.insert(name.clone(), dest);
        }
        digest::digest(d, env, &mut redactor, &wanted, self.cache_dir(), &from_file).map(Some)
    }
}

/// Reads and parses a job config file.
///
/// # Errors
///
/// `Error::Input` naming the file, and the line and key for a TOML error.
pub fn load_file(path: &Path) -> Result<ConfigFile> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::input(format!("cannot read job config `{}`", path.display())).because(e)
    })?;
    toml::from_str(&text).map_err(|e| {
        let detail = e.message().to_string();
        let at = e
            .span()
            .map(|s| format!(" (line {})", error_line(&text, &detail, s)))
            .unwrap_or_default();
        Error::input(format!(
            "invalid job config `{}`{at}: {detail}",
            path.display()
        ))
    })
}

/// The line a TOML error is about. The parser places an unknown key of a
/// table read through a tagged enum (`[destinations.NAME]`) at the table's
/// header, not at the key: the line of the table that sets the key is the
/// one a person must fix.
fn error_line(text: &str, detail: &str, span: std::ops::Range<usize>) -> usize {
    let line_of = |at: usize| text[..at.min(text.len())].matches('\n').count() + 1;
    let unknown = detail
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once('`'))
        .map(|(name, _)| name);
    let (Some(name), Some(table)) = (unknown, text.get(span.start..)) else {
        return line_of(span.start);
    };
    let mut offset = span.start;
    for (i, line) in table.split_inclusive('\n').enumerate() {
        // The table ends where the next one starts.
        if i > 0 && line.trim_start().starts_with('[') {
            break;
        }
        let key = line.trim_start();
        let key = key
            .strip_prefix('"')
            .and_then(|k| k.strip_prefix(name))
            .and_then(|k| k.strip_prefix('"'))
            .or_else(|| key.strip_prefix(name));
        if key.is_some_and(|rest| rest.trim_start().starts_with('=')) {
            return line_of(offset);
        }
        offset += line.len();
    }
    line_of(span.start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effects::destination::{DeliveryMode, Target};

    #[test]
    fn a_misspelt_key_of_a_destination_is_reported_at_its_own_line() {
        let (_d, p) = write(
            "job = \"j\"\n\n[destinations.webhook]\ntype = \"http\"\nurl = \"http://x/\"\ndelivry = \"at-most-once\"\n",
        );
        let err = load_file(&p).unwrap_err().to_string();
        assert!(err.contains("(line 6)"), "{err}");
        assert!(err.contains("unknown field `delivry`"), "{err}");
        // A misspelt top-level key keeps the parser's own line.
        let (_d, p) = write("job = \"j\"\nwindw = \"day\"\n");
        let err = load_file(&p).unwrap_err().to_string();
        assert!(err.contains("(line 2)"), "{err}");
    }

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("job.toml");
        std::fs::write(&p, text).unwrap();
        (dir, p)
    }

    fn config(p: &Path) -> JobConfig {
        JobConfig::load(&RunFlags {
            config: Some(p.to_path_buf()),
            ..RunFlags::default()
        })
        .unwrap()
    }

    fn no_env(_: &str) -> Option<std::ffi::OsString> {
        None
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
        let job = JobConfig::load(&flags).unwrap().job(&no_env).unwrap();
        let dir = p.parent().unwrap();
        assert_eq!(job.name().as_str(), "sales");
        assert_eq!(job.schedule.zone.name(), "UTC");
        assert_eq!(job.component, dir.join("r.wasm"));
        assert_eq!(
            job.source.unwrap().location(),
            dir.join("d.db").display().to_string()
        );
        assert_eq!(
            job.destinations["digest"].target,
            Target::File {
                path: dir.join("out/d.jsonl")
            }
        );
        assert_eq!(job.destinations["digest"].mode, DeliveryMode::AtLeastOnce);
        assert_eq!(job.guest.params, vec![("top".to_string(), "5".to_string())]);
        assert_eq!(job.store, StoreLocation::Sqlite(dir.join(DEFAULT_STORE)));
    }

    #[test]
    fn a_misspelled_key_is_an_error_naming_it_and_its_line() {
        let (_dir, p) = write("job = \"x\"\ncomponent = \"r.wasm\"\ntimezon = \"UTC\"\n");
        let err = JobConfig::load(&RunFlags {
            config: Some(p),
            ..RunFlags::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("timezon"), "{err}");
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn what_a_reader_needs_resolves_without_a_component_or_the_runs_credentials() {
        let (_dir, p) = write(
            "job = \"sales\"\nwindow = \"hour\"\ncache_dir = \"c\"\n\
             [destinations.ledger]\ntype = \"http\"\nurl = \"https://l.example/${LEDGER_URL_PART}\"\n\
             headers = { Authorization = \"Bearer ${LEDGER_TOKEN}\" }\n\
             [ping]\nsuccess = \"https://hc.example/${HC_UUID}\"\n\
             [digest]\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\napi_key = \"${MODEL_KEY}\"\n",
        );
        let c = config(&p);
        let schedule = c.schedule().unwrap();
        assert_eq!(
            (schedule.job.as_str(), schedule.kind),
            ("sales", WindowKind::Hour)
        );
        c.catch_up().unwrap();
        let dir = p.parent().unwrap();
        assert_eq!(
            c.store(&no_env).unwrap(),
            StoreLocation::Sqlite(dir.join(DEFAULT_STORE))
        );
        assert_eq!(c.digest_cache_dir(), Some(dir.join("c").join("digests")));
        // Running it needs all of them: the first one missing is named.
        let err = c.job(&no_env).unwrap_err().to_string();
        assert!(err.contains("no component given"), "{err}");
        let flags = RunFlags {
            config: Some(p.clone()),
            component: Some("r.wasm".into()),
            ..RunFlags::default()
        };
        let err = JobConfig::load(&flags).unwrap().job(&no_env).unwrap_err();
        assert!(matches!(err, Error::Input(_)), "{err}");
        assert!(err.to_string().contains("LEDGER_URL_PART"), "{err}");
        // `jobhost digest` needs the model's key, not the ledger's token.
        let err = c.digest(&no_env).unwrap_err().to_string();
        assert!(err.contains("MODEL_KEY"), "{err}");
        let key = |name: &str| (name == "MODEL_KEY").then(|| "sk".into());
        assert_eq!(c.digest(&key).unwrap().unwrap().model, "m");
    }

    #[test]
    fn a_lease_shorter_than_the_timeout_is_refused() {
        let (_dir, p) =
            write("component = \"r.wasm\"\n[limits]\ntimeout_seconds = 60\nlease_seconds = 30\n");
        let err = config(&p).job(&no_env).unwrap_err();
        assert!(err.to_string().contains("must outlive"), "{err}");
    }
}
