//! Why a run of a component produced no report, in one line for a person
//! and a kind for a monitor: the component's own error, a trap, a limit it
//! ran into (time, memory, report size, journal), or a replay that asked
//! for what its journal does not hold. Text that came from the guest is cut
//! to `text::MAX_ERROR_BYTES`.

use crate::core::error::ErrorKind;
use crate::core::text::cap_error;
use crate::guest::limits::GuestLimits;

/// Why a run produced no report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestFailure {
    /// What kind of failure, as the receipt names it.
    pub kind: ErrorKind,
    /// One line for a person.
    pub message: String,
    /// Whether running again could help.
    pub retryable: bool,
}

/// The error a component's `run` returned (the WIT's `run-error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// The window's data cannot be reported on.
    InvalidData(String),
    /// Reading the source failed.
    SourceFailed(String),
    /// Anything else.
    Other(String),
}

impl From<RunError> for GuestFailure {
    fn from(e: RunError) -> GuestFailure {
        let (what, m, retryable) = match e {
            RunError::InvalidData(m) => ("the report refused the data", m, false),
            RunError::SourceFailed(m) => ("the report could not read its source", m, true),
            RunError::Other(m) => ("the report failed", m, true),
        };
        GuestFailure {
            kind: ErrorKind::GuestError,
            message: format!("{what}: {}", cap_error(&m)),
            retryable,
        }
    }
}

/// A failure of the host's own (a thread it could not start, a journal it
/// could not write), worth trying again.
pub fn host_failure(message: String) -> GuestFailure {
    GuestFailure {
        kind: ErrorKind::Host,
        message,
        retryable: true,
    }
}

/// What a trap or an error of wasmtime's means for the run: the memory
/// limit, the time limit, or a trap, with the guest's last telling line of
/// stderr (a panic's message) when there is one.
pub fn classify(
    e: &wasmtime::Error,
    limits: &GuestLimits,
    memory_hit: bool,
    stderr: Option<String>,
) -> GuestFailure {
    let hint = stderr
        .map(|l| format!("; guest stderr: {}", cap_error(&l)))
        .unwrap_or_default();
    if memory_hit {
        return GuestFailure {
            kind: ErrorKind::GuestMemory,
            message: format!(
                "the guest exceeded its memory limit of {} MiB; raise `limits.memory_mib` if the report needs more",
                limits.memory_bytes >> 20
            ),
            retryable: false,
        };
    }
    match e.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => timeout_failure(limits),
        Some(trap) => GuestFailure {
            kind: ErrorKind::GuestTrap,
            message: format!("the guest trapped: {trap}{hint}"),
            retryable: false,
        },
        None => GuestFailure {
            kind: ErrorKind::GuestTrap,
            message: format!(
                "the guest failed: {}{hint}",
                cap_error(&one_line(&format!("{e:#}")))
            ),
            retryable: false,
        },
    }
}

/// The failure of a run stopped at its time limit.
pub fn timeout_failure(limits: &GuestLimits) -> GuestFailure {
    GuestFailure {
        kind: ErrorKind::GuestTimeout,
        message: format!(
            "the guest exceeded its time limit of {} s and was stopped; raise \
             `limits.timeout_seconds` if the report needs longer",
            limits.timeout.as_secs_f64()
        ),
        retryable: true,
    }
}

/// The failure of a run whose journal reached its limit after `recorded`
/// bytes.
pub fn journal_failure(limits: &GuestLimits, recorded: u64) -> GuestFailure {
    GuestFailure {
        kind: ErrorKind::JournalLimit,
        message: format!(
            "the run's journal reached its limit of {} bytes (`limits.max_journal_bytes`) after \
             {recorded} bytes of answers to the guest's calls; the guest was stopped and nothing \
             was kept; raise the limit if the report reads that much (the next attempt runs \
             under the new one), or have it read its rows once",
            limits.journal_bytes
        ),
        // The data may shrink, or a person raise the limit, before the next
        // attempt: retried, then abandoned after the job's attempts.
        retryable: true,
    }
}

/// The failure of a report over its size limit.
pub fn report_too_large(limits: &GuestLimits, bytes: usize) -> GuestFailure {
    GuestFailure {
        kind: ErrorKind::GuestOutput,
        message: format!(
            "the report is {bytes} bytes, over the limit of {} (`limits.max_report_bytes`); \
             send large outputs as messages",
            limits.report_bytes
        ),
        retryable: false,
    }
}

/// The most telling line of the guest's stderr: a Rust panic's location and
/// message, else the last line that is not a hint about backtraces.
pub fn panic_message(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if let Some(i) = lines.iter().rposition(|l| l.contains("panicked at")) {
        let message = lines.get(i + 1).filter(|l| !l.starts_with("note:"));
        return Some(match message {
            Some(m) => format!("{} {m}", lines[i]),
            None => lines[i].to_string(),
        });
    }
    lines
        .iter()
        .rev()
        .find(|l| !l.starts_with("note:"))
        .map(|l| l.to_string())
}

/// `s` with every run of whitespace (line breaks included) made one space.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rust_panic_message_is_picked_from_guest_stderr() {
        let stderr = "thread '<unnamed>' panicked at src/lib.rs:3:5:\nboom\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            panic_message(stderr).as_deref(),
            Some("thread '<unnamed>' panicked at src/lib.rs:3:5: boom")
        );
    }
}
