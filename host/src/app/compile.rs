//! `jobhost compile`: fills the compile cache ahead of time (in a
//! container image build or a deploy step), so that no run pays for
//! compiling a component, which for an 18 MB Python component takes
//! seconds.

use std::io::Write;
use std::path::PathBuf;

use crate::core::error::{Error, Result};
use crate::core::text::{json_line, say};
use crate::guest::cache::{CacheOutcome, CompileCache};
use crate::guest::sandbox::{ComponentFile, Sandbox};

/// What `jobhost compile` is asked to do.
#[derive(Debug)]
pub struct CompileRequest {
    /// The component files.
    pub components: Vec<PathBuf>,
    /// The cache folder, else the default one.
    pub cache_dir: Option<PathBuf>,
}

/// Compiles each component into the cache (or finds it there) and prints
/// one JSON line per component on stdout and a sentence on stderr.
///
/// # Errors
///
/// `Error::Input` for a file that is not a component of this host's world;
/// `Error::Host` when there is no cache folder to fill.
pub fn compile(request: CompileRequest) -> Result<()> {
    let dir = request
        .cache_dir
        .or_else(CompileCache::default_dir)
        .ok_or_else(|| {
            Error::input(
                "no cache folder: pass --cache-dir or set JOBHOST_CACHE_DIR (HOME is not set \
                 either)",
            )
        })?;
    let cache = CompileCache::new(Some(dir.clone()));
    // Said before anything is compiled: a large component takes seconds
    // and hundreds of MB to compile, for nothing if it cannot be kept.
    if let Some(why) = cache.unwritable() {
        return Err(Error::Host(
            format!(
                "cannot fill the compile cache `{}`: {why}; pass --cache-dir with a folder this \
             user owns and can write",
                dir.display()
            )
            .into(),
        ));
    }
    let sandbox = Sandbox::new()?;
    let mut out = std::io::stdout().lock();
    for path in &request.components {
        let mut file = ComponentFile::open(path, &cache)?;
        let loaded = sandbox.load(&mut file, &cache)?;
        if loaded.cache == CacheOutcome::Bypassed {
            return Err(Error::Host(
                format!(
                    "compiled `{}`, but could not store it in the cache folder `{}` (see the \
                 warning above); runs would compile it again",
                    path.display(),
                    dir.display()
                )
                .into(),
            ));
        }
        let artifact = cache.artifact(sandbox.engine(), &file.hex);
        let artifact_bytes = artifact
            .as_ref()
            .and_then(|a| std::fs::metadata(a).ok())
            .map(|m| m.len());
        let line = crate::run::outputs::Compiled {
            component: path.display().to_string(),
            digest: loaded.digest.clone(),
            cache: loaded.cache,
            compile_seconds: loaded
                .compile
                .map(|d| (d.as_secs_f64() * 1000.0).round() / 1000.0),
            artifact: artifact.as_ref().map(|a| a.display().to_string()),
            artifact_bytes,
            functions_reused: loaded.reuse.map(|r| r.reused),
            functions_compiled: loaded.reuse.map(|r| r.compiled),
        };
        let line = serde_json::to_string(&line)
            .map_err(|e| Error::host("cannot write a JSON line").because(e))?;
        writeln!(out, "{}", json_line(&line))
            .map_err(|e| Error::host("cannot write to standard output").because(e))?;
        if loaded.cache == CacheOutcome::Hit {
            say(
                "note",
                &format!(
                    "`{}` ({}) was already compiled for this host in `{}`",
                    path.display(),
                    loaded.digest,
                    dir.display()
                ),
            );
        }
    }
    Ok(())
}
