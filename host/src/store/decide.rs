//! The decisions both backends share, so that they cannot answer the same
//! row differently: what a claim does with an existing row ([`decide`]),
//! what a failed attempt does to a run and its message ([`Transition`]),
//! and the errors of fenced writes.

use std::time::Duration;

use jiff::Timestamp;

use super::{
    Claim, ClaimRequest, Failure, Fence, Lease, MessageState, Purpose, RunState, TakenFrom,
    Takeover,
};
use crate::core::command::{process_target, shell_quote};
use crate::core::error::{Error, Result};
use crate::core::window::WindowKey;

/// The error for a key the store already holds for another window: the
/// job's zone or window changed under the same name, and skipping would
/// silently leave the new window unreported.
pub fn window_mismatch(key: &WindowKey, start: Timestamp, end: Timestamp, zone: &str) -> Error {
    Error::input(format!(
        "window key `{key}` is already recorded for another window ({start} to {end} in {zone}); \
         the job's time zone or window changed, so give the job a new name"
    ))
}

/// The error for a digest recorded for a run the store does not hold.
pub fn no_such_run(key: &WindowKey) -> Error {
    Error::input(format!(
        "no run `{key}` in the store; `{}` lists the keys",
        process_target().command("history")
    ))
}

/// What a claim found in an existing row, read under the row's write lock,
/// with the lease and the retry time already judged on the store's clock.
#[derive(Debug, Clone)]
pub struct Existing {
    /// The row's state.
    pub state: RunState,
    /// Its fence.
    pub fence: i64,
    /// Attempts so far.
    pub attempt: u32,
    /// The current or last owner.
    pub owner: String,
    /// What the owner recorded of its process with its claim
    /// ([`OwnerProbe::record`](super::OwnerProbe::record)); `None` from a
    /// host that records nothing.
    pub owner_process: Option<String>,
    /// When its lease runs out.
    pub lease_until: Timestamp,
    /// Whether that is still ahead on the store's clock.
    pub lease_live: bool,
    /// The last error.
    pub error: Option<String>,
    /// Why the scheduler skipped it, when it is SKIPPED.
    pub skip_reason: Option<String>,
    /// Whether its failure may be retried.
    pub retryable: bool,
    /// The retry time, when it is still ahead on the store's clock.
    pub retry_pending: Option<Timestamp>,
    /// The window the row was claimed for: start, end, zone.
    pub bounds: (Timestamp, Timestamp, String),
    /// The row's revision.
    pub revision: u32,
    /// Whether a report is committed (PREPARED, or a later state reached
    /// from it).
    pub has_report: bool,
}

/// What a claim must do with an existing row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Answer without writing.
    Answer(Claim),
    /// Write ABANDONED with this error, then answer `GaveUp`.
    Abandon(String),
    /// Take the row over with fence + 1 and attempt + 1: `resume` delivers
    /// the committed messages, otherwise the guest runs again.
    TakeOver {
        /// The report is committed: deliver it, never re-render.
        resume: bool,
        /// Why a CLAIMED or PREPARED row's owner could be taken over from
        /// (`None` for FAILED and SKIPPED rows, which nobody holds).
        from: Option<Takeover>,
    },
    /// A DONE window run again on purpose: archive the row and its
    /// messages as a revision, then claim the next revision afresh
    /// (fence + 1, attempt 1).
    Rerun,
    /// A FAILED or ABANDONED window a person asked to retry: a new series
    /// of attempts (fence + 1, attempt 1), keeping the revision; `resume`
    /// when its report is committed (its undelivered messages are sent
    /// again, with their keys), else the guest runs again.
    Restart {
        /// The report is committed: deliver it, never re-render.
        resume: bool,
    },
}

