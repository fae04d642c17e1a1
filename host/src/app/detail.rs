//! What `history` shows of runs beyond the table: one run in detail
//! (`history KEY`: every revision and attempt, each message, the digest,
//! the journal and the component) and the audit lines (`history --all`),
//! as text or JSON. Everything from a guest, a destination or the store
//! is escaped before it reaches a terminal.

use std::io::Write;

use crate::core::clock::rfc3339;
use crate::core::text::{json_line, printable};
use crate::core::window::WindowKey;
use crate::effects::digest::cache::DigestCache;
use crate::run::board::replay_command;
use crate::store::{self, AuditLine, Ledger, MessageRecord, RunRecord};

/// Shows run `key` in detail.
///
/// # Errors
///
/// `Error::Input` when the store holds no such window; the store's or the
/// terminal's error.
pub fn show(
    store: &mut dyn Ledger,
    key: &WindowKey,
    cache: Option<&DigestCache>,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let run = store.peek(key)?;
    let revisions = store.revisions(key)?;
    if run.is_none() && revisions.is_empty() {
        return Err(store::no_such_run(key).into());
    }
    let messages = match &run {
        Some(_) => store.message_records(key)?,
        None => Vec::new(),
    };
    let target = crate::core::command::process_target();
    if json {
        let mut v = serde_json::json!({"key": key.as_str()});
        if let Some(r) = &run {
            let mut cur = history_json(r);
            if let Some(d) = digest_view(r, cache) {
                cur["digest"] = d;
            }
            cur["messages"] = messages.iter().map(message_json).collect();
            if r.report.is_some() {
                cur["replay"] = replay_command(key, None, &target).into();
            }
            v["current"] = cur;
        }
        v["earlier_revisions"] = revisions
            .iter()
            .map(|r| {
                serde_json::json!({
                    "revision": r.revision,
                    "state": r.state.as_str(),
                    "attempt": r.attempt,
                    "fence": r.fence.0,
                    "owner": r.owner,
                    "component": r.component,
                    "report": r.report.as_ref().map(|rep| serde_json::json!({"summary": rep.summary, "cursor": rep.cursor})),
                    "error": r.error,
                    "reason": r.reason,
                    "journal_bytes": r.journal_bytes,
                    "created_at": rfc3339(r.created_at),
                    "updated_at": rfc3339(r.updated_at),
                    "pruned_at": r.pruned_at.map(rfc3339),
                    "messages": r.messages.iter().map(message_json).collect::<Vec<_>>(),
                    "replay": replay_command(key, Some(r.revision), &target),
                })
            })
            .collect();
        writeln!(out, "{}", json_line(&v.to_string()))?;
        return Ok(());
    }
    let mut lines: Vec<String> = Vec::new();
    if let Some(r) = &run {
        lines.push(format!(
            "{key}  revision {}  {}  window {} to {} ({})",
            r.revision,
            r.state,
            rfc3339(r.window_start),
            rfc3339(r.window_end),
            r.timezone
        ));
        if let Some(why) = &r.reason {
            lines.push(format!("  rerun because: {why}"));
        }
        lines.push(format!(
            "  attempt {}, fence {}, owner {}{}",
            r.attempt,
            r.fence,
            r.owner,
            if matches!(
                r.state,
                store::RunState::Claimed | store::RunState::Prepared
            ) {
                format!(", lease until {}", rfc3339(r.lease_until))
            } else {
                String::new()
            }
        ));
        lines.push(format!(
            "  claimed {}, last change {}{}",
            rfc3339(r.created_at),
            rfc3339(r.updated_at),
            r.retry_at
                .map(|t| format!(", next attempt at {}", rfc3339(t)))
                .unwrap_or_default()
        ));
        if !r.component.is_empty() {
            lines.push(format!("  component {}", r.component));
        }
        if let Some(rep) = &r.report {
            lines.push(format!("  report: {}", rep.summary));
            if let Some(c) = &rep.cursor {
                lines.push(format!("  cursor: {c}"));
            }
        }
        if let Some(why) = &r.skip_reason {
            lines.push(format!("  skipped: {why}"));
        }
        if let Some(e) = &r.error {
            lines.push(format!("  error: {e}"));
        }
        lines.push(format!(
            "  journal: {}",
            match (r.journal_bytes, r.pruned_at) {
                (_, Some(t)) if r.journal_bytes.is_none() => format!("pruned at {}", rfc3339(t)),
                (Some(n), _) => human_bytes(n),
                (None, _) => "none".to_string(),
            }
        ));
        if let Some(d) = digest_view(r, cache) {
            lines.push(format!(
                "  digest: {}{}",
                d["status"].as_str().unwrap_or_default(),
                d["text"]
                    .as_str()
                    .map(|t| format!(": {t}"))
                    .unwrap_or_default()
            ));
        }
        message_lines(&messages, &mut lines);
        if r.report.is_some() {
            lines.push(format!("  replay: {}", replay_command(key, None, &target)));
        }
    } else {
        lines.push(format!(
            "{key}: no current row (forgotten); its earlier revisions:"
        ));
    }
    for r in revisions.iter().rev() {
        lines.push(format!(
            "  earlier revision {}: {}, attempt {}, fence {}, owner {}, last change {}",
            r.revision,
            r.state,
            r.attempt,
            r.fence,
            r.owner,
            rfc3339(r.updated_at)
        ));
        if let Some(why) = &r.reason {
            lines.push(format!("    rerun because: {why}"));
        }
        if let Some(rep) = &r.report {
            lines.push(format!("    report: {}", rep.summary));
        }
        if let Some(e) = &r.error {
            lines.push(format!("    error: {e}"));
        }
        let mut inner = Vec::new();
        message_lines(&r.messages, &mut inner);
        lines.extend(inner.into_iter().map(|l| format!("  {l}")));
        if r.journal_bytes.is_some() {
            lines.push(format!(
                "    replay: {}",
                replay_command(key, Some(r.revision), &target)
            ));
        }
    }
    for l in lines {
        writeln!(out, "{}", printable(&l))?;
    }
    Ok(())
}

