"""Task templates over records: project management, CRM, and requests that span domains.

Same contract as :mod:`textgym.envs.workplace.templates`: each draw returns ``(params, calls)``
from the world's rows, or None when the draw does not fit.
"""

from __future__ import annotations

from textgym.envs.workplace import schema as S
from textgym.envs.workplace.facts import Facts, Person, at, call, future_weekday, pick, tomorrow
from textgym.envs.workplace.templates import Template, busy_day, collector, listing, reply_to_latest, two_weeks

TEMPLATES: list[Template] = []
template = collector(TEMPLATES)

NEW_TASKS = (
    "Prepare Q1 roadmap",
    "Audit access rights",
    "Write release notes",
    "Migrate CI pipeline",
    "Update privacy policy",
    "Plan user interviews",
)
NEW_CUSTOMERS = (
    ("Morgan Blake", "morgan.blake@example.com", "555-201-3344"),
    ("Ellis Turner", "ellis.turner@northwind.io", "555-410-2290"),
    ("Robin Shah", "robin.shah@contoso.net", "555-733-8812"),
    ("Alexis Ford", "alexis.ford@fabrikam.biz", "555-128-6640"),
)


def _unique(rng, rows: list[dict], column: str) -> dict | None:
    """A drawn row whose ``column`` (its name) is unique, so the request names exactly that row; else None."""
    r = pick(rng, rows)
    return r if sum(1 for x in rows if x[column] == r[column]) == 1 else None


def _task(f: Facts, rng) -> dict | None:
    return _unique(rng, f.tasks, "task_name")


def _customer(f: Facts, rng) -> dict | None:
    return _unique(rng, f.customers, "customer_name")


def _group_of_drawn(rng, rows: list[dict], match, same: tuple[str, ...]) -> list[dict] | None:
    """The rows that ``match`` and agree on the ``same`` columns with one drawn matching row (None if none match).

    Drawing a matching row first, rather than an owner, makes every draw fit the world.
    """
    r = pick(rng, [x for x in rows if match(x)] or [None])
    if r is None:
        return None
    return [x for x in rows if match(x) and all(x[k] == r[k] for k in same)]


def _move_tasks(tasks: list[dict], list_name: str) -> list[dict]:
    return [call("project_management_update_task", task_id=x["task_id"], field="list_name", new_value=list_name) for x in tasks]


def _open_tasks(f: Facts, email: str, board: str) -> list[dict]:
    return [t for t in f.tasks if t["assigned_to_email"] == email and t["board"] == board and t["list_name"] != "Completed"]


# ----- project management -----


@template(
    "project_management",
    "easy",
    "Create a task '{task}' for {name} on the {board} board, in the {list_name} list, due {due}.",
    "Add '{task}' to the {board} board ({list_name}), assigned to {first}, due on {due}.",
)
def create_task(f: Facts, rng):
    p = f.person(rng)
    task, board, list_name = pick(rng, NEW_TASKS), pick(rng, S.BOARDS), pick(rng, ("Backlog", "In Progress"))
    due = future_weekday(rng, within=40)
    params = {"task": task, "name": p.name, "first": p.first, "board": board, "list_name": list_name, "due": due}
    return params, [
        call(
            "project_management_create_task",
            task_name=task,
            assigned_to_email=p.email,
            list_name=list_name,
            due_date=due,
            board=board,
        )
    ]


@template(
    "project_management",
    "easy",
    "Move the task '{task}' to {list_name}.",
    "Please put '{task}' into the {list_name} list.",
)
def move_task(f: Facts, rng):
    t = _task(f, rng)
    if t is None:
        return None
    target = pick(rng, [n for n in S.LIST_NAMES if n != t["list_name"]])
    return {"task": t["task_name"], "list_name": target}, [
        call("project_management_update_task", task_id=t["task_id"], field="list_name", new_value=target)
    ]


@template(
    "project_management",
    "easy",
    "Reassign the task '{task}' to {name}.",
    "{first} is taking over '{task}'; update the assignee.",
)
def reassign_task(f: Facts, rng):
    t = _task(f, rng)
    if t is None:
        return None
    p = f.person(rng, exclude=(t["assigned_to_email"],))
    return {"task": t["task_name"], "name": p.name, "first": p.first}, [
        call("project_management_update_task", task_id=t["task_id"], field="assigned_to_email", new_value=p.email)
    ]


