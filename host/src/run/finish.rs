//! After a run's outcome is settled: the job's monitor hears of it (pings)
//! and a DONE run's digest is made, or left for later. Nothing here can
//! change the outcome.

use crate::core::clock::{Clock, SystemClock, VirtualClock};
use crate::effects::digest::{self, DigestInfo, DigestStatus, Wanted};
use crate::effects::ping::{PingStatus, Signal};
use crate::run::job::Job;
use crate::run::receipt::{Event, Receipt};
use crate::run::{DeferredDigest, Runtime};
use crate::store::Store;

/// The longest ping body, bytes.
const MAX_PING_LINE: usize = 2000;

/// Sends the success or failure ping the receipt's event calls for.
pub(crate) fn announce(job: &Job, receipt: &mut Receipt, clock: &dyn Clock) {
    match receipt.event {
        Event::Ran | Event::Resumed => ping(job, Signal::Success, receipt, clock),
        Event::Failed | Event::Abandoned => ping(job, Signal::Failure, receipt, clock),
        Event::Skipped => {}
    }
}

/// Sends the job's `signal` ping, if it has one, and notes how it went in
/// the receipt (and on stderr when it failed). Its body is one line: the
/// event, the key and, for a failure, the error; never the report.
pub(crate) fn ping(job: &Job, signal: Signal, receipt: &mut Receipt, clock: &dyn Clock) {
    if job.pings.is_empty() {
        return;
    }
    let key = receipt.key.as_deref().unwrap_or("-");
    let line = match signal {
        Signal::Start => format!("start {key} attempt {}", receipt.attempt.unwrap_or(0)),
        Signal::Success | Signal::Failure => {
            let event = receipt.event.as_str();
            match &receipt.error {
                Some(e) => format!("{event} {key}: {}: {}", e.kind, e.message),
                None => format!("{event} {key}"),
            }
        }
    };
    // Error messages hold no credentials; scrubbed all the same, since the
    // line leaves for a third party, and escaped: it is shown on a page.
    let mut line = crate::core::text::printable(&job.redactor.scrub(&line)).into_owned();
    if line.len() > MAX_PING_LINE {
        let mut cut = MAX_PING_LINE;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
    }
    let Some(info) = job.pings.send(signal, &line, clock, &job.redactor) else {
        return;
    };
    if let Some(detail) = info
        .detail
        .as_deref()
        .filter(|_| info.status != PingStatus::Sent)
    {
        crate::core::text::say(
            "warning",
            &format!(
                "{detail} (after {} request(s)); the run itself is not affected",
                info.attempts
            ),
        );
    }
    receipt.pings.insert(signal.as_str(), info);
}

/// After a run that reached the store: the job's incidents are kept in
/// step and its due notifications sent (see [`crate::run::notices`]), in
/// the store the run used, opened again; what was sent goes into the
/// receipt. Never on the skip path, and nothing here changes the outcome.
pub(crate) fn notify(job: &Job, runtime: &Runtime, clock: &dyn Clock, receipt: &mut Receipt) {
    if !crate::run::notices::wanted(job) || receipt.event == Event::Skipped || receipt.key.is_none()
    {
        return;
    }
    let done = crate::store::open_with(&job.store, runtime.failpoints.clone())
        .and_then(|mut store| crate::run::notices::notice(job, store.as_mut(), clock.now()));
    match done {
        Ok(sent) => receipt.notifications = sent,
        Err(e) => crate::core::text::say(
            "warning",
            &format!(
                "job `{}`: its notifications were not kept: {e:#}; the run is not affected, and \
                 the next run or wake-up tries again",
                job.name()
            ),
        ),
    }
}

/// Last of all, the digest of a DONE run: made now (into the receipt) in
/// the store the run used, or left for later when the runtime defers
/// digests.
pub(crate) fn digest(
    job: &Job,
    wanted: Option<(Wanted, Box<dyn Store>)>,
    runtime: &Runtime,
    clock: &dyn Clock,
    receipt: &mut Receipt,
) -> Option<DeferredDigest> {
    let (settings, (wanted, mut store)) = (job.digest.as_ref()?, wanted?);
    if runtime.defer_digests {
        return Some(DeferredDigest {
            wanted,
            at: clock.now(),
        });
    }
    let info = digest::make(settings, store.as_mut(), &wanted, clock);
    receipt.digest = Some(said(job, &wanted, info));
    None
}

/// Makes a digest a run left for later, on a clock like the run's; `None`
/// when the job has no model.
pub fn make_deferred_digest(
    job: &Job,
    deferred: &DeferredDigest,
    runtime: &Runtime,
) -> Option<DigestInfo> {
    let settings = job.digest.as_ref()?;
    let clock: Box<dyn Clock> = if runtime.virtual_time {
        Box::new(VirtualClock::new(deferred.at))
    } else {
        Box::new(SystemClock)
    };
    // The run that left it has closed its store: open it again, as that
    // run did (it exists and passed the run's checks).
    let info = match crate::store::open_with(&job.store, runtime.failpoints.clone()) {
        Ok(mut store) => digest::make(settings, store.as_mut(), &deferred.wanted, clock.as_ref()),
        Err(e) => DigestInfo {
            status: DigestStatus::Failed,
            cache: None,
            model: settings.model.clone(),
            text: None,
            error: Some(format!("the model was not asked: {e:#}")),
            message: None,
        },
    };
    Some(said(job, &deferred.wanted, info))
}

/// `info`, said on stderr when there is no digest of `wanted`.
fn said(job: &Job, wanted: &Wanted, info: DigestInfo) -> DigestInfo {
    if let (Some(why), DigestStatus::Failed) = (&info.error, info.status) {
        crate::core::text::say(
            "warning",
            &format!(
                "no digest of `{}`: {why}; the run is done all the same, and `{}` asks again",
                wanted.key,
                job.target.command(&format!(
                    "digest {}",
                    crate::core::command::shell_quote(wanted.key.as_str())
                ))
            ),
        );
    }
    info
}
