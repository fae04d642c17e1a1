//! The sandbox a report component runs in. One `Engine` and `Linker` serve
//! every run of a process (the daemon and `backfill` build them once, a
//! one-shot `jobhost run` for its one run); a fresh `Store` per run, so
//! nothing survives from one run to the next. The guest gets no preopened directories, no environment, no
//! arguments and no sockets; its wall clock reads the run's `now` for the
//! whole run, its monotonic clock ticks 1 µs per reading, and its random
//! numbers come from a generator seeded with the window key, so the same run
//! computes the same bytes every time. Memory is capped, time is cut off by
//! an epoch deadline, and output is captured with a cap. Whatever the guest
//! does ends as a report or a [`GuestFailure`]; never as a host panic.
//!
//! A run is four steps: [`Sandbox::set_up`] builds the store the guest
//! lives in, [`Sandbox::call`] calls `run` (and `describe`) under the
//! watchdog, [`collect`] prints what the guest wrote and counts it, and
//! [`judge`] turns what came back into the run's outcome.

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
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::WasiCtx;

use crate::core::error::{Error, ErrorKind, Result};
use crate::core::text::cap_error;
use crate::core::window::Window;
use crate::guest::bindings::{self, Pre, Returned, RunContext, Session};
use crate::guest::cache::{CacheOutcome, CompileCache};
use crate::guest::capture::CappedOutput;
use crate::guest::clocks::{PinnedWallClock, TickingClock, virtual_sleep};
use crate::guest::failure::{
    GuestFailure, Telling, classify, host_failure, journal_failure, one_line, report_too_large,
    telling, timeout_failure, without_runtime_panic,
};
use crate::guest::functions::{FunctionCache, Reuse};
use crate::guest::guest_log::GuestLog;
use crate::guest::journal::{self, Recorder};
pub use crate::guest::limits::GuestLimits;
use crate::guest::limits::MemoryLimiter;
use crate::guest::outbox::Staging;
use crate::guest::source::{SourceAccess, SourceInterrupt};
use crate::guest::state::HostState;
use crate::store::{StagedMessage, StoredReport};

/// The world this host implements, as guests name it.
pub const WORLD: &str = "jobhost:report/reporter@0.1.1";

/// How the host turns a component into machine code. Each setting keeps
/// its own compiled artifacts in the cache (the engine's compatibility
/// hash names it), so switching never loads code of the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compiler {
    /// Cranelift, optimising: the fastest code, the slowest compile.
    Optimizing,
    /// Winch, wasmtime's baseline compiler: compiles several times faster
    /// and runs slower (see BENCHMARKS.md).
    Baseline,
}

impl Compiler {
    /// The variable that chooses the compiler for the whole process.
    pub const VARIABLE: &'static str = "JOBHOST_COMPILER";

    /// The compiler `JOBHOST_COMPILER` names (`cranelift`, the default, or
    /// `winch`).
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the variable for any other value.
    pub fn from_env() -> Result<Compiler> {
        match std::env::var(Self::VARIABLE).as_deref() {
            Err(_) | Ok("" | "cranelift") => Ok(Compiler::Optimizing),
            Ok("winch") => Ok(Compiler::Baseline),
            Ok(other) => Err(Error::input(format!(
                "{} is `{}`; set it to `cranelift` (the default) or `winch`",
                Self::VARIABLE,
                crate::core::text::printable(other)
            ))),
        }
    }
}

/// Whether compiling with Cranelift reuses functions compiled before
/// (`JOBHOST_FUNCTION_CACHE`, `on` by default): see
/// [`crate::guest::functions`].
///
/// # Errors
///
/// `Error::Input` naming the variable for a value other than `on` or `off`.
pub fn function_cache_from_env() -> Result<bool> {
    const VARIABLE: &str = "JOBHOST_FUNCTION_CACHE";
    match std::env::var(VARIABLE).as_deref() {
        Err(_) | Ok("" | "on") => Ok(true),
        Ok("off") => Ok(false),
        Ok(other) => Err(Error::input(format!(
            "{VARIABLE} is `{}`; set it to `on` (the default) or `off`",
            crate::core::text::printable(other)
        ))),
    }
}

