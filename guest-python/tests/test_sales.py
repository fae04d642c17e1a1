"""Native tests of the Python daily sales digest, ported from the Rust
reference's unit tests (guest-report/src/digest/tests.rs, format.rs): the
expected texts are the reference's own.

Run from the repository root:
    python3 -m unittest discover -s guest-python/tests
"""

from __future__ import annotations

import json
import math
import sys
import unittest
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "guest-python"), str(ROOT / "sdk" / "python")]

import jobhost  # noqa: E402
from jobhost import testing  # noqa: E402

import app  # noqa: E402
from sales import digest as d  # noqa: E402
from sales import format as f  # noqa: E402
from sales.summary import Summary, WindowInfo  # noqa: E402

DAY = 1_794_096_000  # 2026-11-08T00:00:00Z

SALES = [
    (DAY + 47_100, "north", "widget", 2, 20.0),
    (DAY + 3_600, "south", "gadget", 1, 15.5),
    (DAY + 7_200, "north", "gizmo", 5, 100.25),
    (DAY + 50_000, "east", "widget", 1, 10.0),
    (DAY + 60, "south", "widget", 3, 30.0),
    (DAY + 86_399, "north", "gadget", 1, 4.75),
]

COLUMNS = ["ts", "region", "product", "quantity", "amount"]


Sale = Tuple[Any, ...]
"""A row of the sample query: ts, region, product, quantity, amount (any
of them None, or of another type, where a test needs it)."""


def builder(rows: Sequence[Sale], dictionary: bool = False,
            nulls: Optional[Dict[str, Iterable[int]]] = None) -> testing.BatchBuilder:
    """A batch of the sample query's columns; `nulls` maps a column to the
    rows that are NULL in it."""
    nulls = nulls or {}
    cols = {c: [r[i] for r in rows] for i, c in enumerate(COLUMNS)}
    for c, null_rows in nulls.items():
        for i in null_rows:
            cols[c][i] = None
    return (testing.BatchBuilder().integers("ts", cols["ts"])
            .texts("region", cols["region"], dictionary=dictionary)
            .texts("product", cols["product"], dictionary=dictionary)
            .integers("quantity", cols["quantity"]).reals("amount", cols["amount"]))


def window() -> WindowInfo:
    return WindowInfo("daily-report:2026-11-08", "2026-11-08", "Europe/Berlin")


def summarize(batches: List[jobhost.Batch], top: Optional[int] = None) -> Summary:
    digest = d.Digest(batches[0].columns() if batches else builder(SALES).columns())
    for b in batches:
        digest.add_batch(b)
    return digest.finish(window(), top)


def batch(rows: Sequence[Sale], dictionary: bool = False,
          nulls: Optional[Dict[str, Iterable[int]]] = None) -> jobhost.Batch:
    return builder(rows, dictionary, nulls).build()


