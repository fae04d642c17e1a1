//! Replay of a recorded run: the component (the recorded one, or another to
//! try new logic) runs against the run's journal instead of its data
//! source, with the recorded clock, seed, cursor and parameters, and what it
//! produces (the report and every staged message) is compared with what was
//! recorded. Same component and host: identical, bit for bit. A new
//! component: a list of differences a person can read. A guest that asks
//! for something the journal does not hold is a divergence, reported as
//! such. A swap preview replays a job's last recorded windows against one
//! new component ([`last_recorded`], [`judge`], [`Tally`]); a replay may
//! override recorded parameters ([`Recording::override_params`]). A replay
//! file carries the component that ran ([`Recording::embed`]), checked
//! against the recorded digest when it is read.

use jiff::Timestamp;
use sha2::{Digest as _, Sha256};

use crate::core::error::{Error, Result};
use crate::core::window::{JobName, Window, WindowKey, Zone};
use crate::guest::guest_log::GuestLog;
use crate::guest::journal::{Context, Entry, Journal};
use crate::guest::outbox::{OutboxLimits, Staging};
use crate::guest::sandbox::{GuestLimits, LoadedComponent, RunInput, Sandbox};
use crate::guest::source::{Recorded, SourceAccess};
use crate::store::{Ledger, StagedMessage, StoredReport};

/// Everything a replay needs of a recorded run.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// The journal: context and answers.
    pub journal: Journal,
    /// The journal as stored (compressed).
    pub stored_journal: Vec<u8>,
    /// `sha256:<hex>` of the component that ran.
    pub component: String,
    /// The report it returned.
    pub report: StoredReport,
    /// The messages it staged, in order.
    pub messages: Vec<StagedMessage>,
    /// The component's own bytes, when a replay file carries them (checked
    /// against `component` before they are kept here).
    pub embedded: Option<Vec<u8>>,
    /// The delivered messages' bodies were pruned (`prune --keep-journals`):
    /// only their destinations and content types can be compared.
    pub bodies_pruned: bool,
    /// The chain entries of the run, from the one that claimed its
    /// revision to its last, with every entry between (what `jobhost verify
    /// --file` checks offline); none when read from a store or file from
    /// before the chain.
    pub chain: Vec<crate::store::chain::Link>,
}

impl Recording {
    /// The recording of run `key` in `store`.
    ///
    /// # Errors
    ///
    /// `Error::Input` when the store has no such run, or the run has no
    /// committed report and journal yet; the journal's own reason when it
    /// cannot be read.
    pub fn from_store(store: &mut dyn Ledger, key: &WindowKey) -> Result<Recording> {
        let run = store.peek(key)?.ok_or_else(|| {
            Error::input(format!(
                "no run `{key}` in the store; `{}` lists the keys",
                crate::core::command::process_target().command("history")
            ))
        })?;
        let Some(report) = run.report else {
            return Err(Error::input(format!(
                "run `{key}` has no committed report to replay (it is {})",
                run.state
            )));
        };
        let Some(stored) = store.journal(key)? else {
            return Err(no_journal(key, run.pruned_at));
        };
        let journal = Journal::decode(&stored)
            .map_err(|e| Error::input(format!("cannot replay `{key}`")).because(e))?;
        Ok(Recording {
            journal,
            stored_journal: stored,
            component: run.component,
            report,
            messages: store.messages(key)?,
            embedded: None,
            bodies_pruned: run.pruned_at.is_some(),
            chain: store.chain_of(key, run.revision)?,
        })
    }

    /// The recording of revision `revision` of run `key`: the current one
    /// or an earlier one the store archived when it was rerun.
    ///
    /// # Errors
    ///
    /// As [`Recording::from_store`], and `Error::Input` for a revision the
    /// store does not hold (naming the ones it does).
    pub fn from_revision(
        store: &mut dyn Ledger,
        key: &WindowKey,
        revision: u32,
    ) -> Result<Recording> {
        if store.peek(key)?.is_some_and(|r| r.revision == revision) {
            return Recording::from_store(store, key);
        }
        let revisions = store.revisions(key)?;
        let Some(archived) = revisions.iter().find(|r| r.revision == revision) else {
            let mut held: Vec<String> = revisions.iter().map(|r| r.revision.to_string()).collect();
            if let Some(r) = store.peek(key)? {
                held.push(r.revision.to_string());
            }
            return Err(Error::input(format!(
                "run `{key}` has no revision {revision}; it has {}",
                if held.is_empty() {
                    "none".to_string()
                } else {
                    format!("revision(s) {}", held.join(", "))
                }
            )));
        };
        let Some(report) = archived.report.clone() else {
            return Err(Error::input(format!(
                "revision {revision} of `{key}` has no committed report to replay (it was {})",
                archived.state
            )));
        };
        let Some(crate::store::Archived {
            journal: Some(stored),
            messages,
        }) = store.archived(key, revision)?
        else {
            return Err(no_journal(key, archived.pruned_at));
        };
        let journal = Journal::decode(&stored)
            .map_err(|e| Error::input(format!("cannot replay `{key}`")).because(e))?;
        Ok(Recording {
            journal,
            stored_journal: stored,
            component: archived.component.clone(),
            report,
            messages,
            embedded: None,
            bodies_pruned: archived.pruned_at.is_some(),
            chain: store.chain_of(key, revision)?,
        })
    }

    /// The recording as a self-contained replay file: the journal, the
    /// recorded report and messages, the component's digest, and the
    /// component itself when [`Recording::embed`] was given it.
    ///
    /// # Errors
    ///
    /// Why it could not be encoded (only on a failing compressor).
    pub fn to_file(&self) -> Result<Vec<u8>> {
        let body = FileBody {
            component: self.component.clone(),
            report: self.report.clone(),
            messages: self.messages.clone(),
            journal: self.stored_journal.clone(),
            wasm: self.embedded.clone(),
            chain: self.chain.clone(),
        };
        let plain = postcard::to_stdvec(&body)
            .map_err(|e| Error::host("cannot encode the replay file").because(e))?;
        let mut out = FILE_MAGIC.to_vec();
        out.extend_from_slice(&FILE_FORMAT.to_le_bytes());
        // A checksum of the whole content: a damaged file must never pass
        // for a run that says something else.
        out.extend_from_slice(&Sha256::digest(&plain));
        let packed = zstd::stream::encode_all(&plain[..], 3)
            .map_err(|e| Error::host("cannot compress the replay file").because(e))?;
        out.extend_from_slice(&packed);
        Ok(out)
    }

