//! The SQLite claim store: one file, WAL mode, `synchronous=FULL`, every
//! write in a `BEGIN IMMEDIATE` transaction. The schema is versioned by
//! `PRAGMA user_version` and migrated in one exclusive transaction. Two rules
//! for migrations: never remove or edit one that has shipped, and keep the
//! data an older version wrote as it was. An older host refuses a store a
//! newer one has migrated (it cannot know what the new states mean).
//!
//! This module connects, migrates, binds and says what went wrong; the
//! transactions themselves are [`super::scripts`], written once for both
//! backends. Instants are whole unix seconds on the host's lease clock.

mod schema;

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior};

use self::schema::MIGRATIONS;
use super::Held;
use super::scripts::SqlStore;
use super::sql::{self, Backend, Fail, Kind, Row, Tx, Val, damaged};
use crate::core::error::{Error, Result};

/// The schema whose tables and columns the latest reads and writes: v5.
/// Later ones add only ways to read it faster.
const OPERATOR_SCHEMA: i64 = 5;

/// The schema that added the tables of jobs that build on jobs.
const NEEDS_SCHEMA: i64 = 9;

/// The schema that keeps the chain (`chain`, `chain_adopted`).
const CHAIN_SCHEMA: i64 = 10;

/// The schema that keeps incidents and their notifications.
const NOTICE_SCHEMA: i64 = 11;

/// The oldest schema read-only commands still read, treating what it lacks
/// as empty (a monitor keeps working between a deploy and the first run
/// that migrates): the one before [`OPERATOR_SCHEMA`].
const READABLE: i64 = OPERATOR_SCHEMA - 1;

/// The first schema with `run_counts` and the `runs_by_state` index.
const COUNTED_SCHEMA: i64 = 6;

/// The first schema with a column for the skip's reason.
const SKIP_REASON_SCHEMA: i64 = 8;

/// How long a writer waits for another process's write lock.
const BUSY_TIMEOUT: Duration = super::WRITE_WAIT;

/// The parameter `{now}` is bound to, past every other.
const NOW: &str = "?99";
const NOW_INDEX: usize = 99;

/// A claim store in one SQLite file.
pub type SqliteStore = SqlStore<Sqlite>;

/// One SQLite file, open.
pub struct Sqlite {
    conn: Kept,
    path: PathBuf,
    /// The schema version: the latest, or down to [`READABLE`] when
    /// opened read only.
    version: i64,
}

impl SqlStore<Sqlite> {
    /// Opens the store at `path`, creating it (and missing parent folders)
    /// with owner-only permissions, and migrates its schema.
    ///
    /// # Errors
    ///
    /// `Error::Input` when the path cannot be created or is not a jobhost
    /// SQLite store; `Error::Store` for other database failures.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        if let Some(store) = Kept::idle(path) {
            return Ok(SqlStore::new(store, false));
        }
        let shown = path.display();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                Error::input(format!(
                    "cannot create store folder `{}`: {e}; choose another --store path",
                    parent.display()
                ))
            })?;
        }
        if path.is_dir() {
            return Err(Error::input(format!(
                "store `{shown}` is a directory; give --store a file path such as `{shown}/jobhost.db`"
            )));
        }
        // Created here rather than by SQLite so the file is owner-only from
        // its first byte: it holds report bodies. SQLite gives its -wal and
        // -shm files the same permissions. Of several processes racing to
        // create it, one does, and says so.
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(Error::input(format!(
                    "cannot create store `{shown}`: {e}; choose another --store path"
                )));
            }
        };
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| open_error(path, e))?;
        // SQLite opens a file it may not write read-only without a word;
        // every claim is a write, so say it now, naming the fix.
        if conn
            .is_readonly(rusqlite::MAIN_DB)
            .map_err(|e| open_error(path, e))?
        {
            return Err(Error::input(format!(
                "store `{shown}` is read-only for this user (its permissions, an immutable \
                 flag or a read-only mount); jobhost writes every claim there: make it \
                 writable, or choose another --store"
            )));
        }
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| open_error(path, e))?;
        stable_plans(&conn).map_err(|e| open_error(path, e))?;
        // The file as it is now: a connection is kept for this file only.
        let file = identity(path);
        let mut store = Sqlite {
            conn: Kept::new(conn),
            path: path.to_path_buf(),
            version: MIGRATIONS.len() as i64,
        };
        // Before anything writes: never convert somebody else's database.
        let schema = refuse_foreign(&store.conn, path)?;
        check_version(path, schema.version)?;
        let current = schema.version == MIGRATIONS.len() as i64;
        if schema.version == 0 && !schema.wal {
            // Only an empty file takes this, and only before anything is
            // written to it (switching to WAL writes its first page):
            // `prune` can then give freed pages back a few at a time
            // (`incremental_vacuum`) instead of a VACUUM that locks a live
            // store while it rewrites the file. Older stores keep their
            // freed pages for reuse.
            store
                .conn
                .execute_batch("PRAGMA auto_vacuum = INCREMENTAL")
                .map_err(|e| open_error(path, e))?;
        }
        if !schema.wal {
            store.enable_wal()?;
        }
        // FULL, not NORMAL: NORMAL may lose the last commit on power loss,
        // and a lost DONE is a second delivery.
        store
            .conn
            .execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
            .map_err(|e| open_error(path, e))?;
        let created = !current && store.migrate()?;
        store.conn.keep = file.map(|file| Key {
            path: path.to_path_buf(),
            file,
        });
        Ok(SqlStore::new(store, created))
    }
}