class DigestTest(unittest.TestCase):

    def test_the_digest_renders_as_the_documented_json(self) -> None:
        expected = (
            '{"window":{"key":"daily-report:2026-11-08","label":"2026-11-08","timezone":"Europe/Berlin"},'
            '"totals":{"orders":6,"units":13,"revenue":180.50,"average_order":30.08,"min_order":4.75,"max_order":100.25,'
            '"first_sale":"2026-11-08T00:01:00Z","last_sale":"2026-11-08T23:59:59Z"},"skipped_rows":0,'
            '"regions":[{"name":"north","orders":3,"units":8,"revenue":125.00,"min_order":4.75,"max_order":100.25},'
            '{"name":"south","orders":2,"units":4,"revenue":45.50,"min_order":15.50,"max_order":30.00},'
            '{"name":"east","orders":1,"units":1,"revenue":10.00,"min_order":10.00,"max_order":10.00}],'
            '"products":[{"name":"gizmo","orders":1,"units":5,"revenue":100.25,"min_order":100.25,"max_order":100.25},'
            '{"name":"widget","orders":3,"units":6,"revenue":60.00,"min_order":10.00,"max_order":30.00},'
            '{"name":"gadget","orders":2,"units":2,"revenue":20.25,"min_order":4.75,"max_order":15.50}],'
            '"product_count":3}'
        )
        self.assertEqual(summarize([batch(SALES)]).to_json(), expected)
        self.assertEqual(json.loads(expected)["totals"]["revenue"], 180.5)

    def test_dictionary_plain_and_split_batches_give_the_same_digest(self) -> None:
        plain = summarize([batch(SALES)]).to_json()
        self.assertEqual(summarize([batch(SALES, True)]).to_json(), plain)
        self.assertEqual(summarize([batch(SALES[:2], True), batch(SALES[2:])]).to_json(), plain)
        self.assertEqual(summarize([batch([r]) for r in SALES]).to_json(), plain)

    def test_the_prompt_is_an_instruction_then_the_figures(self) -> None:
        s = summarize([batch(SALES)])
        instruction, rest = s.to_prompt().split("\n\n", 1)
        self.assertIn("at most three sentences", instruction)
        self.assertIn("do not invent", instruction)
        self.assertTrue(rest.startswith("Window: daily-report:2026-11-08 (2026-11-08, time zone Europe/Berlin)"))
        self.assertEqual(rest.splitlines()[-1], s.to_json())
        self.assertTrue(summarize([]).to_prompt().startswith("There were no sales"))

    def test_rows_with_a_null_in_any_required_column_are_skipped(self) -> None:
        s = summarize([batch(SALES, nulls={c: [i] for i, c in enumerate(COLUMNS)})])
        self.assertEqual((s.skipped_rows, s.totals.orders, s.totals.revenue), (5, 1, 4.75))
        self.assertEqual((len(s.regions), len(s.products)), (1, 1))
        self.assertIn('"skipped_rows":5', s.to_json())
        self.assertTrue(s.to_text().endswith(" 5 rows skipped for NULL values."))

    def test_integer_amounts_are_widened(self) -> None:
        b = (testing.BatchBuilder().integers("ts", [DAY, DAY]).texts("region", ["n", "s"])
             .texts("product", ["p", "p"]).integers("quantity", [1, 1]).integers("amount", [20, 15]).build())
        digest = d.Digest(b.columns())
        digest.add_batch(b)
        s = digest.finish(window(), None)
        self.assertEqual((s.totals.revenue, s.totals.max_order), (35.0, 20.0))

    def test_columns_are_found_by_name_in_any_case_and_order(self) -> None:
        b = (testing.BatchBuilder().reals("AMOUNT", [9.99]).integers("id", [1]).texts("Product", ["widget"])
             .texts("Region", ["north"], dictionary=True).integers("Quantity", [3]).integers("TS", [DAY]).build())
        digest = d.Digest(b.columns())
        digest.add_batch(b)
        s = digest.finish(window(), None)
        self.assertEqual((s.regions[0].name, s.products[0].name, s.totals.units, s.totals.revenue),
                         ("north", "widget", 3, 9.99))

    def test_column_errors_are_invalid_data_naming_the_column(self) -> None:
        cols = builder(SALES).columns()
        with self.assertRaises(jobhost.InvalidData) as caught:
            d.Digest(cols[:3] + cols[4:])
        self.assertEqual(str(caught.exception), "the source has no column `quantity`")
        with self.assertRaises(jobhost.InvalidData) as caught:
            d.Digest(cols + [jobhost.ColumnInfo("Ts", jobhost.ColumnKind.INTEGER)])
        self.assertEqual(str(caught.exception), "the source has more than one column `ts`")
        wrong = list(cols)
        wrong[1] = jobhost.ColumnInfo("region", jobhost.ColumnKind.INTEGER)
        with self.assertRaises(jobhost.InvalidData) as caught:
            d.Digest(wrong)
        self.assertEqual(str(caught.exception), "column `region` holds integer values, expected text")
        # Only ASCII letters fold, as Rust's `eq_ignore_ascii_case`: fullwidth
        # `ＴＳ` is not `ts`, and the Kelvin sign is no `k`.
        integer = (jobhost.ColumnKind.INTEGER,)
        self.assertEqual(d._find_column([jobhost.ColumnInfo("Ts", jobhost.ColumnKind.INTEGER)], "ts", integer, "integer"), 0)
        for odd in ("\uff34\uff33", "t\u0455"):
            with self.assertRaises(jobhost.InvalidData):
                d._find_column([jobhost.ColumnInfo(odd, jobhost.ColumnKind.INTEGER)], "ts", integer, "integer")
        self.assertNotEqual("\u212a".lower(), "\u212a")  # Python would fold it; the digest does not

    def test_errors_name_the_window_row(self) -> None:
        digest = d.Digest(builder(SALES).columns())
        digest.add_batch(batch(SALES))
        with self.assertRaises(jobhost.InvalidData) as caught:
            digest.add_batch(batch([(DAY, "north", "widget", 1, 1.0), (DAY, "north", "widget", 1, math.nan)]))
        self.assertEqual(str(caught.exception), "column `amount` at row 7: amount NaN is not a finite number")
        digest = d.Digest(builder(SALES).columns())
        with self.assertRaises(jobhost.InvalidData) as caught:
            digest.add_batch(batch([(2**63 - 1, "north", "widget", 1, 1.0)]))
        self.assertIn("column `ts` at row 0: unix time 9223372036854775807 is outside the years 0000 to 9999",
                      str(caught.exception))

    def test_the_first_bad_row_is_named_even_after_skipped_rows(self) -> None:
        rows = [(DAY, "n", "p", 1, 1.0), (DAY, "n", "p", 1, 1.0), (10**15, "n", "p", 1, math.inf)]
        digest = d.Digest(builder(rows).columns())
        with self.assertRaises(jobhost.InvalidData) as caught:
            digest.add_batch(batch(rows, nulls={"region": [0]}))
        self.assertEqual(str(caught.exception),
                         "column `ts` at row 2: unix time 1000000000000000 is outside the years 0000 to 9999")

    def test_an_empty_window(self) -> None:
        s = summarize([])
        self.assertEqual(s.to_json(), (
            '{"window":{"key":"daily-report:2026-11-08","label":"2026-11-08","timezone":"Europe/Berlin"},'
            '"totals":{"orders":0,"units":0,"revenue":0.00,"average_order":null,"min_order":null,'
            '"max_order":null,"first_sale":null,"last_sale":null},"skipped_rows":0,"regions":[],'
            '"products":[],"product_count":0}'))
        self.assertEqual(s.to_text(), "Sales digest daily-report:2026-11-08 (2026-11-08, Europe/Berlin): no sales.")
        s = summarize([batch(SALES[:2], nulls={"ts": [0, 1]})])
        self.assertEqual((s.totals.orders, s.skipped_rows, s.totals.last_sale), (0, 2, None))

    def test_groups_are_sorted_by_revenue_in_cents_descending_then_name(self) -> None:
        rows = [(DAY, "b", "p", 1, 10.0), (DAY, "c", "p", 1, 30.0), (DAY, "a", "p", 1, 10.0),
                (DAY, "B", "p", 1, 10.0), (DAY, "d", "p", 1, 10.004), (DAY, "e", "p", 1, 0.0)]
        self.assertEqual([g.name for g in summarize([batch(rows)]).regions], ["c", "B", "a", "b", "d", "e"])

    def test_top_limits_the_product_list(self) -> None:
        s = summarize([batch(SALES)], 2)
        self.assertEqual(([g.name for g in s.products], s.product_count, len(s.regions)), (["gizmo", "widget"], 3, 3))
        self.assertEqual(summarize([batch(SALES)], 0).products, [])
        self.assertEqual(len(summarize([batch(SALES)], 10).products), 3)

    def test_the_top_parameter(self) -> None:
        self.assertEqual([d.parse_top(v) for v in ["5", " 0 ", "+7", "\u30004\u00a0", "4294967295"]], [5, 0, 7, 4, 2**32 - 1])
        for bad in ["", "-1", "five", "1.5", "4294967296", "\u0663", "1_0", "\x1f3", "+", "-0"]:
            with self.subTest(bad=bad):
                with self.assertRaises(jobhost.ReportError) as caught:
                    d.parse_top(bad)
                self.assertEqual(str(caught.exception), f"parameter `top` must be a non-negative integer, got `{bad}`")

    def test_money_is_rounded_to_cents_in_the_json(self) -> None:
        rows = [(DAY, "north", "widget", 1, 1.005), (DAY, "north", "widget", 1, 2.675),
                (DAY, "north", "widget", 1, 0.001)]
        j = summarize([batch(rows)]).to_json()
        for part in ['"revenue":3.68,', '"min_order":0.00,', '"max_order":2.68,', '"average_order":1.23,']:
            self.assertIn(part, j)


