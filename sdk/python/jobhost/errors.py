"""The errors a report raises, and how each maps to the WIT `run-error`.

Raise one of these from `Report.run` and the SDK returns the matching
`Err(run-error)` to the host:

- `InvalidData` -> `invalid-data` (permanent: retrying will not help, the
  host marks the receipt `retryable: false`);
- `SourceFailed` -> `source-failed`;
- `ReportError` (and the bare `Error`) -> `other`.

Any other exception is left uncaught: componentize-py prints its traceback
to the guest's stderr and traps, and the host records the trap, which it
does not retry. The SDK's own errors for a mistake in the report or its
query (`ColumnNotFound`, a `KeyError`; `WrongKind`, a `TypeError`) are
such exceptions on purpose: running the window again reads the same
columns, so they fail it for good instead of being retried as `other`.
"""

from __future__ import annotations

from typing import Any, Optional, TypeVar

from . import _bindings

__all__ = [
    "Error",
    "InvalidData",
    "SourceFailed",
    "ReportError",
    "MalformedBatch",
    "ColumnNotFound",
    "WrongKind",
    "SendFailed",
    "ProgrammingError",
]

_E = TypeVar("_E", bound="Error")


class Error(Exception):
    """Base of the SDK's errors: a run that ends with one fails with its text.

    `kind` is the WIT `run-error` case the error becomes.
    """

    kind: str = "other"

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message: str = str(message)

    def __str__(self) -> str:
        return self.message

    @property
    def retryable(self) -> bool:
        """Whether running the window again could help: False for
        `InvalidData` only, as the host decides."""
        return self.kind != "invalid-data"

    def context(self: _E, what: object) -> _E:
        """An error of the same class saying `"<what>: <message>"`."""
        cls = type(self)
        error = cls.__new__(cls)
        error.__dict__.update(self.__dict__)
        error.message = f"{what}: {self.message}"
        error.args = (error.message,)
        return error

    def to_wit(self, types: Any) -> Any:
        """The WIT `run-error` value for this error, built from `types` (the
        generated `wit_world.imports.types` module or `jobhost.wire`)."""
        if self.kind == "invalid-data":
            return types.RunError_InvalidData(self.message)
        if self.kind == "source-failed":
            return types.RunError_SourceFailed(self.message)
        return types.RunError_Other(self.message)


class InvalidData(Error):
    """The window's data cannot be reported on; retrying will not help until
    the data changes. Becomes WIT `invalid-data`."""

    kind = "invalid-data"


class SourceFailed(Error):
    """Reading the data source failed. Becomes WIT `source-failed`."""

    kind = "source-failed"


class ReportError(Error):
    """Any other failure, described for the person reading the receipt.
    Becomes WIT `other`."""

    kind = "other"


class MalformedBatch(SourceFailed):
    """A batch from the host is not well formed (`source-failed`).

    `column` names the column at fault (None when the fault is the batch's
    own, for example its number of columns); `row` is the source row (from
    0, counted across batches) or `entry` the dictionary entry at fault,
    where it can be told.
    """

    def __init__(self, message: str, column: Optional[str] = None, row: Optional[int] = None,
                 entry: Optional[int] = None) -> None:
        super().__init__(message)
        self.column = column
        self.row = row
        self.entry = entry


class ProgrammingError(Exception):
    """A mistake in the report's code or its query, which no retry mends.

    Not a `jobhost.Error`: raised out of `run`, it is an uncaught exception
    (a trap the host does not retry), where a `ReportError` would be
    retried to the same end. Catch it where a report means to (an optional
    column, say). `message` is its text; `retryable` is False.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message: str = str(message)

    def __str__(self) -> str:
        return self.message

    @property
    def retryable(self) -> bool:
        """False: the same code reads the same columns next time."""
        return False


class ColumnNotFound(ProgrammingError, KeyError):
    """A column was asked for by a name (or position) the batch does not
    have: a `KeyError`, not retried."""

    def __init__(self, message: str, column: object) -> None:
        super().__init__(message)
        self.column = column


class WrongKind(ProgrammingError, TypeError):
    """A column was asked for as another kind than it holds: a
    `TypeError`, not retried."""

    def __init__(self, message: str, column: str, kind: str, asked: str) -> None:
        super().__init__(message)
        self.column = column
        self.kind_found = kind
        self.kind_asked = asked


class SendFailed(ReportError):
    """`jobhost.send` was refused (`other` when not caught).

    `case` is the WIT `send-error` case (`unknown-destination`, `too-large`,
    `too-many-messages`, `invalid-content-type`) and `value` its payload.
    """

    def __init__(self, message: str, case: str, value: Any) -> None:
        super().__init__(message)
        self.case = case
        self.value = value

    @classmethod
    def from_wit(cls, error: Any) -> "SendFailed":
        """The error for a WIT `send-error` value (generated or `jobhost.wire`)."""
        case = _bindings.case_of(error, _bindings.SEND_ERROR)
        value = getattr(error, "value", None)
        if case == "unknown-destination":
            return cls(f"unknown destination `{value}`", case, value)
        if case == "too-large":
            return cls(f"body is larger than {value} bytes", case, value)
        if case == "too-many-messages":
            return cls(f"the run already staged the maximum of {value} messages", case, value)
        if case == "invalid-content-type":
            return cls(f"invalid content type `{value}`", case, value)
        return cls(f"send failed: {error!r}", "unknown", value)


def source_error_text(error: Any) -> str:
    """The text of a WIT `source-error` value, as the reference report
    words it."""
    case = _bindings.case_of(error, _bindings.SOURCE_ERROR)
    value = getattr(error, "value", None)
    if case == "not-configured":
        return "the job declares no data source"
    if case == "query-failed":
        return f"query failed: {value}"
    if case == "type-mismatch":
        return f"type mismatch: {value}"
    if case == "invalid-state":
        return f"invalid state: {value}"
    if case == "other":
        return str(value)
    return f"source error: {error!r}"
