"""The generated bindings, and the classes each WIT variant case arrives as.

Inside a component built by componentize-py the generated bindings
(`wit_world.imports.*`, `componentize_py_types`) exist and are imported
here, at module level: componentize-py resolves imports only while it
pre-initialises the component, so nothing may be imported lazily at run
time. Outside a component (plain `python3`) the import fails and the SDK
uses `jobhost.wire`'s mirror classes, of the same names and fields.

A value of a WIT variant (a column's data, a `send-error`, a
`source-error`, a `run-error`) is told apart by its class, with
`isinstance` against the class objects below, never by the class's name:
a generated class renamed, moved or no longer generated fails this
module's import (so the component does not build) instead of a value
silently falling through to "unknown" at run time. Both the generated
class and `jobhost.wire`'s mirror are accepted, inside a component too,
so a batch `jobhost.testing` builds decodes anywhere.

This module imports nothing of the SDK but `jobhost.wire`, so every other
module may import it.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

from . import wire

try:  # pragma: no cover - only inside a component
    from wit_world.imports import log as wit_log  # type: ignore[import-not-found,unused-ignore]
    from wit_world.imports import outbox as wit_outbox  # type: ignore[import-not-found,unused-ignore]
    from wit_world.imports import source as wit_source  # type: ignore[import-not-found,unused-ignore]
    from wit_world.imports import types as wit_types  # type: ignore[import-not-found,unused-ignore]
    from wit_world.imports import zone as wit_zone  # type: ignore[import-not-found,unused-ignore]
    from componentize_py_types import Err as WitErr  # type: ignore[import-not-found,unused-ignore]

    IN_COMPONENT = True
    """Whether this runs inside a component; the generated modules are
    then `wit_log`, `wit_outbox`, `wit_source`, `wit_types` and
    `wit_zone` (absent natively)."""
except ImportError:
    IN_COMPONENT = False

__all__ = [
    "IN_COMPONENT", "ERR", "TYPES", "Cases", "case_of",
    "COLUMN_DATA", "SOURCE_ERROR", "SEND_ERROR", "RUN_ERROR",
]

if IN_COMPONENT:  # pragma: no cover
    __all__ += ["wit_log", "wit_outbox", "wit_source", "wit_types", "wit_zone"]
    ERR: Any = WitErr
    """The exception class a WIT `result`'s error arrives as (and is returned as)."""
    TYPES: Any = wit_types
    """Where `Report` and the `RunError_*` cases are built from."""
else:
    ERR = wire.Err
    TYPES = wire


Cases = Tuple[Tuple[str, Tuple[type, ...]], ...]
"""A WIT variant: each case's WIT spelling and the classes it arrives as."""


def _case(mirror: type, generated: Callable[[], type]) -> Tuple[type, ...]:
    """The classes one case arrives as: `jobhost.wire`'s `mirror`, and inside
    a component the generated class as well (`generated` is called only
    there: the bindings do not exist natively)."""
    if not IN_COMPONENT:
        return (mirror,)
    found = generated()  # pragma: no cover
    return (mirror,) if found is mirror else (found, mirror)  # pragma: no cover


def case_of(value: object, cases: Cases) -> Optional[str]:
    """The WIT spelling of the case `value` is of, or None when it is of
    none of them."""
    for spelling, classes in cases:
        if isinstance(value, classes):
            return spelling
    return None


COLUMN_DATA: Cases = (
    ("integer", _case(wire.ColumnData_Integer, lambda: wit_source.ColumnData_Integer)),
    ("real", _case(wire.ColumnData_Real, lambda: wit_source.ColumnData_Real)),
    ("text", _case(wire.ColumnData_Text, lambda: wit_source.ColumnData_Text)),
    ("text-dict", _case(wire.ColumnData_TextDict, lambda: wit_source.ColumnData_TextDict)),
    ("blob", _case(wire.ColumnData_Blob, lambda: wit_source.ColumnData_Blob)),
)
"""WIT `column-data`."""

SOURCE_ERROR: Cases = (
    ("not-configured", _case(wire.SourceError_NotConfigured, lambda: wit_source.SourceError_NotConfigured)),
    ("query-failed", _case(wire.SourceError_QueryFailed, lambda: wit_source.SourceError_QueryFailed)),
    ("type-mismatch", _case(wire.SourceError_TypeMismatch, lambda: wit_source.SourceError_TypeMismatch)),
    ("invalid-state", _case(wire.SourceError_InvalidState, lambda: wit_source.SourceError_InvalidState)),
    ("other", _case(wire.SourceError_Other, lambda: wit_source.SourceError_Other)),
)
"""WIT `source-error`."""

SEND_ERROR: Cases = (
    ("unknown-destination",
     _case(wire.SendError_UnknownDestination, lambda: wit_outbox.SendError_UnknownDestination)),
    ("too-large", _case(wire.SendError_TooLarge, lambda: wit_outbox.SendError_TooLarge)),
    ("too-many-messages", _case(wire.SendError_TooManyMessages, lambda: wit_outbox.SendError_TooManyMessages)),
    ("invalid-content-type",
     _case(wire.SendError_InvalidContentType, lambda: wit_outbox.SendError_InvalidContentType)),
)
"""WIT `send-error`."""

RUN_ERROR: Cases = (
    ("invalid-data", _case(wire.RunError_InvalidData, lambda: wit_types.RunError_InvalidData)),
    ("source-failed", _case(wire.RunError_SourceFailed, lambda: wit_types.RunError_SourceFailed)),
    ("other", _case(wire.RunError_Other, lambda: wit_types.RunError_Other)),
)
"""WIT `run-error`."""
