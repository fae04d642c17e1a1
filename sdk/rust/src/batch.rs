//! One batch of rows, validated once when it is made: [`Batch`], its typed
//! column views ([`Integers`], [`Reals`], [`Texts`], [`Blobs`]) and its
//! rows ([`Row`]).
//!
//! The host sends rows column by column (WIT `batch`). [`Batch`] checks
//! everything about that shape when it is made from a WIT batch: the row
//! count of every column, text and blob offsets (they start at 0, never
//! decrease and stay inside the data), UTF-8 of text, dictionary indices, the
//! length of the NULL bitmap, and that each column's data is of its declared
//! kind. A malformed batch is an [`Error`] naming the column (and the row
//! where it can), never a panic. Afterwards reading a value cannot fail: the
//! only errors left are naming a column that is not there and asking a
//! column for another kind. The vectors the host sent are kept as they are
//! (text is checked in place and moved into a `String`, not copied).

#![forbid(unsafe_code)]

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use crate::Error;
use crate::bindings::jobhost::report::source as wit;

/// The declared type of a column (WIT `column-kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnKind {
    /// 64-bit signed integers.
    Integer,
    /// 64-bit IEEE 754 floating point numbers.
    Real,
    /// UTF-8 text, sent plain or through a per-batch dictionary.
    Text,
    /// Raw bytes.
    Blob,
}

impl ColumnKind {
    /// The kind's name as the WIT contract spells it: `integer`, `real`,
    /// `text` or `blob`.
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

impl From<wit::ColumnKind> for ColumnKind {
    fn from(kind: wit::ColumnKind) -> Self {
        match kind {
            wit::ColumnKind::Integer => ColumnKind::Integer,
            wit::ColumnKind::Real => ColumnKind::Real,
            wit::ColumnKind::Text => ColumnKind::Text,
            wit::ColumnKind::Blob => ColumnKind::Blob,
        }
    }
}

/// A column's name and declared kind (WIT `column-info`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ColumnInfo {
    /// The column's name as the query labels it.
    pub name: String,
    /// The column's declared kind; every batch holds data of this kind.
    pub kind: ColumnKind,
}

impl ColumnInfo {
    /// A column called `name` of kind `kind`.
    pub fn new(name: impl Into<String>, kind: ColumnKind) -> Self {
        ColumnInfo {
            name: name.into(),
            kind,
        }
    }
}

impl From<wit::ColumnInfo> for ColumnInfo {
    fn from(info: wit::ColumnInfo) -> Self {
        ColumnInfo {
            name: info.name,
            kind: info.kind.into(),
        }
    }
}

/// Values packed end to end, with offsets already checked: value `i` is
/// `data[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Clone)]
struct Packed<D> {
    data: D,
    offsets: Vec<u32>,
}

impl<D> Packed<D> {
    fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    fn range(&self, i: usize) -> Option<Range<usize>> {
        let start = *self.offsets.get(i)? as usize;
        let end = *self.offsets.get(i.checked_add(1)?)? as usize;
        Some(start..end)
    }
}

impl Packed<String> {
    /// Value `i`; `None` only past the end (offsets and character
    /// boundaries were checked when the batch was made).
    fn get(&self, i: usize) -> Option<&str> {
        self.data.get(self.range(i)?)
    }
}

impl Packed<Vec<u8>> {
    fn get(&self, i: usize) -> Option<&[u8]> {
        self.data.get(self.range(i)?)
    }
}

/// A column's checked values.
#[derive(Debug, Clone)]
enum Values {
    Integer(Vec<i64>),
    Real(Vec<f64>),
    Text(Packed<String>),
    Dict {
        values: Packed<String>,
        indices: Vec<u32>,
    },
    Blob(Packed<Vec<u8>>),
}

/// One checked column: its NULL bitmap covers every row.
#[derive(Debug, Clone)]
struct Stored {
    nulls: Option<Vec<u8>>,
    values: Values,
}

