//! A SQLite data source: one database file opened read-only and one query
//! whose window bounds are bound as parameters. The query may use these
//! named parameters: `:start` and `:end` (the window's bounds in Unix
//! seconds, `[start, end)`), `:start_ms`/`:end_ms` (milliseconds),
//! `:start_rfc3339`/`:end_rfc3339` (RFC 3339 UTC text) and
//! `:start_naive`/`:end_naive` (text without a zone, in the zone
//! `naive_timestamps` names); at least one start and one end. A column's
//! kind is its declared type's affinity, or, for an expression, the kind of
//! its first value (text when that is NULL or there are no rows).
//!
//! A column declared as a date or a timestamp (a declared type naming
//! `DATE` or `TIMESTAMP` that SQLite gives numeric affinity, such as
//! `DATE`, `DATETIME` and `TIMESTAMP`) is an integer column of Unix
//! seconds: an integer in it is Unix seconds already, text with `Z` or an
//! offset is read with it, and text without one is read in the zone
//! `naive_timestamps` names; without that setting the column is refused
//! before the claim.

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use rusqlite::fallible_streaming_iterator::FallibleStreamingIterator;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, Rows, Statement};

use super::batch::{Chunk, ColumnInfo, ColumnKind, Value, kind_name};
use super::cursor::{Query, Reader};
use super::naive::{Written, parse_text};
use super::{Bounds, NaiveTimes, Source, SourceError, SourceKind};

/// Parameters the query may use, each start before its end; at least one
/// start and one end are required.
const PARAMS: [&str; 8] = [
    ":start",
    ":end",
    ":start_ms",
    ":end_ms",
    ":start_rfc3339",
    ":end_rfc3339",
    ":start_naive",
    ":end_naive",
];

fn open_read_only(path: &Path) -> std::result::Result<Connection, String> {
    if !path.is_file() {
        return Err(format!(
            "data source `{}` does not exist; fix `source.path` in the job config",
            path.display()
        ));
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| format!("cannot open data source `{}`: {e}", path.display()))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|e| format!("cannot open data source `{}`: {e}", path.display()))?;
    conn.pragma_update(None, "query_only", true)
        .map_err(|e| format!("cannot open data source `{}`: {e}", path.display()))?;
    Ok(conn)
}

fn prepare<'c>(conn: &'c Connection, query: &str) -> std::result::Result<Statement<'c>, String> {
    let stmt = conn
        .prepare(query)
        .map_err(|e| format!("invalid source query: {e}"))?;
    if !stmt.readonly() {
        return Err("invalid source query: it writes; use a SELECT".to_string());
    }
    let has = |names: &[&str]| {
        names
            .iter()
            .any(|n| stmt.parameter_index(n).ok().flatten().is_some())
    };
    if !has(&PARAMS.iter().step_by(2).copied().collect::<Vec<_>>())
        || !has(&PARAMS[1..].iter().step_by(2).copied().collect::<Vec<_>>())
    {
        return Err(
            "invalid source query: it must restrict rows to the window with :start and :end \
             (for example `WHERE ts >= :start AND ts < :end`)"
                .to_string(),
        );
    }
    for i in 1..=stmt.parameter_count() {
        match stmt.parameter_name(i) {
            Some(name) if PARAMS.contains(&name) => {}
            other => {
                return Err(format!(
                    "invalid source query: unknown parameter `{}`; use {}",
                    other.unwrap_or("?"),
                    PARAMS.join(", ")
                ));
            }
        }
    }
    Ok(stmt)
}

/// A SQLite source's settings: the database file, the query, and how a
/// date-time written without a zone is read.
#[derive(Debug, Clone, PartialEq)]
pub struct SqliteSpec {
    /// The SQLite database file.
    pub path: PathBuf,
    /// The query, using `:start`/`:end` (or their variants) for the window.
    pub query: String,
    /// How text without a zone in a date or timestamp column is read, and
    /// the zone of `:start_naive`/`:end_naive`.
    pub naive: NaiveTimes,
}

impl From<SqliteSpec> for Source {
    fn from(spec: SqliteSpec) -> Source {
        Source::new(spec)
    }
}

impl SourceKind for SqliteSpec {
    fn query(&self) -> Option<&str> {
        Some(&self.query)
    }

    fn location(&self) -> String {
        self.path.display().to_string()
    }

