//! Unit tests of the digest, run natively on batches built with the SDK's
//! testing helpers (and checked as the host's batches are).

use jobhost_sdk::testing::{BatchBuilder, RawColumn, RawData, RawText};
use jobhost_sdk::{Error, ErrorKind};

use super::*;
use crate::format;
use crate::summary::GroupSummary;

/// One sale row, as the tests write them.
#[derive(Clone, Copy)]
struct Sale {
    ts: i64,
    region: &'static str,
    product: &'static str,
    quantity: i64,
    amount: f64,
}

const fn sale(
    ts: i64,
    region: &'static str,
    product: &'static str,
    quantity: i64,
    amount: f64,
) -> Sale {
    Sale {
        ts,
        region,
        product,
        quantity,
        amount,
    }
}

fn info(name: &str, kind: ColumnKind) -> ColumnInfo {
    ColumnInfo {
        name: name.to_owned(),
        kind,
    }
}

/// The columns of the sample query, in table order.
fn sales_columns() -> Vec<ColumnInfo> {
    vec![
        info("ts", ColumnKind::Integer),
        info("region", ColumnKind::Text),
        info("product", ColumnKind::Text),
        info("quantity", ColumnKind::Integer),
        info("amount", ColumnKind::Real),
    ]
}

fn text_data(values: &[&str], dict: bool) -> RawData {
    if dict {
        RawData::dictionary(values)
    } else {
        RawData::Text(RawText::pack(values))
    }
}

/// The columns of a batch in the layout of [`sales_columns`], as the host
/// would send them (text plain or dictionary-encoded), for a test to change
/// before building the batch.
fn parts(sales: &[Sale], dict: bool) -> Vec<RawColumn> {
    let regions: Vec<&str> = sales.iter().map(|s| s.region).collect();
    let products: Vec<&str> = sales.iter().map(|s| s.product).collect();
    vec![
        RawColumn::new(RawData::Integer(sales.iter().map(|s| s.ts).collect())),
        RawColumn::new(text_data(&regions, dict)),
        RawColumn::new(text_data(&products, dict)),
        RawColumn::new(RawData::Integer(sales.iter().map(|s| s.quantity).collect())),
        RawColumn::new(RawData::Real(sales.iter().map(|s| s.amount).collect())),
    ]
}

/// Builds and checks a batch of `columns` from `parts`, as the SDK checks a
/// host batch.
fn build_with(columns: &[ColumnInfo], parts: Vec<RawColumn>) -> Result<Batch, Error> {
    columns
        .iter()
        .zip(parts)
        .fold(BatchBuilder::new(), |b, (info, column)| {
            b.raw(&info.name, info.kind, column)
        })
        .try_build()
}

/// A batch of [`sales_columns`] from `parts`, which must be well formed.
fn build(parts: Vec<RawColumn>) -> Batch {
    build_with(&sales_columns(), parts).expect("the batch is well formed")
}

/// A batch in the layout of [`sales_columns`], with text plain or
/// dictionary-encoded.
fn batch(sales: &[Sale], dict: bool) -> Batch {
    build(parts(sales, dict))
}

/// The error building a batch of [`sales_columns`] from `parts` gives: the
/// host's malformed batch never reaches the digest.
fn malformed(parts: Vec<RawColumn>) -> Error {
    let err = build_with(&sales_columns(), parts).expect_err("the batch is malformed");
    assert_eq!(err.kind(), ErrorKind::SourceFailed, "{err}");
    err
}

fn window() -> WindowInfo {
    WindowInfo {
        key: "daily-report:2026-11-08".to_owned(),
        label: "2026-11-08".to_owned(),
        timezone: "Europe/Berlin".to_owned(),
    }
}

fn summarize(batches: &[Batch], top: Option<usize>) -> Summary {
    let mut digest = Digest::new(&sales_columns()).expect("columns are valid");
    for b in batches {
        digest.add_batch(b).expect("batch is valid");
    }
    digest.finish(window(), top)
}

