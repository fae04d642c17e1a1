//! Delivery of a PREPARED run's committed messages, in order, each with its
//! idempotency key. Before every send the claim is checked (and renewed when
//! what is left might not cover the send and the wait after it), so a
//! process that lost its lease stops without sending. HTTP sends that fail
//! in a way that may pass (a network error, 5xx, 408, 409, 425, 429) are
//! retried with exponential backoff and full jitter, honouring
//! `Retry-After`; other 4xx answers are permanent. A message whose outcome
//! is uncertain is sent again with the same key (`at-least-once`) or never
//! again, abandoning the run (`at-most-once`). Waiting goes through the
//! run's clock, so tests never sleep.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jiff::SignedDuration;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::Serialize;

use crate::core::clock::Clock;
use crate::core::error::Result;
use crate::core::failpoint::{Boundary, Failpoints};
use crate::core::redact::Redactor;
use crate::core::window::WindowKey;
use crate::effects::destination::{DeliveryMode, Destination, Target};
use crate::effects::last_look::{self, Confirmed, LastLook};
use crate::effects::send::{SendFailure, Sender, Sending, Sent, Uncertainty};
use crate::store::{Attempted, Attempts, ClaimStore, Failure, Lease, PendingMessage};

/// How a run's delivery ended (a lost lease is an `Err`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Every message delivered; the run is DONE and the cursor moved.
    Done,
    /// Not every message could be delivered now; the run stays PREPARED and
    /// a later invocation resumes it.
    Retry(String),
    /// A destination refused a message for good: the run is FAILED.
    Permanent(String),
    /// The host gave up: the run is ABANDONED.
    Abandoned(String),
}

/// One staged message's fate in this invocation.
#[derive(Debug, Clone, Serialize)]
pub struct MessageInfo {
    /// Sequence number.
    pub seq: u32,
    /// Destination name.
    pub destination: String,
    /// `<key>#<seq>`.
    pub idempotency_key: String,
    /// Body size.
    pub bytes: usize,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// Sends made by this invocation.
    pub attempts: u32,
    /// The last HTTP status the destination answered, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// What the last send came to, in a few words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl MessageInfo {
    /// A message about to be delivered.
    fn pending(p: &PendingMessage) -> MessageInfo {
        MessageInfo {
            seq: p.message.seq,
            destination: p.message.destination.clone(),
            idempotency_key: p.message.idempotency_key.clone(),
            bytes: p.message.body.len(),
            status: DeliveryStatus::Pending,
            attempts: 0,
            http_status: None,
            detail: None,
        }
    }
}

/// Where a message, or a destination's messages together, stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryStatus {
    /// Delivered (by this invocation or an earlier one).
    Delivered,
    /// Not delivered yet; a later invocation sends it.
    Pending,
    /// Never sent, and never will be: an earlier message of the run failed
    /// for good or was abandoned.
    NotSent,
    /// Refused by the destination; never sent again.
    Failed,
    /// May or may not have arrived, and is never sent again.
    Abandoned,
}

/// What delivering a job's messages needs of the job: its destinations,
/// the scrubber for their credentials, the length of a lease, and how a
/// failed attempt of a window ends.
#[derive(Debug, Clone, Copy)]
pub struct DeliverySettings<'a> {
    /// Destinations by name.
    pub destinations: &'a BTreeMap<String, Destination>,
    /// The credentials the destinations use.
    pub redactor: &'a Redactor,
    /// How long a claim lasts unrenewed.
    pub lease: Duration,
    /// How a failed attempt of the window ends.
    pub attempts: Attempts,
}

