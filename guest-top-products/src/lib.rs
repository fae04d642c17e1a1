//! A second report component for the `reporter` world, with different
//! logic from the reference digest: it ranks products by revenue and stages
//! the top `top` (a job parameter, default 3) as JSON. Swapping it in for
//! the reference component needs no host rebuild, and replaying a recorded
//! run with it shows what it would have said instead.

use std::collections::HashMap;
use std::fmt::Write as _;

wit_bindgen::generate!({
    world: "reporter",
    path: "../wit",
});

use jobhost::report::source::{self, ColumnData, SourceError};
use jobhost::report::{log, outbox};

/// Rows per batch asked of the host.
const BATCH_ROWS: u32 = 4096;

struct TopProducts;

#[derive(Default)]
struct Product {
    revenue: f64,
    units: i64,
    orders: u64,
}

impl Guest for TopProducts {
    fn run(ctx: RunContext) -> Result<Report, RunError> {
        let top: usize = match ctx.params.iter().find(|(k, _)| k == "top") {
            Some((_, v)) => v.parse().map_err(|_| {
                RunError::Other(format!("parameter `top` must be a number, not `{v}`"))
            })?,
            None => 3,
        };
        let cursor = source::open().map_err(failed)?;
        let columns = cursor.columns();
        let find = |name: &str| {
            columns
                .iter()
                .position(|c| c.name == name)
                .ok_or_else(|| RunError::InvalidData(format!("the query has no `{name}` column")))
        };
        let (ts, product, quantity, amount) = (
            find("ts")?,
            find("product")?,
            find("quantity")?,
            find("amount")?,
        );
        let mut products: HashMap<String, Product> = HashMap::new();
        let mut last_ts: Option<i64> = None;
        while let Some(batch) = cursor.next_batch(BATCH_ROWS).map_err(failed)? {
            let c = &batch.columns;
            for row in 0..batch.rows as usize {
                let null = |i: usize| {
                    c[i].nulls
                        .as_ref()
                        .is_some_and(|n| n.get(row / 8).is_some_and(|b| b >> (row % 8) & 1 == 1))
                };
                if null(product) || null(amount) {
                    continue;
                }
                let name = match &c[product].data {
                    ColumnData::Text(t) => text(t, row),
                    ColumnData::TextDict(d) => d
                        .indices
                        .get(row)
                        .and_then(|&i| text(&d.values, i as usize)),
                    _ => None,
                };
                let (Some(name), ColumnData::Real(amounts)) = (name, &c[amount].data) else {
                    return Err(RunError::InvalidData(
                        "`product` must be text and `amount` real".to_string(),
                    ));
                };
                let p = products.entry(name.to_string()).or_default();
                p.revenue += amounts.get(row).copied().unwrap_or(0.0);
                p.orders += 1;
                if let ColumnData::Integer(q) = &c[quantity].data
                    && !null(quantity)
                {
                    p.units += q.get(row).copied().unwrap_or(0);
                }
                if let ColumnData::Integer(t) = &c[ts].data
                    && !null(ts)
                {
                    let t = t.get(row).copied().unwrap_or(0);
                    last_ts = Some(last_ts.map_or(t, |l| l.max(t)));
                }
            }
        }
        drop(cursor);
        let mut ranked: Vec<(String, Product)> = products.into_iter().collect();
        ranked.sort_by(|a, b| {
            b.1.revenue
                .total_cmp(&a.1.revenue)
                .then_with(|| a.0.cmp(&b.0))
        });
        ranked.truncate(top);

        let mut json = format!("{{\"window\":\"{}\",\"top_products\":[", ctx.window.key);
        let mut text = format!("Top {} product(s) of {}:", ranked.len(), ctx.window.key);
        for (i, (name, p)) in ranked.iter().enumerate() {
            let _ = write!(
                json,
                "{}{{\"product\":\"{}\",\"revenue\":{:.2},\"units\":{},\"orders\":{}}}",
                if i == 0 { "" } else { "," },
                name.replace('\\', "\\\\").replace('"', "\\\""),
                p.revenue,
                p.units,
                p.orders
            );
            let _ = write!(text, " {}. {name} ({:.2})", i + 1, p.revenue);
        }
        json.push_str("]}");
        for d in &ctx.destinations {
            outbox::send(d, json.as_bytes(), "application/json")
                .map_err(|e| RunError::Other(format!("staging for `{d}` failed: {e:?}")))?;
        }
        log::emit(log::Level::Info, &text);
        Ok(Report {
            summary: text,
            cursor: last_ts.map(|t| t.to_string()),
        })
    }
}

export!(TopProducts);

fn text(t: &source::TextColumn, i: usize) -> Option<&str> {
    let (start, end) = (*t.offsets.get(i)? as usize, *t.offsets.get(i + 1)? as usize);
    std::str::from_utf8(t.data.get(start..end)?).ok()
}

fn failed(e: SourceError) -> RunError {
    RunError::SourceFailed(format!("{e:?}"))
}
