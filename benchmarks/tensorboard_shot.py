"""A screenshot of TensorBoard's scalars page for a run reported with ``--report-to tensorboard``:
``tensorboard --logdir <run>`` on loopback, opened in headless Chromium, saved as
``docs/img/tensorboard-<name>.png``.

    textgym train --env textgym/Sudoku-v0 --backend torch --model tiny --report-to tensorboard
    python benchmarks/tensorboard_shot.py runs/sudoku-v0-torch --name sudoku-tiny --tags 'eval/success|train/reward'

Needs chromium and chromium-driver (``.ci/system-deps.sh``), selenium (the ``dev`` extra) and
tensorboard (the ``tensorboard`` extra).
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(url: str, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"tensorboard did not answer at {url}") from None
            time.sleep(1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a textgym run directory (its tensorboard/ event files)")
    parser.add_argument("--name", required=True, help="the screenshot's name: tensorboard-<name>.png")
    parser.add_argument("--tags", default="", help="a regular expression of the scalar tags to show (default: all)")
    parser.add_argument("--out", type=Path, default=Path("docs/img"))
    parser.add_argument("--size", default="1400,1000", help="the browser window, width,height")
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(args.run), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    profile = tempfile.mkdtemp(prefix="textgym-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", f"--window-size={args.size}", f"--user-data-dir={profile}"):  # fmt: skip
        options.add_argument(flag)
    browser = None
    try:
        base = f"http://127.0.0.1:{port}/"
        wait_until_up(base + "data/runs")
        browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        fragment = "#scalars" + (f"&tagFilter={urllib.parse.quote(args.tags)}" if args.tags else "")
        browser.get(base + fragment)
        WebDriverWait(browser, 120).until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "tf-scalar-dashboard")))
        time.sleep(10)  # the charts load their data and draw after the page
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / f"tensorboard-{args.name}.png"
        browser.save_screenshot(str(path))
        print(path)
    finally:
        if browser is not None:
            browser.quit()
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
