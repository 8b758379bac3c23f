"""Code-v0: the Gymnasium contract, determinism, the oracle on every family, multi-turn feedback."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import textgym  # registers the ids
from textgym.envs.code import CodeEnv
from textgym.envs.code.families import FAMILIES
from textgym.envs.code.generator import generate
from textgym.messages import thaw
from textgym.parsing import extract_code

WRONG = "```python\ndef nothing():\n    return None\n\nprint('wrong')\n```"


@pytest.fixture(scope="module")
def env():
    e = CodeEnv()
    yield e
    e.close()


def test_check_env(env):
    check_env(env, skip_render_check=True)


def test_registered_id_makes_the_env():
    made = gym.make("textgym/Code-v0", max_attempts=2)
    assert isinstance(made.unwrapped, CodeEnv) and made.unwrapped.max_attempts == 2


def test_at_least_30_families_with_both_formats():
    assert len(FAMILIES) >= 30
    assert {f.format for f in FAMILIES.values()} == {"function", "stdio"}


def test_same_seed_same_task_and_observation():
    a, b = CodeEnv(), CodeEnv()
    for seed in (0, 7, 123):
        obs_a, info_a = a.reset(seed=seed)
        obs_b, info_b = b.reset(seed=seed)
        assert obs_a == obs_b and info_a == info_b and a.task == b.task
    assert len({CodeEnv().reset(seed=s)[1]["task_id"] for s in range(20)}) > 15


def test_generated_tasks_are_deterministic_and_parameterised():
    first = generate(np.random.default_rng(5), families=["caesar"])
    assert first == generate(np.random.default_rng(5), families=["caesar"])
    statements = {generate(np.random.default_rng(s), families=["caesar"])["prompt"] for s in range(10)}
    assert len(statements) > 3  # the shift is a parameter of the statement


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_oracle_scores_one_on_every_family(env, name):
    env.families = (name,)
    try:
        for seed in (0, 1):
            env.reset(seed=seed)
            obs, reward, terminated, truncated, info = env.step(env.oracle_action())
            assert (reward, terminated, info["success"]) == (1.0, True, True), info["verification"]
            assert info["verification"]["passed"] == info["verification"]["total"] == env.num_tests
    finally:
        env.families = None


def test_wrong_answer_gets_feedback_then_can_succeed(env):
    env.reset(seed=3)
    obs, reward, terminated, truncated, info = env.step(WRONG)
    assert (reward, terminated, truncated) == (0.0, False, False)
    text = obs[-1]["content"]
    assert obs[-1]["role"] == "user" and "input:" in text and "expected:" in text and "2 attempts left" in text
    assert info["verification"]["passed"] == 0 and len(info["verification"]["tests"]) == env.num_tests
    obs, reward, terminated, truncated, info = env.step(env.oracle_action())
    assert (reward, terminated, info["success"]) == (1.0, True, True)


def test_attempts_run_out_with_zero_reward(env):
    env.reset(seed=4)
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step(WRONG)
    assert terminated and not truncated and reward == 0.0 and info["success"] is False
    assert "No attempts left" in obs[-1]["content"]
    assert env.oracle_action().startswith("```python")  # the oracle still answers after the end


def test_fraction_reward_counts_passed_tests():
    env = CodeEnv(reward="fraction", max_attempts=1, families=["count_above"], num_tests=6)
    env.reset(seed=0)
    # Right on the empty list only: the first edge case.
    obs, reward, terminated, truncated, info = env.step("```python\ndef count_above(xs):\n    return 0 if not xs else -1\n```")
    assert terminated and 0 < reward < 1 and reward == info["verification"]["passed"] / 6


def test_feedback_shows_got_and_trimmed_traceback(env):
    env.reset(
        seed=0, options={"task": {"prompt": "p", "entry_point": "f", "tests": [{"args": [2], "expected": 4}, {"args": [0], "expected": 0}]}}
    )
    obs, *_ = env.step("```python\ndef f(x):\n    return 10 // x\n```")
    text = obs[-1]["content"]
    assert "got: 5" in text and "ZeroDivisionError" in text and 'File "solution.py", line 2, in f' in text
    for host in ("/work", "/root", "/python", "zygote", "site-packages"):
        assert host not in text


def test_action_without_fence_is_the_whole_message(env):
    env.reset(seed=0, options={"task": {"prompt": "p", "entry_point": "f", "tests": [{"args": [2], "expected": 4}]}})
    assert env.step("def f(x):\n    return 2 * x\n")[1] == 1.0


def test_last_python_block_wins(env):
    env.reset(seed=0, options={"task": {"prompt": "p", "entry_point": "f", "tests": [{"args": [2], "expected": 4}]}})
    text = "First try:\n```python\ndef f(x):\n    return 0\n```\nBetter:\n```python\ndef f(x):\n    return x * 2\n```"
    assert env.step(text)[1] == 1.0


@pytest.mark.timeout(30)
@pytest.mark.parametrize("line", ["a" * 320_000, "-" * 320_000, "python " * 45_000])
def test_code_fence_on_one_endless_line_is_read_in_linear_time(line):
    """An unterminated ``` line once took ~1 s at 32,765 characters (a quadratic regex):
    ten times longer it would take minutes; a linear scan takes microseconds."""
    assert extract_code("```" + line) is None
    assert extract_code("```" + line + "\nx = 1\n") == "x = 1\n"