/// What delivering a run needs.
pub struct Delivery<'a> {
    /// The job's side of it.
    pub settings: DeliverySettings<'a>,
    /// The claim store.
    pub store: &'a mut dyn ClaimStore,
    /// The run's claim.
    pub lease: &'a Lease,
    /// The run's clock: leases, backoff and waiting.
    pub clock: &'a dyn Clock,
    /// Test hooks.
    pub failpoints: Option<&'a dyn Failpoints>,
    /// An earlier process may have sent some of these messages.
    pub resumed: bool,
    /// Set when the process is asked to stop: instead of waiting to send a
    /// message again, the run lets its claim go, and a later invocation
    /// resumes the delivery.
    pub stop: Option<&'a AtomicBool>,
    /// The run's trace: each send is a step of it, and an HTTP request
    /// carries the step's `traceparent`.
    pub trace: Option<&'a crate::effects::telemetry::RunTrace>,
}

/// How one message's delivery ended, for the loop over the run's messages.
enum One {
    /// Delivered; the store already knows, or (for the last message) will
    /// know in the transaction that marks the run DONE.
    Delivered(Option<(u32, u32, String)>),
    /// The run's delivery ended here.
    Ended(Failure, Ended),
}

/// Delivers `pending` in order and, when all are delivered, marks the run
/// DONE (moving the cursor). `infos` receives each message's fate.
///
/// # Errors
///
/// `Error::LeaseLost` when another process took the run over (nothing is
/// sent after that is noticed); `Error::Store`.
pub fn deliver(
    d: Delivery<'_>,
    key: &WindowKey,
    pending: &[PendingMessage],
    infos: &mut Vec<MessageInfo>,
) -> Result<Ended> {
    let mut run = Deliverer {
        sender: Sender::new(d.settings.redactor.clone()),
        rng: StdRng::seed_from_u64(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |t| t.as_nanos() as u64)
                ^ u64::from(std::process::id()),
        ),
        d,
        key,
    };
    *infos = pending.iter().map(MessageInfo::pending).collect();
    let mut last = None;
    for (i, p) in pending.iter().enumerate() {
        match run.one(p, &mut infos[i], i + 1 == pending.len())? {
            One::Delivered(done) => last = done.or(last),
            One::Ended(how, end) => {
                never_sent(how, &mut infos[i + 1..]);
                return Ok(end);
            }
        }
    }
    let done = last.as_ref().map(|(seq, tries, status)| Attempted {
        seq: *seq,
        tries: *tries,
        status,
    });
    let d = &mut run.d;
    d.store
        .finish(d.lease, done.as_ref(), d.clock.lease_now())?;
    Ok(Ended::Done)
}

/// One run's delivery under way.
struct Deliverer<'a, 'k> {
    d: Delivery<'a>,
    key: &'k WindowKey,
    sender: Sender,
    rng: StdRng,
}

impl Deliverer<'_, '_> {
    fn reach(&self, b: Boundary) {
        if let Some(f) = self.d.failpoints {
            f.reached_on(b, self.d.clock);
        }
    }

