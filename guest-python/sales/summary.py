"""The finished digest of one window and its renderings (compact JSON, the
language model's prompt, one paragraph of text), as in the Rust reference
(`guest-report/src/summary.rs`), byte for byte. Money is kept unrounded in
the values and rounded to cents only when rendered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from .format import json_string, money, rfc3339


@dataclass
class WindowInfo:
    """The window a digest reports on."""

    key: str
    label: str
    timezone: str


@dataclass
class Totals:
    """Whole-window figures; money unrounded."""

    orders: int = 0
    units: int = 0
    revenue: float = 0.0
    average_order: Optional[float] = None
    min_order: Optional[float] = None
    max_order: Optional[float] = None
    first_sale: Optional[int] = None
    last_sale: Optional[int] = None


@dataclass
class GroupSummary:
    """Figures for one region or product."""

    name: str
    orders: int
    units: int
    revenue: float
    min_order: float
    max_order: float


@dataclass
class Summary:
    """The finished digest of one window."""

    window: WindowInfo
    totals: Totals
    skipped_rows: int = 0
    regions: List[GroupSummary] = field(default_factory=list)
    """Every region, by revenue (in cents) descending, then name."""
    products: List[GroupSummary] = field(default_factory=list)
    """The products in the same order, cut to the `top` asked for."""
    product_count: int = 0
    """How many distinct products there were before the cut."""

    def to_json(self) -> str:
        """Compact, deterministic JSON: money with two decimals, instants as
        RFC 3339 UTC strings, absent values as `null`."""
        t = self.totals
        w = self.window
        return "".join((
            '{"window":{"key":', json_string(w.key),
            ',"label":', json_string(w.label),
            ',"timezone":', json_string(w.timezone),
            '},"totals":{"orders":', str(t.orders),
            ',"units":', str(t.units),
            ',"revenue":', _money_json(t.revenue),
            ',"average_order":', _opt_money_json(t.average_order),
            ',"min_order":', _opt_money_json(t.min_order),
            ',"max_order":', _opt_money_json(t.max_order),
            ',"first_sale":', _opt_instant_json(t.first_sale),
            ',"last_sale":', _opt_instant_json(t.last_sale),
            '},"skipped_rows":', str(self.skipped_rows),
            ',"regions":', _groups_json(self.regions),
            ',"products":', _groups_json(self.products),
            ',"product_count":', str(self.product_count), "}",
        ))

    def to_prompt(self) -> str:
        """What a language model is asked to describe: an instruction, then
        the window and the figures as JSON."""
        w = self.window
        if self.totals.orders == 0:
            what = "There were no sales in this window: say so in one sentence."
        else:
            what = ("Write a short digest, at most three sentences, of these sales for the sales "
                    "team: the totals, the strongest region and product, and anything unusual (for "
                    "example rows skipped for missing values). Use only the figures given; do not "
                    "invent numbers or comparisons.")
        return (f"{what}\n\nWindow: {w.key} ({w.label}, time zone {w.timezone})\n"
                f"Figures as JSON (money in the shop's currency, instants in UTC):\n{self.to_json()}")

    def to_text(self) -> str:
        """The digest as one human-readable paragraph."""
        t = self.totals
        w = self.window
        out = [f"Sales digest {w.key} ({w.label}, {w.timezone}): "]
        if t.orders == 0:
            out.append("no sales.")
        else:
            out.append(f"{_plural(t.orders, 'order', 'orders')}, {_plural(t.units, 'unit', 'units')}, "
                       f"revenue {_money_text(t.revenue)}")
            if t.average_order is not None and t.min_order is not None and t.max_order is not None:
                out.append(f", average order {_money_text(t.average_order)} (smallest "
                           f"{_money_text(t.min_order)}, largest {_money_text(t.max_order)})")
            first = None if t.first_sale is None else rfc3339(t.first_sale)
            last = None if t.last_sale is None else rfc3339(t.last_sale)
            if first is not None and last is not None:
                out.append(f"; sales from {first} to {last}")
            out.append(".")
            for what, groups in (("region", self.regions), ("product", self.products)):
                if groups:
                    g = groups[0]
                    out.append(f" Top {what}: {g.name} with {_money_text(g.revenue)} from "
                               f"{_plural(g.orders, 'order', 'orders')}.")
        if self.skipped_rows > 0:
            out.append(f" {_plural(self.skipped_rows, 'row', 'rows')} skipped for NULL values.")
        return "".join(out)


def _money_json(amount: float) -> str:
    text = money(amount)
    return "null" if text is None else text


def _opt_money_json(amount: Optional[float]) -> str:
    return "null" if amount is None else _money_json(amount)


def _opt_instant_json(seconds: Optional[int]) -> str:
    text = None if seconds is None else rfc3339(seconds)
    return "null" if text is None else json_string(text)


def _groups_json(groups: List[GroupSummary]) -> str:
    return "[" + ",".join(
        '{"name":' + json_string(g.name)
        + f',"orders":{g.orders},"units":{g.units}'
        + ',"revenue":' + _money_json(g.revenue)
        + ',"min_order":' + _money_json(g.min_order)
        + ',"max_order":' + _money_json(g.max_order) + "}"
        for g in groups
    ) + "]"


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _money_text(amount: float) -> str:
    text = money(amount)
    return "n/a" if text is None else text
