//! The claim store contract, run against every backend: each test below is
//! one function over a [`Fixture`], and the `contract!` list at the end runs
//! it once on SQLite and once on PostgreSQL, so a behaviour cannot exist on
//! one backend and not the other.
//!
//! Time: the SQLite store measures leases on the host's lease clock, which
//! the fixture moves by hand; the PostgreSQL store measures them on the
//! database's clock, which no test can move, so its fixture uses short
//! leases and lets them run out for real. That difference is the point of
//! the PostgreSQL store (hosts with skewed clocks agree on leases), not a
//! gap in the suite.

use std::path::PathBuf;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use jobhost::Error;
use jobhost::core::window::{JobName, Window, WindowKind, Zone};
use jobhost::store::{
    Actor, Attempted, AuditAction, Claim, ClaimRequest, Failure, Fence, FreshClaims, Lease,
    LeasesOnly, MessageState, OwnerProbe, PostgresStore, PostgresUrl, Purpose, RunInputs, RunState,
    Skip, SqliteStore, StagedMessage, Store, StoredReport, TakenFrom, Takeover, UpstreamUse,
};
use jobhost_tests::pg::Scratch;

use crate::harness::scratch;

/// One backend, a place for its store, and its clock.
pub struct Fixture {
    backend: Backend,
    /// The host's lease clock (what SQLite measures leases on).
    now: Timestamp,
}

enum Backend {
    Sqlite {
        _dir: tempfile::TempDir,
        path: PathBuf,
    },
    Postgres(Scratch),
}

impl Fixture {
    fn sqlite() -> Fixture {
        let dir = scratch();
        let path = dir.path().join("store.db");
        Fixture {
            backend: Backend::Sqlite { _dir: dir, path },
            now: "2026-11-09T00:05:00Z".parse().unwrap(),
        }
    }

    fn postgres(test: &str) -> Option<Fixture> {
        Some(Fixture {
            backend: Backend::Postgres(Scratch::new(test)?),
            now: "2026-11-09T00:05:00Z".parse().unwrap(),
        })
    }

    /// A new connection to the store (a new process, as far as the store
    /// can tell).
    fn open(&self) -> Box<dyn Store> {
        match &self.backend {
            Backend::Sqlite { path, .. } => Box::new(SqliteStore::open(path).unwrap()),
            Backend::Postgres(s) => {
                Box::new(PostgresStore::open(&PostgresUrl::new(s.url())).unwrap())
            }
        }
    }

    /// A lease long enough to hold across a few statements on a busy
    /// machine.
    fn lease(&self) -> Duration {
        match self.backend {
            Backend::Sqlite { .. } => Duration::from_secs(60),
            Backend::Postgres(_) => Duration::from_secs(2),
        }
    }

    /// Lets `d` pass on the store's clock.
    fn pass(&mut self, d: Duration) {
        match self.backend {
            Backend::Sqlite { .. } => self.now += SignedDuration::try_from(d).unwrap(),
            Backend::Postgres(_) => std::thread::sleep(d),
        }
    }

    /// Lets the lease run out.
    fn expire(&mut self) {
        self.pass(self.lease() + Duration::from_millis(300));
    }

    fn req<'a>(&self, w: &'a Window, owner: &'a str, max_attempts: u32) -> ClaimRequest<'a> {
        ClaimRequest {
            window: w,
            owner,
            component: "sha256:00",
            now: self.now,
            lease: self.lease(),
            max_attempts,
            purpose: Purpose::Asked,
            probe: &LeasesOnly,
        }
    }

    fn claim(&self, s: &mut dyn Store, w: &Window, owner: &str, max: u32) -> Claim {
        s.claim(&self.req(w, owner, max)).unwrap()
    }

    fn run(&self, s: &mut dyn Store, w: &Window, owner: &str, max: u32) -> Lease {
        match self.claim(s, w, owner, max) {
            Claim::Run { lease, .. } => lease,
            other => panic!("{owner} must get the run, got {other:?}"),
        }
    }
}

fn window(day: &str) -> Window {
    job_window("daily-report", day)
}

/// `job`'s UTC day window of `day`.
fn job_window(job: &str, day: &str) -> Window {
    let now: Timestamp = format!("{day}T12:00:00Z").parse().unwrap();
    Window::containing(
        &JobName::new(job).unwrap(),
        WindowKind::Day,
        &Zone::utc(),
        now,
    )
    .unwrap()
}

fn message(w: &Window, seq: u32, body: &[u8]) -> StagedMessage {
    StagedMessage {
        seq,
        destination: "digest".into(),
        idempotency_key: format!("{}#{seq}", w.key()),
        content_type: "application/octet-stream".into(),
        body: body.to_vec(),
    }
}

fn report(cursor: Option<&str>) -> StoredReport {
    StoredReport {
        summary: "240 orders".into(),
        cursor: cursor.map(str::to_string),
        prompt: Some(format!("describe {} orders", 240)),
        described: true,
    }
}

fn delivered(seq: u32) -> Attempted<'static> {
    Attempted {
        seq,
        tries: 1,
        status: "http 200",
    }
}

fn is_lost<T: std::fmt::Debug>(r: jobhost::Result<T>) -> bool {
    matches!(r, Err(Error::LeaseLost(_)))
}

fn a_live_claim_is_busy_and_an_expired_one_is_taken_over_with_a_new_fence(f: &mut Fixture) {
    let mut s = f.open();
    let w = window("2026-11-08");
    let Claim::Run { lease, takeover } = f.claim(s.as_mut(), &w, "a", 3) else {
        panic!("the first claim runs")
    };
    assert!(!takeover);
    assert_eq!((lease.fence, lease.attempt), (Fence(1), 1));
    let mut other = f.open();
    assert!(
        matches!(f.claim(other.as_mut(), &w, "b", 3), Claim::Busy { ref owner, .. } if owner == "a"),
        "a live lease keeps others away"
    );
    f.expire();
    let Claim::Run { lease: b, takeover } = f.claim(other.as_mut(), &w, "b", 3) else {
        panic!("an expired claim is taken over")
    };
    assert!(takeover);
    assert_eq!((b.fence, b.attempt), (Fence(2), 2));
    s.prepare(&b, &report(None), &[], b"j", f.now).unwrap();
    s.finish(&b, None, f.now).unwrap();
    assert_eq!(
        f.claim(s.as_mut(), &w, "c", 3),
        Claim::Done {
            attempt: 2,
            fence: Fence(2)
        }
    );
}

/// A probe that records `rec:<owner>` with each claim and takes the owners
/// in `gone` for ended, when the store hands their record back.
#[derive(Debug)]
struct Probe {
    gone: &'static [&'static str],
}

impl OwnerProbe for Probe {
    fn record(&self, owner: &str) -> Option<String> {
        Some(format!("rec:{owner}"))
    }

    fn gone(&self, owner: &str, record: Option<&str>) -> bool {
        self.gone.contains(&owner) && record == Some(&*format!("rec:{owner}"))
    }
}

fn a_live_claim_whose_owner_is_gone_is_taken_over_at_once_with_the_next_fence(f: &mut Fixture) {
    let probe = Probe { gone: &["a"] };
    let asked = |w, owner| ClaimRequest {
        probe: &probe,
        ..f.req(w, owner, 5)
    };
    let mut s = f.open();
    // PREPARED, its lease live: resumed at once, fenced as after a lease.
    let w = window("2026-11-08");
    let Claim::Run { lease: old, .. } = s.claim(&asked(&w, "a")).unwrap() else {
        panic!("the first claim runs")
    };
    s.prepare(&old, &report(None), &[message(&w, 1, b"x")], b"j", f.now)
        .unwrap();
    let Claim::Resume { lease: new } = s.claim(&asked(&w, "b")).unwrap() else {
        panic!("a PREPARED run whose owner is gone is resumed at once")
    };
    assert_eq!((new.fence, new.attempt), (Fence(2), 2));
    assert_eq!(
        new.taken_from,
        Some(TakenFrom {
            owner: "a".into(),
            fence: Fence(1),
            because: Takeover::OwnerGone
        })
    );
    assert!(is_lost(s.check_lease(&old, f.now)));
    assert!(is_lost(s.mark_delivered(&old, &delivered(1), f.now)));
    // The new owner recorded itself: a live owner is not taken over.
    assert!(
        matches!(s.claim(&asked(&w, "c")).unwrap(), Claim::Busy { ref owner, .. } if owner == "b"),
        "a live owner keeps its window"
    );
    // CLAIMED, its lease live: run again at once.
    let w2 = window("2026-11-09");
    assert!(matches!(
        s.claim(&asked(&w2, "a")).unwrap(),
        Claim::Run { .. }
    ));
    let Claim::Run { lease, takeover } = s.claim(&asked(&w2, "b")).unwrap() else {
        panic!("a CLAIMED run whose owner is gone runs again at once")
    };
    assert!(takeover);
    assert_eq!((lease.fence, lease.attempt), (Fence(2), 2));
    // A claim that recorded nothing (an older host): its lease decides.
    let w3 = window("2026-11-10");
    f.run(s.as_mut(), &w3, "a", 5);
    assert!(matches!(
        s.claim(&asked(&w3, "b")).unwrap(),
        Claim::Busy { .. }
    ));
}

