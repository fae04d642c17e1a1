//! Every case of the fixture shared with the Python SDK
//! (`sdk/fixtures/batches.json`) decodes to its `expect`ation, and every
//! malformed case fails naming its `error_column`.

use serde_json::Value;

use crate::testing::{BatchBuilder, RawColumn, RawData, RawText};
use crate::{Batch, Column, ColumnKind, Error, ErrorKind};

const FIXTURE: &str = include_str!("../../../fixtures/batches.json");

fn cases() -> Vec<Value> {
    let fixture: Value = serde_json::from_str(FIXTURE).expect("the fixture is JSON");
    fixture["cases"].as_array().expect("cases").clone()
}

fn name(case: &Value) -> &str {
    case["name"].as_str().expect("a case has a name")
}

fn kind(name: &str) -> ColumnKind {
    match name {
        "integer" => ColumnKind::Integer,
        "real" => ColumnKind::Real,
        "text" => ColumnKind::Text,
        "blob" => ColumnKind::Blob,
        other => panic!("unknown kind `{other}`"),
    }
}

fn bytes(v: &Value) -> Vec<u8> {
    v.as_array()
        .expect("a list of bytes")
        .iter()
        .map(|b| u8::try_from(b.as_u64().expect("a byte")).expect("a byte"))
        .collect()
}

fn u32s(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("a list of u32")
        .iter()
        .map(|b| u32::try_from(b.as_u64().expect("a u32")).expect("a u32"))
        .collect()
}

fn text(v: &Value) -> RawText {
    RawText {
        data: bytes(&v["data"]),
        offsets: u32s(&v["offsets"]),
    }
}

/// The WIT column of the fixture, as is.
fn raw_column(v: &Value) -> RawColumn {
    let nulls = match &v["nulls"] {
        Value::Null => None,
        bits => Some(bytes(bits)),
    };
    let data = v["data"].as_object().expect("column data");
    assert_eq!(data.len(), 1, "one case of column-data");
    let (case, value) = data.iter().next().expect("one case");
    let data = match case.as_str() {
        "integer" => RawData::Integer(
            value
                .as_array()
                .expect("integers")
                .iter()
                .map(|i| i.as_i64().expect("an i64"))
                .collect(),
        ),
        "real" => RawData::Real(
            value
                .as_array()
                .expect("reals")
                .iter()
                .map(|r| r.as_f64().expect("an f64"))
                .collect(),
        ),
        "text" => RawData::Text(text(value)),
        "text-dict" => RawData::TextDict {
            values: text(&value["values"]),
            indices: u32s(&value["indices"]),
        },
        "blob" => RawData::Blob(text(value)),
        other => panic!("unknown column-data case `{other}`"),
    };
    RawColumn { nulls, data }
}