fn add_err(batch: &Batch) -> DigestError {
    let mut digest = Digest::new(&sales_columns()).expect("columns are valid");
    digest.add_batch(batch).expect_err("batch is invalid")
}

/// 2026-11-08T00:00:00Z.
const DAY: i64 = 1_794_096_000;

const SALES: [Sale; 6] = [
    sale(DAY + 47_100, "north", "widget", 2, 20.0),
    sale(DAY + 3_600, "south", "gadget", 1, 15.5),
    sale(DAY + 7_200, "north", "gizmo", 5, 100.25),
    sale(DAY + 50_000, "east", "widget", 1, 10.0),
    sale(DAY + 60, "south", "widget", 3, 30.0),
    sale(DAY + 86_399, "north", "gadget", 1, 4.75),
];

fn find<'a>(groups: &'a [GroupSummary], name: &str) -> &'a GroupSummary {
    groups
        .iter()
        .find(|g| g.name == name)
        .expect("group is present")
}

#[test]
fn revenue_is_summed_per_region() {
    let s = summarize(&[batch(&SALES, false)], None);
    let north = find(&s.regions, "north");
    assert_eq!((north.orders, north.units, north.revenue), (3, 8, 125.0));
    assert_eq!((north.min_order, north.max_order), (4.75, 100.25));
    let south = find(&s.regions, "south");
    assert_eq!((south.orders, south.units, south.revenue), (2, 4, 45.5));
    let widget = find(&s.products, "widget");
    assert_eq!((widget.orders, widget.units, widget.revenue), (3, 6, 60.0));
}

#[test]
fn window_totals_cover_every_counted_row() {
    let t = summarize(&[batch(&SALES, true)], None).totals;
    assert_eq!((t.orders, t.units, t.revenue), (6, 13, 180.5));
    assert_eq!(t.average_order, Some(180.5 / 6.0));
    assert_eq!((t.min_order, t.max_order), (Some(4.75), Some(100.25)));
    assert_eq!(
        (t.first_sale, t.last_sale),
        (Some(DAY + 60), Some(DAY + 86_399))
    );
}

#[test]
fn the_digest_renders_as_the_documented_json() {
    let json = summarize(&[batch(&SALES, false)], None).to_json();
    let expected = concat!(
        r#"{"window":{"key":"daily-report:2026-11-08","label":"2026-11-08","timezone":"Europe/Berlin"},"#,
        r#""totals":{"orders":6,"units":13,"revenue":180.50,"average_order":30.08,"min_order":4.75,"max_order":100.25,"#,
        r#""first_sale":"2026-11-08T00:01:00Z","last_sale":"2026-11-08T23:59:59Z"},"skipped_rows":0,"#,
        r#""regions":[{"name":"north","orders":3,"units":8,"revenue":125.00,"min_order":4.75,"max_order":100.25},"#,
        r#"{"name":"south","orders":2,"units":4,"revenue":45.50,"min_order":15.50,"max_order":30.00},"#,
        r#"{"name":"east","orders":1,"units":1,"revenue":10.00,"min_order":10.00,"max_order":10.00}],"#,
        r#""products":[{"name":"gizmo","orders":1,"units":5,"revenue":100.25,"min_order":100.25,"max_order":100.25},"#,
        r#"{"name":"widget","orders":3,"units":6,"revenue":60.00,"min_order":10.00,"max_order":30.00},"#,
        r#"{"name":"gadget","orders":2,"units":2,"revenue":20.25,"min_order":4.75,"max_order":15.50}],"#,
        r#""product_count":3}"#
    );
    assert_eq!(json, expected);
    let parsed: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(parsed["totals"]["revenue"], serde_json::json!(180.5));
}

