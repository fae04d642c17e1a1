//! `jobhost check`: whether the rows a DONE window read have changed since
//! its run (late rows, a corrected source). Each run records a fingerprint
//! of the rows its guest received and a digest of the query that read
//! them (see [`crate::guest::source::Fingerprint`]); a check reads the
//! window's source again with the same query and compares fingerprints.
//! Only when they differ does it count what changed, row by row, against
//! the rows the run's journal kept, and marks the window STALE with that
//! cause. A source that cannot be read the same way again (a query that
//! reads the clock or random numbers, a guest that stopped reading early)
//! is said to be so, never guessed at.

use jiff::Timestamp;
use serde::Serialize;

use crate::core::error::{Error, Result};
use crate::guest::journal::{Entry, Journal};
use crate::guest::source::{Fingerprint, Source, SourceAccess, changes, row_digests};
use crate::run::{Job, Runtime};
use crate::store::{InputsRecord, Store};

/// The most windows one check reads again.
pub const MAX_CHECKED: usize = 10_000;

/// The `about` of a stale mark for changed inputs.
pub const INPUTS: &str = "inputs";

/// What a check found of one window.
#[derive(Debug, Clone, Serialize)]
pub struct Checked {
    /// `check`.
    pub event: &'static str,
    /// The window.
    pub key: String,
    /// Its revision checked.
    pub revision: u32,
    /// `same`, `changed` or `unknown`.
    pub result: &'static str,
    /// What changed, or why it cannot be told.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Whether this check marked the window stale.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub marked: bool,
}

/// Words in a query that make it read something else than the data: a
/// second read of the same rows would not give the same answer.
const VOLATILE: &[&str] = &[
    "now(",
    "random(",
    "current_timestamp",
    "current_date",
    "current_time",
    "localtime",
    "clock_timestamp",
    "statement_timestamp",
    "transaction_timestamp",
    "timeofday(",
    "gen_random",
    "uuid_generate",
    "randomblob(",
    "'now'",
    "julianday('now",
    "strftime('%s', 'now",
];

/// Why `query` cannot be read again the same way, if it cannot.
pub fn volatile(query: &str) -> Option<&'static str> {
    let lower = query.to_ascii_lowercase();
    VOLATILE.iter().copied().find(|w| lower.contains(w))
}

/// Checks `job`'s DONE windows that start in `[from, until)`, oldest
/// first; `each` hears of each as it is done, and says whether to go on
/// (a daemon stops when its next wake-up comes near).
///
/// # Errors
///
/// `Error::Input` for a job whose source cannot be checked (none, or an
/// upstream source: its windows are marked stale by the reruns of the
/// windows they used); `Error::Store`.
pub fn check(
    job: &Job,
    (from, until): (Option<Timestamp>, Option<Timestamp>),
    runtime: &Runtime,
    each: &mut dyn FnMut(&Checked) -> bool,
) -> Result<Vec<Checked>> {
    let source = match &job.source {
        None => {
            return Err(Error::input(format!(
                "job `{}` has no `[source]`: there is nothing to read again",
                job.name()
            )));
        }
        Some(s) if s.is_upstream() => {
            return Err(Error::input(format!(
                "job `{}` reads its upstream jobs' reports: a window of it is marked STALE when \
                 an upstream window it used is rerun, so there is nothing to read again",
                job.name()
            )));
        }
        Some(s) => s,
    };
    let query = source.query().unwrap_or_default();
    let digest = source.query_digest().unwrap_or_default();
    // One store for the check: its reads, and the marks it makes.
    let mut store = crate::store::open(&job.store)?;
    let records = store.inputs(job.name().as_str(), from, until, MAX_CHECKED)?;
    let now = runtime.clock().lease_now();
    let mut out = Vec::with_capacity(records.len());
    for r in records {
        let (result, detail) = match one(job, store.as_mut(), source, (&digest, query), &r) {
            Ok(Found::Same) => ("same", None),
            Ok(Found::Changed(cause)) => ("changed", Some(cause)),
            Ok(Found::Unknown(why)) => ("unknown", Some(why)),
            Err(e) => ("unknown", Some(format!("{e:#}"))),
        };
        let marked = match (&detail, result) {
            (Some(cause), "changed") => store.mark_stale(&r.key, r.revision, INPUTS, cause, now)?,
            _ => false,
        };
        let checked = Checked {
            event: "check",
            key: r.key.to_string(),
            revision: r.revision,
            result,
            detail,
            marked,
        };
        let go_on = each(&checked);
        out.push(checked);
        if !go_on {
            break;
        }
    }
    Ok(out)
}

