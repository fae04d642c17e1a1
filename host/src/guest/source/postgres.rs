//! A PostgreSQL data source: one query, read in one `REPEATABLE READ READ
//! ONLY` transaction (the whole window is one snapshot, and a write fails
//! with PostgreSQL's own error), its rows fetched through a portal a chunk
//! at a time (the next fetch runs on a thread of its own while the reader
//! turns the last into a batch), so a window of any size streams in
//! bounded memory. The
//! connection follows the store's URL rules (`sslmode`, `sslrootcert`, the
//! password shown as `***`). Every fetch may run at most the job's
//! `timeout_seconds` (the session's `statement_timeout`), and the run's
//! deadline cancels a fetch still running (the PostgreSQL cancel request).
//! The session's `TimeZone` is UTC, or the job's zone when the job reads
//! times without a zone as local times there (`naive_timestamps =
//! "job-zone"`), so that the server's own conversion of such a column in
//! the query (`created_at >= $1`) reads it as the values are read.
//!
//! The window is bound, never written into the SQL:
//!
//! | parameter | value | type |
//! |---|---|---|
//! | `$1`, `$2` | the window's start and end, `[start, end)` | `timestamptz` |
//! | `$3`, `$4` | the same, in Unix seconds | `int8` |
//! | `$5`, `$6` | the same, in Unix milliseconds | `int8` |
//!
//! A query uses at least one start and one end, and no other parameter.
//!
//! Columns arrive as the guest's four kinds:
//!
//! | PostgreSQL | kind |
//! |---|---|
//! | `int2`, `int4`, `int8`, `oid` | integer |
//! | `bool` | integer, 0 or 1 |
//! | `timestamptz` | integer, Unix seconds (rounded down) |
//! | `timestamp`, `date` | integer, Unix seconds of the value read in the zone `naive_timestamps` names (a `date` as its midnight); refused without it |
//! | `float4`, `float8` | real |
//! | `numeric` | real, the nearest double (exact to 15 significant digits) |
//! | `text`, `varchar`, `bpchar`, `name`, `json`, `jsonb`, `uuid`, enums | text |
//! | `bytea` | blob |
//!
//! A domain reads as its base type. Any other type is refused before the
//! claim, naming the column, its type and a cast that reads it.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::{Duration, SystemTime};

use postgres::error::{ErrorPosition, SqlState};
use postgres::types::{FromSql, Kind, ToSql, Type};
use postgres::{IsolationLevel, Portal, Row, Transaction};

use super::batch::{Chunk, ColumnInfo, ColumnKind, Value};
use super::cursor::{Query, Reader};
use super::{Bounds, NaiveTimes, Source, SourceError, SourceKind};
use crate::store::PostgresUrl;
use crate::store::postgres::connect::{self as pg_connect, Canceller, Role, error_line};

/// Seconds from the Unix epoch to PostgreSQL's, 2000-01-01 UTC.
const PG_EPOCH: i64 = 946_684_800;

/// What the window parameters are, for messages.
const PARAMETERS: &str = "$1/$2 (the window's start and end as timestamptz), $3/$4 (Unix seconds) or $5/$6 \
     (Unix milliseconds)";

/// A PostgreSQL source's settings: the database, the query, how long one
/// fetch may run, and how a `timestamp` or `date` is read.
#[derive(Debug, Clone, PartialEq)]
pub struct PostgresSpec {
    /// The database.
    pub url: PostgresUrl,
    /// The query, using `$1`..`$6` for the window.
    pub query: String,
    /// The longest one fetch may run (the session's `statement_timeout`).
    pub timeout: Duration,
    /// How a `timestamp` (without time zone) or a `date` is read; also the
    /// session's `TimeZone`.
    pub naive: NaiveTimes,
}

impl From<PostgresSpec> for Source {
    fn from(spec: PostgresSpec) -> Source {
        Source::new(spec)
    }
}

