//! The columnar batches a guest reads, whatever the source: their types,
//! the checks a batch read back from a journal must pass, how a chunk is
//! split to the size the guest asks for, and the builders a reader fills
//! one row at a time. Text is dictionary-encoded per batch when that saves
//! space; NULLs are a bitmap beside the values.

use std::sync::atomic::{AtomicBool, Ordering};

use rustc_hash::FxHashMap;

/// Bytes of text or blob data after which a chunk is cut short.
const MAX_CHUNK_BYTES: usize = 8 << 20;

/// The type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ColumnKind {
    /// 64-bit integers.
    Integer,
    /// 64-bit floats.
    Real,
    /// UTF-8 text.
    Text,
    /// Bytes.
    Blob,
}

/// A column's name and type.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ColumnInfo {
    /// Name as the query labels it.
    pub name: String,
    /// Its type.
    pub kind: ColumnKind,
}

/// Values packed end to end with `rows + 1` offsets.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TextData {
    /// Concatenated bytes.
    pub data: Vec<u8>,
    /// Offsets into `data`.
    pub offsets: Vec<u32>,
}

/// One column's values in a batch.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum ColumnData {
    /// Integers.
    Integer(Vec<i64>),
    /// Reals.
    Real(Vec<f64>),
    /// Plain text.
    Text(TextData),
    /// Dictionary-encoded text.
    TextDict {
        /// Distinct values.
        values: TextData,
        /// Per-row index into `values`.
        indices: Vec<u32>,
    },
    /// Bytes.
    Blob(TextData),
}

/// One column of a batch.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Column {
    /// NULL bitmap, `None` when no row is NULL.
    pub nulls: Option<Vec<u8>>,
    /// The values.
    pub data: ColumnData,
}

/// Consecutive rows in columnar form.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Batch {
    /// Row count.
    pub rows: u32,
    /// Columns in query order.
    pub columns: Vec<Column>,
}

impl Batch {
    /// Checks that the batch is well formed: every column holds `rows`
    /// values, text offsets rise within their data, dictionary indices
    /// point into the dictionary, NULL bitmaps cover every row. A batch
    /// read back from a journal or a replay file is checked before use.
    ///
    /// # Errors
    ///
    /// What is wrong, in a few words.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let rows = self.rows as usize;
        let text_ok = |t: &TextData, n: usize| {
            t.offsets.len() == n + 1
                && t.offsets.first() == Some(&0)
                && t.offsets.windows(2).all(|w| w[0] <= w[1])
                && t.offsets
                    .last()
                    .is_some_and(|&e| e as usize == t.data.len())
        };
        for (i, c) in self.columns.iter().enumerate() {
            let ok = match &c.data {
                ColumnData::Integer(v) => v.len() == rows,
                ColumnData::Real(v) => v.len() == rows,
                ColumnData::Text(t) | ColumnData::Blob(t) => text_ok(t, rows),
                ColumnData::TextDict { values, indices } => {
                    let n = values.offsets.len().saturating_sub(1);
                    text_ok(values, n)
                        && indices.len() == rows
                        && indices.iter().all(|&x| (x as usize) < n)
                }
            };
            let nulls_ok = c.nulls.as_ref().is_none_or(|b| b.len() >= rows.div_ceil(8));
            if !ok || !nulls_ok {
                return Err(format!("column {i} of a {rows}-row batch is malformed"));
            }
        }
        Ok(())
    }

    /// Splits off the first `n` rows; the rest is `None` when nothing remains.
    pub(super) fn split_front(self, n: u32) -> (Batch, Option<Batch>) {
        if n >= self.rows {
            return (self, None);
        }
        let (rows, at) = (self.rows, n as usize);
        let mut front = Vec::with_capacity(self.columns.len());
        let mut back = Vec::with_capacity(self.columns.len());
        for column in self.columns {
            let (nulls_front, nulls_back) = split_nulls(column.nulls, at, rows as usize);
            let (data_front, data_back) = match column.data {
                ColumnData::Integer(mut v) => {
                    let b = v.split_off(at);
                    (ColumnData::Integer(v), ColumnData::Integer(b))
                }
                ColumnData::Real(mut v) => {
                    let b = v.split_off(at);
                    (ColumnData::Real(v), ColumnData::Real(b))
                }
                ColumnData::Text(t) => {
                    let (f, b) = split_text(t, at);
                    (ColumnData::Text(f), ColumnData::Text(b))
                }
                ColumnData::Blob(t) => {
                    let (f, b) = split_text(t, at);
                    (ColumnData::Blob(f), ColumnData::Blob(b))
                }
                ColumnData::TextDict {
                    values,
                    mut indices,
                } => {
                    let b = indices.split_off(at);
                    // The front gets a dictionary of just its own values;
                    // the rest keeps the chunk's and is compacted when served.
                    let (front_values, front_indices) = compact(&values, &indices);
                    (
                        ColumnData::TextDict {
                            values: front_values,
                            indices: front_indices,
                        },
                        ColumnData::TextDict { values, indices: b },
                    )
                }
            };
            front.push(Column {
                nulls: nulls_front,
                data: data_front,
            });
            back.push(Column {
                nulls: nulls_back,
                data: data_back,
            });
        }
        (
            Batch {
                rows: n,
                columns: front,
            },
            Some(Batch {
                rows: rows - n,
                columns: back,
            }),
        )
    }
}

