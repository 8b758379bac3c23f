"""One GRPO step: collect the step's groups, drop those without signal, pack, update once, and the
step's metrics record.

:func:`learn_from` is the update alone, so :func:`replay_logged_steps` can take a run's logged
steps again in one process (a run of N processes must end with the weights it ends with).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from textgym.algos import backends
from textgym.algos.config import GRPOConfig, TrainConfig
from textgym.algos.distributed import processes
from textgym.algos.grpo import drop_zero_std_groups, pack, policy_prefix, sft_batch
from textgym.algos.grpo.credit import Advantages, rollout_advantages
from textgym.algos.grpo.turns import accepted, accepted_turns
from textgym.algos.models.files import read_json
from textgym.algos.train.episodes import collect_step
from textgym.algos.train.report import ROLLOUTS, env_name, write_step_rollouts
from textgym.algos.train.tokens import packed_tokens, sampled_tokens


def grpo_step(
    config: TrainConfig,
    model: Any,
    learner: Any,
    venvs: dict[str, Any],
    step: int,
    collected: tuple[list[Any], dict[str, float]] | None = None,
) -> dict[str, Any]:
    """Collect step ``step``'s groups with the current model and update on them once.

    ``collected``: the step's rollouts and their metrics when a background collector
    (:mod:`textgym.algos.rollouts.ahead`) collected them from older weights.
    """
    grpo = config.grpo
    t0 = time.perf_counter()
    rollouts, sampled = collected if collected is not None else collect_step(config, model, venvs, step)
    t1 = time.perf_counter()
    update = learn_from(grpo, model, learner, rollouts)
    t2 = time.perf_counter()
    version = int(sampled.get("async/policy_version", step))  # the weights that sampled the step
    if processes.is_writer() and config.log_rollouts_every and (step == 0 or (step + 1) % config.log_rollouts_every == 0):
        advantages, turn_advantages = logged_advantages(grpo, rollouts, update)
        write_step_rollouts(Path(config.output_dir), step + 1, rollouts, advantages, version, turn_advantages)
    episodes = [r for r in rollouts if r.branch is None]  # train/* and train/end/*: whole episodes, as without branches
    by_env = [[r for r in episodes if r.env_id == env] for env in venvs]
    record = {"step": step + 1} | train_stats(episodes)
    if len(venvs) > 1:
        record |= {
            f"train/{env_name(env)}/{k.removeprefix('train/')}": v
            for env, rs in zip(venvs, by_env)
            if rs
            for k, v in train_stats(rs).items()
            if k in ("train/reward", "train/success")
        }
    return (
        record
        | {
            "time/rollout_s": t1 - t0,
            "time/update_s": t2 - t1,
            **update.seconds,
            "train/skipped_update": float(not update.metrics),
            "train/env_errors": sum(r.end_reason == "env_error" for r in rollouts),
            "stats/zero_std_groups": float(update.zero_std),
            **sampled_tokens(rollouts),
            **packed_tokens(update.kept if update.metrics else []),
            **end_fractions(episodes),
            **(update.advantages.anchors.metrics() if update.advantages is not None and update.advantages.anchors is not None else {}),
            **update.metrics,
        }
        | sampled
        | {"time/step": time.perf_counter() - t0}
    )


class Update(NamedTuple):
    """What :func:`learn_from` did with a step's rollouts."""

    kept: list[Any]
    """The rollouts the zero-std filter kept."""
    batch: Any
    """Their packed batch (None: none kept)."""
    zero_std: int
    """The groups the filter dropped."""
    metrics: dict[str, float]
    """The learner's metrics (empty: the update was skipped)."""
    seconds: dict[str, float]
    """``time/pack`` (filter, advantages, packing) and ``time/update`` (the learner's step; 0 when skipped)."""
    advantages: Advantages | None = None
    """The kept rollouts' advantages, per episode and (``advantage="turn"``) per turn (None: none kept)."""


