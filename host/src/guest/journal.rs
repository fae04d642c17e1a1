//! The journal of one run: the context the guest was given and every answer
//! the host gave it afterwards, in order (the source's columns and batches,
//! each outbox acknowledgement, each log acknowledgement, each answer of
//! the zone's offsets). Clock and random
//! readings need no entries: the wall clock is pinned to the context's
//! `now`, the monotonic clock ticks deterministically, and random numbers
//! come from the recorded seed. With the journal and the same component, a
//! run can be replayed bit for bit without its data source. A replay
//! computes the zone's offsets again (they depend only on the recorded
//! zone and the range asked, and the zone database is the binary's own);
//! their entries are kept so that a flood of calls meets the journal's
//! limit, and to show what the run was told.
//!
//! Stored form: a 4-byte little-endian format number, then a zstd stream of
//! length-prefixed postcard records, the context first. A newer format is
//! refused with a message saying so; a damaged or truncated journal is an
//! error, never a panic.
//!
//! A journal is bounded: text a guest hands the host is kept whole only
//! when it is short ([`Given`]), and the records together may not pass the
//! job's `limits.max_journal_bytes` ([`Recorder::overflowed`]): the run is
//! stopped there instead, and nothing past the bound is kept.

use std::io::{Read, Write};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};

pub use crate::core::text::Given;
use crate::guest::outbox::StageError;
use crate::guest::source::{Batch, ColumnInfo, Fingerprint, SourceError};
use crate::guest::zone::{OffsetError, OffsetSpan};

/// The journal format this host writes; it reads this one and every
/// earlier one. 2: `outbox.send` entries keep long text as its head and
/// length ([`Entry::Send`]). 3: the context names the run's revision
/// ([`Context::revision`]; earlier journals are of revision 1). 4: the
/// zone's offsets ([`Entry::Zone`]).
pub const FORMAT: u32 = 4;

/// The largest record either side accepts (a batch of a million wide rows
/// is far below it); a larger length is damage, not data.
const MAX_RECORD: usize = 256 << 20;

/// The most a journal may decompress to: a bound on the memory a damaged or
/// hostile journal can take (a million rows of the reference report's kind
/// take about 16 MiB, 5.5 MiB compressed). No job may allow its journal
/// more (`limits.max_journal_bytes`).
pub const MAX_PLAIN: u64 = 1 << 30;

/// Decompresses a zstd stream of at most `limit` bytes.
///
/// # Errors
///
/// The decoder's error, or a stream that would exceed `limit`.
pub fn inflate(stream: &[u8], limit: u64) -> std::io::Result<Vec<u8>> {
    let mut plain = Vec::new();
    zstd::stream::Decoder::new(stream)?
        .take(limit + 1)
        .read_to_end(&mut plain)?;
    if plain.len() as u64 > limit {
        return Err(std::io::Error::other(format!(
            "it would decompress to more than {} MiB",
            limit >> 20
        )));
    }
    Ok(plain)
}

/// What the guest was given to start with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Context {
    /// The window key.
    pub key: String,
    /// The job.
    pub job: String,
    /// The window's civil label.
    pub label: String,
    /// Window start, Unix seconds and nanoseconds, UTC.
    pub start: (i64, u32),
    /// Window end (exclusive).
    pub end: (i64, u32),
    /// IANA zone.
    pub timezone: String,
    /// `hour`, `day`, `week` or `month`.
    pub window_kind: String,
    /// The run's clock reading (the guest's pinned wall clock).
    pub now: (i64, u32),
    /// The job's cursor given to the guest.
    pub cursor: Option<String>,
    /// The attempt number given to the guest.
    pub attempt: u32,
    /// Destination names, sorted.
    pub destinations: Vec<String>,
    /// Parameters, sorted by name.
    pub params: Vec<(String, String)>,
    /// The seed of the guest's random numbers.
    pub seed: [u8; 32],
    /// Staging limits: messages, bytes per message, bytes in all.
    pub outbox_limits: (u32, u64, u64),
    /// Guest limits: memory bytes, time in milliseconds, output bytes,
    /// report bytes.
    pub limits: (u64, u64, u64, u64),
    /// The window's revision, from 1 (a rerun's messages carry it in their
    /// idempotency keys).
    pub revision: u32,
}

