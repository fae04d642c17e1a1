//! The one `bindgen!` call for the `jobhost:report` world, and the thin
//! adapters between its generated types and the host's domain types. No
//! other module names a generated type: imports are answered here by calling
//! into `source`, `outbox` and `guest_log`, and results are converted here.

use wasmtime::component::{HasSelf, Linker, Resource};

use crate::guest_log::LogLevel;
use crate::outbox::StageError;
use crate::sandbox::HostState;
use crate::source::{self, RowCursor, SourceError};
use crate::window::Window;
use jiff::Timestamp;

wasmtime::component::bindgen!({
    world: "reporter",
    path: "../wit",
    imports: { default: trappable },
    with: {
        "jobhost:report/source.cursor": crate::source::RowCursor,
    },
});

pub use exports_types::*;

/// Generated types the rest of the host refers to by these names.
mod exports_types {
    pub use super::Reporter as ReportWorld;
    pub use super::ReporterPre as ReportWorldPre;
    pub use super::jobhost::report::types::{
        Instant as WitInstant, Report as WitReport, RunContext as WitRunContext,
        RunError as WitRunError, Window as WitWindow,
    };
}

use self::jobhost::report::{log, outbox, source as wit_source, types};

/// Adds the world's imports (not WASI's) to `linker`.
///
/// # Errors
///
/// Fails only if the linker already defines these names.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    Reporter::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)
}

impl types::Host for HostState {}

impl wit_source::Host for HostState {
    fn open(&mut self) -> wasmtime::Result<Result<Resource<RowCursor>, wit_source::SourceError>> {
        let opened = self.source.open();
        self.journal
            .open(&opened.as_ref().map(drop).map_err(Clone::clone));
        match opened {
            Ok(cursor) => Ok(Ok(self.table.push(cursor)?)),
            Err(e) => Ok(Err(source_error(e))),
        }
    }
}

impl wit_source::HostCursor for HostState {
    fn columns(
        &mut self,
        cursor: Resource<RowCursor>,
    ) -> wasmtime::Result<Vec<wit_source::ColumnInfo>> {
        let cursor = self.table.get(&cursor)?;
        self.journal.columns(cursor.columns());
        Ok(cursor
            .columns()
            .iter()
            .map(|c| wit_source::ColumnInfo {
                name: c.name.clone(),
                kind: match c.kind {
                    source::ColumnKind::Integer => wit_source::ColumnKind::Integer,
                    source::ColumnKind::Real => wit_source::ColumnKind::Real,
                    source::ColumnKind::Text => wit_source::ColumnKind::Text,
                    source::ColumnKind::Blob => wit_source::ColumnKind::Blob,
                },
            })
            .collect())
    }

    fn next_batch(
        &mut self,
        cursor: Resource<RowCursor>,
        max_rows: u32,
    ) -> wasmtime::Result<Result<Option<wit_source::Batch>, wit_source::SourceError>> {
        let cursor = self.table.get_mut(&cursor)?;
        let answer = cursor.next_batch(max_rows);
        self.journal.batch(max_rows, &answer);
        Ok(match answer {
            Ok(Some(batch)) => Ok(Some(wit_batch(batch))),
            Ok(None) => Ok(None),
            Err(e) => Err(source_error(e)),
        })
    }

    fn drop(&mut self, cursor: Resource<RowCursor>) -> wasmtime::Result<()> {
        let cursor = self.table.delete(cursor)?;
        self.source.close(cursor);
        self.journal.close_cursor();
        Ok(())
    }
}

fn wit_batch(batch: source::Batch) -> wit_source::Batch {
    use source::ColumnData as D;
    use wit_source::ColumnData as W;
    let text = |t: source::TextData| wit_source::TextColumn {
        data: t.data,
        offsets: t.offsets,
    };
    wit_source::Batch {
        rows: batch.rows,
        columns: batch
            .columns
            .into_iter()
            .map(|c| wit_source::Column {
                nulls: c.nulls,
                data: match c.data {
                    D::Integer(v) => W::Integer(v),
                    D::Real(v) => W::Real(v),
                    D::Text(t) => W::Text(text(t)),
                    D::TextDict { values, indices } => W::TextDict(wit_source::DictColumn {
                        values: text(values),
                        indices,
                    }),
                    D::Blob(t) => W::Blob(text(t)),
                },
            })
            .collect(),
    }
}

fn source_error(e: SourceError) -> wit_source::SourceError {
    match e {
        SourceError::NotConfigured => wit_source::SourceError::NotConfigured,
        SourceError::QueryFailed(m) => wit_source::SourceError::QueryFailed(m),
        SourceError::TypeMismatch(m) => wit_source::SourceError::TypeMismatch(m),
        SourceError::InvalidState(m) => wit_source::SourceError::InvalidState(m),
    }
}

impl outbox::Host for HostState {
    fn send(
        &mut self,
        destination: String,
        body: Vec<u8>,
        content_type: String,
    ) -> wasmtime::Result<Result<u32, outbox::SendError>> {
        let (bytes, named, typed) = (body.len() as u64, destination.clone(), content_type.clone());
        let answer = self.outbox.stage(destination, body, content_type);
        self.journal.send(&named, &typed, bytes, &answer);
        Ok(answer.map_err(|e| match e {
            StageError::UnknownDestination(d) => outbox::SendError::UnknownDestination(d),
            StageError::TooLarge(limit) => outbox::SendError::TooLarge(limit),
            StageError::TooManyMessages(max) => outbox::SendError::TooManyMessages(max),
            StageError::InvalidContentType(t) => outbox::SendError::InvalidContentType(t),
        }))
    }
}

impl log::Host for HostState {
    fn emit(&mut self, level: log::Level, message: String) -> wasmtime::Result<()> {
        let level = match level {
            log::Level::Trace => LogLevel::Trace,
            log::Level::Debug => LogLevel::Debug,
            log::Level::Info => LogLevel::Info,
            log::Level::Warn => LogLevel::Warn,
            log::Level::Error => LogLevel::Error,
        };
        self.journal.log(level as u8);
        self.log.emit(level, &message);
        Ok(())
    }
}

/// An instant as the guest sees it.
pub fn wit_instant(t: Timestamp) -> WitInstant {
    WitInstant {
        seconds: t.as_second(),
        nanoseconds: u32::try_from(t.subsec_nanosecond()).unwrap_or(0),
    }
}

/// A window as the guest sees it.
pub fn wit_window(w: &Window) -> WitWindow {
    WitWindow {
        job: w.job.to_string(),
        key: w.key().to_string(),
        label: w.label.clone(),
        start: wit_instant(w.start),
        end: wit_instant(w.end),
        timezone: w.zone.name().to_string(),
    }
}
