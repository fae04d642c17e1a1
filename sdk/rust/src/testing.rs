//! Batches built from plain values, and the window's time zone, for
//! native tests of a report's logic: no host, no WebAssembly.
//!
//! [`set_zone`] and [`set_fixed_offset`] give a zone its offsets on this
//! thread, as the host would give them inside a component, so that
//! [`Window::local`](crate::Window::local) works natively ([`UTC`] needs
//! neither); [`zone_requests`] says what the SDK asked for.
//!
//! [`BatchBuilder`] makes a [`Batch`] the way the host would send it and
//! checks it with the same code a real batch goes through, so a test sees
//! exactly the views a run would. [`RawColumn`] gives every field of the
//! WIT column as is, to build a malformed batch on purpose.
//!
//! ```
//! use jobhost_sdk::testing::BatchBuilder;
//!
//! let batch = BatchBuilder::new()
//!     .integers("qty", [Some(1), None])
//!     .texts("region", [Some("n"), None])
//!     .build();
//! assert_eq!(batch.integers("qty")?.get(0), Some(1));
//! assert_eq!(batch.texts("region")?.get(1), None);
//! # Ok::<(), jobhost_sdk::Error>(())
//! ```

#![forbid(unsafe_code)]

use std::sync::Arc;

use crate::bindings::jobhost::report::source as wit;
use crate::zone::{FAKE, forget};
use crate::{Batch, ColumnInfo, ColumnKind, Error, Instant, OffsetSpan};

/// The zone name [`Window::local`](crate::Window::local) answers natively
/// with no zone given: offset 0 at every instant (so do `Etc/UTC` and
/// UTC's other names).
pub const UTC: &str = "UTC";

/// Gives windows of the zone `timezone` these spans of constant offset on
/// this thread, for native tests, in place of the host's answers: the SDK
/// asks for them as it would ask the host, and an instant no span holds is
/// an error. What the SDK kept of the zone is forgotten.
///
/// ```
/// use jobhost_sdk::{Instant, OffsetSpan, Window, testing};
///
/// let at = Instant::from_unix_seconds;
/// // Europe/Berlin around the night the clocks go back in 2026.
/// testing::set_zone("Europe/Berlin", [
///     OffsetSpan { start: at(1_774_746_000), end: at(1_792_890_000), offset_seconds: 7200 },
///     OffsetSpan { start: at(1_792_890_000), end: at(1_806_195_600), offset_seconds: 3600 },
/// ]);
/// let window = Window { timezone: "Europe/Berlin".into(), ..Window::default() };
/// assert_eq!(window.local(at(1_792_888_200))?.to_string(), "2026-10-25T02:30:00+02:00");
/// assert_eq!(window.local(at(1_792_891_800))?.to_string(), "2026-10-25T02:30:00+01:00");
/// # Ok::<(), jobhost_sdk::Error>(())
/// ```
pub fn set_zone(timezone: &str, spans: impl IntoIterator<Item = OffsetSpan>) {
    let mut spans: Vec<OffsetSpan> = spans.into_iter().collect();
    spans.sort_by_key(|s| s.start);
    FAKE.with(|f| {
        let mut fake = f.borrow_mut();
        fake.zones.insert(timezone.to_owned(), spans);
        fake.asked.clear();
    });
    forget();
}

/// Gives windows of the zone `timezone` the one offset `offset_seconds`
/// (east positive) at every instant, on this thread, for native tests (see
/// [`set_zone`]).
pub fn set_fixed_offset(timezone: &str, offset_seconds: i32) {
    set_zone(
        timezone,
        [OffsetSpan {
            start: Instant::from_unix_seconds(i64::MIN),
            end: Instant::from_unix_seconds(i64::MAX),
            offset_seconds,
        }],
    );
}

/// The ranges `[from, to)` the SDK asked the zone's offsets for on this
/// thread since the last [`set_zone`], in order: it asks for the window's
/// spans once, then only for an instant none of the spans it has holds.
pub fn zone_requests() -> Vec<(Instant, Instant)> {
    FAKE.with(|f| f.borrow().asked.clone())
}

/// Variable-length values packed end to end, as the WIT `text-column`:
/// value `i` is `data[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawText {
    /// The concatenated bytes of every value.
    pub data: Vec<u8>,
    /// Byte offsets into `data`, one more than the number of values.
    pub offsets: Vec<u32>,
}

impl RawText {
    /// Packs `values` end to end, with correct offsets.
    pub fn pack<I>(values: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        let mut packed = RawText {
            data: Vec::new(),
            offsets: vec![0],
        };
        for value in values {
            packed.data.extend_from_slice(value.as_ref());
            packed.offsets.push(offset(packed.data.len()));
        }
        packed
    }
}

