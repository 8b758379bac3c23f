"""textgym envs for TRL's ``GRPOTrainer(environment_factory=...)`` (TRL >= 1.16; Unsloth uses the same).

TRL instantiates the factory's class once per generation, calls ``reset(**row)`` with the
dataset row, offers the instance's public methods to the model as tools, and scores the rollout
with ``get_reward()``. This module builds that class from an env id: one method per env tool,
named as the tool, with its typed arguments and a Google-style docstring (TRL reads them into the
tool schemas), each method one env step with that single tool call::

    from trl import GRPOConfig, GRPOTrainer
    from textgym.integrations.trl import environment_factory, reward_func, seed_dataset

    trainer = GRPOTrainer(
        model=..., args=GRPOConfig(num_generations=8, ...),
        train_dataset=seed_dataset("textgym/Sudoku-v0", range(1000)),
        environment_factory=environment_factory("textgym/Sudoku-v0"),
        reward_funcs=reward_func,
    )

TRL never hands the model's final text (the turn without a tool call) to the environment, so a
Sudoku ``<answer>`` or a Code submission would go unverified: :func:`reward_func` delivers it
before ``get_reward()`` runs (TRL calls the reward functions in order, the env's last) and adds
nothing itself (it returns None, which TRL leaves out of the sum).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

import gymnasium as gym

from textgym.messages import thaw
from textgym.parsing import ToolCall
from textgym.tools import Tool

_TYPES = {"integer": int, "number": float, "string": str, "boolean": bool, "array": list, "object": dict}


class TextGymTRLEnv:
    """Base of the factory's classes: one env episode per generation (see :func:`environment_factory`)."""

    env_id: str = ""
    env_kwargs: dict[str, Any] = {}

    def __init__(self) -> None:
        self._env = gym.make(self.env_id, **self.env_kwargs)
        self._conversation: tuple = ()
        self._reward = 0.0
        self._done = True

    def reset(self, **row: Any) -> str | None:
        """Start the episode of a dataset row: its ``seed``, or a pinned ``task`` (a task dict).

        Returns the opening messages' text for TRL to append to the row's prompt, or None when
        the row's ``prompt`` already holds them (the rows of :func:`seed_dataset`).
        """
        options = {"task": row["task"]} if row.get("task") is not None else None
        seed = row.get("seed")
        self._conversation, _ = self._env.reset(seed=None if seed is None else int(seed), options=options)
        self._reward, self._done = 0.0, False
        opening = thaw(list(self._conversation))
        if row.get("prompt") == opening:
            return None
        return "\n\n".join(m["content"] for m in opening)

    def get_reward(self) -> float:
        """The episode's reward: the sum of what the env gave (an unfinished episode: so far)."""
        return float(self._reward)

    def _step(self, action: Any) -> str:
        if self._done:
            return "Error: the episode has ended; nothing was changed."
        before = len(self._conversation)
        self._conversation, reward, terminated, truncated, _ = self._env.step(action)
        self._reward += float(reward)
        self._done = bool(terminated or truncated)
        replies = self._conversation[before + 1 :]  # after the assistant's own message
        return "\n\n".join(m["content"] for m in replies)

    def _call_tool(self, name: str, arguments: Mapping[str, Any]) -> str:
        call = ToolCall(f"call_{len(self._conversation)}", name, dict(arguments))
        return self._step({"role": "assistant", "content": "", "tool_calls": [call.to_openai()]})

    def _finish(self, text: str) -> None:
        """Hand the model's final text to the env (a no-op once the episode is over)."""
        if not self._done:
            self._step(text)
            self._done = True


