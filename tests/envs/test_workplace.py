"""Workplace-v0: the env contract, the oracle on every template, do-nothing, vector envs."""

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from textgym.envs.workplace import WorkplaceEnv, lookups
from textgym.envs.workplace.facts import facts
from textgym.envs.workplace.tasks import CATEGORIES, TEMPLATES, instantiate
from textgym.envs.workplace.tools import TOOL_NAMES

ISSUE_TOOLS = [
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
]


@pytest.fixture(scope="module")
def env():
    return gym.make("textgym/Workplace-v0").unwrapped


def run(env, policy, task=None, seed=None):
    """Play one episode with ``policy(env)`` and return the last step's reward and info."""
    env.reset(seed=seed, options=None if task is None else {"task": task})
    while True:
        _, reward, terminated, truncated, info = env.step(policy(env))
        if terminated or truncated:
            return reward, info


def oracle(env):
    return env.oracle_action()


def tasks_of(template, seeds, world=None):
    """Tasks drawn from one template with several generators (skipping draws that do not fit)."""
    world = world or WorkplaceEnv().world
    f = facts(world)
    out = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        for _ in range(50):
            task = instantiate(template, f, rng, world)
            if task is not None:
                out.append(task)
                break
    return out


def test_check_env_passes_unwrapped():
    check_env(gym.make("textgym/Workplace-v0", render_mode="ansi").unwrapped, skip_render_check=False)


def test_the_27_tools_have_the_issue_names(env):
    _, info = env.reset(seed=0)
    names = [t["function"]["name"] for t in info["tools"]]
    assert names == ISSUE_TOOLS == list(TOOL_NAMES)
    send = next(t for t in info["tools"] if t["function"]["name"] == "email_send_email")["function"]["parameters"]
    assert send["required"] == ["recipient", "subject", "body"]
    search = next(t for t in info["tools"] if t["function"]["name"] == "email_search_emails")["function"]["parameters"]
    assert {"page", "page_size"} <= set(search["properties"])


def test_system_prompt_states_date_and_working_hours(env):
    obs, _ = env.reset(seed=0)
    assert obs[0]["role"] == "system" and obs[1]["role"] == "user"
    assert "2023-11-30" in obs[0]["content"] and "Thursday" in obs[0]["content"]
    assert "09:00 to 18:00" in obs[0]["content"]


def test_same_seed_same_task_and_observation_across_processes(env):
    ids = []
    for seed in range(5):
        obs, info = env.reset(seed=seed)
        ids.append([env.task.id, obs[1]["content"], info["category"]])
    code = (
        "import json, gymnasium as gym, textgym\n"
        "e = gym.make('textgym/Workplace-v0').unwrapped\n"
        "out = []\n"
        "for s in range(5):\n"
        "    o, i = e.reset(seed=s); out.append([e.task.id, o[1]['content'], i['category']])\n"
        "print(json.dumps(out))\n"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(other.stdout) == ids
    assert len({i[0] for i in ids}) == 5


def test_category_in_reset_info_and_task_metadata(env):
    seen = set()
    for seed in range(60):
        _, info = env.reset(seed=seed)
        assert info["category"] == env.task.metadata["category"] in CATEGORIES
        assert env.task.metadata["difficulty"] in ("easy", "medium", "hard")
        seen.add(info["category"])
    assert seen == set(CATEGORIES)


def test_templates_cover_the_issue_requirements():
    assert len(TEMPLATES) >= 40
    assert {t.category for t in TEMPLATES} == set(CATEGORIES)
    assert all(2 <= len(t.phrasings) <= 3 for t in TEMPLATES)
    assert len({t.name for t in TEMPLATES}) == len(TEMPLATES)


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name)
def test_oracle_scores_one_and_do_nothing_zero_on_every_template(env, template):
    tasks = tasks_of(template, range(6))
    assert tasks, f"{template.name} never fits the default world"
    for task in tasks:
        calls = task.answer
        assert task.metadata["noop"] == template.noop == (not calls)
        assert template.noop or 1 <= len(calls) <= 12
        reward, info = run(env, oracle, task)
        assert reward == 1.0 and info["success"], info["verification"]
        assert not info["verification"]["side_effect"]
        reward, info = run(env, lambda e: "Nothing to do.", task)
        assert reward == float(template.noop), info["verification"]
        assert info["verification"]["noop"] == template.noop