    /// Delivers one message, sending it as often as its destination allows
    /// in this invocation.
    fn one(&mut self, p: &PendingMessage, info: &mut MessageInfo, last: bool) -> Result<One> {
        let m = &p.message;
        let Some(dest) = self.d.settings.destinations.get(&m.destination) else {
            let why = format!(
                "message {} is for destination `{}`, which the job config no longer declares; \
                 declare it again to deliver the stored message",
                m.idempotency_key, m.destination
            );
            let how = self.d.settings.attempts.after_failure(self.d.lease.attempt);
            self.d
                .store
                .fail(self.d.lease, &why, how, None, self.d.clock.lease_now())?;
            info.detail = Some(why.clone());
            return Ok(One::Ended(how, ended(how, why, info)));
        };
        let at_most_once = dest.mode == DeliveryMode::AtMostOnce;
        // A file can be read back, so its outcome is never unknown: the
        // send below finds the line if the earlier process wrote it.
        let file_target = matches!(dest.target, Target::File { .. });
        if at_most_once && p.in_flight && !file_target {
            return self
                .abandon_in_flight(p, info)
                .map(|e| One::Ended(Failure::Abandon, e));
        }
        let mut uncounted = 0;
        // Sends withheld in a row at the last look: the claim is confirmed
        // again (renewed) before the next, and a few in a row end the
        // attempt, since the lease is then too short for the store and the
        // connection.
        let mut withheld = 0;
        let margin = last_look::margin(self.d.settings.lease);
        let gate = dest.gate();
        let signature = crate::store::chain::signer()
            .zip(p.entry.as_deref())
            .map(|(s, e)| {
                crate::store::chain::MessageSignature::sign(
                    &s,
                    &m.idempotency_key,
                    &m.destination,
                    &m.body,
                    e,
                )
            });
        loop {
            self.reach(Boundary::BeforeSend);
            // The destination's caps, shared by every run of this process
            // that sends to it: waited for before the claim is confirmed,
            // so a wait here never eats into the lease the send relies on.
            let permit = crate::core::gate::Gates::shared().enter(&gate, dest.limit, self.d.clock);
            let confirmed =
                self.before_send(dest, m.seq, at_most_once, withheld > 0, &mut uncounted)?;
            info.attempts += 1;
            self.reach(Boundary::InSend);
            let look = LastLook::new(confirmed, margin, self.d.clock);
            let mut step = self.d.trace.map(|t| {
                let mut s = t.step("deliver");
                s.attr("jobhost.destination", m.destination.clone());
                s.attr("jobhost.message", i64::from(m.seq));
                s.attr("jobhost.send", i64::from(info.attempts));
                s
            });
            let traceparent = step
                .as_ref()
                .map(crate::effects::telemetry::Step::traceparent);
            let run = Sending {
                look: Some(&look),
                key: self.key,
                fence: Some(self.d.lease.fence),
                maybe_there: self.d.resumed || p.attempts > 0 || info.attempts > 1,
                now: self.d.clock.lease_now(),
                signature: signature.as_ref(),
                traceparent: traceparent.as_deref(),
            };
            let (store, lease, clock) = (&mut *self.d.store, self.d.lease, self.d.clock);
            let mut still_ours = || {
                let asked = clock.monotonic();
                let left = store.check_lease(lease, clock.lease_now())?;
                Ok(Some(LastLook::new(
                    Confirmed::checked(asked, left),
                    margin,
                    clock,
                )))
            };
            let sent = self
                .sender
                .send(&m.destination, dest, m, &run, &mut still_ours)?;
            // Let the next send in before any wait to send again.
            drop(permit);
            if let Some(s) = step.as_mut() {
                match &sent {
                    Sent::Withheld => s.attr("jobhost.outcome", "withheld"),
                    Sent::Delivered { http_status, .. } => {
                        s.attr("jobhost.outcome", "delivered");
                        if let Some(code) = http_status {
                            s.attr("http.response.status_code", i64::from(*code));
                        }
                    }
                    Sent::Failed(f) => {
                        if let Some(code) = f.http_status {
                            s.attr("http.response.status_code", i64::from(code));
                        }
                        // The message names no credential (see SendFailure).
                        s.fail(&f.message);
                    }
                }
            }
            drop(step);
            match sent {
                Sent::Withheld => {
                    info.attempts -= 1;
                    if !at_most_once {
                        uncounted -= 1;
                    }
                    withheld += 1;
                    if let Some(end) = self.withheld(m, at_most_once, withheld, uncounted, info)? {
                        return Ok(end);
                    }
                }
                Sent::Delivered {
                    detail,
                    http_status,
                } => return self.delivered(m.seq, uncounted, detail, http_status, info, last),
                Sent::Failed(f) => {
                    withheld = 0;
                    if let Some(end) = self.failed(dest, p, &f, uncounted, info)? {
                        return Ok(end);
                    }
                }
            }
        }
    }