/// What one window's check found.
enum Found {
    Same,
    Changed(String),
    Unknown(String),
}

/// What the check of window `r` finds: `query` is the job's query now,
/// `digest` its digest.
fn one(
    job: &Job,
    store: &mut dyn Store,
    source: &Source,
    (digest, query): (&str, &str),
    r: &InputsRecord,
) -> Result<Found> {
    let Some(recorded) = r.fingerprint.as_deref() else {
        return Ok(Found::Unknown(
            "its run recorded no fingerprint of its rows (it ran before `jobhost check` \
             existed); a rerun records one"
                .to_string(),
        ));
    };
    let Some(then) = Fingerprint::parse(recorded) else {
        return Ok(Found::Unknown(
            "its fingerprint is of a format this jobhost does not read".to_string(),
        ));
    };
    if !recorded
        .split(' ')
        .any(|w| w.strip_prefix("query=") == Some(digest))
    {
        return Ok(Found::Unknown(
            "the job's query changed since this run: its rows were read by another query"
                .to_string(),
        ));
    }
    if let Some(word) = volatile(query) {
        return Ok(Found::Unknown(format!(
            "the query reads `{word}`: a second read would differ whatever the data, so it \
             cannot be compared"
        )));
    }
    if then.sessions != 1 || !then.complete {
        return Ok(Found::Unknown(if then.sessions == 0 {
            "its guest never read its source".to_string()
        } else if then.sessions > 1 {
            format!(
                "its guest read its source {} times; one read cannot be compared with it",
                then.sessions
            )
        } else {
            "its guest stopped reading before the last row: what it did not read cannot be \
             compared"
                .to_string()
        }));
    }
    // The same query over the same window, read to its end.
    let mut access = SourceAccess::new(
        Some(source.clone()),
        r.window_start,
        r.window_end,
        job.guest.batch_rows,
    );
    let mut cursor = access
        .open()
        .map_err(|e| Error::Source(format!("{e:?}").into()))?;
    let mut now = Fingerprint::default();
    now.opened();
    let mut batches = Vec::new();
    loop {
        match cursor.next_batch(job.guest.batch_rows.get()) {
            Ok(Some(b)) => {
                now.add(Some(&b));
                batches.push(b);
            }
            Ok(None) => {
                now.add(None);
                break;
            }
            Err(e) => return Err(Error::Source(format!("{e:?}").into())),
        }
    }
    access.close(cursor);
    if (now.rows, now.sum) == (then.rows, then.sum) {
        return Ok(Found::Same);
    }
    // They differ: what, row by row, against the journal's rows.
    let journal = if r.pruned {
        None
    } else {
        store.journal(&r.key)?
    };
    let before = journal
        .as_deref()
        .and_then(|j| Journal::decode(j).ok())
        .map(|j| {
            let batches: Vec<_> = j
                .entries
                .into_iter()
                .filter_map(|e| match e {
                    Entry::Batch {
                        answer: Ok(Some(b)),
                        ..
                    } => Some(b),
                    _ => None,
                })
                .collect();
            row_digests(&batches)
        });
    Ok(Found::Changed(match before {
        Some(before) => format!(
            "inputs changed: {}",
            changes(&before, &row_digests(&batches)).words()
        ),
        None => format!(
            "inputs changed: {} row(s) now, {} when it ran (its journal was pruned, so rows are \
             not compared one by one)",
            now.rows, then.rows
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_that_reads_the_clock_is_volatile_and_one_over_the_window_is_not() {
        assert_eq!(
            volatile("SELECT * FROM t WHERE ts < now() AND ts >= $1 AND ts < $2"),
            Some("now(")
        );
        assert_eq!(
            volatile("select random() from t where ts >= :start and ts < :end"),
            Some("random(")
        );
        assert_eq!(
            volatile("SELECT ts, amount FROM sales WHERE ts >= :start AND ts < :end"),
            None
        );
    }
}
