"""The README's test command is what CI runs, and it does all of the set-up."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_test_command() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("Run the tests", 1)[1]
    return re.search(r"```bash\n(.+?)\n```", section, re.S).group(1).strip()


def test_ci_runs_exactly_the_readme_test_command():
    command = _readme_test_command()
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert command in lines, f".ci/run does not run the README's command:\n{command}"


def test_the_readme_test_command_installs_system_packages_and_reports_durations():
    command = _readme_test_command()
    assert command.startswith("bash .ci/system-deps.sh && ")
    assert 'pip install -q -e ".[all]"' in command
    assert command.endswith("python -m pytest -q --durations=25")


def test_ci_lints():
    assert "ruff check ." in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
