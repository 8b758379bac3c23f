"""Finding and reading the rollout records that ``textgym view`` shows.

A path is a JSONL file of records (``textgym eval --out``, :func:`textgym.rollout.write_rollouts`)
or a ``textgym train`` run directory, whose ``rollouts/step_*.jsonl`` hold the logged steps. Records
are read as plain dicts, so a record of any age loads: fields it predates are simply absent
(``end_reason``, ``verifications``, ``tools`` ...) and the page says so instead of failing.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textgym.error import TextGymError

RUN_ROLLOUTS = "rollouts"
# Where a run directory keeps a tokenizer, most trained first (final export, checkpoints, warm start, init).
_TOKENIZER_DIRS = ("final", "checkpoints/*", "sft/final", "tiny-init")


class RecordError(TextGymError, ValueError):
    """A path holds no records, or a line of a file is not a record."""


@dataclass(frozen=True)
class Source:
    """One JSONL file of records and the run directory it belongs to (None for a loose file)."""

    path: Path
    run: Path | None = None


def sources(paths: Sequence[str | os.PathLike]) -> list[Source]:
    """The record files that ``paths`` name, in order.

    Raises:
        RecordError: A path does not exist, or a directory has no ``rollouts/*.jsonl``.
    """
    if not paths:
        raise RecordError("give at least one run directory or rollouts .jsonl file")
    found: list[Source] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted((path / RUN_ROLLOUTS).glob("*.jsonl")) or sorted(path.glob("*.jsonl"))
            files = [f for f in files if f.name != "metrics.jsonl"]
            if not files:
                raise RecordError(f"{str(raw)!r} holds no rollouts: expected {RUN_ROLLOUTS}/*.jsonl (textgym train) or *.jsonl files")
            found += [Source(f, path) for f in files]
        elif path.is_file():  # a logged step of a run (run/rollouts/step_N.jsonl) belongs to that run
            found.append(Source(path, path.parent.parent if path.parent.name == RUN_ROLLOUTS else None))
        else:
            raise RecordError(f"no such file or directory: {str(raw)!r}")
    return found


def read(source: Source) -> Iterator[dict[str, Any]]:
    """The records of one file, each with ``_source`` (``file:line``) added.

    JSON has no NaN or infinity, though Python writes them: such a value (``NaN``, ``-Infinity``,
    ``1e999``) is read as its text, so that no record holds a float the page's JSON cannot.

    Raises:
        RecordError: A line is not UTF-8, or not a JSON object with the fields every record
            has had (``env_id``, ``messages``, ``reward``).
    """
    with open(source.path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            where = f"{source.path}:{number}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise RecordError(f"{where} is not UTF-8 text (byte {exc.start + 1} of the line)") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line, parse_constant=str, parse_float=_finite_or_text)
            except (json.JSONDecodeError, RecursionError) as exc:
                raise RecordError(f"{where} is not JSON ({getattr(exc, 'msg', 'nested too deeply')})") from None
            if not isinstance(record, dict) or not {"env_id", "messages", "reward"} <= record.keys():
                raise RecordError(f"{where} is not a rollout record (it needs env_id, messages and reward)")
            record["_source"] = f"{source.path.name}:{number}"
            yield record


def _finite_or_text(text: str) -> float | str:
    value = float(text)
    return value if math.isfinite(value) else text


def tokenizer_dir(found: Sequence[Source]) -> Path | None:
    """A directory with the tokenizer of the first run directory among ``found`` that has one."""
    for run in dict.fromkeys(s.run for s in found if s.run is not None):
        for pattern in _TOKENIZER_DIRS:
            for candidate in sorted(run.glob(pattern), reverse=True):
                if (candidate / "tokenizer_config.json").is_file():
                    return candidate
    return None
