//! `jobhost new NAME --lang rust|python|js|ts`: each scaffold is built as its
//! output says (the Rust one outside this workspace, on the SDK's own
//! manifest, by path), its own test passes natively, and its job runs on
//! the sample data it came with; each ships its SDK's files as they are.
//! The Rust SDK is a crate of its own: it inherits nothing from the
//! workspace, `cargo package` takes its WIT along, and its version is the
//! Python SDK's.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::harness::*;

/// Runs `jobhost new` in `dir` and returns what it printed.
fn new(dir: &Path, name: &str, lang: &str) -> Run {
    let run = jobhost_in(dir, &["new", name, "--lang", lang]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run
}

/// The command after `label:` in `jobhost new`'s output.
fn said<'a>(out: &'a Run, label: &str) -> &'a str {
    out.stdout
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no `{label}` line in {}", out.stdout))
}

fn ok(what: &str, out: std::process::Output) {
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The job runs the last closed day of its sample data and delivers the
/// totals per region.
fn runs_on_its_sample_data(project: &Path, name: &str) {
    let r = ran(&jobhost_in(project, &["run", "--config", "job.toml"]));
    assert!(r["stats"]["rows"].as_u64().unwrap() > 20, "{r}");
    assert_eq!(
        r["report"]["summary"].as_str().unwrap().split(' ').next(),
        Some("4")
    );
    let out = std::fs::read_to_string(project.join(format!("out/{name}.jsonl"))).unwrap();
    let line: Value = serde_json::from_str(out.trim()).unwrap();
    let message = &line["body"];
    assert_eq!(message["day"], r["window"]["label"]);
    let regions = message["regions"].as_object().unwrap();
    assert_eq!(regions.len(), 4, "{message}");
    assert!(regions.values().all(|v| v.as_f64().unwrap() > 0.0));
    let again = jobhost_in(project, &["run", "--config", "job.toml"]);
    assert_eq!(again.receipt()["reason"], "done", "{}", again.stderr);

    // The other day job.toml suggests is a day of the sample data too.
    let config = std::fs::read_to_string(project.join("job.toml")).unwrap();
    let now = config
        .split("`--now ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("job.toml suggests no --now:\n{config}"));
    let other = jobhost_in(project, &["run", "--config", "job.toml", "--now", now]);
    let r = other.receipt();
    assert_eq!(
        (other.code, r["event"].as_str()),
        (0, Some("ran")),
        "--now {now}: {}\n{}",
        other.stdout,
        other.stderr
    );
    assert!(
        r["stats"]["rows"].as_u64().unwrap() > 20,
        "--now {now}: {r}"
    );
}

/// The README names the SDK folder the project has, and only that one.
fn readme_names_its_own_sdk(project: &Path, has: &str, lacks: &str) {
    let readme = std::fs::read_to_string(project.join("README.md")).unwrap();
    assert!(project.join(has).is_dir(), "{has}");
    assert!(readme.contains(&format!("`{has}`")), "{readme}");
    assert!(!readme.contains(lacks), "{lacks} in:\n{readme}");
}

#[test]
fn the_rust_scaffold_builds_tests_and_runs() {
    let dir = scratch();
    let out = new(dir.path(), "daily-rust", "rust");
    let project = dir.path().join("daily-rust");
    assert_eq!(
        said(&out, "build:"),
        format!(
            "cargo build --release --target wasm32-wasip2 --manifest-path {}/Cargo.toml",
            "./daily-rust"
        )
    );
    // Built as the output says, in a target dir shared between test runs
    // (the dependency, wit-bindgen, is built once).
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let target = root().join("target").join("test-guests").join("scaffold");
    for args in [
        vec!["build", "--release", "--target", "wasm32-wasip2"],
        vec!["test"],
    ] {
        let built = Command::new(&cargo)
            .current_dir(&project)
            .args(&args)
            .arg("--target-dir")
            .arg(&target)
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .output()
            .unwrap();
        ok(&format!("cargo {}", args.join(" ")), built);
    }
    // The config names the component where cargo puts it by default.
    std::fs::create_dir_all(project.join("target/wasm32-wasip2/release")).unwrap();
    std::fs::copy(
        target.join("wasm32-wasip2/release/daily_rust.wasm"),
        project.join("target/wasm32-wasip2/release/daily_rust.wasm"),
    )
    .unwrap();
    runs_on_its_sample_data(&project, "daily-rust");
    readme_names_its_own_sdk(&project, "jobhost-sdk/", "jobhost/` (Python)");
}

#[test]
fn the_python_scaffold_builds_tests_and_runs() {
    let dir = scratch();
    let out = new(dir.path(), "daily-py", "python");
    let project = dir.path().join("daily-py");
    assert!(
        out.stdout.contains("componentize-py==0.25.1"),
        "{}",
        out.stdout
    );
    let bin = jobhost_tests::guests::ensure_componentize_py().unwrap();
    let build = said(&out, "build:");
    let args: Vec<&str> = build
        .split_once("&& componentize-py ")
        .map(|(_, a)| a.split(' ').collect())
        .unwrap_or_else(|| panic!("{build}"));
    let built = Command::new(&bin)
        .current_dir(&project)
        .env("PYTHONPATH", jobhost_tests::guests::componentize_py_dir())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .args(&args)
        .output()
        .unwrap();
    ok("componentize-py", built);
    let tested = Command::new("python3")
        .current_dir(&project)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .args(["-m", "unittest"])
        .output()
        .unwrap();
    ok("python3 -m unittest", tested);
    runs_on_its_sample_data(&project, "daily-py");
    readme_names_its_own_sdk(&project, "jobhost/", "jobhost-sdk");
    // Adding a folder of packages keeps the project's own: built as the
    // README and the justfile say, with a vendor folder, it still finds
    // `app` (`-p vendor` alone does not).
    let readme = std::fs::read_to_string(project.join("README.md")).unwrap();
    let justfile = std::fs::read_to_string(project.join("justfile")).unwrap();
    let vendored = readme
        .lines()
        .find(|l| l.starts_with("componentize-py ") && l.contains("-p vendor"))
        .unwrap_or_else(|| panic!("the README says how to add packages:\n{readme}"));
    assert!(vendored.contains("-p . -p vendor"), "{vendored}");
    assert!(justfile.contains("componentize app -p . -o"), "{justfile}");
    std::fs::create_dir_all(project.join("vendor")).unwrap();
    let args: Vec<&str> = vendored.split(' ').skip(1).collect();
    let built = Command::new(&bin)
        .current_dir(&project)
        .env("PYTHONPATH", jobhost_tests::guests::componentize_py_dir())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .args(&args)
        .output()
        .unwrap();
    ok("componentize-py with -p vendor", built);
}

/// Builds and tests a JavaScript or TypeScript scaffold as its output
/// says (npm fetching the pinned componentize-js and esbuild), and runs its
/// job.
fn js_scaffold_builds_tests_and_runs(lang: &str) {
    let dir = scratch();
    let name = format!("daily-{lang}");
    let out = new(dir.path(), &name, lang);
    let project = dir.path().join(&name);
    assert!(
        said(&out, "build:").ends_with("npm install && npm run build"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("componentize-js 0.23.0"),
        "{}",
        out.stdout
    );
    let npm = |args: &[&str]| {
        Command::new("npm")
            .current_dir(&project)
            .args(args)
            .output()
            .expect("npm runs (install Node.js 20 or later and npm)")
    };
    ok(
        "npm install",
        npm(&[
            "install",
            "--prefer-offline",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
        ]),
    );
    ok("npm run build", npm(&["run", "build"]));
    let tested = npm(&["test"]);
    let stdout = String::from_utf8_lossy(&tested.stdout).into_owned();
    ok("npm test", tested);
    assert!(stdout.contains("# pass 2"), "{stdout}");
    runs_on_its_sample_data(&project, &name);
    readme_names_its_own_sdk(&project, "jobhost/", "jobhost-sdk");
    if lang == "ts" {
        // The build checks the report's types against the SDK's.
        let app = project.join("app.ts");
        let text = std::fs::read_to_string(&app).unwrap();
        std::fs::write(
            &app,
            format!("{text}\nexport const rows: number = jobhost.open();\n"),
        )
        .unwrap();
        let refused = npm(&["run", "build"]);
        let said = String::from_utf8_lossy(&refused.stdout).into_owned();
        assert!(!refused.status.success(), "{said}");
        assert!(
            said.contains("error TS2322: Type 'Source' is not assignable to type 'number'"),
            "{said}"
        );
    }
}

#[test]
fn the_typescript_scaffold_builds_tests_and_runs() {
    js_scaffold_builds_tests_and_runs("ts");
}

#[test]
fn the_javascript_scaffold_builds_tests_and_runs() {
    js_scaffold_builds_tests_and_runs("js");
}

#[test]
fn new_refuses_a_bad_name_and_an_existing_folder() {
    let dir = scratch();
    for bad in ["Daily", "9lives", "a/b", "../up", ""] {
        let run = jobhost_in(dir.path(), &["new", bad]);
        assert_eq!(run.code, 2, "{bad}: {}", run.stderr);
        assert!(
            run.stderr.contains("cannot name a report"),
            "{}",
            run.stderr
        );
    }
    for taken in ["jobhost-sdk", "jobhost_sdk"] {
        let run = jobhost_in(dir.path(), &["new", taken]);
        assert_eq!(run.code, 2, "{taken}: {}", run.stderr);
        assert!(run.stderr.contains("pick another name"), "{}", run.stderr);
    }
    // A folder with a space: the printed commands work when pasted.
    let spaced = dir.path().join("my reports");
    let out = jobhost_in(dir.path(), &["new", "r", "--dir", s(&spaced)]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        said(&out, "run:").ends_with(&format!("'{}/r/job.toml'", spaced.display())),
        "{}",
        out.stdout
    );
    new(dir.path(), "twice", "rust");
    let run = jobhost_in(dir.path(), &["new", "twice", "--lang", "python"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("exists already"), "{}", run.stderr);
    assert!(
        dir.path().join("twice/Cargo.toml").exists(),
        "the existing project is untouched"
    );
}

/// Every file under `dir`, as `(path from dir, text)`, sorted; what `skip`
/// says to leave out (by path from dir) left out.
fn files_under(dir: &Path, skip: &dyn Fn(&str) -> bool) -> Vec<(String, String)> {
    fn walk(base: &Path, dir: &Path, skip: &dyn Fn(&str) -> bool, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(base)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if skip(&rel) || rel.ends_with("__pycache__") {
                continue;
            }
            if path.is_dir() {
                walk(base, &path, skip, out);
            } else {
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, skip, &mut out);
    out.sort();
    out
}

#[test]
fn the_scaffolds_ship_each_sdk_as_it_is() {
    let dir = scratch();
    new(dir.path(), "r", "rust");
    new(dir.path(), "p", "python");
    // Rust: the crate (its manifest, README, WIT and sources) but its unit
    // tests, which read the repository's fixtures.
    let mut rust = files_under(&root().join("sdk/rust"), &|p| {
        p == "src/tests" || p == "src/tests.rs" || p == "target"
    });
    for (path, text) in &mut rust {
        if path == "src/lib.rs" {
            *text = text.replace("#[cfg(test)]\nmod tests;\n", "");
        }
    }
    let shipped = files_under(&dir.path().join("r/jobhost-sdk"), &|_| false);
    let names = |files: &[(String, String)]| -> Vec<String> {
        files.iter().map(|(p, _)| p.clone()).collect()
    };
    assert_eq!(names(&shipped), names(&rust), "the Rust SDK's files");
    for ((path, shipped), (_, sdk)) in shipped.iter().zip(&rust) {
        assert!(shipped == sdk, "jobhost-sdk/{path} is not sdk/rust/{path}");
    }
    // Python: the package's modules and py.typed (not its pyproject.toml:
    // a project imports its copy from beside its app).
    let python = files_under(&root().join("sdk/python/jobhost"), &|_| false);
    let shipped = files_under(&dir.path().join("p/jobhost"), &|_| false);
    assert_eq!(names(&shipped), names(&python), "the Python SDK's files");
    for ((path, shipped), (_, sdk)) in shipped.iter().zip(&python) {
        assert!(
            shipped == sdk,
            "jobhost/{path} is not sdk/python/jobhost/{path}"
        );
    }
    assert!(!dir.path().join("p/pyproject.toml").exists());
    // JavaScript and TypeScript: the package (its manifest, README and
    // modules) but its tests, which read the repository's fixtures.
    new(dir.path(), "j", "js");
    new(dir.path(), "t", "ts");
    let js = files_under(&root().join("sdk/js"), &|p| {
        p == "test" || p == "node_modules"
    });
    for project in ["j", "t"] {
        let shipped = files_under(&dir.path().join(project).join("jobhost"), &|_| false);
        assert_eq!(names(&shipped), names(&js), "the JavaScript SDK's files");
        for ((path, shipped), (_, sdk)) in shipped.iter().zip(&js) {
            assert!(
                shipped == sdk,
                "{project}/jobhost/{path} is not sdk/js/{path}"
            );
        }
    }
}

#[test]
fn the_sdks_share_a_version_and_the_rust_one_inherits_nothing() {
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(root().join("sdk/rust/Cargo.toml")).unwrap())
            .unwrap();
    let workspace: toml::Table =
        toml::from_str(&std::fs::read_to_string(root().join("Cargo.toml")).unwrap()).unwrap();
    // Nothing `.workspace = true`: the folder is a crate wherever it is.
    let inherited: Vec<String> = ["package", "dependencies", "dev-dependencies"]
        .iter()
        .flat_map(|section| {
            manifest[*section]
                .as_table()
                .unwrap()
                .iter()
                .filter(|(_, v)| v.get("workspace").is_some())
                .map(move |(k, _)| format!("{section}.{k}"))
        })
        .collect();
    assert!(
        inherited.is_empty(),
        "inherited from the workspace: {inherited:?}"
    );
    let package = manifest["package"].as_table().unwrap();
    for key in [
        "description",
        "license",
        "readme",
        "edition",
        "rust-version",
    ] {
        assert!(package[key].is_str(), "sdk/rust/Cargo.toml: package.{key}");
    }
    // The same wit-bindgen as the workspace's guests.
    assert_eq!(
        manifest["dependencies"]["wit-bindgen"],
        workspace["workspace"]["dependencies"]["wit-bindgen"]
    );
    // One version for both SDKs.
    let init = std::fs::read_to_string(root().join("sdk/python/jobhost/__init__.py")).unwrap();
    let python = init
        .lines()
        .find_map(|l| l.strip_prefix("__version__ = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("__version__ in jobhost/__init__.py");
    assert_eq!(package["version"].as_str(), Some(python));
    let js: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("sdk/js/package.json")).unwrap())
            .unwrap();
    assert_eq!(js["version"].as_str(), Some(python));
    let index = std::fs::read_to_string(root().join("sdk/js/src/index.js")).unwrap();
    assert!(
        index.contains(&format!("export const VERSION = '{python}';")),
        "sdk/js/src/index.js"
    );
}

#[test]
fn the_rust_sdk_packages_as_a_crate_with_its_wit() {
    // What a registry would take: the WIT its bindings are made from is in
    // it (a link to the repository's, followed), the unit tests are not.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let target = scratch();
    let out = Command::new(cargo)
        .current_dir(root())
        .args([
            "package",
            "-p",
            "jobhost-sdk",
            "--list",
            "--allow-dirty",
            "--offline",
        ])
        .arg("--target-dir")
        .arg(target.path())
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let files: Vec<&str> = listed.lines().collect();
    for want in [
        "Cargo.toml",
        "README.md",
        "wit/report.wit",
        "src/lib.rs",
        "src/bindings.rs",
    ] {
        assert!(files.contains(&want), "{want} is not packaged: {files:?}");
    }
    assert!(
        !files.iter().any(|f| f.starts_with("src/tests")),
        "the unit tests are packaged: {files:?}"
    );
}
