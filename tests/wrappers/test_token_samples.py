"""on_template_break="new_sample": thinking models under a template that drops past reasoning.

The template below is written for these tests and treats reasoning as Qwen3's does: an assistant
turn keeps its ``<think>`` block only after the last user turn (and only with reasoning or as the
last message), so once a user turn follows, the earlier turns render without it.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import textgym  # noqa: F401  (registers the ids)
from textgym import messages as M
from textgym.env import Outcome, TextEnv
from textgym.error import TemplateError
from textgym.tasks import Task
from textgym.tokenizer import tiny_tokenizer
from textgym.wrappers import TokenObservation
from textgym.wrappers.token_samples import split_reasoning


def qwen3_like(thinking: bool) -> str:
    """ChatML that drops past ``<think>`` blocks as Qwen3's template does; without ``thinking``
    the generation prompt holds an empty think block (Qwen3's ``enable_thinking=False``)."""
    prompt = "<|im_start|>assistant\\n" + ("" if thinking else "<think>\\n\\n</think>\\n\\n")
    return (
        "{%- set ns = namespace(last_query=-1) -%}"
        "{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last_query = loop.index0 -%}{%- endif -%}"
        "{%- endfor -%}"
        "{%- for m in messages -%}"
        "{%- if m.role == 'assistant' -%}"
        "{%- set content = m.content -%}"
        "{%- set reasoning = m.reasoning_content if m.reasoning_content is defined and m.reasoning_content is not none"
        " else '' -%}"
        "{%- if '</think>' in content -%}"
        "{%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') -%}"
        "{%- set content = content.split('</think>')[-1].lstrip('\\n') -%}"
        "{%- endif -%}"
        "{%- if loop.index0 > ns.last_query and (loop.last or reasoning) -%}"
        "{{- '<|im_start|>assistant\\n<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') -}}"
        "{%- else -%}{{- '<|im_start|>assistant\\n' + content -}}{%- endif -%}"
        "{{- '<|im_end|>\\n' -}}"
        "{%- elif m.role == 'tool' -%}"
        "{{- '<|im_start|>user\\n<tool_response>\\n' + m.content + '\\n</tool_response><|im_end|>\\n' -}}"
        "{%- else -%}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' -}}{%- endif -%}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{- '" + prompt + "' -}}{%- endif -%}"
    )


class ThreeTurnEnv(TextEnv):
    """Three replies, each answered by a user turn; reward 1 when the last starts with a letter."""

    def __init__(self, **kwargs):
        super().__init__(max_turns=3, **kwargs)

    def generate_task(self, rng):
        return Task(f"three-{int(rng.integers(100))}", {}, None)

    def begin(self, task):
        return [M.user("Say something.")]

    def respond(self, turn):
        if self.turn < 2:
            return Outcome([M.user("again")])
        ok = turn.text[:1].isalpha()
        return Outcome([M.user("ok" if ok else "no")], float(ok), True, ok, {"text": turn.text})

    def oracle_action(self):
        return "x"


THREE_TURNS = "textgym-test/ThreeTurns-v0"
if THREE_TURNS not in gym.registry:
    gym.register(THREE_TURNS, entry_point=ThreeTurnEnv)


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def _reply(tok, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]


def check_samples(traj, tok, template_render) -> None:
    """Every sample starts with a prompt (mask 0) that is the template's rendering of the
    conversation so far, each policy turn lies inside one sample, and the mask is 1 exactly there."""
    spans = traj.sample_spans or ((0, traj.token_ids.size),)
    assert spans[0][0] == 0 and spans[-1][1] == traj.token_ids.size
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    expected = np.zeros(traj.token_ids.size, np.int8)
    for a, b in traj.turn_spans:
        expected[a:b] = 1
        assert sum(s <= a and b <= e for s, e in spans) == 1  # a turn never straddles a split
    assert np.array_equal(traj.loss_mask, expected)
    for start, _ in spans:
        assert traj.loss_mask[start] == 0  # a sample opens with its prompt
    for k, (start, _) in enumerate(spans[1:], 1):
        assert traj.turn_spans and any(b == start for _, b in traj.turn_spans)  # split right after a sampled turn
        # the new sample's prompt is the fresh rendering of everything up to that turn's env reply
        prompt_end = min(a for a, _ in traj.turn_spans if a >= start)
        assert tok.decode(traj.token_ids[start:prompt_end]) == template_render(k)


def test_raise_stays_the_default_and_names_the_other_mode(tok):
    with pytest.raises(TemplateError, match="new_sample"):
        TokenObservation(gym.make(THREE_TURNS), tok, chat_template=qwen3_like(True))
    with pytest.raises(ValueError, match="on_template_break"):
        TokenObservation(gym.make(THREE_TURNS), tok, on_template_break="skip")


def test_split_reasoning_as_qwen3():
    assert split_reasoning("<think>\na\n</think>\n\nb") == ("a", "b")
    assert split_reasoning("a</think>b") == ("a", "b")
    assert split_reasoning("plain") == (None, "plain")


def test_thinking_replies_split_at_user_turns_and_the_env_never_sees_reasoning(tok):
    template = qwen3_like(True)
    env = TokenObservation(gym.make(THREE_TURNS), tok, chat_template=template, on_template_break="new_sample")
    obs, _ = env.reset(seed=0)
    replies = [f"<think>\nplan {k}\n</think>\n\nword{k}" for k in range(3)]
    renders = []
    for k, reply in enumerate(replies):
        obs, reward, terminated, truncated, info = env.step(_reply(tok, reply))
        if not terminated:  # the observation is the new sample: the template's fresh rendering
            renders.append(tok.decode(obs))
            assert renders[-1] == tok.apply_chat_template(
                env.trajectory().messages, chat_template=template, tokenize=False, add_generation_prompt=True
            )
            assert f"plan {k}" not in renders[-1]  # dropped from the history, as the template does
    assert terminated and reward == 1.0
    sent = [m["content"] for m in env.unwrapped.conversation if m["role"] == "assistant"]
    assert sent == ["word0", "word1", "word2"]  # the env got every reply without its reasoning
    traj = info["trajectory"]
    kept = [m.get("reasoning_content") for m in traj.messages if m["role"] == "assistant"]
    assert kept == ["plan 0", "plan 1", "plan 2"]  # the record keeps it
    assert len(traj.sample_spans) == 3
    for (a, b), reply in zip(traj.turn_spans, replies):
        assert tok.decode(traj.token_ids[a:b]) == reply + "<|im_end|>"  # sampled ids verbatim
    check_samples(traj, tok, lambda k: renders[k - 1])


def test_tool_turns_after_the_last_user_turn_keep_reasoning_in_one_sample(tok):
    env = gym.make("textgym/Workplace-v0", max_turns=4)
    env = TokenObservation(env, tok, chat_template=qwen3_like(True), on_template_break="new_sample")
    env.reset(seed=3)
    call = env.unwrapped.oracle_action()["tool_calls"][0]["function"]
    text = f'<tool_call>{{"name": "{call["name"]}", "arguments": {call["arguments"]}}}</tool_call>'
    env.step(_reply(tok, "<think>\nI need the tool.\n</think>\n\n" + text))
    _, reward, terminated, _, info = env.step(_reply(tok, "<think>\nDone.\n</think>\n\nDone."))
    assert terminated and reward == 1.0
    traj = info["trajectory"]
    assert traj.sample_spans is None  # a tool reply is not a user turn: the template kept the reasoning
    assert env.unwrapped.conversation[2]["content"] == text


def test_without_thinking_every_user_turn_splits_and_text_actions_work(tok):
    template = qwen3_like(False)
    env = TokenObservation(gym.make(THREE_TURNS), tok, chat_template=template, on_template_break="new_sample")
    env.reset(seed=1)
    renders = []
    for k in range(3):
        obs, _, terminated, _, info = env.step(f"w{k}")  # text, as an endpoint gives
        if not terminated:
            renders.append(tok.decode(obs))
    traj = info["trajectory"]
    assert len(traj.sample_spans) == 3
    check_samples(traj, tok, lambda k: renders[k - 1])


torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from textgym.algos.models import tiny

    size = tiny.TinySize(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    path = tiny.create(tmp_path_factory.mktemp("tiny-thinking"), seed=0, size=size)
    (path / "chat_template.jinja").write_text(qwen3_like(False), encoding="utf-8")
    return path


def test_collect_with_a_model_splits_and_logprobs_are_recomputed_on_the_sampled_ids(model_dir):
    from textgym.algos import models
    from textgym.algos.grpo import GRPOConfig, pack
    from textgym.algos.rollouts.token_envs import token_venv
    from textgym.algos.torch import load_model
    from textgym.policies.model import ModelPolicy
    from textgym.rollout import collect

    tokenizer = models.load_tokenizer(model_dir)
    model = load_model(model_dir)
    venv = token_venv(THREE_TURNS, {}, tokenizer, None, 4, on_template_break="new_sample")
    try:
        rollouts = collect(venv, ModelPolicy(model, max_new_tokens=6, temperature=1.0, seed=0), seeds=[0, 1], group_size=2)
    finally:
        venv.close()
    assert all(r.sample_spans is not None and len(r.sample_spans) == 3 for r in rollouts)
    batch = pack(rollouts, GRPOConfig(group_size=2, max_length=512, micro_batch_size=4), pad_id=model.pad_id)
    assert batch.num_sequences == 12  # 4 episodes x 3 samples, each its own row
    per_episode = batch.advantages[:12].reshape(4, 3)
    assert np.all(per_episode == per_episode[:, :1])  # the samples of an episode share its advantage
    recomputed = model.logprobs(batch.input_ids, batch.attention_mask, temperature=1.0)
    trained = batch.loss_mask > 0
    assert trained.sum() == sum(int(r.loss_mask.sum()) for r in rollouts)
    np.testing.assert_allclose(recomputed[trained], batch.old_logprobs[trained], atol=1e-4)


def test_train_two_steps_with_split_samples(model_dir, tmp_path):
    from textgym.algos import train as train_module
    from textgym.algos.config import TrainConfig
    from textgym.algos.grpo import GRPOConfig
    from textgym.rollout import read_rollouts

    config = TrainConfig(
        env=THREE_TURNS, backend="torch", model=str(model_dir), chat_template="model", on_template_break="new_sample",
        output_dir=str(tmp_path / "run"), steps=2, prompts_per_step=2, num_envs=4, eval_episodes=2, eval_every=2,
        save_every=2, log_rollouts_every=1, progress=False, plot=False,
        grpo=GRPOConfig(group_size=2, lr=3e-3, max_new_tokens=4, max_length=256, micro_batch_size=4, seed=0),
    )  # fmt: skip
    summary = train_module.train(config)
    assert summary["steps"] == 2
    logged = read_rollouts(next((tmp_path / "run" / "rollouts").glob("*.jsonl")))
    assert logged and all(len(r.sample_spans) == 3 for r in logged)
