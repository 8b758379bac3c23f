"""TokenObservation: the trajectory is exactly what was sampled plus what the template adds.

For each template (ChatML, Llama 3, the tiny preset's Qwen-style one) and each env (the test
Ladder env and every registered textgym env that imports), the decoded trajectory equals the
template's rendering of the final conversation and the loss mask covers exactly the sampled ids.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.wrappers.chat_fixtures import (
    CHATML_TEMPLATE,
    LadderEnv,
    as_text,
    make_env,
    tokenizer,
)
from textgym.error import InvalidAction, ResetNeeded, TemplateError
from textgym.messages import thaw
from textgym.registration import ENVS
from textgym.rollout import TokenTrajectory
from textgym.wrappers import TokenObservation

TEMPLATES = ["tiny", "chatml", "llama3"]
# The envs themselves; textgym/Remote-v0 is a client that needs a server (tests/serve covers it).
TEXTGYM_IDS = sorted(entry.id for entry in ENVS)


def decode(tok, ids) -> str:
    return tok.decode(np.asarray(ids).tolist(), skip_special_tokens=False, clean_up_tokenization_spaces=False)


def render(tok, env: TokenObservation, generation_prompt: bool = False) -> str:
    tools = env.unwrapped.tools.schemas() if env.unwrapped.tools else None
    messages = [thaw(m) for m in env.unwrapped.conversation]
    return tok.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=generation_prompt)


def sample(tok, text: str, turn: int) -> np.ndarray:
    """How a model might emit ``text``: canonical ids + stop token, cut off without a stop token,
    or spelled one character at a time (non-canonical ids that re-tokenization would merge)."""
    ids = tok.encode(text, add_special_tokens=False)
    if turn % 3 == 1:
        return np.asarray(ids, np.int32)
    if turn % 3 == 2:
        ids = [i for ch in text for i in tok.encode(ch, add_special_tokens=False)]
    return np.asarray(ids + [tok.eos_token_id], np.int32)


def play(env: TokenObservation, tok, max_steps: int = 40):
    """Run the oracle through the wrapper; return the sampled id arrays and the last step."""
    obs, info = env.reset(seed=1)
    sampled, observations = [], [obs]
    for turn in range(max_steps):
        ids = sample(tok, as_text(env.unwrapped.oracle_action()), turn)
        sampled.append(ids)
        obs, reward, terminated, truncated, info = env.step(ids)
        observations.append(obs)
        if terminated or truncated:
            return sampled, observations, info
    pytest.fail("the oracle did not finish")


@pytest.mark.parametrize("kind", TEMPLATES)
@pytest.mark.parametrize("env_id", ["ladder", *TEXTGYM_IDS])
def test_decoded_trajectory_is_the_rendered_conversation(kind, env_id):
    tok = tokenizer(kind)
    env = TokenObservation(make_env(env_id), tok)
    sampled, observations, info = play(env, tok)
    traj = info["trajectory"]
    assert isinstance(traj, TokenTrajectory)
    assert decode(tok, traj.token_ids) == render(tok, env)
    # The mask is 1 exactly on the sampled ids, which sit verbatim in their spans.
    assert len(traj.turn_spans) == len(sampled)
    expected_mask = np.zeros(traj.token_ids.size, np.int8)
    for (start, end), ids in zip(traj.turn_spans, sampled):
        np.testing.assert_array_equal(traj.token_ids[start:end], ids)
        expected_mask[start:end] = 1
    np.testing.assert_array_equal(traj.loss_mask, expected_mask)
    assert traj.logprobs is None  # plain id actions carry no logprobs
    # Token-in/token-out: each observation extends the previous one by the turn's ids.
    for before, after, (start, _end) in zip(observations, observations[1:], traj.turn_spans):
        assert after.dtype == np.int32 and env.observation_space.contains(after)
        np.testing.assert_array_equal(after[: before.size], before)
        assert start == before.size
    for obs in observations[:-1]:
        assert decode(tok, obs).endswith(
            tok.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False, add_generation_prompt=True)[-12:]
        )


def test_trajectory_keeps_ids_that_retokenization_would_change():
    tok = tokenizer("chatml")
    env = TokenObservation(LadderEnv(), tok)
    _, _, info = play(env, tok)
    traj = info["trajectory"]
    retokenized = tok.encode(render(tok, env), add_special_tokens=False)
    assert retokenized != traj.token_ids.tolist()  # the drift the wrapper avoids
    assert decode(tok, retokenized) == decode(tok, traj.token_ids)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_malformed_sampled_ids_are_kept_verbatim(data):
    # Any ids: lone UTF-8 lead/continuation bytes, special tokens mid-turn, markup, stop or not.
    tok = tokenizer("tiny")
    env = TokenObservation(LadderEnv(max_turns=3), tok)
    env.reset(seed=data.draw(st.integers(0, 5)))
    ids_drawn, done = [], False
    while not done:
        ids = np.asarray(data.draw(st.lists(st.integers(0, len(tok) - 1), max_size=24)), np.int32)
        ids_drawn.append(ids)
        n = len(env.unwrapped.conversation)
        _, _, terminated, truncated, info = env.step(ids)
        done = terminated or truncated
        # The env reads the decoded text; only a final <|im_end|> (the turn's stop token) is left out.
        stop = ids.size and ids[-1] == tok.eos_token_id
        assert env.unwrapped.conversation[n]["content"] == decode(tok, ids[:-1] if stop else ids)
    traj = info["trajectory"]
    for (start, end), ids in zip(traj.turn_spans, ids_drawn, strict=True):
        np.testing.assert_array_equal(traj.token_ids[start:end], ids)
    assert int(traj.loss_mask.sum()) == sum(i.size for i in ids_drawn)
    assert decode(tok, traj.token_ids) == render(tok, env)


def test_non_prefix_preserving_template_is_named_with_the_fix():
    tok = tokenizer("think")
    with pytest.raises(TemplateError, match="prefix-preserving.*chat_template="):
        TokenObservation(LadderEnv(), tok)  # found at construction by a probe
    # The fix the error names: a template that keeps past turns verbatim.
    thinking = tok.encode("<think>plan</think>Hello", add_special_tokens=False) + [tok.eos_token_id]
    env = TokenObservation(LadderEnv(), tok, chat_template=CHATML_TEMPLATE)
    env.reset(seed=0)
    _, _, _, _, info = env.step(thinking)
    assert env.unwrapped.conversation[-2]["content"] == "<think>plan</think>Hello"


def test_per_step_check_catches_what_the_probe_cannot_see(monkeypatch):
    tok = tokenizer("think")
    monkeypatch.setattr(TokenObservation, "_probe", lambda self: None)
    env = TokenObservation(LadderEnv(), tok)
    env.reset(seed=0)
    env.step(tok.encode("no thinking", add_special_tokens=False) + [tok.eos_token_id])  # fine so far
    with pytest.raises(TemplateError, match="prefix-preserving.*chat_template="):
        env.step(tok.encode("<think>plan</think>Hello", add_special_tokens=False) + [tok.eos_token_id])


def test_template_that_rewrites_the_assistant_turn_is_rejected():
    tok = tokenizer("chatml")
    template = CHATML_TEMPLATE.replace("{{ m.content }}\n{%- for c", "{{ m.content | upper }}\n{%- for c")
    env = TokenObservation(LadderEnv(), tok, chat_template=template)
    env.reset(seed=0)
    with pytest.raises(TemplateError, match="verbatim"):
        env.step(tok.encode("hi", add_special_tokens=False))


def test_logprobs_travel_with_the_ids():
    tok = tokenizer("chatml")
    env = TokenObservation(LadderEnv(), tok)
    env.reset(seed=2)
    rng = np.random.default_rng(0)
    given_lps, done = [], False
    while not done:
        ids = sample(tok, as_text(env.unwrapped.oracle_action()), 0)
        lps = -rng.random(ids.size).astype(np.float32)
        given_lps.append(lps)
        _, _, terminated, truncated, info = env.step({"ids": ids, "logprobs": lps})
        done = terminated or truncated
    traj = info["trajectory"]
    expected = np.zeros(traj.token_ids.size, np.float32)
    for (start, end), lps in zip(traj.turn_spans, given_lps):
        expected[start:end] = lps
    np.testing.assert_array_equal(traj.logprobs, expected)


def test_logprobs_are_none_unless_every_turn_has_them():
    tok = tokenizer("chatml")
    env = TokenObservation(LadderEnv(), tok)
    env.reset(seed=2)  # n >= 2: at least three turns
    ids = sample(tok, as_text(env.unwrapped.oracle_action()), 0)
    env.step({"ids": ids, "logprobs": np.zeros(ids.size)})
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(as_text(env.unwrapped.oracle_action()))
        done = terminated or truncated
    assert info["trajectory"].logprobs is None
    assert info["success"]  # text actions are tokenized once and count as policy tokens


@pytest.mark.parametrize("kind", TEMPLATES)
def test_assistant_message_actions_are_rendered_by_the_template(kind):
    # Policies that return OpenAI messages (an endpoint, the oracle) still give exact trajectories.
    tok = tokenizer(kind)
    env = TokenObservation(LadderEnv(), tok)
    env.reset(seed=2)
    call = {"id": "c", "type": "function", "function": {"name": "step_up", "arguments": "{}"}}
    env.step({"role": "assistant", "content": "", "tool_calls": [call]})
    _, reward, terminated, _, info = env.step({"role": "assistant", "content": "Climbing.", "tool_calls": [call] * 3})
    assert env.unwrapped.rung == 4 and not terminated
    _, reward, terminated, _, info = env.step({"role": "assistant", "content": "<answer>4</answer>"})
    assert reward == 1.0 and terminated
    traj = info["trajectory"]
    assert decode(tok, traj.token_ids) == render(tok, env)
    assert env.unwrapped.conversation[2]["tool_calls"][0]["function"]["name"] == "step_up"
    for (start, end), m in zip(traj.turn_spans, [m for m in env.unwrapped.conversation if m["role"] == "assistant"]):
        assert ("step_up" if m.get("tool_calls") else m["content"]) in decode(tok, traj.token_ids[start:end])


@pytest.mark.parametrize("kind", ["chatml", "tiny"])  # tiny: the byte codec's decoding is the range check
@pytest.mark.parametrize(
    "action",
    [np.zeros((2, 2), np.int32), [0.5, 1.5], [-1], [10**9], None, {"ids": [1, 2], "logprobs": [0.0]},
     [65, 2**32 + 65], np.asarray([65, -1], np.int64), [65, 10**9, 258],
     [True, False], [65.0, 66.0], ["a"], [65, None], [np.float64(65)], [65, 2**31]],
)  # fmt: skip
def test_bad_token_actions_raise(kind, action):
    env = TokenObservation(LadderEnv(), tokenizer(kind))
    env.reset(seed=0)
    with pytest.raises(InvalidAction):
        env.step(action)


@pytest.mark.parametrize("kind", ["chatml", "tiny"])
@pytest.mark.parametrize("action", [[65, 66], [np.int64(65), np.int32(66)], [True, 66], [], [65, 258, 2]])
def test_a_list_action_gives_the_ids_of_its_array(kind, action):
    # A list of ints is read without numpy (an array("i")): the same ids as np.asarray's.
    envs = [TokenObservation(LadderEnv(), tokenizer(kind)) for _ in range(2)]
    for env in envs:
        env.reset(seed=0)
    listed, arrayed = envs[0].step(list(action)), envs[1].step(np.asarray(action, np.int64))
    assert listed[0].dtype == np.int32 and listed[0].flags.writeable
    assert listed[0].tolist() == arrayed[0].tolist() and listed[1:4] == arrayed[1:4]


def test_step_after_the_end_raises_and_reset_starts_clean():
    tok = tokenizer("tiny")
    env = TokenObservation(LadderEnv(), tok)
    with pytest.raises(ResetNeeded):
        env.step([1])
    first, _ = env.reset(seed=4)
    play(env, tok)
    with pytest.raises(ResetNeeded):
        env.step([1])
    env.reset(seed=0)
    env.step(tok.encode("hello", add_special_tokens=False))
    again, _ = env.reset(seed=4)  # mid-episode reset: nothing of the old context survives
    np.testing.assert_array_equal(again, first)


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
def test_passes_gymnasium_check_env():
    check_env(TokenObservation(LadderEnv(), tokenizer("chatml")), skip_render_check=True)


def test_needs_a_chat_template():
    tok = tokenizer("chatml")
    bare = type(tok)(tokenizer_object=tok.backend_tokenizer)
    with pytest.raises(TemplateError, match="no chat template"):
        TokenObservation(LadderEnv(), bare)


def test_a_sampled_turn_cut_without_a_stop_token_ends_as_length():
    tok = tokenizer("chatml")
    env = TokenObservation(gym.make("textgym/Sudoku-v0", size=4), tok)
    env.reset(seed=0)
    wrong = np.asarray(tok.encode("<answer>\n1111\n1111\n1111\n1111\n</answer>", add_special_tokens=False), np.int32)
    assert env.step(np.append(wrong, tok.eos_token_id))[4]["end_reason"] == "failure"  # stopped: its own answer
    env.reset(seed=0)
    assert env.step(wrong)[4]["end_reason"] == "length"  # no stop token: max_new_tokens cut it
    env.reset(seed=0)
    answer = np.asarray(tok.encode(as_text(env.unwrapped.oracle_action()), add_special_tokens=False), np.int32)
    assert env.step(answer)[4]["end_reason"] == "success"  # a solve is a solve
