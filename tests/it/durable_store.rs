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
        use std::io::Write;
        // Past the harness's capture, as for every skip.
        let _ = writeln!(
            std::io::stderr().lock(),
            "SKIPPED durable_store::a_store_on_a_normal_disk_carries_no_warning_and_passes_the_requirement: \
             the temporary folder {} is on {}; set TMPDIR to a folder on a disk",
            dir.path().display(),
            fs.name()
        );
        return;
    }
    let cfg = report_config(dir.path(), 100);
    let mut cmd = job_command(&cfg, dir.path().join("s.db"), "2026-11-09T00:05:00Z");
    let run = to_run(cmd.arg("--require-durable-store").output().unwrap());
    let r = run.receipt();
    assert_eq!(r["event"], "ran", "{}", run.stderr);
    assert!(r.get("warnings").is_none(), "{r}");
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
}
