"""Task templates for one domain each: email, calendar and analytics.

A template draws its parameters from the world (:class:`~textgym.envs.workplace.facts.Facts`)
and returns ``(params, calls)``: the values its phrasings are formatted with, and the ground
truth as the list of state-changing calls. It returns None when this draw does not fit the world
(the generator then draws again). No-op templates are flagged and return no calls: their
phrasing is conditional and the condition is false in the world.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import numpy as np

from textgym.envs.workplace import schema as S
from textgym.envs.workplace.facts import Facts, Person, call, future_weekday, pick
from textgym.envs.workplace.verify import normalize

Draw = Callable[[Facts, np.random.Generator], "tuple[dict[str, Any], list[dict]] | None"]

MAX_CALLS = 12


@dataclass(frozen=True)
class Template:
    """A request pattern: its category, difficulty, phrasings and the function that instantiates it."""

    name: str
    category: str
    difficulty: str
    phrasings: tuple[str, ...]
    draw: Draw
    noop: bool = False


def collector(registry: list[Template]):
    """A decorator that appends templates to ``registry`` (one list per module)."""

    def template(category: str, difficulty: str, *phrasings: str, noop: bool = False):
        def wrap(fn: Draw) -> Draw:
            registry.append(Template(fn.__name__, category, difficulty, phrasings, fn, noop))
            return fn

        return wrap

    return template


TEMPLATES: list[Template] = []
template = collector(TEMPLATES)

OUTGOING = (
    ("Quarterly review", "Could we go over the quarterly numbers this week?"),
    ("Team lunch", "Team lunch is on Friday at noon, hope you can join."),
    ("Design feedback", "I left comments on the latest mockups, please take a look."),
    ("Contract renewal", "The contract is up for renewal next month; please send your notes."),
    ("Offsite agenda", "Here is the draft agenda for the offsite."),
    ("Status update", "Please send me a short status update by end of day."),
)
REPLIES = (
    "Thanks, I will take a look.",
    "Received, thank you.",
    "Noted, I will get back to you soon.",
    "Thanks for the update.",
)
EVENT_NAMES = (
    "Project kickoff",
    "Budget sync",
    "Design review",
    "Roadmap planning",
    "Customer check-in",
    "Hiring debrief",
)
VALUE_LABELS = {
    "total_visits": "total visits",
    "session_duration_seconds": "session duration",
    "user_engaged": "engaged users",
    "visits_direct": "direct visits",
    "visits_referral": "referral visits",
    "visits_search_engine": "search engine visits",
    "visits_social_media": "social media visits",
}


def listing(words: list[str]) -> str:
    """``["a", "b", "c"]`` as ``"a, b and c"``."""
    return ", ".join(words[:-1]) + " and " + words[-1]


# ----- email -----


def _sender(f: Facts, rng) -> tuple[Person, list[dict]] | None:
    """A drawn person and the emails they sent the user, oldest first (None when they sent none)."""
    p = f.person(rng)
    mails = f.inbox_by_sender.get(p.email)
    return (p, mails) if mails else None


def reply_to_latest(f: Facts, rng) -> tuple[Person, str, dict] | None:
    """A drawn sender, a reply text, and the call that answers their latest email."""
    drawn = _sender(f, rng)
    if drawn is None:
        return None
    p, mails = drawn
    body = pick(rng, REPLIES)
    return p, body, call("email_reply_email", email_id=mails[-1]["email_id"], body=body)


@template(
    "email",
    "easy",
    "Send an email to {name} with the subject '{subject}' and the body '{body}'.",
    "Please email {first}: subject '{subject}', message '{body}'.",
    "Can you write to {name}? Subject: '{subject}'. Text: '{body}'",
)
def send_email(f: Facts, rng):
    p = f.person(rng)
    subject, body = pick(rng, OUTGOING)
    return {"name": p.name, "first": p.first, "subject": subject, "body": body}, [
        call("email_send_email", recipient=p.email, subject=subject, body=body)
    ]


@template(
    "email",
    "medium",
    "Send the email '{subject}' to {names} with the body '{body}'.",
    "Email {names}, each separately, subject '{subject}', body '{body}'.",
)
def send_email_many(f: Facts, rng):
    people = f.people_sample(rng, int(rng.integers(2, 4)))
    subject, body = pick(rng, OUTGOING)
    calls = [call("email_send_email", recipient=p.email, subject=subject, body=body) for p in people]
    return {"names": listing([p.name for p in people]), "subject": subject, "body": body}, calls


@template(
    "email",
    "medium",
    "Reply to the latest email from {name} with '{body}'.",
    "{first} sent me an email recently; answer their most recent one saying '{body}'.",
)
def reply_latest(f: Facts, rng):
    drawn = reply_to_latest(f, rng)
    if drawn is None:
        return None
    p, body, reply = drawn
    return {"name": p.name, "first": p.first, "body": body}, [reply]


@template(
    "email",
    "medium",
    "Forward the most recent '{subject}' email I received to {name}.",
    "Please send {first} the latest email in my inbox with the subject '{subject}' (forward it).",
)
def forward_latest_subject(f: Facts, rng):
    subject = pick(rng, f.inbox)["subject"]
    latest = max((m for m in f.inbox if m["subject"] == subject), key=lambda m: (m["sent_datetime"], m["email_id"]))
    p = f.person(rng, exclude=(latest["sender"],))
    return {"subject": subject, "name": p.name, "first": p.first}, [
        call("email_forward_email", email_id=latest["email_id"], recipient=p.email)
    ]


@template(
    "email",
    "medium",
    "Delete all emails from {name} with the subject '{subject}'.",
    "Clean up my inbox: remove every '{subject}' email that {first} sent me.",
)
def delete_from_subject(f: Facts, rng):
    m = pick(rng, f.inbox)
    hits = [x for x in f.inbox_by_sender[m["sender"]] if x["subject"] == m["subject"]]
    p = f.by_email[m["sender"]]
    return {"name": p.name, "first": p.first, "subject": m["subject"]}, [call("email_delete_email", email_id=x["email_id"]) for x in hits]


@template(
    "email",
    "easy",
    "Delete the most recent email from {name}.",
    "Please trash the last email {first} sent me.",
)
def delete_latest(f: Facts, rng):
    drawn = _sender(f, rng)
    if drawn is None:
        return None
    p, mails = drawn
    return {"name": p.name, "first": p.first}, [call("email_delete_email", email_id=mails[-1]["email_id"])]


@template(
    "email",
    "hard",
    "Forward every email {name} sent me on {date} to {other}.",
    "{other_first} needs the emails I got from {first} on {date}: forward each of them to {other_first}.",
)
def forward_day(f: Facts, rng):
    m = pick(rng, f.inbox)
    day = m["sent_datetime"][:10]
    hits = [x for x in f.inbox_by_sender[m["sender"]] if x["sent_datetime"][:10] == day]
    p, q = f.by_email[m["sender"]], f.person(rng, exclude=(m["sender"],))
    calls = [call("email_forward_email", email_id=x["email_id"], recipient=q.email) for x in hits]
    return {"name": p.name, "first": p.first, "date": day, "other": q.name, "other_first": q.first}, calls


@template(
    "email",
    "hard",
    "Reply '{body}' to every email {name} has sent me since {date}.",
    "Answer each email from {first} received on or after {date} with: '{body}'",
)
def reply_since(f: Facts, rng):
    drawn = _sender(f, rng)
    if drawn is None:
        return None
    p, mails = drawn
    k = int(rng.integers(1, min(6, len(mails)) + 1))
    day = mails[-k]["sent_datetime"][:10]
    hits = [m for m in mails if m["sent_datetime"][:10] >= day]
    body = pick(rng, REPLIES)
    return {"name": p.name, "first": p.first, "date": day, "body": body}, [
        call("email_reply_email", email_id=m["email_id"], body=body) for m in hits
    ]


@template(
    "email",
    "medium",
    "If I have any emails from {name} about '{subject}', delete them.",
    "Check whether {first} ever sent me a '{subject}' email; if so, delete it.",
    noop=True,
)
def noop_delete_mail(f: Facts, rng):
    p = f.person(rng)
    subjects = sorted({m["subject"] for m in f.inbox} - {m["subject"] for m in f.inbox_by_sender.get(p.email, [])})
    if not subjects:
        return None
    return {"name": p.name, "first": p.first, "subject": pick(rng, subjects)}, []


# ----- calendar -----


def _future_event(f: Facts, rng, unique_by=("event_name", "participant_email")) -> dict | None:
    if not f.future_events:
        return None
    e = pick(rng, f.future_events)
    day = e["event_start"][:10]
    same = [x for x in f.day_events(day) if all(x[k] == e[k] for k in unique_by)]
    return e if len(same) == 1 else None


def _change_event(f: Facts, e: dict, field: str, value: str, **shown: Any) -> tuple[dict[str, Any], list[dict]]:
    """The params and the call that set ``field`` of event ``e``; ``shown`` adds what the phrasings name."""
    p = f.by_email[e["participant_email"]]
    params = {"event": e["event_name"], "name": p.name, "first": p.first, "date": e["event_start"][:10], **shown}
    return params, [call("calendar_update_event", event_id=e["event_id"], field=field, new_value=value)]


@template(
    "calendar",
    "easy",
    "Schedule a {duration}-minute '{event}' with {name} on {date} at {time}.",
    "Book '{event}' with {first} for {date}, {time}, lasting {duration} minutes.",
    "Put a meeting called '{event}' in my calendar with {name}: {date} at {time}, {duration} minutes.",
)
def create_event(f: Facts, rng):
    p = f.person(rng)
    day = future_weekday(rng)
    duration = int(pick(rng, (30, 45, 60, 90)))
    hour = int(rng.integers(S.WORK_START_HOUR, S.WORK_END_HOUR - 1))
    start = f"{day} {hour:02d}:{pick(rng, ('00', '30'))}:00"
    event = pick(rng, EVENT_NAMES)
    params = {"name": p.name, "first": p.first, "date": day, "time": start[11:16], "duration": duration, "event": event}
    return params, [call("calendar_create_event", event_name=event, participant_email=p.email, event_start=start, duration=duration)]


@template(
    "calendar",
    "medium",
    "Cancel my next meeting with {name}.",
    "Delete the next event on my calendar that {first} is part of.",
)
def cancel_next_with(f: Facts, rng):
    p = f.person(rng)
    upcoming = [e for e in f.future_events if e["participant_email"] == p.email]
    if not upcoming or (len(upcoming) > 1 and upcoming[1]["event_start"] == upcoming[0]["event_start"]):
        return None
    return {"name": p.name, "first": p.first}, [call("calendar_delete_event", event_id=upcoming[0]["event_id"])]


def busy_day(f: Facts, rng, calls_per_event: int) -> tuple[str, list[dict]] | None:
    """A drawn future working day and its events (None when it has none, or too many to handle in one task)."""
    day = future_weekday(rng)
    events = f.day_events(day)
    return (day, events) if events and calls_per_event * len(events) <= MAX_CALLS else None


@template(
    "calendar",
    "medium",
    "Clear my calendar on {date}: cancel every event that day.",
    "Delete all of my meetings on {date}.",
)
def clear_day(f: Facts, rng):
    drawn = busy_day(f, rng, calls_per_event=1)
    if drawn is None:
        return None
    day, events = drawn
    return {"date": day}, [call("calendar_delete_event", event_id=e["event_id"]) for e in events]


@template(
    "calendar",
    "medium",
    "Move my '{event}' with {name} on {date} to {new_time} the same day.",
    "Reschedule the '{event}' meeting I have with {first} on {date} so it starts at {new_time}.",
)
def reschedule_event(f: Facts, rng):
    e = _future_event(f, rng)
    if e is None:
        return None
    hour = int(rng.integers(S.WORK_START_HOUR, S.WORK_END_HOUR - 2))
    new_start = f"{e['event_start'][:10]} {hour:02d}:00:00"
    if new_start == e["event_start"]:
        return None
    return _change_event(f, e, "event_start", new_start, new_time=new_start[11:16])


@template(
    "calendar",
    "easy",
    "Change the '{event}' with {name} on {date} to last {duration} minutes.",
    "Make my {date} '{event}' meeting with {first} {duration} minutes long.",
)
def change_duration(f: Facts, rng):
    e = _future_event(f, rng)
    if e is None:
        return None
    duration = int(pick(rng, [d for d in (15, 30, 45, 60, 120) if d != int(e["duration"])]))
    return _change_event(f, e, "duration", str(duration), duration=duration)


@template(
    "calendar",
    "easy",
    "Rename the '{event}' with {name} on {date} to '{new_name}'.",
    "On {date} my '{event}' with {first} should be called '{new_name}' instead.",
)
def rename_event(f: Facts, rng):
    e = _future_event(f, rng)
    if e is None:
        return None
    # Compared as the verifier compares text: "Design review" would leave "Design Review" as it is.
    new_name = pick(rng, [n for n in EVENT_NAMES if normalize("text", n) != normalize("text", e["event_name"])])
    return _change_event(f, e, "event_name", new_name, new_name=new_name)


@template(
    "calendar",
    "medium",
    "Hand my '{event}' on {date} over to {other}: make {other_first} the participant instead of {first}.",
    "Replace {name} with {other} as the participant of the {date} '{event}'.",
)
def swap_participant(f: Facts, rng):
    e = _future_event(f, rng, unique_by=("event_name",))
    if e is None:
        return None
    q = f.person(rng, exclude=(e["participant_email"],))
    return _change_event(f, e, "participant_email", q.email, other=q.name, other_first=q.first)


@template(
    "calendar",
    "hard",
    "Schedule a {duration}-minute '{event}' with {name} on {date} in my first free slot during working hours.",
    "Find the earliest time on {date} when I am free for {duration} minutes (within working hours) and book '{event}' with {first} then.",
)
def first_free_slot(f: Facts, rng):
    day = future_weekday(rng)
    duration = int(pick(rng, (30, 60)))
    slot = f.first_free_slot(day, duration)
    if slot is None:
        return None
    p = f.person(rng)
    event = pick(rng, EVENT_NAMES)
    params = {"name": p.name, "first": p.first, "date": day, "duration": duration, "event": event}
    return params, [
        call(
            "calendar_create_event",
            event_name=event,
            participant_email=p.email,
            event_start=S.fmt_datetime(slot),
            duration=duration,
        )
    ]


@template(
    "calendar",
    "medium",
    "Cancel all my upcoming '{event}' events with {name}.",
    "I no longer need the '{event}' meetings with {first}: delete every future one.",
)
def cancel_series(f: Facts, rng):
    if not f.future_events:
        return None
    e = pick(rng, f.future_events)
    hits = [x for x in f.future_events if x["event_name"] == e["event_name"] and x["participant_email"] == e["participant_email"]]
    p = f.by_email[e["participant_email"]]
    return {"event": e["event_name"], "name": p.name, "first": p.first}, [
        call("calendar_delete_event", event_id=x["event_id"]) for x in hits
    ]


@template(
    "calendar",
    "medium",
    "If I have a meeting with {name} on {date}, cancel it.",
    "Check my calendar for {date}; if {first} is in any of my events that day, delete them.",
    noop=True,
)
def noop_cancel(f: Facts, rng):
    day = future_weekday(rng)
    busy = {e["participant_email"] for e in f.day_events(day)}
    free = [p for p in f.people if p.email not in busy]
    if not free:
        return None
    p = pick(rng, free)
    return {"name": p.name, "first": p.first, "date": day}, []


# ----- analytics -----


@template(
    "analytics",
    "easy",
    "Create a {plot_type} plot of {label} from {start} to {end}.",
    "Plot {label} between {start} and {end} as a {plot_type} chart.",
)
def plot(f: Facts, rng):
    lo, hi = f.date_range(rng)
    value, kind = pick(rng, S.PLOT_VALUES), pick(rng, S.PLOT_TYPES)
    params = {"plot_type": kind, "label": VALUE_LABELS[value], "start": lo, "end": hi}
    return params, [call("analytics_create_plot", time_min=lo, time_max=hi, value_to_plot=value, plot_type=kind)]


@template(
    "analytics",
    "medium",
    "Make {plot_type} plots of {labels} for {start} to {end}, one plot per value.",
    "I need separate {plot_type} charts of {labels} covering {start} through {end}.",
)
def plot_many(f: Facts, rng):
    lo, hi = f.date_range(rng)
    values = [S.PLOT_VALUES[int(i)] for i in rng.permutation(3)[: int(rng.integers(2, 4))]]
    kind = pick(rng, S.PLOT_TYPES)
    labels = [VALUE_LABELS[v] for v in values]
    params = {"plot_type": kind, "labels": listing(labels), "start": lo, "end": hi}
    return params, [call("analytics_create_plot", time_min=lo, time_max=hi, value_to_plot=v, plot_type=kind) for v in values]


@template(
    "analytics",
    "medium",
    "Create a bar plot of visits from each traffic source (direct, referral, search engine, social media) for {start} to {end}.",
    "For {start} to {end}, make one bar chart per traffic source showing its visits.",
)
def plot_sources(f: Facts, rng):
    lo, hi = f.date_range(rng)
    values = [v for v in S.PLOT_VALUES if v.startswith("visits_")]
    return {"start": lo, "end": hi}, [
        call("analytics_create_plot", time_min=lo, time_max=hi, value_to_plot=v, plot_type="bar") for v in values
    ]


@template(
    "analytics",
    "medium",
    "Which traffic source brought the most visits between {start} and {end}? Make a line plot of that source's visits over the same period.",
    "Find the top traffic source for {start}-{end} and plot its visits as a line chart for that range.",
)
def plot_top_source(f: Facts, rng):
    lo, hi = f.date_range(rng)
    counts = sorted(((len(f.visits_between(lo, hi, s)), s) for s in S.TRAFFIC_SOURCES), reverse=True)
    if counts[0][0] == counts[1][0]:
        return None
    value = "visits_" + counts[0][1].replace(" ", "_")
    return {"start": lo, "end": hi}, [call("analytics_create_plot", time_min=lo, time_max=hi, value_to_plot=value, plot_type="line")]


@template(
    "analytics",
    "medium",
    "If the average session duration between {start} and {end} was above {threshold} seconds, make a line plot of session duration for that period; otherwise make a bar plot of engaged users.",
    "Check the average session length from {start} to {end}. Over {threshold} seconds: plot session duration as a line chart. Otherwise: plot engaged users as a bar chart. Same dates either way.",
)
def plot_if_long_sessions(f: Facts, rng):
    lo, hi = f.date_range(rng)
    visits = f.visits_between(lo, hi)
    avg = sum(v["session_duration_seconds"] for v in visits) / len(visits)
    threshold = int(round(avg)) + int(pick(rng, (-60, -30, 30, 60)))
    value, kind = ("session_duration_seconds", "line") if avg > threshold else ("user_engaged", "bar")
    return {"start": lo, "end": hi, "threshold": threshold}, [
        call("analytics_create_plot", time_min=lo, time_max=hi, value_to_plot=value, plot_type=kind)
    ]


def two_weeks(rng) -> tuple[tuple[str, str], tuple[str, str]]:
    """Two back-to-back seven-day spans, the later one ending on a drawn Wednesday up to five weeks before today."""
    end = date.fromisoformat("2023-11-29") - timedelta(days=7 * int(rng.integers(0, 6)))
    second = (end - timedelta(days=6), end)
    first = (second[0] - timedelta(days=7), second[0] - timedelta(days=1))
    return (first[0].isoformat(), first[1].isoformat()), (second[0].isoformat(), second[1].isoformat())


@template(
    "analytics",
    "hard",
    "Compare total visits in the week {a0} to {a1} with the week {b0} to {b1}. If the later week had more, make a line plot of total visits from {a0} to {b1}; otherwise a bar plot of engaged users for the same span.",
    "Did visits grow from week {a0}..{a1} to week {b0}..{b1}? Yes: line plot of total visits over {a0}..{b1}. No: bar plot of engaged users over {a0}..{b1}.",
)
def plot_if_growth(f: Facts, rng):
    (a0, a1), (b0, b1) = two_weeks(rng)
    grew = len(f.visits_between(b0, b1)) > len(f.visits_between(a0, a1))
    value, kind = ("total_visits", "line") if grew else ("user_engaged", "bar")
    return {"a0": a0, "a1": a1, "b0": b0, "b1": b1}, [
        call("analytics_create_plot", time_min=a0, time_max=b1, value_to_plot=value, plot_type=kind)
    ]


@template(
    "analytics",
    "medium",
    "If there were more than {threshold} visits on {day}, create a bar plot of total visits for that day.",
    "Plot total visits for {day} as a bar chart, but only if that day had over {threshold} visits.",
    noop=True,
)
def noop_plot(f: Facts, rng):
    day = pick(rng, f.visit_days)
    threshold = len(f.visits_between(day, day)) + int(rng.integers(0, 10))
    return {"day": day, "threshold": threshold}, []
