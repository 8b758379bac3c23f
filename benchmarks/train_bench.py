"""GRPO step time, tokens/s and peak memory: textgym's torch and JAX backends vs TRL's GRPOTrainer.

One run, same tiny checkpoint, same single-turn Sudoku 4x4 prompts (the compact template's
rendering), same batch (``--prompts`` x ``--group-size`` completions of at most
``--max-new-tokens``), same objective settings (token-mean loss, no KL, one iteration, lr,
temperature 1) and the same CPU thread count. A GRPO step is everything between two updates:
sampling the group completions, scoring them and the update. Each framework runs in its own
process (TRL from its own virtualenv), so peak RSS is per framework.

    .venv/bin/python benchmarks/train_bench.py --trl-python .bench-venvs/trl/bin/python

``--finetune`` compares what a step costs with fewer trained weights (the ``--trainable-layers`` and
``--lora-rank`` of ``textgym train``), on textgym's two backends; ``--model`` and ``--env-kwargs``
run it on a real checkpoint, e.g. the ``sudoku-smollm2`` preset's model and env settings:

    .venv/bin/python benchmarks/train_bench.py --model smollm2-135m --env-kwargs '{"size": 4, "blanks": 1, "max_turns": 1}' \
        --only torch jax --finetune full trainable-layers=8 lora-rank=8 lora-rank=16

The TRL worker imports neither textgym nor gymnasium: its reward compares the digits after
``<answer>`` with the solution, which is what the Sudoku verifier decides for a one-turn episode.
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV_ID = "textgym/Sudoku-v0"
ENV_KWARGS = {"size": 4, "blanks": 4, "max_turns": 1}
FINETUNE = {"trainable-layers": "trainable_layers", "lora-rank": "lora_rank"}  # --finetune NAME=N: the GRPOConfig field


def finetune_fields(variant: str) -> dict[str, int]:
    """The GRPOConfig fields of a ``--finetune`` variant: ``full`` (every weight) or ``NAME=N``."""
    if variant == "full":
        return {}
    name, _, value = variant.partition("=")
    if name not in FINETUNE or not value.isdigit():
        raise argparse.ArgumentTypeError(f"expected full or one of {', '.join(f'{n}=N' for n in FINETUNE)}, got {variant!r}")
    return {FINETUNE[name]: int(value)}


def finetune_variant(variant: str) -> str:
    finetune_fields(variant)
    return variant


# ----- the driver (runs in textgym's venv) -----


def prepare(workdir: Path, model: str, env_kwargs: dict, prompts: int, steps: int) -> tuple[Path, Path]:
    """The checkpoint (``tiny`` created in ``workdir``) and the prompts file (text, ids, solution) every worker reads."""
    import gymnasium as gym

    from textgym.algos import models
    from textgym.algos.models import tiny
    from textgym.wrappers import TokenObservation

    model = models.resolve(model, workdir)
    tokenizer = models.load_tokenizer(model)
    env = TokenObservation(gym.make(ENV_ID, **env_kwargs), tokenizer, chat_template=tiny.compact_chat_template())
    rows = []
    for seed in range(prompts * (steps + 1)):
        ids, _ = env.reset(seed=seed)
        rows.append({"seed": seed, "prompt": tokenizer.decode(ids.tolist()), "solution": env.unwrapped.task.answer})
    path = workdir / "prompts.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return model, path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=6, help="GRPO steps per framework (the first is warm-up)")
    parser.add_argument("--prompts", type=int, default=4, help="prompts per step")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads of every framework")
    parser.add_argument("--trl-python", default=".bench-venvs/trl/bin/python", help="python of the TRL virtualenv")
    parser.add_argument("--only", nargs="*", default=["torch", "jax", "trl"], choices=["torch", "jax", "trl"])
    parser.add_argument("--model", default="tiny", help="tiny (random, created here), smollm2-135m or a HF directory")
    parser.add_argument("--env-kwargs", type=json.loads, default=ENV_KWARGS, help="JSON keyword arguments of the Sudoku env (one turn)")
    parser.add_argument(
        "--finetune",
        nargs="+",
        type=finetune_variant,
        default=["full"],
        metavar="VARIANT",
        help="what each textgym run trains: full, trainable-layers=N or lora-rank=N (default targets); one row each (TRL: full only)",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        model, prompts = prepare(Path(tmp), args.model, args.env_kwargs, args.prompts, args.steps)
        common = [
            "--model",
            str(model),
            "--prompts-file",
            str(prompts),
            "--steps",
            str(args.steps),
            "--prompts",
            str(args.prompts),
            "--group-size",
            str(args.group_size),
            "--max-new-tokens",
            str(args.max_new_tokens),
            "--lr",
            str(args.lr),
            "--threads",
            str(args.threads),
            "--env-kwargs",
            json.dumps(args.env_kwargs),
        ]
        results = {}
        for variant in args.finetune:
            for name in args.only:
                if name == "trl" and variant != "full":  # its trainer is run as the full fine-tuning peer only
                    continue
                python = args.trl_python if name == "trl" else sys.executable
                env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS=str(args.threads))
                if name == "jax":
                    env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" if args.threads == 1 else ""
                command = [python, __file__, "worker", name, *common, "--finetune", variant]
                done = subprocess.run(command, env=env, capture_output=True, text=True)
                if done.returncode:
                    sys.exit(f"{name} worker ({variant}) failed:\n{done.stderr[-4000:]}")
                results[variant, name] = json.loads(done.stdout.strip().splitlines()[-1])
                print(variant, name, results[variant, name], file=sys.stderr, flush=True)
    print(table(results, args))


def table(results: dict, args: argparse.Namespace) -> str:
    names = {"torch": "textgym torch", "jax": "textgym JAX", "trl": "TRL GRPOTrainer"}
    trl = results.get(("full", "trl"))
    lines = [
        f"{args.model}, {args.prompts} prompts x {args.group_size} completions (<= {args.max_new_tokens} tokens), "
        f"{args.steps - 1} timed steps, {args.threads} thread(s)",
        "",
        "| fine-tuning | framework | step time (median s) | sample / env / update (s) | completion tokens/s | peak RSS (MiB) "
        "| trainable params | speed vs TRL |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (variant, key), r in results.items():
        ratio = f"{trl['step_s'] / r['step_s']:.2f}x" if trl and variant == "full" else "n/a"
        parts = f"{r['sample_s']:.2f} / {r['env_s']:.2f} / {r['update_s']:.2f}" if "sample_s" in r else "(not separable)"
        trained = f"{r['trainable_params']:,}" if "trainable_params" in r else "all"
        lines.append(
            f"| {variant} | {names[key]} | {r['step_s']:.2f} | {parts} | {r['tokens_per_s']:.0f} | {r['peak_rss_mib']:.0f} "
            f"| {trained} | {ratio} |"
        )
    return "\n".join(lines)


# ----- workers -----


def worker_textgym(args: argparse.Namespace, backend_name: str) -> dict:
    import numpy as np

    from textgym.algos import models
    from textgym.algos.backends import load_backend
    from textgym.algos.grpo import GRPOConfig, pack, policy_prefix
    from textgym.algos.models import tiny
    from textgym.algos.rollouts.token_envs import token_venv
    from textgym.policies.model import ModelPolicy
    from textgym.rollout import collect

    backend = load_backend(backend_name, args.threads)
    model = backend.load_model(args.model)
    config = GRPOConfig(
        group_size=args.group_size,
        lr=args.lr,
        max_new_tokens=args.max_new_tokens,
        max_length=512,
        micro_batch_size=args.prompts * args.group_size,
        kl_beta=0.0,
        loss_aggregation="token-mean",
        **finetune_fields(args.finetune),
    )
    learner = backend.Learner(model, config)
    tokenizer = models.load_tokenizer(args.model)
    episodes = args.prompts * args.group_size
    venv = token_venv(ENV_ID, args.env_kwargs, tokenizer, tiny.compact_chat_template(), episodes)
    times, tokens, split = [], [], []
    for step in range(args.steps):
        t0 = time.perf_counter()
        actor = ModelPolicy(model, max_new_tokens=args.max_new_tokens, temperature=1.0, seed=step)
        rollouts = collect(venv, actor, seeds=range(step * args.prompts, (step + 1) * args.prompts), group_size=args.group_size)
        t1 = time.perf_counter()
        learner.train_step(pack([policy_prefix(r) for r in rollouts], config, pad_id=model.pad_id))
        times.append(time.perf_counter() - t0)
        tokens.append(int(sum(int(np.sum(r.loss_mask)) for r in rollouts)))
        policy_s = sum(r.timing.get("policy_s", 0.0) for r in rollouts) / len(rollouts)  # every episode waits the batched calls
        split.append((policy_s, t1 - t0 - policy_s, times[-1] - (t1 - t0)))
    venv.close()
    result = summarize(times, tokens)
    result["sample_s"], result["env_s"], result["update_s"] = (statistics.median(x[i] for x in split[1:]) for i in range(3))
    # AdamW's moments, one pair per trained tensor, named alike by both backends: what the step trains.
    result["trainable_params"] = sum(m.size for m, _ in learner._adam_state()[1].values())
    return result


def worker_trl(args: argparse.Namespace) -> dict:
    import re

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(args.threads)
    rows = json.loads(Path(args.prompts_file).read_text(encoding="utf-8"))[: args.prompts * args.steps]
    dataset = Dataset.from_list([{"prompt": r["prompt"], "solution": r["solution"]} for r in rows])

    def sudoku_reward(completions, solution, **_):
        """1.0 when the digits after the last <answer> are the solution's (the verifier's one-turn rule)."""
        out = []
        for text, want in zip(completions, solution):
            answer = text.rsplit("<answer>", 1)[-1].split("</answer>")[0] if "<answer>" in text else ""
            out.append(float(re.sub(r"[^0-9]", "", answer) == re.sub(r"[^0-9]", "", want)))
        return out

    times, tokens, starts = [], [], []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a, **k):
            starts.append(time.perf_counter())

        def on_step_end(self, *a, **k):
            times.append(time.perf_counter() - starts[-1])

        def on_log(self, _args, _state, _control, logs=None, **k):
            if logs and "completions/mean_length" in logs:
                tokens.append(int(logs["completions/mean_length"] * args.prompts * args.group_size))

    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(),
        per_device_train_batch_size=args.prompts * args.group_size,
        num_generations=args.group_size,
        max_completion_length=args.max_new_tokens,
        learning_rate=args.lr,
        beta=0.0,
        num_iterations=1,
        temperature=1.0,
        loss_type="dapo",
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        max_steps=args.steps,
        shuffle_dataset=False,
        seed=0,
    )
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    trainer = GRPOTrainer(
        model=model, reward_funcs=sudoku_reward, args=config, train_dataset=dataset, processing_class=tokenizer, callbacks=[Clock()]
    )
    trainer.train()
    return summarize(times, tokens)


def summarize(times: list[float], tokens: list[int]) -> dict:
    timed, counted = times[1:], tokens[1 : len(times)]
    step = statistics.median(timed)
    return {
        "step_s": step,
        "tokens_per_s": sum(counted) / sum(timed[: len(counted)]) if counted else 0.0,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "steps": len(times),
    }


def worker_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("framework", choices=["torch", "jax", "trl"])
    for flag in ("--model", "--prompts-file"):
        parser.add_argument(flag, required=True)
    for flag in ("--steps", "--prompts", "--group-size", "--max-new-tokens", "--threads"):
        parser.add_argument(flag, type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--env-kwargs", type=json.loads, required=True)
    parser.add_argument("--finetune", type=finetune_variant, required=True)
    args = parser.parse_args(argv)
    result = worker_trl(args) if args.framework == "trl" else worker_textgym(args, args.framework)
    print(json.dumps(result))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker_main(sys.argv[2:])
    else:
        main()
