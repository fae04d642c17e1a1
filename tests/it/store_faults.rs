//! Store faults that once stalled or misled: an owner frozen inside its
//! commit (on both backends), a connection cut under a frozen owner, a full
//! disk and a store that became read-only. Each one ends at once with a
//! line that names the store and says what happened, and loses nothing.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use jobhost_tests::pg::Scratch;

use crate::harness::*;

const NOW: &str = "2026-11-09T00:05:00Z";

/// `jobhost run` for the reference report on `store`, stopped by the
/// failpoint `failpoint` once it has reached it.
fn stopped(cfg: &Path, store: &str, failpoint: &str) -> Child {
    let child = job_command(cfg, store, NOW)
        .env("JOBHOST_TEST_FAILPOINT", failpoint)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("jobhost runs");
    wait_until_stopped(&child, failpoint);
    child
}

/// `jobhost run` that must end by itself (a hang fails the test after a
/// minute instead of holding CI).
fn must_end(mut cmd: Command) -> Run {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("jobhost runs");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("jobhost hung on a row another process holds");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    to_run(child.wait_with_output().expect("output"))
}

/// The receipt of an invocation that found the window held by a process
/// frozen in the middle of its commit.
fn busy_at_once(run: &Run) {
    let r = run.receipt();
    assert_eq!(
        (run.code, r["event"].as_str(), r["reason"].as_str()),
        (0, Some("skipped"), Some("busy")),
        "{r}\n{}",
        run.stderr
    );
    assert!(
        r["detail"]
            .as_str()
            .unwrap()
            .contains("without finishing its write"),
        "{r}"
    );
    assert!(r.get("fence").is_none(), "nothing was claimed: {r}");
}

#[test]
fn a_sqlite_owner_frozen_inside_its_commit_makes_the_window_busy_not_a_hang() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 500);
    let store = dir.path().join("s.db");
    let frozen = stopped(&cfg, s(&store), "in-prepare:stop");
    let other = must_end(job_command(&cfg, &store, NOW));
    busy_at_once(&other);
    // Let go, the frozen owner commits and delivers: nothing was lost.
    let woke = resume(frozen);
    assert_eq!(woke.receipt()["event"], "ran", "{}", woke.stderr);
    let again = run_job(&cfg, &store, NOW);
    assert_eq!(again.receipt()["reason"], "done");
    let delivered = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    assert_eq!(delivered.lines().count(), 1);
}

/// Whether the session of the host whose connections are named `app` is
/// still open on the server.
fn session_open(db: &Scratch, app: &str) -> bool {
    let mut c = db.client();
    c.query_one(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()",
        &[&app],
    )
    .map(|r| r.get::<_, i64>(0) > 0)
    .unwrap_or(false)
}

#[test]
fn a_postgres_owner_frozen_inside_its_commit_makes_the_window_busy_and_its_session_is_ended() {
    let Some(db) = Scratch::new(
        "store_faults::a_postgres_owner_frozen_inside_its_commit_makes_the_window_busy_and_its_session_is_ended",
    ) else {
        return;
    };
    let dir = scratch();
    let cfg = report_config(dir.path(), 500);
    // A short lease, so that the window can be taken over once the frozen
    // owner is gone.
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!("{text}\n[limits]\ntimeout_seconds = 2\nlease_seconds = 3\n"),
    )
    .unwrap();
    let url = db.url();
    let frozen = stopped(&cfg, &url, "in-prepare:stop");
    // Inside its commit, it holds the window's row: the next invocation is
    // told so at once instead of waiting on the row.
    let other = must_end(job_command(&cfg, &url, NOW));
    busy_at_once(&other);
    // The server ends the frozen owner's idle transaction, releasing the row.
    let deadline = Instant::now() + Duration::from_secs(30);
    while session_open(&db, &db.schema) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !session_open(&db, &db.schema),
        "the frozen owner's session was not ended by its idle-in-transaction limit"
    );
    // Woken, the owner finds its connection gone, says which store, and
    // stops without sending.
    let woke = resume(frozen);
    let r = woke.receipt();
    assert_eq!(
        (woke.code, r["error"]["kind"].as_str()),
        (1, Some("store")),
        "{r}"
    );
    let shown = url.split('?').next().unwrap();
    assert!(
        woke.stderr.contains(&format!("in store `{shown}")),
        "the line names the store: {}",
        woke.stderr
    );
    assert!(woke.stderr.contains("connection"), "{}", woke.stderr);
    assert!(!dir.path().join("out.jsonl").exists(), "nothing was sent");
    // Once its lease has run out, the window runs, once.
    let deadline = Instant::now() + Duration::from_secs(60);
    let done = loop {
        let run = run_job(&cfg, &url, NOW);
        if run.receipt()["reason"] != "busy" {
            break run;
        }
        assert!(Instant::now() < deadline, "the lease never ran out");
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(done.receipt()["event"], "ran", "{}", done.stderr);
    let delivered = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    assert_eq!(delivered.lines().count(), 1);
}

