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
    stderr: Option<Telling>,
) -> GuestFailure {
    let interrupted = matches!(
        e.downcast_ref::<wasmtime::Trap>(),
        Some(wasmtime::Trap::Interrupt)
    );
    if let Some(message) = stderr.as_ref().and_then(Telling::uncaught)
        && !memory_hit
        && !interrupted
    {
        return GuestFailure {
            kind: ErrorKind::GuestTrap,
            message,
            retryable: false,
        };
    }
    let hint = stderr
        .map(|l| format!("; guest stderr: {}", cap_error(&l.text())))
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

/// The most telling line of the guest's stderr: an uncaught Python
/// exception (its type, message and innermost frame, from the traceback
/// componentize-py prints), else a Rust panic's location and message, else
/// the last line that is not a hint about backtraces.
pub fn panic_message(stderr: &str) -> Option<String> {
    telling(stderr).map(|t| t.text())
}

/// The most telling part of the guest's stderr, as [`panic_message`] words
/// it, and whether it is componentize-py's report of an uncaught Python
/// exception (which no text the guest prints can pass for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Telling {
    /// An uncaught Python exception: its type, message and last frame.
    PythonException(String),
    /// An uncaught JavaScript error: its name, message and innermost
    /// function.
    JsError(String),
    /// A panic's message or the last line.
    Line(String),
}

impl Telling {
    /// The failure's message when the report's language runtime says an
    /// error went uncaught (not retried: a bug in the report).
    fn uncaught(&self) -> Option<String> {
        match self {
            Telling::PythonException(e) => Some(format!(
                "the report raised an uncaught Python exception: {}; its traceback is on stderr",
                cap_error(e)
            )),
            Telling::JsError(e) => Some(format!(
                "the report threw an uncaught JavaScript error: {}; its stack is on stderr",
                cap_error(e)
            )),
            Telling::Line(_) => None,
        }
    }

    /// As [`panic_message`] says it.
    pub fn text(&self) -> String {
        match self {
            Telling::PythonException(e) => format!("{PYTHON_EXCEPTION}{e}"),
            Telling::JsError(e) => format!("{JS_ERROR}{e}"),
            Telling::Line(l) => l.clone(),
        }
    }
}

/// See [`Telling`].
pub fn telling(stderr: &str) -> Option<Telling> {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    if let Some(exception) = python_exception(&lines) {
        return Some(Telling::PythonException(exception));
    }
    if let Some(error) = js_error(&lines) {
        return Some(Telling::JsError(error));
    }
    let lines: Vec<&str> = lines.iter().map(|l| l.trim()).collect();
    if let Some(i) = lines.iter().rposition(|l| l.contains("panicked at")) {
        let message = lines.get(i + 1).filter(|l| !l.starts_with("note:"));
        return Some(Telling::Line(match message {
            Some(m) => format!("{} {m}", lines[i]),
            None => lines[i].to_string(),
        }));
    }
    lines
        .iter()
        .rev()
        .find(|l| !l.starts_with("note:"))
        .map(|l| Telling::Line(l.to_string()))
}

/// The prefix [`panic_message`] gives an uncaught Python exception.
pub const PYTHON_EXCEPTION: &str = "uncaught Python exception ";

/// The prefix [`panic_message`] gives an uncaught JavaScript error.
pub const JS_ERROR: &str = "uncaught JavaScript error ";

/// What the JavaScript SDK prints of an error a report's `run` threw and
/// nobody caught, before it traps: `Uncaught <name>: <message>`, then the
/// stack, one `function@file:line:column` a line.
const JS_UNCAUGHT: &str = "Uncaught ";

/// What componentize-js's runtime says last when it aborts.
const JS_ABORT: &str = "Redirecting call to abort() to mozalloc_abort";