def test_oracle_solves_other_worlds():
    env = WorkplaceEnv(world_seed=7)
    for seed in range(25):
        reward, info = run(env, oracle, seed=seed)
        assert reward == 1.0, info["verification"]


def test_noop_tasks_are_flagged_and_rare(env):
    noops = 0
    for seed in range(400):
        env.reset(seed=seed)
        assert env.task.metadata["noop"] == (not env.task.answer)
        noops += env.task.metadata["noop"]
    assert 0 < noops <= 0.15 * 400


def test_phrasings_vary_within_a_template(env):
    template = next(t for t in TEMPLATES if t.name == "send_email")
    assert len({t.metadata["phrasing"] for t in tasks_of(template, range(30))}) == 3


def test_category_and_difficulty_filters():
    env = WorkplaceEnv(categories=["crm"], difficulty="easy")
    for seed in range(10):
        _, info = env.reset(seed=seed)
        assert info["category"] == "crm" and info["difficulty"] == "easy"
    with pytest.raises(ValueError, match="categories"):
        WorkplaceEnv(categories=["cooking"])


def test_truncation_after_max_turns_scores_the_state():
    env = WorkplaceEnv(max_turns=2)
    task = tasks_of(next(t for t in TEMPLATES if t.name == "send_email"), [0])[0]
    env.reset(options={"task": task})
    _, r1, term, trunc, _ = env.step(env.oracle_action())
    assert (r1, term, trunc) == (0.0, False, False)
    search = '<tool_call>{"name": "email_search_emails", "arguments": {"query": "report"}}</tool_call>'
    _, r2, term, trunc, info = env.step(search)
    assert trunc and not term and r2 == 1.0 and info["success"]
    assert WorkplaceEnv().max_turns == 20


def test_oracle_after_the_end_returns_a_harmless_action(env):
    reward, _ = run(env, oracle, seed=1)
    assert reward == 1.0
    action = env.oracle_action()
    assert isinstance(action, str) and "<tool_call>" not in action


def test_sessions_are_isolated():
    a, b = WorkplaceEnv(), WorkplaceEnv()
    a.reset(seed=0)
    b.reset(seed=0)
    delete = '<tool_call>{"name": "customer_relationship_manager_delete_customer", "arguments": {"customer_id": "00000001"}}</tool_call>'
    a.step(delete)
    count = "SELECT count(*) FROM customers WHERE customer_id = '00000001'"
    assert a.db.execute(count).fetchone()[0] == 0
    assert b.db.execute(count).fetchone()[0] == 1
    a.reset(seed=0)
    assert a.db.execute(count).fetchone()[0] == 1, "reset restores the pristine world"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_vector_env_with_the_oracle(mode):
    venv = gym.make_vec("textgym/Workplace-v0", num_envs=2, vectorization_mode=mode)
    try:
        obs, infos = venv.reset(seed=[5, 5])
        assert obs[0] == obs[1] and list(infos["category"]) == [infos["category"][0]] * 2
        done = np.zeros(2, bool)
        rewards = np.zeros(2)
        for _ in range(5):
            obs, reward, term, trunc, infos = venv.step(list(venv.call("oracle_action")))
            rewards += np.where(done, 0, reward)
            done |= term | trunc
            if done.all():
                break
        assert done.all() and rewards.tolist() == [1.0, 1.0]
    finally:
        venv.close()


def test_cli_eval_prints_success_by_category():
    cmd = [
        sys.executable,
        "-m",
        "textgym.cli",
        "eval",
        "textgym/Workplace-v0",
        "--policy",
        "oracle",
        "--episodes",
        "12",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120).stdout
    assert "success by category" in out
    rows = [line for line in out.splitlines() if any(c in line for c in CATEGORIES)]
    assert rows and all("1.000" in line for line in rows)