/// Checks what can be checked of a query without a database: it is a
/// query (`SELECT`, `WITH`, `VALUES`, `TABLE`), it uses a start and an end
/// of the window, and no parameter besides them.
///
/// # Errors
///
/// One line saying what is wrong and how to fix it.
pub fn check_query(query: &str) -> std::result::Result<(), String> {
    let scan = scan(query);
    match scan.first.as_deref() {
        None => {
            return Err(
                "invalid source query: it is empty; give a SELECT over the window".to_string(),
            );
        }
        Some(w)
            if ["select", "with", "values", "table"].contains(&w.to_ascii_lowercase().as_str()) => {
        }
        Some(w) => {
            return Err(format!(
                "invalid source query: it starts with `{w}`; a source query is a SELECT (or \
                 WITH, VALUES, TABLE) and runs in a read-only transaction"
            ));
        }
    }
    if let Some(n) = scan.params.iter().find(|n| !(1..=6).contains(*n)) {
        return Err(format!(
            "invalid source query: unknown parameter `${n}`; use {PARAMETERS}"
        ));
    }
    let uses = |set: [u64; 3]| set.iter().any(|n| scan.params.contains(n));
    if !uses([1, 3, 5]) || !uses([2, 4, 6]) {
        return Err(format!(
            "invalid source query: it must restrict rows to the window with a start and an \
             end (for example `WHERE created_at >= $1 AND created_at < $2`); use {PARAMETERS}"
        ));
    }
    Ok(())
}

/// What a query's text says of itself: its first word, and the numbers of
/// the `$n` parameters it uses outside strings, quoted names and comments.
struct Scan {
    first: Option<String>,
    params: BTreeSet<u64>,
}

fn scan(sql: &str) -> Scan {
    let b = sql.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80;
    let mut out = Scan {
        first: None,
        params: BTreeSet::new(),
    };
    let mut decided = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        // `$` continues a name (`a$1` is one name, not a parameter).
        let after_name = i > 0 && (word(b[i - 1]) || b[i - 1] == b'$');
        let next = b.get(i + 1).copied();
        match c {
            b'-' if next == Some(b'-') => {
                i = b[i..]
                    .iter()
                    .position(|&x| x == b'\n')
                    .map_or(b.len(), |p| i + p);
                continue;
            }
            b'/' if next == Some(b'*') => {
                let mut depth = 0usize;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                continue;
            }
            _ => {}
        }
        if !decided && !c.is_ascii_whitespace() && c != b'(' {
            decided = true;
            let end = b[i..]
                .iter()
                .position(|&x| !word(x))
                .map_or(b.len(), |p| i + p);
            // A character that begins no name is ASCII: a whole character.
            let first = if end > i {
                &sql[i..end]
            } else {
                &sql[i..i + 1]
            };
            out.first = Some(first.to_string());
        }
        match c {
            b'\'' => {
                // E'...' strings escape with a backslash.
                let escapes = i > 0 && (b[i - 1] | 0x20) == b'e' && !(i > 1 && word(b[i - 2]));
                i += 1;
                while i < b.len() {
                    match b[i] {
                        b'\\' if escapes => i += 2,
                        b'\'' if b.get(i + 1) == Some(&b'\'') => i += 2,
                        b'\'' => break,
                        _ => i += 1,
                    }
                }
                i += 1;
            }
            b'"' => {
                i += 1;
                while i < b.len() {
                    match b[i] {
                        b'"' if b.get(i + 1) == Some(&b'"') => i += 2,
                        b'"' => break,
                        _ => i += 1,
                    }
                }
                i += 1;
            }
            b'$' if !after_name && next.is_some_and(|d| d.is_ascii_digit()) => {
                let end = b[i + 1..]
                    .iter()
                    .position(|x| !x.is_ascii_digit())
                    .map_or(b.len(), |p| i + 1 + p);
                let n = sql[i + 1..end].bytes().fold(0u64, |n, d| {
                    n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                });
                out.params.insert(n);
                i = end;
            }
            b'$' if !after_name => {
                // A dollar-quoted string: `$$...$$` or `$tag$...$tag$`.
                // (A tag never starts with a digit: that is a parameter.)
                let tag_end = b[i + 1..].iter().position(|&x| !word(x)).map(|p| i + 1 + p);
                match tag_end {
                    Some(t) if b[t] == b'$' => {
                        let tag = &b[i..=t];
                        let body = t + 1;
                        i = b[body..]
                            .windows(tag.len())
                            .position(|w| w == tag)
                            .map_or(b.len(), |p| body + p + tag.len());
                    }
                    _ => i += 1,
                }
            }
            _ if word(c) => {
                // Skip the whole name, so a `$` inside it is part of it.
                i = b[i..]
                    .iter()
                    .position(|&x| !(word(x) || x == b'$'))
                    .map_or(b.len(), |p| i + p);
            }
            _ => i += 1,
        }
    }
    out
}

impl SourceKind for PostgresSpec {
    fn query(&self) -> Option<&str> {
        Some(&self.query)
    }

    fn location(&self) -> String {
        self.url.to_string()
    }