@template(
    "project_management",
    "easy",
    "Change the due date of '{task}' to {due}.",
    "The task '{task}' is now due on {due}; please update it.",
)
def change_due(f: Facts, rng):
    t = _task(f, rng)
    if t is None:
        return None
    due = future_weekday(rng, within=40)
    if due == t["due_date"]:
        return None
    return {"task": t["task_name"], "due": due}, [
        call("project_management_update_task", task_id=t["task_id"], field="due_date", new_value=due)
    ]


@template(
    "project_management",
    "easy",
    "Delete the task '{task}'.",
    "Remove '{task}' from the project board; it is no longer needed.",
)
def delete_task(f: Facts, rng):
    t = _task(f, rng)
    if t is None:
        return None
    return {"task": t["task_name"]}, [call("project_management_delete_task", task_id=t["task_id"])]


def _reviews_done(f: Facts, rng) -> tuple[Person, str, list[dict]] | None:
    """A person, a board, and the calls that move all their 'In Review' tasks there to Completed."""
    hits = _group_of_drawn(rng, f.tasks, lambda x: x["list_name"] == "In Review", ("assigned_to_email", "board"))
    if hits is None:
        return None
    return f.by_email[hits[0]["assigned_to_email"]], hits[0]["board"], _move_tasks(hits, "Completed")


@template(
    "project_management",
    "medium",
    "Move all of {name}'s tasks in 'In Review' on the {board} board to 'Completed'.",
    "{first} has finished everything under review on the {board} board: mark those tasks Completed.",
)
def complete_reviews(f: Facts, rng):
    drawn = _reviews_done(f, rng)
    if drawn is None:
        return None
    p, board, calls = drawn
    return {"name": p.name, "first": p.first, "board": board}, calls


@template(
    "project_management",
    "hard",
    "{name} is leaving the {board} team: reassign all of their unfinished {board} tasks to {other}.",
    "Give every {board} task of {first} that is not Completed to {other_first}.",
)
def hand_over_tasks(f: Facts, rng):
    p = f.person(rng)
    board = pick(rng, S.BOARDS)
    hits = _open_tasks(f, p.email, board)
    if not hits:
        return None
    q = f.person(rng, exclude=(p.email,))
    params = {"name": p.name, "first": p.first, "board": board, "other": q.name, "other_first": q.first}
    return params, [
        call("project_management_update_task", task_id=x["task_id"], field="assigned_to_email", new_value=q.email) for x in hits
    ]


@template(
    "project_management",
    "medium",
    "Move every overdue task of {name} that is still in the Backlog to 'In Progress'.",
    "{first}'s Backlog tasks that are past their due date should go to In Progress.",
)
def overdue_backlog(f: Facts, rng):
    today = S.TODAY.isoformat()
    hits = _group_of_drawn(rng, f.tasks, lambda x: x["list_name"] == "Backlog" and x["due_date"] < today, ("assigned_to_email",))
    if hits is None:
        return None
    p = f.by_email[hits[0]["assigned_to_email"]]
    return {"name": p.name, "first": p.first}, _move_tasks(hits, "In Progress")


@template(
    "project_management",
    "medium",
    "Create the task '{task}' on the {board} board in Backlog, due {due}, once for each of {names}.",
    "{names} each need their own '{task}' task ({board} board, Backlog, due {due}).",
)
def create_tasks_many(f: Facts, rng):
    people = f.people_sample(rng, int(rng.integers(2, 4)))
    task, board, due = pick(rng, NEW_TASKS), pick(rng, S.BOARDS), future_weekday(rng, within=40)
    calls = [
        call(
            "project_management_create_task",
            task_name=task,
            assigned_to_email=p.email,
            list_name="Backlog",
            due_date=due,
            board=board,
        )
        for p in people
    ]
    return {"task": task, "board": board, "due": due, "names": listing([p.name for p in people])}, calls


