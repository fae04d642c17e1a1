-- Sample data for the reference "daily sales digest" report (guest-report).
--
-- One row per order. The report's query selects the rows of one window by
-- `ts`, for example:
--   SELECT ts, region, product, quantity, amount FROM sales
--   WHERE ts >= :start AND ts < :end ORDER BY ts;
-- and the component finds the columns by name (case-insensitively).

CREATE TABLE sales (
    -- Order number; not read by the report.
    id       INTEGER PRIMARY KEY,
    -- When the sale happened: UTC seconds since 1970-01-01T00:00:00Z.
    ts       INTEGER NOT NULL,
    -- Sales region, for example 'north'; the digest groups by it.
    region   TEXT    NOT NULL,
    -- Product name, for example 'widget'; the digest groups by it.
    product  TEXT    NOT NULL,
    -- Units sold in the order.
    quantity INTEGER NOT NULL,
    -- Order total in the shop's currency (the digest rounds sums to cents).
    amount   REAL    NOT NULL
);

-- Window queries select by time range.
CREATE INDEX sales_ts ON sales (ts);
