//! Delivery of a PREPARED run's committed messages, in order, each with its
//! idempotency key. Before every send the claim is checked (and renewed when
//! what is left might not cover the send and the wait after it), so a
//! process that lost its lease stops without sending. HTTP sends that fail
//! in a way that may pass (a network error, 5xx, 408, 409, 425, 429) are
//! retried with exponential backoff and full jitter, honouring
//! `Retry-After`; other 4xx answers are permanent. A message whose outcome
//! is uncertain is sent again with the same key (`at-least-once`) or never
//! again, abandoning the run (`at-most-once`). Waiting goes through the
//! run's clock, so tests never sleep.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine as _;
use jiff::{SignedDuration, Timestamp};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::config::Config;
use crate::core::clock::Clock;
use crate::core::error::Result;
use crate::core::failpoint::{Boundary, Failpoints};
use crate::core::redact::Redactor;
use crate::core::window::WindowKey;
use crate::effects::destination::{DeliveryMode, Destination, HttpTarget, Target};
use crate::receipt::{DeliveryStatus, MessageInfo};
use crate::store::{Attempted, ClaimStore, Failure, Fence, Lease, PendingMessage, StagedMessage};

/// How a run's delivery ended (a lost lease is an `Err`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Every message delivered; the run is DONE and the cursor moved.
    Done,
    /// Not every message could be delivered now; the run stays PREPARED and
    /// a later invocation resumes it.
    Retry(String),
    /// A destination refused a message for good: the run is FAILED.
    Permanent(String),
    /// The host gave up: the run is ABANDONED.
    Abandoned(String),
}

/// What one send came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// The destination has the message.
    Delivered {
        /// A few words: `http 201`, `appended`.
        detail: String,
        /// The HTTP status, for HTTP destinations.
        http_status: Option<u16>,
    },
    /// It does not, or may not.
    Failed(SendFailure),
}

/// A failed send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendFailure {
    /// One line for a person (no credentials).
    pub message: String,
    /// Whether the message may have arrived, and whether to try again.
    pub outcome: Uncertainty,
    /// The HTTP status, when the destination answered.
    pub http_status: Option<u16>,
    /// The destination's `Retry-After`, when it gave one.
    pub retry_after: Option<Duration>,
}

/// What a failed send says about the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uncertainty {
    /// It certainly did not arrive (no connection; 429, 408 or 425): safe
    /// to send again in every mode.
    NotSent,
    /// It may have arrived (a timeout or reset after the request went out;
    /// a 5xx): sent again only at-least-once.
    Unknown,
    /// The destination refused it (a 4xx other than 408, 425 and 429, or a
    /// redirect): sending again would fail the same way.
    Refused,
}

/// What a send knows of the run its message belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Sending<'a> {
    /// The window.
    pub key: &'a WindowKey,
    /// The fence of the claim it is sent under (an HTTP message carries
    /// it, so that an endpoint can refuse a stale sender); none for a
    /// message sent after its run is DONE.
    pub fence: Option<Fence>,
    /// An earlier process, or an earlier send of this one, may have
    /// delivered it already: a file destination then looks for its key and
    /// counts a line it finds as delivered; without it, a file that holds
    /// the key already refuses the message.
    pub maybe_there: bool,
}

/// Sends messages; one per run.
pub struct Sender {
    agent: ureq::Agent,
    redactor: Redactor,
}

impl Sender {
    /// A sender that scrubs `redactor`'s values from every message.
    pub fn new(redactor: Redactor) -> Sender {
        Sender {
            agent: http_agent(None),
            redactor,
        }
    }