fn a_stale_owner_can_write_nothing_after_a_takeover(f: &mut Fixture) {
    let mut s = f.open();
    let w = window("2026-11-08");
    let old = f.run(s.as_mut(), &w, "a", 5);
    s.prepare(&old, &report(None), &[message(&w, 1, b"x")], b"j", f.now)
        .unwrap();
    f.expire();
    let Claim::Resume { lease: new } = f.claim(s.as_mut(), &w, "b", 5) else {
        panic!("a PREPARED run is resumed")
    };
    let now = f.now;
    let lease = f.lease();
    assert!(is_lost(s.prepare(&old, &report(None), &[], b"", now)));
    assert!(is_lost(s.check_lease(&old, now)));
    assert!(is_lost(s.renew(&old, lease, None, now)));
    assert!(is_lost(s.renew(&old, lease, Some(1), now)));
    assert!(is_lost(s.not_sent(&old, 1, "refused", now)));
    assert!(is_lost(s.mark_delivered(&old, &delivered(1), now)));
    assert!(is_lost(s.finish(&old, Some(&delivered(1)), now)));
    assert!(is_lost(s.fail(&old, "x", Failure::Permanent, None, now)));
    let pending = s.pending_messages(&w.key()).unwrap();
    assert_eq!(pending.len(), 1, "nothing the stale owner did counted");
    assert_eq!((pending[0].attempts, pending[0].in_flight), (0, false));
    s.finish(&new, Some(&delivered(1)), now).unwrap();
    assert_eq!(s.peek(&w.key()).unwrap().unwrap().state, RunState::Done);
}

fn a_claim_whose_every_attempt_died_is_abandoned_not_left_claimed(f: &mut Fixture) {
    let mut s = f.open();
    let w = window("2026-11-08");
    f.run(s.as_mut(), &w, "a", 2);
    f.expire();
    assert!(matches!(
        f.claim(s.as_mut(), &w, "b", 2),
        Claim::Run { takeover: true, .. }
    ));
    f.expire();
    let Claim::GaveUp {
        attempts,
        error,
        abandoned_now: true,
        ..
    } = f.claim(s.as_mut(), &w, "c", 2)
    else {
        panic!("out of attempts")
    };
    assert_eq!(attempts, 2);
    assert!(error.unwrap().contains("abandoned after 2 attempt(s)"));
    assert_eq!(
        s.peek(&w.key()).unwrap().unwrap().state,
        RunState::Abandoned
    );
    assert!(
        matches!(
            f.claim(s.as_mut(), &w, "d", 2),
            Claim::GaveUp {
                abandoned_now: false,
                ..
            }
        ),
        "abandoned once, reported as given up after that"
    );
}

fn the_cursor_moves_only_when_the_run_is_done_and_never_backwards(f: &mut Fixture) {
    let mut s = f.open();
    let job = JobName::new("daily-report").unwrap();
    let newer = window("2026-11-08");
    let lease = f.run(s.as_mut(), &newer, "a", 3);
    s.prepare(
        &lease,
        &report(Some("c8")),
        &[message(&newer, 1, b"hi")],
        b"j",
        f.now,
    )
    .unwrap();
    assert_eq!(s.cursor(&job).unwrap(), None, "PREPARED does not move it");
    assert!(
        matches!(s.finish(&lease, None, f.now), Err(Error::Delivery(_))),
        "an undelivered message blocks DONE"
    );
    assert_eq!(
        s.peek(&newer.key()).unwrap().unwrap().state,
        RunState::Prepared
    );
    s.finish(&lease, Some(&delivered(1)), f.now).unwrap();
    assert_eq!(s.cursor(&job).unwrap().as_deref(), Some("c8"));

    // A late run of an older window finishes after the newer one.
    let older = window("2026-11-07");
    let lease = f.run(s.as_mut(), &older, "a", 3);
    s.prepare(&lease, &report(Some("c7")), &[], b"j", f.now)
        .unwrap();
    s.finish(&lease, None, f.now).unwrap();
    assert_eq!(
        s.cursor(&job).unwrap().as_deref(),
        Some("c8"),
        "an older window never moves the cursor back"
    );
}

fn a_failed_delivery_keeps_the_report_and_waits_out_its_backoff(f: &mut Fixture) {
    let mut s = f.open();
    let w = window("2026-11-08");
    let lease = f.run(s.as_mut(), &w, "a", 3);
    s.prepare(&lease, &report(None), &[message(&w, 1, b"hi")], b"j", f.now)
        .unwrap();
    let backoff = f.lease();
    let tried = Attempted {
        seq: 1,
        tries: 5,
        status: "http 503",
    };
    s.fail(
        &lease,
        "503",
        Failure::Retry { after: backoff },
        Some(&tried),
        f.now,
    )
    .unwrap();
    let row = s.peek(&w.key()).unwrap().unwrap();
    assert_eq!(row.state, RunState::Prepared, "the report is kept");
    assert!(row.retry_at.is_some());
    let Claim::Wait {
        attempts, error, ..
    } = f.claim(s.as_mut(), &w, "b", 3)
    else {
        panic!("the backoff has not passed")
    };
    assert_eq!((attempts, error.as_deref()), (1, Some("503")));
    f.pass(backoff + Duration::from_millis(300));
    let Claim::Resume { lease: b } = f.claim(s.as_mut(), &w, "b", 3) else {
        panic!("after the backoff the stored messages are resumed")
    };
    assert_eq!(
        (b.fence, b.attempt),
        (Fence(2), 2),
        "a resume is an attempt"
    );
    let pending = s.pending_messages(&w.key()).unwrap();
    assert_eq!(
        pending[0].attempts, 5,
        "sends are counted across invocations"
    );
    assert_eq!(pending[0].message.body, b"hi");
    assert!(is_lost(s.check_lease(&lease, f.now)));
    assert!(s.check_lease(&b, f.now).unwrap() > SignedDuration::ZERO);
    assert_eq!(s.peek(&w.key()).unwrap().unwrap().retry_at, None);
}

fn a_retryable_guest_failure_is_claimed_again_after_its_backoff(f: &mut Fixture) {
    let mut s = f.open();
    let w = window("2026-11-08");
    let lease = f.run(s.as_mut(), &w, "a", 3);
    let backoff = f.lease();
    s.fail(
        &lease,
        "guest trapped",
        Failure::Retry { after: backoff },
        None,
        f.now,
    )
    .unwrap();
    let row = s.peek(&w.key()).unwrap().unwrap();
    assert_eq!(row.state, RunState::Failed);
    assert_eq!(row.error.as_deref(), Some("guest trapped"));
    assert!(matches!(
        f.claim(s.as_mut(), &w, "b", 3),
        Claim::Wait { .. }
    ));
    f.pass(backoff + Duration::from_millis(300));
    let Claim::Run { lease: b, takeover } = f.claim(s.as_mut(), &w, "b", 3) else {
        panic!("a retryable failure runs again")
    };
    assert!(takeover);
    assert_eq!(b.attempt, 2);
    assert_eq!(s.peek(&w.key()).unwrap().unwrap().state, RunState::Claimed);
}

fn a_permanent_failure_is_never_claimed_again(f: &mut Fixture) {
    let mut s = f.open();
    let w = window("2026-11-08");
    let lease = f.run(s.as_mut(), &w, "a", 3);
    s.fail(&lease, "invalid data", Failure::Permanent, None, f.now)
        .unwrap();
    f.expire();
    let Claim::GaveUp {
        attempts, error, ..
    } = f.claim(s.as_mut(), &w, "b", 3)
    else {
        panic!("permanent means never")
    };
    assert_eq!((attempts, error.as_deref()), (1, Some("invalid data")));
}

fn a_refused_delivery_fails_the_run_and_its_message_for_good(f: &mut Fixture) {
    let mut s = f.open();
    let w = window("2026-11-08");
    let lease = f.run(s.as_mut(), &w, "a", 3);
    s.prepare(
        &lease,
        &report(Some("c")),
        &[message(&w, 1, b"a"), message(&w, 2, b"b")],
        b"j",
        f.now,
    )
    .unwrap();
    let refused = Attempted {
        seq: 1,
        tries: 1,
        status: "http 400",
    };
    s.fail(
        &lease,
        "http 400",
        Failure::Permanent,
        Some(&refused),
        f.now,
    )
    .unwrap();
    let row = s.peek(&w.key()).unwrap().unwrap();
    assert_eq!(row.state, RunState::Failed);
    assert_eq!((row.messages, row.delivered), (2, 0));
    let pending = s.pending_messages(&w.key()).unwrap();
    assert_eq!(
        pending.iter().map(|p| p.message.seq).collect::<Vec<_>>(),
        [2],
        "the refused message is no longer pending; the next one was never sent"
    );
    assert_eq!(
        s.cursor(&JobName::new("daily-report").unwrap()).unwrap(),
        None
    );
    f.expire();
    assert!(matches!(
        f.claim(s.as_mut(), &w, "b", 3),
        Claim::GaveUp {
            abandoned_now: false,
            ..
        }
    ));
}

fn a_prepared_run_out_of_attempts_is_abandoned_not_resumed(f: &mut Fixture) {
    let mut s = f.open();
    let w = window("2026-11-08");
    let lease = f.run(s.as_mut(), &w, "a", 1);
    s.prepare(&lease, &report(None), &[message(&w, 1, b"hi")], b"j", f.now)
        .unwrap();
    // The owner died while delivering; its only attempt is spent.
    f.expire();
    assert!(matches!(
        f.claim(s.as_mut(), &w, "b", 1),
        Claim::GaveUp {
            abandoned_now: true,
            ..
        }
    ));
    assert_eq!(
        s.peek(&w.key()).unwrap().unwrap().state,
        RunState::Abandoned
    );
}

