//! Text that came from outside the host (a guest, a destination, a model, a
//! store row someone edited) as a person is shown it and as the host keeps
//! it: [`printable`] is the one escaping function every terminal line,
//! table cell and ping body goes through, [`cap`] the one way text is cut
//! to a size, and [`Given`] how text a guest handed over is kept when it is
//! longer than anything the host accepts. JSON output keeps the exact text
//! instead: JSON's own escaping is enough there.

use std::borrow::Cow;

/// The most bytes of an error message the host keeps from a guest (a
/// `run-error`'s text, the excerpt of its stderr after a panic): in the
/// receipt, on stderr and in the store. Longer text is cut at a character
/// boundary, and the cut is said.
pub const MAX_ERROR_BYTES: usize = 8 << 10;

/// Whether `c` must not reach a terminal as it is: C0 and C1 control
/// characters and DEL (escape sequences, carriage returns, backspaces, line
/// breaks, bells), the Unicode line and paragraph separators, and the
/// bidirectional controls that make a terminal show text in another order
/// than it was written.
fn unsafe_for_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}'
                | '\u{2029}'
                | '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// `text` on one line that a terminal shows as it is: every character that
/// could move the cursor, change the terminal's state, break the line or
/// reorder what is shown is written as `\u{..}` (a tab as `\u{9}`, a line
/// break as `\u{a}`). Text without such characters is returned unchanged.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_for_terminal) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_for_terminal(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A line of JSON with every character [`printable`] would escape written
/// as a JSON `\uXXXX` escape: the same JSON value, exactly, but no raw
/// control character, line separator or bidirectional control reaches a
/// terminal or a log viewer (JSON itself escapes only the C0 controls, and
/// such characters can stand only inside strings).
pub fn json_line(line: &str) -> Cow<'_, str> {
    if !line.chars().any(unsafe_for_terminal) {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len() + 16);
    for c in line.chars() {
        if unsafe_for_terminal(c) {
            // Every such character is in the Basic Multilingual Plane.
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Writes one line of the host's own to stderr, `jobhost: <what>: <text>`,
/// the text escaped with [`printable`]: it may quote a guest, a destination,
/// a model or a store, and must stay one line that cannot drive the
/// terminal. The line goes out in one write, so lines of processes that
/// share a stderr do not interleave (on a pipe, up to the 4 KiB it writes
/// whole); a stderr that cannot be written (a reader gone) is not an error
/// of the command, which still prints its receipt.
pub fn say(what: &str, text: &str) {
    let line = format!("jobhost: {what}: {}\n", printable(text));
    // The daemon and the dashboard never wait on a stderr nobody reads.
    crate::core::spool::to_stderr(line.as_bytes());
}

/// `text` cut to at most `max` bytes at a character boundary, with what was
/// cut said at the end (`… (cut: 52428800 bytes in all)`); unchanged when it
/// fits.
pub fn cap(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    Cow::Owned(format!(
        "{}… (cut: {} bytes in all)",
        head(text, max),
        text.len()
    ))
}

/// A guest's error text as the host keeps it: at most
/// [`MAX_ERROR_BYTES`], the cut said.
pub fn cap_error(text: &str) -> Cow<'_, str> {
    cap(text, MAX_ERROR_BYTES)
}

/// Text a guest handed the host, as the journal keeps it: whole when it is
/// short, otherwise its first bytes and its length, so that a guest cannot
/// make the journal (or the host's memory) hold what the host refused.
/// (No hash of the rest: work done inside a host call is not stopped by
/// the guest's deadline, so it stays as small as reading the text once.)
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Given {
    /// The whole text.
    Whole(String),
    /// Text longer than anything the host accepts there.
    Cut {
        /// Its first bytes (at most the bound, at a character boundary).
        head: String,
        /// Its length in bytes.
        bytes: u64,
    },
}

impl Given {
    /// `text` kept whole when it has at most `keep` bytes.
    pub fn new(text: &str, keep: usize) -> Given {
        if text.len() <= keep {
            return Given::Whole(text.to_string());
        }
        Given::Cut {
            head: head(text, keep).to_string(),
            bytes: text.len() as u64,
        }
    }

    /// The text as the host may echo it: whole, or its head and `…`.
    pub fn shown(&self) -> String {
        match self {
            Given::Whole(t) => t.clone(),
            Given::Cut { head, .. } => format!("{head}…"),
        }
    }
}

/// The first `max` bytes of `text`, cut back to a character boundary.
pub fn head(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

/// `text` as the host echoes it back to a guest: whole when it has at most
/// `keep` bytes, else its head and `…`.
pub fn echoed(text: &str, keep: usize) -> String {
    if text.len() <= keep {
        text.to_string()
    } else {
        format!("{}…", head(text, keep))
    }
}

/// Whether `s` is a SHA-256 digest in hex: exactly 64 lowercase hex
/// digits (safe as a file name).
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A duration as its two largest units: `45s`, `18h58m`, `2d3h`.
pub fn human_duration(d: jiff::SignedDuration) -> String {
    let secs = u64::try_from(d.as_secs()).unwrap_or(0);
    let units = [
        (secs / 86_400, "d"),
        (secs / 3600 % 24, "h"),
        (secs / 60 % 60, "m"),
        (secs % 60, "s"),
    ];
    let Some(top) = units.iter().position(|(n, _)| *n > 0) else {
        return "0s".to_string();
    };
    units[top..]
        .iter()
        .take(2)
        .filter(|(n, _)| *n > 0)
        .map(|(n, u)| format!("{n}{u}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_reads_as_its_two_largest_units() {
        let d = |s: i64| human_duration(jiff::SignedDuration::from_secs(s));
        assert_eq!(d(45), "45s");
        assert_eq!(d(18 * 3600 + 58 * 60 + 30), "18h58m");
        assert_eq!(d(2 * 86_400 + 3 * 3600 + 59), "2d3h");
        assert_eq!(d(3600), "1h");
        assert_eq!(d(90), "1m30s");
        assert_eq!(d(0), "0s");
        assert_eq!(d(-5), "0s");
    }

    #[test]
    fn plain_text_passes_through_unchanged_and_unallocated() {
        assert!(matches!(
            printable("Sales digest: 241 orders, €15631.97"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn every_character_that_could_drive_a_terminal_is_escaped() {
        let hostile =
            "a\u{1b}]0;title\u{7}b\r\nc\u{8}\u{7f}\u{9b}2J\u{0}\u{2028}\u{2029}\u{202e}d\te";
        let shown = printable(hostile);
        assert_eq!(
            shown,
            "a\\u{1b}]0;title\\u{7}b\\u{d}\\u{a}c\\u{8}\\u{7f}\\u{9b}2J\\u{0}\\u{2028}\\u{2029}\\u{202e}d\\u{9}e"
        );
        assert!(
            !shown.chars().any(unsafe_for_terminal),
            "nothing unsafe is left"
        );
    }

    #[test]
    fn json_lines_escape_what_json_leaves_raw_and_mean_the_same() {
        let text = "del\u{7f} csi\u{9b} ls\u{2028} rlo\u{202e} esc\u{1b}";
        let line = serde_json::json!({ "message": text }).to_string();
        assert!(line.contains('\u{9b}'), "serde_json leaves C1 raw: {line}");
        let safe = json_line(&line);
        assert!(!safe.chars().any(unsafe_for_terminal), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back["message"], text, "the exact text survives");
    }

    #[test]
    fn a_cut_keeps_whole_characters_and_says_how_much_there_was() {
        assert_eq!(cap("short", 10), "short");
        // "é" is two bytes: a cut at 3 would split the second one.
        assert_eq!(cap("éééé", 3), "é… (cut: 8 bytes in all)");
        let long = "x".repeat(50 << 20);
        let kept = cap_error(&long);
        assert!(kept.len() < MAX_ERROR_BYTES + 64, "{}", kept.len());
        assert!(kept.ends_with("(cut: 52428800 bytes in all)"), "{kept:.40}");
    }
}