#[test]
fn a_postgres_row_held_by_another_session_makes_the_window_busy_not_a_hang() {
    let Some(db) = Scratch::new(
        "store_faults::a_postgres_row_held_by_another_session_makes_the_window_busy_not_a_hang",
    ) else {
        return;
    };
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let url = db.url();
    let first = run_job(&cfg, &url, NOW);
    assert_eq!(first.receipt()["event"], "ran", "{}", first.stderr);
    // A session (not jobhost's, so no limit of jobhost's ends it) holds
    // the row of a window not run yet, as a frozen claimer would.
    let mut holder = db.client();
    let mut tx = holder.transaction().unwrap();
    tx.execute(
        "INSERT INTO jobhost_runs (key, job, window_start, window_end, timezone, state, fence,
            owner, lease_expires_at, attempt, component, created_at, updated_at)
         VALUES ('daily-report:2026-11-09', 'daily-report', '2026-11-09 00:00:00+00', '2026-11-10 00:00:00+00', 'UTC',
            'CLAIMED', 1, 'frozen', now(), 1, '', now(), now())",
        &[],
    )
    .unwrap();
    let other = must_end(job_command(&cfg, &url, "2026-11-10T00:05:00Z"));
    busy_at_once(&other);
    tx.rollback().unwrap();
}

/// Runs `script` with a 1 MiB tmpfs mounted at `mount`, in a mount
/// namespace of its own (as root, or as a user through a user namespace),
/// so that nothing outlives the test.
fn with_small_disk(mount: &Path, script: &str) -> std::process::Output {
    std::fs::create_dir_all(mount).unwrap();
    let root = is_root();
    let mut cmd = Command::new("unshare");
    if !root {
        cmd.arg("--map-root-user");
    }
    cmd.args(["--mount", "--", "sh", "-ec"])
        .arg(format!(
            "mount -t tmpfs -o size=1m jobhost-test {mount}\n{script}",
            mount = s(mount)
        ))
        .output()
        .expect("unshare runs (util-linux)")
}

fn is_root() -> bool {
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() == 0 }
}

/// `jobhost run` for `cfg` on `store` at `now`, as one line of shell that
/// writes its receipt and stderr into `name`.json and `name`.err in `out`
/// and echoes its exit code.
fn shell_run(cfg: &Path, store: &Path, now: &str, out: &Path, name: &str) -> String {
    let cmd = job_command(cfg, store, now);
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| format!("'{}'", a.to_str().unwrap()))
        .collect();
    format!(
        "if JOBHOST_CACHE_DIR='{cache}' RUST_BACKTRACE=0 JOBHOST_TEST_VIRTUAL_TIME=1 '{program}' \
         {args} > '{out}/{name}.json' 2> '{out}/{name}.err'; then echo '{name} 0'; \
         else echo \"{name} $?\"; fi",
        cache = s(&cache_dir()),
        program = cmd.get_program().to_str().unwrap(),
        args = args.join(" "),
        out = s(out),
    )
}

#[test]
fn a_full_disk_is_said_in_those_words_naming_the_store_folder() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let disk = dir.path().join("disk");
    let out = dir.path();
    // A store that ran a window, then its disk filled up; and a store
    // created on a disk already full.
    let script = [
        shell_run(&cfg, &disk.join("s.db"), NOW, out, "first"),
        format!(
            "dd if=/dev/zero of='{}/filler' bs=4096 2>/dev/null || true",
            s(&disk)
        ),
        shell_run(
            &cfg,
            &disk.join("s.db"),
            "2026-11-10T00:05:00Z",
            out,
            "filled",
        ),
        shell_run(&cfg, &disk.join("new.db"), NOW, out, "fresh"),
    ]
    .join("\n");
    let ran = with_small_disk(&disk, &script);
    assert!(
        ran.status.success(),
        "the small disk could not be set up (this test mounts a tmpfs in a mount namespace \
         of its own: it needs root, or user namespaces): {}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let codes = String::from_utf8_lossy(&ran.stdout);
    assert_eq!(
        codes.lines().collect::<Vec<_>>(),
        ["first 0", "filled 1", "fresh 1"],
        "{codes}"
    );
    for name in ["filled", "fresh"] {
        let stderr = std::fs::read_to_string(out.join(format!("{name}.err"))).unwrap();
        assert!(
            stderr.contains("no space left on device") && stderr.contains(s(&disk)),
            "{name}: {stderr}"
        );
        let receipt: serde_json::Value = serde_json::from_str(
            std::fs::read_to_string(out.join(format!("{name}.json")))
                .unwrap()
                .trim(),
        )
        .unwrap();
        assert_eq!(receipt["error"]["kind"], "store", "{name}: {receipt}");
    }
}

