"""Each env's card is written once, as its class docstring; ``docs/envs/<name>.md`` is that docstring
rendered as a page.

After editing an env's docstring, regenerate the pages (a test holds each committed page equal to
its rendering)::

    python -m textgym.envs.cards docs/envs

A docstring links to other docs by their path from the repository's root (``docs/sandbox.md``), which
reads right in ``help()``; the page gets the same links relative to ``docs/envs/``.
"""

from __future__ import annotations

import importlib
import inspect
import re

from textgym.registration import ENVS, EnvEntry

# The sections every card has, in this order (an env may add its own between them), after
# Gymnasium's env docstrings adapted to text.
TEMPLATE = ("Observation", "Actions", "Tools", "Reward", "Episode end", "Tasks", "Arguments", "Version history")


def card_name(entry: EnvEntry) -> str:
    """The card's file name: the env's package, ``sudoku.md`` for ``textgym.envs.sudoku:SudokuEnv``."""
    return entry.entry_point.partition(":")[0].rsplit(".", 1)[1] + ".md"


def render_card(entry: EnvEntry) -> str:
    """The Markdown page of ``entry``'s env: a title from its id, then its class docstring."""
    module, _, name = entry.entry_point.partition(":")
    cls = getattr(importlib.import_module(module), name)
    body = re.sub(r"\]\(docs/", "](../", inspect.cleandoc(cls.__doc__ or ""))
    header = f"<!-- Generated from the docstring of {entry.entry_point} by `python -m textgym.envs.cards docs/envs`. -->"
    return f"{header}\n\n# {entry.id.split('/', 1)[1]}\n\n{body}\n"


if __name__ == "__main__":
    import sys
    from pathlib import Path

    if len(sys.argv) != 2:
        sys.exit("usage: python -m textgym.envs.cards DOCS_ENVS_DIR")
    for entry in ENVS:
        (Path(sys.argv[1]) / card_name(entry)).write_text(render_card(entry), encoding="utf-8")