/// The claim decision for an existing row, shared by every backend.
///
/// # Errors
///
/// `Error::Input` when the row was claimed for another window under the
/// same key.
pub fn decide(existing: &Existing, req: &ClaimRequest<'_>) -> Result<Decision> {
    let key = req.window.key();
    let (start, end, zone) = &existing.bounds;
    if (*start, *end, zone.as_str()) != (req.window.start, req.window.end, req.window.zone.name()) {
        return Err(window_mismatch(&key, *start, *end, zone));
    }
    let fence = Fence(existing.fence);
    let attempts = existing.attempt;
    let error = existing.error.clone();
    let gave_up = || {
        Decision::Answer(Claim::GaveUp {
            fence,
            attempts,
            error: error.clone(),
            abandoned_now: false,
        })
    };
    // A live lease whose owner ran on this machine and is certainly gone
    // is treated as one that ran out: nobody is left to use it.
    let held = matches!(existing.state, RunState::Claimed | RunState::Prepared);
    let owner_gone = held
        && existing.lease_live
        && req
            .probe
            .gone(&existing.owner, existing.owner_process.as_deref());
    let from = held.then_some(if owner_gone {
        Takeover::OwnerGone
    } else {
        Takeover::LeaseExpired
    });
    Ok(match existing.state {
        RunState::Done => match req.purpose {
            Purpose::Rerun { of_revision, .. }
                if of_revision.is_none_or(|r| r == existing.revision) =>
            {
                Decision::Rerun
            }
            _ => Decision::Answer(Claim::Done {
                attempt: attempts,
                fence,
            }),
        },
        RunState::Claimed | RunState::Prepared if existing.lease_live && !owner_gone => {
            Decision::Answer(Claim::Busy {
                owner: existing.owner.clone(),
                attempt: attempts,
                fence,
                lease_until: existing.lease_until,
            })
        }
        RunState::Failed | RunState::Abandoned if req.purpose.restarts_failed() => {
            Decision::Restart {
                resume: existing.has_report,
            }
        }
        // A committed report whose delivery waits out its backoff, retried
        // on purpose: its messages go now, as a new series of attempts.
        RunState::Prepared
            if matches!(req.purpose, Purpose::Retry { .. }) && existing.retry_pending.is_some() =>
        {
            Decision::Restart { resume: true }
        }
        RunState::Abandoned => gave_up(),
        RunState::Skipped if !req.purpose.takes_skipped() => Decision::Answer(Claim::Skipped {
            reason: existing.skip_reason.clone(),
        }),
        RunState::Failed if !existing.retryable => gave_up(),
        _ if existing.retry_pending.is_some() => Decision::Answer(Claim::Wait {
            until: existing.retry_pending.unwrap_or(Timestamp::MAX),
            fence,
            attempts,
            error,
        }),
        // Out of attempts (each one failed, or died holding the claim):
        // give up loudly rather than leave the window looking as if it
        // might still finish.
        _ if attempts >= req.max_attempts => Decision::Abandon(format!(
            "abandoned after {attempts} attempt(s); last error: {}",
            error.as_deref().unwrap_or(
                "none recorded (the process died holding the claim; look at the host's logs)"
            )
        )),
        RunState::Prepared => Decision::TakeOver { resume: true, from },
        // A skip is a decision, not an effect: run on purpose, the window
        // runs (once, under the claim, as any other). A window that waited
        // for its upstream runs once whoever claims it has seen its needs
        // met.
        RunState::Claimed | RunState::Failed | RunState::Skipped | RunState::Waiting => {
            Decision::TakeOver {
                resume: false,
                from,
            }
        }
    })
}

/// The answer to a claim once `decision` has been written.
pub fn decided(decision: Decision, req: &ClaimRequest<'_>, existing: &Existing) -> Claim {
    let lease = |attempt, revision| Lease {
        key: req.window.key(),
        fence: Fence(existing.fence + 1),
        owner: req.owner.to_string(),
        attempt,
        revision,
        taken_from: None,
    };
    match decision {
        Decision::Answer(claim) => claim,
        Decision::Abandon(why) => Claim::GaveUp {
            fence: Fence(existing.fence),
            attempts: existing.attempt,
            error: Some(why),
            abandoned_now: true,
        },
        Decision::TakeOver { resume, from } => Lease {
            taken_from: from.map(|because| TakenFrom {
                owner: existing.owner.clone(),
                fence: Fence(existing.fence),
                because,
            }),
            ..lease(existing.attempt + 1, existing.revision)
        }
        .into_claim(resume),
        Decision::Restart { resume } => lease(1, existing.revision).into_claim(resume),
        Decision::Rerun => Claim::Run {
            lease: lease(1, existing.revision + 1),
            takeover: false,
        },
    }
}

