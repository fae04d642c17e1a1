"""Local clock time in the run's time zone, without a zone database.

`ctx.window.local(ts)` is what the clocks of the window's zone
(`ctx.window.timezone`) read at `ts`: an aware `datetime` whose tzinfo is
the fixed offset of that instant (`datetime.timezone`), so the two 02:30s
of the night the clocks go back are told apart by their offsets.
`ctx.window.local_date(ts)` is its date.

`zoneinfo.ZoneInfo(name)` does not work inside a component (it loads its
data through `importlib.resources`, which componentize-py's CPython
lacks), and shipping a zone database in every component would cost it
size. Instead the host, which computes the windows, answers the zone's UTC
offsets as spans of constant offset (WIT `zone.offsets`), each with its
true extent: the first call asks for the window's spans and keeps them for
the rest of the run; an instant none of them holds is asked for once more.

Natively (plain `python3`, `jobhost.testing.Host`) the offsets come from
the machine's `zoneinfo`, or from the spans a test gives
(`Host(zone_spans=...)`).
"""

from __future__ import annotations

import bisect
import datetime as _dt
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple, Union

from . import _host, wire
from .errors import InvalidData, ProgrammingError, SourceFailed
from .values import Instant

__all__ = ["OffsetSpan", "as_instant", "local", "local_date", "native_offsets", "zoneinfo_spans"]

_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=_dt.timezone.utc)


@dataclass(frozen=True)
class OffsetSpan:
    """A stretch `[start, end)` over which the zone's offset from UTC does
    not change (WIT `offset-span`); `offset_seconds` is east positive
    (7200 for Europe/Berlin in summer)."""

    start: Instant
    end: Instant
    offset_seconds: int

    def holds(self, at: Instant) -> bool:
        """Whether `at` lies in `[start, end)`."""
        return self.start <= at < self.end


def as_instant(ts: Union[Instant, int, _dt.datetime]) -> Instant:
    """`ts` as an `Instant`: an `Instant`, whole Unix seconds (`int`), or an
    aware `datetime`. Anything else is a `TypeError` (a naive `datetime`
    too: its zone is unknown)."""
    if isinstance(ts, Instant):
        return ts
    if isinstance(ts, int) and not isinstance(ts, bool):
        return Instant(ts)
    if isinstance(ts, _dt.datetime):
        if ts.tzinfo is None or ts.utcoffset() is None:
            raise TypeError(
                f"local time of a naive datetime ({ts.isoformat()}): give an aware one "
                "(tzinfo=datetime.timezone.utc), an Instant or Unix seconds")
        delta = ts - _EPOCH_UTC
        seconds = delta.days * 86_400 + delta.seconds
        return Instant(seconds, delta.microseconds * 1000)
    raise TypeError(
        f"local time of a {type(ts).__name__}: give an Instant, Unix seconds (int) "
        "or an aware datetime")


class _Cache:
    """The spans of one zone known so far, sorted, from one backend."""

    def __init__(self) -> None:
        self.backend: Any = None
        self.zone: Optional[str] = None
        self.starts: List[Instant] = []
        self.spans: List[OffsetSpan] = []

    def find(self, at: Instant) -> Optional[OffsetSpan]:
        i = bisect.bisect_right(self.starts, at) - 1
        if i >= 0 and self.spans[i].holds(at):
            return self.spans[i]
        return None

    def keep(self, spans: Sequence[OffsetSpan]) -> None:
        for span in spans:
            if span.start < span.end and self.find(span.start) is None:
                i = bisect.bisect_left(self.starts, span.start)
                self.starts.insert(i, span.start)
                self.spans.insert(i, span)


_cache = _Cache()

if not _host.IN_COMPONENT:
    # Natively the machine's zone database answers; a component never
    # imports it (its data does not load there, and imports happen only
    # while componentize-py builds).
    import zoneinfo as _zoneinfo


def forget() -> None:
    """Forgets every span kept (a new run, or a test's new zone)."""
    global _cache
    _cache = _Cache()


def native_offsets(zone: str, start: Instant, end: Instant) -> List[Any]:
    """The spans of `zone` from the machine's `zoneinfo`, as the host would
    answer them (natively only)."""
    try:
        tz = _zoneinfo.ZoneInfo(zone)
    except (ValueError, _zoneinfo.ZoneInfoNotFoundError):
        raise ProgrammingError(
            f"unknown time zone `{zone}` for the machine's zoneinfo; give the spans "
            "with jobhost.testing.Host(zone_spans=...)") from None
    return zoneinfo_spans(tz, start, end)


def _ask(zone: str, start: Instant, end: Instant) -> List[OffsetSpan]:
    backend = _host.current()
    try:
        if isinstance(backend, _host.NoHost):
            answer = native_offsets(zone, start, end)
        else:
            answer = backend.offsets(zone, start, end)
    except _host.ERR as e:
        raise InvalidData(
            f"cannot tell the local time of {_utc_text(start)}: {getattr(e.value, 'value', e.value)}"
        ) from None
    return [OffsetSpan(Instant.from_wit(s.start), Instant.from_wit(s.end), int(s.offset_seconds))
            for s in answer]