/// [`Context`] as formats 1 and 2 wrote it, before revisions.
#[derive(Deserialize)]
struct ContextV2 {
    key: String,
    job: String,
    label: String,
    start: (i64, u32),
    end: (i64, u32),
    timezone: String,
    window_kind: String,
    now: (i64, u32),
    cursor: Option<String>,
    attempt: u32,
    destinations: Vec<String>,
    params: Vec<(String, String)>,
    seed: [u8; 32],
    outbox_limits: (u32, u64, u64),
    limits: (u64, u64, u64, u64),
}

impl From<ContextV2> for Context {
    fn from(c: ContextV2) -> Context {
        Context {
            key: c.key,
            job: c.job,
            label: c.label,
            start: c.start,
            end: c.end,
            timezone: c.timezone,
            window_kind: c.window_kind,
            now: c.now,
            cursor: c.cursor,
            attempt: c.attempt,
            destinations: c.destinations,
            params: c.params,
            seed: c.seed,
            outbox_limits: c.outbox_limits,
            limits: c.limits,
            revision: 1,
        }
    }
}

/// One answer the host gave, in the order given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Entry {
    /// `source.open`.
    Open(Result<(), SourceError>),
    /// `cursor.columns`.
    Columns(Vec<ColumnInfo>),
    /// `cursor.next-batch(max_rows)`.
    Batch {
        /// What the guest asked for.
        max_rows: u32,
        /// What it got.
        answer: Result<Option<Batch>, SourceError>,
    },
    /// The guest dropped its cursor.
    CloseCursor,
    /// `outbox.send` in a format-1 journal, its text kept whole. Read,
    /// never written any more.
    SendV1 {
        /// The destination named.
        destination: String,
        /// The content type given.
        content_type: String,
        /// The body's size.
        bytes: u64,
        /// The sequence number, or why it was refused.
        answer: Result<u32, StageError>,
    },
    /// `log.emit` (acknowledged; the level only).
    Log(u8),
    /// `outbox.send`: what was asked (the body by size; the staged bytes
    /// are kept with the run; long text by its head and length) and the
    /// answer.
    Send {
        /// The destination named.
        destination: Given,
        /// The content type given.
        content_type: Given,
        /// The body's size.
        bytes: u64,
        /// The sequence number, or why it was refused.
        answer: Result<u32, StageError>,
    },
    /// `zone.offsets`: the range asked (as the guest gave it) and the
    /// answer.
    Zone {
        /// `from`, seconds and nanoseconds.
        from: (i64, u32),
        /// `to`, seconds and nanoseconds.
        to: (i64, u32),
        /// The spans, or why there were none.
        answer: Result<Vec<OffsetSpan>, OffsetError>,
    },
}

/// The same records, borrowed, for writing without copying batches.
#[derive(Serialize)]
enum EntryRef<'a> {
    Open(&'a Result<(), SourceError>),
    Columns(&'a [ColumnInfo]),
    Batch {
        max_rows: u32,
        answer: Result<Option<&'a Batch>, &'a SourceError>,
    },
    CloseCursor,
    /// Never written: keeps the variants' numbers those of [`Entry`].
    #[allow(dead_code)]
    SendV1,
    Log(u8),
    Send {
        destination: &'a Given,
        content_type: &'a Given,
        bytes: u64,
        answer: &'a Result<u32, StageError>,
    },
    Zone {
        from: (i64, u32),
        to: (i64, u32),
        answer: &'a Result<Vec<OffsetSpan>, OffsetError>,
    },
}

/// Writes a journal as the run goes. Records are encoded on the caller's
/// thread and compressed on a thread of their own, so that compression
/// overlaps the guest's work instead of adding to it. A failure to record
/// is remembered and reported when the journal is finished. Records past
/// the journal's limit are not kept: the recorder says it overflowed, and
/// the run is stopped.
pub struct Recorder {
    tx: Option<SyncSender<Vec<u8>>>,
    compressor: Option<JoinHandle<Result<Vec<u8>, String>>>,
    failed: Option<String>,
    entries: u64,
    /// Encoded bytes recorded so far, framing included.
    plain: u64,
    /// The most encoded bytes the journal may hold.
    limit: u64,
    overflowed: bool,
    /// What the guest read, whatever the journal keeps of it.
    fingerprint: Fingerprint,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Recorder({} entries)", self.entries)
    }
}