#[test]
fn the_text_a_model_is_asked_to_describe_is_an_instruction_then_the_figures() {
    let prompt = summarize(&[batch(&SALES, false)], None).to_prompt();
    let (instruction, rest) = prompt.split_once("\n\n").expect("an instruction first");
    assert!(
        instruction.contains("at most three sentences") && instruction.contains("do not invent"),
        "{instruction}"
    );
    assert!(
        rest.starts_with("Window: daily-report:2026-11-08 (2026-11-08, time zone Europe/Berlin)"),
        "{rest}"
    );
    let json = rest.lines().last().unwrap();
    assert_eq!(json, summarize(&[batch(&SALES, false)], None).to_json());
    assert_eq!(prompt, summarize(&[batch(&SALES, true)], None).to_prompt());
    let empty = summarize(&[], None).to_prompt();
    assert!(empty.starts_with("There were no sales"), "{empty}");
}

#[test]
fn dictionary_and_plain_text_give_the_same_digest() {
    let plain = summarize(&[batch(&SALES, false)], None);
    let dict = summarize(&[batch(&SALES, true)], None);
    let mixed = summarize(&[batch(&SALES[..2], true), batch(&SALES[2..], false)], None);
    assert_eq!(plain, dict);
    assert_eq!(plain.to_json(), dict.to_json());
    assert_eq!(plain.to_json(), mixed.to_json());
}

#[test]
fn the_same_input_gives_byte_identical_output() {
    let once = summarize(&[batch(&SALES, true)], Some(2));
    let twice = summarize(&[batch(&SALES, true)], Some(2));
    assert_eq!(once.to_json(), twice.to_json());
    assert_eq!(once.to_text(), twice.to_text());
    let split: Vec<Batch> = SALES.chunks(1).map(|c| batch(c, true)).collect();
    assert_eq!(summarize(&split, Some(2)).to_json(), once.to_json());
}

