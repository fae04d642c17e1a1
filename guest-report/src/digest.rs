//! The daily sales digest: aggregation of sale rows into a summary.
//!
//! This module owns the report's logic, in plain Rust with no wit-bindgen
//! types. A [`Digest`] is built from the cursor's column list, fed one
//! [`Batch`] at a time, and finished into a [`Summary`] (which renders as
//! deterministic JSON and as one paragraph of text). It keeps no rows: each
//! batch is folded into per-window, per-region and per-product counters, so
//! its state grows with the number of distinct regions and products only.
//! Dictionary-encoded text is resolved to group ids once per dictionary
//! entry, so a batch's rows are counted without hashing their strings.

#![forbid(unsafe_code)]

use std::fmt;

use crate::batch::{Batch, BatchError, Column, ColumnInfo, ColumnKind, DictColumn};
use crate::format::{MAX_RFC3339_SECONDS, MIN_RFC3339_SECONDS};
use crate::summary::{Summary, Totals};

mod groups;

use groups::{Groups, Stats};

/// Name of the sale time column: integer unix seconds.
pub const TS: &str = "ts";
/// Name of the region column: text.
pub const REGION: &str = "region";
/// Name of the product column: text.
pub const PRODUCT: &str = "product";
/// Name of the quantity column: integer units sold.
pub const QUANTITY: &str = "quantity";
/// Name of the amount column: real (or integer) order total.
pub const AMOUNT: &str = "amount";

/// Why the rows cannot be digested. Every variant names the column at fault.
#[derive(Debug, Clone, PartialEq)]
pub enum DigestError {
    /// A required column is not among the cursor's columns.
    MissingColumn {
        /// The required column's name.
        column: &'static str,
    },
    /// More than one column carries a required column's name.
    DuplicateColumn {
        /// The required column's name.
        column: &'static str,
    },
    /// A column is declared, or delivered, with a kind the digest cannot use.
    WrongKind {
        /// The column's name.
        column: &'static str,
        /// The kinds the digest accepts, for example `real or integer`.
        expected: &'static str,
        /// The kind found.
        found: ColumnKind,
    },
    /// A batch's data for the column is malformed.
    BadBatch {
        /// The column's name.
        column: &'static str,
        /// The window row (from 0) at which the batch starts.
        first_row: u64,
        /// What is wrong.
        error: BatchError,
    },
    /// A value is out of the range the digest can report.
    BadValue {
        /// The column's name.
        column: &'static str,
        /// The window row (from 0) holding the value.
        row: u64,
        /// What is wrong with it.
        detail: String,
    },
}

impl fmt::Display for DigestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DigestError::MissingColumn { column } => {
                write!(f, "the source has no column `{column}`")
            }
            DigestError::DuplicateColumn { column } => {
                write!(f, "the source has more than one column `{column}`")
            }
            DigestError::WrongKind {
                column,
                expected,
                found,
            } => write!(
                f,
                "column `{column}` holds {found} values, expected {expected}"
            ),
            DigestError::BadBatch {
                column,
                first_row,
                error,
            } => write!(
                f,
                "column `{column}` in the batch starting at row {first_row}: {error}"
            ),
            DigestError::BadValue {
                column,
                row,
                detail,
            } => write!(f, "column `{column}` at row {row}: {detail}"),
        }
    }
}

impl std::error::Error for DigestError {}

/// A job parameter whose value the digest cannot use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamError {
    /// The parameter's name.
    pub name: &'static str,
    /// The value given.
    pub value: String,
    /// What the value should look like.
    pub expected: &'static str,
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "parameter `{}` must be {}, got `{}`",
            self.name, self.expected, self.value
        )
    }
}

impl std::error::Error for ParamError {}

/// Parses the `top` parameter: how many products the digest lists.
pub fn parse_top(value: &str) -> Result<usize, ParamError> {
    value.trim().parse::<usize>().map_err(|_| ParamError {
        name: "top",
        value: value.to_owned(),
        expected: "a non-negative integer",
    })
}

/// The window a digest reports on, as the summary names it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WindowInfo {
    /// The window key, for example `daily-report:2026-11-08`.
    pub key: String,
    /// The window's label, for example `2026-11-08`.
    pub label: String,
    /// The IANA time zone of the window, for example `Europe/Berlin`.
    pub timezone: String,
}

/// Positions of the required columns in each batch.
#[derive(Debug, Clone, Copy)]
struct Layout {
    ts: usize,
    region: usize,
    product: usize,
    quantity: usize,
    amount: usize,
}

/// How one batch's text column maps rows to group ids.
enum Keys<'a> {
    /// Dictionary text: each entry is resolved to a group id on first use.
    Dict {
        dict: &'a DictColumn,
        ids: Vec<usize>,
    },
    /// Plain text: each row's bytes are looked up.
    Plain(&'a Column),
}

