"""Task records, JSONL files and seeded task sources.

A task is a plain record that serialises to one JSON line: ``id``, ``data`` (what the prompt is
made from), ``answer`` (the ground truth the verifier uses) and ``metadata`` (category,
difficulty, source). Envs convert their own input formats into it; everything else treats it
opaquely.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from textgym.error import InvalidTask
from textgym.parsing import decode_json


@dataclass(frozen=True)
class Task:
    """One task: ``id``, prompt ``data``, ground-truth ``answer`` and ``metadata``."""

    id: str
    data: Mapping[str, Any]
    answer: Any = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "data": dict(self.data), "answer": self.answer, "metadata": dict(self.metadata)}

    def to_json(self) -> str:
        """One JSON line (no newline); ``Task.from_json`` reads it back equal."""
        return json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Task:
        if not isinstance(d, Mapping) or "data" not in d or "id" not in d:
            raise InvalidTask("a task record needs 'id' and 'data'")
        return cls(str(d["id"]), dict(d["data"]), d.get("answer"), dict(d.get("metadata") or {}))

    @classmethod
    def from_json(cls, line: str) -> Task:
        return cls.from_dict(json.loads(line))

    @staticmethod
    def is_record(d: Any) -> bool:
        """True when ``d`` is already in the Task record shape (not an env-specific format)."""
        return isinstance(d, Task) or (isinstance(d, Mapping) and "id" in d and isinstance(d.get("data"), Mapping))


def task_id(prefix: str, *parts: Any) -> str:
    """A stable id from the task's content, the same in every process."""
    digest = hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return f"{prefix}-{digest}"


def read_jsonl(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Read one JSON object per non-empty line; errors name the file and line."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = decode_json(line)
            except ValueError as exc:
                raise InvalidTask(f"{path}:{lineno}: not valid JSON ({exc})") from None
            if not isinstance(row, dict):
                raise InvalidTask(f"{path}:{lineno}: expected a JSON object")
            rows.append(row)
    return rows


def write_jsonl(path: str | os.PathLike, tasks: Iterable[Task]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for t in tasks:
            fh.write(t.to_json() + "\n")


def load_tasks(source: str | os.PathLike | Sequence[Any], convert) -> list[Task]:
    """Load a dataset from a JSONL path or a sequence of records, converting each with ``convert``.

    ``convert`` is the env's own ``task_from_dict``; a bad row raises InvalidTask naming its index.
    """
    rows = read_jsonl(source) if isinstance(source, (str, os.PathLike)) else list(source)
    tasks = []
    for i, row in enumerate(rows):
        try:
            tasks.append(row if isinstance(row, Task) else convert(row))
        except (InvalidTask, ValueError, KeyError, TypeError) as exc:
            raise InvalidTask(f"task {i}: {exc}") from None
    if not tasks:
        raise InvalidTask("the task dataset is empty")
    return tasks