@template(
    "project_management",
    "medium",
    "If {name} has any tasks in 'In Review' on the {board} board, move them to 'Completed'.",
    "Check the {board} board: should {first} have tasks waiting in review, mark them Completed.",
    noop=True,
)
def noop_reviews(f: Facts, rng):
    p, board = f.person(rng), pick(rng, S.BOARDS)
    if any(x["assigned_to_email"] == p.email and x["board"] == board and x["list_name"] == "In Review" for x in f.tasks):
        return None
    return {"name": p.name, "first": p.first, "board": board}, []


# ----- CRM -----


@template(
    "crm",
    "easy",
    "Add {customer} ({email}, phone {phone}) to the CRM as a {status} interested in {product}, assigned to {name}.",
    "New CRM customer: {customer}, email {email}, phone {phone}, status {status}, product interest {product}; {first} owns the account.",
)
def add_customer(f: Facts, rng):
    customer, email, phone = pick(rng, NEW_CUSTOMERS)
    p, status, product = f.person(rng), pick(rng, ("Lead", "Qualified")), pick(rng, S.PRODUCTS)
    params = {
        "customer": customer,
        "email": email,
        "phone": phone,
        "status": status,
        "product": product,
        "name": p.name,
        "first": p.first,
    }
    return params, [
        call(
            "customer_relationship_manager_add_customer",
            customer_name=customer,
            assigned_to_email=p.email,
            status=status,
            customer_email=email,
            customer_phone=phone,
            product_interest=product,
        )
    ]


def _update_customer(field: str, choices, phrase_key: str):
    def draw(f: Facts, rng):
        c = _customer(f, rng)
        if c is None:
            return None
        value = pick(rng, [v for v in choices(f, rng) if v != c[field]])
        shown = f.by_email[value].name if field == "assigned_to_email" else value
        return {"customer": c["customer_name"], phrase_key: shown}, [
            call(
                "customer_relationship_manager_update_customer",
                customer_id=c["customer_id"],
                field=field,
                new_value=value,
            )
        ]

    return draw


def _register_updates():
    specs = (
        ("update_status", "status", lambda f, rng: S.STATUSES, "status",
         ("Set the status of {customer} to {status} in the CRM.", "{customer} is now {status}; please update the CRM.")),
        ("reassign_customer", "assigned_to_email", lambda f, rng: [p.email for p in f.people], "name",
         ("Reassign customer {customer} to {name} in the CRM.", "{name} takes over the {customer} account.")),
        ("change_follow_up", "follow_up_by", lambda f, rng: [future_weekday(rng, within=40)], "date",
         ("Set the follow-up date for {customer} to {date}.", "I need to follow up with {customer} by {date}; update the CRM.")),
        ("change_interest", "product_interest", lambda f, rng: S.PRODUCTS, "product",
         ("{customer} is now interested in {product}; update their record.", "Change the product interest of {customer} to {product}.")),
        ("change_phone", "customer_phone", lambda f, rng: [f"555-{int(rng.integers(100, 1000))}-{int(rng.integers(1000, 10000))}"], "phone",
         ("Update the phone number of {customer} to {phone}.", "{customer} has a new phone number: {phone}. Please record it.")),
    )  # fmt: skip
    for name, field, choices, key, phrasings in specs:
        draw = _update_customer(field, choices, key)
        draw.__name__ = name
        template("crm", "easy", *phrasings)(draw)


_register_updates()


@template(
    "crm",
    "easy",
    "Delete the customer {customer} from the CRM.",
    "Remove {customer}'s record from the CRM.",
)
def delete_customer(f: Facts, rng):
    c = _customer(f, rng)
    if c is None:
        return None
    return {"customer": c["customer_name"]}, [call("customer_relationship_manager_delete_customer", customer_id=c["customer_id"])]


@template(
    "crm",
    "medium",
    "Move all of {name}'s leads interested in {product} to Qualified.",
    "Every {product} customer of {first} with status Lead is now Qualified; update the CRM.",
)
def qualify_leads(f: Facts, rng):
    hits = _group_of_drawn(rng, f.customers, lambda x: x["status"] == "Lead", ("assigned_to_email", "product_interest"))
    if hits is None:
        return None
    p = f.by_email[hits[0]["assigned_to_email"]]
    return {"name": p.name, "first": p.first, "product": hits[0]["product_interest"]}, [
        call(
            "customer_relationship_manager_update_customer",
            customer_id=x["customer_id"],
            field="status",
            new_value="Qualified",
        )
        for x in hits
    ]