    /// Makes sure the claim holds before a send: at-most-once, counted
    /// and marked in flight in the store; otherwise checked, and renewed
    /// when what is left might not cover this send and the wait after it
    /// (or half of it is spent), on the store's clock, or when `renew`
    /// (a send was just withheld). Returns when the store confirmed the
    /// claim, and for how long, for the last look before the send.
    fn before_send(
        &mut self,
        dest: &Destination,
        seq: u32,
        at_most_once: bool,
        renew: bool,
        uncounted: &mut u32,
    ) -> Result<Confirmed> {
        let d = &mut self.d;
        let lease_for = d.settings.lease;
        // Every confirmation is timed from before its request went out,
        // and from before the lease clock is read for it (SQLite extends
        // the lease from that reading).
        let renewed = |asked_at| Confirmed {
            asked_at,
            left: lease_for,
        };
        if at_most_once {
            // A crash from here on leaves the outcome unknown, and it is
            // treated that way.
            let asked = d.clock.monotonic();
            d.store
                .renew(d.lease, lease_for, Some(seq), d.clock.lease_now())?;
            return Ok(renewed(asked));
        }
        *uncounted += 1;
        let asked = d.clock.monotonic();
        let reported = d.store.check_lease(d.lease, d.clock.lease_now())?;
        // Less the time the answer took to arrive.
        let took = SignedDuration::try_from(d.clock.monotonic().saturating_sub(asked))
            .unwrap_or(SignedDuration::MAX);
        let left = reported.checked_sub(took).unwrap_or(SignedDuration::MIN);
        // Slack of a tenth of the lease (at least 5 s) for the store's own
        // writes and clock differences.
        let slack = (lease_for / 10).max(Duration::from_secs(5));
        let needed = (lease_for / 2).max(dest.timeout() + dest.retry.max_backoff + slack);
        if renew || left <= SignedDuration::try_from(needed).unwrap_or(SignedDuration::MAX) {
            let asked = d.clock.monotonic();
            d.store
                .renew(d.lease, lease_for, None, d.clock.lease_now())?;
            return Ok(renewed(asked));
        }
        Ok(Confirmed::checked(asked, reported))
    }

    /// A send withheld at the last look (nothing went out): at-most-once,
    /// its in-flight mark is cleared; after [`WITHHELD_IN_A_ROW`] in a row
    /// the attempt ends (retried later), else `None`: the claim is
    /// confirmed again and the message sent.
    fn withheld(
        &mut self,
        m: &crate::store::StagedMessage,
        at_most_once: bool,
        in_a_row: u32,
        uncounted: u32,
        info: &mut MessageInfo,
    ) -> Result<Option<One>> {
        let now = self.d.clock.lease_now();
        if at_most_once {
            // Certainly not sent.
            self.d.store.not_sent(self.d.lease, m.seq, WITHHELD, now)?;
        }
        if in_a_row < WITHHELD_IN_A_ROW {
            return Ok(None);
        }
        let lease = self.d.settings.lease;
        let why = format!(
            "message {} was not sent: {in_a_row} times in a row, less than the margin of its \
             {:.0} s lease ({:.1} s) was left when the request was about to be written (the \
             store or the destination's connection took that long); raise \
             `limits.lease_seconds`",
            m.idempotency_key,
            lease.as_secs_f64(),
            last_look::margin(lease).as_secs_f64()
        );
        let how = self.d.settings.attempts.after_failure(self.d.lease.attempt);
        let done = Attempted {
            seq: m.seq,
            tries: uncounted,
            status: WITHHELD,
        };
        self.d
            .store
            .fail(self.d.lease, &why, how, Some(&done), now)?;
        info.detail = Some(why.clone());
        Ok(Some(One::Ended(how, ended(how, why, info))))
    }

    /// A message that arrived: recorded now, or with the run's DONE when
    /// it was the last.
    fn delivered(
        &mut self,
        seq: u32,
        uncounted: u32,
        detail: String,
        http_status: Option<u16>,
        info: &mut MessageInfo,
        last: bool,
    ) -> Result<One> {
        self.reach(Boundary::AfterSend);
        info.status = DeliveryStatus::Delivered;
        info.http_status = http_status;
        info.detail = Some(detail.clone());
        if last {
            return Ok(One::Delivered(Some((seq, uncounted, detail))));
        }
        let done = Attempted {
            seq,
            tries: uncounted,
            status: &detail,
        };
        let d = &mut self.d;
        d.store
            .mark_delivered(d.lease, &done, d.clock.lease_now())?;
        Ok(One::Delivered(None))
    }

