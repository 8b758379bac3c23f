"""One short accelerator check on SmolLM2-135M in bfloat16: sampler and GRPO-update throughput.

In one call, for each backend (torch, JAX):

* the **sampler**: ``model.generate`` of ``--batch`` prompts of ``--prompt-len`` random tokens,
  exactly ``--new-tokens`` new tokens each (no end-of-turn stop), bf16 weights; generated tokens/s;
* a **GRPO update**: ``Learner.train_step`` on ``--update-seqs`` packed sequences of
  ``--update-len`` tokens (half prompt, half completion), bf16 compute on float32 master weights;
  tokens/s and model FLOP utilisation, ``6 * parameters * tokens / seconds`` (forward and
  backward, attention's quadratic term left out) over the measured bf16 matmul rate;

and transformers' ``generate`` on the same prompts as the reference sampler. The matmul rate is
measured here, a square bf16 matmul of ``--matmul-size`` timed with torch (the H200 of this
project reaches about 790 TFLOP/s). Every timing is the median of ``--repeats`` runs after one
warm-up (JAX compiles in it).

    python benchmarks/gpu_check.py --out gpu_check.json              # the device check
    python benchmarks/gpu_check.py --model tiny --device cpu --dtype float32 --batch 2 \\
        --prompt-len 16 --new-tokens 8 --update-seqs 2 --update-len 32 --matmul-size 256   # CPU dry run

Results go to stdout as JSON (and ``--out``); docs/benchmarks.md records them with the command.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def timed(fn: Callable[[], Any], repeats: int, sync: Callable[[], None]) -> float:
    """Median seconds of ``fn`` over ``repeats`` runs, after one warm-up run."""
    fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def matmul_rate(size: int, dtype: str, device: str, repeats: int) -> float:
    """Measured FLOP/s of one ``size x size`` matmul in ``dtype`` (torch)."""
    import torch

    a = torch.randn(size, size, device=device, dtype=getattr(torch, dtype))
    b = torch.randn(size, size, device=device, dtype=getattr(torch, dtype))
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    seconds = timed(lambda: [a @ b for _ in range(10)], repeats, sync)
    return 10 * 2 * size**3 / seconds


def prompts(batch: int, length: int, vocab: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(10, vocab, length).astype(np.int32) for _ in range(batch)]


def update_batch(args: argparse.Namespace, vocab: int, pad_id: int, config: Any) -> Any:
    """``--update-seqs`` sequences of ``--update-len`` tokens, the second half trained, in groups."""
    from textgym.algos.grpo import pack
    from textgym.rollout import Rollout

    rng = np.random.default_rng(1)
    half = args.update_len // 2
    rollouts = []
    for i in range(args.update_seqs):
        mask = (np.arange(args.update_len) >= half).astype(np.int8)
        rollouts.append(
            Rollout(
                env_id="gpu_check",
                task_id=str(i // config.group_size),
                seed=i // config.group_size,
                messages=[],
                reward=float(i % 2),
                success=bool(i % 2),
                turns=1,
                terminated=True,
                truncated=False,
                token_ids=rng.integers(10, vocab, args.update_len).astype(np.int32),
                loss_mask=mask,
                logprobs=np.where(mask > 0, -2.0, 0.0).astype(np.float32),
                group=i // config.group_size,
            )
        )
    return pack(rollouts, config, pad_id=pad_id)


def check_backend(name: str, path: Any, args: argparse.Namespace, params: int, peak: float) -> dict[str, Any]:
    from textgym.algos.backends import load_backend
    from textgym.algos.grpo import GRPOConfig

    backend = load_backend(name)
    if name == "torch":
        import torch

        device = {"device": args.device}
        sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    else:
        device, sync = {}, lambda: None  # JAX's generate and train_step hand back host values: already synchronous
    sampler = backend.load_model(path, dtype=args.dtype, **device)
    vocab = int(json.loads((path / "config.json").read_text())["vocab_size"])
    batch = prompts(args.batch, args.prompt_len, vocab)

    def sample() -> None:
        ids, _ = sampler.generate(batch, args.new_tokens, temperature=1.0, seed=0, eos_ids=())
        assert all(len(i) == args.new_tokens for i in ids)

    sample_s = timed(sample, args.repeats, sync)
    sampler = None  # the sampler's weights go before the learner's are loaded
    config = GRPOConfig(
        group_size=2,
        micro_batch_size=args.update_micro_batch,
        max_length=args.update_len,
        lr=1e-6,
        compute_dtype="bfloat16" if args.dtype == "bfloat16" else "float32",
        loss_aggregation="token-mean",
    )
    # torch keeps float32 master weights in the model it trains; the JAX learner keeps its own.
    model = backend.load_model(path, dtype="float32" if name == "torch" else args.dtype, **device)
    learner = backend.Learner(model, config)
    packed = update_batch(args, vocab, model.pad_id, config)
    update_s = timed(lambda: learner.train_step(packed), args.repeats, sync)
    tokens = args.update_seqs * args.update_len
    return {
        "sampler_tokens_per_s": args.batch * args.new_tokens / sample_s,
        "sampler_s": sample_s,
        "update_tokens_per_s": tokens / update_s,
        "update_s": update_s,
        "update_mfu": 6 * params * tokens / update_s / peak,
    }


def check_transformers(path: Any, args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, args.dtype)).to(args.device).eval()
    vocab = model.config.vocab_size
    ids = torch.as_tensor(np.stack(prompts(args.batch, args.prompt_len, vocab)), dtype=torch.long, device=args.device)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)

    def sample() -> None:
        with torch.no_grad():
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                max_new_tokens=args.new_tokens,
                min_new_tokens=args.new_tokens,
                pad_token_id=model.config.pad_token_id,
            )
        assert out.shape[1] == args.prompt_len + args.new_tokens

    seconds = timed(sample, args.repeats, sync)
    return {"sampler_tokens_per_s": args.batch * args.new_tokens / seconds, "sampler_s": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m", help="what --model takes (a preset, a directory, a .gguf file)")
    parser.add_argument("--device", default="cuda", help="torch device (JAX uses its default device)")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    parser.add_argument("--backends", nargs="+", default=["torch", "jax"], choices=("torch", "jax"))
    parser.add_argument("--batch", type=int, default=64, help="sampler prompts")
    parser.add_argument("--prompt-len", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--update-seqs", type=int, default=64, help="sequences per GRPO update")
    parser.add_argument("--update-len", type=int, default=1024, help="tokens per update sequence")
    parser.add_argument("--update-micro-batch", type=int, default=16)
    parser.add_argument("--matmul-size", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="also write the results here (JSON)")
    args = parser.parse_args()

    from textgym.algos import models

    models.quiet_transformers()
    path = models.resolve(args.model)
    config = json.loads((path / "config.json").read_text())
    from safetensors import safe_open

    with safe_open(str(path / "model.safetensors"), "np") as fh:
        names = fh.keys()  # safe_open is not iterable
        params = sum(
            int(np.prod(fh.get_slice(k).get_shape())) for k in names if k != "lm_head.weight" or not config.get("tie_word_embeddings")
        )
    peak = matmul_rate(args.matmul_size, args.dtype, args.device, args.repeats)
    results: dict[str, Any] = {
        "model": args.model,
        "parameters": params,
        "dtype": args.dtype,
        "device": args.device,
        "matmul_tflops": peak / 1e12,
        "settings": {k: v for k, v in vars(args).items() if k not in ("out",)},
    }
    if args.device.startswith("cuda"):
        import torch

        results["device_name"] = torch.cuda.get_device_name()
    for name in args.backends:
        results[name] = check_backend(name, path, args, params, peak)
        print(f"{name}: {json.dumps(results[name])}", file=sys.stderr, flush=True)
    results["transformers"] = check_transformers(path, args)
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
