"""Workplace-v0 task sources: pinned tasks in both JSONL formats, Task records, CSV worlds."""

import csv
import json

import pytest

from textgym.envs.workplace import WorkplaceEnv
from textgym.envs.workplace.schema import TABLES
from textgym.error import InvalidTask
from textgym.tasks import write_jsonl


@pytest.fixture(scope="module")
def env():
    return WorkplaceEnv()


def play_oracle(env, **reset):
    env.reset(**reset)
    while True:
        _, reward, terminated, truncated, info = env.step(env.oracle_action())
        if terminated or truncated:
            return reward, info


def customer(env, i=0):
    return env.world.rows["customers"][i]


def nemo_row(env):
    """A row shaped like NeMo Gym's workplace_assistant data (arguments as a JSON string)."""
    c = customer(env, 4)
    new_owner = env.world.people[2][1]
    return {
        "responses_create_params": {
            "input": [
                {"role": "system", "content": "Today's date is Thursday, 2023-11-30 and the current time is 23:59:00."},
                {"role": "user", "content": f"Reassign customer {c['customer_name']} to {new_owner} in the crm"},
            ],
            "tools": [],
        },
        "ground_truth": [
            {
                "name": "customer_relationship_manager_update_customer",
                "arguments": json.dumps({"customer_id": c["customer_id"], "field": "assigned_to_email", "new_value": new_owner}),
            }
        ],
        "category": "workplace_assistant_customer_relationship_manager",
        "id": 297,
    }


def ours_row(env):
    to = env.world.people[1][1]
    return {
        "query": f"Email {to} that the report is ready.",
        "ground_truth": [
            {
                "name": "email_send_email",
                "arguments": {"recipient": to, "subject": "Report", "body": "The report is ready."},
            }
        ],
        "category": "email",
    }


def test_pinned_task_in_our_format(env):
    reward, info = play_oracle(env, options={"task": ours_row(env)})
    obs = env.conversation
    assert obs[1]["content"] == ours_row(env)["query"]
    assert reward == 1.0 and env.task.metadata["category"] == "email"


def test_pinned_task_in_nemo_gym_format(env):
    obs, info = env.reset(options={"task": nemo_row(env)})
    assert obs[0]["content"].startswith("You are a workplace assistant")  # our own system prompt
    assert obs[1]["content"].startswith("Reassign customer")
    assert info["category"] == "crm" and env.task.id == "297"
    assert isinstance(env.task.answer[0]["arguments"], dict)
    reward, _ = play_oracle(env, options={"task": nemo_row(env)})
    assert reward == 1.0


def test_jsonl_files_in_both_formats_load_and_solve(env, tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(ours_row(env)) + "\n\n" + json.dumps(nemo_row(env)) + "\n")
    dataset_env = WorkplaceEnv(tasks=str(path))
    assert len(dataset_env.dataset) == 2
    for i in range(2):
        assert play_oracle(dataset_env, options={"task_index": i})[0] == 1.0
    dataset_env.reset(seed=3)
    assert dataset_env.task in dataset_env.dataset


def test_generated_tasks_round_trip_as_task_records(env, tmp_path):
    tasks = []
    for seed in range(8):
        env.reset(seed=seed)
        tasks.append(env.task)
    path = tmp_path / "generated.jsonl"
    write_jsonl(path, tasks)
    loaded = WorkplaceEnv(tasks=str(path))
    assert [t.to_dict() for t in loaded.dataset] == [t.to_dict() for t in tasks]
    for i in range(len(tasks)):
        assert play_oracle(loaded, options={"task_index": i})[0] == 1.0


@pytest.mark.parametrize(
    "bad",
    [
        {"query": "x", "ground_truth": [{"name": "rm_rf", "arguments": {}}]},
        {"query": "x", "ground_truth": [{"name": "email_send_email", "arguments": "{not json"}]},
        {"query": "x", "ground_truth": "nope"},
        {"query": "x", "ground_truth": [{"name": "email_send_email", "arguments": "[" * 20000}]},
        {"query": "x", "ground_truth": "[" * 20000},
        {"query": "x", "ground_truth": '[{"name": "email_send_email", "arguments": {"a": 1' + "0" * 5000 + "}}]"},
        {"query": "x", "ground_truth": [{"name": "email_send_email", "arguments": {"recipient": b"a@b.c"}}]},
        {"responses_create_params": {"input": []}, "ground_truth": []},
        {"prompt": "no query"},
    ],
)
def test_invalid_pinned_tasks_raise(env, bad):
    with pytest.raises(InvalidTask):
        env.reset(options={"task": bad})


def test_a_jsonl_line_nested_past_the_decoder_limit_is_an_invalid_task(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text("[" * 30000 + "\n")
    with pytest.raises(InvalidTask, match="deep.jsonl:1: not valid JSON"):
        WorkplaceEnv(tasks=str(path))


def test_world_seed_changes_the_company():
    a, b = WorkplaceEnv(world_seed=0), WorkplaceEnv(world_seed=1)
    assert a.world.rows["customers"] != b.world.rows["customers"]
    assert WorkplaceEnv(world_seed=0).world is a.world, "worlds are built once per process"


def write_workbench_csvs(world, root):
    """Export a world in WorkBench's file names and column layout (sender/recipient merged)."""
    names = {
        "emails": "emails.csv",
        "calendar": "calendar_events.csv",
        "analytics": "analytics_data.csv",
        "project_tasks": "project_tasks.csv",
        "customers": "customer_relationship_manager_data.csv",
    }
    for table in TABLES:
        if table.name not in names:
            continue
        rows = world.rows[table.name]
        columns = list(table.names)
        if table.name == "emails":
            columns = ["email_id", "inbox/outbox", "sender/recipient", "subject", "sent_datetime", "body"]
            rows = [r | {"sender/recipient": r["sender"] if r["inbox/outbox"] == "inbox" else r["recipient"]} for r in rows]
        if table.name == "analytics":
            rows = [r | {"user_engaged": str(bool(r["user_engaged"]))} for r in rows]
        with open(root / names[table.name], "w", newline="") as fh:
            writer = csv.DictWriter(fh, columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    with open(root / "email_addresses.csv", "w", newline="") as fh:
        fh.write("email_address\n" + "\n".join(a for _, a in world.people) + "\n")


def test_data_dir_loads_workbench_csvs(env, tmp_path):
    write_workbench_csvs(env.world, tmp_path)
    csv_env = WorkplaceEnv(data_dir=str(tmp_path))
    for table in TABLES:
        if table.name not in ("plots", "company_directory"):
            assert csv_env.world.rows[table.name] == env.world.rows[table.name], table.name
    names = {n.lower() for n, _ in csv_env.world.people}
    assert {n.lower() for n, _ in env.world.people} == names
    for seed in range(10):
        assert play_oracle(csv_env, seed=seed)[0] == 1.0


def test_data_dir_errors_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="directory"):
        WorkplaceEnv(data_dir=str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="emails.csv"):
        WorkplaceEnv(data_dir=str(tmp_path))


def test_task_objects_are_checked_and_normalised(env):
    from textgym.tasks import Task

    to = env.world.people[0][1]
    args = json.dumps({"recipient": to, "subject": "Hi", "body": "Hello."})
    task = Task("t1", {"query": "Say hi."}, [{"name": "email_send_email", "arguments": args}])
    assert play_oracle(env, options={"task": task})[0] == 1.0
    assert play_oracle(env, options={"task": Task("t2", {"query": "Nothing."})})[0] == 1.0
    with pytest.raises(InvalidTask):
        env.reset(options={"task": Task("t3", {"prompt": "no query"})})
