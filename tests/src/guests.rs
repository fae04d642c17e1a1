//! Builds the WebAssembly guests the tests and benchmarks run, with a nested
//! cargo into a target dir of their own: a nested cargo on the outer target
//! dir would wait forever for the lock the outer cargo holds.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

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
    /// A report counting rows by local hour, with the SDK's `Window::local`.
    pub local_hours: PathBuf,
    /// A report built against `jobhost:report@0.1.0`, before `zone`.
    pub past_world: PathBuf,
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
            "-p",
            "local-hours",
            "-p",
            "past-world",
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
        local_hours: dir.join("local_hours.wasm"),
        past_world: dir.join("past_world.wasm"),
    })
}

/// The componentize-py release the Python guests are built with.
pub const COMPONENTIZE_PY: &str = "0.25.1";

/// Where componentize-py is installed: a folder of the build, never the
/// system's Python.
pub fn componentize_py_dir() -> PathBuf {
    workspace_root()
        .join("target")
        .join("tools")
        .join(format!("componentize-py-{COMPONENTIZE_PY}"))
}

/// Installs the pinned componentize-py into [`componentize_py_dir`] with
/// pip unless it is there (`.ci/run` does the same first).
///
/// # Errors
///
/// pip's output when it cannot install it (no `python3`, no network).
pub fn ensure_componentize_py() -> Result<PathBuf, String> {
    let dir = componentize_py_dir();
    let bin = dir.join("bin").join("componentize-py");
    if bin.exists() {
        return Ok(bin);
    }
    // Install beside, then rename: a second process never sees half of it.
    let partial = dir.with_extension(format!("partial-{}", std::process::id()));
    let out = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg("--target")
        .arg(&partial)
        .arg(format!("componentize-py=={COMPONENTIZE_PY}"))
        .output()
        .map_err(|e| format!("cannot run python3 to install componentize-py: {e}"))?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(format!(
            "`python3 -m pip install componentize-py=={COMPONENTIZE_PY}` failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if std::fs::rename(&partial, &dir).is_err() {
        // Another process installed it first.
        let _ = std::fs::remove_dir_all(&partial);
    }
    Ok(bin)
}

/// A Python guest to build: its app folder and module, and the world.
#[derive(Debug, Clone, Copy)]
pub struct PythonGuest<'a> {
    /// The output file's name (`guest_python` gives `guest_python.wasm`).
    pub name: &'a str,
    /// The folder holding the app module (relative to the workspace root).
    pub app_dir: &'a str,
    /// The module that defines the export.
    pub module: &'a str,
    /// The WIT world.
    pub world: &'a str,
}

/// The reference report in Python.
pub const PYTHON_REPORT: PythonGuest<'static> = PythonGuest {
    name: "guest_python",
    app_dir: "guest-python",
    module: "app",
    world: "describing-reporter",
};

/// The Python sandbox probe (behaviour chosen by the param `probe`).
pub const PYTHON_PROBE: PythonGuest<'static> = PythonGuest {
    name: "python_probe",
    app_dir: "tests/guests/python-probe",
    module: "app",
    world: "describing-reporter",
};

/// The Python twin of the `local-hours` guest: rows by local hour.
pub const PYTHON_LOCAL_HOURS: PythonGuest<'static> = PythonGuest {
    name: "python_local_hours",
    app_dir: "tests/guests/python-local-hours",
    module: "app",
    world: "reporter",
};