impl Lease {
    fn into_claim(self, resume: bool) -> Claim {
        if resume {
            Claim::Resume { lease: self }
        } else {
            Claim::Run {
                lease: self,
                takeover: true,
            }
        }
    }
}

/// Whether `forget` may remove a window in `state` (`live`: its lease is
/// still ahead on the store's clock), the same on every backend.
///
/// # Errors
///
/// `Error::Input` saying why not and what to do instead.
pub fn may_forget(key: &WindowKey, state: RunState, live: bool, force: bool) -> Result<()> {
    let refuse = |why: String| Err(Error::input(why));
    match state {
        RunState::Failed | RunState::Abandoned | RunState::Skipped | RunState::Waiting => Ok(()),
        RunState::Done => refuse(format!(
            "window `{key}` is DONE: forget is for windows that did not finish; \
             `{}` runs it again as a new revision",
            process_target().command(&format!(
                "rerun {} --reason TEXT",
                shell_quote(key.as_str())
            ))
        )),
        RunState::Claimed | RunState::Prepared if live => refuse(format!(
            "window `{key}` is {state} under a live claim: a run is under way; wait for it \
             to end (`{}` shows its owner and lease)",
            process_target().command(&format!("history {}", shell_quote(key.as_str())))
        )),
        RunState::Claimed => refuse(format!(
            "window `{key}` is CLAIMED by a process that died; the next run of it (`{}`) \
             takes it over, so there is nothing to forget",
            process_target().command(&format!("retry {}", shell_quote(key.as_str())))
        )),
        RunState::Prepared if !force => refuse(format!(
            "window `{key}` is PREPARED: its committed report still owes messages to their \
             destinations; the next run delivers them, or `--force` forgets them undelivered"
        )),
        RunState::Prepared => Ok(()),
    }
}

/// What an audit line of `forget` says besides the old state.
pub fn forget_detail(
    state: RunState,
    error: Option<&str>,
    skip_reason: Option<&str>,
    undelivered: u32,
) -> Option<String> {
    match (state, error, skip_reason) {
        (RunState::Prepared, ..) => Some(format!("{undelivered} message(s) forgotten undelivered")),
        (RunState::Skipped, _, Some(why)) => Some(format!("skipped: {why}")),
        (RunState::Waiting, _, Some(why)) => Some(format!("waited for {why}")),
        (_, Some(e), _) => Some(format!("last error: {e}")),
        _ => None,
    }
}

/// The error for a fenced write that matched no row.
pub fn lease_lost(lease: &Lease) -> Error {
    Error::LeaseLost(format!(
        "lost the claim on `{}` (fence {}): another process took it over after the lease ran out; \
         stopping without writing or sending",
        lease.key, lease.fence
    ).into())
}

/// Fails with `LeaseLost` unless a fenced write changed exactly one row.
///
/// # Errors
///
/// `Error::LeaseLost`.
pub fn fenced(changed: u64, lease: &Lease) -> Result<()> {
    if changed == 1 {
        Ok(())
    } else {
        Err(lease_lost(lease))
    }
}

/// The error for finishing a run whose messages are not all delivered.
pub fn undelivered(lease: &Lease) -> Error {
    Error::Delivery(
        format!(
            "cannot mark `{}` done: some of its messages are not delivered yet",
            lease.key
        )
        .into(),
    )
}

/// What a failed attempt does to its run's row and to the message whose
/// delivery failed: the one table both backends apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// The run's new state; `None`: a CLAIMED run becomes FAILED and a
    /// PREPARED one stays PREPARED (its report and messages are kept, for
    /// the next attempt to deliver).
    pub run_state: Option<RunState>,
    /// The wait before the next attempt; `None`: never again.
    pub retry_after: Option<Duration>,
    /// The failed message's new state: `PENDING` (sent again later),
    /// `FAILED` or `ABANDONED`.
    pub message_state: MessageState,
    /// Whether this attempt counts against the job's attempts (a clean
    /// release, asked for by a stop, does not).
    pub counted: bool,
}

