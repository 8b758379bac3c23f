"""textgym envs as Inspect AI tasks, run by Inspect's own eval loop with Inspect's mock model."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import gymnasium as gym
import pytest

pytest.importorskip("inspect_ai")
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelOutput, get_model
from inspect_ai.model._providers.mockllm import MockLLM
from inspect_ai.tool import ToolCall

import textgym  # noqa: F401  (registers the ids)
from textgym.integrations.inspect import task

OFFLINE = os.path.join(os.path.dirname(__file__), "offline_inspect")


@pytest.fixture(autouse=True)
def offline_token_count(monkeypatch):
    """Inspect's mock model counts tokens with tiktoken's encoding, a download this machine
    cannot make: a token per 4 characters instead (as ``offline_inspect/sitecustomize.py`` does
    for the ``inspect eval`` subprocess)."""

    async def count_text_tokens(self, text: str) -> int:
        return max(1, len(text) // 4)

    monkeypatch.setattr(MockLLM, "count_text_tokens", count_text_tokens)


def _oracle_outputs(env_id: str, seeds, **env_kwargs) -> dict[str, list[ModelOutput]]:
    """The oracle's turns per episode, keyed by the task's user message, as model outputs."""
    env = gym.make(env_id, **env_kwargs).unwrapped
    by_task = {}
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        turns, done = [], False
        while not done:
            action = env.oracle_action()
            turns.append(_as_output(action))
            _, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
        by_task[obs[1]["content"]] = turns
    return by_task


def _as_output(action) -> ModelOutput:
    if isinstance(action, str):
        return ModelOutput.from_content(model="mockllm", content=action)
    calls = [
        ToolCall(id=f"oracle_{i}", function=c["function"]["name"], arguments=json.loads(c["function"]["arguments"]))
        for i, c in enumerate(action["tool_calls"])
    ]
    message = ChatMessageAssistant(content=action.get("content") or "", tool_calls=calls, model="mockllm")
    return ModelOutput(model="mockllm", choices=[ChatCompletionChoice(message=message, stop_reason="tool_calls")])


def _oracle_model(by_task):
    """A model whose reply is the oracle's for the conversation it is shown (its turn number)."""

    def reply(messages, tools, tool_choice, config):
        task_text = next(m.text for m in messages if m.role == "user")
        return by_task[task_text][sum(m.role == "assistant" for m in messages)]

    return get_model("mockllm/model", custom_outputs=reply)


@pytest.mark.parametrize(
    "env_id,kwargs",
    [("textgym/Workplace-v0", {}), ("textgym/Sudoku-v0", {"size": 4}), ("textgym/Code-v0", {"max_attempts": 2})],
)
def test_a_model_replying_as_the_oracle_scores_one(env_id, kwargs, tmp_path):
    seeds = [3, 4]
    model = _oracle_model(_oracle_outputs(env_id, seeds, **kwargs))
    [log] = inspect_eval(task(env_id, episodes=2, seed=3, **kwargs), model=model, log_dir=str(tmp_path), display="none")
    assert log.status == "success"
    assert log.results.scores[0].metrics["mean"].value == 1.0
    sample = log.samples[0]
    assert sample.scores["env_reward"].metadata["success"] is True
    if env_id == "textgym/Workplace-v0":  # the oracle's tool calls went through as tool calls
        tool_messages = [m for m in sample.messages if m.role == "tool"]
        assert tool_messages and all(m.tool_call_id.startswith("oracle_") for m in tool_messages)


def test_inspects_mock_model_plays_and_scores_zero(tmp_path):
    [log] = inspect_eval(
        task("textgym/Workplace-v0", episodes=2, seed=3, max_turns=3), model="mockllm/model", log_dir=str(tmp_path), display="none"
    )
    assert log.status == "success" and log.results.scores[0].metrics["mean"].value == 0.0
    sample = log.samples[0]
    assert sample.metadata["seed"] == 3 and sample.scores["env_reward"].metadata["end_reason"] == "failure"
    assert [m.role for m in sample.messages] == ["system", "user", "assistant", "user"]  # a final answer ends it


@pytest.mark.slow  # ~35 s: a fresh Inspect process
def test_inspect_eval_command_runs_the_registered_task(tmp_path):
    out = subprocess.run(  # `python -m inspect_ai` is the `inspect` command
        [sys.executable, "-m", "inspect_ai", "eval", "textgym/env", "-T", "env_id=textgym/Sudoku-v0", "-T", "episodes=1", "-T", "size=4",
         "-T", "max_turns=2", "--model", "mockllm/model", "--log-dir", str(tmp_path), "--display", "none"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": OFFLINE},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert any(name.endswith(".eval") for name in os.listdir(tmp_path))


def test_bad_arguments():
    with pytest.raises(ValueError, match="episodes"):
        task("textgym/Sudoku-v0", episodes=0)


def test_an_id_that_is_not_a_textgym_env_is_a_clear_error():
    from textgym.error import TextGymError

    with pytest.raises(TextGymError, match="not a textgym env"):
        task("CartPole-v1")


def test_a_module_id_is_refused_without_importing_the_module(tmp_path, monkeypatch):
    from textgym.error import TextGymError

    (tmp_path / "planted_module.py").write_text("raise SystemExit('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TextGymError, match="unknown environment id"):
        task("planted_module:Env-v0")
    assert "planted_module" not in sys.modules