    /// A failed send: the end of the run's delivery (a refusal, an
    /// uncertain at-most-once send, the destination's tries spent, a stop
    /// while waiting), or `None` to send again after the wait.
    fn failed(
        &mut self,
        dest: &Destination,
        p: &PendingMessage,
        f: &SendFailure,
        uncounted: u32,
        info: &mut MessageInfo,
    ) -> Result<Option<One>> {
        let m = &p.message;
        info.http_status = f.http_status;
        info.detail = Some(f.message.clone());
        let at_most_once = dest.mode == DeliveryMode::AtMostOnce;
        let how = how_it_ends(
            f.outcome,
            dest.mode,
            info.attempts >= dest.retry.tries,
            || self.d.settings.attempts.after_failure(self.d.lease.attempt),
        );
        let done = Attempted {
            seq: m.seq,
            tries: uncounted,
            status: &f.message,
        };
        let now = self.d.clock.lease_now();
        if let Some(how) = how {
            let why = match f.outcome {
                Uncertainty::Unknown if at_most_once => format!(
                    "{}; the message may or may not have arrived, and destination `{}` is \
                     at-most-once, so it is never sent again; check the destination",
                    f.message, m.destination
                ),
                Uncertainty::Refused => f.message.clone(),
                _ => format!("{} (after {} send(s))", f.message, info.attempts),
            };
            self.d
                .store
                .fail(self.d.lease, &why, how, Some(&done), now)?;
            return Ok(Some(One::Ended(how, ended(how, why, info))));
        }
        if at_most_once {
            // Certainly not sent (anything else ended above).
            self.d
                .store
                .not_sent(self.d.lease, m.seq, &f.message, now)?;
        }
        let wait = dest
            .retry
            .wait(info.attempts + 1, f.retry_after, &mut self.rng);
        let Some(waited) = pause(self.d.clock, wait, self.d.stop) else {
            return Ok(None);
        };
        // Asked to stop: let the claim go rather than wait (or send again),
        // keeping the committed report, and without counting this attempt.
        let why = format!(
            "{} (after {} send(s)); asked to stop after waiting {:.1} s of {:.1} s to send it \
             again, so the claim is let go and a later invocation resumes the delivery",
            f.message,
            info.attempts,
            waited.as_secs_f64(),
            wait.as_secs_f64()
        );
        let how = Failure::Release {
            after: wait.saturating_sub(waited),
        };
        let now = self.d.clock.lease_now();
        self.d
            .store
            .fail(self.d.lease, &why, how, Some(&done), now)?;
        Ok(Some(One::Ended(how, ended(how, why, info))))
    }

    /// An at-most-once message an earlier process was sending when it
    /// stopped: it may or may not have arrived, so it is never sent again.
    fn abandon_in_flight(&mut self, p: &PendingMessage, info: &mut MessageInfo) -> Result<Ended> {
        let m = &p.message;
        let why = format!(
            "message {} to at-most-once destination `{}` was being sent when an earlier \
             process stopped; it may or may not have arrived, so it is never sent again; \
             check the destination",
            m.idempotency_key, m.destination
        );
        let done = Attempted {
            seq: m.seq,
            tries: 0,
            status: "outcome unknown",
        };
        let now = self.d.clock.lease_now();
        self.d
            .store
            .fail(self.d.lease, &why, Failure::Abandon, Some(&done), now)?;
        info.status = DeliveryStatus::Abandoned;
        info.detail = Some("an earlier send's outcome is unknown".to_string());
        Ok(Ended::Abandoned(why))
    }
}

