"""The workplace world's fixed facts: the clock, the tables and the value domains.

Everything else (the generator, the tools, the verifier) reads its column lists and enums from
here, so a column is named in one place. The clock is fixed, as in WorkBench, so that "tomorrow"
and "last week" mean the same thing in every task and every process.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

TODAY = date(2023, 11, 30)  # a Thursday
NOW = datetime(2023, 11, 30, 9, 0, 0)
WORK_START_HOUR = 9
WORK_END_HOUR = 18
COMPANY_DOMAIN = "atlas.com"
USER_NAME = "Alex Morgan"
USER_EMAIL = f"alex.morgan@{COMPANY_DOMAIN}"

DATETIME_FORMAT = "%Y-%m-%d %H:%M:%S"

ListName = Literal["Backlog", "In Progress", "In Review", "Completed"]
Board = Literal["Back end", "Front end", "Design"]
Status = Literal["Qualified", "Won", "Lost", "Lead", "Proposal"]
ProductInterest = Literal["Software", "Hardware", "Services", "Consulting", "Training"]
TrafficSource = Literal["direct", "referral", "search engine", "social media"]
PlotValue = Literal[
    "total_visits",
    "session_duration_seconds",
    "user_engaged",
    "visits_direct",
    "visits_referral",
    "visits_search_engine",
    "visits_social_media",
]
PlotType = Literal["bar", "line", "scatter", "histogram"]

LIST_NAMES: tuple[str, ...] = ListName.__args__
BOARDS: tuple[str, ...] = Board.__args__
STATUSES: tuple[str, ...] = Status.__args__
PRODUCTS: tuple[str, ...] = ProductInterest.__args__
TRAFFIC_SOURCES: tuple[str, ...] = TrafficSource.__args__
PLOT_VALUES: tuple[str, ...] = PlotValue.__args__
PLOT_TYPES: tuple[str, ...] = PlotType.__args__

# Column kinds drive normalisation in the verifier: "id" columns are assigned by the system and
# ignored; "text" is compared case- and whitespace-insensitively; "email" case-insensitively;
# "datetime"/"date" after parsing any ISO spelling; "int"/"number" numerically; "enum" by case.
Kind = Literal["id", "text", "email", "datetime", "date", "int", "number", "enum", "bool"]


@dataclass(frozen=True)
class Table:
    """One SQLite table: its name, its columns with their kinds, and its id column (if any)."""

    name: str
    columns: tuple[tuple[str, Kind], ...]
    indexes: tuple[str, ...] = ()  # column lists (SQL) of the indexes the tools' queries walk
    search: tuple[str, ...] = ()  # the columns a search's words are looked for in
    order: str = ""  # ORDER BY of the table's search results (SQL)

    # Cached: the tools read these on every call (cached_property writes the instance __dict__
    # directly, so it works on a frozen dataclass).
    @functools.cached_property
    def id_column(self) -> str | None:
        return next((c for c, k in self.columns if k == "id"), None)

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.columns)

    @functools.cached_property
    def select_list(self) -> str:
        """Every column, quoted, for SELECT statements."""
        return ", ".join(f'"{c}"' for c in self.names)

    @functools.cached_property
    def compared(self) -> tuple[str, ...]:
        """Columns the verifier compares: everything but the system-assigned id."""
        return tuple(c for c, k in self.columns if k != "id")

    def ddl(self) -> str:
        sql_type = {"int": "INTEGER", "number": "REAL", "bool": "INTEGER"}
        cols = [f'"{c}" {sql_type.get(k, "TEXT")}' + (" PRIMARY KEY" if k == "id" else "") for c, k in self.columns]
        return f'CREATE TABLE "{self.name}" ({", ".join(cols)})'

    def index_ddl(self) -> list[str]:
        return [f'CREATE INDEX "{self.name}_{i}" ON "{self.name}" ({cols})' for i, cols in enumerate(self.indexes)]


EMAILS = Table(
    "emails",
    (
        ("email_id", "id"),
        ("inbox/outbox", "enum"),
        ("sender", "email"),
        ("recipient", "email"),
        ("subject", "text"),
        ("sent_datetime", "datetime"),
        ("body", "text"),
    ),
    ("sent_datetime DESC, email_id", "substr(sent_datetime, 1, 10)"),
    ("subject", "body", "sender", "recipient"),
    "sent_datetime DESC, email_id",
)
EVENT_END = "datetime(event_start, '+' || duration || ' minutes')"
"""An event's end in SQL; indexed, so a search from a time on walks the index (the same text)."""
CALENDAR = Table(
    "calendar",
    (
        ("event_id", "id"),
        ("event_name", "text"),
        ("participant_email", "email"),
        ("event_start", "datetime"),
        ("duration", "int"),
    ),
    ("event_start, event_id", f"{EVENT_END}"),
    ("event_name", "participant_email"),
    "event_start, event_id",
)
ANALYTICS = Table(
    "analytics",
    (
        ("date_of_visit", "date"),
        ("visitor_id", "text"),
        ("page_views", "int"),
        ("session_duration_seconds", "number"),
        ("traffic_source", "enum"),
        ("user_engaged", "bool"),
    ),
    ("date_of_visit, traffic_source, user_engaged, session_duration_seconds", "visitor_id"),
)
PLOTS = Table("plots", (("file_path", "text"),))
PROJECT_TASKS = Table(
    "project_tasks",
    (
        ("task_id", "id"),
        ("task_name", "text"),
        ("assigned_to_email", "email"),
        ("list_name", "enum"),
        ("due_date", "date"),
        ("board", "enum"),
    ),
    ("due_date, task_id",),
    ("task_name",),
    "due_date, task_id",
)
CUSTOMERS = Table(
    "customers",
    (
        ("customer_id", "id"),
        ("assigned_to_email", "email"),
        ("customer_name", "text"),
        ("customer_email", "email"),
        ("customer_phone", "text"),
        ("last_contact_date", "date"),
        ("product_interest", "enum"),
        ("status", "enum"),
        ("follow_up_by", "date"),
        ("notes", "text"),
    ),
    ("customer_name, customer_id",),
    ("customer_name",),
    "customer_name, customer_id",
)
DIRECTORY = Table(
    "company_directory", (("name", "text"), ("email_address", "email")), search=("name", "email_address"), order="email_address"
)

