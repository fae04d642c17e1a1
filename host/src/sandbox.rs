//! The sandbox a report component runs in. One `Engine` and `Linker` per
//! process; a fresh `Store` per run, so nothing survives from one run to the
//! next. The guest gets no preopened directories, no environment, no
//! arguments and no sockets; its wall clock reads the run's `now` for the
//! whole run, its monotonic clock ticks 1 µs per reading, and its random
//! numbers come from a generator seeded with the window key, so the same run
//! computes the same bytes every time. Memory is capped, time is cut off by
//! an epoch deadline, and output is captured with a cap. Whatever the guest
//! does ends as a report or a [`GuestFailure`]; never as a host panic.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use jiff::Timestamp;
use rand::SeedableRng;
use rand::rngs::StdRng;
use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, ResourceLimiter, Store, Trap};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxView, WasiView};

use crate::bindings::{self, ReportWorld, ReportWorldPre, WitReport, WitRunContext, WitRunError};
use crate::cache::{CacheOutcome, CompileCache};
use crate::capture::CappedOutput;
use crate::core::error::{Error, Result};
use crate::core::text::cap_error;
use crate::core::window::Window;
use crate::guest_log::GuestLog;
use crate::journal::{self, Recorder};
use crate::outbox::Staging;
use crate::source::SourceAccess;
use crate::store::{StagedMessage, StoredReport};

/// The world this host implements, as guests name it.
pub const WORLD: &str = "jobhost:report/reporter@0.1.0";

/// The engine and linker shared by every run in this process.
pub struct Sandbox {
    engine: Engine,
    linker: Linker<HostState>,
}

/// A component file as read from disk, with its digest.
pub struct ComponentFile {
    /// Where it was read from.
    pub path: std::path::PathBuf,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Lowercase hex sha256 of the bytes.
    pub hex: String,
}

impl ComponentFile {
    /// Reads a component file.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the file when it cannot be read.
    pub fn read(path: &Path) -> Result<ComponentFile> {
        let bytes = std::fs::read(path).map_err(|e| {
            Error::input(format!(
                "cannot read component `{}`: {e}; build it with \
                 `cargo build --release --target wasm32-wasip2` or fix --component",
                path.display()
            ))
        })?;
        let hex = hex::encode(Sha256::digest(&bytes));
        Ok(ComponentFile {
            path: path.to_path_buf(),
            bytes,
            hex,
        })
    }

    /// `sha256:<hex>`.
    pub fn digest(&self) -> String {
        format!("sha256:{}", self.hex)
    }
}

/// A component ready to instantiate.
pub struct LoadedComponent {
    pre: ReportWorldPre<HostState>,
    /// Whether it exports `describe` (the `describing-reporter` world).
    pub describes: bool,
    /// `sha256:<hex>` of the `.wasm` file.
    pub digest: String,
    /// Whether the compiled code came from the cache.
    pub cache: CacheOutcome,
}

/// What this host's world needs of a component that `component` lacks, in
/// words: an import of another version of `jobhost:report`, or no `run`
/// export. `None` when the reason is something else (wasmtime's own
/// message then names it).
fn world_mismatch(engine: &Engine, component: &Component) -> Option<String> {
    let ty = component.component_type();
    let ours = WORLD.rsplit_once('@').map_or("", |(_, v)| v);
    for (name, _) in ty.imports(engine) {
        if let Some(rest) = name.strip_prefix("jobhost:report/")
            && let Some((_, version)) = rest.split_once('@')
            && version != ours
        {
            return Some(format!(
                "it was built for jobhost:report@{version} (it imports `{name}`), and this host \
                 speaks jobhost:report@{ours}"
            ));
        }
    }
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| format!("`{n}`")).collect();
    if !exports.iter().any(|e| e == "`run`") {
        return Some(format!(
            "it does not export `run` (it exports {})",
            if exports.is_empty() {
                "nothing".to_string()
            } else {
                exports.join(", ")
            }
        ));
    }
    None
}

