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
import dataclasses
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, get_args, get_type_hints

import numpy as np

from textgym.algos import recipes, runtime, tiny
from textgym.algos.config import SFTConfig, TrainConfig
from textgym.algos.grpo import GRPOConfig, SeedTree, drop_zero_std_groups, pack
from textgym.algos.grpo.seeds import eval_seeds
from textgym.algos.metrics import MetricsLog, progress_bar
from textgym.cli import json_object

CHECKPOINTS = "checkpoints"
RUN_STATE = "run_state.json"
ROLLOUTS = "rollouts"
KEEP_CHECKPOINTS = 2


def train(config: TrainConfig) -> dict[str, Any]:
    """Run (or resume) a training run; return its summary (also written to ``summary.json``).

    Returns:
        ``{"steps", "before", "after", "output_dir", "final", "minutes"}`` where ``before`` and
        ``after`` are the held-out evaluations of the model GRPO started from and of the final one.
    """
    config = recipes.resolve_train(config)
    runtime.quiet_transformers()
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(dataclasses.asdict(config), indent=2) + "\n", encoding="utf-8")
    started = time.perf_counter()

    start_model = sft_warm_start(config) if config.sft_steps else tiny.resolve(config.model, out, seed=config.seed)
    backend = runtime.load_backend(config.backend, config.threads)
    checkpoint = latest_checkpoint(out) if config.resume else None
    policy = backend.load_policy(checkpoint or start_model)
    learner = runtime.make_learner(backend, policy, config.grpo, config.mesh)
    step = 0
    if checkpoint is not None:
        learner.restore(checkpoint)
        step = json.loads((checkpoint / RUN_STATE).read_text(encoding="utf-8"))["step"]
    elif config.resume is False and (out / CHECKPOINTS).exists():
        shutil.rmtree(out / CHECKPOINTS)
    log = MetricsLog(out / "metrics.jsonl", keep_until=step if checkpoint is not None else None)

    tokenizer = runtime.load_tokenizer(start_model)
    template = runtime.chat_template(config.chat_template, config.model)
    grpo = config.grpo
    episodes = config.prompts_per_step * grpo.group_size
    venv = runtime.token_venv(config.env, config.env_kwargs, tokenizer, template, min(config.num_envs, episodes), config.vectorization_mode)
    eval_venv = runtime.token_venv(config.env, config.env_kwargs, tokenizer, template, min(config.num_envs, config.eval_episodes), config.vectorization_mode)

    def evaluate(at: int) -> dict[str, float]:
        return runtime.evaluate(policy, eval_venv, eval_seeds(config.eval_episodes), max_new_tokens=grpo.max_new_tokens,
                                temperature=config.eval_temperature, seed=grpo.seed, top_p=grpo.top_p, step=at)

    try:
        if step == 0:
            log.write({"step": 0} | evaluate(0))
        stop = config.steps if config.stop_after is None else min(config.steps, step + config.stop_after)
        saved = step
        with progress_bar(f"GRPO ({config.backend})", total=config.steps, completed=step, enabled=config.progress) as bar:
            try:
                while step < stop:
                    record = grpo_step(config, policy, learner, venv, step)
                    step += 1
                    if step % config.eval_every == 0 or step == config.steps:
                        record |= evaluate(step)
                    log.write(record)
                    if step % config.save_every == 0 or step == stop:
                        save_checkpoint(learner, out, step)
                        saved = step
                    bar.update(advance=1, info=_summary_line(record))
            except KeyboardInterrupt:
                if step > saved:  # nothing lost: the last finished step is kept
                    save_checkpoint(learner, out, step)
                raise
    finally:
        venv.close()
        eval_venv.close()

    summary = _summary(config, out, log.records, step, time.perf_counter() - started)
    if step >= config.steps:
        learner.export(out / "final")
        summary["final"] = str(out / "final")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if config.plot:
        from textgym.algos.plot import plot_curve

        plot_curve(log.records, out / "curve.png", title=f"{config.env} · {config.backend} · {config.model}")
    return summary


