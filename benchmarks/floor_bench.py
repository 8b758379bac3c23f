"""The matmul rate that a model's own layer shapes reach on one core: the denominator of a step's floor.

A GRPO step's phases multiply the same few matrices over and over: a decode step multiplies a few
rows (the unfinished episodes, ``M`` = 8-64) by every weight, a prefill or an update many rows
(``M`` = the packed tokens, 1k-8k). Small products run far below a CPU's peak (the 2048-cubed
figure), so a floor measured with 2048-cubed would flatter every phase; this one times the
model's own products instead:

* ``forward``: ``(M, K) @ (K, N)`` for every linear of a Qwen2/Llama layer (q, k, v, o, gate, up,
  down) and the LM head;
* ``backward``: the two products of a linear's gradient, ``(M, N) @ (N, K)`` (the input's) and
  ``(N, M) @ (M, K)`` (the weight's);
* ``attention``: causal attention of ``T`` query rows over ``T`` keys (a prefill or a packed row:
  ``T`` = its tokens), counted at the causal half it needs (``2 T^2 heads head_dim`` multiply-adds
  forward), and decode attention of ``M`` rows of one query over ``T`` cached keys.

Each phase's rate is the model's FLOPs over the summed time of its products, each weighted by how
often the model runs it (every layer's linears ``layers`` times, the head once), so it is the rate
of the whole stack, not of its best shape. One thread: torch with ``torch.set_num_threads(1)``,
JAX with XLA:CPU's Eigen pool off (``--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1``); pin the process too (``taskset -c 0``). Each figure is the median
of ``--repeats`` timings, each of as many calls as fill ``--min-time`` CPU seconds. The JSON
(``--json``) is what a step's floor report reads (``floor_report.py``).

    taskset -c 0 python benchmarks/floor_bench.py --models tiny smollm2 --backends torch jax --json floor.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

ONE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


@dataclass(frozen=True)
class Shapes:
    """What a model's products are made of (a Qwen2/Llama decoder with a tied or untied head)."""

    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    layers: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def linears(self) -> list[tuple[str, int, int, int]]:
        """``(name, K, N, count)``: each linear's input and output width and how often a token runs it."""
        h, d = self.hidden, self.head_dim
        per_layer = [
            ("q", h, self.heads * d),
            ("k", h, self.kv_heads * d),
            ("v", h, self.kv_heads * d),
            ("o", self.heads * d, h),
            ("gate", h, self.intermediate),
            ("up", h, self.intermediate),
            ("down", self.intermediate, h),
        ]
        return [(name, k, n, self.layers) for name, k, n in per_layer] + [("head", h, self.vocab, 1)]

    @property
    def matmul_params(self) -> int:
        """Weights a token multiplies by (embedding lookups excluded, the head included)."""
        return sum(k * n * count for _, k, n, count in self.linears())

    @property
    def head_params(self) -> int:
        """The LM head's weights (its entry of :meth:`linears`), which a token multiplies by only where
        its logits are needed."""
        return sum(k * n * count for name, k, n, count in self.linears() if name == "head")

    def attention_flops(self, queries: float, keys: float) -> float:
        """Forward FLOPs of attention for ``queries x keys`` query-key pairs (``Q K^T`` and ``P V``)."""
        return 4.0 * queries * keys * self.heads * self.head_dim * self.layers


# The tiny preset's shape in the multi-turn presets (``tiny_layers=4``; a byte vocabulary of 270,
# or 1028 with the BPE tokenizer option) and SmolLM2-135M's config.json.
MODELS = {
    "tiny": Shapes(hidden=128, intermediate=256, heads=4, kv_heads=2, vocab=270, layers=4),
    "tiny-bpe": Shapes(hidden=128, intermediate=256, heads=4, kv_heads=2, vocab=1028, layers=4),
    "smollm2": Shapes(hidden=576, intermediate=1536, heads=9, kv_heads=3, vocab=49152, layers=30),
}


def timed(call: Callable[[], object], repeats: int, min_time: float) -> float:
    """Median CPU seconds of one ``call`` (after a warm-up), over ``repeats`` timings of enough calls.

    CPU time of the process, not wall time: on a shared machine a pinned single-threaded process
    gets a varying share of its core, and the floor is what the arithmetic costs when it runs.
    """
    call()
    start = time.process_time()
    call()
    once = max(time.process_time() - start, 1e-6)
    n = max(1, int(min_time / once))
    times = []
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(n):
            call()
        times.append((time.process_time() - start) / n)
    return statistics.median(times)


class TorchOps:
    """The products with torch, float32, one thread."""

    name = "torch"

    def __init__(self):
        import torch

        torch.set_num_threads(1)
        self.torch = torch
        self.gen = torch.Generator().manual_seed(0)

    def _rand(self, *shape):
        return self.torch.randn(*shape, generator=self.gen)

    def linear(self, m: int, k: int, n: int) -> dict[str, Callable[[], object]]:
        f = self.torch.nn.functional
        x, w, dy = self._rand(m, k), self._rand(n, k), self._rand(m, n)
        return {"forward": lambda: f.linear(x, w), "grad_input": lambda: dy @ w, "grad_weight": lambda: dy.t() @ x}

    def attention(self, s: Shapes, rows: int, queries: int, keys: int) -> Callable[[], object]:
        f = self.torch.nn.functional
        q = self._rand(rows, s.heads, queries, s.head_dim)
        kv = [self._rand(rows, s.kv_heads, keys, s.head_dim) for _ in range(2)]
        causal = queries == keys
        return lambda: f.scaled_dot_product_attention(q, *kv, is_causal=causal, enable_gqa=True)


