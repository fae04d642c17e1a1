"""The three small formats of the digest, done by hand as in the Rust
reference (`guest-report/src/format.rs`), byte for byte:

- `money`: two decimals, half away from zero on the shortest decimal that
  reads back as the amount (`1.005` -> `1.01`), never `-0.00`;
- `rfc3339`: unix seconds as `2026-11-08T13:05:00Z` for the years 0000 to
  9999 (civil-from-days, no `datetime`, which stops at year 1);
- `json_string`: a JSON string literal escaped as the Rust reference does.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Dict, Optional, Tuple

MIN_RFC3339_SECONDS = -62_167_219_200
"""The earliest instant `rfc3339` formats: `0000-01-01T00:00:00Z`."""
MAX_RFC3339_SECONDS = 253_402_300_799
"""The latest instant `rfc3339` formats: `9999-12-31T23:59:59Z`."""

_SECONDS_PER_DAY = 86_400


def civil_from_days(days: int) -> Tuple[int, int, int]:
    """The proleptic Gregorian `(year, month, day)` of `days` days after
    1970-01-01 (Howard Hinnant's algorithm)."""
    z = days + 719_468
    era = z // 146_097
    doe = z % 146_097
    yoe = (doe - doe // 1_460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (1 if month <= 2 else 0)
    return year, month, day


def rfc3339(seconds: int) -> Optional[str]:
    """Unix seconds as an RFC 3339 UTC timestamp, or None outside the years
    0000 to 9999."""
    if not MIN_RFC3339_SECONDS <= seconds <= MAX_RFC3339_SECONDS:
        return None
    days, secs = divmod(seconds, _SECONDS_PER_DAY)
    year, month, day = civil_from_days(days)
    return f"{year:04}-{month:02}-{day:02}T{secs // 3600:02}:{secs // 60 % 60:02}:{secs % 60:02}Z"


def _shortest_digits(x: float) -> Tuple[int, int]:
    """`(digits, exponent)` with `x == float(digits * 10**exponent)`, digits
    as few as possible: Python's `repr`, except that where two candidates of
    that length are equally near `x`, Rust takes the larger one (`repr`
    takes the even one). That can happen only from 16 digits on, since
    every 15-digit decimal reads back as a double of its own."""
    text = repr(x)
    mantissa, _, exponent = text.partition("e")
    integral, _, fraction = mantissa.partition(".")
    if fraction == "0":
        fraction = ""
    digits = int(integral + fraction)
    exp = (int(exponent) if exponent else 0) - len(fraction)
    if digits >= 10**15:
        up = digits + 1
        if len(str(up)) == len(str(digits)):
            exact = Fraction(x)
            scale = Fraction(10) ** exp
            if exact - digits * scale == up * scale - exact and float(up * scale) == x:
                digits = up
    return digits, exp


def shortest_decimal(x: float) -> str:
    """The shortest decimal that reads back as the finite, non-negative `x`,
    in plain notation, as Rust's `Display` for `f64` writes it (`1e21` ->
    `1000000000000000000000`, `1e-7` -> `0.0000001`, `12.0` -> `12`)."""
    digits, exp = _shortest_digits(x)
    text = str(digits)
    if exp >= 0:
        return text + "0" * exp if digits else "0"
    point = len(text) + exp
    if point <= 0:
        return "0." + "0" * -point + text
    return text[:point] + "." + text[point:]


def money(amount: float) -> Optional[str]:
    """`amount` rounded to two decimals, half away from zero, with exactly
    two decimals (`1234.50`); None for infinities and NaN."""
    if not math.isfinite(amount):
        return None
    shortest = shortest_decimal(abs(amount))
    int_part, _, frac = shortest.partition(".")
    frac = (frac + "000")[:3]
    digits = bytearray((int_part + frac[:2]).encode("ascii"))
    if frac[2] >= "5":
        i = len(digits)
        while True:
            if i == 0:
                digits.insert(0, 0x31)
                break
            i -= 1
            if digits[i] == 0x39:
                digits[i] = 0x30
            else:
                digits[i] += 1
                break
    text = digits.decode("ascii")
    is_zero = text.count("0") == len(text)
    sign = "-" if math.copysign(1.0, amount) < 0 and not is_zero else ""
    return f"{sign}{text[:-2]}.{text[-2:]}"


_ESCAPES: Dict[int, str] = {c: f"\\u{c:04x}" for c in range(0x20)}
_ESCAPES.update({
    ord('"'): '\\"',
    ord("\\"): "\\\\",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
    0x08: "\\b",
    0x0C: "\\f",
})


def json_string(value: str) -> str:
    """`value` as a JSON string literal, quotes included."""
    return '"' + value.translate(_ESCAPES) + '"'
