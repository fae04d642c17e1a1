//! A SQLite store on a filesystem that dies with its machine or container
//! is the duplicate this product exists to prevent: it is warned about in
//! the receipt and on stderr, and refused when a durable store is required.

use std::path::{Path, PathBuf};

use jobhost::store::durable::{Ephemeral, ephemeral_filesystem};

use crate::harness::*;

/// A folder on tmpfs (`/dev/shm`), removed when dropped.
struct OnTmpfs(PathBuf);

impl OnTmpfs {
    fn new() -> OnTmpfs {
        assert_eq!(
            ephemeral_filesystem(Path::new("/dev/shm/x")),
            Some(Ephemeral::Tmpfs),
            "these tests need /dev/shm to be a tmpfs, as it is on Linux"
        );
        let dir = PathBuf::from(format!(
            "/dev/shm/jobhost-test-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        OnTmpfs(dir)
    }
}

impl Drop for OnTmpfs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_store_on_tmpfs_is_warned_about_in_the_receipt_and_on_stderr() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let tmpfs = OnTmpfs::new();
    let store = tmpfs.0.join("jobhost.db");
    let run = run_job(&cfg, &store, "2026-11-09T00:05:00Z");
    let r = run.receipt();
    assert_eq!((run.code, r["event"].as_str()), (0, Some("ran")), "{r}");
    let w = &r["warnings"][0];
    assert_eq!(w["kind"], "ephemeral-store", "{r}");
    let message = w["message"].as_str().unwrap();
    assert!(message.contains("is on tmpfs"), "{message}");
    assert!(message.contains("persistent volume"), "{message}");
    assert!(message.contains("postgres://"), "{message}");
    let warning: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("jobhost: warning:"))
        .collect();
    assert_eq!(warning.len(), 1, "{}", run.stderr);
    assert!(
        warning[0].contains("--require-durable-store"),
        "{}",
        warning[0]
    );
    // Skipping the done window warns too: the store is no safer for it.
    let again = run_job(&cfg, &store, "2026-11-09T00:06:00Z");
    assert_eq!(again.receipt()["warnings"][0]["kind"], "ephemeral-store");
}

#[test]
fn a_required_durable_store_refuses_tmpfs_before_creating_anything() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let tmpfs = OnTmpfs::new();
    let store = tmpfs.0.join("state").join("jobhost.db");
    let mut cmd = job_command(&cfg, &store, "2026-11-09T00:05:00Z");
    let run = to_run(cmd.arg("--require-durable-store").output().unwrap());
    let r = run.receipt();
    assert_eq!(
        (run.code, r["error"]["kind"].as_str()),
        (2, Some("invalid-input")),
        "{r}"
    );
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.contains("is on tmpfs"), "{message}");
    assert!(message.contains("a durable store is required"), "{message}");
    assert!(!tmpfs.0.exists(), "nothing was created");
    assert!(
        !dir.path().join("out.jsonl").exists(),
        "nothing was delivered"
    );

    // The same from the job config.
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("require_durable_store = true\n{text}")).unwrap();
    let run = run_job(&cfg, &store, "2026-11-09T00:05:00Z");
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("a durable store is required"),
        "{}",
        run.stderr
    );
    assert!(!tmpfs.0.exists());
}

#[test]
fn a_store_on_a_normal_disk_carries_no_warning_and_passes_the_requirement() {
    let dir = scratch();
    if let Some(fs) = ephemeral_filesystem(&dir.path().join("s.db")) {
        // A skip under CI too: where the machine keeps its temporary
        // folder is its own layout, not a server or tool CI installs, and
        // moving TMPDIR for the whole run to a disk would move every other
        // test's files (and their socket paths) with it.
        return jobhost_tests::skip::skipped(
            "durable_store::a_store_on_a_normal_disk_carries_no_warning_and_passes_the_requirement",
            &format!(
                "the temporary folder {} is on {}; set TMPDIR to a folder on a disk",
                dir.path().display(),
                fs.name()
            ),
        );
    }
    let cfg = report_config(dir.path(), 100);
    let mut cmd = job_command(&cfg, dir.path().join("s.db"), "2026-11-09T00:05:00Z");
    let run = to_run(cmd.arg("--require-durable-store").output().unwrap());
    let r = run.receipt();
    assert_eq!(r["event"], "ran", "{}", run.stderr);
    assert!(r.get("warnings").is_none(), "{r}");
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
}

