"""benchmarks/gpu_check.py runs end to end on CPU at toy sizes (the device check is the same code)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("jax")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


@pytest.mark.slow  # two backends load, JAX compiles the sampler and the update: ~1-3 min on 2 shared cores
def test_gpu_check_dry_run_on_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTGYM_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "check.json"
    args = [
        "--model",
        "tiny",
        "--device",
        "cpu",
        "--dtype",
        "bfloat16",
        "--batch",
        "2",
        "--prompt-len",
        "16",
        "--new-tokens",
        "8",
        "--update-seqs",
        "2",
        "--update-len",
        "32",
        "--matmul-size",
        "128",
        "--repeats",
        "1",
        "--out",
        str(out),
    ]
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(out.read_text())
    assert results["matmul_tflops"] > 0 and results["parameters"] > 0
    for backend in ("torch", "jax"):
        r = results[backend]
        assert r["sampler_tokens_per_s"] > 0 and r["update_tokens_per_s"] > 0 and r["update_mfu"] > 0
    assert results["transformers"]["sampler_tokens_per_s"] > 0