/// Decodes a case's batch, as a batch from the host is decoded.
fn decode(case: &Value) -> Result<Batch, Error> {
    let columns = case["columns"].as_array().expect("columns");
    let batch = &case["batch"];
    let data = batch["columns"].as_array().expect("batch columns");
    let mut builder = BatchBuilder::new();
    for (info, column) in columns.iter().zip(data) {
        builder = builder.raw(
            info["name"].as_str().expect("a column name"),
            kind(info["kind"].as_str().expect("a column kind")),
            raw_column(column),
        );
    }
    let rows = batch["rows"].as_u64().expect("rows");
    builder
        .rows(usize::try_from(rows).expect("rows"))
        .try_build()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// A column's values as the fixture writes them: NULL as null, blobs as
/// lowercase hex.
fn as_json(column: Column<'_>) -> Vec<Value> {
    match column {
        Column::Integer(v) => v
            .iter()
            .map(|x| x.map_or(Value::Null, Value::from))
            .collect(),
        Column::Real(v) => v
            .iter()
            .map(|x| x.map_or(Value::Null, Value::from))
            .collect(),
        Column::Text(v) => v
            .iter()
            .map(|x| x.map_or(Value::Null, Value::from))
            .collect(),
        Column::Blob(v) => v
            .iter()
            .map(|x| x.map_or(Value::Null, |b| Value::from(hex(b))))
            .collect(),
    }
}

/// The same values read row by row through the typed getters.
fn by_rows(batch: &Batch, name: &str, kind: ColumnKind) -> Vec<Value> {
    batch
        .rows()
        .map(|row| {
            let value = match kind {
                ColumnKind::Integer => row.integer(name).map(|v| v.map(Value::from)),
                ColumnKind::Real => row.real(name).map(|v| v.map(Value::from)),
                ColumnKind::Text => row.text(name).map(|v| v.map(Value::from)),
                ColumnKind::Blob => row.blob(name).map(|v| v.map(|b| Value::from(hex(b)))),
            };
            value.expect("the column is there").unwrap_or(Value::Null)
        })
        .collect()
}

/// Compares values exactly: reals by their bits (so `-0.0` is not `0.0`).
fn assert_same(case: &str, column: &str, got: &[Value], want: &[Value]) {
    assert_eq!(got.len(), want.len(), "{case}: `{column}` row count");
    for (row, (g, w)) in got.iter().zip(want).enumerate() {
        let same = match (g, w) {
            (Value::Number(g), Value::Number(w)) if g.is_f64() || w.is_f64() => {
                g.as_f64().map(f64::to_bits) == w.as_f64().map(f64::to_bits)
            }
            _ => g == w,
        };
        assert!(same, "{case}: `{column}` row {row}: got {g}, expected {w}");
    }
}

#[test]
fn every_well_formed_case_decodes_to_its_expectation() {
    let mut decoded = 0;
    for case in cases().iter().filter(|c| c.get("expect").is_some()) {
        let name = name(case);
        let batch = decode(case).unwrap_or_else(|e| panic!("{name}: {e}"));
        let expect = case["expect"].as_object().expect("expect");
        let rows = case["batch"]["rows"].as_u64().expect("rows");
        assert_eq!(batch.len() as u64, rows, "{name}");
        assert_eq!(
            expect.len(),
            batch.columns().len(),
            "{name}: every column is expected"
        );
        for info in batch.columns() {
            let want = expect[&info.name].as_array().expect("expected values");
            let column = batch.column(&info.name).expect("the column is there");
            assert_eq!(column.kind(), info.kind, "{name}: `{}`", info.name);
            assert_eq!(column.len() as u64, rows, "{name}: `{}`", info.name);
            let got = as_json(column);
            assert_same(name, &info.name, &got, want);
            assert_same(
                name,
                &info.name,
                &by_rows(&batch, &info.name, info.kind),
                want,
            );
            for (row, w) in want.iter().enumerate() {
                assert_eq!(
                    column.is_null(row),
                    w.is_null(),
                    "{name}: `{}` row {row}",
                    info.name
                );
            }
        }
        decoded += 1;
    }
    assert!(decoded >= 3, "the fixture's well-formed cases were read");
}

#[test]
fn every_malformed_case_fails_naming_its_column() {
    let mut refused = 0;
    for case in cases().iter().filter(|c| c.get("error_column").is_some()) {
        let name = name(case);
        let column = case["error_column"].as_str().expect("error_column");
        let err = decode(case).expect_err(name);
        assert_eq!(err.kind(), ErrorKind::SourceFailed, "{name}: {err}");
        assert!(
            err.message().contains(&format!("column `{column}`")),
            "{name}: the error names `{column}`: {err}"
        );
        refused += 1;
    }
    assert!(refused >= 7, "the fixture's malformed cases were read");
}

#[test]
fn every_case_is_either_well_formed_or_malformed() {
    for case in cases() {
        let name = name(&case);
        assert!(
            case.get("expect").is_some() != case.get("error_column").is_some(),
            "{name}: exactly one of `expect` and `error_column`"
        );
    }
}
