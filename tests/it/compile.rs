//! `jobhost compile` fills the compile cache ahead of time; a run says when
//! it compiles; the skip path and warm runs do not read the component: the
//! store answers first, and a file the cache hashed before is known by its
//! identity, never by stale bytes.

use std::path::Path;

use serde_json::Value;

use crate::harness::*;

fn compile(cache: &Path, components: &[&Path]) -> Run {
    let mut args = vec!["compile", "--cache-dir", s(cache)];
    args.extend(components.iter().map(|c| s(c)));
    jobhost(&args)
}

fn lines(run: &Run) -> Vec<Value> {
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

#[test]
fn compile_fills_the_cache_and_a_run_then_compiles_nothing() {
    let dir = scratch();
    let cache = dir.path().join("cache");
    let report = &guests().report;
    let top = &guests().top_products;
    let first = compile(&cache, &[report, top]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let made = lines(&first);
    assert_eq!(made.len(), 2, "{}", first.stdout);
    for line in &made {
        assert_eq!(line["cache"], "miss", "{line}");
        assert!(line["compile_seconds"].as_f64().is_some(), "{line}");
        let artifact = line["artifact"].as_str().unwrap();
        assert_eq!(
            std::fs::metadata(artifact).unwrap().len(),
            line["artifact_bytes"].as_u64().unwrap()
        );
        assert!(line["digest"].as_str().unwrap().starts_with("sha256:"));
    }
    assert!(
        first.stderr.contains("jobhost: note: compiling `"),
        "{}",
        first.stderr
    );

    let again = compile(&cache, &[report]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(lines(&again)[0]["cache"], "hit");
    assert!(
        again.stderr.contains("was already compiled"),
        "{}",
        again.stderr
    );

    // A run on that cache loads the artifact and says nothing of compiling.
    let cfg = report_config(dir.path(), 300);
    let mut cmd = job_command(&cfg, dir.path().join("s.db"), "2026-11-09T00:05:00Z");
    cmd.env("JOBHOST_CACHE_DIR", &cache);
    let run = to_run(cmd.output().unwrap());
    let r = run.receipt();
    assert_eq!(
        (r["event"].as_str(), r["compiled"].as_str()),
        (Some("ran"), Some("hit"))
    );
    assert_eq!(r["component"], made[0]["digest"]);
    assert!(!run.stderr.contains("compiling"), "{}", run.stderr);
}

#[test]
fn a_first_run_says_it_is_compiling_and_how_long_it_took() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let mut cmd = job_command(&cfg, dir.path().join("s.db"), "2026-11-09T00:05:00Z");
    cmd.env("JOBHOST_CACHE_DIR", dir.path().join("fresh-cache"));
    let run = to_run(cmd.output().unwrap());
    assert_eq!(run.receipt()["compiled"], "miss");
    let said: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("compil"))
        .collect();
    assert_eq!(said.len(), 2, "{}", run.stderr);
    assert!(
        said[0].starts_with("jobhost: note: compiling `"),
        "{}",
        said[0]
    );
    assert!(said[0].contains("jobhost compile"), "{}", said[0]);
    assert!(
        said[1].starts_with("jobhost: note: compiled `"),
        "{}",
        said[1]
    );
    let took = said[1].split("` in ").nth(1).unwrap_or("");
    assert!(
        took.split(' ')
            .next()
            .is_some_and(|t| t.parse::<f64>().is_ok())
            && (took.ends_with(" s") || took.contains(" s, reusing the code of ")),
        "{}",
        said[1]
    );
}

#[test]
fn compile_refuses_what_is_not_a_component_of_this_world() {
    let dir = scratch();
    let cache = dir.path().join("cache");
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, b"not wasm at all").unwrap();
    let run = compile(&cache, &[&junk]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("junk.wasm"), "{}", run.stderr);
    assert!(run.stdout.is_empty());
    let other = compile(&cache, &[&guests().other_world]);
    assert_eq!(other.code, 2, "{}", other.stderr);
    assert!(other.stderr.contains("does not fit"), "{}", other.stderr);
    let missing = compile(&cache, &[&dir.path().join("nope.wasm")]);
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.contains("nope.wasm"), "{}", missing.stderr);
}