/// The engine and linker shared by every run in this process, on as many
/// threads at once as the caller likes. Everything of one run (its store,
/// limits, clocks, journal) is made anew by [`Sandbox::run`]. The engine's
/// epoch is shared: a run's time limit moves it, every running guest then
/// stops at its next check, and each store's epoch callback lets its guest
/// go on unless its own time limit is the one that passed.
pub struct Sandbox {
    engine: Engine,
    linker: Linker<HostState>,
    /// The components loaded so far, linked, by their file's digest: every
    /// job whose `.wasm` has the same digest shares one copy of the code,
    /// and a run after the first neither maps the compiled file again nor
    /// links it.
    loaded: std::sync::Mutex<Loaded>,
    /// Compiled functions kept across components (Cranelift only).
    functions: Option<Arc<FunctionCache>>,
}

/// The linked components a sandbox keeps, oldest first, at most
/// [`KEEP_LOADED`] of them (a daemon whose components are replaced again
/// and again keeps only the newest).
#[derive(Default)]
struct Loaded {
    by_digest: std::collections::HashMap<String, (Pre, bool)>,
    order: std::collections::VecDeque<String>,
}

/// How many distinct components a sandbox keeps linked.
const KEEP_LOADED: usize = 64;

impl Loaded {
    fn keep(&mut self, hex: &str, pre: &Pre, describes: bool) {
        if self.by_digest.contains_key(hex) {
            return;
        }
        if self.order.len() >= KEEP_LOADED
            && let Some(oldest) = self.order.pop_front()
        {
            self.by_digest.remove(&oldest);
        }
        self.order.push_back(hex.to_string());
        self.by_digest
            .insert(hex.to_string(), (pre.clone(), describes));
    }
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox").finish_non_exhaustive()
    }
}

/// A component file: where it is and its digest, its bytes read only when
/// they are needed (to compile it, or to learn its digest).
pub struct ComponentFile {
    /// Where it was read from.
    pub path: std::path::PathBuf,
    /// Its bytes, once read: a component found by digest in the compile
    /// cache is never read.
    bytes: Option<Vec<u8>>,
    /// Lowercase hex sha256 of the bytes.
    pub hex: String,
}

impl ComponentFile {
    /// The component file at `path`, its digest from `cache` when the cache
    /// has seen this very file (same device, inode, size, modification and
    /// change time) and else from reading and hashing it, which the cache
    /// then remembers. The file is opened once: its identity and its bytes
    /// come from the same handle, and a file that changed while it was
    /// read is hashed but not remembered.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the file when it cannot be read.
    pub fn open(path: &Path, cache: &CompileCache) -> Result<ComponentFile> {
        use std::io::Read;
        let mut file = std::fs::File::open(path).map_err(|e| unreadable(path, &e))?;
        let before = file.metadata().map_err(|e| unreadable(path, &e))?;
        let known = crate::guest::cache::keeps_change_time(&file);
        if known && let Some(hex) = cache.known_digest(&before) {
            return Ok(ComponentFile {
                path: path.to_path_buf(),
                bytes: None,
                hex,
            });
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| unreadable(path, &e))?;
        let hex = hex::encode(Sha256::digest(&bytes));
        if known
            && let Ok(after) = file.metadata()
            && crate::guest::cache::same_identity(&before, &after)
        {
            cache.remember_digest(&after, &hex);
        }
        Ok(ComponentFile {
            path: path.to_path_buf(),
            bytes: Some(bytes),
            hex,
        })
    }

    /// A component whose bytes are in hand (carried by a replay file);
    /// `shown` names it in messages.
    pub fn in_memory(shown: impl Into<std::path::PathBuf>, bytes: Vec<u8>) -> ComponentFile {
        ComponentFile {
            path: shown.into(),
            hex: hex::encode(Sha256::digest(&bytes)),
            bytes: Some(bytes),
        }
    }

    /// `sha256:<hex>`.
    pub fn digest(&self) -> String {
        format!("sha256:{}", self.hex)
    }

