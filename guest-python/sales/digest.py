"""The daily sales digest: aggregation of sale rows into a `Summary`, as in
the Rust reference (`guest-report/src/digest.rs` and `digest/groups.rs`).

A `Digest` is made from the source's column list, fed one `jobhost.Batch`
at a time and finished into a `Summary`. It keeps no rows: each batch is
folded into counters for the window, each region and each product.
Revenue is a compensated (Neumaier) sum, added in row order exactly as the
reference does, so the two give the same bits and so the same cents.
"""

from __future__ import annotations

import math
import struct
from itertools import compress
from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

import jobhost

from .format import MAX_RFC3339_SECONDS, MIN_RFC3339_SECONDS, money
from .summary import GroupSummary, Summary, Totals, WindowInfo

TS = "ts"
"""The sale time column: integer unix seconds."""
REGION = "region"
"""The region column: text."""
PRODUCT = "product"
"""The product column: text."""
QUANTITY = "quantity"
"""The quantity column: integer units sold."""
AMOUNT = "amount"
"""The amount column: real (or integer) order total."""

_INTEGER = jobhost.ColumnKind.INTEGER
_REAL = jobhost.ColumnKind.REAL
_TEXT = jobhost.ColumnKind.TEXT

_INF = math.inf
_isfinite = math.isfinite
_USIZE_MAX = 2**32 - 1  # the reference runs as wasm32, where usize is 32 bits
# Unicode White_Space, which Rust's `str::trim` strips (Python's `strip()`
# also strips U+001C..U+001F, which Rust keeps).
_WHITE_SPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def parse_top(value: str) -> int:
    """The `top` parameter: how many products the digest lists. Accepts
    what Rust's `value.trim().parse::<usize>()` accepts on wasm32."""
    text = value.strip(_WHITE_SPACE)
    digits = text[1:] if text.startswith("+") else text
    if digits and digits.isascii() and digits.isdigit():
        n = int(digits)
        if n <= _USIZE_MAX:
            return n
    raise jobhost.ReportError(f"parameter `top` must be a non-negative integer, got `{value}`")


def _find_column(columns: Sequence[jobhost.ColumnInfo], name: str,
                 accepted: Sequence[jobhost.ColumnKind], expected: str) -> int:
    """The position of the required column `name` (ASCII case-insensitive),
    after checking that it is there once and of an accepted kind."""
    matches = [i for i, c in enumerate(columns) if c.name.isascii() and c.name.lower() == name]
    if not matches:
        raise jobhost.InvalidData(f"the source has no column `{name}`")
    if len(matches) > 1:
        raise jobhost.InvalidData(f"the source has more than one column `{name}`")
    kind = columns[matches[0]].kind
    if kind not in accepted:
        raise jobhost.InvalidData(f"column `{name}` holds {kind} values, expected {expected}")
    return matches[0]


def _rust_float(x: float) -> str:
    """How Rust's `Display` writes a non-finite `f64`."""
    if x != x:
        return "NaN"
    return "inf" if x > 0 else "-inf"


def _total_order(x: float) -> int:
    """A key ordering floats as Rust's `f64::total_cmp` does."""
    bits: int = struct.unpack("<q", struct.pack("<d", x))[0]
    return bits ^ ((bits >> 63) & 0x7FFF_FFFF_FFFF_FFFF)


def _rounded(amount: float) -> float:
    """`amount` as displayed (in cents), for ordering; non-finite amounts
    order by their own value."""
    text = money(amount)
    return amount if text is None else float(text)


# A group's counters: [orders, units, sum, compensation, min, max].
Counters = List[Any]
_ORDERS, _UNITS, _SUM, _COMP, _MIN, _MAX = range(6)


def _neumaier(amounts: List[float], total: float, compensation: float) -> Tuple[float, float]:
    """Adds `amounts`, in order, to the compensated (Neumaier) sum
    `(total, compensation)`, exactly as the reference's `Sum::add` does."""
    for a in amounts:
        s = total + a
        if (total if total >= 0.0 else -total) >= (a if a >= 0.0 else -a):
            compensation += (total - s) + a
        else:
            compensation += (a - s) + total
        total = s
    return total, compensation


