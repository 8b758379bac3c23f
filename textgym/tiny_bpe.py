"""A byte-level BPE vocabulary for the ``tiny`` model, trained offline on the envs' own text.

The ``tiny`` model reads bytes by default: a Sudoku ``place`` call is 67 tokens, of which three
(row, column, digit) are decisions, and each token costs a decode call when sampled and a row
of the update. This vocabulary merges the envs' recurring scaffolding (JSON keys, tool results,
feedback lines) into fewer tokens while every digit stays a token of its own, so a move is 30
tokens and each decision still has its own position.

It is trained once, with ``tokenizers``' BPE trainer, on oracle episodes of all three envs
rendered with the compact chat template, and shipped as ``tiny_bpe.json``; ``python -m
textgym.tiny_bpe`` rebuilds that file. Nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from textgym.error import require
from textgym.tokenizer import TINY_BPE_FILE as VOCAB_FILE

VOCAB_SIZE = 1024
"""Merges stop here: beyond ~1k the rare merges only serve single task templates."""


# Qwen2's split, which transformers applies to every tokenizer of a ``qwen2`` model directory
# whatever its tokenizer.json says: words, single digits, runs of punctuation, spaces.
QWEN2_SPLIT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def pre_tokenizer() -> Any:
    """Qwen2's pre-tokenizer: every digit a piece of its own (a merge never hides a decision)."""
    tokenizers = require("tokenizers", "tokens")
    pre = tokenizers.pre_tokenizers
    split = pre.Split(tokenizers.Regex(QWEN2_SPLIT), behavior="isolated")
    return pre.Sequence([split, pre.ByteLevel(add_prefix_space=False, use_regex=False)])


def _episodes(env_id: str, kwargs: dict[str, Any], oracle: dict[str, Any], seeds: range) -> Iterator[list[dict[str, Any]]]:
    """The conversations of the env's (noisy) oracle on ``seeds``."""
    import gymnasium as gym

    env = gym.make(env_id, **kwargs)
    try:
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            done = False
            while not done:
                obs, _, terminated, truncated, _ = env.step(env.unwrapped.oracle_action(**oracle))
                done = terminated or truncated
            yield list(obs)
    finally:
        env.close()


def corpus(episodes: int = 64) -> Iterator[str]:
    """Rendered oracle episodes of every env in the shapes the presets train on."""
    import textgym  # noqa: F401  (registers the ids)
    from textgym.tokenizer import COMPACT_CHAT_TEMPLATE, tiny_tokenizer

    tok = tiny_tokenizer()
    sources = [
        ("textgym/Sudoku-v0", {"size": 4, "blanks": 3, "max_turns": 8, "board": "compact"}, {"place": 1, "noise": 0.5}),
        ("textgym/Sudoku-v0", {"size": 4, "blanks": 1, "max_turns": 1}, {"compact": True, "noise": 0.3}),
        ("textgym/Sudoku-v0", {"size": 6, "max_turns": 8}, {"place": 2, "noise": 0.3}),
        ("textgym/Sudoku-v0", {"size": 9, "max_turns": 4}, {"noise": 0.2}),
        ("textgym/Workplace-v0", {}, {"lookup": True, "noise": 0.3}),
        ("textgym/Workplace-v0", {}, {}),
        ("textgym/Code-v0", {"max_attempts": 2}, {"noise": 0.5}),
    ]
    for env_id, kwargs, oracle in sources:
        for messages in _episodes(env_id, kwargs, oracle, range(episodes)):
            yield tok.apply_chat_template(messages, chat_template=COMPACT_CHAT_TEMPLATE, tokenize=False)


def train(texts: Iterator[str], vocab_size: int = VOCAB_SIZE) -> Any:
    """A ``tokenizers.Tokenizer``: byte-level BPE with the tiny tokenizer's special and markup tokens."""
    tokenizers = require("tokenizers", "tokens")
    from textgym.tokenizer import MARKUP_TOKENS, SPECIAL_TOKENS

    backend = tokenizers.Tokenizer(tokenizers.models.BPE())
    backend.pre_tokenizer = pre_tokenizer()
    backend.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,
    )
    # Markup tokens split the text before BPE sees it, as they do in the byte tokenizer.
    backend.add_special_tokens([tokenizers.AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    backend.add_tokens([tokenizers.AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    backend.train_from_iterator(texts, trainer=trainer)
    return backend


def load() -> Any:
    """The shipped vocabulary as a ``tokenizers.Tokenizer``."""
    tokenizers = require("tokenizers", "tokens")
    return tokenizers.Tokenizer.from_file(str(VOCAB_FILE))


if __name__ == "__main__":
    train(corpus()).save(str(VOCAB_FILE))
    print(f"wrote {VOCAB_FILE}")