impl Batch {
    /// Rebuilds every dictionary column from the values its rows use, in
    /// order of first appearance, as the WIT promises for each batch.
    pub(super) fn compact_dictionaries(&mut self) {
        for column in &mut self.columns {
            if let ColumnData::TextDict { values, indices } = &mut column.data {
                let (v, i) = compact(values, indices);
                *values = v;
                *indices = i;
            }
        }
    }
}

/// The values `indices` use, in order of first appearance, and the indices
/// renumbered to match.
fn compact(values: &TextData, indices: &[u32]) -> (TextData, Vec<u32>) {
    let mut renumber: FxHashMap<u32, u32> = FxHashMap::default();
    let mut out = TextData {
        data: Vec::new(),
        offsets: vec![0],
    };
    let mut new_indices = Vec::with_capacity(indices.len());
    for &id in indices {
        let next = renumber.len() as u32;
        let new_id = *renumber.entry(id).or_insert_with(|| {
            let (a, b) = (
                values.offsets[id as usize] as usize,
                values.offsets[id as usize + 1] as usize,
            );
            out.data.extend_from_slice(&values.data[a..b]);
            out.offsets.push(out.data.len() as u32);
            next
        });
        new_indices.push(new_id);
    }
    (out, new_indices)
}

fn split_text(mut t: TextData, at: usize) -> (TextData, TextData) {
    let cut = t.offsets[at];
    let data_back = t.data.split_off(cut as usize);
    let offsets_back: Vec<u32> = t.offsets[at..].iter().map(|o| o - cut).collect();
    t.offsets.truncate(at + 1);
    (
        t,
        TextData {
            data: data_back,
            offsets: offsets_back,
        },
    )
}

fn split_nulls(
    nulls: Option<Vec<u8>>,
    at: usize,
    rows: usize,
) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let Some(bits) = nulls else {
        return (None, None);
    };
    let is_null = |i: usize| bits.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0);
    let pack = |range: std::ops::Range<usize>| {
        let mut out = vec![0u8; range.len().div_ceil(8)];
        let mut any = false;
        for (j, i) in range.enumerate() {
            if is_null(i) {
                out[j / 8] |= 1 << (j % 8);
                any = true;
            }
        }
        any.then_some(out)
    };
    (pack(0..at), pack(at..rows))
}

