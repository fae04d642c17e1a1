//! What one run's guest acts on: the host state behind its imports (WASI's
//! context and resource table, the memory limiter, the source, the outbox,
//! the log, the journal, the guest's clock, the window's time zone). A fresh one per run; nothing
//! in it survives the run.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use jiff::tz::TimeZone;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::guest::guest_log::GuestLog;
use crate::guest::journal::Recorder;
use crate::guest::limits::MemoryLimiter;
use crate::guest::outbox::Staging;
use crate::guest::source::SourceAccess;

/// Per-run host state: what the guest's imports act on.
pub struct HostState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) source: SourceAccess,
    pub(crate) outbox: Staging,
    pub(crate) log: GuestLog,
    pub(crate) journal: Recorder,
    pub(crate) monotonic: Arc<AtomicU64>,
    /// The window's time zone, which `zone.offsets` answers for.
    pub(crate) zone: TimeZone,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}
