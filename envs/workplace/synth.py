"""A seeded synthetic company: people, mail, meetings, site visits, project tasks and customers.

``synthesize(seed)`` returns every table as a list of row tuples in the column order of
:mod:`textgym.envs.workplace.schema`. The same seed gives the same company in any process (one
``numpy`` generator, no global state); the default seed 0 is the world every generated task is
written against, so results are comparable across papers and runs.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

import numpy as np

from textgym.envs.workplace import schema as S

EMPLOYEE_FIRST = (
    "Raj", "Sofia", "Dmitri", "Anaya", "Chenwei", "Luis", "Aisha", "Olga", "Kofi", "Leila", "Jinsoo", "Lena",
    "Yuki", "Fatima", "Santiago", "Nadia", "Akira", "Amir", "Nia", "Carlos", "Priya", "Tomas", "Hana", "Marcus",
)  # fmt: skip
EMPLOYEE_LAST = (
    "Patel", "Santos", "Ivanov", "Zhang", "Ortiz", "Chen", "Petrova", "Mensah", "Azizi", "Kim", "Schmidt",
    "Tanaka", "Khan", "Martinez", "Moreau", "Sato", "Ali", "Johnson", "Rodriguez", "Novak", "Okafor", "Berg",
)  # fmt: skip
CUSTOMER_FIRST = (
    "Quinn", "Riley", "Jordan", "Casey", "Morgan", "Taylor", "Avery", "Parker", "Rowan", "Skyler", "Emerson",
    "Finley", "Harper", "Logan", "Reese", "Sage", "Dakota", "Jamie", "Kendall", "Peyton",
)  # fmt: skip
CUSTOMER_LAST = (
    "Garcia", "Brown", "Jones", "Miller", "Davis", "Wilson", "Anderson", "Thomas", "Moore", "Jackson",
    "White", "Harris", "Clark", "Lewis", "Walker", "Young", "Allen", "King", "Wright", "Scott",
)  # fmt: skip
CUSTOMER_DOMAINS = ("example.com", "mailbox.org", "northwind.io", "contoso.net", "fabrikam.biz")
MAIL_TOPICS = (
    ("Budget Approval Request", "Please review and approve the attached budget proposal."),
    ("Press Release Draft", "Please review the attached draft of our upcoming press release."),
    ("Meeting Request", "Please find attached the details for our next meeting."),
    ("Health and Safety Update", "Find the latest health and safety guidelines attached."),
    ("Urgent: Server Downtime", "Please be aware of the unplanned server downtime occurring tonight."),
    ("New Policy Update", "We have updated our policy. Please read the attached document for details."),
    ("Monthly Sales Figures", "Please find the monthly sales figures in the attached document."),
    ("Reminder: Event Tomorrow", "This is a reminder that the event is scheduled for tomorrow."),
    ("Training Session Confirmation", "Your registration for the upcoming training session is confirmed."),
    ("Travel Itinerary Details", "Attached are the details of your travel itinerary."),
    ("Invoice Attached", "Attached is the invoice for the recent transaction."),
    ("Weekly Report", "Attached is the weekly report for your review."),
    ("IT System Upgrade Schedule", "Please review the schedule for the upcoming IT system upgrade."),
    ("Client Meeting Follow-up", "Here is a summary of the points discussed in our recent client meeting."),
    ("Project Update", "Here is the update on the current project."),
    ("Customer Feedback Summary", "Attached is the summary of customer feedback from last month."),
    ("Holiday Schedule Confirmation", "Confirming the holiday schedule as discussed."),
    ("Staff Roster for Next Week", "Attached is the staff roster for next week."),
)
EVENT_NAMES = (
    "Sprint Review", "Product Demo", "Budget Review", "Team Sync", "Client Call", "Design Review",
    "Quarterly Planning", "One-on-one", "Marketing Strategy", "Training Session", "Code Review",
    "Hiring Interview", "Board Meeting", "Customer Workshop",
)  # fmt: skip
TASK_VERBS = ("Fix", "Design", "Implement", "Review", "Test", "Document", "Refactor", "Deploy", "Optimize")
TASK_OBJECTS = (
    "login page", "payment API", "user dashboard", "search feature", "onboarding flow", "email templates",
    "database schema", "analytics pipeline", "mobile layout", "settings page", "notification service",
    "checkout flow", "logo", "style guide", "API docs", "billing module", "export tool", "landing page",
)  # fmt: skip
CRM_NOTES = (
    "Interested in a demo next quarter.", "Asked for volume pricing.", "Prefers contact by email.",
    "Budget approval pending.", "Met at the trade fair.", "Needs integration with their ERP.",
    "Renewal coming up.", "Requested a case study.",
)  # fmt: skip

START = date(2023, 10, 1)


def _day(rng: np.random.Generator, first: date, last: date, weekdays: bool = True) -> date:
    while True:
        d = first + timedelta(days=int(rng.integers((last - first).days + 1)))
        if not weekdays or d.weekday() < 5:
            return d


def _ids(n: int) -> list[str]:
    return [f"{i:08d}" for i in range(1, n + 1)]


def people(rng: np.random.Generator) -> list[tuple[str, str]]:
    """Employees as (name, address); first names are unique so "email Raj" is unambiguous."""
    last = rng.permutation(len(EMPLOYEE_LAST))
    out = []
    for i, first in enumerate(EMPLOYEE_FIRST):
        surname = EMPLOYEE_LAST[int(last[i % len(last)])]
        out.append((f"{first} {surname}", f"{first.lower()}.{surname.lower()}@{S.COMPANY_DOMAIN}"))
    return out


def emails(rng: np.random.Generator, staff: list[tuple[str, str]], n_in: int = 260, n_out: int = 60) -> list[tuple]:
    rows = []
    for k in range(n_in + n_out):
        outbox = k >= n_in
        other = staff[int(rng.integers(len(staff)))][1]
        subject, body = MAIL_TOPICS[int(rng.integers(len(MAIL_TOPICS)))]
        day = _day(rng, START, S.TODAY - timedelta(days=1))
        when = datetime(day.year, day.month, day.day, int(rng.integers(9, 17)), int(rng.integers(60)), int(rng.integers(60)))
        sender, recipient = (S.USER_EMAIL, other) if outbox else (other, S.USER_EMAIL)
        rows.append(("outbox" if outbox else "inbox", sender, recipient, subject, S.fmt_datetime(when), body))
    rows.sort(key=lambda r: r[4])
    return [(i, *r) for i, r in zip(_ids(len(rows)), rows)]


def events(rng: np.random.Generator, staff: list[tuple[str, str]], n: int = 240) -> list[tuple]:
    rows = []
    for _ in range(n):
        day = _day(rng, START, date(2023, 12, 29))
        duration = int(rng.choice([30, 60, 90]))
        latest = (S.WORK_END_HOUR - S.WORK_START_HOUR) * 60 - duration
        minute = S.WORK_START_HOUR * 60 + 30 * int(rng.integers(latest // 30 + 1))
        start = datetime(day.year, day.month, day.day, minute // 60, minute % 60)
        name = EVENT_NAMES[int(rng.integers(len(EVENT_NAMES)))]
        rows.append((name, staff[int(rng.integers(len(staff)))][1], S.fmt_datetime(start), duration))
    rows.sort(key=lambda r: r[2])
    return [(i, *r) for i, r in zip(_ids(len(rows)), rows)]


def visits(rng: np.random.Generator) -> list[tuple]:
    rows = []
    visitors = [f"{int(v):06x}" for v in rng.integers(0x100000, 0xFFFFFF, size=220)]
    day = START
    while day < S.TODAY:
        for _ in range(int(rng.integers(3, 12))):
            rows.append(
                (
                    day.isoformat(),
                    visitors[int(rng.integers(len(visitors)))],
                    int(rng.integers(1, 21)),
                    int(rng.integers(10, 900)),
                    S.TRAFFIC_SOURCES[int(rng.integers(len(S.TRAFFIC_SOURCES)))],
                    int(rng.random() < 0.45),
                )
            )
        day += timedelta(days=1)
    return rows


def tasks(rng: np.random.Generator, staff: list[tuple[str, str]], n: int = 150) -> list[tuple]:
    combos = [f"{v} {o}" for v in TASK_VERBS for o in TASK_OBJECTS]
    names = [combos[int(i)] for i in rng.permutation(len(combos))[:n]]
    rows = []
    for name in names:
        due = _day(rng, date(2023, 10, 15), date(2024, 1, 31))
        rows.append(
            (
                name,
                staff[int(rng.integers(len(staff)))][1],
                S.LIST_NAMES[int(rng.integers(len(S.LIST_NAMES)))],
                due.isoformat(),
                S.BOARDS[int(rng.integers(len(S.BOARDS)))],
            )
        )
    return [(i, *r) for i, r in zip(_ids(len(rows)), rows)]


def customers(rng: np.random.Generator, staff: list[tuple[str, str]], n: int = 120) -> list[tuple]:
    pairs = [(first, last) for first in CUSTOMER_FIRST for last in CUSTOMER_LAST]
    chosen = [pairs[int(i)] for i in rng.permutation(len(pairs))[:n]]
    rows = []
    for first, last in chosen:
        contact = _day(rng, date(2023, 6, 1), S.TODAY - timedelta(days=1), weekdays=False)
        follow = contact + timedelta(days=int(rng.integers(7, 61)))
        rows.append(
            (
                staff[int(rng.integers(len(staff)))][1],
                f"{first} {last}",
                f"{first.lower()}.{last.lower()}@{CUSTOMER_DOMAINS[int(rng.integers(len(CUSTOMER_DOMAINS)))]}",
                f"555-{int(rng.integers(100, 1000))}-{int(rng.integers(1000, 10000))}",
                contact.isoformat(),
                S.PRODUCTS[int(rng.integers(len(S.PRODUCTS)))],
                S.STATUSES[int(rng.integers(len(S.STATUSES)))],
                follow.isoformat(),
                CRM_NOTES[int(rng.integers(len(CRM_NOTES)))],
            )
        )
    return [(i, *r) for i, r in zip(_ids(len(rows)), rows)]


def synthesize(seed: int = 0) -> dict[str, list[tuple]]:
    """Every table of a synthetic company, as row tuples keyed by table name."""
    rng = np.random.default_rng(seed)
    staff = people(rng)
    return {
        "company_directory": [*staff, (S.USER_NAME, S.USER_EMAIL)],
        "emails": emails(rng, staff),
        "calendar": events(rng, staff),
        "analytics": visits(rng),
        "plots": [],
        "project_tasks": tasks(rng, staff),
        "customers": customers(rng, staff),
    }
