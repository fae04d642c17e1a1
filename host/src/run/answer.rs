//! The store's answer to a claim, for the invocation that asked: a lease
//! to run or resume the window with, or why nothing runs, written into the
//! receipt as a typed [`SkipReason`] and one sentence for a person.

use crate::core::clock::rfc3339;
use crate::core::command::{Target, shell_quote};
use crate::core::error::ErrorKind;
use crate::core::window::WindowKey;
use crate::run::receipt::{Event, Receipt, SkipReason};
use crate::store::{Claim, Held, Lease};

/// A claim that lets this invocation go on.
pub(crate) enum Granted {
    /// Run the guest for the window.
    Run(Lease),
    /// Deliver the report another invocation committed.
    Resume(Lease),
}

/// The lease `claim` grants, or `None` with the receipt saying why nothing
/// runs; the commands it suggests name the job as `target` does.
pub(crate) fn answer(
    claim: Claim,
    key: &WindowKey,
    label: &str,
    target: &Target,
    receipt: &mut Receipt,
) -> Option<Granted> {
    let quoted = shell_quote(key.as_str());
    match claim {
        Claim::Run { lease, .. } => return Some(Granted::Run(lease)),
        Claim::Resume { lease } => return Some(Granted::Resume(lease)),
        Claim::Done { attempt, fence } => done(receipt, key, attempt, fence.0),
        Claim::Skipped { reason } => {
            skipped_by_scheduler(receipt, key, label, target, reason.as_deref(), 0, 0);
        }
        Claim::Paused { note, by, since } => {
            let job = receipt.job.clone().unwrap_or_default();
            receipt.skip(
                SkipReason::Paused,
                format!(
                    "job `{job}` is paused (since {} by {by}: {note}); nothing of it runs until \
                     `{}`",
                    rfc3339(since),
                    target.command(&format!("resume {}", shell_quote(&job)))
                ),
            );
        }
        Claim::Busy {
            owner,
            lease_until,
            attempt,
            fence,
        } => {
            receipt.note_claim(attempt, fence.0);
            receipt.skip(
                SkipReason::Busy,
                format!(
                    "`{owner}` holds the claim on `{key}` until {}",
                    rfc3339(lease_until)
                ),
            );
        }
        Claim::Locked { held, waited } => {
            let what = match held {
                Held::Row => format!("the row of `{key}`"),
                Held::Store => "the store's write lock".to_string(),
            };
            receipt.skip(
                SkipReason::Busy,
                format!(
                    "another process has held {what} for more than {} s without finishing its \
                     write (paused or cut off in the middle of it); nothing was claimed, and a \
                     later invocation tries again",
                    waited.as_secs_f64()
                ),
            );
        }
        Claim::Wait {
            until,
            fence,
            attempts,
            error,
        } => {
            receipt.note_claim(attempts, fence.0);
            receipt.skip(
                SkipReason::RetryLater,
                format!(
                    "attempt {attempts} at window `{key}` failed; the next attempt waits until {}{}; \
                     `{}` tries it now",
                    rfc3339(until),
                    last_error(error.as_deref()),
                    target.command(&format!("retry {quoted}"))
                ),
            );
        }
        Claim::GaveUp {
            fence,
            attempts,
            error,
            abandoned_now,
        } => {
            receipt.note_claim(attempts, fence.0);
            let last = last_error(error.as_deref());
            if abandoned_now {
                receipt.fail_as(
                    Event::Abandoned,
                    ErrorKind::Abandoned,
                    format!(
                        "gave up on window `{key}` after {attempts} attempt(s){last}; look at it, \
                         then `{}` tries it again, or `{}` lets it run as new",
                        target.command(&format!("retry {quoted}")),
                        target.command(&format!("forget {quoted} --reason TEXT"))
                    ),
                );
            } else {
                receipt.skip(
                    SkipReason::GaveUp,
                    format!(
                        "window `{key}` is not attempted again after {attempts} attempt(s){last}; \
                         `{}` starts a new series of attempts",
                        target.command(&format!("retry {quoted}"))
                    ),
                );
            }
        }
    }
    None
}

/// The window was already reported.
pub(crate) fn done(receipt: &mut Receipt, key: &WindowKey, attempt: u32, fence: i64) {
    receipt.note_claim(attempt, fence);
    receipt.skip(
        SkipReason::Done,
        format!("window `{key}` was already reported"),
    );
}

/// A scheduler skipped the window (for `why`); only a person's `jobhost
/// run` runs it.
pub(crate) fn skipped_by_scheduler(
    receipt: &mut Receipt,
    key: &WindowKey,
    label: &str,
    target: &Target,
    why: Option<&str>,
    attempt: u32,
    fence: i64,
) {
    receipt.note_claim(attempt, fence);
    receipt.skip(
        SkipReason::CatchUp,
        format!(
            "window `{key}` was skipped by a scheduler ({}); `{}` runs it on purpose",
            why.unwrap_or("no reason recorded"),
            target.command(&format!("run --for {}", shell_quote(label)))
        ),
    );
}

fn last_error(error: Option<&str>) -> String {
    error
        .map(|e| format!("; last error: {e}"))
        .unwrap_or_default()
}