@template(
    "crm",
    "medium",
    "Delete every customer assigned to {name} whose status is Lost.",
    "Clean up {first}'s accounts: remove all of their Lost customers from the CRM.",
)
def delete_lost(f: Facts, rng):
    p = f.person(rng)
    hits = [x for x in f.customers if x["assigned_to_email"] == p.email and x["status"] == "Lost"]
    if not hits:
        return None
    return {"name": p.name, "first": p.first}, [
        call("customer_relationship_manager_delete_customer", customer_id=x["customer_id"]) for x in hits
    ]


@template(
    "crm",
    "hard",
    "Reassign all of {name}'s customers to {other}.",
    "{first} is moving to another team; every CRM customer assigned to {first} should go to {other_first}.",
)
def reassign_book(f: Facts, rng):
    p = f.person(rng)
    hits = [x for x in f.customers if x["assigned_to_email"] == p.email]
    if not hits:
        return None
    q = f.person(rng, exclude=(p.email,))
    return {"name": p.name, "first": p.first, "other": q.name, "other_first": q.first}, [
        call(
            "customer_relationship_manager_update_customer",
            customer_id=x["customer_id"],
            field="assigned_to_email",
            new_value=q.email,
        )
        for x in hits
    ]


@template(
    "crm",
    "medium",
    "If any of {name}'s customers interested in {product} are in the Proposal stage, mark them as Won.",
    "Check whether {first} has {product} customers with status Proposal; if so, set them to Won.",
    noop=True,
)
def noop_proposals(f: Facts, rng):
    p, product = f.person(rng), pick(rng, S.PRODUCTS)
    if any(x["assigned_to_email"] == p.email and x["product_interest"] == product and x["status"] == "Proposal" for x in f.customers):
        return None
    return {"name": p.name, "first": p.first, "product": product}, []


# ----- multi-domain -----


@template(
    "multi_domain",
    "medium",
    "Email the account owner of {customer} with the subject 'Follow up: {customer}' and the body '{body}'.",
    "Whoever owns the {customer} account in the CRM should get an email, subject 'Follow up: {customer}', saying '{body}'.",
)
def email_account_owner(f: Facts, rng):
    c = _customer(f, rng)
    if c is None:
        return None
    body = pick(rng, ("Please reach out to them this week.", "Can you send me an update on this account?"))
    subject = f"Follow up: {c['customer_name']}"
    return {"customer": c["customer_name"], "body": body}, [
        call("email_send_email", recipient=c["assigned_to_email"], subject=subject, body=body)
    ]


@template(
    "multi_domain",
    "medium",
    "Schedule a 30-minute meeting called '{task} sync' tomorrow at {time} with whoever is assigned to the task '{task}'.",
    "Book '{task} sync' for 30 minutes tomorrow at {time} with the assignee of '{task}'.",
)
def meet_task_owner(f: Facts, rng):
    t = _task(f, rng)
    if t is None:
        return None
    hour = int(rng.integers(S.WORK_START_HOUR, S.WORK_END_HOUR - 1))
    start = at(tomorrow(), hour)
    return {"task": t["task_name"], "time": start[11:16]}, [
        call(
            "calendar_create_event",
            event_name=f"{t['task_name']} sync",
            participant_email=t["assigned_to_email"],
            event_start=start,
            duration=30,
        )
    ]


@template(
    "multi_domain",
    "hard",
    "Cancel all my meetings on {date} and email each participant with the subject 'Cancelled: <event name>' and the body '{body}'.",
    "Clear {date} from my calendar; for every event you delete, send its participant an email titled 'Cancelled: ' followed by the event name, with the text '{body}'.",
)
def cancel_day_notify(f: Facts, rng):
    drawn = busy_day(f, rng, calls_per_event=2)
    if drawn is None:
        return None
    day, events = drawn
    body = "Sorry, I have to cancel our meeting; I will propose a new time."
    calls = []
    for e in events:
        calls.append(call("calendar_delete_event", event_id=e["event_id"]))
        calls.append(call("email_send_email", recipient=e["participant_email"], subject=f"Cancelled: {e['event_name']}", body=body))
    return {"date": day, "body": body}, calls


