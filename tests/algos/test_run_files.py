"""What ``train`` and ``sft`` read and write on disk: foreign directories, broken models, corrupt
checkpoints and unknown env ids are one line each, and nothing saved is changed."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from textgym.algos import models
from textgym.algos.models.files import ModelFileError
from textgym.algos.train import run_dir
from textgym.cli import main
from textgym.error import TextGymError


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return models.resolve("tiny", tmp_path_factory.mktemp("tiny"))


def copy_of(tiny_dir, tmp_path, name="model"):
    out = tmp_path / name
    shutil.copytree(tiny_dir, out)
    return out


def one_line_error(capsys, argv, *needles):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err
    return err


def snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_directory_that_is_not_a_run_is_refused_and_left_alone(capsys, tmp_path):
    mine = tmp_path / "mine"
    (mine / "best").mkdir(parents=True)
    (mine / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (mine / "best" / "notes.txt").write_text("keep me")
    before = snapshot(mine)
    one_line_error(
        capsys,
        ["train", "--env", "textgym/Sudoku-v0", "--model", "tiny", "--output-dir", str(mine)],
        "not empty and not a textgym run directory",
    )
    assert snapshot(mine) == before


def test_a_directory_with_only_a_warm_start_is_the_runs_to_continue(tmp_path):
    out = tmp_path / "run"
    (out / "sft" / "final").mkdir(parents=True)
    run_dir.claim_run_dir(out)  # `textgym sft --output-dir run/sft` first, then `textgym train --output-dir run`
    (out / "notes.txt").write_text("mine")
    with pytest.raises(TextGymError, match="not a textgym run directory"):
        run_dir.claim_run_dir(out)


def test_no_resume_removes_only_the_checkpoints_the_run_wrote(tmp_path):
    root = tmp_path / "run" / "checkpoints"
    for name in ("step_000001", "step_000002.tmp", "mine"):
        (root / name).mkdir(parents=True)
    (root / "notes.txt").write_text("keep me")
    run_dir.remove_checkpoints(tmp_path / "run")
    assert sorted(p.name for p in root.iterdir()) == ["mine", "notes.txt"]


@pytest.mark.parametrize("command", ["train", "sft"])
def test_an_unknown_env_id_is_refused_before_anything_is_built_or_imported(capsys, tmp_path, monkeypatch, command):
    (tmp_path / "sneaky_env_module.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').write('x')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for env_id in ("textgym/Nope-v0", "sneaky_env_module:Env"):
        out = tmp_path / f"out-{command}"
        one_line_error(capsys, [command, "--env", env_id, "--model", "tiny", "--output-dir", str(out)], "unknown environment id")
        assert not out.exists()
    assert not (tmp_path / "imported").exists() and "sneaky_env_module" not in sys.modules


def truncate(path, keep=0.5):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


@pytest.mark.parametrize(
    ("damage", "needle"),
    [
        (lambda d: (d / "model.safetensors").rename(d / "pytorch_model.bin"), "pickled weights are never loaded"),
        (lambda d: truncate(d / "model.safetensors"), "truncated"),
        (lambda d: (d / "model.safetensors").write_bytes(b"\x10"), "truncated or not safetensors"),
        (lambda d: (d / "config.json").write_text(json.dumps({"pad": "x" * (2 << 20)})), "more than a config's"),
        (lambda d: ((d / "config.json").unlink(), (d / "config.json").symlink_to(d / "chat_template.jinja")), "not JSON"),
        (lambda d: ((d / "model.safetensors").unlink(), (d / "model.safetensors").symlink_to("/dev/zero")), "not a regular file"),
    ],
)
def test_a_broken_model_directory_is_one_line_naming_the_file(capsys, tiny_dir, tmp_path, damage, needle):
    model = copy_of(tiny_dir, tmp_path)
    damage(model)
    before = {p.name: (p.is_symlink(), p.read_bytes() if p.is_file() and not p.is_symlink() else None) for p in model.iterdir()}
    with pytest.raises(ModelFileError, match=needle):
        models.resolve(model)
    one_line_error(capsys, ["eval", "textgym/Sudoku-v0", "--policy", f"model:{model}", "--episodes", "1"], needle, str(model))
    after = {p.name: (p.is_symlink(), p.read_bytes() if p.is_file() and not p.is_symlink() else None) for p in model.iterdir()}
    assert after == before


@pytest.mark.parametrize("content", [b"not a gguf at all", b"GGUF\x03\x00\x00\x00\x00"])
def test_a_broken_gguf_file_is_one_line_naming_it(capsys, tmp_path, monkeypatch, content):
    pytest.importorskip("gguf")
    monkeypatch.setenv("TEXTGYM_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "broken.gguf"
    path.write_bytes(content)
    assert main(["eval", "textgym/Sudoku-v0", "--policy", f"model:{path}", "--episodes", "1"]) == 2
    lines = capsys.readouterr().err.splitlines()  # the conversion's progress lines, then the error
    assert lines[-1].startswith("textgym eval: error: ") and str(path) in lines[-1]
    assert all(line.startswith("textgym: ") for line in lines[:-1]), lines
    assert path.read_bytes() == content


def checkpoint(tiny_dir, run, step, state=None):
    path = run / "checkpoints" / f"step_{step:06d}"
    shutil.copytree(tiny_dir, path)
    (path / "optimizer").mkdir()
    shutil.copy(path / "model.safetensors", path / "optimizer" / "state.safetensors")
    (path / "run_state.json").write_text(json.dumps({"step": step} if state is None else state))
    return path


@pytest.mark.parametrize(
    "damage",
    [
        lambda c: truncate(c / "model.safetensors"),
        lambda c: truncate(c / "optimizer" / "state.safetensors"),
        lambda c: (c / "run_state.json").write_text('{"step": "two"}'),
        lambda c: (c / "run_state.json").write_text("{}"),
    ],
)
def test_a_corrupt_newest_checkpoint_falls_back_to_the_one_before(tiny_dir, tmp_path, capsys, damage):
    run = tmp_path / "run"
    checkpoint(tiny_dir, run, 1)
    newest = checkpoint(tiny_dir, run, 2)
    damage(newest)
    before = snapshot(run)
    found, step = run_dir.resumable_checkpoint(run)
    assert found.name == "step_000001" and step == 1
    assert "resuming from step_000001 instead" in capsys.readouterr().err
    damage(run / "checkpoints" / "step_000001")
    with pytest.raises(ModelFileError, match="no checkpoint .* can be resumed"):
        run_dir.resumable_checkpoint(run)
    assert snapshot(run).keys() == before.keys()
    assert os.path.isdir(newest)