    fn start(&self, bounds: Bounds, reader: Reader) {
        if let Err(e) = check_query(&self.query) {
            return reader.refuse(e);
        }
        let (mut client, canceller) = match pg_connect::connect_as(&self.url, Role::Source) {
            Ok(c) => c,
            Err(e) => return reader.refuse(e.chain()),
        };
        let url = &self.url;
        let mut tx = match client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
        {
            Ok(tx) => tx,
            Err(e) => {
                return reader.fail(format!(
                    "cannot start a read-only transaction on data source `{url}`: {}",
                    error_line(&e)
                ));
            }
        };
        let timeout_ms = self.timeout.as_millis().clamp(1, i32::MAX as u128);
        if let Err(e) = tx.batch_execute(&format!("SET LOCAL statement_timeout = {timeout_ms}")) {
            return reader.fail(format!(
                "cannot set up the session of data source `{url}`: {}",
                error_line(&e)
            ));
        }
        let zone = self.naive.session_zone();
        if let Err(e) = tx.execute("SELECT set_config('TimeZone', $1, true)", &[&zone]) {
            if e.code() == Some(&SqlState::INVALID_PARAMETER_VALUE) {
                return reader.refuse(format!(
                    "data source `{url}` does not know the time zone `{zone}`, the job's, in \
                     which `naive_timestamps = \"job-zone\"` reads: {}; update the server's \
                     zone data, or give the zone in the query and remove the setting",
                    error_line(&e)
                ));
            }
            return reader.fail(format!(
                "cannot set up the session of data source `{url}`: {}",
                error_line(&e)
            ));
        }
        let types = [
            Type::TIMESTAMPTZ,
            Type::TIMESTAMPTZ,
            Type::INT8,
            Type::INT8,
            Type::INT8,
            Type::INT8,
        ];
        let stmt = match tx.prepare_typed(&self.query, &types) {
            Ok(s) => s,
            Err(e) => return reader.refuse(query_error(&self.query, &e)),
        };
        if stmt.params().len() != types.len() {
            return reader.refuse(format!(
                "invalid source query: it uses {} parameters; use {PARAMETERS}",
                stmt.params().len()
            ));
        }
        let mut decoders = Vec::with_capacity(stmt.columns().len());
        let mut columns = Vec::with_capacity(stmt.columns().len());
        for column in stmt.columns() {
            let Some(d) = Decode::of(column.type_()) else {
                return reader.refuse(refused_type(column.name(), column.type_()));
            };
            if d.naive() && self.naive.refused() {
                return reader.refuse(refused_naive(column.name(), column.type_(), &self.naive));
            }
            decoders.push(d);
            columns.push(ColumnInfo {
                name: column.name().to_string(),
                kind: d.kind(),
            });
        }
        let (start, end) = (system_time(bounds.start), system_time(bounds.end));
        let seconds = [bounds.start.as_second(), bounds.end.as_second()];
        let millis = [bounds.start.as_millisecond(), bounds.end.as_millisecond()];
        let values: [&(dyn ToSql + Sync); 6] = [
            &start,
            &end,
            &seconds[0],
            &seconds[1],
            &millis[0],
            &millis[1],
        ];
        let portal = match tx.bind(&stmt, &values) {
            Ok(p) => p,
            Err(e) => return reader.refuse(query_error(&self.query, &e)),
        };
        let cancelled = Arc::new(AtomicBool::new(false));
        let why = Why {
            cancelled: cancelled.clone(),
            out_of_time: reader.out_of_time(),
            timeout: self.timeout,
        };
        let chunk_rows = reader.chunk_rows();
        let interrupt = {
            let canceller = canceller.clone();
            move || {
                cancelled.store(true, Ordering::Relaxed);
                cancel(&canceller);
            }
        };
        // The server produces the next fetch while this thread turns the
        // last one into a chunk: one fetch waits in a channel of one.
        let (fetched, rows_rx) = sync_channel::<Fetched>(1);
        std::thread::scope(|scope| {
            let fetcher = std::thread::Builder::new()
                .name("jobhost-source-fetch".to_string())
                .spawn_scoped(scope, move || {
                    fetch_all(tx, portal, chunk_rows, &fetched, &why)
                });
            if let Err(e) = fetcher {
                return reader.fail(format!("cannot start the source's fetcher: {e}"));
            }
            let query = PgQuery {
                fetched: rows_rx,
                columns,
                decoders,
                naive: self.naive.clone(),
                rows: Vec::new().into_iter(),
                exhausted: false,
                chunk_rows,
                scratch: String::new(),
                canceller,
            };
            reader.run(Box::new(interrupt), query);
        });
    }
}