    /// Keeps `wasm`, the component file read from `from` (a path, for the
    /// messages), to be written into the replay file, once it is checked
    /// to be the component that ran.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the file when it is larger than a replay file
    /// carries, or is another component than the recorded one.
    pub fn embed(&mut self, from: &str, wasm: Vec<u8>) -> Result<()> {
        let key = &self.journal.context.key;
        if wasm.len() as u64 > MAX_COMPONENT_BYTES {
            return Err(Error::input(format!(
                "component `{from}` has {} bytes, more than the {} MiB a replay file carries; \
                 export with --without-component and replay with --component",
                wasm.len(),
                MAX_COMPONENT_BYTES >> 20
            )));
        }
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&wasm)));
        if digest != self.component {
            return Err(Error::input(format!(
                "component `{from}` is {digest}, not the {} run `{key}` was recorded with; \
                 pass --component with the .wasm that ran (or --without-component)",
                self.component
            )));
        }
        self.embedded = Some(wasm);
        Ok(())
    }

    /// Reads the component file at `path` and keeps it as with
    /// [`Recording::embed`].
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the file when it cannot be read, is too large,
    /// or is not the component that ran.
    pub fn embed_file(&mut self, path: &std::path::Path) -> Result<()> {
        use std::io::Read;
        let shown = path.display().to_string();
        let mut wasm = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_COMPONENT_BYTES + 1).read_to_end(&mut wasm))
            .map_err(|e| {
                Error::input(format!(
                    "cannot read component `{shown}`: {e}; pass --component with the .wasm \
                     that ran (or --without-component)"
                ))
            })?;
        self.embed(&shown, wasm)
    }

    /// Reads a replay file from `path`, at most as many bytes as one may
    /// hold.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the file when it cannot be read or is larger
    /// than any replay file.
    pub fn read_file(path: &std::path::Path) -> Result<Vec<u8>> {
        use std::io::Read;
        let unreadable = |e: &dyn std::fmt::Display| {
            Error::input(format!(
                "cannot read replay file `{}`: {e}; name a file `jobhost export` wrote",
                path.display()
            ))
        };
        let file = std::fs::File::open(path).map_err(|e| unreadable(&e))?;
        let mut bytes = Vec::new();
        file.take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| unreadable(&e))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(unreadable(&format_args!(
                "it is larger than {} MiB, more than a replay file holds",
                MAX_FILE_BYTES >> 20
            )));
        }
        Ok(bytes)
    }

    /// Reads a replay file written by [`Recording::to_file`].
    ///
    /// # Errors
    ///
    /// `Error::Input` saying what is wrong: not a replay file, a newer
    /// format, damaged or truncated, or an embedded component that is not
    /// the one the file says ran.
    pub fn from_file(bytes: &[u8]) -> Result<Recording> {
        let rest = bytes.strip_prefix(FILE_MAGIC).ok_or_else(|| {
            Error::input("not a jobhost replay file (it does not start with the replay header); make one with `jobhost export`")
        })?;
        let (format, packed) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| Error::input("the replay file is truncated"))?;
        let format = u32::from_le_bytes(*format);
        if format > FILE_FORMAT {
            return Err(Error::input(format!(
                "the replay file has format {format}, newer than this jobhost reads ({FILE_FORMAT}); upgrade jobhost"
            )));
        }
        let damaged = |e: &dyn std::fmt::Display| {
            Error::input(format!("the replay file is damaged or truncated: {e}"))
        };
        let (sum, packed) = packed
            .split_first_chunk::<32>()
            .ok_or_else(|| Error::input("the replay file is truncated"))?;
        let plain =
            crate::guest::journal::inflate(packed, MAX_FILE_PLAIN).map_err(|e| damaged(&e))?;
        if Sha256::digest(&plain).as_slice() != sum {
            return Err(damaged(&"its checksum does not match"));
        }
        let body = match format {
            0 | 1 => postcard::from_bytes::<FileBodyV1>(&plain)
                .map_err(|e| damaged(&e))?
                .into_current(),
            2 => postcard::from_bytes::<FileBodyV2>(&plain)
                .map_err(|e| damaged(&e))?
                .into_current(),
            3 => postcard::from_bytes::<FileBodyV3>(&plain)
                .map_err(|e| damaged(&e))?
                .into_current(),
            _ => postcard::from_bytes::<FileBody>(&plain).map_err(|e| damaged(&e))?,
        };
        let digest = body.component.strip_prefix("sha256:").unwrap_or("");
        if !crate::core::text::is_sha256_hex(digest) {
            return Err(damaged(&"its component digest is not a sha256"));
        }
        if let Some(wasm) = &body.wasm {
            // Never run bytes other than the ones the file says ran: a
            // file made by hand could pair any component with any run.
            if wasm.len() as u64 > MAX_COMPONENT_BYTES {
                return Err(damaged(&format_args!(
                    "its component has {} bytes, more than the {} MiB a replay file carries",
                    wasm.len(),
                    MAX_COMPONENT_BYTES >> 20
                )));
            }
            let carried = hex::encode(Sha256::digest(wasm));
            if carried != digest {
                return Err(Error::input(format!(
                    "the replay file carries component sha256:{carried}, not the {} it says ran; \
                     it was altered: export the run again, or replay with --component",
                    body.component
                )));
            }
        }
        let journal = Journal::decode(&body.journal)
            .map_err(|e| Error::input("the replay file's journal").because(e))?;
        Ok(Recording {
            journal,
            stored_journal: body.journal,
            component: body.component,
            report: body.report,
            messages: body.messages,
            embedded: body.wasm,
            bodies_pruned: false,
            chain: body.chain,
        })
    }

    /// Replaces or adds the parameters `given` names in the recorded
    /// context, for this replay only; returns what changed, in the order
    /// given.
    pub fn override_params(&mut self, given: &[(String, String)]) -> Vec<Overridden> {
        let params = &mut self.journal.context.params;
        let mut out = Vec::with_capacity(given.len());
        for (name, value) in given {
            let recorded = match params.binary_search_by(|(n, _)| n.as_str().cmp(name)) {
                Ok(at) => Some(std::mem::replace(&mut params[at].1, value.clone())),
                Err(at) => {
                    params.insert(at, (name.clone(), value.clone()));
                    None
                }
            };
            out.push(Overridden {
                name: name.clone(),
                recorded,
                replayed: value.clone(),
            });
        }
        out
    }

    /// The source as the recorded run's guest saw it: one recorded cursor
    /// per `open`, in order.
    fn source(&self) -> Vec<Recorded> {
        let mut sessions: Vec<Recorded> = Vec::new();
        for entry in &self.journal.entries {
            match (entry, sessions.last_mut()) {
                (Entry::Open(answer), _) => sessions.push(Recorded {
                    open: answer.clone(),
                    columns: None,
                    replies: Vec::new(),
                }),
                (Entry::Columns(c), Some(s)) => s.columns = Some(c.clone()),
                (Entry::Batch { answer, .. }, Some(s)) => s.replies.push(answer.clone()),
                _ => {}
            }
        }
        sessions
    }
}

