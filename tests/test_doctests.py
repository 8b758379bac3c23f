"""Every example in the package's docstrings runs and shows what it says.

The package maps ``envs/``, ``wrappers/`` and ``algos/`` to ``textgym.*``, so pytest's
``--doctest-modules`` would import those files under the wrong names; the examples are found
here by their modules' real names and run in one fresh interpreter, which also shows that no
example imports JAX or torch.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"textgym": "textgym", "envs": "textgym.envs", "wrappers": "textgym.wrappers", "algos": "textgym.algos"}

RUNNER = r"""
import doctest, importlib, json, sys

results = {}
for name in sys.argv[1:]:
    before = set(sys.modules)
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    for test in doctest.DocTestFinder().find(module):
        runner.run(test, out=report.append)
    failed, attempted = runner.summarize(verbose=False)
    backends = sorted({m.split(".")[0] for m in set(sys.modules) - before} & {"jax", "torch"})
    results[name] = {"failed": failed, "attempted": attempted, "report": "".join(report), "backends": backends}
print(json.dumps(results))
"""


def _modules_with_examples() -> list[str]:
    found = []
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            if ">>> " in path.read_text(encoding="utf-8"):
                parts = path.relative_to(ROOT / folder).with_suffix("").parts
                found.append(".".join([package, *(p for p in parts if p != "__init__")]))
    return found


MODULES = _modules_with_examples()


@pytest.fixture(scope="module")
def results():
    out = subprocess.run([sys.executable, "-c", RUNNER, *MODULES], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_examples_are_found():
    assert len(MODULES) >= 19 and "textgym.envs.sudoku.grid" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(results, name):
    result = results[name]
    missing = re.search(r"No module named '(\w+)'|(\w+) is required for this feature", result["report"])
    if result["failed"] and missing:
        module = missing.group(1) or missing.group(2)
        if importlib.util.find_spec(module) is None:  # an optional extra that is not installed here
            pytest.skip(f"{name}'s examples need {module}")
    assert result["failed"] == 0, result["report"]
    # A backend's own modules (textgym.algos.torch.*, textgym.algos.jax.*) import that backend;
    # every other module's examples must run with neither installed.
    own = {b for b in ("jax", "torch") if name.startswith(f"textgym.algos.{b}.")}
    assert set(result["backends"]) <= own, f"{name}'s examples imported {result['backends']}"
