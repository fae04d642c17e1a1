//! Checking a job's chain (see [`super::chain`]) against itself and the
//! rows: every entry's hash recomputed from its content, each linked to
//! the one before, numbered without a gap, signed by
//! a key given (when keys are given); then the entries folded, in order,
//! into what each row must hold now (a window's state, revision, fence,
//! report, rerun reason, component and journal; each message's destination,
//! key, body and state; each archived revision; each audit line), and the
//! rows compared with that. A row no entry accounts for was written
//! outside jobhost; a row an entry recorded that is gone was deleted
//! outside it. The rows a store held before it kept a chain are adopted:
//! the chain covers them from their next change.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::chain::{
    ArchivedFact, AuditFact, Entry, GENESIS, Link, PublicKey, hash_of, signed_text,
};

/// What a window's row holds now, as read for the comparison (digests
/// instead of bodies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRow {
    pub key: String,
    pub state: String,
    pub revision: u32,
    pub fence: i64,
    pub component: String,
    /// `sha256:<hex>` of the report, if any.
    pub report: Option<String>,
    pub reason: Option<String>,
    /// `sha256:<hex>` of the journal, if any.
    pub journal: Option<String>,
}

/// A message's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRow {
    pub key: String,
    pub seq: u32,
    pub destination: String,
    pub idempotency_key: String,
    /// `sha256:<hex>` of the body; `None` for an empty body (a pruned one).
    pub body: Option<String>,
    pub state: String,
}

/// An archived revision's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionRow {
    pub key: String,
    pub revision: u32,
    pub state: String,
    pub report: Option<String>,
}

/// Everything of one job [`check`] compares with its chain.
#[derive(Debug, Clone, Default)]
pub struct ChainRows {
    pub runs: Vec<RunRow>,
    pub messages: Vec<MessageRow>,
    pub revisions: Vec<RevisionRow>,
    pub audit: Vec<AuditFact>,
    /// `(what, id)` of the rows there were before the chain: `run` key,
    /// `revision` "N key", `message` "seq key", `audit` id.
    pub adopted: HashSet<(String, String)>,
}

/// What is wrong, by the kind of wrong (each has its own word in
/// `verify`'s output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Problem {
    /// An entry's content does not match its hash.
    Edited,
    /// An entry does not follow the one before it (removed, reordered or
    /// replaced), or entries are missing.
    Broken,
    /// A signature that does not verify, from an unknown key, or missing
    /// where keys were given.
    Signature,
    /// A row that differs from what the entries recorded.
    Changed,
    /// A row the entries recorded that is gone.
    Deleted,
    /// A row no entry accounts for: written outside jobhost.
    Outside,
}

/// One thing wrong.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    pub problem: Problem,
    /// The entry it is about, if one.
    pub entry: Option<i64>,
    /// What is wrong, for a person: which row, which field, what the entry
    /// says.
    pub what: String,
}

/// The verdict on one job's chain.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Verdict {
    pub job: String,
    pub entries: u64,
    /// Entries whose signature was checked and holds.
    pub signed: u64,
    /// Entries signed, not checked (no public key given).
    pub unchecked: u64,
    /// Rows from before the chain that no entry covers yet.
    pub adopted: u64,
    pub findings: Vec<Finding>,
}

/// The chain as it was walked: each run's expected row, and so on.
#[derive(Default)]
struct Expected {
    runs: BTreeMap<String, Expect>,
    revisions: BTreeMap<(String, u32), (i64, ArchivedFact)>,
    audit: BTreeMap<i64, (i64, AuditFact)>,
}

/// What a window's row must hold, as the entries left it; `None` fields
/// were not recorded and are not compared.
#[derive(Debug, Clone, Default)]
struct Expect {
    /// The entry that last changed it.
    at: i64,
    gone: bool,
    state: Option<String>,
    revision: Option<u32>,
    fence: Option<i64>,
    component: Option<String>,
    report: Option<Option<String>>,
    reason: Option<Option<String>>,
    journal: Option<String>,
    pruned: bool,
    journals_kept: bool,
    messages: BTreeMap<u32, MessageExpect>,
}

#[derive(Debug, Clone)]
struct MessageExpect {
    at: i64,
    destination: String,
    idempotency_key: String,
    body: String,
    state: String,
}

