//! Notifications (`[[notify]]`): a person hears that a job's windows
//! failed, were abandoned, are late or stale, that it recovered, or that
//! jobhost paused it. This module holds the validated blocks, the body
//! each kind of receiver gets (a generic JSON webhook, or Slack's
//! incoming-webhook JSON) and one send; what to send, and when, is
//! decided in `run::notices`, and each notification is an outbox row of
//! the store's (`store::notices`), sent once per incident.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Serialize;

use crate::core::redact::Redactor;
use crate::effects::destination::HttpTarget;

/// What a notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Event {
    /// A window failed for good (its attempts used up).
    Failed,
    /// A window was abandoned (the host gave up on it).
    Abandoned,
    /// The job's newest due window is overdue by more than its grace.
    Late,
    /// A DONE window's inputs changed after its run.
    Stale,
    /// What an earlier notification said is over.
    Recovered,
    /// jobhost paused the job (`pause_after_failures`).
    Paused,
}

impl Event {
    /// Every event, as `on` names them.
    pub const ALL: [Event; 6] = [
        Event::Failed,
        Event::Abandoned,
        Event::Late,
        Event::Stale,
        Event::Recovered,
        Event::Paused,
    ];

    /// `failed`, `abandoned`, `late`, `stale`, `recovered` or `paused`.
    pub fn as_str(self) -> &'static str {
        match self {
            Event::Failed => "failed",
            Event::Abandoned => "abandoned",
            Event::Late => "late",
            Event::Stale => "stale",
            Event::Recovered => "recovered",
            Event::Paused => "paused",
        }
    }

    /// The event `text` names.
    pub fn parse(text: &str) -> Option<Event> {
        Event::ALL.into_iter().find(|e| e.as_str() == text)
    }
}

/// The shape of a notification's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A JSON object with the facts as fields.
    Webhook,
    /// Slack's incoming-webhook JSON (`text` in its markup), which Slack,
    /// Mattermost, Rocket.Chat and Discord's `/slack` endpoints take.
    Slack,
}

/// One `[[notify]]` block.
#[derive(Debug, Clone)]
pub struct NotifyTarget {
    /// The events it is sent.
    pub on: BTreeSet<Event>,
    /// Its body's shape.
    pub style: Style,
    /// Where it is POSTed (and with which headers).
    pub target: HttpTarget,
}

/// A job's notification settings.
#[derive(Debug, Clone, Default)]
pub struct NotifySettings {
    /// The `[[notify]]` blocks.
    pub targets: Vec<NotifyTarget>,
    /// The dashboard's address as people reach it (`[dashboard]
    /// public_url`), for a link to the window's page.
    pub public_url: Option<String>,
}

/// The longest error text a notification quotes, bytes.
pub const MAX_NOTIFIED_ERROR: usize = 500;

/// What one notification says.
#[derive(Debug, Clone, Serialize)]
pub struct Notice {
    /// `failed`, ..., `recovered`, `paused`.
    pub event: &'static str,
    /// The job.
    pub job: String,
    /// The window it is about, if one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// The incident's number in the store (the same on every host).
    pub incident: i64,
    /// What happened, one line (an error capped at
    /// [`MAX_NOTIFIED_ERROR`] bytes, made printable).
    pub detail: String,
    /// When the store decided it (RFC 3339).
    pub at: String,
    /// The window's page (or the job's) on the dashboard, when
    /// `[dashboard] public_url` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The same in one sentence.
    pub text: String,
}

impl Notice {
    /// The notice of `event` about incident `incident` of `job` (about
    /// `window`, if any): `detail` scrubbed of `redactor`'s values, capped
    /// and made printable; a link when `public_url` is set.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        event: Event,
        job: &str,
        window: Option<&str>,
        incident: i64,
        detail: &str,
        at: jiff::Timestamp,
        public_url: Option<&str>,
        redactor: &Redactor,
    ) -> Notice {
        let detail = redactor.scrub(detail);
        let detail =
            crate::core::text::printable(&crate::core::text::cap(&detail, MAX_NOTIFIED_ERROR))
                .into_owned();
        let url = public_url.map(|base| {
            let base = base.trim_end_matches('/');
            match window {
                Some(k) => format!("{base}/runs/{}", segment(k)),
                None => format!("{base}/jobs/{}", segment(job)),
            }
        });
        let about = window.map_or_else(|| format!("job {job}"), |k| format!("window {k}"));
        let text = match event {
            Event::Failed => format!("jobhost: {about} failed: {detail}"),
            Event::Abandoned => format!("jobhost: {about} was abandoned: {detail}"),
            Event::Late => format!("jobhost: job {job} is late: {detail}"),
            Event::Stale => format!("jobhost: job {job} has stale windows: {detail}"),
            Event::Recovered => format!("jobhost: job {job} recovered: {detail}"),
            Event::Paused => format!("jobhost: job {job} was paused: {detail}"),
        };
        Notice {
            event: event.as_str(),
            job: job.to_string(),
            window: window.map(str::to_string),
            incident,
            detail,
            at: at.to_string(),
            url,
            text,
        }
    }

    /// The body `style` sends.
    pub fn body(&self, style: Style) -> String {
        match style {
            Style::Webhook => serde_json::to_string(self).unwrap_or_default(),
            Style::Slack => {
                let mut text = slack_escape(&self.text);
                if let Some(url) = &self.url {
                    text.push_str(&format!(" <{}|open>", slack_escape(url)));
                }
                serde_json::json!({ "text": text }).to_string()
            }
        }
    }
}

