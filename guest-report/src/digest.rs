//! The daily sales digest: aggregation of sale rows into a summary.
//!
//! This module owns the report's logic, in plain Rust with no wit-bindgen
//! types: it reads the SDK's plain, already validated [`Batch`]es. A
//! [`Digest`] is built from the source's column list, fed one [`Batch`] at
//! a time, and finished into a [`Summary`] (which renders as deterministic
//! JSON and as one paragraph of text). It keeps no rows: each batch is
//! folded into per-window, per-region and per-product counters, so its
//! state grows with the number of distinct regions and products only.
//! Dictionary-encoded text is resolved to group ids once per dictionary
//! entry, so a batch's rows are counted without hashing their strings.

#![forbid(unsafe_code)]

use std::fmt;

use jobhost_sdk::{Batch, Column, ColumnInfo, ColumnKind, Dictionary, Integers, Reals, Texts};

use crate::format::{MAX_RFC3339_SECONDS, MIN_RFC3339_SECONDS};
use crate::summary::{Summary, Totals, WindowInfo};

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
/// (A malformed batch never gets this far: the SDK refuses it when it
/// arrives.)
#[derive(Debug, Clone, PartialEq)]
pub enum DigestError {
    /// A required column is not among the source's (or a batch's) columns.
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

/// The names of the required columns, as the source spells them.
#[derive(Debug, Clone)]
struct Layout {
    ts: String,
    region: String,
    product: String,
    quantity: String,
    amount: String,
}

/// How one batch's text column maps rows to group ids.
enum Keys<'a> {
    /// Dictionary text: each entry is resolved to a group id on first use.
    Dict {
        dict: Dictionary<'a>,
        ids: Vec<usize>,
    },
    /// Plain text: each row's text is looked up.
    Plain(Texts<'a>),
}

const UNRESOLVED: usize = usize::MAX;

impl<'a> Keys<'a> {
    fn new(texts: Texts<'a>) -> Self {
        match texts.dictionary() {
            Some(dict) => Keys::Dict {
                dict,
                ids: vec![UNRESOLVED; dict.len()],
            },
            None => Keys::Plain(texts),
        }
    }

    /// Whether row `row` is NULL.
    #[inline]
    fn is_null(&self, row: usize) -> bool {
        match self {
            Keys::Dict { dict, .. } => dict.entry(row).is_none(),
            Keys::Plain(texts) => texts.is_null(row),
        }
    }

    /// The group id of row `row`'s text, interning it on first use; `None`
    /// when the row is NULL.
    #[inline]
    fn group(&mut self, row: usize, groups: &mut Groups) -> Option<usize> {
        match self {
            Keys::Dict { dict, ids } => {
                let entry = dict.entry(row)?;
                let slot = ids.get_mut(entry)?;
                if *slot == UNRESOLVED {
                    *slot = groups.intern(dict.value(entry)?);
                }
                Some(*slot)
            }
            Keys::Plain(texts) => texts.get(row).map(|name| groups.intern(name)),
        }
    }
}

/// One batch's amount column: reals, or integers widened on read.
#[derive(Clone, Copy)]
enum Numbers<'a> {
    Real(Reals<'a>),
    Integer(Integers<'a>),
}

impl Numbers<'_> {
    /// Row `row`'s amount, or `None` when it is NULL.
    #[inline]
    fn get(&self, row: usize) -> Option<f64> {
        match self {
            Numbers::Real(v) => v.get(row),
            Numbers::Integer(v) => v.get(row).map(|i| i as f64),
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

/// Finds the required column `name` (case-insensitively), checks that its
/// declared kind is one of `accepted`, and returns its name as the source
/// spells it.
fn find_column(
    columns: &[ColumnInfo],
    name: &'static str,
    accepted: &[ColumnKind],
    expected: &'static str,
) -> Result<String, DigestError> {
    let mut matches = columns.iter().filter(|c| c.name.eq_ignore_ascii_case(name));
    let info = matches
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
    Ok(info.name.clone())
}

/// The batch's column `name` (as the source spells it), which the digest
/// calls `column`.
fn batch_column<'b>(
    batch: &'b Batch,
    name: &str,
    column: &'static str,
) -> Result<Column<'b>, DigestError> {
    batch
        .column(name)
        .map_err(|_| DigestError::MissingColumn { column })
}

fn wrong_kind(column: &'static str, expected: &'static str, found: &Column<'_>) -> DigestError {
    DigestError::WrongKind {
        column,
        expected,
        found: found.kind(),
    }
}

fn integers<'b>(
    batch: &'b Batch,
    name: &str,
    column: &'static str,
) -> Result<Integers<'b>, DigestError> {
    match batch_column(batch, name, column)? {
        Column::Integer(v) => Ok(v),
        c => Err(wrong_kind(column, INTEGER, &c)),
    }
}

