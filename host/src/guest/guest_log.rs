//! The guest's diagnostics: `log.emit` calls and whatever it writes to its
//! stdout and stderr. All of it goes to the host's stderr, one prefixed line
//! per line of text, escaped (see `text::printable`), so that it can neither
//! be mistaken for the host's own messages nor drive the terminal. All of it
//! is capped by what it prints, prefixes and escapes included: past the
//! job's limit, messages are counted and dropped, never fatal.

use crate::core::text::printable;

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

/// Collects the guest's log lines up to a byte budget of printed text.
#[derive(Debug)]
pub struct GuestLog {
    job: String,
    budget: usize,
    used: usize,
    emitted: u64,
    dropped: u64,
}

/// `text`'s lines as printed under `prefix`, or `None` when that would take
/// more than `room` bytes. Printed text is never shorter than the text
/// itself, so text longer than `room` is refused before anything is escaped.
fn render(prefix: &str, text: &str, room: usize) -> Option<String> {
    if text.len() > room {
        return None;
    }
    let mut printed = String::new();
    for line in text.lines() {
        printed.push_str(prefix);
        printed.push_str(&printable(line));
        printed.push('\n');
        if printed.len() > room {
            return None;
        }
    }
    Some(printed)
}

impl GuestLog {
    /// A log for `job` that prints at most `budget` bytes of messages.
    pub fn new(job: &str, budget: usize) -> GuestLog {
        GuestLog {
            job: job.to_string(),
            budget,
            used: 0,
            emitted: 0,
            dropped: 0,
        }
    }

    /// Writes one message to stderr (each of its lines prefixed), or counts
    /// it as dropped when what it prints would pass the budget.
    pub fn emit(&mut self, level: LogLevel, message: &str) {
        let prefix = format!("jobhost: guest {} [{}] ", self.job, level.as_str());
        let room = self.budget.saturating_sub(self.used);
        let Some(printed) = render(&prefix, message, room) else {
            self.dropped += 1;
            return;
        };
        self.used += printed.len();
        self.emitted += 1;
        crate::core::spool::to_stderr(printed.as_bytes());
    }

    /// How many bytes a message may still print.
    pub fn room(&self) -> usize {
        self.budget.saturating_sub(self.used)
    }

    /// Counts a message as dropped unread: it is longer than what is left
    /// of the budget.
    pub fn drop_one(&mut self) {
        self.dropped += 1;
    }

    /// Writes captured stdout or stderr of the guest, line by line, until
    /// what it prints reaches `budget` bytes; says how much was not shown
    /// (`truncated` bytes were not even kept).
    pub fn emit_stream(&mut self, stream: &str, bytes: &[u8], truncated: u64, budget: usize) {
        let text = String::from_utf8_lossy(bytes);
        let prefix = format!("jobhost: guest {} [{stream}] ", self.job);
        let mut printed = String::new();
        let mut hidden = 0usize;
        for line in text.lines() {
            if hidden > 0 {
                hidden += line.len() + 1;
                continue;
            }
            match render(&prefix, line, budget.saturating_sub(printed.len())) {
                Some(p) => printed.push_str(&p),
                None => hidden += line.len() + 1,
            }
        }
        let dropped = truncated + hidden as u64;
        if dropped > 0 {
            printed.push_str(&format!(
                "jobhost: guest {} wrote {dropped} more bytes to {stream}, dropped (limit `limits.output_bytes`)\n",
                self.job
            ));
        }
        // A line at a time: a spooled stderr that is behind drops lines,
        // not a run's whole output.
        for line in printed.split_inclusive('\n') {
            crate::core::spool::to_stderr(line.as_bytes());
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
    fn each_line_is_prefixed_and_escaped() {
        assert_eq!(
            render("p ", "one\n\u{1b}[2Jtwo\r\nthree", 1000).as_deref(),
            Some("p one\np \\u{1b}[2Jtwo\np three\n")
        );
    }

    #[test]
    fn the_budget_counts_what_is_printed_not_the_message() {
        // 100 newlines are 100 bytes of message, but 100 prefixed lines.
        let newlines = "\n".repeat(100);
        assert!(render("jobhost: guest j [info] ", &newlines, 1000).is_none());
        let mut log = GuestLog::new("j", 1000);
        log.emit(LogLevel::Info, &newlines);
        assert_eq!((log.emitted(), log.dropped()), (0, 1));
        // A message longer than the budget is refused before it is read.
        log.emit(LogLevel::Info, &"x".repeat(2000));
        assert_eq!(log.dropped(), 2);
    }
}
