"""Code-v0: write Python that passes tests, with feedback on failures and an isolated sandbox."""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from textgym.env import Outcome, TextEnv
from textgym.envs.code.families import FAMILIES
from textgym.envs.code.formats import cached_task_from_dict, task_from_dict
from textgym.envs.code.generator import generate
from textgym.envs.code.variants import wrong_variant
from textgym.envs.code.verify import feedback, verify
from textgym.error import ResetNeeded
from textgym.messages import FrozenDict, system, user
from textgym.parsing import ParsedTurn
from textgym.sandbox import Limits, Sandbox, shared_sandbox
from textgym.state import typed
from textgym.tasks import Task

SYSTEM = (
    "You are an expert Python programmer. Solve the task and answer with the complete program in one "
    "```python code block. Your code runs in an isolated sandbox with only the standard library and no "
    "network; it is tested automatically."
)


class CodeEnv(TextEnv):
    """Write a Python program that passes the task's tests.

    **Prompt.** A system message, then the task: a generated problem (35 parameterised families,
    31 function and 4 stdin/stdout), or a loaded one in the function, stdin/stdout, HumanEval or
    MBPP format (see :mod:`textgym.envs.code.formats`).

    **Action.** The assistant's message; the code is its last fenced block (```python preferred)
    or, with no fence, the whole message. For HumanEval tasks the prompt is prepended, so either a
    full function or just its body works.

    **Tools.** None: ``<tool_call>`` in text is text of the submission; a dict action's
    ``tool_calls`` are answered with an error and use no attempt.

    **Reward.** 1.0 when every test passes, else 0.0; with ``reward="fraction"`` the fraction of
    tests the final submission passed. Given when the episode ends.

    **Episode end.** Terminated when all tests pass or after ``max_attempts`` submissions, or
    when the sandbox itself fails (``info["end_reason"] == "env_error"``, the verification's
    ``sandbox_error`` says how). After a
    failing one the agent sees the failing tests (input, expected, got, truncated) and a traceback
    trimmed to its own code. ``info["verification"]`` holds the per-test results of each
    submission; ``info["success"]`` is set at the end.

    **Options.** ``reset(options={"task": dict})`` pins a task in any of the four formats;
    ``{"task_index": i}`` picks one from ``tasks``.

    Args:
        tasks: JSONL path or list of task dicts; default: the procedural generator.
        max_attempts: Submissions per episode (default 3).
        reward: ``"binary"`` or ``"fraction"``.
        num_tests: Tests per generated problem.
        families: Restrict the generator to these family names.
        sandbox: A :class:`~textgym.sandbox.Sandbox` to run code in (default: one shared per
            process, with ``limits`` and ``backend``).
        backend: ``"auto"`` (bubblewrap; refuses to run without isolation) or ``"unsafe"``.
        limits: Per-submission resource limits.
        max_turns: Defaults to ``max_attempts``.

    Version history:
        v0: first release.
    """

    def __init__(
        self,
        *,
        tasks: Any = None,
        max_attempts: int = 3,
        reward: Literal["binary", "fraction"] = "binary",
        num_tests: int = 8,
        families: Sequence[str] | None = None,
        sandbox: Sandbox | None = None,
        backend: Literal["auto", "bwrap", "unsafe"] = "auto",
        limits: Limits | None = None,
        max_turns: int | None = None,
        max_action_chars: int = 32_768,
        render_mode: str | None = None,
    ):
        if int(max_attempts) < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        if reward not in ("binary", "fraction"):
            raise ValueError(f"reward must be 'binary' or 'fraction', got {reward!r}")
        unknown = sorted(set(families or ()) - set(FAMILIES))
        if unknown:
            raise ValueError(f"unknown families {unknown}; expected some of {sorted(FAMILIES)}")
        if int(num_tests) < 1:
            raise ValueError(f"num_tests must be >= 1, got {num_tests}")
        self.max_attempts = int(max_attempts)
        self.reward_mode = reward
        self.num_tests = int(num_tests)
        self.families = tuple(families) if families else None
        # Made (and checked) before anything else, so a machine without isolation fails here, clearly.
        self.sandbox = sandbox if sandbox is not None else shared_sandbox(limits, backend)
        super().__init__(tasks=tasks, max_turns=max_turns or self.max_attempts, max_action_chars=max_action_chars, render_mode=render_mode)
        self.attempts = 0
        self.last_verification: dict[str, Any] | None = None
        # The last task and its planned checks (see verify), held until another task begins, so
        # that pinning the same task again finds both in their caches (they keep tasks weakly).
        self._held: tuple[Task | None, dict[int, Any]] = (None, {})

    # ----- TextEnv hooks -----

    def generate_task(self, rng: np.random.Generator) -> Task:
        return task_from_dict(generate(rng, families=self.families, num_tests=self.num_tests))

    def task_from_dict(self, d: Mapping[str, Any]) -> Task:
        return cached_task_from_dict(d)

    def begin(self, task: Task) -> list[FrozenDict]:
        self.attempts = 0
        self.last_verification = None
        self._hold(task)
        return [system(SYSTEM), user(_statement(task))]

    def save_episode(self, blobs: list[bytes]) -> dict[str, Any]:
        """The submissions made so far and the last one's verification."""
        return {"attempts": self.attempts, "last_verification": self.last_verification}

    def load_episode(self, parts: dict[str, Any], blobs: list[bytes]) -> None:
        attempts, last = typed(parts, "attempts", int), typed(parts, "last_verification", (dict, type(None)))
        if not 0 <= attempts <= self.max_attempts or (attempts == 0) != (last is None):
            raise ValueError(f"{attempts} attempts (of {self.max_attempts}) with{'out' if last is None else ''} a verification")
        if not self._done and attempts == self.max_attempts:
            raise ValueError("a live episode with no attempt left")
        self.attempts, self.last_verification = attempts, last
        self._hold(self.task)  # not the plans of the task this env played before

    def _hold(self, task: Task) -> None:
        """Keep ``task``'s planned checks from now on (the ones held so far if it is the same task)."""
        if self._held[0] is not task:
            self._held = (task, {})

    def respond(self, turn: ParsedTurn) -> Outcome:
        code = turn.code if turn.code is not None else turn.text  # the parser already found the block
        self.attempts += 1
        result = verify(self.sandbox, self.task, code, self._held[1])
        self.last_verification = result
        if result["sandbox_error"]:
            text = f"The sandbox failed ({result['sandbox_error']}); this is not your program's fault. The episode is over."
            return Outcome([user(text)], terminated=True, success=False, verification=result, end_reason="env_error")
        solved = result["all_passed"]
        left = self.max_attempts - self.attempts
        if solved or left <= 0:
            fraction = result["passed"] / result["total"]
            reward = 1.0 if solved else (fraction if self.reward_mode == "fraction" else 0.0)
            text = "All tests passed." if solved else feedback(result, 0) + "\n\nNo attempts left."
            return Outcome([user(text)], reward=reward, terminated=True, success=solved, verification=result)
        return Outcome([user(feedback(result, left))])

    def verdict(self) -> tuple[bool, Any]:
        return False, self.last_verification or {"reason": "the episode was truncated before any submission"}

    def step(self, action: Any):
        """TextEnv's step, plus ``info["verification"]`` after every submission, not only the last."""
        attempts = self.attempts
        obs, reward, terminated, truncated, info = super().step(action)
        if "verification" not in info and self.attempts > attempts:
            info["verification"] = self.last_verification
        return obs, reward, terminated, truncated, info

    def oracle_action(self, *, noise: float = 0.0) -> str:
        """The task's reference solution in a fenced block (a harmless ``pass`` when it has none).

        ``noise=p`` makes a noisy demonstrator: with probability ``p`` its first attempt is a
        plausible wrong variant of the reference (a number of the statement miscopied, see
        :func:`~textgym.envs.code.variants.wrong_variant`), and after the failing-test feedback
        it submits the reference. The draw is seeded by the task, so a task always gets the same
        demonstration. Warm starts on it see what a second attempt is for, and leave
        reinforcement learning something to improve.
        """
        if self.task is None:
            raise ResetNeeded("call reset() before oracle_action()")
        solution = (self.task.answer or {}).get("solution") or "pass"
        if noise > 0 and self.attempts == 0:
            statement = str(self.task.data.get("prompt", ""))
            rng = np.random.default_rng(zlib.crc32(f"{statement}\0{solution}".encode()))
            if rng.random() < noise:
                solution = wrong_variant(solution, statement, rng)
        return f"```python\n{solution}\n```"


def _statement(task: Task) -> str:
    data = task.data
    fmt = data["format"]
    if fmt == "humaneval":
        return f"Complete the following Python function.\n\n```python\n{data['prompt'].rstrip()}\n```"
    if fmt == "stdio":
        return f"{data['prompt']}\n\nYour program reads standard input and writes standard output."
    if fmt == "mbpp":
        shown = "\n".join(data.get("shown_tests") or [])
        return f"{data['prompt']}\n\nYour code should pass these tests:\n```python\n{shown}\n```"
    prompt = data["prompt"]
    if f"`{data['entry_point']}" not in prompt and data["entry_point"] not in prompt:
        prompt += f"\n\nDefine the function `{data['entry_point']}`."
    return prompt