fn message_lines(messages: &[MessageRecord], lines: &mut Vec<String>) {
    if messages.is_empty() {
        return;
    }
    lines.push(format!("  messages ({}):", messages.len()));
    for m in messages {
        lines.push(format!(
            "    #{} to {}: {}{}, {} attempt(s), last {}, key {}, {} ({})",
            m.seq,
            m.destination,
            m.state,
            if m.in_flight {
                " (a send's fate unknown)"
            } else {
                ""
            },
            m.attempts,
            m.last_status.as_deref().unwrap_or("-"),
            m.idempotency_key,
            human_bytes(m.bytes),
            m.content_type
        ));
    }
}

fn message_json(m: &MessageRecord) -> serde_json::Value {
    serde_json::json!({
        "seq": m.seq,
        "destination": m.destination,
        "idempotency_key": m.idempotency_key,
        "content_type": m.content_type,
        "bytes": m.bytes,
        "state": m.state,
        "attempts": m.attempts,
        "last_status": m.last_status,
        "in_flight": m.in_flight,
    })
}

/// Writes the audit lines, newest first.
///
/// # Errors
///
/// The terminal's error.
pub fn audit(lines: &[AuditLine], json: bool, out: &mut dyn Write) -> std::io::Result<()> {
    if json {
        for a in lines {
            let v = serde_json::json!({
                "audit": a.action,
                "at": rfc3339(a.at),
                "job": a.job,
                "key": a.key,
                "old_state": a.old_state,
                "reason": a.reason,
                "detail": a.detail,
                "by": a.by,
            });
            writeln!(out, "{}", json_line(&v.to_string()))?;
        }
        return Ok(());
    }
    if lines.is_empty() {
        return writeln!(
            out,
            "\nno audit lines: nobody has acted on a window on purpose"
        );
    }
    writeln!(out, "\nAUDIT (newest first)")?;
    for a in lines {
        let line = format!(
            "{}  {:<7} {}{}  by {}: {}{}",
            rfc3339(a.at),
            a.action,
            a.key.as_deref().unwrap_or(&a.job),
            a.old_state
                .as_deref()
                .map(|s| format!(" (was {s})"))
                .unwrap_or_default(),
            a.by,
            if a.reason.is_empty() { "-" } else { &a.reason },
            a.detail
                .as_deref()
                .map(|d| format!("; {d}"))
                .unwrap_or_default()
        );
        writeln!(out, "{}", printable(&line))?;
    }
    Ok(())
}

/// A run's digest as `history` shows it: the text when the cache still
/// holds it, or that it is missing (`jobhost digest KEY` makes it again),
/// or why the last attempt failed.
pub fn digest_view(r: &RunRecord, cache: Option<&DigestCache>) -> Option<serde_json::Value> {
    use crate::effects::digest::cache::Lookup;
    let d = r.digest.as_ref()?;
    let mut v = serde_json::json!({
        "model": d.model,
        "sent_at": d.sent_at.map(rfc3339),
    });
    if let Some(e) = &d.error {
        v["error"] = e.as_str().into();
    }
    let found = match (&d.cache_key, cache) {
        (Some(k), Some(c)) => c.get(k, jiff::Timestamp::now(), std::time::Duration::MAX),
        _ => Lookup::Missing,
    };
    match found {
        Lookup::Fresh(entry) | Lookup::Expired(entry) => {
            v["status"] = "cached".into();
            v["text"] = entry.text.into();
            v["created_at"] = rfc3339(entry.created_at).into();
        }
        _ if d.cache_key.is_none() => v["status"] = "failed".into(),
        _ => v["status"] = "missing".into(),
    }
    Some(v)
}

pub fn history_json(r: &RunRecord) -> serde_json::Value {
    serde_json::json!({
        "key": r.key.as_str(),
        "job": r.job,
        "window": {"start": rfc3339(r.window_start), "end": rfc3339(r.window_end), "tz": r.timezone},
        "state": r.state.as_str(),
        "attempt": r.attempt,
        "fence": r.fence.0,
        "owner": r.owner,
        "lease_until": rfc3339(r.lease_until),
        "retry_at": r.retry_at.map(rfc3339),
        "component": r.component,
        "report": r.report.as_ref().map(|rep| serde_json::json!({"summary": rep.summary, "cursor": rep.cursor, "describe": rep.prompt})),
        "journal_bytes": r.journal_bytes,
        "messages": r.messages,
        "delivered": r.delivered,
        // A skipped window's row keeps the scheduler's reason where a run
        // keeps its last error.
        "error": r.error,
        "reason": r.skip_reason,
        "created_at": rfc3339(r.created_at),
        "updated_at": rfc3339(r.updated_at),
        "revision": r.revision,
        "revision_reason": r.reason,
        "pruned_at": r.pruned_at.map(rfc3339),
        // When it ran: its row's last change (finished, failed, claimed);
        // a skipped window did not run.
        "ran_at": if r.state == store::RunState::Skipped { None } else { Some(rfc3339(r.updated_at)) },
    })
}

/// `1536` -> `1.5 KiB`.
pub fn human_bytes(n: u64) -> String {
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KiB", n as f64 / 1024.0),
        _ => format!("{:.1} MiB", n as f64 / 1_048_576.0),
    }
}
