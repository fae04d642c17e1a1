//! What a run read, in a few bytes: the count of the rows its guest
//! received and a sum of a digest of each, which neither the order of the
//! rows nor the size of the batches changes. The digest is XXH3's 128
//! bits over a word per value: fast enough to take as rows cross into the
//! guest, and made to tell changed data apart, not to resist a forger. A run records it with its
//! report; `jobhost check` reads the window's source again, compares, and
//! only when the two differ counts what changed, row by row, against the
//! rows the journal kept.

use std::collections::HashMap;

use super::batch::{Batch, ColumnData, TextData};

/// The rows a run's guest received, as a count and an order-free sum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fingerprint {
    /// Rows received.
    pub rows: u64,
    /// The sum, modulo 2^128, of each row's digest.
    pub sum: u128,
    /// Whether the guest read its cursor to the end (the last cursor it
    /// opened).
    pub complete: bool,
    /// How many cursors it opened.
    pub sessions: u32,
}

impl Fingerprint {
    /// A cursor opened.
    pub fn opened(&mut self) {
        self.sessions = self.sessions.saturating_add(1);
        self.complete = false;
    }

    /// A batch received (`None`: the end of the rows).
    pub fn add(&mut self, batch: Option<&Batch>) {
        match batch {
            None => self.complete = true,
            Some(b) => each_row(b, &mut |digest| {
                self.rows += 1;
                self.sum = self.sum.wrapping_add(digest);
            }),
        }
    }

    /// As stored: `v1 rows=N sum=HEX complete=0|1 sessions=N`.
    pub fn text(&self) -> String {
        format!(
            "v1 rows={} sum={:032x} complete={} sessions={}",
            self.rows,
            self.sum,
            u8::from(self.complete),
            self.sessions
        )
    }

    /// Read back from [`Fingerprint::text`]; `None` for anything else.
    pub fn parse(text: &str) -> Option<Fingerprint> {
        let mut words = text.split(' ');
        if words.next()? != "v1" {
            return None;
        }
        let mut f = Fingerprint::default();
        for word in words {
            let (name, value) = word.split_once('=')?;
            match name {
                "rows" => f.rows = value.parse().ok()?,
                "sum" => f.sum = u128::from_str_radix(value, 16).ok()?,
                "complete" => f.complete = value == "1",
                "sessions" => f.sessions = value.parse().ok()?,
                _ => {}
            }
        }
        Some(f)
    }
}

/// How the rows of two reads of one window differ, by row digests: rows
/// only the second holds, rows only the first holds, and of those, the
/// pairs taken as one row changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowChanges {
    /// Rows only in the second read, past those paired as changed.
    pub more: u64,
    /// Rows only in the first read, past those paired as changed.
    pub fewer: u64,
    /// Rows gone and rows come, paired one for one.
    pub changed: u64,
}