impl Sqlite {
    /// Switches to WAL once. On a brand-new file several processes racing to
    /// switch get SQLITE_BUSY at once (the busy handler does not cover it), so
    /// retry for as long as a normal lock wait would take.
    fn enable_wal(&mut self) -> Result<()> {
        let deadline = Instant::now() + BUSY_TIMEOUT;
        loop {
            let attempt = self
                .conn
                .query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
                .and_then(|mode| {
                    if mode.eq_ignore_ascii_case("wal") {
                        Ok(mode)
                    } else {
                        self.conn
                            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
                    }
                });
            match attempt {
                Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
                Ok(mode) => {
                    return Err(Error::Store(
                        format!(
                            "cannot switch store `{}` to WAL mode (it stays `{mode}`); \
                         put the store on a local filesystem",
                            self.path.display()
                        )
                        .into(),
                    ));
                }
                Err(e) if is_busy(&e) && Instant::now() < deadline => {
                    thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(open_error(&self.path, e)),
            }
        }
    }

    /// Migrates the schema; returns whether it found none (this process
    /// created the store, whether or not it created the file).
    fn migrate(&mut self) -> Result<bool> {
        let latest = MIGRATIONS.len() as i64;
        let version = self.user_version()?;
        if version == latest {
            return Ok(false);
        }

        // A migration may rebuild a table that others reference; SQLite
        // ignores this pragma inside a transaction, so it is set around it,
        // and the references are checked before the commit instead.
        let path = self.path.clone();
        self.conn
            .execute_batch("PRAGMA foreign_keys = OFF")
            .map_err(|e| open_error(&path, e))?;
        let migrated = self.migrate_in_transaction();
        self.conn
            .execute_batch("PRAGMA foreign_keys = ON")
            .map_err(|e| open_error(&path, e))?;
        migrated
    }

    fn migrate_in_transaction(&mut self) -> Result<bool> {
        let latest = MIGRATIONS.len() as i64;
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| open_error(&path, e))?;
        // Re-read under the write lock: another process may have migrated.
        let version: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| open_error(&path, e))?;
        check_version(&path, version)?;
        if version == 0 {
            refuse_foreign(&tx, &path)?;
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            tx.execute_batch(sql).map_err(|e| {
                Error::Store(
                    format!(
                        "cannot migrate store `{}` to version {}: {}",
                        path.display(),
                        i + 1,
                        cause(&path, &e).unwrap_or_else(|| e.to_string())
                    )
                    .into(),
                )
            })?;
        }
        let dangling: Option<String> = tx
            .query_row(
                "SELECT \"table\" FROM pragma_foreign_key_check LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| open_error(&path, e))?;
        if let Some(table) = dangling {
            return Err(Error::Store(
                format!(
                    "cannot migrate store `{}`: table `{table}` would refer to rows that do not \
                 exist; the store is left as it was",
                    path.display()
                )
                .into(),
            ));
        }
        tx.pragma_update(None, "user_version", latest)
            .map_err(|e| open_error(&path, e))?;
        tx.commit().map_err(|e| open_error(&path, e))?;
        Ok(version == 0)
    }

    fn user_version(&self) -> Result<i64> {
        let version: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| open_error(&self.path, e))?;
        check_version(&self.path, version)?;
        Ok(version)
    }

    /// A database without a jobhost schema version must be empty: jobhost
    /// never adds its tables to somebody else's database (for example the
    /// job's data source given as `--store` by mistake). Version and tables
    /// are read in one transaction, so a concurrent migration (tables and
    /// version committed together) is never seen half done.
    fn refuse_foreign_database(&self) -> Result<()> {
        refuse_foreign(&self.conn, &self.path).map(drop)
    }
}