    fn start(&self, bounds: Bounds, reader: Reader) {
        let conn = match open_read_only(&self.path) {
            Ok(c) => c,
            Err(e) => return reader.refuse(e),
        };
        let interrupt = conn.get_interrupt_handle();
        let mut stmt = match prepare(&conn, &self.query) {
            Ok(s) => s,
            Err(e) => return reader.refuse(e),
        };
        if let Err(e) = bind(&mut stmt, bounds, &self.naive) {
            return reader.refuse(e);
        }
        let mut declared = Vec::with_capacity(stmt.column_count());
        for c in stmt.columns() {
            let typed = c.decl_type().map(Declared::of);
            if let (Some(Declared::Time), Some(decl)) = (typed, c.decl_type())
                && self.naive.refused()
            {
                return reader.refuse(refused_naive(c.name(), decl, &self.naive));
            }
            declared.push((c.name().to_string(), typed));
        }
        let query = SqliteQuery {
            rows: stmt.raw_query(),
            declared,
            columns: Vec::new(),
            times: Vec::new(),
            naive: self.naive.clone(),
            pending_first: false,
            done: false,
        };
        reader.run(Box::new(move || interrupt.interrupt()), query);
    }
}

/// What a column's declared type makes of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Declared {
    /// Values of this kind, by SQLite's affinity rules.
    Kind(ColumnKind),
    /// A date or a timestamp: integer Unix seconds.
    Time,
}

impl Declared {
    /// A type that names `DATE` or `TIMESTAMP` among those SQLite gives
    /// numeric affinity (`DATE`, `DATETIME`, `TIMESTAMP`) is a time; any
    /// other has its affinity's kind.
    fn of(decl: &str) -> Declared {
        let d = decl.to_ascii_uppercase();
        let kind = kind_from_decl(decl);
        if kind == ColumnKind::Real && (d.contains("DATE") || d.contains("TIMESTAMP")) {
            Declared::Time
        } else {
            Declared::Kind(kind)
        }
    }

    fn kind(self) -> ColumnKind {
        match self {
            Declared::Kind(kind) => kind,
            Declared::Time => ColumnKind::Integer,
        }
    }
}

/// The refusal of a date or timestamp column while the job does not say
/// how to read its text.
fn refused_naive(name: &str, decl: &str, naive: &NaiveTimes) -> String {
    format!(
        "invalid source query: column `{name}` is declared {}, and its text values have no \
         zone; {} (integers in it are Unix seconds either way)",
        crate::core::text::echoed(decl, 40),
        naive.setting_hint("them")
    )
}

/// A running SQLite query, stepped a row at a time.
struct SqliteQuery<'s> {
    rows: Rows<'s>,
    /// Each column's name, and what its declared type makes of it if it
    /// has one.
    declared: Vec<(String, Option<Declared>)>,
    columns: Vec<ColumnInfo>,
    /// Which columns are dates or timestamps.
    times: Vec<bool>,
    naive: NaiveTimes,
    /// The first row, stepped to learn the columns, is still to be read.
    pending_first: bool,
    done: bool,
}

impl Query for SqliteQuery<'_> {
    fn columns(&mut self) -> std::result::Result<Vec<ColumnInfo>, String> {
        let first = self
            .rows
            .next()
            .map_err(|e| format!("the source query failed: {e}"))?;
        self.pending_first = first.is_some();
        self.done = first.is_none();
        // Columns without a declared type (expressions) take the type of
        // their first value; NULL or no rows means text.
        self.times = self
            .declared
            .iter()
            .map(|(_, d)| *d == Some(Declared::Time))
            .collect();
        self.columns = self
            .declared
            .iter()
            .enumerate()
            .map(|(i, (name, declared))| {
                let kind = declared.map(Declared::kind).unwrap_or_else(|| {
                    match first.map(|r| r.get_ref(i)) {
                        Some(Ok(ValueRef::Integer(_))) => ColumnKind::Integer,
                        Some(Ok(ValueRef::Real(_))) => ColumnKind::Real,
                        Some(Ok(ValueRef::Blob(_))) => ColumnKind::Blob,
                        _ => ColumnKind::Text,
                    }
                });
                ColumnInfo {
                    name: name.clone(),
                    kind,
                }
            })
            .collect();
        Ok(self.columns.clone())
    }

    fn next_chunk(&mut self, chunk: &mut Chunk<'_>) -> std::result::Result<bool, SourceError> {
        while !self.done && !chunk.full() {
            let row = if self.pending_first {
                self.pending_first = false;
                FallibleStreamingIterator::get(&self.rows)
            } else {
                self.rows
                    .next()
                    .map_err(|e| SourceError::QueryFailed(e.to_string()))?
            };
            let Some(row) = row else {
                self.done = true;
                break;
            };
            for (i, column) in self.columns.iter().enumerate() {
                let value = row
                    .get_ref(i)
                    .map_err(|e| SourceError::QueryFailed(e.to_string()))?;
                let value = if self.times[i] {
                    time_of(value, &self.naive).map_err(|why| {
                        SourceError::TypeMismatch(format!(
                            "column `{}` is a date or timestamp but row {} holds {why}",
                            column.name,
                            chunk.row_number()
                        ))
                    })?
                } else {
                    value_of(value)
                };
                chunk.push(i, value).map_err(|found| {
                    SourceError::TypeMismatch(format!(
                        "column `{}` is {} but row {} holds {found}",
                        column.name,
                        kind_name(column.kind),
                        chunk.row_number()
                    ))
                })?;
            }
            chunk.end_row();
        }
        Ok(!self.done)
    }
}

