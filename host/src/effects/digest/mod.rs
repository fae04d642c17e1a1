//! A human-readable digest of each DONE run, from a language model. Two
//! rules hold by construction:
//!
//! - The model never decides whether the job runs. It is asked only after
//!   the run is DONE and delivered, about text the component wrote (its
//!   `describe` export, stored with the report), and nothing it answers
//!   goes back into the component, the run's state or its delivery. Any
//!   failure of the model (no answer in time, 5xx, 429, bad JSON, a
//!   refusal) leaves the run DONE and says why in the receipt.
//! - The digest is a cache, never state. It lives in a file on the host's
//!   disk (see [`cache`]), named by a hash of the model, its settings and
//!   the prompt, reused while younger than the job's TTL; losing it costs
//!   one model call. The claim store only notes which cache entry a run's
//!   digest is, why the last attempt failed, and whether its message went
//!   out.
//!
//! A job may name a destination for the digest: it gets one message of its
//! own (idempotency key `<window key>#digest`), sent only once a digest
//! exists and at most once per run as far as this host knows, never
//! holding up the report's own messages.

pub mod cache;
pub mod model;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::core::clock::Clock;
use crate::core::env::{Env, expand};
use crate::core::error::{Error, Result};
use crate::core::redact::Redactor;
use crate::core::text::say;
use crate::core::window::JobName;
use crate::core::window::WindowKey;
use crate::effects::destination::{DeliveryMode, Destination, HttpTarget};
use crate::effects::send::{Sender, Sending, Sent, Uncertainty};
use crate::store::{DigestNote, Ledger, StagedMessage, StoreLocation};

use self::cache::{DigestCache, Entry, KeyParts, Lookup};

/// `[digest]` in the job config, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DigestFile {
    /// The OpenAI-compatible API's base URL, for example
    /// `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1` (Ollama);
    /// requests go to `<base_url>/chat/completions`.
    pub base_url: String,
    /// The model's name.
    pub model: String,
    /// `${VAR}`: the API key, from the environment; sent as a bearer
    /// token. Leave it out for a local server that needs none.
    pub api_key: Option<String>,
    /// Seconds the model may take to answer (default 30).
    pub timeout_seconds: Option<f64>,
    /// Seconds a digest is reused before the model is asked again
    /// (default 7 days; 0: always ask).
    pub cache_ttl_seconds: Option<u64>,
    /// The system message (default: a short instruction to be accurate
    /// and brief).
    pub system: Option<String>,
    /// The longest answer, in tokens.
    pub max_tokens: Option<u32>,
    /// The sampling temperature (0 to 2).
    pub temperature: Option<f64>,
    /// A destination (declared in `[destinations]`, at-least-once) that
    /// gets each digest as a message of its own.
    pub destination: Option<String>,
    /// The JSON field of that message that holds the digest (default
    /// `text`, as chat webhooks want; `content` for some).
    pub field: Option<String>,
    /// Where digests are cached (default: `digests/` in the cache folder).
    pub cache_dir: Option<PathBuf>,
}

/// The system message when the config gives none.
pub const DEFAULT_SYSTEM: &str = "You turn a report's figures into a short, plain-language \
     digest for the people who read it. Be accurate and brief, and never invent figures.";

/// The longest `timeout_seconds` a config may ask for.
const MAX_TIMEOUT_SECONDS: f64 = 600.0;

/// The longest `cache_ttl_seconds` a config may ask for: a year.
const MAX_TTL_SECONDS: u64 = 365 * 86_400;