def test_dict_action_is_accepted(env):
    env.reset(seed=0, options={"task": {"prompt": "p", "entry_point": "f", "tests": [{"args": [2], "expected": 4}]}})
    assert env.step({"role": "assistant", "content": "```python\ndef f(x):\n    return x + 2\n```"})[1] == 1.0


INC = {"prompt": "p", "entry_point": "f", "tests": [{"args": [2], "expected": 3}]}


@pytest.mark.parametrize(
    "code",
    [
        "def f(x):\n    tag = '<tool_call>'\n    return x + 1\n",  # a string literal, no closing tag
        "def f(x):\n    return x + 1  # emits </tool_call>\n",  # a closing tag alone
        "def f(x):\n    return x + 1\n# <tool_call>{oops}</tool_call>\n",  # a broken call in a comment
    ],
)
def test_tool_call_tags_in_code_are_code(env, code):
    """Code-v0 has no tools: the tags are text of the program, which is graded, not a parse error."""
    env.reset(options={"task": INC})
    obs, reward, terminated, truncated, info = env.step(f"I never call <tool_call> here.\n```python\n{code}```")
    assert reward == 1.0 and terminated and info["error"] is None


def test_a_bare_tool_call_is_graded_as_the_whole_message(env):
    env.reset(options={"task": INC})
    obs, reward, terminated, truncated, info = env.step('<tool_call>{"name": "run", "arguments": {')
    assert info["error"] is None and info["verification"]["load_error"] and reward == 0.0
    assert "SyntaxError" in obs[-1]["content"] and not terminated


def test_dict_tool_calls_are_answered_with_an_error_and_use_no_attempt(env):
    env.reset(options={"task": INC})
    calls = [{"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{}"}}]
    obs, reward, terminated, truncated, info = env.step({"role": "assistant", "content": "", "tool_calls": calls})
    assert "no tools" in info["error"] and "verification" not in info and env.attempts == 0
    assert obs[-1]["role"] == "tool" and obs[-1]["tool_call_id"] == "c1"  # every call is answered, as OpenAI needs


@pytest.mark.parametrize(
    "hack",
    [
        "class A:\n    def __eq__(self, o):\n        return True\n    def __ne__(self, o):\n        return False\n\ndef f(x):\n    return A()\n",
        "import sys\ndef f(x):\n    print('ALL TESTS PASSED')\n    sys.exit(0)\n",
        "import os\nos._exit(0)\n",
        "class I(int):\n    def __eq__(self, o):\n        return True\n\ndef f(x):\n    return I(0)\n",
    ],
)
def test_hacks_score_zero(env, hack):
    env.reset(seed=0, options={"task": {"prompt": "p", "entry_point": "f", "tests": [{"args": [2], "expected": 4}]}})
    obs, reward, terminated, truncated, info = env.step(f"```python\n{hack}```")
    assert reward == 0.0 and info["verification"]["passed"] == 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(max_size=300), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))))
def test_fuzzed_actions_never_crash(env, action):
    env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step(action)
    assert reward in (0.0, 1.0) and obs[-1]["role"] == "user"
    # Code-v0 has no tools, so every text turn is a submission (a bare "<tool_call>" is just text)
    assert info["error"] is None and isinstance(info["verification"]["tests"], list)