/// Builds a Python guest with componentize-py into `out_dir`, once per
/// version of its sources: the output is kept under the sha256 of the app
/// folder, the SDK, the WIT and the componentize-py version, so an
/// unchanged guest is never built twice (a build takes 10-30 s).
///
/// # Errors
///
/// Why componentize-py could not be installed or the build failed.
pub fn build_python(guest: &PythonGuest<'_>, out_dir: &Path) -> Result<PathBuf, String> {
    let root = workspace_root();
    let app = root.join(guest.app_dir);
    let sdk = root.join("sdk").join("python");
    let wit = root.join("wit");
    let salt = format!("{COMPONENTIZE_PY}\0{}\0{}\0", guest.module, guest.world);
    let out = built_path(&salt, &[&app, &sdk, &wit], out_dir, guest.name)?;
    if out.exists() {
        return Ok(out);
    }
    let bin = ensure_componentize_py()?;
    let dir = out.parent().unwrap_or(out_dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let partial = dir.join(format!(".{}.{}.wasm", guest.name, std::process::id()));
    let built = Command::new(&bin)
        .current_dir(&root)
        .env("PYTHONPATH", componentize_py_dir())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg("-d")
        .arg(&wit)
        .args(["-w", guest.world, "componentize", guest.module])
        .arg("-p")
        .arg(&app)
        .arg("-p")
        .arg(&sdk)
        .arg("-o")
        .arg(&partial)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    if !built.status.success() {
        let _ = std::fs::remove_file(&partial);
        return Err(format!(
            "componentize-py could not build {}:\n{}{}",
            guest.app_dir,
            String::from_utf8_lossy(&built.stdout),
            String::from_utf8_lossy(&built.stderr)
        ));
    }
    std::fs::rename(&partial, &out).map_err(|e| format!("cannot keep {}: {e}", out.display()))?;
    Ok(out)
}

/// The componentize-js release the JavaScript guests are built with.
pub const COMPONENTIZE_JS: &str = "0.23.0";

/// The esbuild release that bundles a JavaScript or TypeScript report and
/// its SDK into the one module componentize-js takes.
pub const ESBUILD: &str = "0.28.2";

/// Where componentize-js and esbuild are installed: a folder of the build,
/// never the system's node_modules.
pub fn js_tools_dir() -> PathBuf {
    crate::tools::tool_dir(&js_tools_name(), ESBUILD)
}

/// The tools folder's name without its last version: both pins name it.
fn js_tools_name() -> String {
    format!("js-componentize-{COMPONENTIZE_JS}-esbuild")
}

/// Installs the pinned componentize-js and esbuild into [`js_tools_dir`]
/// with npm unless they are there (`.ci/run` does the same first).
///
/// # Errors
///
/// npm's output when it cannot install them (no npm, no registry).
pub fn ensure_js_tools() -> Result<PathBuf, String> {
    let packages = [
        format!("@bytecodealliance/componentize-js@{COMPONENTIZE_JS}"),
        format!("esbuild@{ESBUILD}"),
    ];
    crate::tools::ensure_with(
        &js_tools_name(),
        ESBUILD,
        "node_modules/.bin/esbuild",
        &format!("npm install {}", packages.join(" ")),
        |folder| {
            let mut cmd = Command::new("npm");
            cmd.args([
                "install",
                "--no-audit",
                "--no-fund",
                "--no-save",
                "--loglevel=error",
            ])
            .arg("--prefix")
            .arg(folder)
            .args(&packages);
            cmd
        },
    )
}

/// A JavaScript or TypeScript guest to build: its folder, entry module and
/// the WIT world.
#[derive(Debug, Clone, Copy)]
pub struct JsGuest<'a> {
    /// The output file's name (`guest_js` gives `guest_js.wasm`).
    pub name: &'a str,
    /// The folder holding the report (relative to the workspace root).
    pub app_dir: &'a str,
    /// The module that exports `run` (and `describe`).
    pub entry: &'a str,
    /// The WIT world.
    pub world: &'a str,
}

/// The reference report in JavaScript.
pub const JS_REPORT: JsGuest<'static> = JsGuest {
    name: "guest_js",
    app_dir: "guest-js",
    entry: "app.js",
    world: "describing-reporter",
};