/// Asks the server to cancel what the connection runs, from a thread of
/// its own: the request opens a connection, and whoever interrupts (the
/// run's deadline) must not wait for it.
fn cancel(canceller: &Canceller) {
    let canceller = canceller.clone();
    let _ = std::thread::Builder::new()
        .name("jobhost-source-cancel".to_string())
        .spawn(move || canceller.cancel());
}

/// One fetch of rows, or why the query stopped.
type Fetched = std::result::Result<Vec<Row>, String>;

/// Fetches the portal's rows `n` at a time until the result ends, the query
/// fails or the reader stops listening; the transaction ends with it.
fn fetch_all(
    mut tx: Transaction<'_>,
    portal: Portal,
    n: usize,
    out: &SyncSender<Fetched>,
    why: &Why,
) {
    let n = n.clamp(1, i32::MAX as usize);
    let max = i32::try_from(n).unwrap_or(i32::MAX);
    loop {
        match tx.query_portal(&portal, max) {
            Ok(rows) => {
                let last = rows.len() < n;
                if out.send(Ok(rows)).is_err() || last {
                    return;
                }
            }
            Err(e) => {
                let _ = out.send(Err(why.failure(&e)));
                return;
            }
        }
    }
}

/// What tells why a running query stopped.
struct Why {
    /// Set when the query was interrupted on purpose.
    cancelled: Arc<AtomicBool>,
    out_of_time: Arc<AtomicBool>,
    timeout: Duration,
}

impl Why {
    /// Why the query stopped while running.
    fn failure(&self, e: &postgres::Error) -> String {
        let line = error_line(e);
        if e.code() == Some(&SqlState::QUERY_CANCELED) {
            if self.cancelled.load(Ordering::Relaxed) {
                return "the source query was cancelled at the run's deadline".to_string();
            }
            if line.contains("statement timeout") {
                self.out_of_time.store(true, Ordering::Relaxed);
                return format!(
                    "the source query ran past the time limit of {} s (`limits.timeout_seconds`) \
                     and the server cancelled it",
                    self.timeout.as_secs_f64()
                );
            }
        }
        format!("the source query failed: {line}")
    }
}

/// A bound query's rows, as its fetcher hands them over, turned into chunks.
struct PgQuery {
    fetched: Receiver<Fetched>,
    columns: Vec<ColumnInfo>,
    decoders: Vec<Decode>,
    naive: NaiveTimes,
    /// The rows of the last fetch not yet in a chunk.
    rows: std::vec::IntoIter<Row>,
    /// The portal has no more rows.
    exhausted: bool,
    /// Rows per fetch.
    chunk_rows: usize,
    /// Room to decode a value into.
    scratch: String,
    canceller: Canceller,
}

impl PgQuery {
    /// Takes the next fetch.
    fn next_fetch(&mut self) -> std::result::Result<(), String> {
        let rows = match self.fetched.recv() {
            Ok(fetched) => fetched?,
            Err(_) => return Err("the source's fetcher stopped".to_string()),
        };
        self.exhausted = rows.len() < self.chunk_rows.max(1);
        self.rows = rows.into_iter();
        Ok(())
    }

    fn push_row(
        &mut self,
        row: &Row,
        chunk: &mut Chunk<'_>,
    ) -> std::result::Result<(), SourceError> {
        let PgQuery {
            columns,
            decoders,
            naive,
            scratch,
            ..
        } = self;
        for (i, d) in decoders.iter().enumerate() {
            let raw = row
                .try_get::<_, Option<Raw<'_>>>(i)
                .map_err(|e| SourceError::QueryFailed(error_line(&e)))?;
            let value = match raw {
                None => Ok(Value::Null),
                Some(Raw(raw)) => d.decode(raw, scratch, naive),
            };
            let pushed =
                value.and_then(|v| chunk.push(i, v).map_err(|found| format!("holds {found}")));
            if let Err(why) = pushed {
                return Err(SourceError::TypeMismatch(format!(
                    "column `{}` at row {}: {why}",
                    columns[i].name,
                    chunk.row_number()
                )));
            }
        }
        Ok(())
    }
}

impl Drop for PgQuery {
    fn drop(&mut self) {
        // Stopped before the end (a failure, a dropped cursor): the fetcher
        // may be waiting on the server for rows no one will read.
        if !self.exhausted {
            cancel(&self.canceller);
        }
    }
}

impl Query for PgQuery {
    fn columns(&mut self) -> std::result::Result<Vec<ColumnInfo>, String> {
        self.next_fetch()?;
        Ok(self.columns.clone())
    }

