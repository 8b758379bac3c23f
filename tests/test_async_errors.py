"""A crashing sub-env of ``gym.make_vec(..., vectorization_mode="async")`` raises, never hangs.

The crash env is registered with a class entry point; Linux forks the workers, so they have it.
"""

import multiprocessing as mp
import os
import time

import gymnasium as gym
import pytest

from tests.policies.toy import CountdownEnv
from textgym.registration import ENVS

pytestmark = pytest.mark.timeout(120)


class CrashEnv(CountdownEnv):
    """Countdown whose tools misbehave on request: raise, kill the worker, or hang."""

    def respond(self, turn):
        if turn.text == "raise":
            raise RuntimeError("sub-env bug: the verifier crashed")
        if turn.text == "die":
            os._exit(3)
        if turn.text == "hang":
            time.sleep(30)
        return super().respond(turn)

    def begin(self, task):
        if task.answer == -1:
            raise RuntimeError("sub-env bug: cannot build the task")
        return super().begin(task)


ENV_ID = "textgym-test/Crash-v0"
if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=CrashEnv)


@pytest.fixture
def venv():
    v = gym.make_vec(ENV_ID, num_envs=2, vectorization_mode="async")
    v.reset(seed=0)
    yield v
    v.close(terminate=True)


def test_exception_in_step_is_reraised_with_its_message(venv):
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="the verifier crashed"):
        venv.step(["<answer>1</answer>", "raise"])
    assert time.monotonic() - started < 10


def test_exception_in_reset_is_reraised_with_its_message(venv):
    bad = {"task": {"n": -1}}
    with pytest.raises(RuntimeError, match="cannot build the task"):
        venv.reset(options=bad)


def test_dead_worker_raises_instead_of_hanging(venv):
    started = time.monotonic()
    with pytest.raises((EOFError, ConnectionError, BrokenPipeError)):
        venv.step(["<answer>1</answer>", "die"])
    assert time.monotonic() - started < 10


def test_hanging_worker_times_out_with_step_wait_timeout(venv):
    venv.step_async(["<answer>1</answer>", "hang"])
    with pytest.raises(mp.TimeoutError):
        venv.step_wait(timeout=1.0)


def test_healthy_envs_still_step_normally(venv):
    obs, rewards, terminated, truncated, infos = venv.step(venv.call("oracle_action"))
    assert len(obs) == 2 and not terminated.any() and list(infos["error"]) == [None, None]


@pytest.mark.parametrize("env_id", [e.id for e in ENVS])
def test_async_works_after_the_parent_process_used_the_env(env_id):
    """Forked workers must not share the parent's env resources (sandbox pipes, db handles)."""
    parent = gym.make(env_id)
    parent.reset(seed=0)
    parent.step(parent.unwrapped.oracle_action())  # warms whatever the env starts lazily
    venv = gym.make_vec(env_id, num_envs=2, vectorization_mode="async")
    try:
        venv.reset(seed=[0, 1])
        venv.step_async(list(venv.call("oracle_action")))
        _, rewards, terminated, truncated, _ = venv.step_wait(timeout=20)  # a hang fails instead of blocking
        direct = gym.make(env_id)
        direct.reset(seed=0)
        assert rewards[0] == direct.step(direct.unwrapped.oracle_action())[1]
    finally:
        venv.close(terminate=True)
        parent.close()