impl Expect {
    /// A row as a claim, skip or wait made it anew.
    fn fresh(at: i64, state: &str) -> Expect {
        Expect {
            at,
            state: Some(state.to_string()),
            report: Some(None),
            reason: Some(None),
            ..Expect::default()
        }
    }
}

/// Checks `links` (the job's entries, in order of number) against
/// themselves, `keys` (when any are given, every entry must be signed by
/// one of them) and `rows`. `max` bounds the findings kept (all are
/// counted in the first ones' order).
pub fn check(
    job: &str,
    links: impl IntoIterator<Item = Link>,
    keys: &[PublicKey],
    rows: &ChainRows,
    max: usize,
) -> Verdict {
    let mut v = Verdict {
        job: job.to_string(),
        ..Verdict::default()
    };
    let mut found = Findings {
        list: Vec::new(),
        max,
    };
    let mut expected = Expected::default();
    let (mut next, mut prev) = (1_i64, GENESIS.to_string());
    for link in links {
        v.entries += 1;
        if link.seq != next {
            found.push(
                Problem::Broken,
                Some(link.seq),
                if link.seq > next {
                    format!(
                        "entries #{next} to #{} are missing: the chain goes from #{} to #{}",
                        link.seq - 1,
                        next - 1,
                        link.seq
                    )
                } else {
                    format!("entry #{} comes again after #{}", link.seq, next - 1)
                },
            );
        }
        let hash = hash_of(job, link.seq, &link.prev, &link.entry);
        if hash != link.hash {
            found.push(
                Problem::Edited,
                Some(link.seq),
                format!(
                    "entry #{} does not match its hash: its content, number or link was changed \
                     after it was written",
                    link.seq
                ),
            );
        }
        if link.prev != prev {
            found.push(
                Problem::Broken,
                Some(link.seq),
                format!(
                    "entry #{} does not follow the entry before it (it names {}, the one before \
                     is {}): entries were removed, reordered or replaced",
                    link.seq,
                    short(&link.prev),
                    short(&prev)
                ),
            );
        }
        signature(&link, keys, &mut v, &mut found);
        match link.parsed() {
            Some(entry) => {
                if entry.kind != link.kind || entry.key != link.key {
                    found.push(
                        Problem::Edited,
                        Some(link.seq),
                        format!(
                            "entry #{}: its kind and window columns ({}, {}) are not the ones \
                             its content names ({}, {})",
                            link.seq,
                            link.kind,
                            link.key.as_deref().unwrap_or("none"),
                            entry.kind,
                            entry.key.as_deref().unwrap_or("none")
                        ),
                    );
                }
                fold(&mut expected, link.seq, &entry);
            }
            None => found.push(
                Problem::Edited,
                Some(link.seq),
                format!("entry #{} is not an entry jobhost writes", link.seq),
            ),
        }
        next = link.seq.max(next) + 1;
        prev = link.hash;
    }
    compare(&expected, rows, &mut v, &mut found);
    v.findings = found.list;
    v
}

/// Findings, at most `max` kept.
struct Findings {
    list: Vec<Finding>,
    max: usize,
}

impl Findings {
    fn push(&mut self, problem: Problem, entry: Option<i64>, what: String) {
        if self.list.len() < self.max {
            self.list.push(Finding {
                problem,
                entry,
                what,
            });
        }
    }
}

/// The first 12 hex digits of a hash, for a person.
fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

