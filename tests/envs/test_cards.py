"""Each env's card is written once, in its class docstring, in one template; docs/envs/ holds its rendering."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from textgym.envs.cards import TEMPLATE, card_name, render_card
from textgym.registration import ENVS

PAGES = Path(__file__).resolve().parents[2] / "docs" / "envs"


@pytest.mark.parametrize("entry", ENVS, ids=lambda e: e.id)
def test_the_committed_page_is_the_rendered_docstring(entry):
    page = PAGES / card_name(entry)
    assert page.read_text(encoding="utf-8") == render_card(entry), "run: python -m textgym.envs.cards docs/envs"


def test_every_page_in_docs_envs_is_a_registered_envs_card():
    assert sorted(p.name for p in PAGES.glob("*.md")) == sorted(card_name(e) for e in ENVS)


def test_a_card_links_from_docs_envs_and_titles_the_page_by_id():
    sudoku = next(e for e in ENVS if e.id == "textgym/Sudoku-v0")
    page = render_card(sudoku)
    assert "\n# Sudoku-v0\n" in page
    assert "](../benchmarks.md#sudoku)" in page and "](docs/" not in page


@pytest.mark.parametrize("entry", ENVS, ids=lambda e: e.id)
def test_every_card_follows_the_one_template_in_order(entry):
    headings, in_code = [], False
    for line in render_card(entry).splitlines():
        if re.fullmatch(r"```[\w-]*", line.strip()):
            in_code = not in_code
        elif not in_code and line.startswith("## "):
            headings.append(line[3:])
    assert tuple(h for h in headings if h in TEMPLATE) == TEMPLATE, headings
