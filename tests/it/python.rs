//! Reports written in Python (componentize-py): the reference report gives
//! the Rust reference's figures and message byte for byte, runs, skips,
//! replays and swaps with it; a Python report gets nothing from the
//! sandbox; its exceptions read as its own in the receipt; the SDK's
//! permanent error is not retried.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::*;

/// A job over `sales.db` in `dir` with `component` (see [`reference_job`]).
fn job(dir: &Path, tag: &str, component: &Path, extra: &str) -> PathBuf {
    reference_job(dir, tag, component, extra, (128, 30))
}

#[test]
fn the_python_reference_gives_the_rust_figures_and_message_byte_for_byte() {
    gives_the_rust_references_output(&python_guests().report, "python", (128, 30));
}

#[test]
fn a_python_report_runs_skips_replays_and_swaps_with_the_rust_one() {
    runs_skips_replays_and_swaps_with_the_rust_one(&python_guests().report, (128, 30));
}

fn probe(dir: &Path, what: &str) -> (Run, PathBuf) {
    sales_db(dir, 200);
    let cfg = job(
        dir,
        what,
        &python_guests().probe,
        &format!("[params]\nprobe = \"{what}\"\n"),
    );
    let store = dir.join(format!("{what}.db"));
    (run_job(&cfg, &store, "2026-11-05T00:05:00Z"), store)
}

#[test]
fn a_python_report_gets_nothing_from_the_sandbox() {
    let dir = scratch();
    let (run, _) = probe(dir.path(), "escape");
    let r = ran(&run);
    let got: Value = serde_json::from_str(r["report"]["summary"].as_str().unwrap()).unwrap();
    for attempt in [
        "open('/etc/passwd')",
        "os.listdir('/')",
        "socket.create_connection(('127.0.0.1', 5432))",
        "socket.socket().connect(('127.0.0.1', 5432))",
        "urllib.request.urlopen('http://127.0.0.1:8080/')",
    ] {
        assert!(
            got[attempt]["error"].is_string(),
            "{attempt} must fail inside the sandbox: {}",
            got[attempt]
        );
    }
    let environ = &got["os.environ"];
    assert!(
        environ["ok"] == "{}" || environ["error"].is_string(),
        "the host's environment is not the guest's: {environ}"
    );
    assert!(
        !run.stdout.contains("root:") && !r.to_string().contains("root:x:0"),
        "nothing of /etc/passwd"
    );
    // The guest's clock is the run's: the wall clock reads `now`.
    assert_eq!(
        got["time.time()"]["ok"], 1_793_837_100.0,
        "{}",
        got["time.time()"]
    );
}

#[test]
fn an_uncaught_python_exception_names_its_type_message_and_line() {
    let dir = scratch();
    let (run, store) = probe(dir.path(), "raise");
    let r = failed(&run);
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "the report raised an uncaught Python exception: ValueError: bad row 7: amount is negative (at app.py, line "
        ),
        "{message}"
    );
    assert_eq!(r["error"]["kind"], "guest-trap");
    assert_eq!(r["error"]["retryable"], false);
    assert!(
        run.stderr.contains("Traceback (most recent call last):"),
        "{}",
        run.stderr
    );
    let rows = history(&store);
    assert_eq!(rows[0]["state"], "FAILED", "{rows:?}");
}

#[test]
fn a_permanent_error_from_the_python_sdk_is_not_retried() {
    let dir = scratch();
    let (run, store) = probe(dir.path(), "invalid");
    let r = failed(&run);
    assert_eq!(
        r["error"]["message"],
        "the report refused the data: region is missing"
    );
    assert_eq!(r["error"]["retryable"], false);
    let rows = history(&store);
    assert_eq!(rows[0]["state"], "FAILED", "{rows:?}");
}

