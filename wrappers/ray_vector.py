"""A vector env whose sub-envs live in Ray actors, across the cores of one machine or a cluster.

Gymnasium's async vector env stops at one machine; environments whose steps are expensive (code
sandboxes, databases) or numerous scale further as Ray actors. :class:`RayVectorEnv` keeps the
``gymnasium.vector.VectorEnv`` API exactly (per-env seeds, the three autoreset modes,
``call``/``get_attr``/``set_attr``), so ``textgym.rollout.collect``, the policies and the trainers
use it unchanged. ``ray`` is imported only when one is made (``pip install 'textgym[ray]'``).

An actor that dies (its node is lost, it is killed, it runs out of memory) is replaced by a new one
made with the same env functions. The episodes it was playing are gone: a ``step`` reports them as
ended (``terminated``, reward 0, ``info["end_reason"] == "env_error"``), which the trainers mask
out of the loss, and the new actor's sub-envs start fresh at their next reset (the next step, with
autoreset). ``replaced_actors`` counts the replacements.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from textgym.error import TextGymError, require


def make_env(env_id: str, kwargs: dict[str, Any], wrappers: Sequence[Callable[[gym.Env], gym.Env]] = ()) -> gym.Env:
    """``gym.make`` inside a Ray worker (importing this module there registered textgym's ids),
    then ``wrappers`` in order, as ``gym.make_vec``'s ``wrappers``."""
    env = gym.make(env_id, **kwargs)
    for wrap in wrappers:
        env = wrap(env)
    return env


class EnvShard:
    """Several sub-envs in one Ray actor, stepped in a loop with Gymnasium's autoreset rules.

    One actor per sub-env is the most parallel; a few envs per actor saves processes when steps
    are cheap (each actor is a Python process).
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], autoreset_mode: AutoresetMode):
        self.envs = [fn() for fn in env_fns]
        self.autoreset_mode = autoreset_mode
        self.needs_reset = [False] * len(self.envs)

    def spaces(self) -> tuple[gym.Space, gym.Space, dict[str, Any], str | None]:
        env = self.envs[0]
        return env.observation_space, env.action_space, dict(env.metadata), env.render_mode

    def reset(self, seeds: Sequence[int | None], options: dict[str, Any] | None, mask: Sequence[bool]):
        results = []
        for i, (env, seed, on) in enumerate(zip(self.envs, seeds, mask)):
            if on:
                self.needs_reset[i] = False
                results.append(env.reset(seed=seed, options=options))
            else:
                results.append(None)
        return results

    def step(self, actions: Sequence[Any]):
        results = []
        for i, (env, action) in enumerate(zip(self.envs, actions)):
            if self.autoreset_mode == AutoresetMode.NEXT_STEP and self.needs_reset[i]:
                obs, info = env.reset()
                result = (obs, 0.0, False, False, info)
            else:
                if self.autoreset_mode == AutoresetMode.DISABLED and self.needs_reset[i]:
                    raise gym.error.ResetNeeded(f"sub-env {i} of this shard ended; reset it (autoreset is disabled)")
                result = env.step(action)
                if self.autoreset_mode == AutoresetMode.SAME_STEP and (result[2] or result[3]):
                    obs, info = env.reset()
                    info = {**info, "final_obs": result[0], "final_info": result[4]}
                    result = (obs, result[1], result[2], result[3], info)
            self.needs_reset[i] = bool(result[2] or result[3])
            results.append(result)
        return results

    def set_needs_reset(self) -> None:
        """Mark every env as ended (the previous actor's episodes were lost)."""
        self.needs_reset = [True] * len(self.envs)

    def call(self, name: str, args: tuple, kwargs: dict[str, Any]) -> list[Any]:
        out = []
        for env in self.envs:
            attr = env.get_wrapper_attr(name)
            out.append(attr(*args, **kwargs) if callable(attr) else attr)
        return out

    def get_attr(self, name: str) -> list[Any]:
        return [env.get_wrapper_attr(name) for env in self.envs]

    def set_attr(self, name: str, values: Sequence[Any]) -> None:
        for env, value in zip(self.envs, values):
            env.set_wrapper_attr(name, value)

    def render(self) -> list[Any]:
        return [env.render() for env in self.envs]

    def close(self) -> None:
        for env in self.envs:
            env.close()


class RayVectorEnv(VectorEnv):
    """Sub-envs as Ray actors behind Gymnasium's ``VectorEnv`` API.

    Args:
        env_fns: One function per sub-env that makes it (as for ``gym.vector.SyncVectorEnv``);
            they are pickled with cloudpickle and called inside the actors.
        address: Ray cluster address (``"auto"``, ``"ray://head:10001"``); None starts or joins a
            local Ray. An already initialised Ray is used as it is.
        envs_per_actor: Sub-envs hosted by each actor (1: one process per sub-env).
        autoreset_mode: Gymnasium's autoreset mode (``next_step`` by default, as in Gymnasium).
        actor_options: Passed to Ray's ``.options()`` (e.g. ``{"num_cpus": 1}`` or a
            ``scheduling_strategy``); by default an actor reserves no CPU while it runs.
        timeout: Seconds to wait for the actors on each call (None: no limit); a stuck actor
            then raises ``ray.exceptions.GetTimeoutError`` instead of hanging.
        ray_init_kwargs: Extra arguments for ``ray.init`` when this env starts Ray.

    Example:
        >>> from textgym.wrappers.ray_vector import RayVectorEnv  # doctest: +SKIP
        >>> venv = RayVectorEnv.from_id("textgym/Sudoku-v0", num_envs=64, envs_per_actor=8)  # doctest: +SKIP
        >>> obs, infos = venv.reset(seed=[0] * 4 + [1] * 4 + list(range(2, 58)))  # doctest: +SKIP
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        *,
        address: str | None = None,
        envs_per_actor: int = 1,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        actor_options: dict[str, Any] | None = None,
        timeout: float | None = None,
        ray_init_kwargs: dict[str, Any] | None = None,
    ):
        super().__init__()
        if not env_fns:
            raise ValueError("expected at least one env function, got none")
        if int(envs_per_actor) < 1:
            raise ValueError(f"envs_per_actor must be >= 1, got {envs_per_actor}")
        ray = require("ray", "ray")
        self._ray = ray
        if not ray.is_initialized():
            _init_ray(ray, address, ray_init_kwargs)
        self.num_envs = len(env_fns)
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.timeout = timeout
        self._env_fns = list(env_fns)
        self._remote = ray.remote(EnvShard).options(**(actor_options or {}))
        step = int(envs_per_actor)
        self._bounds = [(lo, min(lo + step, self.num_envs)) for lo in range(0, self.num_envs, step)]
        self.actors = [self._remote.remote(self._env_fns[lo:hi], self.autoreset_mode) for lo, hi in self._bounds]
        self.replaced_actors = 0
        obs_space, act_space, metadata, render_mode = self._get([self.actors[0].spaces.remote()])[0]
        self.single_observation_space, self.single_action_space = obs_space, act_space
        self.observation_space = batch_space(obs_space, self.num_envs)
        self.action_space = batch_space(act_space, self.num_envs)
        self.metadata = metadata | {"autoreset_mode": self.autoreset_mode}
        self.render_mode = render_mode
        self._env_obs: list[Any] = [None] * self.num_envs

    @classmethod
    def from_id(
        cls,
        env_id: str,
        num_envs: int,
        env_kwargs: dict[str, Any] | None = None,
        wrappers: Sequence[Callable[[gym.Env], gym.Env]] = (),
        **kwargs: Any,
    ):
        """``num_envs`` copies of a registered env, made inside the actors by id, each wrapped by ``wrappers``."""
        if int(num_envs) < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        fn = partial(make_env, env_id, dict(env_kwargs or {}), tuple(wrappers))
        return cls([fn] * int(num_envs), **kwargs)

    def reset(self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None):
        if seed is None:
            seeds: list[int | None] = [None] * self.num_envs
        elif isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} seeds (one per sub-env), got {len(seeds)}")
        options = dict(options) if options else None
        mask = np.ones(self.num_envs, dtype=bool)
        if options is not None and "reset_mask" in options:
            mask = np.asarray(options.pop("reset_mask"))
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_ or not mask.any():
                raise ValueError(f"options['reset_mask'] must be a bool array of shape ({self.num_envs},) with a True")
        results = self._scatter("reset", lambda lo, hi: (seeds[lo:hi], options, mask[lo:hi].tolist()), retry=True)
        infos: dict[str, Any] = {}
        for i, result in enumerate(results):
            if result is not None:
                self._env_obs[i], info = result
                infos = self._add_info(infos, info, i)
        return self._batch_obs(), infos

    def step(self, actions: Any):
        actions = list(iterate(self.action_space, actions))
        if len(actions) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got {len(actions)}")
        results = self._scatter("step", lambda lo, hi: (actions[lo:hi],), on_lost=self._lost_episodes)
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=np.bool_)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}
        for i, (obs, reward, terminated, truncated, info) in enumerate(results):
            self._env_obs[i] = obs
            rewards[i], terminations[i], truncations[i] = reward, terminated, truncated
            infos = self._add_info(infos, info, i)
        return self._batch_obs(), rewards, terminations, truncations, infos

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        return tuple(self._scatter("call", lambda lo, hi: (name, args, kwargs)))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return tuple(self._scatter("get_attr", lambda lo, hi: (name,)))

    def set_attr(self, name: str, values: Any) -> None:
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} values, got {len(values)}")
        self._get([a.set_attr.remote(name, list(values[lo:hi])) for a, (lo, hi) in zip(self.actors, self._bounds)])

    def render(self) -> tuple[Any, ...]:
        return tuple(self._scatter("render", lambda lo, hi: ()))

    def close_extras(self, **kwargs: Any) -> None:
        """Close every sub-env and stop the actors; Ray itself stays up for its other users."""
        try:
            self._ray.get([a.close.remote() for a in self.actors], timeout=self.timeout)
        finally:
            for actor in self.actors:
                self._ray.kill(actor)
            self.actors = []

    def _scatter(
        self,
        method: str,
        args_for: Callable[[int, int], tuple],
        *,
        retry: bool = False,
        on_lost: Callable[[int, str], list[Any]] | None = None,
    ) -> list[Any]:
        """Call ``method`` on every actor with its slice's arguments; results in sub-env order.

        A dead actor is replaced; then ``retry`` calls the new one again, ``on_lost`` makes its
        slice's results, and otherwise the error says that the slice's sub-envs were lost.
        """
        refs = [getattr(a, method).remote(*args_for(lo, hi)) for a, (lo, hi) in zip(self.actors, self._bounds)]
        parts = []
        for k, ref in enumerate(refs):
            try:
                parts.append(self._ray.get(ref, timeout=self.timeout))
                continue
            except self._ray.exceptions.RayActorError as exc:
                reason = self._replace(k, exc)
            lo, hi = self._bounds[k]
            if retry:
                parts.append(self._ray.get(getattr(self.actors[k], method).remote(*args_for(lo, hi)), timeout=self.timeout))
            elif on_lost is not None:
                parts.append(on_lost(k, reason))
            else:
                raise TextGymError(f"sub-envs {lo}..{hi - 1}: {reason}; reset them before another {method}")
        return [item for part in parts for item in part]

    def _replace(self, k: int, exc: Exception) -> str:
        """Start a new actor for shard ``k`` in place of the dead one; the reason, in one line."""
        lo, hi = self._bounds[k]
        self.actors[k] = self._remote.remote(self._env_fns[lo:hi], self.autoreset_mode)
        self.replaced_actors += 1
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"the Ray actor hosting them died and was replaced ({type(exc).__name__}: {first[:200]})"

    def _lost_episodes(self, k: int, reason: str) -> list[Any]:
        """The step results of shard ``k``'s sub-envs after its actor died: each episode ended as
        ``env_error`` (with ``same_step`` autoreset, the new actor's envs are reset at once)."""
        lo, hi = self._bounds[k]
        lost = [(self._env_obs[i], 0.0, True, False, {"end_reason": "env_error", "error": reason, "success": False}) for i in range(lo, hi)]
        # Reset the new envs now, so that calls between this step and the next (a policy asking
        # every sub-env for something) find an episode; next_step autoreset still resets them again.
        fresh = self._ray.get(self.actors[k].reset.remote([None] * (hi - lo), None, [True] * (hi - lo)), timeout=self.timeout)
        if self.autoreset_mode != AutoresetMode.SAME_STEP:
            self._ray.get(self.actors[k].set_needs_reset.remote(), timeout=self.timeout)
            return lost
        return [(obs, 0.0, True, False, {**info, "final_obs": old[0], "final_info": old[4]}) for (obs, info), old in zip(fresh, lost)]

    def _get(self, refs: list[Any]) -> list[Any]:
        return self._ray.get(refs, timeout=self.timeout)

    def _batch_obs(self) -> Any:
        # A fresh batch each time, so observations a caller kept are never overwritten.
        out = create_empty_array(self.single_observation_space, n=self.num_envs, fn=np.zeros)
        return concatenate(self.single_observation_space, self._env_obs, out)


def _init_ray(ray: Any, address: str | None, ray_init_kwargs: dict[str, Any] | None) -> None:
    """``ray.init``, with one clear error when the cluster named by ``address`` (or ``RAY_ADDRESS``)
    is not there: Ray itself keeps retrying a dead address for minutes."""
    named = os.environ.get("RAY_ADDRESS") if address in (None, "auto") else address
    if named and named not in ("auto", "local"):
        _check_reachable(named)
    try:
        ray.init(address=address, **({"include_dashboard": False} | dict(ray_init_kwargs or {})))
    except ConnectionError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TextGymError(f"cannot reach the Ray cluster at {named or address}: {first}") from None


def _check_reachable(address: str, timeout: float = 10.0) -> None:
    """Open (and close) a TCP connection to the ``host:port`` of a Ray address."""
    import socket

    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not port.isdigit():
        raise TextGymError(f"expected a Ray address like host:port or ray://host:10001, got {address!r}")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
    except OSError as exc:
        raise TextGymError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None
