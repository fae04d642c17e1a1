//! The receipt: exactly one JSON object on stdout per `jobhost run`,
//! whatever happened, so that a duplicate or a failure is one `grep` away.
//! Instants are RFC 3339 UTC strings. Fields a run did not get far enough
//! to know are left out.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::core::clock::rfc3339;
use crate::core::error::ErrorKind;
use crate::core::window::Window;
pub use crate::effects::delivery::{DeliveryStatus, MessageInfo};
use crate::effects::destination::DeliveryMode;
use crate::effects::ping::PingInfo;
use crate::guest::cache::CacheOutcome;
use crate::guest::sandbox::GuestStats;

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
    /// The run failed (see `error`), or the input was bad (exit 2). A
    /// retryable failure is attempted again by a later invocation.
    Failed,
    /// The host gave up on the window (its attempts ran out, or an
    /// at-most-once message may or may not have arrived): a person must
    /// look. Exit 1.
    Abandoned,
}

impl Event {
    /// The event's name, as the receipt writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Event::Ran => "ran",
            Event::Resumed => "resumed",
            Event::Skipped => "skipped",
            Event::Failed => "failed",
            Event::Abandoned => "abandoned",
        }
    }
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
    pub kind: ErrorKind,
    /// One line for a person.
    pub message: String,
    /// Whether a later invocation will try the window again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
}

/// Why an invocation ran nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipReason {
    /// The window was already reported.
    Done,
    /// A scheduler skipped the window by the job's catch-up policy.
    CatchUp,
    /// Another process holds the window's claim, or is in the middle of a
    /// write to the store.
    Busy,
    /// The window's last attempt failed and its next one is not due yet.
    RetryLater,
    /// The window's attempts ran out before; it waits for a person.
    GaveUp,
    /// The job is paused (`jobhost pause`); `jobhost resume` lets it run.
    Paused,
    /// An upstream window the window needs (`[[needs]]`) is not DONE yet;
    /// the window is WAITING, and runs once it is.
    Waiting,
}

impl SkipReason {
    /// The reason's name, as the receipt writes it (`retry-later`).
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Done => "done",
            SkipReason::CatchUp => "catch-up",
            SkipReason::Busy => "busy",
            SkipReason::RetryLater => "retry-later",
            SkipReason::GaveUp => "gave-up",
            SkipReason::Paused => "paused",
            SkipReason::Waiting => "waiting",
        }
    }
}

/// A `[shadow]` candidate's run beside this one.
#[derive(Debug, Clone, Serialize)]
pub struct ShadowInfo {
    /// `sha256:<hex>` of the candidate (its path, when it could not be
    /// loaded).
    pub component: String,
    /// `agreed`, `differed` or `failed`.
    pub verdict: String,
    /// How many differences `history KEY` lists.
    pub differences: usize,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a warning is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WarningKind {
    /// The store is on a filesystem that dies with its machine.
    EphemeralStore,
    /// The store is one hosts share, but a destination writes a file on
    /// the disk of whichever host runs the window.
    LocalDestination,
    /// The component's `describe` gave nothing for a model.
    Describe,
}

/// Something that did not stop the run but needs a person's attention.
#[derive(Debug, Clone, Serialize)]
pub struct Warning {
    /// What it is about.
    pub kind: WarningKind,
    /// One line for a person: what is wrong and what to do.
    pub message: String,
}

/// The claim a run took over from an owner that stopped without letting
/// go.
#[derive(Debug, Clone, Serialize)]
pub struct TakeoverInfo {
    /// The earlier owner (`<host>:<pid>:<tag>`).
    pub from: String,
    /// Its fence.
    pub fence: i64,
    /// `lease-expired`, or `owner-gone`: its lease had not run out, but its
    /// process, on this machine, had ended.
    pub because: &'static str,
}

/// One destination's messages together.
#[derive(Debug, Clone, Serialize)]
pub struct DestinationInfo {
    /// The worst status of its messages (abandoned > failed > not-sent >
    /// pending > delivered).
    pub status: DeliveryStatus,
    /// `at-least-once` or `at-most-once`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<DeliveryMode>,
    /// Messages for it in this invocation.
    pub messages: u32,
    /// Of those, delivered.
    pub delivered: u32,
    /// Sends made by this invocation.
    pub attempts: u32,
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
    /// The claim store: its file, or its URL with the password hidden.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// Whether this invocation created the store (it held no run before).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub store_created: bool,
    /// Things that did not stop the run but need a person's attention.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
    /// Why nothing ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<SkipReason>,
    /// What a WAITING window waits for: upstream windows not DONE (at
    /// most [`crate::run::needs::LISTED`]) and upstream jobs with no row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waits_for: Option<crate::run::needs::WaitsFor>,
    /// What the job's `[shadow]` candidate gave on this run's input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowInfo>,
    /// A sentence expanding on `reason`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Attempt number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// Fence of the claim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fence: Option<i64>,
    /// The window's revision, when past the first (a rerun, or a run of a
    /// window forgotten after its report was committed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<u32>,
    /// The hash of the chain entry of the run's last decision (DONE, or
    /// its failure), which `jobhost verify` and a signed message name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// The run's trace id (32 hex digits), when the process exports
    /// traces (`[telemetry]`); HTTP deliveries carry it in `traceparent`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// Why the person who asked for this run asked (`rerun`, `backfill
    /// --only failed|all`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub because: Option<String>,
    /// The claim this run took over, when its owner stopped without
    /// letting go.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub took_over: Option<TakeoverInfo>,
    /// The report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<ReportInfo>,
    /// The staged messages this invocation handled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<MessageInfo>>,
    /// Per destination: how its messages stand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destinations: Option<BTreeMap<String, DestinationInfo>>,
    /// Guest statistics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<GuestStats>,
    /// Where the compiled code came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compiled: Option<CacheOutcome>,
    /// What became of the run's digest (a job with a `[digest]` model,
    /// once the run is DONE).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<crate::effects::digest::DigestInfo>,
    /// The job's pings this invocation sent (`start`, `success`,
    /// `failure`) and how each went.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pings: BTreeMap<&'static str, PingInfo>,
    /// The job's notifications (`[[notify]]`) this invocation sent or
    /// tried, and how each went.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<crate::run::notices::Notified>,
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
            store_created: false,
            warnings: Vec::new(),
            reason: None,
            waits_for: None,
            shadow: None,
            detail: None,
            attempt: None,
            fence: None,
            revision: None,
            because: None,
            entry: None,
            trace_id: None,
            took_over: None,
            report: None,
            messages: None,
            destinations: None,
            stats: None,
            compiled: None,
            digest: None,
            pings: BTreeMap::new(),
            notifications: Vec::new(),
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