def _utc_text(at: Instant) -> str:
    try:
        return at.datetime().isoformat().replace("+00:00", "Z")
    except (OverflowError, ValueError):
        return f"{at.seconds} s after the epoch"


def begin_run(zone: str) -> None:
    """Called as a run starts: `zone` is the one the host answers for."""
    _host.set_run_zone(zone)
    forget()


def span_at(zone: str, window: Tuple[Instant, Instant], at: Instant) -> OffsetSpan:
    """The span of `zone` holding `at`: kept, or asked for (the window's
    spans the first time, then the span of `at` alone)."""
    global _cache
    backend = _host.current()
    if _cache.zone != zone or _cache.backend is not backend:
        _cache = _Cache()
        _cache.zone, _cache.backend = zone, backend
    span = _cache.find(at)
    if span is not None:
        return span
    start, end = window
    if not _cache.spans and start < end:
        _cache.keep(_ask(zone, start, end))
        span = _cache.find(at)
        if span is not None:
            return span
    _cache.keep(_ask(zone, at, at))
    span = _cache.find(at)
    if span is None:
        raise SourceFailed(f"the host gave no offset of `{zone}` for {_utc_text(at)}")
    return span


def local(zone: str, window: Tuple[Instant, Instant], ts: Union[Instant, int, _dt.datetime]) -> _dt.datetime:
    """What `Window.local` returns (see the module's docs)."""
    at = as_instant(ts)
    offset = span_at(zone, window, at).offset_seconds
    try:
        naive = _EPOCH + _dt.timedelta(seconds=at.seconds + offset, microseconds=at.nanoseconds // 1000)
        return naive.replace(tzinfo=_dt.timezone(_dt.timedelta(seconds=offset)))
    except (OverflowError, ValueError):
        raise InvalidData(
            f"the local time of {_utc_text(at)} is outside the years 1 to 9999 a datetime holds"
        ) from None


def local_date(zone: str, window: Tuple[Instant, Instant], ts: Union[Instant, int, _dt.datetime]) -> _dt.date:
    """The date of `local(...)`."""
    return local(zone, window, ts).date()


# --- native answers (no host) ---------------------------------------------

_STEP = 3600
"""Natively, offsets are sampled this often (seconds) and each change found
to the second: no zone changes its offset twice within an hour."""
_HORIZON = 32 * 86_400
"""How far a native span is followed each way before it is cut: a cut span
is still a true answer, only a shorter one."""


def _offset_of(zone: Any, seconds: int) -> int:
    when = _dt.datetime.fromtimestamp(seconds, tz=zone)
    offset = when.utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0


def _edge(zone: Any, inside: int, outside: int, offset: int) -> int:
    """Where the offset changes between `inside` (of `offset`) and
    `outside` (of another offset), either side of it: the later of the two
    seconds astride the change, which is where a span starts."""
    lo, hi = inside, outside
    while abs(hi - lo) > 1:
        mid = (lo + hi) // 2
        if _offset_of(zone, mid) == offset:
            lo = mid
        else:
            hi = mid
    return max(lo, hi)


def zoneinfo_spans(zone: Any, start: Instant, end: Instant) -> List[Any]:
    """The spans of `zone` (a `zoneinfo.ZoneInfo`) covering `[start, end)`,
    as the host answers them but found by sampling, each cut at
    `_HORIZON` from where it was looked for. Raises `_host.ERR` with an
    `invalid-range` for an instant `datetime` cannot hold."""
    if end < start:
        raise _host.ERR(wire.OffsetError_InvalidRange(f"`end` ({end}) is before `start` ({start})"))
    spans: List[Any] = []
    at = start.seconds
    try:
        while True:
            offset = _offset_of(zone, at)
            lo = at
            if not spans:
                while lo > at - _HORIZON and _offset_of(zone, lo - _STEP) == offset:
                    lo -= _STEP
                if lo > at - _HORIZON:
                    lo = _edge(zone, lo, lo - _STEP, offset)
            hi = at
            while hi < at + _HORIZON and _offset_of(zone, hi + _STEP) == offset:
                hi += _STEP
            hi = _edge(zone, hi, hi + _STEP, offset) if hi < at + _HORIZON else hi + 1
            spans.append(wire.OffsetSpan(wire.Instant(lo, 0), wire.Instant(hi, 0), offset))
            if Instant(hi) >= end or len(spans) >= 1000:
                return spans
            at = hi
    except (OverflowError, ValueError, OSError) as e:
        raise _host.ERR(wire.OffsetError_InvalidRange(
            f"{start.seconds} s is outside the years the machine's zoneinfo holds: {e}")) from None
