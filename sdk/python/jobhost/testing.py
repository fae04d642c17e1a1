"""Helpers for native tests of a report's logic: no host, no component.

- `batch(qty=[1, None], region=["n", None])`: a `Batch` from plain values,
  kinds inferred (int -> integer, float -> real, str -> text, bytes ->
  blob; a column of ints and floats is real).
- `BatchBuilder().integers("qty", [1, None]).texts("region", ["n", None]).build()`:
  the same with explicit kinds (and `dictionary=True` for dictionary text);
  `.wit()` gives the WIT-shaped batch (`jobhost.wire` classes) instead.
- `context(...)`: a `Context` with defaults for everything not given.
- `Host`: a fake host serving batches, recording sends and logs, and
  answering the zone's offsets (`ctx.window.local`) from the machine's
  `zoneinfo`, or from `zone_spans=[OffsetSpan(...)]` when given (its
  `zone_requests` lists what was asked), that runs a report through the
  same export path the component uses:

```python
host = jobhost.testing.Host(batches=[BatchBuilder().integers("qty", [1, 2])],
                            destinations=["digest"])
result = host.run(MyReport, params={"top": "3"})
assert result.output.summary == "..."
assert result.sent[0].body == b"..."
```

Batches built here go through the same validation and decoding as the
host's (`Batch.from_wit`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _bindings, _host, wire, zone
from .batch import Batch
from .report import export
from .values import ColumnInfo, ColumnKind, Context, Instant, Output, Window
from .zone import OffsetSpan

__all__ = ["BatchBuilder", "batch", "context", "wit_context", "Host", "RunResult", "Sent"]

_WIT_KIND = {
    ColumnKind.INTEGER: wire.ColumnKind.INTEGER,
    ColumnKind.REAL: wire.ColumnKind.REAL,
    ColumnKind.TEXT: wire.ColumnKind.TEXT,
    ColumnKind.BLOB: wire.ColumnKind.BLOB,
}


def _nulls(values: Sequence[Any]) -> Optional[bytes]:
    if all(v is not None for v in values):
        return None
    bitmap = bytearray((len(values) + 7) // 8)
    for i, v in enumerate(values):
        if v is None:
            bitmap[i // 8] |= 1 << (i % 8)
    return bytes(bitmap)


def _packed(values: Iterable[bytes]) -> wire.TextColumn:
    data = bytearray()
    offsets = [0]
    for v in values:
        data += v
        offsets.append(len(data))
    return wire.TextColumn(bytes(data), offsets)


class BatchBuilder:
    """Builds one batch column by column; every column must have as many
    values as the first."""

    def __init__(self) -> None:
        self._columns: List[Tuple[ColumnInfo, wire.Column]] = []
        self._rows: Optional[int] = None

    def _add(self, name: str, kind: ColumnKind, values: Sequence[Any], data: Any) -> "BatchBuilder":
        if self._rows is None:
            self._rows = len(values)
        elif len(values) != self._rows:
            raise ValueError(f"column `{name}` has {len(values)} values, the batch {self._rows} rows")
        self._columns.append((ColumnInfo(name, kind), wire.Column(_nulls(values), data)))
        return self

    def integers(self, name: str, values: Iterable[Optional[int]]) -> "BatchBuilder":
        """Adds an integer column."""
        values = list(values)
        return self._add(name, ColumnKind.INTEGER, values,
                         wire.ColumnData_Integer([0 if v is None else int(v) for v in values]))

    def reals(self, name: str, values: Iterable[Optional[float]]) -> "BatchBuilder":
        """Adds a real column."""
        values = list(values)
        return self._add(name, ColumnKind.REAL, values,
                         wire.ColumnData_Real([0.0 if v is None else float(v) for v in values]))

    def texts(self, name: str, values: Iterable[Optional[str]], dictionary: bool = False) -> "BatchBuilder":
        """Adds a text column, plain or (`dictionary=True`) dictionary
        encoded in order of first appearance, as the host does."""
        values = list(values)
        if not dictionary:
            return self._add(name, ColumnKind.TEXT, values, wire.ColumnData_Text(
                _packed(b"" if v is None else v.encode("utf-8") for v in values)))
        ids: Dict[str, int] = {}
        indices = [ids.setdefault("" if v is None else v, len(ids)) for v in values]
        return self._add(name, ColumnKind.TEXT, values, wire.ColumnData_TextDict(
            wire.DictColumn(_packed(v.encode("utf-8") for v in ids), indices)))

    def blobs(self, name: str, values: Iterable[Optional[bytes]]) -> "BatchBuilder":
        """Adds a blob column."""
        values = list(values)
        return self._add(name, ColumnKind.BLOB, values, wire.ColumnData_Blob(
            _packed(b"" if v is None else bytes(v) for v in values)))

    def columns(self) -> List[ColumnInfo]:
        """The columns added so far."""
        return [info for info, _ in self._columns]

    def wit_columns(self) -> List[wire.ColumnInfo]:
        """The columns as WIT `column-info` values."""
        return [wire.ColumnInfo(info.name, _WIT_KIND[info.kind]) for info, _ in self._columns]

    def wit(self) -> wire.Batch:
        """The batch in the WIT shape, as the host would send it."""
        return wire.Batch(self._rows or 0, [column for _, column in self._columns])

    def build(self) -> Batch:
        """The decoded `Batch`."""
        return Batch.from_wit(self.columns(), self.wit())


def _infer(name: str, values: Sequence[Any]) -> ColumnKind:
    kinds = set()
    for v in values:
        if v is None:
            continue
        if isinstance(v, bool) or isinstance(v, int):
            kinds.add(ColumnKind.INTEGER)
        elif isinstance(v, float):
            kinds.add(ColumnKind.REAL)
        elif isinstance(v, str):
            kinds.add(ColumnKind.TEXT)
        elif isinstance(v, (bytes, bytearray, memoryview)):
            kinds.add(ColumnKind.BLOB)
        else:
            raise TypeError(f"column `{name}`: cannot tell the kind of {type(v).__name__} values")
    if kinds == {ColumnKind.INTEGER, ColumnKind.REAL}:
        return ColumnKind.REAL
    if len(kinds) == 1:
        return kinds.pop()
    if not kinds:
        raise ValueError(f"column `{name}` is all NULL: use BatchBuilder to give its kind")
    raise TypeError(f"column `{name}` mixes {', '.join(sorted(str(k) for k in kinds))} values")


def builder(**columns: Sequence[Any]) -> BatchBuilder:
    """A `BatchBuilder` holding these columns, kinds inferred."""
    b = BatchBuilder()
    for name, values in columns.items():
        values = list(values)
        kind = _infer(name, values)
        if kind is ColumnKind.INTEGER:
            b.integers(name, values)
        elif kind is ColumnKind.REAL:
            b.reals(name, values)
        elif kind is ColumnKind.TEXT:
            b.texts(name, values)
        else:
            b.blobs(name, values)
    return b


def batch(**columns: Sequence[Any]) -> Batch:
    """A `Batch` from plain values, one keyword per column, kinds inferred."""
    return builder(**columns).build()


def context(
    job: str = "test",
    label: str = "2026-11-08",
    *,
    key: Optional[str] = None,
    start: Union[int, Instant] = 1_794_096_000,
    end: Union[int, Instant] = 1_794_182_400,
    timezone: str = "UTC",
    now: Union[int, Instant, None] = None,
    cursor: Optional[str] = None,
    attempt: int = 1,
    destinations: Sequence[str] = (),
    params: Optional[Mapping[str, str]] = None,
) -> Context:
    """A `Context` for a test (by default the UTC day 2026-11-08 of job
    `test`, run 5 minutes after it ended)."""
    start_i = start if isinstance(start, Instant) else Instant(start)
    end_i = end if isinstance(end, Instant) else Instant(end)
    now_i = now if isinstance(now, Instant) else Instant(end_i.seconds + 300 if now is None else now)
    return Context(
        window=Window(job, key or f"{job}:{label}", label, start_i, end_i, timezone),
        now=now_i,
        cursor=cursor,
        attempt=attempt,
        destinations=tuple(sorted(destinations)),
        params=dict(sorted((params or {}).items())),
    )


def wit_context(ctx: Context) -> wire.RunContext:
    """`ctx` in the WIT shape."""
    w = ctx.window

    def instant(i: Instant) -> wire.Instant:
        return wire.Instant(i.seconds, i.nanoseconds)

    return wire.RunContext(
        window=wire.Window(w.job, w.key, w.label, instant(w.start), instant(w.end), w.timezone),
        now=instant(ctx.now),
        cursor=ctx.cursor,
        attempt=ctx.attempt,
        destinations=list(ctx.destinations),
        params=list(ctx.params.items()),
    )


@dataclass
class Sent:
    """A message a run staged."""

    destination: str
    body: bytes
    content_type: str


@dataclass
class RunResult:
    """What `Host.run` saw: the output or the WIT error, the messages and
    log lines, and `describe`'s text."""

    output: Optional[Output] = None
    error: Optional[Tuple[str, str]] = None
    """`(case, message)` of the WIT `run-error`, for example
    `("invalid-data", "...")`."""
    sent: List[Sent] = field(default_factory=list)
    logs: List[Tuple[str, str]] = field(default_factory=list)
    prompt: Optional[str] = None


