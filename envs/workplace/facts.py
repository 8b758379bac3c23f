"""Read-only views of a world that task templates draw parameters and ground truth from.

Templates never search through the tools (whose results are paginated): they read the world's
rows directly, so the ground truth names every row a request covers, however many there are.
"""

from __future__ import annotations

import bisect
import functools
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

import numpy as np

from textgym.envs.workplace import schema as S
from textgym.envs.workplace.world import World


@dataclass(frozen=True)
class Person:
    name: str
    email: str

    @property
    def first(self) -> str:
        return self.name.split()[0]


class Facts:
    """Indexes over one world's rows (built once per world and cached)."""

    def __init__(self, world: World):
        rows = world.rows
        self.people = [Person(n, e) for n, e in world.people]
        self.by_email = {p.email: p for p in self.people}
        self.inbox = [r for r in rows["emails"] if r["inbox/outbox"] == "inbox" and r["sender"] in self.by_email]
        self.inbox_by_sender: dict[str, list[dict]] = defaultdict(list)
        for r in self.inbox:
            self.inbox_by_sender[r["sender"]].append(r)
        for mails in self.inbox_by_sender.values():
            mails.sort(key=lambda r: (r["sent_datetime"], r["email_id"]))
        self.events = sorted(rows["calendar"], key=lambda r: (r["event_start"], r["event_id"]))
        self.future_events = [e for e in self.events if e["event_start"] >= S.NOW_TEXT]
        self.events_by_day: dict[str, list[dict]] = defaultdict(list)
        for e in self.events:
            self.events_by_day[e["event_start"][:10]].append(e)
        self.visits = rows["analytics"]
        self.visits_by_day: dict[str, list[dict]] = defaultdict(list)
        for v in self.visits:
            self.visits_by_day[v["date_of_visit"]].append(v)
        self.visit_days = sorted(self.visits_by_day)
        self.tasks = [t for t in rows["project_tasks"] if t["assigned_to_email"] in self.by_email]
        self.customers = [c for c in rows["customers"] if c["assigned_to_email"] in self.by_email]

    # ----- people -----

    def person(self, rng: np.random.Generator, exclude: tuple[str, ...] = ()) -> Person:
        pool = [p for p in self.people if p.email not in exclude]
        return pool[int(rng.integers(len(pool)))]

    def people_sample(self, rng: np.random.Generator, k: int) -> list[Person]:
        return [self.people[int(i)] for i in rng.permutation(len(self.people))[:k]]

    # ----- calendar -----

    def day_events(self, day: str) -> list[dict]:
        return self.events_by_day.get(day, [])

    def first_free_slot(self, day: str, minutes: int) -> datetime | None:
        """The earliest start (on the half hour) in working hours that overlaps no event that day."""
        busy = []
        for e in self.day_events(day):
            start = datetime.fromisoformat(e["event_start"])
            busy.append((start, start + timedelta(minutes=int(e["duration"]))))
        d = date.fromisoformat(day)
        slot = datetime(d.year, d.month, d.day, S.WORK_START_HOUR)
        end_of_day = datetime(d.year, d.month, d.day, S.WORK_END_HOUR)
        while slot + timedelta(minutes=minutes) <= end_of_day:
            if all(slot + timedelta(minutes=minutes) <= b0 or slot >= b1 for b0, b1 in busy):
                return slot
            slot += timedelta(minutes=30)
        return None

    # ----- analytics -----

    def visits_between(self, lo: str, hi: str, source: str | None = None) -> list[dict]:
        days = self.visit_days[bisect.bisect_left(self.visit_days, lo) : bisect.bisect_right(self.visit_days, hi)]
        return [v for d in days for v in self.visits_by_day[d] if source is None or v["traffic_source"] == source]

    def date_range(self, rng: np.random.Generator, min_days: int = 3, max_days: int = 21) -> tuple[str, str]:
        days = self.visit_days
        length = int(rng.integers(min_days, max_days + 1))
        start = int(rng.integers(max(1, len(days) - length)))
        return days[start], days[min(len(days) - 1, start + length - 1)]


@functools.lru_cache(maxsize=8)
def facts(world: World) -> Facts:
    return Facts(world)


def future_weekday(rng: np.random.Generator, within: int = 20) -> str:
    """A working day after today, as YYYY-MM-DD."""
    while True:
        d = S.TODAY + timedelta(days=int(rng.integers(1, within + 1)))
        if d.weekday() < 5:
            return d.isoformat()


def pick(rng: np.random.Generator, seq: Any) -> Any:
    return seq[int(rng.integers(len(seq)))]


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """One ground-truth tool call in the task format."""
    return {"name": name, "arguments": arguments}


def tomorrow() -> str:
    return (S.TODAY + timedelta(days=1)).isoformat()


def at(day: str, hour: int, minute: int = 0) -> str:
    """``day`` at ``hour:minute`` in the datetime format the tools store."""
    d = date.fromisoformat(day)
    return S.fmt_datetime(datetime(d.year, d.month, d.day, hour, minute))
