"""A small multi-turn env shared by the policy, eval and vector tests (not a test module).

``Countdown``: the secret ``n`` in [1, 20] must be confirmed with the ``check`` tool ``1 + n % 3``
times before ``<answer>n</answer>``, so oracle episodes last 2 to 4 turns and sub-envs of a
vector env finish at different steps. Tasks carry a ``category`` (``small``/``large``).
"""

from __future__ import annotations

import gymnasium as gym

from textgym import messages as M
from textgym.env import Outcome, TextEnv, tool_messages
from textgym.tasks import Task, task_id
from textgym.tools import Toolset

ENV_ID = "textgym-test/Countdown-v0"


class CountdownEnv(TextEnv):
    """Confirm a secret number with ``check`` a few times, then answer it."""

    def __init__(self, **kwargs):
        kwargs.setdefault("max_turns", 6)
        super().__init__(**kwargs)
        self._tools = Toolset([self.check])
        self.confirmed = 0

    def check(self, number: int, note: str | None = None) -> str:
        """Compare a guess with the secret.

        Args:
            number: The guess.
            note: Free text, ignored.
        """
        ok = number == self.task.answer
        self.confirmed += ok
        return "correct" if ok else "higher" if number < self.task.answer else "lower"

    @property
    def tools(self):
        return self._tools

    def needed(self) -> int:
        return 1 + self.task.answer % 3

    def generate_task(self, rng):
        n = int(rng.integers(1, 21))
        return Task(task_id("countdown", n), {"n": n}, n, {"category": "small" if n <= 10 else "large"})

    def task_from_dict(self, d):
        n = int(d["n"])
        return Task(task_id("countdown", n), {"n": n}, n, {"category": "small" if n <= 10 else "large"})

    def begin(self, task):
        self.confirmed = 0
        return [M.system("Countdown."), M.user("Find my number in [1, 20], confirm it, then answer.")]

    def respond(self, turn):
        if turn.answer is not None:
            ok = turn.answer == str(self.task.answer) and self.confirmed >= self.needed()
            return Outcome([M.user("Right!" if ok else "Wrong.")], float(ok), True, ok, {"expected": self.task.answer})
        messages, errors = tool_messages(self._tools, turn)
        if not messages:
            return Outcome([M.user("Call check or answer.")], error="no tool call or answer")
        return Outcome(messages, error="; ".join(errors) or None)

    def oracle_action(self):
        if self.task is None:
            return "<answer>0</answer>"
        if self.confirmed < self.needed():
            return f'<tool_call>{{"name": "check", "arguments": {{"number": {self.task.answer}}}}}</tool_call>'
        return f"<answer>{self.task.answer}</answer>"


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=CountdownEnv)