fn texts<'b>(batch: &'b Batch, name: &str, column: &'static str) -> Result<Texts<'b>, DigestError> {
    match batch_column(batch, name, column)? {
        Column::Text(v) => Ok(v),
        c => Err(wrong_kind(column, TEXT, &c)),
    }
}

fn numbers<'b>(
    batch: &'b Batch,
    name: &str,
    column: &'static str,
) -> Result<Numbers<'b>, DigestError> {
    match batch_column(batch, name, column)? {
        Column::Real(v) => Ok(Numbers::Real(v)),
        Column::Integer(v) => Ok(Numbers::Integer(v)),
        c => Err(wrong_kind(column, NUMBER, &c)),
    }
}

const INTEGER: &str = "integer";
const NUMBER: &str = "real or integer";
const TEXT: &str = "text";

impl Digest {
    /// Starts a digest over rows with these columns (the source's column
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
    /// column is skipped. Fails if the batch lacks a required column or
    /// holds one of another kind, or on a value out of range; on error the
    /// digest is left partly updated and should be discarded.
    pub fn add_batch(&mut self, batch: &Batch) -> Result<(), DigestError> {
        let first_row = self.rows;
        let l = &self.layout;
        let ts = integers(batch, &l.ts, TS)?;
        let mut region = Keys::new(texts(batch, &l.region, REGION)?);
        let mut product = Keys::new(texts(batch, &l.product, PRODUCT)?);
        let quantity = integers(batch, &l.quantity, QUANTITY)?;
        let amount = numbers(batch, &l.amount, AMOUNT)?;
        for row in 0..batch.len() {
            let (Some(t), Some(q), Some(a)) = (ts.get(row), quantity.get(row), amount.get(row))
            else {
                self.skipped += 1;
                continue;
            };
            if region.is_null(row) || product.is_null(row) {
                self.skipped += 1;
                continue;
            }
            let window_row = first_row + row as u64;
            if !(MIN_RFC3339_SECONDS..=MAX_RFC3339_SECONDS).contains(&t) {
                return Err(DigestError::BadValue {
                    column: TS,
                    row: window_row,
                    detail: format!("unix time {t} is outside the years 0000 to 9999"),
                });
            }
            if !a.is_finite() {
                return Err(DigestError::BadValue {
                    column: AMOUNT,
                    row: window_row,
                    detail: format!("amount {a} is not a finite number"),
                });
            }
            let r = region.group(row, &mut self.regions);
            let p = product.group(row, &mut self.products);
            self.totals.add(q, a);
            if let Some(s) = r.and_then(|r| self.regions.stats.get_mut(r)) {
                s.add(q, a);
            }
            if let Some(s) = p.and_then(|p| self.products.stats.get_mut(p)) {
                s.add(q, a);
            }
            self.first_sale = self.first_sale.min(t);
            self.last_sale = self.last_sale.max(t);
        }
        self.rows += batch.len() as u64;
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