/// A job's validated digest settings.
#[derive(Clone)]
pub struct DigestSettings {
    endpoint: HttpTarget,
    api_key: Option<String>,
    /// The model's name.
    pub model: String,
    /// The longest the model may take.
    pub timeout: Duration,
    /// How long a digest is reused.
    pub ttl: Duration,
    /// The system message.
    pub system: String,
    /// The longest answer, in tokens.
    pub max_tokens: Option<u32>,
    /// The sampling temperature.
    pub temperature: Option<f64>,
    /// The destination that gets each digest, if any: its name and how
    /// to reach it.
    pub destination: Option<(String, Destination)>,
    /// The JSON field of the digest message that holds the digest.
    pub field: String,
    /// Where digests are cached.
    pub cache_dir: PathBuf,
    /// The job's credentials, scrubbed from every message about a digest.
    pub redactor: Redactor,
}

impl fmt::Debug for DigestSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DigestSettings")
            .field("endpoint", &self.endpoint)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .field("ttl", &self.ttl)
            .field(
                "destination",
                &self.destination.as_ref().map(|(name, _)| name),
            )
            .field("cache_dir", &self.cache_dir)
            .finish_non_exhaustive()
    }
}

impl DigestSettings {
    /// Validates `[digest]`: `${VAR}` values come from `env` (and go to
    /// `redactor`); `destinations` are the job's; digests are cached in
    /// the file's `cache_dir` (`from_file` makes a path relative to the
    /// config's folder), else under `cache_dir`.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the field and the fix.
    pub fn from_file(
        file: DigestFile,
        env: &Env<'_>,
        redactor: &mut Redactor,
        destinations: &BTreeMap<String, Destination>,
        cache_dir: Option<PathBuf>,
        from_file: &dyn Fn(&std::path::Path) -> PathBuf,
    ) -> Result<DigestSettings> {
        let base = file.base_url.trim_end_matches('/');
        let (url, shown) = if base.ends_with("/chat/completions") {
            (base.to_string(), file.base_url.clone())
        } else {
            (
                format!("{base}/chat/completions"),
                format!("{base}/chat/completions"),
            )
        };
        let full = expand("`digest.base_url`", &url, env, redactor)?;
        let endpoint = HttpTarget::new(full, shown)
            .map_err(|why| Error::input(format!("invalid `digest.base_url`: {why}")))?;
        if file.model.trim().is_empty() {
            return Err(Error::input(
                "invalid `digest.model = \"\"`: name the model, for example \"gpt-4o-mini\" or \"llama3.1\"",
            ));
        }
        let api_key = match &file.api_key {
            None => None,
            Some(k) if !is_one_variable(k) => {
                return Err(Error::input(
                    "`digest.api_key` must be one environment variable, as \
                     `api_key = \"${OPENAI_API_KEY}\"`: a key written into the config is one \
                     commit away from leaking",
                ));
            }
            Some(k) => {
                let key = expand("`digest.api_key`", k, env, redactor)?;
                redactor.add(key.clone());
                Some(key)
            }
        };
        let timeout_s = file.timeout_seconds.unwrap_or(30.0);
        if !(timeout_s.is_finite() && timeout_s > 0.0 && timeout_s <= MAX_TIMEOUT_SECONDS) {
            return Err(Error::input(format!(
                "invalid `digest.timeout_seconds = {timeout_s}`: use a number of seconds above 0 \
                 and at most {MAX_TIMEOUT_SECONDS}"
            )));
        }
        let ttl = file.cache_ttl_seconds.unwrap_or(7 * 86_400);
        if ttl > MAX_TTL_SECONDS {
            return Err(Error::input(format!(
                "invalid `digest.cache_ttl_seconds = {ttl}`: at most {MAX_TTL_SECONDS} (a year)"
            )));
        }
        if let Some(t) = file.temperature
            && !(t.is_finite() && (0.0..=2.0).contains(&t))
        {
            return Err(Error::input(format!(
                "invalid `digest.temperature = {t}`: use 0 to 2"
            )));
        }
        if let Some(n) = file.max_tokens
            && !(1..=1_000_000).contains(&n)
        {
            return Err(Error::input(format!(
                "invalid `digest.max_tokens = {n}`: use 1 to 1000000"
            )));
        }
        let destination = match &file.destination {
            None => None,
            Some(name) => match destinations.get(name) {
                None => {
                    return Err(Error::input(format!(
                        "`digest.destination = \"{name}\"` is not declared; add \
                         [destinations.{name}] or remove the field"
                    )));
                }
                Some(d) if d.mode == DeliveryMode::AtMostOnce => {
                    return Err(Error::input(format!(
                        "`digest.destination = \"{name}\"` is at-most-once; the digest message \
                         is sent again with the same idempotency key after a crash, so it needs \
                         an at-least-once destination"
                    )));
                }
                Some(d) => Some((name.clone(), d.clone())),
            },
        };
        let field = file.field.unwrap_or_else(|| "text".to_string());
        if field.is_empty() {
            return Err(Error::input(
                "invalid `digest.field = \"\"`: name the JSON field, for example \"text\"",
            ));
        }
        let cache_dir = match (&file.cache_dir, cache_dir) {
            (Some(dir), _) => from_file(dir),
            (None, Some(dir)) => digest_dir(&dir),
            (None, None) => {
                return Err(Error::input(
                    "digests are cached under the cache folder, and there is none: set \
                     `digest.cache_dir` or `cache_dir` in the job config, --cache-dir or \
                     $JOBHOST_CACHE_DIR",
                ));
            }
        };
        Ok(DigestSettings {
            endpoint,
            api_key,
            model: file.model,
            timeout: Duration::from_secs_f64(timeout_s),
            ttl: Duration::from_secs(ttl),
            system: file.system.unwrap_or_else(|| DEFAULT_SYSTEM.to_string()),
            max_tokens: file.max_tokens,
            temperature: file.temperature,
            destination,
            field,
            cache_dir,
            redactor: redactor.clone(),
        })
    }

