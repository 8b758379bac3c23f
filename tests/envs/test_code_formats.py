"""Code-v0 task formats: function tests, stdin/stdout, HumanEval and MBPP, from JSONL and options."""

from __future__ import annotations

import json

import pytest

from textgym.envs.code import CodeEnv
from textgym.envs.code.formats import task_from_dict
from textgym.error import InvalidTask
from textgym.sandbox.worker import Worker
from textgym.tasks import Task

FUNCTION = {
    "prompt": "Return the sum of a and b.",
    "entry_point": "add",
    "tests": [{"args": [1, 2], "expected": 3}, {"args": [-1], "kwargs": {"b": 1}, "expected": 0}, {"args": [[1], [2]], "expected": [1, 2]}],
    "solution": "def add(a, b=0):\n    return a + b\n",
}
STDIO = {
    "prompt": "Print the sum of the integers on stdin.",
    "tests": [{"input": "1 2 3\n", "output": "6\n"}, {"input": "", "output": "0"}],
    "solution": "print(sum(map(int, open(0).read().split())))\n",
}
HUMANEVAL_SIMPLE = {
    "task_id": "HumanEval/0",
    "prompt": 'from typing import List\n\n\ndef has_close(numbers: List[float], threshold: float) -> bool:\n    """Any two numbers closer than threshold?"""\n',
    "entry_point": "has_close",
    "canonical_solution": "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n",
    "test": "\n\nMETADATA = {'author': 'jt'}\n\n\ndef check(candidate):\n"
    "    assert candidate([1.0, 2.0, 3.9, 4.0], 0.3) == True\n    assert candidate([1.0, 2.0, 5.9], 0.5) == False\n"
    "    assert not candidate([], 1.0)\n    assert True, 'noise'\n",
}
HUMANEVAL_CHECK = {
    "task_id": "HumanEval/2",
    "prompt": 'def truncate(x: float) -> float:\n    """Decimal part of x."""\n',
    "entry_point": "truncate",
    "canonical_solution": "    return x % 1.0\n",
    "test": "def check(candidate):\n    for x, frac in [(3.5, 0.5), (1.33, 0.33), (123.456, 0.456)]:\n"
    "        assert abs(candidate(x) - frac) < 1e-6\n",
}
HUMANEVAL_HELPER = {
    "prompt": 'def poly(xs, x):\n    return sum(c * x ** i for i, c in enumerate(xs))\n\n\ndef find_zero(xs):\n    """A zero of poly(xs)."""\n',
    "entry_point": "find_zero",
    "canonical_solution": "    lo, hi = -100.0, 100.0\n    for _ in range(200):\n        mid = (lo + hi) / 2\n"
    "        if (poly(xs, mid) > 0) == (poly(xs, lo) > 0):\n            lo = mid\n        else:\n            hi = mid\n    return lo\n",
    "test": "import math\n\ndef check(candidate):\n    for xs in ([-6, 11, -6, 1], [1, 2], [-3, 0, 1]):\n"
    "        assert math.fabs(poly(xs, candidate(list(xs)))) < 1e-4\n",
}
MBPP = {
    "task_id": 2,
    "text": "Write a function to find the shared elements of two tuples.",
    "code": "def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n",
    "test_list": [
        "assert set(similar_elements((3, 4, 5, 6), (5, 7, 4, 10))) == set((4, 5))",
        "assert similar_elements((1, 2), (3, 4)) == ()",
        "assert math.isclose(len(similar_elements((1, 2), (2, 1))), 2.0)",
    ],
    "test_setup_code": "import math",
}


@pytest.fixture(scope="module")
def env():
    return CodeEnv()


def _play(env, task, action):
    env.reset(seed=0, options={"task": task})
    return env.step(action)


@pytest.mark.parametrize("task", [FUNCTION, STDIO, HUMANEVAL_SIMPLE, HUMANEVAL_CHECK, HUMANEVAL_HELPER, MBPP])
def test_oracle_solves_every_format(env, task):
    env.reset(seed=0, options={"task": task})
    obs, reward, terminated, truncated, info = env.step(env.oracle_action())
    assert (reward, terminated, info["success"]) == (1.0, True, True), info["verification"]


@pytest.mark.parametrize(
    "task, wrong",
    [
        (FUNCTION, "def add(a, b=0):\n    return a - b\n"),
        (STDIO, "print(7)\n"),
        (HUMANEVAL_SIMPLE, "    return True\n"),
        (HUMANEVAL_CHECK, "    return 0.5\n"),
        (HUMANEVAL_HELPER, "    return 1.0\n"),
        (MBPP, "def similar_elements(a, b):\n    return a\n"),
    ],
)
def test_wrong_solutions_fail_every_format(env, task, wrong):
    obs, reward, terminated, truncated, info = _play(env, task, f"```python\n{wrong}```")
    assert reward == 0.0 and not info["verification"]["all_passed"]


def test_simple_asserts_become_comparisons():
    he = task_from_dict(HUMANEVAL_SIMPLE).answer["tests"]
    assert [t["kind"] for t in he] == ["call", "call", "call"]
    assert [t["compare"] for t in he] == ["python", "python", "falsy"]
    mbpp = task_from_dict(MBPP).answer["tests"]
    assert [t["kind"] for t in mbpp] == ["check", "call", "check"]
    assert task_from_dict(HUMANEVAL_CHECK).answer["tests"][0]["kind"] == "check"


