//! `jobhost daemon --jobs DIR`: a folder of job files whose changes take
//! effect without a restart, each bad file refused alone. The daemon runs
//! in real time here (its clock starts at `--now` and advances as the
//! test's does), so that a file written while it sleeps is what it sees.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::*;

/// A job file for the reference report: job `name`, hourly, in `dir`.
fn job_file(dir: &Path, file: &str, name: &str, extra: &str) {
    std::fs::write(
        dir.join(file),
        format!(
            r#"job = "{name}"
window = "hour"
timezone = "UTC"
component = "{}"
{extra}

[source]
path = "sales.db"
query = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id"

[destinations.digest]
type = "file"
path = "{name}.jsonl"
"#,
            guests().report.display()
        ),
    )
    .unwrap();
}

/// Lines a child writes, collected as they come.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<String>>>);

impl Lines {
    fn follow(stream: impl std::io::Read + Send + 'static) -> Lines {
        let lines = Lines::default();
        let kept = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                kept.0.lock().unwrap().push(line);
            }
        });
        lines
    }

    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// Waits until a line satisfies `want`, failing with `what` and
    /// everything seen after two minutes.
    fn wait_for(&self, what: &str, other: &Lines, want: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(l) = self.all().into_iter().find(|l| want(l)) {
                return l;
            }
            assert!(
                Instant::now() < deadline,
                "no line {what}:\n{}\n--- the other stream:\n{}",
                self.all().join("\n"),
                other.all().join("\n")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A receipt line of `job` whose event is `ran`.
fn ran(job: &str) -> impl Fn(&str) -> bool + '_ {
    move |l: &str| {
        serde_json::from_str::<Value>(l).is_ok_and(|v| v["job"] == job && v["event"] == "ran")
    }
}

fn stop(child: &mut Child) -> i32 {
    signal(child, libc::SIGTERM);
    child.wait().unwrap().code().unwrap_or(-1)
}

#[test]
fn a_folder_of_job_files_takes_in_added_and_removed_files_and_refuses_bad_ones_alone() {
    let tmp = scratch();
    let dir = tmp.path().join("jobs");
    std::fs::create_dir(&dir).unwrap();
    sales_db(&dir, 500);
    job_file(&dir, "alpha.toml", "alpha", "");
    // Bad from the start: refused alone, naming the file and the key.
    job_file(&dir, "broken.toml", "broken", "");
    let text = std::fs::read_to_string(dir.join("broken.toml")).unwrap();
    std::fs::write(
        dir.join("broken.toml"),
        text.replace("window = \"hour\"", "window = \"fortnight\""),
    )
    .unwrap();
    // Not a job file.
    std::fs::write(dir.join("notes.txt"), "not a job").unwrap();
    let store = tmp.path().join("s.db");
    let mut child = command(
        &root(),
        &[
            "daemon",
            "--jobs",
            s(&dir),
            "--store",
            s(&store),
            "--now",
            "2026-11-09T00:30:00Z",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let out = Lines::follow(child.stdout.take().unwrap());
    let err = Lines::follow(child.stderr.take().unwrap());
    out.wait_for("of alpha's run", &err, ran("alpha"));
    let refused = err.wait_for("refusing broken.toml", &out, |l| l.contains("broken.toml"));
    assert!(
        refused.contains("is refused") && refused.contains("window"),
        "{refused}"
    );

    // Added while it sleeps (its next window is half an hour away): the
    // new job runs its newest due window within a few seconds.
    job_file(&dir, "beta.toml", "beta", "");
    let added = Instant::now();
    out.wait_for("of beta's run", &err, ran("beta"));
    err.wait_for("saying beta joined", &out, |l| {
        l.contains("job `beta`") && l.contains("joins")
    });
    assert!(
        added.elapsed() < Duration::from_secs(60),
        "taken in while the daemon slept, not at its next window"
    );

    // A second file naming a running job is refused, naming both files;
    // the job keeps running from its own.
    job_file(&dir, "alpha-copy.toml", "alpha", "");
    let twice = err.wait_for("refusing the second alpha", &out, |l| {
        l.contains("alpha-copy.toml") && l.contains("is refused")
    });
    assert!(
        twice.contains("alpha.toml") && twice.contains("named by"),
        "{twice}"
    );

    // A removed file's job claims nothing more; SIGHUP reads the folder at
    // once.
    std::fs::remove_file(dir.join("beta.toml")).unwrap();
    signal(&child, libc::SIGHUP);
    err.wait_for("saying beta left", &out, |l| {
        l.contains("job `beta`") && l.contains("claims nothing more")
    });
    assert_eq!(stop(&mut child), 0, "{}", err.all().join("\n"));

    let rows = history(&store);
    let jobs: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["job"].as_str().unwrap(), r["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        jobs,
        [("alpha", "DONE"), ("beta", "DONE")],
        "one window each, run once: {rows:?}"
    );
    let broken_said = err
        .all()
        .iter()
        .filter(|l| l.contains("broken.toml"))
        .count();
    assert_eq!(broken_said, 1, "a refusal is said once: {:?}", err.all());
}

#[test]
fn a_job_folder_that_cannot_be_read_is_refused_at_start() {
    let tmp = scratch();
    let missing = tmp.path().join("no-such-folder");
    let run = to_run(
        command(
            &root(),
            &[
                "daemon",
                "--jobs",
                s(&missing),
                "--store",
                s(&tmp.path().join("s.db")),
            ],
        )
        .output()
        .unwrap(),
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot read the job folder") && run.stderr.contains("no-such-folder"),
        "{}",
        run.stderr
    );
}

#[test]
fn serve_on_a_job_folder_shows_files_added_later_and_lists_refused_ones() {
    use crate::dashboard::{get, serve};
    let tmp = scratch();
    let dir = tmp.path().join("jobs");
    std::fs::create_dir(&dir).unwrap();
    sales_db(&dir, 100);
    job_file(&dir, "alpha.toml", "alpha", "");
    let store = tmp.path().join("s.db");
    let srv = serve(&[
        "serve",
        "--jobs",
        s(&dir),
        "--store",
        s(&store),
        "--now",
        "2026-11-09T00:30:00Z",
    ]);
    let names = |page: &Value| -> Vec<String> {
        page["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["job"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&get(&srv.addr, "/jobs.json", &[]).json()), ["alpha"]);

    job_file(&dir, "beta.toml", "beta", "");
    std::fs::write(dir.join("bad.toml"), "job = [").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let page = loop {
        let page = get(&srv.addr, "/jobs.json", &[]).json();
        if names(&page).len() == 2 && page["refused"].as_array().is_some_and(|r| !r.is_empty()) {
            break page;
        }
        assert!(
            Instant::now() < deadline,
            "the folder's change is not shown: {page}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(names(&page), ["alpha", "beta"]);
    let refused = &page["refused"][0];
    assert!(
        refused["file"].as_str().unwrap().ends_with("bad.toml"),
        "{page}"
    );
    let metrics = get(&srv.addr, "/metrics", &[]).body;
    assert!(
        metrics.lines().any(|l| l == "jobhost_job_files_refused 1"),
        "{metrics}"
    );
    let html = get(&srv.addr, "/", &[]).body;
    assert!(
        html.contains("Refused job files") && html.contains("bad.toml"),
        "{html}"
    );
}

#[test]
fn plan_and_status_take_a_job_folder_as_its_files() {
    let tmp = scratch();
    let dir = tmp.path().join("jobs");
    std::fs::create_dir(&dir).unwrap();
    sales_db(&dir, 100);
    job_file(&dir, "alpha.toml", "alpha", "");
    job_file(&dir, "beta.toml", "beta", "");
    let store = tmp.path().join("s.db");
    let plan = to_run(
        command(
            &root(),
            &[
                "plan",
                "--jobs",
                s(&dir),
                "--store",
                s(&store),
                "--now",
                "2026-11-09T00:30:00Z",
                "--json",
            ],
        )
        .output()
        .unwrap(),
    );
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let jobs: std::collections::BTreeSet<String> = plan
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["job"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(jobs.into_iter().collect::<Vec<_>>(), ["alpha", "beta"]);
    let status = to_run(
        command(
            &root(),
            &[
                "status",
                "--jobs",
                s(&dir),
                "--store",
                s(&store),
                "--now",
                "2026-11-09T00:30:00Z",
                "--allow-missing",
            ],
        )
        .output()
        .unwrap(),
    );
    assert!(
        status.stdout.contains("alpha") && status.stdout.contains("beta"),
        "{}\n{}",
        status.stdout,
        status.stderr
    );
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let none = to_run(
        command(&root(), &["status", "--jobs", s(&empty)])
            .output()
            .unwrap(),
    );
    assert_eq!(none.code, 2, "{}", none.stderr);
    assert!(none.stderr.contains("holds no job file"), "{}", none.stderr);
}

#[test]
fn plan_and_status_refuse_a_bad_file_of_the_folder_alone() {
    let tmp = scratch();
    let dir = tmp.path().join("jobs");
    std::fs::create_dir(&dir).unwrap();
    sales_db(&dir, 100);
    job_file(&dir, "alpha.toml", "alpha", "");
    job_file(&dir, "beta.toml", "beta", "");
    std::fs::write(
        dir.join("broken.toml"),
        "job = \"broken\"\nwindow = \"fortnight\"\n",
    )
    .unwrap();
    let store = tmp.path().join("s.db");
    let cmd = |verb: &str, extra: &[&str]| {
        let mut args = vec![
            verb,
            "--jobs",
            s(&dir),
            "--store",
            s(&store),
            "--now",
            "2026-11-09T00:30:00Z",
        ];
        args.extend_from_slice(extra);
        to_run(command(&root(), &args).output().unwrap())
    };
    for (verb, extra) in [
        ("plan", &["--json"][..]),
        ("status", &["--allow-missing"][..]),
    ] {
        let run = cmd(verb, extra);
        assert_eq!(run.code, 2, "{verb}: {}", run.stderr);
        assert!(
            run.stdout.contains("alpha") && run.stdout.contains("beta"),
            "{verb}: the other jobs are shown: {}",
            run.stdout
        );
        let said: Vec<&str> = run.stderr.lines().filter(|l| l.contains("error")).collect();
        assert_eq!(said.len(), 1, "{verb}: {}", run.stderr);
        assert!(
            said[0].contains("broken.toml") && said[0].contains("window"),
            "{verb}: the line names the file and the key: {}",
            said[0]
        );
    }
    let nagios = cmd("status", &["--allow-missing", "--nagios"]);
    assert_eq!(nagios.code, 3, "{}", nagios.stderr);
    assert!(
        nagios
            .stdout
            .starts_with("JOBHOST UNKNOWN - a job file is left out"),
        "{}",
        nagios.stdout
    );
}