const UNRESOLVED: usize = usize::MAX;

impl<'a> Keys<'a> {
    fn new(column: &'a Column) -> Self {
        match column.dictionary() {
            Some(dict) => Keys::Dict {
                dict,
                ids: vec![UNRESOLVED; dict.dictionary_len()],
            },
            None => Keys::Plain(column),
        }
    }

    #[inline]
    fn group(&mut self, row: usize, groups: &mut Groups) -> Result<usize, BatchError> {
        match self {
            Keys::Dict { dict, ids } => {
                let index = dict.index_at(row)?;
                let values = ids.len();
                let slot = ids
                    .get_mut(index as usize)
                    .ok_or(BatchError::DictIndexOutOfRange { row, index, values })?;
                if *slot == UNRESOLVED {
                    *slot = groups.intern(dict.value(index)?);
                }
                Ok(*slot)
            }
            Keys::Plain(column) => groups.intern_bytes(column.bytes_at(row)?, row),
        }
    }
}

/// `values[row]`, or an error rather than a panic past the end.
#[inline]
fn value_at<T: Copy>(values: &[T], row: usize) -> Result<T, BatchError> {
    values.get(row).copied().ok_or(BatchError::RowOutOfRange {
        row,
        len: values.len(),
    })
}

/// One batch's amount column: reals, or integers widened on read.
enum Numbers<'a> {
    Real(&'a [f64]),
    Integer(&'a [i64]),
}

impl<'a> Numbers<'a> {
    fn new(column: &'a Column) -> Result<Self, BatchError> {
        match column.integers() {
            Ok(v) => Ok(Numbers::Integer(v)),
            Err(_) => column.reals().map(Numbers::Real),
        }
    }

    #[inline]
    fn get(&self, row: usize) -> Result<f64, BatchError> {
        match self {
            Numbers::Real(v) => value_at(v, row),
            Numbers::Integer(v) => value_at(v, row).map(|i| i as f64),
        }
    }
}

/// The running aggregation of one window's sale rows.
#[derive(Debug)]
pub struct Digest {
    layout: Layout,
    rows: u64,
    skipped: u64,
    totals: Stats,
    /// Earliest and latest sale time; meaningful once `totals.orders > 0`.
    first_sale: i64,
    last_sale: i64,
    regions: Groups,
    products: Groups,
}

/// Finds the required column `name` (case-insensitively) and checks that its
/// declared kind is one of `accepted`.
fn find_column(
    columns: &[ColumnInfo],
    name: &'static str,
    accepted: &[ColumnKind],
    expected: &'static str,
) -> Result<usize, DigestError> {
    let mut matches = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.name.eq_ignore_ascii_case(name));
    let (index, info) = matches
        .next()
        .ok_or(DigestError::MissingColumn { column: name })?;
    if matches.next().is_some() {
        return Err(DigestError::DuplicateColumn { column: name });
    }
    if !accepted.contains(&info.kind) {
        return Err(DigestError::WrongKind {
            column: name,
            expected,
            found: info.kind,
        });
    }
    Ok(index)
}

const INTEGER: &str = "integer";
const NUMBER: &str = "real or integer";
const TEXT: &str = "text";

impl Digest {
    /// Starts a digest over rows with these columns (the cursor's column
    /// list). Fails if a required column is missing, repeated, or declared
    /// with a kind the digest cannot use.
    pub fn new(columns: &[ColumnInfo]) -> Result<Self, DigestError> {
        use ColumnKind::{Integer, Real, Text};
        let layout = Layout {
            ts: find_column(columns, TS, &[Integer], INTEGER)?,
            region: find_column(columns, REGION, &[Text], TEXT)?,
            product: find_column(columns, PRODUCT, &[Text], TEXT)?,
            quantity: find_column(columns, QUANTITY, &[Integer], INTEGER)?,
            amount: find_column(columns, AMOUNT, &[Real, Integer], NUMBER)?,
        };
        Ok(Digest {
            layout,
            rows: 0,
            skipped: 0,
            totals: Stats::default(),
            first_sale: i64::MAX,
            last_sale: i64::MIN,
            regions: Groups::default(),
            products: Groups::default(),
        })
    }

    /// Rows seen so far, skipped ones included.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Rows counted as orders so far.
    pub fn orders(&self) -> u64 {
        self.totals.orders
    }

    /// Rows skipped so far because a required column was NULL.
    pub fn skipped_rows(&self) -> u64 {
        self.skipped
    }

    /// The latest sale time (unix seconds) counted so far.
    pub fn last_sale(&self) -> Option<i64> {
        (self.totals.orders > 0).then_some(self.last_sale)
    }

