"""The 27 workplace tools, as typed methods over one session's SQLite database.

Names and arguments follow NeMo Gym's workplace_assistant (itself WorkBench's toolkit), so its
datasets replay unchanged. What differs, on purpose:

* every search is paginated (``page``, ``page_size``) and reports ``total`` and
  ``total_pages``, where WorkBench silently returns the first five matches;
* arguments are validated by their schema (types, enums, ISO dates, email syntax) and per field
  for the ``update`` tools; a bad call raises :class:`~textgym.error.ToolError`, which the env
  returns as the tool message, and changes nothing;
* any syntactically valid address may receive mail, not only addresses in the directory;
* IDs may be given without their leading zeros (``"42"`` is ``"00000042"``).

Every write records the table and the id of the row it touched in
:attr:`WorkplaceTools.touched`, which lets the verifier read only those rows.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from textgym.envs.workplace import schema as S
from textgym.envs.workplace import search
from textgym.error import ToolError
from textgym.tools import EMAIL_PATTERN, Encoded, Param, Toolset, ToolResult, to_json

if TYPE_CHECKING:
    from textgym.envs.workplace.visits import Visits
    from textgym.envs.workplace.world import World

Email = Annotated[str, Param(format="email")]
Day = Annotated[str, Param(format="date", description="A date as YYYY-MM-DD.")]
Moment = Annotated[str, Param(format="date-time", description="A date-time as YYYY-MM-DD HH:MM:SS.")]
Page = Annotated[int, Param(minimum=1, maximum=1_000_000, description="Page number of results to return, from 1.")]
PageSize = Annotated[int, Param(minimum=1, maximum=100, description="Number of results per page (at most 100).")]
Minutes = Annotated[int, Param(minimum=1, maximum=1440, description="Duration in minutes.")]
CustomerField = Literal[
    "customer_name",
    "assigned_to_email",
    "customer_email",
    "customer_phone",
    "last_contact_date",
    "product_interest",
    "status",
    "notes",
    "follow_up_by",
]

TOOL_NAMES: tuple[str, ...] = (
    "company_directory_find_email_address",
    "email_get_email_information_by_id",
    "email_search_emails",
    "email_send_email",
    "email_delete_email",
    "email_forward_email",
    "email_reply_email",
    "calendar_get_event_information_by_id",
    "calendar_search_events",
    "calendar_create_event",
    "calendar_delete_event",
    "calendar_update_event",
    "analytics_get_visitor_information_by_id",
    "analytics_create_plot",
    "analytics_total_visits_count",
    "analytics_engaged_users_count",
    "analytics_traffic_source_count",
    "analytics_get_average_session_duration",
    "project_management_get_task_information_by_id",
    "project_management_search_tasks",
    "project_management_create_task",
    "project_management_delete_task",
    "project_management_update_task",
    "customer_relationship_manager_search_customers",
    "customer_relationship_manager_update_customer",
    "customer_relationship_manager_add_customer",
    "customer_relationship_manager_delete_customer",
)


def canonical_datetime(value: str) -> str:
    try:
        return S.parse_datetime(value.strip())
    except ValueError:
        raise ToolError(f"expected a date-time as YYYY-MM-DD HH:MM:SS, got {value!r}") from None


def canonical_date(value: str) -> str:
    try:
        return S.parse_date(value.strip())
    except ValueError:
        raise ToolError(f"expected a date as YYYY-MM-DD, got {value!r}") from None


def _check_email(value: str) -> str:
    if not EMAIL_PATTERN.match(value.strip()):
        raise ToolError(f"expected an email address, got {value!r}")
    return value.strip()


def _one_of(options: tuple[str, ...]):
    def check(value: str) -> str:
        if value not in options:
            raise ToolError(f"expected one of {list(options)}, got {value!r}")
        return value

    return check


def _minutes(value: str) -> int:
    try:
        minutes = float(value)
    except ValueError:
        raise ToolError(f"duration must be a number of minutes, got {value!r}") from None
    if not minutes.is_integer() or not 1 <= minutes <= 1440:
        raise ToolError(f"duration must be a whole number of minutes from 1 to 1440, got {value!r}")
    return int(minutes)


def _text(value: str) -> str:
    if not value.strip():
        raise ToolError("the new value must not be empty")
    return value


EVENT_FIELDS = {
    "event_name": _text,
    "participant_email": _check_email,
    "event_start": canonical_datetime,
    "duration": _minutes,
}
TASK_FIELDS = {
    "task_name": _text,
    "assigned_to_email": _check_email,
    "list_name": _one_of(S.LIST_NAMES),
    "due_date": canonical_date,
    "board": _one_of(S.BOARDS),
}
CUSTOMER_FIELDS = {
    "customer_name": _text,
    "assigned_to_email": _check_email,
    "customer_email": _check_email,
    "customer_phone": _text,
    "last_contact_date": canonical_date,
    "product_interest": _one_of(S.PRODUCTS),
    "status": _one_of(S.STATUSES),
    "notes": str,
    "follow_up_by": canonical_date,
}


def _like(word: str) -> str:
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _bounds(lo: str | None, hi: str | None) -> tuple[str | None, str | None]:
    """A date range's bounds as YYYY-MM-DD, an omitted (or empty) bound None."""
    return canonical_date(lo) if lo else None, canonical_date(hi) if hi else None