    fn next_chunk(&mut self, chunk: &mut Chunk<'_>) -> std::result::Result<bool, SourceError> {
        while !chunk.full() {
            let Some(row) = self.rows.next() else {
                if self.exhausted {
                    return Ok(false);
                }
                self.next_fetch().map_err(SourceError::QueryFailed)?;
                continue;
            };
            self.push_row(&row, chunk)?;
            chunk.end_row();
        }
        Ok(!(self.exhausted && self.rows.as_slice().is_empty()))
    }
}

/// A value's bytes as the server sent them (binary format).
struct Raw<'a>(&'a [u8]);

impl<'a> FromSql<'a> for Raw<'a> {
    fn from_sql(
        _: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(raw))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// How a column's values are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decode {
    Int2,
    Int4,
    Int8,
    Oid,
    Bool,
    Float4,
    Float8,
    Numeric,
    Text,
    Jsonb,
    Uuid,
    Bytea,
    Timestamptz,
    /// Without time zone.
    Timestamp,
    Date,
}

impl Decode {
    /// How to read a column of type `ty`; `None` for a type the source
    /// does not read.
    fn of(ty: &Type) -> Option<Decode> {
        match ty.kind() {
            Kind::Enum(_) => return Some(Decode::Text),
            Kind::Domain(base) => return Decode::of(base),
            _ => {}
        }
        Some(match *ty {
            Type::INT2 => Decode::Int2,
            Type::INT4 => Decode::Int4,
            Type::INT8 => Decode::Int8,
            Type::OID => Decode::Oid,
            Type::BOOL => Decode::Bool,
            Type::FLOAT4 => Decode::Float4,
            Type::FLOAT8 => Decode::Float8,
            Type::NUMERIC => Decode::Numeric,
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::JSON | Type::UNKNOWN => {
                Decode::Text
            }
            Type::JSONB => Decode::Jsonb,
            Type::UUID => Decode::Uuid,
            Type::BYTEA => Decode::Bytea,
            Type::TIMESTAMPTZ => Decode::Timestamptz,
            Type::TIMESTAMP => Decode::Timestamp,
            Type::DATE => Decode::Date,
            _ => return None,
        })
    }

    fn kind(self) -> ColumnKind {
        match self {
            Decode::Int2
            | Decode::Int4
            | Decode::Int8
            | Decode::Oid
            | Decode::Bool
            | Decode::Timestamptz
            | Decode::Timestamp
            | Decode::Date => ColumnKind::Integer,
            Decode::Float4 | Decode::Float8 | Decode::Numeric => ColumnKind::Real,
            Decode::Text | Decode::Jsonb | Decode::Uuid => ColumnKind::Text,
            Decode::Bytea => ColumnKind::Blob,
        }
    }

    /// Whether the type's values have no zone.
    fn naive(self) -> bool {
        matches!(self, Decode::Timestamp | Decode::Date)
    }

    /// One value, from its binary format; a time without a zone is read
    /// as `naive` says.
    fn decode<'a>(
        self,
        raw: &'a [u8],
        scratch: &'a mut String,
        naive: &NaiveTimes,
    ) -> std::result::Result<Value<'a>, String> {
        let malformed = || format!("a malformed {self:?} value from the server");
        Ok(match self {
            Decode::Int2 => Value::Integer(i64::from(i16::from_be_bytes(
                raw.try_into().map_err(|_| malformed())?,
            ))),
            Decode::Int4 => Value::Integer(i64::from(i32::from_be_bytes(
                raw.try_into().map_err(|_| malformed())?,
            ))),
            Decode::Int8 => {
                Value::Integer(i64::from_be_bytes(raw.try_into().map_err(|_| malformed())?))
            }
            Decode::Oid => Value::Integer(i64::from(u32::from_be_bytes(
                raw.try_into().map_err(|_| malformed())?,
            ))),
            Decode::Bool => match raw {
                [b] => Value::Integer(i64::from(*b != 0)),
                _ => return Err(malformed()),
            },
            Decode::Float4 => Value::Real(f64::from(f32::from_be_bytes(
                raw.try_into().map_err(|_| malformed())?,
            ))),
            Decode::Float8 => {
                Value::Real(f64::from_be_bytes(raw.try_into().map_err(|_| malformed())?))
            }
            Decode::Numeric => Value::Real(numeric(raw, scratch).ok_or_else(malformed)?),
            Decode::Text => Value::Text(raw),
            Decode::Jsonb => match raw.split_first() {
                Some((1, json)) => Value::Text(json),
                _ => return Err(malformed()),
            },
            Decode::Uuid => {
                let bytes: [u8; 16] = raw.try_into().map_err(|_| malformed())?;
                scratch.clear();
                for (i, byte) in bytes.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        scratch.push('-');
                    }
                    let _ = write!(scratch, "{byte:02x}");
                }
                Value::Text(scratch.as_bytes())
            }
            Decode::Bytea => Value::Blob(raw),
            // Microseconds since 2000-01-01: of UTC for a `timestamptz`, of
            // the wall clock for a `timestamp`.
            Decode::Timestamptz | Decode::Timestamp => {
                let micros = i64::from_be_bytes(raw.try_into().map_err(|_| malformed())?);
                if micros == i64::MAX || micros == i64::MIN {
                    return Err(infinite());
                }
                let seconds = micros.div_euclid(1_000_000) + PG_EPOCH;
                match self {
                    Decode::Timestamp => Value::Integer(naive.read(seconds)?),
                    _ => Value::Integer(seconds),
                }
            }
            Decode::Date => {
                let days = i32::from_be_bytes(raw.try_into().map_err(|_| malformed())?);
                if days == i32::MAX || days == i32::MIN {
                    return Err(infinite());
                }
                Value::Integer(naive.read(i64::from(days) * 86_400 + PG_EPOCH)?)
            }
        })
    }
}

