//! Per-group counters of the digest and the table that names the groups.
//!
//! This module owns the state a [`Digest`](super::Digest) keeps between
//! batches: counters per group (orders, units, a compensated revenue sum,
//! smallest and largest order), the table mapping region or product names to
//! group ids, and the ordering of groups in the summary. Its size grows with
//! the number of distinct names, never with the number of rows.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use crate::format;
use crate::summary::GroupSummary;

/// A compensated (Neumaier) sum: a million amounts add up to within far less
/// than a cent of the exact sum, whatever their order.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Sum {
    sum: f64,
    compensation: f64,
}

impl Sum {
    #[inline]
    pub(super) fn add(&mut self, x: f64) {
        let t = self.sum + x;
        if self.sum.abs() >= x.abs() {
            self.compensation += (self.sum - t) + x;
        } else {
            self.compensation += (x - t) + self.sum;
        }
        self.sum = t;
    }

    pub(super) fn value(&self) -> f64 {
        self.sum + self.compensation
    }
}

/// Counters for one group of orders (the window, a region or a product).
#[derive(Debug, Clone, Copy)]
pub(super) struct Stats {
    pub(super) orders: u64,
    pub(super) units: i128,
    pub(super) revenue: Sum,
    pub(super) min: f64,
    pub(super) max: f64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            orders: 0,
            units: 0,
            revenue: Sum::default(),
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

impl Stats {
    #[inline]
    pub(super) fn add(&mut self, quantity: i64, amount: f64) {
        self.orders += 1;
        self.units += i128::from(quantity);
        self.revenue.add(amount);
        self.min = self.min.min(amount);
        self.max = self.max.max(amount);
    }
}

/// A fast, deterministic FxHash-style hasher for group names. The keys come
/// from the job's own data, so resistance to crafted collisions is not
/// needed, while speed on short strings is.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct FxBuild;

/// The hasher state of [`FxBuild`].
pub(super) struct FxHasher(u64);

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

impl BuildHasher for FxBuild {
    type Hasher = FxHasher;

    fn build_hasher(&self) -> FxHasher {
        FxHasher(0)
    }
}

/// Distinct names (regions or products) with their counters, numbered by
/// first appearance.
#[derive(Debug, Default)]
pub(super) struct Groups {
    ids: HashMap<Box<[u8]>, usize, FxBuild>,
    names: Vec<String>,
    pub(super) stats: Vec<Stats>,
}

impl Groups {
    /// The id of the group called `name`, creating it if needed.
    pub(super) fn intern(&mut self, name: &str) -> usize {
        if let Some(&id) = self.ids.get(name.as_bytes()) {
            return id;
        }
        self.insert(name)
    }

    fn insert(&mut self, name: &str) -> usize {
        let id = self.names.len();
        self.ids.insert(name.as_bytes().into(), id);
        self.names.push(name.to_owned());
        self.stats.push(Stats::default());
        id
    }

    /// The groups as summaries, sorted by revenue (as rounded to cents)
    /// descending, ties by name ascending.
    pub(super) fn into_sorted(self) -> Vec<GroupSummary> {
        let mut out: Vec<(f64, GroupSummary)> = self
            .names
            .into_iter()
            .zip(self.stats)
            .filter(|(_, s)| s.orders > 0)
            .map(|(name, s)| {
                let revenue = s.revenue.value();
                (
                    rounded(revenue),
                    GroupSummary {
                        name,
                        orders: s.orders,
                        units: s.units,
                        revenue,
                        min_order: s.min,
                        max_order: s.max,
                    },
                )
            })
            .collect();
        out.sort_by(|(ra, a), (rb, b)| rb.total_cmp(ra).then_with(|| a.name.cmp(&b.name)));
        out.into_iter().map(|(_, g)| g).collect()
    }
}

/// `amount` as displayed (rounded to cents), for ordering; non-finite
/// amounts order by their own value.
fn rounded(amount: f64) -> f64 {
    format::money(amount)
        .and_then(|s| s.parse().ok())
        .unwrap_or(amount)
}