def _norm_id(value: str) -> str:
    value = value.strip()
    return value.zfill(8) if value.isdigit() else value


class _Where:
    """A search's WHERE clause, built filter by filter, with its parameters in placeholder order.

    Args:
        table: The table searched (its ``search`` columns hold the words).
        indexed: Whether the words may be found in the world's word index (see ``search.py``)
            rather than by ``LIKE`` conditions.
    """

    def __init__(self, table: S.Table | None = None, indexed: bool = False):
        self.table = table
        self.indexed = indexed
        self.conds: list[str] = []
        self.params: list[Any] = []
        self.keys: list[bytes] = []  # the words that the word index finds, folded
        self.narrowed = False  # whether to find the matches once (words, an end time), then page them

    def add(self, cond: str, *params: Any) -> None:
        self.conds.append(cond)
        self.params += params

    def words(self, text: str) -> None:
        """Every word of ``text`` must appear (case-insensitively) in one of the table's ``search`` columns."""
        words = text.split()
        self.narrowed = self.narrowed or bool(words)  # the matches found once, for count and page
        columns = self.table.search
        for word in words:
            key = search.key(word) if self.indexed else None
            if key is not None:
                self.keys.append(key)
            else:
                self.add("(" + " OR ".join(f"{c} LIKE ? ESCAPE '\\'" for c in columns) + ")", *[_like(word)] * len(columns))

    def equal(self, **values: str | None) -> None:
        """Each column given a value must hold it (ignoring case); None leaves the column free."""
        for col, value in values.items():
            if value is not None:
                self.add(f"{col} = ? COLLATE NOCASE", value.strip())

    def dates(self, column: str, lo: str | None, hi: str | None) -> None:
        """``column`` (a date expression) must lie within [lo, hi]; an omitted bound is open."""
        for op, value in zip((">=", "<="), _bounds(lo, hi)):
            if value:
                self.add(f"{column} {op} ?", value)

    @property
    def sql(self) -> str:
        return " WHERE " + " AND ".join(self.conds) if self.conds else ""