/// An instant as the client library binds a `timestamptz`.
fn system_time(t: jiff::Timestamp) -> SystemTime {
    let since = t.as_duration();
    if since.is_negative() {
        SystemTime::UNIX_EPOCH - since.unsigned_abs()
    } else {
        SystemTime::UNIX_EPOCH + since.unsigned_abs()
    }
}

fn infinite() -> String {
    "holds infinity, which has no Unix time; filter it out or cast the column to text".to_string()
}

/// A `numeric` in binary format as the nearest double: its base-10000
/// digits written out in decimal and parsed (which rounds correctly).
fn numeric(raw: &[u8], scratch: &mut String) -> Option<f64> {
    let word = |i: usize| raw.get(i..i + 2).map(|w| u16::from_be_bytes([w[0], w[1]]));
    let digits = usize::from(word(0)?);
    let weight = i64::from(word(2)? as i16);
    let sign = word(4)?;
    let negative = match sign {
        0x0000 => false,
        0x4000 => true,
        0xC000 => return Some(f64::NAN),
        0xD000 => return Some(f64::INFINITY),
        0xF000 => return Some(f64::NEG_INFINITY),
        _ => return None,
    };
    if raw.len() != 8 + 2 * digits {
        return None;
    }
    if digits == 0 {
        return Some(0.0);
    }
    scratch.clear();
    if negative {
        scratch.push('-');
    }
    for i in 0..digits {
        let d = word(8 + 2 * i)?;
        if d > 9999 {
            return None;
        }
        let _ = write!(scratch, "{d:04}");
    }
    // The digits are a whole number; the last stands for 10000^(weight - digits + 1).
    let _ = write!(scratch, "e{}", 4 * (weight - digits as i64 + 1));
    scratch.parse().ok()
}

/// The refusal of a column whose type the source does not read, with a
/// cast that reads it.
fn refused_type(name: &str, ty: &Type) -> String {
    let quoted = quoted_name(name);
    let (target, alias) = if name == "?column?" {
        ("(the expression)".to_string(), String::new())
    } else {
        (quoted.clone(), format!(" AS {quoted}"))
    };
    let cast = match *ty {
        Type::MONEY => format!("{target}::numeric{alias}"),
        Type::INTERVAL | Type::TIME | Type::TIMETZ => {
            format!("extract(epoch FROM {target}){alias}")
        }
        _ => format!("{target}::text{alias}"),
    };
    format!(
        "invalid source query: column `{name}` is of type {}, which the source does not read; \
         cast it in the query, for example `{cast}`",
        ty.name()
    )
}

/// The refusal of a column whose values have no zone (`timestamp`, `date`,
/// or a domain over one) while the job does not say how to read them.
fn refused_naive(name: &str, ty: &Type, naive: &NaiveTimes) -> String {
    // (The server describes a domain's column by its base type.)
    let base = match ty.kind() {
        Kind::Domain(base) => base,
        _ => ty,
    };
    let (of_type, cast) = if *base == Type::DATE {
        ("date", "::timestamp")
    } else {
        ("timestamp without time zone", "")
    };
    let quoted = quoted_name(name);
    let (target, alias) = if name == "?column?" {
        ("(the expression)".to_string(), String::new())
    } else {
        (quoted.clone(), format!(" AS {quoted}"))
    };
    format!(
        "invalid source query: column `{name}` is of type {of_type}, whose values have no \
         zone; {}, or give their zone in the query, for example `{target}{cast} AT TIME ZONE \
         '{}'{alias}`",
        naive.setting_hint("them"),
        naive.example_zone()
    )
}

