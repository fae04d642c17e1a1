//! Shared test plumbing: guests built once per test process into their own
//! target dir, a temporary folder per test, and a runner for the binary.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

/// The workspace root.
pub fn root() -> PathBuf {
    jobhost_tests::guests::workspace_root()
}

/// Where test guests and the shared compile cache live.
fn guest_target() -> PathBuf {
    root().join("target").join("test-guests")
}

/// The compile cache shared by every test process (keyed by component and
/// engine, so sharing is safe).
pub fn cache_dir() -> PathBuf {
    guest_target().join("compile-cache")
}

pub use jobhost_tests::guests::Guests;

/// Test guests, built once per test process.
pub fn guests() -> &'static Guests {
    static GUESTS: OnceLock<Guests> = OnceLock::new();
    GUESTS.get_or_init(|| {
        jobhost_tests::guests::build(&guest_target())
            .unwrap_or_else(|e| panic!("building the test guests failed:\n{e}"))
    })
}

/// A scratch folder for one test, removed when dropped.
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("jobhost-test-")
        .tempdir()
        .expect("temp dir")
}

/// What one invocation printed and returned.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The receipt: stdout must hold exactly one JSON object on one line.
    pub fn receipt(&self) -> Value {
        let lines: Vec<&str> = self.stdout.lines().collect();
        assert_eq!(
            lines.len(),
            1,
            "stdout must carry exactly one receipt line, got {:?}\nstderr: {}",
            self.stdout,
            self.stderr
        );
        serde_json::from_str(lines[0])
            .unwrap_or_else(|e| panic!("receipt is not JSON ({e}): {}", lines[0]))
    }

    /// The receipt's `event`.
    pub fn event(&self) -> String {
        self.receipt()["event"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// Runs the binary with `args`, from `cwd`, with a test compile cache.
pub fn jobhost_in(cwd: &Path, args: &[&str]) -> Run {
    let out = command(cwd, args).output().expect("jobhost runs");
    to_run(out)
}

/// Runs the binary from the workspace root.
pub fn jobhost(args: &[&str]) -> Run {
    jobhost_in(&root(), args)
}

/// The command, for tests that spawn several at once.
pub fn command(cwd: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_jobhost-under-test"));
    // A run with neither a config nor a store keeps its claims in the
    // per-user state folder: the tests' own, never the developer's.
    cmd.current_dir(cwd)
        .args(args)
        .env("JOBHOST_CACHE_DIR", cache_dir())
        .env("XDG_STATE_HOME", guest_target().join("state-home"))
        .env_remove("JOBHOST_STORE")
        .env_remove("JOBHOST_STORE_FILE")
        .env_remove("JOBHOST_REQUIRE_DURABLE_STORE")
        .env("RUST_BACKTRACE", "0");
    cmd
}

/// Runs a command jobhost printed for a person (`jobhost replay KEY
/// --config FILE`) as a person pastes it into a shell in `cwd`, with this
/// build standing in for `jobhost`.
pub fn paste(cwd: &Path, printed: &str) -> Run {
    let rest = printed
        .strip_prefix("jobhost ")
        .unwrap_or_else(|| panic!("not a jobhost command: {printed}"));
    let jobhost = command(cwd, &[]);
    let mut sh = Command::new("sh");
    sh.current_dir(cwd)
        .arg("-c")
        .arg(format!("\"$JOBHOST\" {rest}"))
        .env("JOBHOST", jobhost.get_program());
    for (name, value) in jobhost.get_envs() {
        match value {
            Some(v) => sh.env(name, v),
            None => sh.env_remove(name),
        };
    }
    to_run(sh.output().expect("run sh"))
}

pub fn to_run(out: Output) -> Run {
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A sales database with `rows` sales spread over 2026-11-01 .. 2026-11-15 UTC.
pub fn sales_db(dir: &Path, rows: u64) -> PathBuf {
    let path = dir.join("sales.db");
    let start = 1_793_491_200;
    jobhost_tests::sample::write_sales(&path, start, start + 14 * 86_400, rows, 7)
        .expect("sample data");
    path
}

/// Writes a job config into `dir` and returns its path.
pub fn config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("job.toml");
    std::fs::write(&path, text).expect("config written");
    path
}

/// A config for the reference report over `sales.db` in `dir`, delivering
/// to `out.jsonl` in `dir`.
pub fn report_config(dir: &Path, rows: u64) -> PathBuf {
    sales_db(dir, rows);
    config(
        dir,
        &format!(
            r#"job = "daily-report"
component = "{}"

[source]
path = "sales.db"
query = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id"

[destinations.digest]
type = "file"
path = "out.jsonl"
"#,
            guests().report.display()
        ),
    )
}

/// [`report_config`] with `extra` config lines at the top (the window, the
/// zone, a store of its own...).
pub fn report_config_with(dir: &Path, rows: u64, extra: &str) -> PathBuf {
    let cfg = report_config(dir, rows);
    let text = std::fs::read_to_string(&cfg).expect("config written");
    std::fs::write(&cfg, format!("{extra}\n{text}")).expect("config written");
    cfg
}

/// Path as &str for argument lists.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Run rows in the store (a path or a URL), via `history --json`.
pub fn history(store: impl AsRef<OsStr>) -> Vec<Value> {
    let out = command(&root(), &["history", "--json"])
        .arg("--store")
        .arg(store)
        .output()
        .expect("jobhost runs");
    let run = to_run(out);
    assert_eq!(run.code, 0, "history failed: {}", run.stderr);
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("history line is JSON"))
        .collect()
}

/// `jobhost run --config CFG --store STORE --now NOW`, from the workspace
/// root; the store is a path or a URL.
pub fn run_job(cfg: &Path, store: impl AsRef<OsStr>, now: &str) -> Run {
    to_run(job_command(cfg, store, now).output().expect("jobhost runs"))
}

/// The command [`run_job`] runs, for tests that spawn it themselves. Its
/// clock is virtual: it starts at `now`, waits advance it without sleeping,
/// and a SQLite store measures leases on it (a PostgreSQL store measures
/// them on the database's clock, whatever the host's says).
pub fn job_command(cfg: &Path, store: impl AsRef<OsStr>, now: &str) -> Command {
    let mut cmd = command(&root(), &["run", "--config", s(cfg), "--now", now]);
    cmd.arg("--store")
        .arg(store)
        .env("JOBHOST_TEST_VIRTUAL_TIME", "1");
    cmd
}

/// `jobhost daemon` in virtual time from `now` until `until`, over
/// `configs`, on `store` (a path or a URL).
pub fn daemon_command(configs: &[&Path], store: &str, now: &str, until: &str) -> Command {
    let mut args = vec!["daemon"];
    for c in configs {
        args.extend(["--config", s(c)]);
    }
    args.extend(["--store", store, "--now", now, "--until", until]);
    let mut cmd = command(&root(), &args);
    cmd.env("JOBHOST_TEST_VIRTUAL_TIME", "1");
    cmd
}

/// Waits until `child` has stopped itself (SIGSTOP at a failpoint); `what`
/// names the failpoint for the failure message.
pub fn wait_until_stopped(child: &Child, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap_or_default();
        // The state follows the parenthesised command name.
        if stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('T'))
        {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: the process never reached its failpoint"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Sends `sig` to `child`.
pub fn signal(child: &Child, sig: i32) {
    // SAFETY: signalling a child process we own.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

/// Lets a stopped `child` go on, and waits for its end.
pub fn resume(child: Child) -> Run {
    signal(&child, libc::SIGCONT);
    to_run(child.wait_with_output().expect("wait"))
}

/// Runs `cmd` (a `jobhost-under-test` command) to its end and returns what
/// it printed with its peak resident memory, in KiB, as the process itself
/// measured it on its way out (`JOBHOST_TEST_PEAK_FILE`). The kernel's
/// account to the parent (`ru_maxrss`) is no use here: it is never below
/// the test process's own peak at the spawn, which is larger than the
/// child's while other tests run.
pub fn run_measured(mut cmd: Command) -> (Run, u64) {
    let file = tempfile::NamedTempFile::new().expect("a file for the peak");
    cmd.env("JOBHOST_TEST_PEAK_FILE", file.path());
    let run = to_run(cmd.output().expect("jobhost runs"));
    let text = std::fs::read_to_string(file.path()).unwrap_or_default();
    let peak = text.trim().parse().unwrap_or_else(|_| {
        panic!(
            "the command wrote no peak ({text:?}): exit {}, {}",
            run.code, run.stderr
        )
    });
    (run, peak)
}

/// The raw bytes a terminal must never receive from a guest: C0 controls
/// other than the line feed that ends each line, DEL, C1 controls, the
/// Unicode line and paragraph separators, and the bidirectional overrides.
pub fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| {
            (c.is_control() && c != '\n')
                || matches!(
                    c,
                    '\u{2028}'
                        | '\u{2029}'
                        | '\u{061c}'
                        | '\u{200e}'
                        | '\u{200f}'
                        | '\u{202a}'..='\u{202e}'
                        | '\u{2066}'..='\u{2069}'
                )
        })
        .collect()
}

/// Python test guests, built once per test process (and kept, by the hash
/// of their sources, across processes).
#[derive(Debug)]
pub struct PythonGuests {
    /// The reference daily sales report in Python.
    pub report: PathBuf,
    /// The Python sandbox probe (behaviour chosen by the param `probe`).
    pub probe: PathBuf,
    /// Rows by local hour, the twin of the Rust `local-hours` guest.
    pub local_hours: PathBuf,
}

/// The Python guests.
pub fn python_guests() -> &'static PythonGuests {
    static GUESTS: OnceLock<PythonGuests> = OnceLock::new();
    GUESTS.get_or_init(|| {
        let dir = guest_target().join("python");
        let build = |g| {
            jobhost_tests::guests::build_python(g, &dir)
                .unwrap_or_else(|e| panic!("building a Python test guest failed:\n{e}"))
        };
        PythonGuests {
            report: build(&jobhost_tests::guests::PYTHON_REPORT),
            probe: build(&jobhost_tests::guests::PYTHON_PROBE),
            local_hours: build(&jobhost_tests::guests::PYTHON_LOCAL_HOURS),
        }
    })
}

