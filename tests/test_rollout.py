"""collect(): GRPO groups, episodes of different lengths, every autoreset mode, sync and async;
token rollouts; JSONL and Hugging Face datasets round trips."""

from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from tests.wrappers.chat_fixtures import LadderEnv, as_text, tokenizer
from textgym.error import MissingDependency
from textgym.policies.base import PolicyOutput
from textgym.registration import ENVS
from textgym.rollout import Rollout, collect, from_dataset, read_rollouts, to_dataset, write_rollouts
from textgym.wrappers import TokenObservation

SEEDS = [0, 1, 3]  # Ladder heights 4, 2, 4: oracle episodes of 5, 3 and 5 turns


class TextOracle:
    """The sub-envs' oracles, as text (what a chat model would write)."""

    def __init__(self, venv):
        self.venv = venv
        self.batches = []

    def act(self, observations, infos=None):
        self.batches.append(len(observations))
        return PolicyOutput([as_text(a) for a in self.venv.call("oracle_action")])


class TokenOracle:
    """The oracles' text as sampled ids ending in the stop token, with made-up logprobs."""

    def __init__(self, venv, tok):
        self.venv, self.tok, self.sampled = venv, tok, []

    def act(self, observations, infos=None):
        ids = [
            np.asarray(self.tok.encode(as_text(a), add_special_tokens=False) + [self.tok.eos_token_id], np.int32)
            for a in self.venv.call("oracle_action")
        ]
        logprobs = [-np.linspace(0.1, 1.0, i.size, dtype=np.float32) for i in ids]
        return PolicyOutput(ids, logprobs)


def ladder_venv(mode: str, autoreset: AutoresetMode, n: int = 3, wrap=None):
    fns = [(lambda: wrap(LadderEnv()) if wrap else LadderEnv()) for _ in range(n)]
    cls = gym.vector.SyncVectorEnv if mode == "sync" else gym.vector.AsyncVectorEnv
    return cls(fns, autoreset_mode=autoreset)


def summary(rollouts):
    return [(r.seed, r.group, r.task_id, r.turns, r.reward, r.success, r.terminated, r.messages) for r in rollouts]


@pytest.fixture(scope="module")
def reference():
    venv = ladder_venv("sync", AutoresetMode.NEXT_STEP)
    try:
        return summary(collect(venv, TextOracle(venv), seeds=SEEDS, group_size=4, env_id="ladder"))
    finally:
        venv.close()


