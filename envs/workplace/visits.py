"""Visits per day, per traffic source and engaged, counted once per world for the analytics tools.

No tool writes the analytics table, so its counts are the world's: a count over a date range
is a slice of the sorted days (two bisections) instead of a ``GROUP BY`` over every visit
(~60-90 us for the default world's 442), and a total per source is a difference of
running sums. The counts themselves come from SQL when the world is built, so they are SQL's;
the tools count by SQL again when rows changed behind their back (``SessionRows.indexed``).
Dates are text, compared as SQLite compares text (UTF-8 byte order is code point order, which
Python's ``str`` comparison follows).
"""

from __future__ import annotations

import sqlite3
from bisect import bisect_left, bisect_right
from itertools import accumulate
from typing import Any


class Visits:
    """The analytics table's visit counts by day (ascending) and traffic source.

    Args:
        db: The world's database, as built.
    """

    def __init__(self, db: sqlite3.Connection):
        sql = "SELECT date_of_visit, traffic_source, count(*), sum(user_engaged = 1) FROM analytics GROUP BY date_of_visit, traffic_source"
        groups = db.execute(sql).fetchall()
        self.days: list[str] = sorted({g[0] for g in groups})
        at = {d: i for i, d in enumerate(self.days)}
        sources = sorted({g[1] for g in groups})
        self.source_visits: dict[str, list[int]] = {s: [0] * len(self.days) for s in sources}  # per day
        self.engaged: list[int] = [0] * len(self.days)
        for day, source, n, n_engaged in groups:
            self.source_visits[source][at[day]] = n
            self.engaged[at[day]] += n_engaged
        self.visits: list[int] = [sum(v) for v in zip(*self.source_visits.values())] if sources else []
        self._before = {s: [0, *accumulate(v)] for s, v in self.source_visits.items()}  # visits before each day

    def span(self, lo: str | None, hi: str | None) -> range:
        """Positions of the days from ``lo`` to ``hi`` (inclusive; None is open; empty when ``lo`` > ``hi``)."""
        start = bisect_left(self.days, lo) if lo else 0
        return range(start, max(start, bisect_right(self.days, hi) if hi else len(self.days)))

    def by_date(self, counts: list[int], lo: str | None, hi: str | None) -> dict[str, Any]:
        """``counts`` (one per day) in the range, in total and per day, days without any left out."""
        days = {self.days[i]: counts[i] for i in self.span(lo, hi) if counts[i]}
        return {"total": sum(days.values()), "by_date": days}

    def by_source(self, lo: str | None, hi: str | None) -> dict[str, int]:
        """Visits per traffic source in the range, sources in text order, those without visits left out."""
        span = self.span(lo, hi)
        counts = {s: before[span.stop] - before[span.start] for s, before in self._before.items()}
        return {s: n for s, n in counts.items() if n}
