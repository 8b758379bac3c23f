"""A GRPO update alone, on recorded multi-turn episodes: CPU seconds of ``Learner.train_step``.

Inside a whole run (``floor_report.py``) the update waits for a step's sampling, which on a loaded
machine takes most of an hour. This times the update alone, on the episodes a run logged
(``rollouts/step_N.jsonl``), replayed through the env and a model's tokenizer
(:class:`~textgym.wrappers.TokenObservation` with the run's chat template): the tokens that model
would train on, env turns between the policy's. They are packed with a preset's GRPO settings
(its KL reference included), as the training loop packs them, without the zero-std filter. The
episodes' old logprobs are the model's own, computed before the timing, as a sampler's would be
given: a recorded step has them, so ``train_step`` makes no extra pass for them.

Each backend runs in this process, one after the other; each ``train_step`` is timed in CPU
seconds (``time.process_time``: the share of a core a loaded machine gives does not enter), the
first apart (JAX compiles in it), then the median of ``--repeats``. Run it with another checkout's
interpreter to time that code on the same batch.

Given several steps' files (``--rollouts runs/x/rollouts/step_*.jsonl``), one learner trains on
each in turn, as a run does (the preset's zero-std filter first), and each step is timed once:
what a run pays, JAX's compilations of each new batch shape included (counted, with their CPU
seconds, from ``jax.monitoring``).

    nice -n 15 python benchmarks/update_bench.py --rollouts runs/moves/rollouts/step_000001.jsonl \\
        --preset sudoku-moves-tiny --model tiny --episodes 16 --backends torch jax
    nice -n 15 python benchmarks/update_bench.py --rollouts runs/moves/rollouts/step_000001.jsonl \\
        --preset sudoku-moves-tiny --model smollm2-135m --chat-template model --episodes 8 --micro-batch-size 8
    nice -n 15 python benchmarks/update_bench.py --rollouts runs/code/rollouts/step_*.jsonl --preset code-tiny --backends jax
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from typing import Any


def replay(record: Any, tokenizer: Any, template: str | None) -> Any:
    """``record`` with the tokens its assistant turns give under ``tokenizer`` (no logprobs)."""
    import gymnasium as gym

    from textgym.wrappers import TokenObservation

    env = TokenObservation(gym.make(record.env_id, **(record.env_kwargs or {})), tokenizer, chat_template=template)
    env.reset(seed=record.seed)
    for message in record.messages:
        if message["role"] == "assistant":
            *_, terminated, truncated, _ = env.step(message["content"])
            if terminated or truncated:
                break
    trajectory = env.trajectory()
    env.close()
    return dataclasses.replace(
        record,
        token_ids=trajectory.token_ids,
        loss_mask=trajectory.loss_mask,
        logprobs=None,
        turn_spans=list(trajectory.turn_spans),
        sample_spans=None if trajectory.sample_spans is None else list(trajectory.sample_spans),
    )


def packed(model: Any, rollouts: list[Any], grpo: Any) -> Any:
    """The rollouts packed as the training loop packs them, with the policy's logprobs as the old ones."""
    from textgym.algos.grpo import pack

    batch = pack(rollouts, grpo, pad_id=model.pad_id)
    return batch.replace(
        old_logprobs=model.logprobs(batch.input_ids, batch.attention_mask, temperature=grpo.temperature, scored=batch.loss_mask)
    )


def step_cpu_seconds(learner: Any, batch: Any) -> float:
    start = time.process_time()
    learner.train_step(batch)
    return time.process_time() - start


class Compilations:
    """JAX's backend compilations while :attr:`counting`: how many, and their seconds."""

    def __init__(self) -> None:
        self.counting, self.count, self.seconds = False, 0, 0.0

    def listen(self) -> None:
        import jax

        jax.monitoring.register_event_duration_secs_listener(self._event)

    def _event(self, event: str, seconds: float, **_: Any) -> None:
        if self.counting and event == "/jax/core/compile/backend_compile_duration":
            self.count, self.seconds = self.count + 1, self.seconds + seconds