/// zstd's level for journals: its fastest, since the journal is written on
/// every run and read only by a replay.
const LEVEL: i32 = 1;

impl Recorder {
    /// A journal that starts with `context` and holds at most `limit`
    /// encoded bytes.
    pub fn new(context: &Context, limit: u64) -> Recorder {
        let (tx, rx) = sync_channel::<Vec<u8>>(8);
        let compressor = std::thread::Builder::new()
            .name("jobhost-journal".to_string())
            .spawn(move || {
                let mut out = zstd::stream::Encoder::new(FORMAT.to_le_bytes().to_vec(), LEVEL)
                    .and_then(|mut e| e.include_checksum(true).map(|()| e))
                    .map_err(|e| format!("cannot start the journal's compressor: {e}"))?;
                for record in rx {
                    out.write_all(&record)
                        .map_err(|e| format!("cannot write the journal: {e}"))?;
                }
                out.finish()
                    .map_err(|e| format!("cannot finish the journal: {e}"))
            });
        let mut r = Recorder {
            tx: None,
            compressor: None,
            failed: None,
            entries: 0,
            plain: 0,
            limit,
            overflowed: false,
            fingerprint: Fingerprint::default(),
        };
        match compressor {
            Ok(handle) => {
                r.tx = Some(tx);
                r.compressor = Some(handle);
            }
            Err(e) => r.failed = Some(format!("cannot start the journal's thread: {e}")),
        }
        r.write(context);
        r
    }

    fn write(&mut self, record: &impl Serialize) {
        if self.overflowed {
            return;
        }
        let Some(tx) = self.tx.as_ref() else { return };
        // Encoded once, straight after a length placeholder that is filled
        // in afterwards: a batch is not copied a second time to frame it.
        let framed = postcard::to_extend(record, vec![0u8; 4])
            .map_err(|e| e.to_string())
            .and_then(|mut framed| {
                let len = framed.len() - 4;
                if len > MAX_RECORD {
                    return Err(format!("a record of {len} bytes is too large"));
                }
                let len = u32::try_from(len).map_err(|_| "record too large".to_string())?;
                framed[..4].copy_from_slice(&len.to_le_bytes());
                Ok(framed)
            });
        let framed = match framed {
            Ok(f) if self.plain + f.len() as u64 > self.limit => {
                // Nothing past the bound is kept, nor compressed.
                self.overflowed = true;
                self.tx = None;
                return;
            }
            other => other,
        };
        let sent = framed.and_then(|f| {
            self.plain += f.len() as u64;
            tx.send(f)
                .map_err(|_| "the journal's compressor stopped".to_string())
        });
        if let Err(e) = sent {
            self.failed = Some(format!("cannot write the journal: {e}"));
            self.tx = None;
        }
    }

    /// Records `source.open`'s answer.
    pub fn open(&mut self, answer: &Result<(), SourceError>) {
        if answer.is_ok() {
            self.fingerprint.opened();
        }
        self.entries += 1;
        self.write(&EntryRef::Open(answer));
    }

    /// Records `cursor.columns`'s answer.
    pub fn columns(&mut self, columns: &[ColumnInfo]) {
        self.entries += 1;
        self.write(&EntryRef::Columns(columns));
    }

    /// Records `cursor.next-batch`'s answer.
    pub fn batch(&mut self, max_rows: u32, answer: &Result<Option<Batch>, SourceError>) {
        if let Ok(b) = answer {
            self.fingerprint.add(b.as_ref());
        }
        self.entries += 1;
        let answer = match answer {
            Ok(b) => Ok(b.as_ref()),
            Err(e) => Err(e),
        };
        self.write(&EntryRef::Batch { max_rows, answer });
    }