/// The NULL bitmap of a column: bit `i % 8` of byte `i / 8` set when row `i`
/// is NULL; no bitmap, no NULLs.
#[derive(Debug, Clone, Copy)]
struct Nulls<'a>(Option<&'a [u8]>);

impl Nulls<'_> {
    #[inline]
    fn is_null(self, row: usize) -> bool {
        match self.0 {
            None => false,
            Some(bits) => bits.get(row / 8).is_some_and(|b| (b >> (row % 8)) & 1 == 1),
        }
    }
}

/// A run of consecutive rows of the source's result, checked once when it
/// was made, with typed views by column name.
///
/// Everything about the host's columnar shape is checked when a batch is
/// made from a WIT batch (by [`Source::next_batch`](crate::Source::next_batch)
/// or [`BatchBuilder`](crate::testing::BatchBuilder)): every declared column
/// is there with one value per row, its data is of the declared kind
/// (`text-dict` is a text column), the NULL bitmap covers every row, text
/// and blob offsets start at 0, never decrease and stay inside the data,
/// text is UTF-8 (no offset splits a character), and the dictionary index
/// of every non-NULL row is in range. A malformed batch is an
/// [`Error`] of kind [`SourceFailed`](crate::ErrorKind::SourceFailed) naming
/// the column, and the row (counted from 0 across the source) where it can,
/// never a panic. Afterwards reading cannot fail, except by naming a column
/// that is not there or asking a column for another kind (errors of kind
/// [`Programming`](crate::ErrorKind::Programming), which end the run for
/// good unless the report handles them). The vectors the host sent are kept
/// as they came: text is checked in place and moved, not copied.
///
/// Views return `None` for NULL. Column names are matched exactly (case
/// matters); when two columns share a name, the first one is used.
///
/// ```
/// use jobhost_sdk::testing::BatchBuilder;
///
/// let batch = BatchBuilder::new()
///     .integers("qty", [Some(2), None, Some(5)])
///     .texts("region", [Some("north"), Some("south"), None])
///     .build();
/// assert_eq!(batch.len(), 3);
/// let qty = batch.integers("qty")?;
/// assert_eq!(qty.get(0), Some(2));
/// assert_eq!(qty.get(1), None);
/// assert_eq!(qty.iter().flatten().sum::<i64>(), 7);
/// let region = batch.texts("region")?;
/// assert_eq!(region.iter().collect::<Vec<_>>(), [Some("north"), Some("south"), None]);
/// assert!(batch.reals("qty").is_err(), "`qty` is not a real column");
/// # Ok::<(), jobhost_sdk::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Batch {
    rows: usize,
    columns: Arc<[ColumnInfo]>,
    data: Vec<Stored>,
}

/// What is wrong with one column of a WIT batch, and where.
struct Fault {
    at: At,
    detail: String,
}

/// Where in a column a fault is.
#[derive(Clone, Copy)]
enum At {
    Column,
    Row(usize),
    Entry(usize),
}

impl Fault {
    fn new(at: At, detail: impl Into<String>) -> Self {
        Fault {
            at,
            detail: detail.into(),
        }
    }

    fn column(detail: impl Into<String>) -> Self {
        Fault::new(At::Column, detail)
    }

    fn into_error(self, name: &str, first_row: u64) -> Error {
        let at = match self.at {
            At::Column => String::new(),
            At::Row(row) => format!(", row {}", first_row.saturating_add(row as u64)),
            At::Entry(entry) => format!(", dictionary entry {entry}"),
        };
        malformed(format!("column `{name}`{at}: {}", self.detail))
    }
}

fn malformed(detail: String) -> Error {
    Error::source_failed(format!("malformed batch: {detail}"))
}

/// Checks that `found` values are `rows`.
fn check_count(found: usize, rows: usize) -> Result<(), Fault> {
    if found == rows {
        Ok(())
    } else {
        Err(Fault::column(format!("{found} values for {rows} rows")))
    }
}

