//! The guest's diagnostics: `log.emit` calls and whatever it writes to its
//! stdout and stderr. All of it goes to the host's stderr, prefixed so it
//! cannot be mistaken for the host's own messages, and all of it is capped:
//! past the job's limit, lines are counted and dropped, never fatal.

use std::io::Write;

/// The guest's text with control characters escaped, so a guest cannot
/// send terminal escape sequences to whoever reads the host's stderr.
fn printable(line: &str) -> std::borrow::Cow<'_, str> {
    if line.chars().any(|c| c.is_control() && c != '\t') {
        line.chars()
            .map(|c| {
                if c.is_control() && c != '\t' {
                    c.escape_unicode().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect::<String>()
            .into()
    } else {
        line.into()
    }
}

/// A log level from the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Tracing.
    Trace,
    /// Debugging.
    Debug,
    /// Progress.
    Info,
    /// Unexpected, not fatal.
    Warn,
    /// Failure.
    Error,
}

impl LogLevel {
    fn as_str(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

/// Collects the guest's log lines up to a byte budget.
#[derive(Debug)]
pub struct GuestLog {
    job: String,
    budget: usize,
    used: usize,
    emitted: u64,
    dropped: u64,
}

impl GuestLog {
    /// A log for `job` that writes at most `budget` bytes of messages.
    pub fn new(job: &str, budget: usize) -> GuestLog {
        GuestLog {
            job: job.to_string(),
            budget,
            used: 0,
            emitted: 0,
            dropped: 0,
        }
    }

    /// Writes one message to stderr, or counts it as dropped.
    pub fn emit(&mut self, level: LogLevel, message: &str) {
        if self.used + message.len() > self.budget {
            self.dropped += 1;
            return;
        }
        self.used += message.len();
        self.emitted += 1;
        let mut err = std::io::stderr().lock();
        for line in message.lines() {
            let _ = writeln!(
                err,
                "jobhost: guest {} [{}] {line}",
                self.job,
                level.as_str()
            );
        }
    }

    /// Writes captured stdout or stderr of the guest, line by line.
    pub fn emit_stream(&mut self, stream: &str, bytes: &[u8], truncated: u64) {
        let text = String::from_utf8_lossy(bytes);
        let mut err = std::io::stderr().lock();
        for line in text.lines() {
            let _ = writeln!(
                err,
                "jobhost: guest {} [{stream}] {}",
                self.job,
                printable(line)
            );
        }
        if truncated > 0 {
            let _ = writeln!(
                err,
                "jobhost: guest {} wrote {truncated} more bytes to {stream}, dropped (limit `limits.output_bytes`)",
                self.job
            );
        }
    }

    /// Messages written.
    pub fn emitted(&self) -> u64 {
        self.emitted
    }

    /// Messages dropped over the budget.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_escapes_from_the_guest_are_shown_escaped() {
        assert_eq!(printable("plain\ttext"), "plain\ttext");
        assert_eq!(printable("\u{1b}[2Jgone"), "\\u{1b}[2Jgone");
    }
}