/// A recorded parameter a replay was given another value for, or one it
/// added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overridden {
    /// The parameter's name.
    pub name: String,
    /// Its recorded value; `None` when the recorded run had no such
    /// parameter.
    pub recorded: Option<String>,
    /// The value the replay gave the guest.
    pub replayed: String,
}

impl std::fmt::Display for Overridden {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.recorded {
            Some(old) => write!(
                f,
                "parameter {} overridden: {} -> {}",
                self.name,
                quote(old),
                quote(&self.replayed)
            ),
            None => write!(
                f,
                "parameter {} added: {} (the recorded run had none)",
                self.name,
                quote(&self.replayed)
            ),
        }
    }
}

/// A `--param KEY=VALUE` argument as a name and a value.
///
/// # Errors
///
/// `Error::Input` naming the argument when it has no `=` or no name.
pub fn parse_param(text: &str) -> Result<(String, String)> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => Ok((name.to_string(), value.to_string())),
        _ => Err(Error::input(format!(
            "invalid `--param {}`: give it as KEY=VALUE (for example --param region=us)",
            crate::core::text::cap(text, 200)
        ))),
    }
}

/// `--param` arguments as name-value pairs; a name given twice is refused.
///
/// # Errors
///
/// `Error::Input` naming the argument that is wrong.
pub fn parse_params(given: &[String]) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::with_capacity(given.len());
    for text in given {
        let (name, value) = parse_param(text)?;
        if out.iter().any(|(n, _)| *n == name) {
            return Err(Error::input(format!(
                "`--param {}` is given twice; give each parameter once",
                crate::core::text::cap(&name, 200)
            )));
        }
        out.push((name, value));
    }
    Ok(out)
}

/// The first bytes of a replay file.
const FILE_MAGIC: &[u8; 8] = b"JHREPLAY";

/// The replay file format this host writes; it reads this one and every
/// earlier one. 2 added the text `describe` gave; 3 the component's own
/// bytes (or that the file carries none).
const FILE_FORMAT: u32 = 4;

/// The most a replay file may decompress to.
const MAX_FILE_PLAIN: u64 = 1 << 30;

/// The most bytes a replay file may have on disk.
const MAX_FILE_BYTES: u64 = MAX_FILE_PLAIN;

/// The largest component a replay file carries (the Python reference,
/// interpreter and all, is about 40 MB).
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;

/// Format 4: the component's bytes, or `None` for a file exported without
/// them, and the run's chain entries.
#[derive(serde::Serialize, serde::Deserialize)]
struct FileBody {
    component: String,
    report: StoredReport,
    messages: Vec<StagedMessage>,
    journal: Vec<u8>,
    /// One length and the bytes (a plain `Vec<u8>` is written the same
    /// way by postcard, but read byte by byte).
    #[serde(with = "serde_bytes")]
    wasm: Option<Vec<u8>>,
    chain: Vec<crate::store::chain::Link>,
}

/// Format 3: no chain entries. Never written any more.
#[derive(serde::Deserialize)]
struct FileBodyV3 {
    component: String,
    report: StoredReport,
    messages: Vec<StagedMessage>,
    journal: Vec<u8>,
    #[serde(with = "serde_bytes")]
    wasm: Option<Vec<u8>>,
}

impl FileBodyV3 {
    fn into_current(self) -> FileBody {
        FileBody {
            component: self.component,
            report: self.report,
            messages: self.messages,
            journal: self.journal,
            wasm: self.wasm,
            chain: Vec::new(),
        }
    }
}

/// Format 2: no component. Never written any more.
#[derive(serde::Deserialize)]
struct FileBodyV2 {
    component: String,
    report: StoredReport,
    messages: Vec<StagedMessage>,
    journal: Vec<u8>,
}

impl FileBodyV2 {
    fn into_current(self) -> FileBody {
        FileBody {
            component: self.component,
            report: self.report,
            messages: self.messages,
            journal: self.journal,
            wasm: None,
            chain: Vec::new(),
        }
    }
}

/// Format 1: the report without a prompt. Never written any more; read
/// field by field as it was (postcard is not self-describing).
#[derive(serde::Deserialize)]
struct FileBodyV1 {
    component: String,
    report: ReportV1,
    messages: Vec<StagedMessage>,
    journal: Vec<u8>,
}

#[derive(serde::Deserialize)]
struct ReportV1 {
    summary: String,
    cursor: Option<String>,
}

impl FileBodyV1 {
    fn into_current(self) -> FileBody {
        FileBody {
            component: self.component,
            report: StoredReport {
                summary: self.report.summary,
                cursor: self.report.cursor,
                prompt: None,
                described: false,
            },
            messages: self.messages,
            journal: self.journal,
            wasm: None,
            chain: Vec::new(),
        }
    }
}

/// What a replay produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Replayed {
    /// The guest returned a report.
    Report {
        /// The report.
        report: StoredReport,
        /// The staged messages.
        messages: Vec<StagedMessage>,
    },
    /// The guest failed, or asked for what the journal does not hold.
    Failed {
        /// Why, in one line.
        reason: String,
        /// True when the guest asked for something the journal lacks.
        divergence: bool,
    },
}