/// The JavaScript reference report, built once per test process (and kept,
/// by the hash of its sources, across processes).
pub fn js_report() -> &'static PathBuf {
    static GUEST: OnceLock<PathBuf> = OnceLock::new();
    GUEST.get_or_init(|| {
        jobhost_tests::guests::build_js(
            &jobhost_tests::guests::JS_REPORT,
            &guest_target().join("js"),
        )
        .unwrap_or_else(|e| panic!("building the JavaScript reference failed:\n{e}"))
    })
}

/// The JavaScript probe (behaviour chosen by the param `probe`).
pub fn js_probe() -> &'static PathBuf {
    static GUEST: OnceLock<PathBuf> = OnceLock::new();
    GUEST.get_or_init(|| {
        let probe = jobhost_tests::guests::JsGuest {
            name: "js_probe",
            app_dir: "tests/guests/js-probe",
            entry: "app.js",
            world: "describing-reporter",
        };
        jobhost_tests::guests::build_js(&probe, &guest_target().join("js"))
            .unwrap_or_else(|e| panic!("building the JavaScript probe failed:\n{e}"))
    })
}

/// A job over `sales.db` in `dir` with `component`, delivering to
/// `out-<tag>.jsonl`; `extra` is added at the top level (window, params);
/// `memory_mib` and `timeout_seconds` are its limits.
pub fn reference_job(
    dir: &Path,
    tag: &str,
    component: &Path,
    extra: &str,
    (memory_mib, timeout_seconds): (u32, u32),
) -> PathBuf {
    let path = dir.join(format!("{tag}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"job = "daily-report"
component = "{}"
max_attempts = 3
{extra}
[source]
path = "sales.db"
query = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id"

[destinations.digest]
type = "file"
path = "out-{tag}.jsonl"

[limits]
memory_mib = {memory_mib}
timeout_seconds = {timeout_seconds}
"#,
            component.display()
        ),
    )
    .unwrap();
    path
}

