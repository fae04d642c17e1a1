//! The reference report's aggregation written the plain native way (a row
//! loop with hash maps: totals, per region, per product, first and last
//! sale), for the benchmarks that put the guest beside native code. The
//! row source is the caller's: SQLite or PostgreSQL.

use std::collections::HashMap;

#[derive(Default)]
struct Group {
    orders: u64,
    units: i64,
    revenue: f64,
    min: f64,
    max: f64,
}

impl Group {
    fn add(&mut self, units: i64, amount: f64) {
        if self.orders == 0 {
            self.min = amount;
            self.max = amount;
        }
        self.orders += 1;
        self.units += units;
        self.revenue += amount;
        self.min = self.min.min(amount);
        self.max = self.max.max(amount);
    }
}

/// The running aggregation.
pub struct Sales {
    total: Group,
    regions: HashMap<String, Group>,
    products: HashMap<String, Group>,
    first: i64,
    last: i64,
}

impl Default for Sales {
    fn default() -> Sales {
        Sales {
            total: Group::default(),
            regions: HashMap::new(),
            products: HashMap::new(),
            first: i64::MAX,
            last: i64::MIN,
        }
    }
}

impl Sales {
    /// Adds one sale.
    pub fn add(&mut self, ts: i64, region: &str, product: &str, units: i64, amount: f64) {
        self.total.add(units, amount);
        self.first = self.first.min(ts);
        self.last = self.last.max(ts);
        for (map, key) in [(&mut self.regions, region), (&mut self.products, product)] {
            match map.get_mut(key) {
                Some(g) => g.add(units, amount),
                None => map.entry(key.to_string()).or_default().add(units, amount),
            }
        }
    }

    /// Ranks the products as the report does and returns the sales seen
    /// (the results are kept from the optimiser, not returned).
    pub fn finish(self) -> u64 {
        let mut ranked: Vec<_> = self.products.into_iter().collect();
        ranked.sort_by(|a, b| b.1.revenue.total_cmp(&a.1.revenue).then(a.0.cmp(&b.0)));
        std::hint::black_box((
            &ranked,
            &self.regions,
            self.first,
            self.last,
            self.total.units,
            self.total.revenue,
        ));
        self.total.orders
    }
}