class JaxOps:
    """The same products with JAX on XLA:CPU, each one jitted, float32, one thread."""

    name = "jax"

    def __init__(self):
        import jax
        import jax.numpy as jnp

        self.jax, self.jnp = jax, jnp
        self.key = jax.random.key(0)

    def _rand(self, *shape):
        self.key, key = self.jax.random.split(self.key)
        return self.jax.random.normal(key, shape, self.jnp.float32)

    def _ready(self, fn, *args):
        jitted = self.jax.jit(fn)
        return lambda: jitted(*args).block_until_ready()

    def linear(self, m: int, k: int, n: int) -> dict[str, Callable[[], object]]:
        x, w, dy = self._rand(m, k), self._rand(n, k), self._rand(m, n)
        return {
            "forward": self._ready(lambda x, w: x @ w.T, x, w),
            "grad_input": self._ready(lambda dy, w: dy @ w, dy, w),
            "grad_weight": self._ready(lambda dy, x: dy.T @ x, dy, x),
        }

    def attention(self, s: Shapes, rows: int, queries: int, keys: int) -> Callable[[], object]:
        q = self._rand(rows, queries, s.heads, s.head_dim)  # (B, T, N, H): JAX's layout
        k, v = (self._rand(rows, keys, s.kv_heads, s.head_dim) for _ in range(2))
        causal = queries == keys
        return self._ready(lambda q, k, v: self.jax.nn.dot_product_attention(q, k, v, is_causal=causal), q, k, v)


def linear_rates(ops, s: Shapes, rows: int, repeats: int, min_time: float) -> dict:
    """The stack's forward and backward GFLOP/s at ``rows`` rows, and each product's."""
    seconds = {"forward": 0.0, "backward": 0.0}
    flops = {"forward": 0.0, "backward": 0.0}
    shapes = []
    for name, k, n, count in s.linears():
        calls = ops.linear(rows, k, n)
        t = {part: timed(call, repeats, min_time) for part, call in calls.items()}
        f = 2.0 * rows * k * n
        seconds["forward"] += count * t["forward"]
        seconds["backward"] += count * (t["grad_input"] + t["grad_weight"])
        flops["forward"] += count * f
        flops["backward"] += count * 2 * f
        shapes.append({"name": name, "K": k, "N": n, "count": count} | {f"{p}_gflops": f / t[p] / 1e9 for p in t})
    return {phase: flops[phase] / seconds[phase] / 1e9 for phase in seconds} | {"shapes": shapes}


def attention_rates(ops, s: Shapes, rows: int, context: int, repeats: int, min_time: float) -> dict:
    """GFLOP/s of causal attention over a ``context``-token row and of ``rows`` decode queries
    over ``context`` cached keys, each at the FLOPs it needs."""
    causal = timed(ops.attention(s, 1, context, context), repeats, min_time)
    decode = timed(ops.attention(s, rows, 1, context), repeats, min_time)
    return {
        "causal_gflops": s.attention_flops(context, context / 2) / s.layers / causal / 1e9,
        "decode_gflops": s.attention_flops(rows, context) / s.layers / decode / 1e9,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["tiny", "smollm2"], choices=sorted(MODELS))
    parser.add_argument("--backends", nargs="+", default=["torch", "jax"], choices=["torch", "jax"])
    parser.add_argument("--decode-rows", nargs="+", type=int, default=[8, 64], help="M of a decode step: the unfinished rows")
    parser.add_argument("--packed-rows", nargs="+", type=int, default=[1024, 4096], help="M of a prefill or an update: packed tokens")
    parser.add_argument("--contexts", nargs="+", type=int, default=[256, 1024], help="attention's T: a row's context tokens")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--min-time", type=float, default=0.05, help="seconds of calls in each timing")
    parser.add_argument("--json", help="write the rates here")
    args = parser.parse_args(argv)
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {ONE_THREAD_XLA}".strip()  # before jax loads

    result: dict = {"argv": sys.argv[1:], "date": time.strftime("%Y-%m-%d %H:%M"), "load": os.getloadavg()[0], "backends": {}}
    for backend in args.backends:
        ops = TorchOps() if backend == "torch" else JaxOps()
        models = result["backends"][backend] = {}
        for model in args.models:
            s = MODELS[model]
            rows = {m: linear_rates(ops, s, m, args.repeats, args.min_time) for m in args.decode_rows + args.packed_rows}
            attention = {t: attention_rates(ops, s, max(args.decode_rows), t, args.repeats, args.min_time) for t in args.contexts}
            models[model] = {"shapes": asdict(s), "matmul_params": s.matmul_params, "linear": rows, "attention": attention}
            for m, r in rows.items():
                print(f"{backend:5} {model:8} M={m:5}  forward {r['forward']:6.1f}  backward {r['backward']:6.1f} GFLOP/s", flush=True)
            for t, a in attention.items():
                print(
                    f"{backend:5} {model:8} T={t:5}  causal {a['causal_gflops']:6.1f}  decode {a['decode_gflops']:6.1f} GFLOP/s", flush=True
                )
            if args.json:  # after every model: a long run stopped midway keeps what it measured
                with open(args.json, "w", encoding="utf-8") as fh:
                    json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
