//! Embeds the SDKs `jobhost new` copies into a new project: the Rust SDK's
//! manifest and README and every source file of `sdk/rust/src` (its unit
//! tests aside), every module of `sdk/python/jobhost`, and the JavaScript
//! SDK's package (`sdk/js`: its manifest, README and modules), found here
//! rather than listed by hand, so a file added to an SDK ships without
//! another change. The Python SDK's `pyproject.toml` is not shipped: a
//! project imports its copy of `jobhost` from beside its app, and is no
//! package of the SDK.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

include!("build_link.rs");

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    link_executable(None, &manifest.join("hot-text.ld"));
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"))
        .join("..")
        .join("sdk");
    let mut out = String::new();
    embed(
        &mut out,
        "RUST_SDK_CRATE",
        "The Rust SDK's manifest and README, as `(path in the SDK, text)`.",
        &root.join("rust"),
        |name| name == "Cargo.toml" || name == "README.md",
    );
    embed(
        &mut out,
        "RUST_SDK",
        "The Rust SDK's sources, as `(path in the SDK's src/, text)`.",
        &root.join("rust/src"),
        |name| name.ends_with(".rs") && name != "tests.rs",
    );
    embed(
        &mut out,
        "PYTHON_SDK",
        "The Python SDK's modules, as `(path in the package, text)`.",
        &root.join("python/jobhost"),
        |name| name.ends_with(".py") || name == "py.typed",
    );
    embed(
        &mut out,
        "JS_SDK",
        "The JavaScript SDK's modules, as `(path in its src/, text)`.",
        &root.join("js/src"),
        |name| name.ends_with(".js") || name.ends_with(".d.ts"),
    );
    embed(
        &mut out,
        "JS_SDK_TESTING",
        "The JavaScript SDK's fake host for native tests, as `(path in src/testing/, text)`.",
        &root.join("js/src/testing"),
        |name| name.ends_with(".js"),
    );
    embed(
        &mut out,
        "JS_SDK_PACKAGE",
        "The JavaScript SDK's package.json and README, as `(path in the SDK, text)`.",
        &root.join("js"),
        |name| name == "package.json" || name == "README.md",
    );
    let dest = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo")).join("sdk.rs");
    std::fs::write(&dest, out).expect("write the SDK list");
}

/// Writes `const NAME: &[(&str, &str)]` of the files directly in `dir`
/// that `wanted` keeps, in name order, and asks cargo to run this again
/// when any of them, or the folder's list of files, changes.
fn embed(out: &mut String, name: &str, doc: &str, dir: &Path, wanted: impl Fn(&str) -> bool) {
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("a folder entry"))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let file = e.file_name().into_string().ok()?;
            wanted(&file).then(|| (file, e.path()))
        })
        .collect();
    files.sort();
    let _ = writeln!(out, "/// {doc}\nconst {name}: &[(&str, &str)] = &[");
    for (file, path) in files {
        let path = path.canonicalize().expect("an SDK file");
        let _ = writeln!(
            out,
            "    ({file:?}, include_str!({:?})),",
            path.display().to_string()
        );
    }
    let _ = writeln!(out, "];");
}