fn value_of(v: ValueRef<'_>) -> Value<'_> {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(t) => Value::Text(t),
        ValueRef::Blob(b) => Value::Blob(b),
    }
}

/// A value of a date or timestamp column as Unix seconds: an integer as
/// it is, text by its own offset or else as `naive` says.
fn time_of<'v>(v: ValueRef<'v>, naive: &NaiveTimes) -> std::result::Result<Value<'v>, String> {
    let text = match v {
        ValueRef::Null => return Ok(Value::Null),
        ValueRef::Integer(i) => return Ok(Value::Integer(i)),
        ValueRef::Real(_) => {
            return Err("a real; store Unix seconds as an integer, or a date-time as text".into());
        }
        ValueRef::Blob(_) => return Err("a blob".into()),
        ValueRef::Text(t) => t,
    };
    let written = std::str::from_utf8(text).ok().and_then(parse_text).ok_or(
        "text that is not a date-time SQLite reads (YYYY-MM-DD, optionally with HH:MM[:SS[.fff]] \
         after a space or T, and Z or ±HH:MM)",
    )?;
    match written {
        Written::Instant(seconds) => Ok(Value::Integer(seconds)),
        Written::Wall(wall) => naive.read(wall).map(Value::Integer),
    }
}

/// Binds the window's bounds the query uses.
///
/// # Errors
///
/// One line: `:start_naive` without `naive_timestamps`, or SQLite's error.
fn bind(
    stmt: &mut Statement<'_>,
    bounds: Bounds,
    naive: &NaiveTimes,
) -> std::result::Result<(), String> {
    let Bounds { start, end } = bounds;
    for (name, at) in [(":start_naive", start), (":end_naive", end)] {
        let Some(i) = stmt
            .parameter_index(name)
            .map_err(|e| format!("invalid source query: {e}"))?
        else {
            continue;
        };
        let Some(text) = naive.bound_text(at) else {
            return Err(format!(
                "invalid source query: it uses `{name}`, the window as text without a zone, \
                 but the job does not say which zone that is; {}",
                naive.setting_hint("such text")
            ));
        };
        stmt.raw_bind_parameter(i, text)
            .map_err(|e| format!("invalid source query: {e}"))?;
    }
    bind_instants(stmt, start, end).map_err(|e| format!("invalid source query: {e}"))
}

fn bind_instants(
    stmt: &mut Statement<'_>,
    start: Timestamp,
    end: Timestamp,
) -> rusqlite::Result<()> {
    for (name, value) in [
        (":start", rusqlite::types::Value::Integer(start.as_second())),
        (":end", rusqlite::types::Value::Integer(end.as_second())),
        (
            ":start_ms",
            rusqlite::types::Value::Integer(start.as_millisecond()),
        ),
        (
            ":end_ms",
            rusqlite::types::Value::Integer(end.as_millisecond()),
        ),
        (
            ":start_rfc3339",
            rusqlite::types::Value::Text(start.to_string()),
        ),
        (
            ":end_rfc3339",
            rusqlite::types::Value::Text(end.to_string()),
        ),
    ] {
        if let Some(i) = stmt.parameter_index(name)? {
            stmt.raw_bind_parameter(i, value)?;
        }
    }
    Ok(())
}

