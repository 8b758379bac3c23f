"""JAX backend benchmark: sampler tokens/s against transformers ``generate``, train-step tokens/s, peak memory.

Both samplers run on the same random checkpoint (created here with transformers and saved as a HF
directory), the same left-padded prompts and the same number of new tokens (EOS disabled, so every
row generates exactly ``--new`` tokens). Each measurement runs in its own process so that peak
RSS belongs to one backend. Compilation (JAX) and the first call (torch) are reported apart from
the steady state, which is the median of ``--repeats`` timed calls.

Usage::

    python benchmarks/jax_bench.py                       # tiny + 0.5B-shaped (4 layers), prints Markdown
    python benchmarks/jax_bench.py --models tiny --repeats 2
    python benchmarks/jax_bench.py --layers-05b 24       # the full 24-layer depth (slow on 2 cores)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Qwen2.5-0.5B's shapes (hidden 896, 14 heads, 2 KV heads, 151,936 vocabulary, tied embeddings).
SHAPES = {
    "tiny": dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2),
    "0.5b": dict(
        vocab_size=151936,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    ),
}


def make_checkpoint(name: str, layers: int | None, root: str) -> str:
    import torch
    import transformers

    torch.manual_seed(0)
    shape = dict(SHAPES[name])
    if layers is not None:
        shape["num_hidden_layers"] = layers
    config = transformers.Qwen2Config(**shape, eos_token_id=None, pad_token_id=0)
    path = os.path.join(root, name)
    transformers.AutoModelForCausalLM.from_config(config).float().save_pretrained(path)
    return path


def prompts(batch: int, length: int, vocab: int):
    import numpy as np

    rng = np.random.default_rng(0)
    # Ragged prompts (length/2 .. length) so that padding is part of the work, as in RL batches.
    return [rng.integers(1, vocab, int(rng.integers(length // 2, length + 1))).astype(np.int32) for _ in range(batch)]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn, repeats: int) -> tuple[float, float]:
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return first, statistics.median(times)


def worker_jax_sample(args) -> dict:
    from textgym.algos.jax import load_model

    model = load_model(args.path)
    ps = prompts(args.batch, args.prompt, model.config.vocab_size)
    seeds = iter(range(1000))

    def run():
        ids, _ = model.generate(ps, args.new, 1.0, next(seeds), eos_ids=())
        assert all(len(i) == args.new for i in ids)

    first, steady = timed(run, args.repeats)
    return {"first_s": first, "steady_s": steady, "tokens_per_s": args.batch * args.new / steady}


def worker_hf_sample(args) -> dict:
    import numpy as np
    import torch
    import transformers

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    model = transformers.AutoModelForCausalLM.from_pretrained(args.path, dtype=torch.float32).eval()
    ps = prompts(args.batch, args.prompt, model.config.vocab_size)
    width = max(len(p) for p in ps)
    ids = np.zeros((len(ps), width), np.int64)
    mask = np.zeros((len(ps), width), np.int64)
    for i, p in enumerate(ps):
        ids[i, width - len(p) :], mask[i, width - len(p) :] = p, 1
    ids, mask = torch.tensor(ids), torch.tensor(mask)

    def run():
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=args.new,
                min_new_tokens=args.new,
                do_sample=True,
                temperature=1.0,
                top_k=0,
                pad_token_id=0,
            )
        assert out.shape[1] == width + args.new

    first, steady = timed(run, args.repeats)
    return {"first_s": first, "steady_s": steady, "tokens_per_s": args.batch * args.new / steady}


def worker_jax_train(args) -> dict:
    import numpy as np

    from textgym.algos.grpo import Batch, GRPOConfig
    from textgym.algos.jax import Learner, load_model

    model = load_model(args.path)
    b, t = args.batch, args.train_len
    rng = np.random.default_rng(0)
    loss_mask = np.ones((b, t), np.float32)
    loss_mask[:, : t // 4] = 0  # a quarter prompt, three quarters policy tokens
    batch = Batch(
        input_ids=rng.integers(1, model.config.vocab_size, (b, t)).astype(np.int32),
        attention_mask=np.ones((b, t), np.int32),
        positions=np.tile(np.arange(t, dtype=np.int32), (b, 1)),
        loss_mask=loss_mask,
        old_logprobs=None,
        advantages=rng.normal(size=b).astype(np.float32),
        loss_weights=loss_mask / loss_mask.sum(),
        rewards=np.zeros(b, np.float32),
        num_sequences=b,
        token_count=int(loss_mask.sum()),
    )
    learner = Learner(model, GRPOConfig(micro_batch_size=args.micro, lr=1e-6, compute_dtype=args.dtype))
    first, steady = timed(lambda: learner.train_step(batch), args.repeats)
    return {"first_s": first, "steady_s": steady, "tokens_per_s": b * t / steady}


WORKERS = {"jax-sample": worker_jax_sample, "hf-sample": worker_hf_sample, "jax-train": worker_jax_train}


def run_worker(kind: str, path: str, args) -> dict:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        kind,
        "--path",
        path,
        "--batch",
        str(args.batch),
        "--prompt",
        str(args.prompt),
        "--new",
        str(args.new),
        "--repeats",
        str(args.repeats),
        "--train-len",
        str(args.train_len),
        "--micro",
        str(args.micro),
        "--dtype",
        args.dtype,
        "--threads",
        str(args.threads),
    ]
    # Both backends get the same number of intra-op threads (XLA's Eigen pool, torch's OpenMP pool).
    xla = "" if args.threads > 1 else "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    env = os.environ | {"PYTHONPATH": REPO, "XLA_FLAGS": xla, "OMP_NUM_THREADS": str(args.threads)}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(f"{kind} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", choices=sorted(WORKERS))
    parser.add_argument("--path")
    parser.add_argument("--models", nargs="+", default=["tiny", "0.5b"], choices=sorted(SHAPES))
    parser.add_argument("--layers-05b", type=int, default=4, help="depth of the 0.5B-shaped model (24 in the real one)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--prompt", type=int, default=32, help="longest prompt (prompts are ragged, half to full)")
    parser.add_argument("--new", type=int, default=64)
    parser.add_argument("--train-len", type=int, default=128)
    parser.add_argument("--micro", type=int, default=4)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per backend (1: robust on a shared box)")
    args = parser.parse_args()

    if args.worker:
        result = WORKERS[args.worker](args) | {"peak_rss_mb": peak_rss_mb()}
        print(json.dumps(result))
        return

    rows = []
    with tempfile.TemporaryDirectory() as root:
        for name in args.models:
            layers = args.layers_05b if name == "0.5b" else None
            path = make_checkpoint(name, layers, root)
            label = f"{name} ({layers} layers)" if layers else name
            for kind in ("jax-sample", "hf-sample", "jax-train"):
                rows.append((label, kind, run_worker(kind, path, args)))
                print(label, kind, rows[-1][2], file=sys.stderr)

    print(
        f"\nbatch {args.batch}, prompts <= {args.prompt} tokens, {args.new} new tokens; train: {args.batch} x "
        f"{args.train_len} tokens, micro-batch {args.micro}, {args.dtype}; {args.threads} thread(s); "
        f"median of {args.repeats}\n"
    )
    print("| model | what | tokens/s | first call (s) | steady call (s) | peak RSS (MiB) |")
    print("|---|---|---:|---:|---:|---:|")
    for label, kind, r in rows:
        what = {"jax-sample": "JAX sampler", "hf-sample": "transformers generate", "jax-train": "JAX GRPO train step"}[kind]
        print(f"| {label} | {what} | {r['tokens_per_s']:.0f} | {r['first_s']:.2f} | {r['steady_s']:.3f} | {r['peak_rss_mb']:.0f} |")
    for label in dict.fromkeys(r[0] for r in rows):
        jax_tps = next(r[2]["tokens_per_s"] for r in rows if r[0] == label and r[1] == "jax-sample")
        hf_tps = next(r[2]["tokens_per_s"] for r in rows if r[0] == label and r[1] == "hf-sample")
        print(f"\n{label}: JAX sampler / transformers generate = {jax_tps / hf_tps:.2f}x")


if __name__ == "__main__":
    main()
