"""Prefill work and sampling time per episode, with and without an episode's keys and values kept across turns.

Episodes are the envs' oracle episodes as token trajectories (``TokenObservation`` with the
model's tokenizer and template; Sudoku by moves: one ``place`` call a turn, the board fed back,
``--blanks`` turns; Workplace-v0: the ``workplace-tiny`` preset's tasks and its lookup
demonstrator, a search and then a change that needs the search's result, two turns). They are replayed through the
sampler turn by turn, every live episode of a turn in one ``generate`` call, each turn's prompt
the trajectory up to that turn's action, generating as many tokens as the oracle's action (EOS
off) so the decode work is the episode's. With JAX each mode first replays the episodes once to
compile, then once timed. Modes:

* ``reuse``: the samplers' context cache (the default): a turn prefills only what the cache lacks.
  The replay samples other ids than the oracle wrote, so a turn prefills the oracle's action and
  the env's reply; a real episode has its sampled ids cached too, so these counts are an upper
  bound;
* ``full``: ``contexts`` off, every turn prefills its whole context;
* ``once``: the goal's yardstick, one ``generate`` call over the episodes' final contexts,
  generating as many tokens as the longest episode's actions hold (EOS off): what sampling the
  final context once costs.

Printed per row: turns and final context tokens per episode, prompt tokens run through the
model per episode (cached ones not counted, padding counted), sampling CPU seconds per episode
(``time.process_time``: every thread of this process), wall seconds, and CPU time over ``once``'s.
``reuse`` and ``full`` must sample the same ids (checked).

    python benchmarks/prefill_bench.py                                  # tiny model, both backends
    python benchmarks/prefill_bench.py --model smollm2-135m
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from typing import Any

import numpy as np

from textgym.algos.config.presets import WORKPLACE_TINY

ENVS = {
    "sudoku-moves": ("textgym/Sudoku-v0", {"size": 4, "blanks": 6}, {"place": 1}),
    # The plain oracle sends every call in one turn, which leaves a cache nothing to reuse.
    "workplace": ("textgym/Workplace-v0", WORKPLACE_TINY.env_kwargs, WORKPLACE_TINY.sft_oracle_kwargs),
}


def oracle_episodes(env: str, kwargs: dict, oracle_kwargs: dict, tokenizer: Any, template: str | None, episodes: int) -> list:
    """The env's oracle episodes as token rollouts (``token_ids``, ``turn_spans``)."""
    from textgym.algos.rollouts.token_envs import token_venv
    from textgym.policies.base import PolicyOutput
    from textgym.rollout import collect

    class Oracle:
        def act(self, observations, infos=None):
            return PolicyOutput(list(venv.unwrapped.call("oracle_action", **oracle_kwargs)))

    venv = token_venv(env, kwargs, tokenizer, template, episodes)
    try:
        rollouts = collect(venv, Oracle(), seeds=list(range(episodes)))
    finally:
        venv.close()
    assert all(r.success for r in rollouts), "the oracle failed an episode"
    return rollouts


class Timer:
    """CPU and wall seconds of the ``generate`` calls made through :meth:`generate`."""

    def __init__(self):
        self.cpu = self.wall = 0.0
        self.prompt_tokens = 0

    def generate(self, model: Any, prompts: list[np.ndarray], **kwargs) -> tuple[list, list]:
        from textgym.algos.grpo.prompts import distinct_prompts

        self.prompt_tokens += sum(len(p) for p in distinct_prompts(prompts)[0])
        cpu, wall = time.process_time(), time.perf_counter()
        out = model.generate(prompts, **kwargs)
        self.cpu += time.process_time() - cpu
        self.wall += time.perf_counter() - wall
        return out


def replay(model: Any, rollouts: list) -> tuple[Timer, list]:
    """Sample every turn of the episodes, the live ones together; return the timer and the samples."""
    timer, samples = Timer(), []
    for turn in range(max(r.turns for r in rollouts)):
        live = [r for r in rollouts if turn < r.turns]
        new = max(end - start for r in live for start, end in [r.turn_spans[turn]])
        ids, lps = timer.generate(
            model, [r.token_ids[: r.turn_spans[turn][0]] for r in live], max_new_tokens=new, temperature=1.0, seed=turn, eos_ids=()
        )
        samples += list(zip(ids, lps, strict=True))
        if model.contexts is not None:
            model.release([r.token_ids for r in live if turn + 1 == r.turns])
    return timer, samples


