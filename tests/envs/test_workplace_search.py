"""Workplace searches give exactly the results of the queries they replaced.

A search counted its matches with a window function over one sorted statement with a ``LIKE``
per word and column (a paged email search took 625 us); it now counts apart and walks an index
in the page's order, or finds its words in the world's word index (and in the rows the session
wrote) and pages their ids. The reference here is the old statement with its ``LIKE``s, run by
the same tools; both must agree on every page and total, also after writes, on dates and end
times, and on words LIKE treats specially (wildcards, quotes, non-ASCII case, NUL, surrogates).
"""

import numpy as np
import pytest

from textgym.envs.workplace import WorkplaceEnv
from textgym.envs.workplace import schema as S
from textgym.envs.workplace.tools import WorkplaceTools
from textgym.envs.workplace.tools.records import SearchFilter
from textgym.tools import ToolResult, to_json

SEARCHES = {
    "email_search_emails": ("query", "emails"),
    "calendar_search_events": ("query", "calendar"),
    "project_management_search_tasks": ("task_name", "project_tasks"),
    "customer_relationship_manager_search_customers": ("customer_name", "customers"),
    "company_directory_find_email_address": ("name", "company_directory"),
}
ODD = ["é", "É", "ß", "ü", "\u212a", "%", "_", "\\", '"', "'", "a%b", "a_b", '"quoted"', "ab", "x", "100%", "*", "NEAR", "AND"]
ODD += ["\x00", "a\x00", "\x00com", "\ud800", "ok\udfff", "a" * 1001, "\u00c9cole", "ATLAS.COM", "@", ".", "\n"]


def pick(rng, options):
    return options[int(rng.integers(len(options)))]


def address(env, rng):
    """Someone's address, in any case (the filters ignore it)."""
    email = pick(rng, [e for _, e in env.world.people])
    return email.upper() if rng.random() < 0.3 else email


def day_of(table, column):
    return lambda env, rng: pick(rng, [r[column] for r in env.world.rows[table]] + ["2023-12-01"])


FILTERS = {
    "project_management_search_tasks": {
        "assigned_to_email": address,
        "list_name": lambda env, rng: pick(rng, S.LIST_NAMES),
        "board": lambda env, rng: pick(rng, S.BOARDS),
        "due_date": day_of("project_tasks", "due_date"),
    },
    "customer_relationship_manager_search_customers": {
        "customer_email": lambda env, rng: pick(rng, ["com", ".io", "INFO", "a", "%", "zz"]),
        "product_interest": lambda env, rng: pick(rng, S.PRODUCTS),
        "status": lambda env, rng: pick(rng, S.STATUSES),
        "assigned_to_email": address,
        "last_contact_date_min": day_of("customers", "last_contact_date"),
        "last_contact_date_max": day_of("customers", "last_contact_date"),
        "follow_up_by_min": day_of("customers", "follow_up_by"),
        "follow_up_by_max": day_of("customers", "follow_up_by"),
    },
}