/// SQLite's type affinity rules, applied to a declared column type.
fn kind_from_decl(decl: &str) -> ColumnKind {
    let d = decl.to_ascii_uppercase();
    if d.contains("INT") {
        ColumnKind::Integer
    } else if d.contains("CHAR") || d.contains("CLOB") || d.contains("TEXT") {
        ColumnKind::Text
    } else if d.contains("BLOB") || d.is_empty() {
        ColumnKind::Blob
    } else {
        ColumnKind::Real
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::error::Error;
    use crate::guest::source::{ColumnData, SourceAccess, SourceSpec};

    fn batch(n: u32) -> std::num::NonZeroU32 {
        std::num::NonZeroU32::new(n).unwrap()
    }

    fn db(rows: &[(i64, Option<&str>, f64)]) -> (tempfile::TempDir, SourceSpec) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("src.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE t (ts INTEGER, name TEXT, amount REAL)")
            .unwrap();
        for (ts, name, amount) in rows {
            conn.execute(
                "INSERT INTO t VALUES (?1, ?2, ?3)",
                rusqlite::params![ts, name, amount],
            )
            .unwrap();
        }
        let spec = SourceSpec {
            path,
            query: "SELECT ts, name, amount FROM t WHERE ts >= :start AND ts < :end ORDER BY ts"
                .to_string(),
            naive: NaiveTimes::Refused(crate::core::window::Zone::utc()),
        };
        (dir, spec)
    }

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn secs(text: &str) -> i64 {
        text.parse::<Timestamp>().unwrap().as_second()
    }

    #[test]
    fn only_rows_inside_the_window_are_returned_in_bounded_batches() {
        let rows: Vec<_> = (0..100).map(|i| (i, Some("a"), 1.0)).collect();
        let (_p, spec) = db(&rows);
        let mut access = SourceAccess::new(Some(spec), ts(10), ts(60), batch(16));
        let mut c = access.open().unwrap();
        let mut total = 0;
        let mut first_ts = None;
        while let Some(b) = c.next_batch(1000).unwrap() {
            assert!(b.rows <= 16);
            if let ColumnData::Integer(v) = &b.columns[0].data {
                first_ts.get_or_insert(v[0]);
            }
            total += b.rows;
        }
        assert_eq!(total, 50);
        assert_eq!(first_ts, Some(10));
        assert_eq!(access.rows_read(), 50);
    }

    #[test]
    fn repeated_text_is_dictionary_encoded_and_nulls_are_flagged() {
        let rows: Vec<_> = (0..40)
            .map(|i| {
                (
                    i,
                    if i == 3 {
                        None
                    } else {
                        Some(["x", "y"][i as usize % 2])
                    },
                    2.5,
                )
            })
            .collect();
        let (_p, spec) = db(&rows);
        let mut access = SourceAccess::new(Some(spec), ts(0), ts(100), batch(8192));
        let mut c = access.open().unwrap();
        let b = c.next_batch(8192).unwrap().unwrap();
        assert_eq!(b.rows, 40);
        let col = &b.columns[1];
        assert_eq!(col.nulls.as_deref(), Some(&[0b0000_1000, 0, 0, 0, 0][..]));
        let ColumnData::TextDict { values, indices } = &col.data else {
            panic!("expected a dictionary, got {:?}", col.data)
        };
        assert_eq!(indices.len(), 40);
        assert_eq!(values.offsets.len(), 4, "x, y and the NULL placeholder");
        assert!(c.next_batch(8192).unwrap().is_none());
        assert!(matches!(
            c.next_batch(8192),
            Err(SourceError::InvalidState(_))
        ));
    }

    #[test]
    fn distinct_text_falls_back_to_plain_encoding() {
        let names: Vec<String> = (0..100).map(|i| format!("n{i}")).collect();
        let rows: Vec<_> = (0..100)
            .map(|i| (i as i64, Some(names[i].as_str()), 1.0))
            .collect();
        let (_p, spec) = db(&rows);
        let mut access = SourceAccess::new(Some(spec), ts(0), ts(1000), batch(8192));
        let b = access.open().unwrap().next_batch(64).unwrap().unwrap();
        let ColumnData::Text(t) = &b.columns[1].data else {
            panic!("expected plain text")
        };
        assert_eq!(b.rows, 64);
        assert_eq!(t.offsets.len(), 65);
        assert_eq!(
            &t.data[t.offsets[63] as usize..t.offsets[64] as usize],
            b"n63"
        );
    }

    #[test]
    fn small_requests_split_chunks_without_losing_or_reordering_rows() {
        let names: Vec<String> = (0..50).map(|i| format!("n{}", i % 3)).collect();
        let rows: Vec<_> = (0..50)
            .map(|i| {
                (
                    i as i64,
                    if i % 7 == 0 {
                        None
                    } else {
                        Some(names[i].as_str())
                    },
                    i as f64,
                )
            })
            .collect();
        let (_p, spec) = db(&rows);
        let mut access = SourceAccess::new(Some(spec), ts(0), ts(100), batch(16));
        access.start_early().unwrap();
        let mut c = access.open().unwrap();
        let mut seen = Vec::new();
        let mut sizes = Vec::new();
        let mut dictionaries = 0;
        while let Some(b) = c.next_batch(3).unwrap() {
            sizes.push(b.rows);
            let ColumnData::Integer(ts) = &b.columns[0].data else {
                panic!()
            };
            for (i, t) in ts.iter().enumerate() {
                let null = b.columns[1]
                    .nulls
                    .as_ref()
                    .is_some_and(|n| n[i / 8] & (1 << (i % 8)) != 0);
                if let ColumnData::TextDict { values, indices } = &b.columns[1].data {
                    dictionaries += 1;
                    let mut used: Vec<u32> = indices.clone();
                    used.sort_unstable();
                    used.dedup();
                    assert_eq!(used.len(), values.offsets.len() - 1, "no foreign values");
                }
                let name = match &b.columns[1].data {
                    ColumnData::TextDict { values, indices } => {
                        let id = indices[i] as usize;
                        String::from_utf8(
                            values.data
                                [values.offsets[id] as usize..values.offsets[id + 1] as usize]
                                .to_vec(),
                        )
                        .unwrap()
                    }
                    ColumnData::Text(t) => String::from_utf8(
                        t.data[t.offsets[i] as usize..t.offsets[i + 1] as usize].to_vec(),
                    )
                    .unwrap(),
                    other => panic!("{other:?}"),
                };
                seen.push((*t, if null { None } else { Some(name) }));
            }
        }
        // Chunks of 16 are served 3 at a time: 3, 3, 3, 3, 3, 1, 3, ...
        // and every dictionary holds exactly the values of its own batch.
        let mut expected_sizes = [3, 3, 3, 3, 3, 1].repeat(3);
        expected_sizes.push(2);
        assert_eq!(sizes, expected_sizes);
        assert!(dictionaries > 10, "the text column travels as a dictionary");
        let expected: Vec<_> = rows
            .iter()
            .map(|(t, n, _)| (*t, n.map(str::to_string)))
            .collect();
        assert_eq!(seen, expected);
        assert_eq!(access.rows_read(), 50);
    }

    #[test]
    fn a_query_without_window_parameters_is_refused() {
        let (_p, mut spec) = db(&[]);
        let check = |spec: &SourceSpec| {
            SourceAccess::new(Some(spec.clone()), ts(0), ts(1), batch(10))
                .start_early()
                .unwrap_err()
        };
        spec.query = "SELECT ts FROM t".to_string();
        let err = check(&spec);
        assert!(matches!(err, Error::Input(_)));
        assert!(err.to_string().contains(":start and :end"), "{err}");
        spec.query = "DELETE FROM t WHERE ts >= :start AND ts < :end".to_string();
        assert!(check(&spec).to_string().contains("writes"));
    }

    #[test]
    fn text_in_a_real_column_is_a_type_mismatch_naming_column_and_row() {
        let (_dir, spec) = db(&[(1, Some("a"), 1.0)]);
        let conn = Connection::open(&spec.path).unwrap();
        conn.execute("INSERT INTO t VALUES (2, 'b', 'lots')", [])
            .unwrap();
        let mut access = SourceAccess::new(Some(spec), ts(0), ts(10), batch(8192));
        let err = access.open().unwrap().next_batch(10).unwrap_err();
        assert_eq!(
            err,
            SourceError::TypeMismatch("column `amount` is real but row 2 holds text".to_string())
        );
    }

    /// A database whose table `e` has a timestamp column `at` holding
    /// `values` (each SQL), a DATE column `d` and an id; and a spec over
    /// it reading them as `naive` says.
    fn times_db(
        values: &[&str],
        naive: NaiveTimes,
        query: &str,
    ) -> (tempfile::TempDir, SourceSpec) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("src.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE e (id INTEGER, at TIMESTAMP, d DATE)")
            .unwrap();
        for (i, v) in values.iter().enumerate() {
            conn.execute(
                &format!("INSERT INTO e VALUES ({i}, {v}, '2026-11-04')"),
                [],
            )
            .unwrap();
        }
        let spec = SourceSpec {
            path,
            query: query.to_string(),
            naive,
        };
        (dir, spec)
    }

    const ALL: &str = "SELECT at, d FROM e WHERE :start <= :end ORDER BY id";

    fn berlin() -> NaiveTimes {
        NaiveTimes::JobZone(crate::core::window::Zone::new("Europe/Berlin").unwrap())
    }

    /// Every value of column 0 of the whole result, as integers.
    fn integers(spec: SourceSpec, from: i64, to: i64) -> Vec<Option<i64>> {
        let mut access = SourceAccess::new(Some(spec), ts(from), ts(to), batch(100));
        let mut c = access.open().unwrap();
        let mut out = Vec::new();
        while let Some(b) = c.next_batch(100).unwrap() {
            let ColumnData::Integer(v) = &b.columns[0].data else {
                panic!("a timestamp column is integer: {:?}", b.columns[0].data)
            };
            for (i, x) in v.iter().enumerate() {
                let null = b.columns[0]
                    .nulls
                    .as_ref()
                    .is_some_and(|n| n[i / 8] & (1 << (i % 8)) != 0);
                out.push((!null).then_some(*x));
            }
        }
        out
    }

    #[test]
    fn a_date_or_timestamp_column_is_refused_before_the_claim_unless_the_job_says_how_to_read_it() {
        let (_dir, spec) = times_db(
            &["'2026-11-04 00:30:00'"],
            NaiveTimes::Refused(crate::core::window::Zone::new("Europe/Berlin").unwrap()),
            ALL,
        );
        let err = SourceAccess::new(Some(spec.clone()), ts(0), ts(1), batch(10))
            .start_early()
            .unwrap_err();
        assert!(matches!(err, Error::Input(_)), "{err}");
        let m = err.to_string();
        assert!(
            m.contains("column `at` is declared TIMESTAMP, and its text values have no zone"),
            "{m}"
        );
        assert!(m.contains("`naive_timestamps = \"job-zone\"`"), "{m}");
        assert!(m.contains("local times in Europe/Berlin"), "{m}");
        // A DATE column alone too; an expression over it keeps the kind
        // of its first value and is not refused.
        let only_date = SourceSpec {
            query: "SELECT d FROM e WHERE :start <= :end".to_string(),
            ..spec.clone()
        };
        let m = SourceAccess::new(Some(only_date), ts(0), ts(1), batch(10))
            .start_early()
            .unwrap_err()
            .to_string();
        assert!(m.contains("column `d` is declared DATE"), "{m}");
        let expression = SourceSpec {
            query: "SELECT unixepoch(at) AS at FROM e WHERE :start <= :end".to_string(),
            ..spec
        };
        assert_eq!(
            integers(expression, 0, 1),
            [Some(secs("2026-11-04T00:30:00Z"))],
            "2026-11-04T00:30:00Z, as SQLite reads it"
        );
    }

    #[test]
    fn the_declared_types_of_numeric_affinity_that_name_a_date_or_timestamp_are_times() {
        for decl in [
            "DATE",
            "datetime",
            "TIMESTAMP",
            "timestamp with time zone",
            "DATETIME2",
        ] {
            assert_eq!(Declared::of(decl), Declared::Time, "{decl}");
        }
        for (decl, kind) in [
            ("INTEGER", ColumnKind::Integer),
            ("TIMESTAMP_INT", ColumnKind::Integer),
            ("TEXT", ColumnKind::Text),
            ("DATE_TEXT", ColumnKind::Text),
            ("REAL", ColumnKind::Real),
            ("TIME", ColumnKind::Real),
            ("NUMERIC", ColumnKind::Real),
        ] {
            assert_eq!(Declared::of(decl), Declared::Kind(kind), "{decl}");
        }
    }

    #[test]
    fn a_timestamp_column_reads_integers_as_they_are_and_text_by_its_offset_or_the_setting() {
        let values = [
            "1793752200",
            "'2026-11-04 00:30:00'",
            "'2026-11-04T00:30:00.75'",
            "'2026-11-04 00:30:00+01:00'",
            "'2026-11-04T00:30Z'",
            "'2026-10-25 02:30:00'",
            "'2026-03-29 02:30:00'",
            "NULL",
        ];
        let read = |naive, query: &str| {
            let (_dir, spec) = times_db(&values, naive, query);
            integers(spec, 0, 1)
        };
        let utc = read(NaiveTimes::Utc, ALL);
        let h = 3600;
        let at = secs("2026-11-04T00:30:00Z");
        let fall = secs("2026-10-25T02:30:00Z");
        let spring = secs("2026-03-29T02:30:00Z");
        assert_eq!(
            utc,
            [
                Some(at),
                Some(at),
                Some(at),
                Some(at - h),
                Some(at),
                Some(fall),
                Some(spring),
                None
            ]
        );
        let local = read(berlin(), ALL);
        assert_eq!(
            local,
            [
                Some(at),
                Some(at - h),
                Some(at - h),
                Some(at - h),
                Some(at),
                // The repeated hour takes the offset after the change
                // (+01:00), the skipped one the offset before (+01:00).
                Some(fall - h),
                Some(spring - h),
                None
            ]
        );
        // A DATE is its midnight, in the zone the setting names.
        let dates = "SELECT d FROM e WHERE :start <= :end ORDER BY id LIMIT 1";
        let midnight = secs("2026-11-04T00:00:00Z");
        assert_eq!(read(NaiveTimes::Utc, dates), [Some(midnight)]);
        assert_eq!(read(berlin(), dates), [Some(midnight - h)]);
    }

    #[test]
    fn a_value_a_timestamp_column_cannot_hold_is_a_type_mismatch_naming_column_and_row() {
        for (value, says) in [
            ("'yesterday'", "text that is not a date-time SQLite reads"),
            (
                "'2026-11-04T12:00:00[Europe/Berlin]'",
                "text that is not a date-time",
            ),
            ("2461000.5", "a real"),
            ("x'00'", "a blob"),
        ] {
            let (_dir, spec) = times_db(&["0", value], NaiveTimes::Utc, ALL);
            let mut access = SourceAccess::new(Some(spec), ts(0), ts(1), batch(10));
            let err = access.open().unwrap().next_batch(10).unwrap_err();
            let SourceError::TypeMismatch(m) = err else {
                panic!("{value}: {err:?}")
            };
            assert!(
                m.starts_with("column `at` is a date or timestamp but row 2 holds "),
                "{value}: {m}"
            );
            assert!(m.contains(says), "{value}: {m}");
        }
    }

    #[test]
    fn the_naive_bounds_select_the_rows_whose_values_lie_in_the_window() {
        // Berlin's 2026-10-25 (25 hours, from 2026-10-24T22:00Z): a row
        // every half hour of wall time from 23:00 the day before to 01:00
        // the day after, the repeated hour written once.
        let mut values = Vec::new();
        for h in 23..=48 {
            for m in [0, 30] {
                let (day, hour) = if h < 24 {
                    (24, h)
                } else {
                    (25 + (h - 24) / 24, (h - 24) % 24)
                };
                values.push(format!("'2026-10-{day:02} {hour:02}:{m:02}:00'"));
            }
        }
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        let query = "SELECT at FROM e WHERE datetime(at) >= :start_naive AND \
                     datetime(at) < :end_naive ORDER BY id";
        let (start, end) = (secs("2026-10-24T22:00:00Z"), secs("2026-10-25T23:00:00Z"));
        let (_dir, spec) = times_db(&values, berlin(), query);
        let read = integers(spec, start, end);
        assert_eq!(read.len(), 48, "every wall time of the day, once");
        assert!(
            read.iter()
                .all(|v| v.is_some_and(|v| (start..end).contains(&v))),
            "{read:?}"
        );
        // Without the setting, the naive bounds are refused.
        let (_dir, spec) = times_db(
            &values,
            NaiveTimes::Refused(crate::core::window::Zone::utc()),
            "SELECT id FROM e WHERE at >= :start_naive AND at < :end_naive",
        );
        let m = SourceAccess::new(Some(spec), ts(start), ts(end), batch(10))
            .start_early()
            .unwrap_err()
            .to_string();
        assert!(m.contains("it uses `:start_naive`"), "{m}");
        assert!(m.contains("naive_timestamps"), "{m}");
    }
}
