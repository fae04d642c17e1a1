//! The compiled-code cache: a component is compiled once, loaded from disk
//! afterwards, and an artifact in a place others could write is not trusted.

use std::os::unix::fs::PermissionsExt;

use crate::harness::*;

fn run_with_cache(cache: &std::path::Path, now: &str) -> Run {
    let dir = scratch();
    let store = dir.path().join("s.db");
    let probe = guests().probe.clone();
    let mut cmd = command(
        &root(),
        &[
            "run",
            "--component",
            s(&probe),
            "--job",
            "clock",
            "--store",
            s(&store),
            "--now",
            now,
        ],
    );
    cmd.env("JOBHOST_CACHE_DIR", cache);
    to_run(cmd.output().expect("runs"))
}

#[test]
fn a_component_is_compiled_once_then_loaded_from_the_cache() {
    let dir = scratch();
    let cache = dir.path().join("cache");
    let first = run_with_cache(&cache, "2026-11-09T00:05:00Z");
    let second = run_with_cache(&cache, "2026-11-10T00:05:00Z");
    assert_eq!(first.receipt()["compiled"], "miss", "{}", first.stderr);
    assert_eq!(second.receipt()["compiled"], "hit", "{}", second.stderr);
    assert_eq!(second.event(), "ran");
    let mode = std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "the cache folder is private to its owner");
}

#[test]
fn a_cache_folder_others_can_write_is_not_trusted() {
    let dir = scratch();
    let cache = dir.path().join("cache");
    run_with_cache(&cache, "2026-11-09T00:05:00Z");
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let run = run_with_cache(&cache, "2026-11-10T00:05:00Z");
    let r = run.receipt();
    assert_eq!(r["event"], "ran");
    assert_eq!(r["compiled"], "bypassed");
    assert!(
        run.stderr.contains("others can write to it"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_damaged_artifact_is_recompiled_not_fatal() {
    let dir = scratch();
    let cache = dir.path().join("cache");
    run_with_cache(&cache, "2026-11-09T00:05:00Z");
    for entry in std::fs::read_dir(&cache).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "cwasm") {
            std::fs::write(path, b"not native code").unwrap();
        }
    }
    let run = run_with_cache(&cache, "2026-11-10T00:05:00Z");
    let r = run.receipt();
    assert_eq!(r["event"], "ran", "{}", run.stderr);
    assert_eq!(r["compiled"], "miss");
    assert!(
        run.stderr.contains("ignoring unreadable compiled artifact"),
        "{}",
        run.stderr
    );
}
