//! The finished digest of one window and its renderings.
//!
//! This module owns the [`Summary`] a [`Digest`](crate::digest::Digest)
//! finishes into, and its two renderings: compact, deterministic JSON (the
//! report's summary and the staged message body) and a one-paragraph text
//! for people. Money is kept unrounded in the values and rounded to cents
//! only when rendered.

#![forbid(unsafe_code)]

use crate::format;

/// The window a summary reports on, as it names it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WindowInfo {
    /// The window key, for example `daily-report:2026-11-08`.
    pub key: String,
    /// The window's label, for example `2026-11-08`.
    pub label: String,
    /// The IANA time zone of the window, for example `Europe/Berlin`.
    pub timezone: String,
}

/// Whole-window figures of a [`Summary`]. Money is unrounded here; the
/// renderers round it to cents.
#[derive(Debug, Clone, PartialEq)]
pub struct Totals {
    /// Number of orders (rows counted).
    pub orders: u64,
    /// Sum of quantities.
    pub units: i128,
    /// Sum of order amounts.
    pub revenue: f64,
    /// Revenue per order; `None` without orders.
    pub average_order: Option<f64>,
    /// Smallest order amount; `None` without orders.
    pub min_order: Option<f64>,
    /// Largest order amount; `None` without orders.
    pub max_order: Option<f64>,
    /// Earliest sale time, unix seconds; `None` without orders.
    pub first_sale: Option<i64>,
    /// Latest sale time, unix seconds; `None` without orders.
    pub last_sale: Option<i64>,
}

/// Figures for one region or product.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSummary {
    /// The region's or product's name.
    pub name: String,
    /// Number of orders.
    pub orders: u64,
    /// Sum of quantities.
    pub units: i128,
    /// Sum of order amounts.
    pub revenue: f64,
    /// Smallest order amount.
    pub min_order: f64,
    /// Largest order amount.
    pub max_order: f64,
}

/// The finished digest of one window.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The window reported on.
    pub window: WindowInfo,
    /// Whole-window figures.
    pub totals: Totals,
    /// Rows ignored because a required column was NULL.
    pub skipped_rows: u64,
    /// Every region, by revenue descending then name ascending.
    pub regions: Vec<GroupSummary>,
    /// The products in the same order, cut to the `top` asked for.
    pub products: Vec<GroupSummary>,
    /// How many distinct products there were before the cut.
    pub product_count: usize,
}

fn push_money(out: &mut String, amount: f64) {
    out.push_str(format::money(amount).as_deref().unwrap_or("null"));
}

fn push_opt_money(out: &mut String, amount: Option<f64>) {
    match amount {
        Some(a) => push_money(out, a),
        None => out.push_str("null"),
    }
}

fn push_opt_instant(out: &mut String, seconds: Option<i64>) {
    match seconds.and_then(format::rfc3339) {
        Some(s) => format::push_json_string(out, &s),
        None => out.push_str("null"),
    }
}

fn push_groups(out: &mut String, groups: &[GroupSummary]) {
    out.push('[');
    for (i, g) in groups.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"name\":");
        format::push_json_string(out, &g.name);
        out.push_str(&format!(",\"orders\":{},\"units\":{}", g.orders, g.units));
        out.push_str(",\"revenue\":");
        push_money(out, g.revenue);
        out.push_str(",\"min_order\":");
        push_money(out, g.min_order);
        out.push_str(",\"max_order\":");
        push_money(out, g.max_order);
        out.push('}');
    }
    out.push(']');
}

