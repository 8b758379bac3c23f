"""The metrics stream of a run: one JSON object per line, resumable, plus a rich progress bar.

Each record carries ``step``. A resumed run first drops the records of steps after its
checkpoint (they are recomputed identically), so the file never holds a step twice.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class MetricsLog:
    """Append-only JSONL of metric records.

    Args:
        path: The file.
        keep_until: Keep existing records with ``step <= keep_until`` (resume); ``None`` starts empty.
        writer: Whether this process writes the file; the other ranks of a multi-process run keep
            the same records in memory only.
    """

    def __init__(self, path: str | os.PathLike, keep_until: int | None = None, *, writer: bool = True):
        self.path = Path(path)
        self.writer = writer
        kept = [r for r in read_metrics(self.path) if r.get("step", 0) <= keep_until] if keep_until is not None else []
        if writer:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "w", encoding="utf-8") as fh:
                for record in kept:
                    fh.write(json.dumps(record) + "\n")
        self.records = kept

    def write(self, record: Mapping[str, Any]) -> None:
        record = dict(record)
        if self.writer:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")
        self.records.append(record)


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of a metrics file (empty when it does not exist)."""
    path = Path(path)
    if not path.is_file():
        return []
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@contextmanager
def progress_bar(description: str, total: int, completed: int = 0, enabled: bool = True) -> Iterator[Any]:
    """A rich progress bar; ``bar.update(advance=1, info="...")`` moves it and shows the latest metrics."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"),
    )
    with Progress(*columns, disable=not enabled, transient=False) as progress:
        task = progress.add_task(description, total=total, completed=completed, info="")

        class _Bar:
            def update(self, advance: int = 0, info: str | None = None) -> None:
                fields = {} if info is None else {"info": info}
                progress.update(task, advance=advance, **fields)

        yield _Bar()
