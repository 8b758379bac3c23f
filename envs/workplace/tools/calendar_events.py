"""The calendar tools: read, search, create, update and delete events."""

from __future__ import annotations

from typing import Any, Literal

from textgym.envs.workplace import schema as S
from textgym.envs.workplace.tools.arguments import (
    Email,
    Minutes,
    Moment,
    Page,
    PageSize,
    canonical_datetime,
    check_email,
    nonempty_text,
    whole_minutes,
)
from textgym.envs.workplace.tools.records import SessionRecords

EVENT_FIELDS = {
    "event_name": nonempty_text,
    "participant_email": check_email,
    "event_start": canonical_datetime,
    "duration": whole_minutes,
}


class CalendarTools(SessionRecords):
    """The ``calendar_*`` tools."""

    def calendar_get_event_information_by_id(
        self,
        event_id: str,
        field: Literal["event_id", "event_name", "participant_email", "event_start", "duration"] | None = None,
    ) -> dict[str, Any]:
        """Returns an event by its ID: one field, or the whole event when field is omitted.

        Args:
            event_id: 8-digit ID of the event.
            field: Field to return.
        """
        return self._get(S.CALENDAR, event_id, field)

    def calendar_search_events(
        self,
        query: str = "",
        time_min: Moment | None = None,
        time_max: Moment | None = None,
        page: Page = 1,
        page_size: PageSize = 10,
    ) -> dict[str, Any]:
        """Searches calendar events in start order; every word of the query must appear in the event name or participant email.

        Args:
            query: Words to search for (empty matches every event).
            time_min: Lower bound (inclusive) for an event's end, as YYYY-MM-DD HH:MM:SS.
            time_max: Upper bound (inclusive) for an event's start, as YYYY-MM-DD HH:MM:SS.
            page: Page number of results, from 1.
            page_size: Number of events per page.
        """
        where = self._where(S.CALENDAR)
        where.words(query)
        if time_min:  # served by the index on the end: few events end after a given time
            where.add(f"{S.EVENT_END} >= ?", canonical_datetime(time_min))
            where.narrowed = True
        if time_max:
            where.add("event_start <= ?", canonical_datetime(time_max))
        return self._page(S.CALENDAR, where, page, page_size, "events")

    def calendar_create_event(self, event_name: str, participant_email: Email, event_start: Moment, duration: Minutes) -> dict[str, Any]:
        """Creates a new event with one participant.

        Args:
            event_name: Name of the event.
            participant_email: Email address of the participant.
            event_start: Start of the event as YYYY-MM-DD HH:MM:SS.
            duration: Duration of the event in minutes.
        """
        start = canonical_datetime(event_start)
        event_id = self._create(
            S.CALENDAR,
            {
                "event_name": nonempty_text(event_name),
                "participant_email": participant_email.strip(),
                "event_start": start,
                "duration": duration,
            },
        )
        return {"status": "created", "event_id": event_id}

    def calendar_delete_event(self, event_id: str) -> dict[str, Any]:
        """Deletes an event by its ID.

        Args:
            event_id: 8-digit ID of the event.
        """
        return {"status": "deleted", "event_id": self._delete(S.CALENDAR, event_id)}

    def calendar_update_event(
        self,
        event_id: str,
        field: Literal["event_name", "participant_email", "event_start", "duration"],
        new_value: str,
    ) -> dict[str, Any]:
        """Updates one field of an event.

        Args:
            event_id: 8-digit ID of the event.
            field: Field to update.
            new_value: New value for the field (event_start as YYYY-MM-DD HH:MM:SS, duration in minutes).
        """
        return self._update(S.CALENDAR, event_id, field, EVENT_FIELDS[field](new_value))
