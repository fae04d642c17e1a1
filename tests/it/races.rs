//! Many processes started at once on a store that does not exist yet:
//! exactly one runs the window, every other one skips it.

use std::process::Stdio;

use crate::harness::*;

#[test]
fn many_processes_on_a_fresh_store_run_the_window_exactly_once() {
    // Warm the compile cache so the processes race on the store, not on Cranelift.
    let warm = scratch();
    let cfg = report_config(warm.path(), 100);
    let warmed = run_job(&cfg, warm.path().join("w.db"), "2026-11-09T00:05:00Z");
    assert_eq!(warmed.event(), "ran", "{}", warmed.stderr);

    for trial in 0..10 {
        let dir = scratch();
        let cfg = report_config(dir.path(), 500);
        let store = dir.path().join("fresh").join("jobhost.db");
        let children: Vec<_> = (0..12)
            .map(|_| {
                job_command(&cfg, &store, "2026-11-09T00:05:00Z")
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("spawn")
            })
            .collect();
        let runs: Vec<Run> = children
            .into_iter()
            .map(|c| to_run(c.wait_with_output().expect("wait")))
            .collect();
        let mut events: Vec<String> = runs.iter().map(Run::event).collect();
        events.sort();
        let ran = events.iter().filter(|e| *e == "ran").count();
        assert_eq!(
            ran,
            1,
            "trial {trial}: exactly one process runs the window, got {events:?}; stderr: {:?}",
            runs.iter().map(|r| r.stderr.as_str()).collect::<Vec<_>>()
        );
        assert!(
            events.iter().all(|e| e == "ran" || e == "skipped"),
            "{events:?}"
        );
        assert!(runs.iter().all(|r| r.code == 0));
        let delivered = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
        assert_eq!(delivered.lines().count(), 1, "trial {trial}: one delivery");
        let h = history(&store);
        assert_eq!(h.len(), 1);
        assert_eq!(h[0]["state"], "DONE");
        assert_eq!(h[0]["fence"], 1);
        // Twelve processes appended to one chain: it holds, and accounts
        // for every row.
        let verified = jobhost(&["verify", "--store", s(&store)]);
        assert_eq!(verified.code, 0, "trial {trial}: {}", verified.stdout);
    }
}
