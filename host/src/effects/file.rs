//! File delivery: one JSON line per message, appended and synced under an
//! exclusive lock on the file, after the claim is confirmed once more. A
//! file can be read back, so it is its own witness: a resumed run finds a
//! line an earlier process appended, and a fresh claim refuses to append a
//! key the file already holds (another store ran the window).

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;

use crate::core::error::Result;
use crate::core::window::WindowKey;
use crate::effects::last_look::LastLook;
use crate::effects::sent::{SendFailure, Sent, Uncertainty};
use crate::store::StagedMessage;
use crate::store::chain::MessageSignature;

/// Appends the message as one JSON line and syncs it, holding an exclusive
/// lock on the file (every jobhost process writing it takes the same lock)
/// for the whole sequence:
///
/// 1. `still_ours` confirms the claim again, so a process that paused past
///    its lease while waiting for the lock appends nothing, and gives the
///    look that confirmation allows, taken again right before the write
///    (a process paused after the check appends nothing either);
/// 2. a torn last line (a crash mid-append) is cut off;
/// 3. when `maybe_there`, a whole line with the same idempotency key counts
///    as delivered, so a resumed run does not append it twice;
/// 4. the line is appended and synced; a failed write is cut back.
///
/// # Errors
///
/// What `still_ours` returns (the claim was lost).
pub(super) fn append(
    name: &str,
    path: &Path,
    key: &WindowKey,
    m: &StagedMessage,
    maybe_there: bool,
    signature: Option<&MessageSignature>,
    still_ours: &mut dyn FnMut() -> Result<Option<LastLook>>,
) -> Result<Sent> {
    let fail = |message: String| {
        Ok(Sent::Failed(SendFailure {
            message,
            outcome: Uncertainty::NotSent,
            http_status: None,
            retry_after: None,
        }))
    };
    let shown = path.display();
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
        && let Err(e) = std::fs::create_dir_all(parent)
    {
        return fail(format!(
            "cannot create folder `{}` for destination `{name}`: {e}",
            parent.display()
        ));
    }
    let mut file = match OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)
    {
        Ok(f) => f,
        Err(e) => {
            return fail(format!(
                "cannot open `{shown}` for destination `{name}`: {e}"
            ));
        }
    };
    // Read before the lock, so that other writers are not held up by a long
    // file; under the lock only what was appended since is read again.
    let before = match find_key(&mut file, 0, &m.idempotency_key) {
        Ok(seen) => seen,
        Err(e) => {
            return fail(format!(
                "cannot read `{shown}` for destination `{name}`: {e}"
            ));
        }
    };
    if let Err(e) = lock(&file, FILE_LOCK_WAIT) {
        return fail(format!(
            "cannot lock `{shown}` for destination `{name}`: {e}"
        ));
    }
    // The lock is released when `file` is closed, on every path out.
    let look = still_ours()?;
    if let Err(e) = cut_torn_line(&mut file) {
        return fail(format!(
            "cannot repair the last line of `{shown}` for destination `{name}`: {e}"
        ));
    }
    let found = match before {
        Seen { found: true, .. } => Ok(true),
        Seen { whole_to, .. } => find_key(&mut file, whole_to, &m.idempotency_key).map(|s| s.found),
    };
    // A file can be read back, so it is its own witness: a key it holds
    // is delivered when an earlier process of this claim may have appended
    // it, and a second copy otherwise (another store ran the window).
    match found {
        Ok(true) if maybe_there => {
            return Ok(Sent::Delivered {
                detail: "already in file".to_string(),
                http_status: None,
            });
        }
        Ok(true) => {
            return Ok(Sent::Failed(SendFailure {
                message: format!(
                    "`{shown}` (destination `{name}`) already holds `{}`, which this run was \
                     about to append for the first time: another store? a store that was \
                     deleted, replaced or not the one this job used before has run window \
                     `{key}` already; nothing was appended, and the window is not run again \
                     until a person looks (if its rows were removed on purpose, to run it \
                     again, remove its lines from the file too)",
                    m.idempotency_key
                ),
                outcome: Uncertainty::Refused,
                http_status: None,
                retry_after: None,
            }));
        }
        Ok(false) => {}
        Err(e) => {
            return fail(format!(
                "cannot read `{shown}` for destination `{name}`: {e}"
            ));
        }
    }
    let line = file_line(key, m, signature);
    // The whole line, then fsync, so a crash after DONE cannot lose it. If
    // the write fails part way (a full disk), the file is cut back to where
    // it was, so a retry never appends after half a line.
    let before = file.metadata().map(|m| m.len());
    if look.is_some_and(|l| !l.allows()) {
        return Ok(Sent::Withheld);
    }
    if let Err(e) = file
        .write_all(line.as_bytes())
        .and_then(|()| file.sync_data())
    {
        if let Ok(len) = before {
            let _ = file.set_len(len);
        }
        return fail(format!(
            "cannot append to `{shown}` for destination `{name}`: {e}"
        ));
    }
    Ok(Sent::Delivered {
        detail: "appended".to_string(),
        http_status: None,
    })
}

