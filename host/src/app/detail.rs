//! How `history` shows runs beyond the table: one run in detail
//! (`history KEY`, the dashboard's [`RunDetail`] as text or as the same
//! JSON) and the audit lines (`history --all`). Everything from a guest, a
//! destination or the store is escaped before it reaches a terminal.

use std::io::Write;

use crate::core::text::printable;
use crate::run::board::{MessageFacts, RevisionFacts, RunDetail};
use crate::store::AuditLine;

/// Writes run `d` in detail as lines of text (its JSON is `d` itself).
///
/// # Errors
///
/// The terminal's error.
pub fn show(d: &RunDetail, out: &mut dyn Write) -> std::io::Result<()> {
    let mut lines: Vec<String> = Vec::new();
    match (&d.current, &d.window) {
        (Some(r), Some(w)) => {
            lines.push(format!(
                "{}  revision {}  {}  window {} to {} ({})",
                d.key,
                r.revision,
                r.state,
                w.start,
                w.end,
                d.tz.as_deref().unwrap_or_default()
            ));
            if let Some(why) = &r.revision_reason {
                lines.push(format!("  rerun because: {why}"));
            }
            lines.push(format!(
                "  attempt {}, fence {}, owner {}{}",
                r.attempt,
                r.fence,
                r.owner,
                d.lease_until
                    .as_ref()
                    .map(|t| format!(", lease until {t}"))
                    .unwrap_or_default()
            ));
            lines.push(format!(
                "  claimed {}, last change {}{}",
                r.created_at,
                r.updated_at,
                d.retry_at
                    .as_ref()
                    .map(|t| format!(", next attempt at {t}"))
                    .unwrap_or_default()
            ));
            if !r.component.is_empty() {
                lines.push(format!("  component {}", r.component));
            }
            if let Some(summary) = &r.summary {
                lines.push(format!("  report: {summary}"));
            }
            if let Some(c) = &r.cursor {
                lines.push(format!("  cursor: {c}"));
            }
            if let Some(why) = &r.skip_reason {
                let what = if r.state == crate::store::RunState::Waiting {
                    "waiting for"
                } else {
                    "skipped"
                };
                lines.push(format!("  {what}: {why}"));
            }
            for why in &d.stale {
                lines.push(format!("  STALE: {why}"));
            }
            if let Some(sh) = &d.shadow {
                lines.push(format!(
                    "  shadow {} {}{}",
                    sh.component,
                    sh.verdict,
                    sh.error
                        .as_deref()
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default()
                ));
                for diff in &sh.differences {
                    lines.push(format!("    {diff}"));
                }
            }
            for u in &d.used {
                lines.push(format!(
                    "  used {} revision {} (report {})",
                    u.key, u.revision, u.report_digest
                ));
            }
            if let Some(e) = &r.error {
                lines.push(format!("  error: {e}"));
            }
            lines.push(format!(
                "  journal: {}",
                match (r.journal_bytes, &r.pruned_at) {
                    (Some(n), _) => human_bytes(n),
                    (None, Some(t)) => format!("pruned at {t}"),
                    (None, None) => "none".to_string(),
                }
            ));
            if let Some(g) = &d.digest {
                lines.push(format!(
                    "  digest: {}{}",
                    g.status,
                    g.text
                        .as_ref()
                        .map(|t| format!(": {t}"))
                        .unwrap_or_default()
                ));
            }
            message_lines(&r.messages, "", &mut lines);
            if let Some(replay) = &d.replay {
                lines.push(format!("  replay: {replay}"));
            }
        }
        _ => lines.push(format!(
            "{}: no current row (forgotten); its earlier revisions:",
            d.key
        )),
    }
    for r in d.earlier.iter().rev() {
        earlier_lines(r, &mut lines);
    }
    for l in lines {
        writeln!(out, "{}", printable(&l))?;
    }
    Ok(())
}

fn earlier_lines(r: &RevisionFacts, lines: &mut Vec<String>) {
    lines.push(format!(
        "  earlier revision {}: {}, attempt {}, fence {}, owner {}, last change {}",
        r.revision, r.state, r.attempt, r.fence, r.owner, r.updated_at
    ));
    if let Some(why) = &r.revision_reason {
        lines.push(format!("    rerun because: {why}"));
    }
    if let Some(summary) = &r.summary {
        lines.push(format!("    report: {summary}"));
    }
    if let Some(e) = &r.error {
        lines.push(format!("    error: {e}"));
    }
    message_lines(&r.messages, "  ", lines);
    if let Some(replay) = &r.replay {
        lines.push(format!("    replay: {replay}"));
    }
}

fn message_lines(messages: &[MessageFacts], indent: &str, lines: &mut Vec<String>) {
    if messages.is_empty() {
        return;
    }
    lines.push(format!("{indent}  messages ({}):", messages.len()));
    for m in messages {
        lines.push(format!(
            "{indent}    #{} to {}: {}{}, {} attempt(s), last {}, key {}, {} ({})",
            m.seq,
            m.destination,
            m.status,
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

/// Writes the audit lines, newest first, as text (their JSON is
/// `run::outputs::AuditEntry`).
///
/// # Errors
///
/// The terminal's error.
pub fn audit(lines: &[AuditLine], out: &mut dyn Write) -> std::io::Result<()> {
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
            crate::core::clock::rfc3339(a.at),
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

/// `1536` -> `1.5 KiB`.
pub fn human_bytes(n: u64) -> String {
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KiB", n as f64 / 1024.0),
        _ => format!("{:.1} MiB", n as f64 / 1_048_576.0),
    }
}