#[test]
fn a_done_window_is_answered_without_reading_the_component() {
    let dir = scratch();
    let component = dir.path().join("report.wasm");
    std::fs::copy(&guests().report, &component).unwrap();
    let cfg = config(
        dir.path(),
        &std::fs::read_to_string(report_config(dir.path(), 200))
            .unwrap()
            .replace(&guests().report.display().to_string(), s(&component)),
    );
    let store = dir.path().join("s.db");
    let first = run_job(&cfg, &store, "2026-11-09T00:05:00Z");
    let digest = first.receipt()["component"].clone();
    assert_eq!(first.event(), "ran", "{}", first.stderr);
    // The file becomes unreadable: the done window is still answered, and
    // its receipt names the component that did it.
    std::fs::write(&component, b"").unwrap();
    let skip = run_job(&cfg, &store, "2026-11-09T00:05:00Z");
    let r = skip.receipt();
    assert_eq!(
        (skip.code, r["event"].as_str(), r["reason"].as_str()),
        (0, Some("skipped"), Some("done"))
    );
    assert_eq!(r["component"], digest);
    std::fs::remove_file(&component).unwrap();
    let skip = run_job(&cfg, &store, "2026-11-09T00:05:00Z");
    assert_eq!(
        (skip.code, skip.receipt()["reason"].as_str()),
        (0, Some("done")),
        "{}",
        skip.stderr
    );
    // The next window needs it, and says so.
    let next = run_job(&cfg, &store, "2026-11-10T00:05:00Z");
    assert_eq!(next.code, 2, "{}", next.stderr);
    assert!(
        next.receipt()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("report.wasm")
    );
}

#[test]
fn a_known_file_is_not_hashed_again_and_a_changed_one_is() {
    let dir = scratch();
    let cache = dir.path().join("cache");
    let component = dir.path().join("report.wasm");
    std::fs::copy(&guests().report, &component).unwrap();
    let cfg = config(
        dir.path(),
        &std::fs::read_to_string(report_config(dir.path(), 200))
            .unwrap()
            .replace(&guests().report.display().to_string(), s(&component)),
    );
    let store = dir.path().join("s.db");
    // A file changed within the racy window (two seconds by default) is
    // not remembered: a write in the same clock tick as the hash could
    // leave its times as they were. An hour's window: the file copied just
    // now is hashed, and not remembered.
    let run_within = |now: &str, window_ms: &str| {
        let mut cmd = job_command(&cfg, &store, now);
        cmd.env("JOBHOST_CACHE_DIR", &cache)
            .env("JOBHOST_TEST_RACY_WINDOW_MS", window_ms);
        to_run(cmd.output().unwrap())
    };
    let young = run_within("2026-11-08T00:05:00Z", "3600000");
    assert_eq!(young.event(), "ran", "{}", young.stderr);
    let remembered = std::fs::read_dir(cache.join("files")).map_or(0, |d| d.count());
    assert_eq!(
        remembered, 0,
        "a file changed within the window is hashed again"
    );
    // No window: the file is remembered as it is, without waiting for it
    // to age.
    let run = |now: &str| run_within(now, "0");
    let first = run("2026-11-09T00:05:00Z");
    assert_eq!(first.event(), "ran", "{}", first.stderr);
    let remembered = std::fs::read_dir(cache.join("files")).unwrap().count();
    assert_eq!(
        remembered, 1,
        "the file's digest is remembered by its identity"
    );
    let second = run("2026-11-10T00:05:00Z");
    assert_eq!(second.receipt()["component"], first.receipt()["component"]);
    assert_eq!(second.receipt()["compiled"], "hit");

    // Other bytes in the same file: the next run has their digest, not the
    // remembered one.
    std::fs::write(&component, std::fs::read(&guests().top_products).unwrap()).unwrap();
    let third = run("2026-11-11T00:05:00Z");
    assert_eq!(third.event(), "ran", "{}", third.stderr);
    let top = compile(&cache, &[&guests().top_products]);
    assert_eq!(third.receipt()["component"], lines(&top)[0]["digest"]);
    assert_ne!(third.receipt()["component"], first.receipt()["component"]);
}

#[test]
fn an_unknown_compiler_is_refused_by_name() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 10);
    let mut cmd = job_command(&cfg, dir.path().join("s.db"), "2026-11-09T00:05:00Z");
    cmd.env("JOBHOST_COMPILER", "llvm");
    let run = to_run(cmd.output().unwrap());
    assert_eq!(run.code, 2, "{}", run.stderr);
    let message = run.receipt()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("JOBHOST_COMPILER") && message.contains("winch"),
        "{message}"
    );
    assert!(
        history(dir.path().join("s.db")).is_empty(),
        "nothing claimed"
    );
}