/// How long a file destination waits for another process's lock.
const FILE_LOCK_WAIT: Duration = Duration::from_secs(30);

/// Takes an exclusive lock on `file` (the one every jobhost process
/// writing it takes), waiting at most `wait`.
fn lock(file: &std::fs::File, wait: Duration) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
            Err(std::fs::TryLockError::WouldBlock) => {}
        }
        if std::time::Instant::now() >= deadline {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "another process held the lock for too long",
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Truncates the file after its last newline when it does not end with one.
fn cut_torn_line(file: &mut std::fs::File) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    // Read backwards in blocks until a newline (or the start) is found.
    let mut end = len;
    let mut block = vec![0u8; 8192];
    let mut cut = 0;
    while end > 0 {
        let start = end.saturating_sub(block.len() as u64);
        let n = (end - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut block[..n])?;
        if end == len && block[n - 1] == b'\n' {
            return Ok(()); // intact
        }
        if let Some(i) = block[..n].iter().rposition(|&b| b == b'\n') {
            cut = start + i as u64 + 1;
            break;
        }
        end = start;
    }
    file.set_len(cut)?;
    file.sync_data()
}

/// How far a read of a file destination got.
#[derive(Debug, Clone, Copy)]
struct Seen {
    /// A whole line carries the key.
    found: bool,
    /// The end of the last whole line read (a read from there on sees
    /// whatever was appended since).
    whole_to: u64,
}

/// Whether a whole line of the file from byte `from` on (a line start)
/// carries `idempotency_key`. A line without its newline (one being
/// written, or torn by a crash) never counts.
fn find_key(file: &mut std::fs::File, from: u64, idempotency_key: &str) -> std::io::Result<Seen> {
    use std::io::{Seek, SeekFrom};
    file.seek(SeekFrom::Start(from))?;
    let mut seen = Seen {
        found: false,
        whole_to: from,
    };
    let mut reader = BufReader::new(&*file);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 || line.last() != Some(&b'\n') {
            return Ok(seen);
        }
        seen.whole_to += n as u64;
        if memchr::memmem::find(&line, idempotency_key.as_bytes()).is_some()
            && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&line)
            && v["idempotency_key"] == idempotency_key
        {
            seen.found = true;
            return Ok(seen);
        }
    }
}

/// The JSON line a file destination receives: the body inline as JSON when
/// it is JSON, as a string when it is UTF-8 text, else base64.
fn file_line(key: &WindowKey, m: &StagedMessage, signature: Option<&MessageSignature>) -> String {
    let mut obj = serde_json::Map::new();
    if let Some(sig) = signature.and_then(|s| serde_json::to_value(s).ok()) {
        // The same fields as an HTTP delivery's header, for a reader of
        // the file to check the line's body with the public key.
        obj.insert("signature".into(), sig);
    }
    obj.insert("idempotency_key".into(), m.idempotency_key.clone().into());
    obj.insert("key".into(), key.as_str().into());
    obj.insert("seq".into(), m.seq.into());
    obj.insert("destination".into(), m.destination.clone().into());
    obj.insert("content_type".into(), m.content_type.clone().into());
    let is_json = m.content_type.split(';').next().is_some_and(|e| {
        let e = e.trim();
        e == "application/json" || e.ends_with("+json")
    });
    let json_body = is_json
        .then(|| serde_json::from_slice::<serde_json::Value>(&m.body).ok())
        .flatten();
    // A signed line keeps the body's exact bytes, which its signature's
    // digest covers: JSON inline only when it reads back byte for byte.
    let json_body = json_body
        .filter(|v| signature.is_none() || serde_json::to_vec(v).is_ok_and(|b| b == m.body));
    match (json_body, std::str::from_utf8(&m.body)) {
        (Some(value), _) => {
            obj.insert("body".into(), value);
        }
        (None, Ok(text)) => {
            obj.insert("body".into(), text.into());
        }
        (None, Err(_)) => {
            obj.insert(
                "body_base64".into(),
                base64::engine::general_purpose::STANDARD
                    .encode(&m.body)
                    .into(),
            );
        }
    }
    let mut line = serde_json::Value::Object(obj).to_string();
    line.push('\n');
    line
}