/// Whether `component` exports `describe` (the `describing-reporter`
/// world); its type is checked when it is called.
fn exports_describe(engine: &Engine, component: &Component) -> bool {
    component
        .component_type()
        .exports(engine)
        .any(|(name, _)| name == "describe")
}

/// Resource limits for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestLimits {
    /// Linear memory cap, in bytes.
    pub memory_bytes: usize,
    /// Wall-clock time the guest may compute for.
    pub timeout: Duration,
    /// Bytes of stdout and of stderr kept.
    pub output_bytes: usize,
    /// Bytes of report summary plus cursor accepted.
    pub report_bytes: usize,
    /// Encoded bytes the run's journal may hold.
    pub journal_bytes: u64,
}

/// Everything a run hands the guest.
pub struct RunInput {
    /// The window being reported.
    pub window: Window,
    /// The run's clock reading.
    pub now: Timestamp,
    /// The job's cursor from its last DONE run.
    pub cursor: Option<String>,
    /// The attempt number, from 1.
    pub attempt: u32,
    /// Free-form parameters, sorted by name.
    pub params: Vec<(String, String)>,
    /// Source access for the window.
    pub source: SourceAccess,
    /// The outbox; its destination names are passed to the guest too.
    pub outbox: Staging,
    /// Declared destination names, sorted.
    pub destinations: Vec<String>,
    /// The guest's log.
    pub log: GuestLog,
    /// Limits.
    pub limits: GuestLimits,
    /// The seed of the guest's random numbers; `None`: derived from the
    /// window key. A replay passes the recorded one.
    pub seed: Option<[u8; 32]>,
}

/// A successful run: the report, its messages and some counts.
#[derive(Debug)]
pub struct GuestSuccess {
    /// The report, with what the component says to describe of it.
    pub report: StoredReport,
    /// Why `describe` gave nothing, when it failed (a trap, a timeout, a
    /// text over the size limit). The run stands all the same.
    pub describe_error: Option<String>,
    /// Messages staged, in order.
    pub messages: Vec<StagedMessage>,
    /// The run's journal (see `journal`), as stored.
    pub journal: Vec<u8>,
    /// What the guest did, for the receipt.
    pub stats: GuestStats,
}

/// Counts for the receipt.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct GuestStats {
    /// Rows handed to the guest.
    pub rows: u64,
    /// Log lines written.
    pub log_lines: u64,
    /// Log lines dropped over the budget.
    pub log_dropped: u64,
    /// Time spent in the guest, in milliseconds.
    pub guest_ms: f64,
    /// Size of the run's compressed journal.
    pub journal_bytes: u64,
}

/// Why a run produced no report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestFailure {
    /// `guest-error`, `guest-trap`, `guest-timeout`, `guest-memory`.
    pub kind: &'static str,
    /// One line for a person.
    pub message: String,
    /// Whether running again could help.
    pub retryable: bool,
}

/// Per-run host state: what the guest's imports act on.
pub struct HostState {
    wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    limiter: MemoryLimiter,
    pub(crate) source: SourceAccess,
    pub(crate) outbox: Staging,
    pub(crate) log: GuestLog,
    pub(crate) journal: Recorder,
    monotonic: Arc<AtomicU64>,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Table elements a guest may hold across all its tables.
const MAX_TABLE_ELEMENTS: usize = 1_000_000;

/// A `ResourceLimiter` that caps the guest's memories and tables in total
/// (a component may hold several core modules, each with its own memory),
/// and remembers whether the memory cap was hit, since a refused memory
/// growth does not surface as a `Trap`.
struct MemoryLimiter {
    max: usize,
    used: usize,
    table_elements: usize,
    hit: Arc<AtomicBool>,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // A growth past the memory's own maximum fails anyway; count nothing.
        if maximum.is_some_and(|m| desired > m) {
            return Ok(false);
        }
        let total = self.used.saturating_sub(current).saturating_add(desired);
        if total > self.max {
            self.hit.store(true, Ordering::Relaxed);
            wasmtime::bail!("guest memory limit of {} bytes reached", self.max);
        }
        self.used = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self
            .table_elements
            .saturating_sub(current)
            .saturating_add(desired);
        if total > MAX_TABLE_ELEMENTS {
            return Ok(false);
        }
        self.table_elements = total;
        Ok(true)
    }

