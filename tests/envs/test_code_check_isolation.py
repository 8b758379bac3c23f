"""No code of a task runs on the host: checks, prompts and MBPP assertions run in a sandbox of their own."""

from __future__ import annotations

import pytest

from textgym.envs.code import CodeEnv


def owning(path) -> str:
    return f"open({str(path)!r}, 'w').write('x')"


@pytest.fixture(scope="module")
def env():
    e = CodeEnv(max_attempts=1)
    yield e
    e.close()


def play(env, task, code):
    env.reset(seed=0, options={"task": task})
    return env.step(f"```python\n{code}\n```")


def test_a_humaneval_check_runs_in_the_sandbox_not_on_the_host(env, tmp_path):
    owned = tmp_path / "owned"
    task = {"prompt": "def f(x):\n    pass\n", "entry_point": "f", "test": f"def check(c):\n    {owning(owned)}\n    assert c(1)==1\n"}
    play(env, task, "def f(x): return x")
    assert not owned.exists()


def test_a_humaneval_prompt_runs_in_the_sandbox_not_on_the_host(env, tmp_path):
    owned = tmp_path / "owned"
    task = {
        "prompt": f"{owning(owned)}\ndef f(x):\n    pass\n",
        "entry_point": "f",
        "test": "def check(c):\n    y = c(1)\n    assert y == 1 or y != 1\n",
    }
    play(env, task, "def f(x): return x")
    assert not owned.exists()


def test_an_mbpp_assertion_runs_in_the_sandbox_not_on_the_host(env, tmp_path):
    owned = tmp_path / "owned"
    task = {"text": "identity", "test_list": [f"assert ({owning(owned)} and f(1)) == 1"]}
    play(env, task, "def f(x): return x")
    assert not owned.exists()


def test_a_task_records_check_runs_in_the_sandbox_not_on_the_host(env, tmp_path):
    owned = tmp_path / "owned"
    record = {
        "id": "code-own",
        "data": {"format": "mbpp", "prompt": "p", "entry_point": "f", "setup": ""},
        "answer": {"tests": [{"kind": "check", "code": f"{owning(owned)}\nassert f(1) == 1"}], "solution": None},
    }
    play(env, record, "def f(x): return x")
    assert not owned.exists()


def test_verdicts_of_sandboxed_checks_still_decide(env):
    check = "def check(c):\n    total = sum(c(i) for i in range(4))\n    assert total == 6, total\n"
    task = {"prompt": "def f(x):\n    '''x'''\n", "entry_point": "f", "test": check}
    assert play(env, task, "def f(x): return x")[1] == 1.0
    obs, reward, *_, info = play(env, task, "def f(x): return x + 1")
    assert reward == 0.0 and "AssertionError: 10" in info["verification"]["tests"][0]["error"]


def test_a_check_never_shares_a_process_with_the_submission(env):
    """The check's process has no program in it: a name the submission defines is not there."""
    check = (
        "def check(c):\n    assert c(1) == 1\n    assert 'SUBMITTED' not in globals()\n    assert 'SUBMITTED' not in dir(__builtins__)\n"
    )
    task = {"prompt": "def f(x):\n    '''x'''\n", "entry_point": "f", "test": check}
    code = "import builtins\nSUBMITTED = 1\nbuiltins.SUBMITTED = 1\ndef f(x): return x"
    assert play(env, task, code)[1] == 1.0


def test_a_check_that_loops_forever_fails_its_test_and_the_env_goes_on(env):
    task = {
        "prompt": "def f(x):\n    '''x'''\n",
        "entry_point": "f",
        "test": "def check(c):\n    assert c(1) == 1\n    while True:\n        pass\n",
    }
    obs, reward, terminated, truncated, info = play(env, task, "def f(x): return x")
    assert reward == 0.0 and terminated and info["end_reason"] == "failure"
    assert "check failed in its sandbox" in info["verification"]["tests"][0]["error"]


def test_pinned_tasks_and_their_plans_are_not_kept_after_the_env_lets_go():
    """A served client's pinned tasks (and their checks' plans) leave with the envs that hold them."""
    import gc

    from textgym.envs.code import checks, formats

    env = CodeEnv(max_attempts=1)
    for k in range(5):
        task = {
            "prompt": f"def f(x):\n    '''{'x' * 100_000}{k}'''\n",
            "entry_point": "f",
            "test": f"def check(c):\n    assert c({k}) == {k}\n    assert c(c({k})) == {k}\n",
        }
        play(env, task, "def f(x): return x")
    same = dict(task)
    env.reset(seed=0, options={"task": same})  # the task held: found again, not parsed again
    assert env.unwrapped.task is formats.cached_task_from_dict(same)
    env.close()
    del env
    gc.collect()
    assert not any("x" * 100_000 in str(key) for key in formats._cache)
    assert not any("x" * 100_000 in key for key in checks._plans)


def test_a_checks_process_serves_one_verification_only(env):
    """A task's check that changes its process (here: a builtin it adds) changes nothing for the
    next verification's checks, of another task or of the same one."""
    poison = "def check(c):\n    import builtins\n    builtins.POISONED = True\n    assert c(1) == 1\n"
    clean = "def check(c):\n    import builtins\n    assert not hasattr(builtins, 'POISONED')\n    assert c(1) == 1\n"
    prompt = "def f(x):\n    '''x'''\n"
    assert play(env, {"prompt": prompt, "entry_point": "f", "test": poison}, "def f(x): return x")[1] == 1.0
    assert play(env, {"prompt": prompt, "entry_point": "f", "test": clean}, "def f(x): return x")[1] == 1.0
