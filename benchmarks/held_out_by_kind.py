"""Held-out success of a training run's models split by kind of task (Workplace-v0's template,
Code-v0's family): the parts that ``eval/success`` averages over.

Plays the run's held-out seeds exactly as its evaluations did (the same token envs, chat
template, sampler seeds and temperature), once per model, and groups the episodes by a key of
each task's ``metadata``.

    python benchmarks/held_out_by_kind.py runs/workplace-tiny --key template
    python benchmarks/held_out_by_kind.py runs/code-tiny --key family --models sft/final best
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import gymnasium as gym

from textgym.algos import backends, models
from textgym.algos.config import TrainConfig
from textgym.algos.grpo import GRPOConfig, SeedTree
from textgym.algos.grpo.seeds import eval_seeds
from textgym.algos.rollouts import token_envs
from textgym.algos.rollouts.seeded import SeededModelPolicy
from textgym.rollout import collect


def run_config(run: Path) -> TrainConfig:
    """The resolved config a ``textgym train`` run wrote to ``config.json``."""
    fields = json.loads((run / "config.json").read_text(encoding="utf-8"))
    return TrainConfig(**fields | {"grpo": GRPOConfig(**fields["grpo"])})


def kinds(env: str, kwargs: dict, seeds: list[int], key: str) -> dict[int, str]:
    """Each seed's task kind: ``task.metadata[key]`` of the env reset with it."""
    plain = gym.make(env, **kwargs)
    found = {}
    for seed in seeds:
        plain.reset(seed=seed)
        found[seed] = str(plain.unwrapped.task.metadata.get(key))
    return found


def success_by_kind(config: TrainConfig, model: Path, env: str, kind_of: dict[int, str]) -> dict[str, list[bool]]:
    """Play ``kind_of``'s seeds with ``model`` as the run's evaluation at step 0 does; successes by kind."""
    policy = backends.load_backend(config.backend, config.threads).load_model(model, sampler_dtype=config.grpo.sampler_dtype)
    tokenizer = models.load_tokenizer(model)
    template = token_envs.chat_template(config.chat_template, config.model)
    venv = token_envs.token_venv(
        env,
        config.kwargs_of(env),
        tokenizer,
        template,
        min(config.num_envs, len(kind_of)),
        config.vectorization_mode,
        config.on_template_break,
    )
    actor = SeededModelPolicy(
        policy,
        SeedTree(config.grpo.seed),
        "eval_sampler",
        0,
        row=config.envs.index(env),
        max_new_tokens=config.grpo.max_new_tokens,
        temperature=config.eval_temperature,
        top_p=config.grpo.top_p,
    )
    out: dict[str, list[bool]] = defaultdict(list)
    for rollout in collect(venv, actor, seeds=list(kind_of), group_size=1):
        out[kind_of[rollout.seed]].append(rollout.success)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a textgym train output directory")
    parser.add_argument("--key", required=True, help="the task metadata key to group by (template, family, ...)")
    parser.add_argument("--env", help="the env of a mixture's run to score (default: its first)")
    parser.add_argument("--episodes", type=int, help="the first this many held-out tasks (default: the run's eval_episodes)")
    parser.add_argument("--models", nargs="+", default=["sft/final", "final"], help="model directories inside the run")
    args = parser.parse_args()
    config = run_config(args.run)
    env = args.env or config.envs[0]
    kind_of = kinds(env, config.kwargs_of(env), eval_seeds(args.episodes or config.eval_episodes), args.key)
    results = {name: success_by_kind(config, args.run / name, env, kind_of) for name in args.models}
    print(f"| {args.key} | tasks | " + " | ".join(args.models) + " |")
    print("|---|---:|" + "---:|" * len(args.models))
    for kind in sorted(set(kind_of.values())):
        cells = [f"{sum(results[m][kind])} ({100 * sum(results[m][kind]) / len(results[m][kind]):.1f}%)" for m in args.models]
        print(f"| `{kind}` | {len(results[args.models[0]][kind])} | " + " | ".join(cells) + " |")
    totals = [f"{100 * sum(sum(v) for v in results[m].values()) / len(kind_of):.1f}%" for m in args.models]
    print(f"| all | {len(kind_of)} | " + " | ".join(totals) + " |")


if __name__ == "__main__":
    main()