impl SqlStore<Sqlite> {
    /// Opens an existing store for reading only: no folder or file is
    /// created, nothing is migrated or switched to WAL.
    ///
    /// # Errors
    ///
    /// `Error::Input` when there is no store at `path` or it is not a
    /// jobhost store.
    pub fn open_read_only(path: &Path) -> Result<SqliteStore> {
        if !path.is_file() {
            return Err(Error::input(format!(
                "no store at `{}`; run a job first or pass --store",
                path.display()
            )));
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| open_error(path, e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| open_error(path, e))?;
        stable_plans(&conn).map_err(|e| open_error(path, e))?;
        let mut store = Sqlite {
            conn: Kept::new(conn),
            path: path.to_path_buf(),
            version: MIGRATIONS.len() as i64,
        };
        store.refuse_foreign_database()?;
        let version = store.user_version()?;
        if version < READABLE {
            return Err(Error::input(format!(
                "store `{}` has schema version {version}, older than this jobhost reads without \
                 upgrading it ({READABLE}); run `jobhost run` with it once to upgrade it",
                path.display()
            )));
        }
        store.version = version;
        Ok(SqlStore::new(store, false))
    }

    /// The store's file.
    pub fn path(&self) -> &Path {
        &self.backend.path
    }
}

/// A store's read-write connection, handed back to this process's idle
/// connections for its file when the store is dropped, and used again by
/// the next open of the same file. A daemon opens the store for every look
/// and every step of a run; closing the last connection to a file in WAL
/// mode checkpoints the WAL into it and deletes it, so each close cost a
/// full checkpoint (two fsyncs) and each open a new WAL file (a fsync of
/// its folder), besides the pragmas and the schema checks. A kept
/// connection holds no transaction and no lock between uses; it is used
/// again only while its file is the same one (not replaced or removed)
/// and at the latest schema, and the idle ones are closed when the
/// command ends ([`close_idle`]).
struct Kept {
    conn: Option<Connection>,
    /// Where it is handed back to (`None`: closed when dropped, as a
    /// read-only connection is).
    keep: Option<Key>,
}

/// What a kept connection is for.
struct Key {
    path: PathBuf,
    /// The file's device and inode when the connection was opened.
    file: (u64, u64),
}

/// Idle connections, each with its key and when it went idle.
type IdleConnections = Vec<(Connection, Key, Instant)>;

/// At most this many idle connections are kept in all (each holds three
/// files open: the store, its WAL and its shared memory).
const KEEP_IDLE: usize = 16;

/// An idle connection older than this is closed rather than used.
const IDLE_FOR: Duration = Duration::from_secs(60);

fn idle() -> std::sync::MutexGuard<'static, IdleConnections> {
    static IDLE: std::sync::LazyLock<std::sync::Mutex<IdleConnections>> =
        std::sync::LazyLock::new(std::sync::Mutex::default);
    IDLE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Closes every idle connection: the last one to a file checkpoints its
/// WAL into it, so the store is one file again once the command is done.
pub fn close_idle() {
    let closing = std::mem::take(&mut *idle());
    drop(closing);
}

/// The device and inode of the file at `path`.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl Kept {
    fn new(conn: Connection) -> Kept {
        Kept {
            conn: Some(conn),
            keep: None,
        }
    }

    /// A kept connection to the file at `path` that can be used again: the
    /// file is still the one it was opened on, at the latest schema.
    fn idle(path: &Path) -> Option<Sqlite> {
        let file = identity(path)?;
        loop {
            let (conn, key, since) = {
                let mut idle = idle();
                let at = idle.iter().rposition(|(_, k, _)| k.path == path)?;
                idle.remove(at)
            };
            let latest = MIGRATIONS.len() as i64;
            let version = conn
                .query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
                .ok();
            if key.file == file && since.elapsed() < IDLE_FOR && version == Some(latest) {
                return Some(Sqlite {
                    conn: Kept {
                        conn: Some(conn),
                        keep: Some(key),
                    },
                    path: path.to_path_buf(),
                    version: latest,
                });
            }
        }
    }
}

impl std::ops::Deref for Kept {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
            .as_ref()
            .expect("a store's connection is there until it is dropped")
    }
}

impl std::ops::DerefMut for Kept {
    fn deref_mut(&mut self) -> &mut Connection {
        self.conn
            .as_mut()
            .expect("a store's connection is there until it is dropped")
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        let (Some(conn), Some(key)) = (self.conn.take(), self.keep.take()) else {
            return;
        };
        // One left inside a transaction is closed, which rolls it back.
        if !conn.is_autocommit() {
            return;
        }
        // Closed after the list is let go of: closing the last connection
        // to a file checkpoints it.
        let closing: IdleConnections = {
            let mut idle = idle();
            let (kept, mut closing): (IdleConnections, IdleConnections) =
                std::mem::take(&mut *idle)
                    .into_iter()
                    .partition(|(_, _, since)| since.elapsed() < IDLE_FOR);
            *idle = kept;
            if idle.len() >= KEEP_IDLE {
                // The one idle longest makes room.
                closing.push(idle.remove(0));
            }
            idle.push((conn, key, Instant::now()));
            closing
        };
        drop(closing);
    }
}

impl Backend for Sqlite {
    type Tx<'a> = SqliteTx<'a>;