/// Whether a failed send ends the run's delivery, and how: a refusal
/// fails the window for good; a send that may have arrived abandons an
/// at-most-once message (never sent twice); once the destination's sends
/// are spent (`spent`) the attempt ends as the job's attempts say
/// (`attempt_failed`: retried later, or abandoned on the last one);
/// otherwise `None`: send again after the destination's wait.
fn how_it_ends(
    outcome: Uncertainty,
    mode: DeliveryMode,
    spent: bool,
    attempt_failed: impl FnOnce() -> Failure,
) -> Option<Failure> {
    match outcome {
        Uncertainty::Refused => Some(Failure::Permanent),
        Uncertainty::Unknown if mode == DeliveryMode::AtMostOnce => Some(Failure::Abandon),
        _ if spent => Some(attempt_failed()),
        _ => None,
    }
}

/// Sends of one message withheld in a row after which the attempt ends.
const WITHHELD_IN_A_ROW: u32 = 3;

/// What the store records of a send withheld at the last look.
const WITHHELD: &str = "withheld: the lease may have run out";

/// Waits `wait` on `clock`, in short slices while a stop may be asked
/// for. Returns how long it had waited when a stop was asked (before or
/// during the wait), `None` when it waited it all.
fn pause(clock: &dyn Clock, wait: Duration, stop: Option<&AtomicBool>) -> Option<Duration> {
    let Some(stop) = stop else {
        clock.sleep(wait);
        return None;
    };
    const SLICE: Duration = Duration::from_millis(100);
    let mut waited = Duration::ZERO;
    loop {
        if stop.load(Ordering::SeqCst) {
            return Some(waited);
        }
        if waited >= wait {
            return None;
        }
        let step = (wait - waited).min(SLICE);
        clock.sleep(step);
        waited += step;
    }
}

/// The messages after one that failed for good are never sent.
fn never_sent(how: Failure, rest: &mut [MessageInfo]) {
    if !matches!(how, Failure::Retry { .. } | Failure::Release { .. }) {
        for m in rest {
            m.status = DeliveryStatus::NotSent;
        }
    }
}

fn ended(how: Failure, why: String, info: &mut MessageInfo) -> Ended {
    match how {
        Failure::Retry { .. } | Failure::Release { .. } => {
            info.status = DeliveryStatus::Pending;
            Ended::Retry(why)
        }
        Failure::Permanent => {
            info.status = DeliveryStatus::Failed;
            Ended::Permanent(why)
        }
        Failure::Abandon => {
            info.status = DeliveryStatus::Abandoned;
            Ended::Abandoned(why)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_send_ends_the_delivery_as_its_outcome_and_mode_say() {
        use DeliveryMode::{AtLeastOnce, AtMostOnce};
        use Uncertainty::{NotSent, Refused, Unknown};
        let later = Failure::Retry {
            after: Duration::from_secs(60),
        };
        // (outcome, mode, the destination's sends spent) -> how it ends.
        let table = [
            // A refusal is never sent again, in either mode.
            (Refused, AtLeastOnce, false, Some(Failure::Permanent)),
            (Refused, AtLeastOnce, true, Some(Failure::Permanent)),
            (Refused, AtMostOnce, false, Some(Failure::Permanent)),
            (Refused, AtMostOnce, true, Some(Failure::Permanent)),
            // Maybe arrived: at-most-once never sends it twice.
            (Unknown, AtMostOnce, false, Some(Failure::Abandon)),
            (Unknown, AtMostOnce, true, Some(Failure::Abandon)),
            // Otherwise the destination's sends, then the job's attempts.
            (Unknown, AtLeastOnce, false, None),
            (Unknown, AtLeastOnce, true, Some(later)),
            (NotSent, AtLeastOnce, false, None),
            (NotSent, AtLeastOnce, true, Some(later)),
            (NotSent, AtMostOnce, false, None),
            (NotSent, AtMostOnce, true, Some(later)),
        ];
        for (outcome, mode, spent, expected) in table {
            assert_eq!(
                how_it_ends(outcome, mode, spent, || later),
                expected,
                "{outcome:?} {mode:?} spent={spent}"
            );
        }
        // The job's attempts decide only once the sends are spent.
        assert_eq!(
            how_it_ends(NotSent, AtLeastOnce, false, || panic!("asked too early")),
            None
        );
    }
}
