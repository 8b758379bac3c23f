"""``textgym view`` on the command line: what it reads, how big the page is, and one-line errors."""

from __future__ import annotations

import json

import pytest

from textgym.cli import main
from textgym.view import build


def page_data(html: str) -> dict:
    start = html.index('<script type="application/json" id="data">') + len('<script type="application/json" id="data">')
    return json.loads(html[start : html.index("</script>", start)])


def test_a_run_directory_reads_its_logged_steps_and_its_tokenizer(record_files):
    data = page_data(build([record_files["run"]]))
    assert len(data["episodes"]) == 8 and {e["step"] for e in data["episodes"]} == {1, 2}
    assert data["vocab"] and any(t == "<answer>" for t in data["vocab"].values())  # the run's tokenizer decoded them
    tokens = data["episodes"][0]["tokens"]
    assert sum(b - a for a, b in tokens["spans"]) == len(tokens["logprobs"])  # logprobs on policy tokens only


def test_one_logged_step_of_a_run_decodes_with_the_runs_tokenizer(record_files):
    data = page_data(build([record_files["run"] / "rollouts" / "step_000002.jsonl"]))
    assert len(data["episodes"]) == 4 and {e["step"] for e in data["episodes"]} == {2}
    assert data["vocab"] and any(t == "<answer>" for t in data["vocab"].values())
    assert not page_data(build([record_files["sudoku"]]))["vocab"]  # a loose file: ids shown


def test_repeated_texts_are_stored_once(record_files):
    data = page_data(build([record_files["sudoku"], record_files["wrong"]]))
    system = [e["messages"][0]["c"] for e in data["episodes"]]
    assert len(set(system)) == 1 and len(data["strings"]) < sum(len(e["messages"]) for e in data["episodes"])


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: d / "missing.jsonl", "no such file or directory"),
        (lambda d: d, "holds no rollouts"),
        (lambda d: (d / "bad.jsonl").write_text('{"a": 1}\n') and d / "bad.jsonl", "bad.jsonl:1 is not a rollout record"),
        (lambda d: (d / "junk.jsonl").write_text("{oops\n") and d / "junk.jsonl", "junk.jsonl:1 is not JSON"),
        (lambda d: (d / "empty.jsonl").write_text("\n") and d / "empty.jsonl", "no records in"),
    ],
)
def test_bad_paths_are_one_line_and_status_2(tmp_path, capsys, make, message):
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    target = make(empty)
    assert main(["view", str(target), "--out", str(tmp_path / "v.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("textgym view: error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "v.html").exists()


def test_bad_options_are_one_line_and_status_2(record_files, tmp_path, capsys):
    assert main(["view", str(record_files["sudoku"]), "--out", str(tmp_path / "no" / "v.html")]) == 2
    assert "--out: the folder" in capsys.readouterr().err
    assert main(["view", str(record_files["sudoku"]), "--tokenizer", str(tmp_path / "nope")]) == 2
    assert "--tokenizer: expected" in capsys.readouterr().err