impl Failure {
    /// What this failure does to the run and its message.
    pub fn transition(self) -> Transition {
        match self {
            Failure::Retry { after } => Transition {
                run_state: None,
                retry_after: Some(after),
                message_state: MessageState::Pending,
                counted: true,
            },
            Failure::Release { after } => Transition {
                run_state: None,
                retry_after: Some(after),
                message_state: MessageState::Pending,
                counted: false,
            },
            Failure::Permanent => Transition {
                run_state: Some(RunState::Failed),
                retry_after: None,
                message_state: MessageState::Failed,
                counted: true,
            },
            Failure::Abandon => Transition {
                run_state: Some(RunState::Abandoned),
                retry_after: None,
                message_state: MessageState::Abandoned,
                counted: true,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::window::{JobName, Window, WindowKind, Zone};
    use crate::store::{ClaimRequest, LeasesOnly, OwnerProbe, RunState};

    fn window() -> (Window, Timestamp) {
        let job = JobName::new("j").unwrap();
        let now: Timestamp = "2026-11-09T00:05:00Z".parse().unwrap();
        (
            Window::last_closed(&job, WindowKind::Day, &Zone::utc(), now).unwrap(),
            now,
        )
    }

    fn existing(w: &Window, now: Timestamp, state: RunState) -> Existing {
        Existing {
            state,
            fence: 1,
            attempt: 1,
            owner: "a".into(),
            owner_process: Some("a's process".into()),
            lease_until: now,
            lease_live: true,
            error: None,
            skip_reason: None,
            retryable: false,
            retry_pending: None,
            bounds: (w.start, w.end, "UTC".into()),
            revision: 1,
            has_report: state == RunState::Prepared,
        }
    }

    fn request<'a>(w: &'a Window, now: Timestamp, probe: &'a dyn OwnerProbe) -> ClaimRequest<'a> {
        ClaimRequest {
            window: w,
            owner: "b",
            component: "sha256:00",
            now,
            lease: Duration::from_secs(60),
            max_attempts: 3,
            purpose: crate::store::Purpose::Asked,
            probe,
        }
    }

    /// A probe that knows which owners are gone by their records.
    #[derive(Debug)]
    struct Gone(&'static str);

    impl OwnerProbe for Gone {
        fn record(&self, owner: &str) -> Option<String> {
            Some(format!("{owner}'s process"))
        }

        fn gone(&self, _: &str, record: Option<&str>) -> bool {
            record == Some(self.0)
        }
    }

    #[test]
    fn a_row_for_another_window_under_the_same_key_is_refused() {
        let (w, now) = window();
        let mut row = existing(&w, now, RunState::Done);
        row.bounds.2 = "Asia/Tokyo".into();
        let err = decide(&row, &request(&w, now, &LeasesOnly)).unwrap_err();
        assert!(err.to_string().contains("give the job a new name"), "{err}");
    }

    #[test]
    fn a_live_lease_of_a_gone_owner_is_taken_over_as_if_it_had_run_out() {
        let (w, now) = window();
        for (state, resume) in [(RunState::Claimed, false), (RunState::Prepared, true)] {
            let row = existing(&w, now, state);
            let req = request(&w, now, &Gone("a's process"));
            let decision = decide(&row, &req).unwrap();
            assert_eq!(
                decision,
                Decision::TakeOver {
                    resume,
                    from: Some(Takeover::OwnerGone)
                }
            );
            let lease = match decided(decision, &req, &row) {
                Claim::Run { lease, .. } | Claim::Resume { lease } => lease,
                other => panic!("{other:?}"),
            };
            assert_eq!((lease.fence, lease.attempt), (Fence(2), 2));
            assert_eq!(
                lease.taken_from,
                Some(TakenFrom {
                    owner: "a".into(),
                    fence: Fence(1),
                    because: Takeover::OwnerGone
                })
            );
        }
    }

    #[test]
    fn a_live_lease_is_busy_unless_the_probe_is_sure_its_owner_is_gone() {
        let (w, now) = window();
        let row = existing(&w, now, RunState::Prepared);
        for probe in [&LeasesOnly as &dyn OwnerProbe, &Gone("another process")] {
            let decision = decide(&row, &request(&w, now, probe)).unwrap();
            assert!(
                matches!(decision, Decision::Answer(Claim::Busy { .. })),
                "{decision:?}"
            );
        }
        let unrecorded = Existing {
            owner_process: None,
            ..row.clone()
        };
        let decision = decide(&unrecorded, &request(&w, now, &Gone("a's process"))).unwrap();
        assert!(matches!(decision, Decision::Answer(Claim::Busy { .. })));
        // Past its lease, the lease decides, whatever the probe says.
        let expired = Existing {
            lease_live: false,
            ..row
        };
        assert_eq!(
            decide(&expired, &request(&w, now, &LeasesOnly)).unwrap(),
            Decision::TakeOver {
                resume: true,
                from: Some(Takeover::LeaseExpired)
            }
        );
    }

    #[test]
    fn a_gone_owner_whose_attempts_are_spent_abandons_the_window() {
        let (w, now) = window();
        let row = Existing {
            attempt: 3,
            ..existing(&w, now, RunState::Claimed)
        };
        let decision = decide(&row, &request(&w, now, &Gone("a's process"))).unwrap();
        assert!(matches!(decision, Decision::Abandon(_)), "{decision:?}");
    }
    /// One combination of what a claim can find and why it was asked for.
    #[derive(Debug, Clone, Copy)]
    struct Case {
        state: RunState,
        /// 0 Scheduled, 1 Asked, 2 Retry, 3 Rerun of any revision, 4 Rerun
        /// of the row's revision, 5 Rerun of an older revision.
        purpose: usize,
        lease_live: bool,
        owner_gone: bool,
        retry_pending: bool,
        retryable: bool,
        attempts_left: bool,
        has_report: bool,
    }

    const PURPOSES: [&str; 6] = [
        "scheduled",
        "asked",
        "retry",
        "rerun",
        "rerun of this revision",
        "rerun of an older revision",
    ];

    fn purpose(i: usize) -> crate::store::Purpose<'static> {
        use crate::store::Purpose;
        match i {
            0 => Purpose::Scheduled,
            1 => Purpose::Asked,
            2 => Purpose::Retry {
                reason: "r",
                by: "u",
            },
            3 => Purpose::Rerun {
                reason: "r",
                of_revision: None,
                by: "u",
            },
            4 => Purpose::Rerun {
                reason: "r",
                of_revision: Some(2),
                by: "u",
            },
            _ => Purpose::Rerun {
                reason: "r",
                of_revision: Some(1),
                by: "u",
            },
        }
    }

    /// Every combination: 6 states x 6 purposes x lease live or not x
    /// owner gone or not x retry pending or not x retryable or not x
    /// attempts left or not x report committed or not.
    fn every_case() -> Vec<Case> {
        let mut all = Vec::new();
        for state in RunState::ALL {
            for purpose in 0..PURPOSES.len() {
                for bits in 0..64u8 {
                    let bit = |i: u8| bits & (1 << i) != 0;
                    all.push(Case {
                        state,
                        purpose,
                        lease_live: bit(0),
                        owner_gone: bit(1),
                        retry_pending: bit(2),
                        retryable: bit(3),
                        attempts_left: bit(4),
                        has_report: bit(5),
                    });
                }
            }
        }
        all
    }

    /// What the claim does, in a word: the table's right-hand side.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Does {
        Done,
        Busy,
        Skipped,
        Wait,
        GaveUp,
        Abandon,
        /// Take the row over and run the guest again.
        TakeOverRun,
        /// Take the row over and deliver its committed report.
        TakeOverResume,
        /// A new series of attempts that runs the guest.
        RestartRun,
        /// A new series of attempts that delivers the committed report.
        RestartResume,
        /// The next revision.
        Rerun,
    }

    /// A row of the table: `None` matches anything.
    struct Row {
        states: &'static [RunState],
        purposes: &'static [usize],
        lease_live: Option<bool>,
        owner_gone: Option<bool>,
        retry_pending: Option<bool>,
        retryable: Option<bool>,
        attempts_left: Option<bool>,
        has_report: Option<bool>,
        does: Does,
    }

    const ANY: Row = Row {
        states: &RunState::ALL,
        purposes: &[0, 1, 2, 3, 4, 5],
        lease_live: None,
        owner_gone: None,
        retry_pending: None,
        retryable: None,
        attempts_left: None,
        has_report: None,
        does: Does::Done,
    };

    use RunState::{Abandoned, Claimed, Done, Failed, Prepared, Skipped, Waiting};

    /// The claim rules as the docs state them, first matching row wins.
    const TABLE: &[Row] = &[
        // A DONE window runs again only as a rerun of its current revision.
        Row {
            states: &[Done],
            purposes: &[3, 4],
            does: Does::Rerun,
            ..ANY
        },
        Row {
            states: &[Done],
            does: Does::Done,
            ..ANY
        },
        // A held row whose lease is live and whose owner may be alive is
        // never taken, whatever was asked.
        Row {
            states: &[Claimed, Prepared],
            lease_live: Some(true),
            owner_gone: Some(false),
            does: Does::Busy,
            ..ANY
        },
        // retry, rerun and `backfill --only failed` start a failed or
        // abandoned window's attempts anew, delivering a committed report.
        Row {
            states: &[Failed, Abandoned],
            purposes: &[2, 3, 4, 5],
            has_report: Some(true),
            does: Does::RestartResume,
            ..ANY
        },
        Row {
            states: &[Failed, Abandoned],
            purposes: &[2, 3, 4, 5],
            does: Does::RestartRun,
            ..ANY
        },
        // `jobhost retry` on a delivery waiting out its backoff sends now.
        Row {
            states: &[Prepared],
            purposes: &[2],
            retry_pending: Some(true),
            does: Does::RestartResume,
            ..ANY
        },
        Row {
            states: &[Abandoned],
            does: Does::GaveUp,
            ..ANY
        },
        // The scheduler leaves what a scheduler skipped.
        Row {
            states: &[Skipped],
            purposes: &[0],
            does: Does::Skipped,
            ..ANY
        },
        Row {
            states: &[Failed],
            retryable: Some(false),
            does: Does::GaveUp,
            ..ANY
        },
        Row {
            retry_pending: Some(true),
            does: Does::Wait,
            ..ANY
        },
        Row {
            attempts_left: Some(false),
            does: Does::Abandon,
            ..ANY
        },
        // A committed report is delivered, never rendered again.
        Row {
            states: &[Prepared],
            does: Does::TakeOverResume,
            ..ANY
        },
        // A window that waited for its upstream runs once claimed.
        Row {
            states: &[Claimed, Failed, Skipped, Waiting],
            does: Does::TakeOverRun,
            ..ANY
        },
    ];

    fn matches(row: &Row, c: &Case) -> bool {
        let is = |want: Option<bool>, got: bool| want.is_none_or(|w| w == got);
        row.states.contains(&c.state)
            && row.purposes.contains(&c.purpose)
            && is(row.lease_live, c.lease_live)
            && is(row.owner_gone, c.owner_gone)
            && is(row.retry_pending, c.retry_pending)
            && is(row.retryable, c.retryable)
            && is(row.attempts_left, c.attempts_left)
            && is(row.has_report, c.has_report)
    }

    #[test]
    fn decide_follows_the_claim_table_in_every_combination() {
        let (w, now) = window();
        let pending: Timestamp = "2026-11-09T01:00:00Z".parse().unwrap();
        let mut used = vec![0usize; TABLE.len()];
        let cases = every_case();
        assert_eq!(cases.len(), 7 * 6 * 64);
        for c in &cases {
            let row = Existing {
                fence: 7,
                attempt: if c.attempts_left { 1 } else { 3 },
                lease_live: c.lease_live,
                error: Some("boom".into()),
                skip_reason: Some("missed".into()),
                retryable: c.retryable,
                retry_pending: c.retry_pending.then_some(pending),
                revision: 2,
                has_report: c.has_report,
                ..existing(&w, now, c.state)
            };
            let probe = if c.owner_gone {
                Gone("a's process")
            } else {
                Gone("somebody else's process")
            };
            let req = ClaimRequest {
                purpose: purpose(c.purpose),
                ..request(&w, now, &probe)
            };
            let (i, expected) = TABLE
                .iter()
                .enumerate()
                .find(|(_, r)| matches(r, c))
                .map(|(i, r)| (i, r.does))
                .unwrap_or_else(|| panic!("no row of the table covers {c:?}"));
            used[i] += 1;
            let decision = decide(&row, &req).unwrap();
            let claim = decided(decision.clone(), &req, &row);
            let what = format!("{c:?} ({}): {decision:?} -> {claim:?}", PURPOSES[c.purpose]);
            let does = match &decision {
                Decision::Answer(Claim::Done { .. }) => Does::Done,
                Decision::Answer(Claim::Busy { .. }) => Does::Busy,
                Decision::Answer(Claim::Skipped { .. }) => Does::Skipped,
                Decision::Answer(Claim::Wait { .. }) => Does::Wait,
                Decision::Answer(Claim::GaveUp { .. }) => Does::GaveUp,
                Decision::Abandon(_) => Does::Abandon,
                Decision::TakeOver { resume: false, .. } => Does::TakeOverRun,
                Decision::TakeOver { resume: true, .. } => Does::TakeOverResume,
                Decision::Restart { resume: false } => Does::RestartRun,
                Decision::Restart { resume: true } => Does::RestartResume,
                Decision::Rerun => Does::Rerun,
                Decision::Answer(other) => panic!("{what}: unexpected answer {other:?}"),
            };
            assert_eq!(does, expected, "{what}");

            // What every answer must carry, whatever the row.
            match &claim {
                Claim::Run { lease, .. } | Claim::Resume { lease } => {
                    // A new claim always fences out the one before it.
                    assert_eq!(lease.fence, Fence(8), "{what}");
                    assert_eq!(lease.owner, "b", "{what}");
                    // A committed report is never rendered again, except as
                    // a rerun's new revision.
                    if c.state == Prepared {
                        assert!(
                            matches!(claim, Claim::Resume { .. }),
                            "a PREPARED row was rendered again: {what}"
                        );
                    }
                    match does {
                        Does::Rerun => {
                            assert_eq!((lease.attempt, lease.revision), (1, 3), "{what}")
                        }
                        Does::RestartRun | Does::RestartResume => {
                            assert_eq!((lease.attempt, lease.revision), (1, 2), "{what}")
                        }
                        _ => {
                            assert_eq!(
                                (lease.attempt, lease.revision),
                                (row.attempt + 1, 2),
                                "{what}"
                            );
                            let from = lease.taken_from.as_ref().map(|t| t.because);
                            let held = matches!(c.state, Claimed | Prepared);
                            let expect = held.then_some(if c.lease_live {
                                Takeover::OwnerGone
                            } else {
                                Takeover::LeaseExpired
                            });
                            assert_eq!(from, expect, "{what}");
                        }
                    }
                }
                Claim::Wait { until, fence, .. } => {
                    assert_eq!((*until, *fence), (pending, Fence(7)), "{what}")
                }
                Claim::Busy {
                    owner, lease_until, ..
                } => assert_eq!((owner.as_str(), *lease_until), ("a", now), "{what}"),
                Claim::GaveUp {
                    error,
                    abandoned_now,
                    ..
                } => {
                    assert_eq!(*abandoned_now, does == Does::Abandon, "{what}");
                    let error = error.as_deref().unwrap_or_default();
                    if does == Does::Abandon {
                        assert!(
                            error.contains("after 3 attempt(s)") && error.contains("boom"),
                            "{what}"
                        );
                    } else {
                        assert_eq!(error, "boom", "{what}");
                    }
                }
                Claim::Done { fence, .. } => assert_eq!(*fence, Fence(7), "{what}"),
                Claim::Skipped { reason } => {
                    assert_eq!(reason.as_deref(), Some("missed"), "{what}")
                }
                other => panic!("{what}: {other:?}"),
            }
        }
        // Every row of the table decides some combination: none is dead.
        for (row, n) in TABLE.iter().zip(&used) {
            assert!(
                *n > 0,
                "no combination reaches the row doing {:?}",
                row.does
            );
        }
    }
}