    fn begin(&mut self, kind: Kind, what: &str, now: Timestamp) -> Result<SqliteTx<'_>, Fail> {
        let Sqlite {
            conn,
            path,
            version,
        } = self;
        let tx = match kind {
            Kind::Read => conn
                .transaction()
                .map_err(|e| Fail::Other(failed(path, what, e)))?,
            Kind::Claim | Kind::Write => {
                begin_immediate(conn, BUSY_TIMEOUT).map_err(|e| locking(path, e))?
            }
        };
        Ok(SqliteTx {
            tx,
            path,
            now,
            counted: *version >= COUNTED_SCHEMA,
        })
    }

    fn held(&self) -> (Held, Duration) {
        (Held::Store, BUSY_TIMEOUT)
    }

    fn current(&self) -> bool {
        self.version >= OPERATOR_SCHEMA
    }

    fn needs_tables(&self) -> bool {
        self.version >= NEEDS_SCHEMA
    }

    fn chain_tables(&self) -> bool {
        self.version >= CHAIN_SCHEMA
    }

    fn notice_tables(&self) -> bool {
        self.version >= NOTICE_SCHEMA
    }

    fn counted(&self) -> bool {
        self.version >= COUNTED_SCHEMA
    }

    fn state_index(&self) -> bool {
        self.version >= COUNTED_SCHEMA
    }

    fn skip_column(&self) -> bool {
        self.version >= SKIP_REASON_SCHEMA
    }

    /// Freed pages go back to the filesystem a few at a time, each step a
    /// short write, in a store created with incremental auto-vacuum (older
    /// stores keep them for reuse). What was pruned is committed: a busy
    /// store here only leaves the pages for later reuse.
    fn after_prune(&mut self) {
        let pragma = |sql: &str| {
            self.conn
                .query_row(sql, [], |r| r.get::<_, i64>(0))
                .unwrap_or(0)
        };
        if pragma("PRAGMA auto_vacuum") != 2 {
            return;
        }
        for _ in 0..=pragma("PRAGMA freelist_count") / 256 {
            if self
                .conn
                .execute_batch("PRAGMA incremental_vacuum(256)")
                .is_err()
            {
                break;
            }
        }
    }
}

/// A transaction on the store's connection.
pub struct SqliteTx<'c> {
    tx: rusqlite::Transaction<'c>,
    path: &'c Path,
    /// The host's lease clock, for `{now}` and `{after $N}`.
    now: Timestamp,
    counted: bool,
}

impl SqliteTx<'_> {
    fn statement(
        &self,
        what: &str,
        sql: &str,
        args: &[Val<'_>],
    ) -> Result<rusqlite::CachedStatement<'_>, Fail> {
        let sql = render(sql, self.counted);
        let mut stmt = self
            .tx
            .prepare_cached(&sql)
            .map_err(|e| self.fail(what, e))?;
        bind(&mut stmt, args, self.now).map_err(|e| self.fail(what, e))?;
        Ok(stmt)
    }

    fn fail(&self, what: &str, e: rusqlite::Error) -> Fail {
        if is_busy(&e) {
            return locking(self.path, e);
        }
        Fail::Other(failed(self.path, what, e))
    }
}

impl Tx for SqliteTx<'_> {
    fn exec(&mut self, what: &str, sql: &str, args: &[Val<'_>]) -> Result<u64, Fail> {
        let mut stmt = self.statement(what, sql, args)?;
        let changed = stmt.raw_execute().map_err(|e| self.fail(what, e))?;
        Ok(changed as u64)
    }

    fn query<T>(
        &mut self,
        what: &str,
        sql: &str,
        args: &[Val<'_>],
        map: &mut dyn FnMut(&dyn Row) -> Result<T>,
    ) -> Result<Vec<T>, Fail> {
        let mut stmt = self.statement(what, sql, args)?;
        let mut rows = stmt.raw_query();
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| self.fail(what, e))? {
            out.push(map(&SqliteRow(row))?);
        }
        Ok(out)
    }

    fn commit(self, what: &str) -> Result<()> {
        self.tx.commit().map_err(|e| failed(self.path, what, e))
    }
}

/// Renders a statement's marks (see [`super::sql`]) as SQLite has them.
fn render(sql: &str, counted: bool) -> String {
    let sql = sql::render(sql, |name, arg| match name {
        "now" => NOW.to_string(),
        "after" | "time" | "t" => arg.to_string(),
        "len" => format!("length({arg})"),
        "C" | "lock" => String::new(),
        "keys" => format!("(SELECT value FROM json_each({arg}))"),
        "cross" => "CROSS JOIN".to_string(),
        "by_state" if counted => "runs INDEXED BY runs_by_state".to_string(),
        "by_state" => "runs".to_string(),
        table => {
            debug_assert!(sql::TABLES.contains(&table), "no mark or table `{table}`");
            table.to_string()
        }
    })
    .replace("greatest(", "max(")
    .replace("least(", "min(");
    numbered(&sql)
}

