//! The on-disk cache of compiled components. Compiling a component with
//! Cranelift costs a release host about 160 ms and a debug host seconds;
//! loading a cached artifact costs under a millisecond. Artifacts are keyed
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
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

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
}

impl CompileCache {
    /// A cache in `dir`, or no cache at all.
    pub fn new(dir: Option<PathBuf>) -> CompileCache {
        CompileCache { dir }
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

    /// Loads `wasm` (whose sha256 hex is `digest`) as a component, from the
    /// cache when possible.
    ///
    /// # Errors
    ///
    /// The compiler's error when the bytes are not a valid component.
    pub fn load(
        &self,
        engine: &Engine,
        wasm: &[u8],
        digest: &str,
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let Some(dir) = &self.dir else {
            return Ok((Component::new(engine, wasm)?, CacheOutcome::Bypassed));
        };
        if let Err(why) = ensure_private_dir(dir) {
            warn(&format!(
                "not using compile cache `{}`: {why}",
                dir.display()
            ));
            return Ok((Component::new(engine, wasm)?, CacheOutcome::Bypassed));
        }
        let path = dir.join(format!("{digest}-{}.cwasm", compat_hash(engine)));
        if path.exists() {
            match trusted_file(&path) {
                // SAFETY: the artifact was written by this user into a
                // directory only this user can write, under a name that
                // includes the engine's compatibility hash; wasmtime still
                // checks its header against the engine.
                Ok(()) => match unsafe { Component::deserialize_file(engine, &path) } {
                    Ok(c) => return Ok((c, CacheOutcome::Hit)),
                    Err(e) => warn(&format!(
                        "ignoring unreadable compiled artifact `{}`: {e}",
                        path.display()
                    )),
                },
                Err(why) => warn(&format!(
                    "ignoring compiled artifact `{}`: {why}",
                    path.display()
                )),
            }
        }
        let component = Component::new(engine, wasm)?;
        match component.serialize() {
            Ok(bytes) => {
                if let Err(e) = write_atomically(dir, &path, &bytes) {
                    warn(&format!(
                        "cannot store compiled artifact in `{}`: {e}",
                        dir.display()
                    ));
                    return Ok((component, CacheOutcome::Bypassed));
                }
                Ok((component, CacheOutcome::Miss))
            }
            Err(e) => {
                warn(&format!("cannot serialize compiled component: {e}"));
                Ok((component, CacheOutcome::Bypassed))
            }
        }
    }
}

impl CompileCache {
    /// The compiled code of the component whose sha256 hex is `digest`, if
    /// this cache holds it for `engine` (a replay of a recorded run whose
    /// `.wasm` file is no longer at hand).
    pub fn find(&self, engine: &Engine, digest: &str) -> Option<Component> {
        // The digest may come from a replay file: never let it name a path.
        if !crate::core::text::is_sha256_hex(digest) {
            return None;
        }
        let dir = self.dir.as_ref()?;
        ensure_private_dir(dir).ok()?;
        let path = dir.join(format!("{digest}-{}.cwasm", compat_hash(engine)));
        trusted_file(&path).ok()?;
        // SAFETY: as in `load`: written by this user into a directory only
        // this user can write, named with the engine's compatibility hash.
        unsafe { Component::deserialize_file(engine, &path) }.ok()
    }
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

fn current_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn ensure_private_dir(dir: &Path) -> Result<(), String> {
    if !dir.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create it: {e}"))?;
    }
    let meta = fs::metadata(dir).map_err(|e| e.to_string())?;
    if !meta.is_dir() {
        return Err("it is not a directory".to_string());
    }
    if meta.uid() != current_uid() {
        return Err(format!(
            "it is owned by uid {}, not by this user",
            meta.uid()
        ));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(format!(
            "others can write to it (mode {:o}); run `chmod go-w` on it",
            meta.permissions().mode() & 0o777
        ));
    }
    Ok(())
}

fn trusted_file(path: &Path) -> Result<(), String> {
    let meta = fs::symlink_metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("it is not a regular file".to_string());
    }
    if meta.uid() != current_uid() {
        return Err(format!(
            "it is owned by uid {}, not by this user",
            meta.uid()
        ));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err("others can write to it".to_string());
    }
    Ok(())
}

/// Writes to a temporary file and renames it into place, so a concurrent
/// reader sees either no artifact or a whole one.
fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("artifact")
    ));
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
