"""Vector envs that a local model plays in token ids, with the chat template a run asks for."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from textgym.algos.models import tiny


def chat_template(kind: str, model: str) -> str | None:
    """The template override for :class:`~textgym.wrappers.TokenObservation` (None: the model's own).

    Args:
        kind: A config's ``chat_template`` (``auto``, ``model`` or ``compact``; validated by the config).
        model: The config's ``model``; ``auto`` is ``compact`` for ``tiny``.
    """
    if kind == "compact" or (kind == "auto" and str(model) == tiny.NAME):
        return tiny.compact_chat_template()
    return None


def keep_chat_template(directory: str | os.PathLike, template: str | None) -> None:
    """Make ``template`` the chat template of a model directory a run wrote (``chat_template.jinja``,
    which transformers prefers to any template in ``tokenizer_config.json``), so that what loads it
    later (``textgym eval --policy model:DIR``, ``--model DIR``) renders turns as the run trained on
    them. None, the model's own template, leaves the directory as it is."""
    if template is not None:
        (Path(directory) / "chat_template.jinja").write_text(template, encoding="utf-8")


def token_venv(
    env: str,
    env_kwargs: Mapping[str, Any],
    tokenizer: Any,
    template: str | None,
    num_envs: int,
    vectorization_mode: str = "sync",
    on_template_break: str = "raise",
) -> gym.vector.VectorEnv:
    """A vector env of ``env`` whose sub-envs observe and act in token ids (``ray``: in Ray actors)."""
    from textgym.wrappers import TokenObservation

    wrap = partial(TokenObservation, tokenizer=tokenizer, chat_template=template, on_template_break=on_template_break)
    if vectorization_mode == "ray":
        from textgym.wrappers.ray_vector import RayVectorEnv

        return RayVectorEnv.from_id(env, num_envs, dict(env_kwargs), wrappers=[wrap])
    return gym.make_vec(env, num_envs=num_envs, vectorization_mode=vectorization_mode, wrappers=[wrap], **dict(env_kwargs))


def token_clock(venv: gym.vector.VectorEnv) -> np.ndarray:
    """``(num_envs, 2)``: each sub-env's seconds so far in its env and in its
    :class:`~textgym.wrappers.TokenObservation` (``env_seconds``, ``render_seconds``)."""
    return np.array([venv.get_attr("env_seconds"), venv.get_attr("render_seconds")], dtype=np.float64).T


def token_seconds(before: np.ndarray, after: np.ndarray) -> dict[str, float]:
    """``time/env`` and ``time/wrapper`` between two :func:`token_clock` readings: the sub-envs'
    seconds, added up (a sub-env whose clock went back was replaced, a Ray actor lost: it counts
    from zero)."""
    spent = np.where(after >= before, after - before, after).sum(axis=0)
    return {"time/env": float(spent[0]), "time/wrapper": float(spent[1])}
