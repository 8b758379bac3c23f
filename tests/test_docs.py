"""The docs hold together: links and anchors resolve, commands run from a fresh clone, and the
text speaks of the software, not of who wrote it or which ticket asked for it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
SOURCES = [p for folder in ("textgym", "envs", "wrappers", "algos", "tests", "benchmarks") for p in sorted((ROOT / folder).rglob("*.py"))]
# How the work was organised, and ticket numbers a reader cannot look up.
PROVENANCE = re.compile(
    r"\bissues? #?\d+|\bsession \d+|\bengineers?\b|\bthe lead\b|\bworktree|\b(?:token|sandbox|sampler|sudoku)\d\b|\benvfast\b|\bround \d\b",
    re.IGNORECASE,
)


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_anchor(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_and_anchors_resolve(page):
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name} links to a missing {target}"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{page.name} links to a missing anchor {target}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_commands_use_no_paths_of_one_machine(page):
    for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
        assert not re.search(r"(?<![\w.])/(?:work|home|root)/|git clone /|OLD_VENV", block), f"{page.name}: {block}"


def test_text_says_why_not_who():
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in PAGES + SOURCES
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if PROVENANCE.search(line) and path != Path(__file__)
    ]
    assert not found, "\n".join(found)