class FormatTest(unittest.TestCase):

    def test_rfc3339(self) -> None:
        cases = {0: "1970-01-01T00:00:00Z", 1_794_143_100: "2026-11-08T13:05:00Z", 1_709_251_199: "2024-02-29T23:59:59Z",
                 -1: "1969-12-31T23:59:59Z", -14_182_940: "1969-07-20T20:17:40Z", -2_203_891_200: "1900-03-01T00:00:00Z",
                 -11_670_955_200: "1600-02-29T12:00:00Z", 951_782_400: "2000-02-29T00:00:00Z",
                 f.MIN_RFC3339_SECONDS: "0000-01-01T00:00:00Z", f.MAX_RFC3339_SECONDS: "9999-12-31T23:59:59Z"}
        for seconds, text in cases.items():
            self.assertEqual(f.rfc3339(seconds), text)
        for seconds in (f.MIN_RFC3339_SECONDS - 1, f.MAX_RFC3339_SECONDS + 1, -(2**63), 2**63 - 1):
            self.assertIsNone(f.rfc3339(seconds))

    def test_money(self) -> None:
        cases = [(0.0, "0.00"), (12.0, "12.00"), (12.3, "12.30"), (1.005, "1.01"), (2.675, "2.68"), (0.125, "0.13"),
                 (0.124999, "0.12"), (99.995, "100.00"), (0.1 + 0.2, "0.30"), (-1.005, "-1.01"), (-0.004, "0.00"),
                 (-0.0, "0.00"), (-12.5, "-12.50"), (1e-9, "0.00"), (1e21, "1000000000000000000000.00"),
                 # Two shortest decimals equally near: Rust takes the larger.
                 (1e15 + 0.3, "1000000000000000.30"), (2000000000000003.25, "2000000000000003.30")]
        for amount, text in cases:
            self.assertEqual(f.money(amount), text, amount)
        for amount in (math.nan, math.inf, -math.inf):
            self.assertIsNone(f.money(amount))

    def test_shortest_decimal_is_plain(self) -> None:
        for x, text in [(1e21, "1000000000000000000000"), (1e-7, "0.0000001"), (12.0, "12"), (0.0, "0"),
                        (1.5e-05, "0.000015"), (123456789012345680.0, "123456789012345680")]:
            self.assertEqual(f.shortest_decimal(x), text)

    def test_json_strings_are_escaped(self) -> None:
        self.assertEqual(f.json_string('a"b\\c\nd\x01é\x7f\u2028\x08\x0c\t\r'),
                         '"a\\"b\\\\c\\nd\\u0001é\x7f\u2028\\b\\f\\t\\r"')


