"""jobhost: write jobhost report components in Python.

A report is a `Report` subclass whose `run(ctx)` reads the window's rows
from `open()`, stages messages with `send`, and returns an `Output`; one
line, `WitWorld = jobhost.export(MyReport)`, lets componentize-py find it
(world `reporter` or `describing-reporter` of `wit/report.wit`).

```python
import jobhost

class Orders(jobhost.Report):
    def run(self, ctx):
        orders = 0
        with jobhost.open() as source:
            for batch in source.batches():
                orders += sum(1 for q in batch.integers("quantity") if q is not None)
        text = f"{orders} orders in {ctx.window.key}"
        for destination in ctx.destinations:
            jobhost.send(destination, text, "text/plain")
        jobhost.log.info(text)
        return jobhost.Output(text)

WitWorld = jobhost.export(Orders)
```

Everything here is plain Python (stdlib only) and works natively too: the
generated bindings are used only inside a component, and
`jobhost.testing` builds batches and a fake host for unit tests.
"""

from __future__ import annotations

from . import log, testing, wire, zone
from ._host import IN_COMPONENT
from .batch import Batch, Row
from .errors import (
    ColumnNotFound,
    Error,
    InvalidData,
    MalformedBatch,
    ProgrammingError,
    ReportError,
    SendFailed,
    SourceFailed,
    WrongKind,
)
from .outbox import send
from .report import Report, export
from .source import BATCH_ROWS, Source
from .source import open as open  # exported, though not by a star import (see __all__)
from .values import ColumnInfo, ColumnKind, Context, Instant, Output, Window
from .zone import OffsetSpan

__version__ = "0.1.1"

__all__ = [
    "BATCH_ROWS",
    "Batch",
    "ColumnInfo",
    "ColumnKind",
    "ColumnNotFound",
    "Context",
    "Error",
    "IN_COMPONENT",
    "Instant",
    "InvalidData",
    "MalformedBatch",
    "OffsetSpan",
    "Output",
    "ProgrammingError",
    "Report",
    "ReportError",
    "Row",
    "SendFailed",
    "Source",
    "SourceFailed",
    "Window",
    "WrongKind",
    "export",
    "log",
    "send",
    "testing",
    "wire",
    "zone",
]