impl RowChanges {
    /// `3 rows more, 1 fewer, 2 changed`, leaving out what is 0 (`no row
    /// differs` when nothing does).
    pub fn words(&self) -> String {
        let mut parts = Vec::new();
        if self.more > 0 {
            parts.push(format!(
                "{} row{} more",
                self.more,
                if self.more == 1 { "" } else { "s" }
            ));
        }
        if self.fewer > 0 {
            parts.push(format!("{} fewer", self.fewer));
        }
        if self.changed > 0 {
            parts.push(format!("{} changed", self.changed));
        }
        if parts.is_empty() {
            "no row differs".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// The row digests of `batches`, counted.
pub fn row_digests<'a>(batches: impl IntoIterator<Item = &'a Batch>) -> HashMap<u128, u64> {
    let mut out: HashMap<u128, u64> = HashMap::new();
    for b in batches {
        each_row(b, &mut |d| *out.entry(d).or_default() += 1);
    }
    out
}

/// How `after` differs from `before`, both as [`row_digests`] counts them.
pub fn changes(before: &HashMap<u128, u64>, after: &HashMap<u128, u64>) -> RowChanges {
    let only = |a: &HashMap<u128, u64>, b: &HashMap<u128, u64>| -> u64 {
        a.iter()
            .map(|(d, n)| n.saturating_sub(b.get(d).copied().unwrap_or(0)))
            .sum()
    };
    let (came, went) = (only(after, before), only(before, after));
    let changed = came.min(went);
    RowChanges {
        more: came - changed,
        fewer: went - changed,
        changed,
    }
}

/// Calls `each` with the digest of every row of `b`, in order: XXH3-128
/// over one 64-bit word per column, the value's own bits for a number,
/// XXH3-64 of its bytes for text or bytes (a dictionary's values hashed
/// once per batch), a constant for NULL. A column's place and kind are
/// the word's place in the row.
fn each_row(b: &Batch, each: &mut dyn FnMut(u128)) {
    use xxhash_rust::xxh3::{xxh3_64_with_seed, xxh3_128};
    /// Stands for NULL in any column.
    const NULL: u64 = 0x9e37_79b9_7f4a_7c15;
    let rows = b.rows as usize;
    // Each column's words, in the row order.
    let words: Vec<Vec<u64>> = b
        .columns
        .iter()
        .map(|c| {
            let mut w: Vec<u64> = match &c.data {
                ColumnData::Integer(v) => v.iter().map(|n| *n as u64).collect(),
                ColumnData::Real(v) => v.iter().map(|x| x.to_bits()).collect(),
                ColumnData::Text(t) => (0..rows)
                    .map(|r| xxh3_64_with_seed(slice(t, r), 3))
                    .collect(),
                ColumnData::Blob(t) => (0..rows)
                    .map(|r| xxh3_64_with_seed(slice(t, r), 4))
                    .collect(),
                ColumnData::TextDict { values, indices } => {
                    let distinct = values.offsets.len().saturating_sub(1);
                    let hashed: Vec<u64> = (0..distinct)
                        .map(|i| xxh3_64_with_seed(slice(values, i), 3))
                        .collect();
                    indices
                        .iter()
                        .map(|i| hashed.get(*i as usize).copied().unwrap_or(NULL))
                        .collect()
                }
            };
            w.resize(rows, NULL);
            if let Some(nulls) = &c.nulls {
                for (r, word) in w.iter_mut().enumerate() {
                    if nulls
                        .get(r / 8)
                        .is_some_and(|byte| byte & (1 << (r % 8)) != 0)
                    {
                        *word = NULL;
                    }
                }
            }
            w
        })
        .collect();
    let mut row: Vec<u8> = Vec::with_capacity(words.len() * 8);
    for r in 0..rows {
        row.clear();
        for column in &words {
            row.extend_from_slice(&column[r].to_le_bytes());
        }
        each(xxh3_128(&row));
    }
}

/// Value `i` of packed data (empty when out of range: a validated batch
/// has none).
fn slice(t: &TextData, i: usize) -> &[u8] {
    match (t.offsets.get(i), t.offsets.get(i.wrapping_add(1))) {
        (Some(&a), Some(&b)) => t.data.get(a as usize..b as usize).unwrap_or(&[]),
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::super::batch::Column;
    use super::*;

    fn ints(values: &[i64]) -> Batch {
        Batch {
            rows: values.len() as u32,
            columns: vec![Column {
                nulls: None,
                data: ColumnData::Integer(values.to_vec()),
            }],
        }
    }

    #[test]
    fn neither_order_nor_batches_change_the_fingerprint_and_a_row_does() {
        let mut one = Fingerprint::default();
        one.opened();
        one.add(Some(&ints(&[1, 2, 3])));
        one.add(None);
        let mut other = Fingerprint::default();
        other.opened();
        other.add(Some(&ints(&[3])));
        other.add(Some(&ints(&[2, 1])));
        other.add(None);
        assert_eq!(one, other);
        assert!(one.complete);
        let mut more = other;
        more.add(Some(&ints(&[4])));
        assert_ne!(one.sum, more.sum);
        assert_eq!(Fingerprint::parse(&one.text()), Some(one));
        assert_eq!(Fingerprint::parse("v2 rows=1"), None);
    }

    #[test]
    fn changes_pair_a_row_gone_with_a_row_come() {
        let before = row_digests([&ints(&[1, 2, 3, 3])]);
        let after = row_digests([&ints(&[1, 2, 3, 9, 10])]);
        let c = changes(&before, &after);
        assert_eq!(
            c,
            RowChanges {
                more: 1,
                fewer: 0,
                changed: 1
            }
        );
        assert_eq!(c.words(), "1 row more, 1 changed");
        let same = changes(&before, &before);
        assert_eq!(same.words(), "no row differs");
    }
}
