//! The one `bindgen!` call for the `jobhost:report` world, and the thin
//! adapters between its generated types and the host's domain types. No
//! other module names a generated type: imports are answered here by calling
//! into `source`, `outbox`, `guest_log` and `zone`, and results are
//! converted here.
//!
//! `outbox.send` and `log.emit` are linked by hand rather than through the
//! generated traits: their text and bytes are read where they lie in the
//! guest's memory, so that what the host refuses (a body over the limit, a
//! message over the log's budget, a name no destination has) is never
//! copied, however large the guest made it.

use jiff::Timestamp;
use wasmtime::component::{Component, HasSelf, Instance, Linker, Resource, WasmList, WasmStr};
use wasmtime::{AsContextMut, StoreContextMut};

use crate::core::text::Given;
use crate::core::window::Window;
use crate::guest::failure::RunError;
use crate::guest::guest_log::LogLevel;
use crate::guest::outbox::{MAX_CONTENT_TYPE, MAX_DESTINATION_NAME, StageError};
use crate::guest::source::{self, RowCursor, SourceError};
use crate::guest::state::HostState;
use crate::guest::zone::{self, OffsetError};

/// The generated types and traits, kept in a module of their own: the
/// world's `run-context`, `report` and `run-error` would otherwise take the
/// names of the host's own types.
mod wit {
    wasmtime::component::bindgen!({
        world: "reporter",
        path: "../wit",
        imports: { default: trappable },
        with: {
            "jobhost:report/source.cursor": crate::guest::source::RowCursor,
        },
    });
}

use self::wit::jobhost::report::types::{
    Instant as WitInstant, Report as WitReport, RunContext as WitRunContext,
    RunError as WitRunError, Window as WitWindow,
};
use self::wit::{Reporter, ReporterPre};

/// Everything a run tells its component (the WIT's `run-context`), in the
/// host's own types.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// The window being reported.
    pub window: Window,
    /// The run's clock reading.
    pub now: Timestamp,
    /// The job's cursor from its last DONE run.
    pub cursor: Option<String>,
    /// The attempt number, from 1.
    pub attempt: u32,
    /// Declared destination names, sorted.
    pub destinations: Vec<String>,
    /// Free-form parameters, sorted by name.
    pub params: Vec<(String, String)>,
}

/// What a component's `run` returned: the WIT's `report`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Returned {
    /// The report's text.
    pub summary: String,
    /// The job's new cursor, if the report proposes one.
    pub cursor: Option<String>,
}

/// A component linked against the host's world, ready to instantiate;
/// cloning it shares the compiled code.
pub struct Pre(ReporterPre<HostState>);

impl Clone for Pre {
    fn clone(&self) -> Pre {
        Pre(self.0.clone())
    }
}

impl Pre {
    /// Links `component`.
    ///
    /// # Errors
    ///
    /// wasmtime's reason when the component does not fit the world.
    pub fn new(linker: &Linker<HostState>, component: &Component) -> wasmtime::Result<Pre> {
        linker
            .instantiate_pre(component)
            .and_then(ReporterPre::new)
            .map(Pre)
    }
}

/// A component instantiated for one run, with what it was told.
pub struct Session {
    instance: Instance,
    world: Reporter,
    ctx: WitRunContext,
}

impl Session {
    /// Instantiates the component in `store`, for a run told `ctx`.
    ///
    /// # Errors
    ///
    /// A trap (or a limit) while instantiating.
    pub fn start(
        mut store: impl AsContextMut<Data = HostState>,
        pre: &Pre,
        ctx: &RunContext,
    ) -> wasmtime::Result<Session> {
        let instance = pre.0.instance_pre().instantiate(&mut store)?;
        let world = Reporter::new(&mut store, &instance)?;
        Ok(Session {
            instance,
            world,
            ctx: WitRunContext {
                window: wit_window(&ctx.window),
                now: wit_instant(ctx.now),
                cursor: ctx.cursor.clone(),
                attempt: ctx.attempt,
                destinations: ctx.destinations.clone(),
                params: ctx.params.clone(),
            },
        })
    }

    /// Calls `run`.
    ///
    /// # Errors
    ///
    /// A trap, a limit, or a result that breaks the canonical ABI.
    pub fn run(
        &self,
        store: impl AsContextMut<Data = HostState>,
    ) -> wasmtime::Result<Result<Returned, RunError>> {
        Ok(match self.world.call_run(store, &self.ctx)? {
            Ok(r) => Ok(Returned {
                summary: r.summary,
                cursor: r.cursor,
            }),
            Err(WitRunError::InvalidData(m)) => Err(RunError::InvalidData(m)),
            Err(WitRunError::SourceFailed(m)) => Err(RunError::SourceFailed(m)),
            Err(WitRunError::Other(m)) => Err(RunError::Other(m)),
        })
    }

    /// Calls `describe` (the `describing-reporter` world) on the same
    /// instance, after `run` returned `report`.
    ///
    /// # Errors
    ///
    /// No such export of that type, a trap or a limit.
    pub fn describe(
        &self,
        mut store: impl AsContextMut<Data = HostState>,
        report: &Returned,
    ) -> wasmtime::Result<Option<String>> {
        let report = WitReport {
            summary: report.summary.clone(),
            cursor: report.cursor.clone(),
        };
        let f = self
            .instance
            .get_typed_func::<(&WitRunContext, &WitReport), (Option<String>,)>(
                &mut store, "describe",
            )?;
        let (prompt,) = f.call(&mut store, (&self.ctx, &report))?;
        Ok(prompt)
    }
}

use self::wit::jobhost::report::{log, outbox, source as wit_source, types, zone as wit_zone};