def learn_from(grpo: GRPOConfig, model: Any, learner: Any, rollouts: list[Any]) -> Update:
    """One step's update on its rollouts: the zero-std filter, packing, and a train step if there
    is signal."""
    t0 = time.perf_counter()
    if grpo.advantage == "rejection-sampling":
        kept, zero_std, batch, scored = _accepted_batch(grpo, model, rollouts)
    else:
        kept, zero_std = drop_zero_std_groups(rollouts, grpo)
        batch = pack([policy_prefix(r) for r in kept], grpo, pad_id=model.pad_id) if kept else None
        scored = rollout_advantages(kept, grpo) if kept else None  # what pack gave each episode and turn, for the records
    # No group with differing rewards means no policy gradient; an optimiser step would still move
    # the weights (Adam's momentum), so it is skipped (DAPO's dynamic sampling, at batch level).
    signal = batch is not None and (bool(np.any(batch.advantages != 0)) or grpo.kl_beta > 0)
    t1 = time.perf_counter()
    metrics = learner.train_step(batch) if signal else {}
    seconds = {"time/pack": t1 - t0, "time/update": time.perf_counter() - t1 if signal else 0.0}
    return Update(kept, batch, zero_std, metrics, seconds, scored)


def _accepted_batch(grpo: GRPOConfig, model: Any, rollouts: list[Any]) -> tuple[list[Any], int, Any, Advantages | None]:
    """Turn-level rejection sampling's ``(kept, zero_std, batch, advantages)``: an SFT batch of the
    rollouts' accepted turns (advantage 1 on their tokens, none elsewhere); episodes without one
    are left out, and ``zero_std`` counts the groups that had none."""
    accepted = [accepted_turns(r, grpo.turn_discount) for r in rollouts if r.end_reason != "env_error"]
    kept = [r for r in accepted if np.any(r.loss_mask)]
    if not kept:
        return [], len({r.group for r in rollouts}), None, None
    batch = sft_batch([policy_prefix(r) for r in kept], grpo, pad_id=model.pad_id)
    zero_std = len({r.group for r in rollouts} - {r.group for r in kept})
    return kept, zero_std, batch, Advantages(np.ones(len(kept), np.float32))


def logged_advantages(grpo: GRPOConfig, rollouts: list[Any], update: Update) -> tuple[list[float], list[list[float]] | None]:
    """Each episode's advantage in the update, and with ``advantage="turn"`` each turn's: 0 for
    the episodes of groups the zero-std filter dropped (every episode is logged, also those). With
    ``"rejection-sampling"``, 1 on each accepted turn."""
    if grpo.advantage == "rejection-sampling":  # 1 on each accepted turn (its episode: 1 if it has one)
        turns = [(accepted(r, grpo.turn_discount) & (r.end_reason != "env_error")).astype(float).tolist() for r in rollouts]
        return [float(any(t)) for t in turns], turns
    scored = update.advantages
    at = {id(r): k for k, r in enumerate(update.kept)} if scored is not None else {}
    episodes = [float(scored.episodes[at[id(r)]]) if id(r) in at else 0.0 for r in rollouts]
    if grpo.advantage != "turn":
        return episodes, None
    turns = [[float(a) for a in scored.turns[at[id(r)]]] if id(r) in at else [0.0] * len(r.turn_rewards or ()) for r in rollouts]
    return episodes, turns


def replay_logged_steps(out: str | os.PathLike, model: str | os.PathLike, backend: str) -> tuple[Any, list[dict[str, float]]]:
    """Take a run's steps again in this one process, on the rollouts it logged (a run with
    ``log_rollouts_every=1``): a run of N processes must end with the weights this ends with.

    Returns:
        The learner (its weights after the last step) and each step's update metrics (empty where
        the step was skipped).
    """
    from textgym.rollout import read_rollouts

    out = Path(out)
    grpo = GRPOConfig(**read_json(out / "config.json")["grpo"])
    module = backends.load_backend(backend)
    loaded = module.load_model(model)
    learner = module.Learner(loaded, grpo)
    steps = sorted((out / ROLLOUTS).glob("step_*.jsonl"))
    return learner, [learn_from(grpo, loaded, learner, read_rollouts(path)).metrics for path in steps]


def train_stats(rollouts: list[Any]) -> dict[str, float]:
    return {
        "train/reward": float(np.mean([r.reward for r in rollouts])),
        "train/success": float(np.mean([r.success for r in rollouts])),
        "train/turns": float(np.mean([r.turns for r in rollouts])),
        "train/generated_tokens": int(sum(r.loss_mask.sum() for r in rollouts)),
    }


def end_fractions(rollouts: list[Any]) -> dict[str, float]:
    """``train/end/<reason>``: the fraction of the step's episodes that ended for each reason."""
    from textgym.env import END_REASONS

    reasons = [r.end_reason for r in rollouts]
    return {f"train/end/{reason}": reasons.count(reason) / len(reasons) for reason in END_REASONS}