/// Runs `component` against `recording`'s journal.
///
/// # Errors
///
/// `Error::Input` when the journal's context is not one this host can
/// rebuild (an unknown zone or window kind).
pub fn replay(
    sandbox: &Sandbox,
    component: &LoadedComponent,
    recording: &Recording,
) -> Result<Replayed> {
    let c = &recording.journal.context;
    // The recorded run's limits, but never beyond what a job config may
    // ask for: a replay file is input, and its numbers are not trusted.
    let (memory, timeout_ms, output, report) = c.limits;
    let limits = GuestLimits {
        memory_bytes: usize::try_from(memory.min(crate::guest::limits::MAX_MEMORY_MIB << 20))
            .unwrap_or(usize::MAX),
        timeout: std::time::Duration::from_millis(
            timeout_ms.min(crate::guest::limits::MAX_TIMEOUT_SECONDS * 1000),
        ),
        output_bytes: usize::try_from(output).unwrap_or(usize::MAX),
        report_bytes: usize::try_from(report).unwrap_or(usize::MAX),
        // The journal a replay writes is thrown away; it is bounded all
        // the same, at the most a replay reads.
        journal_bytes: crate::guest::journal::MAX_PLAIN,
    };
    let window = window(c)?;
    let now = instant(c.now)?;
    let (max_messages, max_bytes, max_total) = c.outbox_limits;
    let input = RunInput {
        window: window.clone(),
        now,
        cursor: c.cursor.clone(),
        attempt: c.attempt,
        revision: c.revision,
        params: c.params.clone(),
        source: SourceAccess::replaying(recording.source()),
        outbox: Staging::new(
            window.key(),
            c.destinations.clone(),
            OutboxLimits {
                max_messages,
                max_message_bytes: max_bytes,
                max_staged_bytes: max_total,
            },
        )
        .for_revision(c.revision),
        destinations: c.destinations.clone(),
        log: GuestLog::new(&format!("{} (replay)", c.job), 64 << 10),
        limits,
        seed: Some(c.seed),
    };
    Ok(match sandbox.run(component, input) {
        Ok(success) => Replayed::Report {
            report: success.report,
            messages: success.messages,
        },
        Err(failure) => Replayed::Failed {
            divergence: failure.kind == crate::core::error::ErrorKind::ReplayDivergence,
            reason: failure.message,
        },
    })
}

/// Why a run with a report has no journal to replay.
fn no_journal(key: &WindowKey, pruned_at: Option<Timestamp>) -> Error {
    match pruned_at {
        Some(t) => Error::input(format!(
            "run `{key}` cannot be replayed: its journal was pruned at {} (`jobhost prune`, or \
             the job's [retention]); `jobhost export` keeps a run replayable before it is pruned",
            crate::core::clock::rfc3339(t)
        )),
        None => Error::input(format!(
            "run `{key}` has no journal: it ran before this jobhost recorded journals"
        )),
    }
}

/// What one replayed window came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The report and every message are bit for bit what was recorded.
    Identical {
        /// Messages compared.
        messages: usize,
        /// Their bytes.
        bytes: usize,
    },
    /// Something differs: one readable line per difference.
    Different(Vec<String>),
    /// The guest asked for what the journal does not hold.
    Diverged(String),
    /// The guest failed, or the window could not be replayed.
    Failed(String),
}

impl Verdict {
    /// `identical`, `different`, `diverged` or `failed`.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Identical { .. } => "identical",
            Verdict::Different(_) => "different",
            Verdict::Diverged(_) => "diverged",
            Verdict::Failed(_) => "failed",
        }
    }
}

/// The verdict on what a replay of `recording` produced.
pub fn judge(recording: &Recording, replayed: Replayed) -> Verdict {
    match replayed {
        Replayed::Report { report, messages } => {
            let diffs = differences(recording, &report, &messages);
            if diffs.is_empty() {
                Verdict::Identical {
                    messages: messages.len(),
                    bytes: messages.iter().map(|m| m.body.len()).sum(),
                }
            } else {
                Verdict::Different(diffs)
            }
        }
        Replayed::Failed {
            reason,
            divergence: true,
        } => Verdict::Diverged(reason),
        Replayed::Failed { reason, .. } => Verdict::Failed(reason),
    }
}

/// How many windows came to each verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Tally {
    /// Windows replayed.
    pub windows: usize,
    /// Bit for bit the same.
    pub identical: usize,
    /// With a difference.
    pub different: usize,
    /// Asked for what the journal lacks.
    pub diverged: usize,
    /// Failed, or could not be replayed.
    pub failed: usize,
}

impl Tally {
    /// Counts `verdict`.
    pub fn add(&mut self, verdict: &Verdict) {
        self.windows += 1;
        match verdict {
            Verdict::Identical { .. } => self.identical += 1,
            Verdict::Different(_) => self.different += 1,
            Verdict::Diverged(_) => self.diverged += 1,
            Verdict::Failed(_) => self.failed += 1,
        }
    }

    /// The exit code: 1 when any window differs, else 3 when any failed or
    /// diverged (no comparable result), else 0.
    pub fn exit_code(&self) -> i32 {
        if self.different > 0 {
            1
        } else if self.diverged + self.failed > 0 {
            3
        } else {
            0
        }
    }
}

impl std::fmt::Display for Tally {
    /// `7 windows: 7 identical`, `7 windows: 0 identical, 7 different`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let noun = if self.windows == 1 {
            "window"
        } else {
            "windows"
        };
        write!(f, "{} {noun}: {} identical", self.windows, self.identical)?;
        for (n, what) in [
            (self.different, "different"),
            (self.diverged, "diverged"),
            (self.failed, "failed"),
        ] {
            if n > 0 {
                write!(f, ", {n} {what}")?;
            }
        }
        Ok(())
    }
}

/// The job whose windows a swap preview replays: `job` when given, else
/// the store's only job.
///
/// # Errors
///
/// `Error::Input` naming the jobs the store holds when `job` is not one of
/// them, or is not given and the store holds several (or none).
pub fn pick_job(store: &mut dyn Ledger, job: Option<&str>) -> Result<String> {
    let jobs: std::collections::BTreeSet<String> = store.jobs()?.into_iter().collect();
    let listed = || {
        let mut names: Vec<&str> = jobs.iter().map(String::as_str).take(10).collect();
        if jobs.len() > 10 {
            names.push("...");
        }
        names.join(", ")
    };
    match job {
        Some(j) if jobs.contains(j) => Ok(j.to_string()),
        Some(j) if jobs.is_empty() => Err(Error::input(format!(
            "the store holds no runs, so none of job `{j}`; name the store that has them with \
             --store or --config"
        ))),
        Some(j) => Err(Error::input(format!(
            "the store holds no runs of job `{j}`; it holds runs of {}; name one with --job",
            listed()
        ))),
        None => match jobs.len() {
            1 => Ok(jobs.into_iter().next().unwrap_or_default()),
            0 => Err(Error::input(
                "the store holds no runs; name the store that has them with --store or --config",
            )),
            n => Err(Error::input(format!(
                "the store holds runs of {n} jobs ({}); name one with --job",
                listed()
            ))),
        },
    }
}