/// Checks packed offsets against `data_len` bytes: present, starting at 0,
/// never decreasing, inside the data. `at` places value `i`.
fn check_offsets(offsets: &[u32], data_len: usize, at: fn(usize) -> At) -> Result<(), Fault> {
    let Some(&first) = offsets.first() else {
        return Err(Fault::column(
            "no offsets (there is one more offset than values)",
        ));
    };
    if first != 0 {
        return Err(Fault::new(
            at(0),
            format!("the first offset is {first}, not 0"),
        ));
    }
    for (i, pair) in offsets.windows(2).enumerate() {
        let (start, end) = (pair[0], pair[1]);
        if end < start {
            return Err(Fault::new(
                at(i),
                format!("offsets {start}..{end} decrease"),
            ));
        }
        if end as usize > data_len {
            return Err(Fault::new(
                at(i),
                format!("offsets {start}..{end} are past the {data_len} bytes of data"),
            ));
        }
    }
    Ok(())
}

/// Checks text whose offsets were checked: the bytes the values cover are
/// UTF-8 and no offset splits a character. Bytes after the last value are
/// dropped (no value holds them).
fn check_text(text: wit::TextColumn, at: fn(usize) -> At) -> Result<Packed<String>, Fault> {
    let wit::TextColumn { mut data, offsets } = text;
    check_offsets(&offsets, data.len(), at)?;
    data.truncate(offsets.last().map_or(0, |&end| end as usize));
    let data = String::from_utf8(data).map_err(|e| {
        let bad = e.utf8_error().valid_up_to();
        let value = offsets
            .partition_point(|&o| o as usize <= bad)
            .saturating_sub(1);
        Fault::new(at(value), "not valid UTF-8")
    })?;
    if let Some(i) = offsets
        .iter()
        .position(|&o| !data.is_char_boundary(o as usize))
    {
        return Err(Fault::new(
            at(i.saturating_sub(1)),
            format!("not valid UTF-8 (offset {} splits a character)", offsets[i]),
        ));
    }
    Ok(Packed { data, offsets })
}

/// The name of a WIT `column-data` case.
fn case_name(data: &wit::ColumnData) -> &'static str {
    match data {
        wit::ColumnData::Integer(_) => "integer",
        wit::ColumnData::Real(_) => "real",
        wit::ColumnData::Text(_) => "text",
        wit::ColumnData::TextDict(_) => "text-dict",
        wit::ColumnData::Blob(_) => "blob",
    }
}

/// Checks one WIT column of a batch of `rows` rows declared as `kind`.
fn check_column(kind: ColumnKind, column: wit::Column, rows: usize) -> Result<Stored, Fault> {
    let wit::Column { nulls, data } = column;
    let matches = matches!(
        (kind, &data),
        (ColumnKind::Integer, wit::ColumnData::Integer(_))
            | (ColumnKind::Real, wit::ColumnData::Real(_))
            | (
                ColumnKind::Text,
                wit::ColumnData::Text(_) | wit::ColumnData::TextDict(_)
            )
            | (ColumnKind::Blob, wit::ColumnData::Blob(_))
    );
    if !matches {
        return Err(Fault::column(format!(
            "declared {kind}, but the batch holds {} data",
            case_name(&data)
        )));
    }
    if let Some(bits) = &nulls
        && bits.len() < rows.div_ceil(8)
    {
        return Err(Fault::column(format!(
            "the NULL bitmap of {} bytes does not cover {rows} rows",
            bits.len()
        )));
    }
    let null = Nulls(nulls.as_deref());
    let packed_count = |offsets: &[u32]| {
        if offsets.is_empty() {
            Ok(())
        } else {
            check_count(offsets.len() - 1, rows)
        }
    };
    let values = match data {
        wit::ColumnData::Integer(v) => {
            check_count(v.len(), rows)?;
            Values::Integer(v)
        }
        wit::ColumnData::Real(v) => {
            check_count(v.len(), rows)?;
            Values::Real(v)
        }
        wit::ColumnData::Text(t) => {
            packed_count(&t.offsets)?;
            Values::Text(check_text(t, At::Row)?)
        }
        wit::ColumnData::TextDict(d) => {
            check_count(d.indices.len(), rows)?;
            let values = check_text(d.values, At::Entry)?;
            let n = values.len();
            // A NULL row's index is never read, so it need not point anywhere.
            if let Some((row, index)) = d
                .indices
                .iter()
                .enumerate()
                .find(|&(row, &i)| i as usize >= n && !null.is_null(row))
            {
                return Err(Fault::new(
                    At::Row(row),
                    format!("dictionary index {index}, but the dictionary holds {n} values"),
                ));
            }
            Values::Dict {
                values,
                indices: d.indices,
            }
        }
        wit::ColumnData::Blob(b) => {
            packed_count(&b.offsets)?;
            check_offsets(&b.offsets, b.data.len(), At::Row)?;
            Values::Blob(Packed {
                data: b.data,
                offsets: b.offsets,
            })
        }
    };
    Ok(Stored { nulls, values })
}

