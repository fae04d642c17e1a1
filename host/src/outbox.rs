//! Messages for the job's destinations: staged during the guest's run
//! (checked against the config's destinations and limits, numbered in
//! order), committed with the report, and delivered by the host afterwards
//! (see `delivery`), each carrying its idempotency key
//! `<window key>#<sequence number>`. The destination types live here too:
//! a file that receives JSON lines, or an HTTP endpoint that receives POSTs.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rand::RngExt as _;
use serde::{Deserialize, Serialize};

use crate::core::failpoint::{Boundary, Failpoints};
use crate::core::text::echoed;
use crate::core::window::WindowKey;
use crate::store::StagedMessage;

/// A destination declared in the job's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// Where its messages go.
    pub target: Target,
    /// What an uncertain outcome means.
    pub mode: DeliveryMode,
    /// Sends per invocation and the waits between them.
    pub retry: RetryPolicy,
}

impl Destination {
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
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
            .finish()
    }
}

/// Why `send` refused a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StageError {
    /// Not a destination of this job.
    UnknownDestination(String),
    /// Body over the per-message limit, or the run's total over its limit
    /// (the limit that was hit, in bytes).
    TooLarge(u64),
    /// Too many messages (the maximum).
    TooManyMessages(u32),
    /// Content type malformed.
    InvalidContentType(String),
}

/// The messages one run stages.
#[derive(Debug)]
pub struct Staging {
    key: WindowKey,
    destinations: Vec<String>,
    max_messages: u32,
    max_bytes: u64,
    max_total: u64,
    total: u64,
    messages: Vec<StagedMessage>,
    failpoints: Option<Arc<dyn Failpoints>>,
    closed: bool,
}

impl Staging {
    /// An empty outbox for the run of `key`: at most `max_messages`
    /// messages of at most `max_bytes` each and `max_total` together.
    pub fn new(
        key: WindowKey,
        destinations: Vec<String>,
        max_messages: u32,
        max_bytes: u64,
        max_total: u64,
    ) -> Self {
        Staging {
            key,
            destinations,
            max_messages,
            max_bytes,
            max_total,
            total: 0,
            messages: Vec::new(),
            failpoints: None,
            closed: false,
        }
    }

    /// Refuses every later message (as an unknown destination): once `run`
    /// has returned, describing the run may cause no effect.
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Stops at [`Boundary::InGuest`] on every `send` (tests only).
    pub fn with_failpoints(mut self, failpoints: Option<Arc<dyn Failpoints>>) -> Self {
        self.failpoints = failpoints;
        self
    }

    /// Stages one message and returns its sequence number (from 1).
    ///
    /// # Errors
    ///
    /// A [`StageError`]; nothing is staged then.
    pub fn stage(
        &mut self,
        destination: String,
        body: Vec<u8>,
        content_type: String,
    ) -> std::result::Result<u32, StageError> {
        self.check(&destination, body.len() as u64, &content_type)?;
        Ok(self.stage_checked(destination, body, content_type))
    }

    /// Whether a message of `size` bytes for `destination` with
    /// `content_type` would be staged, decided before its body is read: a
    /// refused message costs the host no copy of it. A name or content type
    /// that is echoed back is cut to the longest one the host accepts.
    ///
    /// # Errors
    ///
    /// The [`StageError`] [`Staging::stage`] would answer.
    pub fn check(
        &self,
        destination: &str,
        size: u64,
        content_type: &str,
    ) -> std::result::Result<(), StageError> {
        if self.closed || !self.destinations.iter().any(|d| d == destination) {
            return Err(StageError::UnknownDestination(echoed(
                destination,
                MAX_DESTINATION_NAME,
            )));
        }
        if size > self.max_bytes {
            return Err(StageError::TooLarge(self.max_bytes));
        }
        if self.total + size > self.max_total {
            return Err(StageError::TooLarge(self.max_total));
        }
        if self.messages.len() as u32 >= self.max_messages {
            return Err(StageError::TooManyMessages(self.max_messages));
        }
        if !valid_content_type(content_type) {
            return Err(StageError::InvalidContentType(echoed(
                content_type,
                MAX_CONTENT_TYPE,
            )));
        }
        Ok(())
    }

    /// Stages a message [`Staging::check`] accepted; returns its sequence
    /// number.
    pub fn stage_checked(
        &mut self,
        destination: String,
        body: Vec<u8>,
        content_type: String,
    ) -> u32 {
        if let Some(f) = &self.failpoints {
            f.reached(Boundary::InGuest);
        }
        let seq = self.messages.len() as u32 + 1;
        self.total += body.len() as u64;
        self.messages.push(StagedMessage {
            seq,
            destination,
            idempotency_key: format!("{}#{seq}", self.key),
            content_type,
            body,
        });
        seq
    }

    /// The limits: messages, bytes per message, bytes in all.
    pub fn limits(&self) -> (u32, u64, u64) {
        (self.max_messages, self.max_bytes, self.max_total)
    }

    /// The staged messages, in order.
    pub fn into_messages(self) -> Vec<StagedMessage> {
        self.messages
    }
}

/// The longest destination name a config may declare, in bytes.
pub const MAX_DESTINATION_NAME: usize = 64;

/// The longest content type `send` accepts, in bytes.
pub const MAX_CONTENT_TYPE: usize = 256;

fn valid_content_type(t: &str) -> bool {
    let essence = t.split(';').next().unwrap_or("").trim();
    let mut parts = essence.split('/');
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    matches!((parts.next(), parts.next(), parts.next()), (Some(a), Some(b), None) if token(a) && token(b))
        && t.len() <= MAX_CONTENT_TYPE
        && !t.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn staging() -> Staging {
        Staging::new(
            WindowKey::from_stored("daily-report:2026-11-08".into()),
            vec!["digest".into()],
            3,
            10,
            15,
        )
    }

    #[test]
    fn messages_are_numbered_from_one_with_idempotency_keys() {
        let mut s = staging();
        assert_eq!(
            s.stage("digest".into(), b"{}".to_vec(), "application/json".into()),
            Ok(1)
        );
        assert_eq!(
            s.stage(
                "digest".into(),
                b"hi".to_vec(),
                "text/plain; charset=utf-8".into()
            ),
            Ok(2)
        );
        let m = s.into_messages();
        assert_eq!(m[1].idempotency_key, "daily-report:2026-11-08#2");
    }

    #[test]
    fn undeclared_destinations_large_bodies_and_bad_types_are_refused() {
        let mut s = staging();
        assert_eq!(
            s.stage("elsewhere".into(), vec![], "text/plain".into()),
            Err(StageError::UnknownDestination("elsewhere".into()))
        );
        assert_eq!(
            s.stage("digest".into(), vec![0; 11], "text/plain".into()),
            Err(StageError::TooLarge(10))
        );
        assert!(matches!(
            s.stage("digest".into(), vec![], "plain".into()),
            Err(StageError::InvalidContentType(_))
        ));
        s.stage("digest".into(), vec![0; 10], "text/plain".into())
            .unwrap();
        assert_eq!(
            s.stage("digest".into(), vec![0; 6], "text/plain".into()),
            Err(StageError::TooLarge(15)),
            "the run's total is capped too"
        );
        s.stage("digest".into(), vec![0; 5], "text/plain".into())
            .unwrap();
        s.stage("digest".into(), vec![], "text/plain".into())
            .unwrap();
        assert_eq!(
            s.stage("digest".into(), vec![], "text/plain".into()),
            Err(StageError::TooManyMessages(3))
        );
    }
}
