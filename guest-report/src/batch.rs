//! A plain, host-independent view over one columnar batch of rows.
//!
//! This module owns the Rust mirror of the WIT `source` types (`batch`,
//! `column`, `column-data`, `text-column`, `dict-column`) and the typed,
//! bounds-checked accessors the digest reads them through. It knows nothing
//! about wit-bindgen: `lib.rs` moves the generated vectors into these types,
//! and the unit tests build them by hand. Every accessor checks its indices,
//! offsets and UTF-8, so a malformed batch yields a [`BatchError`], never a
//! panic.

#![forbid(unsafe_code)]

use std::fmt;

/// The declared type of a column, mirroring the WIT `column-kind` enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// 64-bit signed integers.
    Integer,
    /// 64-bit floating point numbers.
    Real,
    /// UTF-8 text (sent as plain or dictionary-encoded text).
    Text,
    /// Raw bytes.
    Blob,
}

impl ColumnKind {
    /// The kind's name as the WIT contract spells it.
    pub fn name(self) -> &'static str {
        match self {
            ColumnKind::Integer => "integer",
            ColumnKind::Real => "real",
            ColumnKind::Text => "text",
            ColumnKind::Blob => "blob",
        }
    }
}

impl fmt::Display for ColumnKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A column's name and declared kind, mirroring the WIT `column-info` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnInfo {
    /// The column's name as the query labels it.
    pub name: String,
    /// The column's declared kind.
    pub kind: ColumnKind,
}

/// Variable-length values packed end to end: value `i` is
/// `data[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextColumn {
    /// The concatenated bytes of every value.
    pub data: Vec<u8>,
    /// Byte offsets into `data`, one more than the number of values.
    pub offsets: Vec<u32>,
}

/// Dictionary-encoded text: row `i` holds `values[indices[i]]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DictColumn {
    /// The distinct values of the batch.
    pub values: TextColumn,
    /// For each row, an index into `values`.
    pub indices: Vec<u32>,
}

/// The values of one column in one batch, mirroring WIT `column-data`.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnData {
    /// Integer values.
    Integer(Vec<i64>),
    /// Real values.
    Real(Vec<f64>),
    /// Plain text values.
    Text(TextColumn),
    /// Text values through a per-batch dictionary.
    TextDict(DictColumn),
    /// Byte strings.
    Blob(TextColumn),
}

/// One column of a batch, mirroring the WIT `column` record.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// NULL bitmap: bit `i % 8` of byte `i / 8` set means row `i` is NULL;
    /// `None` means no row is NULL.
    pub nulls: Option<Vec<u8>>,
    /// The values, one per row.
    pub data: ColumnData,
}

/// A run of consecutive rows, mirroring the WIT `batch` record.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Batch {
    /// How many rows the batch holds.
    pub rows: usize,
    /// One entry per column, in the order of the cursor's columns.
    pub columns: Vec<Column>,
}

/// Why a value could not be read from a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchError {
    /// The batch has no column at this position.
    MissingColumn {
        /// The position asked for.
        index: usize,
        /// How many columns the batch has.
        columns: usize,
    },
    /// The column's data is not of a kind the accessor can read.
    WrongKind {
        /// What the accessor reads, for example `integer`.
        expected: &'static str,
        /// The kind the data actually has.
        found: ColumnKind,
    },
    /// The column holds a different number of values than the batch has rows.
    LengthMismatch {
        /// The batch's row count.
        rows: usize,
        /// How many values the column holds.
        values: usize,
    },
    /// The row is past the end of the column.
    RowOutOfRange {
        /// The row asked for.
        row: usize,
        /// How many values the column holds.
        len: usize,
    },
    /// The NULL bitmap is too short to cover the row.
    NullsTooShort {
        /// The row asked for.
        row: usize,
        /// The bitmap's length in bytes.
        bytes: usize,
    },
    /// A text value's offsets are missing, decreasing or past the data.
    BadOffsets {
        /// The value's position (the row, or the dictionary entry).
        value: usize,
        /// The value's start offset, if present.
        start: Option<u32>,
        /// The value's end offset, if present.
        end: Option<u32>,
        /// The length of the data the offsets point into.
        data_len: usize,
    },
    /// A text value is not valid UTF-8.
    InvalidUtf8 {
        /// The value's position (the row, or the dictionary entry).
        value: usize,
    },
    /// A dictionary index points past the dictionary.
    DictIndexOutOfRange {
        /// The row holding the index.
        row: usize,
        /// The index found.
        index: u32,
        /// How many values the dictionary holds.
        values: usize,
    },
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchError::MissingColumn { index, columns } => {
                write!(f, "batch has no column {index} (it has {columns})")
            }
            BatchError::WrongKind { expected, found } => {
                write!(f, "expected {expected} data, found {found}")
            }
            BatchError::LengthMismatch { rows, values } => {
                write!(f, "holds {values} values for {rows} rows")
            }
            BatchError::RowOutOfRange { row, len } => {
                write!(f, "row {row} is out of range ({len} values)")
            }
            BatchError::NullsTooShort { row, bytes } => {
                write!(f, "NULL bitmap of {bytes} bytes does not cover row {row}")
            }
            BatchError::BadOffsets {
                value,
                start,
                end,
                data_len,
            } => {
                let show =
                    |o: &Option<u32>| o.map_or_else(|| "missing".to_owned(), |v| v.to_string());
                write!(
                    f,
                    "value {value} has offsets {}..{} outside {data_len} bytes of data",
                    show(start),
                    show(end)
                )
            }
            BatchError::InvalidUtf8 { value } => write!(f, "value {value} is not valid UTF-8"),
            BatchError::DictIndexOutOfRange { row, index, values } => write!(
                f,
                "row {row} has dictionary index {index} but the dictionary holds {values} values"
            ),
        }
    }
}