impl Batch {
    /// Checks a WIT batch against the source's columns. `first_row` is the
    /// source row (from 0) the batch starts at, for the rows errors name.
    pub(crate) fn from_wit(
        columns: Arc<[ColumnInfo]>,
        batch: wit::Batch,
        first_row: u64,
    ) -> Result<Batch, Error> {
        let rows = batch.rows as usize;
        let (found, declared) = (batch.columns.len(), columns.len());
        if found != declared {
            return Err(malformed(match columns.get(found) {
                Some(missing) => format!(
                    "column `{}` is missing: the batch has {found} columns, the source declares {declared}",
                    missing.name
                ),
                None => format!(
                    "the batch has {found} columns, the source declares {declared} ({})",
                    names(&columns)
                ),
            }));
        }
        let mut data = Vec::with_capacity(found);
        for (info, column) in columns.iter().zip(batch.columns) {
            data.push(
                check_column(info.kind, column, rows)
                    .map_err(|f| f.into_error(&info.name, first_row))?,
            );
        }
        Ok(Batch {
            rows,
            columns,
            data,
        })
    }

    /// How many rows the batch holds.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether the batch holds no rows.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The columns, in the source's order.
    pub fn columns(&self) -> &[ColumnInfo] {
        &self.columns
    }

    /// The column called `name`, whatever its kind. An error of kind
    /// [`Programming`](crate::ErrorKind::Programming) when there is none.
    pub fn column(&self, name: &str) -> Result<Column<'_>, Error> {
        let (_, stored) = self
            .columns
            .iter()
            .zip(&self.data)
            .find(|(c, _)| c.name == name)
            .ok_or_else(|| {
                Error::programming(format!(
                    "the batch has no column `{name}` (its columns: {})",
                    names(&self.columns)
                ))
            })?;
        let nulls = Nulls(stored.nulls.as_deref());
        Ok(match &stored.values {
            Values::Integer(values) => Column::Integer(Integers { values, nulls }),
            Values::Real(values) => Column::Real(Reals { values, nulls }),
            Values::Text(packed) => Column::Text(Texts {
                repr: TextRepr::Plain(packed),
                nulls,
                len: self.rows,
            }),
            Values::Dict { values, indices } => Column::Text(Texts {
                repr: TextRepr::Dict(values, indices),
                nulls,
                len: self.rows,
            }),
            Values::Blob(packed) => Column::Blob(Blobs { packed, nulls }),
        })
    }

    /// The integer column `name`. An error (WIT `other`) when there is no
    /// such column or it is of another kind.
    pub fn integers(&self, name: &str) -> Result<Integers<'_>, Error> {
        match self.column(name)? {
            Column::Integer(v) => Ok(v),
            c => Err(wrong_kind(name, ColumnKind::Integer, c.kind())),
        }
    }

    /// The real column `name`. An error (WIT `other`) when there is no such
    /// column or it is of another kind (integers are not widened: read an
    /// integer column with [`Batch::integers`]).
    pub fn reals(&self, name: &str) -> Result<Reals<'_>, Error> {
        match self.column(name)? {
            Column::Real(v) => Ok(v),
            c => Err(wrong_kind(name, ColumnKind::Real, c.kind())),
        }
    }

    /// The text column `name`, plain or dictionary-encoded alike. An error
    /// (WIT `other`) when there is no such column or it is of another kind.
    pub fn texts(&self, name: &str) -> Result<Texts<'_>, Error> {
        match self.column(name)? {
            Column::Text(v) => Ok(v),
            c => Err(wrong_kind(name, ColumnKind::Text, c.kind())),
        }
    }

    /// The blob column `name`. An error (WIT `other`) when there is no such
    /// column or it is of another kind.
    pub fn blobs(&self, name: &str) -> Result<Blobs<'_>, Error> {
        match self.column(name)? {
            Column::Blob(v) => Ok(v),
            c => Err(wrong_kind(name, ColumnKind::Blob, c.kind())),
        }
    }

    /// The rows, in order. Each value a [`Row`] reads looks its column up
    /// by name; to read many rows quickly, take the column views once.
    pub fn rows(&self) -> Rows<'_> {
        Rows {
            batch: self,
            range: 0..self.rows,
        }
    }

    /// Row `index` (from 0), or `None` past the last row.
    pub fn row(&self, index: usize) -> Option<Row<'_>> {
        (index < self.rows).then_some(Row { batch: self, index })
    }
}