/// The receipt of a run that must have failed (exit 1).
pub fn failed(run: &Run) -> Value {
    let r = run.receipt();
    assert_eq!(
        (run.code, r["event"].as_str()),
        (1, Some("failed")),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    r
}

/// The receipt of a run that must have run.
pub fn ran(run: &Run) -> Value {
    let r = run.receipt();
    assert_eq!(
        (run.code, r["event"].as_str()),
        (0, Some("ran")),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    r
}

/// Holds a reference report in another language to the Rust one: on days,
/// an hour in a zone with an offset, a week, with a `top` parameter and on
/// a window with no rows, the same summary, cursor, rows and message bytes.
pub fn gives_the_rust_references_output(component: &Path, language: &str, limits: (u32, u32)) {
    let dir = scratch();
    sales_db(dir.path(), 4000);
    let rust = &guests().report;
    let cases = [
        ("", "2026-11-04T00:05:00Z"),
        ("[params]\ntop = 3\n", "2026-11-09T00:05:00Z"),
        (
            "window = \"hour\"\ntimezone = \"Europe/Berlin\"\n",
            "2026-11-06T13:10:00Z",
        ),
        ("window = \"week\"\n", "2026-11-10T00:05:00Z"),
        ("", "2026-11-20T00:05:00Z"),
    ];
    for (i, (extra, now)) in cases.iter().enumerate() {
        let mut got = Vec::new();
        for (tag, component) in [("other", component), ("rust", rust.as_path())] {
            let tag = format!("{tag}{i}");
            let cfg = reference_job(dir.path(), &tag, component, extra, limits);
            let store = dir.path().join(format!("{tag}.db"));
            let r = ran(&run_job(&cfg, &store, now));
            let message = std::fs::read(dir.path().join(format!("out-{tag}.jsonl"))).unwrap();
            got.push((r["report"].clone(), r["stats"]["rows"].clone(), message));
        }
        assert_eq!(
            got[0].0, got[1].0,
            "case {i} ({extra:?} at {now}): the same summary and cursor"
        );
        assert_eq!(got[0].1, got[1].1, "case {i}: the same rows");
        assert!(
            got[0].2 == got[1].2,
            "case {i}: the same message bytes\n{language}: {}\nrust: {}",
            String::from_utf8_lossy(&got[0].2),
            String::from_utf8_lossy(&got[1].2)
        );
    }
}

/// Holds a report in another language to the promise the Rust one keeps:
/// it runs a window once, a second run skips it naming the digest
/// recorded, the job swaps to the Rust report and back window by window,
/// and a replay of its run with the recorded clock is identical.
pub fn runs_skips_replays_and_swaps_with_the_rust_one(component: &Path, limits: (u32, u32)) {
    let dir = scratch();
    sales_db(dir.path(), 2000);
    let store = dir.path().join("s.db");
    let other = reference_job(dir.path(), "other", component, "", limits);
    let rust = reference_job(dir.path(), "rust", &guests().report, "", limits);

    let first = ran(&run_job(&other, &store, "2026-11-05T00:05:00Z"));
    let digest = first["component"].as_str().unwrap().to_string();
    let again = run_job(&other, &store, "2026-11-05T00:05:00Z");
    let r = again.receipt();
    assert_eq!((again.code, r["event"].as_str()), (0, Some("skipped")));
    assert_eq!(r["reason"], "done");
    assert_eq!(r["component"], digest.as_str(), "the digest recorded");

    // Swap to Rust for the next window, and back for the one after: each
    // window is run once, by the component configured then.
    let second = ran(&run_job(&rust, &store, "2026-11-06T00:05:00Z"));
    assert_ne!(second["component"], digest.as_str());
    let third = ran(&run_job(&other, &store, "2026-11-07T00:05:00Z"));
    assert_eq!(third["component"], digest.as_str());
    let rows = history(&store);
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows.iter().all(|r| r["state"] == "DONE"), "{rows:?}");

    let replay = jobhost(&[
        "replay",
        "daily-report:2026-11-05",
        "--store",
        s(&store),
        "--component",
        s(component),
    ]);
    assert_eq!(replay.code, 0, "{}\n{}", replay.stdout, replay.stderr);
    assert!(replay.stdout.contains("identical"), "{}", replay.stdout);
}