/// The keys of `job`'s newest `n` windows that have a committed report
/// and a journal, oldest first.
///
/// # Errors
///
/// `Error::Input` when the job has no such window; `Error::Store`.
pub fn last_recorded(store: &mut dyn Ledger, job: &str, n: usize) -> Result<Vec<WindowKey>> {
    let mut keys: Vec<WindowKey> = store
        .history(Some(job))?
        .into_iter()
        .filter(|r| r.report.is_some() && r.journal_bytes.is_some())
        .take(n)
        .map(|r| r.key)
        .collect();
    if keys.is_empty() {
        return Err(Error::input(format!(
            "job `{job}` has no run with a committed report and journal to replay; \
             `{}` lists its runs",
            crate::core::command::process_target().command(&format!("history --job {job}"))
        )));
    }
    keys.reverse();
    Ok(keys)
}

/// The job's windows starting at `since` or later that have a committed
/// report and journal, oldest first, with their revision.
///
/// # Errors
///
/// `Error::Input` when there is none; `Error::Store`.
pub fn recorded_since(
    store: &mut dyn Ledger,
    job: &str,
    since: Timestamp,
) -> Result<Vec<(WindowKey, u32)>> {
    let mut rows: Vec<_> = store
        .history_from(job, Some(since))?
        .into_iter()
        .filter(|r| r.report.is_some() && r.journal_bytes.is_some())
        .collect();
    rows.sort_by_key(|r| r.window_start);
    let keys: Vec<(WindowKey, u32)> = rows.into_iter().map(|r| (r.key, r.revision)).collect();
    if keys.is_empty() {
        return Err(Error::input(format!(
            "job `{job}` has no run since {} with a committed report and journal to replay; \
             `{}` lists its runs",
            crate::core::clock::rfc3339(since),
            crate::core::command::process_target().command(&format!("history --job {job}"))
        )));
    }
    Ok(keys)
}

/// The destinations that would receive a message other than the one
/// recorded (a changed body or content type, a message more or fewer), in
/// name order.
pub fn changed_destinations(recording: &Recording, messages: &[StagedMessage]) -> Vec<String> {
    let mut out = std::collections::BTreeSet::new();
    let longest = recording.messages.len().max(messages.len());
    for i in 0..longest {
        match (recording.messages.get(i), messages.get(i)) {
            (Some(a), Some(b)) => {
                if a.destination != b.destination {
                    out.insert(a.destination.clone());
                    out.insert(b.destination.clone());
                } else if a.content_type != b.content_type
                    || (a.body != b.body && !recording.bodies_pruned)
                {
                    out.insert(b.destination.clone());
                }
            }
            (Some(only), None) | (None, Some(only)) => {
                out.insert(only.destination.clone());
            }
            (None, None) => {}
        }
    }
    out.into_iter().collect()
}

/// A rerun plan: the windows whose report or messages the component
/// `component` changes, as `replay --plan` writes it and `rerun --plan`
/// reads it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RerunPlan {
    /// The plan's format, 1.
    pub plan: u32,
    /// The job.
    pub job: String,
    /// `sha256:<hex>` of the component the windows were replayed with.
    pub component: String,
    /// When the plan was made.
    pub made_at: String,
    /// How many windows were replayed.
    pub replayed: usize,
    /// The windows whose output changes, oldest first.
    pub windows: Vec<PlannedRerun>,
    /// Windows that could not be compared (diverged or failed), not in
    /// the plan.
    pub not_compared: Vec<String>,
}

/// One window of a [`RerunPlan`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannedRerun {
    /// The window.
    pub key: String,
    /// The revision replayed: the rerun is of this one only.
    pub revision: u32,
    /// What differs.
    pub differences: Vec<String>,
    /// The destinations that would receive a changed message.
    pub destinations: Vec<String>,
}

/// The most bytes of a plan file read.
pub const MAX_PLAN_BYTES: u64 = 64 << 20;

impl RerunPlan {
    /// Reads a plan file.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the file and what is wrong with it.
    pub fn read(path: &std::path::Path) -> Result<RerunPlan> {
        use std::io::Read as _;
        let shown = crate::core::text::printable(&path.display().to_string()).into_owned();
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_PLAN_BYTES + 1).read_to_string(&mut text))
            .map_err(|e| Error::input(format!("cannot read the plan `{shown}`: {e}")))?;
        if text.len() as u64 > MAX_PLAN_BYTES {
            return Err(Error::input(format!(
                "the plan `{shown}` is over {} MiB: not a plan `replay --plan` wrote",
                MAX_PLAN_BYTES >> 20
            )));
        }
        let plan: RerunPlan = serde_json::from_str(&text).map_err(|e| {
            Error::input(format!(
                "the plan `{shown}` is not one `jobhost replay --plan` wrote: {e}"
            ))
        })?;
        if plan.plan != 1 {
            return Err(Error::input(format!(
                "the plan `{shown}` has format {}; this jobhost reads format 1",
                plan.plan
            )));
        }
        Ok(plan)
    }
}

fn instant((s, ns): (i64, u32)) -> Result<Timestamp> {
    i32::try_from(ns)
        .ok()
        .and_then(|ns| Timestamp::new(s, ns).ok())
        .ok_or_else(|| {
            Error::input(format!(
                "the journal holds an invalid instant ({s} s, {ns} ns)"
            ))
        })
}

fn window(c: &Context) -> Result<Window> {
    let window = Window {
        job: JobName::new(&c.job)?,
        kind: c.window_kind.parse()?,
        zone: Zone::new(&c.timezone)?,
        start: instant(c.start)?,
        end: instant(c.end)?,
        label: c.label.clone(),
    };
    if window.key().as_str() != c.key {
        return Err(Error::input(format!(
            "the journal's window `{}` does not match its key `{}`; it is damaged",
            window.key(),
            c.key
        )));
    }
    Ok(window)
}