    /// Records the messages' fates, and sums them up per destination.
    /// `modes` gives each destination's delivery mode where known.
    pub fn set_messages(
        &mut self,
        messages: Vec<MessageInfo>,
        modes: &dyn Fn(&str) -> Option<DeliveryMode>,
    ) {
        let mut by_dest: BTreeMap<String, DestinationInfo> = BTreeMap::new();
        for m in &messages {
            let d = by_dest
                .entry(m.destination.clone())
                .or_insert_with(|| DestinationInfo {
                    status: DeliveryStatus::Delivered,
                    delivery: modes(&m.destination),
                    messages: 0,
                    delivered: 0,
                    attempts: 0,
                });
            d.status = d.status.max(m.status);
            d.messages += 1;
            d.delivered += u32::from(m.status == DeliveryStatus::Delivered);
            d.attempts += m.attempts;
        }
        self.messages = Some(messages);
        self.destinations = Some(by_dest);
    }

    /// Marks the receipt skipped for `reason`, with a sentence on it.
    pub fn skip(&mut self, reason: SkipReason, detail: String) {
        self.event = Event::Skipped;
        self.reason = Some(reason);
        self.detail = Some(detail);
    }

    /// Notes the claim a takeover ended, if any.
    pub fn note_takeover(&mut self, from: Option<&crate::store::TakenFrom>) {
        self.took_over = from.map(|t| TakeoverInfo {
            from: t.owner.clone(),
            fence: t.fence.0,
            because: t.because.as_str(),
        });
    }

    /// Notes the claim's attempt number and fence.
    pub fn note_claim(&mut self, attempt: u32, fence: i64) {
        self.attempt = Some(attempt);
        self.fence = Some(fence);
    }

    /// Notes the claim's revision (shown past the first) and the reason a
    /// person gave for the run.
    pub fn note_revision(&mut self, revision: u32, because: Option<&str>) {
        self.revision = (revision > 1).then_some(revision);
        self.because = because.map(str::to_string);
    }

    /// Whether the run this receipt tells of is DONE.
    pub fn done(&self) -> bool {
        matches!(self.event, Event::Ran | Event::Resumed) && self.error.is_none()
    }

