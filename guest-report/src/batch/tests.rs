//! Unit tests of the batch accessors, run natively on hand-built columns.

use super::*;

fn text(values: &[&str]) -> Column {
    Column::new(ColumnData::Text(values.iter().collect()))
}

#[test]
fn plain_text_values_are_read_by_row() {
    let c = text(&["north", "", "süd"]);
    assert_eq!(c.len(), 3);
    assert_eq!(c.str_at(0), Ok("north"));
    assert_eq!(c.str_at(1), Ok(""));
    assert_eq!(c.str_at(2), Ok("süd"));
    assert_eq!(c.kind(), ColumnKind::Text);
}

#[test]
fn dictionary_text_reads_the_same_as_plain_text() {
    let rows = ["b", "a", "b", "c", "a"];
    let plain = text(&rows);
    let dict = Column::new(ColumnData::TextDict(DictColumn::encode(&rows)));
    assert_eq!(dict.kind(), ColumnKind::Text);
    for row in 0..rows.len() {
        assert_eq!(plain.str_at(row), dict.str_at(row));
        assert_eq!(plain.bytes_at(row), dict.bytes_at(row));
    }
    let d = dict.dictionary().expect("dictionary encoded");
    assert_eq!(d.dictionary_len(), 3);
    assert_eq!(d.indices, vec![0, 1, 0, 2, 1]);
    assert_eq!(d.value(2), Ok("c"));
    assert!(plain.dictionary().is_none());
}

#[test]
fn integers_are_widened_to_reals() {
    let c = Column::new(ColumnData::Integer(vec![7, -3]));
    assert_eq!(c.i64_at(1), Ok(-3));
    assert_eq!(c.f64_at(0), Ok(7.0));
    let r = Column::new(ColumnData::Real(vec![1.5]));
    assert_eq!(r.f64_at(0), Ok(1.5));
    assert!(matches!(r.i64_at(0), Err(BatchError::WrongKind { .. })));
}

#[test]
fn null_bits_are_read_least_significant_first() {
    let c = Column::with_nulls(ColumnData::Integer(vec![0; 10]), &[1, 8]);
    assert_eq!(c.nulls, Some(vec![0b0000_0010, 0b0000_0001]));
    let nulls: Vec<bool> = (0..10).map(|r| c.is_null(r).expect("covered")).collect();
    assert_eq!(
        nulls,
        [
            false, true, false, false, false, false, false, false, true, false
        ]
    );
    assert_eq!(c.check_rows(10), Ok(()));
    let none = Column::new(ColumnData::Integer(vec![1]));
    assert_eq!(none.is_null(1000), Ok(false));
}

#[test]
fn a_short_null_bitmap_is_an_error() {
    let c = Column {
        nulls: Some(vec![0]),
        data: ColumnData::Integer(vec![0; 9]),
    };
    assert_eq!(
        c.is_null(8),
        Err(BatchError::NullsTooShort { row: 8, bytes: 1 })
    );
    assert!(matches!(
        c.check_rows(9),
        Err(BatchError::NullsTooShort { .. })
    ));
}

#[test]
fn bad_offsets_are_errors_not_panics() {
    let past_end = TextColumn {
        data: b"abc".to_vec(),
        offsets: vec![0, 2, 9],
    };
    assert_eq!(past_end.bytes_at(0), Ok(&b"ab"[..]));
    assert!(matches!(
        past_end.bytes_at(1),
        Err(BatchError::BadOffsets { value: 1, .. })
    ));
    let decreasing = TextColumn {
        data: b"abc".to_vec(),
        offsets: vec![0, 3, 1],
    };
    assert!(matches!(
        decreasing.str_at(1),
        Err(BatchError::BadOffsets { .. })
    ));
    let no_offsets = TextColumn::default();
    assert_eq!(no_offsets.len(), 0);
    assert!(no_offsets.bytes_at(0).is_err());
    assert!(past_end.bytes_at(usize::MAX).is_err());
}

#[test]
fn invalid_utf8_is_an_error_not_a_panic() {
    let c = TextColumn {
        data: vec![b'o', b'k', 0xff, 0xfe],
        offsets: vec![0, 2, 4],
    };
    assert_eq!(c.str_at(0), Ok("ok"));
    assert_eq!(c.str_at(1), Err(BatchError::InvalidUtf8 { value: 1 }));
    // An offset splitting a multi-byte character is invalid too.
    let split: TextColumn = ["é"].iter().collect();
    let split = TextColumn {
        offsets: vec![0, 1, 2],
        ..split
    };
    assert!(split.str_at(0).is_err());
}

#[test]
fn dictionary_indices_out_of_range_are_errors() {
    let d = DictColumn {
        values: ["x"].iter().collect(),
        indices: vec![0, 5],
    };
    assert_eq!(d.str_at(0), Ok("x"));
    assert_eq!(
        d.index_at(1),
        Err(BatchError::DictIndexOutOfRange {
            row: 1,
            index: 5,
            values: 1
        })
    );
    assert!(matches!(
        d.index_at(2),
        Err(BatchError::RowOutOfRange { row: 2, len: 2 })
    ));
}

#[test]
fn reading_past_the_last_row_is_an_error() {
    let c = Column::new(ColumnData::Real(vec![1.0]));
    assert_eq!(
        c.f64_at(1),
        Err(BatchError::RowOutOfRange { row: 1, len: 1 })
    );
    assert!(text(&["a"]).str_at(1).is_err());
    let b = Batch {
        rows: 1,
        columns: vec![c],
    };
    assert!(b.column(0).is_ok());
    assert!(matches!(
        b.column(1),
        Err(BatchError::MissingColumn {
            index: 1,
            columns: 1
        })
    ));
}

#[test]
fn a_column_with_the_wrong_number_of_values_fails_the_row_check() {
    let c = text(&["a", "b"]);
    assert_eq!(c.check_rows(2), Ok(()));
    assert_eq!(
        c.check_rows(3),
        Err(BatchError::LengthMismatch { rows: 3, values: 2 })
    );
}

#[test]
fn text_accessors_reject_numeric_columns() {
    let c = Column::new(ColumnData::Integer(vec![1]));
    assert!(matches!(c.str_at(0), Err(BatchError::WrongKind { .. })));
    assert!(matches!(c.bytes_at(0), Err(BatchError::WrongKind { .. })));
    let blob = Column::new(ColumnData::Blob(TextColumn {
        data: vec![0xff],
        offsets: vec![0, 1],
    }));
    assert_eq!(blob.bytes_at(0), Ok(&[0xff][..]));
    assert!(blob.str_at(0).is_err());
}