impl std::error::Error for BatchError {}

impl TextColumn {
    /// How many values the column holds (one less than its offsets).
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Whether the column holds no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of value `i`, after checking its offsets.
    pub fn bytes_at(&self, i: usize) -> Result<&[u8], BatchError> {
        let start = self.offsets.get(i).copied();
        let end = i.checked_add(1).and_then(|j| self.offsets.get(j)).copied();
        let bad = || BatchError::BadOffsets {
            value: i,
            start,
            end,
            data_len: self.data.len(),
        };
        let (s, e) = match (start, end) {
            (Some(s), Some(e)) => (s as usize, e as usize),
            _ => return Err(bad()),
        };
        if s > e {
            return Err(bad());
        }
        self.data.get(s..e).ok_or_else(bad)
    }

    /// Value `i` as text, after checking its offsets and UTF-8.
    pub fn str_at(&self, i: usize) -> Result<&str, BatchError> {
        let bytes = self.bytes_at(i)?;
        std::str::from_utf8(bytes).map_err(|_| BatchError::InvalidUtf8 { value: i })
    }
}

impl DictColumn {
    /// How many rows the column holds.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// Whether the column holds no rows.
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// How many distinct values the dictionary holds.
    pub fn dictionary_len(&self) -> usize {
        self.values.len()
    }

    /// The dictionary index of row `row`, checked against the dictionary.
    pub fn index_at(&self, row: usize) -> Result<u32, BatchError> {
        let index = *self.indices.get(row).ok_or(BatchError::RowOutOfRange {
            row,
            len: self.indices.len(),
        })?;
        let values = self.values.len();
        if (index as usize) < values {
            Ok(index)
        } else {
            Err(BatchError::DictIndexOutOfRange { row, index, values })
        }
    }

    /// Dictionary entry `index` as text.
    pub fn value(&self, index: u32) -> Result<&str, BatchError> {
        self.values.str_at(index as usize)
    }

    /// The text of row `row`, through the dictionary.
    pub fn str_at(&self, row: usize) -> Result<&str, BatchError> {
        self.value(self.index_at(row)?)
    }
}

impl Column {
    /// A column without NULLs.
    pub fn new(data: ColumnData) -> Self {
        Column { nulls: None, data }
    }

    /// A column whose rows at the given positions are NULL.
    pub fn with_nulls(data: ColumnData, null_rows: &[usize]) -> Self {
        let mut bitmap = Vec::new();
        for &row in null_rows {
            let byte = row / 8;
            if bitmap.len() <= byte {
                bitmap.resize(byte + 1, 0);
            }
            bitmap[byte] |= 1 << (row % 8);
        }
        Column {
            nulls: Some(bitmap),
            data,
        }
    }

    /// The kind of the column's data (`text-dict` reports as text).
    pub fn kind(&self) -> ColumnKind {
        match &self.data {
            ColumnData::Integer(_) => ColumnKind::Integer,
            ColumnData::Real(_) => ColumnKind::Real,
            ColumnData::Text(_) | ColumnData::TextDict(_) => ColumnKind::Text,
            ColumnData::Blob(_) => ColumnKind::Blob,
        }
    }

    /// How many values the column's data holds.
    pub fn len(&self) -> usize {
        match &self.data {
            ColumnData::Integer(v) => v.len(),
            ColumnData::Real(v) => v.len(),
            ColumnData::Text(t) | ColumnData::Blob(t) => t.len(),
            ColumnData::TextDict(d) => d.len(),
        }
    }

    /// Whether the column holds no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks that the column holds exactly `rows` values and that its NULL
    /// bitmap, if any, covers every row.
    pub fn check_rows(&self, rows: usize) -> Result<(), BatchError> {
        let values = self.len();
        if values != rows {
            return Err(BatchError::LengthMismatch { rows, values });
        }
        if let Some(bits) = &self.nulls
            && rows > 0
            && bits.len() < rows.div_ceil(8)
        {
            return Err(BatchError::NullsTooShort {
                row: rows - 1,
                bytes: bits.len(),
            });
        }
        Ok(())
    }

