//! The receipt: exactly one JSON object on stdout per `jobhost run`,
//! whatever happened, so that a duplicate or a failure is one `grep` away.
//! Instants are RFC 3339 UTC strings. Fields a run did not get far enough
//! to know are left out.

use serde::Serialize;

use crate::cache::CacheOutcome;
use crate::clock::rfc3339;
use crate::sandbox::GuestStats;
use crate::window::Window;

/// What happened to this invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Event {
    /// The guest ran and its messages were delivered.
    Ran,
    /// A run another process started was finished: its stored messages were
    /// delivered; the guest did not run again.
    Resumed,
    /// Nothing to do (see `reason`).
    Skipped,
    /// The run failed (see `error`), or the input was bad (exit 2).
    Failed,
}

/// The window, as the receipt shows it.
#[derive(Debug, Clone, Serialize)]
pub struct WindowInfo {
    /// First instant inside.
    pub start: String,
    /// First instant after.
    pub end: String,
    /// IANA zone.
    pub tz: String,
    /// Civil label.
    pub label: String,
}

/// A failure, as the receipt shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorInfo {
    /// A stable kind: `invalid-input`, `guest-trap`, `guest-timeout`, ...
    pub kind: String,
    /// One line for a person.
    pub message: String,
    /// Whether a later invocation will try the window again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
}

/// One staged message's fate.
#[derive(Debug, Clone, Serialize)]
pub struct MessageInfo {
    /// Sequence number.
    pub seq: u32,
    /// Destination name.
    pub destination: String,
    /// `<key>#<seq>`.
    pub idempotency_key: String,
    /// Body size.
    pub bytes: usize,
    /// `appended`, `pending`, or the failure.
    pub status: String,
}

/// The report part of a receipt.
#[derive(Debug, Clone, Serialize)]
pub struct ReportInfo {
    /// The report text.
    pub summary: String,
    /// The proposed cursor.
    pub cursor: Option<String>,
}

/// One invocation's receipt.
#[derive(Debug, Clone, Serialize)]
pub struct Receipt {
    /// What happened.
    pub event: Event,
    /// The job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// The window key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowInfo>,
    /// The run's clock reading.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub now: Option<String>,
    /// `sha256:<hex>` of the component file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
    /// The store file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// Why nothing ran: `done`, `busy`, `gave-up`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A sentence expanding on `reason`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Attempt number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// Fence of the claim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fence: Option<i64>,
    /// The report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<ReportInfo>,
    /// The staged messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<MessageInfo>>,
    /// Guest statistics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<GuestStats>,
    /// Where the compiled code came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compiled: Option<CacheOutcome>,
    /// What failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
}

impl Receipt {
    /// An empty receipt for `event`.
    pub fn new(event: Event) -> Receipt {
        Receipt {
            event,
            job: None,
            key: None,
            window: None,
            now: None,
            component: None,
            store: None,
            reason: None,
            detail: None,
            attempt: None,
            fence: None,
            report: None,
            messages: None,
            stats: None,
            compiled: None,
            error: None,
        }
    }

    /// Fills in the window fields.
    pub fn set_window(&mut self, w: &Window) {
        self.job = Some(w.job.to_string());
        self.key = Some(w.key().to_string());
        self.window = Some(WindowInfo {
            start: rfc3339(w.start),
            end: rfc3339(w.end),
            tz: w.zone.name().to_string(),
            label: w.label.clone(),
        });
    }

    /// Marks the receipt failed with `kind` and `message`.
    pub fn fail(&mut self, kind: &str, message: String, retryable: Option<bool>) {
        self.event = Event::Failed;
        self.error = Some(ErrorInfo {
            kind: kind.to_string(),
            message,
            retryable,
        });
    }

    /// The receipt as one line of JSON.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| {
            format!(r#"{{"event":"failed","error":{{"kind":"host","message":"cannot render receipt: {e}"}}}}"#)
        })
    }
}
