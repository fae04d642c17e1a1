"""Plain mirrors of the WIT types (jobhost:report@0.1.1), for native use.

Inside a component the SDK talks to the classes componentize-py generates
(`wit_world.imports.types`, `wit_world.imports.source`, ...). Outside one
(plain `python3`, unit tests) those do not exist, so this module defines
classes of the same names and fields: `ColumnData_Integer(value=[...])`,
`TextColumn(data=b"...", offsets=[...])`, `RunError_InvalidData("...")` and
so on. The SDK tells a variant's cases apart by class (`isinstance`
against these and, inside a component, the generated classes:
`jobhost._bindings`), never by a class's name, so a batch built from these
decodes exactly as one the host sends.

Nothing here is needed by a report's author except through
`jobhost.testing`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, List, Optional, Tuple, Union

__all__ = [
    "Instant", "Window", "RunContext", "Report",
    "RunError_InvalidData", "RunError_SourceFailed", "RunError_Other", "RunError",
    "ColumnKind", "ColumnInfo", "TextColumn", "DictColumn",
    "ColumnData_Integer", "ColumnData_Real", "ColumnData_Text", "ColumnData_TextDict",
    "ColumnData_Blob", "ColumnData", "Column", "Batch",
    "SourceError_NotConfigured", "SourceError_QueryFailed", "SourceError_TypeMismatch",
    "SourceError_InvalidState", "SourceError_Other", "SourceError",
    "SendError_UnknownDestination", "SendError_TooLarge", "SendError_TooManyMessages",
    "SendError_InvalidContentType", "SendError",
    "Level", "OffsetSpan", "OffsetError_InvalidRange", "OffsetError", "Err",
]


# --- types -----------------------------------------------------------------

@dataclass
class Instant:
    """WIT `instant`."""
    seconds: int
    nanoseconds: int


@dataclass
class Window:
    """WIT `window`."""
    job: str
    key: str
    label: str
    start: Instant
    end: Instant
    timezone: str


@dataclass
class RunContext:
    """WIT `run-context`."""
    window: Window
    now: Instant
    cursor: Optional[str]
    attempt: int
    destinations: List[str]
    params: List[Tuple[str, str]]


@dataclass
class Report:
    """WIT `report`."""
    summary: str
    cursor: Optional[str]


@dataclass
class RunError_InvalidData:
    """WIT `run-error::invalid-data`."""
    value: str


@dataclass
class RunError_SourceFailed:
    """WIT `run-error::source-failed`."""
    value: str


@dataclass
class RunError_Other:
    """WIT `run-error::other`."""
    value: str


RunError = Union[RunError_InvalidData, RunError_SourceFailed, RunError_Other]


# --- source ----------------------------------------------------------------

class ColumnKind(Enum):
    """WIT `column-kind`."""
    INTEGER = 0
    REAL = 1
    TEXT = 2
    BLOB = 3


@dataclass
class ColumnInfo:
    """WIT `column-info`."""
    name: str
    kind: ColumnKind


@dataclass
class TextColumn:
    """WIT `text-column`."""
    data: bytes
    offsets: List[int]


@dataclass
class DictColumn:
    """WIT `dict-column`."""
    values: TextColumn
    indices: List[int]


@dataclass
class ColumnData_Integer:
    """WIT `column-data::integer`."""
    value: List[int]


@dataclass
class ColumnData_Real:
    """WIT `column-data::real`."""
    value: List[float]


@dataclass
class ColumnData_Text:
    """WIT `column-data::text`."""
    value: TextColumn


@dataclass
class ColumnData_TextDict:
    """WIT `column-data::text-dict`."""
    value: DictColumn


@dataclass
class ColumnData_Blob:
    """WIT `column-data::blob`."""
    value: TextColumn


ColumnData = Union[ColumnData_Integer, ColumnData_Real, ColumnData_Text, ColumnData_TextDict, ColumnData_Blob]


@dataclass
class Column:
    """WIT `column`."""
    nulls: Optional[bytes]
    data: Any


@dataclass
class Batch:
    """WIT `batch`."""
    rows: int
    columns: List[Column] = field(default_factory=list)


@dataclass
class SourceError_NotConfigured:
    """WIT `source-error::not-configured`."""


@dataclass
class SourceError_QueryFailed:
    """WIT `source-error::query-failed`."""
    value: str


@dataclass
class SourceError_TypeMismatch:
    """WIT `source-error::type-mismatch`."""
    value: str


@dataclass
class SourceError_InvalidState:
    """WIT `source-error::invalid-state`."""
    value: str


@dataclass
class SourceError_Other:
    """WIT `source-error::other`."""
    value: str


SourceError = Union[SourceError_NotConfigured, SourceError_QueryFailed, SourceError_TypeMismatch,
                    SourceError_InvalidState, SourceError_Other]


# --- outbox ----------------------------------------------------------------

@dataclass
class SendError_UnknownDestination:
    """WIT `send-error::unknown-destination`."""
    value: str


@dataclass
class SendError_TooLarge:
    """WIT `send-error::too-large`."""
    value: int


@dataclass
class SendError_TooManyMessages:
    """WIT `send-error::too-many-messages`."""
    value: int


@dataclass
class SendError_InvalidContentType:
    """WIT `send-error::invalid-content-type`."""
    value: str


SendError = Union[SendError_UnknownDestination, SendError_TooLarge, SendError_TooManyMessages,
                  SendError_InvalidContentType]


# --- log -------------------------------------------------------------------

class Level(Enum):
    """WIT `level`."""
    TRACE = 0
    DEBUG = 1
    INFO = 2
    WARN = 3
    ERROR = 4


# --- zone ------------------------------------------------------------------

@dataclass
class OffsetSpan:
    """WIT `offset-span`."""
    start: Instant
    end: Instant
    offset_seconds: int


@dataclass
class OffsetError_InvalidRange:
    """WIT `offset-error::invalid-range`."""
    value: str


OffsetError = OffsetError_InvalidRange


# --- results ---------------------------------------------------------------

@dataclass(frozen=True)
class Err(Exception):
    """The failure case of a WIT `result`, raised as componentize-py's
    `componentize_py_types.Err` is."""
    value: Any
