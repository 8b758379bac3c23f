"""Records of odd shapes in ``textgym view``: the page still lists every episode, a field it cannot
draw shows as data, and what cannot be shown at all is refused with one line naming file:line."""

from __future__ import annotations

import json

import pytest

from textgym.cli import main
from textgym.view import build

pytest.importorskip("selenium")
from selenium.webdriver.common.by import By


def first(path):
    files = sorted((path / "rollouts").glob("*.jsonl")) if path.is_dir() else [path]
    return json.loads(files[0].read_text().splitlines()[0])


def page_of(browser, tmp_path, records, name="odd"):
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))  # json.dumps writes NaN and Infinity
    out = tmp_path / f"{name}.html"
    assert main(["view", str(path), "--out", str(out)]) == 0
    browser.get(out.as_uri())
    return out


def listed(browser) -> str:
    return browser.find_element(By.ID, "count").text


def show(browser, out, i):
    browser.get(out.as_uri() + f"#{i}")
    return browser.find_element(By.ID, "detail")


def test_a_nan_reward_or_an_infinite_logprob_keeps_every_episode_listed(browser, record_files, tmp_path):
    token = first(record_files["run"])
    token["reward"] = float("nan")
    token["logprobs"] = [float("-inf")] * len(token["logprobs"])
    big = first(record_files["sudoku"]) | {"reward": float("inf")}
    out = page_of(browser, tmp_path, [token, big, first(record_files["code"])])
    assert listed(browser) == "3 of 3 episodes"
    detail = show(browser, out, 0)
    assert "reward NaN" in detail.text and "policy tokens" in browser.find_element(By.ID, "token-panel").text


def test_fields_of_the_wrong_type_show_as_data_and_each_episode_opens(browser, record_files, tmp_path, screenshot):
    sudoku, code, workplace = (first(record_files[k]) for k in ("sudoku", "code", "workplace"))
    calls = json.loads(json.dumps(sudoku))
    calls["messages"][2]["tool_calls"] = "not a list"
    null = json.loads(json.dumps(sudoku))
    null["verifications"][-1]["verification"] = None
    boardless = json.loads(json.dumps(sudoku))
    del boardless["verifications"][-1]["verification"]["board"]
    tests = json.loads(json.dumps(code))
    tests["verifications"][-1]["verification"]["tests"] = "all of them"
    diff = json.loads(json.dumps(workplace))
    diff["verifications"][-1]["verification"]["diff"] = {"emails": {"missing": 3}}
    diff["verifications"][-1]["verification"]["changes"] = {"emails": "x"}
    records = [sudoku, calls, null, boardless, tests, diff]
    out = page_of(browser, tmp_path, records)
    assert listed(browser) == f"{len(records)} of {len(records)} episodes"
    show(browser, out, 0)
    for i, unshown in ((1, "message"), (3, "verification"), (4, "verification"), (5, "verification")):
        detail = show(browser, out, i)
        assert detail.find_element(By.TAG_NAME, "h2").text.startswith(f"#{i} ")  # not the previous episode
        assert f"This record's {unshown} could not be drawn" in detail.text, (i, detail.text[:500])
    assert "not a list" in show(browser, out, 1).text
    assert "carries no verification" in show(browser, out, 2).text
    show(browser, out, 3)
    screenshot(browser.find_element(By.ID, "env-panel"), "unshown")
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"messages": "abc"}, "messages"),
        ({"messages": [1, 2]}, "messages"),
        ({"loss_mask": 3}, "loss_mask"),
        ({"logprobs": [-0.5]}, "logprobs"),
        ({"token_ids": "abc"}, "token_ids"),
    ],
)
def test_what_cannot_be_shown_is_one_line_naming_the_record(record_files, tmp_path, capsys, change, field):
    record = first(record_files["run"]) | change
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(first(record_files["sudoku"])) + "\n" + json.dumps(record) + "\n")
    assert main(["view", str(path), "--out", str(tmp_path / "bad.html")]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl:2" in err and field in err and err.count("\n") == 1, err


def test_a_lone_surrogate_in_a_record_keeps_the_page_whole(browser, record_files, tmp_path):
    record = first(record_files["sudoku"])
    path = tmp_path / "surrogate.jsonl"
    line = json.dumps(record | {"task_id": "X"}).replace('"X"', '"\\ud800 task"')
    path.write_text(line + "\n" + json.dumps(record) + "\n")
    out = tmp_path / "surrogate.html"
    assert main(["view", str(path), "--out", str(out)]) == 0
    browser.get(out.as_uri())
    assert listed(browser) == "2 of 2 episodes" and "\ufffd task" in browser.find_element(By.ID, "episodes").text


def test_a_file_that_is_not_utf8_is_named(tmp_path, capsys):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"env_id": "textgym/Sudoku-v0", "messages": [], "reward": 0, "task_id": "caf\xe9"}\n')
    assert main(["view", str(path), "--out", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err
    assert "latin1.jsonl:1 is not UTF-8" in err and err.count("\n") == 1


def test_a_path_naming_a_placeholder_is_only_a_title(browser, record_files, tmp_path):
    folder = tmp_path / "*VIEW_DATA*"
    folder.mkdir()
    path = folder / "r.jsonl"
    path.write_text(json.dumps(first(record_files["sudoku"])) + "\n")
    html = build([path])
    assert html.count('"episodes":') == 1
    out = tmp_path / "title.html"
    out.write_text(html)
    browser.get(out.as_uri())
    assert browser.title == f"textgym view: {path}" and listed(browser) == "1 of 1 episodes"
