//! The checks a batch goes through when it is made, its views, its rows,
//! and the testing builder.

use std::sync::Arc;

use crate::bindings::jobhost::report::source as wit;
use crate::testing::{BatchBuilder, RawColumn, RawData, RawText, null_bitmap};
use crate::{Batch, Column, ColumnInfo, ColumnKind, Error, ErrorKind};

/// A one-column batch of `rows` rows declared `kind`, from raw WIT fields.
fn one(kind: ColumnKind, column: RawColumn, rows: usize) -> Result<Batch, Error> {
    BatchBuilder::new()
        .raw("c", kind, column)
        .rows(rows)
        .try_build()
}

/// The message of the error a malformed one-column batch gives; it is
/// always `source-failed` and names the column.
fn refused(kind: ColumnKind, column: RawColumn, rows: usize) -> String {
    let err = one(kind, column, rows).expect_err("the batch is malformed");
    assert_eq!(err.kind(), ErrorKind::SourceFailed, "{err}");
    assert!(err.message().contains("column `c`"), "{err}");
    err.message().to_owned()
}

fn text(data: &[u8], offsets: &[u32]) -> RawColumn {
    RawColumn::new(RawData::Text(RawText {
        data: data.to_vec(),
        offsets: offsets.to_vec(),
    }))
}

#[test]
fn plain_text_values_are_read_by_row() {
    let b = BatchBuilder::new()
        .texts("t", [Some("north"), Some(""), Some("süd")])
        .build();
    let t = b.texts("t").expect("text");
    assert_eq!(t.len(), 3);
    assert_eq!(t.get(0), Some("north"));
    assert_eq!(t.get(1), Some(""));
    assert_eq!(t.get(2), Some("süd"));
    assert!(t.dictionary().is_none());
    assert_eq!(b.column("t").expect("there").kind(), ColumnKind::Text);
}

#[test]
fn dictionary_text_reads_the_same_as_plain_text() {
    let rows = [Some("b"), Some("a"), None, Some("b"), Some("c"), Some("a")];
    let b = BatchBuilder::new()
        .texts("plain", rows)
        .dict_texts("dict", rows)
        .build();
    let (plain, dict) = (b.texts("plain").unwrap(), b.texts("dict").unwrap());
    assert_eq!(plain.iter().collect::<Vec<_>>(), rows);
    assert_eq!(dict.iter().collect::<Vec<_>>(), rows);
    assert_eq!(b.columns()[1], ColumnInfo::new("dict", ColumnKind::Text));
    let d = dict.dictionary().expect("dictionary encoded");
    // In order of first appearance; the NULL row's placeholder is "".
    assert_eq!(d.values().collect::<Vec<_>>(), ["b", "a", "", "c"]);
    assert_eq!(d.len(), 4);
    let entries: Vec<Option<usize>> = (0..rows.len() + 1).map(|r| d.entry(r)).collect();
    assert_eq!(
        entries,
        [Some(0), Some(1), None, Some(0), Some(3), Some(1), None]
    );
    assert_eq!(d.value(3), Some("c"));
    assert_eq!(d.value(4), None);
}

#[test]
fn null_bits_are_read_least_significant_first() {
    let values: Vec<Option<i64>> = (0..10).map(|i| (i != 1 && i != 8).then_some(i)).collect();
    let b = BatchBuilder::new().integers("i", values.clone()).build();
    let v = b.integers("i").unwrap();
    assert!(v.has_nulls());
    let nulls: Vec<bool> = (0..10).map(|r| v.is_null(r)).collect();
    assert_eq!(
        nulls,
        [
            false, true, false, false, false, false, false, false, true, false
        ]
    );
    assert_eq!(v.iter().collect::<Vec<_>>(), values);
    // NULL rows hold a placeholder in the raw values.
    assert_eq!(v.values()[1], 0);
    assert_eq!(null_bitmap(&[1, 8]), Some(vec![0b0000_0010, 0b0000_0001]));
    assert_eq!(null_bitmap(&[]), None);
    let none = BatchBuilder::new().integers("i", [Some(1)]).build();
    let v = none.integers("i").unwrap();
    assert!(!v.has_nulls());
    assert!(!v.is_null(1000));
}

#[test]
fn a_short_null_bitmap_is_an_error() {
    let nine = RawData::Integer(vec![0; 9]);
    let short = RawColumn {
        nulls: Some(vec![0]),
        data: nine.clone(),
    };
    assert_eq!(
        refused(ColumnKind::Integer, short, 9),
        "malformed batch: column `c`: the NULL bitmap of 1 bytes does not cover 9 rows"
    );
    let empty = RawColumn {
        nulls: Some(Vec::new()),
        data: nine.clone(),
    };
    refused(ColumnKind::Integer, empty, 9);
    // Two bytes cover nine rows, and a longer bitmap does no harm.
    for bytes in [2, 3] {
        let covers = RawColumn {
            nulls: Some(vec![0; bytes]),
            data: nine.clone(),
        };
        assert!(one(ColumnKind::Integer, covers, 9).is_ok());
    }
}