fn signature(link: &Link, keys: &[PublicKey], v: &mut Verdict, found: &mut Findings) {
    match (&link.key_id, &link.signature) {
        (Some(id), Some(sig)) => {
            if keys.is_empty() {
                v.unchecked += 1;
                return;
            }
            match keys.iter().find(|k| k.id() == id) {
                Some(k) if k.verifies(&signed_text(&link.hash), sig) => v.signed += 1,
                Some(_) => found.push(
                    Problem::Signature,
                    Some(link.seq),
                    format!(
                        "entry #{}: its signature by key {id} does not verify: the entry or its \
                         signature was changed",
                        link.seq
                    ),
                ),
                None => found.push(
                    Problem::Signature,
                    Some(link.seq),
                    format!(
                        "entry #{} is signed by key {id}, which is not among the public keys \
                         given ({}); give that key's public file too",
                        link.seq,
                        keys.iter()
                            .map(PublicKey::id)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ),
            }
        }
        _ if !keys.is_empty() => found.push(
            Problem::Signature,
            Some(link.seq),
            format!(
                "entry #{} is not signed: it was written without a key, or its signature was \
                 removed",
                link.seq
            ),
        ),
        _ => {}
    }
}

/// Applies one entry to what the rows must hold.
fn fold(x: &mut Expected, at: i64, e: &Entry) {
    if let Some(a) = &e.audit {
        x.audit.insert(a.id, (at, a.clone()));
    }
    let key = e.key.clone().unwrap_or_default();
    if let Some(a) = &e.archived {
        x.revisions
            .insert((key.clone(), a.revision), (at, a.clone()));
    }
    match e.kind.as_str() {
        "claim" => {
            let fresh = e.from.is_none() || e.archived.is_some();
            let row = x.runs.entry(key).or_default();
            if fresh || row.gone {
                *row = Expect::fresh(at, "");
                row.reason = Some(e.reason.clone());
            }
            row.at = at;
            row.state.clone_from(&e.state);
            row.revision = e.revision.or(row.revision);
            row.fence = e.fence.or(row.fence);
            if e.component.is_some() {
                row.component.clone_from(&e.component);
            }
            if e.audit.as_ref().is_some_and(|a| a.action == "retry") {
                for m in row.messages.values_mut() {
                    if m.state != "DELIVERED" {
                        m.state = "PENDING".into();
                        m.at = at;
                    }
                }
            }
        }
        "claims" | "skipped" => {
            for w in &e.windows {
                let mut row = Expect::fresh(at, e.state.as_deref().unwrap_or(""));
                row.revision = w.revision;
                row.fence = w.fence;
                row.component.clone_from(&e.component);
                x.runs.insert(w.key.clone(), row);
            }
        }
        "waiting" => {
            x.runs.insert(key, Expect::fresh(at, "WAITING"));
        }
        "release" => {
            for w in &e.windows {
                gone(x, &w.key, at);
            }
        }
        "forget" => gone(x, &key, at),
        "pruned" => {
            for w in &e.windows {
                if let Some(row) = x.runs.get_mut(&w.key) {
                    row.pruned = true;
                    row.journals_kept = e.state.is_some();
                }
            }
        }
        _ => {
            let Some(row) = (!key.is_empty()).then(|| x.runs.entry(key).or_default()) else {
                return;
            };
            row.at = at;
            if e.state.is_some() {
                row.state.clone_from(&e.state);
            }
            row.revision = e.revision.or(row.revision);
            row.fence = e.fence.or(row.fence);
            if e.kind == "report" {
                row.report = Some(e.report.clone());
                row.journal.clone_from(&e.journal);
                row.messages = e
                    .messages
                    .iter()
                    .map(|m| {
                        (
                            m.seq,
                            MessageExpect {
                                at,
                                destination: m.destination.clone(),
                                idempotency_key: m.idempotency_key.clone(),
                                body: m.body.clone(),
                                state: "PENDING".into(),
                            },
                        )
                    })
                    .collect();
            }
            for o in &e.outcomes {
                if let Some(m) = row.messages.get_mut(&o.seq) {
                    m.state.clone_from(&o.state);
                    m.at = at;
                }
            }
        }
    }
}

fn gone(x: &mut Expected, key: &str, at: i64) {
    let row = x.runs.entry(key.to_string()).or_default();
    *row = Expect {
        at,
        gone: true,
        ..Expect::default()
    };
}

/// Compares the rows with what the entries say they hold.
fn compare(x: &Expected, rows: &ChainRows, v: &mut Verdict, found: &mut Findings) {
    let mut seen: HashSet<&str> = HashSet::new();
    for r in &rows.runs {
        seen.insert(&r.key);
        let Some(e) = x.runs.get(&r.key) else {
            let row = format!("window `{}` ({})", r.key, r.state);
            unaccounted(rows, v, found, ("run", r.key.clone()), &row);
            continue;
        };
        if e.gone {
            found.push(
                Problem::Outside,
                Some(e.at),
                format!(
                    "window `{}` ({}) has a row, but entry #{} removed it: the row was written \
                     outside jobhost",
                    r.key, r.state, e.at
                ),
            );
            continue;
        }
        let mut field = |name: &str, now: String, then: String| {
            if now != then {
                found.push(
                    Problem::Changed,
                    Some(e.at),
                    format!(
                        "window `{}`: its {name} is {now}, but entry #{} recorded {then}: the row \
                         was changed outside jobhost",
                        r.key, e.at
                    ),
                );
            }
        };
        if let Some(s) = &e.state {
            field("state", r.state.clone(), s.clone());
        }
        if let Some(n) = e.revision {
            field("revision", r.revision.to_string(), n.to_string());
        }
        if let Some(n) = e.fence {
            field("fence", r.fence.to_string(), n.to_string());
        }
        if let Some(c) = &e.component {
            field("component", r.component.clone(), c.clone());
        }
        if let Some(rep) = &e.report {
            field("report", shown(r.report.as_deref()), shown(rep.as_deref()));
        }
        if let Some(reason) = &e.reason {
            field(
                "reason",
                quoted(r.reason.as_deref()),
                quoted(reason.as_deref()),
            );
        }
        if let (Some(j), Some(now)) = (&e.journal, &r.journal) {
            field("journal", now.clone(), j.clone());
        } else if let (Some(j), None) = (&e.journal, &r.journal)
            && (!e.pruned || e.journals_kept)
        {
            field("journal", "missing".into(), j.clone());
        }
    }
    for (key, e) in &x.runs {
        if !e.gone && !seen.contains(key.as_str()) {
            found.push(
                Problem::Deleted,
                Some(e.at),
                format!(
                    "window `{key}` has no row, but entry #{} recorded it {}: it was deleted \
                     outside jobhost",
                    e.at,
                    e.state.as_deref().unwrap_or("claimed")
                ),
            );
        }
    }
    compare_messages(x, rows, v, found);
    compare_revisions(x, rows, v, found);
    compare_audit(x, rows, v, found);
}

/// A row no entry accounts for: adopted when the store held it before the
/// chain (`what` and `id` as `chain_adopted` names it), else written
/// outside jobhost; `row` says which, for a person.
fn unaccounted(
    rows: &ChainRows,
    v: &mut Verdict,
    found: &mut Findings,
    (what, id): (&str, String),
    row: &str,
) {
    if rows.adopted.contains(&(what.to_string(), id)) {
        v.adopted += 1;
    } else {
        found.push(
            Problem::Outside,
            None,
            format!("{row} has no entry in the chain: it was written outside jobhost"),
        );
    }
}

fn compare_messages(x: &Expected, rows: &ChainRows, v: &mut Verdict, found: &mut Findings) {
    let mut seen: HashSet<(&str, u32)> = HashSet::new();
    for m in &rows.messages {
        seen.insert((&m.key, m.seq));
        let run = x.runs.get(&m.key).filter(|e| !e.gone);
        let Some((e, want)) = run.and_then(|e| Some((e, e.messages.get(&m.seq)?))) else {
            let row = format!("message {} of `{}`", m.seq, m.key);
            unaccounted(
                rows,
                v,
                found,
                ("message", format!("{} {}", m.seq, m.key)),
                &row,
            );
            continue;
        };
        let mut field = |name: &str, now: &str, then: &str| {
            if now != then {
                found.push(
                    Problem::Changed,
                    Some(want.at),
                    format!(
                        "message {} of `{}`: its {name} is {now}, but entry #{} recorded {then}: \
                         it was changed outside jobhost",
                        m.seq, m.key, want.at
                    ),
                );
            }
        };
        field("destination", &m.destination, &want.destination);
        field("idempotency key", &m.idempotency_key, &want.idempotency_key);
        field("state", &m.state, &want.state);
        match &m.body {
            Some(b) => field("body", b, &want.body),
            None if e.pruned => {}
            None => field("body", "empty", &want.body),
        }
    }
    for (key, e) in x.runs.iter().filter(|(_, e)| !e.gone) {
        for (seq, want) in &e.messages {
            if !seen.contains(&(key.as_str(), *seq)) {
                found.push(
                    Problem::Deleted,
                    Some(want.at),
                    format!(
                        "message {seq} of `{key}` has no row, but entry #{} recorded it: it was \
                         deleted outside jobhost",
                        want.at
                    ),
                );
            }
        }
    }
}

fn compare_revisions(x: &Expected, rows: &ChainRows, v: &mut Verdict, found: &mut Findings) {
    let mut seen: HashSet<(&str, u32)> = HashSet::new();
    for r in &rows.revisions {
        seen.insert((&r.key, r.revision));
        let Some((at, want)) = x.revisions.get(&(r.key.clone(), r.revision)) else {
            let row = format!("revision {} of `{}`", r.revision, r.key);
            let id = format!("{} {}", r.revision, r.key);
            unaccounted(rows, v, found, ("revision", id), &row);
            continue;
        };
        for (name, now, then) in [
            ("state", r.state.clone(), want.state.clone()),
            (
                "report",
                shown(r.report.as_deref()),
                shown(want.report.as_deref()),
            ),
        ] {
            if now != then {
                found.push(
                    Problem::Changed,
                    Some(*at),
                    format!(
                        "revision {} of `{}`: its {name} is {now}, but entry #{at} recorded \
                         {then}: it was changed outside jobhost",
                        r.revision, r.key
                    ),
                );
            }
        }
    }
    for ((key, revision), (at, _)) in &x.revisions {
        if !seen.contains(&(key.as_str(), *revision)) {
            found.push(
                Problem::Deleted,
                Some(*at),
                format!(
                    "revision {revision} of `{key}` has no row, but entry #{at} archived it: it \
                     was deleted outside jobhost"
                ),
            );
        }
    }
}

fn compare_audit(x: &Expected, rows: &ChainRows, v: &mut Verdict, found: &mut Findings) {
    let by_id: HashMap<i64, &AuditFact> = rows.audit.iter().map(|a| (a.id, a)).collect();
    for a in &rows.audit {
        let Some((at, want)) = x.audit.get(&a.id) else {
            let key = a.key.as_deref().unwrap_or("");
            let row = format!("audit line {} ({} {key})", a.id, a.action);
            unaccounted(rows, v, found, ("audit", a.id.to_string()), &row);
            continue;
        };
        for (name, now, then) in [
            (
                "action",
                quoted(Some(&a.action)),
                quoted(Some(&want.action)),
            ),
            (
                "window",
                quoted(a.key.as_deref()),
                quoted(want.key.as_deref()),
            ),
            (
                "old state",
                quoted(a.old_state.as_deref()),
                quoted(want.old_state.as_deref()),
            ),
            (
                "reason",
                quoted(Some(&a.reason)),
                quoted(Some(&want.reason)),
            ),
            (
                "detail",
                quoted(a.detail.as_deref()),
                quoted(want.detail.as_deref()),
            ),
            ("who", quoted(Some(&a.by)), quoted(Some(&want.by))),
        ] {
            if now != then {
                found.push(
                    Problem::Changed,
                    Some(*at),
                    format!(
                        "audit line {} ({} {}): its {name} is {now}, but entry #{at} recorded \
                         {then}: it was changed outside jobhost",
                        a.id,
                        want.action,
                        want.key.as_deref().unwrap_or("")
                    ),
                );
            }
        }
    }
    for (id, (at, want)) in &x.audit {
        if !by_id.contains_key(id) {
            found.push(
                Problem::Deleted,
                Some(*at),
                format!(
                    "audit line {id} ({} {}, by {}) has no row, but entry #{at} recorded it: it \
                     was deleted outside jobhost",
                    want.action,
                    want.key.as_deref().unwrap_or(""),
                    want.by
                ),
            );
        }
    }
}

/// A digest or "none", for a person.
fn shown(d: Option<&str>) -> String {
    d.map_or_else(|| "none".to_string(), |d| short_digest(d).to_string())
}

/// `sha256:` and the first 12 hex digits.
fn short_digest(d: &str) -> &str {
    d.get(..19).unwrap_or(d)
}

/// A text in backquotes (escaped for a terminal), or "none".
fn quoted(t: Option<&str>) -> String {
    t.map_or_else(
        || "none".to_string(),
        |t| format!("`{}`", crate::core::text::printable(t)),
    )
}
