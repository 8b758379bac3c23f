"""``textgym eval reverify``: saved episodes re-scored in fresh envs; changed rewards fail, unreplayable ones are named."""

from __future__ import annotations

import json

import pytest

from textgym.cli import main


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Yesterday's rollouts: oracle and random on Sudoku (4x4) and Code, as ``eval --out`` writes them."""
    root = tmp_path_factory.mktemp("reverify")
    files = []
    for env_id, extra in (("textgym/Sudoku-v0", ["--env-kwargs", '{"size": 4}']), ("textgym/Code-v0", [])):
        out = root / f"{env_id.split('/')[1]}.jsonl"
        argv = ["eval", env_id, "--policy", "oracle", "--policy", "random", "--episodes", "3", "--num-envs", "3", "--out", str(out)]
        assert main(argv + extra) == 0
        files.append(out)
    return files


def reverify(capsys, *argv):
    code = main(["eval", "reverify", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_unchanged_verifiers_reproduce_every_reward(saved, capsys, tmp_path):
    code, out, _ = reverify(capsys, *saved, "--out", tmp_path / "report.json")
    assert code == 0 and "changed:" not in out and "unreplayable:" not in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["summary"] == {
        "textgym/Sudoku-v0": {"unchanged": 6, "changed": 0, "unreplayable": 0},
        "textgym/Code-v0": {"unchanged": 6, "changed": 0, "unreplayable": 0},
    }
    assert {r["status"] for r in report["records"]} == {"unchanged"}


def test_a_verifier_change_is_reported_per_env_and_fails(saved, capsys, monkeypatch, tmp_path):
    from textgym.envs.sudoku import grid

    # Today's Sudoku verifier refuses every answer grid: the oracle's solved episodes change.
    monkeypatch.setattr(grid, "judge_answer", lambda rows, puzzle, size: (False, "a stricter verifier"))
    code, out, _ = reverify(capsys, *saved, "--out", tmp_path / "report.json")
    assert code == 1
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["summary"]["textgym/Sudoku-v0"] == {"unchanged": 3, "changed": 3, "unreplayable": 0}
    assert report["summary"]["textgym/Code-v0"]["changed"] == 0
    changed = [r for r in report["records"] if r["status"] == "changed"]
    oracle_tasks = {r["task_id"] for r in lines(saved[0]) if r["policy"] == "oracle"}
    assert {r["task_id"] for r in changed} == oracle_tasks and all(r["recorded"] == 1.0 and r["replayed"] == 0.0 for r in changed)
    assert out.count("changed: ") == 3 and "reward 1 -> 0" in out


def test_records_keep_each_turns_reward_and_a_reward_moved_between_turns_is_a_change(saved, capsys, tmp_path):
    records = lines(saved[0])
    assert all(len(r["turn_rewards"]) == r["turns"] and sum(r["turn_rewards"]) == r["reward"] for r in records)
    played = next(r for r in records if r["turns"] >= 2 and r["reward"] == 0)
    moved = dict(played, turn_rewards=[0.5, -0.5, *played["turn_rewards"][2:]])  # the same total
    code, out, _ = reverify(capsys, write(tmp_path / "moved.jsonl", [played, moved]), "--out", tmp_path / "report.json")
    assert code == 1 and out.count("changed: ") == 1 and "turn rewards [0.5, -0.5" in out
    report = json.loads((tmp_path / "report.json").read_text())["records"]
    assert [r["status"] for r in report] == ["unchanged", "changed"]
    assert report[0]["turn_rewards"] == played["turn_rewards"]


def test_records_that_cannot_be_replayed_are_named_not_counted_as_changes(saved, capsys, tmp_path):
    records = lines(saved[0])
    other_size = dict(records[0], env_kwargs={"size": 9})  # the seed now draws a 9x9 puzzle
    gone = dict(records[1], env_id="textgym/Gone-v0")
    no_seed = dict(records[2], seed=None)
    path = write(tmp_path / "odd.jsonl", [other_size, gone, no_seed, records[3]])
    code, out, _ = reverify(capsys, path)
    assert code == 0
    assert "now draws task" in out and "not a registered env" in out and "no seed" in out
    assert out.count("unreplayable: ") == 3 and "changed: " not in out


def test_a_record_from_before_env_kwargs_replays_with_the_defaults(capsys, tmp_path):
    assert main(["eval", "textgym/Sudoku-v0", "--policy", "oracle", "--episodes", "1", "--out", str(tmp_path / "a.jsonl")]) == 0
    old = {k: v for k, v in lines(tmp_path / "a.jsonl")[0].items() if k not in ("env_kwargs", "end_reason", "verifications")}
    code, out, _ = reverify(capsys, write(tmp_path / "old.jsonl", [old]))
    assert code == 0 and "│ textgym/Sudoku-v0 │       1 │         1 │" in out


def test_bad_input_is_one_line_and_status_2(capsys, tmp_path):
    code, _, err = reverify(capsys, tmp_path / "missing.jsonl")
    assert code == 2 and err.startswith("textgym eval reverify: error: no such file") and err.count("\n") == 1
    (tmp_path / "junk.jsonl").write_text("not json\n")
    code, _, err = reverify(capsys, tmp_path / "junk.jsonl")
    assert code == 2 and "junk.jsonl:1 is not JSON" in err
    with pytest.raises(SystemExit) as exc:
        main(["eval", "reverify"])
    assert exc.value.code == 2 and "required" in capsys.readouterr().err


def test_a_record_cannot_turn_the_sandbox_off_or_run_task_code_on_the_host(capsys, tmp_path):
    """Records are untrusted: env_kwargs choosing the sandbox's backend are refused, and a pinned
    HumanEval task's check runs in the sandbox, not in this process."""
    owned = tmp_path / "owned"
    unsafe = {
        "env_id": "textgym/Code-v0",
        "env_kwargs": {"backend": "unsafe"},
        "seed": 0,
        "reward": 1.0,
        "task_id": "x",
        "messages": [{"role": "assistant", "content": f"```python\nopen({str(owned)!r}, 'w').write('x')\n```"}],
    }
    check = f"def check(c):\n    open({str(owned)!r}, 'w').write('x')\n    assert c(1) == 1\n"
    task = {"prompt": "def f(x):\n    pass\n", "entry_point": "f", "test": check}
    pinned = {
        "env_id": "textgym/Code-v0",
        "env_kwargs": {"tasks": [task]},
        "seed": 0,
        "reward": 1.0,
        "messages": [{"role": "assistant", "content": "def f(x): return x"}],
    }
    code, out, err = reverify(capsys, write(tmp_path / "r.jsonl", [unsafe, pinned]))
    assert "backend, which a record may not choose" in out and not err
    assert not owned.exists()


def test_a_served_envs_record_opens_no_connection(capsys, tmp_path):
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(0.5)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        record = {
            "env_id": "textgym/Remote-v0",
            "env_kwargs": {"url": url},
            "seed": 0,
            "reward": 0.0,
            "messages": [{"role": "assistant", "content": "hi"}],
        }
        code, out, err = reverify(capsys, write(tmp_path / "remote.jsonl", [record]))
        with pytest.raises(TimeoutError):
            listener.accept()
    assert code == 0 and "opens no connection" in out and not err


@pytest.mark.parametrize(
    "fields",
    [
        {"reward": None},
        {"reward": "1"},
        {"messages": [1, 2]},
        {"messages": "abc"},
        {"env_kwargs": [1]},
        {"seed": "two"},
        {"turn_rewards": [1, "x"]},
        {"turn_rewards": 1.0},
    ],
)
def test_malformed_records_are_unreplayable_not_tracebacks(capsys, tmp_path, fields):
    record = {
        "env_id": "textgym/Sudoku-v0",
        "seed": 0,
        "reward": 1.0,
        "messages": [{"role": "assistant", "content": "<answer>1</answer>"}],
        **fields,
    }
    code, out, err = reverify(capsys, write(tmp_path / "bad.jsonl", [record]))
    assert code == 0 and "unreplayable: bad.jsonl:1" in out and not err
