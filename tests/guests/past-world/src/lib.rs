//! A test-only guest built against `jobhost:report@0.1.0` (`wit/report.wit`
//! beside it is that release's, as it was), before the `zone` interface
//! came in 0.1.1, so host tests can check that a component of an earlier
//! release on the same track still links and runs unchanged. It counts the
//! window's rows, logs, and stages one message per destination.

wit_bindgen::generate!({
    world: "reporter",
    path: "wit",
});

use jobhost::report::{log, outbox, source};

struct Past;

impl Guest for Past {
    fn run(ctx: RunContext) -> Result<Report, RunError> {
        let cursor = source::open().map_err(|e| RunError::SourceFailed(format!("{e:?}")))?;
        let mut rows = 0u64;
        while let Some(batch) = cursor
            .next_batch(4096)
            .map_err(|e| RunError::SourceFailed(format!("{e:?}")))?
        {
            rows += u64::from(batch.rows);
        }
        let summary = format!("{rows} rows in {} (built for 0.1.0)", ctx.window.key);
        log::emit(log::Level::Info, &summary);
        for destination in &ctx.destinations {
            outbox::send(destination, summary.as_bytes(), "text/plain")
                .map_err(|e| RunError::Other(format!("{e:?}")))?;
        }
        Ok(Report {
            summary,
            cursor: None,
        })
    }
}

export!(Past);
