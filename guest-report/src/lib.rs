//! The reference "daily sales digest" report component.
//!
//! This file is the thin adapter between the jobhost SDK (`jobhost-sdk`,
//! which owns the WIT contract `jobhost:report@0.1.0`, world
//! `describing-reporter`) and the report's logic. It opens the window's
//! source, feeds each of its (already validated) batches to a
//! [`digest::Digest`], stages the JSON digest in the outbox and returns a
//! one-paragraph text as the run's report, and says what a language model
//! should describe of it. The aggregation itself lives in [`digest`], its
//! rendering in [`summary`], the formats in [`format`](mod@format).

#![forbid(unsafe_code)]

pub mod digest;
pub mod format;
pub mod summary;

use jobhost_sdk::{Context, Error, Output, Report};

/// The content type of the staged digest.
const CONTENT_TYPE: &str = "application/json";

/// The component: one [`Report::run`] per instance, no state in between
/// runs. Within one run, `run` leaves the text to describe in `prompt` for
/// [`Report::describe`], which the host calls right after it.
#[derive(Default)]
pub struct SalesDigest {
    /// The prompt `run` made, for `describe`.
    prompt: Option<String>,
}

impl Report for SalesDigest {
    fn run(&mut self, ctx: &Context) -> Result<Output, Error> {
        let top = match ctx.param("top") {
            Some(value) => Some(digest::parse_top(value).map_err(|e| Error::other(e.to_string()))?),
            None => None,
        };
        let destinations = destinations(ctx)?;

        let digest = read_source()?;
        let rows = digest.rows();
        let summary = digest.finish(window_info(ctx), top);
        let cursor = summary.totals.last_sale.map(|t| t.to_string());
        let json = summary.to_json();

        for name in &destinations {
            jobhost_sdk::send(name, &json, CONTENT_TYPE).map_err(|e| {
                Error::other(format!("staging the digest for `{name}` failed: {e}"))
            })?;
        }
        jobhost_sdk::log::info(format!(
            "sales digest of {} over {rows} rows ({} orders, {} skipped), staged for {} destination(s)",
            ctx.window.key,
            summary.totals.orders,
            summary.skipped_rows,
            destinations.len()
        ));
        self.prompt = Some(summary.to_prompt());
        // The report a person reads in the receipt is the one-paragraph
        // text; the machine-readable digest travels as the message.
        Ok(Output {
            summary: summary.to_text(),
            cursor,
        })
    }

    fn describe(&mut self, _ctx: &Context, _output: &Output) -> Option<String> {
        self.prompt.take()
    }
}

jobhost_sdk::export!(SalesDigest);

/// Where to stage the digest: the destination named by the `destination`
/// parameter (which must be declared), or else every declared destination.
fn destinations(ctx: &Context) -> Result<Vec<String>, Error> {
    match ctx.param("destination") {
        Some(name) if ctx.destinations.iter().any(|d| d == name) => Ok(vec![name.to_owned()]),
        Some(name) => Err(Error::other(format!(
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
fn window_info(ctx: &Context) -> summary::WindowInfo {
    summary::WindowInfo {
        key: ctx.window.key.clone(),
        label: ctx.window.label.clone(),
        timezone: ctx.window.timezone.clone(),
    }
}

/// Opens the source and folds every batch (of [`jobhost_sdk::BATCH_ROWS`]
/// rows) into a digest. The source's cursor is closed once its last batch
/// is read, before this returns.
fn read_source() -> Result<digest::Digest, Error> {
    let mut source = jobhost_sdk::open()?;
    let mut digest =
        digest::Digest::new(source.columns()).map_err(|e| Error::invalid_data(e.to_string()))?;
    for batch in source.batches() {
        digest
            .add_batch(&batch?)
            .map_err(|e| Error::invalid_data(e.to_string()))?;
    }
    Ok(digest)
}
