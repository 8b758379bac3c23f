"""Packaging: the package list matches the folders, installs import as textgym.*, imports stay light."""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
MAPPED = {"textgym.envs": "envs", "textgym.wrappers": "wrappers", "textgym.algos": "algos"}


def _folder_packages():
    found = set()
    for base, prefix in [("textgym", "textgym"), *[(folder, name) for name, folder in MAPPED.items()]]:
        for init in (ROOT / base).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / base)
            if "__pycache__" not in rel.parts:
                found.add(".".join([prefix, *rel.parts]))
    return found


def test_package_list_matches_the_folders():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert set(config["packages"]) == _folder_packages()
    assert config["package-dir"] == MAPPED


def test_import_textgym_is_light():
    code = (
        "import sys, time; t = time.perf_counter(); import textgym; dt = time.perf_counter() - t;"
        "heavy = [m for m in ('jax', 'torch', 'transformers', 'flax', 'ray') if m in sys.modules];"
        "import gymnasium as gym; assert 'textgym/Sudoku-v0' in gym.registry;"
        "print(heavy, dt)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/").stdout
    heavy, seconds = out.rsplit(" ", 1)
    assert heavy == "[]"
    assert float(seconds) < 5  # generous: the point is "no backend at import", timings live in benchmarks


@pytest.mark.parametrize("editable", [False, True], ids=["wheel", "editable"])
def test_install_imports_mapped_subpackages(tmp_path, editable):
    """Install the repo into a fresh venv whose dependencies come from this interpreter's site-packages."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True
    ).stdout.strip()
    # Dependencies are visible as a plain path (no .pth processing), so our own install wins.
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    src = tmp_path / "src"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(src)], check=True)
    for folder in ("textgym", "envs", "wrappers", "algos"):  # include uncommitted work in the copy
        subprocess.run(["cp", "-r", str(ROOT / folder), str(src)], check=True)
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-build-isolation"]
    cmd += ["-e", str(src)] if editable else [str(src)]
    subprocess.run(cmd, check=True, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    code = (
        "import textgym, textgym.envs, textgym.wrappers, textgym.algos, textgym.algos.grpo, textgym.envs.sudoku;"
        "print(textgym.envs.__file__)"
    )
    where = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True, cwd=str(tmp_path)).stdout
    assert where.startswith(str(src / "envs") if editable else site), where
    assert subprocess.run([str(python), "-c", "import envs"], capture_output=True, cwd=str(tmp_path)).returncode != 0
    # package data travels too: the viewer's page assets and the rollout schema
    data = "from textgym.view.page import render; from textgym.rollout import rollout_schema; rollout_schema(); print(len(render({})))"
    size = subprocess.run([str(python), "-c", data], capture_output=True, text=True, check=True, cwd=str(tmp_path)).stdout
    assert int(size) > 10_000
    typed = subprocess.run(
        [str(python), "-c", "import textgym, pathlib; print(pathlib.Path(textgym.__file__).with_name('py.typed').is_file())"],
        capture_output=True,
        text=True,
        check=True,
        cwd=str(tmp_path),
    ).stdout
    assert typed.strip() == "True"  # PEP 561: type checkers read textgym's hints