fn an_at_most_once_send_in_flight_survives_the_process(f: &mut Fixture) {
    let w = window("2026-11-08");
    let lease = {
        let mut s = f.open();
        let lease = f.run(s.as_mut(), &w, "a", 3);
        s.prepare(
            &lease,
            &report(None),
            &[message(&w, 1, b"a"), message(&w, 2, b"b")],
            b"j",
            f.now,
        )
        .unwrap();
        s.renew(&lease, f.lease(), Some(1), f.now).unwrap();
        lease
    };
    let mut s = f.open();
    let pending = s.pending_messages(&w.key()).unwrap();
    assert!(pending[0].in_flight, "the mark was committed");
    assert_eq!(pending[0].attempts, 1, "the send was counted when it began");
    assert!(!pending[1].in_flight);
    s.not_sent(&lease, 1, "http 429", f.now).unwrap();
    let pending = s.pending_messages(&w.key()).unwrap();
    assert!(
        !pending[0].in_flight,
        "a send known not to have arrived is cleared"
    );
    assert_eq!(pending[0].attempts, 1);
}

fn renewing_extends_the_lease_and_never_shortens_it(f: &mut Fixture) {
    let mut s = f.open();
    let w = window("2026-11-08");
    let lease = f.run(s.as_mut(), &w, "a", 3);
    s.prepare(&lease, &report(None), &[], b"j", f.now).unwrap();
    let left = s.check_lease(&lease, f.now).unwrap();
    assert!(left > SignedDuration::ZERO && left <= SignedDuration::try_from(f.lease()).unwrap());
    s.renew(&lease, f.lease() * 10, None, f.now).unwrap();
    let longer = s.check_lease(&lease, f.now).unwrap();
    assert!(longer > left * 5, "{longer} after renewing, {left} before");
    s.renew(&lease, Duration::from_secs(1), None, f.now)
        .unwrap();
    assert!(
        s.check_lease(&lease, f.now).unwrap() > left * 5,
        "a shorter renewal never cuts a lease"
    );
}

fn a_key_recorded_for_another_window_is_refused(f: &mut Fixture) {
    let mut s = f.open();
    let w = window("2026-11-08");
    f.run(s.as_mut(), &w, "a", 3);
    // The same job and label, but the job moved to another zone.
    let tokyo = Window::containing(
        &JobName::new("daily-report").unwrap(),
        WindowKind::Day,
        &Zone::new("Asia/Tokyo").unwrap(),
        "2026-11-08T12:00:00Z".parse().unwrap(),
    )
    .unwrap();
    assert_eq!(tokyo.key(), w.key());
    let err = s.claim(&f.req(&tokyo, "b", 3)).unwrap_err();
    assert!(matches!(err, Error::Input(_)), "{err}");
    assert!(err.to_string().contains("give the job a new name"), "{err}");
}

fn what_was_committed_reads_back_byte_for_byte(f: &mut Fixture) {
    let mut s = f.open();
    let w = window("2026-11-08");
    let lease = f.run(s.as_mut(), &w, "a", 3);
    let body: Vec<u8> = (0..=255u8).chain([0, 0, 255]).collect();
    let journal: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 256) as u8).collect();
    let staged = [message(&w, 1, &body), message(&w, 2, b"{}")];
    s.prepare(
        &lease,
        &report(Some("cursor \u{1F600}")),
        &staged,
        &journal,
        f.now,
    )
    .unwrap();
    let mut s = f.open();
    assert_eq!(s.messages(&w.key()).unwrap(), staged);
    assert_eq!(s.journal(&w.key()).unwrap().as_deref(), Some(&journal[..]));
    assert_eq!(
        s.report(&w.key()).unwrap(),
        Some(report(Some("cursor \u{1F600}")))
    );
    s.mark_delivered(&lease, &delivered(1), f.now).unwrap();
    let pending = s.pending_messages(&w.key()).unwrap();
    assert_eq!(pending.len(), 1, "a delivered message is no longer pending");
    assert_eq!(pending[0].message, staged[1]);
    assert_eq!(s.messages(&w.key()).unwrap().len(), 2, "but it is kept");
}

fn history_lists_newest_windows_first_with_their_messages(f: &mut Fixture) {
    let mut s = f.open();
    assert!(s.jobs().unwrap().is_empty());
    let (a, b) = (window("2026-11-07"), window("2026-11-08"));
    let la = f.run(s.as_mut(), &a, "a", 3);
    s.prepare(
        &la,
        &report(None),
        &[message(&a, 1, b"x"), message(&a, 2, b"y")],
        &[1; 100],
        f.now,
    )
    .unwrap();
    s.mark_delivered(&la, &delivered(1), f.now).unwrap();
    f.run(s.as_mut(), &b, "b", 3);
    let other = job_window("other-job", "2026-11-09");
    f.run(s.as_mut(), &other, "c", 3);
    let h = s.history(Some("daily-report")).unwrap();
    let keys: Vec<String> = h.iter().map(|r| r.key.to_string()).collect();
    assert_eq!(keys, ["daily-report:2026-11-08", "daily-report:2026-11-07"]);
    let older = &h[1];
    assert_eq!(older.state, RunState::Prepared);
    assert_eq!((older.messages, older.delivered), (2, 1));
    assert_eq!(older.journal_bytes, Some(100));
    assert_eq!((older.window_start, older.window_end), (a.start, a.end));
    assert_eq!(older.timezone, "UTC");
    assert_eq!(older.owner, "a");
    assert_eq!(h[0].journal_bytes, None);
    assert_eq!(s.history(None).unwrap().len(), 3);
    // The newest N, of one job or of all, newest window first.
    let newest = |s: &mut dyn jobhost::store::Ledger, job, n| -> Vec<String> {
        s.newest(job, n)
            .unwrap()
            .iter()
            .map(|r| r.key.to_string())
            .collect()
    };
    assert_eq!(
        newest(s.as_mut(), None, 2),
        ["other-job:2026-11-09", "daily-report:2026-11-08"]
    );
    assert_eq!(
        newest(s.as_mut(), Some("daily-report"), 1),
        ["daily-report:2026-11-08"]
    );
    assert_eq!(newest(s.as_mut(), Some("daily-report"), 10).len(), 2);
    // Each job once, by name, however many runs it has.
    assert_eq!(s.jobs().unwrap(), ["daily-report", "other-job"]);
}

