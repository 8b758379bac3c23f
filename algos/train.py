"""``textgym train``: GRPO on any textgym env with the JAX or the torch backend.

The loop, top to bottom (one GRPO step per iteration)::

    policy, learner = backend.load_policy(model), backend.Learner(policy, config.grpo)
    tree = SeedTree(config.seed)
    for step in range(steps):
        rollouts = collect(venv, TreeSampler(policy, tree, "train_sampler", step),
                           seeds=tree.task_seeds(step, prompts_per_step), group_size=G)
        metrics  = learner.train_step(pack(rollouts, config.grpo, pad_id))   # skipped if no signal
        every eval_every: held-out success (greedy) on the fixed seeds from EVAL_SEED_OFFSET
        every save_every: checkpoint (learner state + step), atomically
        every log_rollouts_every: the step's rollouts to rollouts/step_XXXXXX.jsonl (for textgym view)

Before it, an optional SFT warm start on oracle demonstrations (:mod:`textgym.algos.sft`);
after it, ``final/`` (a HF directory), ``summary.json`` (held-out success before and after) and
``curve.png``. Every seed is a function of ``config.seed`` and its place in the run (one
:class:`~textgym.algos.grpo.SeedTree`), and the learner's state (weights, optimiser, KL reference)
is checkpointed whole, so a resumed run continues exactly as the uninterrupted one would have.

This module imports neither JAX nor torch: the backend is imported when a run starts.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from textgym.algos import async_rollouts, backends, distributed, flags, launch, models, recipes, sampling, token_envs
from textgym.algos.branches import collect_branches
from textgym.algos.config import SFTConfig, TrainConfig
from textgym.algos.fields import to_json
from textgym.algos.grpo import GRPOConfig, SeedTree, drop_zero_std_groups, pack, policy_prefix
from textgym.algos.grpo.seeds import eval_seeds
from textgym.algos.metrics import MetricsLog, progress_bar
from textgym.algos.model_files import ModelFileError, checkpoint_step, read_json
from textgym.arguments import check_env_ids
from textgym.error import TextGymError

CHECKPOINTS = "checkpoints"
RUN_STATE = "run_state.json"
ROLLOUTS = "rollouts"
BEST = "best"
KEEP_CHECKPOINTS = 2


def train(config: TrainConfig) -> dict[str, Any]:
    """Run (or resume) a training run; return its summary (also written to ``summary.json``).

    Returns:
        ``{"steps", "before", "after", "output_dir", "final", "minutes"}`` where ``before`` and
        ``after`` are the held-out evaluations of the model GRPO started from and of the final one.
    """
    config = config.resolved()
    check_env_ids(config.envs)
    if config.env_url:  # a dead server in the list stops the run before anything is built
        from textgym.remote import check_servers

        check_servers(config.env_url)
    distributed.init(config.backend)
    distributed.my_block(config.prompts_per_step)  # a world size that splits the groups, or one clear error
    writer = distributed.is_writer()
    if not writer:
        config = config.replace(progress=False, plot=False)  # one progress bar and one curve: rank 0's
    out = Path(config.output_dir)
    if writer:
        claim_run_dir(out)
    checkpoint, step = resumable_checkpoint(out) if config.resume else (None, 0)
    if checkpoint is not None:
        check_world_size(checkpoint, distributed.world_size())
    models.quiet_transformers()
    if writer:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(to_json(config), encoding="utf-8")
    started = time.perf_counter()

    if config.sft_steps:
        start_model = sft_warm_start(config)
    else:
        start_model = distributed.writer_first(
            lambda: models.resolve(config.model, out, seed=config.seed, progress=config.progress, tiny_layers=config.tiny_layers)
        )
    backend = backends.load_backend(config.backend, config.threads)
    # A LoRA checkpoint holds the adapter only: the base weights come from the start model.
    weights = checkpoint if checkpoint is not None and not config.grpo.lora_rank else start_model
    policy = backend.load_policy(weights, sampler_dtype=config.grpo.sampler_dtype)
    mesh = config.mesh
    if config.backend == "jax" and distributed.world_size() > 1 and mesh is None:
        import jax

        mesh = f"data={jax.device_count()}"  # one data-parallel mesh over every process's devices
    learner = backends.make_learner(backend, policy, config.grpo, mesh, config.data_parallel)
    if checkpoint is not None:
        learner.restore(checkpoint)
    elif config.resume is False:
        distributed.writer_only(lambda: remove_checkpoints(out))
    keep_until = step if checkpoint is not None else None
    log = distributed.writer_first(lambda: MetricsLog(out / "metrics.jsonl", keep_until=keep_until, writer=writer))

    tokenizer = models.load_tokenizer(start_model)
    template = token_envs.chat_template(config.chat_template, config.model)
    grpo = config.grpo
    # Each process plays its own share: a block of the step's groups, every world_size-th held-out task.
    world, rank = distributed.world_size(), distributed.rank()
    episodes = config.prompts_per_step // world * grpo.group_size
    held_out = eval_seeds(config.eval_episodes)[rank::world]

    def venvs(width: int) -> dict[str, Any]:
        return {
            env: token_envs.token_venv(
                *_env_source(config, env),
                tokenizer,
                template,
                min(config.num_envs, width),
                config.vectorization_mode,
                config.on_template_break,
            )
            for env in config.envs
        }

    train_venvs, eval_venvs = venvs(episodes), venvs(max(1, len(held_out)))

    def evaluate(at: int) -> dict[str, float]:
        results = [
            _evaluate_shares(
                policy,
                venv,
                held_out,
                max_new_tokens=grpo.max_new_tokens,
                temperature=config.eval_temperature,
                seed=grpo.seed,
                top_p=grpo.top_p,
                step=at,
                row=i,
            )
            for i, venv in enumerate(eval_venvs.values())
        ]
        return _per_env(config, results, "eval/")

    ahead = None  # the background sampler of asynchronous GRPO (max_off_policy_steps > 0)
    try:
        if step == 0:
            log.write(keep_best(learner, out, {"step": 0} | evaluate(0), log.records, template))
        stop = config.steps if config.stop_after is None else min(config.steps, step + config.stop_after)
        saved = step
        ahead = async_rollouts.start(
            grpo.max_off_policy_steps, lambda sampler, at: collect_step(config, sampler, train_venvs, at), policy, step, stop
        )
        with progress_bar(f"GRPO ({config.backend})", total=config.steps, completed=step, enabled=config.progress) as bar:
            try:
                while step < stop:
                    record = grpo_step(config, policy, learner, train_venvs, step, ahead and ahead.take(step))
                    step += 1
                    if ahead:
                        ahead.publish(step, policy)
                    if step % config.eval_every == 0 or step == config.steps:
                        record = keep_best(learner, out, record | evaluate(step), log.records, template)
                    log.write(record)
                    if step % config.save_every == 0 or step == stop:
                        save_checkpoint(learner, out, step, template)
                        saved = step
                    bar.update(advance=1, info=_summary_line(record))
            except KeyboardInterrupt:
                if step > saved:  # nothing lost: the last finished step is kept
                    save_checkpoint(learner, out, step, template)
                raise
    finally:
        if ahead is not None:
            ahead.close()
        for venv in (*train_venvs.values(), *eval_venvs.values()):
            venv.close()

    summary = _summary(config, out, log.records, step, time.perf_counter() - started)
    if step >= config.steps:
        learner.export(out / "final")
        distributed.writer_only(lambda: token_envs.keep_chat_template(out / "final", template))
        summary["final"] = str(out / "final")
    if writer:
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if config.plot:
        from textgym.algos.plot import plot_curve

        plot_curve(log.records, out / "curve.png", title=f"{'+'.join(config.envs)} · {config.backend} · {config.model}")
    return summary


def _env_source(config: TrainConfig, env: str) -> tuple[str, dict[str, Any]]:
    """The id and keyword arguments ``env``'s sub-envs are made with: the env itself, or a client of its servers."""
    if config.env_url:
        from textgym.registration import REMOTE_ID

        return REMOTE_ID, {"urls": list(config.env_url)}
    return env, config.kwargs_of(env)