/// `` `a`, `b` `` for the error messages.
fn names(columns: &[ColumnInfo]) -> String {
    if columns.is_empty() {
        return "none".to_owned();
    }
    columns
        .iter()
        .map(|c| format!("`{}`", c.name))
        .collect::<Vec<_>>()
        .join(", ")
}

fn wrong_kind(name: &str, wanted: ColumnKind, found: ColumnKind) -> Error {
    Error::programming(format!(
        "column `{name}` holds {found} values, not {wanted}"
    ))
}

/// One column of a [`Batch`], as the view of its kind.
#[derive(Debug, Clone, Copy)]
pub enum Column<'a> {
    /// An integer column.
    Integer(Integers<'a>),
    /// A real column.
    Real(Reals<'a>),
    /// A text column (plain or dictionary-encoded).
    Text(Texts<'a>),
    /// A blob column.
    Blob(Blobs<'a>),
}

impl Column<'_> {
    /// The column's kind.
    pub fn kind(&self) -> ColumnKind {
        match self {
            Column::Integer(_) => ColumnKind::Integer,
            Column::Real(_) => ColumnKind::Real,
            Column::Text(_) => ColumnKind::Text,
            Column::Blob(_) => ColumnKind::Blob,
        }
    }

    /// How many rows the column holds (the batch's row count).
    pub fn len(&self) -> usize {
        match self {
            Column::Integer(v) => v.len(),
            Column::Real(v) => v.len(),
            Column::Text(v) => v.len(),
            Column::Blob(v) => v.len(),
        }
    }

    /// Whether the column holds no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether row `row` is NULL (`false` past the last row).
    pub fn is_null(&self, row: usize) -> bool {
        match self {
            Column::Integer(v) => v.is_null(row),
            Column::Real(v) => v.is_null(row),
            Column::Text(v) => v.is_null(row),
            Column::Blob(v) => v.is_null(row),
        }
    }
}

macro_rules! numeric_view {
    ($(#[$doc:meta])* $name:ident, $t:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name<'a> {
            values: &'a [$t],
            nulls: Nulls<'a>,
        }

        impl<'a> $name<'a> {
            /// How many rows the column holds.
            pub fn len(&self) -> usize {
                self.values.len()
            }

            /// Whether the column holds no rows.
            pub fn is_empty(&self) -> bool {
                self.values.is_empty()
            }

            /// The value of row `row`: `None` when it is NULL, or past the
            /// last row (as [`slice::get`]).
            #[inline]
            pub fn get(&self, row: usize) -> Option<$t> {
                if self.nulls.is_null(row) {
                    None
                } else {
                    self.values.get(row).copied()
                }
            }

            /// Whether row `row` is NULL (`false` past the last row).
            #[inline]
            pub fn is_null(&self, row: usize) -> bool {
                self.nulls.is_null(row)
            }

            /// Whether any row can be NULL: `false` when the host sent no
            /// NULL bitmap, so every row has a value.
            pub fn has_nulls(&self) -> bool {
                self.nulls.0.is_some()
            }

            /// Every row's value as the host sent it, NULL rows included:
            /// they hold a placeholder (`0`, `0.0`), so check
            /// [`is_null`](Self::is_null) where [`has_nulls`](Self::has_nulls).
            pub fn values(&self) -> &'a [$t] {
                self.values
            }

            /// The values of every row in order, `None` for NULL.
            pub fn iter(&self) -> impl ExactSizeIterator<Item = Option<$t>> + DoubleEndedIterator + 'a {
                let view = *self;
                (0..view.len()).map(move |row| view.get(row))
            }
        }
    };
}