def environment_factory(env_id: str, **env_kwargs: Any) -> type[TextGymTRLEnv]:
    """The zero-argument class that ``GRPOTrainer(environment_factory=...)`` instantiates.

    Args:
        env_id: A registered textgym id; ``textgym/Remote-v0`` plays a served env (its
            ``url=`` and ``token=`` in ``env_kwargs``), answered in text, without tool methods.
        **env_kwargs: Passed to ``gym.make`` for every instance (e.g. ``max_turns``: each tool
            call is one env turn).

    Returns:
        A :class:`TextGymTRLEnv` subclass with one public method per env tool.
    """
    probe = gym.make(env_id, **env_kwargs)
    toolset = getattr(probe.unwrapped, "tools", None)  # a served env (textgym/Remote-v0): answers only
    probe.close()
    namespace: dict[str, Any] = {
        "env_id": env_id,
        "env_kwargs": dict(env_kwargs),
        "__module__": __name__,
        "__doc__": f"{env_id} for TRL's environment_factory: one episode per generation.",
    }
    for tool in (toolset or {}).values():
        namespace[tool.name] = _tool_method(tool)
    name = env_id.split("/")[-1].split("-")[0] + "TRLEnv"
    return type(name, (TextGymTRLEnv,), namespace)


def _tool_method(tool: Tool):
    """A method named as the tool, with its typed signature and a Google-style docstring."""

    def method(self, **arguments: Any) -> str:
        return self._call_tool(tool.name, arguments)

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    lines = [tool.description or tool.name, "", "Args:"]
    for pname, schema in tool.parameters.items():
        hint = _TYPES[schema["type"]]
        if schema.get("nullable"):
            hint = Optional[hint]  # noqa: UP045 - transformers reads typing.Optional
        default = tool.defaults.get(pname, inspect.Parameter.empty)
        params.append(inspect.Parameter(pname, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=hint))
        annotations[pname] = hint
        description = schema.get("description") or pname.replace("_", " ")
        if "enum" in schema:
            description += f" (choices: {json.dumps(schema['enum'])})"
        lines.append(f"    {pname}: {description}")
    if not tool.parameters:
        lines = lines[:-2]
    lines += ["", "Returns:", "    The env's reply: the tool's result, then anything else the env says."]
    annotations["return"] = str
    method.__name__ = method.__qualname__ = tool.name
    method.__doc__ = "\n".join(lines)
    method.__annotations__ = annotations
    method.__signature__ = inspect.Signature(params, return_annotation=str)
    return method


def reward_func(completions: Sequence[Any], environments: Sequence[TextGymTRLEnv] | None = None, **_: Any) -> list[None]:
    """Deliver each completion's final text (its last turn, if it calls no tool) to its env.

    Pass it as ``reward_funcs`` next to the factory: the env's ``get_reward()`` then scores the
    whole episode. It returns None per completion, which TRL leaves out of the reward sum.
    """
    if environments is None:
        raise ValueError("reward_func needs TRL's environments: use it with GRPOTrainer(environment_factory=...)")
    for completion, env in zip(completions, environments, strict=True):
        text = _final_text(completion)
        if text is not None:
            env._finish(text)
    return [None] * len(completions)


def _final_text(completion: Any) -> str | None:
    if isinstance(completion, str):
        return completion
    last = completion[-1] if completion else None
    if not isinstance(last, Mapping) or last.get("role") != "assistant" or last.get("tool_calls"):
        return None
    content = last.get("content") or ""
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return content


def seed_dataset(env_id: str, seeds: Iterable[int], **env_kwargs: Any) -> Any:
    """A ``datasets.Dataset`` of ``{"prompt": the opening messages, "seed": s}`` rows.

    TRL repeats each row ``num_generations`` times; rows with one seed give every member of the
    GRPO group the same initial state (the env draws the task from the seed alone).
    """
    from textgym.error import require

    datasets = require("datasets", "datasets")
    env = gym.make(env_id, **env_kwargs)
    rows = []
    for seed in seeds:
        conversation, _ = env.reset(seed=int(seed))
        rows.append({"prompt": thaw(list(conversation)), "seed": int(seed)})
    env.close()
    return datasets.Dataset.from_list(rows)