#[test]
fn rows_with_a_null_in_any_required_column_are_skipped() {
    let mut b = parts(&SALES, false);
    // Row i has a NULL in column i (for the five columns); row 5 has none.
    for (i, column) in b.iter_mut().enumerate() {
        column.nulls = Some(vec![1 << i]);
    }
    let s = summarize(&[build(b)], None);
    assert_eq!(s.skipped_rows, 5);
    assert_eq!(s.totals.orders, 1);
    assert_eq!(s.totals.revenue, 4.75);
    assert_eq!(s.regions.len(), 1);
    assert_eq!(s.products.len(), 1);
    assert!(s.to_json().contains(r#""skipped_rows":5"#));
}

#[test]
fn null_rows_do_not_create_groups_or_read_their_values() {
    // NULL rows hold an empty value, and a dictionary index that points
    // nowhere must not matter either.
    let rows = [
        sale(DAY, "north", "widget", 1, 1.0),
        sale(0, "", "", 0, 0.0),
    ];
    let mut b = parts(&rows, true);
    b[1].nulls = Some(vec![0b10]);
    if let RawData::TextDict { indices, .. } = &mut b[1].data {
        indices[1] = 99;
    }
    let s = summarize(&[build(b)], None);
    assert_eq!(s.skipped_rows, 1);
    let names: Vec<&str> = s.regions.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["north"]);
    assert_eq!(s.product_count, 1);
}

#[test]
fn integer_amounts_are_widened() {
    let mut columns = sales_columns();
    columns[4].kind = ColumnKind::Integer;
    let mut b = parts(&SALES[..2], false);
    b[4].data = RawData::Integer(vec![20, 15]);
    let b = build_with(&columns, b).expect("well formed");
    let mut digest = Digest::new(&columns).expect("integer amount is accepted");
    digest.add_batch(&b).expect("integer amounts are read");
    let s = digest.finish(window(), None);
    assert_eq!(s.totals.revenue, 35.0);
    assert_eq!(s.totals.max_order, Some(20.0));
}

#[test]
fn columns_are_found_by_name_in_any_case_and_order() {
    let columns = vec![
        info("AMOUNT", ColumnKind::Real),
        info("id", ColumnKind::Integer),
        info("Product", ColumnKind::Text),
        info("Region", ColumnKind::Text),
        info("Quantity", ColumnKind::Integer),
        info("TS", ColumnKind::Integer),
    ];
    let b = build_with(
        &columns,
        vec![
            RawColumn::new(RawData::Real(vec![9.99])),
            RawColumn::new(RawData::Integer(vec![1])),
            RawColumn::new(text_data(&["widget"], false)),
            RawColumn::new(text_data(&["north"], true)),
            RawColumn::new(RawData::Integer(vec![3])),
            RawColumn::new(RawData::Integer(vec![DAY])),
        ],
    )
    .expect("well formed");
    let mut digest = Digest::new(&columns).expect("columns are found");
    digest.add_batch(&b).expect("batch is valid");
    let s = digest.finish(window(), None);
    assert_eq!(s.regions[0].name, "north");
    assert_eq!(s.products[0].name, "widget");
    assert_eq!((s.totals.units, s.totals.revenue), (3, 9.99));
}

#[test]
fn a_missing_column_is_an_error_naming_it() {
    let mut columns = sales_columns();
    columns.remove(3);
    let err = Digest::new(&columns).expect_err("quantity is missing");
    assert_eq!(err, DigestError::MissingColumn { column: "quantity" });
    assert!(err.to_string().contains("`quantity`"));
}

#[test]
fn a_repeated_column_is_an_error() {
    let mut columns = sales_columns();
    columns.push(info("Ts", ColumnKind::Integer));
    let err = Digest::new(&columns).expect_err("ts is repeated");
    assert_eq!(err, DigestError::DuplicateColumn { column: "ts" });
}

#[test]
fn a_declared_column_of_the_wrong_kind_is_an_error_naming_it() {
    let mut columns = sales_columns();
    columns[1].kind = ColumnKind::Integer;
    let err = Digest::new(&columns).expect_err("region must be text");
    assert!(matches!(
        err,
        DigestError::WrongKind {
            column: "region",
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "column `region` holds integer values, expected text"
    );
    let mut columns = sales_columns();
    columns[0].kind = ColumnKind::Real;
    assert!(matches!(
        Digest::new(&columns),
        Err(DigestError::WrongKind { column: "ts", .. })
    ));
}

#[test]
fn a_delivered_column_of_the_wrong_kind_is_an_error_naming_it() {
    // Data of another kind than the source declares never reaches the
    // digest: the batch is refused when it arrives.
    let mut b = parts(&SALES, false);
    b[3].data = RawData::Real(vec![1.0; SALES.len()]);
    let err = malformed(b);
    assert!(
        err.message().contains("column `quantity`")
            && err
                .message()
                .contains("declared integer, but the batch holds real data"),
        "{err}"
    );
    // A batch declaring another kind than the digest was started with is
    // refused by the digest, naming the column.
    let mut columns = sales_columns();
    columns[3].kind = ColumnKind::Real;
    let mut b = parts(&SALES, false);
    b[3].data = RawData::Real(vec![1.0; SALES.len()]);
    let b = build_with(&columns, b).expect("well formed");
    let err = add_err(&b);
    assert!(matches!(
        err,
        DigestError::WrongKind {
            column: "quantity",
            found: ColumnKind::Real,
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "column `quantity` holds real values, expected integer"
    );
}

#[test]
fn bad_offsets_are_errors_not_panics() {
    let mut b = parts(&SALES[..2], false);
    b[2].data = RawData::Text(RawText {
        data: b"widget".to_vec(),
        offsets: vec![0, 6, 60],
    });
    let err = malformed(b);
    assert!(
        err.message()
            .contains("column `product`, row 1: offsets 6..60 are past the 6 bytes of data"),
        "{err}"
    );
    let mut b = parts(&SALES[..2], true);
    if let RawData::TextDict { values, .. } = &mut b[1].data {
        values.offsets = vec![0, 5, 3];
    }
    let err = malformed(b);
    assert!(
        err.message()
            .contains("column `region`, dictionary entry 1: offsets 5..3 decrease"),
        "{err}"
    );
}

#[test]
fn invalid_utf8_and_bad_dictionary_indices_are_errors() {
    let mut b = parts(&SALES[..1], false);
    b[1].data = RawData::Text(RawText {
        data: vec![0xc3],
        offsets: vec![0, 1],
    });
    let err = malformed(b);
    assert!(
        err.message()
            .contains("column `region`, row 0: not valid UTF-8"),
        "{err}"
    );
    let mut b = parts(&SALES[..1], true);
    if let RawData::TextDict { indices, .. } = &mut b[2].data {
        indices[0] = 7;
    }
    let err = malformed(b);
    assert!(
        err.message().contains(
            "column `product`, row 0: dictionary index 7, but the dictionary holds 1 values"
        ),
        "{err}"
    );
}

#[test]
fn columns_with_too_few_values_or_short_bitmaps_are_errors() {
    let mut b = parts(&SALES, false);
    b[4].data = RawData::Real(vec![1.0]);
    let err = malformed(b);
    assert!(
        err.message()
            .contains("column `amount`: 1 values for 6 rows"),
        "{err}"
    );
    let mut b = parts(&SALES, false);
    b[0].nulls = Some(Vec::new());
    let err = malformed(b);
    assert!(
        err.message()
            .contains("column `ts`: the NULL bitmap of 0 bytes does not cover 6 rows"),
        "{err}"
    );
    // A batch without the columns the digest was started with is refused by
    // the digest, naming the first one missing.
    let mut b = parts(&SALES, false);
    b.truncate(2);
    let b = build_with(&sales_columns()[..2], b).expect("well formed");
    assert_eq!(
        add_err(&b),
        DigestError::MissingColumn { column: "product" }
    );
}

#[test]
fn errors_name_the_window_row() {
    let mut digest = Digest::new(&sales_columns()).expect("columns are valid");
    digest
        .add_batch(&batch(&SALES, false))
        .expect("first batch is valid");
    let bad = [
        sale(DAY, "north", "widget", 1, 1.0),
        sale(DAY, "north", "widget", 1, f64::NAN),
    ];
    let err = digest
        .add_batch(&batch(&bad, false))
        .expect_err("NaN amount");
    assert_eq!(
        err,
        DigestError::BadValue {
            column: "amount",
            row: 7,
            detail: "amount NaN is not a finite number".to_owned()
        }
    );
    let far = [sale(i64::MAX, "north", "widget", 1, 1.0)];
    assert!(matches!(
        add_err(&batch(&far, false)),
        DigestError::BadValue {
            column: "ts",
            row: 0,
            ..
        }
    ));
}

#[test]
fn an_empty_window_gives_a_valid_digest_with_zeros_and_nulls() {
    let s = summarize(&[], None);
    let json = s.to_json();
    assert_eq!(
        json,
        concat!(
            r#"{"window":{"key":"daily-report:2026-11-08","label":"2026-11-08","timezone":"Europe/Berlin"},"#,
            r#""totals":{"orders":0,"units":0,"revenue":0.00,"average_order":null,"min_order":null,"#,
            r#""max_order":null,"first_sale":null,"last_sale":null},"skipped_rows":0,"regions":[],"#,
            r#""products":[],"product_count":0}"#
        )
    );
    serde_json::from_str::<serde_json::Value>(&json).expect("valid JSON");
    assert_eq!(
        s.to_text(),
        "Sales digest daily-report:2026-11-08 (2026-11-08, Europe/Berlin): no sales."
    );
    // A batch of only NULL rows is empty too, apart from the skip count.
    let mut b = parts(&SALES[..2], false);
    b[0].nulls = Some(vec![0b11]);
    let s = summarize(&[build(b)], None);
    assert_eq!(
        (s.totals.orders, s.skipped_rows, s.totals.last_sale),
        (0, 2, None)
    );
}

#[test]
fn groups_are_sorted_by_revenue_descending_then_name() {
    let rows = [
        sale(DAY, "b", "p", 1, 10.0),
        sale(DAY, "c", "p", 1, 30.0),
        sale(DAY, "a", "p", 1, 10.0),
        sale(DAY, "B", "p", 1, 10.0),
        sale(DAY, "d", "p", 1, 10.004),
        sale(DAY, "e", "p", 1, 0.0),
    ];
    let s = summarize(&[batch(&rows, false)], None);
    let names: Vec<&str> = s.regions.iter().map(|g| g.name.as_str()).collect();
    // 10.004 rounds to 10.00, so "d" ties with "B", "a" and "b" by name.
    assert_eq!(names, ["c", "B", "a", "b", "d", "e"]);
}

#[test]
fn top_limits_the_product_list() {
    let top_two = summarize(&[batch(&SALES, false)], Some(2));
    let names: Vec<&str> = top_two.products.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["gizmo", "widget"]);
    assert_eq!(top_two.product_count, 3);
    assert_eq!(top_two.regions.len(), 3, "regions are never cut");
    assert!(
        summarize(&[batch(&SALES, false)], Some(0))
            .products
            .is_empty()
    );
    assert_eq!(
        summarize(&[batch(&SALES, false)], Some(10)).products.len(),
        3
    );
}

#[test]
fn the_top_parameter_must_be_a_non_negative_integer() {
    assert_eq!(parse_top("5"), Ok(5));
    assert_eq!(parse_top(" 0 "), Ok(0));
    for bad in ["", "-1", "five", "1.5"] {
        let err = parse_top(bad).expect_err("not a count");
        assert_eq!(err.name, "top");
        assert!(err.to_string().contains(&format!("`{bad}`")));
    }
}

#[test]
fn money_is_rounded_to_cents_in_the_json() {
    let rows = [
        sale(DAY, "north", "widget", 1, 1.005),
        sale(DAY, "north", "widget", 1, 2.675),
        sale(DAY, "north", "widget", 1, 0.001),
    ];
    let json = summarize(&[batch(&rows, false)], None).to_json();
    assert!(json.contains(r#""revenue":3.68,"#), "{json}");
    assert!(json.contains(r#""min_order":0.00,"#), "{json}");
    assert!(json.contains(r#""max_order":2.68,"#), "{json}");
    assert!(json.contains(r#""average_order":1.23,"#), "{json}");
}

#[test]
fn a_million_small_amounts_add_up_to_exact_cents() {
    let rows = vec![sale(DAY, "north", "widget", 1, 0.1); 10_000];
    let b = batch(&rows, true);
    let batches = vec![b; 100];
    let s = summarize(&batches, None);
    assert_eq!(s.totals.orders, 1_000_000);
    assert_eq!(
        format::money(s.totals.revenue).as_deref(),
        Some("100000.00")
    );
    assert!((s.totals.revenue - 100_000.0).abs() < 1e-6);
}

#[test]
fn names_are_escaped_in_the_json() {
    let rows = [sale(DAY, "no\"rth\\", "wid\nget", 1, 1.0)];
    let json = summarize(&[batch(&rows, false)], None).to_json();
    let parsed: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(parsed["regions"][0]["name"], "no\"rth\\");
    assert_eq!(parsed["products"][0]["name"], "wid\nget");
}

#[test]
fn the_text_summary_is_one_paragraph() {
    let mut sales = SALES.to_vec();
    sales.push(sale(DAY, "west", "widget", 1, 1.0));
    let mut b = parts(&sales, false);
    b[0].nulls = Some(vec![1 << 6]);
    let text = summarize(&[build(b)], Some(1)).to_text();
    assert_eq!(
        text,
        "Sales digest daily-report:2026-11-08 (2026-11-08, Europe/Berlin): 6 orders, 13 units, \
         revenue 180.50, average order 30.08 (smallest 4.75, largest 100.25); sales from \
         2026-11-08T00:01:00Z to 2026-11-08T23:59:59Z. Top region: north with 125.00 from 3 \
         orders. Top product: gizmo with 100.25 from 1 order. 1 row skipped for NULL values."
    );
}