class AppTest(unittest.TestCase):
    """The whole report through jobhost.testing.Host."""

    def run_app(self, params: Optional[Dict[str, str]] = None, destinations: Sequence[str] = ("digest",),
                batches: Optional[List[testing.BatchBuilder]] = None, **kw: Any) -> testing.RunResult:
        host = testing.Host(batches=[builder(SALES, True)] if batches is None else batches,
                            destinations=destinations, **kw)
        ctx = testing.context("daily-report", "2026-11-08", timezone="Europe/Berlin",
                              destinations=destinations, params=params or {})
        return host.run(app.SalesDigest, ctx)

    def test_a_run_stages_the_json_and_returns_the_text(self) -> None:
        r = self.run_app({"top": "2"})
        self.assertIsNone(r.error)
        assert r.output is not None and r.prompt is not None
        self.assertEqual(r.output.cursor, str(DAY + 86_399))
        self.assertEqual(r.output.summary, (
            "Sales digest daily-report:2026-11-08 (2026-11-08, Europe/Berlin): 6 orders, 13 units, revenue 180.50, "
            "average order 30.08 (smallest 4.75, largest 100.25); sales from 2026-11-08T00:01:00Z to "
            "2026-11-08T23:59:59Z. Top region: north with 125.00 from 3 orders. Top product: gizmo with 100.25 "
            "from 1 order."))
        [sent] = r.sent
        self.assertEqual((sent.destination, sent.content_type), ("digest", "application/json"))
        self.assertTrue(sent.body.endswith(b'"product_count":3}'))
        self.assertEqual(r.prompt.splitlines()[-1].encode(), sent.body)
        self.assertEqual(r.logs, [("info", "sales digest of daily-report:2026-11-08 over 6 rows (6 orders, 0 skipped), "
                                           "staged for 1 destination(s)")])

    def test_parameter_errors(self) -> None:
        self.assertEqual(self.run_app({"top": "x"}).error,
                         ("other", "parameter `top` must be a non-negative integer, got `x`"))
        self.assertEqual(self.run_app({"destination": "nope"}, destinations=("a", "b")).error,
                         ("other", "parameter `destination` names `nope`, which the job does not declare (declared: a, b)"))
        r = self.run_app({"destination": "b"}, destinations=("a", "b"))
        self.assertEqual([s.destination for s in r.sent], ["b"])

    def test_send_and_source_errors(self) -> None:
        r = self.run_app(max_message_bytes=10)
        self.assertEqual(r.error, ("other", "staging the digest for `digest` failed: body is larger than 10 bytes"))
        r = self.run_app(batches=[], columns=builder(SALES).columns(),
                         source_error=jobhost.wire.SourceError_QueryFailed("disk I/O error"))
        self.assertEqual(r.error, ("source-failed", "query failed: disk I/O error"))


if __name__ == "__main__":
    unittest.main()
