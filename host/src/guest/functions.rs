//! Compiled functions kept for reuse across components: Cranelift's
//! incremental compilation cache, stored on disk beside the compiled
//! artifacts.
//!
//! Components built by one toolchain share almost all of their code: every
//! Python report carries the same CPython, every JavaScript report the same
//! SpiderMonkey; what differs is the app, which lives mostly in the data of
//! a pre-initialised heap. Compiling a changed report from scratch costs
//! seconds; with this cache, a function whose Cranelift IR (and the
//! compiler's settings) hashes to a key compiled before is not compiled
//! again, so a new version of a report pays for translating its functions
//! and linking them, not for optimising and emitting code it already has.
//!
//! The entries are native code the host will execute, trusted exactly as
//! the artifacts are: the file lives in the private cache folder (0700),
//! is created 0600, and is not opened when it is not this user's own or
//! others can write it. It is a SQLite file (WAL; compiled functions are
//! gathered in memory and written in one short transaction per batch), so
//! processes compiling at once share it and a crash never leaves a torn
//! entry; Cranelift still checks each entry's version before using it. One file per engine compatibility hash, so a
//! new wasmtime starts a new file and an old one can be deleted whole.
//! Nothing here is ever fatal: a problem is said on stderr once and the
//! component is compiled without reuse.

use std::borrow::Cow;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use rusqlite::{Connection, OptionalExtension};

/// Compiled functions gathered before they are written in one
/// transaction: a commit per function (tens of microseconds each) would
/// slow the first compile, and a transaction held open while compiling
/// would make another process compiling at the same time wait.
const BATCH: usize = 512;

/// The most bytes of compiled code gathered before a write.
const BATCH_BYTES: usize = 4 << 20;

/// How long a write waits for another process's write transaction before
/// its batch is simply not kept.
const BUSY: std::time::Duration = std::time::Duration::from_secs(2);

/// Cranelift's incremental compilation cache on disk (see the module
/// documentation). Handed to the engine once; pointed at a file by
/// [`FunctionCache::attach`] before each compile that has a cache folder.
///
/// The compiler's threads look functions up and hand compiled ones in at
/// once: lookups go through one connection, writes through another, and
/// compiled functions are gathered apart from both, so that a thread writing
/// a batch holds up no other thread's lookups.
#[derive(Debug, Default)]
pub struct FunctionCache {
    /// The connection lookups use, and the file's path.
    reader: Mutex<Option<(PathBuf, Connection)>>,
    /// The connection batches are written through.
    writer: Mutex<Option<Connection>>,
    /// Compiled functions not written yet.
    pending: Mutex<Pending>,
    /// Held by the compile using the cache (see [`FunctionCache::exclusive`]).
    compiling: Mutex<()>,
    hits: AtomicUsize,
    misses: AtomicUsize,
}

#[derive(Debug, Default)]
struct Pending {
    functions: Vec<(Vec<u8>, Vec<u8>)>,
    bytes: usize,
    /// Whether a file is attached and writes have not failed since.
    accepting: bool,
}

/// What reuse a compile got: functions found in the cache, and functions
/// compiled (and kept for later).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reuse {
    pub reused: usize,
    pub compiled: usize,
}

/// A lock whose holder panicked: nothing it guards is left half-done in a
/// way that matters (SQLite rolls back an unfinished transaction).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl FunctionCache {
    /// One compile at a time uses the cache (one engine serves all of a
    /// process's compiles; the daemon's workers may compile at once): held
    /// from [`FunctionCache::attach`] to [`FunctionCache::finish`], so that
    /// the counts, and the file, are that compile's alone. A compile uses
    /// every core as it is.
    pub fn exclusive(&self) -> std::sync::MutexGuard<'_, ()> {
        lock(&self.compiling)
    }

    /// Points the cache at `path` (made when missing) and resets the
    /// counts. Without a usable file the compile goes on without reuse,
    /// and why is said on stderr.
    pub fn attach(&self, path: &Path) {
        self.flush();
        self.hits.store(0, Ordering::Relaxed);
        self.misses.store(0, Ordering::Relaxed);
        let same = lock(&self.reader).as_ref().is_some_and(|(p, _)| p == path);
        if !same {
            self.close();
            match open(path).and_then(|r| Ok((r, open(path)?))) {
                Ok((read, write)) => {
                    *lock(&self.reader) = Some((path.to_path_buf(), read));
                    *lock(&self.writer) = Some(write);
                }
                Err(why) => {
                    crate::core::text::say(
                        "warning",
                        &format!(
                            "not reusing compiled functions from `{}`: {why}; the component is \
                             compiled whole",
                            path.display()
                        ),
                    );
                    return;
                }
            }
        }
        lock(&self.pending).accepting = true;
    }

    /// Closes the file: a compile without a cache folder reuses nothing.
    pub fn detach(&self) {
        self.flush();
        self.close();
    }

    /// Writes what the last compile kept and says how much it reused.
    pub fn finish(&self) -> Reuse {
        self.flush();
        Reuse {
            reused: self.hits.load(Ordering::Relaxed),
            compiled: self.misses.load(Ordering::Relaxed),
        }
    }

    /// Whether a file is attached.
    pub fn attached(&self) -> bool {
        lock(&self.reader).is_some()
    }

    fn close(&self) {
        lock(&self.pending).accepting = false;
        *lock(&self.reader) = None;
        *lock(&self.writer) = None;
    }

    /// Writes the gathered functions.
    fn flush(&self) {
        let batch = {
            let mut pending = lock(&self.pending);
            pending.bytes = 0;
            std::mem::take(&mut pending.functions)
        };
        self.write(batch);
    }

    /// Writes `batch` in one transaction. When that fails (busy past the
    /// timeout, a full disk) its functions are dropped, to be compiled
    /// again next time, and this compile writes no more.
    fn write(&self, batch: Vec<(Vec<u8>, Vec<u8>)>) {
        if batch.is_empty() {
            return;
        }
        let mut writer = lock(&self.writer);
        let Some(conn) = writer.as_mut() else {
            return;
        };
        let written = (|| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            {
                // A key already there holds an entry Cranelift could not use
                // (it compiled the function again): the new one replaces it.
                let mut insert = tx.prepare_cached(
                    "INSERT OR REPLACE INTO functions (key, code) VALUES (?1, ?2)",
                )?;
                for (key, code) in &batch {
                    insert.execute(rusqlite::params![key, code])?;
                }
            }
            tx.commit()
        })();
        drop(writer);
        if written.is_err() {
            lock(&self.pending).accepting = false;
        }
    }
}

