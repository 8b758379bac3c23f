"""textgym envs as Inspect AI tasks: ``task(env_id, ...)`` and ``inspect eval textgym/env``.

:func:`task` returns an Inspect ``Task``: a dataset of seeds (one sample per episode), a solver
that plays the env turn by turn with the model under evaluation (its tool calls are the env's
tool calls, its text the plain turns), and a scorer that is the env's reward. Any Inspect model
runs it::

    inspect eval textgym/env -T env_id=textgym/Sudoku-v0 -T episodes=20 -T size=4 --model openai/gpt-4o

(``textgym/env`` is registered through the ``inspect_ai`` entry point when textgym is installed;
``-T`` arguments other than ``env_id``, ``episodes`` and ``seed`` are the env's keyword arguments.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from textgym.arguments import check_env_ids, make_env
from textgym.error import TextGymError, require
from textgym.messages import thaw

require("inspect_ai", "inspect")

from inspect_ai import Task  # noqa: E402
from inspect_ai import task as inspect_task  # noqa: E402
from inspect_ai.dataset import MemoryDataset, Sample  # noqa: E402
from inspect_ai.model import (  # noqa: E402
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    get_model,
)
from inspect_ai.scorer import Score, Target, mean, scorer, stderr  # noqa: E402
from inspect_ai.solver import Generate, TaskState, solver  # noqa: E402
from inspect_ai.tool import ToolCall, ToolInfo, ToolParams  # noqa: E402


def task(env_id: str, episodes: int = 10, seed: int = 0, **env_kwargs: Any) -> Task:
    """An Inspect task of ``episodes`` episodes of ``env_id``, on seeds ``seed, seed + 1, ...``.

    Args:
        env_id: A registered id, e.g. ``"textgym/Workplace-v0"``.
        episodes: Samples in the dataset, one episode each.
        seed: The first task seed.
        **env_kwargs: Keyword arguments for ``gym.make`` (``size=4``, ``max_turns=30``, ...).

    Returns:
        A ``Task`` whose score per sample is the episode's total reward (``mean`` and ``stderr``
        over samples); each score's metadata holds ``success``, ``end_reason`` and ``verification``.
    """
    if int(episodes) < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    _check_id(env_id)
    env = make_env(env_id, **env_kwargs)
    samples = []
    for s in range(int(seed), int(seed) + int(episodes)):
        obs, info = env.reset(seed=s)
        samples.append(Sample(input=to_inspect(obs), id=f"seed-{s}", metadata={"seed": s, "task_id": info["task_id"]}))
    env.close()
    name = env_id.split("/")[-1]
    return Task(
        dataset=MemoryDataset(samples, name=name),
        solver=play_env(env_id, env_kwargs),
        scorer=env_reward(),
        name=name,
        metadata={"env_id": env_id, "env_kwargs": env_kwargs},
    )


@inspect_task
def env(env_id: str = "textgym/Sudoku-v0", episodes: int = 10, seed: int = 0, **env_kwargs: Any) -> Task:
    """Any textgym env for ``inspect eval textgym/env -T env_id=... -T episodes=...``."""
    return task(env_id, episodes=episodes, seed=seed, **env_kwargs)


@solver
def play_env(env_id: str, env_kwargs: Mapping[str, Any] | None = None):
    """Play one episode per sample: reset with the sample's seed, then each turn the model's
    reply (its tool calls and text) is the env's action and the env's reply the next input."""

    _check_id(env_id)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        env = make_env(env_id, **dict(env_kwargs or {}))
        try:
            obs, info = env.reset(seed=state.metadata["seed"])
            state.messages = to_inspect(obs)
            tools = [_tool_info(s["function"]) for s in info["tools"]]
            model, total = get_model(), 0.0
            while not state.completed:
                output = await model.generate(state.messages, tools=tools)
                state.output = output
                reply = output.message
                state.messages.append(reply)
                obs, reward, terminated, truncated, info = env.step(to_action(reply))
                total += float(reward)
                shown = obs[len(obs) - _env_reply_length(obs) :]
                state.messages.extend(to_inspect(shown, answered_ids=_ids(reply)))
                if terminated or truncated:
                    state.metadata["textgym"] = {
                        "reward": total,
                        "success": bool(info.get("success")),
                        "end_reason": info.get("end_reason"),
                        "verification": thaw(info.get("verification")),
                    }
                    break
        finally:
            env.close()
        return state

    return solve


def _check_id(env_id: str) -> None:
    """Refuse an id that is not a registered textgym env before anything is imported or built
    (``gym.make`` would import a ``module:Env`` id's module; a Gymnasium env plays no chat)."""
    from textgym.registration import ENVS

    check_env_ids(env_id)
    if env_id not in {e.id for e in ENVS}:
        raise TextGymError(f"{env_id!r} is not a textgym env (its episodes are not chats); textgym ids: {', '.join(e.id for e in ENVS)}")


@scorer(metrics=[mean(), stderr()])
def env_reward():
    """The env's reward for the episode (0 when the episode did not end, e.g. a message limit)."""

    async def score(state: TaskState, target: Target) -> Score:
        result = state.metadata.get("textgym")
        if result is None:
            return Score(value=0.0, explanation="the episode did not end (an Inspect limit stopped it)")
        verification = result["verification"]
        reason = verification.get("reason") if isinstance(verification, Mapping) else None
        return Score(value=result["reward"], answer=state.output.completion, explanation=reason, metadata=result)

    return score


def to_inspect(messages: Sequence[Mapping[str, Any]], answered_ids: set[str] | None = None) -> list[ChatMessage]:
    """textgym chat messages as Inspect's. A tool result whose call the model did not make as a
    tool call (it wrote ``<tool_call>`` in its text) becomes a user message: providers refuse
    tool messages that answer no call."""
    out: list[ChatMessage] = []
    for m in messages:
        role, content = m["role"], m["content"]
        if role == "system":
            out.append(ChatMessageSystem(content=content))
        elif role == "user":
            out.append(ChatMessageUser(content=content))
        elif role == "assistant":
            calls = [_tool_call(c) for c in m.get("tool_calls") or ()]
            out.append(ChatMessageAssistant(content=content, tool_calls=calls or None))
        elif answered_ids is None or m["tool_call_id"] in answered_ids:
            out.append(ChatMessageTool(content=content, tool_call_id=m["tool_call_id"], function=m.get("name")))
        else:
            out.append(ChatMessageUser(content=f"Result of {m.get('name')}: {content}"))
    return out


def to_action(message: ChatMessageAssistant) -> dict[str, Any]:
    """An Inspect assistant message as the env's action (an OpenAI assistant message dict)."""
    calls = [
        {"id": c.id, "type": "function", "function": {"name": c.function, "arguments": json.dumps(c.arguments)}}
        for c in message.tool_calls or ()
    ]
    return {"role": "assistant", "content": message.text, **({"tool_calls": calls} if calls else {})}


def _env_reply_length(obs: Sequence[Mapping[str, Any]]) -> int:
    """How many messages the env appended after the agent's last turn."""
    for back, m in enumerate(reversed(obs)):
        if m["role"] == "assistant":
            return back
    return 0


def _ids(message: ChatMessageAssistant) -> set[str]:
    return {c.id for c in message.tool_calls or ()}


def _tool_call(call: Mapping[str, Any]) -> ToolCall:
    fn = call["function"]
    try:
        arguments = json.loads(fn["arguments"]) if isinstance(fn["arguments"], str) else dict(fn["arguments"])
    except ValueError:
        arguments = {}
    return ToolCall(id=call["id"], function=fn["name"], arguments=arguments if isinstance(arguments, dict) else {})


def _tool_info(function: Mapping[str, Any]) -> ToolInfo:
    return ToolInfo(
        name=function["name"],
        description=function.get("description") or function["name"],
        parameters=ToolParams.model_validate(thaw(function["parameters"])),
    )