#[test]
fn inside_a_component_the_hosts_refusals_reach_a_python_report_as_their_cases() {
    // The SDK tells the generated classes of each refusal apart (by class,
    // not by name): each arrives as its own case and wording, none as
    // "unknown".
    let dir = scratch();
    let (run, _) = probe(dir.path(), "host-errors");
    let r = ran(&run);
    let got: Value = serde_json::from_str(r["report"]["summary"].as_str().unwrap()).unwrap();
    let send = |case: &str, message: &str| serde_json::json!({"error": "SendFailed", "case": case, "message": message});
    assert_eq!(
        got,
        serde_json::json!({
            "unknown-destination": send("unknown-destination", "unknown destination `nowhere`"),
            "invalid-content-type": send("invalid-content-type", "invalid content type `plain`"),
            "too-large": send("too-large", "body is larger than 4194304 bytes"),
            "too-many-messages": send(
                "too-many-messages",
                "the run already staged the maximum of 100 messages"
            ),
            "open-twice": {
                "error": "SourceFailed",
                "case": null,
                "message": "invalid state: a cursor is already open; drop it before opening another"
            },
        }),
        "{}",
        run.stderr
    );
}

/// Runs `python3 -m unittest` with `args` from the workspace root; the
/// number of tests it ran.
fn unittest(args: &[&str]) -> u32 {
    let out = std::process::Command::new("python3")
        .current_dir(root())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .args(["-m", "unittest"])
        .args(args)
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("Ran ")?
                .split(' ')
                .next()?
                .parse::<u32>()
                .ok()
        })
        .unwrap_or(0)
}

#[test]
fn the_python_sdk_and_reference_unit_tests_pass_natively() {
    let sdk = unittest(&["discover", "-s", "sdk/python/tests", "-t", "sdk/python"]);
    assert!(sdk >= 40, "the SDK's tests ran ({sdk})");
    let report = unittest(&["discover", "-s", "guest-python/tests"]);
    assert!(report >= 20, "the reference report's tests ran ({report})");
}

/// The command that prints a missing pinned Python tool's install.
fn install_hint(folder: &Path, requirement: &str) -> String {
    format!(
        "run .ci/run, or: python3 -m pip install --target {} {requirement}",
        folder.display()
    )
}

#[test]
fn the_python_sdk_and_reference_pass_a_strict_type_check() {
    let test = "python::the_python_sdk_and_reference_pass_a_strict_type_check";
    let mypy = jobhost_tests::tools::MYPY;
    let lib = match jobhost_tests::tools::ensure_mypy() {
        Ok(lib) => lib,
        Err(why) => {
            let dir = jobhost_tests::tools::tool_dir("mypy", mypy);
            return jobhost_tests::skip::missing(
                test,
                &format!("mypy {mypy} is not installed and cannot be: {why}"),
                &install_hint(&dir, &format!("mypy=={mypy}")),
            );
        }
    };
    // The bindings componentize-py generates from the WIT: with them on
    // the path, the SDK's calls into them and the generated classes it
    // names are checked too.
    let cpy = match jobhost_tests::guests::ensure_componentize_py() {
        Ok(bin) => bin,
        Err(why) => {
            return jobhost_tests::skip::missing(
                test,
                &why,
                &install_hint(
                    &jobhost_tests::guests::componentize_py_dir(),
                    "componentize-py==0.25.1",
                ),
            );
        }
    };
    let work = root().join("target").join("test-guests").join("mypy");
    let bindings = work.join("bindings");
    let _ = std::fs::remove_dir_all(&bindings);
    let generated = std::process::Command::new(&cpy)
        .env("PYTHONPATH", jobhost_tests::guests::componentize_py_dir())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg("-d")
        .arg(root().join("wit"))
        .args(["-w", "describing-reporter", "bindings"])
        .arg(&bindings)
        .output()
        .unwrap();
    assert!(
        generated.status.success() && bindings.join("wit_world/imports/source.py").is_file(),
        "componentize-py bindings: {}",
        String::from_utf8_lossy(&generated.stderr)
    );
    // Each folder's pyproject.toml says what is checked, and how strictly.
    for (folder, at_least) in [("sdk/python", 15), ("guest-python", 6)] {
        let out = std::process::Command::new("python3")
            .current_dir(root().join(folder))
            .env("PYTHONPATH", &lib)
            .env("MYPYPATH", &bindings)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .args(["-m", "mypy", "--no-color-output", "--cache-dir"])
            .arg(work.join("cache").join(folder))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "mypy {mypy} finds type errors in {folder}:\n{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let checked: u32 = stdout
            .trim()
            .strip_prefix("Success: no issues found in ")
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{folder}: {stdout}"));
        assert!(
            checked >= at_least,
            "{folder}: {checked} files checked: {stdout}"
        );
    }
}

