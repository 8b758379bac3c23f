"""``textgym eval <id> --policy ... [--policy ...]``: parse the policies, play them, print and save the profile."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import gymnasium as gym

from textgym.arguments import check_env_ids, json_object, seed_int
from textgym.error import TextGymError
from textgym.evaluate.plotting import plot
from textgym.evaluate.reward_profile import PolicyReport, evaluate, task_categories
from textgym.policies.base import Policy


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
    def parse(cls, text: str) -> PolicySpec:
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``textgym eval``."""
    parser.add_argument("env_id", help="environment id, e.g. textgym/Sudoku-v0")
    parser.add_argument(
        "--policy",
        action="append",
        default=None,
        metavar="SPEC",
        help="oracle, random, openai:<model>@<base_url> or model:<dir|file.gguf|preset>; repeat to compare "
        "(default: oracle and random; random alone with --env-url)",
    )
    parser.add_argument("--episodes", type=int, default=20, help="tasks (seeds) per policy")
    parser.add_argument("--seed", type=seed_int, default=0, help="first seed (>= 0); tasks use seed, seed+1, ...")
    parser.add_argument("--k", type=int, default=1, help="attempts per task, for pass@k and pass^k")
    parser.add_argument("--num-envs", type=int, default=8, help="sub-envs of the vector env")
    parser.add_argument("--vectorization-mode", choices=("sync", "async"), default="sync")
    parser.add_argument("--env-kwargs", type=json_object, default={}, help="JSON object of env keyword arguments")
    parser.add_argument(
        "--env-url",
        action="append",
        default=None,
        metavar="URL",
        help="play the env on a 'textgym serve' server instead of in-process; repeat for several, which share the sessions and fail over",
    )
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
    local.add_argument(
        "--sampler-dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="the dtype model: policies sample in, as textgym train's --sampler-dtype: bfloat16 samples from a bf16 cast of "
        "the weights (half the bytes a decode step reads; its logprobs differ from float32's by bf16 rounding)",
    )
    local.add_argument(
        "--threads",
        type=int,
        default=None,
        help="intra-op CPU threads of the backend (default: the CPUs the load average leaves idle, at least 1; 1 is fastest on a busy machine)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``textgym eval``; bad arguments print one line and raise ``SystemExit(2)``."""
    specs = _validate(args)
    if args.env_url:
        from textgym.remote import check_servers

        check_servers(args.env_url)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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
        advance = lambda name, n: progress.advance(bars[name], n)
        # Text policies share one vector env; each model plays a token env with its own tokenizer.
        groups = [(_text_venv, policies)] if policies else []
        groups += [(partial(_model_venv, spec=spec, tokenizer=m.tokenizer), {spec.name: lambda venv, m=m: m}) for spec, m in models.items()]
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
    try:
        check_env_ids(args.env_id)
        for flag, value in (
            ("--episodes", args.episodes),
            ("--k", args.k),
            ("--num-envs", args.num_envs),
            ("--max-tokens", args.max_tokens or 1),
            ("--threads", args.threads or 1),
        ):
            if value < 1:
                raise ValueError(f"{flag} must be >= 1, got {value}")
        specs = [PolicySpec.parse(p) for p in (args.policy or (["random"] if args.env_url else ["oracle", "random"]))]
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ValueError(f"each --policy may appear once, got {', '.join(names)}")
        if args.env_url and args.env_kwargs:
            raise ValueError("--env-kwargs makes in-process envs; a served env is built by its server (textgym serve --env-kwargs)")
        if args.env_url and any(s.kind == "oracle" for s in specs):
            raise ValueError("the oracle reads an env's hidden state, which no server sends: drop --policy oracle or --env-url")
        for flag, path in (("--plot", args.plot), ("--out", args.out)):
            if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
                raise ValueError(f"{flag}: the folder of {path!r} does not exist")
    except (ValueError, TextGymError) as exc:
        print(f"textgym eval: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    return specs


def _env_source(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The id and keyword arguments the sub-envs are made with: the env itself, or a client of its servers."""
    if args.env_url:
        from textgym.registration import REMOTE_ID

        return REMOTE_ID, {"urls": list(args.env_url)}
    return args.env_id, args.env_kwargs


def _text_venv(args: argparse.Namespace) -> gym.vector.VectorEnv:
    env_id, kwargs = _env_source(args)
    return gym.make_vec(env_id, num_envs=args.num_envs, vectorization_mode=args.vectorization_mode, **kwargs)


def _model_venv(args: argparse.Namespace, spec: PolicySpec, tokenizer: Any) -> gym.vector.VectorEnv:
    from textgym.algos.rollouts.token_envs import chat_template, token_venv

    template = chat_template("auto", spec.model)  # the tiny preset's compact one, else the model's
    return token_venv(*_env_source(args), tokenizer, template, args.num_envs, args.vectorization_mode)


def _model_policy(spec: PolicySpec, args: argparse.Namespace) -> Any:
    from textgym.algos.backends import idle_cpus, load_model_policy

    return load_model_policy(
        spec.model,
        backend=args.backend,
        max_new_tokens=args.max_tokens or 256,
        temperature=args.temperature,
        seed=args.seed,
        sampler_dtype=args.sampler_dtype,
        # Not the framework's default (every CPU): threads on cores that other processes keep busy spin-wait.
        threads=args.threads or idle_cpus(),
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


def _write(path: str, reports: list[PolicyReport]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for r in reports:
            for rollout in r.rollouts:
                fh.write(json.dumps({"policy": r.name, **rollout.to_dict()}, ensure_ascii=False, default=str) + "\n")
