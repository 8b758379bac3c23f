"""RandomPolicy, OraclePolicy and ModelPolicy: determinism, schema-valid calls, oracle = 1.0."""

from typing import Annotated, Literal

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.policies.toy import ENV_ID, CountdownEnv
from textgym.parsing import parse_turn
from textgym.policies import ModelPolicy, OraclePolicy, Policy, RandomPolicy
from textgym.policies.random import random_value
from textgym.tools import Param, Toolset


def book(
    room: Literal["a", "b", "c"],
    day: Annotated[str, Param(format="date")],
    start: Annotated[str, Param(format="date-time")],
    guests: Annotated[int, Param(minimum=1, maximum=8)],
    owner: Annotated[str, Param(format="email")],
    budget: Annotated[float, Param(minimum=0, maximum=10)],
    tags: list[str],
    seats: list[int],
    private: bool = False,
    note: str | None = None,
    extra: dict | None = None,
) -> str:
    """Book a room (every argument type textgym.tools emits)."""
    return "ok"


TOOLS = Toolset([book])


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_random_arguments_satisfy_the_tool_schema(seed):
    rng = np.random.default_rng(seed)
    schema = TOOLS["book"].schema["function"]["parameters"]
    TOOLS["book"].validate(random_value(schema, rng))  # raises ToolError on any violation


def test_random_tool_calls_parse_and_use_the_slots_tools():
    policy = RandomPolicy(seed=1, p_tool=1.0)
    infos = [{"tools": TOOLS.schemas()}, {"tools": []}]
    first = policy.act([(), ()], infos).actions
    later = [policy.act([(), ()], [{}, {}]).actions for _ in range(20)]  # step infos: no tools
    for actions in [first, *later]:
        turn = parse_turn(actions[0])
        assert not turn.errors and [c.name for c in turn.tool_calls] == ["book"]
        assert parse_turn(actions[1]).tool_calls == ()  # slot 1's env has no tools
    forms = {type(a[0]) for a in [first, *later]}
    assert forms == {str, dict}  # both action forms the envs accept


def test_random_policy_is_deterministic_per_seed_and_varies_across_seeds():
    infos = [{"tools": TOOLS.schemas()}] * 4
    run = lambda seed: [RandomPolicy(seed).act([()] * 4, infos).actions for _ in range(3)]
    assert run(5) == run(5)
    assert run(5) != run(6)


def test_random_scores_about_zero_and_oracle_one():
    env = gym.make(ENV_ID)
    for policy, expected in ((RandomPolicy(seed=0), 0.0), (OraclePolicy(env), 1.0)):
        rewards = []
        for seed in range(20):
            obs, info = env.reset(seed=seed)
            done = False
            while not done:
                action = policy.act([obs], [info]).actions[0]
                obs, reward, terminated, truncated, info = env.step(action)
                done = terminated or truncated
            rewards.append(reward)
        assert np.mean(rewards) == pytest.approx(expected, abs=0.1)


def test_oracle_on_a_vector_env_with_different_episode_lengths():
    venv = gym.vector.SyncVectorEnv([CountdownEnv] * 4)
    oracle = OraclePolicy(venv)
    obs, infos = venv.reset(seed=[1, 2, 3, 4])  # oracle episodes of 2 to 4 turns
    solved, finished = np.zeros(4), np.zeros(4, dtype=bool)
    for _ in range(4):
        obs, rewards, terminated, truncated, infos = venv.step(oracle.act(obs).actions)
        done = (terminated | truncated) & ~finished
        solved[done] = rewards[done]
        finished |= done
    assert finished.all() and solved.tolist() == [1.0] * 4
    with pytest.raises(ValueError, match="bound to 4"):
        oracle.act(obs[:2])
    with pytest.raises(TypeError, match="Env or VectorEnv"):
        OraclePolicy(object())


