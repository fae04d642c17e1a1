//! Whether a file or folder of the compile cache may be trusted: the cache
//! holds native code the host executes, so, the way ssh treats its keys,
//! only what this user owns and no one else can write is used.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

/// This process's effective user.
fn current_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Makes `dir` (0700) when missing; an error names why it cannot be
/// trusted: not a folder, another user's, or writable by others.
pub fn ensure_private_dir(dir: &Path) -> Result<(), String> {
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

/// An error naming why `path` cannot be trusted: not a regular file (a
/// link is not followed), another user's, or writable by others.
pub fn trusted_file(path: &Path) -> Result<(), String> {
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