/// The data of one column, as the WIT `column-data` variant.
#[derive(Debug, Clone, PartialEq)]
pub enum RawData {
    /// Integer values.
    Integer(Vec<i64>),
    /// Real values.
    Real(Vec<f64>),
    /// Plain text.
    Text(RawText),
    /// Text through a dictionary: row `i` holds entry `indices[i]` of
    /// `values`.
    TextDict {
        /// The distinct values.
        values: RawText,
        /// For each row, an index into `values`.
        indices: Vec<u32>,
    },
    /// Byte strings.
    Blob(RawText),
}

impl RawData {
    /// Dictionary-encodes `values`, numbering distinct values in order of
    /// first appearance, as the host does.
    pub fn dictionary<I>(values: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let mut distinct: Vec<String> = Vec::new();
        let mut indices = Vec::new();
        for value in values {
            let value = value.as_ref();
            let index = match distinct.iter().position(|d| d == value) {
                Some(i) => i,
                None => {
                    distinct.push(value.to_owned());
                    distinct.len() - 1
                }
            };
            indices.push(offset(index));
        }
        RawData::TextDict {
            values: RawText::pack(&distinct),
            indices,
        }
    }
}

/// One column as the WIT `column` record: a NULL bitmap and the data, taken
/// as given (nothing is checked until the batch is built).
#[derive(Debug, Clone, PartialEq)]
pub struct RawColumn {
    /// `None` when no row is NULL; otherwise bit `i % 8` of byte `i / 8` is
    /// set when row `i` is NULL.
    pub nulls: Option<Vec<u8>>,
    /// The values, one per row (NULL rows hold 0, 0.0 or an empty value).
    pub data: RawData,
}

impl RawColumn {
    /// A column without NULLs.
    pub fn new(data: RawData) -> Self {
        RawColumn { nulls: None, data }
    }

    /// The same column with the rows `null_rows` NULL (a bitmap just long
    /// enough for the last of them, or none when there are none).
    pub fn with_null_rows(mut self, null_rows: &[usize]) -> Self {
        self.nulls = null_bitmap(null_rows);
        self
    }
}

/// The NULL bitmap with the rows `null_rows` set, or `None` when empty.
pub fn null_bitmap(null_rows: &[usize]) -> Option<Vec<u8>> {
    let mut bits = Vec::new();
    for &row in null_rows {
        let byte = row / 8;
        if bits.len() <= byte {
            bits.resize(byte + 1, 0);
        }
        bits[byte] |= 1 << (row % 8);
    }
    (!null_rows.is_empty()).then_some(bits)
}

