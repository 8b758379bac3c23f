"""A GRPO step's sampling and update against their floors: the FLOPs of the tokens they run over the
rate the model's own shapes reach on one core (``floor_bench.py``).

Runs ``textgym train`` (the given flags; keep the run short, e.g. ``--sft-steps 5 --sft-demos 16
--steps 2 --eval-every 100 --eval-episodes 1``) in this process and, for every GRPO step, counts the tokens each phase needs and
the CPU seconds it took (``time.process_time``, so the share of a core that a loaded machine gives
the process does not enter; the run's wall ``time/*`` are printed beside):

* sampling: the tokens prefilled and decoded, as :mod:`textgym.algos.train.tokens` counts them
  (the step's ``tokens/*`` metrics);
* the update: the packed tokens, counted there too, times ``num_iterations`` forward and backward
  passes, plus a forward of the KL's reference (``kl_beta > 0``).

Each phase's floor is ``2 * params * tokens`` for the layers' linears and ``2 * head_params`` at
each position whose logits it needs (a sampled or a trained token), plus attention at the
causal query-key pairs it needs (``4 * pairs * heads * head_dim * layers``) per forward, twice that
for a backward, each over its measured rate: decode at the decode ``M`` nearest the step's episodes,
prefill, the update and attention at the best rate measured.
The floor counts no padding and no wasted rows, so a ratio above 1 is everything else: padding,
per-call overhead, Python, the sampling logic, the cache's copies.

With ``--profile`` the last step's sampling runs under cProfile (CPU time) and its time is split
(torch backend): the model's forward (of which the linear and attention kernels), the sampling
logic (``sample_token``), the cache bookkeeping (slot writes, the context cache's look-ups, fills
and stores, the group's cache copy) and the rest (the decode loop's Python, the policy's
rendering and unpacking). cProfile slows Python more than kernels, so the split is of a slower run.

    taskset -c 1 python benchmarks/floor_report.py --rates floor.json --profile --json step.json -- \\
        --preset sudoku-moves-tiny --sft-steps 5 --sft-demos 16 --steps 2 --eval-every 100 --eval-episodes 1 \\
        --threads 1 --output-dir runs/floor-sudoku
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any

from floor_bench import MODELS, Shapes


def counts(tokens: dict[str, int]) -> dict[str, int]:
    """:mod:`textgym.algos.train.tokens`' counts without their ``tokens/`` prefix."""
    return {k.removeprefix("tokens/"): v for k, v in tokens.items()}


def rate(rates: dict, model: str, table: str, key: str, at: int | None = None) -> float:
    """A GFLOP/s figure of ``floor_bench.py``'s JSON, at the measured size nearest ``at`` (None: the
    best of every size: a floor is what the shapes reach at their best)."""
    sizes = {int(k): v[key] for k, v in rates[model][table].items()}
    return (max(sizes.values()) if at is None else sizes[min(sizes, key=lambda m: abs(m - at))]) * 1e9


def floors(s: Shapes, rates: dict, model: str, tokens: dict[str, int], episodes: int, update_passes: tuple[int, int]) -> dict[str, float]:
    """Floor seconds of the step's sampling and update (``update_passes``: forward+backward passes,
    forward-only passes)."""
    body = 2.0 * (s.matmul_params - s.head_params)  # every token runs the layers' linears
    head = 2.0 * s.head_params  # the LM head runs only where a token is sampled or trained

    def linear(tokens_in: int, heads: int, kind: str, at: int | None = None) -> float:
        return (tokens_in * body + heads * head) / rate(rates, model, "linear", kind, at=at)

    sampled_heads = tokens.get("sampled", tokens["decoded"])  # JSONs written before heads were counted
    prefill_heads = sampled_heads - tokens["decoded"]  # one a turn, at its prompt's last position
    prefill = linear(tokens["prefilled"], prefill_heads, "forward") + s.attention_flops(tokens["prefill_pairs"], 1) / rate(
        rates, model, "attention", "causal_gflops"
    )
    decode = linear(tokens["decoded"], tokens["decoded"], "forward", at=episodes) + s.attention_flops(tokens["decode_pairs"], 1) / rate(
        rates, model, "attention", "decode_gflops"
    )
    trained_heads = tokens.get("trained", tokens["packed"])
    forward = linear(tokens["packed"], trained_heads, "forward")
    backward = 2 * linear(tokens["packed"], trained_heads, "backward")
    attention = s.attention_flops(tokens["packed_pairs"], 1) / rate(rates, model, "attention", "causal_gflops")
    trained, forward_only = update_passes
    update = trained * (forward + backward + 3 * attention) + forward_only * (forward + attention)
    return {"sampling": prefill + decode, "prefill": prefill, "decode": decode, "update": update}