def test_humaneval_accepts_a_full_function_or_a_body(env):
    full = "```python\ndef truncate(x):\n    return x - int(x)\n```"
    body = "```python\n    return x - int(x)\n```"
    assert _play(env, HUMANEVAL_CHECK, full)[1] == 1.0
    assert _play(env, HUMANEVAL_CHECK, body)[1] == 1.0


def test_host_side_checks_see_only_plain_values(env):
    # An always-equal object cannot leave the sandbox, so `abs(candidate(x) - frac) < 1e-6` cannot be fooled.
    hack = (
        "```python\nclass Z(float):\n    def __sub__(self, o):\n        return 0.0\n    def __abs__(self):\n        return 0.0\n\n"
        "def truncate(x):\n    return Z(0)\n```"
    )
    obs, reward, terminated, truncated, info = _play(env, HUMANEVAL_CHECK, hack)
    assert reward == 0.0 and "not a plain value" in info["verification"]["tests"][0]["error"]


def test_mbpp_failure_names_the_assertion(env):
    obs, *_ = _play(env, MBPP, "```python\ndef similar_elements(a, b):\n    return (1, 2)\n```")
    assert "AssertionError at: assert set(similar_elements" in obs[-1]["content"]


def test_expected_values_never_enter_the_sandbox(env, monkeypatch):
    secret = "EXPECTED-6c1f"
    sent = []
    original = Worker.exchange

    def spy(self, requests, timeout):
        sent.append(json.dumps(requests))
        return original(self, requests, timeout)

    monkeypatch.setattr(Worker, "exchange", spy)
    task = {"prompt": "p", "entry_point": "f", "tests": [{"args": ["in-put"], "expected": secret}]}
    _play(env, task, "```python\ndef f(x):\n    return x\n```")
    stdio = {"prompt": "p", "tests": [{"input": "in", "output": secret}]}
    _play(env, stdio, "```python\nprint(input())\n```")
    he = dict(HUMANEVAL_SIMPLE, test=f"def check(candidate):\n    assert candidate([1.0], 0.5) == {secret!r}\n")
    _play(env, he, "```python\n    return False\n```")
    assert sent and all(secret not in s for s in sent)
    assert any("in-put" in s for s in sent)


def test_jsonl_file_with_every_format(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(t) for t in [FUNCTION, STDIO, HUMANEVAL_SIMPLE, MBPP]) + "\n")
    env = CodeEnv(tasks=str(path))
    formats = []
    for i in range(4):
        env.reset(options={"task_index": i})
        formats.append(env.task.data["format"])
        assert env.step(env.oracle_action())[1] == 1.0
    assert formats == ["function", "stdio", "humaneval", "mbpp"]


def test_task_records_round_trip(env):
    task = task_from_dict(HUMANEVAL_SIMPLE)
    again = Task.from_json(task.to_json())
    assert again == task
    env.reset(options={"task": again.to_dict()})
    assert env.task == task and env.step(env.oracle_action())[1] == 1.0


def test_tuples_survive_serialisation():
    task = task_from_dict({"text": "t", "test_list": ["assert f(1) == (1, 2)"]})
    assert Task.from_json(task.to_json()).answer["tests"][0]["expected"] == {"__tuple__": [1, 2]}


@pytest.mark.parametrize(
    "bad",
    [
        {"prompt": "p"},
        {"prompt": "p", "entry_point": "f", "tests": []},
        {"prompt": "p", "entry_point": "f", "tests": [{"args": [1]}]},
        {"prompt": "p", "entry_point": "f", "test": "def nope(): pass"},
        {"text": "t", "test_list": ["assert True"]},
        {"text": "t", "test_list": ["not python ("]},
        {"prompt": "p", "entry_point": "f", "tests": "no"},
        {"prompt": "p", "entry_point": "f", "tests": [{"args": [object()], "expected": 1}]},
    ],
)
def test_invalid_tasks_raise(bad):
    with pytest.raises(InvalidTask):
        task_from_dict(bad)


def test_traceback_lines_count_from_the_agents_code(env):
    obs, *_ = _play(env, HUMANEVAL_CHECK, "```python\ndef truncate(x):\n\n    return 1 / 0\n```")
    assert 'File "solution.py", line 3, in truncate' in obs[-1]["content"]


def test_a_pinned_task_is_parsed_once_and_types_stay_apart(monkeypatch):
    from textgym.envs.code import formats

    parsed = []
    real = formats.task_from_dict
    monkeypatch.setattr(formats, "task_from_dict", lambda d: parsed.append(d) or real(d))
    as_list = {"prompt": "p", "entry_point": "f", "tests": [{"args": [[1, 2]], "expected": 2}]}
    as_tuple = {"prompt": "p", "entry_point": "f", "tests": [{"args": [(1, 2)], "expected": 2}]}
    first = formats.cached_task_from_dict(as_list)
    assert formats.cached_task_from_dict(dict(as_list)) is first
    assert formats.cached_task_from_dict(as_tuple).answer != first.answer
    assert len(parsed) == 2