class GuardedToolset(Toolset):
    """A toolset that also turns what SQLite rejects into error results instead of exceptions.

    Schema validation cannot see everything the database refuses: a JSON string may decode to a
    lone surrogate that cannot be encoded as UTF-8. Each statement fails before it changes
    anything, so the call changes nothing, like any other tool error.
    """

    def call(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        try:
            return super().call(name, arguments)
        except (UnicodeEncodeError, OverflowError, sqlite3.Error) as exc:
            message = f"{name}: the database rejected the arguments ({type(exc).__name__}: {exc})"
            return ToolResult(json.dumps({"error": message}), message)


class WorkplaceTools:
    """The toolkit bound to one session database (swapped on every reset via :attr:`db`).

    Args:
        db: The session's SQLite connection.
        world: The world that ``db`` is a copy of: searches find their words in its word index
            (and in the rows this session wrote), the analytics counts are its own. Without
            it, SQL does all (``LIKE`` per word and column).
    """

    def __init__(self, db: sqlite3.Connection, world: World | None = None):
        self.db = db
        self.world = world
        self.rows = search.SessionRows(db, None if world is None else world.words)

    @property
    def touched(self) -> dict[str, set[str]]:
        """The ids of the rows each table's writes touched (a table without ids: an empty set)."""
        return self.rows.touched

    def clear(self) -> None:
        """Forget the touched rows (after the database was restored)."""
        self.rows.clear()

    def _touch(self, table: S.Table, row_id: str | None) -> None:
        self.rows.touch(table, row_id)

    def _where(self, table: S.Table) -> _Where:
        """A search's filter; its words go to the word index when that describes the database."""
        return _Where(table, self.rows.indexed())

    def toolset(self) -> Toolset:
        """All 27 tools, bound to this object, in NeMo Gym's order."""
        return GuardedToolset(getattr(self, name) for name in TOOL_NAMES)

    # ----- helpers -----

    def _get(self, table: S.Table, row_id: str, field: str | None) -> dict[str, Any]:
        key = table.id_column
        cols = table.select_list
        row = self.db.execute(f'SELECT {cols} FROM "{table.name}" WHERE "{key}" = ?', (_norm_id(row_id),)).fetchone()
        if row is None:
            raise ToolError(f"no {table.name} row with {key} {row_id!r}")
        record = dict(zip(table.names, row))
        return record if field is None else {field: record[field]}

    def _require(self, table: S.Table, row_id: str) -> str:
        key = _norm_id(row_id)
        if self.db.execute(f'SELECT 1 FROM "{table.name}" WHERE "{table.id_column}" = ?', (key,)).fetchone() is None:
            raise ToolError(f"no {table.name} row with {table.id_column} {row_id!r}")
        return key

    def _next_id(self, table: S.Table) -> str:
        key = table.id_column
        (top,) = self.db.execute(f'SELECT max("{key}") FROM "{table.name}"').fetchone()  # uses the primary key
        if top is not None and not top.isdigit():  # foreign, non-numeric ids: scan for the largest number
            (top,) = self.db.execute(f'SELECT max(CAST("{key}" AS INTEGER)) FROM "{table.name}"').fetchone()
        return f"{int(top or 0) + 1:08d}"

    def _insert(self, table: S.Table, values: dict[str, Any]) -> None:
        cols = ", ".join(f'"{c}"' for c in values)
        marks = ", ".join("?" for _ in values)
        self.db.execute(f'INSERT INTO "{table.name}" ({cols}) VALUES ({marks})', tuple(values.values()))
        self._touch(table, values.get(table.id_column))

    def _create(self, table: S.Table, values: dict[str, Any]) -> str:
        """Inserts a row under the next free id and returns that id."""
        row_id = self._next_id(table)
        self._insert(table, {table.id_column: row_id, **values})
        return row_id

    def _delete(self, table: S.Table, row_id: str) -> str:
        key = self._require(table, row_id)
        self.db.execute(f'DELETE FROM "{table.name}" WHERE "{table.id_column}" = ?', (key,))
        self._touch(table, key)
        return key

    def _update(self, table: S.Table, row_id: str, field: str, value: Any) -> dict[str, Any]:
        key = self._require(table, row_id)
        self.db.execute(f'UPDATE "{table.name}" SET "{field}" = ? WHERE "{table.id_column}" = ?', (value, key))
        self._touch(table, key)
        return {"status": "updated", table.id_column: key, "field": field, "new_value": value}

    def _page(self, table: S.Table, where: _Where, page: int, page_size: int, label: str):
        total, rows, texts = self.rows.read(table, where, (page - 1) * page_size, page_size)
        counts = {"page": page, "page_size": page_size, "total": total, "total_pages": max(1, math.ceil(total / page_size))}
        result = {label: rows, **counts}
        if texts is None:
            return result
        # The rows' texts joined as the encoder joins a list; the counts encoded as they are.
        return Encoded(result, "{" + to_json(label) + ": [" + ", ".join(texts) + "], " + to_json(counts)[1:])

    def _send(self, recipient: str, subject: str, body: str) -> dict[str, Any]:
        email_id = self._create(
            S.EMAILS,
            {
                "inbox/outbox": "outbox",
                "sender": S.USER_EMAIL,
                "recipient": recipient.strip(),
                "subject": subject,
                "sent_datetime": S.NOW_TEXT,
                "body": body,
            },
        )
        return {"status": "sent", "email_id": email_id, "recipient": recipient.strip(), "subject": subject}

    # ----- company directory -----

    def company_directory_find_email_address(self, name: str = "") -> list[str]:
        """Finds all email addresses in the company directory matching a name (case-insensitive).

        Args:
            name: Name or partial name to search for; every word must match the person's name or address.
        """
        where = self._where(S.DIRECTORY)
        where.words(name)
        return [r["email_address"] for r in self.rows.read(S.DIRECTORY, where, 0, None)[1]]

    # ----- email -----

    def email_get_email_information_by_id(
        self,
        email_id: str,
        field: (
            Literal[
                "email_id",
                "inbox/outbox",
                "sender/recipient",
                "sender",
                "recipient",
                "subject",
                "sent_datetime",
                "body",
            ]
            | None
        ) = None,
    ) -> dict[str, Any]:
        """Retrieves the details of an email by its ID: one field, or the whole email when field is omitted.

        Args:
            email_id: Unique 8-digit ID of the email.
            field: Field to return; 'sender/recipient' is the other party of the email.
        """
        record = self._get(S.EMAILS, email_id, None)
        record["sender/recipient"] = record["sender"] if record["inbox/outbox"] == "inbox" else record["recipient"]
        return record if field is None else {field: record[field]}

    def email_search_emails(
        self,
        query: str = "",
        date_min: Day | None = None,
        date_max: Day | None = None,
        page: Page = 1,
        page_size: PageSize = 10,
    ) -> dict[str, Any]:
        """Searches emails, newest first; an email matches when every word of the query appears in its subject, body, sender or recipient.

        Args:
            query: Words to search for (empty matches every email).
            date_min: Earliest sent date, inclusive, as YYYY-MM-DD.
            date_max: Latest sent date, inclusive, as YYYY-MM-DD.
            page: Page number of results, from 1.
            page_size: Number of emails per page.
        """
        where = self._where(S.EMAILS)
        where.words(query)
        where.dates("substr(sent_datetime, 1, 10)", date_min, date_max)
        return self._page(S.EMAILS, where, page, page_size, "emails")

    def email_send_email(self, recipient: Email, subject: str, body: str) -> dict[str, Any]:
        """Sends an email to the specified recipient.

        Args:
            recipient: Email address of the recipient.
            subject: Subject line of the email.
            body: Body content of the email.
        """
        return self._send(recipient, subject, body)

    def email_delete_email(self, email_id: str) -> dict[str, Any]:
        """Deletes an email by its ID.

        Args:
            email_id: Unique 8-digit ID of the email to delete.
        """
        return {"status": "deleted", "email_id": self._delete(S.EMAILS, email_id)}

    def email_forward_email(self, email_id: str, recipient: Email) -> dict[str, Any]:
        """Forwards an email (subject prefixed with 'FW: ', same body) to the specified recipient.

        Args:
            email_id: Unique 8-digit ID of the email to forward.
            recipient: Email address of the recipient.
        """
        original = self._get(S.EMAILS, email_id, None)
        return self._send(recipient, "FW: " + original["subject"], original["body"])

    def email_reply_email(self, email_id: str, body: str) -> dict[str, Any]:
        """Replies to an email by its ID: sends the body to the other party with the subject prefixed 'RE: '.

        Args:
            email_id: Unique 8-digit ID of the email to reply to.
            body: Body content of the reply.
        """
        original = self._get(S.EMAILS, email_id, None)
        other = original["sender"] if original["inbox/outbox"] == "inbox" else original["recipient"]
        return self._send(other, "RE: " + original["subject"], body)

    # ----- calendar -----

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

    def calendar_create_event(
        self, event_name: str, participant_email: Email, event_start: Moment, duration: Minutes
    ) -> dict[str, Any]:
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
                "event_name": _text(event_name),
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

    # ----- analytics -----

    @staticmethod
    def _range(time_min: str | None, time_max: str | None) -> _Where:
        where = _Where()
        where.dates("date_of_visit", time_min, time_max)
        return where

    def _count_by_date(
        self, time_min: str | None, time_max: str | None, extra: str = "", params: tuple = ()
    ) -> dict[str, Any]:
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

    def analytics_create_plot(
        self, time_min: Day, time_max: Day, value_to_plot: S.PlotValue, plot_type: S.PlotType
    ) -> dict[str, Any]:
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
        lo, hi = _bounds(time_min, time_max)
        visits = self._visits()
        return visits.by_date(visits.visits, lo, hi) if visits else self._count_by_date(lo, hi)

    def analytics_engaged_users_count(self, time_min: Day | None = None, time_max: Day | None = None) -> dict[str, Any]:
        """Returns the number of engaged visits in a date range, in total and per day.

        Args:
            time_min: Start date of the range, YYYY-MM-DD (inclusive).
            time_max: End date of the range, YYYY-MM-DD (inclusive).
        """
        lo, hi = _bounds(time_min, time_max)
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
        lo, hi = _bounds(time_min, time_max)
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

    def analytics_get_average_session_duration(
        self, time_min: Day | None = None, time_max: Day | None = None
    ) -> dict[str, Any]:
        """Returns the average session duration in seconds over a date range.

        Args:
            time_min: Start date of the range, YYYY-MM-DD (inclusive).
            time_max: End date of the range, YYYY-MM-DD (inclusive).
        """
        where = self._range(time_min, time_max)
        avg, n = self.db.execute(
            f"SELECT avg(session_duration_seconds), count(*) FROM analytics{where.sql}", where.params
        ).fetchone()
        return {"average_session_duration_seconds": None if avg is None else round(avg, 2), "visits": n}

    # ----- project management -----

    def project_management_get_task_information_by_id(
        self,
        task_id: str,
        field: Literal["task_id", "task_name", "assigned_to_email", "list_name", "due_date", "board"] | None = None,
    ) -> dict[str, Any]:
        """Returns a task by its ID: one field, or the whole task when field is omitted.

        Args:
            task_id: 8-digit ID of the task.
            field: Field to return.
        """
        return self._get(S.PROJECT_TASKS, task_id, field)

    def project_management_search_tasks(
        self,
        task_name: str | None = None,
        assigned_to_email: Email | None = None,
        list_name: S.ListName | None = None,
        due_date: Day | None = None,
        board: S.Board | None = None,
        page: Page = 1,
        page_size: PageSize = 10,
    ) -> dict[str, Any]:
        """Searches project tasks by any combination of fields, ordered by due date.

        Args:
            task_name: Words that must all appear in the task name.
            assigned_to_email: Email address of the person assigned to the task.
            list_name: List the task is in.
            due_date: Due date, YYYY-MM-DD.
            board: Board the task belongs to.
            page: Page number of results, from 1.
            page_size: Number of tasks per page.
        """
        where = self._where(S.PROJECT_TASKS)
        where.words(task_name or "")
        where.equal(assigned_to_email=assigned_to_email, list_name=list_name, board=board)
        if due_date:
            where.add("due_date = ?", canonical_date(due_date))
        return self._page(S.PROJECT_TASKS, where, page, page_size, "tasks")

    def project_management_create_task(
        self, task_name: str, assigned_to_email: Email, list_name: S.ListName, due_date: Day, board: S.Board
    ) -> dict[str, Any]:
        """Creates a new task.

        Args:
            task_name: Name of the task.
            assigned_to_email: Email address of the person assigned to the task.
            list_name: List the task goes into.
            due_date: Due date, YYYY-MM-DD.
            board: Board the task belongs to.
        """
        task_id = self._create(
            S.PROJECT_TASKS,
            {
                "task_name": _text(task_name),
                "assigned_to_email": assigned_to_email.strip(),
                "list_name": list_name,
                "due_date": canonical_date(due_date),
                "board": board,
            },
        )
        return {"status": "created", "task_id": task_id}

    def project_management_delete_task(self, task_id: str) -> dict[str, Any]:
        """Deletes a task by its ID.

        Args:
            task_id: 8-digit ID of the task.
        """
        return {"status": "deleted", "task_id": self._delete(S.PROJECT_TASKS, task_id)}

    def project_management_update_task(
        self,
        task_id: str,
        field: Literal["task_name", "assigned_to_email", "list_name", "due_date", "board"],
        new_value: str,
    ) -> dict[str, Any]:
        """Updates one field of a task.

        Args:
            task_id: 8-digit ID of the task.
            field: Field to update.
            new_value: New value (list_name one of Backlog/In Progress/In Review/Completed; board one of Back end/Front end/Design; due_date YYYY-MM-DD).
        """
        return self._update(S.PROJECT_TASKS, task_id, field, TASK_FIELDS[field](new_value))

    # ----- CRM -----

    def customer_relationship_manager_search_customers(
        self,
        customer_name: str | None = None,
        customer_email: str | None = None,
        product_interest: S.ProductInterest | None = None,
        status: S.Status | None = None,
        assigned_to_email: Email | None = None,
        last_contact_date_min: Day | None = None,
        last_contact_date_max: Day | None = None,
        follow_up_by_min: Day | None = None,
        follow_up_by_max: Day | None = None,
        page: Page = 1,
        page_size: PageSize = 10,
    ) -> dict[str, Any]:
        """Searches customers by any combination of fields, ordered by name.

        Args:
            customer_name: Words that must all appear in the customer's name.
            customer_email: Part of the customer's email address.
            product_interest: Product the customer is interested in.
            status: Current status of the customer.
            assigned_to_email: Email address of the employee assigned to the customer.
            last_contact_date_min: Earliest last contact date, YYYY-MM-DD.
            last_contact_date_max: Latest last contact date, YYYY-MM-DD.
            follow_up_by_min: Earliest follow-up date, YYYY-MM-DD.
            follow_up_by_max: Latest follow-up date, YYYY-MM-DD.
            page: Page number of results, from 1.
            page_size: Number of customers per page.
        """
        where = self._where(S.CUSTOMERS)
        where.words(customer_name or "")
        if customer_email:
            where.add("customer_email LIKE ? ESCAPE '\\'", _like(customer_email.strip()))
        where.equal(product_interest=product_interest, status=status, assigned_to_email=assigned_to_email)
        where.dates("last_contact_date", last_contact_date_min, last_contact_date_max)
        where.dates("follow_up_by", follow_up_by_min, follow_up_by_max)
        return self._page(S.CUSTOMERS, where, page, page_size, "customers")

    def customer_relationship_manager_update_customer(
        self,
        customer_id: str,
        field: CustomerField,
        new_value: str,
    ) -> dict[str, Any]:
        """Updates one field of a customer record.

        Args:
            customer_id: 8-digit ID of the customer.
            field: Field to update.
            new_value: New value (status one of Qualified/Won/Lost/Lead/Proposal; product_interest one of Software/Hardware/Services/Consulting/Training; dates YYYY-MM-DD).
        """
        return self._update(S.CUSTOMERS, customer_id, field, CUSTOMER_FIELDS[field](new_value))

    def customer_relationship_manager_add_customer(
        self,
        customer_name: str,
        assigned_to_email: Email,
        status: S.Status,
        customer_email: Email | None = None,
        customer_phone: str | None = None,
        last_contact_date: Day | None = None,
        product_interest: S.ProductInterest | None = None,
        notes: str = "",
        follow_up_by: Day | None = None,
    ) -> dict[str, Any]:
        """Adds a new customer record.

        Args:
            customer_name: Name of the customer.
            assigned_to_email: Email address of the employee assigned to the customer.
            status: Current status of the customer.
            customer_email: Email address of the customer.
            customer_phone: Phone number of the customer.
            last_contact_date: The last date the customer was contacted, YYYY-MM-DD.
            product_interest: Product the customer is interested in.
            notes: Notes about the customer.
            follow_up_by: Date for the next follow-up, YYYY-MM-DD.
        """
        customer_id = self._create(
            S.CUSTOMERS,
            {
                "assigned_to_email": assigned_to_email.strip(),
                "customer_name": _text(customer_name),
                "customer_email": (customer_email or "").strip(),
                "customer_phone": customer_phone or "",
                "last_contact_date": canonical_date(last_contact_date) if last_contact_date else "",
                "product_interest": product_interest or "",
                "status": status,
                "follow_up_by": canonical_date(follow_up_by) if follow_up_by else "",
                "notes": notes,
            },
        )
        return {"status": "created", "customer_id": customer_id}

    def customer_relationship_manager_delete_customer(self, customer_id: str) -> dict[str, Any]:
        """Deletes a customer record by its ID.

        Args:
            customer_id: 8-digit ID of the customer.
        """
        return {"status": "deleted", "customer_id": self._delete(S.CUSTOMERS, customer_id)}