    fn instances(&self) -> usize {
        64
    }

    fn memories(&self) -> usize {
        64
    }

    fn tables(&self) -> usize {
        64
    }
}

/// The guest's wall clock: always the run's `now`.
struct PinnedWallClock(Duration);

impl HostWallClock for PinnedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }
    fn now(&self) -> Duration {
        self.0
    }
}

/// The guest's monotonic clock: starts at 0 and advances 1 µs per reading,
/// so a guest that waits for time to pass makes progress, deterministically.
/// Sleeping advances it by the time slept (see [`virtual_sleep`]).
struct TickingClock(Arc<AtomicU64>);

impl HostMonotonicClock for TickingClock {
    fn resolution(&self) -> u64 {
        1_000
    }
    fn now(&self) -> u64 {
        advance(&self.0, 1_000)
    }
}

/// The WASI clocks version whose monotonic-clock functions are replaced.
const CLOCKS: &str = "wasi:clocks/monotonic-clock@0.2.12";

/// Replaces the monotonic clock's timers with virtual ones. WASI's own
/// implementation sleeps for real inside the host call, where the epoch
/// deadline cannot interrupt it: a guest sleeping for a day would hold the
/// host for a day. Here a timer is ready at once and moves the guest's
/// clock forward instead, so sleeping is instant, deterministic and bounded
/// by the same time limit as computing.
fn virtual_sleep(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut clocks = linker.instance(CLOCKS)?;
    clocks.func_wrap(
        "subscribe-duration",
        |mut cx: wasmtime::StoreContextMut<'_, HostState>, (nanos,): (u64,)| {
            let state = cx.data_mut();
            advance(&state.monotonic, nanos);
            let timer = state.table.push(Elapsed)?;
            Ok((wasmtime_wasi::p2::subscribe(&mut state.table, timer)?,))
        },
    )?;
    clocks.func_wrap(
        "subscribe-instant",
        |mut cx: wasmtime::StoreContextMut<'_, HostState>, (when,): (u64,)| {
            let state = cx.data_mut();
            state.monotonic.fetch_max(when, Ordering::Relaxed);
            let timer = state.table.push(Elapsed)?;
            Ok((wasmtime_wasi::p2::subscribe(&mut state.table, timer)?,))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Moves a monotonic reading forward by `nanos`, saturating rather than
/// wrapping, and returns the reading before the move.
fn advance(clock: &AtomicU64, nanos: u64) -> u64 {
    clock
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
            Some(t.saturating_add(nanos))
        })
        .unwrap_or_else(|t| t)
}

/// A timer whose time has come.
struct Elapsed;

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for Elapsed {
    async fn ready(&mut self) {}
}

