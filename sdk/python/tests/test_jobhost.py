"""Native tests of the jobhost Python SDK (no componentize-py needed).

Run from the repository root:
    python3 -m unittest discover -s sdk/python/tests
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import sys
import unittest
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "sdk" / "python"))

import jobhost  # noqa: E402
from jobhost import testing, wire  # noqa: E402
from jobhost.errors import source_error_text  # noqa: E402

FIXTURE = ROOT / "sdk" / "fixtures" / "batches.json"

_KINDS = {
    "integer": wire.ColumnKind.INTEGER,
    "real": wire.ColumnKind.REAL,
    "text": wire.ColumnKind.TEXT,
    "blob": wire.ColumnKind.BLOB,
}


def wit_text(obj: Dict[str, Any]) -> wire.TextColumn:
    return wire.TextColumn(bytes(obj["data"]), list(obj["offsets"]))


def wit_data(obj: Dict[str, Any]) -> wire.ColumnData:
    (case, value), = obj.items()
    if case == "integer":
        return wire.ColumnData_Integer(list(value))
    if case == "real":
        return wire.ColumnData_Real([float(v) for v in value])
    if case == "text":
        return wire.ColumnData_Text(wit_text(value))
    if case == "text-dict":
        return wire.ColumnData_TextDict(wire.DictColumn(wit_text(value["values"]), list(value["indices"])))
    if case == "blob":
        return wire.ColumnData_Blob(wit_text(value))
    raise AssertionError(f"unknown case {case}")


def wit_batch(obj: Dict[str, Any]) -> wire.Batch:
    """A fixture batch in the WIT shape, as componentize-py would hand it
    over (list<u8> as bytes, other lists as lists)."""
    return wire.Batch(obj["rows"], [
        wire.Column(None if c["nulls"] is None else bytes(c["nulls"]), wit_data(c["data"]))
        for c in obj["columns"]
    ])


def column_infos(case: Dict[str, Any]) -> List[jobhost.ColumnInfo]:
    return [jobhost.ColumnInfo(c["name"], jobhost.ColumnKind(c["kind"])) for c in case["columns"]]


def comparable(kind: jobhost.ColumnKind, values: List[Any]) -> List[Any]:
    if kind is jobhost.ColumnKind.BLOB:
        return [None if v is None else v.hex() for v in values]
    return values


def same_floats(a: Optional[float], b: Optional[float]) -> bool:
    """Equal, and the same sign of zero."""
    if a is None or b is None:
        return a is b
    return a == b and math.copysign(1, a) == math.copysign(1, b)


class FixtureTest(unittest.TestCase):
    """Every case of sdk/fixtures/batches.json."""

    cases: List[Dict[str, Any]]

    @classmethod
    def setUpClass(cls) -> None:
        cls.cases = json.loads(FIXTURE.read_text(encoding="utf-8"))["cases"]

    def test_the_fixture_has_good_and_malformed_cases(self) -> None:
        self.assertTrue(any("expect" in c for c in self.cases))
        self.assertTrue(any("error_column" in c for c in self.cases))

    def test_every_good_case_decodes_as_expected(self) -> None:
        for case in self.cases:
            if "expect" not in case:
                continue
            with self.subTest(case=case["name"]):
                infos = column_infos(case)
                batch = jobhost.Batch.from_wit(infos, wit_batch(case["batch"]))
                self.assertEqual(len(batch), case["batch"]["rows"])
                self.assertEqual(batch.len(), case["batch"]["rows"])
                self.assertEqual(batch.columns(), infos)
                self.assertEqual(set(case["expect"]), {i.name for i in infos})
                for info in infos:
                    expect = case["expect"][info.name]
                    got = comparable(info.kind, batch.column(info.name))
                    self.assertEqual(got, expect, info.name)
                    readers: Dict[jobhost.ColumnKind, Callable[[str], List[Any]]] = {
                        jobhost.ColumnKind.INTEGER: batch.integers,
                        jobhost.ColumnKind.REAL: batch.reals,
                        jobhost.ColumnKind.TEXT: batch.texts,
                        jobhost.ColumnKind.BLOB: batch.blobs,
                    }
                    typed = readers[info.kind](info.name)
                    self.assertEqual(comparable(info.kind, typed), expect, info.name)
                    if info.kind is jobhost.ColumnKind.REAL:
                        for g, e in zip(typed, expect):
                            self.assertTrue(same_floats(g, e), (g, e))
                # Row by row, the same values.
                for row in batch.rows():
                    for info in infos:
                        value = row[info.name]
                        self.assertEqual(comparable(info.kind, [value])[0],
                                         case["expect"][info.name][row.index])

    def test_every_malformed_case_fails_naming_its_column(self) -> None:
        for case in self.cases:
            if "error_column" not in case:
                continue
            with self.subTest(case=case["name"]):
                column = case["error_column"]
                with self.assertRaises(jobhost.MalformedBatch) as caught:
                    jobhost.Batch.from_wit(column_infos(case), wit_batch(case["batch"]))
                error = caught.exception
                self.assertEqual(error.column, column)
                self.assertIn(f"`{column}`", str(error))
                self.assertIsInstance(error, jobhost.SourceFailed)
                self.assertEqual(error.kind, "source-failed")

    def test_malformed_cases_name_the_row_where_they_can(self) -> None:
        rows = {
            "text offsets past the data": 1,
            "text offsets decreasing": 1,
            "text that is not UTF-8": 0,
            "dictionary index out of range": 1,
        }
        for case in self.cases:
            if case["name"] in rows:
                with self.subTest(case=case["name"]):
                    with self.assertRaises(jobhost.MalformedBatch) as caught:
                        jobhost.Batch.from_wit(column_infos(case), wit_batch(case["batch"]))
                    self.assertEqual(caught.exception.row, rows[case["name"]])
                    self.assertIn(f"row {rows[case['name']]}", str(caught.exception))

    def test_fixture_batches_decode_from_plain_json_lists_too(self) -> None:
        # Lists where componentize-py would hand over bytes are accepted.
        case = self.cases[0]
        b = case["batch"]
        plain = wire.Batch(b["rows"], [])
        for c in b["columns"]:
            data = wit_data(c["data"])
            if isinstance(data, (wire.ColumnData_Text, wire.ColumnData_Blob)):
                data.value.data = list(data.value.data)  # type: ignore[assignment]
            plain.columns.append(wire.Column(c["nulls"], data))
        batch = jobhost.Batch.from_wit(column_infos(case), plain)
        self.assertEqual(batch.texts("region"), case["expect"]["region"])


class BatchTest(unittest.TestCase):
    """Decoding details and typed access."""

    def test_nulls_across_many_bytes_and_a_partial_last_byte(self) -> None:
        values = [None if i % 7 == 0 or i == 20 else i for i in range(21)]
        batch = testing.batch(n=values)
        self.assertEqual(batch.integers("n"), values)

    def test_bits_past_the_last_row_are_ignored(self) -> None:
        info = [jobhost.ColumnInfo("n", jobhost.ColumnKind.INTEGER)]
        wb = wire.Batch(3, [wire.Column(bytes([0b1111_1010]), wire.ColumnData_Integer([1, 2, 3]))])
        self.assertEqual(jobhost.Batch.from_wit(info, wb).integers("n"), [1, None, 3])

    def test_a_zero_bitmap_means_no_nulls_and_keeps_the_list(self) -> None:
        info = [jobhost.ColumnInfo("n", jobhost.ColumnKind.INTEGER)]
        values = [1, 2, 3]
        wb = wire.Batch(3, [wire.Column(b"\0", wire.ColumnData_Integer(values))])
        self.assertIs(jobhost.Batch.from_wit(info, wb).integers("n"), values)

    def test_non_ascii_text_and_dictionary_text(self) -> None:
        values = ["süd", None, "日本", "", "north", "süd"]
        plain = testing.BatchBuilder().texts("r", values).build()
        dictionary = testing.BatchBuilder().texts("r", values, dictionary=True).build()
        self.assertEqual(plain.texts("r"), values)
        self.assertEqual(dictionary.texts("r"), values)

    def test_dictionary_rows_share_their_string(self) -> None:
        batch = testing.BatchBuilder().texts("r", ["north", "south", "north"], dictionary=True).build()
        texts = batch.texts("r")
        self.assertIs(texts[0], texts[2])

    def test_a_text_value_split_inside_a_character_is_not_utf8(self) -> None:
        info = [jobhost.ColumnInfo("t", jobhost.ColumnKind.TEXT)]
        data = "ü".encode()  # two bytes
        wb = wire.Batch(2, [wire.Column(None, wire.ColumnData_Text(wire.TextColumn(data, [0, 1, 2])))])
        with self.assertRaises(jobhost.MalformedBatch) as caught:
            jobhost.Batch.from_wit(info, wb)
        self.assertEqual((caught.exception.column, caught.exception.row), ("t", 0))

    def test_a_bad_dictionary_entry_names_the_column(self) -> None:
        info = [jobhost.ColumnInfo("d", jobhost.ColumnKind.TEXT)]
        values = wire.TextColumn(b"\xff", [0, 1])
        wb = wire.Batch(1, [wire.Column(None, wire.ColumnData_TextDict(wire.DictColumn(values, [0])))])
        with self.assertRaises(jobhost.MalformedBatch) as caught:
            jobhost.Batch.from_wit(info, wb)
        self.assertEqual(caught.exception.column, "d")
        self.assertIn("dictionary entry 0", str(caught.exception))

    def test_a_batch_with_another_number_of_columns_is_malformed(self) -> None:
        info = [jobhost.ColumnInfo("a", jobhost.ColumnKind.INTEGER),
                jobhost.ColumnInfo("b", jobhost.ColumnKind.INTEGER)]
        wb = wire.Batch(1, [wire.Column(None, wire.ColumnData_Integer([1]))])
        with self.assertRaises(jobhost.MalformedBatch):
            jobhost.Batch.from_wit(info, wb)

    def test_offsets_that_do_not_start_at_zero(self) -> None:
        info = [jobhost.ColumnInfo("t", jobhost.ColumnKind.TEXT)]
        wb = wire.Batch(1, [wire.Column(None, wire.ColumnData_Text(wire.TextColumn(b"ab", [1, 2])))])
        with self.assertRaises(jobhost.MalformedBatch) as caught:
            jobhost.Batch.from_wit(info, wb)
        self.assertEqual(caught.exception.column, "t")

    def test_blob_data_of_a_text_column_is_another_kind(self) -> None:
        info = [jobhost.ColumnInfo("t", jobhost.ColumnKind.TEXT)]
        wb = wire.Batch(1, [wire.Column(None, wire.ColumnData_Blob(wire.TextColumn(b"a", [0, 1])))])
        with self.assertRaises(jobhost.MalformedBatch) as caught:
            jobhost.Batch.from_wit(info, wb)
        self.assertIn("declared text", str(caught.exception))

    def test_unknown_columns_and_wrong_kinds_are_programming_errors_not_retried(self) -> None:
        batch = testing.batch(qty=[1, 2], region=["n", "s"])
        with self.assertRaises(jobhost.ColumnNotFound) as caught:
            batch.integers("nope")
        self.assertIn("`nope`", str(caught.exception))
        self.assertIsInstance(caught.exception, KeyError)
        self.assertFalse(caught.exception.retryable)
        # Not a jobhost.Error: out of `run`, it traps (never retried)
        # instead of becoming the retried WIT `other`.
        self.assertNotIsInstance(caught.exception, jobhost.Error)
        with self.assertRaises(jobhost.WrongKind) as wrong:
            batch.texts("qty")
        self.assertIn("`qty` holds integer values, not text", str(wrong.exception))
        self.assertIsInstance(wrong.exception, TypeError)
        self.assertIsInstance(wrong.exception, jobhost.ProgrammingError)
        self.assertNotIsInstance(caught.exception, jobhost.Error)
        with self.assertRaises(jobhost.WrongKind):
            next(batch.rows()).integer("region")

    def test_columns_by_position(self) -> None:
        batch = testing.batch(qty=[1, 2], region=["n", "s"])
        self.assertEqual(batch.integers(0), [1, 2])
        self.assertEqual(batch.column(1), ["n", "s"])
        self.assertEqual(batch.kind(1), jobhost.ColumnKind.TEXT)
        with self.assertRaises(jobhost.ColumnNotFound):
            batch.column(2)

    def test_decoding_a_large_batch_is_bulk(self) -> None:
        # Not a benchmark: a sanity bound that catches per-byte decoding.
        import time

        n = 100_000
        b = testing.BatchBuilder()
        b.integers("ts", range(n)).texts("region", [("north", "south", "east")[i % 3] for i in range(n)],
                                         dictionary=True)
        b.texts("product", [f"p{i}" for i in range(n)]).reals("amount", [i / 4 for i in range(n)])
        columns, wit = b.columns(), b.wit()
        start = time.perf_counter()
        batch = jobhost.Batch.from_wit(columns, wit)
        elapsed = time.perf_counter() - start
        self.assertEqual(batch.texts("product")[-1], f"p{n - 1}")
        self.assertLess(elapsed, 2.0)


class WordingTest(unittest.TestCase):
    """Malformed batches are worded as the Rust SDK words them, and name the
    source row (counted across batches)."""

    def malformed(self, columns: List[jobhost.ColumnInfo], wit_batch: wire.Batch,
                  first_row: int = 0) -> jobhost.MalformedBatch:
        with self.assertRaises(jobhost.MalformedBatch) as caught:
            jobhost.Batch.from_wit(columns, wit_batch, first_row)
        return caught.exception

    def text_batch(self, data: bytes, offsets: List[int], rows: Optional[int] = None) -> wire.Batch:
        rows = len(offsets) - 1 if rows is None else rows
        return wire.Batch(rows, [wire.Column(None, wire.ColumnData_Text(wire.TextColumn(data, offsets)))])

    T = [jobhost.ColumnInfo("product", jobhost.ColumnKind.TEXT)]

    def test_offsets_past_the_data(self) -> None:
        e = self.malformed(self.T, self.text_batch(b"widget", [0, 6, 60]))
        self.assertEqual(str(e), "malformed batch: column `product`, row 1: offsets 6..60 are past the 6 bytes of data")

    def test_rows_are_source_rows(self) -> None:
        e = self.malformed(self.T, self.text_batch(b"widget", [0, 6, 60]), first_row=8192)
        self.assertEqual(e.row, 8193)
        self.assertIn("row 8193:", str(e))

    def test_decreasing_dictionary_offsets_name_the_entry(self) -> None:
        values = wire.TextColumn(b"northsouth", [0, 5, 3])
        b = wire.Batch(1, [wire.Column(None, wire.ColumnData_TextDict(wire.DictColumn(values, [0])))])
        e = self.malformed([jobhost.ColumnInfo("region", jobhost.ColumnKind.TEXT)], b)
        self.assertEqual(str(e), "malformed batch: column `region`, dictionary entry 1: offsets 5..3 decrease")
        self.assertEqual((e.column, e.row, e.entry), ("region", None, 1))

    def test_utf8(self) -> None:
        e = self.malformed(self.T, self.text_batch(b"\xc3", [0, 1]))
        self.assertEqual(str(e), "malformed batch: column `product`, row 0: not valid UTF-8")
        e = self.malformed(self.T, self.text_batch("aü".encode(), [0, 2, 3]))
        self.assertEqual(str(e), "malformed batch: column `product`, row 0: not valid UTF-8 (offset 2 splits a character)")

    def test_counts_bitmaps_kinds_and_first_offsets(self) -> None:
        i = [jobhost.ColumnInfo("amount", jobhost.ColumnKind.REAL)]
        e = self.malformed(i, wire.Batch(6, [wire.Column(None, wire.ColumnData_Real([1.0]))]))
        self.assertEqual(str(e), "malformed batch: column `amount`: 1 values for 6 rows")
        e = self.malformed(i, wire.Batch(6, [wire.Column(b"", wire.ColumnData_Real([1.0] * 6))]))
        self.assertEqual(str(e), "malformed batch: column `amount`: the NULL bitmap of 0 bytes does not cover 6 rows")
        e = self.malformed(i, wire.Batch(1, [wire.Column(None, wire.ColumnData_Integer([1]))]))
        self.assertEqual(str(e), "malformed batch: column `amount`: declared real, but the batch holds integer data")
        e = self.malformed(self.T, self.text_batch(b"ab", [1, 2]))
        self.assertEqual(str(e), "malformed batch: column `product`, row 0: the first offset is 1, not 0")
        e = self.malformed(self.T, self.text_batch(b"", [], rows=1))
        self.assertEqual(str(e), "malformed batch: column `product`: no offsets (there is one more offset than values)")
        d = wire.TextColumn(b"a", [0, 1])
        b = wire.Batch(1, [wire.Column(None, wire.ColumnData_TextDict(wire.DictColumn(d, [7])))])
        e = self.malformed(self.T, b)
        self.assertEqual(str(e), "malformed batch: column `product`, row 0: dictionary index 7, but the dictionary holds 1 values")

    def test_a_null_rows_dictionary_index_may_point_anywhere(self) -> None:
        d = wire.TextColumn(b"north", [0, 5])
        b = wire.Batch(2, [wire.Column(bytes([0b10]), wire.ColumnData_TextDict(wire.DictColumn(d, [0, 99])))])
        self.assertEqual(jobhost.Batch.from_wit(self.T, b).texts("product"), ["north", None])

    def test_missing_and_extra_columns(self) -> None:
        cols = [jobhost.ColumnInfo("ts", jobhost.ColumnKind.INTEGER), jobhost.ColumnInfo("region", jobhost.ColumnKind.TEXT)]
        one = wire.Batch(1, [wire.Column(None, wire.ColumnData_Integer([1]))])
        e = self.malformed(cols, one)
        self.assertEqual(str(e), "malformed batch: column `region` is missing: the batch has 1 columns, the source declares 2")
        self.assertEqual(e.column, "region")
        e = self.malformed(cols[:1], wire.Batch(1, one.columns * 2))
        self.assertEqual(str(e), "malformed batch: the batch has 2 columns, the source declares 1 (`ts`)")

    def test_unknown_column_lists_the_columns(self) -> None:
        with self.assertRaises(jobhost.ColumnNotFound) as caught:
            testing.batch(qty=[1], region=["n"]).column("nope")
        self.assertEqual(str(caught.exception), "the batch has no column `nope` (its columns: `qty`, `region`)")

    def test_the_source_numbers_rows_across_batches(self) -> None:
        bad = wire.Batch(2, [wire.Column(None, wire.ColumnData_Text(wire.TextColumn(b"a\xff", [0, 1, 2])))])
        host = testing.Host(batches=[testing.builder(t=["x", "y", "z"]), bad])
        with jobhost._host.install(host):
            source = jobhost.open()
            batches = source.batches()
            self.assertEqual(len(next(batches)), 3)
            self.assertEqual(source.rows_read(), 3)
            with self.assertRaises(jobhost.MalformedBatch) as caught:
                next(batches)
            self.assertEqual(caught.exception.row, 4)
            self.assertTrue(source.closed, "a malformed batch closes the source")


class MoreTest(unittest.TestCase):
    """has_nulls, retryable, context."""

    def test_has_nulls(self) -> None:
        b = testing.batch(a=[1, None], b=[1, 2])
        self.assertEqual((b.has_nulls("a"), b.has_nulls("b")), (True, False))
        info = [jobhost.ColumnInfo("n", jobhost.ColumnKind.INTEGER)]
        zero = jobhost.Batch.from_wit(info, wire.Batch(2, [wire.Column(b"\0", wire.ColumnData_Integer([1, 2]))]))
        self.assertFalse(zero.has_nulls("n"))

    def test_retryable_and_context(self) -> None:
        self.assertFalse(jobhost.InvalidData("x").retryable)
        self.assertTrue(jobhost.SourceFailed("x").retryable)
        self.assertTrue(jobhost.ReportError("x").retryable)
        e = jobhost.SendFailed("unknown destination `a`", "unknown-destination", "a").context("staging `a` failed")
        self.assertIsInstance(e, jobhost.SendFailed)
        self.assertEqual(str(e), "staging `a` failed: unknown destination `a`")
        self.assertEqual(e.case, "unknown-destination")
        invalid = jobhost.InvalidData("bad").context("row 3")
        self.assertEqual((type(invalid), str(invalid), invalid.kind),
                         (jobhost.InvalidData, "row 3: bad", "invalid-data"))


class TestingTest(unittest.TestCase):
    """jobhost.testing."""

    def test_kinds_are_inferred(self) -> None:
        batch = testing.batch(qty=[1, None], price=[1, 2.5], region=["n", None], raw=[b"\x00", None])
        self.assertEqual([c.kind for c in batch.columns()], [
            jobhost.ColumnKind.INTEGER, jobhost.ColumnKind.REAL, jobhost.ColumnKind.TEXT, jobhost.ColumnKind.BLOB])
        self.assertEqual(batch.reals("price"), [1.0, 2.5])
        self.assertEqual(batch.blobs("raw"), [b"\x00", None])

    def test_an_all_null_or_mixed_column_needs_the_builder(self) -> None:
        with self.assertRaises(ValueError):
            testing.batch(x=[None, None])
        with self.assertRaises(TypeError):
            testing.batch(x=[1, "a"])
        b = testing.BatchBuilder().texts("x", [None, None]).build()
        self.assertEqual(b.texts("x"), [None, None])

    def test_the_builder_shape(self) -> None:
        batch = (testing.BatchBuilder().integers("qty", [1, None]).texts("region", ["n", None])
                 .reals("amount", [2.5, None]).blobs("raw", [b"", None]).build())
        self.assertEqual(batch.to_dict(), {"qty": [1, None], "region": ["n", None],
                                           "amount": [2.5, None], "raw": [b"", None]})
        with self.assertRaises(ValueError):
            testing.BatchBuilder().integers("a", [1]).integers("b", [1, 2])

    def test_rows(self) -> None:
        batch = testing.batch(qty=[3, None], region=["n", "s"], amount=[1.5, 2.0])
        rows = list(batch.rows())
        self.assertEqual([r.index for r in rows], [0, 1])
        self.assertEqual(rows[0]["qty"], 3)
        self.assertIsNone(rows[1]["qty"])
        self.assertEqual(rows[1].text("region"), "s")
        self.assertEqual(rows[0].real("amount"), 1.5)
        self.assertEqual(rows[0].integer("qty"), 3)
        self.assertEqual(rows[0].get("missing", "d"), "d")
        self.assertEqual(rows[0].as_dict(), {"qty": 3, "region": "n", "amount": 1.5})
        self.assertEqual(rows[0].keys(), ["qty", "region", "amount"])
        self.assertEqual(batch.row(-1).index, 1)
        with self.assertRaises(jobhost.ColumnNotFound):
            rows[0]["missing"]


class ByStructureTest(unittest.TestCase):
    """A WIT variant's case is told by its class, not its class's name: a
    class of the same name that is not the binding's is refused, and one
    under another name that is (a subclass, as a re-export or a renamed
    generated class would be) is read as its case."""

    INFO = [jobhost.ColumnInfo("n", jobhost.ColumnKind.INTEGER)]

    def test_a_lookalike_of_the_same_name_is_not_column_data(self) -> None:
        @dataclass
        class ColumnData_Integer:  # noqa: N801 - the generated class's name
            value: List[int]

        wb = wire.Batch(2, [wire.Column(None, ColumnData_Integer([1, 2]))])
        with self.assertRaises(jobhost.MalformedBatch) as caught:
            jobhost.Batch.from_wit(self.INFO, wb)
        self.assertEqual(str(caught.exception),
                         "malformed batch: column `n`: declared integer, but the batch holds "
                         "ColumnData_Integer data")

    def test_column_data_of_another_class_name_decodes_by_its_class(self) -> None:
        class Integers(wire.ColumnData_Integer):
            pass

        class Words(wire.ColumnData_TextDict):
            pass

        info = self.INFO + [jobhost.ColumnInfo("w", jobhost.ColumnKind.TEXT)]
        words = Words(wire.DictColumn(wire.TextColumn(b"ab", [0, 1, 2]), [1, 0]))
        wb = wire.Batch(2, [wire.Column(None, Integers([1, 2])), wire.Column(b"\x02", words)])
        batch = jobhost.Batch.from_wit(info, wb)
        self.assertEqual((batch.integers("n"), batch.texts("w")), ([1, 2], ["b", None]))

    def test_errors_of_another_class_name_keep_their_case(self) -> None:
        class Big(wire.SendError_TooLarge):
            pass

        class Twice(wire.SourceError_InvalidState):
            pass

        @dataclass
        class SendError_TooLarge:  # noqa: N801 - the generated class's name
            value: int

        sent = jobhost.SendFailed.from_wit(Big(3))
        self.assertEqual((sent.case, sent.value, str(sent)), ("too-large", 3, "body is larger than 3 bytes"))
        lookalike = jobhost.SendFailed.from_wit(SendError_TooLarge(3))
        self.assertEqual(lookalike.case, "unknown")
        self.assertEqual(source_error_text(Twice("a cursor is open")), "invalid state: a cursor is open")
        self.assertEqual(run_error_when_open_fails(Twice("twice")), ("source-failed", "invalid state: twice"))


def run_error_when_open_fails(error: object) -> Optional[Tuple[str, str]]:
    """The run error a report that opens the source gets when `open`
    fails with `error`."""
    return testing.Host(source_error=error, open_error=True).run(Counting).error


class ValuesTest(unittest.TestCase):
    """Context, Instant, Output."""

    def test_instant(self) -> None:
        i = jobhost.Instant(1_794_143_100, 250_000_000)
        self.assertEqual(i.unix_seconds(), 1_794_143_100)
        self.assertEqual(i.unix_millis(), 1_794_143_100_250)
        self.assertEqual(i.datetime(), dt.datetime(2026, 11, 8, 13, 5, 0, 250_000, tzinfo=dt.timezone.utc))
        self.assertEqual(jobhost.Instant(-1, 500_000_000).unix_millis(), -500)
        self.assertEqual(jobhost.Instant(-1).datetime(), dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=dt.timezone.utc))

    def test_context_from_wit_and_params(self) -> None:
        ctx = testing.context("daily", "2026-11-08", destinations=["b", "a"],
                              params={"top": "5", "destination": "a"}, cursor="17")
        back = jobhost.Context.from_wit(testing.wit_context(ctx))
        self.assertEqual(back, ctx)
        self.assertEqual(back.window.key, "daily:2026-11-08")
        self.assertEqual(back.destinations, ("a", "b"))
        self.assertEqual(back.param("top"), "5")
        self.assertIsNone(back.param("nope"))
        self.assertEqual(back.cursor, "17")
        self.assertEqual(back.window.start.datetime().isoformat(), "2026-11-08T00:00:00+00:00")
        with self.assertRaises(TypeError):
            back.params["x"] = "y"  # type: ignore[index]

    def test_output(self) -> None:
        out = jobhost.Output("s")
        self.assertIsNone(out.cursor)
        self.assertEqual(out.with_cursor("c"), jobhost.Output("s", "c"))
        self.assertEqual(jobhost.Output.new("s"), out)


class Counting(jobhost.Report):
    """Counts rows and sums `qty`; its behaviour is chosen by params."""

    def __init__(self) -> None:
        self.seen: Optional[Tuple[int, int]] = None

    def run(self, ctx: jobhost.Context) -> jobhost.Output:
        mode = ctx.param("mode")
        if mode == "invalid":
            raise jobhost.InvalidData("region is missing")
        if mode == "source":
            raise jobhost.SourceFailed("no luck")
        if mode == "other":
            raise jobhost.ReportError("something else")
        if mode == "base":
            raise jobhost.Error("the base class")
        if mode == "boom":
            raise ValueError("bad row 7: amount is negative")
        if mode == "no-column":
            with jobhost.open() as source:
                for batch in source.batches():
                    batch.reals("amount")
        if mode == "str":
            return "just text"  # type: ignore[return-value]
        if mode == "bad-return":
            return 42  # type: ignore[return-value]
        rows = total = 0
        with jobhost.open() as source:
            self.columns = source.columns()
            for batch in source.batches():
                rows += len(batch)
                total += sum(q for q in batch.integers("qty") if q is not None)
        for d in ctx.destinations:
            jobhost.send(d, f"{rows}/{total}", "text/plain")
        jobhost.log.info(f"{rows} rows")
        self.seen = (rows, total)
        return jobhost.Output(f"{rows} rows, {total} units").with_cursor(str(rows))

    def describe(self, ctx: jobhost.Context, output: jobhost.Output) -> str:
        return f"describe {output.summary} after {self.seen}"


class ExportTest(unittest.TestCase):
    """The export path (as componentize-py calls it) and error mapping."""

    def host(self, **kw: Any) -> testing.Host:
        return testing.Host(batches=[testing.builder(qty=[1, None, 3]), testing.builder(qty=[4])],
                            destinations=["digest"], **kw)

    def test_a_run_reads_sends_logs_and_describes_on_the_same_instance(self) -> None:
        result = self.host().run(Counting)
        self.assertIsNone(result.error)
        self.assertEqual(result.output, jobhost.Output("4 rows, 8 units", "4"))
        self.assertEqual([(s.destination, s.body, s.content_type) for s in result.sent],
                         [("digest", b"4/8", "text/plain")])
        self.assertEqual(result.logs, [("info", "4 rows")])
        self.assertEqual(result.prompt, "describe 4 rows, 8 units after (4, 8)")

    def test_errors_map_to_their_run_error_case(self) -> None:
        cases = {
            "invalid": ("invalid-data", "region is missing"),
            "source": ("source-failed", "no luck"),
            "other": ("other", "something else"),
            "base": ("other", "the base class"),
        }
        for mode, expected in cases.items():
            with self.subTest(mode=mode):
                result = self.host().run(Counting, params={"mode": mode})
                self.assertEqual(result.error, expected)
                self.assertIsNone(result.output)
                self.assertIsNone(result.prompt)

    def test_the_export_raises_err_with_the_wit_case(self) -> None:
        world = jobhost.export(Counting)
        wit_ctx = testing.wit_context(testing.context(params={"mode": "invalid"}))
        with self.assertRaises(wire.Err) as caught:
            world().run(wit_ctx)
        self.assertEqual(caught.exception.value, wire.RunError_InvalidData("region is missing"))

    def test_other_exceptions_are_left_uncaught(self) -> None:
        with self.assertRaises(ValueError) as caught:
            self.host().run(Counting, params={"mode": "boom"})
        self.assertEqual(str(caught.exception), "bad row 7: amount is negative")
        with self.assertRaises(TypeError):
            self.host().run(Counting, params={"mode": "bad-return"})

    def test_a_column_the_batch_lacks_is_uncaught_not_a_run_error(self) -> None:
        # A run error would be WIT `other`, which the host retries.
        with self.assertRaises(jobhost.ColumnNotFound) as caught:
            self.host().run(Counting, params={"mode": "no-column"})
        self.assertEqual(str(caught.exception), "the batch has no column `amount` (its columns: `qty`)")

    def test_a_str_is_an_output(self) -> None:
        self.assertEqual(self.host().run(Counting, params={"mode": "str"}).output, jobhost.Output("just text"))

    def test_an_exported_class_runs_too_and_keeps_one_instance(self) -> None:
        world = jobhost.export(Counting)
        result = self.host().run(world)
        self.assertEqual(result.prompt, "describe 4 rows, 8 units after (4, 8)")
        # componentize-py makes one WitWorld instance per export (`run`,
        # `describe`): they share the report instance.
        world = jobhost.export(Counting)
        with jobhost._host.install(self.host()):
            wit_ctx = testing.wit_context(testing.context(destinations=["digest"]))
            report = world().run(wit_ctx)
            prompt = world().describe(wit_ctx, report)
        self.assertEqual(report, wire.Report("4 rows, 8 units", "4"))
        self.assertEqual(prompt, "describe 4 rows, 8 units after (4, 8)")

    def test_source_errors_are_source_failed_with_the_reference_wording(self) -> None:
        cases = [
            (wire.SourceError_NotConfigured(), "the job declares no data source"),
            (wire.SourceError_QueryFailed("no such table"), "query failed: no such table"),
            (wire.SourceError_TypeMismatch("column 1"), "type mismatch: column 1"),
            (wire.SourceError_InvalidState("twice"), "invalid state: twice"),
            (wire.SourceError_Other("x"), "x"),
        ]
        for error, text in cases:
            with self.subTest(text=text):
                self.assertEqual(self.host(source_error=error, open_error=True).run(Counting).error,
                                 ("source-failed", text))
                self.assertEqual(self.host(source_error=error).run(Counting).error, ("source-failed", text))

    def test_send_errors_say_which_case(self) -> None:
        host = testing.Host(destinations=["a"], max_message_bytes=3, max_messages=1)
        cases = [
            (("zzz", b"x", "text/plain"), "unknown-destination", "zzz", "unknown destination `zzz`"),
            (("a", b"long", "text/plain"), "too-large", 3, "body is larger than 3 bytes"),
            (("a", b"x", "nope"), "invalid-content-type", "nope", "invalid content type `nope`"),
        ]
        with jobhost._host.install(host):
            for args, case, value, text in cases:
                with self.subTest(case=case):
                    with self.assertRaises(jobhost.SendFailed) as caught:
                        jobhost.send(*args)
                    self.assertEqual((caught.exception.case, caught.exception.value, str(caught.exception)),
                                     (case, value, text))
                    self.assertEqual(caught.exception.kind, "other")
            self.assertEqual(jobhost.send("a", "ü", "text/plain"), 1)
            self.assertEqual(host._result.sent[0].body, "ü".encode())
            with self.assertRaises(jobhost.SendFailed) as caught:
                jobhost.send("a", bytearray(b"x"), "text/plain")
            self.assertEqual(str(caught.exception), "the run already staged the maximum of 1 messages")

    def test_the_source_is_closed_after_its_batches(self) -> None:
        host = self.host()
        with jobhost._host.install(host):
            source = jobhost.open()
            self.assertEqual([c.name for c in source.columns()], ["qty"])
            self.assertEqual([len(b) for b in source.batches()], [3, 1])
            self.assertTrue(source.closed)
            source.close()
            # A second open works once the first is closed.
            with jobhost.open() as again:
                self.assertEqual(len(list(again.batches_of(1))), 2)
        with self.assertRaises(ValueError):
            jobhost.Source.batches_of(source, -1)

    def test_host_calls_outside_a_component_fail_clearly(self) -> None:
        if jobhost.IN_COMPONENT:
            self.skipTest("inside a component")
        with self.assertRaises(jobhost.ReportError) as caught:
            jobhost.open()
        self.assertIn("jobhost.testing.Host", str(caught.exception))
        with self.assertRaises(jobhost.ReportError):
            jobhost.send("d", b"x", "text/plain")



class NamesTest(unittest.TestCase):
    def test_a_star_import_does_not_shadow_the_builtin_open(self) -> None:
        import builtins

        names: Dict[str, Any] = {}
        exec("from jobhost import *", names)
        self.assertIs(names.get("open", builtins.open), builtins.open)
        # The source is still opened as documented: jobhost.open().
        self.assertTrue(callable(jobhost.open))


if __name__ == "__main__":
    unittest.main()