def keep_best(
    learner: Any, out: Path, record: dict[str, Any], earlier: list[dict[str, Any]], template: str | None = None
) -> dict[str, Any]:
    """Export the model (with the run's chat ``template``) to ``best/`` when ``record``'s held-out
    success beats every earlier one.

    The first best wins ties, so ``best/`` is the earliest model with the run's top score;
    ``summary.json`` names its step.
    """
    scores = [r["eval/success"] for r in earlier if "eval/success" in r]
    if not scores or record["eval/success"] > max(scores):
        tmp = out / (BEST + ".tmp")
        distributed.writer_only(lambda: shutil.rmtree(tmp, ignore_errors=True))
        learner.export(tmp)  # every rank calls it; rank 0 writes
        if distributed.is_writer():
            token_envs.keep_chat_template(tmp, template)
            shutil.rmtree(out / BEST, ignore_errors=True)
            os.replace(tmp, out / BEST)
    return record


def prompt_shares(config: TrainConfig, total: int | None = None) -> list[int]:
    """Prompts per env of each step: ``env_weights`` (equal by default) times ``total``
    (``prompts_per_step`` by default), rounded by largest remainder so that they add up.

    Example:
        >>> prompt_shares(TrainConfig(env=("a", "b", "c"), env_weights=(2, 1, 1), prompts_per_step=6))
        [3, 2, 1]
    """
    weights = np.asarray(config.env_weights or [1.0] * len(config.envs), dtype=np.float64)
    total = config.prompts_per_step if total is None else total
    exact = total * weights / weights.sum()
    counts = np.floor(exact).astype(int)
    for i in np.argsort(-(exact - counts), kind="stable")[: total - counts.sum()]:
        counts[i] += 1
    return counts.tolist()