    /// Sends `m`, a message of the run `run` tells of, once. `still_ours`
    /// confirms the claim once more where a destination can check it
    /// atomically with the send (a file, under its lock).
    ///
    /// # Errors
    ///
    /// What `still_ours` returns.
    pub fn send(
        &self,
        name: &str,
        dest: &Destination,
        m: &StagedMessage,
        run: &Sending<'_>,
        still_ours: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Sent> {
        let sent = match &dest.target {
            Target::File { path } => append(name, path, run.key, m, run.maybe_there, still_ours)?,
            Target::Http(target) => self.post(name, target, run.key, m, run.fence),
        };
        Ok(match sent {
            Sent::Failed(mut f) => {
                f.message = self.redactor.scrub(&f.message);
                Sent::Failed(f)
            }
            ok => ok,
        })
    }

    fn post(
        &self,
        name: &str,
        t: &HttpTarget,
        key: &WindowKey,
        m: &StagedMessage,
        fence: Option<Fence>,
    ) -> Sent {
        let mut req = self
            .agent
            .post(t.url())
            .header("Idempotency-Key", &m.idempotency_key)
            .header("Content-Type", &m.content_type)
            .header(WINDOW_HEADER, key.as_str());
        if let Some(fence) = fence {
            req = req.header(FENCE_HEADER, fence.0.to_string());
        }
        for (h, v) in t.headers() {
            req = req.header(h.as_str(), v.as_str());
        }
        // Shorter than the whole request's timeout, so that a host that
        // cannot be reached fails as a connect timeout (certainly not sent)
        // rather than as the overall timeout (outcome unknown).
        let connect = (t.timeout / 2).min(Duration::from_secs(10));
        let result = req
            .config()
            .timeout_global(Some(t.timeout))
            .timeout_connect(Some(connect))
            .build()
            .send(&m.body[..]);
        let shown = t.shown_url();
        match result {
            Ok(mut resp) => {
                let status = resp.status().as_u16();
                if (200..300).contains(&status) {
                    return Sent::Delivered {
                        detail: format!("http {status}"),
                        http_status: Some(status),
                    };
                }
                let retry_after = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(parse_retry_after);
                // A short excerpt helps a person see why; it is scrubbed of
                // credentials before it is cut or escaped (a server may echo
                // a token), and left out entirely for 401 and 403.
                let mut snippet = Vec::new();
                if !matches!(status, 401 | 403) {
                    let _ = resp
                        .body_mut()
                        .as_reader()
                        .take(4096)
                        .read_to_end(&mut snippet);
                }
                let body = one_line(
                    &self.redactor.scrub(&String::from_utf8_lossy(&snippet)),
                    200,
                );
                let outcome = match status {
                    408 | 425 | 429 => Uncertainty::NotSent,
                    // 409: a request with this idempotency key is still
                    // being processed (an earlier send that timed out here).
                    409 | 500..=599 => Uncertainty::Unknown,
                    _ => Uncertainty::Refused,
                };
                let hint = match status {
                    300..=399 => {
                        "; jobhost does not follow redirects: point the destination at the final URL"
                    }
                    401 | 403 => "; check the credentials in the destination's headers",
                    _ => "",
                };
                let reason = resp.status().canonical_reason().unwrap_or("");
                Sent::Failed(SendFailure {
                    message: format!(
                        "destination `{name}` ({shown}) answered {status} {reason}{}{hint}",
                        if body.is_empty() {
                            String::new()
                        } else {
                            format!(": {body}")
                        }
                    ),
                    outcome,
                    http_status: Some(status),
                    retry_after,
                })
            }
            Err(e) => {
                let outcome = match &e {
                    ureq::Error::HostNotFound
                    | ureq::Error::ConnectionFailed
                    | ureq::Error::BadUri(_)
                    | ureq::Error::InvalidProxyUrl
                    | ureq::Error::ConnectProxyFailed(_)
                    | ureq::Error::Tls(_)
                    | ureq::Error::Rustls(_)
                    | ureq::Error::Timeout(ureq::Timeout::Resolve | ureq::Timeout::Connect) => {
                        Uncertainty::NotSent
                    }
                    // Only errors that cannot happen once a connection is up:
                    // an unreachable host or network can also end an
                    // established connection whose request went out.
                    ureq::Error::Io(io)
                        if matches!(
                            io.kind(),
                            std::io::ErrorKind::ConnectionRefused
                                | std::io::ErrorKind::AddrNotAvailable
                        ) =>
                    {
                        Uncertainty::NotSent
                    }
                    _ => Uncertainty::Unknown,
                };
                Sent::Failed(SendFailure {
                    message: format!("cannot POST to destination `{name}` ({shown}): {e}"),
                    outcome,
                    http_status: None,
                    retry_after: None,
                })
            }
        }
    }
}

/// The header that names the window a message belongs to (its key,
/// `daily-sales:2026-11-08`).
pub const WINDOW_HEADER: &str = "Jobhost-Window";

/// The header that carries the fence of the claim a message was sent under:
/// it grows with every takeover of the window, so an endpoint that keeps
/// the highest fence it has seen per window can refuse a message from a
/// process whose claim was taken over (the fencing-token pattern).
pub const FENCE_HEADER: &str = "Jobhost-Fence";

/// The HTTP client every request of the host goes through: statuses are
/// answers, not errors; redirects are not followed (a destination, monitor
/// or model is given by its final URL); a fresh connection per request (a
/// pooled one the server has closed fails after the request was written,
/// which would make a send that never arrived look uncertain); and
/// `timeout` for the whole exchange, when given.
pub fn http_agent(timeout: Option<Duration>) -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .max_redirects_will_error(false)
            .user_agent(concat!("jobhost/", env!("CARGO_PKG_VERSION")))
            .max_idle_connections(0)
            .max_idle_connections_per_host(0)
            .timeout_global(timeout)
            .build(),
    )
}

