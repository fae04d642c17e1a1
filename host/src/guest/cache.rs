//! The on-disk cache of compiled components, and of component files'
//! digests. Compiling the Rust reference costs a release host about 0.3 s,
//! an 18 MB Python component many seconds; loading a cached artifact costs
//! milliseconds, and a file the cache has hashed before is not read again. Artifacts are keyed
//! by the component's sha256 and the engine's compatibility hash (wasmtime
//! version and codegen settings), so a stale artifact is never loaded.
//!
//! A cached artifact is native code the host will execute, trusted
//! completely. So the cache lives in a directory only its owner can write
//! (created 0700), and an artifact in a directory or file that anyone else
//! could have written is ignored, the way ssh treats its keys. A cache
//! problem is never fatal: the component is compiled again and the host
//! says why on stderr.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::guest::functions::{FunctionCache, Reuse};
use crate::guest::trust::{ensure_private_dir, trusted_file};

/// What happened when a component was loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheOutcome {
    /// Loaded a cached artifact.
    Hit,
    /// Compiled and stored a new artifact.
    Miss,
    /// Compiled without the cache (disabled, or unusable: see stderr).
    Bypassed,
}

/// Where compiled artifacts live.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: Option<PathBuf>,
    /// How recently a file may have changed and still not have its digest
    /// remembered (see [`CompileCache::remember_digest`]).
    racy: std::time::Duration,
}

impl CompileCache {
    /// A cache in `dir`, or no cache at all.
    pub fn new(dir: Option<PathBuf>) -> CompileCache {
        CompileCache { dir, racy: RACY }
    }

    /// This cache, with a racy window of `window` instead of the default
    /// two seconds: a file changed within it is hashed on every run rather
    /// than remembered. Tests shorten it so that they need not wait for a
    /// file they just wrote to age; a shorter window than the file
    /// system's clock tick lets a write in the tick of the hash go unseen.
    #[must_use]
    pub fn with_racy_window(self, window: std::time::Duration) -> CompileCache {
        CompileCache {
            racy: window,
            ..self
        }
    }

    /// Whether a cache folder is configured.
    pub fn enabled(&self) -> bool {
        self.dir.is_some()
    }