def _env_name(env: str) -> str:
    return env.split("/")[-1]


def _per_env(config: TrainConfig, results: list[dict[str, float]], prefix: str) -> dict[str, float]:
    """One env's metrics as they are; a mixture's as their means plus ``<prefix><env name>/<metric>`` each."""
    if len(results) == 1:
        return results[0]
    merged = {k: float(np.mean([r[k] for r in results])) for k in results[0]}
    for env, r in zip(config.envs, results):
        merged |= {f"{prefix}{_env_name(env)}/{k.removeprefix(prefix)}": v for k, v in r.items()}
    return merged


def grpo_step(
    config: TrainConfig,
    policy: Any,
    learner: Any,
    venvs: dict[str, Any],
    step: int,
    collected: tuple[list[Any], dict[str, float]] | None = None,
) -> dict[str, Any]:
    """Collect step ``step``'s groups with the current policy and update on them once.

    ``collected``: the step's rollouts and their metrics when a background sampler
    (:mod:`textgym.algos.async_rollouts`) collected them from older weights.
    """
    grpo = config.grpo
    t0 = time.perf_counter()
    rollouts, sampled = collected if collected is not None else collect_step(config, policy, venvs, step)
    t1 = time.perf_counter()
    update = learn_from(grpo, policy, learner, rollouts)
    t2 = time.perf_counter()
    version = int(sampled.get("async/policy_version", step))  # the weights that sampled the step
    if distributed.is_writer() and config.log_rollouts_every and (step == 0 or (step + 1) % config.log_rollouts_every == 0):
        # Every episode, also those of groups the zero-std filter dropped (advantage 0: all rewards equal).
        trained = dict(zip(map(id, update.kept), update.batch.advantages)) if update.batch is not None else {}
        write_step_rollouts(Path(config.output_dir), step + 1, rollouts, [float(trained.get(id(r), 0.0)) for r in rollouts], version)
    episodes = [r for r in rollouts if r.branch is None]  # train/* and train/end/*: whole episodes, as without branches
    by_env = [[r for r in episodes if r.env_id == env] for env in venvs]
    record = {"step": step + 1} | _train_stats(episodes)
    if len(venvs) > 1:
        record |= {
            f"train/{_env_name(env)}/{k.removeprefix('train/')}": v
            for env, rs in zip(venvs, by_env)
            if rs
            for k, v in _train_stats(rs).items()
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
            **end_fractions(episodes),
            **update.metrics,
        }
        | sampled
        | {"time/step": time.perf_counter() - t0}
    )