fn racing_claims_on_one_window_give_exactly_one_run(f: &mut Fixture) {
    let w = window("2026-11-08");
    let claims: Vec<Claim> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (f, w) = (&*f, &w);
                scope.spawn(move || {
                    let mut s = f.open();
                    f.claim(s.as_mut(), w, &format!("host-{i}"), 3)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let runs = claims
        .iter()
        .filter(|c| matches!(c, Claim::Run { .. }))
        .count();
    assert_eq!(runs, 1, "{claims:?}");
    assert!(
        claims
            .iter()
            .all(|c| matches!(c, Claim::Run { .. } | Claim::Busy { .. })),
        "{claims:?}"
    );
}

fn opening_a_migrated_store_again_changes_nothing(f: &mut Fixture) {
    let w = window("2026-11-08");
    {
        let mut s = f.open();
        f.run(s.as_mut(), &w, "a", 3);
    }
    for _ in 0..3 {
        let mut s = f.open();
        assert_eq!(s.history(None).unwrap().len(), 1);
    }
}

fn a_skip_is_recorded_once_and_never_over_a_run_and_a_run_on_purpose_takes_it_over(
    f: &mut Fixture,
) {
    let mut s = f.open();
    let (missed, running) = (window("2026-11-07"), window("2026-11-08"));
    f.run(s.as_mut(), &running, "runner", 3);
    let skips = [
        Skip {
            window: &missed,
            reason: "missed (catch_up = \"latest\")",
        },
        Skip {
            window: &running,
            reason: "missed",
        },
    ];
    assert_eq!(
        s.record_skips(&skips, "daemon-a", f.now).unwrap(),
        [true, false],
        "the row already there wins"
    );
    assert_eq!(
        f.open().record_skips(&skips, "daemon-b", f.now).unwrap(),
        [false, false],
        "a second scheduler decides nothing again"
    );
    let row = s.peek(&missed.key()).unwrap().unwrap();
    assert_eq!(
        (row.state, row.attempt, row.owner.as_str()),
        (RunState::Skipped, 0, "daemon-a")
    );
    assert_eq!(
        (row.skip_reason.as_deref(), row.error.as_deref()),
        (Some("missed (catch_up = \"latest\")"), None),
        "the reason is not an error"
    );
    assert_eq!(
        (row.window_start, row.window_end),
        (missed.start, missed.end)
    );
    assert_eq!(
        s.peek(&running.key()).unwrap().unwrap().state,
        RunState::Claimed
    );
    // The scheduler's own claims leave its decision standing.
    let scheduled = ClaimRequest {
        purpose: Purpose::Scheduled,
        ..f.req(&missed, "daemon-b", 3)
    };
    assert_eq!(
        s.claim(&scheduled).unwrap(),
        Claim::Skipped {
            reason: Some("missed (catch_up = \"latest\")".to_string())
        }
    );
    // Nothing ran in a skipped window, so a run asked for on purpose gets
    // it, under a claim like any other, and the reason is not its error.
    let Claim::Run { lease, takeover } = f.claim(s.as_mut(), &missed, "person", 3) else {
        panic!("a skipped window can be run on purpose")
    };
    assert!(takeover);
    assert_eq!((lease.fence, lease.attempt), (Fence(1), 1));
    let row = s.peek(&missed.key()).unwrap().unwrap();
    assert_eq!(
        (row.state, row.error, row.skip_reason),
        (RunState::Claimed, None, None)
    );
    assert!(
        matches!(f.claim(s.as_mut(), &missed, "other", 3), Claim::Busy { .. }),
        "and holds it"
    );
}

/// `peek_head` (what a `jobhost run` reads first) says what the whole row
/// says, in every state a run can find its window in.
fn the_head_of_a_row_says_what_the_whole_row_says(f: &mut Fixture) {
    let mut s = f.open();
    let (done, skipped, claimed, failed, none) = (
        window("2026-11-04"),
        window("2026-11-05"),
        window("2026-11-06"),
        window("2026-11-07"),
        window("2026-11-08"),
    );
    done_with_one_message(f, s.as_mut(), &done, "c1");
    s.record_skips(
        &[Skip {
            window: &skipped,
            reason: "missed",
        }],
        "daemon",
        f.now,
    )
    .unwrap();
    f.run(s.as_mut(), &claimed, "runner", 3);
    let lease = f.run(s.as_mut(), &failed, "runner", 3);
    s.fail(&lease, "boom", Failure::Permanent, None, f.now)
        .unwrap();
    for (w, state) in [
        (&done, RunState::Done),
        (&skipped, RunState::Skipped),
        (&claimed, RunState::Claimed),
        (&failed, RunState::Failed),
    ] {
        let whole = s.peek(&w.key()).unwrap().unwrap();
        let head = f.open().peek_head(&w.key()).unwrap().unwrap();
        assert_eq!(head.state, state);
        assert_eq!(head, whole.head(), "{state:?}");
    }
    let skip = s.peek_head(&skipped.key()).unwrap().unwrap();
    assert_eq!(skip.skip_reason.as_deref(), Some("missed"));
    assert_eq!(
        (skip.window_start, skip.window_end),
        (skipped.start, skipped.end)
    );
    assert_eq!(s.peek_head(&none.key()).unwrap(), None);
}

fn decided_until_moves_only_forward_per_job(f: &mut Fixture) {
    let mut s = f.open();
    let job = JobName::new("daily-report").unwrap();
    let other = JobName::new("other").unwrap();
    assert_eq!(s.decided_until(&job).unwrap(), None);
    let (early, late) = (window("2026-11-07").end, window("2026-11-08").end);
    s.set_decided_until(&job, late, f.now).unwrap();
    s.set_decided_until(&job, early, f.now).unwrap();
    assert_eq!(f.open().decided_until(&job).unwrap(), Some(late));
    assert_eq!(s.decided_until(&other).unwrap(), None);
}

fn a_plan_reads_only_the_rows_from_a_point_and_the_unfinished_ones_of_any_age(f: &mut Fixture) {
    let mut s = f.open();
    let days = ["2026-11-05", "2026-11-06", "2026-11-07", "2026-11-08"];
    let ws: Vec<Window> = days.iter().map(|d| window(d)).collect();
    // The 5th is left claimed (its owner died); the others are skipped.
    f.run(s.as_mut(), &ws[0], "dead", 3);
    let skips: Vec<Skip<'_>> = ws[1..]
        .iter()
        .map(|w| Skip {
            window: w,
            reason: "r",
        })
        .collect();
    s.record_skips(&skips, "d", f.now).unwrap();
    let keys = |rows: Vec<jobhost::store::RunRecord>| -> Vec<String> {
        rows.into_iter().map(|r| r.key.to_string()).collect()
    };
    assert_eq!(
        keys(s.history_from("daily-report", Some(ws[2].start)).unwrap()),
        [ws[3].key().to_string(), ws[2].key().to_string()],
        "newest first, only the windows from the point on"
    );
    assert_eq!(s.history_from("daily-report", None).unwrap().len(), 4);
    assert!(s.history_from("other", None).unwrap().is_empty());
    assert_eq!(
        keys(s.unfinished("daily-report").unwrap()),
        [ws[0].key().to_string()],
        "the old claimed run, not the skips"
    );
}

/// The whole history's counts of `job` as the store keeps them, the same
/// counted from its rows, and a range's counts spanning it all: the three
/// must agree.
fn assert_counts_agree(s: &mut dyn Store, job: &str, when: &str) {
    let mut kept = s.state_counts(job, None, None).unwrap();
    kept.sort_by_key(|(st, _)| st.as_str());
    let mut counted = std::collections::BTreeMap::new();
    for r in s.history(Some(job)).unwrap() {
        *counted.entry(r.state.as_str()).or_insert(0u64) += 1;
    }
    let counted: Vec<(&str, u64)> = counted.into_iter().collect();
    let kept_named: Vec<(&str, u64)> = kept.iter().map(|(st, n)| (st.as_str(), *n)).collect();
    assert_eq!(
        kept_named, counted,
        "{job}, {when}: kept counts against the rows"
    );
    let (from, until) = (window("2000-01-01").start, window("2100-01-01").start);
    let mut ranged = s.state_counts(job, Some(from), Some(until)).unwrap();
    ranged.sort_by_key(|(st, _)| st.as_str());
    assert_eq!(ranged, kept, "{job}, {when}: a range holding everything");
}

fn the_counts_of_a_whole_history_follow_every_change_of_its_rows(f: &mut Fixture) {
    let mut s = f.open();
    let job = "daily-report";
    let days: Vec<String> = (1..=12).map(|d| format!("2026-10-{d:02}")).collect();
    let ws: Vec<Window> = days.iter().map(|d| window(d)).collect();
    assert!(s.state_counts(job, None, None).unwrap().is_empty());
    let skips: Vec<Skip<'_>> = ws[..6]
        .iter()
        .map(|w| Skip {
            window: w,
            reason: "catch_up = \"latest\"",
        })
        .collect();
    s.record_skips(&skips, "daemon", f.now).unwrap();
    s.record_skips(&skips, "daemon", f.now).unwrap();
    assert_counts_agree(s.as_mut(), job, "after skips, recorded twice");
    // A run on purpose takes a skip over; others run, fail, stay claimed.
    done_with_one_message(f, s.as_mut(), &ws[0], "c0");
    done_with_one_message(f, s.as_mut(), &ws[6], "c6");
    let failed = f.run(s.as_mut(), &ws[7], "a", 3);
    s.fail(&failed, "boom", Failure::Permanent, None, f.now)
        .unwrap();
    let retrying = f.run(s.as_mut(), &ws[8], "a", 3);
    let after = Duration::from_secs(3600);
    s.fail(&retrying, "flaky", Failure::Retry { after }, None, f.now)
        .unwrap();
    f.run(s.as_mut(), &ws[9], "dead", 1);
    let p = f.run(s.as_mut(), &ws[10], "a", 3);
    s.prepare(
        &p,
        &report(None),
        &[message(&ws[10], 1, b"owed")],
        b"j",
        f.now,
    )
    .unwrap();
    assert_counts_agree(s.as_mut(), job, "after runs");
    // The dead owner's only attempt is abandoned when claimed again.
    f.expire();
    f.claim(s.as_mut(), &ws[9], "b", 1);
    // A rerun, a forget, a prune.
    let Claim::Run { lease, .. } = s.claim(&rerun(f, &ws[6], None)).unwrap() else {
        panic!("rerun")
    };
    assert_counts_agree(s.as_mut(), job, "while a rerun is claimed");
    s.prepare(&lease, &report(None), &[], b"j", f.now).unwrap();
    s.finish(&lease, None, f.now).unwrap();
    let who = Actor {
        by: "ann@host",
        reason: "bad data",
    };
    s.forget(&ws[7].key(), false, who, f.now).unwrap();
    s.prune(Some(job), ws[11].start, false, who, f.now).unwrap();
    assert_counts_agree(s.as_mut(), job, "after a rerun, a forget and a prune");
    // Another job's rows are its own.
    let other = job_window("other", "2026-10-03");
    f.run(s.as_mut(), &other, "a", 3);
    assert_counts_agree(s.as_mut(), job, "after another job's claim");
    assert_counts_agree(s.as_mut(), "other", "its own");
    // Hosts writing one job's rows at once: no change is lost or counted
    // twice.
    let more: Vec<Window> = (1..=24)
        .map(|d| window(&format!("2026-09-{d:02}")))
        .collect();
    std::thread::scope(|scope| {
        for (i, chunk) in more.chunks(6).enumerate() {
            let f = &*f;
            scope.spawn(move || {
                let mut s = f.open();
                for (j, w) in chunk.iter().enumerate() {
                    if j % 2 == 0 {
                        done_with_one_message(f, s.as_mut(), w, "c");
                    } else {
                        let skip = Skip {
                            window: w,
                            reason: "r",
                        };
                        s.record_skips(&[skip], &format!("host-{i}"), f.now)
                            .unwrap();
                    }
                }
            });
        }
    });
    let mut s = f.open();
    assert_counts_agree(s.as_mut(), job, "after hosts wrote at once");
    let newest_failed = s
        .runs_in_range(&jobhost::store::RangeQuery {
            job,
            from: None,
            until: None,
            states: &[RunState::Abandoned, RunState::Failed],
            oldest_first: false,
            limit: 1,
        })
        .unwrap();
    assert_eq!(
        newest_failed
            .iter()
            .map(|r| r.key.to_string())
            .collect::<Vec<_>>(),
        [ws[9].key().to_string()],
        "the newest row of either state"
    );
}

/// Runs each listed contract test on every backend.
macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test] fn $name() { super::$name(&mut super::Fixture::sqlite()); })*
        }
        mod postgres {
            $(#[test] fn $name() {
                if let Some(mut f) = super::Fixture::postgres(concat!("store_contract::postgres::", stringify!($name))) {
                    super::$name(&mut f);
                }
            })*
        }
    };
}