    /// The file's bytes, read now if they were not; a file that changed
    /// since its digest was taken gets its new digest.
    fn bytes(&mut self) -> Result<&[u8]> {
        if self.bytes.is_none() {
            let bytes = read_component(&self.path)?;
            self.hex = hex::encode(Sha256::digest(&bytes));
            self.bytes = Some(bytes);
        }
        Ok(self.bytes.as_deref().unwrap_or_default())
    }
}

/// A size in bytes as a person reads it: `18.4 MB`, `190 KB`.
fn megabytes(bytes: usize) -> String {
    #[allow(clippy::cast_precision_loss)] // sizes far below 2^52
    let b = bytes as f64;
    if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else {
        format!("{:.0} KB", (b / 1e3).max(1.0))
    }
}

fn read_component(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| unreadable(path, &e))
}

fn unreadable(path: &Path, e: &std::io::Error) -> Error {
    Error::input(format!(
        "cannot read component `{}`: {e}; build it with \
         `cargo build --release --target wasm32-wasip2` or fix --component",
        path.display()
    ))
}

/// A component ready to instantiate.
pub struct LoadedComponent {
    pre: Pre,
    /// Whether it exports `describe` (the `describing-reporter` world).
    pub describes: bool,
    /// `sha256:<hex>` of the `.wasm` file.
    pub digest: String,
    /// Whether the compiled code came from the cache.
    pub cache: CacheOutcome,
    /// How long compiling took, when it was compiled now.
    pub compile: Option<Duration>,
    /// How many of its functions were reused from components compiled
    /// before, when it was compiled now with a cache folder (Cranelift).
    pub reuse: Option<Reuse>,
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
            && !served_by(version, ours)
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

/// Whether a host speaking `ours` serves the imports of a component built
/// for `version`: the same release, or an earlier one on the same semver
/// track (`0.1.0` by `0.1.1`; wasmtime's linker matches those names), whose
/// interfaces a later release only adds to.
fn served_by(version: &str, ours: &str) -> bool {
    fn parts(v: &str) -> Option<(u64, u64, u64)> {
        let mut it = v.split('.').map(|p| p.parse::<u64>().ok());
        let parsed = (it.next()??, it.next()??, it.next()??);
        it.next().is_none().then_some(parsed)
    }
    match (parts(version), parts(ours)) {
        (Some(theirs), Some(mine)) => {
            let same_track = if mine.0 == 0 {
                (theirs.0, theirs.1) == (0, mine.1) && mine.1 != 0
            } else {
                theirs.0 == mine.0
            };
            theirs == mine || (same_track && theirs < mine)
        }
        _ => version == ours,
    }
}

/// Whether `component` exports `describe` (the `describing-reporter`
/// world); its type is checked when it is called.
fn exports_describe(engine: &Engine, component: &Component) -> bool {
    component
        .component_type()
        .exports(engine)
        .any(|(name, _)| name == "describe")
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
    /// The window's revision, from 1.
    pub revision: u32,
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
    /// What the guest read of its source (see
    /// [`crate::guest::source::Fingerprint`]).
    pub read: crate::guest::source::Fingerprint,
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

/// What [`Sandbox::set_up`] builds besides the store: what the guest is
/// told, where its output goes, and the flags the run is judged by.
struct SetUp {
    ctx: RunContext,
    stdout: CappedOutput,
    stderr: CappedOutput,
    memory_hit: Arc<AtomicBool>,
    interrupt: SourceInterrupt,
    limits: GuestLimits,
}

/// What [`Sandbox::call`] got back.
struct Called {
    /// `run`'s answer, or why there is none.
    result: wasmtime::Result<std::result::Result<Returned, crate::guest::failure::RunError>>,
    /// `describe`'s answer, when the component has one and `run` succeeded.
    described: Option<wasmtime::Result<Option<String>>>,
    /// Whether the deadline passed.
    timed_out: bool,
    /// Time spent in the guest, in milliseconds.
    guest_ms: f64,
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
        let reuse = function_cache_from_env()?;
        let functions = match Compiler::from_env()? {
            Compiler::Optimizing => {
                config.cranelift_opt_level(wasmtime::OptLevel::Speed);
                reuse.then(|| Arc::new(FunctionCache::default()))
            }
            Compiler::Baseline => {
                config.strategy(wasmtime::Strategy::Winch);
                None
            }
        };
        if let Some(f) = &functions {
            config
                .enable_incremental_compilation(f.clone())
                .map_err(|e| {
                    Error::Host(format!("cannot set up the compiler's cache: {e:#}").into())
                })?;
        }
        let engine = Engine::new(&config).map_err(|e| {
            Error::Host(format!("cannot start the WebAssembly engine: {e:#}").into())
        })?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .and_then(|()| virtual_sleep(&mut linker))
            .and_then(|()| bindings::add_to_linker(&mut linker))
            .map_err(|e| Error::Host(format!("cannot link the host interfaces: {e:#}").into()))?;
        Ok(Sandbox {
            engine,
            linker,
            loaded: std::sync::Mutex::default(),
            functions,
        })
    }

    /// The engine components are compiled for.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Loads a component file: from the compile cache when it holds the
    /// file's digest (the file is then not read at all), else checked,
    /// compiled (saying so on stderr, with how long it took) and cached.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the file when it is not WebAssembly, a core
    /// module rather than a component, or built for another world.
    pub fn load(&self, file: &mut ComponentFile, cache: &CompileCache) -> Result<LoadedComponent> {
        if let Some((pre, describes)) = self.lock_loaded().by_digest.get(&file.hex) {
            return Ok(LoadedComponent {
                describes: *describes,
                pre: pre.clone(),
                digest: file.digest(),
                cache: CacheOutcome::Hit,
                compile: None,
                reuse: None,
            });
        }
        let (component, cache_outcome, compile, reuse) = match cache.find(&self.engine, &file.hex) {
            Some(c) => (c, CacheOutcome::Hit, None, None),
            None => {
                let (c, outcome, took, reuse) = self.compile(file, cache)?;
                (c, outcome, Some(took), reuse)
            }
        };
        let shown = file.path.display();
        let pre = Pre::new(&self.linker, &component).map_err(|e| {
            if cache_outcome == CacheOutcome::Miss
                && let Some(artifact) = cache.artifact(&self.engine, &file.hex)
            {
                // Not a component this host runs: nothing of it is kept.
                let _ = std::fs::remove_file(artifact);
            }
            let why = world_mismatch(&self.engine, &component).unwrap_or_else(|| format!("{e:#}"));
            Error::input(format!(
                "component `{shown}` does not fit the `{WORLD}` world this host provides: \
                 {why}; build it against this host's wit/ folder"
            ))
        })?;
        let describes = exports_describe(&self.engine, &component);
        self.lock_loaded().keep(&file.hex, &pre, describes);
        Ok(LoadedComponent {
            describes,
            pre,
            digest: file.digest(),
            cache: cache_outcome,
            compile,
            reuse,
        })
    }

    fn lock_loaded(&self) -> std::sync::MutexGuard<'_, Loaded> {
        self.loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Compiles a component file the cache does not hold, and stores it.
    fn compile(
        &self,
        file: &mut ComponentFile,
        cache: &CompileCache,
    ) -> Result<(Component, CacheOutcome, Duration, Option<Reuse>)> {
        let shown = file.path.display().to_string();
        file.bytes()?;
        let bytes = file.bytes.as_deref().unwrap_or_default();
        match bytes.get(0..8) {
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
        let size = bytes.len();
        crate::core::text::say(
            "note",
            &format!(
                "compiling `{shown}` ({}) for this machine{}",
                megabytes(size),
                if cache.enabled() {
                    "; the compile cache keeps it for later runs (`jobhost compile` does this \
                     ahead of time)"
                } else {
                    ", with the compile cache off"
                }
            ),
        );
        let started = std::time::Instant::now();
        let (component, outcome, reuse) = cache
            .compile(&self.engine, bytes, &file.hex, self.functions.as_deref())
            .map_err(|e| Error::input(format!("invalid component `{shown}`: {e:#}")))?;
        let took = started.elapsed();
        let reused = match reuse {
            Some(r) if r.reused > 0 => format!(
                ", reusing the code of {} of its {} functions from the function cache",
                r.reused,
                r.reused + r.compiled
            ),
            _ => String::new(),
        };
        crate::core::text::say(
            "note",
            &format!("compiled `{shown}` in {:.1} s{reused}", took.as_secs_f64()),
        );
        Ok((component, outcome, took, reuse))
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
        let pre = Pre::new(&self.linker, &component).map_err(|e| {
            Error::input(format!(
                "the cached component sha256:{hex} does not fit the `{WORLD}` world: {e:#}"
            ))
        })?;
        Ok(LoadedComponent {
            describes: exports_describe(&self.engine, &component),
            pre,
            digest: format!("sha256:{hex}"),
            cache: CacheOutcome::Hit,
            compile: None,
            reuse: None,
        })
    }

    /// Runs the component once, in a fresh store. Runs on one sandbox may
    /// go on at the same time on several threads (the daemon's workers,
    /// `backfill --parallel`); none of them stops at another's time limit.
    ///
    /// # Errors
    ///
    /// Why the run produced no report.
    pub fn run(
        &self,
        component: &LoadedComponent,
        input: RunInput,
    ) -> std::result::Result<GuestSuccess, GuestFailure> {
        let (mut store, set_up) = self.set_up(input);
        let called = self.call(&mut store, component, &set_up)?;
        let mut state = store.into_data();
        let (stats, stderr) = collect(&mut state, &set_up, called.guest_ms);
        judge(state, called, stats, stderr, &set_up)
    }

    /// The store one run's guest lives in: its WASI context (pinned clocks,
    /// seeded randomness, captured output, no files, sockets or names), its
    /// journal, and the limits of its memory, its calls and its time.
    fn set_up(&self, input: RunInput) -> (Store<HostState>, SetUp) {
        let limits = input.limits;
        let stdout = CappedOutput::new(limits.output_bytes);
        let stderr = CappedOutput::new(limits.output_bytes);
        let seed: [u8; 32] = input
            .seed
            .unwrap_or_else(|| Sha256::digest(input.window.key().as_str().as_bytes()).into());
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
        let ctx = RunContext {
            window: input.window,
            now: input.now,
            cursor: input.cursor,
            attempt: input.attempt,
            destinations: input.destinations,
            params: input.params,
        };
        let journal = Recorder::new(
            &journal_context(&ctx, input.revision, seed, input.outbox.limits(), &limits),
            limits.journal_bytes,
        );
        let memory_hit = Arc::new(AtomicBool::new(false));
        let interrupt = input.source.interrupter();
        let state = HostState {
            zone: ctx.window.zone.time_zone().clone(),
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(limits.memory_bytes, memory_hit.clone()),
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
        store.set_hostcall_fuel(limits.memory_bytes);
        store.set_epoch_deadline(1);
        let set_up = SetUp {
            ctx,
            stdout,
            stderr,
            memory_hit,
            interrupt,
            limits,
        };
        (store, set_up)
    }

    /// Instantiates the component and calls `run`, then (on the same
    /// instance, under the same deadline, the outbox closed) `describe`.
    fn call(
        &self,
        store: &mut Store<HostState>,
        component: &LoadedComponent,
        set_up: &SetUp,
    ) -> std::result::Result<Called, GuestFailure> {
        let started = std::time::Instant::now();
        let timed_out = Arc::new(AtomicBool::new(false));
        // The epoch moves when any run's time limit passes: this guest
        // stops only when it was its own.
        let own = timed_out.clone();
        store.epoch_deadline_callback(move |_| {
            Ok(if own.load(Ordering::SeqCst) {
                wasmtime::UpdateDeadline::Interrupt
            } else {
                wasmtime::UpdateDeadline::Continue(1)
            })
        });
        let fired = timed_out.clone();
        let interrupt = set_up.interrupt.clone();
        let watchdog = Watchdog::start(self.engine.clone(), set_up.limits.timeout, move || {
            fired.store(true, Ordering::SeqCst);
            interrupt.interrupt();
        })
        .ok_or_else(|| {
            host_failure("cannot start the guest's time-limit watchdog thread".to_string())
        })?;
        let (result, described) = match Session::start(&mut *store, &component.pre, &set_up.ctx) {
            Err(e) => (Err(e), None),
            Ok(session) => {
                let result = session.run(&mut *store);
                let described = match &result {
                    Ok(Ok(report)) if component.describes => {
                        store.data_mut().outbox.close();
                        Some(session.describe(&mut *store, report))
                    }
                    _ => None,
                };
                (result, described)
            }
        };
        drop(watchdog);
        Ok(Called {
            result,
            described,
            timed_out: timed_out.load(Ordering::SeqCst),
            guest_ms: (started.elapsed().as_secs_f64() * 1e6).round() / 1000.0,
        })
    }
}

/// What a run's journal starts with: everything the guest was given.
fn journal_context(
    ctx: &RunContext,
    revision: u32,
    seed: [u8; 32],
    outbox_limits: (u32, u64, u64),
    limits: &GuestLimits,
) -> journal::Context {
    let w = &ctx.window;
    let at = |t: Timestamp| {
        (
            t.as_second(),
            u32::try_from(t.subsec_nanosecond()).unwrap_or(0),
        )
    };
    journal::Context {
        key: w.key().to_string(),
        job: w.job.to_string(),
        label: w.label.clone(),
        start: at(w.start),
        end: at(w.end),
        timezone: w.zone.name().to_string(),
        window_kind: w.kind.to_string(),
        now: at(ctx.now),
        cursor: ctx.cursor.clone(),
        attempt: ctx.attempt,
        destinations: ctx.destinations.clone(),
        params: ctx.params.clone(),
        seed,
        outbox_limits,
        limits: (
            limits.memory_bytes as u64,
            u64::try_from(limits.timeout.as_millis()).unwrap_or(u64::MAX),
            limits.output_bytes as u64,
            limits.report_bytes as u64,
        ),
        revision,
    }
}

/// Prints what the guest wrote to its stdout and stderr (escaped and
/// capped, without the runtime's panic after a Python traceback) and
/// counts what it did; returns the counts and the guest's most
/// telling line of stderr, for a failure's message.
fn collect(state: &mut HostState, set_up: &SetUp, guest_ms: f64) -> (GuestStats, Option<Telling>) {
    let budget = set_up.limits.output_bytes;
    let (out, out_dropped) = set_up.stdout.contents();
    let (err, err_dropped) = set_up.stderr.contents();
    let err_text = String::from_utf8_lossy(&err);
    state.log.emit_stream("stdout", &out, out_dropped, budget);
    state.log.emit_stream(
        "stderr",
        without_runtime_panic(&err_text).as_bytes(),
        err_dropped,
        budget,
    );
    let stats = GuestStats {
        rows: state.source.rows_read(),
        log_lines: state.log.emitted(),
        log_dropped: state.log.dropped(),
        guest_ms,
        journal_bytes: 0,
    };
    (stats, telling(&err_text))
}

/// The run's outcome from what came back. A full journal, a replay's
/// divergence and a passed deadline each decide the outcome whatever the
/// guest made of them; then a report within its limit is a success.
fn judge(
    state: HostState,
    called: Called,
    stats: GuestStats,
    stderr: Option<Telling>,
    set_up: &SetUp,
) -> std::result::Result<GuestSuccess, GuestFailure> {
    let limits = &set_up.limits;
    if state.journal.overflowed() {
        return Err(journal_failure(limits, state.journal.recorded_bytes()));
    }
    if let Some(what) = state.source.divergence() {
        return Err(GuestFailure {
            kind: ErrorKind::ReplayDivergence,
            message: what,
            retryable: false,
        });
    }
    // An interrupted source query may have surfaced as an ordinary error
    // first: past the deadline, every failure is the timeout.
    if called.timed_out && !matches!(called.result, Ok(Ok(_))) {
        return Err(timeout_failure(limits));
    }
    // The same limit, enforced by the source's server on a query still
    // running (a PostgreSQL query may start before the guest does).
    if state.source.ran_out_of_time() && !matches!(called.result, Ok(Ok(_))) {
        return Err(GuestFailure {
            kind: ErrorKind::GuestTimeout,
            message: format!(
                "the source query ran past the time limit of {} s and was cancelled; make the \
                 query faster or raise `limits.timeout_seconds`",
                limits.timeout.as_secs_f64()
            ),
            retryable: true,
        });
    }
    let report = match called.result {
        Ok(Ok(report)) => report,
        Ok(Err(e)) => return Err(e.into()),
        Err(e) => {
            let hit = set_up.memory_hit.load(Ordering::Relaxed);
            return Err(classify(&e, limits, hit, stderr));
        }
    };
    let bytes = report.summary.len() + report.cursor.as_ref().map_or(0, String::len);
    if bytes > limits.report_bytes {
        return Err(report_too_large(limits, bytes));
    }
    let read = state.journal.fingerprint();
    let journal = state.journal.finish().map_err(host_failure)?;
    let (prompt, describe_error) = described(called.described, limits, called.timed_out);
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
        read,
    })
}

/// What `describe` gave, or why it gave nothing; a failure of `describe`
/// never fails the run.
fn described(
    answer: Option<wasmtime::Result<Option<String>>>,
    limits: &GuestLimits,
    timed_out: bool,
) -> (Option<String>, Option<String>) {
    match answer {
        None => (None, None),
        Some(Ok(Some(text))) if text.len() > limits.report_bytes => (
            None,
            Some(format!(
                "`describe` returned {} bytes, over the limit of {} (`limits.max_report_bytes`)",
                text.len(),
                limits.report_bytes
            )),
        ),
        Some(Ok(prompt)) => (prompt, None),
        Some(Err(e)) => {
            let why = cap_error(&one_line(&format!("{e:#}"))).into_owned();
            let what = if timed_out {
                "did not finish within the time limit"
            } else {
                "failed"
            };
            (None, Some(format!("`describe` {what}: {why}")))
        }
    }
}

fn derive(seed: [u8; 32], n: u8) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(seed);
    h.update([n]);
    h.finalize().into()
}

