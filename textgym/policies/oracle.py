"""The oracle policy: each env's own ``oracle_action()``, the upper bound of a reward profile."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

from textgym.policies.base import PolicyOutput


class OraclePolicy:
    """Ask every sub-env for the action of a policy that knows the answer.

    The oracle reads the env's hidden state, so it is bound to one env or vector env rather than
    to observations: a vector env is asked through ``venv.call("oracle_action")`` (which works
    across processes and Ray actors), a single env through ``env.unwrapped.oracle_action()``.
    Envs answer at any time after reset, also for a sub-env waiting for its autoreset.

    Args:
        venv: A ``gymnasium.vector.VectorEnv`` (sync, async, Ray) or a single ``gymnasium.Env``.

    Example:
        >>> import gymnasium as gym, textgym
        >>> venv = gym.make_vec("textgym/Sudoku-v0", num_envs=4, size=4)
        >>> obs, infos = venv.reset(seed=0)
        >>> actions = OraclePolicy(venv).act(obs).actions
        >>> obs, rewards, terminated, truncated, infos = venv.step(actions)
        >>> rewards.tolist()
        [1.0, 1.0, 1.0, 1.0]
        >>> venv.close()
    """

    def __init__(self, venv: gym.Env | gym.vector.VectorEnv):
        if not isinstance(venv, (gym.Env, gym.vector.VectorEnv)):
            raise TypeError(f"expected a gymnasium Env or VectorEnv, got {type(venv).__name__}")
        self.venv = venv

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]] | None = None) -> PolicyOutput:
        if isinstance(self.venv, gym.vector.VectorEnv):
            # Vector wrappers do not forward ``call``; the base vector env always has it.
            actions = list(self.venv.unwrapped.call("oracle_action"))
        else:
            actions = [self.venv.unwrapped.oracle_action()]
        if len(actions) != len(observations):
            raise ValueError(
                f"the oracle is bound to {len(actions)} env(s) but got {len(observations)} observations; "
                "pass the batch of the env it was made with"
            )
        return PolicyOutput(actions)
