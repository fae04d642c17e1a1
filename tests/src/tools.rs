//! Python tools the SDK tests run, pinned, each pip-installed into a folder
//! of the build (`target/tools/NAME-VERSION`), never into the system's
//! Python. `.ci/run` installs them first, the same way; a test installs one
//! that is missing, and says why when it cannot.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::guests::workspace_root;

/// The mypy release the Python SDK and reference report are checked with.
pub const MYPY: &str = "2.4.1";

/// The setuptools release a fresh install of the Python SDK is built with
/// (its `pyproject.toml` asks for 77 or later).
pub const SETUPTOOLS: &str = "84.2.1";

/// `target/tools/NAME-VERSION`.
pub fn tool_dir(name: &str, version: &str) -> PathBuf {
    workspace_root()
        .join("target")
        .join("tools")
        .join(format!("{name}-{version}"))
}

/// mypy, installed with pip into [`tool_dir`] unless it is there: the folder
/// to put on `PYTHONPATH` for `python3 -m mypy`.
///
/// # Errors
///
/// Why it could not be installed (no `python3`, no network).
pub fn ensure_mypy() -> Result<PathBuf, String> {
    ensure(
        "mypy",
        MYPY,
        "mypy/__init__.py",
        &["install", "--target"],
        &format!("mypy=={MYPY}"),
    )
}

/// A folder holding setuptools' wheel and nothing else, for `pip install
/// --no-index --find-links` to build a package from with no index at all.
///
/// # Errors
///
/// Why it could not be downloaded (no `python3`, no network).
pub fn ensure_setuptools_wheel() -> Result<PathBuf, String> {
    ensure(
        "setuptools",
        SETUPTOOLS,
        &format!("setuptools-{SETUPTOOLS}-py3-none-any.whl"),
        &["download", "--no-deps", "--only-binary", ":all:", "--dest"],
        &format!("setuptools=={SETUPTOOLS}"),
    )
}

/// The `cryptography` library, pinned, for the test that runs the chain's
/// documented Python snippet: the folder to put on `PYTHONPATH`.
///
/// # Errors
///
/// Why it could not be installed (no `python3`, no network).
pub fn ensure_cryptography() -> Result<PathBuf, String> {
    ensure(
        "cryptography",
        CRYPTOGRAPHY,
        "cryptography/__init__.py",
        &["install", "--target"],
        &format!("cryptography=={CRYPTOGRAPHY}"),
    )
}

/// The `cryptography` release the chain's Python snippet is tested with.
pub const CRYPTOGRAPHY: &str = "48.0.0";

/// `tool_dir(name, version)` once `marker` is in it: made by `python3 -m
/// pip <pip> <folder> <requirement>` (see [`ensure_with`]).
fn ensure(
    name: &str,
    version: &str,
    marker: &str,
    pip: &[&str],
    requirement: &str,
) -> Result<PathBuf, String> {
    ensure_with(
        name,
        version,
        marker,
        &format!("python3 -m pip {} {requirement}", pip.join(" ")),
        |folder| {
            let mut cmd = Command::new("python3");
            cmd.args(["-m", "pip", "--quiet", "--disable-pip-version-check"])
                .args(pip)
                .arg(folder)
                .arg(requirement);
            cmd
        },
    )
}

/// `tool_dir(name, version)` once `marker` is in it: made by the command
/// `install` gives for a folder beside it (`what`, as a person would type
/// it, names it in errors), then renamed, so a second process never sees
/// half of it.
///
/// # Errors
///
/// The command's output when it cannot be run or fails.
pub fn ensure_with(
    name: &str,
    version: &str,
    marker: &str,
    what: &str,
    install: impl FnOnce(&Path) -> Command,
) -> Result<PathBuf, String> {
    let dir = tool_dir(name, version);
    if dir.join(marker).exists() {
        return Ok(dir);
    }
    let parent = dir.parent().unwrap_or(&dir).to_path_buf();
    std::fs::create_dir_all(&parent)
        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    // A folder of this call's own: the tests of one process install from
    // several threads at once, and one thread's rename must not take the
    // folder another is still installing into.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let partial = parent.join(format!(".{name}-{version}.{}.{call}", std::process::id()));
    let out = install(&partial)
        .output()
        .map_err(|e| format!("cannot run `{what}`: {e}"))?;
    if !out.status.success() || !partial.join(marker).exists() {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(format!(
            "`{what}` failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    if std::fs::rename(&partial, &dir).is_err() {
        // Another process installed it first, or a broken folder is there.
        let _ = std::fs::remove_dir_all(&partial);
        if !dir.join(marker).exists() {
            return Err(format!(
                "{} is there without {marker}: remove it",
                dir.display()
            ));
        }
    }
    Ok(dir)
}