/// `uncaught JavaScript error TypeError: bad row 7 (in total)` from what
/// the JavaScript SDK printed before the runtime aborted: the last
/// `Uncaught` line before the runtime's abort line, and the first frame of
/// the stack after it. Lines a report printed itself, without that abort
/// after them, are not taken for the cause of a trap.
fn js_error(lines: &[&str]) -> Option<String> {
    let abort = lines.iter().rposition(|l| l.trim() == JS_ABORT)?;
    let start = lines[..abort]
        .iter()
        .rposition(|l| l.starts_with(JS_UNCAUGHT))?;
    let error = lines[start].strip_prefix(JS_UNCAUGHT)?.trim();
    let frame = lines
        .get(start + 1)
        .and_then(|l| l.trim().split_once('@'))
        .map(|(function, _)| function)
        .filter(|f| !f.is_empty() && !f.contains(' '));
    Some(match frame {
        Some(f) => format!("{error} (in {f})"),
        None => error.to_string(),
    })
}

/// What componentize-py's runtime says, right after printing the traceback,
/// when a Python export raised an exception nobody caught.
const UNCAUGHT: &str = "Python function threw an unexpected exception";

/// `uncaught Python exception ValueError: bad row 7 (at app.py, line 12, in
/// total)` from the traceback componentize-py printed just before its
/// "unexpected exception" panic: the traceback's last frame, and the
/// unindented lines after the frames (the exception's type and message,
/// which may span lines). A traceback the report printed itself, without
/// that panic after it, is not taken for the cause of a trap.
fn python_exception(lines: &[&str]) -> Option<String> {
    let panic = lines.iter().rposition(|l| l.trim() == UNCAUGHT)?;
    // The runtime's panic takes two lines: `thread '…' panicked at …:` and
    // the message.
    let end = panic
        .checked_sub(1)
        .filter(|&i| lines[i].contains("panicked at"))
        .unwrap_or(panic);
    let start = lines[..end]
        .iter()
        .rposition(|l| l.trim() == "Traceback (most recent call last):")?;
    let mut frame = None;
    let mut exception: Vec<&str> = Vec::new();
    for line in &lines[start + 1..end] {
        if line.starts_with(' ') && exception.is_empty() {
            if let Some(f) = line.trim().strip_prefix("File ") {
                frame = Some(f);
            }
            continue;
        }
        exception.push(line.trim());
    }
    if exception.is_empty() {
        return None;
    }
    let text = exception.join(" ");
    let at = frame.map(|f| {
        // `"/0/app.py", line 12, in total`: componentize-py mounts the
        // app's folders as /0, /1, ...; the file's own name says enough.
        let f = f.trim_start_matches('"');
        let (file, tail) = f.split_once('"').unwrap_or((f, ""));
        let file = file.rsplit('/').next().unwrap_or(file);
        format!(" (at {file}{tail})")
    });
    Some(format!("{text}{}", at.unwrap_or_default()))
}

/// The guest's stderr as a person should read it: without the lines
/// componentize-py's runtime prints after the traceback of an uncaught
/// Python exception (`thread '<unnamed>' panicked at runtime/src/lib.rs:…:`,
/// `Python function threw an unexpected exception` and the hint about
/// `RUST_BACKTRACE`), which say nothing the traceback and the host's own
/// line do not. Only those lines go, and only after a traceback: a Rust
/// report's panic, or any other line, is kept as written.
pub fn without_runtime_panic(stderr: &str) -> std::borrow::Cow<'_, str> {
    let lines: Vec<&str> = stderr.split_inclusive('\n').collect();
    let mut drop = vec![false; lines.len()];
    let mut traceback = false;
    for (i, line) in lines.iter().enumerate() {
        let line = line.trim_end();
        if line == "Traceback (most recent call last):" {
            traceback = true;
        }
        if !traceback || line.trim() != UNCAUGHT {
            continue;
        }
        let Some(head) = i.checked_sub(1) else {
            continue;
        };
        let head_line = lines[head].trim_end();
        if !(head_line.starts_with("thread '") && head_line.contains("panicked at ")) {
            continue;
        }
        drop[head] = true;
        drop[i] = true;
        if let Some(note) = lines.get(i + 1)
            && note.starts_with("note: run with `RUST_BACKTRACE=1`")
        {
            drop[i + 1] = true;
        }
        traceback = false;
    }
    drop_js_runtime_lines(&lines, &mut drop);
    if !drop.contains(&true) {
        return std::borrow::Cow::Borrowed(stderr);
    }
    std::borrow::Cow::Owned(
        lines
            .iter()
            .zip(&drop)
            .filter(|(_, d)| !**d)
            .map(|(l, _)| *l)
            .collect(),
    )
}