class _FakeCursor:
    def __init__(self, host: "Host") -> None:
        self._host = host
        self._next = 0
        self.closed = False

    def columns(self) -> List[wire.ColumnInfo]:
        return list(self._host._columns)

    def next_batch(self, max_rows: int) -> Optional[wire.Batch]:
        if self.closed:
            raise _host.ERR(wire.SourceError_InvalidState("the cursor is closed"))
        if self._next >= len(self._host._batches):
            if self._host.source_error is not None:
                raise _host.ERR(self._host.source_error)
            return None
        b = self._host._batches[self._next]
        self._next += 1
        return b


class Host:
    """A fake host for native tests (see the module's docs).

    `batches` are `BatchBuilder`s or WIT-shaped batches; `columns` (WIT
    `column-info`s or `ColumnInfo`s) default to the first builder's.
    `source_error` (a `jobhost.wire.SourceError_*`) is raised once the
    batches are served, or at `open` when `open_error` is true. `max_messages`
    and `max_message_bytes` limit `send` as the host's limits do.
    `zone_spans` (`jobhost.OffsetSpan`s) are the window zone's offsets, as
    the host would give them; by default the machine's `zoneinfo` answers.
    `zone_requests` lists the `(start, end)` ranges asked for, in order.
    """

    def __init__(
        self,
        batches: Sequence[Union[BatchBuilder, wire.Batch]] = (),
        columns: Optional[Sequence[Union[wire.ColumnInfo, ColumnInfo]]] = None,
        destinations: Sequence[str] = (),
        source_error: Any = None,
        open_error: bool = False,
        max_messages: int = 1000,
        max_message_bytes: int = 8 << 20,
        zone_spans: Optional[Sequence[OffsetSpan]] = None,
    ) -> None:
        self._batches: List[wire.Batch] = [b.wit() if isinstance(b, BatchBuilder) else b for b in batches]
        if columns is None:
            first = next((b for b in batches if isinstance(b, BatchBuilder)), None)
            cols: List[wire.ColumnInfo] = first.wit_columns() if first else []
        else:
            cols = [wire.ColumnInfo(c.name, _WIT_KIND[c.kind]) if isinstance(c, ColumnInfo) else c
                    for c in columns]
        self._columns = cols
        self.destinations = sorted(destinations)
        self.source_error = source_error
        self.open_error = open_error
        self.max_messages = max_messages
        self.max_message_bytes = max_message_bytes
        self._result = RunResult()
        self._describing = False
        self._open: Optional[_FakeCursor] = None
        self.zone_spans = None if zone_spans is None else sorted(zone_spans, key=lambda s: s.start)
        self.zone_requests: List[Tuple[Instant, Instant]] = []

    # --- the backend -------------------------------------------------------

    def open(self) -> _FakeCursor:
        if self.open_error and self.source_error is not None:
            raise _host.ERR(self.source_error)
        if self._open is not None and not self._open.closed:
            raise _host.ERR(wire.SourceError_InvalidState("a cursor is already open"))
        self._open = _FakeCursor(self)
        return self._open

    def close(self, cursor: Any) -> None:
        cursor.closed = True

    def send(self, destination: str, body: bytes, content_type: str) -> int:
        if type(body) is not bytes:
            raise TypeError("the body must be bytes")
        if self._describing or destination not in self.destinations:
            raise _host.ERR(wire.SendError_UnknownDestination(destination[:64]))
        if "/" not in content_type or len(content_type) > 256:
            raise _host.ERR(wire.SendError_InvalidContentType(content_type[:256]))
        if len(body) > self.max_message_bytes:
            raise _host.ERR(wire.SendError_TooLarge(self.max_message_bytes))
        if len(self._result.sent) >= self.max_messages:
            raise _host.ERR(wire.SendError_TooManyMessages(self.max_messages))
        self._result.sent.append(Sent(destination, body, content_type))
        return len(self._result.sent)

    def emit(self, level: str, message: str) -> None:
        self._result.logs.append((level, message))

    def offsets(self, timezone: str, start: Instant, end: Instant) -> List[wire.OffsetSpan]:
        self.zone_requests.append((start, end))
        if self.zone_spans is None:
            return zone.native_offsets(timezone, start, end)
        if end < start:
            raise _host.ERR(wire.OffsetError_InvalidRange("`end` is before `start`"))
        return [wire.OffsetSpan(wire.Instant(s.start.seconds, s.start.nanoseconds),
                                wire.Instant(s.end.seconds, s.end.nanoseconds), s.offset_seconds)
                for s in self.zone_spans
                if s.end > start and (s.start < end or s.holds(start))]

    # --- running -----------------------------------------------------------

    def installed(self) -> Any:
        """A `with` block in which host calls (the zone's offsets of
        `ctx.window.local`, `open`, `send`, `log`) go to this fake host, for
        testing a helper outside `run`."""
        return _host.install(self)

    def run(self, report: Any, ctx: Optional[Context] = None, **context_args: Any) -> RunResult:
        """Runs `report` (a `Report` subclass, or the class `export`
        returned) as the host would: `run`, then `describe` after a success.
        `ctx` defaults to `context(destinations=self.destinations,
        **context_args)`. An exception other than a `jobhost.Error`
        propagates, as it would trap the component."""
        world = report if hasattr(report, "_jobhost_exported") else export(report)
        if ctx is None:
            context_args.setdefault("destinations", self.destinations)
            ctx = context(**context_args)
        wit_ctx = wit_context(ctx)
        self._result = result = RunResult()
        with _host.install(self):
            try:
                report_value = world().run(wit_ctx)
            except _host.ERR as e:
                case = _bindings.case_of(e.value, _bindings.RUN_ERROR)
                if case is None:
                    raise TypeError(f"the report returned an error of no run-error case: {e.value!r}") from None
                result.error = (case, e.value.value)
                return result
            result.output = Output(report_value.summary, report_value.cursor)
            self._describing = True
            try:
                result.prompt = world().describe(wit_ctx, report_value)
            finally:
                self._describing = False
        return result