def _fold_rows(names: List[str], groups: Dict[str, Counters], quantities: List[int], amounts: List[float]) -> None:
    """Adds each row to its group's counters, row by row."""
    get = groups.get
    for name, q, a in zip(names, quantities, amounts):
        g = get(name)
        if g is None:
            g = groups[name] = [0, 0, 0.0, 0.0, _INF, -_INF]
        g[0] += 1
        g[1] += q
        total = g[2]
        s = total + a
        if (total if total >= 0.0 else -total) >= (a if a >= 0.0 else -a):
            g[3] += (total - s) + a
        else:
            g[3] += (a - s) + total
        g[2] = s
        if a < g[4]:
            g[4] = a
        if a > g[5]:
            g[5] = a


def _rows_by_name(names: List[str]) -> Dict[str, List[int]]:
    """For each distinct name, the positions holding it, in order (names in
    order of first appearance)."""
    rows: Dict[str, List[int]] = {}
    get = rows.get
    for i, name in enumerate(names):
        positions = get(name)
        if positions is None:
            rows[name] = [i]
        else:
            positions.append(i)
    return rows


def _sorted(groups: Dict[str, Counters]) -> List[GroupSummary]:
    """The groups by revenue (as rounded to cents) descending, ties by name."""
    out = []
    for name, g in groups.items():
        if g[_ORDERS] > 0:
            revenue = g[_SUM] + g[_COMP]
            out.append((-_total_order(_rounded(revenue)), name,
                        GroupSummary(name, g[_ORDERS], g[_UNITS], revenue, g[_MIN], g[_MAX])))
    out.sort(key=lambda item: (item[0], item[1]))
    return [item[2] for item in out]