def grpo_step(config: TrainConfig, policy: Any, learner: Any, venv: Any, step: int) -> dict[str, Any]:
    """Collect step ``step``'s groups with the current policy and update on them once."""
    from textgym.rollout import collect

    grpo = config.grpo
    tree = SeedTree(grpo.seed)
    actor = runtime.TreeSampler(policy, tree, "train_sampler", step, max_new_tokens=grpo.max_new_tokens,
                                temperature=grpo.temperature, top_p=grpo.top_p)
    t0 = time.perf_counter()
    rollouts = collect(venv, actor, seeds=tree.task_seeds(step, config.prompts_per_step), group_size=grpo.group_size, env_id=config.env)
    t1 = time.perf_counter()
    kept, zero_std = drop_zero_std_groups(rollouts, grpo)
    batch = pack([runtime.policy_prefix(r) for r in kept], grpo, pad_id=policy.pad_id) if kept else None
    # No group with differing rewards means no policy gradient; an optimiser step would still move
    # the weights (Adam's momentum), so it is skipped (DAPO's dynamic sampling, at batch level).
    signal = batch is not None and (bool(np.any(batch.advantages != 0)) or grpo.kl_beta > 0)
    metrics = learner.train_step(batch) if signal else {}
    t2 = time.perf_counter()
    generated = int(sum(r.loss_mask.sum() for r in rollouts))
    if config.log_rollouts_every and (step == 0 or (step + 1) % config.log_rollouts_every == 0):
        logged = (kept, batch.advantages) if batch is not None else (rollouts, np.zeros(len(rollouts)))
        write_step_rollouts(Path(config.output_dir), step + 1, *logged)
    return {
        "step": step + 1,
        "train/reward": float(np.mean([r.reward for r in rollouts])),
        "train/success": float(np.mean([r.success for r in rollouts])),
        "train/turns": float(np.mean([r.turns for r in rollouts])),
        "train/generated_tokens": generated,
        "time/rollout_s": t1 - t0,
        "time/update_s": t2 - t1,
        "train/skipped_update": float(not signal),
        "train/env_errors": sum(r.end_reason == "env_error" for r in rollouts),
        "stats/zero_std_groups": float(zero_std),
        **end_fractions(rollouts),
        **metrics,
    }


def end_fractions(rollouts: list[Any]) -> dict[str, float]:
    """``train/end/<reason>``: the fraction of the step's episodes that ended for each reason."""
    from textgym.env import END_REASONS

    reasons = [r.end_reason for r in rollouts]
    return {f"train/end/{reason}": reasons.count(reason) / len(reasons) for reason in END_REASONS}


def write_step_rollouts(out: Path, step: int, rollouts: list[Any], advantages: np.ndarray) -> Path:
    """``rollouts/step_XXXXXX.jsonl``: the step's episodes with their ``step`` and ``advantage``
    (a resumed run rewrites the same file identically)."""
    path = out / ROLLOUTS / f"step_{step:06d}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for r, advantage in zip(rollouts, advantages):
            fh.write(json.dumps({"step": step, "advantage": float(advantage), **r.to_dict()}, ensure_ascii=False) + "\n")
    return path


def sft_warm_start(config: TrainConfig) -> Path:
    """The SFT phase of a run (skipped when its result exists): a HF directory GRPO starts from."""
    from textgym.algos.sft import sft

    return sft(config.sft_config())