/// Bundles a JavaScript or TypeScript report with the SDK (esbuild) and
/// makes it a component (componentize-js) in `out_dir`, once per version
/// of its sources, as [`build_python`] does.
///
/// # Errors
///
/// Why the tools could not be installed or the build failed.
pub fn build_js(guest: &JsGuest<'_>, out_dir: &Path) -> Result<PathBuf, String> {
    let root = workspace_root();
    let app = root.join(guest.app_dir);
    let sdk = root.join("sdk").join("js").join("src");
    let wit = root.join("wit");
    let salt = format!(
        "{COMPONENTIZE_JS}\0{ESBUILD}\0{}\0{}\0",
        guest.entry, guest.world
    );
    let out = built_path(&salt, &[&app, &sdk, &wit], out_dir, guest.name)?;
    if out.exists() {
        return Ok(out);
    }
    let tools = ensure_js_tools()?;
    let dir = out.parent().unwrap_or(out_dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let bundle = dir.join(format!(".{}.{}.js", guest.name, std::process::id()));
    let partial = dir.join(format!(".{}.{}.wasm", guest.name, std::process::id()));
    let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
        let done = cmd
            .current_dir(&root)
            .output()
            .map_err(|e| format!("cannot run {what}: {e}"))?;
        if done.status.success() {
            return Ok(());
        }
        let _ = std::fs::remove_file(&bundle);
        let _ = std::fs::remove_file(&partial);
        Err(format!(
            "{what} could not build {}:\n{}{}",
            guest.app_dir,
            String::from_utf8_lossy(&done.stdout),
            String::from_utf8_lossy(&done.stderr)
        ))
    };
    run(
        Command::new(tools.join("node_modules").join(".bin").join("esbuild"))
            .arg(app.join(guest.entry))
            .args([
                "--bundle",
                "--format=esm",
                "--platform=neutral",
                "--log-level=warning",
            ])
            .arg("--external:jobhost:*")
            .arg(format!(
                "--alias:jobhost={}",
                sdk.join("index.js").display()
            ))
            .arg(format!("--outfile={}", bundle.display())),
        "esbuild",
    )?;
    run(
        Command::new("node")
            .arg(
                tools
                    .join("node_modules")
                    .join("@bytecodealliance")
                    .join("componentize-js")
                    .join("src")
                    .join("cli.js"),
            )
            .arg(&bundle)
            .arg("-w")
            .arg(&wit)
            .args(["-n", guest.world, "-d", "http", "fetch-event", "-o"])
            .arg(&partial),
        "componentize-js",
    )?;
    let _ = std::fs::remove_file(&bundle);
    std::fs::rename(&partial, &out).map_err(|e| format!("cannot keep {}: {e}", out.display()))?;
    Ok(out)
}

/// Where the guest `name` built from `sources` (with `salt`: the tools'
/// versions and the build's settings) is kept in `out_dir`: under the
/// sha256 of all of them, so an unchanged guest is never built twice.
fn built_path(
    salt: &str,
    sources: &[&Path],
    out_dir: &Path,
    name: &str,
) -> Result<PathBuf, String> {
    let mut hasher = Sha256::new();
    hasher.update(salt.as_bytes());
    for dir in sources {
        hash_tree(dir, dir, &mut hasher)?;
    }
    let key = hex::encode(hasher.finalize());
    Ok(out_dir.join(&key[..16]).join(format!("{name}.wasm")))
}

/// Feeds every file under `dir` (sorted, caches left out) into `hasher`.
fn hash_tree(base: &Path, dir: &Path, hasher: &mut Sha256) -> Result<(), String> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name == "__pycache__"
            || name.ends_with(".pyc")
            || name == "tests"
            || name == "test"
            || name == "node_modules"
        {
            continue;
        }
        if path.is_dir() {
            hash_tree(base, &path, hasher)?;
        } else {
            let rel = path.strip_prefix(base).unwrap_or(&path);
            let bytes =
                std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            hasher.update(rel.to_string_lossy().as_bytes());
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(&bytes);
        }
    }
    Ok(())
}
