//! Whether a SQLite store would outlive its machine or container. A store on
//! a filesystem that lives in memory (tmpfs, ramfs) is lost when the machine
//! restarts, and one on a container's own writable layer (overlayfs, aufs)
//! is lost when the container is replaced: either way the next host finds
//! no claims and runs every window again, the very duplicate jobhost exists
//! to prevent. The check reads the filesystem type of the nearest folder of
//! the store path that exists, so it runs before anything is created.

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
const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// The ephemeral filesystem `store` would be created on, if it is one.
/// What is checked is the store's folder (or its nearest folder that
/// exists): SQLite keeps its `-wal` and `-shm` files there, so a store file
/// bind-mounted from a durable disk into an ephemeral folder still loses
/// its latest commits with the folder. `None` also when the type cannot be
/// read: the check warns, it never stands in the way of a store that works.
pub fn ephemeral_filesystem(store: &Path) -> Option<Ephemeral> {
    // SQLite follows a symlinked store file and keeps its WAL beside the
    // file it points to.
    let resolved = store.canonicalize().ok();
    let store = resolved.as_deref().unwrap_or(store);
    let dir = store
        .ancestors()
        .skip(1)
        .map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        })
        .find(|p| p.is_dir())?;
    match filesystem_magic(dir)? {
        TMPFS_MAGIC => Some(Ephemeral::Tmpfs),
        RAMFS_MAGIC => Some(Ephemeral::Ramfs),
        OVERLAYFS_SUPER_MAGIC => Some(Ephemeral::Overlay),
        AUFS_SUPER_MAGIC => Some(Ephemeral::Aufs),
        // Rootless containers (Podman) put their layer on fuse-overlayfs;
        // other FUSE filesystems may well be durable, so ask the mount table.
        FUSE_SUPER_MAGIC => {
            (mount_type(dir)?.as_str() == "fuse.fuse-overlayfs").then_some(Ephemeral::Overlay)
        }
        _ => None,
    }
}

fn filesystem_magic(path: &Path) -> Option<i64> {
    let fs = rustix::fs::statfs(path).ok()?;
    #[allow(clippy::unnecessary_cast)] // f_type's width differs by platform
    Some(fs.f_type as i64)
}

/// Whether the filesystem holding `dir` has (next to) no room left for this
/// process: less than 1 MiB (the blocks reserved for root count for root
/// only). SQLite reports some writes that fail for want of space as a plain
/// "disk I/O error"; this tells such a failure for what it is.
pub fn no_space_left(dir: &Path) -> bool {
    let Ok(fs) = rustix::fs::statvfs(dir) else {
        return false;
    };
    let free = if rustix::process::geteuid().is_root() {
        fs.f_bfree
    } else {
        fs.f_bavail
    };
    free.saturating_mul(fs.f_frsize) < 1 << 20
}

/// The filesystem type of the mount holding `dir`, from
/// `/proc/self/mountinfo` (the mount with the longest matching mount point).
fn mount_type(dir: &Path) -> Option<String> {
    let dir = dir.canonicalize().ok()?;
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    table
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let mount_point = unescape(fields.get(4)?);
            let sep = fields.iter().position(|f| *f == "-")?;
            let fstype = fields.get(sep + 1)?;
            dir.starts_with(&mount_point)
                .then(|| (mount_point.len(), fstype.to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, fstype)| fstype)
}

/// Undoes mountinfo's octal escapes (`\040` for a space, and so on).
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest
            .get(i + 1..i + 4)
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(b) => {
                out.push(char::from(b));
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_under_dev_shm_is_on_tmpfs_even_before_its_folder_exists() {
        assert_eq!(
            ephemeral_filesystem(Path::new("/dev/shm/not/yet/created/jobhost.db")),
            Some(Ephemeral::Tmpfs),
            "/dev/shm is tmpfs on Linux"
        );
    }

    #[test]
    fn the_mount_table_is_read_for_the_mount_holding_a_folder() {
        assert_eq!(mount_type(Path::new("/dev/shm")).as_deref(), Some("tmpfs"));
        assert_eq!(unescape("/mnt/my\\040disk"), "/mnt/my disk");
        assert_eq!(unescape("/odd\\x"), "/odd\\x");
    }
}