#[test]
fn bad_offsets_are_errors_not_panics() {
    let past_end = refused(ColumnKind::Text, text(b"abc", &[0, 2, 9]), 2);
    assert!(
        past_end.ends_with("column `c`, row 1: offsets 2..9 are past the 3 bytes of data"),
        "{past_end}"
    );
    let decreasing = refused(ColumnKind::Text, text(b"abc", &[0, 3, 1]), 2);
    assert!(
        decreasing.ends_with("column `c`, row 1: offsets 3..1 decrease"),
        "{decreasing}"
    );
    let not_from_zero = refused(ColumnKind::Text, text(b"abc", &[1, 3]), 1);
    assert!(
        not_from_zero.ends_with("column `c`, row 0: the first offset is 1, not 0"),
        "{not_from_zero}"
    );
    let none = refused(ColumnKind::Text, text(b"", &[]), 0);
    assert!(none.contains("no offsets"), "{none}");
    let blob = RawColumn::new(RawData::Blob(RawText {
        data: vec![1],
        offsets: vec![0, 1, 2],
    }));
    let blob = refused(ColumnKind::Blob, blob, 2);
    assert!(blob.contains("row 1"), "{blob}");
    // The bytes after the last value belong to no value.
    let trailing = one(ColumnKind::Text, text(b"ab\xff", &[0, 2]), 1).expect("well formed");
    assert_eq!(trailing.texts("c").unwrap().get(0), Some("ab"));
}

#[test]
fn invalid_utf8_is_an_error_not_a_panic() {
    let bad = refused(
        ColumnKind::Text,
        text(&[b'o', b'k', 0xff, 0xfe], &[0, 2, 4]),
        2,
    );
    assert!(bad.ends_with("column `c`, row 1: not valid UTF-8"), "{bad}");
    // Empty values before the bad one do not shift the row.
    let bad = refused(ColumnKind::Text, text(&[b'a', 0xff], &[0, 0, 1, 1, 2]), 4);
    assert!(bad.ends_with("row 3: not valid UTF-8"), "{bad}");
    // An offset splitting a multi-byte character is invalid too.
    let split = refused(ColumnKind::Text, text("é".as_bytes(), &[0, 1, 2]), 2);
    assert!(
        split.ends_with("column `c`, row 0: not valid UTF-8 (offset 1 splits a character)"),
        "{split}"
    );
    // Blobs are bytes: nothing to check.
    let blob = RawColumn::new(RawData::Blob(RawText {
        data: vec![0xff],
        offsets: vec![0, 1],
    }));
    let b = one(ColumnKind::Blob, blob, 1).expect("any bytes");
    assert_eq!(b.blobs("c").unwrap().get(0), Some(&[0xff][..]));
}

#[test]
fn dictionary_values_are_checked_like_text() {
    let dict =
        |values: RawText, indices: Vec<u32>| RawColumn::new(RawData::TextDict { values, indices });
    let bad = refused(
        ColumnKind::Text,
        dict(
            RawText {
                data: vec![b'a', 0xc3],
                offsets: vec![0, 1, 2],
            },
            vec![0, 0],
        ),
        2,
    );
    assert!(
        bad.ends_with("column `c`, dictionary entry 1: not valid UTF-8"),
        "{bad}"
    );
    let too_few = refused(ColumnKind::Text, dict(RawText::pack(["a"]), vec![0]), 2);
    assert!(
        too_few.ends_with("column `c`: 1 values for 2 rows"),
        "{too_few}"
    );
}

#[test]
fn dictionary_indices_out_of_range_are_errors_except_in_null_rows() {
    let column = RawColumn::new(RawData::TextDict {
        values: RawText::pack(["x"]),
        indices: vec![0, 5],
    });
    let bad = refused(ColumnKind::Text, column.clone(), 2);
    assert!(
        bad.ends_with("column `c`, row 1: dictionary index 5, but the dictionary holds 1 values"),
        "{bad}"
    );
    // A NULL row's index is never read.
    let b = one(ColumnKind::Text, column.with_null_rows(&[1]), 2).expect("well formed");
    assert_eq!(
        b.texts("c").unwrap().iter().collect::<Vec<_>>(),
        [Some("x"), None]
    );
}

