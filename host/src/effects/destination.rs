//! The destinations a job declares, as the effects layer delivers to them:
//! a file that receives JSON lines, or an HTTP endpoint that receives POSTs,
//! each with its delivery mode and its retry policy. URLs and header values
//! may hold credentials; they are never shown.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use rand::RngExt as _;
use serde::{Deserialize, Serialize};

use crate::effects::tls::Trust;

/// A destination declared in the job's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// Where its messages go.
    pub target: Target,
    /// What an uncertain outcome means.
    pub mode: DeliveryMode,
    /// Sends per invocation and the waits between them.
    pub retry: RetryPolicy,
    /// `max_concurrent` and `max_per_second`: how many sends of this
    /// process's runs may go to the same URL at once, and how often one
    /// may start (shared by every job naming that URL).
    pub limit: crate::core::gate::Limit,
}

impl Destination {
    /// The gate every send to this destination passes: named by where the
    /// messages go, so jobs that name the same URL share it.
    pub fn gate(&self) -> String {
        match &self.target {
            Target::File { path } => format!("file {}", path.display()),
            Target::Http(h) => format!("http {}", h.url()),
        }
    }

    /// The longest one send may take.
    pub fn timeout(&self) -> Duration {
        match &self.target {
            Target::File { .. } => Duration::ZERO,
            Target::Http(h) => h.timeout,
        }
    }
}

/// Where a destination's messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Append one JSON line per message to a file.
    File {
        /// The file; its folder is created when missing.
        path: PathBuf,
    },
    /// POST each message to a URL.
    Http(HttpTarget),
}

/// What the host does when it cannot tell whether a send arrived (a
/// timeout after the request went out, a 5xx, a crash mid-send).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryMode {
    /// Send it again with the same idempotency key (the default): the
    /// destination must deduplicate on `Idempotency-Key`.
    #[default]
    AtLeastOnce,
    /// Never send it again: the run becomes ABANDONED for a person to check.
    AtMostOnce,
}

impl DeliveryMode {
    /// The mode's name in config and receipts.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryMode::AtLeastOnce => "at-least-once",
            DeliveryMode::AtMostOnce => "at-most-once",
        }
    }
}

/// Sends of one message per invocation, and the waits between them:
/// exponential backoff with full jitter, `Retry-After` honoured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Sends per invocation, the first included (1 or more).
    pub tries: u32,
    /// The wait before the second send, at most.
    pub backoff: Duration,
    /// The longest wait.
    pub max_backoff: Duration,
}

impl RetryPolicy {
    /// One send per invocation (file destinations: a failure there is local
    /// and not helped by waiting a second).
    pub fn once() -> RetryPolicy {
        RetryPolicy {
            tries: 1,
            backoff: Duration::ZERO,
            max_backoff: Duration::ZERO,
        }
    }

    /// The wait before send number `next` (2 for the first retry): a
    /// uniformly random duration up to `backoff * 2^(next-2)`, capped at
    /// `max_backoff`; at least `retry_after` when the destination asked
    /// for it (also capped).
    pub fn wait(
        &self,
        next: u32,
        retry_after: Option<Duration>,
        rng: &mut impl rand::Rng,
    ) -> Duration {
        let exp = next.saturating_sub(2).min(30);
        let ceiling = self
            .backoff
            .saturating_mul(1u32 << exp)
            .min(self.max_backoff);
        let jittered = if ceiling.is_zero() {
            Duration::ZERO
        } else {
            Duration::from_nanos(
                rng.random_range(0..=ceiling.as_nanos().min(u64::MAX as u128) as u64),
            )
        };
        jittered.max(retry_after.unwrap_or_default().min(self.max_backoff))
    }
}

/// An HTTP endpoint. The URL and header values may hold credentials taken
/// from the environment; `Debug` and every message show the URL as written
/// in the config (with its `${VAR}`s) and never a header value.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpTarget {
    url: String,
    shown_url: String,
    headers: Vec<(String, String)>,
    /// The longest one request may take, connecting included.
    pub timeout: Duration,
    /// Whom an `https://` URL trusts, when its `tls` table says; `None`:
    /// the web roots built into the binary.
    trust: Option<Trust>,
}

/// Headers the host sets itself.
const RESERVED_HEADERS: &[&str] = &[
    "idempotency-key",
    "jobhost-window",
    "jobhost-fence",
    "content-type",
    "content-length",
    "transfer-encoding",
    "host",
    "connection",
];

impl HttpTarget {
    /// A target at `url` (expanded), shown as `shown_url` (as written).
    ///
    /// # Errors
    ///
    /// Why the URL is not an absolute `http` or `https` URL.
    pub fn new(url: String, shown_url: String) -> std::result::Result<HttpTarget, String> {
        let uri: ureq::http::Uri = url
            .parse()
            .map_err(|_| format!("`{shown_url}` is not a URL; write it as https://host/path"))?;
        match uri.scheme_str() {
            Some("http" | "https") => {}
            _ => {
                return Err(format!("`{shown_url}` must start with https:// or http://"));
            }
        }
        if uri.host().is_none_or(str::is_empty) {
            return Err(format!("`{shown_url}` names no host"));
        }
        Ok(HttpTarget {
            url,
            shown_url,
            headers: Vec::new(),
            timeout: Duration::from_secs(30),
            trust: None,
        })
    }

    /// Adds a request header.
    ///
    /// # Errors
    ///
    /// Why the name or value cannot be sent (the value is never quoted).
    pub fn add_header(&mut self, name: &str, value: String) -> std::result::Result<(), String> {
        if ureq::http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(format!("`{name}` is not a valid header name"));
        }
        if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(format!(
                "jobhost sets `{name}` itself; remove it from the config"
            ));
        }
        if ureq::http::HeaderValue::from_str(&value).is_err() {
            return Err(
                "the value (after `${VAR}`s are filled in) holds a line break or a control \
                 character; fix the value or the variable"
                    .to_string(),
            );
        }
        self.headers.push((name.to_string(), value));
        Ok(())
    }

    /// Whether the URL is `https://`: only then is a `tls` table used.
    pub fn is_https(&self) -> bool {
        self.url.parse::<ureq::http::Uri>().is_ok_and(|u| {
            u.scheme_str()
                .is_some_and(|s| s.eq_ignore_ascii_case("https"))
        })
    }

    /// Trusts `trust` (for an `https://` URL).
    pub fn set_trust(&mut self, trust: Trust) {
        self.trust = Some(trust);
    }

    /// Whom the URL trusts, when its `tls` table says.
    pub fn trust(&self) -> Option<&Trust> {
        self.trust.as_ref()
    }

    /// The URL to send to (may hold credentials: never show it).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL as written in the config, safe to show.
    pub fn shown_url(&self) -> &str {
        &self.shown_url
    }

    /// The configured headers (values may hold credentials: never show them).
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }
}

impl fmt::Debug for HttpTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpTarget")
            .field("url", &self.shown_url)
            .field(
                "headers",
                &self.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("timeout", &self.timeout)
            .field("trust", &self.trust)
            .finish()
    }
}
