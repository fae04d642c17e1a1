//! Whether a SQLite store would outlive its machine or container. A store on
//! a filesystem that lives in memory (tmpfs, ramfs) is lost when the machine
//! restarts, and one on a container's own writable layer (overlayfs, aufs)
//! is lost when the container is replaced: either way the next host finds
//! no claims and runs every window again, the very duplicate jobhost exists
//! to prevent. The check reads the filesystem type of the nearest folder of
//! the store path that exists, so it runs before anything is created.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A filesystem that does not outlive what it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ephemeral {
    /// Memory-backed: gone when the machine restarts.
    Tmpfs,
    /// Memory-backed: gone when the machine restarts.
    Ramfs,
    /// A container's writable layer: gone when the container is replaced.
    Overlay,
    /// A container's writable layer (older Docker): gone with the container.
    Aufs,
}

impl Ephemeral {
    /// The filesystem's usual name.
    pub fn name(self) -> &'static str {
        match self {
            Ephemeral::Tmpfs => "tmpfs",
            Ephemeral::Ramfs => "ramfs",
            Ephemeral::Overlay => "overlayfs",
            Ephemeral::Aufs => "aufs",
        }
    }

    /// What dies with it.
    pub fn dies_with(self) -> &'static str {
        match self {
            Ephemeral::Tmpfs | Ephemeral::Ramfs => {
                "it lives in memory and is lost when the machine restarts"
            }
            Ephemeral::Overlay | Ephemeral::Aufs => {
                "it is a container's own layer and is lost when the container is replaced"
            }
        }
    }
}

// From linux/magic.h.
const TMPFS_MAGIC: i64 = 0x0102_1994;
const RAMFS_MAGIC: i64 = 0x8584_58f6;
const OVERLAYFS_SUPER_MAGIC: i64 = 0x794c_7630;
const AUFS_SUPER_MAGIC: i64 = 0x6175_6673;

/// The ephemeral filesystem `store` would be created on, if it is one.
/// `None` also when the type cannot be read: the check warns, it never
/// stands in the way of a store that works.
pub fn ephemeral_filesystem(store: &Path) -> Option<Ephemeral> {
    let dir = store.ancestors().skip(1).find(|p| {
        let p = if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        };
        p.is_dir()
    })?;
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    // The store file itself, if it exists, may be a bind mount of its own.
    let probe = if store.is_file() { store } else { dir };
    match filesystem_magic(probe)? {
        TMPFS_MAGIC => Some(Ephemeral::Tmpfs),
        RAMFS_MAGIC => Some(Ephemeral::Ramfs),
        OVERLAYFS_SUPER_MAGIC => Some(Ephemeral::Overlay),
        AUFS_SUPER_MAGIC => Some(Ephemeral::Aufs),
        _ => None,
    }
}

fn filesystem_magic(path: &Path) -> Option<i64> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `statfs` writes only into the zeroed struct we own, and `c`
    // is a valid NUL-terminated path for the duration of the call.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statfs(c.as_ptr(), &mut buf) };
    #[allow(clippy::unnecessary_cast)] // f_type's width differs by platform
    (rc == 0).then_some(buf.f_type as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_under_dev_shm_is_on_tmpfs_and_one_in_the_project_is_not() {
        assert_eq!(
            ephemeral_filesystem(Path::new("/dev/shm/not/yet/created/jobhost.db")),
            Some(Ephemeral::Tmpfs),
            "/dev/shm is tmpfs on Linux"
        );
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("state/jobhost.db");
        assert_eq!(ephemeral_filesystem(&here), None);
    }
}
