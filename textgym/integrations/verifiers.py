"""textgym envs as verifiers environments (the classic API of verifiers 0.3.x).

verifiers (prime-rl's environment format) loads an environment from a module's
``load_environment(**kwargs)``, which returns a ``vf.Environment``; :func:`load_environment` is
that function for every textgym id::

    import verifiers as vf
    from textgym.integrations.verifiers import load_environment

    env = load_environment("textgym/Sudoku-v0", num_tasks=50, seed=0, size=4)
    client = vf.ClientConfig(api_base_url="http://127.0.0.1:8000/v1")  # any OpenAI-compatible server
    results = env.evaluate_sync(client=client, model="my-model")

The dataset holds one row per task seed; each rollout plays one episode of the textgym env: the
model's messages are the env's actions, the env's replies are the environment's responses, and
the episode's end (``terminated`` or ``truncated``) ends the rollout. The rubric's reward is the
env's reward; ``success`` and one ``end_reason_<reason>`` indicator per end reason are metrics.

The classic API is the target because verifiers 0.4.0 removed it (for ``verifiers.v1``) and pins
``mcp==2.0.0``, which breaks ``textgym mcp``; the extra is pinned to ``verifiers>=0.3,<0.4``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, get_args

import gymnasium as gym

import textgym  # noqa: F401 - registers the ids
from textgym.env import EndReason
from textgym.error import require
from textgym.messages import thaw

vf = require("verifiers", "verifiers")
datasets = require("datasets", "verifiers")  # a dependency of verifiers itself


def load_environment(env_id: str = "textgym/Sudoku-v0", num_tasks: int = 100, seed: int = 0, **env_kwargs: Any) -> TextGymEnv:
    """A verifiers environment of ``num_tasks`` tasks of ``env_id``, on seeds ``seed, seed + 1, ...``.

    Args:
        env_id: A registered textgym id, e.g. ``"textgym/Workplace-v0"``.
        num_tasks: Dataset rows, one task seed each.
        seed: The first task seed; the same seeds give the same tasks in any process.
        **env_kwargs: Keyword arguments for ``gym.make`` (``size=4``, ``max_turns=30``, ...).

    Returns:
        A :class:`TextGymEnv` (a ``vf.MultiTurnEnv``) whose dataset and eval dataset are the tasks.
    """
    if int(num_tasks) < 1:
        raise ValueError(f"num_tasks must be >= 1, got {num_tasks}")
    rows, tools = task_rows(env_id, range(int(seed), int(seed) + int(num_tasks)), **env_kwargs)
    dataset = datasets.Dataset.from_list(rows)
    return TextGymEnv(env_id, env_kwargs, dataset=dataset, tool_defs=tools)


def task_rows(env_id: str, seeds: Iterable[int], **env_kwargs: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One ``{"prompt", "info": {"seed", "task_id"}}`` row per seed, and the env's tools as ``vf.Tool`` dicts."""
    env = gym.make(env_id, **env_kwargs)
    rows, tools = [], []
    try:
        for s in seeds:
            conversation, info = env.reset(seed=int(s))
            rows.append({"prompt": thaw(list(conversation)), "info": {"seed": int(s), "task_id": str(info["task_id"])}})
            tools = [_tool_def(schema["function"]) for schema in info.get("tools") or ()]
    finally:
        env.close()
    return rows, tools