/// `$N` as SQLite numbers its parameters, `?N`; a `$` not followed by a
/// digit (in a string literal) is kept.
fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        let placeholder = c == '$' && chars.peek().is_some_and(char::is_ascii_digit);
        out.push(if placeholder { '?' } else { c });
    }
    out
}

/// Binds a statement's parameters anew (a cached statement keeps the last
/// ones), and `{now}` when it has it.
fn bind(
    stmt: &mut rusqlite::Statement<'_>,
    args: &[Val<'_>],
    now: Timestamp,
) -> rusqlite::Result<()> {
    stmt.clear_bindings();
    let n = stmt.parameter_count();
    for (i, v) in args.iter().enumerate().take(n) {
        let at = i + 1;
        match *v {
            Val::Text(s) => stmt.raw_bind_parameter(at, s)?,
            Val::OptText(s) => stmt.raw_bind_parameter(at, s)?,
            Val::Int(x) => stmt.raw_bind_parameter(at, x)?,
            Val::Flag(b) => stmt.raw_bind_parameter(at, b)?,
            Val::Bytes(b) => stmt.raw_bind_parameter(at, b)?,
            Val::Time(t) => stmt.raw_bind_parameter(at, secs(t))?,
            Val::Lower(t) => stmt.raw_bind_parameter(at, t.map_or(i64::MIN, secs))?,
            Val::Upper(t) => stmt.raw_bind_parameter(at, t.map_or(i64::MAX, secs))?,
            Val::After(d) => {
                stmt.raw_bind_parameter(at, d.map(|d| secs(crate::core::clock::after(now, d))))?
            }
        }
    }
    if n >= NOW_INDEX {
        stmt.raw_bind_parameter(NOW_INDEX, secs(now))?;
    }
    Ok(())
}

/// A row SQLite returned.
struct SqliteRow<'r>(&'r rusqlite::Row<'r>);

impl SqliteRow<'_> {
    fn get<T: rusqlite::types::FromSql>(&self, i: usize) -> Result<T> {
        self.0
            .get(i)
            .map_err(|e| damaged(i, &format!("a value it cannot read ({e})")))
    }
}

impl Row for SqliteRow<'_> {
    fn text(&self, i: usize) -> Result<String> {
        self.get(i)
    }

    fn opt_text(&self, i: usize) -> Result<Option<String>> {
        self.get(i)
    }

    fn int(&self, i: usize) -> Result<i64> {
        self.get(i)
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        self.get(i)
    }

    fn flag(&self, i: usize) -> Result<bool> {
        self.get(i)
    }

    fn opt_bytes(&self, i: usize) -> Result<Option<Vec<u8>>> {
        self.get(i)
    }

    fn opt_time(&self, i: usize) -> Result<Option<Timestamp>> {
        self.get::<Option<i64>>(i)?
            .map(|s| {
                Timestamp::from_second(s).map_err(|_| damaged(i, &format!("the instant {s} s")))
            })
            .transpose()
    }
}

/// A lock the store could not take: another process held the write lock
/// for longer than [`BUSY_TIMEOUT`].
fn locking(path: &Path, e: rusqlite::Error) -> Fail {
    if !is_busy(&e) {
        return Fail::Other(failed(path, "lock the store", e));
    }
    Fail::Locked(Error::Store(
        format!(
            "cannot lock store `{}`: another process held its write lock for more than {} s (a \
         process paused or stuck in the middle of a write); nothing was written, and a later \
         invocation tries again",
            path.display(),
            BUSY_TIMEOUT.as_secs()
        )
        .into(),
    ))
}

fn secs(ts: Timestamp) -> i64 {
    ts.as_second()
}

/// lock.
fn begin_immediate(
    conn: &mut Connection,
    wait: Duration,
) -> rusqlite::Result<rusqlite::Transaction<'_>> {
    conn.busy_timeout(wait)?;
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
}

/// A failed statement, as a person reads it: what was attempted, in which
/// store, and why. A full disk and a store that became read-only are said
/// in those words, with the fix.
fn failed(path: &Path, what: &str, e: rusqlite::Error) -> Error {
    let doing = format!("cannot {what} in store `{}`", path.display());
    match cause(path, &e) {
        Some(why) => Error::Store(format!("{doing}: {why}").into()),
        None => Error::Store(doing.into()).because(e),
    }
}

/// What a full disk or a read-only store mean for the store at `path`, when
/// `e` is one of them.
fn cause(path: &Path, e: &rusqlite::Error) -> Option<String> {
    let rusqlite::Error::SqliteFailure(f, _) = e else {
        return None;
    };
    let folder = store_folder(path);
    let full = f.code == ErrorCode::DiskFull
        || (f.code == ErrorCode::SystemIoFailure && super::durable::no_space_left(&folder));
    if full {
        return Some(format!(
            "no space left on device (the filesystem of `{}` is full); nothing was written: \
             free space there, or move the store, and run again",
            folder.display()
        ));
    }
    (f.code == ErrorCode::ReadOnly).then(|| {
        format!(
            "the store is read-only ({e}); jobhost writes every claim there: make the file and \
             its folder `{}` writable for this user, or choose another --store",
            folder.display()
        )
    })
}

