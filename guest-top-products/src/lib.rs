//! A second report component, with different logic from the reference
//! digest: it ranks products by revenue and stages the top `top` (a job
//! parameter, default 3) as JSON. Swapping it in for the reference
//! component needs no host rebuild, and replaying a recorded run with it
//! shows what it would have said instead. It is written with `jobhost-sdk`
//! and has nothing for a language model to describe (the default
//! `describe`).

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::fmt::Write as _;

use jobhost_sdk::{Batch, Column, Context, Error, Output, Report};

/// Rows per batch asked of the host.
const BATCH_ROWS: u32 = 4096;

/// The columns the query must have.
const COLUMNS: [&str; 4] = ["ts", "product", "quantity", "amount"];

#[derive(Default)]
struct TopProducts;

#[derive(Default)]
struct Product {
    revenue: f64,
    units: i64,
    orders: u64,
}

/// What the batches add up to.
#[derive(Default)]
struct Ranking {
    products: HashMap<String, Product>,
    last_ts: Option<i64>,
}

impl Ranking {
    /// Counts every row with a product and an amount; `quantity` and `ts`
    /// count where they are integers and not NULL.
    fn add(&mut self, batch: &Batch) -> Result<(), Error> {
        let product = batch.column("product")?;
        let amount = batch.column("amount")?;
        let quantity = batch.integers("quantity").ok();
        let ts = batch.integers("ts").ok();
        for row in 0..batch.len() {
            if product.is_null(row) || amount.is_null(row) {
                continue;
            }
            let (Column::Text(names), Column::Real(amounts)) = (product, amount) else {
                return Err(Error::invalid_data(
                    "`product` must be text and `amount` real",
                ));
            };
            let (Some(name), Some(amount)) = (names.get(row), amounts.get(row)) else {
                continue; // neither is NULL, so both are there
            };
            let p = self.products.entry(name.to_string()).or_default();
            p.revenue += amount;
            p.orders += 1;
            if let Some(q) = quantity.and_then(|q| q.get(row)) {
                p.units += q;
            }
            if let Some(t) = ts.and_then(|t| t.get(row)) {
                self.last_ts = Some(self.last_ts.map_or(t, |l| l.max(t)));
            }
        }
        Ok(())
    }
}

impl Report for TopProducts {
    fn run(&mut self, ctx: &Context) -> Result<Output, Error> {
        let top: usize = match ctx.param("top") {
            Some(v) => v.parse().map_err(|_| {
                Error::other(format!("parameter `top` must be a number, not `{v}`"))
            })?,
            None => 3,
        };
        let mut source = jobhost_sdk::open()?;
        for name in COLUMNS {
            if !source.columns().iter().any(|c| c.name == name) {
                return Err(Error::invalid_data(format!(
                    "the query has no `{name}` column"
                )));
            }
        }
        let mut ranking = Ranking::default();
        for batch in source.batches_of(BATCH_ROWS) {
            ranking.add(&batch?)?;
        }
        drop(source);
        let mut ranked: Vec<(String, Product)> = ranking.products.into_iter().collect();
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
            jobhost_sdk::send(d, &json, "application/json")
                .map_err(|e| Error::other(format!("staging for `{d}` failed: {e}")))?;
        }
        jobhost_sdk::log::info(&text);
        let cursor = ranking.last_ts.map(|t| t.to_string());
        Ok(Output {
            summary: text,
            cursor,
        })
    }
}

jobhost_sdk::export!(TopProducts);

#[cfg(test)]
mod tests {
    use jobhost_sdk::ErrorKind;
    use jobhost_sdk::testing::BatchBuilder;

    use super::*;

    #[test]
    fn rows_with_a_product_and_an_amount_are_ranked() {
        let batch = BatchBuilder::new()
            .integers("ts", [Some(30), Some(10), None, Some(20)])
            .dict_texts("product", [Some("tea"), Some("coffee"), Some("tea"), None])
            .integers("quantity", [Some(2), None, Some(1), Some(9)])
            .reals("amount", [Some(4.5), Some(3.0), Some(1.5), Some(100.0)])
            .build();
        let mut ranking = Ranking::default();
        ranking.add(&batch).expect("well formed");
        let tea = &ranking.products["tea"];
        assert_eq!((tea.orders, tea.units, tea.revenue), (2, 3, 6.0));
        let coffee = &ranking.products["coffee"];
        assert_eq!((coffee.orders, coffee.units, coffee.revenue), (1, 0, 3.0));
        assert_eq!(ranking.products.len(), 2, "the NULL product is not counted");
        assert_eq!(ranking.last_ts, Some(30));
    }

    #[test]
    fn an_amount_that_is_not_real_is_invalid_data() {
        let batch = BatchBuilder::new()
            .integers("ts", [Some(1)])
            .texts("product", [Some("tea")])
            .integers("quantity", [Some(1)])
            .integers("amount", [Some(4)])
            .build();
        let err = Ranking::default()
            .add(&batch)
            .expect_err("amount is an integer");
        assert_eq!(err.kind(), ErrorKind::InvalidData);
        assert_eq!(err.message(), "`product` must be text and `amount` real");
    }
}