def save_checkpoint(learner: Any, out: Path, step: int) -> Path:
    """Write ``checkpoints/step_XXXXXX`` atomically (a temporary directory, then a rename).

    A run killed while saving leaves only a ``.tmp`` directory, which resumption ignores. The
    oldest checkpoints beyond the last ``KEEP_CHECKPOINTS`` are removed.
    """
    root = out / CHECKPOINTS
    final = root / f"step_{step:06d}"
    tmp = root / f"step_{step:06d}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    learner.save(tmp)
    (tmp / RUN_STATE).write_text(json.dumps({"step": step}) + "\n", encoding="utf-8")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    for old in _checkpoints(root)[:-KEEP_CHECKPOINTS]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(out: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint of a run directory, or None."""
    found = _checkpoints(Path(out) / CHECKPOINTS)
    return found[-1] if found else None


def _checkpoints(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.endswith(".tmp") and (p / RUN_STATE).is_file())


def _summary_line(record: dict[str, Any]) -> str:
    text = f"reward {record['train/reward']:.2f}"
    if "eval/success" in record:
        text += f" · held-out success {record['eval/success']:.2f}"
    return text


def _evaluation(record: dict[str, Any]) -> dict[str, Any]:
    return {k.removeprefix("eval/"): v for k, v in record.items() if k.startswith("eval/")} | {"step": record["step"]}


def _summary(config: TrainConfig, out: Path, records: list[dict[str, Any]], step: int, seconds: float) -> dict[str, Any]:
    evals = [r for r in records if "eval/success" in r]
    return {
        "env": config.env,
        "backend": config.backend,
        "model": config.model,
        "steps": step,
        "before": _evaluation(evals[0]) if evals else None,
        "after": _evaluation(evals[-1]) if evals else None,
        "output_dir": str(out),
        "minutes": round(seconds / 60, 2),
    }


# ----- command line -----


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``textgym train``: the run (``TrainConfig``) and the objective (``GRPOConfig``)."""
    _add_common(parser)
    parser.add_argument("--output-dir", default=None, help="run directory (default runs/<env>-<backend>)")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the tiny recipe's, else 100)")
    parser.add_argument("--prompts-per-step", type=int, default=None, help="task seeds per step, each played --group-size times (default: recipe, else 8)")
    parser.add_argument("--num-envs", type=int, default=64, help="vector env width")
    parser.add_argument("--vectorization-mode", choices=["sync", "async"], default="sync")
    parser.add_argument("--eval-episodes", type=int, default=128, help="held-out episodes per evaluation")
    parser.add_argument("--eval-every", type=int, default=10, help="evaluate every N steps")
    parser.add_argument("--eval-temperature", type=float, default=0.0, help="0 = greedy")
    parser.add_argument("--save-every", type=int, default=10, help="checkpoint every N steps")
    parser.add_argument("--log-rollouts-every", type=int, default=10,
                        help="write the rollouts of step 1 and every N-th step to rollouts/ for textgym view (0: none)")
    parser.add_argument("--stop-after", type=int, default=None, help="stop after N steps of this invocation (resume later)")
    parser.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True,
                        help="continue from the run's latest checkpoint (--no-resume restarts GRPO; a finished warm start is kept)")
    parser.add_argument("--sft-steps", type=int, default=None, help="SFT warm-start steps before GRPO (0: none)")
    parser.add_argument("--sft-env-kwargs", type=json_object, default=None,
                        help="JSON gym.make keyword arguments of the warm start's tasks (default: the recipe's, else --env-kwargs)")
    parser.add_argument("--sft-demos", type=int, default=None, help="oracle demonstrations for the warm start")
    parser.add_argument("--sft-lr", type=float, default=None, help="warm-start learning rate")
    parser.add_argument("--sft-oracle-kwargs", type=json_object, default=None, help="JSON keyword arguments of the env's oracle_action")
    parser.add_argument("--mesh", default=None, help="JAX device mesh, e.g. data=2,fsdp=4 (default: one device)")
    parser.add_argument("--no-plot", dest="plot", action="store_false", help="do not write curve.png")
    grpo = parser.add_argument_group("GRPO (textgym.algos.grpo.GRPOConfig; unset: the tiny recipe's value, else the default)")
    hints = get_type_hints(GRPOConfig)
    for f in dataclasses.fields(GRPOConfig):
        if f.name == "seed":
            continue  # --seed seeds the whole run
        _add_field(grpo, f.name, hints[f.name])


def run_train(args: argparse.Namespace) -> int:
    """``textgym train``: build the config from ``args``, train, print the before/after summary."""
    config = train_config_from_args(args)
    summary = train(config)
    _print_summary(summary)
    return 0


def train_config_from_args(args: argparse.Namespace) -> TrainConfig:
    overrides = {f.name: getattr(args, f.name, None) for f in dataclasses.fields(GRPOConfig) if f.name != "seed"}
    grpo = recipes.grpo_config(args.env, args.model, seed=args.seed, **overrides)
    return TrainConfig(
        env=args.env,
        env_kwargs=args.env_kwargs,
        backend=args.backend,
        model=args.model,
        output_dir=args.output_dir or _default_dir(args.env, args.backend),
        steps=args.steps,
        prompts_per_step=args.prompts_per_step,
        num_envs=args.num_envs,
        vectorization_mode=args.vectorization_mode,
        chat_template=args.chat_template,
        eval_episodes=args.eval_episodes,
        eval_every=args.eval_every,
        eval_temperature=args.eval_temperature,
        save_every=args.save_every,
        log_rollouts_every=args.log_rollouts_every,
        stop_after=args.stop_after,
        resume=args.resume,
        sft_steps=args.sft_steps,
        sft_env_kwargs=args.sft_env_kwargs,
        sft_demos=args.sft_demos,
        sft_lr=args.sft_lr,
        sft_oracle_kwargs=args.sft_oracle_kwargs,
        seed=args.seed,
        threads=args.threads,
        mesh=args.mesh,
        plot=args.plot,
        progress=args.progress,
        grpo=grpo,
    )