/// A column's name as SQL text: as it is when PostgreSQL would read it
/// back unchanged, else quoted.
fn quoted_name(name: &str) -> String {
    if name
        .bytes()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == b'_')
        && name
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
    {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// A query PostgreSQL refused, with where in it the server points.
fn query_error(query: &str, e: &postgres::Error) -> String {
    let mut s = format!("invalid source query: {}", error_line(e));
    if let Some(ErrorPosition::Original(at)) = e.as_db_error().and_then(|d| d.position()) {
        // The server counts characters from 1.
        let at = (*at as usize).saturating_sub(1);
        let before: String = query.chars().take(at).collect();
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        let near: String = query
            .chars()
            .skip(at)
            .take_while(|c| *c != '\n')
            .take(40)
            .collect();
        let _ = write!(
            s,
            " at line {line}, column {column} (`{}`)",
            near.trim_end()
        );
    }
    s.push_str("; fix `source.query`");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_parameters_are_found_outside_strings_names_and_comments() {
        let used = |q: &str| scan(q).params.into_iter().collect::<Vec<_>>();
        assert_eq!(used("SELECT * FROM t WHERE a >= $1 AND a < $2"), [1, 2]);
        assert_eq!(
            used(
                "SELECT '$1', \"$2\", $$ $3 $$, $x$ $4 $x$, E'\\' $5', a$6 -- $7\n /* $8 /* */ $9 */ FROM t WHERE x < $4"
            ),
            [4]
        );
        assert_eq!(used("SELECT x::int FROM t WHERE ts > $10"), [10]);
        assert_eq!(scan("  (SELECT 1)").first.as_deref(), Some("SELECT"));
        assert_eq!(
            scan("-- c\n delete from t").first.as_deref(),
            Some("delete")
        );
    }

    #[test]
    fn a_query_must_use_a_start_and_an_end_and_nothing_else() {
        assert!(check_query("SELECT * FROM t WHERE ts >= $1 AND ts < $2").is_ok());
        assert!(
            check_query("WITH w AS (SELECT 1) SELECT * FROM t WHERE ts >= $3 AND ts < $6").is_ok()
        );
        let err = check_query("SELECT * FROM t WHERE ts >= $1").unwrap_err();
        assert!(err.contains("a start and an end"), "{err}");
        let err = check_query("SELECT * FROM t WHERE ts >= $1 AND ts < $2 AND x = $7").unwrap_err();
        assert!(err.contains("unknown parameter `$7`"), "{err}");
        let err = check_query("DELETE FROM t WHERE ts >= $1 AND ts < $2").unwrap_err();
        assert!(err.contains("starts with `DELETE`"), "{err}");
        assert!(check_query("  ").unwrap_err().contains("empty"));
    }

    #[test]
    fn numerics_are_read_as_the_nearest_double() {
        let enc = |digits: &[u16], weight: i16, sign: u16| {
            let mut v = Vec::new();
            v.extend((digits.len() as u16).to_be_bytes());
            v.extend(weight.to_be_bytes());
            v.extend(sign.to_be_bytes());
            v.extend(0u16.to_be_bytes());
            for d in digits {
                v.extend(d.to_be_bytes());
            }
            v
        };
        let mut s = String::new();
        assert_eq!(numeric(&enc(&[123, 4500], 0, 0), &mut s), Some(123.45));
        assert_eq!(numeric(&enc(&[1], -1, 0x4000), &mut s), Some(-0.0001));
        assert_eq!(numeric(&enc(&[], 0, 0), &mut s), Some(0.0));
        // 12345678901234567.89: more digits than a double holds.
        assert_eq!(
            numeric(&enc(&[1, 2345, 6789, 123, 4567, 8900], 4, 0), &mut s),
            Some(12_345_678_901_234_568.0)
        );
        assert!(numeric(&enc(&[], 0, 0xC000), &mut s).unwrap().is_nan());
        assert_eq!(numeric(&enc(&[1], 0, 0x1234), &mut s), None);
        assert_eq!(numeric(&[0, 1], &mut s), None);
    }

    #[test]
    fn times_are_unix_seconds_rounded_down_and_infinity_is_refused() {
        let mut s = String::new();
        let ts = |micros: i64| micros.to_be_bytes();
        let utc = NaiveTimes::Utc;
        let berlin = NaiveTimes::JobZone(crate::core::window::Zone::new("Europe/Berlin").unwrap());
        let read = |d: Decode, raw: &[u8], naive: &NaiveTimes| match d.decode(
            raw,
            &mut String::new(),
            naive,
        ) {
            Ok(Value::Integer(i)) => Ok(i),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e),
        };
        let at = |d: Decode, raw: &[u8]| read(d, raw, &utc);
        // 2000-01-01T00:00:00.5Z and half a second before it.
        for d in [Decode::Timestamptz, Decode::Timestamp] {
            assert_eq!(at(d, &ts(500_000)), Ok(PG_EPOCH));
            assert_eq!(at(d, &ts(-500_000)), Ok(PG_EPOCH - 1));
        }
        assert_eq!(
            at(Decode::Date, &(-1i32).to_be_bytes()),
            Ok(PG_EPOCH - 86_400)
        );
        // In the job's zone: a `timestamp` and a `date` are Berlin's wall
        // time (winter, +01:00); a `timestamptz` is an instant whatever
        // the zone.
        assert_eq!(
            read(Decode::Timestamp, &ts(500_000), &berlin),
            Ok(PG_EPOCH - 3600)
        );
        assert_eq!(
            read(Decode::Timestamptz, &ts(500_000), &berlin),
            Ok(PG_EPOCH)
        );
        assert_eq!(
            read(Decode::Date, &0i32.to_be_bytes(), &berlin),
            Ok(PG_EPOCH - 3600)
        );
        for raw in [ts(i64::MAX), ts(i64::MIN)] {
            for d in [Decode::Timestamptz, Decode::Timestamp] {
                assert!(at(d, &raw).unwrap_err().contains("infinity"));
            }
        }
        assert!(
            at(Decode::Date, &i32::MAX.to_be_bytes())
                .unwrap_err()
                .contains("infinity")
        );
        // Past the years a zone is known for: said, never a panic.
        let far = read(Decode::Timestamp, &ts(i64::MAX - 1), &berlin).unwrap_err();
        assert!(far.contains("-9999 to 9999"), "{far}");
        assert!(
            Decode::Int4
                .decode(&[0, 1], &mut s, &utc)
                .unwrap_err()
                .contains("malformed")
        );
        assert!(matches!(
            Decode::Jsonb.decode(&[2, b'1'], &mut s, &utc),
            Err(e) if e.contains("malformed")
        ));
        let uuid = [0xa0u8; 16];
        let Ok(Value::Text(text)) = Decode::Uuid.decode(&uuid, &mut s, &utc) else {
            panic!("a uuid is text")
        };
        assert_eq!(text, b"a0a0a0a0-a0a0-a0a0-a0a0-a0a0a0a0a0a0");
    }

    #[test]
    fn a_column_without_a_zone_is_refused_naming_the_setting_and_a_cast() {
        let naive = NaiveTimes::Refused(crate::core::window::Zone::new("Europe/Berlin").unwrap());
        assert!(Decode::of(&Type::TIMESTAMP).is_some_and(Decode::naive));
        assert!(Decode::of(&Type::DATE).is_some_and(Decode::naive));
        assert!(!Decode::of(&Type::TIMESTAMPTZ).is_some_and(Decode::naive));
        let m = refused_naive("created_at", &Type::TIMESTAMP, &naive);
        assert!(
            m.contains("column `created_at` is of type timestamp without time zone, whose values have no zone"),
            "{m}"
        );
        assert!(m.contains("`naive_timestamps = \"job-zone\"`"), "{m}");
        assert!(m.contains("local times in Europe/Berlin"), "{m}");
        assert!(
            m.contains("`created_at AT TIME ZONE 'Europe/Berlin' AS created_at`"),
            "{m}"
        );
        let m = refused_naive("Day", &Type::DATE, &naive);
        assert!(m.contains("is of type date,"), "{m}");
        assert!(
            m.contains("`\"Day\"::timestamp AT TIME ZONE 'Europe/Berlin' AS \"Day\"`"),
            "{m}"
        );
        assert!(!m.contains('\n'));
    }

    #[test]
    fn a_refused_type_names_a_cast_that_reads_it() {
        let m = refused_type("amount", &Type::MONEY);
        assert!(m.contains("column `amount` is of type money"), "{m}");
        assert!(m.contains("`amount::numeric AS amount`"), "{m}");
        let m = refused_type("Took", &Type::INTERVAL);
        assert!(
            m.contains("`extract(epoch FROM \"Took\") AS \"Took\"`"),
            "{m}"
        );
        let m = refused_type("?column?", &Type::INET);
        assert!(m.contains("`(the expression)::text`"), "{m}");
    }
}