fn plural(n: impl Into<i128>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

fn money_text(amount: f64) -> String {
    format::money(amount).unwrap_or_else(|| "n/a".to_owned())
}

impl Summary {
    /// The digest as compact JSON. Deterministic: the same summary always
    /// gives the same bytes. Money has exactly two decimals; instants are
    /// RFC 3339 UTC strings; absent values are `null`.
    pub fn to_json(&self) -> String {
        let t = &self.totals;
        let mut out = String::with_capacity(512);
        out.push_str("{\"window\":{\"key\":");
        format::push_json_string(&mut out, &self.window.key);
        out.push_str(",\"label\":");
        format::push_json_string(&mut out, &self.window.label);
        out.push_str(",\"timezone\":");
        format::push_json_string(&mut out, &self.window.timezone);
        out.push_str(&format!(
            "}},\"totals\":{{\"orders\":{},\"units\":{},\"revenue\":",
            t.orders, t.units
        ));
        push_money(&mut out, t.revenue);
        out.push_str(",\"average_order\":");
        push_opt_money(&mut out, t.average_order);
        out.push_str(",\"min_order\":");
        push_opt_money(&mut out, t.min_order);
        out.push_str(",\"max_order\":");
        push_opt_money(&mut out, t.max_order);
        out.push_str(",\"first_sale\":");
        push_opt_instant(&mut out, t.first_sale);
        out.push_str(",\"last_sale\":");
        push_opt_instant(&mut out, t.last_sale);
        out.push_str(&format!(
            "}},\"skipped_rows\":{},\"regions\":",
            self.skipped_rows
        ));
        push_groups(&mut out, &self.regions);
        out.push_str(",\"products\":");
        push_groups(&mut out, &self.products);
        out.push_str(&format!(",\"product_count\":{}}}", self.product_count));
        out
    }

    /// What a language model is asked to describe: an instruction, then
    /// the window and the digest's figures as JSON. Deterministic, like
    /// [`Summary::to_json`]; the model's answer never comes back here.
    pub fn to_prompt(&self) -> String {
        let w = &self.window;
        let what = if self.totals.orders == 0 {
            "There were no sales in this window: say so in one sentence."
        } else {
            "Write a short digest, at most three sentences, of these sales for the sales \
             team: the totals, the strongest region and product, and anything unusual (for \
             example rows skipped for missing values). Use only the figures given; do not \
             invent numbers or comparisons."
        };
        format!(
            "{what}\n\nWindow: {} ({}, time zone {})\nFigures as JSON (money in the \
             shop's currency, instants in UTC):\n{}",
            w.key,
            w.label,
            w.timezone,
            self.to_json()
        )
    }

    /// The digest as one human-readable paragraph.
    pub fn to_text(&self) -> String {
        let t = &self.totals;
        let w = &self.window;
        let mut out = format!("Sales digest {} ({}, {}): ", w.key, w.label, w.timezone);
        if t.orders == 0 {
            out.push_str("no sales.");
        } else {
            out.push_str(&format!(
                "{}, {}, revenue {}",
                plural(t.orders, "order", "orders"),
                plural(t.units, "unit", "units"),
                money_text(t.revenue)
            ));
            if let (Some(avg), Some(min), Some(max)) = (t.average_order, t.min_order, t.max_order) {
                out.push_str(&format!(
                    ", average order {} (smallest {}, largest {})",
                    money_text(avg),
                    money_text(min),
                    money_text(max)
                ));
            }
            if let (Some(first), Some(last)) = (
                t.first_sale.and_then(format::rfc3339),
                t.last_sale.and_then(format::rfc3339),
            ) {
                out.push_str(&format!("; sales from {first} to {last}"));
            }
            out.push('.');
            for (what, top) in [
                ("region", self.regions.first()),
                ("product", self.products.first()),
            ] {
                if let Some(g) = top {
                    out.push_str(&format!(
                        " Top {what}: {} with {} from {}.",
                        g.name,
                        money_text(g.revenue),
                        plural(g.orders, "order", "orders")
                    ));
                }
            }
        }
        if self.skipped_rows > 0 {
            out.push_str(&format!(
                " {} skipped for NULL values.",
                plural(self.skipped_rows, "row", "rows")
            ));
        }
        out
    }
}
