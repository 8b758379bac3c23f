"""Workplace-v0 verification: side effects, order/id independence, normalisation, tool errors, fuzzing."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from textgym.envs.workplace import WorkplaceEnv
from textgym.envs.workplace.facts import facts
from textgym.envs.workplace.schema import TABLES
from textgym.envs.workplace.tasks import TEMPLATES, instantiate
from textgym.envs.workplace.tools import TOOL_NAMES


@pytest.fixture(scope="module")
def env():
    return WorkplaceEnv()


def people(env):
    return env.world.people


def tool_call(tool, **arguments):
    return f"<tool_call>{json.dumps({'name': tool, 'arguments': arguments})}</tool_call>"


def pin(env, ground_truth, query="Do it."):
    return env.reset(options={"task": {"query": query, "ground_truth": ground_truth}})


def finish(env):
    _, reward, terminated, _, info = env.step("All done.")
    assert terminated
    return reward, info["verification"]


def snapshot(env):
    return {t.name: sorted(map(repr, env.db.execute(f'SELECT * FROM "{t.name}"'))) for t in TABLES}


def send(recipient, subject="Status", body="Please send an update."):
    return {"name": "email_send_email", "arguments": {"recipient": recipient, "subject": subject, "body": body}}


def test_duplicate_send_fails_as_a_side_effect(env):
    to = people(env)[0][1]
    pin(env, [send(to)])
    env.step(tool_call("email_send_email", **send(to)["arguments"]))
    env.step(tool_call("email_send_email", **send(to)["arguments"]))
    reward, v = finish(env)
    assert reward == 0.0 and v["side_effect"] and not v["noop"]
    assert len(v["diff"]["emails"]["unexpected"]) == 1 and not v["diff"]["emails"]["missing"]


def test_extra_delete_fails_and_names_the_missing_row(env):
    pin(env, [{"name": "email_delete_email", "arguments": {"email_id": "00000001"}}])
    env.step(tool_call("email_delete_email", email_id="00000001") + tool_call("email_delete_email", email_id="00000002"))
    reward, v = finish(env)
    assert reward == 0.0 and v["side_effect"]
    (missing,) = v["diff"]["emails"]["missing"]
    original = env.world.rows["emails"][1]
    assert missing["subject"] == original["subject"].casefold()


def test_wrong_value_fails_without_a_side_effect(env):
    update = {"task_id": "00000003", "field": "list_name", "new_value": "Completed"}
    pin(env, [{"name": "project_management_update_task", "arguments": update}])
    wrong = "Backlog" if env.world.rows["project_tasks"][2]["list_name"] != "Backlog" else "In Review"
    env.step(tool_call("project_management_update_task", **(update | {"new_value": wrong})))
    reward, v = finish(env)
    assert reward == 0.0 and not v["side_effect"] and "project_tasks" in v["diff"]


def test_order_and_assigned_ids_do_not_matter(env):
    (_, a), (_, b) = people(env)[:2]
    event = {"event_name": "Sync", "event_start": "2023-12-04 10:00:00", "duration": 30}
    gt = [
        send(a, "First"),
        send(b, "Second"),
        {"name": "calendar_create_event", "arguments": event | {"participant_email": a}},
        {"name": "calendar_create_event", "arguments": event | {"participant_email": b}},
    ]
    pin(env, gt)
    reversed_calls = "".join(tool_call(c["name"], **c["arguments"]) for c in reversed(gt))
    _, _, _, _, info = env.step(reversed_calls)
    assert info["error"] is None
    reward, v = finish(env)
    assert reward == 1.0 and v["diff"] == {}


def test_case_addresses_and_datetime_formats_are_normalised(env):
    name, address = people(env)[3]
    gt = [
        {
            "name": "calendar_create_event",
            "arguments": {
                "event_name": "Budget Sync",
                "participant_email": address,
                "event_start": "2023-12-05 14:30:00",
                "duration": 60,
            },
        }
    ]
    pin(env, gt)
    env.step(
        tool_call(
            "calendar_create_event",
            event_name="  budget   SYNC ",
            participant_email=address.upper(),
            event_start="2023-12-05T14:30",
            duration="60",
        )
    )
    reward, v = finish(env)
    assert reward == 1.0, v


def test_read_only_calls_are_harmless(env):
    to = people(env)[5][1]
    pin(env, [send(to)])
    reads = (
        tool_call("email_search_emails", query="report", page=2, page_size=3)
        + tool_call("calendar_search_events", time_min="2023-12-01 00:00:00")
        + tool_call("analytics_total_visits_count", time_min="2023-11-01", time_max="2023-11-07")
        + tool_call("customer_relationship_manager_search_customers", status="Lead")
        + tool_call("company_directory_find_email_address", name="a")
    )
    _, _, _, _, info = env.step(reads)
    assert info["error"] is None
    env.step(tool_call("email_send_email", **send(to)["arguments"]))
    reward, v = finish(env)
    assert reward == 1.0 and not v["side_effect"]


def test_noop_task_passes_only_when_nothing_changes(env):
    pin(env, [])
    reward, v = finish(env)
    assert reward == 1.0 and v["noop"]
    pin(env, [])
    env.step(
        tool_call(
            "analytics_create_plot",
            time_min="2023-11-01",
            time_max="2023-11-07",
            value_to_plot="total_visits",
            plot_type="bar",
        )
    )
    reward, v = finish(env)
    assert reward == 0.0 and v["side_effect"] and v["diff"]["plots"]["unexpected"]


INVALID_CALLS = [
    ("email_send_email", {"recipient": "not-an-address", "subject": "s", "body": "b"}),
    ("email_send_email", {"recipient": "a@b.com", "subject": "s"}),
    ("email_delete_email", {"email_id": "99999999"}),
    ("email_forward_email", {"email_id": "00000001", "recipient": "nobody"}),
    (
        "calendar_create_event",
        {"event_name": "x", "participant_email": "a@b.com", "event_start": "tomorrow at 10", "duration": 30},
    ),
    (
        "calendar_create_event",
        {"event_name": "x", "participant_email": "a@b.com", "event_start": "2023-12-01 10:00:00", "duration": -5},
    ),
    ("calendar_update_event", {"event_id": "00000001", "field": "duration", "new_value": "an hour"}),
    ("calendar_update_event", {"event_id": "00000001", "field": "colour", "new_value": "red"}),
    (
        "analytics_create_plot",
        {"time_min": "2023-11-07", "time_max": "2023-11-01", "value_to_plot": "total_visits", "plot_type": "bar"},
    ),
    (
        "analytics_create_plot",
        {"time_min": "2023-11-01", "time_max": "2023-11-07", "value_to_plot": "revenue", "plot_type": "bar"},
    ),
    (
        "project_management_create_task",
        {
            "task_name": "t",
            "assigned_to_email": "a@b.com",
            "list_name": "Done",
            "due_date": "2023-12-01",
            "board": "Design",
        },
    ),
    ("project_management_update_task", {"task_id": "00000001", "field": "due_date", "new_value": "next week"}),
    ("project_management_update_task", {"task_id": "00000001", "field": "board", "new_value": "Marketing"}),
    (
        "customer_relationship_manager_add_customer",
        {"customer_name": "X", "assigned_to_email": "a@b.com", "status": "Hot"},
    ),
    (
        "customer_relationship_manager_update_customer",
        {"customer_id": "00000001", "field": "status", "new_value": "Hot"},
    ),
    (
        "customer_relationship_manager_update_customer",
        {"customer_id": "00000001", "field": "customer_email", "new_value": "nope"},
    ),
    ("customer_relationship_manager_delete_customer", {"customer_id": 1}),
    ("email_search_emails", {"page": 0}),
    ("email_search_emails", {"page": 10**18}),
    ("email_send_email", {"recipient": "a@b.com", "subject": "\ud800", "body": "lone surrogate"}),
    ("email_search_emails", {"query": "\udfff"}),
    ("no_such_tool", {}),
]


@pytest.mark.parametrize("name,arguments", INVALID_CALLS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(INVALID_CALLS)])
def test_tool_validation_errors_change_nothing(env, name, arguments):
    pin(env, [])
    before = snapshot(env)
    obs, reward, terminated, _, info = env.step(tool_call(name, **arguments))
    assert info["error"] and not terminated and reward == 0.0
    assert obs[-1]["role"] == "tool" and "error" in json.loads(obs[-1]["content"])
    assert snapshot(env) == before
    assert finish(env)[0] == 1.0


def test_any_valid_address_may_receive_mail(env):
    gt = [send("someone@outside.example")]
    pin(env, gt)
    _, _, _, _, info = env.step(tool_call("email_send_email", **gt[0]["arguments"]))
    assert info["error"] is None and finish(env)[0] == 1.0


def test_searches_are_paginated_not_capped(env):
    env.reset(seed=0)
    pages, seen = 1, []
    page = 1
    while page <= pages:
        obs, *_ = env.step(tool_call("email_search_emails", page=page, page_size=50))
        result = json.loads(obs[-1]["content"])
        pages = result["total_pages"]
        seen += [m["email_id"] for m in result["emails"]]
        page += 1
    assert len(seen) == len(set(seen)) == len(env.world.rows["emails"]) == result["total"]


def test_ground_truth_covers_every_matching_row():
    """Bulk requests name every row (read from the world, never through a capped search)."""
    env = WorkplaceEnv()
    for seed in range(40):
        env.reset(seed=seed)
        if env.task.metadata["template"] != "reassign_book":
            continue
        old = env.task.answer[0]
        owner = env.db.execute(
            "SELECT assigned_to_email FROM customers WHERE customer_id = ?", (old["arguments"]["customer_id"],)
        ).fetchone()[0]
        while not env._done:
            env.step(env.oracle_action())
        assert env.db.execute("SELECT count(*) FROM customers WHERE assigned_to_email = ?", (owner,)).fetchone()[0] == 0
        return
    pytest.skip("no reassign_book task in the first 40 seeds")


garbage = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    st.builds(
        lambda name, args: tool_call(name, **args),
        st.sampled_from(TOOL_NAMES + ("x", "")),
        st.dictionaries(
            st.text(max_size=12),
            st.one_of(
                st.none(),
                st.integers(),
                st.floats(allow_nan=True),
                st.text(st.characters(blacklist_categories=()), max_size=30),
                st.lists(st.integers(), max_size=3),
            ),
            max_size=4,
        ),
    ),
    st.builds(lambda s: f"<tool_call>{s}</tool_call>", st.text(max_size=80)),
    st.fixed_dictionaries(
        {
            "role": st.just("assistant"),
            "content": st.text(max_size=20),
            "tool_calls": st.lists(st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3), max_size=3),
        }
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=st.lists(garbage, min_size=1, max_size=4))
def test_garbage_actions_never_crash_or_corrupt(env, actions):
    env.reset(seed=11)
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs[-1]["role"] in ("user", "tool") and isinstance(reward, float)
        if terminated or truncated:
            assert "success" in info and "verification" in info
            break
    if not env._session.touched:
        assert snapshot(env) == snapshot_pristine(env)


_PRISTINE = {}


def snapshot_pristine(env):
    if "rows" not in _PRISTINE:
        fresh = WorkplaceEnv()
        fresh.reset(seed=0)
        _PRISTINE["rows"] = snapshot(fresh)
    return _PRISTINE["rows"]


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(st.characters(blacklist_categories=()), max_size=20),
    st.sampled_from(["00000001", "7", "a@b.com", "2023-12-01", "2023-12-01 10:00:00", "Backlog", "Design", "Lead"]),
)
_PARAMS = {name: tuple(WorkplaceEnv().tools[name].parameters) for name in TOOL_NAMES}
typed_call = st.sampled_from(TOOL_NAMES).flatmap(
    lambda name: st.tuples(st.just(name), st.fixed_dictionaries({}, optional={p: _VALUES for p in _PARAMS[name]}))
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(typed_call, min_size=1, max_size=3))
def test_fuzzed_arguments_either_succeed_or_change_nothing(env, calls):
    env.reset(seed=2)
    for name, arguments in calls:
        before = env.db.serialize()  # byte-identical unless a statement wrote
        result = env.tools.call(name, arguments)
        json.loads(result.content)
        if result.error:
            assert env.db.serialize() == before


def test_doing_nothing_solves_no_generated_task_over_seeds_0_to_3999():
    """Seed 196 once asked to rename 'Design Review' to 'Design review', which the verifier
    (casefolding) already saw as done, so "Nothing." scored 1.0."""
    env = WorkplaceEnv()
    solved = []
    for seed in range(4000):
        env.reset(seed=seed)
        if env.task.answer and env.verify()[0]:
            solved.append((seed, env.task.metadata["template"]))
    assert solved == []


@pytest.mark.parametrize("world_seed", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
def test_doing_nothing_scores_zero_on_every_template(world_seed):
    env = WorkplaceEnv(world_seed=world_seed)
    f = facts(env.world)
    made = set()
    for tpl in TEMPLATES:
        for i in range(60):
            task = instantiate(tpl, f, np.random.default_rng([world_seed, i]), env.world)
            if task is None or not task.answer:
                continue
            made.add(tpl.name)
            env.reset(options={"task": task})
            _, reward, terminated, _, info = env.step("Nothing.")
            assert terminated and reward == 0.0 and not info["success"], (tpl.name, task.data["query"])
    assert made == {t.name for t in TEMPLATES if not t.noop}
