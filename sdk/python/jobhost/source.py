"""The run's data source: `open()` it, read its `columns()`, iterate its
`batches()`.

```python
with jobhost.open() as source:
    for batch in source.batches():
        ...
```

The cursor is closed when the batches are exhausted, when `close()` is
called or when the `with` block ends, whichever comes first. One source may
be open at a time (the host refuses a second `open` while one is).
"""

from __future__ import annotations

from typing import Any, Iterator, List, Optional

from . import _host
from .batch import Batch
from .errors import SourceFailed, source_error_text
from .values import ColumnInfo

__all__ = ["BATCH_ROWS", "Source", "open"]

BATCH_ROWS = 8192
"""How many rows `Source.batches()` asks for per batch."""

_MAX_ROWS = 2**32 - 1


class Source:
    """An open query over the window's rows."""

    def __init__(self, cursor: Any, backend: Any) -> None:
        """Internal: use `jobhost.open()`."""
        self._cursor: Optional[Any] = cursor
        self._backend = backend
        try:
            columns = cursor.columns()
        except BaseException:
            self.close()
            raise
        self._columns: List[ColumnInfo] = [ColumnInfo.from_wit(c) for c in columns]
        self._rows_read = 0

    def columns(self) -> List[ColumnInfo]:
        """The result's columns, in order."""
        return list(self._columns)

    def rows_read(self) -> int:
        """How many rows the batches read so far held."""
        return self._rows_read

    def batches(self) -> Iterator[Batch]:
        """The rows, `BATCH_ROWS` asked for per batch. Raises `SourceFailed`
        when the host cannot answer or a batch is malformed."""
        return self.batches_of(BATCH_ROWS)

    def batches_of(self, max_rows: int) -> Iterator[Batch]:
        """The rows, at most `max_rows` per batch (the host may send fewer;
        0 is taken as 1)."""
        if not isinstance(max_rows, int) or isinstance(max_rows, bool) or not 0 <= max_rows <= _MAX_ROWS:
            raise ValueError(f"max_rows must be an integer from 0 to {_MAX_ROWS}, got {max_rows!r}")
        return self._batches(max_rows)

    def _batches(self, max_rows: int) -> Iterator[Batch]:
        err = _host.ERR
        columns = self._columns
        while self._cursor is not None:
            try:
                wit_batch = self._cursor.next_batch(max_rows)
            except err as e:
                self.close()
                raise SourceFailed(source_error_text(e.value)) from None
            if wit_batch is None:
                self.close()
                return
            try:
                batch = Batch.from_wit(columns, wit_batch, self._rows_read)
            except BaseException:
                self.close()
                raise
            del wit_batch
            self._rows_read += len(batch)
            yield batch

    def __iter__(self) -> Iterator[Batch]:
        return self.batches()

    @property
    def closed(self) -> bool:
        """Whether the cursor has been closed."""
        return self._cursor is None

    def close(self) -> None:
        """Closes the cursor (once; later calls do nothing)."""
        cursor, self._cursor = self._cursor, None
        if cursor is not None:
            self._backend.close(cursor)

    def __enter__(self) -> "Source":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def open() -> Source:  # noqa: A001 - the SDK's name, as in the Rust SDK
    """Runs the job's query for this run's window. Raises `SourceFailed`
    when the host cannot (for example when the job declares no source)."""
    backend = _host.current()
    try:
        cursor = backend.open()
    except _host.ERR as e:
        raise SourceFailed(source_error_text(e.value)) from None
    return Source(cursor, backend)