/// The differences between what was recorded and what the replay
/// produced, one readable line each; empty when identical bit for bit.
pub fn differences(
    recording: &Recording,
    report: &StoredReport,
    messages: &[StagedMessage],
) -> Vec<String> {
    let mut out = Vec::new();
    let old = &recording.report;
    if old.summary != report.summary {
        out.push(format!(
            "report summary: {}",
            changed(Some(&old.summary), Some(&report.summary))
        ));
    }
    if old.cursor != report.cursor {
        out.push(format!(
            "report cursor: {}",
            changed(old.cursor.as_deref(), report.cursor.as_deref())
        ));
    }
    // Compared when the recorded run's `describe` gave an answer: not for
    // runs from before it existed, nor when it failed then.
    if old.described && !report.described {
        out.push("text to describe: `describe` gave an answer then, and failed now".to_string());
    } else if old.described && old.prompt != report.prompt {
        out.push(format!(
            "text to describe: {}",
            changed(old.prompt.as_deref(), report.prompt.as_deref())
        ));
    }
    if recording.messages.len() != messages.len() {
        out.push(format!(
            "messages: {} recorded, {} now",
            recording.messages.len(),
            messages.len()
        ));
    }
    for (a, b) in recording.messages.iter().zip(messages) {
        let at = format!("message {} ({})", a.seq, a.destination);
        if a.destination != b.destination {
            out.push(format!(
                "{at}: destination `{}` -> `{}`",
                a.destination, b.destination
            ));
        }
        if a.content_type != b.content_type {
            out.push(format!(
                "{at}: content type `{}` -> `{}`",
                a.content_type, b.content_type
            ));
        }
        if a.body != b.body && !recording.bodies_pruned {
            out.extend(body_differences(&at, &a.body, &b.body));
        }
    }
    out
}

/// At most this many differences are listed inside one JSON body.
const MAX_JSON_DIFFS: usize = 20;

fn body_differences(at: &str, old: &[u8], new: &[u8]) -> Vec<String> {
    if let (Ok(a), Ok(b)) = (
        serde_json::from_slice::<serde_json::Value>(old),
        serde_json::from_slice::<serde_json::Value>(new),
    ) {
        let mut diffs = Vec::new();
        json_diff("$", &a, &b, &mut diffs);
        if !diffs.is_empty() {
            let more = diffs.len().saturating_sub(MAX_JSON_DIFFS);
            let mut lines: Vec<String> = diffs
                .into_iter()
                .take(MAX_JSON_DIFFS)
                .map(|d| format!("{at}: {d}"))
                .collect();
            if more > 0 {
                lines.push(format!("{at}: ... and {more} more difference(s)"));
            }
            return lines;
        }
        // Same JSON value, different bytes (spacing, key order).
    }
    let first = old
        .iter()
        .zip(new)
        .position(|(x, y)| x != y)
        .unwrap_or(old.len().min(new.len()));
    vec![format!(
        "{at}: body differs ({} bytes -> {} bytes, first difference at byte {first})",
        old.len(),
        new.len()
    )]
}

fn json_diff(path: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                let p = format!("{path}.{k}");
                match y.get(k) {
                    Some(w) => json_diff(&p, v, w, out),
                    None => out.push(format!("{p} removed (was {})", short(v))),
                }
            }
            for (k, w) in y {
                if !x.contains_key(k) {
                    out.push(format!("{path}.{k} added: {}", short(w)));
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => match array_key(x, y) {
            Some(field) => keyed_diff(path, field, x, y, out),
            None => {
                for (i, (v, w)) in x.iter().zip(y).enumerate() {
                    json_diff(&format!("{path}[{i}]"), v, w, out);
                }
                if x.len() != y.len() {
                    out.push(format!("{path}: {} items -> {} items", x.len(), y.len()));
                }
            }
        },
        _ if a != b => out.push(format!("{path}: {} -> {}", short(a), short(b))),
        _ => {}
    }
}

/// The field that names each element of two arrays of objects, if one
/// does: `name`, `id` or `key` (a string or a number), else the first
/// string-valued field every element has; it must be in every element of
/// both arrays, with values unique within each.
fn array_key<'a>(x: &'a [serde_json::Value], y: &'a [serde_json::Value]) -> Option<&'a str> {
    use serde_json::Value;
    let all: Vec<&serde_json::Map<String, Value>> = x
        .iter()
        .chain(y)
        .map(Value::as_object)
        .collect::<Option<_>>()?;
    let first = *all.first()?;
    let names = |field: &str, scalar: bool| {
        let usable = |v: &Value| v.is_string() || (scalar && v.is_number());
        let unique = |items: &[Value]| {
            let mut seen = std::collections::HashSet::new();
            items.iter().all(|e| {
                e.get(field)
                    .is_some_and(|v| usable(v) && seen.insert(v.to_string()))
            })
        };
        unique(x) && unique(y)
    };
    ["name", "id", "key"]
        .into_iter()
        .find(|f| first.contains_key(*f) && names(f, true))
        .or_else(|| {
            first
                .iter()
                .filter(|(_, v)| v.is_string())
                .map(|(f, _)| f.as_str())
                .find(|f| names(f, false))
        })
}

/// Two arrays of objects compared element by element by `field`: one line
/// for a change of order, and added, removed and changed elements named by
/// it (`$.products[name="Widget"].revenue: 10 -> 12`).
fn keyed_diff(
    path: &str,
    field: &str,
    x: &[serde_json::Value],
    y: &[serde_json::Value],
    out: &mut Vec<String>,
) {
    let id = |e: &serde_json::Value| e.get(field).map(ToString::to_string).unwrap_or_default();
    let at = |e: &serde_json::Value| format!("{path}[{field}={}]", short(&e[field]));
    let old: std::collections::HashMap<String, &serde_json::Value> =
        x.iter().map(|e| (id(e), e)).collect();
    let new: std::collections::HashMap<String, &serde_json::Value> =
        y.iter().map(|e| (id(e), e)).collect();
    // The order of the elements both arrays hold.
    let kept_old: Vec<String> = x.iter().map(id).filter(|k| new.contains_key(k)).collect();
    let kept_new: Vec<String> = y.iter().map(id).filter(|k| old.contains_key(k)).collect();
    if kept_old != kept_new {
        out.push(format!(
            "{path}: order changed ({} -> {})",
            cut(&kept_old.join(", ")),
            cut(&kept_new.join(", "))
        ));
    }
    for e in x {
        match new.get(&id(e)) {
            Some(w) => json_diff(&at(e), e, w, out),
            None => out.push(format!("{} removed (was {})", at(e), short(e))),
        }
    }
    for w in y {
        if !old.contains_key(&id(w)) {
            out.push(format!("{} added: {}", at(w), short(w)));
        }
    }
}

/// At most 80 characters of `s`, the cut said with `...`.
fn cut(s: &str) -> String {
    if s.chars().count() > 80 {
        format!("{}...", s.chars().take(80).collect::<String>())
    } else {
        s.to_string()
    }
}

fn short(v: &serde_json::Value) -> String {
    cut(&v.to_string())
}

/// At most this many characters of a text are quoted in a difference.
const QUOTED: usize = 160;