class Digest:
    """The running aggregation of one window's sale rows."""

    def __init__(self, columns: Sequence[jobhost.ColumnInfo]) -> None:
        """Starts a digest over rows with these columns. Raises
        `jobhost.InvalidData` if a required column is missing, repeated or
        of a kind the digest cannot use."""
        self.ts = _find_column(columns, TS, (_INTEGER,), "integer")
        self.region = _find_column(columns, REGION, (_TEXT,), "text")
        self.product = _find_column(columns, PRODUCT, (_TEXT,), "text")
        self.quantity = _find_column(columns, QUANTITY, (_INTEGER,), "integer")
        self.amount = _find_column(columns, AMOUNT, (_REAL, _INTEGER), "real or integer")
        self.rows = 0
        """Rows seen so far, skipped ones included."""
        self.skipped = 0
        """Rows skipped because a required column was NULL."""
        self.orders = 0
        self.units = 0
        self.revenue = 0.0
        self.compensation = 0.0
        self.min = _INF
        self.max = -_INF
        self.first_sale = 2**63 - 1
        self.last_sale = -(2**63)
        self.regions: Dict[str, Counters] = {}
        self.products: Dict[str, Counters] = {}

    def add_batch(self, batch: jobhost.Batch) -> None:
        """Folds one batch in. A row with NULL in any required column is
        skipped. Raises `jobhost.InvalidData` for a value the digest cannot
        report (a sale time outside the years 0000 to 9999, an amount that is
        not finite), naming the first such row; the digest is then to be
        discarded."""
        first_row = self.rows
        ts = batch.integers(self.ts)
        regions = batch.texts(self.region)
        products = batch.texts(self.product)
        quantities = batch.integers(self.quantity)
        if batch.kind(self.amount) is _INTEGER:
            amounts: List[Optional[float]] = [None if v is None else float(v)
                                              for v in batch.integers(self.amount)]
        else:
            amounts = batch.reals(self.amount)
        rows = len(batch)
        positions: Optional[List[int]] = None
        if any(batch.has_nulls(c) for c in (self.ts, self.region, self.product, self.quantity, self.amount)):
            keep = [t is not None and r is not None and p is not None and q is not None and a is not None
                    for t, r, p, q, a in zip(ts, regions, products, quantities, amounts)]
            positions = list(compress(range(rows), keep))
            ts = list(compress(ts, keep))
            regions = list(compress(regions, keep))
            products = list(compress(products, keep))
            quantities = list(compress(quantities, keep))
            amounts = list(compress(amounts, keep))
            self.skipped += rows - len(positions)
        if ts:
            # No NULL is left in these columns.
            complete_ts = cast(List[int], ts)
            complete_amounts = cast(List[float], amounts)
            self._check(first_row, positions, complete_ts, complete_amounts)
            self._fold(complete_ts, cast(List[str], regions), cast(List[str], products),
                       cast(List[int], quantities), complete_amounts)
        self.rows += rows

    @staticmethod
    def _check(first_row: int, positions: Optional[List[int]], ts: List[int], amounts: List[float]) -> None:
        """Raises for the first row whose sale time or amount the digest
        cannot report (the time is checked first, as the reference does)."""
        if MIN_RFC3339_SECONDS <= min(ts) and max(ts) <= MAX_RFC3339_SECONDS and all(map(_isfinite, amounts)):
            return
        for i, (t, a) in enumerate(zip(ts, amounts)):
            row = first_row + (i if positions is None else positions[i])
            if not MIN_RFC3339_SECONDS <= t <= MAX_RFC3339_SECONDS:
                raise jobhost.InvalidData(
                    f"column `{TS}` at row {row}: unix time {t} is outside the years 0000 to 9999")
            if not _isfinite(a):
                raise jobhost.InvalidData(
                    f"column `{AMOUNT}` at row {row}: amount {_rust_float(a)} is not a finite number")

    def _fold(self, ts: List[int], regions: List[str], products: List[str], quantities: List[int],
              amounts: List[float]) -> None:
        """Adds rows known to be complete and valid to the counters."""
        self.orders += len(ts)
        self.units += sum(quantities)
        self.min = min(self.min, min(amounts))
        self.max = max(self.max, max(amounts))
        self.first_sale = min(self.first_sale, min(ts))
        self.last_sale = max(self.last_sale, max(ts))
        self.revenue, self.compensation = _neumaier(amounts, self.revenue, self.compensation)
        for names, groups in ((regions, self.regions), (products, self.products)):
            by_name = _rows_by_name(names)
            if len(by_name) * 8 > len(names):
                # Many distinct names: row by row is cheaper than per name.
                _fold_rows(names, groups, quantities, amounts)
                continue
            for name, rows in by_name.items():
                g = groups.get(name)
                if g is None:
                    g = groups[name] = [0, 0, 0.0, 0.0, _INF, -_INF]
                group_amounts = amounts if len(rows) == len(amounts) else list(map(amounts.__getitem__, rows))
                g[_ORDERS] += len(rows)
                g[_UNITS] += sum(map(quantities.__getitem__, rows))
                g[_SUM], g[_COMP] = _neumaier(group_amounts, g[_SUM], g[_COMP])
                g[_MIN] = min(g[_MIN], min(group_amounts))
                g[_MAX] = max(g[_MAX], max(group_amounts))

    def last_sale_time(self) -> Optional[int]:
        """The latest sale time counted so far, or None without orders."""
        return self.last_sale if self.orders > 0 else None

    def finish(self, window: WindowInfo, top: Optional[int]) -> Summary:
        """The summary for `window`, listing at most `top` products (all
        when None)."""
        any_orders = self.orders > 0
        revenue = self.revenue + self.compensation
        totals = Totals(
            orders=self.orders,
            units=self.units,
            revenue=revenue,
            average_order=revenue / self.orders if any_orders else None,
            min_order=self.min if any_orders else None,
            max_order=self.max if any_orders else None,
            first_sale=self.first_sale if any_orders else None,
            last_sale=self.last_sale if any_orders else None,
        )
        products = _sorted(self.products)
        product_count = len(products)
        if top is not None:
            products = products[:top]
        return Summary(
            window=window,
            totals=totals,
            skipped_rows=self.skipped,
            regions=_sorted(self.regions),
            products=products,
            product_count=product_count,
        )