/// One value as a reader hands it over, before it joins its column.
#[derive(Debug, Clone, Copy)]
pub(super) enum Value<'a> {
    /// SQL NULL.
    Null,
    /// An integer.
    Integer(i64),
    /// A float.
    Real(f64),
    /// Text, checked to be UTF-8 when pushed.
    Text(&'a [u8]),
    /// Bytes.
    Blob(&'a [u8]),
}

/// A column kind's name, as errors write it.
pub(super) fn kind_name(k: ColumnKind) -> &'static str {
    match k {
        ColumnKind::Integer => "integer",
        ColumnKind::Real => "real",
        ColumnKind::Text => "text",
        ColumnKind::Blob => "blob",
    }
}

fn value_name(v: &Value<'_>) -> &'static str {
    match v {
        Value::Null => "NULL",
        Value::Integer(_) => "an integer",
        Value::Real(_) => "a real",
        Value::Text(_) => "text",
        Value::Blob(_) => "a blob",
    }
}

/// One chunk being built on the reader thread: a builder per column, cut
/// at a fixed row count or after `MAX_CHUNK_BYTES` of text and blobs, or
/// when the cursor is dropped.
pub(super) struct Chunk<'s> {
    builders: Vec<ColumnBuilder>,
    rows: usize,
    cap: usize,
    bytes: usize,
    before: u64,
    stop: &'s AtomicBool,
}

impl<'s> Chunk<'s> {
    /// An empty chunk of at most `cap` rows of columns `kinds`, following
    /// `before` rows of the result.
    pub(super) fn new(kinds: &[ColumnKind], cap: usize, before: u64, stop: &'s AtomicBool) -> Self {
        Chunk {
            builders: kinds.iter().map(|k| ColumnBuilder::new(*k, cap)).collect(),
            rows: 0,
            cap,
            bytes: 0,
            before,
            stop,
        }
    }

    /// Whether the chunk takes no more rows.
    pub(super) fn full(&self) -> bool {
        self.rows >= self.cap || self.bytes >= MAX_CHUNK_BYTES || self.stop.load(Ordering::Relaxed)
    }

    /// Appends column `column`'s value of the row being built; on a value
    /// its column cannot hold, says what was found.
    pub(super) fn push(&mut self, column: usize, v: Value<'_>) -> Result<(), &'static str> {
        match self.builders.get_mut(column) {
            Some(b) => b.push(self.rows, v, &mut self.bytes),
            None => Err("a value past the last column"),
        }
    }

    /// Ends the row being built.
    pub(super) fn end_row(&mut self) {
        self.rows += 1;
    }

    /// The number (from 1, over the whole result) of the row being built.
    pub(super) fn row_number(&self) -> u64 {
        self.before + self.rows as u64 + 1
    }

    /// Rows in the chunk.
    pub(super) fn rows(&self) -> usize {
        self.rows
    }

    /// The chunk as a batch; `None` when it holds no row.
    pub(super) fn finish(self) -> Option<Batch> {
        let n = self.rows;
        (n > 0).then(|| Batch {
            rows: n as u32,
            columns: self.builders.into_iter().map(|b| b.finish(n)).collect(),
        })
    }
}

/// Builds one column of one batch.
enum ColumnBuilder {
    Integer(Vec<i64>, Nulls),
    Real(Vec<f64>, Nulls),
    Text(TextBuilder, Nulls),
    Blob(TextData, Nulls),
}

#[derive(Default)]
struct Nulls(Option<Vec<u8>>);

impl Nulls {
    fn set(&mut self, row: usize, cap: usize) {
        let bits = self.0.get_or_insert_with(|| vec![0; cap.div_ceil(8)]);
        if row / 8 >= bits.len() {
            bits.resize(row / 8 + 1, 0);
        }
        bits[row / 8] |= 1 << (row % 8);
    }