#[test]
fn reading_past_the_last_row_is_none() {
    let b = BatchBuilder::new()
        .reals("r", [Some(1.0)])
        .texts("t", [Some("a")])
        .dict_texts("d", [Some("a")])
        .blobs("b", [Some(b"a")])
        .integers("i", [Some(1)])
        .build();
    assert_eq!(b.reals("r").unwrap().get(1), None);
    assert_eq!(b.texts("t").unwrap().get(1), None);
    assert_eq!(b.texts("d").unwrap().get(1), None);
    assert_eq!(b.blobs("b").unwrap().get(1), None);
    assert_eq!(b.integers("i").unwrap().get(usize::MAX), None);
    assert!(b.row(1).is_none());
    assert_eq!(b.row(0).map(|r| r.index()), Some(0));
}

#[test]
fn a_column_with_the_wrong_number_of_values_is_an_error() {
    let m = refused(
        ColumnKind::Integer,
        RawColumn::new(RawData::Integer(vec![1])),
        2,
    );
    assert_eq!(m, "malformed batch: column `c`: 1 values for 2 rows");
    let m = refused(
        ColumnKind::Text,
        RawColumn::new(RawData::Text(RawText::pack(["a", "b"]))),
        3,
    );
    assert!(m.ends_with("column `c`: 2 values for 3 rows"), "{m}");
    let err = BatchBuilder::new()
        .integers("a", [Some(1), Some(2)])
        .reals("b", [Some(1.0)])
        .try_build()
        .expect_err("b is short");
    assert!(err.message().contains("column `b`"), "{err}");
}

#[test]
fn data_of_another_kind_than_declared_is_an_error() {
    let m = refused(
        ColumnKind::Text,
        RawColumn::new(RawData::Integer(vec![1])),
        1,
    );
    assert!(
        m.ends_with("column `c`: declared text, but the batch holds integer data"),
        "{m}"
    );
    let dict = RawColumn::new(RawData::dictionary(["a"]));
    let m = refused(ColumnKind::Blob, dict, 1);
    assert!(
        m.ends_with("declared blob, but the batch holds text-dict data"),
        "{m}"
    );
}

#[test]
fn a_batch_must_hold_every_declared_column() {
    let columns: Arc<[ColumnInfo]> = Arc::from(vec![
        ColumnInfo::new("a", ColumnKind::Integer),
        ColumnInfo::new("b", ColumnKind::Integer),
    ]);
    let int = |v: Vec<i64>| wit::Column {
        nulls: None,
        data: wit::ColumnData::Integer(v),
    };
    let short = wit::Batch {
        rows: 1,
        columns: vec![int(vec![1])],
    };
    let err = Batch::from_wit(Arc::clone(&columns), short, 0).expect_err("b is missing");
    assert_eq!(err.kind(), ErrorKind::SourceFailed);
    assert!(err.message().contains("column `b` is missing"), "{err}");
    let long = wit::Batch {
        rows: 1,
        columns: vec![int(vec![1]), int(vec![2]), int(vec![3])],
    };
    let err = Batch::from_wit(columns, long, 0).expect_err("one too many");
    assert!(
        err.message()
            .contains("the batch has 3 columns, the source declares 2 (`a`, `b`)"),
        "{err}"
    );
}

#[test]
fn errors_name_the_row_of_the_source() {
    let columns: Arc<[ColumnInfo]> = Arc::from(vec![ColumnInfo::new("t", ColumnKind::Text)]);
    let batch = wit::Batch {
        rows: 2,
        columns: vec![wit::Column {
            nulls: None,
            data: wit::ColumnData::Text(wit::TextColumn {
                data: vec![b'a', 0xff],
                offsets: vec![0, 1, 2],
            }),
        }],
    };
    let err = Batch::from_wit(columns, batch, 8192).expect_err("not UTF-8");
    assert_eq!(
        err.message(),
        "malformed batch: column `t`, row 8193: not valid UTF-8"
    );
}

#[test]
fn views_check_the_column_and_its_kind() {
    let b = BatchBuilder::new()
        .integers("n", [Some(1)])
        .texts("t", [Some("x")])
        .build();
    let err = b.reals("n").expect_err("integers are not widened");
    assert_eq!(err.kind(), ErrorKind::Programming);
    assert!(!err.retryable(), "a retry reads the same columns");
    assert_eq!(err.message(), "column `n` holds integer values, not real");
    assert!(b.texts("n").is_err() && b.blobs("n").is_err() && b.integers("t").is_err());
    let err = b.integers("missing").expect_err("no such column");
    assert_eq!(err.kind(), ErrorKind::Programming);
    assert!(!err.retryable());
    assert_eq!(
        err.message(),
        "the batch has no column `missing` (its columns: `n`, `t`)"
    );
    assert!(b.column("N").is_err(), "names are matched exactly");
    assert!(matches!(b.column("t"), Ok(Column::Text(_))));
}

#[test]
fn the_first_of_two_columns_with_one_name_is_used() {
    let b = BatchBuilder::new()
        .integers("x", [Some(1)])
        .texts("x", [Some("second")])
        .build();
    assert_eq!(b.integers("x").unwrap().get(0), Some(1));
    assert!(b.texts("x").is_err());
}

