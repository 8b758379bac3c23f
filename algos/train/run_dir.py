"""A run's directory: its config, its checkpoints, its best model, and where a resumed run starts.

``checkpoints/step_XXXXXX`` holds the learner's whole state (weights, optimiser, KL reference) and
``run_state.json`` (the step and the world size), written atomically; ``best/`` is the earliest
model with the run's top held-out success. Every rank calls the functions that export or save
(each backend's learner gathers what it needs); rank 0 alone writes files.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any, NamedTuple

from textgym.algos.config import TrainConfig
from textgym.algos.config.fields import to_json
from textgym.algos.distributed import processes
from textgym.algos.models.files import ModelFileError, checkpoint_step, read_json
from textgym.algos.rollouts.token_envs import keep_chat_template
from textgym.error import TextGymError

CHECKPOINTS = "checkpoints"
RUN_STATE = "run_state.json"
BEST = "best"
KEEP_CHECKPOINTS = 2


class Start(NamedTuple):
    """Where a run starts: its directory, and the checkpoint it resumes (None: step 0)."""

    out: Path
    checkpoint: Path | None
    step: int


def open_run(config: TrainConfig) -> Start:
    """Claim ``config.output_dir`` (rank 0), find the checkpoint to resume, and write ``config.json``.

    Raises:
        TextGymError: The directory is not a run's.
        ValueError: The checkpoint was written by another number of processes.
        ModelFileError: Checkpoints exist and none of them loads.
    """
    out = Path(config.output_dir)
    writer = processes.is_writer()
    if writer:
        claim_run_dir(out)
    checkpoint, step = resumable_checkpoint(out) if config.resume else (None, 0)
    if checkpoint is not None:
        check_resume_world_size(checkpoint, processes.world_size())
    if writer:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(to_json(config), encoding="utf-8")
    return Start(out, checkpoint, step)


def claim_run_dir(out: Path) -> None:
    """Refuse an output directory that holds files but is not a textgym run (its ``config.json``
    would be overwritten, its ``best/`` and ``checkpoints/`` replaced). One that holds only a
    warm start (``sft/``, made by ``textgym sft --output-dir <run>/sft``) is the run's to continue."""
    if out.exists() and not out.is_dir():
        raise TextGymError(f"--output-dir {str(out)!r} is a file, not a directory")
    if not out.is_dir() or {p.name for p in out.iterdir()} <= {"sft"}:
        return
    try:
        config = read_json(out / "config.json")
    except ModelFileError:
        config = {}
    if not {"env", "grpo", "backend"} <= config.keys():
        raise TextGymError(f"--output-dir {str(out)!r} is not empty and not a textgym run directory: choose a new or empty one")


def resumable_checkpoint(out: Path) -> tuple[Path | None, int]:
    """The newest checkpoint whose files load, and its step; ``(None, 0)`` for a run without one.

    A corrupt newest checkpoint (truncated weights or optimiser state, a ``run_state.json``
    without a step) is passed over for the one before it, saying so; nothing is deleted.

    Raises:
        ModelFileError: Checkpoints exist and none of them loads.
    """
    found = _checkpoints(out / CHECKPOINTS)
    problems = []
    for checkpoint in reversed(found):
        try:
            step = checkpoint_step(checkpoint, RUN_STATE)
        except ModelFileError as exc:
            problems.append(str(exc))
            continue
        if problems:
            print(f"textgym train: {problems[0]}; resuming from {checkpoint.name} instead", file=sys.stderr, flush=True)
        return checkpoint, step
    if problems:
        raise ModelFileError(f"no checkpoint of {out} can be resumed ({problems[0]}); pass --no-resume to start over")
    return None, 0


def check_resume_world_size(checkpoint: Path, world: int) -> None:
    """Refuse to resume a checkpoint written by a run of another number of processes.

    Raises:
        ValueError: It was (each process's share of the groups and its sampling seeds depend on
            the world size, so the run would not continue exactly).
    """
    saved = read_json(checkpoint / RUN_STATE).get("world_size", 1)
    if saved != world:
        raise ValueError(
            f"{checkpoint} was written by a run of {saved} process{'es' if saved != 1 else ''}, this one has "
            f"{world}: resume with --nproc {saved}, or start a new run (--no-resume or another --output-dir)"
        )


def latest_checkpoint(out: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint of a run directory, or None."""
    found = _checkpoints(Path(out) / CHECKPOINTS)
    return found[-1] if found else None


def remove_checkpoints(out: Path) -> None:
    """``--no-resume``: remove the checkpoints this run's earlier life wrote (``step_*``), nothing else."""
    root = out / CHECKPOINTS
    if not root.is_dir():
        return
    for path in root.iterdir():
        if path.is_dir() and not path.is_symlink() and re.fullmatch(r"step_\d{6}(\.tmp)?", path.name):
            shutil.rmtree(path)
    with contextlib.suppress(OSError):
        root.rmdir()  # only when nothing else is left in it


def save_checkpoint(learner: Any, out: Path, step: int, template: str | None = None) -> Path:
    """Write ``checkpoints/step_XXXXXX`` (with the run's chat ``template``) atomically (a temporary
    directory, then a rename).

    A run killed while saving leaves only a ``.tmp`` directory, which resumption ignores. The
    oldest checkpoints beyond the last ``KEEP_CHECKPOINTS`` are removed.
    """
    root = out / CHECKPOINTS
    final = root / f"step_{step:06d}"
    tmp = root / f"step_{step:06d}.tmp"
    processes.writer_only(lambda: shutil.rmtree(tmp, ignore_errors=True))
    learner.save(tmp)  # every rank calls it; rank 0 writes
    if processes.is_writer():
        keep_chat_template(tmp, template)
        state = {"step": step, "world_size": processes.world_size()}
        (tmp / RUN_STATE).write_text(json.dumps(state) + "\n", encoding="utf-8")
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        for old in _checkpoints(root)[:-KEEP_CHECKPOINTS]:
            shutil.rmtree(old, ignore_errors=True)
    processes.barrier()
    return final


def keep_best(
    learner: Any, out: Path, record: dict[str, Any], earlier: list[dict[str, Any]], template: str | None = None
) -> dict[str, Any]:
    """Export the model (with the run's chat ``template``) to ``best/`` when ``record``'s held-out
    success beats every earlier one.

    The first best wins ties, so ``best/`` is the earliest model with the run's top score;
    ``summary.json`` names its step.
    """
    scores = [r["eval/success"] for r in earlier if "eval/success" in r]
    if not scores or record["eval/success"] > max(scores):
        tmp = out / (BEST + ".tmp")
        processes.writer_only(lambda: shutil.rmtree(tmp, ignore_errors=True))
        learner.export(tmp)  # every rank calls it; rank 0 writes
        if processes.is_writer():
            keep_chat_template(tmp, template)
            shutil.rmtree(out / BEST, ignore_errors=True)
            os.replace(tmp, out / BEST)
    return record


def _checkpoints(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.endswith(".tmp") and (p / RUN_STATE).is_file())