    /// The default cache folder: `$XDG_CACHE_HOME/jobhost`, else
    /// `$HOME/.cache/jobhost`.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(base.join("jobhost"))
    }

    /// The compiled code of the component whose sha256 hex is `digest`, if
    /// this cache holds a trusted artifact of it for `engine`. An artifact
    /// that is there but cannot be used is named on stderr.
    pub fn find(&self, engine: &Engine, digest: &str) -> Option<Component> {
        // The digest may come from a replay file: never let it name a path.
        if !crate::core::text::is_sha256_hex(digest) {
            return None;
        }
        let dir = self.usable_dir()?;
        let path = artifact_path(dir, engine, digest);
        if !path.exists() {
            return None;
        }
        if let Err(why) = trusted_file(&path) {
            warn(&format!(
                "ignoring compiled artifact `{}`: {why}",
                path.display()
            ));
            return None;
        }
        // SAFETY: the artifact was written by this user into a directory
        // only this user can write, under a name that includes the engine's
        // compatibility hash; wasmtime still checks its header against the
        // engine. Deserializing from the file maps it rather than copying
        // it, so a large component's data (a Python heap snapshot) is
        // mapped copy-on-write into each instance.
        let mapped = unsafe { Component::deserialize_file(engine, &path) };
        match mapped.or_else(|e| load_copy(engine, &path).ok_or(e)) {
            Ok(c) => Some(c),
            Err(e) => {
                warn(&format!(
                    "ignoring unreadable compiled artifact `{}`: {e}",
                    path.display()
                ));
                None
            }
        }
    }

    /// Compiles `wasm` (whose sha256 hex is `digest`) and stores the
    /// artifact for later runs. With a cache, the compiled bytes go
    /// straight to the file and the component is loaded from it: the code
    /// is never held twice (compiled, and serialized) in memory.
    ///
    /// # Errors
    ///
    /// The compiler's error when the bytes are not a valid component.
    pub fn compile(
        &self,
        engine: &Engine,
        wasm: &[u8],
        digest: &str,
        functions: Option<&FunctionCache>,
    ) -> wasmtime::Result<(Component, CacheOutcome, Option<Reuse>)> {
        let _one_compile = functions.map(FunctionCache::exclusive);
        let dir = self
            .usable_dir()
            .filter(|_| crate::core::text::is_sha256_hex(digest));
        let Some(dir) = dir else {
            if let Some(f) = functions {
                f.detach();
            }
            return Ok((Component::new(engine, wasm)?, CacheOutcome::Bypassed, None));
        };
        let path = artifact_path(dir, engine, digest);
        if let Some(f) = functions {
            f.attach(&dir.join(format!("functions-{}.sqlite", compat_hash(engine))));
        }
        let compiled = engine.precompile_component(wasm);
        let reuse = functions
            .filter(|f| f.attached())
            .map(FunctionCache::finish);
        let bytes = compiled?;
        if let Err(e) = write_atomically(dir, &path, &bytes) {
            warn(&format!(
                "cannot store compiled artifact in `{}`: {e}",
                dir.display()
            ));
            // SAFETY: these bytes were compiled by this engine just now.
            let component = unsafe { Component::deserialize(engine, &bytes) }?;
            return Ok((component, CacheOutcome::Bypassed, reuse));
        }
        // SAFETY: written just now by this process, into a directory only
        // this user can write.
        let component = match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(c) => c,
            // A cache folder on a `noexec` mount cannot be mapped as code:
            // the bytes in hand are loaded instead (see `load_copy`).
            // SAFETY: compiled by this engine just now.
            Err(_) => unsafe { Component::deserialize(engine, &bytes) }?,
        };
        Ok((component, CacheOutcome::Miss, reuse))
    }

    /// Why artifacts cannot be stored in this cache, if they cannot: no
    /// folder, one others can write, or one this user cannot write to.
    pub fn unwritable(&self) -> Option<String> {
        let Some(dir) = self.dir.as_deref() else {
            return Some("no cache folder is configured".to_string());
        };
        if let Err(why) = ensure_private_dir(dir) {
            return Some(why);
        }
        let probe = dir.join(format!(".probe-{}", std::process::id()));
        match fs::File::create(&probe) {
            Ok(_) => {
                let _ = fs::remove_file(&probe);
                None
            }
            Err(e) => Some(format!("cannot write to it: {e}")),
        }
    }

    /// Where the artifact of `digest` for `engine` is (or would be) kept.
    pub fn artifact(&self, engine: &Engine, digest: &str) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        crate::core::text::is_sha256_hex(digest).then(|| artifact_path(dir, engine, digest))
    }

    /// The cache folder, if there is one this user alone can write (made
    /// when missing); why not is said on stderr once per process.
    fn usable_dir(&self) -> Option<&Path> {
        let dir = self.dir.as_deref()?;
        match ensure_private_dir(dir) {
            Ok(()) => Some(dir),
            Err(why) => {
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    warn(&format!(
                        "not using compile cache `{}`: {why}",
                        dir.display()
                    ));
                });
                None
            }
        }
    }

    /// The digest remembered for the file `meta` describes, if this cache
    /// hashed that very file before: same device, inode, size, and
    /// modification and change times to the nanosecond. A file written in
    /// place changes its change time, which no user can set back, so a
    /// remembered digest is never one of other bytes. (Callers remember
    /// digests only on file systems that keep such a change time: see
    /// [`keeps_change_time`].)
    pub fn known_digest(&self, meta: &fs::Metadata) -> Option<String> {
        let dir = self.usable_dir()?;
        let path = dir.join(IDENTITIES).join(identity_name(meta));
        trusted_file(&path).ok()?;
        let text = fs::read_to_string(&path).ok()?;
        let hex = text.trim();
        crate::core::text::is_sha256_hex(hex).then(|| hex.to_string())
    }

    /// Remembers that the file `meta` describes hashes to `hex`, unless it
    /// changed within the racy window (two seconds by default): a write in the same clock tick as
    /// the hash could leave the times unchanged (the reason git treats such
    /// files as "racily clean").
    pub fn remember_digest(&self, meta: &fs::Metadata, hex: &str) {
        let Some(dir) = self.usable_dir() else {
            return;
        };
        let recent = |t: std::io::Result<std::time::SystemTime>| {
            t.ok()
                .and_then(|t| t.elapsed().ok())
                .is_none_or(|age| age < self.racy)
        };
        let changed = std::time::UNIX_EPOCH
            + std::time::Duration::new(
                u64::try_from(meta.ctime()).unwrap_or(0),
                u32::try_from(meta.ctime_nsec()).unwrap_or(0),
            );
        if recent(meta.modified()) || recent(Ok(changed)) {
            return;
        }
        let ids = dir.join(IDENTITIES);
        if ensure_private_dir(&ids).is_err() {
            return;
        }
        let path = ids.join(identity_name(meta));
        // Best effort: without it, the next run hashes the file again.
        let _ = write_atomically(&ids, &path, hex.as_bytes());
    }
}