def run_steps(backend: Any, path: str, steps: list[list[Any]], grpo: Any, compilations: Compilations) -> dict[str, Any]:
    """One learner trained on each step's rollouts in turn, as a run trains: the preset's zero-std
    filter first (a step without a group left is skipped); each ``train_step`` timed once."""
    from textgym.algos.grpo import drop_zero_std_groups

    model = backend.load_model(path)
    learner, seconds = None, []
    compilations.count, compilations.seconds = 0, 0.0
    for rollouts in steps:
        kept, _ = drop_zero_std_groups(rollouts, grpo)
        if not kept:
            continue
        batch = packed(model, kept, grpo)
        learner = learner or backend.Learner(model, grpo)
        compilations.counting = True
        seconds.append(round(step_cpu_seconds(learner, batch), 3))
        compilations.counting = False
    return {
        "steps": len(seconds),
        "skipped": len(steps) - len(seconds),  # no group left by the zero-std filter
        "step_cpu_s": seconds,
        "total_cpu_s": round(sum(seconds), 2),
        "median_cpu_s": round(statistics.median(seconds), 3),
        "compilations": compilations.count,
        "compile_s": round(compilations.seconds, 2),
    }


def one_step(backend: Any, path: str, rollouts: list[Any], grpo: Any, repeats: int) -> dict[str, Any]:
    """One learner's first ``train_step`` on the step's batch, and the median of ``repeats`` more."""
    model = backend.load_model(path)
    batch = packed(model, rollouts, grpo)
    learner = backend.Learner(model, grpo)
    first = step_cpu_seconds(learner, batch)
    steady = statistics.median(step_cpu_seconds(learner, batch) for _ in range(repeats)) if repeats else first
    return {
        "rows_x_columns": list(batch.shape),
        "real_tokens": int(batch.attention_mask.sum()),
        "trained_tokens": batch.token_count,
        "first_cpu_s": round(first, 3),
        "update_cpu_s": round(steady, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rollouts", required=True, nargs="+", help="a run's rollouts/step_N.jsonl (several: trained on in turn)")
    parser.add_argument("--episodes", type=int, default=None, help="the first N episodes (whole groups; default: all)")
    parser.add_argument("--preset", default="sudoku-moves-tiny", help="whose GRPO settings pack and train")
    parser.add_argument("--model", default="tiny", help="what --model takes (tiny: the preset's size)")
    parser.add_argument("--chat-template", default="auto", choices=("auto", "model", "compact"))
    parser.add_argument("--backends", nargs="+", default=["torch", "jax"], choices=("torch", "jax"))
    parser.add_argument("--micro-batch-size", type=int, default=None, help="instead of the preset's")
    parser.add_argument("--repeats", type=int, default=3, help="timed steps after the first (0: the first alone)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()

    from textgym.algos import models
    from textgym.algos.backends import load_backend
    from textgym.algos.config.presets import PRESETS
    from textgym.algos.grpo import policy_prefix
    from textgym.algos.rollouts.token_envs import chat_template
    from textgym.rollout import read_rollouts

    models.quiet_transformers()
    preset = PRESETS[args.preset]
    grpo = preset.grpo if args.micro_batch_size is None else dataclasses.replace(preset.grpo, micro_batch_size=args.micro_batch_size)
    # tiny: a fresh random model of the preset's size (the update's cost does not depend on its weights).
    path = models.resolve(args.model, tempfile.mkdtemp(), tiny_layers=preset.tiny_layers, tiny_vocab=preset.tiny_vocab)
    template = chat_template(args.chat_template, args.model)
    tokenizer = models.load_tokenizer(path)
    steps = [[policy_prefix(replay(r, tokenizer, template)) for r in read_rollouts(f)[: args.episodes]] for f in args.rollouts]
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "model": args.model,
        "episodes": len(steps[0]),
        "argv": sys.argv[1:],
    }
    compilations = Compilations()
    for name in args.backends:
        backend = load_backend(name, args.threads)
        if name == "jax":
            compilations.listen()
        if len(steps) > 1:
            results[name] = run_steps(backend, path, steps, grpo, compilations)
        else:
            results[name] = one_step(backend, path, steps[0], grpo, args.repeats)
        print(f"{name}: {json.dumps(results[name])}", file=sys.stderr, flush=True)
    text = json.dumps(results, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