    /// Folds one batch into the digest. A row with NULL in any required
    /// column is skipped. On error the digest is left partly updated and
    /// should be discarded.
    pub fn add_batch(&mut self, batch: &Batch) -> Result<(), DigestError> {
        let first_row = self.rows;
        let rows = batch.rows;
        let column = |index: usize, name: &'static str| -> Result<&Column, DigestError> {
            let bad = |error| DigestError::BadBatch {
                column: name,
                first_row,
                error,
            };
            let column = batch.column(index).map_err(bad)?;
            column.check_rows(rows).map_err(bad)?;
            Ok(column)
        };
        let ts = column(self.layout.ts, TS)?;
        let region = column(self.layout.region, REGION)?;
        let product = column(self.layout.product, PRODUCT)?;
        let quantity = column(self.layout.quantity, QUANTITY)?;
        let amount = column(self.layout.amount, AMOUNT)?;
        let bad = |name: &'static str| {
            move |error| DigestError::BadBatch {
                column: name,
                first_row,
                error,
            }
        };
        let wrong = |name, expected| {
            move |error| match error {
                BatchError::WrongKind { found, .. } => DigestError::WrongKind {
                    column: name,
                    expected,
                    found,
                },
                error => bad(name)(error),
            }
        };
        let ts_values = ts.integers().map_err(wrong(TS, INTEGER))?;
        let quantities = quantity.integers().map_err(wrong(QUANTITY, INTEGER))?;
        let amounts = Numbers::new(amount).map_err(wrong(AMOUNT, NUMBER))?;
        for (column, name) in [(region, REGION), (product, PRODUCT)] {
            if column.kind() != ColumnKind::Text {
                return Err(DigestError::WrongKind {
                    column: name,
                    expected: TEXT,
                    found: column.kind(),
                });
            }
        }
        let mut region_keys = Keys::new(region);
        let mut product_keys = Keys::new(product);
        let any_nulls = [ts, region, product, quantity, amount]
            .iter()
            .any(|c| c.nulls.is_some());
        for row in 0..rows {
            if any_nulls
                && (ts.is_null(row).map_err(bad(TS))?
                    || region.is_null(row).map_err(bad(REGION))?
                    || product.is_null(row).map_err(bad(PRODUCT))?
                    || quantity.is_null(row).map_err(bad(QUANTITY))?
                    || amount.is_null(row).map_err(bad(AMOUNT))?)
            {
                self.skipped += 1;
                continue;
            }
            let window_row = first_row + row as u64;
            let t = value_at(ts_values, row).map_err(bad(TS))?;
            if !(MIN_RFC3339_SECONDS..=MAX_RFC3339_SECONDS).contains(&t) {
                return Err(DigestError::BadValue {
                    column: TS,
                    row: window_row,
                    detail: format!("unix time {t} is outside the years 0000 to 9999"),
                });
            }
            let q = value_at(quantities, row).map_err(bad(QUANTITY))?;
            let a = amounts.get(row).map_err(bad(AMOUNT))?;
            if !a.is_finite() {
                return Err(DigestError::BadValue {
                    column: AMOUNT,
                    row: window_row,
                    detail: format!("amount {a} is not a finite number"),
                });
            }
            let r = region_keys
                .group(row, &mut self.regions)
                .map_err(bad(REGION))?;
            let p = product_keys
                .group(row, &mut self.products)
                .map_err(bad(PRODUCT))?;
            self.totals.add(q, a);
            if let Some(s) = self.regions.stats.get_mut(r) {
                s.add(q, a);
            }
            if let Some(s) = self.products.stats.get_mut(p) {
                s.add(q, a);
            }
            self.first_sale = self.first_sale.min(t);
            self.last_sale = self.last_sale.max(t);
        }
        self.rows += rows as u64;
        Ok(())
    }

    /// Finishes the digest for `window`, listing at most `top` products
    /// (all of them when `None`).
    pub fn finish(self, window: WindowInfo, top: Option<usize>) -> Summary {
        let t = &self.totals;
        let any = t.orders > 0;
        let revenue = t.revenue.value();
        let totals = Totals {
            orders: t.orders,
            units: t.units,
            revenue,
            average_order: any.then(|| revenue / t.orders as f64),
            min_order: any.then_some(t.min),
            max_order: any.then_some(t.max),
            first_sale: any.then_some(self.first_sale),
            last_sale: any.then_some(self.last_sale),
        };
        let mut products = self.products.into_sorted();
        let product_count = products.len();
        if let Some(top) = top {
            products.truncate(top);
        }
        Summary {
            window,
            totals,
            skipped_rows: self.skipped,
            regions: self.regions.into_sorted(),
            products,
            product_count,
        }
    }
}

#[cfg(test)]
mod tests;