numeric_view!(
    /// The values of an integer column, NULL as `None`.
    Integers,
    i64
);
numeric_view!(
    /// The values of a real column, NULL as `None`.
    Reals,
    f64
);

#[derive(Debug, Clone, Copy)]
enum TextRepr<'a> {
    Plain(&'a Packed<String>),
    Dict(&'a Packed<String>, &'a [u32]),
}

/// The values of a text column, NULL as `None`, whether the host sent it
/// plain or through a dictionary.
#[derive(Debug, Clone, Copy)]
pub struct Texts<'a> {
    repr: TextRepr<'a>,
    nulls: Nulls<'a>,
    len: usize,
}

impl<'a> Texts<'a> {
    /// How many rows the column holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the column holds no rows.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The text of row `row`: `None` when it is NULL, or past the last row.
    #[inline]
    pub fn get(&self, row: usize) -> Option<&'a str> {
        if row >= self.len || self.nulls.is_null(row) {
            return None;
        }
        match self.repr {
            TextRepr::Plain(packed) => packed.get(row),
            TextRepr::Dict(values, indices) => values.get(*indices.get(row)? as usize),
        }
    }

    /// Whether row `row` is NULL (`false` past the last row).
    #[inline]
    pub fn is_null(&self, row: usize) -> bool {
        self.nulls.is_null(row)
    }

    /// Whether any row can be NULL: `false` when the host sent no NULL
    /// bitmap.
    pub fn has_nulls(&self) -> bool {
        self.nulls.0.is_some()
    }

    /// The texts of every row in order, `None` for NULL.
    pub fn iter(
        &self,
    ) -> impl ExactSizeIterator<Item = Option<&'a str>> + DoubleEndedIterator + 'a {
        let view = *self;
        (0..view.len).map(move |row| view.get(row))
    }

    /// The batch's dictionary, when the host sent this column
    /// dictionary-encoded (`None` for plain text). A report that groups by
    /// the text can resolve each distinct value once per batch and then
    /// read rows by [`Dictionary::entry`].
    pub fn dictionary(&self) -> Option<Dictionary<'a>> {
        match self.repr {
            TextRepr::Plain(_) => None,
            TextRepr::Dict(values, indices) => Some(Dictionary {
                values,
                indices,
                nulls: self.nulls,
            }),
        }
    }
}

/// The distinct values of a dictionary-encoded text column in one batch, in
/// order of first appearance, and which one each row holds.
#[derive(Debug, Clone, Copy)]
pub struct Dictionary<'a> {
    values: &'a Packed<String>,
    indices: &'a [u32],
    nulls: Nulls<'a>,
}

impl<'a> Dictionary<'a> {
    /// How many distinct values (entries) the dictionary holds.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the dictionary holds no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entry `entry`, or `None` past the last.
    #[inline]
    pub fn value(&self, entry: usize) -> Option<&'a str> {
        self.values.get(entry)
    }

    /// The entry row `row` holds: `None` when the row is NULL, or past the
    /// last row. Always below [`len`](Self::len) otherwise.
    #[inline]
    pub fn entry(&self, row: usize) -> Option<usize> {
        if self.nulls.is_null(row) {
            return None;
        }
        self.indices.get(row).map(|&i| i as usize)
    }

    /// Every entry, in order.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &'a str> + 'a {
        let values = self.values;
        (0..values.len()).map(move |i| values.get(i).unwrap_or_default())
    }
}

