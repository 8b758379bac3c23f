"""Screenshots of what a training run learned: ``textgym view`` of one solved episode of its last
logged step, in headless Chromium, as ``docs/img/learned-<name>-chat.png`` (the conversation with
its tool results) and ``learned-<name>-tokens.png`` (the token view: policy tokens coloured, env
tokens at mask 0).

    python benchmarks/learned_shots.py runs/sudoku-moves --name sudoku-moves --min-turns 4
    python benchmarks/learned_shots.py runs/code-tiny --name code --min-turns 2

Needs chromium and chromium-driver (``.ci/system-deps.sh``) and selenium (the ``view`` extra).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from textgym.cli import main as textgym

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def last_solved(run: Path, env: str | None, min_turns: int = 1) -> tuple[Path, int]:
    """The newest rollouts file of ``run`` and the index of its first solved episode (of ``env``)
    that took at least ``min_turns`` turns."""
    for path in sorted((run / "rollouts").glob("step_*.jsonl"), reverse=True):
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        for i, record in enumerate(records):
            if record.get("success") and record.get("turns", 0) >= min_turns and (env is None or record.get("env_id") == env):
                return path, i
    raise SystemExit(f"no solved episode{f' of {env}' if env else ''} in {run / 'rollouts'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a textgym train output directory")
    parser.add_argument("--name", required=True, help="the screenshots' name: learned-<name>-*.png")
    parser.add_argument("--env", help="an env id of a mixture's run")
    parser.add_argument("--min-turns", type=int, default=1, help="show an episode solved in at least this many turns")
    parser.add_argument("--out", type=Path, default=Path("docs/img"))
    parser.add_argument("--tokenizer", help="decodes the token view (a HF directory or 'tiny'; default: the run's own)")
    args = parser.parse_args()
    rollouts, index = last_solved(args.run, args.env, args.min_turns)
    page = Path(tempfile.mkdtemp()) / "view.html"
    assert textgym(["view", str(rollouts), "--out", str(page), *(["--tokenizer", args.tokenizer] if args.tokenizer else [])]) == 0
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1800"):
        options.add_argument(flag)
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        browser.get(f"{page.as_uri()}#{index}")
        args.out.mkdir(parents=True, exist_ok=True)
        for element_id, part in (("conversation", "chat"), ("token-panel", "tokens")):
            element = browser.find_element(By.ID, element_id)
            browser.execute_script("arguments[0].scrollIntoView()", element)
            element.screenshot(str(args.out / f"learned-{args.name}-{part}.png"))
            print(args.out / f"learned-{args.name}-{part}.png")
    finally:
        browser.quit()


if __name__ == "__main__":
    main()