def collect_step(config: TrainConfig, policy: Any, venvs: dict[str, Any], step: int) -> tuple[list[Any], dict[str, float]]:
    """Step ``step``'s groups sampled by ``policy``, shared among a mixture's envs by
    :func:`prompt_shares` (every process's, in order), then its ``branch_groups`` branched groups
    (:func:`~textgym.algos.branches.collect_branches`), and this process's ``time/sampling``,
    ``time/env`` and ``time/wrapper`` of them (see :func:`token_envs.token_seconds`), with ``branch/*``."""
    from textgym.rollout import collect

    grpo = config.grpo
    tree = SeedTree(grpo.seed)
    seeds = tree.task_seeds(step, config.prompts_per_step)
    mine = distributed.my_block(config.prompts_per_step)  # this process's groups (all of them in one process)
    world, rank = distributed.world_size(), distributed.rank()
    local: list[Any] = []
    seconds = {"time/sampling": 0.0, "time/env": 0.0, "time/wrapper": 0.0}
    keep_states = bool(config.branch_groups) and config.branch_source == "rollouts"  # where branches start
    first = 0
    for row, ((env, venv), share) in enumerate(zip(venvs.items(), prompt_shares(config))):
        groups = [g for g in range(first, first + share) if g in mine]
        first += share
        if not groups:
            continue
        actor = sampling.TreeSampler(
            policy,
            tree,
            "train_sampler",
            step,
            row=row * world + rank,
            max_new_tokens=grpo.max_new_tokens,
            temperature=grpo.temperature,
            top_p=grpo.top_p,
        )
        clock = token_envs.token_clock(venv)
        got = collect(venv, actor, seeds=[seeds[g] for g in groups], group_size=grpo.group_size, env_id=env, keep_states=keep_states)
        for key, value in token_envs.token_seconds(clock, token_envs.token_clock(venv)).items():
            seconds[key] += value
        seconds["time/sampling"] += actor.seconds
        local += [dataclasses.replace(r, group=r.group + groups[0]) for r in got]
    rollouts = distributed.gather(local)  # every group of the step, in order, on every process
    if not config.branch_groups:
        return rollouts, seconds
    branches, metrics = collect_branches(config, policy, venvs, step, rollouts, prompt_shares(config, config.branch_groups))
    rollouts = [dataclasses.replace(r, turn_states=None) for r in rollouts]  # chosen from: no longer needed
    return rollouts + branches, metrics | {key: seconds[key] + metrics[key] for key in seconds}


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


def learn_from(grpo: GRPOConfig, policy: Any, learner: Any, rollouts: list[Any]) -> Update:
    """One step's update on its rollouts: the zero-std filter, packing, and a train step if there
    is signal."""
    t0 = time.perf_counter()
    kept, zero_std = drop_zero_std_groups(rollouts, grpo)
    batch = pack([policy_prefix(r) for r in kept], grpo, pad_id=policy.pad_id) if kept else None
    # No group with differing rewards means no policy gradient; an optimiser step would still move
    # the weights (Adam's momentum), so it is skipped (DAPO's dynamic sampling, at batch level).
    signal = batch is not None and (bool(np.any(batch.advantages != 0)) or grpo.kl_beta > 0)
    t1 = time.perf_counter()
    metrics = learner.train_step(batch) if signal else {}
    seconds = {"time/pack": t1 - t0, "time/update": time.perf_counter() - t1 if signal else 0.0}
    return Update(kept, batch, zero_std, metrics, seconds)


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
    policy = module.load_policy(model)
    learner = module.Learner(policy, grpo)
    steps = sorted((out / ROLLOUTS).glob("step_*.jsonl"))
    return learner, [learn_from(grpo, policy, learner, read_rollouts(path)).metrics for path in steps]


