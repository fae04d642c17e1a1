"""`ctx.window.local` natively: from the machine's zoneinfo by default, or
from the spans a test gives, around the nights Europe/Berlin's clocks go
back and forward, at the edges of a span, and for an instant outside the
spans kept (asked for again)."""

from __future__ import annotations

import datetime as dt
import sys
import unittest
from pathlib import Path
from typing import List, TypedDict

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "sdk" / "python"))

import jobhost  # noqa: E402
from jobhost import Instant, OffsetSpan, testing  # noqa: E402

SPRING_2026 = 1_774_746_000  # 2026-03-29T01:00:00Z
AUTUMN_2026 = 1_792_890_000  # 2026-10-25T01:00:00Z
SPRING_2027 = 1_806_195_600  # 2027-03-28T01:00:00Z
AUTUMN_2025 = 1_761_440_400  # 2025-10-26T01:00:00Z

BERLIN = [
    OffsetSpan(Instant(AUTUMN_2025), Instant(SPRING_2026), 3600),
    OffsetSpan(Instant(SPRING_2026), Instant(AUTUMN_2026), 7200),
    OffsetSpan(Instant(AUTUMN_2026), Instant(SPRING_2027), 3600),
]



class Day(TypedDict):
    job: str
    label: str
    start: int
    end: int
    timezone: str


# The Berlin day 2026-10-25: 25 hours.
DAY = Day(job="signups", label="2026-10-25", start=1_792_879_200, end=1_792_969_200,
          timezone="Europe/Berlin")


class Probe(jobhost.Report):
    """Reads local times of the instants in the param `at` (comma-separated
    Unix seconds) and returns them."""

    def run(self, ctx: jobhost.Context) -> jobhost.Output:
        ats = [int(a) for a in (ctx.param("at") or "").split(",") if a]
        return jobhost.Output(" ".join(ctx.window.local(a).isoformat() for a in ats))


def local(host: testing.Host, *seconds: int) -> List[str]:
    result = host.run(Probe, params={"at": ",".join(str(s) for s in seconds)}, **DAY)
    assert result.output is not None, result.error
    return result.output.summary.split(" ")


class ZoneTest(unittest.TestCase):
    def test_the_hour_clocks_go_back_reads_twice_with_two_offsets(self) -> None:
        for spans in (None, BERLIN):
            with self.subTest(spans="zoneinfo" if spans is None else "given"):
                host = testing.Host(zone_spans=spans)
                self.assertEqual(local(host, DAY["start"], AUTUMN_2026 - 3600, AUTUMN_2026 - 1,
                                       AUTUMN_2026, AUTUMN_2026 + 3599, AUTUMN_2026 + 3600,
                                       DAY["end"] - 1, DAY["end"]), [
                    "2026-10-25T00:00:00+02:00",
                    "2026-10-25T02:00:00+02:00",
                    "2026-10-25T02:59:59+02:00",
                    "2026-10-25T02:00:00+01:00",
                    "2026-10-25T02:59:59+01:00",
                    "2026-10-25T03:00:00+01:00",
                    "2026-10-25T23:59:59+01:00",
                    "2026-10-26T00:00:00+01:00",
                ])
                # One request, for the window: every instant was in its spans.
                self.assertEqual(host.zone_requests, [(Instant(DAY["start"]), Instant(DAY["end"]))])

    def test_the_two_half_past_twos_differ(self) -> None:
        ctx = testing.context(**DAY)
        with testing.Host(zone_spans=BERLIN).installed():
            first = ctx.window.local(Instant(AUTUMN_2026 - 1800))
            second = ctx.window.local(Instant(AUTUMN_2026 + 1800))
        self.assertEqual((first.hour, first.minute), (second.hour, second.minute))
        self.assertNotEqual(first, second)
        self.assertEqual(second - first, dt.timedelta(hours=1))
        self.assertEqual(first.utcoffset(), dt.timedelta(hours=2))
        self.assertEqual(ctx.window.local_date(AUTUMN_2026 + 1800), dt.date(2026, 10, 25))

    def test_the_hour_clocks_go_forward_is_never_read(self) -> None:
        ctx = testing.context(timezone="Europe/Berlin", start=1_774_738_800, end=1_774_821_600)
        for spans in (None, BERLIN):
            with self.subTest(spans="zoneinfo" if spans is None else "given"):
                with testing.Host(zone_spans=spans).installed():
                    self.assertEqual(ctx.window.local(SPRING_2026 - 1).isoformat(), "2026-03-29T01:59:59+01:00")
                    self.assertEqual(ctx.window.local(SPRING_2026).isoformat(), "2026-03-29T03:00:00+02:00")
                    hours = [ctx.window.local(ctx.window.start.seconds + h * 3600).hour for h in range(23)]
                self.assertNotIn(2, hours)

    def test_an_instant_outside_the_spans_kept_is_asked_for_again(self) -> None:
        ctx = testing.context(**DAY)
        host = testing.Host(zone_spans=BERLIN)
        with host.installed():
            ctx.window.local(AUTUMN_2026)
            self.assertEqual(len(host.zone_requests), 1)
            # The winter span came back whole with the window's: no call.
            self.assertEqual(ctx.window.local(SPRING_2027 - 1).isoformat(), "2027-03-28T01:59:59+01:00")
            self.assertEqual(len(host.zone_requests), 1)
            a_year_back = AUTUMN_2025 + 86_400
            self.assertEqual(ctx.window.local(a_year_back).isoformat(), "2025-10-27T02:00:00+01:00")
            self.assertEqual(host.zone_requests[1], (Instant(a_year_back), Instant(a_year_back)))
            ctx.window.local(AUTUMN_2025)
            self.assertEqual(len(host.zone_requests), 2, "then kept")
            with self.assertRaises(jobhost.SourceFailed):
                ctx.window.local(SPRING_2027)

    def test_instants_seconds_and_aware_datetimes_are_accepted_naive_ones_refused(self) -> None:
        ctx = testing.context(**DAY)
        aware = dt.datetime(2026, 10, 25, 1, 30, 0, 250_000, tzinfo=dt.timezone.utc)
        with testing.Host(zone_spans=BERLIN).installed():
            self.assertEqual(ctx.window.local(aware).isoformat(), "2026-10-25T02:30:00.250000+01:00")
            self.assertEqual(ctx.window.local(Instant(AUTUMN_2026 + 1800, 250_000_000)),
                             ctx.window.local(aware))
            with self.assertRaises(TypeError):
                ctx.window.local(aware.replace(tzinfo=None))
            with self.assertRaises(TypeError):
                ctx.window.local(1.5)  # type: ignore[arg-type]

    def test_without_a_fake_host_the_machines_zoneinfo_answers(self) -> None:
        ctx = testing.context(**DAY)
        self.assertEqual(ctx.window.local(AUTUMN_2026).isoformat(), "2026-10-25T02:00:00+01:00")
        kathmandu = testing.context(timezone="Asia/Kathmandu")
        self.assertEqual(kathmandu.window.local(0).isoformat(), "1970-01-01T05:30:00+05:30")
        with self.assertRaises(jobhost.ProgrammingError):
            testing.context(timezone="Mars/Olympus_Mons").window.local(0)


if __name__ == "__main__":
    unittest.main()