@template(
    "multi_domain",
    "hard",
    "Mark {name}'s 'In Review' tasks on the {board} board as Completed and send {first} one email with the subject 'Reviews done' and the body '{body}'.",
    "Close out {first}'s reviews on the {board} board (move them to Completed), then email {name}: subject 'Reviews done', text '{body}'.",
)
def complete_and_notify(f: Facts, rng):
    drawn = _reviews_done(f, rng)
    if drawn is None:
        return None
    p, board, calls = drawn
    body = "All your tasks in review are now marked completed."
    calls.append(call("email_send_email", recipient=p.email, subject="Reviews done", body=body))
    return {"name": p.name, "first": p.first, "board": board, "body": body}, calls


@template(
    "multi_domain",
    "medium",
    "Create a Backlog task 'Follow up with {customer}' on the {board} board for the customer's account owner, due on the customer's follow-up date.",
    "Add a task 'Follow up with {customer}' ({board} board, Backlog), assigned to whoever owns {customer} in the CRM and due on their follow-up date.",
)
def follow_up_task(f: Facts, rng):
    c = _customer(f, rng)
    if c is None or not c["follow_up_by"]:
        return None
    board = pick(rng, S.BOARDS)
    return {"customer": c["customer_name"], "board": board}, [
        call(
            "project_management_create_task",
            task_name=f"Follow up with {c['customer_name']}",
            assigned_to_email=c["assigned_to_email"],
            list_name="Backlog",
            due_date=c["follow_up_by"],
            board=board,
        )
    ]


@template(
    "multi_domain",
    "medium",
    "Compare total website visits in {a0}..{a1} with {b0}..{b1}. Email {name} with the subject 'Traffic report' and the body 'Traffic is up' if the second period had more visits, otherwise 'Traffic is down'.",
    "Send {first} a 'Traffic report' email: the body is 'Traffic is up' when visits in {b0}..{b1} exceed those in {a0}..{a1}, else 'Traffic is down'.",
)
def traffic_report(f: Facts, rng):
    (a0, a1), (b0, b1) = two_weeks(rng)
    up = len(f.visits_between(b0, b1)) > len(f.visits_between(a0, a1))
    p = f.person(rng)
    body = "Traffic is up" if up else "Traffic is down"
    return {"a0": a0, "a1": a1, "b0": b0, "b1": b1, "name": p.name, "first": p.first}, [
        call("email_send_email", recipient=p.email, subject="Traffic report", body=body)
    ]


@template(
    "multi_domain",
    "medium",
    "Reply to the latest email from {name} with '{body}' and schedule a 30-minute 'Catch-up' with {first} tomorrow at {time}.",
    "Answer {first}'s most recent email ('{body}') and book a 30-minute 'Catch-up' with {name} for tomorrow, {time}.",
)
def reply_and_meet(f: Facts, rng):
    drawn = reply_to_latest(f, rng)
    if drawn is None:
        return None
    p, body, reply = drawn
    start = at(tomorrow(), int(rng.integers(S.WORK_START_HOUR, S.WORK_END_HOUR - 1)))
    return {"name": p.name, "first": p.first, "body": body, "time": start[11:16]}, [
        reply,
        call("calendar_create_event", event_name="Catch-up", participant_email=p.email, event_start=start, duration=30),
    ]


@template(
    "multi_domain",
    "medium",
    "If {name} has any overdue tasks on the {board} board that are not completed, email them a reminder with the subject 'Overdue tasks'.",
    "Look at the {board} board: should {first} have unfinished tasks past their due date, send {first} an email titled 'Overdue tasks'.",
    noop=True,
)
def noop_overdue_reminder(f: Facts, rng):
    p, board = f.person(rng), pick(rng, S.BOARDS)
    if any(t["due_date"] < S.TODAY.isoformat() for t in _open_tasks(f, p.email, board)):
        return None
    return {"name": p.name, "first": p.first, "board": board}, []