def _train_stats(rollouts: list[Any]) -> dict[str, float]:
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


def write_step_rollouts(out: Path, step: int, rollouts: list[Any], advantages: list[float], policy_version: int) -> Path:
    """``rollouts/step_XXXXXX.jsonl``: the step's episodes with their ``step``, ``advantage`` and
    ``policy_version`` (the GRPO steps behind the weights that sampled them; ``step - 1`` unless
    sampling ran ahead) (a resumed run rewrites the same file identically)."""
    path = out / ROLLOUTS / f"step_{step:06d}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for r, advantage in zip(rollouts, advantages):
            record = {"step": step, "advantage": float(advantage), "policy_version": policy_version, **r.to_dict()}
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def sft_warm_start(config: TrainConfig) -> Path:
    """The SFT phase of a run (skipped when its result exists): a HF directory GRPO starts from."""
    from textgym.algos.sft import sft

    return sft(config.sft_config())


def save_checkpoint(learner: Any, out: Path, step: int, template: str | None = None) -> Path:
    """Write ``checkpoints/step_XXXXXX`` (with the run's chat ``template``) atomically (a temporary
    directory, then a rename).

    A run killed while saving leaves only a ``.tmp`` directory, which resumption ignores. The
    oldest checkpoints beyond the last ``KEEP_CHECKPOINTS`` are removed.
    """
    root = out / CHECKPOINTS
    final = root / f"step_{step:06d}"
    tmp = root / f"step_{step:06d}.tmp"
    distributed.writer_only(lambda: shutil.rmtree(tmp, ignore_errors=True))
    learner.save(tmp)  # every rank calls it; rank 0 writes
    if distributed.is_writer():
        token_envs.keep_chat_template(tmp, template)
        state = {"step": step, "world_size": distributed.world_size()}
        (tmp / RUN_STATE).write_text(json.dumps(state) + "\n", encoding="utf-8")
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        for old in _checkpoints(root)[:-KEEP_CHECKPOINTS]:
            shutil.rmtree(old, ignore_errors=True)
    distributed.barrier()
    return final


def check_world_size(checkpoint: Path, world: int) -> None:
    """Refuse to resume a checkpoint written by a run of another number of processes.

    Raises:
        ValueError: It was (each process's share of the groups and its sampling seeds depend on
            the world size, so the run would not continue exactly).
    """
    saved = read_json(checkpoint / RUN_STATE).get("world_size", 1)
    if saved != world:
        raise ValueError(
            f"{checkpoint} was written by a run of {saved} process{'es' if saved != 1 else ''}, this one has "
            f"{world}: resume with --nproc {saved}, or start a new run (--no-resume or another --output-dir)"
        )


def _evaluate_shares(policy: Any, venv: Any, seeds: list[int], **kwargs: Any) -> dict[str, float]:
    """:func:`sampling.evaluate` on this process's held-out tasks, averaged with the other processes'."""
    local = sampling.evaluate(policy, venv, seeds, **kwargs) if seeds else {}
    parts = [(n, m) for n, m in distributed.gather([(len(seeds), local)]) if n]
    total = sum(n for n, _ in parts)
    return {k: sum(n * m[k] for n, m in parts) / total for k in parts[0][1]}