def test_huge_action_is_cut_and_reported(env):
    env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step("x" * (env.max_action_chars + 10))
    assert info["error"] and reward == 0.0


def test_truncation_when_max_turns_is_below_attempts():
    env = CodeEnv(max_attempts=5, max_turns=1)
    env.reset(seed=2)
    obs, reward, terminated, truncated, info = env.step(WRONG)
    assert truncated and not terminated and info["success"] is False and info["verification"]["passed"] == 0


def test_step_before_reset_raises():
    with pytest.raises(textgym.ResetNeeded):
        CodeEnv().step("x")


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="max_attempts"):
        CodeEnv(max_attempts=0)
    with pytest.raises(ValueError, match="reward"):
        CodeEnv(reward="dense")
    with pytest.raises(ValueError, match="unknown families"):
        CodeEnv(families=["nope"])


def test_ansi_render_shows_the_conversation():
    env = CodeEnv(render_mode="ansi")
    env.reset(seed=0)
    assert "[system]" in env.render() and "[user]" in env.render()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_vector_env_runs_the_oracle(mode):
    venv = gym.make_vec("textgym/Code-v0", num_envs=2, vectorization_mode=mode)
    try:
        obs, infos = venv.reset(seed=[5, 5])
        assert thaw(obs[0]) == thaw(obs[1])
        obs, rewards, terminated, truncated, infos = venv.step(list(venv.call("oracle_action")))
        assert list(rewards) == [1.0, 1.0] and all(terminated)
    finally:
        venv.close()


def test_refuses_without_isolation_unless_unsafe_is_chosen(monkeypatch):
    from textgym.error import SandboxUnavailable
    from textgym.sandbox import Limits, isolation

    isolation.resolve_backend.cache_clear()
    monkeypatch.setattr(isolation.shutil, "which", lambda name: None)
    try:
        with pytest.raises(SandboxUnavailable, match="bubblewrap"):
            CodeEnv(limits=Limits(call_timeout=1.25))  # limits no other test uses: a new sandbox
        env = CodeEnv(backend="unsafe", limits=Limits(call_timeout=1.25))
        env.reset(seed=0)
        assert env.step(env.oracle_action())[1] == 1.0
    finally:
        isolation.resolve_backend.cache_clear()


SLOW_TASK = {"prompt": "Return x.", "entry_point": "f", "tests": [{"args": [1], "expected": 1}], "solution": "def f(x):\n    return x"}


def test_a_sandbox_that_dies_mid_run_is_env_error_not_the_programs_fault():
    import contextlib
    import os
    import signal
    import threading
    import time

    from textgym.sandbox import Sandbox

    with Sandbox(workers=1) as sandbox:
        env = CodeEnv(sandbox=sandbox, max_attempts=3)
        env.reset(options={"task": SLOW_TASK})
        assert env.step(env.oracle_action())[4]["end_reason"] == "success"  # a warm worker
        env.reset(options={"task": SLOW_TASK})

        def kill_busy_worker():  # what an OOM killer or an operator does to the worker, and its retry
            deadline = time.monotonic() + 4.0
            while time.monotonic() < deadline:
                time.sleep(0.5)
                for worker in list(sandbox._all):
                    if worker.alive:
                        with contextlib.suppress(ProcessLookupError):
                            os.killpg(worker.proc.pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_busy_worker)
        killer.start()
        *_, terminated, truncated, info = env.step("```python\nimport time\ndef f(x):\n    time.sleep(1.5)\n    return x\n```")
        killer.join()
        assert terminated and info["end_reason"] == "env_error" and info["success"] is False
        assert "the sandbox worker" in info["verification"]["sandbox_error"]  # stopped, or did not start again
        env.reset(options={"task": SLOW_TASK})  # the pool starts a fresh worker: the env goes on
        *_, info = env.step(env.oracle_action())
        assert info["end_reason"] == "success" and info["verification"]["sandbox_error"] is None


def test_end_reasons_of_failed_and_truncated_episodes(env):
    env.reset(seed=1)
    for _ in range(env.max_attempts):
        *_, terminated, truncated, info = env.step(WRONG)
    assert terminated and info["end_reason"] == "failure"
    short = CodeEnv(max_attempts=3, max_turns=1)
    short.reset(seed=1)
    assert short.step("no code at all")[4]["end_reason"] == "max_turns"
