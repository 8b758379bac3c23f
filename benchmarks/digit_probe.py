"""Does a model read the Sudoku board? Its probability of the right digit at demonstrated moves.

Held-out success mixes everything a Sudoku-by-moves policy does (the call's format, which cell, which
digit, what it does after a rejection). This probe isolates the one decision that needs the board:
on a clean demonstrator's episodes (the solution's digit at each move), it reads the model's
next-token distribution at each move's digit token, restricted to the digits 1-4, and reports the
mean probability of the right digit and how often it is the most likely one. A model that guesses
scores 0.25 and 0.25; one that reads its row, column and box scores near 1.

    python benchmarks/digit_probe.py runs/moves/sft/final runs/moves/checkpoints/step_000050 --episodes 64
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from textgym.algos.models import load_tokenizer
from textgym.algos.train.sft import demonstrations

ENV = "textgym/Sudoku-v0"
ENV_KWARGS = {"size": 4, "blanks": 3, "max_turns": 4, "board": "compact"}
SEED_OFFSET = 900_000  # task seeds no warm start or training run draws (they stay below 10**5 + demos)


def digit_positions(token_ids: np.ndarray, loss_mask: np.ndarray, tokenizer, digit_ids: list[int]) -> list[int]:
    """Positions of the demonstrated digits: trained tokens that are a digit right after ``digit":``."""
    key = tokenizer.encode('digit": ', add_special_tokens=False)
    n = len(key)
    return [i for i in range(n, len(token_ids)) if loss_mask[i] and token_ids[i] in digit_ids and list(token_ids[i - n : i]) == key]


def probe(model_dir: str, episodes: int) -> dict[str, float]:
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = load_tokenizer(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    seeds = range(SEED_OFFSET, SEED_OFFSET + episodes)
    demos = demonstrations(ENV, ENV_KWARGS, tokenizer, None, seeds, 16, {"place": 1, "noise": 0.0})
    digit_ids = [tokenizer.convert_tokens_to_ids(str(d)) for d in range(1, 5)]
    right, top = [], []
    for demo in demos:
        ids = np.asarray(demo.token_ids)
        with torch.no_grad():
            logits = model(torch.tensor(ids[None])).logits[0]
        for i in digit_positions(ids, np.asarray(demo.loss_mask), tokenizer, digit_ids):
            p = torch.softmax(logits[i - 1, digit_ids], -1).numpy()
            k = digit_ids.index(int(ids[i]))
            right.append(float(p[k]))
            top.append(float(p.argmax() == k))
    return {"moves": len(right), "p_right_digit": float(np.mean(right)), "right_digit_most_likely": float(np.mean(top))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="+", help="Hugging Face directories (a warm start's final/, a checkpoint)")
    parser.add_argument("--episodes", type=int, default=64, help="Clean demonstrations probed (3 moves each)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    for model_dir in args.models:
        print(json.dumps({"model": model_dir} | probe(model_dir, args.episodes)))


if __name__ == "__main__":
    main()