    fn finish(self, rows: usize) -> Option<Vec<u8>> {
        self.0.map(|mut b| {
            b.truncate(rows.div_ceil(8));
            b
        })
    }
}

impl ColumnBuilder {
    fn new(kind: ColumnKind, cap: usize) -> ColumnBuilder {
        match kind {
            ColumnKind::Integer => {
                ColumnBuilder::Integer(Vec::with_capacity(cap), Nulls::default())
            }
            ColumnKind::Real => ColumnBuilder::Real(Vec::with_capacity(cap), Nulls::default()),
            ColumnKind::Text => ColumnBuilder::Text(TextBuilder::new(cap), Nulls::default()),
            ColumnKind::Blob => ColumnBuilder::Blob(
                TextData {
                    data: Vec::new(),
                    offsets: vec![0],
                },
                Nulls::default(),
            ),
        }
    }

    /// Appends row `row`; on a type mismatch returns what was found.
    fn push(
        &mut self,
        row: usize,
        v: Value<'_>,
        bytes: &mut usize,
    ) -> std::result::Result<(), &'static str> {
        match (self, v) {
            (ColumnBuilder::Integer(vals, nulls), Value::Null) => {
                nulls.set(row, vals.capacity());
                vals.push(0);
            }
            (ColumnBuilder::Integer(vals, _), Value::Integer(i)) => vals.push(i),
            (ColumnBuilder::Real(vals, nulls), Value::Null) => {
                nulls.set(row, vals.capacity());
                vals.push(0.0);
            }
            (ColumnBuilder::Real(vals, _), Value::Real(f)) => vals.push(f),
            (ColumnBuilder::Real(vals, _), Value::Integer(i)) => vals.push(i as f64),
            (ColumnBuilder::Text(t, nulls), Value::Null) => {
                nulls.set(row, t.cap);
                t.push(b"");
            }
            (ColumnBuilder::Text(t, _), Value::Text(s)) => {
                if std::str::from_utf8(s).is_err() {
                    return Err("text that is not valid UTF-8");
                }
                *bytes += s.len();
                t.push(s);
            }
            (ColumnBuilder::Blob(t, nulls), Value::Null) => {
                nulls.set(row, t.offsets.capacity());
                t.offsets.push(t.data.len() as u32);
            }
            (ColumnBuilder::Blob(t, _), Value::Blob(b) | Value::Text(b)) => {
                *bytes += b.len();
                t.data.extend_from_slice(b);
                t.offsets.push(t.data.len() as u32);
            }
            (_, other) => return Err(value_name(&other)),
        }
        Ok(())
    }

    fn finish(self, rows: usize) -> Column {
        match self {
            ColumnBuilder::Integer(v, n) => Column {
                nulls: n.finish(rows),
                data: ColumnData::Integer(v),
            },
            ColumnBuilder::Real(v, n) => Column {
                nulls: n.finish(rows),
                data: ColumnData::Real(v),
            },
            ColumnBuilder::Text(t, n) => Column {
                nulls: n.finish(rows),
                data: t.finish(),
            },
            ColumnBuilder::Blob(t, n) => Column {
                nulls: n.finish(rows),
                data: ColumnData::Blob(t),
            },
        }
    }
}

/// Text, dictionary-encoded while the batch has few distinct values (at
/// most a quarter of its rows), plain otherwise. The dictionary moves string
/// hashing out of the guest, where it is 2-3x slower than here.
struct TextBuilder {
    cap: usize,
    dict: Option<Dictionary>,
    plain: TextData,
}

/// A batch's distinct values so far, and each row's index into them.
struct Dictionary {
    ids: FxHashMap<Box<[u8]>, u32>,
    values: TextData,
    indices: Vec<u32>,
}

impl TextBuilder {
    fn new(cap: usize) -> TextBuilder {
        TextBuilder {
            cap,
            dict: Some(Dictionary {
                ids: FxHashMap::default(),
                values: TextData {
                    data: Vec::new(),
                    offsets: vec![0],
                },
                indices: Vec::with_capacity(cap),
            }),
            plain: TextData::default(),
        }
    }

