//! Every run keeps a journal of what the host handed its guest: the context,
//! the rows batch by batch, each outbox and log acknowledgement. It is stored
//! with the run, compressed, and its size shows in `history`.

use jobhost::core::window::WindowKey;
use jobhost::guest::journal::{Entry, Given, Journal};
use jobhost::store::{Ledger, SqliteStore};

use crate::harness::*;

#[test]
fn a_run_journals_its_context_every_batch_and_every_acknowledgement() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 20_000);
    let store = dir.path().join("s.db");
    let run = run_job(&cfg, &store, "2026-11-09T00:05:00Z");
    let r = run.receipt();
    assert_eq!(r["event"], "ran", "{}", run.stderr);

    let key = WindowKey::from_stored("daily-report:2026-11-08".into());
    let stored = SqliteStore::open(&store)
        .unwrap()
        .journal(&key)
        .unwrap()
        .expect("a PREPARED run has a journal");
    let j = Journal::decode(&stored).unwrap();
    assert_eq!(j.context.key, "daily-report:2026-11-08");
    assert_eq!(j.context.now, (1_794_182_700, 0), "the pinned clock");
    assert_eq!(j.context.destinations, ["digest"]);
    assert_eq!(j.context.attempt, 1);

    assert_eq!(j.entries[0], Entry::Open(Ok(())));
    let Entry::Columns(columns) = &j.entries[1] else {
        panic!("columns next: {:?}", j.entries[1])
    };
    let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["ts", "region", "product", "quantity", "amount"]);
    let rows: u64 = j
        .entries
        .iter()
        .filter_map(|e| match e {
            Entry::Batch {
                answer: Ok(Some(b)),
                ..
            } => Some(u64::from(b.rows)),
            _ => None,
        })
        .sum();
    assert_eq!(
        rows,
        r["stats"]["rows"].as_u64().unwrap(),
        "every row handed over"
    );
    assert!(j.entries.iter().any(|e| matches!(
        e,
        Entry::Batch {
            answer: Ok(None),
            ..
        }
    )));
    let sends: Vec<&Entry> = j
        .entries
        .iter()
        .filter(|e| matches!(e, Entry::Send { .. }))
        .collect();
    assert_eq!(
        sends,
        [&Entry::Send {
            destination: Given::Whole("digest".into()),
            content_type: Given::Whole("application/json".into()),
            bytes: r["messages"][0]["bytes"].as_u64().unwrap(),
            answer: Ok(1)
        }]
    );
    assert!(j.entries.iter().any(|e| matches!(e, Entry::Log(_))));

    let h = &history(&store)[0];
    assert_eq!(h["journal_bytes"].as_u64(), Some(stored.len() as u64));
    assert!(
        (stored.len() as u64) < rows * 30,
        "compressed: {} bytes for {rows} rows",
        stored.len()
    );
}