/// The artifact a `compile` line names, read whole.
fn artifact_bytes(line: &Value) -> Vec<u8> {
    std::fs::read(line["artifact"].as_str().expect("an artifact path")).expect("the artifact")
}

#[test]
fn a_new_component_reuses_functions_compiled_before_and_gets_the_same_code() {
    let dir = scratch();
    let shared = dir.path().join("shared");
    // Two Rust components built by one toolchain share the standard
    // library's and the SDK's code.
    let first = compile(&shared, &[&guests().top_products]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let then = compile(&shared, &[&guests().report]);
    assert_eq!(then.code, 0, "{}", then.stderr);
    let line = &lines(&then)[0];
    assert_eq!(line["cache"], "miss", "{line}");
    let reused = line["functions_reused"]
        .as_u64()
        .expect("a count of reused functions");
    let compiled = line["functions_compiled"]
        .as_u64()
        .expect("a count of compiled ones");
    assert!(reused >= 100, "{line}");
    assert!(compiled > 0, "the report has code of its own: {line}");
    assert!(
        then.stderr.contains(&format!(
            ", reusing the code of {reused} of its {} functions from the function cache",
            reused + compiled
        )),
        "{}",
        then.stderr
    );

    // The same component compiled whole, reusing nothing, in a cache of
    // its own: byte for byte the same code.
    let whole = dir.path().join("whole");
    let mut cmd = command(
        dir.path(),
        &["compile", "--cache-dir", s(&whole), s(&guests().report)],
    );
    cmd.env("JOBHOST_FUNCTION_CACHE", "off");
    let alone = to_run(cmd.output().unwrap());
    assert_eq!(alone.code, 0, "{}", alone.stderr);
    let alone_line = &lines(&alone)[0];
    assert!(alone_line.get("functions_reused").is_none(), "{alone_line}");
    assert!(!whole.read_dir().unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("functions-")
    }));
    assert!(
        artifact_bytes(line) == artifact_bytes(alone_line),
        "the code compiled with reuse differs from the code compiled whole"
    );

    // And it runs as the whole one does.
    let cfg = report_config(dir.path(), 300);
    let mut outputs = Vec::new();
    for (cache, store) in [(&shared, "a.db"), (&whole, "b.db")] {
        let mut cmd = job_command(&cfg, dir.path().join(store), "2026-11-09T00:05:00Z");
        cmd.env("JOBHOST_CACHE_DIR", cache);
        let run = to_run(cmd.output().unwrap());
        let r = run.receipt();
        assert_eq!(
            (r["event"].as_str(), r["compiled"].as_str()),
            (Some("ran"), Some("hit")),
            "{}",
            run.stderr
        );
        outputs.push(std::fs::read(dir.path().join("out.jsonl")).unwrap());
        std::fs::remove_file(dir.path().join("out.jsonl")).unwrap();
    }
    assert_eq!(outputs[0], outputs[1]);
}

#[test]
fn a_damaged_function_cache_is_said_and_the_component_compiled_whole() {
    let dir = scratch();
    let cache = dir.path().join("cache");
    let first = compile(&cache, &[&guests().report]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let made = &lines(&first)[0];
    let good = artifact_bytes(made);
    let functions = cache
        .read_dir()
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("functions-")
        })
        .expect("a function cache beside the artifacts");
    std::fs::write(&functions, vec![0x5a; 8192]).unwrap();
    std::fs::remove_file(made["artifact"].as_str().unwrap()).unwrap();
    let again = compile(&cache, &[&guests().report]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again
            .stderr
            .contains("warning: not reusing compiled functions from `")
            && again.stderr.contains("the component is compiled whole"),
        "{}",
        again.stderr
    );
    let line = &lines(&again)[0];
    assert!(line.get("functions_reused").is_none(), "{line}");
    assert!(artifact_bytes(line) == good);
}

#[test]
fn an_unknown_function_cache_setting_is_refused_by_name() {
    let dir = scratch();
    let mut cmd = command(
        dir.path(),
        &[
            "compile",
            "--cache-dir",
            s(&dir.path().join("c")),
            s(&guests().report),
        ],
    );
    cmd.env("JOBHOST_FUNCTION_CACHE", "maybe");
    let run = to_run(cmd.output().unwrap());
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("JOBHOST_FUNCTION_CACHE is `maybe`; set it to `on`"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty(), "{}", run.stdout);
}