impl Sandbox {
    /// Builds the engine and linker.
    ///
    /// # Errors
    ///
    /// `Error::Host` if wasmtime cannot be configured on this machine.
    pub fn new() -> Result<Sandbox> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        config.wasm_component_model(true);
        config.cranelift_opt_level(wasmtime::OptLevel::Speed);
        let engine = Engine::new(&config)
            .map_err(|e| Error::Host(format!("cannot start the WebAssembly engine: {e:#}")))?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .and_then(|()| virtual_sleep(&mut linker))
            .and_then(|()| bindings::add_to_linker(&mut linker))
            .map_err(|e| Error::Host(format!("cannot link the host interfaces: {e:#}")))?;
        Ok(Sandbox { engine, linker })
    }

    /// Checks and compiles (or loads from cache) a component file.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the file when it is not WebAssembly, a core
    /// module rather than a component, or built for another world.
    pub fn load(&self, file: &ComponentFile, cache: &CompileCache) -> Result<LoadedComponent> {
        let shown = file.path.display();
        let wasm = &file.bytes;
        let hex = &file.hex;
        match wasm.get(0..8) {
            Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => {
                return Err(Error::input(format!(
                    "`{shown}` is a core WebAssembly module, not a component; build it for \
                     the wasm32-wasip2 target (or wrap it with `wasm-tools component new`)"
                )));
            }
            Some([0, b'a', b's', b'm', _, _, 1, 0]) => {}
            _ => {
                return Err(Error::input(format!(
                    "`{shown}` is not a WebAssembly component (no `\\0asm` header); \
                     point --component at the .wasm file your build produced"
                )));
            }
        }
        let (component, cache_outcome) = cache
            .load(&self.engine, wasm, hex)
            .map_err(|e| Error::input(format!("invalid component `{shown}`: {e:#}")))?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .and_then(ReportWorldPre::new)
            .map_err(|e| {
                let why =
                    world_mismatch(&self.engine, &component).unwrap_or_else(|| format!("{e:#}"));
                Error::input(format!(
                    "component `{shown}` does not fit the `{WORLD}` world this host provides: \
                     {why}; build it against this host's wit/ folder"
                ))
            })?;
        Ok(LoadedComponent {
            describes: exports_describe(&self.engine, &component),
            pre,
            digest: format!("sha256:{hex}"),
            cache: cache_outcome,
        })
    }

    /// The component whose sha256 hex is `hex`, from the compile cache.
    ///
    /// # Errors
    ///
    /// `Error::Input` when the cache does not hold it, or it no longer fits
    /// the world.
    pub fn load_cached(&self, hex: &str, cache: &CompileCache) -> Result<LoadedComponent> {
        let component = cache.find(&self.engine, hex).ok_or_else(|| {
            Error::input(format!(
                "the recorded component sha256:{hex} is not in the compile cache; \
                 pass --component with its .wasm file"
            ))
        })?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .and_then(ReportWorldPre::new)
            .map_err(|e| {
                Error::input(format!(
                    "the cached component sha256:{hex} does not fit the `{WORLD}` world: {e:#}"
                ))
            })?;
        Ok(LoadedComponent {
            describes: exports_describe(&self.engine, &component),
            pre,
            digest: format!("sha256:{hex}"),
            cache: CacheOutcome::Hit,
        })
    }

    /// Runs the component once, in a fresh store.
    pub fn run(
        &self,
        component: &LoadedComponent,
        input: RunInput,
    ) -> std::result::Result<GuestSuccess, GuestFailure> {
        let stdout = CappedOutput::new(input.limits.output_bytes);
        let stderr = CappedOutput::new(input.limits.output_bytes);
        let key = input.window.key();
        let seed: [u8; 32] = input
            .seed
            .unwrap_or_else(|| Sha256::digest(key.as_str().as_bytes()).into());
        let monotonic = Arc::new(AtomicU64::new(0));
        let since_epoch = Duration::new(
            u64::try_from(input.now.as_second()).unwrap_or(0),
            u32::try_from(input.now.subsec_nanosecond()).unwrap_or(0),
        );
        let wasi = WasiCtx::builder()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .wall_clock(PinnedWallClock(since_epoch))
            .monotonic_clock(TickingClock(monotonic.clone()))
            .secure_random(StdRng::from_seed(seed))
            .insecure_random(StdRng::from_seed(derive(seed, 1)))
            .insecure_random_seed(u128::from_le_bytes(
                derive(seed, 2)[..16].try_into().unwrap_or([0; 16]),
            ))
            .build();
        let memory_hit = Arc::new(AtomicBool::new(false));
        let source_interrupt = input.source.interrupter();
        let ctx = WitRunContext {
            window: bindings::wit_window(&input.window),
            now: bindings::wit_instant(input.now),
            cursor: input.cursor,
            attempt: input.attempt,
            destinations: input.destinations,
            params: input.params,
        };
        let journal = Recorder::new(
            &journal::Context {
                key: ctx.window.key.clone(),
                job: ctx.window.job.clone(),
                label: ctx.window.label.clone(),
                start: (ctx.window.start.seconds, ctx.window.start.nanoseconds),
                end: (ctx.window.end.seconds, ctx.window.end.nanoseconds),
                timezone: ctx.window.timezone.clone(),
                window_kind: input.window.kind.to_string(),
                now: (ctx.now.seconds, ctx.now.nanoseconds),
                cursor: ctx.cursor.clone(),
                attempt: ctx.attempt,
                destinations: ctx.destinations.clone(),
                params: ctx.params.clone(),
                seed,
                outbox_limits: input.outbox.limits(),
                limits: (
                    input.limits.memory_bytes as u64,
                    u64::try_from(input.limits.timeout.as_millis()).unwrap_or(u64::MAX),
                    input.limits.output_bytes as u64,
                    input.limits.report_bytes as u64,
                ),
            },
            input.limits.journal_bytes,
        );
        let state = HostState {
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryLimiter {
                max: input.limits.memory_bytes,
                used: 0,
                table_elements: 0,
                hit: memory_hit.clone(),
            },
            source: input.source,
            outbox: input.outbox,
            log: input.log,
            journal,
            monotonic,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        // What one call may hand the host: anything that fits in the
        // guest's memory, so that the host's own answer (`too-large`, a
        // dropped log message) comes first, never wasmtime's refusal. The
        // host's own imports read their arguments in place.
        store.set_hostcall_fuel(input.limits.memory_bytes);
        store.set_epoch_deadline(1);
        store.epoch_deadline_trap();

        let started = std::time::Instant::now();
        let timed_out = Arc::new(AtomicBool::new(false));
        let fired = timed_out.clone();
        let Some(watchdog) =
            Watchdog::start(self.engine.clone(), input.limits.timeout, move || {
                fired.store(true, Ordering::Relaxed);
                source_interrupt.interrupt()
            })
        else {
            return Err(GuestFailure {
                kind: "host",
                message: "cannot start the guest's time-limit watchdog thread".to_string(),
                retryable: true,
            });
        };
        let result = component
            .pre
            .instance_pre()
            .instantiate(&mut store)
            .and_then(|instance| {
                let world = ReportWorld::new(&mut store, &instance)?;
                Ok((instance, world.call_run(&mut store, &ctx)?))
            });
        // Still under the same watchdog and limits: what a model is asked
        // to describe, from the same instance.
        let described = match &result {
            Ok((instance, Ok(report))) if component.describes => {
                store.data_mut().outbox.close();
                Some(describe(&mut store, instance, &ctx, report))
            }
            _ => None,
        };
        let result = result.map(|(_, outcome)| outcome);
        drop(watchdog);
        let guest_ms = (started.elapsed().as_secs_f64() * 1e6).round() / 1000.0;

        let mut state = store.into_data();
        let (out, out_dropped) = stdout.contents();
        let (err, err_dropped) = stderr.contents();
        state
            .log
            .emit_stream("stdout", &out, out_dropped, input.limits.output_bytes);
        state
            .log
            .emit_stream("stderr", &err, err_dropped, input.limits.output_bytes);
        let stats = GuestStats {
            rows: state.source.rows_read(),
            log_lines: state.log.emitted(),
            log_dropped: state.log.dropped(),
            guest_ms,
            journal_bytes: 0,
        };
        let last_stderr_line = panic_message(&String::from_utf8_lossy(&err));
        // Nothing past the journal's bound is kept, whatever the guest made
        // of its last answer.
        if state.journal.overflowed() {
            return Err(journal_failure(&input.limits, &state.journal));
        }
        // In a replay, an answer the journal did not hold makes every
        // outcome a divergence, whatever the guest made of that answer.
        if let Some(what) = state.source.divergence() {
            return Err(GuestFailure {
                kind: "replay-divergence",
                message: what,
                retryable: false,
            });
        }
        // Past the deadline every outcome is the timeout: an interrupted
        // source query may have surfaced as an ordinary error first.
        if timed_out.load(Ordering::Relaxed) && !matches!(result, Ok(Ok(_))) {
            return Err(timeout_failure(&input.limits));
        }
        match result {
            Ok(Ok(report))
                if report.summary.len() + report.cursor.as_ref().map_or(0, String::len)
                    > input.limits.report_bytes =>
            {
                Err(GuestFailure {
                    kind: "guest-output",
                    message: format!(
                        "the report is {} bytes, over the limit of {} (`limits.max_report_bytes`); \
                         send large outputs as messages",
                        report.summary.len() + report.cursor.as_ref().map_or(0, String::len),
                        input.limits.report_bytes
                    ),
                    retryable: false,
                })
            }
            Ok(Ok(report)) => {
                let journal = state.journal.finish().map_err(|message| GuestFailure {
                    kind: "host",
                    message,
                    retryable: true,
                })?;
                let (prompt, describe_error) = match described {
                    None => (None, None),
                    Some(Ok(Some(text))) if text.len() > input.limits.report_bytes => (
                        None,
                        Some(format!(
                            "`describe` returned {} bytes, over the limit of {} \
                             (`limits.max_report_bytes`)",
                            text.len(),
                            input.limits.report_bytes
                        )),
                    ),
                    Some(Ok(prompt)) => (prompt, None),
                    Some(Err(e)) if timed_out.load(Ordering::Relaxed) => (
                        None,
                        Some(format!(
                            "`describe` did not finish within the time limit ({})",
                            cap_error(&one_line(&format!("{e:#}")))
                        )),
                    ),
                    Some(Err(e)) => (
                        None,
                        Some(format!(
                            "`describe` failed: {}",
                            cap_error(&one_line(&format!("{e:#}")))
                        )),
                    ),
                };
                Ok(GuestSuccess {
                    report: StoredReport {
                        summary: report.summary,
                        cursor: report.cursor,
                        described: describe_error.is_none(),
                        prompt,
                    },
                    describe_error,
                    messages: state.outbox.into_messages(),
                    stats: GuestStats {
                        journal_bytes: journal.len() as u64,
                        ..stats
                    },
                    journal,
                })
            }
            Ok(Err(e)) => Err(match e {
                WitRunError::InvalidData(m) => GuestFailure {
                    kind: "guest-error",
                    message: format!("the report refused the data: {}", cap_error(&m)),
                    retryable: false,
                },
                WitRunError::SourceFailed(m) => GuestFailure {
                    kind: "guest-error",
                    message: format!("the report could not read its source: {}", cap_error(&m)),
                    retryable: true,
                },
                WitRunError::Other(m) => GuestFailure {
                    kind: "guest-error",
                    message: format!("the report failed: {}", cap_error(&m)),
                    retryable: true,
                },
            }),
            Err(e) => Err(classify(
                &e,
                &input.limits,
                memory_hit.load(Ordering::Relaxed),
                last_stderr_line,
            )),
        }
    }
}

