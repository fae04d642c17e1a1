//! `[digest]`: the language model that writes a plain-language digest of
//! each DONE run, and the destination, if any, that gets it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::core::env::{Env, expand};
use crate::core::error::{Error, Result};
use crate::core::redact::Redactor;
use crate::effects::destination::{DeliveryMode, Destination, HttpTarget};
use crate::effects::digest::{DEFAULT_SYSTEM, DigestSettings, digest_dir};

/// `[digest]` in the job config, as written.
#[derive(Debug, Clone, Deserialize)]
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

/// The longest `timeout_seconds` a config may ask for.
const MAX_TIMEOUT_SECONDS: f64 = 600.0;

/// The longest `cache_ttl_seconds` a config may ask for: a year.
const MAX_TTL_SECONDS: u64 = 365 * 86_400;

/// Validates `[digest]`: `${VAR}` values come from `env` (and go to
/// `redactor`); `destinations` are the job's; digests are cached in
/// the file's `cache_dir` (`from_file` makes a path relative to the
/// config's folder), else under `cache_dir`.
///
/// # Errors
///
/// `Error::Input` naming the field and the fix.
pub fn digest(
    file: &DigestFile,
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
                "`digest.api_key` must be one environment variable or secret file, as \
                 `api_key = \"${OPENAI_API_KEY}\"` or `\"${file:/run/secrets/openai}\"`: a \
                 key written into the config is one commit away from leaking",
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
    let field = file.field.clone().unwrap_or_else(|| "text".to_string());
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
        model: file.model.clone(),
        timeout: Duration::from_secs_f64(timeout_s),
        ttl: Duration::from_secs(ttl),
        system: file
            .system
            .clone()
            .unwrap_or_else(|| DEFAULT_SYSTEM.to_string()),
        max_tokens: file.max_tokens,
        temperature: file.temperature,
        destination,
        field,
        cache_dir,
        redactor: redactor.clone(),
    })
}

/// Whether `text` is exactly one `${NAME}` reference.
fn is_one_variable(text: &str) -> bool {
    // A secret file's first line (`${file:/run/secrets/openai}`), the path
    // checked when it is read.
    if text.starts_with("${file:") && text.ends_with('}') {
        return true;
    }
    text.strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
        .is_some_and(|name| {
            name.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effects::destination::{RetryPolicy, Target};
    use std::collections::BTreeMap;

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
                    limit: crate::core::gate::Limit::default(),
                },
            );
        }
        digest(
            &file,
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