#[test]
fn rows_read_the_same_values_as_the_views() {
    let b = BatchBuilder::new()
        .integers("qty", [Some(1), None, Some(3)])
        .reals("amount", [Some(1.5), Some(2.5), None])
        .dict_texts("region", [Some("n"), Some("s"), Some("n")])
        .blobs("raw", [Some(&b"\x00"[..]), None, Some(b"")])
        .build();
    let rows = b.rows();
    assert_eq!(rows.len(), 3);
    let mut seen = Vec::new();
    for row in rows {
        let i = row.index();
        assert_eq!(row.integer("qty"), Ok(b.integers("qty").unwrap().get(i)));
        assert_eq!(row.real("amount"), Ok(b.reals("amount").unwrap().get(i)));
        assert_eq!(row.text("region"), Ok(b.texts("region").unwrap().get(i)));
        assert_eq!(row.blob("raw"), Ok(b.blobs("raw").unwrap().get(i)));
        assert_eq!(row.is_null("qty"), Ok(i == 1));
        seen.push(i);
    }
    assert_eq!(seen, [0, 1, 2]);
    assert_eq!(
        b.rows().rev().map(|r| r.index()).collect::<Vec<_>>(),
        [2, 1, 0]
    );
    let row = b.row(2).expect("row 2");
    assert_eq!(row.text("region"), Ok(Some("n")));
    assert_eq!(row.blob("raw"), Ok(Some(&b""[..])));
    assert!(row.text("qty").is_err(), "the kind is checked");
    assert!(row.integer("nope").is_err(), "the column is checked");
}

#[test]
fn columns_say_their_kind_length_and_nulls() {
    let b = BatchBuilder::new()
        .integers("i", [Some(1), None])
        .reals("r", [None, Some(2.0)])
        .texts("t", [Some("a"), None])
        .blobs("b", [None::<&[u8]>, Some(b"b")])
        .build();
    let kinds: Vec<ColumnKind> = b.columns().iter().map(|c| c.kind).collect();
    assert_eq!(
        kinds,
        [
            ColumnKind::Integer,
            ColumnKind::Real,
            ColumnKind::Text,
            ColumnKind::Blob
        ]
    );
    for (info, null_row) in b.columns().iter().zip([1, 0, 1, 0]) {
        let c = b.column(&info.name).unwrap();
        assert_eq!((c.kind(), c.len(), c.is_empty()), (info.kind, 2, false));
        assert!(c.is_null(null_row) && !c.is_null(1 - null_row));
    }
    assert_eq!(ColumnKind::Integer.to_string(), "integer");
    assert_eq!(ColumnKind::Blob.name(), "blob");
}

#[test]
fn the_builder_counts_rows_from_the_first_column_unless_told() {
    let empty = BatchBuilder::new().build();
    assert!(empty.is_empty() && empty.columns().is_empty());
    let b = BatchBuilder::new().integers("i", [Some(1), Some(2)]);
    assert_eq!(b.columns(), [ColumnInfo::new("i", ColumnKind::Integer)]);
    assert_eq!(b.clone().build().len(), 2);
    let err = b.rows(3).try_build().expect_err("3 rows, 2 values");
    assert!(err.message().contains("2 values for 3 rows"), "{err}");
    // Columns of no rows at all.
    let none = BatchBuilder::new()
        .texts::<&str>("t", [])
        .blobs::<&[u8]>("b", [])
        .build();
    assert_eq!(none.len(), 0);
    assert_eq!(none.texts("t").unwrap().iter().count(), 0);
}

#[test]
#[should_panic(expected = "column `b`: 1 values for 2 rows")]
fn the_builder_panics_on_a_malformed_batch() {
    BatchBuilder::new()
        .integers("a", [Some(1), Some(2)])
        .integers("b", [Some(1)])
        .build();
}

#[test]
fn the_builder_sends_nulls_as_the_host_does() {
    let b = BatchBuilder::new()
        .reals("r", [Some(1.5), None])
        .texts("t", [None, Some("x")])
        .build();
    let r = b.reals("r").unwrap();
    assert_eq!(r.values(), [1.5, 0.0]);
    assert_eq!(r.iter().collect::<Vec<_>>(), [Some(1.5), None]);
    let t = b.texts("t").unwrap();
    assert!(t.has_nulls());
    assert_eq!(t.iter().collect::<Vec<_>>(), [None, Some("x")]);
    assert_eq!(
        RawText::pack(["ab", "", "c"]),
        RawText {
            data: b"abc".to_vec(),
            offsets: vec![0, 2, 2, 3]
        }
    );
    assert_eq!(
        RawData::dictionary(["b", "a", "b"]),
        RawData::TextDict {
            values: RawText::pack(["b", "a"]),
            indices: vec![0, 1, 0]
        }
    );
}