/// A run of `w` to DONE with one delivered message; its lease.
fn done_with_one_message(f: &Fixture, s: &mut dyn Store, w: &Window, cursor: &str) -> Lease {
    let lease = f.run(s, w, "a", 3);
    let prefix = lease.message_prefix();
    let m = StagedMessage {
        idempotency_key: format!("{prefix}#1"),
        ..message(w, 1, cursor.as_bytes())
    };
    s.prepare(&lease, &report(Some(cursor)), &[m], b"journal", f.now)
        .unwrap();
    s.finish(&lease, Some(&delivered(1)), f.now).unwrap();
    lease
}

fn rerun<'a>(f: &Fixture, w: &'a Window, of: Option<u32>) -> ClaimRequest<'a> {
    ClaimRequest {
        purpose: Purpose::Rerun {
            reason: "fixed the rounding",
            of_revision: of,
            by: "ann@host",
        },
        ..f.req(w, "r", 3)
    }
}

fn a_rerun_archives_the_done_revision_and_runs_the_next_with_new_keys(f: &mut Fixture) {
    let mut s = f.open();
    let (old, new) = (window("2026-11-07"), window("2026-11-08"));
    let first = done_with_one_message(f, s.as_mut(), &old, "c7");
    assert_eq!(first.revision, 1);
    done_with_one_message(f, s.as_mut(), &new, "c8");
    // A plain claim of a DONE window answers Done; a rerun of revision 1
    // claims revision 2.
    assert!(matches!(
        f.claim(s.as_mut(), &old, "x", 3),
        Claim::Done { .. }
    ));
    let Claim::Run { lease, takeover } = s.claim(&rerun(f, &old, Some(1))).unwrap() else {
        panic!("a rerun of a DONE window runs")
    };
    assert!(!takeover);
    assert_eq!((lease.revision, lease.attempt), (2, 1));
    assert_eq!(lease.message_prefix(), "daily-report:2026-11-07~r2");
    // A second rerun of revision 1 (somebody else's, racing) finds
    // revision 2 under a live claim; once it is DONE, it answers Done.
    assert!(matches!(
        s.claim(&rerun(f, &old, Some(1))).unwrap(),
        Claim::Busy { .. }
    ));
    let row = s.peek(&old.key()).unwrap().unwrap();
    assert_eq!((row.revision, row.state), (2, RunState::Claimed));
    assert_eq!(row.reason.as_deref(), Some("fixed the rounding"));
    assert!(
        row.report.is_none(),
        "the new revision starts without a report"
    );
    // The rerun is given the cursor of the newest DONE window before it
    // (none here), and its own cursor does not move the job's back.
    assert_eq!(
        s.cursor_before(&old.job, old.start).unwrap(),
        None,
        "nothing is DONE before 11-07"
    );
    assert_eq!(
        s.cursor_before(&new.job, new.start).unwrap(),
        None,
        "11-07 is being rerun"
    );
    let m = StagedMessage {
        idempotency_key: format!("{}#1", lease.message_prefix()),
        ..message(&old, 1, b"again")
    };
    s.prepare(&lease, &report(Some("c7-r2")), &[m], b"journal 2", f.now)
        .unwrap();
    s.finish(&lease, Some(&delivered(1)), f.now).unwrap();
    assert_eq!(
        s.cursor(&old.job).unwrap().as_deref(),
        Some("c8"),
        "the newest window's cursor stays the job's"
    );
    assert!(matches!(
        s.claim(&rerun(f, &old, Some(1))).unwrap(),
        Claim::Done { .. }
    ));
    // The earlier revision is kept with its message, and replayable.
    let revisions = s.revisions(&old.key()).unwrap();
    assert_eq!(revisions.len(), 1);
    let r1 = &revisions[0];
    assert_eq!((r1.revision, r1.state), (1, RunState::Done));
    assert_eq!(r1.messages.len(), 1);
    assert_eq!(r1.messages[0].idempotency_key, "daily-report:2026-11-07#1");
    assert_eq!(r1.messages[0].state, MessageState::Delivered);
    let archived = s.archived(&old.key(), 1).unwrap().unwrap();
    assert_eq!(archived.journal.as_deref(), Some(&b"journal"[..]));
    assert_eq!(archived.messages[0].body, b"c7");
    let now_keys: Vec<String> = s
        .message_records(&old.key())
        .unwrap()
        .into_iter()
        .map(|m| m.idempotency_key)
        .collect();
    assert_eq!(now_keys, ["daily-report:2026-11-07~r2#1"]);
    let audit = s.audit(Some("daily-report")).unwrap();
    assert_eq!(audit[0].action, AuditAction::Rerun);
    assert_eq!(audit[0].reason, "fixed the rounding");
    assert_eq!(audit[0].by, "ann@host");
}

fn a_retry_on_purpose_starts_a_new_attempt_series_and_keeps_the_old_error(f: &mut Fixture) {
    let mut s = f.open();
    let w = window("2026-11-08");
    let lease = f.run(s.as_mut(), &w, "a", 3);
    s.fail(
        &lease,
        "the source was down",
        Failure::Permanent,
        None,
        f.now,
    )
    .unwrap();
    assert!(matches!(
        f.claim(s.as_mut(), &w, "b", 3),
        Claim::GaveUp { .. }
    ));
    let retry = ClaimRequest {
        purpose: Purpose::Retry {
            reason: "source is back",
            by: "ann@host",
        },
        ..f.req(&w, "b", 3)
    };
    let Claim::Run { lease, .. } = s.claim(&retry).unwrap() else {
        panic!("a retry on purpose runs a FAILED window")
    };
    assert_eq!(
        (lease.attempt, lease.revision, lease.fence),
        (1, 1, Fence(2))
    );
    let audit = s.audit(None).unwrap();
    assert_eq!(audit[0].action, AuditAction::Retry);
    assert_eq!(audit[0].old_state.as_deref(), Some("FAILED"));
    assert_eq!(audit[0].detail.as_deref(), Some("the source was down"));
}

fn a_window_a_person_names_is_audited_as_run_only_when_its_claim_is_granted(f: &mut Fixture) {
    let mut s = f.open();
    let named = |w| ClaimRequest {
        purpose: Purpose::Named { by: "ann@host" },
        ..f.req(w, "p", 3)
    };
    let (new, skipped, cron) = (
        window("2026-11-08"),
        window("2026-11-09"),
        window("2026-11-10"),
    );
    assert!(matches!(s.claim(&named(&new)).unwrap(), Claim::Run { .. }));
    // Held by that claim: a second person's is answered, and not audited.
    assert!(matches!(
        f.open().claim(&named(&new)).unwrap(),
        Claim::Busy { .. }
    ));
    s.record_skips(
        &[Skip {
            window: &skipped,
            reason: "missed",
        }],
        "daemon",
        f.now,
    )
    .unwrap();
    assert!(matches!(
        s.claim(&named(&skipped)).unwrap(),
        Claim::Run { .. }
    ));
    // A run nobody named (a cron's `jobhost run`) writes none.
    assert!(matches!(
        s.claim(&f.req(&cron, "c", 3)).unwrap(),
        Claim::Run { .. }
    ));
    let mut audit = s.audit(Some("daily-report")).unwrap();
    audit.sort_by_key(|a| a.key.clone());
    let seen: Vec<_> = audit
        .iter()
        .map(|a| {
            (
                a.action,
                a.key.as_deref().unwrap_or_default(),
                a.old_state.as_deref(),
                a.by.as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                AuditAction::Run,
                "daily-report:2026-11-08",
                None,
                "ann@host"
            ),
            (
                AuditAction::Run,
                "daily-report:2026-11-09",
                Some("SKIPPED"),
                "ann@host"
            ),
        ]
    );
}

