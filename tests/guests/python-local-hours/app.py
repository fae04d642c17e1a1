"""A test-only report in Python: counts the window's rows by the local hour
of their `ts` (Unix seconds) in the window's zone, with
`ctx.window.local`, and no zone data of its own. Its twin in Rust,
`tests/guests/local-hours`, must give the same summary byte for byte: one
line per hour that has rows, in time order, `<the hour's start, RFC 3339>
<rows>`.

Build: as `tests/guests/python-probe/README.md` says, with this folder.
"""

import jobhost


class LocalHours(jobhost.Report):
    def run(self, ctx: jobhost.Context) -> jobhost.Output:
        hours = []  # [hour, rows], in time order
        with jobhost.open() as source:
            for batch in source.batches():
                for ts in batch.integers("ts"):
                    if ts is None:
                        continue
                    hour = ctx.window.local(ts).replace(minute=0, second=0, microsecond=0).isoformat()
                    if hours and hours[-1][0] == hour:
                        hours[-1][1] += 1
                    else:
                        hours.append([hour, 1])
        return jobhost.Output("\n".join(f"{h} {n}" for h, n in hours))


WitWorld = jobhost.export(LocalHours)