SLOT_WRITES = ("sampler.py", "update")
CACHE = {
    ("sampler.py", "update"),
    ("sampler.py", "fill_from_contexts"),
    ("sampler.py", "store_contexts"),
    ("context_cache.py", "lookup"),
    ("context_cache.py", "drop"),
    ("cache_utils.py", "reorder_cache"),
}
KERNELS = ("linear", "_linear_pointwise", "scaled_dot_product_attention", "matmul", "bmm", "addmm")  # the packed linears' is mkldnn's


def split_sampling(profile: cProfile.Profile) -> dict[str, float]:
    """CPU seconds of the profiled sampling: total, forward (and its kernels), sampling logic,
    cache bookkeeping, the rest (see the module docstring)."""
    stats = pstats.Stats(profile).stats

    def cumulative(file: str, name: str) -> float:
        return sum(v[3] for (f, _, n), v in stats.items() if f.endswith(file) and n == name)

    total = cumulative("seeded.py", "act")
    # the prefill's outermost forward of the model (the one with the largest cumulative time) and
    # the decode steps, which run the model's operations themselves (textgym.algos.torch.decode)
    prefill = max((v[3] for (f, _, n), v in stats.items() if "modeling_" in f and n == "forward"), default=0.0)
    forward = prefill + cumulative("decode.py", "decode_step")
    slots = cumulative(*SLOT_WRITES)
    cache = sum(cumulative(f, n) for f, n in CACHE)
    logic = cumulative("sampler.py", "sample_token")
    kernels = sum(v[2] for (f, _, n), v in stats.items() if f == "~" and any(n.endswith(f"{k}>") for k in KERNELS))
    return {
        "total": total,
        "forward": forward - slots,
        "forward_kernels": kernels,
        "sampling_logic": logic,
        "cache_bookkeeping": cache,
        "python_other": total - (forward - slots) - logic - cache,
    }


class StepMeter:
    """Counts each GRPO step's tokens and CPU seconds by wrapping the loop's two phases."""

    def __init__(self, profile_step: int | None):
        self.steps: list[dict[str, Any]] = []
        self.profile_step = profile_step
        self.profile = cProfile.Profile(time.process_time)
        self.sampling_cpu = 0.0
        self.sampler_prefilled = 0  # what the context cache counts as run: the slots past the cached ones

    def install(self) -> None:
        from textgym.algos.rollouts import seeded
        from textgym.algos.train import step as train
        from textgym.algos.train.tokens import packed_tokens, sampled_tokens

        collect, learn, act = train.collect_step, train.learn_from, seeded.SeededModelPolicy.act
        meter = self

        def timed_act(sampler, *args, **kwargs):
            profiled = sampler.step == meter.profile_step
            if profiled:
                meter.profile.enable()
            contexts = getattr(sampler.model, "contexts", None)
            before = contexts.prefilled_tokens if contexts is not None else 0
            start = time.process_time()
            try:
                return act(sampler, *args, **kwargs)
            finally:
                meter.sampling_cpu += time.process_time() - start
                meter.sampler_prefilled += contexts.prefilled_tokens - before if contexts is not None else 0
                if profiled:
                    meter.profile.disable()

        def counted_collect(config, policy, venvs, step):
            meter.sampling_cpu, meter.sampler_prefilled = 0.0, 0
            rollouts, seconds = collect(config, policy, venvs, step)
            counted = {"episodes": len(rollouts), "cpu/sampling": meter.sampling_cpu, "sampler_prefilled": meter.sampler_prefilled}
            meter.steps.append({"step": step + 1} | counted | counts(sampled_tokens(rollouts)))
            return rollouts, seconds

        def counted_learn(grpo, policy, learner, rollouts):
            start = time.process_time()
            update = learn(grpo, policy, learner, rollouts)
            trained = update.batch is not None and bool(update.metrics)
            record = meter.steps[-1]
            record["cpu/update"] = time.process_time() - start if trained else 0.0
            record |= counts(packed_tokens(update.kept if trained else []))
            forward_only = int(grpo.kl_beta > 0) + int(
                grpo.rollout_correction != "none" or (grpo.num_iterations > 1 and not _has_logprobs(update))
            )
            record["update_passes"] = (grpo.num_iterations, forward_only) if trained else (0, 0)
            return update

        seeded.SeededModelPolicy.act = timed_act
        train.collect_step, train.learn_from = counted_collect, counted_learn