fn forget_removes_only_what_did_not_finish_and_says_why_not_otherwise(f: &mut Fixture) {
    let mut s = f.open();
    let who = Actor {
        by: "ann@host",
        reason: "bad data",
    };
    let (done, failed, prepared, live) = (
        window("2026-11-05"),
        window("2026-11-06"),
        window("2026-11-07"),
        window("2026-11-08"),
    );
    done_with_one_message(f, s.as_mut(), &done, "c");
    let l = f.run(s.as_mut(), &failed, "a", 3);
    s.fail(&l, "boom", Failure::Permanent, None, f.now).unwrap();
    let p = f.run(s.as_mut(), &prepared, "a", 3);
    s.prepare(
        &p,
        &report(None),
        &[message(&prepared, 1, b"owed")],
        b"j",
        f.now,
    )
    .unwrap();
    s.set_decided_until(&done.job, live.start, f.now).unwrap();
    let err = |r: jobhost::Result<jobhost::store::Forgotten>| r.unwrap_err().to_string();
    assert!(err(s.forget(&done.key(), false, who, f.now)).contains("rerun"));
    assert!(err(s.forget(&prepared.key(), false, who, f.now)).contains("live claim"));
    let missing = window("2026-10-01");
    assert!(err(s.forget(&missing.key(), false, who, f.now)).contains("no run"));
    let forgotten = s.forget(&failed.key(), false, who, f.now).unwrap();
    assert_eq!(forgotten.old_state, RunState::Failed);
    assert_eq!(
        forgotten.decided_until,
        Some(failed.start),
        "decided again from there"
    );
    assert_eq!(s.decided_until(&done.job).unwrap(), Some(failed.start));
    assert!(s.peek(&failed.key()).unwrap().is_none());
    // A scheduler that planned before the forget cannot move past the
    // forgotten window while it has no row again.
    s.set_decided_until(&done.job, live.end, f.now).unwrap();
    assert_eq!(s.decided_until(&done.job).unwrap(), Some(failed.start));
    // Skipped by a catch-up policy, then run on purpose: its fence goes on
    // from the forgotten one's, so the old owner can write nothing.
    let skip = Skip {
        window: &failed,
        reason: "catch_up = \"latest\"",
    };
    assert_eq!(s.record_skips(&[skip], "daemon", f.now).unwrap(), [true]);
    let revived = f.run(s.as_mut(), &failed, "c", 3);
    assert!(
        revived.fence > l.fence,
        "{:?} after {:?}",
        revived.fence,
        l.fence
    );
    assert!(is_lost(s.fail(&l, "late", Failure::Permanent, None, f.now)));
    s.set_decided_until(&done.job, live.end, f.now).unwrap();
    assert_eq!(
        s.decided_until(&done.job).unwrap(),
        Some(live.end),
        "it has a row again"
    );
    f.expire();
    assert!(err(s.forget(&prepared.key(), false, who, f.now)).contains("--force"));
    let forced = s.forget(&prepared.key(), true, who, f.now).unwrap();
    assert_eq!((forced.undelivered, forced.archived), (1, true));
    // Its report was archived, so the next run of it is a new revision,
    // and the old owner's fence matches nothing.
    let again = f.run(s.as_mut(), &prepared, "b", 3);
    assert_eq!(again.revision, 2);
    assert!(again.fence > p.fence);
    assert!(is_lost(s.mark_delivered(&p, &delivered(1), f.now)));
    let audit = s.audit(None).unwrap();
    let forgets: Vec<_> = audit
        .iter()
        .filter(|a| a.action == AuditAction::Forget)
        .collect();
    assert_eq!(forgets.len(), 2);
    assert_eq!(forgets[0].old_state.as_deref(), Some("PREPARED"));
    assert_eq!(forgets[1].detail.as_deref(), Some("last error: boom"));
    assert_eq!(forgets[1].reason, "bad data");
    // A live claim is refused.
    let l = f.run(s.as_mut(), &live, "a", 3);
    let _ = l;
    assert!(err(s.forget(&live.key(), true, who, f.now)).contains("live claim"));
}

fn a_paused_job_claims_nothing_on_any_connection_until_resumed(f: &mut Fixture) {
    let mut s = f.open();
    let mut other = f.open();
    let w = window("2026-11-08");
    let who = Actor {
        by: "ann@host",
        reason: "destination migrating",
    };
    assert!(s.pause("daily-report", who, f.now).unwrap().is_none());
    let Claim::Paused { note, by, .. } = f.claim(other.as_mut(), &w, "b", 3) else {
        panic!("a paused job is not claimed")
    };
    assert_eq!(
        (note.as_str(), by.as_str()),
        ("destination migrating", "ann@host")
    );
    assert!(
        other.peek(&w.key()).unwrap().is_none(),
        "nothing was written"
    );
    assert_eq!(other.paused("daily-report").unwrap().unwrap().note, note);
    assert!(other.paused("another-job").unwrap().is_none());
    let ended = s.resume("daily-report", who, f.now).unwrap();
    assert!(ended.is_some());
    assert!(s.resume("daily-report", who, f.now).unwrap().is_none());
    assert!(matches!(
        f.claim(other.as_mut(), &w, "b", 3),
        Claim::Run { .. }
    ));
    let actions: Vec<AuditAction> = s
        .audit(None)
        .unwrap()
        .into_iter()
        .map(|a| a.action)
        .collect();
    assert_eq!(actions, [AuditAction::Resume, AuditAction::Pause]);
}

fn a_batch_claims_only_windows_nobody_claimed_and_lets_go_of_what_it_will_not_start(
    f: &mut Fixture,
) {
    let mut s = f.open();
    let mut other = f.open();
    let w: Vec<Window> = (1..=6).map(|d| window(&format!("2026-11-0{d}"))).collect();
    let who = Actor {
        by: "ann@host",
        reason: "bad data",
    };
    // 2: held by `b`; 3: failed and forgotten (its next fence is 2);
    // 5: skipped by a scheduler.
    let held_by_b = f.run(s.as_mut(), &w[1], "b", 3);
    let l = f.run(s.as_mut(), &w[2], "a", 3);
    s.fail(&l, "boom", Failure::Permanent, None, f.now).unwrap();
    s.forget(&w[2].key(), false, who, f.now).unwrap();
    let skips = [Skip {
        window: &w[4],
        reason: "catch-up",
    }];
    s.record_skips(&skips, "sched", f.now).unwrap();
    s.set_decided_until(&w[0].job, w[5].end, f.now).unwrap();

    let batch = |s: &mut dyn Store, windows: &[Window], owner: &str| {
        s.claim_fresh(&FreshClaims {
            job: &windows[0].job,
            windows,
            owner,
            component: "sha256:00",
            now: f.now,
            lease: f.lease(),
            probe: &LeasesOnly,
        })
    };
    let leases = batch(other.as_mut(), &w, "a").unwrap();
    let got: Vec<(&str, i64, u32, u32)> = leases
        .iter()
        .map(|l| (l.key.as_str(), l.fence.0, l.attempt, l.revision))
        .collect();
    assert_eq!(
        got,
        [
            ("daily-report:2026-11-01", 1, 1, 1),
            ("daily-report:2026-11-03", 2, 1, 1),
            ("daily-report:2026-11-04", 1, 1, 1),
            ("daily-report:2026-11-06", 1, 1, 1),
        ],
        "the windows with no row, in order; the forgotten one from its next fence"
    );
    let b_row = s.peek(&w[1].key()).unwrap().unwrap();
    assert_eq!((b_row.owner.as_str(), b_row.fence), ("b", held_by_b.fence));
    assert_eq!(
        s.peek(&w[4].key()).unwrap().unwrap().state,
        RunState::Skipped
    );
    // Each granted window is claimed as a claim is: another process finds
    // it busy, and its holder writes under its lease.
    for l in &leases {
        let row = s.peek(&l.key).unwrap().unwrap();
        assert_eq!((row.state, row.owner.as_str()), (RunState::Claimed, "a"));
    }
    assert!(matches!(
        f.claim(s.as_mut(), &w[0], "c", 3),
        Claim::Busy { .. }
    ));
    s.prepare(&leases[0], &report(None), &[], b"j", f.now)
        .unwrap();
    assert!(
        batch(s.as_mut(), &w, "c").unwrap().is_empty(),
        "a second batch finds every window claimed"
    );

    // Letting go: the window has no row again, and the plan's mark goes
    // back to it; a new claim takes the next fence, so the old lease
    // writes nothing. A run that got further (PREPARED) is not let go of.
    s.release(&leases[..], f.now).unwrap();
    assert!(s.peek(&w[3].key()).unwrap().is_none());
    assert!(s.peek(&w[5].key()).unwrap().is_none());
    assert_eq!(
        s.peek(&w[0].key()).unwrap().unwrap().state,
        RunState::Prepared
    );
    assert_eq!(
        s.decided_until(&w[0].job).unwrap(),
        Some(w[2].start),
        "no plan stays past a window let go of"
    );
    let again = f.run(s.as_mut(), &w[3], "c", 3);
    assert_eq!((again.fence.0, again.attempt), (2, 1));
    assert!(is_lost(s.prepare(
        &leases[2],
        &report(None),
        &[],
        b"j",
        f.now
    )));

    // A paused job is granted nothing; a window of another job is refused.
    s.pause("daily-report", who, f.now).unwrap();
    assert!(batch(s.as_mut(), &w[5..], "a").unwrap().is_empty());
    assert!(
        s.peek(&w[5].key()).unwrap().is_none(),
        "nothing was written"
    );
    s.resume("daily-report", who, f.now).unwrap();
    let mixed = [w[5].clone(), job_window("another-job", "2026-11-06")];
    let err = batch(s.as_mut(), &mixed, "a").unwrap_err().to_string();
    assert!(err.contains("another-job"), "{err}");
    assert!(s.peek(&w[5].key()).unwrap().is_none());
}