/// `Retry-After` as delta-seconds or an HTTP date.
fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = jiff::fmt::rfc2822::parse(v).ok()?.timestamp();
    Some(
        Timestamp::now()
            .duration_until(at)
            .try_into()
            .unwrap_or(Duration::ZERO),
    )
}

/// `text` on one line, escaped (see `text::printable`), at most `max` chars.
fn one_line(text: &str, max: usize) -> String {
    let mut out = crate::core::text::printable(text.trim()).into_owned();
    if out.chars().count() > max {
        out = out.chars().take(max).collect::<String>() + "...";
    }
    out
}

/// Appends the message as one JSON line and syncs it, holding an exclusive
/// lock on the file (every jobhost process writing it takes the same lock)
/// for the whole sequence:
///
/// 1. `still_ours` confirms the claim again, so a process that paused past
///    its lease while waiting for the lock appends nothing;
/// 2. a torn last line (a crash mid-append) is cut off;
/// 3. when `maybe_there`, a whole line with the same idempotency key counts
///    as delivered, so a resumed run does not append it twice;
/// 4. the line is appended and synced; a failed write is cut back.
///
/// # Errors
///
/// What `still_ours` returns (the claim was lost).
fn append(
    name: &str,
    path: &Path,
    key: &WindowKey,
    m: &StagedMessage,
    maybe_there: bool,
    still_ours: &mut dyn FnMut() -> Result<()>,
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
    still_ours()?;
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
    let line = file_line(key, m);
    // The whole line, then fsync, so a crash after DONE cannot lose it. If
    // the write fails part way (a full disk), the file is cut back to where
    // it was, so a retry never appends after half a line.
    let before = file.metadata().map(|m| m.len());
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

/// Takes an exclusive advisory lock on `file`, waiting at most `wait`.
fn lock(file: &std::fs::File, wait: Duration) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let deadline = std::time::Instant::now() + wait;
    loop {
        // SAFETY: `flock` on a descriptor this function borrows open.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::WouldBlock {
            return Err(e);
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
fn file_line(key: &WindowKey, m: &StagedMessage) -> String {
    let mut obj = serde_json::Map::new();
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

/// What delivering a run needs.
pub struct Delivery<'a> {
    /// The job.
    pub config: &'a Config,
    /// The claim store.
    pub store: &'a mut dyn ClaimStore,
    /// The run's claim.
    pub lease: &'a Lease,
    /// The run's clock: leases, backoff and waiting.
    pub clock: &'a dyn Clock,
    /// Test hooks.
    pub failpoints: Option<&'a dyn Failpoints>,
    /// An earlier process may have sent some of these messages.
    pub resumed: bool,
    /// Set when the process is asked to stop: instead of waiting to send a
    /// message again, the run lets its claim go, and a later invocation
    /// resumes the delivery.
    pub stop: Option<&'a AtomicBool>,
}

/// How a failed attempt of a window ends: retried after a backoff that
/// doubles with each attempt, or abandoned when it was the last attempt.
pub fn retry_or_abandon(config: &Config, lease: &Lease) -> Failure {
    if lease.attempt >= config.max_attempts {
        return Failure::Abandon;
    }
    let exp = lease.attempt.saturating_sub(1).min(30);
    let delay = config
        .retry_delay
        .saturating_mul(1u32 << exp)
        .min(config.max_retry_delay);
    Failure::Retry { after: delay }
}

/// Delivers `pending` in order and, when all are delivered, marks the run
/// DONE (moving the cursor). `infos` receives each message's fate.
///
/// # Errors
///
/// `Error::LeaseLost` when another process took the run over (nothing is
/// sent after that is noticed); `Error::Store`.
pub fn deliver(
    d: Delivery<'_>,
    key: &WindowKey,
    pending: &[PendingMessage],
    infos: &mut Vec<MessageInfo>,
) -> Result<Ended> {
    let Delivery {
        config,
        store,
        lease,
        clock,
        failpoints,
        resumed,
        stop,
    } = d;
    let sender = Sender::new(config.redactor.clone());
    let mut rng = StdRng::seed_from_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |t| t.as_nanos() as u64)
            ^ u64::from(std::process::id()),
    );
    let reach = |b: Boundary| {
        if let Some(f) = failpoints {
            f.reached(b);
        }
    };
    *infos = pending
        .iter()
        .map(|p| MessageInfo {
            seq: p.message.seq,
            destination: p.message.destination.clone(),
            idempotency_key: p.message.idempotency_key.clone(),
            bytes: p.message.body.len(),
            status: DeliveryStatus::Pending,
            attempts: 0,
            http_status: None,
            detail: None,
        })
        .collect();
    let mut last: Option<(u32, u32, String)> = None;
    for (i, p) in pending.iter().enumerate() {
        let m = &p.message;
        let info = &mut infos[i];
        let Some(dest) = config.destinations.get(&m.destination) else {
            let why = format!(
                "message {} is for destination `{}`, which the job config no longer declares; \
                 declare it again to deliver the stored message",
                m.idempotency_key, m.destination
            );
            let now = clock.lease_now();
            let how = retry_or_abandon(config, lease);
            store.fail(lease, &why, how, None, now)?;
            info.detail = Some(why.clone());
            let end = ended(how, why, info);
            never_sent(how, &mut infos[i + 1..]);
            return Ok(end);
        };
        let at_most_once = dest.mode == DeliveryMode::AtMostOnce;
        // A file can be read back, so its outcome is never unknown: the
        // send below finds the line if the earlier process wrote it.
        let file_target = matches!(dest.target, Target::File { .. });
        if at_most_once && p.in_flight && !file_target {
            let why = format!(
                "message {} to at-most-once destination `{}` was being sent when an earlier \
                 process stopped; it may or may not have arrived, so it is never sent again; \
                 check the destination",
                m.idempotency_key, m.destination
            );
            let now = clock.lease_now();
            let done = Attempted {
                seq: m.seq,
                tries: 0,
                status: "outcome unknown",
            };
            store.fail(lease, &why, Failure::Abandon, Some(&done), now)?;
            info.status = DeliveryStatus::Abandoned;
            info.detail = Some("an earlier send's outcome is unknown".to_string());
            never_sent(Failure::Abandon, &mut infos[i + 1..]);
            return Ok(Ended::Abandoned(why));
        }
        let mut uncounted = 0;
        loop {
            reach(Boundary::BeforeSend);
            let now = clock.lease_now();
            if at_most_once {
                // Counted and marked in flight before the send: a crash
                // from here on leaves the outcome unknown, and it is treated
                // that way.
                store.renew(lease, config.lease, Some(m.seq), now)?;
            } else {
                uncounted += 1;
                // Renewed when half spent, or when what is left might not
                // cover this send and the wait before the next one: the
                // lease must never run out while this process works.
                // Measured on the store's clock (the database's, for
                // PostgreSQL), less the time the answer took to arrive.
                let asked = std::time::Instant::now();
                let reported = store.check_lease(lease, now)?;
                let took = SignedDuration::try_from(asked.elapsed()).unwrap_or(SignedDuration::MAX);
                let left = reported.checked_sub(took).unwrap_or(SignedDuration::MIN);
                // Slack of a tenth of the lease (at least 5 s) for the
                // store's own writes and clock differences.
                let slack = (config.lease / 10).max(Duration::from_secs(5));
                let needed =
                    (config.lease / 2).max(dest.timeout() + dest.retry.max_backoff + slack);
                if left <= SignedDuration::try_from(needed).unwrap_or(SignedDuration::MAX) {
                    store.renew(lease, config.lease, None, now)?;
                }
            }
            info.attempts += 1;
            reach(Boundary::InSend);
            let mut still_ours = || store.check_lease(lease, clock.lease_now()).map(drop);
            let run = Sending {
                key,
                fence: Some(lease.fence),
                maybe_there: resumed || p.attempts > 0 || info.attempts > 1,
            };
            let sent = sender.send(&m.destination, dest, m, &run, &mut still_ours)?;
            match sent {
                Sent::Delivered {
                    detail,
                    http_status,
                } => {
                    reach(Boundary::AfterSend);
                    info.status = DeliveryStatus::Delivered;
                    info.http_status = http_status;
                    info.detail = Some(detail.clone());
                    if i + 1 < pending.len() {
                        let done = Attempted {
                            seq: m.seq,
                            tries: uncounted,
                            status: &detail,
                        };
                        store.mark_delivered(lease, &done, clock.lease_now())?;
                    } else {
                        last = Some((m.seq, uncounted, detail));
                    }
                    break;
                }
                Sent::Failed(f) => {
                    info.http_status = f.http_status;
                    info.detail = Some(f.message.clone());
                    let now = clock.lease_now();
                    let how = match f.outcome {
                        Uncertainty::Refused => Some(Failure::Permanent),
                        Uncertainty::Unknown if at_most_once => Some(Failure::Abandon),
                        _ if info.attempts >= dest.retry.tries => {
                            Some(retry_or_abandon(config, lease))
                        }
                        _ => None,
                    };
                    if let Some(how) = how {
                        let why = match f.outcome {
                            Uncertainty::Unknown if at_most_once => format!(
                                "{}; the message may or may not have arrived, and destination \
                                 `{}` is at-most-once, so it is never sent again; check the destination",
                                f.message, m.destination
                            ),
                            Uncertainty::Refused => f.message.clone(),
                            _ => format!("{} (after {} send(s))", f.message, info.attempts),
                        };
                        let done = Attempted {
                            seq: m.seq,
                            tries: uncounted,
                            status: &f.message,
                        };
                        store.fail(lease, &why, how, Some(&done), now)?;
                        let end = ended(how, why, info);
                        never_sent(how, &mut infos[i + 1..]);
                        return Ok(end);
                    }
                    if at_most_once {
                        // Certainly not sent (anything else ended above).
                        store.not_sent(lease, m.seq, &f.message, now)?;
                    }
                    let wait = dest.retry.wait(info.attempts + 1, f.retry_after, &mut rng);
                    if let Some(waited) = pause(clock, wait, stop) {
                        // Asked to stop: let the claim go rather than wait
                        // (or send again), keeping the committed report,
                        // and without counting this attempt.
                        let why = format!(
                            "{} (after {} send(s)); asked to stop after waiting {:.1} s of \
                             {:.1} s to send it again, so the claim is let go and a later \
                             invocation resumes the delivery",
                            f.message,
                            info.attempts,
                            waited.as_secs_f64(),
                            wait.as_secs_f64()
                        );
                        let done = Attempted {
                            seq: m.seq,
                            tries: uncounted,
                            status: &f.message,
                        };
                        let how = Failure::Release {
                            after: wait.saturating_sub(waited),
                        };
                        store.fail(lease, &why, how, Some(&done), clock.lease_now())?;
                        return Ok(ended(how, why, info));
                    }
                }
            }
        }
    }
    let done = last.as_ref().map(|(seq, tries, status)| Attempted {
        seq: *seq,
        tries: *tries,
        status,
    });
    store.finish(lease, done.as_ref(), clock.lease_now())?;
    Ok(Ended::Done)
}