    /// The cache key of the digest of `prompt` under these settings.
    pub fn cache_key(&self, prompt: &str) -> String {
        KeyParts {
            endpoint: self.endpoint.url(),
            model: &self.model,
            system: &self.system,
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            prompt,
        }
        .key()
    }
}

/// Whether `text` is exactly one `${NAME}` reference.
fn is_one_variable(text: &str) -> bool {
    text.strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
        .is_some_and(|name| {
            name.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// Where digests are cached under a cache folder.
pub fn digest_dir(cache_dir: &std::path::Path) -> PathBuf {
    cache_dir.join("digests")
}

/// Where a run's digest stands after an attempt at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DigestStatus {
    /// The model answered.
    Generated,
    /// A fresh cache entry answered.
    Cached,
    /// The model failed (see `error`).
    Failed,
    /// The run's component gave nothing to describe.
    Nothing,
}

/// Where a digest's own message stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MessageStatus {
    /// Delivered by this invocation.
    Delivered,
    /// An earlier invocation delivered it.
    AlreadySent,
    /// Not delivered (see `detail`).
    Failed,
}

/// What became of a run's digest in this invocation, as the receipt shows
/// it.
#[derive(Debug, Clone, Serialize)]
pub struct DigestInfo {
    /// Where the digest stands.
    pub status: DigestStatus,
    /// `hit` or `miss`, when the cache was looked at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<&'static str>,
    /// The model asked.
    pub model: String,
    /// The digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Why there is no digest, in one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The digest's own message, when the job names a destination for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<DigestMessage>,
}

/// The digest message's fate.
#[derive(Debug, Clone, Serialize)]
pub struct DigestMessage {
    /// The destination.
    pub destination: String,
    /// `<window key>#digest`.
    pub idempotency_key: String,
    /// Where the message stands.
    pub status: MessageStatus,
    /// Sends made by this invocation.
    pub attempts: u32,
    /// What the last send came to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A run whose digest is wanted.
#[derive(Debug, Clone)]
pub struct Wanted {
    /// The run.
    pub key: WindowKey,
    /// What its component asked to describe.
    pub prompt: Option<String>,
    /// Whether its digest message was delivered already.
    pub already_sent: bool,
    /// Ask the model even when the cache holds a fresh digest.
    pub refresh: bool,
}

impl Wanted {
    /// The digest of a run that just became DONE.
    pub fn new(key: WindowKey, prompt: Option<String>) -> Wanted {
        Wanted {
            key,
            prompt,
            already_sent: false,
            refresh: false,
        }
    }
}

/// Which run `jobhost digest KEY` is for, and of which job.
#[derive(Debug, Clone, Copy)]
pub struct Again<'a> {
    /// The job whose config asks.
    pub job: &'a JobName,
    /// The job's store.
    pub store: &'a StoreLocation,
    /// The config file, named in messages.
    pub config_file: &'a Path,
    /// The run.
    pub key: &'a WindowKey,
    /// Ask the model even when the cache holds a fresh digest.
    pub refresh: bool,
}

/// `jobhost digest KEY`: the digest of a DONE run of the job, made again as
/// [`make`] makes it.
///
/// # Errors
///
/// `Error::Input` when the store has no such run, the run is another job's
/// or not DONE; `Error::Store` when the store cannot be read.
pub fn again(settings: &DigestSettings, run: &Again<'_>, clock: &dyn Clock) -> Result<DigestInfo> {
    let key = run.key;
    let row = crate::store::open_read_only(run.store)?
        .peek(key)?
        .ok_or_else(|| crate::store::no_such_run(key))?;
    if row.job != run.job.as_str() {
        return Err(Error::input(format!(
            "run `{key}` is of job `{}`, and `{}` configures job `{}`; pass that job's config",
            row.job,
            run.config_file.display(),
            run.job
        )));
    }
    if row.state != crate::store::RunState::Done {
        return Err(Error::input(format!(
            "run `{key}` is {}, not DONE: a digest describes a finished run",
            row.state
        )));
    }
    let wanted = Wanted {
        key: key.clone(),
        prompt: row.report.and_then(|r| r.prompt),
        already_sent: row.digest.is_some_and(|d| d.sent_at.is_some()),
        refresh: run.refresh,
    };
    let mut store = crate::store::open(run.store)?;
    Ok(make(settings, store.as_mut(), &wanted, clock))
}

/// Makes (or finds in the cache) the digest of a DONE run, notes the
/// outcome in `store`, and sends the digest message when the job names a
/// destination for it. Never fails: every problem is in the result.
pub fn make(
    settings: &DigestSettings,
    store: &mut dyn Ledger,
    wanted: &Wanted,
    clock: &dyn Clock,
) -> DigestInfo {
    let mut info = DigestInfo {
        status: DigestStatus::Nothing,
        cache: None,
        model: settings.model.clone(),
        text: None,
        error: None,
        message: None,
    };
    let Some(prompt) = wanted.prompt.as_deref() else {
        info.error = Some(
            "the run's component gave nothing to describe (it does not export `describe`, or it \
             returned none)"
                .to_string(),
        );
        return info;
    };
    let key = settings.cache_key(prompt);
    ask_or_reuse(settings, &key, prompt, wanted.refresh, clock, &mut info);
    let note = DigestNote {
        cache_key: info.text.as_ref().map(|_| key.as_str()),
        model: &settings.model,
        error: info.error.as_deref(),
    };
    if let Err(e) = store.record_digest(&wanted.key, &note, clock.lease_now()) {
        say(
            "warning",
            &format!("cannot note the digest in the store: {e}"),
        );
    }
    if let (Some(text), Some((name, dest))) = (&info.text, &settings.destination) {
        info.message = Some(if wanted.already_sent {
            DigestMessage {
                destination: name.clone(),
                idempotency_key: format!("{}#digest", wanted.key),
                status: MessageStatus::AlreadySent,
                attempts: 0,
                detail: None,
            }
        } else {
            let sent = send(settings, name, dest, &wanted.key, text, clock);
            if sent.status == MessageStatus::Delivered
                && let Err(e) = store.digest_sent(&wanted.key, clock.lease_now())
            {
                say(
                    "warning",
                    &format!(
                        "the digest message was delivered, but the store could not note it \
                         ({e}); a later request may send it again, with the same idempotency key"
                    ),
                );
            }
            sent
        });
    }
    info
}

/// Fills in `info` from a fresh cache entry of `key`, or from the model.
fn ask_or_reuse(
    settings: &DigestSettings,
    key: &str,
    prompt: &str,
    refresh: bool,
    clock: &dyn Clock,
    info: &mut DigestInfo,
) {
    let cache = DigestCache::new(settings.cache_dir.clone());
    let found = if refresh {
        Lookup::Missing
    } else {
        cache.get(key, clock.lease_now(), settings.ttl)
    };
    if let Lookup::Unreadable(why) = &found {
        say(
            "warning",
            &format!("digest cache: {why}; asking the model again"),
        );
    }
    if let Lookup::Fresh(entry) = found {
        info.status = DigestStatus::Cached;
        info.cache = Some("hit");
        info.text = Some(entry.text);
        return;
    }
    info.cache = Some("miss");
    let asked = model::ask(
        &model::Ask {
            endpoint: &settings.endpoint,
            api_key: settings.api_key.as_deref(),
            model: &settings.model,
            system: &settings.system,
            prompt,
            max_tokens: settings.max_tokens,
            temperature: settings.temperature,
            timeout: settings.timeout,
        },
        &settings.redactor,
    );
    match asked {
        Ok(text) => {
            let entry = Entry {
                created_at: clock.lease_now(),
                model: settings.model.clone(),
                text: text.clone(),
            };
            if let Err(why) = cache.put(key, &entry) {
                say(
                    "warning",
                    &format!(
                        "cannot cache the digest: {why}; the next request asks the model again"
                    ),
                );
            }
            info.status = DigestStatus::Generated;
            info.text = Some(text);
        }
        Err(why) => {
            info.status = DigestStatus::Failed;
            info.error = Some(why);
        }
    }
}

/// Sends the digest message, trying as often as the destination allows.
fn send(
    settings: &DigestSettings,
    name: &str,
    dest: &Destination,
    key: &WindowKey,
    text: &str,
    clock: &dyn Clock,
) -> DigestMessage {
    let idempotency_key = format!("{key}#digest");
    let mut out = DigestMessage {
        destination: name.to_string(),
        idempotency_key: idempotency_key.clone(),
        status: MessageStatus::Failed,
        attempts: 0,
        detail: None,
    };
    let mut body = serde_json::Map::new();
    body.insert(settings.field.clone(), text.into());
    let message = StagedMessage {
        seq: 0,
        destination: name.to_string(),
        idempotency_key,
        content_type: "application/json".to_string(),
        body: serde_json::Value::Object(body).to_string().into_bytes(),
    };
    let sender = Sender::new(settings.redactor.clone());
    let mut rng = rand::rngs::StdRng::seed_from_u64(
        clock.lease_now().as_nanosecond() as u64 ^ u64::from(std::process::id()),
    );
    loop {
        out.attempts += 1;
        // Nothing to fence: the run is DONE, and the key makes a second
        // copy harmless where the destination deduplicates.
        let run = Sending {
            key,
            fence: None,
            maybe_there: true,
            now: clock.lease_now(),
        };
        match sender.send(name, dest, &message, &run, &mut || Ok(())) {
            Ok(Sent::Delivered { detail, .. }) => {
                out.status = MessageStatus::Delivered;
                out.detail = Some(detail);
                return out;
            }
            Ok(Sent::Failed(f)) => {
                out.detail = Some(f.message.clone());
                if f.outcome == Uncertainty::Refused || out.attempts >= dest.retry.tries {
                    return out;
                }
                clock.sleep(dest.retry.wait(out.attempts + 1, f.retry_after, &mut rng));
            }
            Err(e) => {
                out.detail = Some(e.to_string());
                return out;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effects::destination::{RetryPolicy, Target};

    fn settings(text: &str) -> Result<DigestSettings> {
        let file: DigestFile = toml::from_str(text).unwrap();
        let env = |name: &str| (name == "MODEL_KEY").then(|| "sk-from-env".into());
        let mut destinations = BTreeMap::new();
        for (name, mode) in [
            ("chat", DeliveryMode::AtLeastOnce),
            ("ledger", DeliveryMode::AtMostOnce),
        ] {
            destinations.insert(
                name.to_string(),
                Destination {
                    target: Target::File {
                        path: PathBuf::from("x"),
                    },
                    mode,
                    retry: RetryPolicy::once(),
                },
            );
        }
        DigestSettings::from_file(
            file,
            &env,
            &mut Redactor::default(),
            &destinations,
            Some(PathBuf::from("/cache")),
            &|p| PathBuf::from("/jobs").join(p),
        )
    }

    #[test]
    fn a_model_is_configured_with_its_key_from_the_environment_and_sensible_defaults() {
        let s = settings(
            "base_url = \"http://127.0.0.1:11434/v1/\"\nmodel = \"llama3.1\"\napi_key = \"${MODEL_KEY}\"",
        )
        .unwrap();
        assert_eq!(
            s.endpoint.url(),
            "http://127.0.0.1:11434/v1/chat/completions"
        );
        assert_eq!(s.api_key.as_deref(), Some("sk-from-env"));
        assert!(!format!("{s:?}").contains("sk-from-env"), "{s:?}");
        assert_eq!(s.timeout, Duration::from_secs(30));
        assert_eq!(s.ttl, Duration::from_secs(7 * 86_400));
        assert_eq!(s.cache_dir, PathBuf::from("/cache/digests"));
        assert_eq!(s.field, "text");
        let own = settings("base_url = \"https://m.example/v1/chat/completions\"\nmodel = \"m\"\ncache_dir = \"d\"").unwrap();
        assert_eq!(own.endpoint.url(), "https://m.example/v1/chat/completions");
        assert_eq!(own.cache_dir, PathBuf::from("/jobs/d"));
    }

    #[test]
    fn bad_model_settings_name_the_field_and_the_fix() {
        let base = "base_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n";
        for (extra, needle) in [
            (
                "api_key = \"sk-live-literal\"",
                "must be one environment variable",
            ),
            ("api_key = \"${UNSET_KEY}\"", "set UNSET_KEY"),
            (
                "api_key = \"sk-live$${X}\"",
                "must be one environment variable",
            ),
            (
                "api_key = \"Bearer ${MODEL_KEY}\"",
                "must be one environment variable",
            ),
            ("timeout_seconds = 0", "`digest.timeout_seconds = 0`"),
            ("cache_ttl_seconds = 99999999999", "at most 31536000"),
            (
                "temperature = 3.5",
                "`digest.temperature = 3.5`: use 0 to 2",
            ),
            ("max_tokens = 0", "`digest.max_tokens = 0`"),
            ("destination = \"nowhere\"", "add [destinations.nowhere]"),
            (
                "destination = \"ledger\"",
                "needs an at-least-once destination",
            ),
            ("field = \"\"", "`digest.field = \"\"`"),
        ] {
            let err = settings(&format!("{base}{extra}")).unwrap_err().to_string();
            assert!(err.contains(needle), "{extra}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
        let err = settings("base_url = \"ftp://x\"\nmodel = \"m\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`digest.base_url`"), "{err}");
        let err = settings("base_url = \"http://x/v1\"\nmodel = \" \"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("name the model"), "{err}");
    }
}