class EchoModel:
    """A stand-in for the backends' samplers: ids from the seed, logprob -1 per token."""

    def __init__(self):
        self.calls = []

    def generate(self, prompts, max_new_tokens, temperature, seed):
        self.calls.append((len(prompts), max_new_tokens, temperature, seed))
        ids = [np.arange(seed, seed + 1 + len(p) % max_new_tokens, dtype=np.int64) for p in prompts]
        return ids, [-np.ones(len(x)) for x in ids]


def test_model_policy_adapts_generate_and_advances_the_seed():
    model = EchoModel()
    policy = ModelPolicy(model, max_new_tokens=3, temperature=0.7, seed=10)
    assert isinstance(policy, Policy)
    prompts = [np.array([1, 2], dtype=np.int32), np.array([5], dtype=np.int32)]
    out1, out2 = policy.act(prompts), policy.act(prompts)
    assert model.calls == [(2, 3, 0.7, 10), (2, 3, 0.7, 11)]
    assert all(a.dtype == np.int32 and lp.dtype == np.float32 and a.shape == lp.shape for a, lp in zip(out1.actions, out1.logprobs))
    assert out1.actions[0].tolist() == [10, 11, 12] and out2.actions[1].tolist() == [11, 12]


class CachingModel(EchoModel):
    """An echo model that keeps per-episode state, as the backends' samplers keep keys and values."""

    def __init__(self):
        super().__init__()
        self.released = []

    def release(self, contexts):
        self.released += [c.tolist() for c in contexts]


def test_model_policy_samples_live_slots_and_releases_ended_episodes():
    model = CachingModel()
    policy = ModelPolicy(model, max_new_tokens=3, seed=10)
    a, b, c, d = (np.arange(n, dtype=np.int32) for n in (2, 3, 4, 5))
    policy.set_live_slots([True, False, True])
    first = policy.act([a, b, c])
    assert model.calls[-1][0] == 2 and first.actions[1].size == first.logprobs[1].size == 0  # idle: an empty turn
    continued = np.concatenate([a, first.actions[0], [7]])
    policy.set_live_slots([True, True, True])
    policy.act([continued, b, d])  # slot 0 goes on, slot 2 starts a new episode
    assert model.released == [np.concatenate([c, first.actions[2]]).tolist()]
    policy.set_live_slots(None)  # collection over: every episode is freed
    assert len(model.released) == 4 and model.released[1][: len(continued)] == continued.tolist()
    assert len(policy.act([a, b]).actions[1]) > 0  # and every slot is sampled again


def test_model_policy_rejects_text_observations_and_bad_models():
    with pytest.raises(TypeError, match="TokenObservation"):
        ModelPolicy(EchoModel()).act([({"role": "user", "content": "hi"},)])
    with pytest.raises(TypeError, match="generate"):
        ModelPolicy(object())
    bad = EchoModel()
    bad.generate = lambda prompts, **kw: ([np.zeros(2, np.int32)], [np.zeros(3, np.float32)])
    with pytest.raises(ValueError, match="2 ids but 3 logprobs"):
        ModelPolicy(bad).act([np.array([1], dtype=np.int32)])


def test_every_policy_follows_the_protocol():
    env = gym.make(ENV_ID)
    assert all(isinstance(p, Policy) for p in (RandomPolicy(0), OraclePolicy(env), ModelPolicy(EchoModel())))


def test_tools_are_read_from_vector_infos_and_single_infos_too():
    venv = gym.vector.SyncVectorEnv([CountdownEnv] * 2)
    obs, infos = venv.reset(seed=0)  # a Gymnasium vector info: arrays plus "_tools" masks
    policy = RandomPolicy(seed=0, p_tool=1.0)
    actions = policy.act(obs, infos).actions
    assert all(parse_turn(a).tool_calls[0].name == "check" for a in actions)
    env = CountdownEnv()
    obs, info = env.reset(seed=0)
    single = RandomPolicy(seed=0, p_tool=1.0)
    assert parse_turn(single.act([obs], info).actions[0]).tool_calls[0].name == "check"