def test_a_database_that_fails_during_verification_is_env_error():
    env = WorkplaceEnv()
    env.reset(seed=3)
    env.db.close()  # the session database goes away under the env
    _, reward, terminated, _, info = env.step("Done.")
    assert terminated and reward == 0.0 and info["end_reason"] == "env_error"
    assert "database failed" in info["verification"]["env_error"]


def test_end_reasons_of_real_episodes(env):
    seed = next(s for s in range(10) if not run(env, lambda e: "Done.", seed=s)[1]["verification"]["noop"])
    assert run(env, lambda e: "Done.", seed=seed)[1]["end_reason"] == "failure"
    assert run(env, oracle, seed=seed)[1]["end_reason"] == "success"
    short = WorkplaceEnv(max_turns=1)
    short.reset(seed=seed)
    search = '<tool_call>{"name": "email_search_emails", "arguments": {"query": "report"}}</tool_call>'
    assert short.step(search)[4]["end_reason"] == "max_turns"


def test_lookup_oracle_finds_ids_and_addresses_first_and_still_solves_every_template(env):
    looked_up = 0
    for template in TEMPLATES:
        for task in tasks_of(template, range(3)):
            env.reset(options={"task": task})
            first = env.oracle_action(lookup=True)
            names = [c["function"]["name"] for c in first["tool_calls"]] if isinstance(first, dict) else []
            ids = [k for c in task.answer for k in c["arguments"] if k in ("task_id", "customer_id")]
            if ids or any("@" in str(v) for c in task.answer for v in c["arguments"].values()):
                assert names and all(n.endswith(("search_tasks", "search_customers", "find_email_address")) for n in names)
                looked_up += 1
            reward, info = run(env, lambda e: e.oracle_action(lookup=True))
            assert reward == 1.0 and info["success"], (template.name, info["verification"])
    assert looked_up > 40


def test_lookup_oracle_searches_for_what_the_request_says():
    env = WorkplaceEnv(categories=["project_management"], difficulty="easy")
    for seed in range(30):
        env.reset(seed=seed)
        query = env.task.data["query"]
        for call in env.oracle_action(lookup=True)["tool_calls"]:
            args = json.loads(call["function"]["arguments"])
            assert all(value in query for value in args.values()), (query, args)  # copied from the request


def test_noisy_oracle_guesses_only_closed_choices_and_is_a_function_of_the_task():
    env = WorkplaceEnv(templates=["move_task", "update_status", "change_interest", "delete_task"], max_turns=2)
    guesses, solved = 0, {"delete_task": [], "choice": []}
    for seed in range(60):
        env.reset(seed=seed)
        clean = [json.loads(c["function"]["arguments"]) for c in env.oracle_action()["tool_calls"]]
        noisy = [json.loads(c["function"]["arguments"]) for c in env.oracle_action(noise=1.0)["tool_calls"]]
        assert env.oracle_action(noise=1.0) == env.oracle_action(noise=1.0)  # the same task, the same guesses
        assert env.oracle_action(noise=0.0) == env.oracle_action()
        for a, b in zip(clean, noisy, strict=True):
            assert a.keys() == b.keys()
            for key in (k for k in a if a[k] != b[k]):  # only a value of a closed set, guessed from its own set
                guesses += 1
                assert any(a[key] in c and b[key] in c for c in lookups.CHOICES), (key, a[key], b[key])
        kind = "delete_task" if env.task.metadata["template"] == "delete_task" else "choice"
        solved[kind].append(run(env, lambda e: e.oracle_action(lookup=True, noise=1.0), seed=seed)[1]["success"])
    assert guesses > 10
    assert all(solved["delete_task"]) and 0 < np.mean(solved["choice"]) < 0.5  # a guess is right about one time in four


def test_templates_filter_draws_only_the_named_templates():
    env = WorkplaceEnv(templates=["delete_task", "move_task"])
    drawn = set()
    for seed in range(20):
        env.reset(seed=seed)
        drawn.add(env.task.metadata["template"])
    assert drawn == {"delete_task", "move_task"}
    with pytest.raises(ValueError, match="templates must be among"):
        WorkplaceEnv(templates=["delete_everything"])
    with pytest.raises(ValueError, match="no template has"):
        WorkplaceEnv(categories=["crm"], templates=["delete_task"])