/// Marks, after the JavaScript SDK's `Uncaught` block, the lines
/// componentize-js's runtime prints as it turns the error into a trap (its
/// complaint that the error is no `run-error`, that complaint's stack, and
/// the abort line): they say nothing the SDK's block and the host's own
/// line do not.
fn drop_js_runtime_lines(lines: &[&str], drop: &mut [bool]) {
    let Some(abort) = lines.iter().rposition(|l| l.trim_end() == JS_ABORT) else {
        return;
    };
    let Some(uncaught) = lines[..abort]
        .iter()
        .rposition(|l| l.starts_with(JS_UNCAUGHT))
    else {
        return;
    };
    let Some(complaint) = lines[uncaught..abort]
        .iter()
        .position(|l| l.starts_with("invalid variant tag value `undefined` (received "))
    else {
        return;
    };
    for d in &mut drop[uncaught + complaint..=abort] {
        *d = true;
    }
}

/// `s` with every run of whitespace (line breaks included) made one space.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Limits that no trap below reaches.
    fn limits() -> GuestLimits {
        GuestLimits {
            memory_bytes: 64 << 20,
            timeout: std::time::Duration::from_secs(10),
            output_bytes: 1 << 16,
            report_bytes: 1 << 16,
            journal_bytes: 1 << 20,
        }
    }

    #[test]
    fn a_rust_panic_message_is_picked_from_guest_stderr() {
        let stderr = "thread '<unnamed>' panicked at src/lib.rs:3:5:\nboom\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            panic_message(stderr).as_deref(),
            Some("thread '<unnamed>' panicked at src/lib.rs:3:5: boom")
        );
    }

    #[test]
    fn an_uncaught_python_exception_is_named_by_type_message_and_frame() {
        let stderr = "Traceback (most recent call last):\n  File \"/0/app.py\", line 8, in run\n    inner(7)\n  File \"/0/app.py\", line 7, in inner\nValueError: bad row 7: amount is negative\nthread '<unnamed>' (1) panicked at runtime/src/lib.rs:1293:29:\nPython function threw an unexpected exception\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            panic_message(stderr).as_deref(),
            Some(
                "uncaught Python exception ValueError: bad row 7: amount is negative (at app.py, line 7, in inner)"
            )
        );
    }

    #[test]
    fn a_chained_python_exception_names_the_last_one() {
        let stderr = "Traceback (most recent call last):\n  File \"/0/app.py\", line 3, in run\nKeyError: 'amount'\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File \"/0/app.py\", line 5, in run\nRuntimeError: no amount\nthread '<unnamed>' (1) panicked at runtime/src/lib.rs:1293:29:\nPython function threw an unexpected exception\n";
        assert_eq!(
            panic_message(stderr).as_deref(),
            Some("uncaught Python exception RuntimeError: no amount (at app.py, line 5, in run)")
        );
    }

    #[test]
    fn a_traceback_the_report_printed_itself_is_not_the_cause_of_a_trap() {
        let stderr = "Traceback (most recent call last):\n  File \"/0/app.py\", line 3, in run\nKeyError: 'amount'\nhandled, going on\nthread '<unnamed>' panicked at src/lib.rs:9:1:\nout of bounds\n";
        assert_eq!(
            panic_message(stderr).as_deref(),
            Some("thread '<unnamed>' panicked at src/lib.rs:9:1: out of bounds")
        );
    }

    #[test]
    fn the_runtime_panic_after_a_python_traceback_is_not_shown() {
        let stderr = "before\nTraceback (most recent call last):\n  File \"/0/app.py\", line 2, in run\nKeyError: 'amount'\nthread '<unnamed>' (1) panicked at runtime/src/lib.rs:1293:29:\nPython function threw an unexpected exception\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            without_runtime_panic(stderr),
            "before\nTraceback (most recent call last):\n  File \"/0/app.py\", line 2, in run\nKeyError: 'amount'\n"
        );
    }

    #[test]
    fn a_rust_panic_and_a_lone_runtime_message_are_shown_as_written() {
        for stderr in [
            "thread '<unnamed>' panicked at src/lib.rs:3:5:\nboom\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
            // The words without a traceback before them: not the runtime's.
            "thread '<unnamed>' panicked at src/lib.rs:3:5:\nPython function threw an unexpected exception\n",
            // A traceback the report printed, then a Rust panic of its own.
            "Traceback (most recent call last):\nKeyError: 'x'\nthread '<unnamed>' panicked at src/lib.rs:9:1:\nout of bounds\n",
        ] {
            assert_eq!(without_runtime_panic(stderr), stderr);
        }
    }

    const JS_STDERR: &str = "Uncaught TypeError: bad row 7: amount is negative\ninner@app.js:693:9\nrun@app.js:744:38\nexport_run@/tmp/x/sources/initializer.js:820:29\ninvalid variant tag value `undefined` (received `TypeError: bad row 7: amount is negative`) specified for `RunError`\nStack:\n  export_run@/tmp/x/sources/initializer.js:924:17\nRedirecting call to abort() to mozalloc_abort\n";

    #[test]
    fn an_uncaught_javascript_error_is_named_by_name_message_and_function() {
        assert_eq!(
            panic_message(JS_STDERR).as_deref(),
            Some("uncaught JavaScript error TypeError: bad row 7: amount is negative (in inner)")
        );
        // A line the report printed itself is no uncaught error.
        assert_eq!(
            panic_message("Uncaught TypeError: made up\nthe end\n").as_deref(),
            Some("the end")
        );
        let e = wasmtime::Error::from(wasmtime::Trap::UnreachableCodeReached);
        let f = classify(&e, &limits(), false, telling(JS_STDERR));
        assert_eq!(
            f.message,
            "the report threw an uncaught JavaScript error: TypeError: bad row 7: amount is \
             negative (in inner); its stack is on stderr"
        );
        assert!(!f.retryable);
    }

    #[test]
    fn the_runtime_lines_after_a_javascript_error_are_not_shown() {
        assert_eq!(
            without_runtime_panic(JS_STDERR),
            "Uncaught TypeError: bad row 7: amount is negative\ninner@app.js:693:9\nrun@app.js:744:38\nexport_run@/tmp/x/sources/initializer.js:820:29\n"
        );
        let own = "Uncaught nothing\nRedirecting call to abort() to mozalloc_abort\n";
        assert_eq!(without_runtime_panic(own), own);
    }

    #[test]
    fn a_trap_with_a_python_exception_reads_as_the_exception() {
        let stderr = telling(
            "Traceback (most recent call last):\n  File \"/0/app.py\", line 2, in run\nZeroDivisionError: division by zero\nthread '<unnamed>' (1) panicked at runtime/src/lib.rs:1293:29:\nPython function threw an unexpected exception\n",
        );
        let e = wasmtime::Error::from(wasmtime::Trap::UnreachableCodeReached);
        let f = classify(&e, &limits(), false, stderr);
        assert_eq!(
            f.message,
            "the report raised an uncaught Python exception: ZeroDivisionError: division by zero \
             (at app.py, line 2, in run); its traceback is on stderr"
        );
        assert!(!f.retryable);
    }
}
