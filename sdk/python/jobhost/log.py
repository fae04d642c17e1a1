"""Diagnostics, shown on the host's standard error (each line prefixed;
control characters escaped). A message never fails the run: one past the
job's log limit is dropped whole, and counted.

```python
jobhost.log.info(f"{rows} rows read")
```
"""

from __future__ import annotations

from . import _host

__all__ = ["trace", "debug", "info", "warn", "error"]


def _emit(level: str, message: object) -> None:
    _host.current().emit(level, message if isinstance(message, str) else str(message))


def trace(message: str) -> None:
    """Writes a fine-grained tracing message."""
    _emit("trace", message)


def debug(message: str) -> None:
    """Writes a message useful when debugging."""
    _emit("debug", message)


def info(message: str) -> None:
    """Writes a message about normal progress."""
    _emit("info", message)


def warn(message: str) -> None:
    """Writes a message about something unexpected that does not stop the run."""
    _emit("warn", message)


def error(message: str) -> None:
    """Writes a message about a failure."""
    _emit("error", message)