impl wasmtime::CacheStore for FunctionCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        let reader = lock(&self.reader);
        let (_, conn) = reader.as_ref()?;
        let found: Option<Vec<u8>> = conn
            .prepare_cached("SELECT code FROM functions WHERE key = ?1")
            .and_then(|mut s| s.query_row([key], |r| r.get(0)).optional())
            .ok()
            .flatten();
        drop(reader);
        match found {
            Some(code) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(Cow::Owned(code))
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        let mut pending = lock(&self.pending);
        if !pending.accepting {
            return false;
        }
        pending.bytes += key.len() + value.len();
        pending.functions.push((key.to_vec(), value));
        if pending.functions.len() < BATCH && pending.bytes < BATCH_BYTES {
            return true;
        }
        let batch = std::mem::take(&mut pending.functions);
        pending.bytes = 0;
        drop(pending);
        self.write(batch);
        true
    }
}

/// Opens (making it 0600 when missing) the functions file at `path`, if it
/// is this user's own and no one else can write it.
fn open(path: &Path) -> Result<Connection, String> {
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create it: {e}")),
    }
    super::trust::trusted_file(path)?;
    let conn = Connection::open(path).map_err(|e| e.to_string())?;
    conn.busy_timeout(BUSY).map_err(|e| e.to_string())?;
    // Several processes may make the file at once; a brand-new file's
    // switch to WAL can then be refused as busy without waiting, so it is
    // tried again a few times.
    let mut tries = 0;
    loop {
        let set = conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
             CREATE TABLE IF NOT EXISTS functions (key BLOB PRIMARY KEY, code BLOB NOT NULL);",
        );
        match set {
            Ok(()) => return Ok(conn),
            Err(e) if busy(&e) && tries < 20 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(5 * tries));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use wasmtime::CacheStore;

    #[test]
    fn kept_functions_are_found_by_a_later_process_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("functions.sqlite");
        let first = FunctionCache::default();
        first.attach(&path);
        assert!(first.get(b"k1").is_none());
        assert!(first.insert(b"k1", vec![1, 2, 3]));
        assert_eq!(
            first.finish(),
            Reuse {
                reused: 0,
                compiled: 1
            }
        );
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let second = FunctionCache::default();
        second.attach(&path);
        assert_eq!(second.get(b"k1").as_deref(), Some(&[1u8, 2, 3][..]));
        assert!(second.get(b"k2").is_none());
        assert_eq!(
            second.finish(),
            Reuse {
                reused: 1,
                compiled: 1
            }
        );
    }

    #[test]
    fn a_file_others_can_write_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("functions.sqlite");
        let cache = FunctionCache::default();
        cache.attach(&path);
        assert!(cache.insert(b"k", vec![9]));
        cache.finish();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let later = FunctionCache::default();
        later.attach(&path);
        assert!(!later.attached());
        assert!(later.get(b"k").is_none());
        assert!(!later.insert(b"k2", vec![1]));
    }

    #[test]
    fn a_file_that_is_not_a_database_is_not_used_nor_tried_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("functions.sqlite");
        std::fs::write(&path, vec![0x5a; 8192]).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = open(&path).expect_err("not a database");
        assert!(e.contains("not a database"), "{e}");
        let cache = FunctionCache::default();
        cache.attach(&path);
        assert!(!cache.attached());
        // Only a busy file is tried again.
        let not_a_database = Connection::open(&path)
            .and_then(|c| c.execute_batch("PRAGMA journal_mode = WAL"))
            .expect_err("not a database");
        assert!(!busy(&not_a_database));
    }

    #[test]
    fn without_a_file_nothing_is_kept_or_found() {
        let cache = FunctionCache::default();
        assert!(!cache.insert(b"k", vec![1]));
        assert!(cache.get(b"k").is_none());
    }
}