/// Calls the component's `describe` export on `instance`, after `run`.
fn describe(
    store: &mut Store<HostState>,
    instance: &wasmtime::component::Instance,
    ctx: &WitRunContext,
    report: &WitReport,
) -> wasmtime::Result<Option<String>> {
    let f = instance.get_typed_func::<(&WitRunContext, &WitReport), (Option<String>,)>(
        &mut *store,
        "describe",
    )?;
    let (prompt,) = f.call(&mut *store, (ctx, report))?;
    Ok(prompt)
}

/// The most telling line of the guest's stderr: a Rust panic's location and
/// message, else the last line that is not a hint about backtraces.
fn panic_message(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if let Some(i) = lines.iter().rposition(|l| l.contains("panicked at")) {
        let message = lines.get(i + 1).filter(|l| !l.starts_with("note:"));
        return Some(match message {
            Some(m) => format!("{} {m}", lines[i]),
            None => lines[i].to_string(),
        });
    }
    lines
        .iter()
        .rev()
        .find(|l| !l.starts_with("note:"))
        .map(|l| l.to_string())
}

fn derive(seed: [u8; 32], n: u8) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(seed);
    h.update([n]);
    h.finalize().into()
}

fn classify(
    e: &wasmtime::Error,
    limits: &GuestLimits,
    memory_hit: bool,
    stderr: Option<String>,
) -> GuestFailure {
    let hint = stderr
        .map(|l| format!("; guest stderr: {}", cap_error(&l)))
        .unwrap_or_default();
    if memory_hit {
        return GuestFailure {
            kind: "guest-memory",
            message: format!(
                "the guest exceeded its memory limit of {} MiB; raise `limits.memory_mib` if the report needs more",
                limits.memory_bytes >> 20
            ),
            retryable: false,
        };
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => timeout_failure(limits),
        Some(trap) => GuestFailure {
            kind: "guest-trap",
            message: format!("the guest trapped: {trap}{hint}"),
            retryable: false,
        },
        None => GuestFailure {
            kind: "guest-trap",
            message: format!(
                "the guest failed: {}{hint}",
                cap_error(&one_line(&format!("{e:#}")))
            ),
            retryable: false,
        },
    }
}