    fn push(&mut self, s: &[u8]) {
        if let Some(dict) = &mut self.dict {
            let id = match dict.ids.get(s) {
                Some(&id) => id,
                None => {
                    let id = dict.ids.len() as u32;
                    dict.ids.insert(s.into(), id);
                    dict.values.data.extend_from_slice(s);
                    dict.values.offsets.push(dict.values.data.len() as u32);
                    id
                }
            };
            dict.indices.push(id);
            if dict.ids.len() > self.cap / 4 + 1 {
                self.abandon_dictionary();
            }
            return;
        }
        self.plain.data.extend_from_slice(s);
        self.plain.offsets.push(self.plain.data.len() as u32);
    }

    /// Abandons the dictionary, expanding what it holds so far.
    fn abandon_dictionary(&mut self) {
        let Some(Dictionary {
            values, indices, ..
        }) = self.dict.take()
        else {
            return;
        };
        let mut plain = TextData {
            data: Vec::new(),
            offsets: Vec::with_capacity(self.cap + 1),
        };
        plain.offsets.push(0);
        for id in indices {
            let (a, b) = (
                values.offsets[id as usize] as usize,
                values.offsets[id as usize + 1] as usize,
            );
            plain.data.extend_from_slice(&values.data[a..b]);
            plain.offsets.push(plain.data.len() as u32);
        }
        self.plain = plain;
    }