/// The bytes a file destination's line may have been made from: its
/// `body` compact as JSON, or as text when it is a string, or its
/// `body_base64` decoded (a signature's digest tells which).
pub fn line_bodies(line: &serde_json::Value) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    if let Some(b) = line.get("body") {
        if let Ok(json) = serde_json::to_vec(b) {
            out.push(json);
        }
        if let Some(text) = b.as_str() {
            out.push(text.as_bytes().to_vec());
        }
    }
    if let Some(b) = line.get("body_base64").and_then(serde_json::Value::as_str)
        && let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(b)
    {
        out.push(bytes);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(seq: u32) -> StagedMessage {
        StagedMessage {
            seq,
            destination: "d".into(),
            idempotency_key: format!("j:2026-11-08#{seq}"),
            content_type: "text/plain".into(),
            body: b"hello".to_vec(),
        }
    }

    fn lines(path: &Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).expect("every line is whole JSON"))
            .collect()
    }

    #[test]
    fn a_whole_object_without_its_newline_is_torn_not_delivered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let key = WindowKey::from_stored("j:2026-11-08".into());
        let mut ours = || Ok(None);
        let line = file_line(&key, &message(1), None);
        // The crash kept the object but not its newline.
        std::fs::write(&path, line.trim_end()).unwrap();
        let sent = append("d", &path, &key, &message(1), true, None, &mut ours).unwrap();
        assert_eq!(
            sent,
            Sent::Delivered {
                detail: "appended".into(),
                http_status: None
            },
            "an unterminated line does not count as delivered"
        );
        let got = lines(&path);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0]["seq"], 1);
    }

    #[test]
    fn a_torn_tail_longer_than_a_read_block_and_a_file_without_newlines_are_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let key = WindowKey::from_stored("j:2026-11-08".into());
        let mut ours = || Ok(None);
        let whole = file_line(&key, &message(1), None);
        std::fs::write(&path, format!("{whole}{}", "x".repeat(20_000))).unwrap();
        append("d", &path, &key, &message(2), false, None, &mut ours).unwrap();
        let got = lines(&path);
        assert_eq!((got.len(), &got[1]["seq"]), (2, &serde_json::json!(2)));

        std::fs::write(&path, "y".repeat(9000)).unwrap();
        append("d", &path, &key, &message(3), false, None, &mut ours).unwrap();
        assert_eq!(lines(&path).len(), 1);
    }

    #[test]
    fn a_process_that_lost_its_claim_appends_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let key = WindowKey::from_stored("j:2026-11-08".into());
        let mut lost = || Err(crate::Error::LeaseLost("taken over".into()));
        assert!(append("d", &path, &key, &message(1), false, None, &mut lost).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"");
    }

    #[test]
    fn a_process_whose_lease_may_have_run_out_since_the_check_appends_nothing() {
        use crate::core::clock::{Clock, VirtualClock};
        use crate::effects::last_look::Confirmed;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let key = WindowKey::from_stored("j:2026-11-08".into());
        let clock = VirtualClock::new("2026-11-09T00:05:00Z".parse().unwrap());
        // Confirmed with 10 s left; paused 10 s before the write.
        let mut paused = || {
            let confirmed = Confirmed {
                asked_at: clock.monotonic(),
                left: Duration::from_secs(10),
            };
            let look = LastLook::new(confirmed, Duration::from_secs(1), &clock);
            clock.sleep(Duration::from_secs(10));
            Ok(Some(look))
        };
        let sent = append("d", &path, &key, &message(1), false, None, &mut paused).unwrap();
        assert_eq!(sent, Sent::Withheld);
        assert_eq!(std::fs::read(&path).unwrap(), b"");
    }

    #[test]
    fn file_lines_embed_json_bodies_and_encode_binary_ones() {
        let key = WindowKey::from_stored("j:2026-11-08".into());
        let mut m = StagedMessage {
            seq: 1,
            destination: "d".into(),
            idempotency_key: "j:2026-11-08#1".into(),
            content_type: "application/json".into(),
            body: br#"{"a":1}"#.to_vec(),
        };
        let v: serde_json::Value = serde_json::from_str(&file_line(&key, &m, None)).unwrap();
        assert_eq!(v["body"]["a"], 1);
        assert_eq!(v["idempotency_key"], "j:2026-11-08#1");
        m.body = vec![0xff, 0x00];
        m.content_type = "application/octet-stream".into();
        let v: serde_json::Value = serde_json::from_str(&file_line(&key, &m, None)).unwrap();
        assert_eq!(v["body_base64"], "/wA=");
    }

    #[test]
    fn a_resumed_file_delivery_finds_the_line_an_earlier_process_appended() {
        let mut ours = || Ok(None);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let key = WindowKey::from_stored("j:2026-11-08".into());
        let m = message(1);
        assert!(matches!(
            append("d", &path, &key, &m, true, None, &mut ours).unwrap(),
            Sent::Delivered { .. }
        ));
        let again = append("d", &path, &key, &m, true, None, &mut ours).unwrap();
        assert_eq!(
            again,
            Sent::Delivered {
                detail: "already in file".into(),
                http_status: None
            }
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        // A key that only prefixes another key is not a match.
        let other = StagedMessage {
            idempotency_key: "j:2026-11-08#".into(),
            ..m
        };
        let mut f = std::fs::File::open(&path).unwrap();
        assert!(!find_key(&mut f, 0, &other.idempotency_key).unwrap().found);
    }

    #[test]
    fn a_line_torn_by_a_crash_is_cut_before_the_next_append() {
        let mut ours = || Ok(None);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let key = WindowKey::from_stored("j:2026-11-08".into());
        let m = message(1);
        let whole = file_line(&key, &m, None);
        std::fs::write(&path, format!("{whole}{}", &whole[..20])).unwrap();
        let second = message(2);
        assert!(matches!(
            append("d", &path, &key, &second, true, None, &mut ours).unwrap(),
            Sent::Delivered { .. }
        ));
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("every line is whole JSON"))
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[1]["seq"], 2);
    }
}
