"""Columnar batches of rows, validated and decoded once.

A `Batch` is made from a WIT `batch` (the generated classes inside a
component, `jobhost.wire`'s outside) and the cursor's column list. Making it
checks everything the WIT promises (each column holds one value per row,
text offsets start at 0, never decrease and stay inside the data, text is
UTF-8, dictionary indices are in range, the NULL bitmap covers every row,
the data's case matches the declared kind) and decodes every column into a
Python list, NULL as None. A malformed batch raises `MalformedBatch` (a
`SourceFailed`) naming the column and, where it can, the row. After that,
reading cannot fail except by naming a column the batch does not have
(`ColumnNotFound`) or asking a column for another kind (`WrongKind`).

Decoding works a column at a time, in bulk: integer and real lists are used
as the host sent them, ASCII text is decoded once per column and sliced,
dictionary text is decoded once per dictionary entry and fanned out with
`map`, and the NULL bitmap is scanned for its non-zero bytes only. This
matters inside the component, where CPython runs as WebAssembly.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from operator import le
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from . import _bindings
from .errors import ColumnNotFound, MalformedBatch, WrongKind
from .values import ColumnInfo, ColumnKind

__all__ = ["Batch", "Row", "Key"]

Key = Union[str, int]
"""A column is named by its name, or by its position (from 0)."""

_INTEGER = ColumnKind.INTEGER
_REAL = ColumnKind.REAL
_TEXT = ColumnKind.TEXT
_BLOB = ColumnKind.BLOB

# WIT column-data case -> the kind it carries.
_CARRIES: Dict[str, ColumnKind] = {
    "integer": _INTEGER,
    "real": _REAL,
    "text": _TEXT,
    "text-dict": _TEXT,
    "blob": _BLOB,
}

# For each byte value, the positions of its set bits.
_BITS: Tuple[Tuple[int, ...], ...] = tuple(
    tuple(bit for bit in range(8) if byte >> bit & 1) for byte in range(256)
)
_NONZERO = re.compile(rb"[^\x00]")


class _Fault(Exception):
    """What is wrong with one column, and where: `row` (from 0 in the
    batch) or dictionary `entry`, or neither for the column as a whole."""

    def __init__(self, detail: str, row: Optional[int] = None, entry: Optional[int] = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.row = row
        self.entry = entry

    def error(self, column: str, first_row: int) -> MalformedBatch:
        if self.row is not None:
            row: Optional[int] = first_row + self.row
            where = f", row {row}"
        else:
            row = None
            where = "" if self.entry is None else f", dictionary entry {self.entry}"
        return MalformedBatch(f"malformed batch: column `{column}`{where}: {self.detail}", column, row,
                              self.entry)


def _at(unit: str, i: int) -> Dict[str, int]:
    return {"row": i} if unit == "row" else {"entry": i}


def _as_bytes(data: Any) -> bytes:
    return data if type(data) is bytes else bytes(data)


def _as_list(values: Any) -> List[Any]:
    return values if type(values) is list else list(values)


def _check_count(found: int, rows: int) -> None:
    if found != rows:
        raise _Fault(f"{found} values for {rows} rows")


def _check_offsets(offsets: List[int], size: int, unit: str) -> List[int]:
    """Checks packed offsets against `size` bytes of data (present, from 0,
    never decreasing, inside the data); returns the end offsets."""
    if not offsets:
        raise _Fault("no offsets (there is one more offset than values)")
    first = offsets[0]
    if first != 0:
        raise _Fault(f"the first offset is {first}, not 0", **_at(unit, 0))
    ends = offsets[1:]
    if all(map(le, offsets, ends)) and (not ends or ends[-1] <= size):
        return ends
    for i, (start, end) in enumerate(zip(offsets, ends)):
        if end < start:
            raise _Fault(f"offsets {start}..{end} decrease", **_at(unit, i))
        if end > size:
            raise _Fault(f"offsets {start}..{end} are past the {size} bytes of data", **_at(unit, i))
    raise AssertionError("unreachable")


def _utf8_fault(data: bytes, offsets: List[int], unit: str) -> _Fault:
    """Where text whose per-value decoding failed is not UTF-8."""
    used = data[:offsets[-1]]
    try:
        used.decode("utf-8")
    except UnicodeDecodeError as e:
        value = max(bisect_right(offsets, e.start) - 1, 0)
        return _Fault("not valid UTF-8", **_at(unit, value))
    for i, offset in enumerate(offsets):
        if offset < len(used) and 0x80 <= used[offset] < 0xC0:
            return _Fault(f"not valid UTF-8 (offset {offset} splits a character)", **_at(unit, max(i - 1, 0)))
    return _Fault("not valid UTF-8", **_at(unit, 0))


def _decode_text(text: Any, unit: str = "row") -> List[str]:
    """The values of a WIT `text-column` (offsets and UTF-8 checked)."""
    data = _as_bytes(text.data)
    offsets = _as_list(text.offsets)
    ends = _check_offsets(offsets, len(data), unit)
    if data.isascii():
        whole = data.decode("ascii")
        return [whole[a:b] for a, b in zip(offsets, ends)]
    try:
        return [str(data[a:b], "utf-8") for a, b in zip(offsets, ends)]
    except UnicodeDecodeError:
        raise _utf8_fault(data, offsets, unit) from None


def _decode_blob(blob: Any) -> List[bytes]:
    data = _as_bytes(blob.data)
    offsets = _as_list(blob.offsets)
    ends = _check_offsets(offsets, len(data), "row")
    return [data[a:b] for a, b in zip(offsets, ends)]


def _null_rows(bitmap: bytes, rows: int) -> Iterator[int]:
    """The NULL rows of a bitmap that covers `rows` rows."""
    need = (rows + 7) // 8
    for match in _NONZERO.finditer(bitmap, 0, need):
        base = match.start() * 8
        for bit in _BITS[bitmap[match.start()]]:
            if base + bit < rows:
                yield base + bit


def _decode_dict(dictionary: Any, rows: int, bitmap: Optional[bytes]) -> List[Optional[str]]:
    indices = _as_list(dictionary.indices)
    _check_count(len(indices), rows)
    strings = _decode_text(dictionary.values, "entry")
    entries = len(strings)
    if not rows or (max(indices) < entries and min(indices) >= 0):
        return list(map(strings.__getitem__, indices))
    # A NULL row's index is never read, so it need not point anywhere.
    nulls = set() if bitmap is None else set(_null_rows(bitmap, rows))
    for row, index in enumerate(indices):
        if not 0 <= index < entries and row not in nulls:
            raise _Fault(f"dictionary index {index}, but the dictionary holds {entries} values", row=row)
    return [strings[i] if 0 <= i < entries else None for i in indices]


def _apply_nulls(values: List[Any], bitmap: bytes, rows: int) -> Tuple[List[Any], bool]:
    need = (rows + 7) // 8
    if bitmap.count(0, 0, need) == need:
        return values, False
    out = list(values)
    any_null = False
    for row in _null_rows(bitmap, rows):
        out[row] = None
        any_null = True
    return out, any_null


def _decode_column(kind: ColumnKind, column: Any, rows: int) -> Tuple[List[Any], bool]:
    """One WIT column of a batch of `rows` rows declared as `kind`, decoded,
    and whether any row is NULL; raises `_Fault`."""
    data = column.data
    spelling = _bindings.case_of(data, _bindings.COLUMN_DATA)
    if spelling is None:
        raise _Fault(f"declared {kind}, but the batch holds {type(data).__name__} data")
    if _CARRIES[spelling] is not kind:
        raise _Fault(f"declared {kind}, but the batch holds {spelling} data")
    nulls = column.nulls
    bitmap = None if nulls is None else _as_bytes(nulls)
    if bitmap is not None and len(bitmap) < (rows + 7) // 8:
        raise _Fault(f"the NULL bitmap of {len(bitmap)} bytes does not cover {rows} rows")
    payload = data.value
    if kind is _INTEGER or kind is _REAL:
        values = _as_list(payload)
        _check_count(len(values), rows)
    elif spelling == "text-dict":
        values = _decode_dict(payload, rows, bitmap)
    else:
        offsets = payload.offsets
        if len(offsets):
            _check_count(len(offsets) - 1, rows)
        values = _decode_text(payload) if spelling == "text" else _decode_blob(payload)
    if bitmap is not None:
        return _apply_nulls(values, bitmap, rows)
    return values, False


def _names(columns: Sequence[ColumnInfo]) -> str:
    return ", ".join(f"`{c.name}`" for c in columns) or "none"


class Batch:
    """A run of consecutive rows of the query's result, decoded by column.

    `len(batch)` (or `batch.len()`) is the number of rows. Columns are named
    by name or by position. The lists the typed views return are the
    batch's own: read them, do not change them.
    """

    __slots__ = ("_infos", "_values", "_index", "_rows", "_nulls")

    def __init__(self, columns: Sequence[ColumnInfo], values: Sequence[List[Any]], rows: int,
                 nulls: Optional[Sequence[bool]] = None) -> None:
        """Internal: use `Batch.from_wit` or `jobhost.testing`."""
        self._infos: Tuple[ColumnInfo, ...] = tuple(columns)
        self._values: List[List[Any]] = list(values)
        self._rows = rows
        self._nulls: Tuple[bool, ...] = (tuple(nulls) if nulls is not None
                                         else tuple(None in v for v in self._values))
        index: Dict[str, int] = {}
        for i, info in enumerate(self._infos):
            index.setdefault(info.name, i)
        self._index = index

    @classmethod
    def from_wit(cls, columns: Sequence[ColumnInfo], batch: Any, first_row: int = 0) -> "Batch":
        """Validates and decodes a WIT `batch` whose columns are `columns`
        (the source's column list). `first_row` is the source row the batch
        starts at, for the rows errors name. Raises `MalformedBatch`."""
        rows = int(batch.rows)
        wit_columns = batch.columns
        found, declared = len(wit_columns), len(columns)
        if found != declared:
            if found < declared:
                missing = columns[found].name
                raise MalformedBatch(
                    f"malformed batch: column `{missing}` is missing: the batch has {found} columns, "
                    f"the source declares {declared}", missing)
            raise MalformedBatch(
                f"malformed batch: the batch has {found} columns, the source declares {declared} "
                f"({_names(columns)})")
        values = []
        nulls = []
        for info, column in zip(columns, wit_columns):
            try:
                decoded, has_nulls = _decode_column(info.kind, column, rows)
            except _Fault as fault:
                raise fault.error(info.name, first_row) from None
            values.append(decoded)
            nulls.append(has_nulls)
        return cls(columns, values, rows, nulls)

    # --- shape -------------------------------------------------------------

    def __len__(self) -> int:
        return self._rows

    def len(self) -> int:
        """How many rows the batch holds."""
        return self._rows

    def columns(self) -> List[ColumnInfo]:
        """The batch's columns, in order."""
        return list(self._infos)

    def has_column(self, name: str) -> bool:
        """Whether the batch has a column called `name`."""
        return name in self._index

    def has_nulls(self, key: Key) -> bool:
        """Whether any row of column `key` is NULL (known from decoding, so
        a loop can skip its None checks)."""
        return self._nulls[self._position(key)]

    def kind(self, key: Key) -> ColumnKind:
        """The kind of column `key`."""
        return self._infos[self._position(key)].kind

    def _position(self, key: Key) -> int:
        if isinstance(key, str):
            position = self._index.get(key)
            if position is None:
                raise ColumnNotFound(
                    f"the batch has no column `{key}` (its columns: {_names(self._infos)})", key)
            return position
        if isinstance(key, int) and not isinstance(key, bool) and 0 <= key < len(self._infos):
            return key
        raise ColumnNotFound(f"the batch has no column {key!r} (it has {len(self._infos)})", key)

    def _typed(self, key: Key, kind: ColumnKind) -> List[Any]:
        position = self._position(key)
        info = self._infos[position]
        if info.kind is not kind:
            raise WrongKind(
                f"column `{info.name}` holds {info.kind} values, not {kind}",
                info.name, str(info.kind), str(kind),
            )
        return self._values[position]

    # --- columns -----------------------------------------------------------

    def column(self, key: Key) -> List[Any]:
        """Every value of column `key`, whatever its kind, NULL as None."""
        return self._values[self._position(key)]

    def integers(self, key: Key) -> List[Optional[int]]:
        """Every value of the integer column `key`, NULL as None."""
        return self._typed(key, _INTEGER)

    def reals(self, key: Key) -> List[Optional[float]]:
        """Every value of the real column `key`, NULL as None."""
        return self._typed(key, _REAL)

    def texts(self, key: Key) -> List[Optional[str]]:
        """Every value of the text column `key` (plain or dictionary text),
        NULL as None."""
        return self._typed(key, _TEXT)

    def blobs(self, key: Key) -> List[Optional[bytes]]:
        """Every value of the blob column `key`, NULL as None."""
        return self._typed(key, _BLOB)

    # --- rows --------------------------------------------------------------

    def rows(self) -> Iterator["Row"]:
        """The rows, in order."""
        for i in range(self._rows):
            yield Row(self, i)

    def row(self, index: int) -> "Row":
        """Row `index` (from 0); negative counts from the end."""
        if index < 0:
            index += self._rows
        if not 0 <= index < self._rows:
            raise IndexError(f"row {index} is out of range ({self._rows} rows)")
        return Row(self, index)

    def __iter__(self) -> Iterator["Row"]:
        return self.rows()

    def to_dict(self) -> Dict[str, List[Any]]:
        """The columns as `{name: values}` (the first of repeated names)."""
        return {name: self._values[i] for name, i in self._index.items()}

    def __repr__(self) -> str:
        columns = ", ".join(f"{info.name}: {info.kind}" for info in self._infos)
        return f"<Batch {self._rows} rows ({columns})>"


class Row:
    """One row of a batch. `row["name"]` (or `row[position]`) is the value or
    None; `row.integer(name)` and the like also check the column's kind."""

    __slots__ = ("_batch", "index")

    def __init__(self, batch: Batch, index: int) -> None:
        self._batch = batch
        self.index = index
        """The row's position in its batch, from 0."""

    def __getitem__(self, key: Key) -> Any:
        batch = self._batch
        return batch._values[batch._position(key)][self.index]

    def get(self, key: Key, default: Any = None) -> Any:
        """The value of column `key`, or `default` when there is no such
        column (a NULL is still None)."""
        batch = self._batch
        if isinstance(key, str) and key not in batch._index:
            return default
        return self[key]

    def integer(self, key: Key) -> Optional[int]:
        """The value of the integer column `key`."""
        value: Optional[int] = self._batch._typed(key, _INTEGER)[self.index]
        return value

    def real(self, key: Key) -> Optional[float]:
        """The value of the real column `key`."""
        value: Optional[float] = self._batch._typed(key, _REAL)[self.index]
        return value

    def text(self, key: Key) -> Optional[str]:
        """The value of the text column `key`."""
        value: Optional[str] = self._batch._typed(key, _TEXT)[self.index]
        return value

    def blob(self, key: Key) -> Optional[bytes]:
        """The value of the blob column `key`."""
        value: Optional[bytes] = self._batch._typed(key, _BLOB)[self.index]
        return value

    def keys(self) -> List[str]:
        """The column names, in order."""
        return [info.name for info in self._batch._infos]

    def as_dict(self) -> Dict[str, Any]:
        """The row as `{name: value}` (the first of repeated names)."""
        batch = self._batch
        return {name: batch._values[i][self.index] for name, i in batch._index.items()}

    def __repr__(self) -> str:
        return f"Row({self.index}, {self.as_dict()!r})"