    fn finish(mut self) -> ColumnData {
        if let Some(dict) = &self.dict
            && dict.ids.len() * 4 > dict.indices.len().max(4)
        {
            self.abandon_dictionary();
        }
        match self.dict {
            Some(Dictionary {
                values, indices, ..
            }) => ColumnData::TextDict { values, indices },
            None => ColumnData::Text(self.plain),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value as a test writes and reads it back.
    #[derive(Debug, Clone, PartialEq)]
    enum V {
        Null,
        I(i64),
        R(f64),
        T(&'static str),
        B(&'static [u8]),
    }

    fn as_value(v: &V) -> Value<'static> {
        match v {
            V::Null => Value::Null,
            V::I(i) => Value::Integer(*i),
            V::R(f) => Value::Real(*f),
            V::T(s) => Value::Text(s.as_bytes()),
            V::B(b) => Value::Blob(b),
        }
    }

    fn text_at(t: &TextData, i: usize) -> Vec<u8> {
        t.data[t.offsets[i] as usize..t.offsets[i + 1] as usize].to_vec()
    }

    /// Row `row` of column `c`, read back: `None` for NULL, else the
    /// integer, real, or bytes.
    fn read(c: &Column, row: usize) -> Option<String> {
        if c.nulls
            .as_ref()
            .is_some_and(|b| b[row / 8] & (1 << (row % 8)) != 0)
        {
            return None;
        }
        Some(match &c.data {
            ColumnData::Integer(v) => format!("i{}", v[row]),
            ColumnData::Real(v) => format!("r{}", v[row]),
            ColumnData::Text(t) | ColumnData::Blob(t) => {
                String::from_utf8_lossy(&text_at(t, row)).into_owned()
            }
            ColumnData::TextDict { values, indices } => {
                String::from_utf8_lossy(&text_at(values, indices[row] as usize)).into_owned()
            }
        })
    }

    fn expected(kind: ColumnKind, v: &V) -> Option<String> {
        match (kind, v) {
            (_, V::Null) => None,
            (ColumnKind::Real, V::I(i)) => Some(format!("r{}", *i as f64)),
            (_, V::I(i)) => Some(format!("i{i}")),
            (_, V::R(f)) => Some(format!("r{f}")),
            (_, V::T(s)) => Some(s.to_string()),
            (_, V::B(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        }
    }

    fn build(kinds: &[ColumnKind], rows: &[Vec<V>], cap: usize) -> Option<Batch> {
        let stop = AtomicBool::new(false);
        let mut chunk = Chunk::new(kinds, cap, 0, &stop);
        for row in rows {
            for (i, v) in row.iter().enumerate() {
                chunk
                    .push(i, as_value(v))
                    .expect("a value its column holds");
            }
            chunk.end_row();
        }
        chunk.finish()
    }

    fn check_rows(kinds: &[ColumnKind], batch: &Batch, rows: &[Vec<V>]) {
        assert_eq!(batch.rows as usize, rows.len());
        batch.validate().expect("a built batch is well formed");
        for (r, row) in rows.iter().enumerate() {
            for (c, v) in row.iter().enumerate() {
                assert_eq!(
                    read(&batch.columns[c], r),
                    expected(kinds[c], v),
                    "row {r} column {c}"
                );
            }
        }
    }

    use ColumnKind::{Blob, Integer, Real, Text};

    /// A case: its name, the columns, the rows, and whether the text
    /// column (the first text one) should come out dictionary-encoded.
    type Case = (&'static str, Vec<ColumnKind>, Vec<Vec<V>>, Option<bool>);

    fn cases() -> Vec<Case> {
        let repeated: Vec<Vec<V>> = (0..40)
            .map(|i| vec![V::I(i), V::T(["north", "south"][i as usize % 2])])
            .collect();
        let distinct: Vec<Vec<V>> = (0..40)
            .map(|i| {
                let s: &'static str = Box::leak(format!("customer-{i}").into_boxed_str());
                vec![V::I(i), V::T(s)]
            })
            .collect();
        vec![
            (
                "every kind, with NULLs in each",
                vec![Integer, Real, Text, Blob],
                vec![
                    vec![V::I(1), V::R(1.5), V::T("a"), V::B(b"\x00\x01")],
                    vec![V::Null, V::Null, V::Null, V::Null],
                    vec![V::I(-7), V::I(3), V::T(""), V::B(b"")],
                    vec![V::I(i64::MAX), V::R(-0.25), V::T("é"), V::T("as bytes")],
                ],
                None,
            ),
            (
                "few distinct values: a dictionary",
                vec![Integer, Text],
                repeated,
                Some(true),
            ),
            (
                "every value distinct: plain text",
                vec![Integer, Text],
                distinct,
                Some(false),
            ),
            ("a single row", vec![Text], vec![vec![V::T("only")]], None),
            (
                "nine rows, NULL in the ninth (a second bitmap byte)",
                vec![Integer],
                (0..9)
                    .map(|i| vec![if i == 8 { V::Null } else { V::I(i) }])
                    .collect(),
                None,
            ),
        ]
    }

    #[test]
    fn a_chunk_reads_back_every_value_it_was_given_and_is_well_formed() {
        for (name, kinds, rows, dict) in cases() {
            let batch = build(&kinds, &rows, 64).unwrap_or_else(|| panic!("{name}: a batch"));
            check_rows(&kinds, &batch, &rows);
            if let Some(want) = dict {
                let text = kinds.iter().position(|k| *k == Text).unwrap();
                let is_dict = matches!(batch.columns[text].data, ColumnData::TextDict { .. });
                assert_eq!(is_dict, want, "{name}");
            }
            // A column with no NULL carries no bitmap.
            for (c, column) in batch.columns.iter().enumerate() {
                let any_null = rows.iter().any(|r| r[c] == V::Null);
                assert_eq!(column.nulls.is_some(), any_null, "{name}: column {c}");
            }
        }
    }

    #[test]
    fn an_empty_chunk_is_no_batch() {
        assert!(build(&[Integer], &[], 8).is_none());
    }

    #[test]
    fn a_value_its_column_cannot_hold_is_named_and_refused() {
        let stop = AtomicBool::new(false);
        for (kind, value, found) in [
            (Integer, Value::Real(1.0), "a real"),
            (Integer, Value::Text(b"1"), "text"),
            (Integer, Value::Blob(b"1"), "a blob"),
            (Real, Value::Text(b"1.5"), "text"),
            (Text, Value::Integer(1), "an integer"),
            (Text, Value::Blob(b"x"), "a blob"),
            (
                Text,
                Value::Text(b"\xff\xfe"),
                "text that is not valid UTF-8",
            ),
            (Blob, Value::Real(2.0), "a real"),
        ] {
            let mut chunk = Chunk::new(&[kind], 4, 0, &stop);
            assert_eq!(chunk.push(0, value), Err(found), "{kind:?} {value:?}");
        }
        let mut chunk = Chunk::new(&[Integer], 4, 0, &stop);
        assert_eq!(
            chunk.push(1, Value::Integer(1)),
            Err("a value past the last column")
        );
    }

    #[test]
    fn a_chunk_is_full_at_its_row_cap_at_its_byte_cap_or_when_stopped() {
        let stop = AtomicBool::new(false);
        let mut chunk = Chunk::new(&[Integer], 3, 10, &stop);
        for i in 0..3 {
            assert!(!chunk.full(), "row {i}");
            assert_eq!(chunk.row_number(), 11 + i as u64);
            chunk.push(0, Value::Integer(i)).unwrap();
            chunk.end_row();
        }
        assert!(chunk.full());
        assert_eq!(chunk.rows(), 3);

        let big = vec![b'x'; MAX_CHUNK_BYTES];
        let mut chunk = Chunk::new(&[Blob], 1000, 0, &stop);
        chunk.push(0, Value::Blob(&big)).unwrap();
        chunk.end_row();
        assert!(chunk.full(), "past the byte cap after one row");

        let chunk = Chunk::new(&[Integer], 1000, 0, &stop);
        stop.store(true, Ordering::Relaxed);
        assert!(chunk.full(), "a dropped cursor stops the chunk");
    }

    #[test]
    fn splitting_at_every_row_keeps_every_value_and_both_halves_valid() {
        for (name, kinds, rows, _) in cases() {
            let whole = build(&kinds, &rows, 64).unwrap();
            for n in 0..=rows.len() as u32 + 1 {
                let (front, back) = whole.clone().split_front(n);
                let cut = (n as usize).min(rows.len());
                check_rows(&kinds, &front, &rows[..cut]);
                match back {
                    None => assert!(cut == rows.len(), "{name} at {n}: the rest is lost"),
                    Some(mut back) => {
                        back.compact_dictionaries();
                        check_rows(&kinds, &back, &rows[cut..]);
                    }
                }
                // The front's dictionary holds only the values it uses.
                for c in &front.columns {
                    if let ColumnData::TextDict { values, indices } = &c.data {
                        let used: std::collections::HashSet<_> = indices.iter().collect();
                        assert_eq!(used.len(), values.offsets.len() - 1, "{name} at {n}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_malformed_batch_read_back_is_refused() {
        let text = |data: &[u8], offsets: &[u32]| TextData {
            data: data.to_vec(),
            offsets: offsets.to_vec(),
        };
        let one = |data: ColumnData, nulls: Option<Vec<u8>>, rows: u32| Batch {
            rows,
            columns: vec![Column { nulls, data }],
        };
        for (what, batch) in [
            (
                "too few integers",
                one(ColumnData::Integer(vec![1]), None, 2),
            ),
            (
                "too many reals",
                one(ColumnData::Real(vec![1.0; 3]), None, 2),
            ),
            (
                "offsets past the data",
                one(ColumnData::Text(text(b"ab", &[0, 1, 5])), None, 2),
            ),
            (
                "offsets that fall",
                one(ColumnData::Blob(text(b"ab", &[0, 2, 1])), None, 2),
            ),
            (
                "offsets not from 0",
                one(ColumnData::Text(text(b"ab", &[1, 2])), None, 1),
            ),
            (
                "an index outside the dictionary",
                one(
                    ColumnData::TextDict {
                        values: text(b"a", &[0, 1]),
                        indices: vec![0, 1],
                    },
                    None,
                    2,
                ),
            ),
            (
                "a bitmap shorter than the rows",
                one(ColumnData::Integer(vec![0; 9]), Some(vec![0]), 9),
            ),
        ] {
            let err = batch.validate().expect_err(what);
            assert!(err.contains("column 0"), "{what}: {err}");
        }
    }
}
