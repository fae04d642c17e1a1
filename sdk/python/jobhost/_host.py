"""The seam between the SDK and the host.

Inside a component the host is reached through componentize-py's
generated bindings, which `jobhost._bindings` imports. Outside a component
(plain `python3`) they do not exist, and the SDK uses `jobhost.wire`'s
mirror types and a backend that refuses host calls, unless
`jobhost.testing.Host` has installed a fake one.

Everything the SDK calls on the host goes through `current()`.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Iterator, Protocol

from . import _bindings
from ._bindings import ERR, IN_COMPONENT, TYPES
from .errors import ProgrammingError, ReportError

__all__ = ["IN_COMPONENT", "ERR", "TYPES", "Backend", "current", "install", "set_run_zone"]


class Cursor(Protocol):
    """An open query, as the generated `source.Cursor` is."""

    def columns(self) -> Any: ...
    def next_batch(self, max_rows: int) -> Any: ...


class Backend(Protocol):
    """What the SDK needs of a host."""

    def open(self) -> Any:
        """Opens the source; returns a cursor or raises `ERR(source-error)`."""
    def close(self, cursor: Any) -> None:
        """Drops a cursor."""
    def send(self, destination: str, body: bytes, content_type: str) -> int:
        """Stages a message; returns its sequence number or raises `ERR(send-error)`."""
    def emit(self, level: str, message: str) -> None:
        """Writes a log message at `level` (`trace` ... `error`)."""
    def offsets(self, zone: str, start: Any, end: Any) -> Any:
        """The spans of constant UTC offset of `zone` covering `[start,
        end)` (WIT `offset-span`s), or raises `ERR(offset-error)`."""


_run_zone: Any = None


def set_run_zone(zone: str) -> None:
    """The zone of the run in progress: the one the host answers for."""
    global _run_zone
    _run_zone = zone


class _WitBackend:  # pragma: no cover - only inside a component
    """The real host, through componentize-py's generated bindings."""

    def __init__(self) -> None:
        level = _bindings.wit_log.Level
        self._levels = {
            "trace": level.TRACE,
            "debug": level.DEBUG,
            "info": level.INFO,
            "warn": level.WARN,
            "error": level.ERROR,
        }

    def open(self) -> Any:
        return _bindings.wit_source.open()

    def close(self, cursor: Any) -> None:
        cursor.__exit__(None, None, None)

    def send(self, destination: str, body: bytes, content_type: str) -> int:
        sequence: int = _bindings.wit_outbox.send(destination, body, content_type)
        return sequence

    def emit(self, level: str, message: str) -> None:
        _bindings.wit_log.emit(self._levels[level], message)

    def offsets(self, zone: str, start: Any, end: Any) -> Any:
        if zone != _run_zone:
            raise ProgrammingError(
                f"the host answers only the run's zone `{_run_zone}`, not `{zone}`")
        wit_types = _bindings.wit_types
        return _bindings.wit_zone.offsets(
            wit_types.Instant(start.seconds, start.nanoseconds),
            wit_types.Instant(end.seconds, end.nanoseconds))


class NoHost:
    """Outside a component, with no fake host installed: host calls fail,
    except the zone's offsets, which the machine's zoneinfo answers."""

    def _refuse(self, what: str) -> ReportError:
        return ReportError(
            f"jobhost.{what} needs the host: run inside a component built with "
            "componentize-py, or install a fake one with jobhost.testing.Host"
        )

    def open(self) -> Any:
        raise self._refuse("open")

    def close(self, cursor: Any) -> None:
        pass

    def send(self, destination: str, body: bytes, content_type: str) -> int:
        raise self._refuse("send")

    def emit(self, level: str, message: str) -> None:
        print(f"[{level}] {message}", file=sys.stderr)

    def offsets(self, zone: str, start: Any, end: Any) -> Any:
        """Natively the machine's zoneinfo answers (`jobhost.zone` asks it
        directly): never called."""
        raise NotImplementedError


_current: Any = _WitBackend() if IN_COMPONENT else NoHost()


def current() -> Backend:
    """The backend host calls go to now."""
    backend: Backend = _current
    return backend


@contextmanager
def install(backend: Backend) -> Iterator[Backend]:
    """Routes host calls to `backend` for the duration of the `with` block."""
    global _current
    previous = _current
    _current = backend
    try:
        yield backend
    finally:
        _current = previous
