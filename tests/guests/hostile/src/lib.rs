//! A test-only guest that attacks the host through what it hands over rather
//! than through the sandbox's walls: oversized names, bodies, messages and
//! errors, floods of calls whose answers the host records, and text made to
//! drive a terminal or forge the host's own lines. Its behaviour is chosen by
//! the job name (`ctx.window.job`) and sized by the job's `[params]`
//! (`bytes`, `count`), so the tests choose the scale without a rebuild. Each
//! mode says in its report what the host answered, where it gets an answer.
//! It is never shipped or run outside the tests.

use std::hint::black_box;

wit_bindgen::generate!({ world: "describing-reporter", path: "../../../wit" });

use jobhost::report::log::{self, Level};
use jobhost::report::outbox::{self, SendError};
use jobhost::report::source;

struct Hostile;

/// `len` bytes of letters that do not compress: an xorshift stream from
/// `seed`, so a run is the same every time.
fn noise(len: usize, seed: u64) -> String {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect()
}

/// A parameter of the job as a number, or `default`.
fn param(ctx: &RunContext, name: &str, default: usize) -> usize {
    ctx.params
        .iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(default)
}

/// Text that would drive a terminal or forge a line of the host's own, if
/// it reached one as it is.
const FORGERY: &str = "evil\u{1b}]0;pwned\u{7}\u{1b}[2J\r\njobhost: error: forged by the guest\u{8}\u{7f}\u{9b}31m\u{0}\u{2028}\u{202e}\u{200f}\u{61c}end";

/// Text made to run script in a page that shows it unescaped: a script
/// element, an attribute break-out with an event handler, markup, and a
/// terminal escape.
const HTML: &str = "<script>window.__pwned=1</script>\"><img src=x onerror=\"window.__pwned=2\">\u{1b}[31mred\u{1b}[0m</pre><b>bold</b>";

fn send_error(e: &SendError) -> String {
    match e {
        SendError::UnknownDestination(name) => {
            format!("unknown-destination ({} bytes)", name.len())
        }
        SendError::TooLarge(limit) => format!("too-large {limit}"),
        SendError::TooManyMessages(max) => format!("too-many-messages {max}"),
        SendError::InvalidContentType(t) => format!("invalid-content-type ({} bytes)", t.len()),
    }
}

impl Guest for Hostile {
    fn run(ctx: RunContext) -> Result<Report, RunError> {
        let bytes = param(&ctx, "bytes", 1 << 20);
        let count = param(&ctx, "count", 200);
        let first = ctx.destinations.first().cloned().unwrap_or_default();
        let summary = match ctx.window.job.as_str() {
            // Sends to a destination nobody declared, under a huge name.
            "journal-flood" => {
                let mut answers = Vec::new();
                for i in 0..count {
                    // A new name each time, that does not compress.
                    let name = black_box(noise(bytes, i as u64));
                    if let Err(e) = outbox::send(&name, b"x", "text/plain") {
                        answers.push(send_error(&e));
                    }
                }
                answers.dedup();
                answers.join("; ")
            }
            // A declared destination, under a huge content type.
            "content-type-flood" => {
                let ct = black_box(format!("text/{}", "p".repeat(bytes)));
                let mut answers = Vec::new();
                for _ in 0..count {
                    if let Err(e) = outbox::send(&first, b"x", &ct) {
                        answers.push(send_error(&e));
                    }
                }
                answers.dedup();
                answers.join("; ")
            }
            // Many calls whose answers the host records, to fill its journal.
            "log-call-flood" => {
                for _ in 0..count {
                    log::emit(Level::Trace, "");
                }
                format!("logged {count} times")
            }
            "read-after-end" => {
                let cursor =
                    source::open().map_err(|e| RunError::SourceFailed(format!("{e:?}")))?;
                while let Ok(Some(_)) = cursor.next_batch(8192) {}
                let mut errors = 0u64;
                for _ in 0..count {
                    if cursor.next_batch(8192).is_err() {
                        errors += 1;
                    }
                }
                format!("{errors} errors after the end")
            }
            "reopen-flood" => {
                let mut rows = 0u64;
                for _ in 0..count {
                    let cursor =
                        source::open().map_err(|e| RunError::SourceFailed(format!("{e:?}")))?;
                    let _ = cursor.columns();
                    while let Ok(Some(b)) = cursor.next_batch(8192) {
                        rows += u64::from(b.rows);
                    }
                }
                format!("read {rows} rows")
            }
            // One call carrying more than wasmtime copies by default.
            "huge-log" => {
                let message = black_box("l".repeat(bytes));
                log::emit(Level::Info, &message);
                "logged".to_string()
            }
            "huge-send" => {
                let body = black_box(vec![b'b'; bytes]);
                match outbox::send(&first, &body, "application/octet-stream") {
                    Ok(n) => format!("staged message {n}"),
                    Err(e) => send_error(&e),
                }
            }
            "newline-log" => {
                log::emit(Level::Info, &"\n".repeat(bytes));
                "logged".to_string()
            }
            "huge-error" => return Err(RunError::Other(black_box("e".repeat(bytes)))),
            "control-log" => {
                log::emit(Level::Warn, FORGERY);
                println!("{FORGERY}");
                eprintln!("{FORGERY}");
                "logged".to_string()
            }
            "control-error" => return Err(RunError::Other(FORGERY.to_string())),
            "control-panic" => panic!("{FORGERY}"),
            "control-report" => FORGERY.to_string(),
            "html-report" => {
                log::emit(Level::Warn, HTML);
                HTML.to_string()
            }
            "html-error" => return Err(RunError::Other(HTML.to_string())),
            "describe-flood" => "ran; describe floods".to_string(),
            other => return Err(RunError::Other(format!("unknown hostile mode `{other}`"))),
        };
        Ok(Report {
            summary,
            cursor: None,
        })
    }

    fn describe(ctx: RunContext, _report: Report) -> Option<String> {
        match ctx.window.job.as_str() {
            "control-report" => Some(FORGERY.to_string()),
            "describe-flood" => {
                for _ in 0..param(&ctx, "count", 1) {
                    log::emit(Level::Trace, "");
                }
                Some("described".to_string())
            }
            _ => None,
        }
    }
}

export!(Hostile);
