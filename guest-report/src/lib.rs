//! The reference "daily sales digest" report component.
//!
//! This file is the thin adapter between the jobhost WIT contract
//! (`jobhost:report@0.1.0`, world `describing-reporter`) and the
//! host-independent logic:
//! it is the only place that touches wit-bindgen's generated types. It opens
//! the window's source, moves each generated batch into the plain
//! [`batch`] types, feeds them to a [`digest::Digest`], stages the JSON
//! digest in the outbox and returns a one-paragraph text as the run's report,
//! and says what a language model should describe of it. The aggregation
//! itself lives in [`digest`], its rendering in [`summary`], the formats in
//! [`format`](mod@format).

pub mod batch;
pub mod digest;
pub mod format;
pub mod summary;

wit_bindgen::generate!({
    world: "describing-reporter",
    path: "../wit",
});

use std::cell::RefCell;

use jobhost::report::source::{self, SourceError};
// `world reporter { use types.{run-context, report, run-error} }` makes
// wit-bindgen alias `RunContext`, `Report` and `RunError` at the crate root.
use jobhost::report::{log, outbox};

/// How many rows the component asks for per batch.
const BATCH_ROWS: u32 = 8192;

/// The content type of the staged digest.
const CONTENT_TYPE: &str = "application/json";

/// The component: one [`Guest::run`] per instance, no state in between
/// runs. Within one instance, `run` leaves the text to describe for
/// [`Guest::describe`], which the host calls right after it.
pub struct SalesDigest;

thread_local! {
    /// The prompt `run` made, for `describe` on the same instance.
    static PROMPT: RefCell<Option<String>> = const { RefCell::new(None) };
}

impl Guest for SalesDigest {
    fn run(ctx: RunContext) -> Result<Report, RunError> {
        let top = match param(&ctx, "top") {
            Some(value) => {
                Some(digest::parse_top(value).map_err(|e| RunError::Other(e.to_string()))?)
            }
            None => None,
        };
        let destinations = destinations(&ctx)?;

        let digest = read_source()?;
        let rows = digest.rows();
        let summary = digest.finish(window_info(&ctx), top);
        let cursor = summary.totals.last_sale.map(|t| t.to_string());
        let json = summary.to_json();

        for name in &destinations {
            outbox::send(name, json.as_bytes(), CONTENT_TYPE).map_err(|e| {
                RunError::Other(format!(
                    "staging the digest for `{name}` failed: {}",
                    describe_send_error(&e)
                ))
            })?;
        }
        log::emit(
            log::Level::Info,
            &format!(
                "sales digest of {} over {rows} rows ({} orders, {} skipped), staged for {} destination(s)",
                ctx.window.key,
                summary.totals.orders,
                summary.skipped_rows,
                destinations.len()
            ),
        );
        PROMPT.with(|p| *p.borrow_mut() = Some(summary.to_prompt()));
        // The report a person reads in the receipt is the one-paragraph
        // text; the machine-readable digest travels as the message.
        Ok(Report {
            summary: summary.to_text(),
            cursor,
        })
    }

    fn describe(_ctx: RunContext, _report: Report) -> Option<String> {
        PROMPT.with(|p| p.borrow_mut().take())
    }
}

export!(SalesDigest);

/// The value of the job parameter `name`, if set.
fn param<'a>(ctx: &'a RunContext, name: &str) -> Option<&'a str> {
    ctx.params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Where to stage the digest: the destination named by the `destination`
/// parameter (which must be declared), or else every declared destination.
fn destinations(ctx: &RunContext) -> Result<Vec<String>, RunError> {
    match param(ctx, "destination") {
        Some(name) if ctx.destinations.iter().any(|d| d == name) => Ok(vec![name.to_owned()]),
        Some(name) => Err(RunError::Other(format!(
            "parameter `destination` names `{name}`, which the job does not declare (declared: {})",
            if ctx.destinations.is_empty() {
                "none".to_owned()
            } else {
                ctx.destinations.join(", ")
            }
        ))),
        None => Ok(ctx.destinations.clone()),
    }
}

/// The window as the digest names it.
fn window_info(ctx: &RunContext) -> digest::WindowInfo {
    digest::WindowInfo {
        key: ctx.window.key.clone(),
        label: ctx.window.label.clone(),
        timezone: ctx.window.timezone.clone(),
    }
}

/// Opens the source and folds every batch into a digest. The cursor is
/// dropped before this returns.
fn read_source() -> Result<digest::Digest, RunError> {
    let cursor = source::open().map_err(source_failed)?;
    let columns: Vec<batch::ColumnInfo> = cursor.columns().into_iter().map(column_info).collect();
    let mut digest =
        digest::Digest::new(&columns).map_err(|e| RunError::InvalidData(e.to_string()))?;
    while let Some(b) = cursor.next_batch(BATCH_ROWS).map_err(source_failed)? {
        digest
            .add_batch(&convert_batch(b))
            .map_err(|e| RunError::InvalidData(e.to_string()))?;
    }
    Ok(digest)
}

fn source_failed(error: SourceError) -> RunError {
    RunError::SourceFailed(match error {
        SourceError::NotConfigured => "the job declares no data source".to_owned(),
        SourceError::QueryFailed(m) => format!("query failed: {m}"),
        SourceError::TypeMismatch(m) => format!("type mismatch: {m}"),
        SourceError::InvalidState(m) => format!("invalid state: {m}"),
        SourceError::Other(m) => m,
    })
}

fn describe_send_error(error: &outbox::SendError) -> String {
    match error {
        outbox::SendError::UnknownDestination(name) => format!("unknown destination `{name}`"),
        outbox::SendError::TooLarge(limit) => format!("body is larger than {limit} bytes"),
        outbox::SendError::TooManyMessages(max) => {
            format!("the run already staged the maximum of {max} messages")
        }
        outbox::SendError::InvalidContentType(t) => format!("invalid content type `{t}`"),
    }
}

fn column_info(info: source::ColumnInfo) -> batch::ColumnInfo {
    batch::ColumnInfo {
        name: info.name,
        kind: match info.kind {
            source::ColumnKind::Integer => batch::ColumnKind::Integer,
            source::ColumnKind::Real => batch::ColumnKind::Real,
            source::ColumnKind::Text => batch::ColumnKind::Text,
            source::ColumnKind::Blob => batch::ColumnKind::Blob,
        },
    }
}

/// Moves a generated batch into the plain types; the vectors are moved, not
/// copied.
fn convert_batch(b: source::Batch) -> batch::Batch {
    batch::Batch {
        rows: b.rows as usize,
        columns: b.columns.into_iter().map(convert_column).collect(),
    }
}

fn convert_text(t: source::TextColumn) -> batch::TextColumn {
    batch::TextColumn {
        data: t.data,
        offsets: t.offsets,
    }
}

fn convert_column(c: source::Column) -> batch::Column {
    batch::Column {
        nulls: c.nulls,
        data: match c.data {
            source::ColumnData::Integer(v) => batch::ColumnData::Integer(v),
            source::ColumnData::Real(v) => batch::ColumnData::Real(v),
            source::ColumnData::Text(t) => batch::ColumnData::Text(convert_text(t)),
            source::ColumnData::TextDict(d) => batch::ColumnData::TextDict(batch::DictColumn {
                values: convert_text(d.values),
                indices: d.indices,
            }),
            source::ColumnData::Blob(t) => batch::ColumnData::Blob(convert_text(t)),
        },
    }
}