    /// Whether row `row` is NULL. A column without a bitmap has no NULLs; a
    /// bitmap too short to cover the row is an error.
    #[inline]
    pub fn is_null(&self, row: usize) -> Result<bool, BatchError> {
        match &self.nulls {
            None => Ok(false),
            Some(bits) => match bits.get(row / 8) {
                Some(byte) => Ok(byte & (1 << (row % 8)) != 0),
                None => Err(BatchError::NullsTooShort {
                    row,
                    bytes: bits.len(),
                }),
            },
        }
    }

    /// Every value of integer data, as a slice.
    pub fn integers(&self) -> Result<&[i64], BatchError> {
        match &self.data {
            ColumnData::Integer(v) => Ok(v),
            _ => Err(BatchError::WrongKind {
                expected: "integer",
                found: self.kind(),
            }),
        }
    }

    /// Every value of real data, as a slice (integer data does not qualify;
    /// read it through [`Column::f64_at`] to widen it).
    pub fn reals(&self) -> Result<&[f64], BatchError> {
        match &self.data {
            ColumnData::Real(v) => Ok(v),
            _ => Err(BatchError::WrongKind {
                expected: "real",
                found: self.kind(),
            }),
        }
    }

    /// The integer at row `row`; only integer data qualifies.
    #[inline]
    pub fn i64_at(&self, row: usize) -> Result<i64, BatchError> {
        match &self.data {
            ColumnData::Integer(v) => v
                .get(row)
                .copied()
                .ok_or(BatchError::RowOutOfRange { row, len: v.len() }),
            _ => Err(BatchError::WrongKind {
                expected: "integer",
                found: self.kind(),
            }),
        }
    }

    /// The number at row `row`: real data as is, integer data widened.
    #[inline]
    pub fn f64_at(&self, row: usize) -> Result<f64, BatchError> {
        let out_of_range = |len| BatchError::RowOutOfRange { row, len };
        match &self.data {
            ColumnData::Real(v) => v.get(row).copied().ok_or_else(|| out_of_range(v.len())),
            ColumnData::Integer(v) => v
                .get(row)
                .map(|&i| i as f64)
                .ok_or_else(|| out_of_range(v.len())),
            _ => Err(BatchError::WrongKind {
                expected: "real or integer",
                found: self.kind(),
            }),
        }
    }

    /// The text at row `row`, from plain or dictionary-encoded text.
    #[inline]
    pub fn str_at(&self, row: usize) -> Result<&str, BatchError> {
        match &self.data {
            ColumnData::Text(t) => t.str_at(row),
            ColumnData::TextDict(d) => d.str_at(row),
            _ => Err(BatchError::WrongKind {
                expected: "text",
                found: self.kind(),
            }),
        }
    }

    /// The raw bytes at row `row`, from text (plain or dictionary) or blob
    /// data. Text bytes read this way are not checked for UTF-8.
    #[inline]
    pub fn bytes_at(&self, row: usize) -> Result<&[u8], BatchError> {
        match &self.data {
            ColumnData::Text(t) | ColumnData::Blob(t) => t.bytes_at(row),
            ColumnData::TextDict(d) => d.values.bytes_at(d.index_at(row)? as usize),
            _ => Err(BatchError::WrongKind {
                expected: "text or blob",
                found: self.kind(),
            }),
        }
    }

    /// The dictionary of a dictionary-encoded text column, or `None` for any
    /// other encoding. Callers can resolve each dictionary entry once per
    /// batch and then read rows through [`DictColumn::index_at`].
    pub fn dictionary(&self) -> Option<&DictColumn> {
        match &self.data {
            ColumnData::TextDict(d) => Some(d),
            _ => None,
        }
    }
}

impl Batch {
    /// The column at position `index`.
    pub fn column(&self, index: usize) -> Result<&Column, BatchError> {
        self.columns.get(index).ok_or(BatchError::MissingColumn {
            index,
            columns: self.columns.len(),
        })
    }
}

/// Packs strings into a [`TextColumn`]; a convenience for tests and callers
/// that build batches by hand.
impl<S: AsRef<str>> FromIterator<S> for TextColumn {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut column = TextColumn {
            data: Vec::new(),
            offsets: vec![0],
        };
        for s in iter {
            column.data.extend_from_slice(s.as_ref().as_bytes());
            column
                .offsets
                .push(u32::try_from(column.data.len()).unwrap_or(u32::MAX));
        }
        column
    }
}

impl DictColumn {
    /// Dictionary-encodes strings, numbering distinct values in order of
    /// first appearance as the host does.
    pub fn encode<S: AsRef<str>>(rows: &[S]) -> Self {
        let mut distinct: Vec<&str> = Vec::new();
        let mut indices = Vec::with_capacity(rows.len());
        for s in rows {
            let s = s.as_ref();
            let index = match distinct.iter().position(|d| *d == s) {
                Some(i) => i,
                None => {
                    distinct.push(s);
                    distinct.len() - 1
                }
            };
            indices.push(u32::try_from(index).unwrap_or(u32::MAX));
        }
        DictColumn {
            values: distinct.into_iter().collect(),
            indices,
        }
    }
}

#[cfg(test)]
mod tests;
