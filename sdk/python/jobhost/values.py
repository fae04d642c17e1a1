"""Plain values a report receives and returns: no bindings types.

`Context` (with its `Window` and `Instant`s) is what the host tells a run;
`Output` is what a successful run returns; `ColumnKind` and `ColumnInfo`
describe the source's columns.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field, replace
from enum import Enum
from types import MappingProxyType
from typing import Any, Dict, Mapping, Optional, Tuple, Union

__all__ = ["Instant", "Window", "Context", "Output", "ColumnKind", "ColumnInfo"]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


@dataclass(frozen=True, order=True)
class Instant:
    """A point in time in UTC: whole seconds since the Unix epoch plus
    nanoseconds (always below 1,000,000,000)."""

    seconds: int
    nanoseconds: int = 0

    def unix_seconds(self) -> int:
        """Whole seconds since 1970-01-01T00:00:00Z (negative before)."""
        return self.seconds

    def unix_millis(self) -> int:
        """Whole milliseconds since the epoch (rounded down)."""
        return self.seconds * 1000 + self.nanoseconds // 1_000_000

    def datetime(self) -> _dt.datetime:
        """An aware UTC `datetime` (microsecond precision, rounded down).

        Raises `OverflowError` outside the years 1 to 9999 that `datetime`
        can hold.
        """
        return _EPOCH + _dt.timedelta(seconds=self.seconds, microseconds=self.nanoseconds // 1000)

    @classmethod
    def from_wit(cls, value: Any) -> "Instant":
        """From a WIT `instant` (generated or `jobhost.wire`)."""
        return cls(int(value.seconds), int(value.nanoseconds))


@dataclass(frozen=True)
class Window:
    """The window a run reports on: the half-open interval `[start, end)`."""

    job: str
    """The job's name, for example `daily-report`."""
    key: str
    """The window key `<job>:<label>`, for example `daily-report:2026-11-08`."""
    label: str
    """The label in the window's time zone: `2026-11-08`, `2026-W45`, ..."""
    start: Instant
    """First instant inside the window."""
    end: Instant
    """First instant after the window (exclusive)."""
    timezone: str
    """The IANA time zone of the window's calendar, for example `UTC`."""

    def local(self, ts: "Union[Instant, int, _dt.datetime]") -> _dt.datetime:
        """What the clocks of the window's zone read at `ts` (an `Instant`,
        Unix seconds as an `int`, or an aware `datetime`; inside the window
        or not): an aware `datetime` whose tzinfo is the zone's fixed
        offset at that instant, so `02:30+02:00` and, an hour later,
        `02:30+01:00` on the night the clocks go back differ. Microsecond
        precision (rounded down).

        The host gives the zone's offsets (no zone database in the
        component), once for the window and again only for an instant
        outside the spans it gave. Raises `TypeError` for a naive
        `datetime` or another type, `jobhost.InvalidData` for an instant
        outside the years 1 to 9999."""
        return _zone.local(self.timezone, (self.start, self.end), ts)

    def local_date(self, ts: "Union[Instant, int, _dt.datetime]") -> _dt.date:
        """The date of `local(ts)`: the day of the window's calendar `ts`
        falls on."""
        return _zone.local_date(self.timezone, (self.start, self.end), ts)

    @classmethod
    def from_wit(cls, value: Any) -> "Window":
        """From a WIT `window`."""
        return cls(
            job=value.job,
            key=value.key,
            label=value.label,
            start=Instant.from_wit(value.start),
            end=Instant.from_wit(value.end),
            timezone=value.timezone,
        )


def _frozen_params(params: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(params))


@dataclass(frozen=True, eq=False)
class Context:
    """Everything the host tells a run: plain values, read-only."""

    window: Window
    """The window being reported."""
    now: Instant
    """The run's clock reading (the guest's wall clock reads the same)."""
    cursor: Optional[str] = None
    """The cursor of the job's last DONE run, or None."""
    attempt: int = 1
    """Which attempt at this window this is, from 1."""
    destinations: Tuple[str, ...] = ()
    """The destinations the job declares, in alphabetical order."""
    params: Mapping[str, str] = field(default_factory=dict)
    """The job's `[params]`, name -> text, sorted by name."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "destinations", tuple(self.destinations))
        object.__setattr__(self, "params", _frozen_params(self.params))

    def param(self, name: str) -> Optional[str]:
        """The value of the job parameter `name`, or None when not set."""
        return self.params.get(name)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Context):
            return NotImplemented
        return (self.window, self.now, self.cursor, self.attempt, self.destinations, dict(self.params)) == (
            other.window, other.now, other.cursor, other.attempt, other.destinations, dict(other.params))

    def __repr__(self) -> str:
        return (f"Context(window={self.window!r}, now={self.now!r}, cursor={self.cursor!r}, "
                f"attempt={self.attempt!r}, destinations={self.destinations!r}, params={dict(self.params)!r})")

    @classmethod
    def from_wit(cls, value: Any) -> "Context":
        """From a WIT `run-context` (generated or `jobhost.wire`)."""
        params: Dict[str, str] = {}
        for name, text in value.params:
            params.setdefault(name, text)
        return cls(
            window=Window.from_wit(value.window),
            now=Instant.from_wit(value.now),
            cursor=value.cursor,
            attempt=int(value.attempt),
            destinations=tuple(value.destinations),
            params=params,
        )


@dataclass(frozen=True)
class Output:
    """What a successful run returns: the summary stored with the run and
    printed in its receipt, and the job's new cursor (None keeps the
    current one)."""

    summary: str
    cursor: Optional[str] = None

    @classmethod
    def new(cls, summary: str) -> "Output":
        """An output with this summary and no new cursor."""
        return cls(summary)

    def with_cursor(self, cursor: Optional[str]) -> "Output":
        """A copy with the new cursor `cursor`."""
        return replace(self, cursor=cursor)


class ColumnKind(Enum):
    """The type of a column. `str(kind)` is the WIT spelling (`integer`)."""

    INTEGER = "integer"
    REAL = "real"
    TEXT = "text"
    BLOB = "blob"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def from_wit(cls, value: Any) -> "ColumnKind":
        """From a WIT `column-kind` enum value (matched by member name)."""
        return cls[value.name]


@dataclass(frozen=True)
class ColumnInfo:
    """A column's name and kind."""

    name: str
    kind: ColumnKind

    @classmethod
    def from_wit(cls, value: Any) -> "ColumnInfo":
        """From a WIT `column-info`."""
        return cls(value.name, ColumnKind.from_wit(value.kind))


# `zone` needs `Instant`, defined above; `Window.local` needs `zone` only
# when it is called.
from . import zone as _zone  # noqa: E402