/// The values of a blob column, NULL as `None`.
#[derive(Debug, Clone, Copy)]
pub struct Blobs<'a> {
    packed: &'a Packed<Vec<u8>>,
    nulls: Nulls<'a>,
}

impl<'a> Blobs<'a> {
    /// How many rows the column holds.
    pub fn len(&self) -> usize {
        self.packed.len()
    }

    /// Whether the column holds no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of row `row`: `None` when it is NULL, or past the last row.
    #[inline]
    pub fn get(&self, row: usize) -> Option<&'a [u8]> {
        if self.nulls.is_null(row) {
            None
        } else {
            self.packed.get(row)
        }
    }

    /// Whether row `row` is NULL (`false` past the last row).
    #[inline]
    pub fn is_null(&self, row: usize) -> bool {
        self.nulls.is_null(row)
    }

    /// Whether any row can be NULL: `false` when the host sent no NULL
    /// bitmap.
    pub fn has_nulls(&self) -> bool {
        self.nulls.0.is_some()
    }

    /// The bytes of every row in order, `None` for NULL.
    pub fn iter(
        &self,
    ) -> impl ExactSizeIterator<Item = Option<&'a [u8]>> + DoubleEndedIterator + 'a {
        let view = *self;
        (0..view.len()).map(move |row| view.get(row))
    }
}

/// The rows of a [`Batch`], in order (from [`Batch::rows`]).
#[derive(Debug, Clone)]
pub struct Rows<'a> {
    batch: &'a Batch,
    range: Range<usize>,
}

impl<'a> Iterator for Rows<'a> {
    type Item = Row<'a>;

    fn next(&mut self) -> Option<Row<'a>> {
        let index = self.range.next()?;
        Some(Row {
            batch: self.batch,
            index,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.range.size_hint()
    }
}

impl DoubleEndedIterator for Rows<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let index = self.range.next_back()?;
        Some(Row {
            batch: self.batch,
            index,
        })
    }
}

impl ExactSizeIterator for Rows<'_> {}

/// One row of a [`Batch`]. Each getter looks the column up by name and
/// checks its kind: `Ok(None)` is NULL, `Err` an unknown column or a column
/// of another kind.
///
/// ```
/// use jobhost_sdk::testing::BatchBuilder;
///
/// let batch = BatchBuilder::new()
///     .texts("product", [Some("tea"), None])
///     .reals("amount", [Some(2.5), Some(4.0)])
///     .build();
/// let mut total = 0.0;
/// for row in batch.rows() {
///     if let (Some(_), Some(amount)) = (row.text("product")?, row.real("amount")?) {
///         total += amount;
///     }
/// }
/// assert_eq!(total, 2.5);
/// # Ok::<(), jobhost_sdk::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    batch: &'a Batch,
    index: usize,
}

impl<'a> Row<'a> {
    /// The row's position in its batch, from 0.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The value of the integer column `name` in this row.
    pub fn integer(&self, name: &str) -> Result<Option<i64>, Error> {
        Ok(self.batch.integers(name)?.get(self.index))
    }

    /// The value of the real column `name` in this row.
    pub fn real(&self, name: &str) -> Result<Option<f64>, Error> {
        Ok(self.batch.reals(name)?.get(self.index))
    }

    /// The value of the text column `name` in this row.
    pub fn text(&self, name: &str) -> Result<Option<&'a str>, Error> {
        Ok(self.batch.texts(name)?.get(self.index))
    }

    /// The value of the blob column `name` in this row.
    pub fn blob(&self, name: &str) -> Result<Option<&'a [u8]>, Error> {
        Ok(self.batch.blobs(name)?.get(self.index))
    }

    /// Whether the column `name` is NULL in this row.
    pub fn is_null(&self, name: &str) -> Result<bool, Error> {
        Ok(self.batch.column(name)?.is_null(self.index))
    }
}