def _has_logprobs(update: Any) -> bool:
    return update.batch is not None and update.batch.old_logprobs is not None


def model_shapes(config: dict[str, Any]) -> Shapes:
    """The shapes of the run's model from its HF ``config.json``."""
    return Shapes(
        hidden=config["hidden_size"],
        intermediate=config["intermediate_size"],
        heads=config["num_attention_heads"],
        kv_heads=config["num_key_value_heads"],
        vocab=config["vocab_size"],
        layers=config["num_hidden_layers"],
    )


def rates_model(s: Shapes) -> str:
    """The ``floor_bench.py`` model whose shapes are ``s``'s."""
    for name, shapes in MODELS.items():
        if shapes == s:
            return name
    raise SystemExit(f"floor_bench.py measures no model of these shapes: {s}")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    ours, train_args = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", required=True, help="floor_bench.py's --json")
    parser.add_argument("--backend-rates", choices=["torch", "jax"], help="whose rates (default: the run's backend)")
    parser.add_argument("--profile", action="store_true", help="split the last step's sampling with cProfile")
    parser.add_argument("--json", help="write every step's figures here (without a run: read them from here)")
    args = parser.parse_args(ours)
    if train_args and "--output-dir" not in train_args:
        raise SystemExit("give the run an --output-dir after --")
    if train_args:
        result = run(train_args, args.profile) | {"argv": argv}
        if args.json:  # the counts first: a report can be made again from them (no `--`)
            Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    elif args.json:
        result = json.loads(Path(args.json).read_text(encoding="utf-8"))
    else:
        raise SystemExit("give the run's flags after --, or a --json written by an earlier run")
    report(result, json.loads(Path(args.rates).read_text(encoding="utf-8")), args.backend_rates)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")


def run(train_args: list[str], profile: bool) -> dict[str, Any]:
    """Run ``textgym train train_args`` here; each step's tokens and CPU seconds, its wall ``time/*``."""
    from textgym.algos.train import train
    from textgym.algos.train.command import add_train_arguments, train_config_from_args

    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    config = train_config_from_args(parser.parse_args(train_args))
    meter = StepMeter(config.steps - 1 if profile else None)
    meter.install()
    started = time.strftime("%Y-%m-%d %H:%M")
    train(config)
    out = Path(config.output_dir)
    walls = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    walls = {w["step"]: w for w in walls if "time/sampling" in w}
    for record in meter.steps:
        record |= {k: walls.get(record["step"], {}).get(k) for k in ("time/sampling", "time/update", "time/step")}
    result = {
        "date": started,
        "backend": config.backend,
        "model": json.loads((out / "final" / "config.json").read_text()),
        "steps": meter.steps,
    }
    if profile:
        meter.profile.dump_stats(out / "sampling.pstats")  # for a look beyond the split: python -m pstats
        result["sampling_split"] = split_sampling(meter.profile)
    return result


def report(result: dict[str, Any], rates: dict[str, Any], backend: str | None) -> None:
    """Add each step's floors and ratios to ``result`` and print them."""
    s = model_shapes(result["model"])
    name = rates_model(s)
    backend = backend or result["backend"]
    result["rates_of"] = f"{backend}/{name}"
    for record in result["steps"]:
        floor = floors(s, rates["backends"][backend], name, record, record["episodes"], tuple(record["update_passes"]))
        record |= {f"floor/{k}": v for k, v in floor.items()}
        record["ratio/sampling"] = record["cpu/sampling"] / floor["sampling"]
        record["ratio/update"] = record["cpu/update"] / floor["update"] if floor["update"] else None
        print(
            f"step {record['step']}: {record['episodes']} episodes, prefilled {record['prefilled']}, decoded {record['decoded']},"
            f" packed {record['packed']} x {record['update_passes']} | sampling {record['cpu/sampling']:.1f} CPU-s"
            f" (wall {record['time/sampling'] or 0:.1f}) floor {floor['sampling']:.2f} s = {record['ratio/sampling']:.1f}x"
            f" | update {record['cpu/update']:.1f} CPU-s (wall {record['time/update'] or 0:.1f}) floor {floor['update']:.2f} s"
            + (f" = {record['ratio/update']:.1f}x" if record["ratio/update"] else ""),
            flush=True,
        )
    if "sampling_split" in result:
        print("last step's sampling under cProfile (CPU-s):", {k: round(v, 2) for k, v in result["sampling_split"].items()})


if __name__ == "__main__":
    main()