/// `text` with Slack's three control characters escaped (`&`, `<`, `>`),
/// so that nothing a guest or a server wrote becomes a link or a mention.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `text` as one segment of a URL's path.
fn segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// How one send went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// 2xx.
    Delivered(String),
    /// Worth another try later: no answer, 429 or 5xx.
    Again(String),
    /// Refused for good (another 4xx, a redirect).
    Refused(String),
}

impl NotifyTarget {
    /// POSTs `body` with `idempotency_key`, once; `redactor`'s values are
    /// scrubbed from what it says.
    pub fn send(&self, body: &str, idempotency_key: &str, redactor: &Redactor) -> Answer {
        let agent = crate::effects::http::http_agent(Some(self.target.timeout));
        let shown = self.target.shown_url();
        let mut request = agent
            .post(self.target.url())
            .header("Content-Type", "application/json")
            .header("Idempotency-Key", idempotency_key);
        for (name, value) in self.target.headers() {
            request = request.header(name.as_str(), value.as_str());
        }
        match request.send(body.as_bytes()) {
            Ok(resp) => {
                let status = resp.status().as_u16();
                if (200..300).contains(&status) {
                    Answer::Delivered(format!("http {status}"))
                } else if status == 429 || status >= 500 {
                    Answer::Again(format!("{shown} answered {status}"))
                } else {
                    Answer::Refused(format!("{shown} answered {status}"))
                }
            }
            Err(e) => Answer::Again(redactor.scrub(&format!("cannot reach {shown}: {e}"))),
        }
    }
}

/// How long a notification that was not delivered waits before its
/// `attempt + 1`th send: 1, 2, 4, ... minutes, at most an hour.
pub fn backoff(attempt: u32) -> Duration {
    Duration::from_secs(60 << attempt.saturating_sub(1).min(6)).min(Duration::from_secs(3600))
}

/// Sends of one notification before it is given up.
pub const MAX_ATTEMPTS: u32 = 12;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_say_what_happened_escaped_and_capped() {
        let r = {
            let mut r = Redactor::default();
            r.add("s3cret-token".into());
            r
        };
        let n = Notice::new(
            Event::Failed,
            "daily-sales",
            Some("daily-sales:2026-11-08"),
            7,
            &format!("<@channel> \u{1b}[31m s3cret-token {}", "x".repeat(2000)),
            "2026-11-09T00:05:00Z".parse().unwrap(),
            Some("https://jobs.example.com/"),
            &r,
        );
        assert!(!n.detail.contains("s3cret"), "{}", n.detail);
        assert!(!n.detail.contains('\u{1b}'), "{}", n.detail);
        assert!(n.detail.len() < 700, "{}", n.detail.len());
        assert_eq!(
            n.url.as_deref(),
            Some("https://jobs.example.com/runs/daily%2Dsales%3A2026%2D11%2D08")
        );
        let web: serde_json::Value = serde_json::from_str(&n.body(Style::Webhook)).unwrap();
        assert_eq!(web["event"], "failed");
        assert_eq!(web["window"], "daily-sales:2026-11-08");
        assert_eq!(web["incident"], 7);
        let slack: serde_json::Value = serde_json::from_str(&n.body(Style::Slack)).unwrap();
        let text = slack["text"].as_str().unwrap();
        assert!(
            text.starts_with("jobhost: window daily-sales:2026-11-08 failed: &lt;@channel&gt;")
        );
        assert!(text.ends_with("|open>"), "{text}");
    }

    #[test]
    fn waits_double_up_to_an_hour() {
        assert_eq!(backoff(1), Duration::from_secs(60));
        assert_eq!(backoff(2), Duration::from_secs(120));
        assert_eq!(backoff(30), Duration::from_secs(3600));
    }
}
