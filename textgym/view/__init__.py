"""``textgym view``: browse rollouts in one self-contained HTML page.

``textgym view <run dir | rollouts.jsonl ...> [--out view.html]`` reads the records of
``textgym eval --out`` files and ``textgym train`` run directories (``rollouts/step_*.jsonl``) and
writes a page with inline CSS and JS that fetches nothing and opens from disk: a filterable,
sortable list of episodes; per episode the conversation with its tool calls, the env's own view
(Sudoku's boards, Workplace's database changes, Code's tests per submission), and the tokens
coloured by loss mask with the sampler's logprob on hover and the group's rewards and advantages.

Example::

    textgym eval textgym/Sudoku-v0 --policy oracle --policy random --out runs/eval.jsonl
    textgym view runs/eval.jsonl runs/sudoku-torch --out view.html
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from textgym.view.page import decode_vocab, page_data, render
from textgym.view.records import RecordError, read, sources, tokenizer_dir

__all__ = ["RecordError", "build", "write"]


def build(paths: Sequence[str | os.PathLike], tokenizer: Any = None) -> str:
    """The HTML page for the records under ``paths``.

    Args:
        paths: JSONL files of rollout records and ``textgym train`` run directories.
        tokenizer: Decodes token ids for the token view: a tokenizer, a Hugging Face directory,
            ``"tiny"``, or None (a run directory's own tokenizer where there is one; otherwise
            the token view shows ids).

    Raises:
        RecordError: A path holds no records, or a line is not a record.
    """
    found = sources(paths)
    records = [r for s in found for r in read(s)]
    if not records:
        raise RecordError(f"no records in {', '.join(str(p) for p in paths)}")
    vocab = None
    if any(r.get("token_ids") for r in records):
        tok = _tokenizer(tokenizer, found)
        vocab = decode_vocab(tok, records) if tok is not None else None
    title = "textgym view: " + ", ".join(str(p) for p in paths)
    return render(page_data(records, vocab, title))


def write(paths: Sequence[str | os.PathLike], out: str | os.PathLike, tokenizer: Any = None) -> Path:
    """Write :func:`build`'s page to ``out``; return its path."""
    out = Path(out)
    out.write_text(build(paths, tokenizer), encoding="utf-8")
    return out


def _tokenizer(tokenizer: Any, found: Sequence[Any]) -> Any:
    if tokenizer is not None and not isinstance(tokenizer, (str, os.PathLike)):
        return tokenizer
    if str(tokenizer) == "tiny":
        from textgym.tokenizer import tiny_tokenizer

        return tiny_tokenizer()
    path = Path(tokenizer) if tokenizer is not None else tokenizer_dir(found)
    if path is None:
        return None
    try:
        from transformers import AutoTokenizer
    except ImportError:  # the token view falls back to ids
        return None
    return AutoTokenizer.from_pretrained(str(path))


# ----- command line -----


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``textgym view``."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help="run directories (textgym train) or rollouts .jsonl files")
    parser.add_argument("--out", default="view.html", metavar="HTML", help="the page to write (default: view.html)")
    parser.add_argument(
        "--tokenizer",
        default=None,
        metavar="DIR",
        help="tokenizer for the token view: a Hugging Face directory or 'tiny' (default: the run directory's)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``textgym view``; bad paths print one line and exit 2 (through the CLI)."""
    out = Path(args.out)
    if not out.parent.resolve().is_dir():
        raise RecordError(f"--out: the folder of {args.out!r} does not exist")
    if args.tokenizer not in (None, "tiny") and not Path(args.tokenizer).is_dir():
        raise RecordError(f"--tokenizer: expected a Hugging Face tokenizer directory or 'tiny', got {args.tokenizer!r}")
    write(args.paths, out, args.tokenizer)
    size = out.stat().st_size
    print(f"wrote {out} ({size / 1e6:.1f} MB)")
    return 0