def once(model: Any, rollouts: list) -> Timer:
    """Sample the episodes' final contexts once, as many tokens as the longest one's actions hold."""
    timer = Timer()
    new = max(int(r.loss_mask.sum()) for r in rollouts)
    timer.generate(model, [r.token_ids for r in rollouts], max_new_tokens=new, temperature=1.0, seed=0, eos_ids=())
    return timer


def row(name: str, backend: str, mode: str, rollouts: list, timer: Timer, prefilled: int, yardstick: float) -> dict:
    n = len(rollouts)
    return {
        "env": name,
        "backend": backend,
        "mode": mode,
        "turns": float(np.mean([r.turns for r in rollouts])),
        "final_tokens": float(np.mean([len(r.token_ids) for r in rollouts])),
        "prefilled_per_episode": prefilled / n,
        "cpu_s_per_episode": timer.cpu / n,
        "wall_s_per_episode": timer.wall / n,
        "cpu_vs_once": timer.cpu / yardstick,
    }


def bench(backend: str, path: str, model_name: str, args: argparse.Namespace) -> list[dict]:
    from textgym.algos.backends import load_backend
    from textgym.algos.models import load_tokenizer
    from textgym.algos.rollouts.context_cache import ContextCache
    from textgym.algos.rollouts.token_envs import chat_template

    model = load_backend(backend, args.threads).load_model(path)
    cap = model.contexts.max_bytes
    tokenizer, template = load_tokenizer(path), chat_template("auto", model_name)
    rows = []
    for name in args.envs:
        env, kwargs, oracle_kwargs = ENVS[name]
        rollouts = oracle_episodes(env, kwargs, oracle_kwargs, tokenizer, template, args.episodes)
        warmups = 1 if backend == "jax" else 0  # JAX compiles each shape on its first call
        model.contexts = None
        for _ in range(warmups):
            once(model, rollouts)
        yardstick = once(model, rollouts)
        rows.append(row(name, backend, "once", rollouts, yardstick, yardstick.prompt_tokens, yardstick.cpu))
        runs = {}
        for mode in ("full", "reuse"):
            for _ in range(1 + warmups):
                model.contexts = None if mode == "full" else ContextCache(cap)
                timer, samples = replay(model, rollouts)
            runs[mode] = samples
            prefilled = timer.prompt_tokens if mode == "full" else model.contexts.prefilled_tokens
            rows.append(row(name, backend, mode, rollouts, timer, prefilled, yardstick.cpu))
        diff = max(float(np.max(np.abs(a[1] - b[1]), initial=0)) for a, b in zip(runs["full"], runs["reuse"], strict=True))
        if any(not np.array_equal(a[0], b[0]) for a, b in zip(runs["full"], runs["reuse"], strict=True)) or diff > 1e-4:
            sys.exit(f"{name} {backend}: reuse sampled other ids or logprobs (max diff {diff:.1e}) than a full prefill")
        rows[-1]["max_logprob_diff"] = diff
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny", help="tiny, smollm2-135m or a HF directory")
    parser.add_argument("--backends", nargs="+", default=["torch", "jax"], choices=["torch", "jax"])
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--episodes", type=int, default=4, help="episodes per env, replayed together")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the rows here")
    args = parser.parse_args()

    from textgym.algos import models

    with tempfile.TemporaryDirectory() as workdir:
        path = str(models.resolve(args.model, workdir, seed=0, progress=False))
        rows = [r for backend in args.backends for r in bench(backend, path, args.model, args)]
    print(f"{'env':<13} {'backend':<6} {'mode':<6} {'turns':>5} {'final':>6} {'prefilled':>9} {'CPU s':>7} {'wall s':>7} {'x once':>6}")
    for r in rows:
        print(
            f"{r['env']:<13} {r['backend']:<6} {r['mode']:<6} {r['turns']:5.1f} {r['final_tokens']:6.0f} {r['prefilled_per_episode']:9.0f} "
            f"{r['cpu_s_per_episode']:7.2f} {r['wall_s_per_episode']:7.2f} {r['cpu_vs_once']:6.2f}"
            + (f"  (max |logprob diff| {r['max_logprob_diff']:.1e})" if "max_logprob_diff" in r else "")
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"args": vars(args), "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