def old_page(self, table, where, page, page_size, label):
    """The search's former statement: one sorted statement with a window count."""
    rows = self.db.execute(
        f'SELECT {table.select_list}, count(*) OVER () FROM "{table.name}"{where.sql} ORDER BY {table.order} LIMIT ? OFFSET ?',
        [*where.params, page_size, (page - 1) * page_size],
    ).fetchall()
    if rows:
        total = rows[0][-1]
    else:
        (total,) = self.db.execute(f'SELECT count(*) FROM "{table.name}"{where.sql}', where.params).fetchone()
    return {
        label: [dict(zip(table.names, r[:-1])) for r in rows],
        "page": page,
        "page_size": page_size,
        "total": total,
        "total_pages": max(1, -(-total // page_size)),
    }


def queries(env, rng, n, odd=True):
    words = sorted({w for rows in env.world.rows.values() for r in rows for v in r.values() if isinstance(v, str) for w in v.split()})
    out = []
    for _ in range(n):
        w = words[rng.integers(len(words))]
        kind = rng.integers(5)
        if kind == 0:
            start = rng.integers(len(w))
            w = w[start : start + int(rng.integers(1, 7))]
        elif kind == 1:
            w = w.upper()
        elif kind == 2:
            w = w + " " + words[rng.integers(len(words))]
        elif kind == 3:
            w = ODD[rng.integers(len(ODD))] + (w if rng.random() < 0.5 else "")
        out.append(w)
    return out + (ODD if odd else []) + [""]


def old_directory(db, name):
    """The former directory search: a LIKE per word and column, sorted by address."""
    where = SearchFilter(S.DIRECTORY)  # not indexed: every word a LIKE condition
    where.words(name)
    sql = f"SELECT email_address FROM company_directory{where.sql} ORDER BY email_address"
    return ToolResult(to_json([r[0] for r in db.execute(sql, where.params)]))


def compare(env, monkeypatch, rng, n, extra=(), odd=True):
    for tool, (argument, _) in SEARCHES.items():
        for q in queries(env, rng, n, odd) + list(extra):
            args = {argument: q}
            if tool != "company_directory_find_email_address":
                args |= {"page": int(rng.integers(1, 3)), "page_size": int(rng.integers(1, 20))}
            day = f"2023-{rng.integers(10, 13)}-{rng.integers(10, 29)}"
            if tool == "email_search_emails" and rng.random() < 0.3:
                args["date_min" if rng.random() < 0.5 else "date_max"] = day
            if tool == "calendar_search_events" and rng.random() < 0.3:
                args["time_min" if rng.random() < 0.5 else "time_max"] = day + " 12:00:00"
            if tool in FILTERS:  # the other filters, one or two at a time, as SQL still applies them
                for name in rng.permutation(list(FILTERS[tool]))[: rng.integers(0, 3)]:
                    args[str(name)] = FILTERS[tool][name](env, rng)
            fast = env.tools.call(tool, args)
            if tool == "company_directory_find_email_address":
                try:
                    assert fast == old_directory(env.db, q), (tool, args)
                except UnicodeEncodeError as exc:  # the same rejection, as GuardedToolset words it
                    assert fast.error == f"{tool}: the database rejected the arguments (UnicodeEncodeError: {exc})"
                continue
            with monkeypatch.context() as m:
                m.setattr(env._session.rows, "words", None)  # every word a LIKE condition, as before
                m.setattr(WorkplaceTools, "_page", old_page)
                slow = env.tools.call(tool, args)
            assert fast == slow, (tool, args)


@pytest.fixture
def env():
    e = WorkplaceEnv()
    e.reset(seed=0)
    return e


def test_searches_equal_the_old_statement_on_the_world(env, monkeypatch):
    compare(env, monkeypatch, np.random.default_rng(0), 60)


def test_searches_equal_the_old_statement_after_writes(env, monkeypatch):
    me = "raj.schmidt@atlas.com"
    writes = [
        ("email_send_email", {"recipient": me, "subject": "Quarterly RÉPORT draft", "body": "Straße 100% done_ok"}),
        ("email_delete_email", {"email_id": "00000003"}),
        ("email_reply_email", {"email_id": "00000005", "body": "Thanks, see the 'roadmap'."}),
        ("email_forward_email", {"email_id": "00000006", "recipient": me}),
        ("calendar_update_event", {"event_id": "00000002", "field": "event_name", "new_value": "Kickoff Ünicode"}),
        ("calendar_delete_event", {"event_id": "00000004"}),
        (
            "calendar_create_event",
            {"event_name": 'Design "Sync"', "participant_email": me, "event_start": "2023-12-05 10:00:00", "duration": 30},
        ),
        ("project_management_update_task", {"task_id": "00000001", "field": "task_name", "new_value": "Rewrite landing page"}),
        ("project_management_delete_task", {"task_id": "00000002"}),
        (
            "customer_relationship_manager_update_customer",
            {"customer_id": "00000001", "field": "customer_name", "new_value": "Éclair Corp"},
        ),
        ("customer_relationship_manager_delete_customer", {"customer_id": "00000002"}),
        ("customer_relationship_manager_add_customer", {"customer_name": "Zeta Labs", "assigned_to_email": me, "status": "Lead"}),
        ("email_send_email", {"recipient": me, "subject": "Before\x00After", "body": "nul\x00hidden"}),  # LIKE stops at NUL
        ("project_management_delete_task", {"task_id": "00000150"}),  # the last row: its rowid is taken again
        (
            "project_management_create_task",
            {"task_name": "Landing rework", "assigned_to_email": me, "list_name": "Backlog", "due_date": "2023-12-01", "board": "Design"},
        ),
    ]
    new_words = ["RÉPORT", "répo", "Straße", "done_ok", "roadmap", "Ünicode", "Kickoff", '"Sync"', "Rewrite", "Éclair", "Zeta"]
    new_words += ["before", "After", "hidden", "nul", "landing rework"]
    rng = np.random.default_rng(1)
    for name, args in writes:  # searches between writes too: what a session keeps of its writes must follow them
        assert env.tools.call(name, args).error is None, name
        compare(env, monkeypatch, rng, 3, extra=new_words, odd=False)
    compare(env, monkeypatch, rng, 40, extra=new_words)
    found = env.tools.call("customer_relationship_manager_search_customers", {"customer_name": "zeta labs"}).content
    assert '"total": 1' in found and "Zeta Labs" in found


def old_counts(db, lo, hi, extra="", params=()):
    """A count tool's former statement: a count of every visit per day."""
    where = SearchFilter()
    where.dates("date_of_visit", lo, hi)
    if extra:
        where.add(extra, *params)
    sql = f"SELECT date_of_visit, count(*) FROM analytics{where.sql} GROUP BY date_of_visit ORDER BY date_of_visit"
    rows = db.execute(sql, where.params).fetchall()
    return {"total": sum(n for _, n in rows), "by_date": dict(rows)}


def old_sources(db, lo, hi):
    where = SearchFilter()
    where.dates("date_of_visit", lo, hi)
    rows = db.execute(f"SELECT traffic_source, count(*) FROM analytics{where.sql} GROUP BY traffic_source", where.params)
    counts = dict.fromkeys(S.TRAFFIC_SOURCES, 0) | dict(rows.fetchall())
    return {"by_source": counts, "total": sum(counts.values())}


def csv_world(tmp_path):
    """A WorkBench-style analytics table with a source outside the enum and one spelled otherwise."""
    rng = np.random.default_rng(5)
    lines = ["date_of_visit,visitor_id,page_views,session_duration_seconds,traffic_source,user_engaged"]
    for i in range(300):
        day = f"2023-{rng.integers(9, 12):02d}-{rng.integers(1, 29):02d}"
        source = ["direct", "referral", "email", "Direct", "search engine", "social media"][rng.integers(6)]
        lines.append(f"{day},v{i % 40},{rng.integers(1, 9)},{rng.integers(5, 900)},{source},{['True', 'False'][rng.integers(2)]}")
    (tmp_path / "analytics_data.csv").write_text("\n".join(lines) + "\n")
    return WorkplaceEnv(data_dir=str(tmp_path))


@pytest.mark.parametrize("world", ["seed 0", "seed 3", "csv"])
def test_visit_counts_equal_the_counts_over_every_visit(world, tmp_path):
    env = csv_world(tmp_path) if world == "csv" else WorkplaceEnv(world_seed=int(world[-1]))  # a session from the start
    days = sorted({r["date_of_visit"] for r in env.world.rows["analytics"]})
    rng = np.random.default_rng(len(days))
    spellings = days + ["2023-01-01", "2024-06-30", "2023-11-15", "2023-10-10"]
    ranges = [{}] + [
        {k: v for k, v in (("time_min", spellings[a]), ("time_max", spellings[b])) if rng.random() < 0.8}
        for a, b in (sorted(rng.integers(len(spellings), size=2)) for _ in range(40))
    ]
    db = env.db
    for bounds in ranges:
        lo, hi = bounds.get("time_min"), bounds.get("time_max")
        expected = {
            "analytics_total_visits_count": old_counts(db, lo, hi),
            "analytics_engaged_users_count": old_counts(db, lo, hi, "user_engaged = 1"),
            "analytics_traffic_source_count": old_sources(db, lo, hi),
        }
        for tool, value in expected.items():
            assert env.tools.call(tool, bounds) == ToolResult(to_json(value)), (tool, bounds)
        for source in S.TRAFFIC_SOURCES:
            value = {"traffic_source": source, **old_counts(db, lo, hi, "traffic_source = ?", (source,))}
            got = env.tools.call("analytics_traffic_source_count", {**bounds, "traffic_source": source})
            assert got == ToolResult(to_json(value)), (source, bounds)
    assert env.tools.call("analytics_total_visits_count", {"time_min": "someday"}).error  # bad bounds: errors as before


def test_visit_counts_follow_a_write_behind_the_tools_back(env):
    before = env.tools.call("analytics_total_visits_count", {}).content
    env.db.execute("DELETE FROM analytics WHERE rowid IN (SELECT rowid FROM analytics LIMIT 5)")
    after = env.tools.call("analytics_total_visits_count", {}).content
    assert after != before and after == to_json(old_counts(env.db, None, None))
    assert env.tools.call("analytics_traffic_source_count", {}).content == to_json(old_sources(env.db, None, None))


def test_a_write_behind_the_tools_back_is_still_found(env):
    """Rows changed by SQL on ``env.db`` (not by a tool) are not in ``touched``: words go back to LIKE."""
    env.db.execute("UPDATE emails SET subject = 'Zqxv memo' WHERE email_id = '00000010'")
    found = env.tools.call("email_search_emails", {"query": "ZQXV"}).content
    assert '"total": 1' in found and '"email_id": "00000010"' in found
    env.reset(seed=0)
    assert '"total": 0' in env.tools.call("email_search_emails", {"query": "zqxv"}).content
    assert env._session._where(S.EMAILS).indexed  # the pristine world again: the index serves


def test_filtered_word_searches_survive_resets(env):
    """A words-and-dates search, a reset (``deserialize``), then another: once a segfault of SQLite 3.40
    when the first statement held a ``json_each``."""
    for _ in range(3):
        assert env.tools.call("email_search_emails", {"query": "raj", "date_min": "2023-11-01"}).error is None
        env.reset(seed=0)
        assert env.tools.call("calendar_search_events", {"query": "raj", "time_min": "2023-11-01 00:00:00"}).error is None