/// The folder a store file lives in (where SQLite keeps its `-wal` and
/// `-shm` files too).
fn store_folder(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Makes SQLite plan each statement once, whatever values are bound to it
/// (its query planner stability guarantee). Without it, SQLite marks a
/// statement whose plan weighed a bound value (any `column = ?` it
/// considered as a filter, which is most of the store's) to be prepared
/// again whenever its bindings are cleared, which they are at every use
/// of a cached statement: most statements were prepared twice per use.
/// The store's statements name their indexes' conditions as literals, so
/// no plan needs the bound values.
fn stable_plans(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map(drop)
}

/// Refuses a non-empty database without a jobhost schema version, and
/// returns the schema version.
fn refuse_foreign(conn: &Connection, path: &Path) -> Result<Schema> {
    // Plain pragmas and a lookup by name (every `jobhost run` opens its
    // store this way, and these cost SQLite a fifth of one statement over
    // the pragmas' tables to prepare), in one read transaction, so that a
    // migration another process commits meanwhile (tables and version
    // together) is seen whole or not at all (a migration calls this inside
    // its own).
    let read = || -> rusqlite::Result<(i64, String, bool)> {
        let tx = if conn.is_autocommit() {
            Some(conn.unchecked_transaction()?)
        } else {
            None
        };
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        let journal: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
        let foreign = if version == 0 {
            conn.query_row("SELECT EXISTS (SELECT 1 FROM sqlite_schema)", [], |r| {
                r.get(0)
            })?
        } else {
            !conn.query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'runs')",
                [],
                |r| r.get::<_, bool>(0),
            )?
        };
        if let Some(tx) = tx {
            tx.commit()?;
        }
        Ok((version, journal, foreign))
    };
    let (version, journal, foreign) = read().map_err(|e| open_error(path, e))?;
    if foreign {
        return Err(Error::input(format!(
            "`{}` is a SQLite database but not a jobhost store; point --store at a \
             jobhost store or a new path",
            path.display()
        )));
    }
    Ok(Schema {
        version,
        wal: journal.eq_ignore_ascii_case("wal"),
    })
}

/// What opening a store needs to know of its schema.
struct Schema {
    version: i64,
    wal: bool,
}

/// Refuses a store written by a newer jobhost.
fn check_version(path: &Path, version: i64) -> Result<()> {
    let latest = MIGRATIONS.len() as i64;
    if version > latest {
        return Err(Error::input(format!(
            "store `{}` has schema version {version}, newer than this jobhost \
             understands ({latest}); upgrade jobhost",
            path.display()
        )));
    }
    Ok(())
}

/// True for SQLITE_BUSY and SQLITE_LOCKED.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

