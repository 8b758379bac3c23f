"""Sampler throughput on a real checkpoint: transformers ``generate``, the torch and the JAX sampler.

Side by side in one process, in alternated rounds (every timed call of a round runs once, the
order rotating by round, so a load change on a shared machine hits all of them alike; before
them JAX compiles on one full call and the others warm up on a short one), at each
``--dtypes`` entry, on ``--batch`` rows of ``--prompt-len`` random tokens generating exactly
``--new-tokens`` each (EOS disabled), sampling at temperature 1:

* ``transformers``: ``AutoModelForCausalLM.generate`` with the checkpoint loaded in that dtype,
  what a user would pick; for a grouped layout ``num_return_sequences`` (what a user would do for
  GRPO's repeated prompts);
* ``torch`` / ``jax``: ``load_model(path, sampler_dtype=dtype).generate`` (float32 weights, the
  sampler computing in ``dtype``).

A layout ``UxG`` is ``U`` distinct prompts each sampled ``G`` times (``--batch = U * G``);
``distinct`` is ``batch x 1``. Printed per row: median wall and CPU seconds, generated tokens/s
(wall), the ratio to transformers at the same dtype and layout (wall), and the achieved FLOPs per
CPU-second with their fraction of the matmul peak of that dtype (a ``--matmul-size`` cube timed
with torch, per CPU-second, at the start and the end; the larger is kept). CPU time, not wall
time, because on a shared machine a process holds a core only part of the time: FLOPs per
CPU-second say how well the cycles it got were used. The FLOPs are counted explicitly
(:func:`sampler_flops`): the work the layout needs, each distinct prompt prefilled once, so an
implementation that prefills a repeated prompt ``G`` times gets no credit for it.

The bf16 logprob error: the logprobs each bf16 sampler returns against float32 teacher-forced
logprobs of the very sequences it sampled (``policy.logprobs`` of prompt + generated ids at
temperature 1, on the first ``--error-rows`` rows of the first layout), max and mean absolute;
the float32 samplers' own error is printed beside it.

    python benchmarks/sampler_bench.py                                  # SmolLM2, distinct prompts
    python benchmarks/sampler_bench.py --layouts 1x8 2x4 --dtypes bfloat16
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

IMPLS = ("transformers", "torch", "jax")


def sampler_flops(config: dict[str, Any], prompt_len: int, distinct: int, batch: int, new_tokens: int) -> dict[str, float]:
    """Matmul FLOPs of prefilling ``distinct`` prompts once and decoding ``new_tokens`` for ``batch`` rows.

    ``2 * weights`` per token through every linear layer, the LM head only where logits are needed
    (the last prompt position, then every decoded token), and causal attention's two products
    (``q k^T`` and ``p v``): ``4 * heads * head_dim`` per (query, visible key) pair per layer.
    Elementwise work (norms, RoPE, softmax) is not counted.
    """
    d, layers = config["hidden_size"], config["num_hidden_layers"]
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads", heads)
    hd = config.get("head_dim") or d // heads
    ffn, vocab = config["intermediate_size"], config["vocab_size"]
    per_token = 2 * layers * (d * heads * hd * 2 + d * kv * hd * 2 + 3 * d * ffn)  # q, o; k, v; gate, up, down
    head = 2 * d * vocab
    pairs_prefill = distinct * prompt_len * (prompt_len + 1) / 2  # query i sees keys 0..i
    pairs_decode = batch * sum(prompt_len + t + 1 for t in range(new_tokens - 1))  # the last token is never fed back
    attn = 4 * layers * heads * hd
    prefill = distinct * prompt_len * per_token + distinct * head + attn * pairs_prefill
    decode = batch * (new_tokens - 1) * (per_token + head) + attn * pairs_decode
    return {"prefill": prefill, "decode": decode, "total": prefill + decode}


def matmul_peak(size: int, dtype: str) -> float:
    """FLOP/s of a ``size``-cube matmul in ``dtype`` (torch, this process's threads): best of 5."""
    import torch

    a, b = (torch.randn(size, size, dtype=getattr(torch, dtype)) for _ in range(2))
    a @ b
    best = min(_seconds(lambda: a @ b)[1] for _ in range(5))
    return 2 * size**3 / best


def _seconds(fn: Callable[[], Any]) -> tuple[float, float]:
    """``(wall, CPU)`` seconds of ``fn()``; CPU time counts this process's threads only."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def layout_prompts(layout: str, batch: int, length: int, vocab: int) -> tuple[int, list[np.ndarray]]:
    """``(distinct prompts, batch rows)`` for ``distinct`` or ``UxG``; row ``i`` uses prompt ``i // G``."""
    u, g = (batch, 1) if layout == "distinct" else map(int, layout.split("x"))
    if u * g != batch:
        raise SystemExit(f"sampler_bench: error: layout {layout} is {u * g} rows, --batch is {batch}")
    rng = np.random.default_rng(0)
    unique = [rng.integers(10, vocab, length).astype(np.int32) for _ in range(u)]
    return u, [unique[i // g] for i in range(batch)]


def transformers_call(model: Any, rows: list[np.ndarray], group: int, new_tokens: int) -> Callable[[], Any]:
    import torch

    ids = torch.as_tensor(np.stack(rows[::group]), dtype=torch.long)

    def call() -> None:
        with torch.no_grad():
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                num_return_sequences=group,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                pad_token_id=model.config.pad_token_id,
                temperature=1.0,
                top_p=1.0,
                top_k=0,
            )
        assert out.shape == (len(rows), ids.shape[1] + new_tokens), out.shape

    return call


def logprob_error(policy: Any, rows: list[np.ndarray], ids: list[np.ndarray], lps: list[np.ndarray]) -> tuple[float, float]:
    """(max, mean) |sampler logprob - float32 teacher-forced logprob| over the sampled tokens."""
    full = np.stack([np.concatenate([p, i]) for p, i in zip(rows, ids)])
    exact = policy.logprobs(full, np.ones_like(full))[:, len(rows[0]) :]
    err = np.abs(np.stack(lps) - exact)
    return float(err.max()), float(err.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m", help="what --model takes (a preset, a directory, a .gguf file)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=450)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--layouts", nargs="+", default=["distinct"], help="distinct, or UxG (U prompts x G samples)")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=("float32", "bfloat16"))
    parser.add_argument("--impls", nargs="+", default=list(IMPLS), choices=IMPLS)
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds (after one warm-up call each)")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (1 also limits XLA to one)")
    parser.add_argument("--matmul-size", type=int, default=2048)
    parser.add_argument("--error-rows", type=int, default=2, help="rows whose logprobs are checked against float32")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()

    if args.threads == 1:  # XLA's CPU client reads this when JAX first starts
        os.environ["XLA_FLAGS"] = (
            os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        ).strip()
    import torch
    import transformers

    from textgym.algos import models
    from textgym.algos.backends import load_backend

    torch.set_num_threads(args.threads)
    models.quiet_transformers()
    path = models.resolve(args.model)
    config = json.loads((path / "config.json").read_text())
    peaks = {d: matmul_peak(args.matmul_size, d) for d in args.dtypes}
    calls: dict[tuple[str, str, str], Callable[[], Any]] = {}
    policies: dict[tuple[str, str], Any] = {}
    layouts = {name: layout_prompts(name, args.batch, args.prompt_len, config["vocab_size"]) for name in args.layouts}
    samples: dict[tuple[str, str, str], Any] = {}
    warmups: dict[tuple[str, str], Callable[[], Any]] = {}
    short = [np.arange(10, 26, dtype=np.int32)]
    for dtype in args.dtypes:
        hf = (
            transformers.AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, dtype)).eval()
            if "transformers" in args.impls
            else None
        )
        for impl in args.impls:
            if impl == "transformers":
                warmups[impl, dtype] = transformers_call(hf, short, 1, 4)
            else:
                # No context cache: a later round's prompts would be cache hits, not prefills.
                policies[impl, dtype] = load_backend(impl).load_model(path, sampler_dtype=dtype, context_cache_mb=0)
                warmups[impl, dtype] = partial(policies[impl, dtype].generate, short, 4, 1.0, 0, eos_ids=())
            for name, (u, rows) in layouts.items():
                if impl == "transformers":
                    calls[impl, dtype, name] = transformers_call(hf, rows, args.batch // u, args.new_tokens)
                    continue

                def call(policy=policies[impl, dtype], rows=rows, key=(impl, dtype, name)) -> None:
                    samples[key] = policy.generate(rows, args.new_tokens, temperature=1.0, seed=0, eos_ids=())
                    assert all(len(i) == args.new_tokens for i in samples[key][0])

                calls[impl, dtype, name] = call
    keys = list(calls)
    for key in keys:  # JAX compiles its shape buckets; the others warm up on a short call
        calls[key]() if key[0] == "jax" else warmups[key[:2]]()
    times: dict[tuple[str, str, str], list[tuple[float, float]]] = {k: [] for k in keys}
    for round_ in range(args.rounds):
        order = keys[round_ % len(keys) :] + keys[: round_ % len(keys)]
        for key in order:
            times[key].append(_seconds(calls[key]))
        print(f"round {round_ + 1} done, load average {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    for d in args.dtypes:
        peaks[d] = max(peaks[d], matmul_peak(args.matmul_size, d))
    load = os.getloadavg()

    print(
        f"\n{args.model}: batch {args.batch}, prompts of {args.prompt_len} tokens, {args.new_tokens} new; "
        f"{args.threads} torch threads; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}"
    )
    print(
        "matmul peak (torch, %d^3, per CPU-second): %s"
        % (args.matmul_size, ", ".join(f"{d} {p / 1e9:.0f} GFLOP/s" for d, p in peaks.items()))
    )
    print("\n| layout | dtype | sampler | median s (wall / CPU) | tokens/s | vs transformers | GFLOP per CPU-s | of peak |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    results = []
    for name, (u, _) in layouts.items():
        flops = sampler_flops(config, args.prompt_len, u, args.batch, args.new_tokens)
        for dtype in args.dtypes:
            ref = times.get(("transformers", dtype, name))
            base = statistics.median(w for w, _ in ref) if ref else None
            for impl in args.impls:
                wall = statistics.median(w for w, _ in times[impl, dtype, name])
                cpu = statistics.median(c for _, c in times[impl, dtype, name])
                rate = flops["total"] / cpu
                ratio = f"{base / wall:.2f}x" if base else "-"
                print(
                    f"| {name} | {dtype} | {impl} | {wall:.2f} / {cpu:.2f} | {args.batch * args.new_tokens / wall:.1f} | {ratio} | "
                    f"{rate / 1e9:.0f} | {rate / peaks[dtype]:.0%} |"
                )
                results.append(
                    {
                        "layout": name,
                        "dtype": dtype,
                        "impl": impl,
                        "seconds": times[impl, dtype, name],
                        "flops": flops,
                        "peak": peaks[dtype],
                    }
                )
    print("\nsampler logprobs vs float32 teacher forcing on the sequences each sampled (max / mean abs):")
    for (impl, dtype, name), (ids, lps) in samples.items():
        if name == args.layouts[0]:
            # logprobs() runs the float32 weights whatever the sampler's dtype
            k = args.error_rows
            high, mean = logprob_error(policies[impl, dtype], layouts[name][1][:k], ids[:k], lps[:k])
            print(f"  {impl} {dtype}: {high:.4f} / {mean:.5f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"args": vars(args), "load": load, "results": results}, fh, indent=2)


if __name__ == "__main__":
    main()
