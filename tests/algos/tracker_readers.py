"""Read back what a run reported, with each tracker's own reader or file format, as ``{step: {key: value}}``.

* TensorBoard: its event reader (``EventAccumulator``), over the run's ``tensorboard/`` directory.
* wandb: the offline run files (``wandb/offline-run-*/run-<id>.wandb``), a LevelDB-style log of
  wandb's own ``Record`` protobufs (wandb 0.31 ships no Python reader for them any more).
* trackio: its local store, one SQLite database per project (``<TRACKIO_DIR>/<project>.db``).
"""

from __future__ import annotations

import json
import sqlite3
import struct
from pathlib import Path
from typing import Any

Steps = dict[int, dict[str, float]]


def tensorboard(logdir: Path) -> tuple[Steps, dict[str, Any]]:
    """Scalars by step, and the HParams and text entries (``{"hparams": {...}, "config": str, "summary": str}``)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    steps: Steps = {}
    for tag in acc.Tags()["scalars"]:
        for event in acc.Scalars(tag):
            steps.setdefault(event.step, {})[tag] = event.value
    extra: dict[str, Any] = {}
    for tag in acc.Tags()["tensors"]:
        [*_, event] = acc.Tensors(tag)
        if tag in ("config", "summary"):
            extra[tag] = event.tensor_proto.string_val[0].decode()
    for content in acc.PluginTagToContent("hparams").values():
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
        if data.HasField("session_start_info"):
            values = data.session_start_info.hparams
            extra["hparams"] = {k: getattr(v, v.WhichOneof("kind")) for k, v in values.items()}
    return steps, extra


def wandb_runs(run_dir: Path) -> list[dict[str, Any]]:
    """Each offline run segment in ``run_dir/wandb``, oldest first: ``{"id", "history", "config", "summary"}``."""
    from wandb.proto import wandb_internal_pb2 as pb

    segments = []
    for path in sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb")):
        seg: dict[str, Any] = {"id": None, "history": {}, "config": {}, "summary": {}}
        for raw in _leveldb_records(path.read_bytes()):
            record = pb.Record.FromString(raw)
            kind = record.WhichOneof("record_type")
            if kind == "run":
                seg["id"] = record.run.run_id
                seg["config"] |= {u.key: json.loads(u.value_json) for u in record.run.config.update}
            elif kind == "config":
                seg["config"] |= {u.key: json.loads(u.value_json) for u in record.config.update}
            elif kind == "history":
                items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
                seg["history"][record.history.step.num] = {k: v for k, v in items.items() if not k.startswith("_")}
            elif kind == "summary":
                seg["summary"] |= {u.key or "/".join(u.nested_key): json.loads(u.value_json) for u in record.summary.update}
        segments.append(seg)
    return segments


def _leveldb_records(data: bytes):
    """The records of a wandb transaction log: a 7-byte file header, then 32 KiB blocks of
    ``<crc32:4><length:2><type:1>`` chunks (full, first, middle, last)."""
    block, pos, pending = 32768, 7, b""
    assert data[:4] == b":W&B", data[:7]
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # the block's tail is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:
            pos += left
            continue
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 1:
            yield chunk
        elif kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk
        else:
            yield pending + chunk


def trackio(trackio_dir: Path, project: str = "textgym") -> dict[str, dict[str, Any]]:
    """Each run of the project: ``{run name: {"steps": {step: metrics}, "rows": n, "config": {...}}}``."""
    con = sqlite3.connect(trackio_dir / f"{project}.db")
    try:
        runs: dict[str, dict[str, Any]] = {}
        for name, step, metrics in con.execute("SELECT run_name, step, metrics FROM metrics ORDER BY id"):
            run = runs.setdefault(name, {"steps": {}, "rows": 0, "config": {}})
            run["steps"].setdefault(step, {}).update(json.loads(metrics))
            run["rows"] += 1
        for name, config in con.execute("SELECT run_name, config FROM configs"):
            runs.setdefault(name, {"steps": {}, "rows": 0, "config": {}})["config"] = json.loads(config)
    finally:
        con.close()
    return runs


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """A metrics.jsonl record's numbers (booleans as 0/1), without ``step``."""
    return {k: float(v) for k, v in record.items() if k != "step" and isinstance(v, (int, float))}
