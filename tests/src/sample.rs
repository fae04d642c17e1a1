//! Deterministic sample sales data: the same seed always writes the same
//! rows, so examples, tests and benchmarks agree on what a window holds.

use std::path::Path;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Regions sales are booked in.
pub const REGIONS: [&str; 5] = ["north", "south", "east", "west", "online"];

/// Products with their unit prices, in cents.
pub const PRODUCTS: [(&str, i64); 12] = [
    ("espresso-beans-1kg", 2490),
    ("filter-papers-100", 450),
    ("grinder-burr", 8900),
    ("kettle-gooseneck", 5400),
    ("mug-ceramic", 1200),
    ("pour-over-dripper", 2300),
    ("scale-digital", 3100),
    ("milk-frother", 3900),
    ("tamper-58mm", 2750),
    ("cold-brew-jar", 2600),
    ("decaf-beans-500g", 1490),
    ("cleaning-tablets", 990),
];

/// The table the reference report reads (see `examples/sales-schema.sql`).
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS sales (
    id       INTEGER PRIMARY KEY,
    ts       INTEGER NOT NULL,
    region   TEXT    NOT NULL,
    product  TEXT    NOT NULL,
    quantity INTEGER NOT NULL,
    amount   REAL    NOT NULL
);
CREATE INDEX IF NOT EXISTS sales_by_ts ON sales (ts);";

/// Writes `rows` sales spread evenly at random over `[start, end)` (Unix
/// seconds) into the SQLite file at `path`, creating the table if needed.
///
/// # Errors
///
/// Any SQLite error.
pub fn write_sales(
    path: &Path,
    start: i64,
    end: i64,
    rows: u64,
    seed: u64,
) -> rusqlite::Result<()> {
    let mut conn = rusqlite::Connection::open(path)?;
    conn.execute_batch(SCHEMA)?;
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare(
            "INSERT INTO sales (ts, region, product, quantity, amount) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut times: Vec<i64> = (0..rows).map(|_| rng.random_range(start..end)).collect();
        times.sort_unstable();
        for ts in times {
            let region = REGIONS[rng.random_range(0..REGIONS.len())];
            let (product, price) = PRODUCTS[rng.random_range(0..PRODUCTS.len())];
            let quantity: i64 = rng.random_range(1..=4);
            let discount: i64 = rng.random_range(0..=15);
            let amount = (quantity * price * (100 - discount) / 100) as f64 / 100.0;
            insert.execute(rusqlite::params![ts, region, product, quantity, amount])?;
        }
    }
    tx.commit()
}