fn open_error(path: &Path, e: rusqlite::Error) -> Error {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.extended_code == rusqlite::ffi::SQLITE_READONLY_ROLLBACK =>
        {
            Error::input(format!(
                "store `{}` was left half-written by a process that died in the middle of a \
                 write (its rollback journal is still there); the next `jobhost run` or `jobhost \
                 daemon` with it repairs it, after which it reads again",
                path.display()
            ))
        }
        rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::NotADatabase => {
            Error::input(format!(
                "store `{}` is not a SQLite database; point --store at a jobhost store or a new path",
                path.display()
            ))
        }
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(
                f.code,
                ErrorCode::CannotOpen | ErrorCode::PermissionDenied | ErrorCode::ReadOnly
            ) =>
        {
            Error::input(format!("cannot open store `{}`", path.display())).because(e)
        }
        _ => Error::Store(
            format!(
                "cannot open store `{}`: {}",
                path.display(),
                cause(path, &e).unwrap_or_else(|| e.to_string())
            )
            .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::window::JobName;
    use crate::store::{ClaimStore, Fence, Ledger, RangeQuery, RunState, Skip};

    /// The virtual machine steps of `sql`'s cached statement since the
    /// last call, as SQLite counts them: a measure of the rows a read
    /// visits that does not depend on the machine's speed.
    fn steps(s: &SqliteStore, sql: &str) -> i32 {
        let stmt = s.backend.conn.prepare_cached(sql).unwrap();
        stmt.reset_status(rusqlite::StatementStatus::VmStep)
    }

    #[test]
    fn reads_by_state_visit_what_they_return_not_the_history_and_kept_counts_add_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let mut s = SqliteStore::open(&path).unwrap();
        // A long history of skipped hours, and one failed window in it.
        let insert = |n: i64| {
            format!(
                "WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM i WHERE n < {n} - 1)
                 INSERT INTO runs (key, job, window_start, window_end, timezone, state, fence,
                     owner, lease_expires_at, attempt, component, error, created_at, updated_at)
                 SELECT 'big:' || n, 'big', n * 3600, n * 3600 + 3600, 'UTC',
                     CASE n WHEN 7 THEN 'FAILED' ELSE 'SKIPPED' END, 0, 'o', 0, 0, '', 'r', 0, 0
                 FROM i"
            )
        };
        let measure = |s: &mut SqliteStore| {
            let mut out = Vec::new();
            for states in [
                &[RunState::Done][..],
                &[RunState::Abandoned, RunState::Failed, RunState::Claimed][..],
            ] {
                let q = RangeQuery {
                    job: "big",
                    from: None,
                    until: None,
                    states,
                    oldest_first: false,
                    limit: 200,
                };
                let sql = render(&s.range_sql(&q), true);
                steps(s, &sql);
                let rows = s.runs_in_range(&q).unwrap();
                out.push((rows.len(), steps(s, &sql)));
            }
            let counts = s.state_counts("big", None, None).unwrap();
            let rows: i64 = s
                .backend
                .conn
                .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
                .unwrap();
            assert_eq!(counts.iter().map(|(_, n)| n).sum::<u64>(), rows as u64);
            out
        };
        s.backend.conn.execute_batch(&insert(1_000)).unwrap();
        let small = measure(&mut s);
        s.backend.conn.execute_batch("DELETE FROM runs").unwrap();
        s.backend.conn.execute_batch(&insert(50_000)).unwrap();
        let large = measure(&mut s);
        assert_eq!(small.iter().map(|m| m.0).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(large.iter().map(|m| m.0).collect::<Vec<_>>(), [0, 1]);
        // The same rows come back from 50 times the history for the same
        // work, give or take the index's depth.
        for (a, b) in small.iter().zip(&large) {
            assert!(
                b.1 < a.1 * 2 + 100,
                "steps grew with the history: {} for 1k rows, {} for 50k",
                a.1,
                b.1
            );
        }
    }

    #[test]
    fn migrate_twice_is_a_no_op() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        drop(SqliteStore::open(&path).unwrap());
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.backend.user_version().unwrap(), MIGRATIONS.len() as i64);
        s.backend.migrate().unwrap();
    }

    #[test]
    fn a_version_2_store_keeps_its_runs_and_messages_when_migrated_to_take_skips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        {
            // A store as the previous jobhost left it: one DONE run with a
            // delivered message, one FAILED run waiting to retry.
            let conn = Connection::open(&path).unwrap();
            // As the sqlite3 shell has it.
            conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.execute_batch(MIGRATIONS[1]).unwrap();
            conn.execute_batch(
                "INSERT INTO runs (key, job, window_start, window_end, timezone, state, fence,
                    owner, lease_expires_at, attempt, component, report, journal, created_at,
                    updated_at, retry_at)
                 VALUES ('j:2026-11-08', 'j', 1794096000, 1794182400, 'UTC', 'DONE', 2, 'a',
                    0, 2, 'sha256:ab', 'the report', x'0102', 5, 6, NULL),
                    ('j:2026-11-09', 'j', 1794182400, 1794268800, 'UTC', 'FAILED', 1, 'a',
                    0, 1, 'sha256:ab', NULL, NULL, 7, 8, 1794300000);
                 INSERT INTO outbox (key, seq, destination, idempotency_key, content_type, body,
                    state, attempts, updated_at)
                 VALUES ('j:2026-11-08', 1, 'digest', 'j:2026-11-08#1', 'text/plain', x'41',
                    'DELIVERED', 1, 6),
                    -- Left behind when a person deleted its run in the sqlite3 shell.
                    ('j:2026-11-01', 1, 'digest', 'j:2026-11-01#1', 'text/plain', x'42',
                    'PENDING', 0, 6);
                 PRAGMA user_version = 2;",
            )
            .unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.backend.user_version().unwrap(), MIGRATIONS.len() as i64);
        let h = s.history(None).unwrap();
        assert_eq!(h.len(), 2);
        let done = &h[1];
        assert_eq!(
            (
                done.state,
                done.fence,
                done.attempt,
                done.messages,
                done.delivered
            ),
            (RunState::Done, Fence(2), 2, 1, 1)
        );
        assert_eq!(done.journal_bytes, Some(2));
        assert_eq!(done.report.as_ref().unwrap().summary, "the report");
        assert_eq!(
            h[0].retry_at,
            Some(Timestamp::from_second(1794300000).unwrap())
        );
        let orphans: i64 = s
            .backend
            .conn
            .query_row(
                "SELECT count(*) FROM outbox WHERE key = 'j:2026-11-01'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(
            orphans, 0,
            "a message without its run is dropped, not a refusal"
        );
        // References still hold, and are enforced again.
        let on: i64 = s
            .backend
            .conn
            .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
            .unwrap();
        assert_eq!(on, 1);
        let err = s
            .backend
            .conn
            .execute(
                "INSERT INTO outbox (key, seq, destination, idempotency_key, content_type, body,
                    state, updated_at) VALUES ('nope', 1, 'd', 'nope#1', 't', x'00', 'PENDING', 0)",
                [],
            )
            .unwrap_err();
        assert!(err.to_string().contains("FOREIGN KEY"), "{err}");
        // And the new state is accepted.
        let job = JobName::new("j").unwrap();
        let w = crate::core::window::Window::containing(
            &job,
            crate::core::window::WindowKind::Day,
            &crate::core::window::Zone::utc(),
            Timestamp::from_second(1794300000).unwrap(),
        )
        .unwrap();
        let now = Timestamp::from_second(1794400000).unwrap();
        let skip = Skip {
            window: &w,
            reason: "missed",
        };
        assert_eq!(s.record_skips(&[skip], "d", now).unwrap(), [true]);
        assert_eq!(s.peek(&w.key()).unwrap().unwrap().state, RunState::Skipped);
    }

    #[test]
    fn a_skip_reason_kept_in_error_reads_as_a_reason_before_and_after_the_migration() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        {
            // A store as version 7 left it: the skip's reason in `error`.
            let conn = Connection::open(&path).unwrap();
            for m in &MIGRATIONS[..7] {
                conn.execute_batch(m).unwrap();
            }
            conn.execute_batch(
                "INSERT INTO runs (key, job, window_start, window_end, timezone, state, fence,
                    owner, lease_expires_at, attempt, component, error, created_at, updated_at)
                 VALUES ('j:2026-11-08', 'j', 1794096000, 1794182400, 'UTC', 'SKIPPED', 0, 'd',
                    0, 0, '', 'missed (catch_up = \"latest\")', 5, 5),
                    ('j:2026-11-09', 'j', 1794182400, 1794268800, 'UTC', 'FAILED', 1, 'a',
                    0, 1, 'sha256:ab', 'boom', 7, 8);
                 PRAGMA user_version = 7;",
            )
            .unwrap();
        }
        let notes = |s: &mut SqliteStore| {
            let mut h = s.history(None).unwrap();
            h.sort_by_key(|r| r.window_start);
            h.into_iter()
                .map(|r| (r.skip_reason, r.error))
                .collect::<Vec<_>>()
        };
        let expected = [
            (Some("missed (catch_up = \"latest\")".to_string()), None),
            (None, Some("boom".to_string())),
        ];
        // A read-only command reads the older store as it is.
        let mut old = SqliteStore::open_read_only(&path).unwrap();
        assert_eq!(old.backend.version, 7);
        assert_eq!(notes(&mut old), expected);
        drop(old);
        // The migration moves the reason into its column.
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.backend.user_version().unwrap(), MIGRATIONS.len() as i64);
        assert_eq!(notes(&mut s), expected);
        let error: Option<String> = s
            .backend
            .conn
            .query_row("SELECT error FROM runs WHERE state = 'SKIPPED'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(error, None, "moved, not copied");
    }

    #[test]
    fn a_file_that_is_not_sqlite_is_refused_as_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        std::fs::write(&path, "these are my notes, not a database ".repeat(100)).unwrap();
        let err = SqliteStore::open(&path).err().unwrap();
        assert!(matches!(err, Error::Input(_)), "{err}");
        assert!(err.to_string().contains("not a SQLite database"), "{err}");
    }

    #[test]
    fn a_kept_connection_is_used_again_only_on_the_same_file_and_closed_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let job = JobName::new("daily").unwrap();
        let at = |s: &str| s.parse::<Timestamp>().unwrap();
        let now = at("2026-11-09T00:00:00Z");
        let mut s = SqliteStore::open(&path).unwrap();
        assert!(s.created());
        s.set_decided_until(&job, at("2026-11-08T00:00:00Z"), now)
            .unwrap();
        drop(s);
        // Kept (unless other tests' connections made it the oldest of too
        // many), and used again by the next open.
        let mut again = SqliteStore::open(&path).unwrap();
        assert!(!again.created());
        assert_eq!(
            again.decided_until(&job).unwrap(),
            Some(at("2026-11-08T00:00:00Z"))
        );
        drop(again);
        // The file moved away and another put in its place: the kept
        // connection, open on the old file, is not used for the new one.
        std::fs::rename(&path, dir.path().join("old.db")).unwrap();
        for side in ["-wal", "-shm"] {
            let _ = std::fs::rename(
                dir.path().join(format!("s.db{side}")),
                dir.path().join(format!("old.db{side}")),
            );
        }
        let mut fresh = SqliteStore::open(&path).unwrap();
        assert!(fresh.created(), "a new store, not the kept connection");
        assert_eq!(fresh.decided_until(&job).unwrap(), None);
        drop(fresh);
        // At the command's end every kept connection is closed, and the
        // last one to close checkpoints the WAL into the file.
        close_idle();
        assert!(!dir.path().join("s.db-wal").exists());
    }
}