/// Copies the files of `from` into `to`, caches left out.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "__pycache__" || name == "build" || name.to_string_lossy().ends_with(".egg-info")
        {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &to.join(&name));
        } else {
            std::fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}

#[test]
fn the_python_sdk_installs_with_pip_into_a_fresh_venv_as_jobhost_new_ships_it() {
    let test = "python::the_python_sdk_installs_with_pip_into_a_fresh_venv_as_jobhost_new_ships_it";
    let setuptools = jobhost_tests::tools::SETUPTOOLS;
    let wheels = match jobhost_tests::tools::ensure_setuptools_wheel() {
        Ok(wheels) => wheels,
        Err(why) => {
            let dir = jobhost_tests::tools::tool_dir("setuptools", setuptools);
            return jobhost_tests::skip::missing(
                test,
                &format!("setuptools {setuptools}'s wheel is not here and cannot be: {why}"),
                &format!(
                    "run .ci/run, or: python3 -m pip download --no-deps --dest {} setuptools=={setuptools}",
                    dir.display()
                ),
            );
        }
    };
    let dir = scratch();
    // A copy of the folder: pip builds in the folder it is given (build/,
    // jobhost.egg-info/), and the repository's stays as it is.
    let sdk = dir.path().join("python-sdk");
    copy_tree(&root().join("sdk/python"), &sdk);
    let venv = dir.path().join("venv");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .unwrap();
    if !made.status.success() {
        return jobhost_tests::skip::missing(
            test,
            &format!(
                "python3 cannot make a venv: {}",
                String::from_utf8_lossy(&made.stderr).trim()
            ),
            "Debian: apt-get install python3-venv",
        );
    }
    let python = venv.join("bin").join("python");
    // `pip install <the folder>`, with setuptools from a folder instead of
    // an index: the build needs nothing else.
    let installed = std::process::Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-index",
            "--find-links",
        ])
        .arg(&wheels)
        .arg(&sdk)
        .output()
        .unwrap();
    assert!(
        installed.status.success(),
        "pip install: {}{}",
        String::from_utf8_lossy(&installed.stdout),
        String::from_utf8_lossy(&installed.stderr)
    );
    // Imported from the venv (not from a folder beside it), with the
    // version it says, and a report runs on it natively.
    let script = r#"
import importlib.metadata, json, pathlib
import jobhost
from jobhost import testing

class Count(jobhost.Report):
    def run(self, ctx):
        with jobhost.open() as source:
            rows = sum(len(b) for b in source.batches())
        return jobhost.Output(f"{rows} rows")

package = pathlib.Path(jobhost.__file__).parent
files = sorted(str(f.relative_to("jobhost")) for f in importlib.metadata.files("jobhost")
               if f.parts[0] == "jobhost" and "__pycache__" not in f.parts)
result = testing.Host(batches=[testing.builder(n=[1, 2, 3])]).run(Count)
print(json.dumps({
    "package": str(package),
    "version": importlib.metadata.version("jobhost"),
    "__version__": jobhost.__version__,
    "files": files,
    "summary": result.output.summary,
}))
"#;
    let out = std::process::Command::new(&python)
        .current_dir(dir.path())
        .env_remove("PYTHONPATH")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .args(["-c", script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        Path::new(got["package"].as_str().unwrap()).starts_with(&venv),
        "{got}"
    );
    assert_eq!(got["version"], got["__version__"], "{got}");
    assert_eq!(got["summary"], "3 rows", "{got}");
    // The package holds what `jobhost new` ships, py.typed among them.
    let mut shipped = jobhost::app::new::sdk_files(jobhost::app::new::Lang::Python);
    shipped.sort_unstable();
    let files: Vec<&str> = got["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert_eq!(
        files, shipped,
        "the installed package is the SDK `jobhost new` ships"
    );
    assert!(files.contains(&"py.typed"), "{files:?}");
}
