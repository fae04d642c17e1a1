//! Builds the WebAssembly guests the tests and benchmarks run, with a nested
//! cargo into a target dir of their own: a nested cargo on the outer target
//! dir would wait forever for the lock the outer cargo holds.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Paths of the built guests.
#[derive(Debug, Clone)]
pub struct Guests {
    /// The reference daily sales report.
    pub report: PathBuf,
    /// The sandbox probe (behaviour chosen by the job name).
    pub probe: PathBuf,
    /// A component of another world.
    pub other_world: PathBuf,
    /// A second report for the same world: top products by revenue.
    pub top_products: PathBuf,
    /// A component for a later major version of the report world.
    pub future_world: PathBuf,
    /// A guest that attacks the host through what it hands over (behaviour
    /// chosen by the job name, sized by its params).
    pub hostile: PathBuf,
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Builds every guest in release mode for wasm32-wasip2 into `target_dir`.
///
/// # Errors
///
/// Cargo's stderr when the build fails.
pub fn build(target_dir: &Path) -> Result<Guests, String> {
    match build_once(target_dir) {
        // rust-toolchain.toml lists the target, but rustup adds listed
        // targets only when it installs the toolchain: a machine that had
        // the toolchain already lacks it. Add it once and build again.
        Err(e) if e.contains("target may not be installed") => {
            let added = Command::new("rustup")
                .args(["target", "add", "wasm32-wasip2"])
                .current_dir(workspace_root())
                .output()
                .map_err(|err| format!("{e}\ncannot run rustup to add the target: {err}"))?;
            if !added.status.success() {
                return Err(format!(
                    "{e}\n`rustup target add wasm32-wasip2` failed:\n{}",
                    String::from_utf8_lossy(&added.stderr)
                ));
            }
            build_once(target_dir)
        }
        other => other,
    }
}

fn build_once(target_dir: &Path) -> Result<Guests, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .current_dir(workspace_root())
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .args([
            "-p",
            "guest-report",
            "-p",
            "sandbox-probe",
            "-p",
            "other-world",
            "-p",
            "guest-top-products",
            "-p",
            "future-world",
            "-p",
            "hostile",
        ])
        .arg("--target-dir")
        .arg(target_dir)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let dir = target_dir.join("wasm32-wasip2").join("release");
    Ok(Guests {
        report: dir.join("guest_report.wasm"),
        probe: dir.join("sandbox_probe.wasm"),
        other_world: dir.join("other_world.wasm"),
        top_products: dir.join("guest_top_products.wasm"),
        future_world: dir.join("future_world.wasm"),
        hostile: dir.join("hostile.wasm"),
    })
}