fn a_window_claimed_ahead_and_never_started_has_used_no_attempt(f: &mut Fixture) {
    let mut s = f.open();
    let mut other = f.open();
    let (never, run, failed) = (
        window("2026-11-01"),
        window("2026-11-02"),
        window("2026-11-03"),
    );
    let ahead = |s: &mut dyn Store, w: &Window| {
        let mut leases = s
            .claim_fresh(&FreshClaims {
                job: &w.job,
                windows: std::slice::from_ref(w),
                owner: "a",
                component: "sha256:00",
                now: f.now,
                lease: f.lease(),
                probe: &LeasesOnly,
            })
            .unwrap();
        assert_eq!(leases.len(), 1);
        leases.remove(0)
    };
    let attempt = |s: &mut dyn Store, w: &Window| s.peek(&w.key()).unwrap().unwrap().attempt;
    ahead(s.as_mut(), &never);
    assert_eq!(attempt(s.as_mut(), &never), 0, "claimed, not started");
    let l = ahead(s.as_mut(), &run);
    s.prepare(&l, &report(None), &[], b"j", f.now).unwrap();
    assert_eq!(attempt(s.as_mut(), &run), 1, "started once it commits");
    let l = ahead(s.as_mut(), &failed);
    s.fail(&l, "boom", Failure::Permanent, None, f.now).unwrap();
    assert_eq!(attempt(s.as_mut(), &failed), 1, "a failure counts");
    // Its holder died before starting it: with one attempt allowed, the
    // window still gets its one attempt.
    f.expire();
    let Claim::Run { lease, takeover } = f.claim(other.as_mut(), &never, "b", 1) else {
        panic!("a window claimed ahead and never started is run, not abandoned")
    };
    assert!(takeover);
    assert_eq!((lease.attempt, lease.fence.0), (1, 2));
}

fn a_waiting_window_is_recorded_once_keeps_its_words_current_and_runs_when_claimed(
    f: &mut Fixture,
) {
    let mut s = f.open();
    let (w, done) = (window("2026-11-07"), window("2026-11-08"));
    assert!(
        s.record_waiting(&w, "`up:2026-11-07` (not run yet)", "a", f.now)
            .unwrap()
    );
    let row = s.peek(&w.key()).unwrap().unwrap();
    assert_eq!(row.state, RunState::Waiting);
    assert_eq!(row.attempt, 0);
    assert_eq!(
        row.skip_reason.as_deref(),
        Some("`up:2026-11-07` (not run yet)")
    );
    // Looked at again: the words follow what it waits for now.
    assert!(
        s.record_waiting(&w, "`up:2026-11-07` (FAILED)", "b", f.now)
            .unwrap()
    );
    let row = s.peek(&w.key()).unwrap().unwrap();
    assert_eq!(row.skip_reason.as_deref(), Some("`up:2026-11-07` (FAILED)"));
    assert_eq!(row.owner, "a", "the row is not taken over by looking");
    // The daemon finds it among the unfinished windows.
    let unfinished: Vec<String> = s
        .unfinished("daily-report")
        .unwrap()
        .iter()
        .map(|r| r.key.to_string())
        .collect();
    assert_eq!(unfinished, [w.key().to_string()]);
    // The scheduler's claim runs it, as its first attempt.
    let Claim::Run { lease, .. } = f.claim(s.as_mut(), &w, "c", 1) else {
        panic!("a WAITING window is run when claimed")
    };
    assert_eq!((lease.attempt, lease.fence.0, lease.revision), (1, 1, 1));
    // A row in any other state is left as it is.
    assert!(!s.record_waiting(&w, "anything", "d", f.now).unwrap());
    assert_eq!(s.peek(&w.key()).unwrap().unwrap().state, RunState::Claimed);
    done_with_one_message(f, s.as_mut(), &done, "c8");
    assert!(!s.record_waiting(&done, "anything", "d", f.now).unwrap());
    assert_eq!(s.peek(&done.key()).unwrap().unwrap().state, RunState::Done);
}

fn a_window_that_used_an_upstream_revision_is_stale_once_the_upstream_is_rerun_whenever_it_committed(
    f: &mut Fixture,
) {
    let mut s = f.open();
    let (up, early, late) = (
        job_window("up", "2026-11-08"),
        job_window("early", "2026-11-08"),
        job_window("late", "2026-11-08"),
    );
    done_with_one_message(f, s.as_mut(), &up, "u");
    let used = |revision| UpstreamUse {
        key: up.key().to_string(),
        revision,
        report_digest: "sha256:00".into(),
    };
    let inputs = |u| RunInputs {
        uses: vec![u],
        fingerprint: None,
    };
    // One window committed before the upstream's rerun, one while it ran.
    let lease = f.run(s.as_mut(), &early, "a", 3);
    s.prepare_using(&lease, &report(None), &[], b"j", &inputs(used(1)), f.now)
        .unwrap();
    s.finish(&lease, None, f.now).unwrap();
    let running = f.run(s.as_mut(), &late, "b", 3);
    assert!(s.stale(None, None, 10).unwrap().is_empty());
    assert_eq!(s.uses(&early.key()).unwrap(), [used(1)]);
    let Claim::Run { lease: again, .. } = s.claim(&rerun(f, &up, Some(1))).unwrap() else {
        panic!("the rerun runs")
    };
    assert_eq!(again.revision, 2);
    // The rerun's claim marks the window that committed before it.
    let marks = s.stale(None, None, 10).unwrap();
    assert_eq!(marks.len(), 1, "{marks:?}");
    assert_eq!(marks[0].key, early.key());
    assert!(marks[0].cause.contains("revision 2"), "{}", marks[0].cause);
    // The one that read revision 1 and commits after is marked as it does.
    s.prepare_using(&running, &report(None), &[], b"j", &inputs(used(1)), f.now)
        .unwrap();
    let mut keys: Vec<String> = s
        .stale(None, None, 10)
        .unwrap()
        .iter()
        .map(|m| m.key.to_string())
        .collect();
    keys.sort();
    assert_eq!(keys, [early.key().to_string(), late.key().to_string()]);
    assert_eq!(s.stale(Some("late"), None, 10).unwrap().len(), 1);
    assert_eq!(s.stale(None, Some(&early.key()), 10).unwrap().len(), 1);
    // A window's marks go with its new revision.
    let Claim::Run { .. } = s.claim(&rerun(f, &early, Some(1))).unwrap() else {
        panic!("the stale window is rerun")
    };
    assert!(s.stale(Some("early"), None, 10).unwrap().is_empty());
}

fn prune_drops_old_journals_and_delivered_bodies_and_nothing_unfinished(f: &mut Fixture) {
    let mut s = f.open();
    let who = Actor {
        by: "ann@host",
        reason: "prune",
    };
    let (old, recent, unfinished) = (
        window("2026-11-01"),
        window("2026-11-07"),
        window("2026-11-02"),
    );
    done_with_one_message(f, s.as_mut(), &old, "old-body");
    done_with_one_message(f, s.as_mut(), &recent, "recent");
    let p = f.run(s.as_mut(), &unfinished, "a", 3);
    s.prepare(
        &p,
        &report(None),
        &[message(&unfinished, 1, b"owed")],
        b"j",
        f.now,
    )
    .unwrap();
    // Rerun the old one, so an archived revision is pruned too.
    let Claim::Run { lease, .. } = s.claim(&rerun(f, &old, None)).unwrap() else {
        panic!("rerun")
    };
    let m = StagedMessage {
        idempotency_key: format!("{}#1", lease.message_prefix()),
        ..message(&old, 1, b"r2-body")
    };
    s.prepare(&lease, &report(None), &[m], b"journal-2", f.now)
        .unwrap();
    s.finish(&lease, Some(&delivered(1)), f.now).unwrap();
    let before: Timestamp = "2026-11-05T00:00:00Z".parse().unwrap();
    let pruned = s
        .prune(Some("daily-report"), before, false, who, f.now)
        .unwrap();
    assert_eq!(pruned.runs, 2, "the old run and its archived revision");
    assert_eq!(
        pruned.journal_bytes,
        (b"journal".len() + b"journal-2".len()) as u64
    );
    assert_eq!(
        pruned.body_bytes,
        (b"old-body".len() + b"r2-body".len()) as u64
    );
    let row = s.peek(&old.key()).unwrap().unwrap();
    assert_eq!(row.state, RunState::Done, "the row stays");
    assert!(row.report.is_some() && row.journal_bytes.is_none() && row.pruned_at.is_some());
    assert_eq!(s.message_records(&old.key()).unwrap()[0].bytes, 0);
    assert!(s.revisions(&old.key()).unwrap()[0].pruned_at.is_some());
    // The unfinished run and the recent one are untouched.
    assert_eq!(
        s.pending_messages(&unfinished.key()).unwrap()[0]
            .message
            .body,
        b"owed"
    );
    assert_eq!(
        s.journal(&recent.key()).unwrap().as_deref(),
        Some(&b"journal"[..])
    );
    // Pruning again frees nothing.
    assert_eq!(
        s.prune(Some("daily-report"), before, false, who, f.now)
            .unwrap(),
        jobhost::store::Pruned::default()
    );
}

fn note(event: &str, target: &str, id: i64) -> jobhost::store::NewNotification {
    jobhost::store::NewNotification {
        event: event.to_string(),
        target: target.to_string(),
        idempotency_key: format!("jobhost:daily-report:incident:{id}:{event}"),
        body: format!("{{\"event\":\"{event}\",\"incident\":{id}}}"),
    }
}