    /// What the guest read so far: every row of every batch it received,
    /// whether or not the journal could keep it.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// Records that the guest dropped its cursor.
    pub fn close_cursor(&mut self) {
        self.entries += 1;
        self.write(&EntryRef::CloseCursor);
    }

    /// Records `outbox.send`'s answer.
    pub fn send(
        &mut self,
        destination: &Given,
        content_type: &Given,
        bytes: u64,
        answer: &Result<u32, StageError>,
    ) {
        self.entries += 1;
        self.write(&EntryRef::Send {
            destination,
            content_type,
            bytes,
            answer,
        });
    }

    /// Records a log acknowledgement.
    pub fn log(&mut self, level: u8) {
        self.entries += 1;
        self.write(&EntryRef::Log(level));
    }

    /// Records `zone.offsets`'s answer to the range `from`, `to`.
    pub fn zone(
        &mut self,
        from: (i64, u32),
        to: (i64, u32),
        answer: &Result<Vec<OffsetSpan>, OffsetError>,
    ) {
        self.entries += 1;
        self.write(&EntryRef::Zone { from, to, answer });
    }

    /// Whether a record would have taken the journal past its limit (and
    /// was not kept, nor anything after it).
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Encoded bytes recorded so far.
    pub fn recorded_bytes(&self) -> u64 {
        self.plain
    }

    /// The finished journal.
    ///
    /// # Errors
    ///
    /// Why it could not be written, or that it overflowed.
    pub fn finish(mut self) -> Result<Vec<u8>, String> {
        if self.overflowed {
            return Err(format!(
                "the journal passed its limit of {} bytes",
                self.limit
            ));
        }
        drop(self.tx.take());
        let compressed = self
            .compressor
            .take()
            .ok_or_else(|| "the journal was not started".to_string())
            .and_then(|h| {
                h.join()
                    .map_err(|_| "the journal's compressor failed".to_string())?
            });
        match self.failed.take() {
            Some(e) => Err(e),
            None => compressed,
        }
    }
}

/// A journal read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Journal {
    /// What the guest was given.
    pub context: Context,
    /// Every later answer, in order.
    pub entries: Vec<Entry>,
}

impl Journal {
    /// Reads a stored journal.
    ///
    /// # Errors
    ///
    /// A one-line reason: a newer format, or damage (truncated, corrupt).
    pub fn decode(stored: &[u8]) -> Result<Journal, String> {
        let (format, stream) = stored
            .split_first_chunk::<4>()
            .ok_or("the journal is empty or truncated")?;
        let format = u32::from_le_bytes(*format);
        if format > FORMAT {
            return Err(format!(
                "the journal has format {format}, newer than this jobhost reads ({FORMAT}); upgrade jobhost"
            ));
        }
        if format == 0 {
            return Err("the journal is damaged (format 0)".to_string());
        }
        let plain = inflate(stream, MAX_PLAIN)
            .map_err(|e| format!("the journal is damaged or truncated: {e}"))?;
        let mut records = Records { rest: &plain };
        let context: Context = if format < 3 {
            records
                .next::<ContextV2>()
                .ok_or("the journal holds no context")??
                .into()
        } else {
            records.next().ok_or("the journal holds no context")??
        };
        let entries = records.collect::<Result<Vec<Entry>, String>>()?;
        for e in &entries {
            if let Entry::Batch {
                answer: Ok(Some(b)),
                ..
            } = e
            {
                b.validate()
                    .map_err(|why| format!("the journal is damaged: {why}"))?;
            }
        }
        Ok(Journal { context, entries })
    }
}

struct Records<'a> {
    rest: &'a [u8],
}

