"""The reference daily sales digest, in Python (world `describing-reporter`).

The same report as the Rust reference `guest-report`: it reads the window's
sales (`ts`, `region`, `product`, `quantity`, `amount`), stages the digest
as compact JSON for its destinations, returns a one-paragraph text as the
run's summary (with the latest sale time as the cursor) and leaves for
`describe` the prompt a language model is asked to describe. Given the same
rows and parameters, it gives the same summary, message bytes and prompt.

Parameters: `top` (how many products the digest lists; all by default) and
`destination` (stage for this declared destination only; all by default).
"""

from typing import List, Optional

import jobhost
from sales import digest as sales_digest
from sales.summary import WindowInfo

CONTENT_TYPE = "application/json"
"""The content type of the staged digest."""


def destinations(ctx: jobhost.Context) -> List[str]:
    """Where to stage the digest: the destination the `destination`
    parameter names (which must be declared), else every declared one."""
    name = ctx.param("destination")
    if name is None:
        return list(ctx.destinations)
    if name in ctx.destinations:
        return [name]
    declared = ", ".join(ctx.destinations) if ctx.destinations else "none"
    raise jobhost.ReportError(
        f"parameter `destination` names `{name}`, which the job does not declare (declared: {declared})")


def read_source() -> sales_digest.Digest:
    """Opens the source and folds every batch into a digest."""
    with jobhost.open() as source:
        digest = sales_digest.Digest(source.columns())
        for batch in source.batches():
            digest.add_batch(batch)
    return digest


class SalesDigest(jobhost.Report):
    """The daily sales digest."""

    def __init__(self) -> None:
        self.prompt: Optional[str] = None

    def run(self, ctx: jobhost.Context) -> jobhost.Output:
        top_value = ctx.param("top")
        top = None if top_value is None else sales_digest.parse_top(top_value)
        targets = destinations(ctx)

        digest = read_source()
        summary = digest.finish(WindowInfo(ctx.window.key, ctx.window.label, ctx.window.timezone), top)
        last = summary.totals.last_sale
        body = summary.to_json().encode("utf-8")

        for name in targets:
            try:
                jobhost.send(name, body, CONTENT_TYPE)
            except jobhost.SendFailed as e:
                raise jobhost.ReportError(f"staging the digest for `{name}` failed: {e}") from None
        jobhost.log.info(
            f"sales digest of {ctx.window.key} over {digest.rows} rows ({summary.totals.orders} orders, "
            f"{summary.skipped_rows} skipped), staged for {len(targets)} destination(s)")
        self.prompt = summary.to_prompt()
        return jobhost.Output(summary.to_text(), None if last is None else str(last))

    def describe(self, ctx: jobhost.Context, output: jobhost.Output) -> Optional[str]:
        prompt, self.prompt = self.prompt, None
        return prompt


WitWorld = jobhost.export(SalesDigest)