fn quote(s: &str) -> String {
    let escaped: String = s.chars().flat_map(char::escape_default).collect();
    if escaped.chars().count() > QUOTED {
        format!(
            "\"{}...\"",
            escaped.chars().take(QUOTED).collect::<String>()
        )
    } else {
        format!("\"{escaped}\"")
    }
}

/// `"old" -> "new"` (`none` for no text). Texts too long to quote whole
/// are both quoted from a little before where they first differ, so a
/// long text that changed near its end shows the change.
fn changed(old: Option<&str>, new: Option<&str>) -> String {
    let (Some(a), Some(b)) = (old, new) else {
        let q = |s: Option<&str>| s.map_or("none".to_string(), quote);
        return format!("{} -> {}", q(old), q(new));
    };
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let first = a
        .iter()
        .zip(&b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    // Quoted from the start when the change is within the first part.
    let from = if first + 40 < QUOTED { 0 } else { first - 40 };
    let excerpt = |t: &[char]| {
        let rest = t.get(from..).unwrap_or_default();
        let shown: String = rest
            .iter()
            .take(QUOTED)
            .flat_map(|c| c.escape_default())
            .collect();
        format!(
            "\"{}{shown}{}\"",
            if from > 0 { "..." } else { "" },
            if rest.len() > QUOTED { "..." } else { "" }
        )
    };
    format!("{} -> {}", excerpt(&a), excerpt(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_component_is_written_as_one_length_and_its_bytes() {
        // As format 3 wrote it: `Some`, the length as a varint, the bytes;
        // `None` as one zero byte; then (format 4) the chain's entries, here
        // none: one zero byte.
        let body = |wasm| FileBody {
            component: String::new(),
            report: StoredReport {
                summary: String::new(),
                cursor: None,
                prompt: None,
                described: false,
            },
            messages: Vec::new(),
            journal: Vec::new(),
            wasm,
            chain: Vec::new(),
        };
        let written = postcard::to_allocvec(&body(Some(vec![7; 300]))).unwrap();
        let tail = [&[1u8, 0xac, 0x02][..], &[7; 300], &[0]].concat();
        assert!(written.ends_with(&tail), "{written:?}");
        let read: FileBody = postcard::from_bytes(&written).unwrap();
        assert_eq!(read.wasm, Some(vec![7; 300]));
        let written = postcard::to_allocvec(&body(None)).unwrap();
        assert!(written.ends_with(&[0, 0]));
        assert_eq!(
            postcard::from_bytes::<FileBody>(&written).unwrap().wasm,
            None
        );
    }

    #[test]
    fn json_bodies_are_compared_field_by_field() {
        let old = br#"{"totals":{"orders":241,"revenue":15.5},"top":[{"p":"a"}]}"#;
        let new =
            br#"{"totals":{"orders":241,"revenue":16.0},"top":[{"p":"a"},{"p":"b"}],"extra":1}"#;
        let d = body_differences("message 1 (digest)", old, new);
        assert_eq!(
            d,
            [
                "message 1 (digest): $.top[p=\"b\"] added: {\"p\":\"b\"}",
                "message 1 (digest): $.totals.revenue: 15.5 -> 16.0",
                "message 1 (digest): $.extra added: 1",
            ]
        );
        let d = body_differences("m", b"hello", b"help!");
        assert_eq!(
            d,
            ["m: body differs (5 bytes -> 5 bytes, first difference at byte 3)"]
        );
    }

    fn diffs(old: &str, new: &str) -> Vec<String> {
        body_differences("m", old.as_bytes(), new.as_bytes())
    }

    #[test]
    fn a_reordered_array_of_named_objects_is_one_difference() {
        let items: Vec<String> = (0..20)
            .map(|i| format!(r#"{{"name":"p{i}","revenue":{i}}}"#))
            .collect();
        let mut reversed = items.clone();
        reversed.reverse();
        let old = format!(r#"{{"products":[{}]}}"#, items.join(","));
        let new = format!(r#"{{"products":[{}]}}"#, reversed.join(","));
        let d = diffs(&old, &new);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(
            d[0].starts_with("m: $.products: order changed (\"p0\", \"p1\""),
            "{d:?}"
        );
    }

    #[test]
    fn keyed_elements_are_named_when_they_change_come_or_go() {
        let old =
            r#"{"top_products":[{"name":"Widget","revenue":10},{"name":"Gadget","revenue":5}]}"#;
        let new =
            r#"{"top_products":[{"name":"Widget","revenue":12},{"name":"Gizmo","revenue":1}]}"#;
        assert_eq!(
            diffs(old, new),
            [
                r#"m: $.top_products[name="Widget"].revenue: 10 -> 12"#,
                r#"m: $.top_products[name="Gadget"] removed (was {"name":"Gadget","revenue":5})"#,
                r#"m: $.top_products[name="Gizmo"] added: {"name":"Gizmo","revenue":1}"#,
            ]
        );
        // `id` may be a number; `name` comes before `id`, `id` before `key`.
        let d = diffs(
            r#"[{"id":1,"v":"a"},{"id":2,"v":"b"}]"#,
            r#"[{"id":2,"v":"b"},{"id":1,"v":"c"}]"#,
        );
        assert_eq!(
            d,
            [
                "m: $: order changed (1, 2 -> 2, 1)",
                r#"m: $[id=1].v: "a" -> "c""#
            ]
        );
        // Without `name`, `id` or `key`: the first string field all share.
        let d = diffs(
            r#"[{"n":1,"product":"A"},{"n":2,"product":"B"}]"#,
            r#"[{"n":2,"product":"B"},{"n":3,"product":"A"}]"#,
        );
        assert_eq!(
            d,
            [
                r#"m: $: order changed ("A", "B" -> "B", "A")"#,
                r#"m: $[product="A"].n: 1 -> 3"#
            ]
        );
    }

    #[test]
    fn arrays_without_a_unique_key_are_compared_by_index() {
        // A `name` that repeats, and no other string field in all elements.
        let d = diffs(
            r#"[{"name":"a","v":1},{"name":"a","v":2}]"#,
            r#"[{"name":"a","v":2},{"name":"a","v":1}]"#,
        );
        assert_eq!(d, ["m: $[0].v: 1 -> 2", "m: $[1].v: 2 -> 1"]);
        // Elements that are not all objects.
        let d = diffs(r#"[1,{"name":"a"}]"#, r#"[2,{"name":"a"}]"#);
        assert_eq!(d, ["m: $[0]: 1 -> 2"]);
        // One element without the key.
        let d = diffs(r#"[{"name":"a"},{"v":1}]"#, r#"[{"v":1},{"name":"a"}]"#);
        assert_eq!(d.len(), 4, "{d:?}");
    }

    #[test]
    fn a_long_text_is_quoted_where_it_changed() {
        let head = "x".repeat(300);
        assert_eq!(
            changed(
                Some(&format!("{head} old end")),
                Some(&format!("{head} new end"))
            ),
            format!(
                "\"...{} old end\" -> \"...{} new end\"",
                "x".repeat(39),
                "x".repeat(39)
            )
        );
        assert_eq!(changed(Some("a\nb"), None), "\"a\\nb\" -> none");
        let long = "y".repeat(200);
        assert_eq!(
            changed(Some(&format!("A{long}")), Some(&format!("B{long}"))),
            format!("\"A{}...\" -> \"B{}...\"", &long[..159], &long[..159])
        );
    }

    #[test]
    fn params_are_parsed_and_overridden_in_order() {
        assert_eq!(
            parse_param("region=us").unwrap(),
            ("region".into(), "us".into())
        );
        assert_eq!(parse_param("q=a=b").unwrap(), ("q".into(), "a=b".into()));
        assert_eq!(
            parse_param("empty=").unwrap(),
            ("empty".into(), String::new())
        );
        for bad in ["region", "=us", ""] {
            let e = parse_param(bad).unwrap_err().to_string();
            assert!(e.contains("KEY=VALUE") && !e.contains('\n'), "{e}");
        }
        let e = parse_params(&["a=1".into(), "a=2".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("given twice"), "{e}");

        let mut r = recording(None);
        let o = r.override_params(&[("top".into(), "2".into()), ("extra".into(), "x".into())]);
        assert_eq!(o[0].to_string(), r#"parameter top overridden: "5" -> "2""#);
        assert_eq!(
            o[1].to_string(),
            r#"parameter extra added: "x" (the recorded run had none)"#
        );
        assert_eq!(
            r.journal.context.params,
            [
                ("extra".to_string(), "x".to_string()),
                ("top".to_string(), "2".to_string())
            ]
        );
    }

    #[test]
    fn verdicts_add_up_to_an_exit_code_and_a_summary() {
        let mut t = Tally::default();
        for _ in 0..7 {
            t.add(&Verdict::Identical {
                messages: 1,
                bytes: 3,
            });
        }
        assert_eq!(
            (t.to_string().as_str(), t.exit_code()),
            ("7 windows: 7 identical", 0)
        );
        t.add(&Verdict::Failed("trap".into()));
        assert_eq!(
            (t.to_string().as_str(), t.exit_code()),
            ("8 windows: 7 identical, 1 failed", 3)
        );
        t.add(&Verdict::Different(vec!["x".into()]));
        assert_eq!(t.exit_code(), 1);
        let mut one = Tally::default();
        one.add(&Verdict::Different(vec![]));
        assert_eq!(one.to_string(), "1 window: 0 identical, 1 different");
    }

    fn context() -> Context {
        Context {
            key: "j:2026-11-08".into(),
            job: "j".into(),
            label: "2026-11-08".into(),
            start: (1_794_096_000, 0),
            end: (1_794_182_400, 0),
            timezone: "UTC".into(),
            window_kind: "day".into(),
            now: (1_794_182_700, 5),
            cursor: None,
            attempt: 1,
            destinations: vec!["digest".into()],
            params: vec![("top".into(), "5".into())],
            seed: [7; 32],
            outbox_limits: (100, 1 << 22, 1 << 24),
            limits: (256 << 20, 30_000, 65_536, 1 << 20),
            revision: 1,
        }
    }

    /// A recording of a run by the component `wasm` (or some other one).
    fn recording(wasm: Option<&[u8]>) -> Recording {
        let stored = crate::guest::journal::Recorder::new(&context(), 1 << 20)
            .finish()
            .unwrap();
        let digest = Sha256::digest(wasm.unwrap_or(b"another component"));
        Recording {
            journal: Journal::decode(&stored).unwrap(),
            stored_journal: stored,
            component: format!("sha256:{}", hex::encode(digest)),
            report: StoredReport {
                summary: "s".into(),
                cursor: None,
                prompt: None,
                described: false,
            },
            messages: Vec::new(),
            embedded: None,
            bodies_pruned: false,
            chain: Vec::new(),
        }
    }

    /// `body` as a replay file of `format`.
    fn file_of(format: u32, body: &impl serde::Serialize) -> Vec<u8> {
        let plain = postcard::to_stdvec(body).unwrap();
        let mut out = FILE_MAGIC.to_vec();
        out.extend_from_slice(&format.to_le_bytes());
        out.extend_from_slice(&Sha256::digest(&plain));
        out.extend_from_slice(&zstd::stream::encode_all(&plain[..], 3).unwrap());
        out
    }

    #[test]
    fn a_replay_file_carries_the_component_that_ran_and_only_that() {
        let wasm = b"\0asm the component".to_vec();
        let mut r = recording(Some(&wasm));
        let e = r
            .embed("other.wasm", b"other bytes".to_vec())
            .unwrap_err()
            .to_string();
        assert!(e.contains("other.wasm") && e.contains(&r.component), "{e}");
        r.embed("c.wasm", wasm.clone()).unwrap();
        let back = Recording::from_file(&r.to_file().unwrap()).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.embedded.as_deref(), Some(&wasm[..]));

        // Without it, the file says so.
        r.embedded = None;
        let back = Recording::from_file(&r.to_file().unwrap()).unwrap();
        assert_eq!(back.embedded, None);

        // A file whose component is not the one it says ran (a valid
        // checksum, made by hand) is refused.
        let forged = FileBody {
            component: r.component.clone(),
            report: r.report.clone(),
            messages: Vec::new(),
            journal: r.stored_journal.clone(),
            wasm: Some(b"something else".to_vec()),
            chain: Vec::new(),
        };
        let e = Recording::from_file(&file_of(FILE_FORMAT, &forged))
            .unwrap_err()
            .to_string();
        assert!(e.contains("it was altered"), "{e}");
    }

    #[test]
    fn a_format_2_file_is_read_as_it_was() {
        #[derive(serde::Serialize)]
        struct V2<'a> {
            component: &'a str,
            report: &'a StoredReport,
            messages: Vec<StagedMessage>,
            journal: &'a [u8],
        }
        let r = recording(None);
        let v2 = V2 {
            component: &r.component,
            report: &r.report,
            messages: Vec::new(),
            journal: &r.stored_journal,
        };
        let back = Recording::from_file(&file_of(2, &v2)).unwrap();
        assert_eq!(back, r);
    }
}
