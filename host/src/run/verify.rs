//! `jobhost verify`: every job's chain in a store walked and compared with
//! the rows (see [`crate::store::verify`]), or one exported run checked
//! offline: its entries' hashes, links and signatures, and that the file's
//! report, journal and messages are the ones the entries committed.

use crate::core::error::{Error, Result};
use crate::run::replay::Recording;
use crate::store::Ledger;
use crate::store::chain::{Entry, Link, PublicKey, digest, hash_of, signed_text};
use crate::store::verify::{Finding, Problem, Verdict, check};

/// How many entries are read from the store at once.
const PAGE: u64 = 10_000;

/// The most findings kept per job (all of them are counted).
pub const MOST_FINDINGS: usize = 200;

/// The verdicts on the chains of `job`, or of every job, in name order.
///
/// # Errors
///
/// `Error::Input` for a job the store has no chain or rows of;
/// `Error::Store` when it cannot be read.
pub fn verify_store(
    store: &mut dyn Ledger,
    job: Option<&str>,
    keys: &[PublicKey],
) -> Result<Vec<Verdict>> {
    let jobs = store.chain_jobs()?;
    let jobs: Vec<String> = match job {
        Some(j) if jobs.iter().any(|x| x == j) => vec![j.to_string()],
        Some(j) => {
            return Err(Error::input(format!(
                "the store has no chain or rows of job `{j}`; it has {}",
                if jobs.is_empty() {
                    "none".to_string()
                } else {
                    jobs.iter()
                        .map(|j| format!("`{j}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )));
        }
        None => jobs,
    };
    let mut verdicts = Vec::with_capacity(jobs.len());
    for job in jobs {
        let rows = store.chain_rows(&job)?;
        // The entries are read a page at a time as the walk goes: a long
        // chain is never held whole.
        let mut pages = Pages {
            store: &mut *store,
            job: &job,
            after: i64::MIN,
            page: Vec::new().into_iter(),
            last: false,
            failed: None,
        };
        let verdict = check(&job, &mut pages, keys, &rows, MOST_FINDINGS);
        if let Some(e) = pages.failed {
            return Err(e);
        }
        verdicts.push(verdict);
    }
    Ok(verdicts)
}

/// A job's entries in order of number, read [`PAGE`] at a time (every
/// number, so an entry moved below 1 is read too).
struct Pages<'a> {
    store: &'a mut dyn Ledger,
    job: &'a str,
    after: i64,
    page: std::vec::IntoIter<Link>,
    last: bool,
    /// Why a page could not be read; the walk ends there.
    failed: Option<Error>,
}

impl Iterator for Pages<'_> {
    type Item = Link;

    fn next(&mut self) -> Option<Link> {
        loop {
            if let Some(l) = self.page.next() {
                self.after = l.seq;
                return Some(l);
            }
            if self.last {
                return None;
            }
            match self.store.chain(self.job, self.after, PAGE) {
                Ok(page) => {
                    self.last = (page.len() as u64) < PAGE;
                    if page.is_empty() {
                        return None;
                    }
                    self.page = page.into_iter();
                }
                Err(e) => {
                    self.failed = Some(e);
                    self.last = true;
                    return None;
                }
            }
        }
    }
}

/// The verdict on an exported run, checked with nothing but the file and
/// `keys`.
pub fn verify_file(recording: &Recording, keys: &[PublicKey]) -> Verdict {
    let chain = &recording.chain;
    let mut v = Verdict {
        job: chain.first().map(|l| l.job.clone()).unwrap_or_default(),
        entries: chain.len() as u64,
        ..Verdict::default()
    };
    let mut push = |problem, entry, what: String| {
        if v.findings.len() < MOST_FINDINGS {
            v.findings.push(Finding {
                problem,
                entry,
                what,
            });
        }
    };
    if chain.is_empty() {
        push(
            Problem::Broken,
            None,
            "the file carries no chain entries: it was exported by an older jobhost or from a \
             store from before the chain; export the run again"
                .to_string(),
        );
        return v;
    }
    let (mut signed, mut unchecked) = (0, 0);
    let mut before: Option<&Link> = None;
    for l in chain {
        if hash_of(&l.job, l.seq, &l.prev, &l.entry) != l.hash {
            push(
                Problem::Edited,
                Some(l.seq),
                format!("entry #{} does not match its hash: it was changed", l.seq),
            );
        }
        if let Some(b) = before
            && (l.job != b.job || l.seq != b.seq + 1 || l.prev != b.hash)
        {
            push(
                Problem::Broken,
                Some(l.seq),
                format!(
                    "entry #{} does not follow entry #{} of the file: entries were removed, \
                     reordered or replaced",
                    l.seq, b.seq
                ),
            );
        }
        match (&l.key_id, &l.signature) {
            (Some(id), Some(sig)) if !keys.is_empty() => match keys.iter().find(|k| k.id() == id) {
                Some(k) if k.verifies(&signed_text(&l.hash), sig) => signed += 1,
                Some(_) => push(
                    Problem::Signature,
                    Some(l.seq),
                    format!(
                        "entry #{}: its signature by key {id} does not verify",
                        l.seq
                    ),
                ),
                None => push(
                    Problem::Signature,
                    Some(l.seq),
                    format!(
                        "entry #{} is signed by key {id}, which is not among the public \
                             keys given",
                        l.seq
                    ),
                ),
            },
            (Some(_), Some(_)) => unchecked += 1,
            _ if !keys.is_empty() => push(
                Problem::Signature,
                Some(l.seq),
                format!("entry #{} is not signed", l.seq),
            ),
            _ => {}
        }
        before = Some(l);
    }
    v.signed = signed;
    v.unchecked = unchecked;
    // What the entries committed, against what the file carries.
    let key = recording.journal.context.key.as_str();
    let entries: Vec<(i64, Entry)> = chain
        .iter()
        .filter(|l| l.key.as_deref() == Some(key))
        .filter_map(|l| Some((l.seq, l.parsed()?)))
        .collect();
    let Some((seq, report)) = entries.iter().rev().find(|(_, e)| e.kind == "report") else {
        push(
            Problem::Broken,
            None,
            format!("the file's entries hold no committed report of `{key}`"),
        );
        return v;
    };
    let mut field = |name: &str, carried: String, committed: Option<&String>| {
        if committed != Some(&carried) {
            push(
                Problem::Changed,
                Some(*seq),
                format!(
                    "the file's {name} ({}) is not the one entry #{seq} committed ({})",
                    carried,
                    committed.map_or("none", String::as_str)
                ),
            );
        }
    };
    field(
        "report",
        digest(recording.report.summary.as_bytes()),
        report.report.as_ref(),
    );
    field(
        "journal",
        digest(&recording.stored_journal),
        report.journal.as_ref(),
    );
    let carried: Vec<String> = recording
        .messages
        .iter()
        .map(|m| {
            format!(
                "{} {} {} {}",
                m.seq,
                m.destination,
                m.idempotency_key,
                digest(&m.body)
            )
        })
        .collect();
    let committed: Vec<String> = report
        .messages
        .iter()
        .map(|m| {
            format!(
                "{} {} {} {}",
                m.seq, m.destination, m.idempotency_key, m.body
            )
        })
        .collect();
    if carried != committed && !recording.bodies_pruned {
        push(
            Problem::Changed,
            Some(*seq),
            format!(
                "the file's messages are not the ones entry #{seq} committed ({} carried, {} \
                 committed)",
                carried.len(),
                committed.len()
            ),
        );
    }
    let claimed = entries
        .iter()
        .rev()
        .find(|(s, e)| *s < *seq && e.component.is_some())
        .and_then(|(_, e)| e.component.clone());
    if let Some(c) = claimed
        && c != recording.component
    {
        push(
            Problem::Changed,
            Some(*seq),
            format!(
                "the file says component {} ran, and the entries claimed the window for {c}",
                recording.component
            ),
        );
    }
    v
}

/// The state the file's entries leave the run in (`DONE`, `PREPARED`, ...).
pub fn final_state(recording: &Recording) -> Option<String> {
    let key = recording.journal.context.key.as_str();
    recording
        .chain
        .iter()
        .rev()
        .filter(|l| l.key.as_deref() == Some(key))
        .filter_map(Link::parsed)
        .find_map(|e| e.state)
}