    /// The exit code of an invocation that ended with this receipt: 1 for
    /// a failed or abandoned run, 0 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self.event {
            Event::Failed | Event::Abandoned => 1,
            Event::Ran | Event::Resumed | Event::Skipped => 0,
        }
    }

    /// Marks the receipt failed with `kind` and `message`.
    pub fn fail(&mut self, kind: ErrorKind, message: String, retryable: Option<bool>) {
        self.event = Event::Failed;
        self.error = Some(ErrorInfo {
            kind,
            message,
            retryable,
        });
    }

    /// Marks the receipt with `event` (failed or abandoned) and the error,
    /// which is not retried.
    pub fn fail_as(&mut self, event: Event, kind: ErrorKind, message: String) {
        self.fail(kind, message, Some(false));
        self.event = event;
    }

    /// The receipt as one line of JSON.
    pub fn to_json_line(&self) -> String {
        self.line(ReceiptLevel::Full)
    }

    /// The receipt at `level` as one line of JSON.
    pub fn line(&self, level: ReceiptLevel) -> String {
        let rendered = match level {
            ReceiptLevel::Full => serde_json::to_string(self),
            ReceiptLevel::Brief => serde_json::to_value(self).map(|v| brief(v).to_string()),
        };
        match rendered {
            Ok(line) => crate::core::text::json_line(&line).into_owned(),
            Err(e) => format!(
                r#"{{"event":"failed","error":{{"kind":"host","message":"cannot render receipt: {e}"}}}}"#
            ),
        }
    }
}

/// How much of a run its receipt tells (`--receipt`, `$JOBHOST_RECEIPT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReceiptLevel {
    /// Everything: the report's summary and cursor, what each send came to,
    /// the digest's text.
    #[default]
    Full,
    /// What a monitor or a grep needs, and nothing a guest, a destination
    /// or a model wrote but an error: see [`brief`].
    Brief,
}

impl ReceiptLevel {
    /// The level `text` names (`full`, `brief`), if any.
    pub fn parse(text: &str) -> Option<ReceiptLevel> {
        match text {
            "full" => Some(ReceiptLevel::Full),
            "brief" => Some(ReceiptLevel::Brief),
            _ => None,
        }
    }
}

/// The fields a brief receipt keeps, top level: everything but `report`
/// (its summary is the report's text, its cursor the guest's).
const BRIEF: &[&str] = &[
    "event",
    "job",
    "key",
    "window",
    "now",
    "component",
    "store",
    "store_created",
    "warnings",
    "reason",
    "detail",
    "attempt",
    "fence",
    "revision",
    "because",
    "took_over",
    "messages",
    "destinations",
    "stats",
    "compiled",
    "digest",
    "pings",
    "error",
    "entry",
    "trace_id",
    "notifications",
];

/// What a brief receipt keeps of each notification: not `detail`, which
/// may quote what the receiver answered.
const BRIEF_NOTIFICATION: &[&str] = &["event", "to", "status"];

/// What a brief receipt keeps of each message: not `detail`, which may
/// quote what the destination answered.
const BRIEF_MESSAGE: &[&str] = &[
    "seq",
    "destination",
    "idempotency_key",
    "bytes",
    "status",
    "attempts",
    "http_status",
];

/// What a brief receipt keeps of the digest: not its `text`, the model's
/// account of the report.
const BRIEF_DIGEST: &[&str] = &["status", "cache", "model", "error", "message"];

/// What a brief receipt keeps of the digest's message.
const BRIEF_DIGEST_MESSAGE: &[&str] = &["destination", "idempotency_key", "status", "attempts"];

/// A receipt (or a daemon's digest line) cut to the fields a brief one
/// keeps. The lists name what is kept, so a field added later stays out of
/// brief receipts until it is added to them.
pub fn brief(mut receipt: serde_json::Value) -> serde_json::Value {
    keep(&mut receipt, BRIEF);
    if let Some(messages) = receipt
        .get_mut("messages")
        .and_then(serde_json::Value::as_array_mut)
    {
        for m in messages {
            keep(m, BRIEF_MESSAGE);
        }
    }
    if let Some(sent) = receipt
        .get_mut("notifications")
        .and_then(serde_json::Value::as_array_mut)
    {
        for n in sent {
            keep(n, BRIEF_NOTIFICATION);
        }
    }
    if let Some(digest) = receipt.get_mut("digest") {
        keep(digest, BRIEF_DIGEST);
        if let Some(message) = digest.get_mut("message") {
            keep(message, BRIEF_DIGEST_MESSAGE);
        }
    }
    receipt
}

/// Drops every field of the object `value` that `fields` does not name.
fn keep(value: &mut serde_json::Value, fields: &[&str]) {
    if let Some(map) = value.as_object_mut() {
        map.retain(|k, _| fields.contains(&k.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_brief_receipt_keeps_the_trace_and_what_was_notified_but_no_answer() {
        let full = serde_json::json!({
            "event": "failed",
            "report": {"summary": "figures"},
            "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
            "notifications": [
                {"event": "failed", "to": "https://hooks.example.com/x", "status": "retrying",
                 "detail": "https://hooks.example.com/x answered 503"}
            ]
        });
        let b = brief(full);
        assert!(b.get("report").is_none());
        assert_eq!(b["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(
            b["notifications"][0],
            serde_json::json!({"event": "failed", "to": "https://hooks.example.com/x",
                               "status": "retrying"})
        );
    }
}