fn offset(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Builds a [`Batch`] column by column from plain values, `None` as NULL.
///
/// The row count is the first column's, unless [`rows`](Self::rows) sets
/// it. [`build`](Self::build) checks the batch as a host batch is checked
/// and panics if it is malformed (columns of different lengths, say);
/// [`try_build`](Self::try_build) returns the error instead.
#[derive(Debug, Clone, Default)]
pub struct BatchBuilder {
    rows: Option<usize>,
    columns: Vec<(ColumnInfo, RawColumn)>,
}

/// The NULL bitmap of `values` and the values with NULL replaced by
/// `placeholder`.
fn split_nulls<T, U>(
    values: impl IntoIterator<Item = Option<T>>,
    mut value: impl FnMut(T) -> U,
    placeholder: impl Fn() -> U,
) -> (Option<Vec<u8>>, Vec<U>) {
    let mut null_rows = Vec::new();
    let mut out = Vec::new();
    for (row, v) in values.into_iter().enumerate() {
        match v {
            Some(v) => out.push(value(v)),
            None => {
                null_rows.push(row);
                out.push(placeholder());
            }
        }
    }
    (null_bitmap(&null_rows), out)
}

impl BatchBuilder {
    /// A builder with no columns.
    pub fn new() -> Self {
        BatchBuilder::default()
    }

    /// Adds the integer column `name`.
    pub fn integers(self, name: &str, values: impl IntoIterator<Item = Option<i64>>) -> Self {
        let (nulls, v) = split_nulls(values, |v| v, || 0);
        self.raw(
            name,
            ColumnKind::Integer,
            RawColumn {
                nulls,
                data: RawData::Integer(v),
            },
        )
    }

    /// Adds the real column `name`.
    pub fn reals(self, name: &str, values: impl IntoIterator<Item = Option<f64>>) -> Self {
        let (nulls, v) = split_nulls(values, |v| v, || 0.0);
        self.raw(
            name,
            ColumnKind::Real,
            RawColumn {
                nulls,
                data: RawData::Real(v),
            },
        )
    }

    /// Adds the text column `name`, sent as plain text.
    pub fn texts<S: AsRef<str>>(
        self,
        name: &str,
        values: impl IntoIterator<Item = Option<S>>,
    ) -> Self {
        let (nulls, v) = split_nulls(values, |s| s.as_ref().to_owned(), String::new);
        self.raw(
            name,
            ColumnKind::Text,
            RawColumn {
                nulls,
                data: RawData::Text(RawText::pack(&v)),
            },
        )
    }

    /// Adds the text column `name`, sent through a dictionary as the host
    /// sends text with few distinct values (a NULL row points at an empty
    /// entry).
    pub fn dict_texts<S: AsRef<str>>(
        self,
        name: &str,
        values: impl IntoIterator<Item = Option<S>>,
    ) -> Self {
        let (nulls, v) = split_nulls(values, |s| s.as_ref().to_owned(), String::new);
        self.raw(
            name,
            ColumnKind::Text,
            RawColumn {
                nulls,
                data: RawData::dictionary(&v),
            },
        )
    }

    /// Adds the blob column `name`.
    pub fn blobs<B: AsRef<[u8]>>(
        self,
        name: &str,
        values: impl IntoIterator<Item = Option<B>>,
    ) -> Self {
        let (nulls, v) = split_nulls(values, |b| b.as_ref().to_vec(), Vec::new);
        self.raw(
            name,
            ColumnKind::Blob,
            RawColumn {
                nulls,
                data: RawData::Blob(RawText::pack(&v)),
            },
        )
    }

    /// Adds the column `name` declared as `kind`, with its WIT fields as
    /// given: nothing is checked until the batch is built, so this makes
    /// malformed batches too.
    pub fn raw(mut self, name: &str, kind: ColumnKind, column: RawColumn) -> Self {
        self.columns.push((ColumnInfo::new(name, kind), column));
        self
    }

    /// Sets the batch's row count (by default the first column's).
    pub fn rows(mut self, rows: usize) -> Self {
        self.rows = Some(rows);
        self
    }

    /// The columns the batch will declare, in order.
    pub fn columns(&self) -> Vec<ColumnInfo> {
        self.columns.iter().map(|(info, _)| info.clone()).collect()
    }

    /// Builds and checks the batch, as a batch from the host is checked.
    ///
    /// # Panics
    ///
    /// When the batch is malformed, with the error's message; use
    /// [`try_build`](Self::try_build) to get the error.
    pub fn build(self) -> Batch {
        self.try_build().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Builds and checks the batch: the error a malformed host batch would
    /// give (kind [`SourceFailed`](crate::ErrorKind::SourceFailed), naming
    /// the column and, where it can, the row).
    pub fn try_build(self) -> Result<Batch, Error> {
        let rows = self.rows.unwrap_or_else(|| {
            self.columns
                .first()
                .map_or(0, |(_, column)| value_count(&column.data))
        });
        let rows = u32::try_from(rows)
            .map_err(|_| Error::other(format!("{rows} rows are more than a batch holds")))?;
        let (infos, columns): (Vec<ColumnInfo>, Vec<wit::Column>) = self
            .columns
            .into_iter()
            .map(|(info, column)| (info, to_wit(column)))
            .unzip();
        Batch::from_wit(Arc::from(infos), wit::Batch { rows, columns }, 0)
    }
}

/// How many values `data` holds (rows, for a well-formed column).
fn value_count(data: &RawData) -> usize {
    match data {
        RawData::Integer(v) => v.len(),
        RawData::Real(v) => v.len(),
        RawData::Text(t) | RawData::Blob(t) => t.offsets.len().saturating_sub(1),
        RawData::TextDict { indices, .. } => indices.len(),
    }
}

fn text_to_wit(t: RawText) -> wit::TextColumn {
    wit::TextColumn {
        data: t.data,
        offsets: t.offsets,
    }
}

fn to_wit(column: RawColumn) -> wit::Column {
    wit::Column {
        nulls: column.nulls,
        data: match column.data {
            RawData::Integer(v) => wit::ColumnData::Integer(v),
            RawData::Real(v) => wit::ColumnData::Real(v),
            RawData::Text(t) => wit::ColumnData::Text(text_to_wit(t)),
            RawData::TextDict { values, indices } => wit::ColumnData::TextDict(wit::DictColumn {
                values: text_to_wit(values),
                indices,
            }),
            RawData::Blob(t) => wit::ColumnData::Blob(text_to_wit(t)),
        },
    }
}