/// Waits `wait` on `clock`, in short slices while a stop may be asked
/// for. Returns how long it had waited when a stop was asked (before or
/// during the wait), `None` when it waited it all.
fn pause(clock: &dyn Clock, wait: Duration, stop: Option<&AtomicBool>) -> Option<Duration> {
    let Some(stop) = stop else {
        clock.sleep(wait);
        return None;
    };
    const SLICE: Duration = Duration::from_millis(100);
    let mut waited = Duration::ZERO;
    loop {
        if stop.load(Ordering::SeqCst) {
            return Some(waited);
        }
        if waited >= wait {
            return None;
        }
        let step = (wait - waited).min(SLICE);
        clock.sleep(step);
        waited += step;
    }
}

/// The messages after one that failed for good are never sent.
fn never_sent(how: Failure, rest: &mut [MessageInfo]) {
    if !matches!(how, Failure::Retry { .. } | Failure::Release { .. }) {
        for m in rest {
            m.status = DeliveryStatus::NotSent;
        }
    }
}

fn ended(how: Failure, why: String, info: &mut MessageInfo) -> Ended {
    match how {
        Failure::Retry { .. } | Failure::Release { .. } => {
            info.status = DeliveryStatus::Pending;
            Ended::Retry(why)
        }
        Failure::Permanent => {
            info.status = DeliveryStatus::Failed;
            Ended::Permanent(why)
        }
        Failure::Abandon => {
            info.status = DeliveryStatus::Abandoned;
            Ended::Abandoned(why)
        }
    }
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
        let mut ours = || Ok(());
        let line = file_line(&key, &message(1));
        // The crash kept the object but not its newline.
        std::fs::write(&path, line.trim_end()).unwrap();
        let sent = append("d", &path, &key, &message(1), true, &mut ours).unwrap();
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
        let mut ours = || Ok(());
        let whole = file_line(&key, &message(1));
        std::fs::write(&path, format!("{whole}{}", "x".repeat(20_000))).unwrap();
        append("d", &path, &key, &message(2), false, &mut ours).unwrap();
        let got = lines(&path);
        assert_eq!((got.len(), &got[1]["seq"]), (2, &serde_json::json!(2)));

        std::fs::write(&path, "y".repeat(9000)).unwrap();
        append("d", &path, &key, &message(3), false, &mut ours).unwrap();
        assert_eq!(lines(&path).len(), 1);
    }

    #[test]
    fn a_process_that_lost_its_claim_appends_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let key = WindowKey::from_stored("j:2026-11-08".into());
        let mut lost = || Err(crate::Error::LeaseLost("taken over".into()));
        assert!(append("d", &path, &key, &message(1), false, &mut lost).is_err());
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
        let v: serde_json::Value = serde_json::from_str(&file_line(&key, &m)).unwrap();
        assert_eq!(v["body"]["a"], 1);
        assert_eq!(v["idempotency_key"], "j:2026-11-08#1");
        m.body = vec![0xff, 0x00];
        m.content_type = "application/octet-stream".into();
        let v: serde_json::Value = serde_json::from_str(&file_line(&key, &m)).unwrap();
        assert_eq!(v["body_base64"], "/wA=");
    }

    #[test]
    fn a_resumed_file_delivery_finds_the_line_an_earlier_process_appended() {
        let mut ours = || Ok(());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let key = WindowKey::from_stored("j:2026-11-08".into());
        let m = message(1);
        assert!(matches!(
            append("d", &path, &key, &m, true, &mut ours).unwrap(),
            Sent::Delivered { .. }
        ));
        let again = append("d", &path, &key, &m, true, &mut ours).unwrap();
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
        let mut ours = || Ok(());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let key = WindowKey::from_stored("j:2026-11-08".into());
        let m = message(1);
        let whole = file_line(&key, &m);
        std::fs::write(&path, format!("{whole}{}", &whole[..20])).unwrap();
        let second = message(2);
        assert!(matches!(
            append("d", &path, &key, &second, true, &mut ours).unwrap(),
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

    #[test]
    fn retry_after_is_read_as_seconds_or_a_date() {
        assert_eq!(parse_retry_after("120"), Some(Duration::from_secs(120)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO),
            "a date in the past means now"
        );
        assert_eq!(parse_retry_after("soon"), None);
    }
}