def latest_checkpoint(out: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint of a run directory, or None."""
    found = _checkpoints(Path(out) / CHECKPOINTS)
    return found[-1] if found else None


def resumable_checkpoint(out: Path) -> tuple[Path | None, int]:
    """The newest checkpoint whose files load, and its step; ``(None, 0)`` for a run without one.

    A corrupt newest checkpoint (truncated weights or optimiser state, a ``run_state.json``
    without a step) is passed over for the one before it, saying so; nothing is deleted.

    Raises:
        ModelFileError: Checkpoints exist and none of them loads.
    """
    found = _checkpoints(out / CHECKPOINTS)
    problems = []
    for checkpoint in reversed(found):
        try:
            step = checkpoint_step(checkpoint, RUN_STATE)
        except ModelFileError as exc:
            problems.append(str(exc))
            continue
        if problems:
            print(f"textgym train: {problems[0]}; resuming from {checkpoint.name} instead", file=sys.stderr, flush=True)
        return checkpoint, step
    if problems:
        raise ModelFileError(f"no checkpoint of {out} can be resumed ({problems[0]}); pass --no-resume to start over")
    return None, 0


def claim_run_dir(out: Path) -> None:
    """Refuse an output directory that holds files but is not a textgym run (its ``config.json``
    would be overwritten, its ``best/`` and ``checkpoints/`` replaced). One that holds only a
    warm start (``sft/``, made by ``textgym sft --output-dir <run>/sft``) is the run's to continue."""
    if out.exists() and not out.is_dir():
        raise TextGymError(f"--output-dir {str(out)!r} is a file, not a directory")
    if not out.is_dir() or {p.name for p in out.iterdir()} <= {"sft"}:
        return
    try:
        config = read_json(out / "config.json")
    except ModelFileError:
        config = {}
    if not {"env", "grpo", "backend"} <= config.keys():
        raise TextGymError(f"--output-dir {str(out)!r} is not empty and not a textgym run directory: choose a new or empty one")


def remove_checkpoints(out: Path) -> None:
    """``--no-resume``: remove the checkpoints this run's earlier life wrote (``step_*``), nothing else."""
    root = out / CHECKPOINTS
    if not root.is_dir():
        return
    for path in root.iterdir():
        if path.is_dir() and not path.is_symlink() and re.fullmatch(r"step_\d{6}(\.tmp)?", path.name):
            shutil.rmtree(path)
    with contextlib.suppress(OSError):
        root.rmdir()  # only when nothing else is left in it


def _checkpoints(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.endswith(".tmp") and (p / RUN_STATE).is_file())


def _summary_line(record: dict[str, Any]) -> str:
    text = f"reward {record['train/reward']:.2f}"
    if "eval/success" in record:
        text += f" · held-out success {record['eval/success']:.2f}"
    return text


def _evaluation(record: dict[str, Any], prefix: str = "eval/") -> dict[str, Any]:
    return {k.removeprefix(prefix): v for k, v in record.items() if k.startswith(prefix) and "/" not in k.removeprefix(prefix)} | {
        "step": record["step"]
    }


def _summary(config: TrainConfig, out: Path, records: list[dict[str, Any]], step: int, seconds: float) -> dict[str, Any]:
    """``summary.json``: held-out results before and after (each env's too, for a mixture), and the best evaluation."""
    evals = [r for r in records if "eval/success" in r]
    best = max(evals, key=lambda r: r["eval/success"], default=None)  # max keeps the first of ties, as keep_best does
    summary = {
        "env": config.env,
        "backend": config.backend,
        "model": config.model,
        "steps": step,
        "before": _evaluation(evals[0]) if evals else None,
        "after": _evaluation(evals[-1]) if evals else None,
        "best": None if best is None else {"step": best["step"], "success": best["eval/success"], "path": str(out / BEST)},
        "output_dir": str(out),
        "minutes": round(seconds / 60, 2),
    }
    if len(config.envs) > 1 and evals:
        summary["envs"] = {
            _env_name(env): {
                "before": _evaluation(evals[0], f"eval/{_env_name(env)}/"),
                "after": _evaluation(evals[-1], f"eval/{_env_name(env)}/"),
            }
            for env in config.envs
        }
    return summary


# ----- command line: flags generated from the configs (textgym.algos.flags) -----


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``textgym train``: every ``TrainConfig`` field, every ``GRPOConfig`` field but ``seed``,
    and ``--print-config``."""
    flags.add_fields(parser, TrainConfig, skip=("grpo",), repeat=("env", "env_url"))
    group = parser.add_argument_group("GRPO (textgym.algos.grpo.GRPOConfig; unset: the preset's value, else the default)")
    flags.add_fields(group, GRPOConfig, skip=("seed",))  # --seed seeds the whole run
    _add_print_config(parser)
    launch.add_arguments(parser)


def run_train(args: argparse.Namespace) -> int:
    """``textgym train``: build the config from ``args``, train, print the before/after summary
    (``--nproc N``: launch N processes that do so)."""
    config = train_config_from_args(args)
    if args.print_config:
        print(to_json(config), end="")
        return 0
    if launch.wants_launch(args):
        _check_world_size(config, args.nproc)
    return _run_in_processes(config, args, train, _print_summary)


def _run_in_processes(config: TrainConfig | SFTConfig, args: argparse.Namespace, job: Callable, report: Callable) -> int:
    """Run ``job(config)`` here, or launch the ``--nproc`` processes that each run this command line;
    only the process that writes run files reports ``job``'s result."""
    if launch.wants_launch(args):
        if config.backend == "jax":
            return launch.run_jax_processes(args.nproc, args.command_line)
        return launch.run_torchrun(args.nproc, args.command_line)
    try:
        distributed.init(config.backend, **launch.process_flags(args))
        result = job(config)
        writer = distributed.is_writer()
    finally:
        distributed.destroy()
    if writer:
        report(result)
    return 0


def _check_world_size(config: TrainConfig, nproc: int) -> None:
    """What every one of ``nproc`` processes would refuse, said once before they start."""
    if config.prompts_per_step % nproc:
        raise ValueError(
            f"prompts_per_step ({config.prompts_per_step}) must be a multiple of the number of processes "
            f"({nproc}): each process plays whole GRPO groups"
        )
    checkpoint, _ = resumable_checkpoint(Path(config.resolved().output_dir)) if config.resume else (None, 0)
    if checkpoint is not None:
        check_world_size(checkpoint, nproc)


def train_config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The resolved ``TrainConfig`` of a command line (see :func:`textgym.algos.recipes.train_config`)."""
    run = flags.given(args, TrainConfig, skip=("grpo",))
    return recipes.train_config(run, flags.given(args, GRPOConfig, skip=("seed",)))


def add_sft_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``textgym sft``: every ``SFTConfig`` field, and ``--print-config``."""
    flags.add_fields(parser, SFTConfig, repeat=("env",))
    _add_print_config(parser)
    launch.add_arguments(parser)


def run_sft(args: argparse.Namespace) -> int:
    """``textgym sft``: warm-start a model on oracle demonstrations; print where it was written."""
    from textgym.algos.sft import sft

    config = recipes.sft_config(flags.given(args, SFTConfig))
    if args.print_config:
        print(to_json(config), end="")
        return 0
    return _run_in_processes(config, args, sft, lambda final: print(f"SFT model written to {final}"))


def _add_print_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--print-config", action="store_true", help="print the run's resolved configuration as JSON and exit without running it"
    )
    parser.epilog = f"presets (--preset NAME, alone or with other flags on top): {', '.join(recipes.PRESETS)}"


def _print_summary(summary: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console()
    before, after, best = summary.get("before"), summary.get("after"), summary.get("best")
    if before and after:
        gain = 100 * (after["success"] - before["success"])
        console.print(
            f"held-out success: {before['success']:.1%} (step {before['step']}) -> {after['success']:.1%} "
            f"(step {after['step']}), {gain:+.1f} points in {summary['minutes']} min"
        )
    if best:
        console.print(f"best held-out success: {best['success']:.1%} at step {best['step']} ({best['path']})")
    console.print(f"run directory: {summary['output_dir']}")
