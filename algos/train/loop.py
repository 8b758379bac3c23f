"""The training loop of ``textgym train``: GRPO on any textgym env with the JAX or the torch backend.

The loop, top to bottom (one GRPO step per iteration)::

    model, learner = backend.load_model(model), backend.Learner(model, config.grpo)
    tree = SeedTree(config.seed)
    for step in range(steps):
        rollouts = collect(venv, SeededModelPolicy(model, tree, "train_sampler", step),
                           seeds=tree.task_seeds(step, prompts_per_step), group_size=G)
        metrics  = learner.train_step(pack(rollouts, config.grpo, pad_id))   # skipped if no signal
        every eval_every: held-out success (greedy) on the fixed seeds from EVAL_SEED_OFFSET
        every save_every: checkpoint (learner state + step), atomically
        every log_rollouts_every: the step's rollouts to rollouts/step_XXXXXX.jsonl (for textgym view)

Before it, an optional SFT warm start on oracle demonstrations (:mod:`textgym.algos.train.sft`);
after it, ``final/`` (a HF directory), ``summary.json`` (held-out success before and after) and
``curve.png``. Every metrics record also goes to the experiment trackers of ``--report-to``
(:mod:`~textgym.algos.train.trackers`). Every seed is a function of ``config.seed`` and its place in the run (one
:class:`~textgym.algos.grpo.SeedTree`), and the learner's state (weights, optimiser, KL reference)
is checkpointed whole, so a resumed run continues exactly as the uninterrupted one would have.

This module imports neither JAX nor torch: the backend is imported when a run starts.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from textgym.algos import backends, models
from textgym.algos.config import TrainConfig
from textgym.algos.config.fields import to_json
from textgym.algos.distributed import processes
from textgym.algos.rollouts import ahead, token_envs
from textgym.algos.train.episodes import Episodes, collect_step
from textgym.algos.train.report import MetricsLog, plot_curve, progress_bar, summarize, summary_line
from textgym.algos.train.run_dir import Start, keep_best, open_run, remove_checkpoints, save_checkpoint
from textgym.algos.train.step import grpo_step
from textgym.algos.train.trackers import check_installed, open_reporter
from textgym.arguments import check_env_ids


def train(config: TrainConfig) -> dict[str, Any]:
    """Run (or resume) a training run; return its summary (also written to ``summary.json``).

    Returns:
        ``{"steps", "before", "after", "output_dir", "final", "minutes"}`` where ``before`` and
        ``after`` are the held-out evaluations of the model GRPO started from and of the final one.
    """
    config = join_run(config)
    run, started = open_run(config), time.perf_counter()
    model_dir = start_model(config, run.out)
    model, learner = load_learner(config, run, model_dir)
    resumed = run.step if run.checkpoint is not None else None
    writer = processes.is_writer()
    with open_reporter(config.report_to, run.out, json.loads(to_json(config)), fresh=resumed is None, writer=writer) as reporter:
        log = processes.writer_first(lambda: MetricsLog(run.out / "metrics.jsonl", keep_until=resumed, writer=writer, reporter=reporter))
        template = token_envs.chat_template(config.chat_template, config.model)
        episodes = Episodes(config, model, models.load_tokenizer(model_dir), template)
        step, background = run.step, None
        stop = config.steps if config.stop_after is None else min(config.steps, step + config.stop_after)
        try:
            if step == 0:
                log.write(keep_best(learner, run.out, {"step": 0} | episodes.evaluate(0), log.records, template))
            saved = step
            collect = lambda sampler, at: collect_step(config, sampler, episodes.train, at)
            background = ahead.start(config.grpo.max_off_policy_steps, collect, model, step, stop)
            with progress_bar(f"GRPO ({config.backend})", total=config.steps, completed=step, enabled=config.progress) as bar:
                try:
                    while step < stop:
                        record = grpo_step(config, model, learner, episodes.train, step, background and background.take(step))
                        step += 1
                        if background:
                            background.publish(step, model)
                        if step % config.eval_every == 0 or step == config.steps:
                            record = keep_best(learner, run.out, record | episodes.evaluate(step), log.records, template)
                        log.write(record)
                        if step % config.save_every == 0 or step == stop:
                            save_checkpoint(learner, run.out, step, template)
                            saved = step
                        bar.update(advance=1, info=summary_line(record))
                except KeyboardInterrupt:
                    if step > saved:  # nothing lost: the last finished step is kept
                        save_checkpoint(learner, run.out, step, template)
                    raise
        finally:
            if background is not None:
                background.close()
            episodes.close()
        summary = finish(config, run.out, learner, log.records, step, template, time.perf_counter() - started)
        reporter.finish(summary, step)
    return summary


def join_run(config: TrainConfig) -> TrainConfig:
    """The resolved config of this process, after the checks that stop a run before anything is
    built (unknown envs, dead servers, a world size that does not split the groups or that
    asynchronous GRPO cannot run on). A config built in Python is resolved here, the one time;
    the command line's comes resolved and stays the same object."""
    config = config.resolved()
    check_env_ids(config.envs)
    check_installed(config.report_to)
    if config.env_url:
        from textgym.remote import check_servers

        check_servers(config.env_url)
    processes.init(config.backend)
    processes.my_block(config.prompts_per_step)
    ahead.check_processes(config.grpo.max_off_policy_steps, processes.world_size())
    if not processes.is_writer():
        config = config.replace(progress=False, plot=False)  # one progress bar and one curve: rank 0's
    return config


def start_model(config: TrainConfig, out: Path) -> Path:
    """The HF directory GRPO starts from: the SFT warm start's result (made now unless it exists),
    else what ``--model`` names."""
    models.quiet_transformers()
    if config.sft_steps:
        from textgym.algos.train.sft import sft

        return sft(config.sft_config())
    make = lambda: models.resolve(
        config.model, out, seed=config.seed, progress=config.progress, tiny_layers=config.tiny_layers, tiny_vocab=config.tiny_vocab
    )
    return processes.writer_first(make)


def load_learner(config: TrainConfig, run: Start, model_dir: Path) -> tuple[Any, Any]:
    """The backend's language model and its learner, restored from ``run``'s checkpoint when it
    has one (``--no-resume``: its old checkpoints removed instead)."""
    backend = backends.load_backend(config.backend, config.threads)
    # A LoRA checkpoint holds the adapter only: the base weights come from the start model.
    weights = run.checkpoint if run.checkpoint is not None and not config.grpo.lora_rank else model_dir
    model = backend.load_model(weights, sampler_dtype=config.grpo.sampler_dtype)
    mesh = config.mesh or (backends.processes_mesh(backend) if processes.world_size() > 1 else None)
    learner = backends.make_learner(backend, model, config.grpo, mesh, config.data_parallel)
    if run.checkpoint is not None:
        learner.restore(run.checkpoint)
    elif config.resume is False:
        processes.writer_only(lambda: remove_checkpoints(run.out))
    return model, learner


def finish(
    config: TrainConfig, out: Path, learner: Any, records: list[dict[str, Any]], step: int, template: str | None, seconds: float
) -> dict[str, Any]:
    """``final/`` (when every step was taken), ``summary.json`` and ``curve.png``; the summary."""
    summary = summarize(config, out, records, step, seconds)
    if step >= config.steps:
        learner.export(out / "final")
        processes.writer_only(lambda: token_envs.keep_chat_template(out / "final", template))
        summary["final"] = str(out / "final")
    if processes.is_writer():
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if config.plot:
        plot_curve(records, out / "curve.png", title=f"{'+'.join(config.envs)} · {config.backend} · {config.model}")
    return summary
