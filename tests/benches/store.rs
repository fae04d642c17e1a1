//! The claim store's cost with full durability (WAL, `synchronous=FULL`),
//! in one process, side by side in one run:
//!
//! 1. claims alone: one transaction (one fsync) per window;
//! 2. a whole run's store work: claim, PREPARED with one staged message,
//!    DONE with the delivery recorded (three transactions);
//! 3. the same with the lease checked before the send, as delivery does
//!    (a read, no fsync).
//!
//! Each round claims `N` fresh windows; the medians of the rounds are
//! reported with the ratio of (2) to (1). The store lives under `target/`,
//! on the same disk as the project, not in a RAM-backed temp folder.
//!
//! `cargo bench -p jobhost-tests --bench store` (add `-- --quick` for
//! fewer rounds).

use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use jobhost::store::{
    Attempted, Claim, ClaimRequest, ClaimStore, Lease, SqliteStore, StagedMessage, StoredReport,
};
use jobhost::window::{JobName, Window, WindowKind, Zone};

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, n) = if quick { (3, 200) } else { (7, 500) };
    let dir = jobhost_tests::guests::workspace_root()
        .join("target")
        .join("bench-store");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("bench folder");
    let job = JobName::new("bench").unwrap();
    let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut next_hour = 0i64;
    let mut windows = |count: usize| -> Vec<Window> {
        (0..count)
            .map(|_| {
                next_hour += 1;
                let t = start + SignedDuration::from_hours(next_hour);
                Window::containing(&job, WindowKind::Hour, &Zone::utc(), t).unwrap()
            })
            .collect()
    };

    let mut claim_only = Vec::new();
    let mut whole = Vec::new();
    let mut whole_checked = Vec::new();
    for round in 0..rounds {
        // Interleaved, so drift on a shared machine hits all three alike.
        let mut store = SqliteStore::open(&dir.join(format!("r{round}.db"))).unwrap();
        let ws = windows(n);
        let t = Instant::now();
        for w in &ws {
            claim(&mut store, w);
        }
        claim_only.push(t.elapsed() / n as u32);

        let ws = windows(n);
        let t = Instant::now();
        for w in &ws {
            let lease = claim(&mut store, w);
            prepare_and_finish(&mut store, w, &lease, false);
        }
        whole.push(t.elapsed() / n as u32);

        let ws = windows(n);
        let t = Instant::now();
        for w in &ws {
            let lease = claim(&mut store, w);
            prepare_and_finish(&mut store, w, &lease, true);
        }
        whole_checked.push(t.elapsed() / n as u32);
    }
    let (c, w, wc) = (median(&claim_only), median(&whole), median(&whole_checked));
    println!("store: SQLite, WAL, synchronous=FULL; {rounds} rounds of {n} windows; medians");
    println!(
        "  claim alone                                 {:>8.3} ms/run  {:>7.0} claims/s",
        ms(c),
        1.0 / c.as_secs_f64()
    );
    println!(
        "  claim + PREPARED + DONE                     {:>8.3} ms/run  {:>7.0} runs/s  ({:.2}x the claim)",
        ms(w),
        1.0 / w.as_secs_f64(),
        w.as_secs_f64() / c.as_secs_f64()
    );
    println!(
        "  claim + PREPARED + lease check + DONE       {:>8.3} ms/run  {:>7.0} runs/s  ({:.2}x the claim)",
        ms(wc),
        1.0 / wc.as_secs_f64(),
        wc.as_secs_f64() / c.as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn claim(store: &mut SqliteStore, w: &Window) -> Lease {
    let now = w.end;
    match store
        .claim(&ClaimRequest {
            window: w,
            owner: "bench",
            component: "sha256:bench",
            now,
            lease_until: now + SignedDuration::from_mins(5),
            max_attempts: 3,
        })
        .unwrap()
    {
        Claim::Run { lease, .. } => lease,
        other => panic!("fresh window not claimable: {other:?}"),
    }
}

fn prepare_and_finish(store: &mut SqliteStore, w: &Window, lease: &Lease, check: bool) {
    let message = StagedMessage {
        seq: 1,
        destination: "digest".into(),
        idempotency_key: format!("{}#1", w.key()),
        content_type: "application/json".into(),
        body: br#"{"orders":240,"revenue":18211.5}"#.to_vec(),
    };
    let report = StoredReport {
        summary: "240 orders".into(),
        cursor: Some("c".into()),
    };
    store
        .prepare(lease, &report, &[message], &[0; 2048], w.end)
        .unwrap();
    if check {
        store.check_lease(lease).unwrap();
    }
    let done = Attempted {
        seq: 1,
        tries: 1,
        status: "http 200",
    };
    store.finish(lease, Some(&done), w.end).unwrap();
}

fn median(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s[s.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