/// The failure of a run whose journal reached its limit.
fn journal_failure(limits: &GuestLimits, journal: &Recorder) -> GuestFailure {
    GuestFailure {
        kind: "journal-limit",
        message: format!(
            "the run's journal reached its limit of {} bytes (`limits.max_journal_bytes`) after \
             {} bytes of answers to the guest's calls; the guest was stopped and nothing was \
             kept; raise the limit if the report reads that much (the next attempt runs under \
             the new one), or have it read its rows once",
            limits.journal_bytes,
            journal.recorded_bytes()
        ),
        // The data may shrink, or a person raise the limit, before the next
        // attempt: retried, then abandoned after the job's attempts.
        retryable: true,
    }
}

fn timeout_failure(limits: &GuestLimits) -> GuestFailure {
    GuestFailure {
        kind: "guest-timeout",
        message: format!(
            "the guest exceeded its time limit of {} s and was stopped; raise \
             `limits.timeout_seconds` if the report needs longer",
            limits.timeout.as_secs_f64()
        ),
        retryable: true,
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Bumps the engine's epoch when the time limit passes, interrupting the
/// guest at its next check; dropping it before then cancels it.
struct Watchdog {
    cancel: Option<mpsc::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Watchdog {
    /// Starts the countdown; at the deadline the epoch moves (stopping
    /// guest code) and `on_timeout` runs (stopping host work done for it).
    fn start(
        engine: Engine,
        timeout: Duration,
        on_timeout: impl FnOnce() + Send + 'static,
    ) -> Option<Watchdog> {
        let (tx, rx) = mpsc::channel::<()>();
        let thread = thread::Builder::new()
            .name("jobhost-watchdog".to_string())
            .spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(timeout) {
                    engine.increment_epoch();
                    on_timeout();
                }
            })
            .ok()?;
        Some(Watchdog {
            cancel: Some(tx),
            thread: Some(thread),
        })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.cancel.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(max: usize) -> MemoryLimiter {
        MemoryLimiter {
            max,
            used: 0,
            table_elements: 0,
            hit: Arc::new(AtomicBool::new(false)),
        }
    }

    #[test]
    fn the_memory_limit_counts_every_memory_of_the_guest_together() {
        let mut l = limiter(100);
        assert!(l.memory_growing(0, 60, None).unwrap());
        assert!(
            l.memory_growing(60, 70, None).unwrap(),
            "growing the same memory counts the difference"
        );
        assert!(
            l.memory_growing(0, 40, None).is_err(),
            "a second memory shares the cap"
        );
        assert!(l.hit.load(Ordering::Relaxed));
    }

    #[test]
    fn the_guest_clock_saturates_instead_of_wrapping() {
        let clock = AtomicU64::new(u64::MAX - 5);
        advance(&clock, 1_000);
        assert_eq!(clock.load(Ordering::Relaxed), u64::MAX);
    }

    #[test]
    fn a_rust_panic_message_is_picked_from_guest_stderr() {
        let stderr = "thread '<unnamed>' panicked at src/lib.rs:3:5:\nboom\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            panic_message(stderr).as_deref(),
            Some("thread '<unnamed>' panicked at src/lib.rs:3:5: boom")
        );
    }
}