TABLES: tuple[Table, ...] = (EMAILS, CALENDAR, ANALYTICS, PLOTS, PROJECT_TASKS, CUSTOMERS, DIRECTORY)


def fmt_datetime(value: datetime) -> str:
    return value.strftime(DATETIME_FORMAT)


def parse_datetime(text: str) -> str:
    """Any ISO date-time spelling, as YYYY-MM-DD HH:MM:SS without zone; raises ValueError otherwise.

    The tools store and the verifier compares this one spelling, so both parse through here.
    """
    return fmt_datetime(datetime.fromisoformat(text).replace(tzinfo=None))


def parse_date(text: str) -> str:
    """A date, or the day of an ISO date-time, as YYYY-MM-DD; raises ValueError otherwise."""
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        return datetime.fromisoformat(text).date().isoformat()


NOW_TEXT = fmt_datetime(NOW)  # the sent_datetime of every mail sent in a session


@functools.cache
def system_prompt() -> str:
    """The system message: who the user is, the fixed clock and the working hours."""
    return (
        f"You are a workplace assistant for {USER_NAME} ({USER_EMAIL}) at {COMPANY_DOMAIN}. "
        f"Today's date is {TODAY.strftime('%A')}, {TODAY.isoformat()} and the current time is "
        f"{NOW.strftime('%H:%M:%S')}. The working hours are {WORK_START_HOUR:02d}:00 to {WORK_END_HOUR:02d}:00: "
        f"meetings must not start before {WORK_START_HOUR}am or end after {WORK_END_HOUR - 12}pm. "
        "Use the tools to read and change the company's email, calendar, analytics, project "
        "management and CRM systems; call several tools in one turn when you can. Look up IDs and "
        "email addresses with the tools instead of guessing them. When the request is fulfilled "
        "(or nothing needs to change), reply without tool calls: that ends the conversation."
    )
