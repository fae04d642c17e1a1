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

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::SeedableRng;
use serde::Serialize;

use crate::core::clock::Clock;
use crate::core::error::{Error, Result};
use crate::core::redact::Redactor;
use crate::core::text::say;
use crate::core::window::JobName;
use crate::core::window::WindowKey;
use crate::effects::destination::{Destination, HttpTarget};
use crate::effects::send::{Sender, Sending, Sent, Uncertainty};
use crate::store::{DigestNote, Ledger, StagedMessage, StoreLocation};

use self::cache::{DigestCache, Entry, KeyParts, Lookup};

/// The system message when the config gives none.
pub const DEFAULT_SYSTEM: &str = "You turn a report's figures into a short, plain-language \
     digest for the people who read it. Be accurate and brief, and never invent figures.";

/// A job's validated digest settings.
#[derive(Clone)]
pub struct DigestSettings {
    /// Where the model is asked (`<base_url>/chat/completions`).
    pub endpoint: HttpTarget,
    /// The API key, sent as a bearer token.
    pub api_key: Option<String>,
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
            &format!("cannot note the digest in the store: {e:#}"),
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
                         ({e:#}); a later request may send it again, with the same idempotency key"
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
            look: None,
            key,
            fence: None,
            maybe_there: true,
            now: clock.lease_now(),
            signature: None,
            traceparent: None,
        };
        match sender.send(name, dest, &message, &run, &mut || Ok(None)) {
            Ok(Sent::Delivered { detail, .. }) => {
                out.status = MessageStatus::Delivered;
                out.detail = Some(detail);
                return out;
            }
            // Nothing here is looked at before writing (no look is given).
            Ok(Sent::Withheld) => return out,
            Ok(Sent::Failed(f)) => {
                out.detail = Some(f.message.clone());
                if f.outcome == Uncertainty::Refused || out.attempts >= dest.retry.tries {
                    return out;
                }
                clock.sleep(dest.retry.wait(out.attempts + 1, f.retry_after, &mut rng));
            }
            Err(e) => {
                out.detail = Some(e.chain());
                return out;
            }
        }
    }
}
