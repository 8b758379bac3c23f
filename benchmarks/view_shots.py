"""Screenshots of one learned episode of a training run, as ``textgym view`` shows it.

Takes the last rollouts file a run wrote (``rollouts/step_XXXXXX.jsonl``: the policy of the run's
last logged step, sampled at the training temperature), picks its first solved episode and saves
two PNGs: the episode (conversation with its tool results, and the env's panel) and the token
view (policy tokens coloured, env tokens at loss mask 0). Needs headless Chromium and its driver
(``apt-get install chromium chromium-driver``) and selenium.

    python benchmarks/view_shots.py runs/sudoku-moves-torch --name sudoku-moves --out docs/img
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def learned_episode(run: Path) -> tuple[Path, int]:
    """The last rollouts file of ``run`` and the index of its first solved episode."""
    last = sorted((run / "rollouts").glob("step_*.jsonl"))[-1]
    records = [json.loads(line) for line in last.read_text(encoding="utf-8").splitlines()]
    return last, next(i for i, r in enumerate(records) if r["success"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a textgym train run directory")
    parser.add_argument("--name", required=True, help="the PNGs are learned-<name>.png and learned-<name>-tokens.png")
    parser.add_argument("--out", type=Path, default=Path("docs/img"))
    args = parser.parse_args(argv)

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    from textgym.cli import main as textgym

    rollouts, index = learned_episode(args.run)
    profile = Path(tempfile.mkdtemp(prefix="textgym-shots-"))
    page = profile / "view.html"
    tokenizer = next(p for p in (args.run / "final", args.run / "sft" / "final") if (p / "tokenizer_config.json").is_file())
    assert textgym(["view", str(rollouts), "--out", str(page), "--tokenizer", str(tokenizer)]) == 0
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1400", f"--user-data-dir={profile / 'chrome'}"):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        browser.get(page.as_uri() + f"#{index}")
        args.out.mkdir(parents=True, exist_ok=True)
        for element, suffix in ((browser.find_element(By.ID, "detail"), ""), (browser.find_element(By.ID, "token-panel"), "-tokens")):
            browser.execute_script("arguments[0].scrollIntoView()", element)
            element.screenshot(str(args.out / f"learned-{args.name}{suffix}.png"))
            print(args.out / f"learned-{args.name}{suffix}.png")
    finally:
        browser.quit()
        shutil.rmtree(profile, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