#[test]
fn the_environment_requires_a_durable_store_for_every_command_that_runs_a_job() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let tmpfs = OnTmpfs::new();
    let store = tmpfs.0.join("state").join("jobhost.db");
    let refused = |run: &Run, what: &str| {
        assert_eq!(run.code, 2, "{what}: {}", run.stderr);
        assert!(
            run.stderr.contains("a durable store is required"),
            "{what}: {}",
            run.stderr
        );
        assert!(!tmpfs.0.exists(), "{what}: nothing was created");
    };
    for yes in ["1", "true", "yes", "YES"] {
        let mut cmd = job_command(&cfg, &store, "2026-11-09T00:05:00Z");
        let run = to_run(
            cmd.env("JOBHOST_REQUIRE_DURABLE_STORE", yes)
                .output()
                .unwrap(),
        );
        assert_eq!(run.receipt()["error"]["kind"], "invalid-input");
        refused(&run, &format!("run with {yes}"));
    }
    let env = [("JOBHOST_REQUIRE_DURABLE_STORE", "1")];
    let mut daemon = daemon_command(
        &[&cfg],
        s(&store),
        "2026-11-09T00:05:00Z",
        "2026-11-09T00:06:00Z",
    );
    refused(&to_run(daemon.envs(env).output().unwrap()), "daemon");
    let (c, st) = (s(&cfg), s(&store));
    let now = ["--now", "2026-11-09T00:05:00Z"];
    let backfill = [
        &["backfill", "--config", c, "--store", st][..],
        &["--from", "2026-11-01", "--to", "2026-11-03"],
        &now,
    ]
    .concat();
    let mut cmd = command(&root(), &backfill);
    refused(&to_run(cmd.envs(env).output().unwrap()), "backfill");
    let rerun = [
        &["rerun", "2026-11-07", "--config", c, "--store", st][..],
        &["--reason", "again"],
        &now,
    ]
    .concat();
    let mut cmd = command(&root(), &rerun);
    refused(&to_run(cmd.envs(env).output().unwrap()), "rerun");

    // 0, false, no (or empty) leave it to the flag and the config: a warning.
    for no in ["0", "false", "no", ""] {
        let mut cmd = job_command(&cfg, &store, "2026-11-09T00:05:00Z");
        let run = to_run(
            cmd.env("JOBHOST_REQUIRE_DURABLE_STORE", no)
                .output()
                .unwrap(),
        );
        assert_eq!(run.code, 0, "{no:?}: {}", run.stderr);
        assert_eq!(run.receipt()["warnings"][0]["kind"], "ephemeral-store");
    }
    // ... and cannot weaken the config's requirement.
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("require_durable_store = true\n{text}")).unwrap();
    let mut cmd = job_command(&cfg, &store, "2026-11-09T00:06:00Z");
    let run = to_run(
        cmd.env("JOBHOST_REQUIRE_DURABLE_STORE", "0")
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
}

#[test]
fn a_bad_value_of_the_durable_store_variable_is_refused_in_one_line() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let store = dir.path().join("s.db");
    let mut cmd = job_command(&cfg, &store, "2026-11-09T00:05:00Z");
    let run = to_run(
        cmd.env("JOBHOST_REQUIRE_DURABLE_STORE", "maybe")
            .output()
            .unwrap(),
    );
    let r = run.receipt();
    assert_eq!(
        (run.code, r["error"]["kind"].as_str()),
        (2, Some("invalid-input")),
        "{r}"
    );
    let errors: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(errors.len(), 1, "{}", run.stderr);
    assert!(
        errors[0].starts_with("jobhost: error: $JOBHOST_REQUIRE_DURABLE_STORE is `maybe`"),
        "{}",
        errors[0]
    );
    assert!(errors[0].contains("1, true or yes"), "{}", errors[0]);
    assert!(!store.exists(), "nothing was created");
    let mut daemon = daemon_command(
        &[&cfg],
        s(&store),
        "2026-11-09T00:05:00Z",
        "2026-11-09T00:06:00Z",
    );
    let run = to_run(
        daemon
            .env("JOBHOST_REQUIRE_DURABLE_STORE", "on")
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("$JOBHOST_REQUIRE_DURABLE_STORE is `on`"),
        "{}",
        run.stderr
    );
}
