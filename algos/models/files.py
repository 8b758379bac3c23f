"""A model or checkpoint directory's files checked before loading: a broken one is one clear line.

Loading a broken file fails deep inside safetensors, transformers or numpy with a traceback (or
reads a device for ever). Here only sizes and headers are read, never a tensor and never a
pickle (unpickling runs code; textgym loads safetensors only):

* ``config.json`` must be a regular file (not a link to a device or a directory), at most
  :data:`MAX_CONFIG_BYTES`, holding a JSON object;
* every ``*.safetensors`` (the weights, a checkpoint's ``optimizer/state.safetensors``) must be a
  regular file whose header parses and whose tensors lie inside the file (a truncated copy fails);
* a directory whose weights are only pickled (``pytorch_model.bin``, ``*.pt``) is refused;
* a checkpoint's ``run_state.json`` must say its ``step`` as a non-negative integer.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from textgym.error import TextGymError

MAX_CONFIG_BYTES = 1 << 20
MAX_HEADER_BYTES = 100 << 20  # safetensors' own limit on a header
PICKLED = (".bin", ".pt", ".pth", ".pkl", ".ckpt")


class ModelFileError(TextGymError, ValueError):
    """A model or checkpoint file that cannot be loaded; the message names it."""


def check_model_dir(path: str | os.PathLike) -> None:
    """Raise :class:`ModelFileError` naming the first file of ``path`` that cannot be loaded (a
    model, or a LoRA adapter in peft's format)."""
    path = Path(path)
    adapter = path / "adapter_config.json"
    read_json(adapter if adapter.is_file() else path / "config.json")
    weights = sorted(path.rglob("*.safetensors"))
    if not weights:
        pickled = sorted(p for p in path.iterdir() if p.suffix.lower() in PICKLED)
        if pickled:
            raise ModelFileError(f"{pickled[0]}: pickled weights are never loaded (unpickling runs code); save the model as safetensors")
        raise ModelFileError(f"{path}: no *.safetensors weights")
    for file in weights:
        check_safetensors(file)


def check_safetensors(path: Path) -> None:
    """A safetensors file whose header parses and whose tensors all lie inside the file."""
    size = _regular(path).st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        length = int.from_bytes(head, "little") if len(head) == 8 else -1
        if not 0 < length <= min(MAX_HEADER_BYTES, size - 8):
            raise ModelFileError(f"{path}: truncated or not safetensors (its header does not fit in its {size} bytes)")
        try:
            header = json.loads(fh.read(length))
        except (ValueError, RecursionError):
            raise ModelFileError(f"{path}: corrupt safetensors header (not JSON)") from None
    data = size - 8 - length
    if not isinstance(header, dict):
        raise ModelFileError(f"{path}: corrupt safetensors header (not an object)")
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if not (
            isinstance(offsets, list)
            and len(offsets) == 2
            and all(type(o) is int for o in offsets)
            and 0 <= offsets[0] <= offsets[1] <= data
        ):
            raise ModelFileError(f"{path}: truncated or corrupt (tensor {name!r} lies outside the file's {data} data bytes)")


def read_json(path: Path) -> dict[str, Any]:
    """A small JSON object file (a config), checked to be one."""
    info = _regular(path)
    if info.st_size > MAX_CONFIG_BYTES:
        raise ModelFileError(f"{path}: {info.st_size} bytes, more than a config's {MAX_CONFIG_BYTES}")
    try:
        value = json.loads(path.read_bytes())
    except (ValueError, RecursionError):
        raise ModelFileError(f"{path}: not JSON") from None
    if not isinstance(value, dict):
        raise ModelFileError(f"{path}: not a JSON object")
    return value


def checkpoint_step(checkpoint: Path, run_state: str) -> int:
    """The step a checkpoint holds, once its files are checked loadable."""
    step = read_json(checkpoint / run_state).get("step")
    if type(step) is not int or step < 0:
        raise ModelFileError(f"{checkpoint / run_state}: 'step' must be a non-negative integer, got {step!r:.40}")
    check_model_dir(checkpoint)
    return step


def check_gguf(path: Path) -> None:
    """A regular file that starts as GGUF files do (the conversion reads the rest)."""
    _regular(path)
    with open(path, "rb") as fh:
        if fh.read(4) != b"GGUF":
            raise ModelFileError(f"{path}: not a GGUF file (it does not start with 'GGUF')")


def _regular(path: Path) -> os.stat_result:
    try:
        info = os.stat(path)  # follows links: a link to a device is a device
    except FileNotFoundError:
        raise ModelFileError(f"{path}: missing") from None
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ModelFileError(f"{path}: not a regular file (a link to a device, a pipe or a directory)")
    return info
