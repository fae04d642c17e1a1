//! Which store a job uses when nothing names one: the same file from any
//! working directory (beside its config), the per-user state folder
//! without a config, and `--store` or `$JOBHOST_STORE` always first. An
//! invocation that creates a store says so.

use std::path::Path;

use crate::harness::*;

/// The bundled example, copied into `dir/examples`; returns its config.
fn demo(dir: &Path) -> std::path::PathBuf {
    let examples = dir.join("examples");
    std::fs::create_dir_all(&examples).unwrap();
    for f in ["daily-sales.toml", "sales.db"] {
        std::fs::copy(root().join("examples").join(f), examples.join(f)).unwrap();
    }
    examples.join("daily-sales.toml")
}

fn run_demo(cwd: &Path, config: &str) -> Run {
    jobhost_in(
        cwd,
        &[
            "run",
            "--config",
            config,
            "--component",
            s(&guests().report),
            "--now",
            "2026-11-09T00:05:00Z",
        ],
    )
}

#[test]
fn the_demo_run_from_two_folders_uses_one_store_and_delivers_once() {
    let dir = scratch();
    demo(dir.path());
    let from_top = run_demo(dir.path(), "examples/daily-sales.toml");
    let r = from_top.receipt();
    assert_eq!(r["event"], "ran", "{}", from_top.stderr);
    assert_eq!(r["store"], "examples/state/jobhost.db", "beside the config");
    assert_eq!(r["store_created"], true);
    assert!(
        from_top.stderr.contains("created a new store"),
        "{}",
        from_top.stderr
    );

    let examples = dir.path().join("examples");
    let from_inside = run_demo(&examples, "daily-sales.toml");
    let r = from_inside.receipt();
    assert_eq!(
        (r["event"].as_str(), r["reason"].as_str()),
        (Some("skipped"), Some("done")),
        "{r}"
    );
    assert_eq!(r["store"], "state/jobhost.db");
    assert!(r.get("store_created").is_none(), "{r}");
    assert!(!from_inside.stderr.contains("created a new store"));
    assert!(!examples.join("examples").exists());
    assert!(
        !dir.path().join("state").exists(),
        "no store beside the working directory"
    );
    let delivered = std::fs::read_to_string(examples.join("out/daily-sales.jsonl")).unwrap();
    assert_eq!(delivered.lines().count(), 1, "delivered once");

    // `history --config` reads the store the job uses, from anywhere.
    let h = jobhost_in(
        dir.path(),
        &["history", "--json", "--config", "examples/daily-sales.toml"],
    );
    assert_eq!(h.code, 0, "{}", h.stderr);
    assert_eq!(h.stdout.lines().count(), 1, "{}", h.stdout);
}

#[test]
fn without_a_config_the_store_is_the_per_user_state_folder_and_the_flag_or_variable_wins() {
    let dir = scratch();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let elsewhere = dir.path().join("cwd");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let args = [
        "run",
        "--component",
        s(&guests().probe),
        "--job",
        "clock",
        "--now",
        "2026-11-09T00:05:00Z",
    ];
    let mut cmd = command(&elsewhere, &args);
    cmd.env("HOME", &home).env_remove("XDG_STATE_HOME");
    let run = to_run(cmd.output().unwrap());
    let r = run.receipt();
    assert_eq!(r["event"], "ran", "{}", run.stderr);
    let per_user = home.join(".local/state/jobhost/jobhost.db");
    assert_eq!(r["store"], s(&per_user));
    assert!(per_user.is_file());
    assert!(!elsewhere.join("state").exists());

    // History without flags finds the same store.
    let mut cmd = command(&elsewhere, &["history", "--json"]);
    cmd.env("HOME", &home).env_remove("XDG_STATE_HOME");
    let h = to_run(cmd.output().unwrap());
    assert_eq!(h.stdout.lines().count(), 1, "{}", h.stderr);

    // $JOBHOST_STORE, and --store before it, win over every default.
    let named = dir.path().join("named.db");
    let mut cmd = command(&elsewhere, &args);
    cmd.env("HOME", &home).env("JOBHOST_STORE", &named);
    let run = to_run(cmd.output().unwrap());
    assert_eq!(run.receipt()["store"], s(&named), "{}", run.stderr);
    let flagged = dir.path().join("flagged.db");
    let mut with_flag = args.to_vec();
    with_flag.extend(["--store", s(&flagged)]);
    let mut cmd = command(&elsewhere, &with_flag);
    cmd.env("HOME", &home).env("JOBHOST_STORE", &named);
    let run = to_run(cmd.output().unwrap());
    assert_eq!(run.receipt()["store"], s(&flagged), "{}", run.stderr);

    // No config and no home: a clear refusal, nothing created.
    let mut cmd = command(&elsewhere, &args);
    cmd.env_remove("HOME").env_remove("XDG_STATE_HOME");
    let run = to_run(cmd.output().unwrap());
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("pass --store"), "{}", run.stderr);
}

#[test]
fn a_store_left_at_the_old_default_in_the_working_directory_is_not_silently_abandoned() {
    let dir = scratch();
    demo(dir.path());
    // An earlier jobhost kept the demo's claims in ./state/jobhost.db.
    let old = dir.path().join("state/jobhost.db");
    let first = jobhost_in(
        dir.path(),
        &[
            "run",
            "--config",
            "examples/daily-sales.toml",
            "--component",
            s(&guests().report),
            "--store",
            "state/jobhost.db",
            "--now",
            "2026-11-09T00:05:00Z",
        ],
    );
    assert_eq!(first.receipt()["event"], "ran", "{}", first.stderr);
    assert!(old.is_file());
    let upgraded = run_demo(dir.path(), "examples/daily-sales.toml");
    assert_eq!(upgraded.code, 2, "{}", upgraded.stderr);
    for part in ["examples/state/jobhost.db", "`state/jobhost.db`", "--store"] {
        assert!(
            upgraded.stderr.contains(part),
            "{part}: {}",
            upgraded.stderr
        );
    }
    assert!(
        !dir.path().join("examples/state").exists(),
        "no second store was started"
    );
    let delivered =
        std::fs::read_to_string(dir.path().join("examples/out/daily-sales.jsonl")).unwrap();
    assert_eq!(delivered.lines().count(), 1, "nothing ran twice");
    // Moved beside the config, it is the job's store again.
    std::fs::create_dir_all(dir.path().join("examples/state")).unwrap();
    for suffix in ["", "-wal", "-shm"] {
        let from = dir.path().join(format!("state/jobhost.db{suffix}"));
        if from.exists() {
            std::fs::rename(
                &from,
                dir.path()
                    .join(format!("examples/state/jobhost.db{suffix}")),
            )
            .unwrap();
        }
    }
    let moved = run_demo(dir.path(), "examples/daily-sales.toml");
    assert_eq!(moved.receipt()["reason"], "done", "{}", moved.stderr);
}
