//! A SQLite data source: one database file opened read-only and one query
//! whose window bounds are bound as parameters. The query may use these
//! named parameters: `:start` and `:end` (the window's bounds in Unix
//! seconds, `[start, end)`), `:start_ms`/`:end_ms` (milliseconds) and
//! `:start_rfc3339`/`:end_rfc3339` (RFC 3339 UTC text); at least one start
//! and one end. A column's kind is its declared type's affinity, or, for an
//! expression, the kind of its first value (text when that is NULL or there
//! are no rows).

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use rusqlite::fallible_streaming_iterator::FallibleStreamingIterator;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, Rows, Statement};

use super::batch::{Chunk, ColumnInfo, ColumnKind, Value, kind_name};
use super::cursor::{Query, Reader};
use super::{Bounds, Source, SourceError, SourceKind};

/// Parameters the query may use; at least one start and one end are required.
const PARAMS: [&str; 6] = [
    ":start",
    ":end",
    ":start_ms",
    ":end_ms",
    ":start_rfc3339",
    ":end_rfc3339",
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
    if !has(&PARAMS[0..6].iter().step_by(2).copied().collect::<Vec<_>>())
        || !has(&PARAMS[1..6].iter().step_by(2).copied().collect::<Vec<_>>())
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

/// A SQLite source's settings: the database file and the query.
#[derive(Debug, Clone, PartialEq)]
pub struct SqliteSpec {
    /// The SQLite database file.
    pub path: PathBuf,
    /// The query, using `:start`/`:end` (or their variants) for the window.
    pub query: String,
}

impl From<SqliteSpec> for Source {
    fn from(spec: SqliteSpec) -> Source {
        Source::new(spec)
    }
}

impl SourceKind for SqliteSpec {
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
        if let Err(e) = bind(&mut stmt, bounds.start, bounds.end) {
            return reader.refuse(format!("invalid source query: {e}"));
        }
        let declared: Vec<(String, Option<ColumnKind>)> = stmt
            .columns()
            .map(|c| (c.name().to_string(), c.decl_type().map(kind_from_decl)))
            .collect();
        let query = SqliteQuery {
            rows: stmt.raw_query(),
            declared,
            columns: Vec::new(),
            pending_first: false,
            done: false,
        };
        reader.run(Box::new(move || interrupt.interrupt()), query);
    }
}

/// A running SQLite query, stepped a row at a time.
struct SqliteQuery<'s> {
    rows: Rows<'s>,
    /// Each column's name, and its declared type's kind if it has one.
    declared: Vec<(String, Option<ColumnKind>)>,
    columns: Vec<ColumnInfo>,
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
        self.columns = self
            .declared
            .iter()
            .enumerate()
            .map(|(i, (name, kind))| {
                let kind = kind.unwrap_or_else(|| match first.map(|r| r.get_ref(i)) {
                    Some(Ok(ValueRef::Integer(_))) => ColumnKind::Integer,
                    Some(Ok(ValueRef::Real(_))) => ColumnKind::Real,
                    Some(Ok(ValueRef::Blob(_))) => ColumnKind::Blob,
                    _ => ColumnKind::Text,
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
                chunk.push(i, value_of(value)).map_err(|found| {
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

fn bind(stmt: &mut Statement<'_>, start: Timestamp, end: Timestamp) -> rusqlite::Result<()> {
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
        };
        (dir, spec)
    }

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
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
}