@pytest.mark.parametrize("autoreset", list(AutoresetMode))
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_groups_of_repeated_seeds_in_every_autoreset_mode(mode, autoreset, reference):
    venv = ladder_venv(mode, autoreset)
    policy = TextOracle(venv)
    try:
        rollouts = collect(venv, policy, seeds=SEEDS, group_size=4, env_id="ladder")
    finally:
        venv.close()
    assert len(rollouts) == 12
    for k, r in enumerate(rollouts):
        assert (r.seed, r.group, r.env_id) == (SEEDS[k // 4], k // 4, "ladder")
        assert r.success and r.reward == 1.0 and r.terminated and not r.truncated
        assert r.turns == len(r.turn_timing) == sum(m["role"] == "assistant" for m in r.messages)
        assert r.tools[0]["function"]["name"] == "step_up"
        assert all(t["policy_s"] >= 0 and t["env_s"] >= 0 for t in r.turn_timing)
        assert r.timing["env_s"] == pytest.approx(sum(t["env_s"] for t in r.turn_timing))
        assert r.timing["wall_s"] >= r.timing["env_s"]
    for g in range(3):
        assert len({r.task_id for r in rollouts[4 * g : 4 * g + 4]}) == 1
    assert [r.turns for r in rollouts[::4]] == [5, 3, 5]  # envs finish at different turns
    assert summary(rollouts) == reference  # the same episodes whatever the mode
    assert set(policy.batches) == {3}  # the policy always sees the whole batch


def test_fewer_episodes_than_envs_and_defaults():
    venv = ladder_venv("sync", AutoresetMode.NEXT_STEP, n=4)
    rollouts = collect(venv, TextOracle(venv), episodes=2)
    assert [(r.seed, r.group) for r in rollouts] == [(0, 0), (1, 1)]
    assert all(r.success for r in rollouts)
    rollouts = collect(venv, TextOracle(venv), episodes=3, seeds=[5, 6], group_size=2)
    assert [(r.seed, r.group) for r in rollouts] == [(5, 0), (5, 0), (6, 1)]


class LiveTextOracle(TextOracle):
    """The text oracle, recording which slots collect says hold an episode before each act."""

    def __init__(self, venv):
        super().__init__(venv)
        self.live = []

    def set_live_slots(self, live):
        self.live.append(None if live is None else live.tolist())


@pytest.mark.parametrize("autoreset", list(AutoresetMode))
def test_a_policy_hears_which_slots_hold_episodes(autoreset):
    venv = ladder_venv("sync", autoreset, n=3)
    policy = LiveTextOracle(venv)
    try:
        rollouts = collect(venv, policy, seeds=[0, 1])  # 5 and 3 turns; the third slot never holds one
    finally:
        venv.close()
    assert [r.turns for r in rollouts] == [5, 3]
    assert policy.live == [[True, True, False]] * 3 + [[True, False, False]] * 2 + [None]


@pytest.mark.parametrize(
    "kwargs", [{}, {"episodes": 3, "group_size": 2}, {"episodes": 5, "seeds": [1, 2]}, {"episodes": 0}, {"seeds": [1], "group_size": 0}]
)
def test_bad_counts_raise(kwargs):
    venv = ladder_venv("sync", AutoresetMode.NEXT_STEP, n=1)
    with pytest.raises(ValueError):
        collect(venv, TextOracle(venv), **kwargs)


@pytest.mark.parametrize("autoreset", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_token_rollouts_hold_the_sampled_ids_and_logprobs(mode, autoreset):
    tok = tokenizer("chatml")
    venv = ladder_venv(mode, autoreset, n=2, wrap=lambda env: TokenObservation(env, tok))
    try:
        rollouts = collect(venv, TokenOracle(venv, tok), seeds=[0, 1], group_size=2)
    finally:
        venv.close()
    for r in rollouts:
        assert r.success
        text = tok.apply_chat_template(r.messages, tools=r.tools, tokenize=False)
        assert tok.decode(r.token_ids.tolist(), skip_special_tokens=False) == text
        assert len(r.turn_spans) == r.turns
        mask = np.zeros_like(r.loss_mask)
        for start, end in r.turn_spans:
            mask[start:end] = 1
            assert r.token_ids[end - 1] == tok.eos_token_id  # the stop token is a sampled token
            np.testing.assert_allclose(r.logprobs[start:end], -np.linspace(0.1, 1.0, end - start), rtol=1e-6)
        np.testing.assert_array_equal(r.loss_mask, mask)
        assert np.all(r.logprobs[mask == 0] == 0)


TEXTGYM_IDS = sorted(entry.id for entry in ENVS)  # not textgym/Remote-v0: it needs a server


@pytest.mark.parametrize("policy", ["sampled ids", "oracle actions"])
@pytest.mark.parametrize("env_id", TEXTGYM_IDS)
def test_registered_envs_give_exact_token_rollouts(env_id, policy):
    from textgym.policies import OraclePolicy  # acts in text or assistant-message dicts

    tok = tokenizer("tiny")
    venv = gym.make_vec(env_id, num_envs=2, vectorization_mode="sync", wrappers=[lambda env: TokenObservation(env, tok)])
    try:
        actor = TokenOracle(venv, tok) if policy == "sampled ids" else OraclePolicy(venv)
        rollouts = collect(venv, actor, seeds=[0], group_size=2)
    finally:
        venv.close()
    assert rollouts[0].env_id == env_id
    for r in rollouts:
        assert r.success, r.messages[-1]
        assert tok.decode(r.token_ids.tolist(), skip_special_tokens=False) == tok.apply_chat_template(
            r.messages, tools=r.tools, tokenize=False
        )


@pytest.fixture(scope="module")
def mixed_rollouts():
    """Text rollouts and token rollouts (arrays, spans, logprobs, tools, timings)."""
    venv = ladder_venv("sync", AutoresetMode.NEXT_STEP, n=2)
    text = collect(venv, TextOracle(venv), seeds=[0, 1], env_id="ladder")
    tok = tokenizer("chatml")
    venv = ladder_venv("sync", AutoresetMode.NEXT_STEP, n=2, wrap=lambda env: TokenObservation(env, tok))
    tokens = collect(venv, TokenOracle(venv, tok), seeds=[2], group_size=2, env_id="ladder")
    return text + tokens


def test_jsonl_round_trip(tmp_path, mixed_rollouts):
    path = tmp_path / "rollouts.jsonl"
    write_rollouts(path, mixed_rollouts[:2])
    write_rollouts(path, mixed_rollouts[2:], append=True)
    back = read_rollouts(path)
    assert [r.to_dict() for r in back] == [r.to_dict() for r in mixed_rollouts]
    assert back[-1].token_ids.dtype == np.int32 and back[-1].turn_spans[0] == tuple(mixed_rollouts[-1].turn_spans[0])


def test_datasets_round_trip_in_trl_chat_format(tmp_path, mixed_rollouts):
    from datasets import load_from_disk

    ds = to_dataset(mixed_rollouts)
    assert {"messages", "tools", "reward"} <= set(ds.column_names)
    # TRL's conversational format: OpenAI-shaped messages, no padding keys, tool schemas as given.
    row = ds[0]
    assert row["messages"] == mixed_rollouts[0].messages and row["reward"] == 1.0
    assert set(row["messages"][0]) == {"role", "content"}
    assert row["tools"] == mixed_rollouts[0].tools
    ds.save_to_disk(tmp_path / "ds")
    back = from_dataset(load_from_disk(tmp_path / "ds"))
    assert [r.to_dict() for r in back] == [r.to_dict() for r in mixed_rollouts]
    # The chat template renders a row exactly as the token trajectory the policy saw.
    tok = tokenizer("chatml")
    last = ds[-1]
    rendered = tok.apply_chat_template(last["messages"], tools=last["tools"], tokenize=False)
    assert tok.decode(last["token_ids"], skip_special_tokens=False) == rendered


def test_datasets_is_optional(monkeypatch, mixed_rollouts):
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(MissingDependency, match=r"textgym\[datasets\]"):
        to_dataset(mixed_rollouts)


def test_rollout_record_from_dict_ignores_unknown_fields(mixed_rollouts):
    d = mixed_rollouts[-1].to_dict() | {"extra": 1}
    assert Rollout.from_dict(d).to_dict() == mixed_rollouts[-1].to_dict()


def test_datasets_round_trip_of_bare_records():
    bare = Rollout("e", "t", None, [{"role": "user", "content": "x"}], 0.0, False, 1, False, True)
    assert [r.to_dict() for r in from_dataset(to_dataset([bare]))] == [bare.to_dict()]
    assert len(to_dataset([])) == 0


def test_records_carry_the_end_reason_and_old_records_still_load():
    venv = gym.make_vec("textgym/Sudoku-v0", num_envs=2, size=4)
    from textgym.policies import OraclePolicy, RandomPolicy

    solved = collect(venv, OraclePolicy(venv), seeds=[0, 1])
    unsolved = collect(venv, RandomPolicy(seed=0), seeds=[0, 1])
    venv.close()
    assert {r.end_reason for r in solved} == {"success"}
    assert {r.end_reason for r in unsolved} <= {"failure", "max_turns"}
    assert Rollout.from_dict(solved[0].to_dict()).end_reason == "success"
    old = {k: v for k, v in solved[0].to_dict().items() if k != "end_reason"}  # written before end_reason existed
    assert Rollout.from_dict(old).end_reason is None


class NoisyMoves:
    """Sudoku's demonstrator one move a turn, its digit a guess half the time: refused and accepted moves."""

    def __init__(self, venv):
        self.venv = venv

    def act(self, observations, infos=None):
        return PolicyOutput(list(self.venv.unwrapped.call("oracle_action", place=1, noise=0.5)))


@pytest.mark.parametrize(
    ("env_id", "kwargs", "policy"),
    [
        ("textgym/Sudoku-v0", {"size": 4}, "oracle"),
        ("textgym/Sudoku-v0", {"size": 4}, "random"),
        ("textgym/Sudoku-v0", {"size": 4, "max_turns": 8}, "moves"),
        ("textgym/Sudoku-v0", {"size": 4, "reward": "dense", "max_turns": 8}, "moves"),
        ("textgym/Sudoku-v0", {"size": 4, "reward": "dense"}, "random"),
        ("textgym/Workplace-v0", {"max_turns": 4}, "oracle"),
        ("textgym/Workplace-v0", {"max_turns": 4}, "random"),
        ("textgym/Code-v0", {"max_attempts": 2, "reward": "fraction"}, "oracle"),
        ("textgym/Code-v0", {"max_attempts": 2, "reward": "fraction"}, "random"),
    ],
)
def test_turn_rewards_sum_to_the_reward_and_each_turn_has_its_state_key(env_id, kwargs, policy):
    from textgym.policies import OraclePolicy, RandomPolicy

    venv = gym.make_vec(env_id, num_envs=4, vectorization_mode="sync", **kwargs)
    try:
        actor = {"oracle": OraclePolicy, "moves": NoisyMoves}.get(policy, lambda v: RandomPolicy(seed=0))(venv)
        rollouts = collect(venv, actor, seeds=[0, 1], group_size=4)
    finally:
        venv.close()
    for r in rollouts:
        assert len(r.turn_rewards) == len(r.turn_state_keys) == r.turns >= 1
        assert r.reward == sum(r.turn_rewards)  # the same additions in the same order
        assert all(len(key) == 16 for key in r.turn_state_keys)
        assert Rollout.from_dict(r.to_dict()).turn_rewards == r.turn_rewards
    for group in (rollouts[:4], rollouts[4:]):  # a group's episodes start from one state
        assert len({r.turn_state_keys[0] for r in group}) == 1
    assert rollouts[0].turn_state_keys[0] != rollouts[4].turn_state_keys[0]
    if policy == "moves":  # moves are accepted and refused: several states, and the dense reward pays each move
        assert len({k for r in rollouts for k in r.turn_state_keys}) > 2
        paid = [x for r in rollouts for x in r.turn_rewards[:-1] if x != 0]
        assert bool(paid) == (kwargs.get("reward") == "dense")


def test_records_from_before_turn_rewards_still_load():
    venv = gym.make_vec("textgym/Sudoku-v0", num_envs=2, size=4)
    from textgym.policies import OraclePolicy

    record = collect(venv, OraclePolicy(venv), seeds=[0])[0].to_dict()
    venv.close()
    old = {k: v for k, v in record.items() if k not in ("turn_rewards", "turn_state_keys")}
    back = Rollout.from_dict(old)
    assert back.turn_rewards is None and back.turn_state_keys is None and back.reward == record["reward"]
    assert [r.to_dict() for r in from_dataset(to_dataset([back]))] == [back.to_dict()]
