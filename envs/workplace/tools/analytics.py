"""The website analytics tools: a visitor's visits, visit counts by day and source, plots."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textgym.envs.workplace import schema as S
from textgym.envs.workplace.tools.arguments import Day, canonical_date, date_bounds
from textgym.envs.workplace.tools.records import SearchFilter, SessionRecords
from textgym.error import ToolError

if TYPE_CHECKING:
    from textgym.envs.workplace.visits import Visits


class AnalyticsTools(SessionRecords):
    """The ``analytics_*`` tools; counts come from the world's visit table while it describes the database."""

    @staticmethod
    def _range(time_min: str | None, time_max: str | None) -> SearchFilter:
        where = SearchFilter()
        where.dates("date_of_visit", time_min, time_max)
        return where

    def _count_by_date(self, time_min: str | None, time_max: str | None, extra: str = "", params: tuple = ()) -> dict[str, Any]:
        where = self._range(time_min, time_max)
        if extra:
            where.add(extra, *params)
        rows = self.db.execute(
            f"SELECT date_of_visit, count(*) FROM analytics{where.sql} GROUP BY date_of_visit ORDER BY date_of_visit",
            where.params,
        ).fetchall()
        return {"total": sum(n for _, n in rows), "by_date": dict(rows)}

    def _visits(self) -> Visits | None:
        """The world's visit counts, or None when SQL must count (rows changed behind the tools' back)."""
        return self.world.visits if self.rows.indexed() else None

    def analytics_get_visitor_information_by_id(self, visitor_id: str) -> list[dict[str, Any]]:
        """Returns every recorded visit of a visitor.

        Args:
            visitor_id: ID of the visitor.
        """
        cols = S.ANALYTICS.select_list
        rows = self.db.execute(
            f"SELECT {cols} FROM analytics WHERE visitor_id = ? ORDER BY date_of_visit", (visitor_id.strip(),)
        ).fetchall()
        if not rows:
            raise ToolError(f"no visits by visitor {visitor_id!r}")
        return [dict(zip(S.ANALYTICS.names, r)) for r in rows]

    def analytics_create_plot(self, time_min: Day, time_max: Day, value_to_plot: S.PlotValue, plot_type: S.PlotType) -> dict[str, Any]:
        """Plots an analytics value over a date range and saves the plot; returns its file path.

        Args:
            time_min: Start date of the range, YYYY-MM-DD.
            time_max: End date of the range, YYYY-MM-DD.
            value_to_plot: Value to plot.
            plot_type: Type of plot.
        """
        lo, hi = canonical_date(time_min), canonical_date(time_max)
        if lo > hi:
            raise ToolError(f"time_min {lo} is after time_max {hi}")
        path = f"plots/{lo}_{hi}_{value_to_plot}_{plot_type}.png"
        self._insert(S.PLOTS, {"file_path": path})
        return {"status": "created", "file_path": path}

    def analytics_total_visits_count(self, time_min: Day | None = None, time_max: Day | None = None) -> dict[str, Any]:
        """Returns the number of visits in a date range, in total and per day.

        Args:
            time_min: Start date of the range, YYYY-MM-DD (inclusive).
            time_max: End date of the range, YYYY-MM-DD (inclusive).
        """
        lo, hi = date_bounds(time_min, time_max)
        visits = self._visits()
        return visits.by_date(visits.visits, lo, hi) if visits else self._count_by_date(lo, hi)

    def analytics_engaged_users_count(self, time_min: Day | None = None, time_max: Day | None = None) -> dict[str, Any]:
        """Returns the number of engaged visits in a date range, in total and per day.

        Args:
            time_min: Start date of the range, YYYY-MM-DD (inclusive).
            time_max: End date of the range, YYYY-MM-DD (inclusive).
        """
        lo, hi = date_bounds(time_min, time_max)
        visits = self._visits()
        return visits.by_date(visits.engaged, lo, hi) if visits else self._count_by_date(lo, hi, "user_engaged = 1")

    def analytics_traffic_source_count(
        self, time_min: Day | None = None, time_max: Day | None = None, traffic_source: S.TrafficSource | None = None
    ) -> dict[str, Any]:
        """Returns the number of visits from a traffic source in a date range (every source when omitted).

        Args:
            time_min: Start date of the range, YYYY-MM-DD (inclusive).
            time_max: End date of the range, YYYY-MM-DD (inclusive).
            traffic_source: Traffic source to count.
        """
        lo, hi = date_bounds(time_min, time_max)
        visits = self._visits()
        if traffic_source is not None:
            if visits:
                counts = visits.source_visits.get(traffic_source, [0] * len(visits.days))
                found = visits.by_date(counts, lo, hi)
            else:
                found = self._count_by_date(lo, hi, "traffic_source = ?", (traffic_source,))
            return {"traffic_source": traffic_source, **found}
        if visits:
            rows = visits.by_source(lo, hi)
        else:
            where = self._range(lo, hi)
            sql = f"SELECT traffic_source, count(*) FROM analytics{where.sql} GROUP BY traffic_source ORDER BY traffic_source"
            rows = dict(self.db.execute(sql, where.params).fetchall())
        counts = dict.fromkeys(S.TRAFFIC_SOURCES, 0) | rows
        return {"by_source": counts, "total": sum(counts.values())}

    def analytics_get_average_session_duration(self, time_min: Day | None = None, time_max: Day | None = None) -> dict[str, Any]:
        """Returns the average session duration in seconds over a date range.

        Args:
            time_min: Start date of the range, YYYY-MM-DD (inclusive).
            time_max: End date of the range, YYYY-MM-DD (inclusive).
        """
        where = self._range(time_min, time_max)
        avg, n = self.db.execute(f"SELECT avg(session_duration_seconds), count(*) FROM analytics{where.sql}", where.params).fetchone()
        return {"average_session_duration_seconds": None if avg is None else round(avg, 2), "visits": n}
