"""Reward profiling: ``textgym eval <id> --policy ... [--policy ...]`` compares policies on the same seeds.

Each policy plays ``--episodes`` tasks (seeds ``S``, ``S+1``, ...) ``--k`` times each. We report
success (pass@1), the unbiased pass@k and pass^k estimators over the ``k`` attempts per task,
mean turns and reward, success by task category when the env has categories, a table, an
optional PNG plot and the rollouts as JSONL. A profile with the oracle near 1.0 and random near
0.0 is the first check of a new env's verifier; a real model lands in between.

Example::

    textgym eval textgym/Workplace-v0 --policy oracle --policy random \\
        --policy openai:Qwen/Qwen3-8B@http://localhost:8000/v1 --episodes 50 --k 4 --plot profile.png

A ``model:<dir|file.gguf|preset>`` policy plays in token space: its episodes run through a
:class:`~textgym.wrappers.TokenObservation` of the same env and seeds, batched through the
``--backend``'s sampler, and land in the same table, plot and JSONL (with their token ids).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from textgym.cli import json_object, seed_int
from textgym.error import require
from textgym.policies.base import Policy
from textgym.rollout import Rollout


@dataclass(frozen=True)
class PolicySpec:
    """A ``--policy`` value: ``oracle``, ``random``, ``openai:<model>@<base_url>`` or ``model:<model>``."""

    kind: str
    model: str | None = None
    base_url: str | None = None

    @property
    def name(self) -> str:
        return self.kind if self.model is None else f"{self.kind}:{self.model}"

    @classmethod
    def parse(cls, text: str) -> "PolicySpec":
        if text in ("oracle", "random"):
            return cls(text)
        if text.startswith("model:") and len(text) > len("model:"):
            return cls("model", text[len("model:") :])
        if text.startswith("openai:"):
            # The URL starts at the "@" followed by a scheme, so model names may contain "@".
            rest = text[len("openai:") :]
            for scheme in ("@http://", "@https://"):
                at = rest.find(scheme)
                if at > 0:
                    return cls("openai", rest[:at], rest[at + 1 :])
        raise ValueError(
            f"--policy must be oracle, random or openai:<model>@<base_url> "
            f"(e.g. openai:Qwen/Qwen3-8B@http://localhost:8000/v1), or model:<dir|file.gguf|preset> "
            f"(e.g. model:smollm2-135m), got {text!r}"
        )


@dataclass
class PolicyReport:
    """The profile of one policy: its rollouts and the metrics computed from them."""

    name: str
    rollouts: list[Rollout]
    k: int
    seconds: float
    categories: Mapping[int, str | None] = field(default_factory=dict)

    def _by_seed(self) -> dict[int | None, list[bool]]:
        groups: dict[int | None, list[bool]] = defaultdict(list)
        for r in self.rollouts:
            groups[r.seed].append(bool(r.success))
        return groups

    @property
    def success(self) -> float:
        return float(np.mean([r.success for r in self.rollouts]))

    @property
    def pass_at_k(self) -> float:
        return float(np.mean([pass_at_k(len(s), sum(s), self.k) for s in self._by_seed().values()]))

    @property
    def pass_hat_k(self) -> float:
        return float(np.mean([pass_hat_k(len(s), sum(s), self.k) for s in self._by_seed().values()]))

    @property
    def mean_turns(self) -> float:
        return float(np.mean([r.turns for r in self.rollouts]))

    @property
    def mean_reward(self) -> float:
        return float(np.mean([r.reward for r in self.rollouts]))

    @property
    def end_reasons(self) -> dict[str, int]:
        """Episodes per ``end_reason`` (every reason of :data:`textgym.env.END_REASONS`, zeros too)."""
        from textgym.env import END_REASONS

        counts = {reason: 0 for reason in END_REASONS}
        for r in self.rollouts:
            key = r.end_reason or "unrecorded"
            counts[key] = counts.get(key, 0) + 1
        return counts

    @property
    def by_category(self) -> dict[str, float]:
        """Success rate per task category (empty when the env's tasks have none)."""
        groups: dict[str, list[bool]] = defaultdict(list)
        for r in self.rollouts:
            category = self.categories.get(r.seed)
            if category is not None:
                groups[str(category)].append(bool(r.success))
        return {c: float(np.mean(v)) for c, v in sorted(groups.items())}


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` attempts with ``c`` successes: P(some of k attempts succeeds).

    The estimator of Chen et al. 2021 (Codex, eq. 1): ``1 - C(n-c, k) / C(n, k)``.
    """
    _check_nck(n, c, k)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k from ``n`` attempts with ``c`` successes: P(all of k attempts succeed).

    The reliability metric of tau-bench (Yao et al. 2024): ``C(c, k) / C(n, k)``.
    """
    _check_nck(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check_nck(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")


def evaluate(
    venv: gym.vector.VectorEnv,
    policies: Mapping[str, Callable[[gym.vector.VectorEnv], Policy]],
    seeds: Sequence[int],
    k: int = 1,
    categories: Mapping[int, str | None] | None = None,
    on_episodes: Callable[[str, int], None] | None = None,
) -> list[PolicyReport]:
    """Run every policy on the same seeds, ``k`` episodes per seed, and profile each.

    Args:
        venv: The vector env all policies play (reset with the seeds, so runs are comparable).
        policies: Name -> function making the policy for ``venv`` (the oracle needs it).
        seeds: One seed per task.
        k: Attempts per seed (the ``k`` of pass@k and pass^k).
        categories: Seed -> task category, for success by category.
        on_episodes: Called with (policy name, episodes just finished), e.g. for a progress bar.
    """
    from textgym.rollout import collect

    env_id = getattr(venv.spec, "id", None)
    counted = venv if on_episodes is None else _EpisodeCounter(venv, on_episodes)
    reports = []
    for name, make_policy in policies.items():
        if on_episodes is not None:
            counted.name = name
        policy = make_policy(counted)
        started = time.perf_counter()
        try:
            rollouts = collect(counted, policy, seeds=list(seeds), group_size=k, env_id=env_id)
        finally:
            if callable(getattr(policy, "close", None)):
                policy.close()  # an endpoint policy's threads and connections
        reports.append(PolicyReport(name, rollouts, k, time.perf_counter() - started, dict(categories or {})))
    return reports


class _EpisodeCounter(gym.vector.VectorWrapper):
    """Reports the seeded episodes that finished at each vector step (drives the progress bar).

    Only episodes begun by a seeded reset count: the unseeded autoreset episodes that a vector
    env starts in slots that ``collect`` leaves idle are not the evaluation's.
    """

    def __init__(self, env: gym.vector.VectorEnv, report: Callable[[str, int], None]):
        super().__init__(env)
        self.report = report
        self.name = ""
        self.live = np.zeros(env.num_envs, dtype=bool)

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None):
        mask = np.ones(self.num_envs, dtype=bool) if not options or "reset_mask" not in options else options["reset_mask"]
        seeded = [s is not None for s in seed] if isinstance(seed, (list, tuple)) else [True] * self.num_envs
        self.live[mask] = np.asarray(seeded)[mask]
        return self.env.reset(seed=seed, options=options)

    def step(self, actions):
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        done = (terminated | truncated) & self.live
        self.live &= ~done
        self.report(self.name, int(done.sum()))
        return obs, rewards, terminated, truncated, infos

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        return self.env.call(name, *args, **kwargs)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self.env.get_attr(name)


def task_categories(env_id: str, seeds: Sequence[int], env_kwargs: Mapping[str, Any]) -> dict[int, str | None]:
    """Each seed's task category: ``info["category"]`` at reset, else the task's metadata."""
    env = gym.make(env_id, **env_kwargs)
    out = {}
    try:
        for seed in seeds:
            _, info = env.reset(seed=seed)
            task = getattr(env.unwrapped, "task", None)
            out[seed] = info.get("category") or (getattr(task, "metadata", None) or {}).get("category")
    finally:
        env.close()
    return out


# ----- command line -----


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``textgym eval``."""
    parser.add_argument("env_id", help="environment id, e.g. textgym/Sudoku-v0")
    parser.add_argument(
        "--policy",
        action="append",
        default=None,
        metavar="SPEC",
        help="oracle, random, openai:<model>@<base_url> or model:<dir|file.gguf|preset>; repeat to compare "
        "(default: oracle and random)",
    )
    parser.add_argument("--episodes", type=int, default=20, help="tasks (seeds) per policy")
    parser.add_argument("--seed", type=seed_int, default=0, help="first seed (>= 0); tasks use seed, seed+1, ...")
    parser.add_argument("--k", type=int, default=1, help="attempts per task, for pass@k and pass^k")
    parser.add_argument("--num-envs", type=int, default=8, help="sub-envs of the vector env")
    parser.add_argument("--vectorization-mode", choices=("sync", "async"), default="sync")
    parser.add_argument("--env-kwargs", type=json_object, default={}, help="JSON object of env keyword arguments")
    parser.add_argument("--plot", default=None, metavar="PNG", help="write a bar plot of the profile")
    parser.add_argument("--out", default=None, metavar="JSONL", help="write every rollout, with its policy")
    openai = parser.add_argument_group("openai policies")
    openai.add_argument("--api-key", default=None, help="API key (default: $OPENAI_API_KEY)")
    openai.add_argument("--concurrency", type=int, default=8, help="requests in flight per policy")
    openai.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    openai.add_argument("--max-retries", type=int, default=2, help="retries per request")
    sampling = parser.add_argument_group("openai and model policies")
    sampling.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (0: greedy)")
    sampling.add_argument("--max-tokens", type=int, default=None, help="most tokens per turn (model policies: 256)")
    local = parser.add_argument_group("model policies")
    local.add_argument("--backend", choices=("jax", "torch"), default="torch", help="whose sampler runs model: policies")
    local.add_argument("--threads", type=int, default=None, help="intra-op CPU threads of the backend (1 is fastest on a busy machine)")


def run(args: argparse.Namespace) -> int:
    """Run ``textgym eval``; bad arguments print one line and raise ``SystemExit(2)``."""
    specs = _validate(args)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    import textgym  # noqa: F401 - registers the ids
    from textgym.tables import console as make_console

    console = make_console()
    seeds = list(range(args.seed, args.seed + args.episodes))
    # Models load (and a GGUF file converts, with its own progress) before the bars start.
    models = {spec: _model_policy(spec, args) for spec in specs if spec.kind == "model"}
    policies = {spec.name: _policy_factory(spec, args) for spec in specs if spec.kind != "model"}
    categories = task_categories(args.env_id, seeds, args.env_kwargs)
    total = args.episodes * args.k
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    done: dict[str, PolicyReport] = {}
    with Progress(*columns, console=console, transient=True) as progress:
        bars = {spec.name: progress.add_task(spec.name, total=total) for spec in specs}
        advance = lambda name, n: progress.advance(bars[name], n)  # noqa: E731
        # Text policies share one vector env; each model plays a token env with its own tokenizer.
        groups = [(_text_venv, policies)] if policies else []
        groups += [(partial(_token_venv, spec=spec, tokenizer=m.tokenizer), {spec.name: lambda venv, m=m: m}) for spec, m in models.items()]
        for make_venv, group in groups:
            venv = make_venv(args)
            try:
                done |= {r.name: r for r in evaluate(venv, group, seeds, args.k, categories, advance)}
            finally:
                venv.close()
    reports = [done[spec.name] for spec in specs]
    _print_tables(console, args.env_id, reports, args.episodes, args.k)
    if args.out:
        _write(args.out, reports)
        console.print(f"rollouts written to {args.out}")
    if args.plot:
        plot(reports, args.plot, title=f"{args.env_id}: {args.episodes} tasks x {args.k}")
        console.print(f"plot written to {args.plot}")
    return 0


def _validate(args: argparse.Namespace) -> list[PolicySpec]:
    import textgym  # noqa: F401 - registers the ids

    try:
        if args.env_id not in gym.registry:
            known = ", ".join(e for e in gym.registry if e.startswith("textgym/"))
            raise ValueError(f"unknown environment id {args.env_id!r}; known ids: {known}")
        for flag, value in (("--episodes", args.episodes), ("--k", args.k), ("--num-envs", args.num_envs), ("--max-tokens", args.max_tokens or 1), ("--threads", args.threads or 1)):
            if value < 1:
                raise ValueError(f"{flag} must be >= 1, got {value}")
        specs = [PolicySpec.parse(p) for p in (args.policy or ["oracle", "random"])]
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ValueError(f"each --policy may appear once, got {', '.join(names)}")
        for flag, path in (("--plot", args.plot), ("--out", args.out)):
            if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
                raise ValueError(f"{flag}: the folder of {path!r} does not exist")
    except ValueError as exc:
        print(f"textgym eval: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    return specs


def _text_venv(args: argparse.Namespace) -> gym.vector.VectorEnv:
    return gym.make_vec(args.env_id, num_envs=args.num_envs, vectorization_mode=args.vectorization_mode, **args.env_kwargs)


def _token_venv(args: argparse.Namespace, spec: PolicySpec, tokenizer: Any) -> gym.vector.VectorEnv:
    from textgym.algos import runtime

    template = runtime.chat_template("auto", spec.model)  # the tiny preset's compact one, else the model's
    return runtime.token_venv(args.env_id, args.env_kwargs, tokenizer, template, args.num_envs, args.vectorization_mode)


def _model_policy(spec: PolicySpec, args: argparse.Namespace) -> Any:
    from textgym.policies import ModelPolicy

    return ModelPolicy.load(
        spec.model, backend=args.backend, max_new_tokens=args.max_tokens or 256, temperature=args.temperature, seed=args.seed,
        threads=args.threads,
    )


def _policy_factory(spec: PolicySpec, args: argparse.Namespace) -> Callable[[gym.vector.VectorEnv], Policy]:
    from textgym.policies import OpenAIPolicy, OraclePolicy, RandomPolicy

    if spec.kind == "oracle":
        return OraclePolicy
    if spec.kind == "random":
        return lambda venv: RandomPolicy(seed=args.seed)
    return lambda venv: OpenAIPolicy(
        spec.base_url,
        spec.model,
        api_key=args.api_key,
        concurrency=args.concurrency,
        timeout=args.timeout,
        max_retries=args.max_retries,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        seed=args.seed,
    )


def _print_tables(console: Any, env_id: str, reports: list[PolicyReport], episodes: int, k: int) -> None:
    """The profile, why the episodes ended and success by category: one row per policy each."""
    from textgym.tables import print_table

    columns = ("episodes", "success", f"pass@{k}", f"pass^{k}", "mean turns", "mean reward", "time (s)")
    rows = [
        (
            r.name,
            (
                str(len(r.rollouts)),
                f"{r.success:.3f}",
                f"{r.pass_at_k:.3f}",
                f"{r.pass_hat_k:.3f}",
                f"{r.mean_turns:.2f}",
                f"{r.mean_reward:.3f}",
                f"{r.seconds:.1f}",
            ),
        )
        for r in reports
    ]
    print_table(console, f"{env_id}: {episodes} tasks x {k} attempts", "policy", columns, rows)
    reasons = list(dict.fromkeys(reason for r in reports for reason in r.end_reasons))
    rows = [(r.name, [str(r.end_reasons.get(reason, 0)) for reason in reasons]) for r in reports]
    print_table(console, "why episodes ended (end_reason)", "policy", reasons, rows)
    categories = sorted({c for r in reports for c in r.by_category})
    if categories:
        rows = [(c, [f"{r.by_category[c]:.3f}" if c in r.by_category else "-" for r in reports]) for c in categories]
        print_table(console, "success by category", "category", [r.name for r in reports], rows, names="columns")


def plot(reports: list[PolicyReport], path: str, title: str = "") -> None:
    """A grouped bar plot of success, pass@k and pass^k per policy (and success by category)."""
    Figure = require("matplotlib.figure", "plot").Figure  # lazy: plotting is optional

    k = reports[0].k
    categories = sorted({c for r in reports for c in r.by_category})
    panels = [("metric", ["success", f"pass@{k}", f"pass^{k}"], lambda r: [r.success, r.pass_at_k, r.pass_hat_k])]
    if categories:
        panels.append(("category", categories, lambda r: [r.by_category.get(c, 0.0) for c in categories]))
    fig = Figure(figsize=(6 + 0.6 * len(categories), 3.5 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    width = 0.8 / len(reports)
    for ax, (xlabel, labels, values) in zip(axes, panels):
        x = np.arange(len(labels))
        for i, r in enumerate(reports):
            bars = ax.bar(x + (i - (len(reports) - 1) / 2) * width, values(r), width, label=r.name)
            ax.bar_label(bars, fmt="%.2f", fontsize="x-small")
        ax.set_xticks(x, labels, rotation=20 if xlabel == "category" else 0)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("success rate" if xlabel == "category" else "rate")
        ax.legend(fontsize="small")
    axes[0].set_title(title)
    fig.savefig(path, dpi=120)


def _write(path: str, reports: list[PolicyReport]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for r in reports:
            for rollout in r.rollouts:
                fh.write(json.dumps({"policy": r.name, **rollout.to_dict()}, ensure_ascii=False, default=str) + "\n")