def add_sft_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``textgym sft`` (``SFTConfig``)."""
    _add_common(parser)
    parser.add_argument("--output-dir", default=None, help="run directory (default runs/<env>-sft-<backend>); the model is written to final/")
    parser.add_argument("--steps", type=int, default=None, help="optimiser steps (default: the tiny recipe's, else 100)")
    parser.add_argument("--demos", type=int, default=None, help="oracle demonstrations to collect")
    parser.add_argument("--oracle-kwargs", type=json_object, default=None, help="JSON keyword arguments of the env's oracle_action")
    parser.add_argument("--batch-size", type=int, default=16, help="demonstrations per step")
    parser.add_argument("--lr", type=float, default=None, help="peak learning rate (warm-up, then cosine decay)")
    parser.add_argument("--max-length", type=int, default=1024, help="longest packed sequence in tokens")
    parser.add_argument("--micro-batch-size", type=int, default=16, help="sequences per forward/backward")
    parser.add_argument("--num-envs", type=int, default=32, help="vector env width for collecting demonstrations")


def run_sft(args: argparse.Namespace) -> int:
    """``textgym sft``: warm-start a model on oracle demonstrations; print where it was written."""
    from textgym.algos.sft import sft

    config = SFTConfig(
        env=args.env,
        env_kwargs=args.env_kwargs,
        backend=args.backend,
        model=args.model,
        output_dir=args.output_dir or _default_dir(args.env, f"sft-{args.backend}"),
        steps=args.steps,
        demos=args.demos,
        oracle_kwargs=args.oracle_kwargs,
        batch_size=args.batch_size,
        lr=args.lr,
        max_length=args.max_length,
        micro_batch_size=args.micro_batch_size,
        chat_template=args.chat_template,
        seed=args.seed,
        num_envs=args.num_envs,
        threads=args.threads,
        progress=args.progress,
    )
    final = sft(config)
    print(f"SFT model written to {final}")
    return 0


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", required=True, help="environment id, e.g. textgym/Sudoku-v0")
    parser.add_argument("--env-kwargs", type=json_object, default=None, help="JSON object of gym.make keyword arguments")
    parser.add_argument("--backend", choices=["jax", "torch"], default="torch", help="training framework; nothing else changes")
    parser.add_argument("--model", default="tiny", help="local Hugging Face model directory, or 'tiny' (created offline)")
    parser.add_argument("--chat-template", choices=["auto", "model", "compact"], default="auto",
                        help="'compact' drops the system turn and tool list (default for tiny)")
    parser.add_argument("--seed", type=int, default=0, help="seeds tasks, sampling and the tiny init")
    parser.add_argument("--threads", type=int, default=None, help="intra-op CPU threads of the backend (tiny recipe: 1)")
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")


def _add_field(group: Any, name: str, hint: Any) -> None:
    flag = "--" + name.replace("_", "-")
    choices = get_args(hint)
    if choices and all(isinstance(c, str) for c in choices):
        group.add_argument(flag, choices=choices, default=None)
    elif hint is bool:
        group.add_argument(flag, action=argparse.BooleanOptionalAction, default=None)
    else:
        kind = next((t for t in (int, float) if t is hint or t in choices), float)
        group.add_argument(flag, type=kind, default=None)


def _default_dir(env: str, suffix: str) -> str:
    return f"runs/{env.split('/')[-1].lower()}-{suffix}"


def _print_summary(summary: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console()
    before, after = summary.get("before"), summary.get("after")
    if before and after:
        gain = 100 * (after["success"] - before["success"])
        console.print(
            f"held-out success: {before['success']:.1%} (step {before['step']}) -> {after['success']:.1%} "
            f"(step {after['step']}), {gain:+.1f} points in {summary['minutes']} min"
        )
    console.print(f"run directory: {summary['output_dir']}")
