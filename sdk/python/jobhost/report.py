"""The entry point: subclass `Report`, and export it in one line.

```python
import jobhost

class Rows(jobhost.Report):
    def run(self, ctx: jobhost.Context) -> jobhost.Output:
        with jobhost.open() as source:
            rows = sum(len(b) for b in source.batches())
        return jobhost.Output(f"{rows} rows in {ctx.window.key}")

WitWorld = jobhost.export(Rows)
```

componentize-py looks for a class called `WitWorld` in the app module (the
world-level exports `run` and `describe` become its methods) and creates
one instance of it per export while it pre-initialises the component.
`export` returns such a class; the `Report` itself is created on the first
call, at run time, and the same instance serves `run` and then `describe`
(the host calls both on one component instance), so `run` can leave in
`self` what `describe` needs.

Errors: `run` raising a `jobhost.Error` (`InvalidData`, `SourceFailed`,
`ReportError`) returns the matching WIT `run-error`; any other exception is
left uncaught, so componentize-py prints its traceback to stderr and traps
(not retried): the SDK's `ColumnNotFound` and `WrongKind`, mistakes no retry
mends, are such exceptions.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Type, Union

from . import _host, zone
from .errors import Error
from .values import Context, Output

__all__ = ["Report", "export"]


class Report:
    """A report: override `run` (and, for a digest, `describe`)."""

    def run(self, ctx: Context) -> Output:
        """Computes the report for `ctx.window`. Return an `Output` (a `str`
        is taken as `Output(str)`); raise a `jobhost.Error` to fail the run."""
        raise NotImplementedError("a jobhost.Report must define run(self, ctx)")

    def describe(self, ctx: Context, output: Output) -> Optional[str]:
        """What the job's language model is asked to describe, called right
        after a successful `run` on the same instance; None (the default)
        when there is nothing to describe."""
        return None


def _output(value: Any) -> Output:
    if isinstance(value, Output):
        output = value
    elif isinstance(value, str):
        output = Output(value)
    else:
        raise TypeError(f"Report.run must return a jobhost.Output or a str, not {type(value).__name__}")
    if not isinstance(output.summary, str):
        raise TypeError(f"Output.summary must be a str, not {type(output.summary).__name__}")
    if output.cursor is not None and not isinstance(output.cursor, str):
        raise TypeError(f"Output.cursor must be a str or None, not {type(output.cursor).__name__}")
    return output


class _Exported:
    """Holds the one `Report` instance a component instance uses."""

    def __init__(self, factory: Callable[[], Report]) -> None:
        self._factory = factory
        self._instance: Optional[Report] = None

    def instance(self) -> Report:
        if self._instance is None:
            self._instance = self._factory()
        return self._instance

    def run(self, wit_ctx: Any) -> Any:
        ctx = Context.from_wit(wit_ctx)
        zone.begin_run(ctx.window.timezone)
        report = self.instance()
        try:
            output = _output(report.run(ctx))
        except Error as e:
            raise _host.ERR(e.to_wit(_host.TYPES)) from None
        return _host.TYPES.Report(summary=output.summary, cursor=output.cursor)

    def describe(self, wit_ctx: Any, wit_report: Any) -> Optional[str]:
        ctx = Context.from_wit(wit_ctx)
        text = self.instance().describe(ctx, Output(wit_report.summary, wit_report.cursor))
        if text is not None and not isinstance(text, str):
            raise TypeError(f"Report.describe must return a str or None, not {type(text).__name__}")
        return text


def export(report: Union[Type[Report], Callable[[], Report]]) -> type:
    """The class componentize-py needs for a report: write
    `WitWorld = jobhost.export(MyReport)` at the top level of the app module.

    `report` is the `Report` subclass (or any callable making one); it is
    instantiated once, on the first call."""
    exported = _Exported(report)

    class WitWorld:
        """The world's exports, forwarding to the report."""

        def run(self, ctx: Any) -> Any:
            return exported.run(ctx)

        def describe(self, ctx: Any, report: Any) -> Optional[str]:
            return exported.describe(ctx, report)

    WitWorld.__qualname__ = f"WitWorld[{getattr(report, '__name__', 'report')}]"
    WitWorld._jobhost_exported = exported  # type: ignore[attr-defined]
    return WitWorld