impl Records<'_> {
    fn next<T: for<'de> Deserialize<'de>>(&mut self) -> Option<Result<T, String>> {
        if self.rest.is_empty() {
            return None;
        }
        let Some((len, rest)) = self.rest.split_first_chunk::<4>() else {
            return Some(Err(
                "the journal is damaged: a record is cut short".to_string()
            ));
        };
        let len = u32::from_le_bytes(*len) as usize;
        if len > MAX_RECORD || len > rest.len() {
            return Some(Err(
                "the journal is damaged: a record is cut short".to_string()
            ));
        }
        let (record, rest) = rest.split_at(len);
        self.rest = rest;
        Some(postcard::from_bytes(record).map_err(|e| format!("the journal is damaged: {e}")))
    }
}

impl Iterator for Records<'_> {
    type Item = Result<Entry, String>;

    fn next(&mut self) -> Option<Self::Item> {
        Records::next::<Entry>(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest::source::{Column, ColumnData, ColumnKind};

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
            cursor: Some("c".into()),
            attempt: 1,
            destinations: vec!["digest".into()],
            params: vec![("top".into(), "5".into())],
            seed: [7; 32],
            outbox_limits: (100, 1 << 22, 1 << 24),
            limits: (256 << 20, 30_000, 65_536, 1 << 20),
            revision: 1,
        }
    }

    /// The context as formats 1 and 2 wrote it: without its last field,
    /// the revision (a one-byte varint for revision 1).
    fn context_before_revisions() -> Vec<u8> {
        let mut record = postcard::to_stdvec(&context()).unwrap();
        assert_eq!(record.pop(), Some(1), "the revision is the last field");
        record
    }

    fn batch() -> Batch {
        Batch {
            rows: 2,
            columns: vec![Column {
                nulls: Some(vec![0b10]),
                data: ColumnData::Real(vec![1.5, f64::INFINITY]),
            }],
        }
    }

    fn span() -> OffsetSpan {
        OffsetSpan {
            start: jiff::Timestamp::MIN,
            end: jiff::Timestamp::MAX,
            offset_seconds: -18_000,
        }
    }

    /// No limit a test journal reaches.
    const ROOMY: u64 = 1 << 30;

    fn recorded() -> Vec<u8> {
        let mut r = Recorder::new(&context(), ROOMY);
        r.open(&Ok(()));
        r.columns(&[ColumnInfo {
            name: "amount".into(),
            kind: ColumnKind::Real,
        }]);
        r.batch(8192, &Ok(Some(batch())));
        r.batch(8192, &Ok(None));
        r.close_cursor();
        let text = |t: &str| Given::new(t, 64);
        r.send(&text("digest"), &text("application/json"), 2, &Ok(1));
        r.send(
            &text("nope"),
            &text("text/plain"),
            0,
            &Err(StageError::UnknownDestination("nope".into())),
        );
        r.log(2);
        r.zone(
            (1, 0),
            (0, 0),
            &Err(OffsetError::InvalidRange("inverted".into())),
        );
        r.zone((0, 0), (0, 0), &Ok(vec![span()]));
        r.finish().unwrap()
    }

    #[test]
    fn a_journal_reads_back_exactly_as_recorded() {
        let j = Journal::decode(&recorded()).unwrap();
        assert_eq!(j.context, context());
        assert_eq!(j.entries.len(), 10);
        assert_eq!(
            j.entries[9],
            Entry::Zone {
                from: (0, 0),
                to: (0, 0),
                answer: Ok(vec![span()])
            }
        );
        assert_eq!(
            j.entries[2],
            Entry::Batch {
                max_rows: 8192,
                answer: Ok(Some(batch()))
            }
        );
        assert_eq!(
            j.entries[6],
            Entry::Send {
                destination: Given::Whole("nope".into()),
                content_type: Given::Whole("text/plain".into()),
                bytes: 0,
                answer: Err(StageError::UnknownDestination("nope".into()))
            }
        );
    }

    #[test]
    fn long_text_from_a_guest_is_kept_as_its_head_and_length() {
        let name = "é".repeat(1 << 19); // 1 MiB
        let kept = Given::new(&name, 63);
        let Given::Cut { head, bytes } = &kept else {
            panic!("a 1 MiB name is not kept whole")
        };
        // 63 bytes would split the 32nd "é": the head stops before it.
        assert_eq!((head.len(), *bytes), (62, 1 << 20));
        assert_eq!(kept.shown(), format!("{}…", "é".repeat(31)));
        assert_eq!(Given::new("digest", 64), Given::Whole("digest".into()));
    }

    #[test]
    fn a_journal_stops_at_its_limit_and_keeps_nothing_past_it() {
        let mut r = Recorder::new(&context(), 4096);
        let name = Given::new("x", 64);
        let mut kept = 0;
        while !r.overflowed() {
            r.send(
                &name,
                &name,
                0,
                &Err(StageError::UnknownDestination("x".into())),
            );
            kept += 1;
            assert!(kept < 10_000, "the limit is never reached");
        }
        assert!(r.recorded_bytes() <= 4096, "{}", r.recorded_bytes());
        let err = r.finish().unwrap_err();
        assert!(err.contains("limit of 4096 bytes"), "{err}");
    }

    #[test]
    fn a_format_1_journal_is_still_read() {
        // The replay fixtures of tests/fixtures were recorded in format 1.
        #[derive(Serialize)]
        #[allow(dead_code)] // only `Send` is written; the others number it
        enum V1<'a> {
            _Open,
            _Columns,
            _Batch,
            _CloseCursor,
            Send {
                destination: &'a str,
                content_type: &'a str,
                bytes: u64,
                answer: Result<u32, StageError>,
            },
        }
        let mut plain = Vec::new();
        for record in [
            context_before_revisions(),
            postcard::to_stdvec(&V1::Send {
                destination: "digest",
                content_type: "application/json",
                bytes: 2,
                answer: Ok(1),
            })
            .unwrap(),
        ] {
            plain.extend_from_slice(&(record.len() as u32).to_le_bytes());
            plain.extend_from_slice(&record);
        }
        let mut stored = 1u32.to_le_bytes().to_vec();
        stored.extend(zstd::stream::encode_all(&plain[..], 1).unwrap());
        let j = Journal::decode(&stored).unwrap();
        assert_eq!(j.context, context(), "an older context reads as revision 1");
        assert_eq!(
            j.entries,
            [Entry::SendV1 {
                destination: "digest".into(),
                content_type: "application/json".into(),
                bytes: 2,
                answer: Ok(1)
            }]
        );
    }

    #[test]
    fn a_journal_keeps_the_revision_of_its_run() {
        let rerun = Context {
            revision: 3,
            ..context()
        };
        let r = Recorder::new(&rerun, ROOMY);
        let j = Journal::decode(&r.finish().unwrap()).unwrap();
        assert_eq!(j.context.revision, 3);
    }

    #[test]
    fn a_malformed_batch_is_damage_not_data() {
        let mut r = Recorder::new(&context(), ROOMY);
        let bad = Batch {
            rows: 100_000,
            columns: vec![Column {
                nulls: None,
                data: ColumnData::Integer(vec![1, 2, 3]),
            }],
        };
        r.batch(4096, &Ok(Some(bad)));
        let err = Journal::decode(&r.finish().unwrap()).unwrap_err();
        assert!(
            err.contains("damaged") && err.contains("malformed"),
            "{err}"
        );
    }

    #[test]
    fn damaged_truncated_and_newer_journals_are_refused_with_a_reason() {
        let good = recorded();
        let mut newer = good.clone();
        newer[..4].copy_from_slice(&(FORMAT + 1).to_le_bytes());
        let err = Journal::decode(&newer).unwrap_err();
        assert!(err.contains("newer than this jobhost reads"), "{err}");
        for cut in [0, 3, 4, 10, good.len() / 2, good.len() - 1] {
            let err = Journal::decode(&good[..cut]).unwrap_err();
            assert!(
                err.contains("truncated") || err.contains("damaged"),
                "{cut}: {err}"
            );
        }
        let mut flipped = good.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0xff;
        assert!(Journal::decode(&flipped).is_err());
    }
}