fn one_incident_of_a_kind_is_open_per_job_and_each_notification_is_leased_to_one_host(
    f: &mut Fixture,
) {
    use jobhost::store::Sent;
    let (mut a, mut b) = (f.open(), f.open());
    let job = "daily-report";
    let stage = |id: i64| {
        vec![
            note("failed", "https://a/hook", id),
            note("failed", "https://b", id),
        ]
    };
    // Two hosts see the same failure: one opens the incident and stages
    // its notifications.
    let first = a
        .open_incident(
            job,
            "failed",
            Some("daily-report:2026-11-08"),
            "boom",
            f.now,
            &stage,
        )
        .unwrap();
    let second = b
        .open_incident(
            job,
            "failed",
            Some("daily-report:2026-11-09"),
            "boom",
            f.now,
            &stage,
        )
        .unwrap();
    let id = first.expect("the first host opens it");
    assert_eq!(second, None, "the second finds it open");
    // Another kind, or another job, is an incident of its own.
    assert!(
        b.open_incident(job, "late", None, "late", f.now, &|_| Vec::new())
            .unwrap()
            .is_some()
    );
    assert!(
        b.open_incident("other-job", "failed", None, "x", f.now, &|_| Vec::new())
            .unwrap()
            .is_some()
    );
    let open = a.open_incidents(job).unwrap();
    assert_eq!(
        open.iter().map(|i| i.kind.as_str()).collect::<Vec<_>>(),
        ["failed", "late"]
    );
    assert_eq!(open[0].key.as_deref(), Some("daily-report:2026-11-08"));

    // Each due notification is leased to one host; a lease counts as an
    // attempt, and what is leased is not leased again until it runs out.
    let lease = Duration::from_secs(120);
    let took_a = a
        .take_notifications(job, "host-a", lease, 1, f.now)
        .unwrap();
    let took_b = b
        .take_notifications(job, "host-b", lease, 10, f.now)
        .unwrap();
    assert_eq!(took_a.len(), 1);
    assert_eq!(took_b.len(), 1);
    assert_ne!(took_a[0].id, took_b[0].id);
    assert_eq!((took_a[0].attempts, took_a[0].incident), (1, id));
    assert!(
        a.take_notifications(job, "host-a", lease, 10, f.now)
            .unwrap()
            .is_empty()
    );
    a.notification_sent(
        took_a[0].id,
        "host-a",
        &Sent::Delivered("http 200".into()),
        f.now,
    )
    .unwrap();
    // Only the host holding it records its send; a retry waits its time.
    b.notification_sent(took_b[0].id, "host-a", &Sent::Delivered("no".into()), f.now)
        .unwrap();
    b.notification_sent(
        took_b[0].id,
        "host-b",
        &Sent::Later("http 503".into(), Duration::from_secs(3600)),
        f.now,
    )
    .unwrap();
    assert!(
        a.take_notifications(job, "host-a", lease, 10, f.now)
            .unwrap()
            .is_empty()
    );
    let kept = a.notifications(job, 10).unwrap();
    let by_id = |i: i64| kept.iter().find(|n| n.id == i).unwrap();
    assert_eq!(by_id(took_a[0].id).state, "SENT");
    assert_eq!(by_id(took_b[0].id).state, "PENDING");
    assert_eq!(by_id(took_b[0].id).detail.as_deref(), Some("http 503"));
    // The open incidents' notifications, as status reads them: those of
    // this job's open incidents only, oldest first, without bodies.
    let open_told = b.open_notifications(job, 100).unwrap();
    assert_eq!(
        open_told
            .iter()
            .map(|n| (n.id, n.incident, n.state.as_str()))
            .collect::<Vec<_>>(),
        [
            (
                took_a[0].id.min(took_b[0].id),
                id,
                by_id(took_a[0].id.min(took_b[0].id)).state.as_str()
            ),
            (
                took_a[0].id.max(took_b[0].id),
                id,
                by_id(took_a[0].id.max(took_b[0].id)).state.as_str()
            ),
        ]
    );
    assert!(open_told.iter().all(|n| n.body.is_empty() && n.job == job));

    // Closing: once, staging what the closing says.
    let recovered = |i: &jobhost::store::Incident| vec![note("recovered", "https://a/hook", i.id)];
    assert!(
        a.close_incident(id, "window 2026-11-10 is DONE", f.now, &recovered)
            .unwrap()
    );
    assert!(!b.close_incident(id, "again", f.now, &recovered).unwrap());
    let last = b.last_incident(job, "failed").unwrap().unwrap();
    assert_eq!(last.closed_by.as_deref(), Some("window 2026-11-10 is DONE"));
    assert!(last.closed_at.is_some());
    // A closed incident's notifications are no longer read as open.
    assert!(
        a.open_notifications(job, 100)
            .unwrap()
            .iter()
            .all(|n| n.incident != id)
    );
    let took = b
        .take_notifications(job, "host-b", lease, 10, f.now)
        .unwrap();
    assert_eq!(
        took.iter().map(|n| n.event.as_str()).collect::<Vec<_>>(),
        ["recovered"]
    );
    // A closed incident's kind can open again, as a new incident.
    let again = a
        .open_incident(job, "failed", None, "boom again", f.now, &|_| Vec::new())
        .unwrap();
    assert!(again.is_some_and(|n| n != id));
}

fn a_pause_for_failures_is_made_once_with_its_incident_and_a_persons_pause_stands(f: &mut Fixture) {
    let (mut a, mut b) = (f.open(), f.open());
    let job = "daily-report";
    let who = Actor {
        by: "jobhost (pause_after_failures)",
        reason: "paused after 3 windows",
    };
    let stage = |id: i64| vec![note("paused", "https://a/hook", id)];
    let first = a
        .auto_pause(job, who, "daily-report:2026-11-10", f.now, &stage)
        .unwrap();
    assert!(first.is_some());
    assert!(
        b.auto_pause(job, who, "daily-report:2026-11-10", f.now, &stage)
            .unwrap()
            .is_none()
    );
    let p = b.paused(job).unwrap().expect("paused");
    assert_eq!(p.by, "jobhost (pause_after_failures)");
    // Audited as any pause.
    let audit = b.audit(Some(job)).unwrap();
    assert_eq!(
        audit
            .iter()
            .filter(|l| l.action == AuditAction::Pause)
            .count(),
        1
    );
    assert_eq!(a.notifications(job, 10).unwrap().len(), 1);
    // A job a person paused is not paused again for failures.
    let person = Actor {
        by: "ops@host",
        reason: "maintenance",
    };
    b.resume(job, person, f.now).unwrap();
    a.pause(job, person, f.now).unwrap();
    let open = a.open_incidents(job).unwrap();
    assert_eq!(
        open.len(),
        1,
        "the first pause's incident is open until noticed"
    );
    assert!(
        a.auto_pause(job, who, "daily-report:2026-11-12", f.now, &stage)
            .unwrap()
            .is_none()
    );
    assert_eq!(a.paused(job).unwrap().unwrap().by, "ops@host");
}

contract!(
    the_head_of_a_row_says_what_the_whole_row_says,
    one_incident_of_a_kind_is_open_per_job_and_each_notification_is_leased_to_one_host,
    a_pause_for_failures_is_made_once_with_its_incident_and_a_persons_pause_stands,
    a_live_claim_is_busy_and_an_expired_one_is_taken_over_with_a_new_fence,
    a_live_claim_whose_owner_is_gone_is_taken_over_at_once_with_the_next_fence,
    a_stale_owner_can_write_nothing_after_a_takeover,
    a_claim_whose_every_attempt_died_is_abandoned_not_left_claimed,
    the_cursor_moves_only_when_the_run_is_done_and_never_backwards,
    a_failed_delivery_keeps_the_report_and_waits_out_its_backoff,
    a_retryable_guest_failure_is_claimed_again_after_its_backoff,
    a_permanent_failure_is_never_claimed_again,
    a_prepared_run_out_of_attempts_is_abandoned_not_resumed,
    a_refused_delivery_fails_the_run_and_its_message_for_good,
    an_at_most_once_send_in_flight_survives_the_process,
    renewing_extends_the_lease_and_never_shortens_it,
    a_key_recorded_for_another_window_is_refused,
    what_was_committed_reads_back_byte_for_byte,
    history_lists_newest_windows_first_with_their_messages,
    racing_claims_on_one_window_give_exactly_one_run,
    opening_a_migrated_store_again_changes_nothing,
    a_skip_is_recorded_once_and_never_over_a_run_and_a_run_on_purpose_takes_it_over,
    decided_until_moves_only_forward_per_job,
    a_plan_reads_only_the_rows_from_a_point_and_the_unfinished_ones_of_any_age,
    a_rerun_archives_the_done_revision_and_runs_the_next_with_new_keys,
    a_retry_on_purpose_starts_a_new_attempt_series_and_keeps_the_old_error,
    a_window_a_person_names_is_audited_as_run_only_when_its_claim_is_granted,
    forget_removes_only_what_did_not_finish_and_says_why_not_otherwise,
    a_paused_job_claims_nothing_on_any_connection_until_resumed,
    a_batch_claims_only_windows_nobody_claimed_and_lets_go_of_what_it_will_not_start,
    a_window_claimed_ahead_and_never_started_has_used_no_attempt,
    a_waiting_window_is_recorded_once_keeps_its_words_current_and_runs_when_claimed,
    a_window_that_used_an_upstream_revision_is_stale_once_the_upstream_is_rerun_whenever_it_committed,
    prune_drops_old_journals_and_delivered_bodies_and_nothing_unfinished,
    the_counts_of_a_whole_history_follow_every_change_of_its_rows,
);