class TextGymEnv(vf.MultiTurnEnv):
    """One textgym episode per rollout (see the module docstring).

    The env's tools are the rollout's ``tool_defs``, which verifiers passes to the model as its
    ``tools``; a reply's native tool calls go to the env as OpenAI tool calls, its text as the
    env's text action (so ``<tool_call>`` blocks and answers parse exactly as in-process, and a
    malformed call comes back as the env's feedback). Env calls run in a worker thread, so a slow
    step (a Code-v0 submission in textgym's sandbox) does not hold up the other rollouts.
    """

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any], **kwargs: Any) -> None:
        self.gym_id = env_id
        self.gym_kwargs = dict(env_kwargs)
        kwargs.setdefault("eval_dataset", kwargs.get("dataset"))
        super().__init__(rubric=env_rubric(), env_args={"env_id": env_id, **self.gym_kwargs}, **kwargs)

    async def setup_state(self, state: Any) -> Any:
        env = await asyncio.to_thread(gym.make, self.gym_id, **self.gym_kwargs)
        conversation, _ = await asyncio.to_thread(env.reset, seed=int(state["info"]["seed"]))
        state["textgym_env"], state["textgym_conversation"], state["textgym_reward"] = env, conversation, 0.0
        return state

    async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> list[Any]:
        """Step the env with the model's last message; its replies are the environment's response."""
        reply = messages[-1]
        before = len(state["textgym_conversation"])
        conversation, reward, terminated, truncated, info = await asyncio.to_thread(state["textgym_env"].step, to_action(reply))
        state["textgym_conversation"] = conversation
        state["textgym_reward"] += float(reward)
        native_ids = [call.id for call in reply.tool_calls or ()]
        response = to_verifiers(conversation[before + 1 :], native_ids, info.get("error"))  # after the assistant's own message
        if terminated or truncated:
            state["end_reason"] = info.get("end_reason")
            state["textgym"] = {
                "reward": state["textgym_reward"],
                "success": bool(info.get("success")),
                "end_reason": info.get("end_reason"),
                "task_id": info.get("task_id"),
                "verification": thaw(info.get("verification")),
            }
            state["final_env_response"] = response
        return response

    @vf.cleanup
    async def close_textgym_env(self, state: Any) -> None:
        env = state.pop("textgym_env", None)
        state.pop("textgym_conversation", None)
        if env is not None:
            await asyncio.to_thread(env.close)


def env_rubric() -> Any:
    """Reward: the env's episode reward. Metrics: ``success`` and an indicator per end reason."""
    rubric = vf.Rubric(funcs=[reward], weights=[1.0])
    rubric.add_metric(success)
    for reason in get_args(EndReason):
        rubric.add_metric(_end_reason_indicator(reason))
    return rubric


def reward(state: Any) -> float:
    """The sum of the env's rewards in the episode (so far, for a rollout that verifiers ended)."""
    return float(state.get("textgym_reward", 0.0))


def success(state: Any) -> float:
    """1.0 when the env's verifier said the task was done."""
    return float(bool((state.get("textgym") or {}).get("success")))


def _end_reason_indicator(reason: str):
    def indicator(state: Any) -> float:
        return float(state.get("end_reason") == reason)

    indicator.__name__ = f"end_reason_{reason}"
    indicator.__doc__ = f"1.0 when the episode ended with end_reason {reason!r}."
    return indicator


def to_action(message: Any) -> dict[str, Any]:
    """A verifiers assistant message as the env's action (an OpenAI assistant message dict)."""
    calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in message.tool_calls or ()]
    return {"role": "assistant", "content": _text(message.content), **({"tool_calls": calls} if calls else {})}


def to_verifiers(messages: Sequence[Mapping[str, Any]], native_ids: Sequence[str], error: str | None = None) -> list[Any]:
    """The env's reply messages as verifiers', in the order chat APIs accept after a turn with
    native tool calls: a tool message for every one of those calls first, then the rest.

    A call the env could not run (malformed arguments) gets the env's feedback as its tool
    message: its first user message when it answered no call at all, else its ``info["error"]``.
    A tool result whose call the model wrote in its text (a ``<tool_call>`` block) becomes a user
    message: chat APIs refuse tool messages that answer no call.
    """
    answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"} & set(native_ids)
    unanswered = [i for i in native_ids if i not in answered]
    tools: list[Any] = []
    rest: list[Any] = []
    for m in messages:
        role, content = m["role"], m["content"]
        if role == "tool" and m.get("tool_call_id") in answered:
            tools.append(vf.ToolMessage(content=content, tool_call_id=m["tool_call_id"]))
        elif role == "tool":
            rest.append(vf.UserMessage(content=f"Result of {m.get('name')}: {content}"))
        elif role == "user" and unanswered and not answered:
            tools.extend(vf.ToolMessage(content=content, tool_call_id=i) for i in unanswered)
            unanswered = []
        elif role == "system":
            rest.append(vf.SystemMessage(content=content))
        else:
            rest.append(vf.UserMessage(content=content))
    tools.extend(vf.ToolMessage(content=error or "This call was not run.", tool_call_id=i) for i in unanswered)
    return tools + rest


def _text(content: Any) -> str:
    """Message content as text: a str, None, or a list of content parts."""
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(getattr(part, "text", None) or (part.get("text", "") if isinstance(part, Mapping) else "") for part in content)


def _tool_def(function: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI function schema as verifiers' provider-neutral tool definition."""
    return {
        "name": function["name"],
        "description": function.get("description") or function["name"],
        "parameters": thaw(function["parameters"]),
    }
