"""Records of every kind the viewer reads, written the way the commands write them, and a real browser.

``TEXTGYM_VIEW_SCREENSHOTS=docs/img pytest tests/view`` also saves the screenshots in docs/.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from functools import partial
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from textgym.cli import main
from textgym.policies.base import PolicyOutput
from textgym.rollout import collect

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
WRONG_GRID = "<answer>\n1234\n3412\n2143\n4321\n</answer>"  # a full grid; wrong for most 4x4 puzzles


class WrongGridPolicy:
    """Answers every Sudoku with the same grid: wrong cells for the board panel to mark."""

    def act(self, observations, infos=None):
        return PolicyOutput([WRONG_GRID] * len(observations))


class SampledOraclePolicy:
    """Sampled ids with a stop token and made-up logprobs (a token env's records): the oracle's answer
    in even slots, the wrong grid in odd ones, so each GRPO group has a winner and a loser."""

    def __init__(self, venv, tokenizer):
        self.venv, self.tok = venv, tokenizer

    def act(self, observations, infos=None):
        actions, logprobs = [], []
        for k, text in enumerate(self.venv.call("oracle_action")):
            text = text if k % 2 == 0 else WRONG_GRID
            ids = np.asarray(self.tok.encode(text, add_special_tokens=False) + [self.tok.eos_token_id], np.int32)
            actions.append(ids)
            logprobs.append(-np.linspace(0.05, 5.0, ids.size, dtype=np.float32) * (1 + k % 2))
        return PolicyOutput(actions, logprobs)


def _eval(out: Path, env_id: str, *extra: str) -> None:
    code = main(
        ["eval", env_id, "--policy", "oracle", "--policy", "random", "--episodes", "2", "--num-envs", "2", "--out", str(out), *extra]
    )
    assert code == 0


@pytest.fixture(scope="session")
def record_files(tmp_path_factory) -> dict[str, Path]:
    """``eval --out`` files for the three envs, a wrong-answer file, a train-like token run, an old file."""
    from textgym.tokenizer import tiny_tokenizer
    from textgym.wrappers import TokenObservation

    root = tmp_path_factory.mktemp("records")
    files = {name: root / f"{name}.jsonl" for name in ("sudoku", "workplace", "code", "wrong", "old")}
    _eval(files["sudoku"], "textgym/Sudoku-v0", "--env-kwargs", '{"size": 4}')
    _eval(files["workplace"], "textgym/Workplace-v0")
    _eval(files["code"], "textgym/Code-v0")
    venv = gym.make_vec("textgym/Sudoku-v0", num_envs=2, size=4)
    wrong = collect(venv, WrongGridPolicy(), seeds=[5, 6])
    venv.close()
    files["wrong"].write_text("".join(json.dumps({"policy": "wrong-grid", **r.to_dict()}) + "\n" for r in wrong))

    tok = tiny_tokenizer()
    run = root / "run"
    (run / "rollouts").mkdir(parents=True)
    venv = gym.make_vec("textgym/Sudoku-v0", num_envs=4, size=4, wrappers=[partial(TokenObservation, tokenizer=tok)])
    for step in (1, 2):
        rollouts = collect(venv, SampledOraclePolicy(venv, tok), seeds=[10 * step, 10 * step + 1], group_size=2)
        with open(run / "rollouts" / f"step_{step:06d}.jsonl", "w") as fh:
            for r in rollouts:
                fh.write(json.dumps({"step": step, "advantage": r.reward - 0.5, **r.to_dict()}) + "\n")  # Dr. GRPO's
    venv.close()
    tok.save_pretrained(run / "final")  # where a run keeps its tokenizer
    files["run"] = run

    # A record as textgym wrote them before end_reason, verifications and env_kwargs existed.
    newer = ("end_reason", "verifications", "env_kwargs")
    first = json.loads(files["sudoku"].read_text().splitlines()[0])
    files["old"].write_text(json.dumps({k: v for k, v in first.items() if k not in newer}) + "\n")
    return files


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium from the system's packages (.ci/system-deps.sh installs them)."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.skip("needs chromium and chromium-driver (apt-get install chromium chromium-driver)")
    profile = tempfile.mkdtemp(prefix="textgym-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def screenshot():
    """Save an element's screenshot as docs' ``view-<name>.png`` when TEXTGYM_VIEW_SCREENSHOTS is set."""
    folder = os.environ.get("TEXTGYM_VIEW_SCREENSHOTS")

    def save(element, name: str) -> None:
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            element.parent.execute_script("arguments[0].scrollIntoView()", element)
            element.screenshot(str(Path(folder) / f"view-{name}.png"))

    return save