#[test]
fn a_store_that_became_read_only_is_said_to_be_read_only() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let folder = dir.path().join("state");
    let store = folder.join("s.db");
    let first = run_job(&cfg, &store, NOW);
    assert_eq!(first.receipt()["event"], "ran", "{}", first.stderr);
    // The store's folder remounted read-only, as after a disk error or a
    // change of volume.
    let cmd = job_command(&cfg, &store, "2026-11-10T00:05:00Z");
    let program = cmd.get_program().to_str().unwrap().to_string();
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| format!("'{}'", a.to_str().unwrap()))
        .collect();
    let err_file = dir.path().join("stderr.txt");
    let mut unshare = Command::new("unshare");
    if !is_root() {
        unshare.arg("--map-root-user");
    }
    let ran = unshare
        .args(["--mount", "--", "sh", "-ec"])
        .arg(format!(
            "mount --bind '{folder}' '{folder}'\nmount -o remount,bind,ro '{folder}'\n\
             JOBHOST_CACHE_DIR='{cache}' RUST_BACKTRACE=0 JOBHOST_TEST_VIRTUAL_TIME=1 \
             '{program}' {args} > /dev/null 2> '{err}' || echo \"exit $?\"",
            folder = s(&folder),
            cache = s(&cache_dir()),
            args = args.join(" "),
            err = s(&err_file),
        ))
        .output()
        .expect("unshare runs (util-linux)");
    assert!(
        ran.status.success(),
        "the read-only mount could not be set up: {}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(
        stdout.contains("exit 2"),
        "bad input, nothing claimed: {stdout}"
    );
    let stderr = std::fs::read_to_string(&err_file).unwrap();
    assert!(stderr.contains("is read-only"), "{stderr}");
    assert!(!stderr.contains("cannot create store"), "{stderr}");
    // Writable again, the next window runs.
    let next = run_job(&cfg, &store, "2026-11-10T00:05:00Z");
    assert_eq!(next.receipt()["event"], "ran", "{}", next.stderr);
}

#[test]
fn a_daemon_that_finds_a_window_held_mid_write_looks_again_a_minute_later() {
    let Some(db) = Scratch::new(
        "store_faults::a_daemon_that_finds_a_window_held_mid_write_looks_again_a_minute_later",
    ) else {
        return;
    };
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let url = db.url();
    // A session holds the row of the window the daemon is about to run.
    let mut holder = db.client();
    let first = run_job(&cfg, &url, "2026-11-08T00:05:00Z");
    assert_eq!(first.receipt()["event"], "ran", "{}", first.stderr);
    let mut tx = holder.transaction().unwrap();
    tx.execute(
        "INSERT INTO jobhost_runs (key, job, window_start, window_end, timezone, state, fence,
            owner, lease_expires_at, attempt, component, created_at, updated_at)
         VALUES ('daily-report:2026-11-08', 'daily-report', '2026-11-08 00:00:00+00',
            '2026-11-09 00:00:00+00', 'UTC', 'CLAIMED', 1, 'frozen', now(), 1, '', now(), now())",
        &[],
    )
    .unwrap();
    let mut daemon = daemon_command(
        &[&cfg],
        &url,
        "2026-11-09T00:05:00Z",
        "2026-11-09T00:30:00Z",
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(daemon.stdout.take().unwrap()));
    let busy: serde_json::Value =
        serde_json::from_str(&lines.next().expect("a first line").unwrap()).unwrap();
    assert_eq!(
        (busy["key"].as_str(), busy["reason"].as_str()),
        (Some("daily-report:2026-11-08"), Some("busy")),
        "{busy}"
    );
    // The holder lets go; the daemon looks again a minute later (its clock
    // is virtual), not at the next window.
    tx.rollback().unwrap();
    let rest: Vec<serde_json::Value> = lines
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let ran = rest
        .iter()
        .find(|l| l["key"] == "daily-report:2026-11-08" && l["event"] == "ran")
        .unwrap_or_else(|| panic!("the window never ran: {rest:?}"));
    let minutes =
        |l: &serde_json::Value| l["now"].as_str().unwrap()[14..16].parse::<u32>().unwrap();
    assert!(
        minutes(ran) <= minutes(&busy) + 5,
        "looked at again within minutes: {busy} then {ran}"
    );
    assert!(daemon.wait().unwrap().success());
}