/// An artifact the file system will not map as code (a cache folder on a
/// `noexec` mount), read and loaded from a copy in memory instead: slower to
/// load and without copy-on-write data, but it works.
fn load_copy(engine: &Engine, path: &Path) -> Option<Component> {
    let bytes = fs::read(path).ok()?;
    // SAFETY: as for `deserialize_file` in `find`: a trusted file, checked
    // by wasmtime against this engine.
    unsafe { Component::deserialize(engine, &bytes) }.ok()
}

/// Whether the file system holding a file keeps a change time no user can
/// set: read-only images (squashfs, erofs, ISO 9660) carry the times their
/// builder chose, and FAT file systems have none, so a file there is hashed
/// on every run rather than known by its identity.
pub fn keeps_change_time(file: &fs::File) -> bool {
    const SQUASHFS: i64 = 0x7371_7368;
    const EROFS: i64 = 0xE0F5_E1E2;
    const ISO9660: i64 = 0x9660;
    const MSDOS: i64 = 0x4d44;
    const EXFAT: i64 = 0x2011_BAB0;
    match rustix::fs::fstatfs(file) {
        #[allow(clippy::unnecessary_cast)] // f_type's width differs by platform
        Ok(fs) => !matches!(fs.f_type as i64, SQUASHFS | EROFS | ISO9660 | MSDOS | EXFAT),
        Err(_) => false,
    }
}

/// Whether two readings of a file's metadata name the same bytes: same
/// device, inode, size, and modification and change times.
pub fn same_identity(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    let id = |m: &fs::Metadata| {
        (
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        )
    };
    id(a) == id(b)
}

/// The folder of remembered file digests, inside the cache folder.
const IDENTITIES: &str = "files";

/// How recently a file may have changed and still not have its digest
/// remembered, unless a cache is given another window.
const RACY: std::time::Duration = std::time::Duration::from_secs(2);

/// The name a file's identity is remembered under.
fn identity_name(meta: &fs::Metadata) -> String {
    let id = format!(
        "{}:{}:{}:{}.{}:{}.{}",
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    );
    hex::encode(&Sha256::digest(id.as_bytes())[..16])
}

fn artifact_path(dir: &Path, engine: &Engine, digest: &str) -> PathBuf {
    dir.join(format!("{digest}-{}.cwasm", compat_hash(engine)))
}

fn warn(msg: &str) {
    crate::core::text::say("warning", msg);
}

/// The engine's compatibility hash as hex, stable across processes.
fn compat_hash(engine: &Engine) -> String {
    struct ShaHasher(Sha256);
    impl Hasher for ShaHasher {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut h = ShaHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut h);
    hex::encode(&h.0.finalize()[..12])
}

/// Writes to a temporary file in `dir` (mode 0600) and renames it into
/// place, so a concurrent reader sees either no artifact or a whole one; a
/// failed write leaves no temporary file behind.
fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map(drop).map_err(|e| e.error)
}