/// Bumps the engine's epoch when the time limit passes, interrupting the
/// guest at its next check; dropping it before then cancels it.
struct Watchdog {
    cancel: Option<mpsc::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Watchdog {
    /// Starts the countdown; at the deadline `on_timeout` runs (marking
    /// the run as timed out, stopping host work done for it) and then the
    /// epoch moves (stopping guest code).
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
                    // The run's flag first: the guest's epoch callback
                    // reads it when the epoch moves.
                    on_timeout();
                    engine.increment_epoch();
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

    #[test]
    fn engines_built_apart_name_the_same_compiled_artifacts() {
        // The daemon's engine lives as long as it does; `jobhost compile`
        // and a one-shot run build their own. Each must find what another
        // cached, or the daemon would compile again what the cache holds.
        let cache = CompileCache::new(Some(std::path::PathBuf::from("/cache")));
        let hex = "ab".repeat(32);
        let (a, b) = (Sandbox::new().unwrap(), Sandbox::new().unwrap());
        let named = cache.artifact(a.engine(), &hex);
        assert!(named.is_some());
        assert_eq!(named, cache.artifact(b.engine(), &hex));
    }

    #[test]
    fn a_component_of_an_earlier_release_on_the_same_track_is_served() {
        assert!(served_by("0.1.1", "0.1.1"));
        assert!(served_by("0.1.0", "0.1.1"));
        assert!(
            !served_by("0.1.2", "0.1.1"),
            "a later release may import more"
        );
        assert!(!served_by("0.2.0", "0.1.1"));
        assert!(
            !served_by("0.0.9", "0.0.10"),
            "0.0.x releases are each their own"
        );
        assert!(served_by("1.0.0", "1.2.0"));
        assert!(!served_by("1.3.0", "1.2.0"));
        assert!(!served_by("0.1.0-pre", "0.1.1"));
    }
}