/// Adds the world's imports (not WASI's) to `linker`.
///
/// # Errors
///
/// Fails only if the linker already defines these names.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    types::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)?;
    wit_source::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)?;
    wit_zone::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)?;
    // The package's version as the world names it: a component of an
    // earlier 0.1 release imports these under its own version, and the
    // linker's semver matching finds them all the same.
    linker
        .instance("jobhost:report/outbox@0.1.1")?
        .func_wrap("send", send)?;
    linker
        .instance("jobhost:report/log@0.1.1")?
        .func_wrap("emit", emit)?;
    Ok(())
}

/// The error that stops a guest whose journal reached its limit (see
/// `journal`); the run fails with the limit named.
#[derive(Debug)]
pub struct JournalFull;

impl std::fmt::Display for JournalFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the run's journal reached its limit")
    }
}

impl std::error::Error for JournalFull {}

impl HostState {
    /// Stops the guest once its journal is full: nothing past the bound is
    /// kept, and a guest that goes on calling would only waste its time.
    fn journal_room(&self) -> wasmtime::Result<()> {
        if self.journal.overflowed() {
            return Err(wasmtime::Error::new(JournalFull));
        }
        Ok(())
    }
}

impl types::Host for HostState {}

impl wit_source::Host for HostState {
    fn open(&mut self) -> wasmtime::Result<Result<Resource<RowCursor>, wit_source::SourceError>> {
        let opened = self.source.open();
        self.journal
            .open(&opened.as_ref().map(drop).map_err(Clone::clone));
        self.journal_room()?;
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
        self.journal_room()?;
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
        self.journal_room()?;
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
        self.journal_room()
    }
}

impl wit_zone::Host for HostState {
    fn offsets(
        &mut self,
        start: WitInstant,
        end: WitInstant,
    ) -> wasmtime::Result<Result<Vec<wit_zone::OffsetSpan>, wit_zone::OffsetError>> {
        let answer = zone::instant("start", start.seconds, start.nanoseconds)
            .and_then(|s| Ok((s, zone::instant("end", end.seconds, end.nanoseconds)?)))
            .and_then(|(s, e)| zone::offsets(&self.zone, s, e));
        self.journal.zone(
            (start.seconds, start.nanoseconds),
            (end.seconds, end.nanoseconds),
            &answer,
        );
        self.journal_room()?;
        Ok(match answer {
            Ok(spans) => Ok(spans
                .into_iter()
                .map(|s| wit_zone::OffsetSpan {
                    start: wit_instant(s.start),
                    end: wit_instant(s.end),
                    offset_seconds: s.offset_seconds,
                })
                .collect()),
            Err(OffsetError::InvalidRange(m)) => Err(wit_zone::OffsetError::InvalidRange(m)),
        })
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

/// `outbox.send`: decided on the sizes and names first, so that the body
/// is copied out of the guest's memory only when it is staged.
fn send(
    mut cx: StoreContextMut<'_, HostState>,
    (destination, body, content_type): (WasmStr, WasmList<u8>, WasmStr),
) -> wasmtime::Result<(Result<u32, outbox::SendError>,)> {
    let (named, typed, staged) = {
        let destination = destination.to_str(&cx)?;
        let content_type = content_type.to_str(&cx)?;
        let named = Given::new(&destination, MAX_DESTINATION_NAME);
        let typed = Given::new(&content_type, MAX_CONTENT_TYPE);
        let verdict = cx
            .data()
            .outbox
            .check(&destination, body.len() as u64, &content_type);
        let staged = verdict.map(|()| {
            (
                destination.into_owned(),
                body.as_le_slice(&cx).to_vec(),
                content_type.into_owned(),
            )
        });
        (named, typed, staged)
    };
    let state = cx.data_mut();
    let answer = staged.map(|(d, b, t)| state.outbox.stage_checked(d, b, t));
    state
        .journal
        .send(&named, &typed, body.len() as u64, &answer);
    state.journal_room()?;
    Ok((answer.map_err(|e| match e {
        StageError::UnknownDestination(d) => outbox::SendError::UnknownDestination(d),
        StageError::TooLarge(limit) => outbox::SendError::TooLarge(limit),
        StageError::TooManyMessages(max) => outbox::SendError::TooManyMessages(max),
        StageError::InvalidContentType(t) => outbox::SendError::InvalidContentType(t),
    }),))
}

/// `log.emit`: only a message that fits the log's budget is copied out of
/// the guest's memory.
fn emit(
    mut cx: StoreContextMut<'_, HostState>,
    (level, message): (log::Level, WasmStr),
) -> wasmtime::Result<()> {
    let level = match level {
        log::Level::Trace => LogLevel::Trace,
        log::Level::Debug => LogLevel::Debug,
        log::Level::Info => LogLevel::Info,
        log::Level::Warn => LogLevel::Warn,
        log::Level::Error => LogLevel::Error,
    };
    let kept = {
        let text = message.to_str(&cx)?;
        (text.len() <= cx.data().log.room()).then(|| text.into_owned())
    };
    let state = cx.data_mut();
    state.journal.log(level as u8);
    match kept {
        Some(text) => state.log.emit(level, &text),
        None => state.log.drop_one(),
    }
    state.journal_room()
}

/// An instant as the guest sees it.
fn wit_instant(t: Timestamp) -> WitInstant {
    WitInstant {
        seconds: t.as_second(),
        nanoseconds: u32::try_from(t.subsec_nanosecond()).unwrap_or(0),
    }
}

/// A window as the guest sees it.
fn wit_window(w: &Window) -> WitWindow {
    WitWindow {
        job: w.job.to_string(),
        key: w.key().to_string(),
        label: w.label.clone(),
        start: wit_instant(w.start),
        end: wit_instant(w.end),
        timezone: w.zone.name().to_string(),
    }
}
