"""``textgym view`` in a real browser: what a person checks on the page, one property per test."""

from __future__ import annotations

import json
import re

import pytest

from textgym.cli import main
from textgym.view import build

pytest.importorskip("selenium")
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait


def records_in(*paths) -> list[dict]:
    out = []
    for p in paths:
        files = sorted((p / "rollouts").glob("*.jsonl")) if p.is_dir() else [p]
        out += [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]
    return out


@pytest.fixture(scope="module")
def page(record_files, tmp_path_factory):
    """One page of every file: eval records of the three envs, wrong answers and a token run."""
    out = tmp_path_factory.mktemp("view") / "view.html"
    names = ("sudoku", "workplace", "code", "wrong", "run")
    assert main(["view", *(str(record_files[n]) for n in names), "--out", str(out)]) == 0
    return out, records_in(*(record_files[n] for n in names))


def open_page(browser, path, episode=None):
    browser.get(path.as_uri() + ("" if episode is None else f"#{episode}"))
    return browser


def rows(browser):
    return browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")


def episode_index(records, **want) -> int:
    return next(i for i, r in enumerate(records) if all(r.get(k) == v for k, v in want.items()))


def test_the_list_shows_every_episode_with_its_fields(browser, page, screenshot):
    path, records = page
    open_page(browser, path)
    shown = rows(browser)
    assert len(shown) == len(records) == 22
    assert browser.find_element(By.ID, "count").text == f"{len(records)} of {len(records)} episodes"
    headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#episodes th")]
    assert {"env", "policy", "task", "reward", "end reason"} <= set(headers)
    first = shown[0].text
    assert records[0]["task_id"][:8] in first and "oracle" in first and records[0]["end_reason"] in first
    screenshot(browser.find_element(By.ID, "list"), "list")


def test_filters_narrow_the_list(browser, page):
    path, records = page
    open_page(browser, path)
    Select(browser.find_element(By.ID, "f-env")).select_by_visible_text("textgym/Code-v0")
    assert len(rows(browser)) == sum(r["env_id"] == "textgym/Code-v0" for r in records) == 4
    Select(browser.find_element(By.ID, "f-policy")).select_by_visible_text("oracle")
    assert len(rows(browser)) == 2 and all("oracle" in row.text for row in rows(browser))
    Select(browser.find_element(By.ID, "f-env")).select_by_index(0)  # all envs again
    Select(browser.find_element(By.ID, "f-policy")).select_by_index(0)
    Select(browser.find_element(By.ID, "f-end")).select_by_visible_text("failure")
    assert len(rows(browser)) == sum(r["end_reason"] == "failure" for r in records) > 0
    Select(browser.find_element(By.ID, "f-end")).select_by_index(0)
    Select(browser.find_element(By.ID, "f-step")).select_by_visible_text("2")
    assert len(rows(browser)) == sum(r.get("step") == 2 for r in records) == 4
    Select(browser.find_element(By.ID, "f-step")).select_by_index(0)
    browser.find_element(By.ID, "f-q").send_keys(records[3]["task_id"])
    WebDriverWait(browser, 5).until(lambda b: len(rows(b)) < len(records))  # the list follows the typing
    assert len(rows(browser)) > 0 and all(records[3]["task_id"][:10] in r.text for r in rows(browser))


def test_sorting_by_reward_puts_the_lowest_first_then_the_highest(browser, page):
    path, records = page
    open_page(browser, path)
    header = next(th for th in browser.find_elements(By.CSS_SELECTOR, "#episodes th") if th.text == "reward")
    header.click()
    column = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#episodes th")].index("reward")
    values = [float(r.find_elements(By.TAG_NAME, "td")[column].text) for r in rows(browser)]
    assert values == sorted(values) and values[0] < values[-1]
    header.click()
    values = [float(r.find_elements(By.TAG_NAME, "td")[column].text) for r in rows(browser)]
    assert values == sorted(values, reverse=True)


def test_a_sudoku_episode_shows_both_boards_with_wrong_and_changed_cells(browser, page, screenshot):
    path, records = page
    i = episode_index(records, policy="wrong-grid")
    open_page(browser, path, i)
    boards = browser.find_elements(By.CSS_SELECTOR, "#env-panel .board table")
    assert len(boards) == 2 and all(len(b.find_elements(By.TAG_NAME, "td")) == 16 for b in boards)
    verdict = records[i]["verifications"][-1]["verification"]
    cells = list(zip(verdict["puzzle"], verdict["board"], verdict["solution"]))
    # Wrong: a blank filled with another digit than the solution's, or a given the agent altered.
    wrong = [k for k, (p, b, s) in enumerate(cells) if (p == "." and b != s) or (p != "." and b != p)]
    assert any(p != "." and b != p for p, b, _ in cells), "the fixture's wrong grid alters a given"
    end_cells = boards[1].find_elements(By.TAG_NAME, "td")
    assert wrong and [k for k, td in enumerate(end_cells) if "wrong" in td.get_attribute("class")] == wrong
    start_cells = boards[0].find_elements(By.TAG_NAME, "td")
    assert [td.text for td in start_cells] == ["" if ch == "." else ch for ch in verdict["puzzle"]]
    changed = [k for k, td in enumerate(end_cells) if re.search(r"\b(changed|wrong)\b", td.get_attribute("class"))]
    assert changed == [k for k, (p, b, _) in enumerate(cells) if p == "." or b != p]
    screenshot(browser.find_element(By.ID, "env-panel"), "sudoku")


def test_a_workplace_episode_shows_the_database_changes_next_to_the_expected_ones(browser, page, screenshot):
    path, records = page
    i = next(
        i for i, r in enumerate(records) if r["env_id"] == "textgym/Workplace-v0" and r["verifications"][-1]["verification"]["changes"]
    )
    open_page(browser, path, i)
    panel = browser.find_element(By.ID, "env-panel")
    changes = records[i]["verifications"][-1]["verification"]["changes"]
    table = next(iter(changes))
    assert f"table {table}" in panel.text and "what the agent did" in panel.text and "what the task expected" in panel.text
    edited = sum(len(changes[table]["agent"][k]) for k in ("added", "changed", "deleted"))
    assert len(panel.find_elements(By.CSS_SELECTOR, "tr.added, tr.changed, tr.deleted")) >= 2 * edited > 0
    calls = browser.find_elements(By.CSS_SELECTOR, "#conversation .call")
    assert calls and "(" in calls[0].text  # the tool call, with its arguments
    assert browser.find_elements(By.CSS_SELECTOR, "#conversation .msg.tool")  # and its result
    screenshot(browser.find_element(By.ID, "detail"), "workplace")


def test_a_code_episode_shows_a_test_table_per_submission(browser, page, screenshot):
    path, records = page
    i = episode_index(records, env_id="textgym/Code-v0", policy="random")
    open_page(browser, path, i)
    submissions = browser.find_elements(By.CSS_SELECTOR, "#env-panel .submission")
    recorded = [v["verification"] for v in records[i]["verifications"]]
    assert len(submissions) == len(recorded) >= 1
    for element, verification in zip(submissions, recorded):
        assert len(element.find_elements(By.CSS_SELECTOR, "tr.pass, tr.fail")) == verification["total"]
        assert f"{verification['passed']} of {verification['total']} tests passed" in element.text
    headers = [th.text for th in submissions[0].find_elements(By.TAG_NAME, "th")]
    assert headers[2:] == ["input", "expected", "got", "error"]
    screenshot(browser.find_element(By.ID, "env-panel"), "code")


def test_the_token_view_colours_the_loss_mask_and_shows_logprobs_and_the_group(browser, page, screenshot):
    path, records = page
    i = episode_index(records, step=2)
    open_page(browser, path, i)
    r = records[i]
    policy = browser.find_elements(By.CSS_SELECTOR, "#token-panel .tokens span.p")
    env = browser.find_elements(By.CSS_SELECTOR, "#token-panel .tokens span.e")
    assert len(policy) == sum(r["loss_mask"]) and len(policy) + len(env) == len(r["token_ids"])
    browser.execute_script("arguments[0].scrollIntoView()", policy[2])
    ActionChains(browser).move_to_element(policy[2]).perform()
    start = r["turn_spans"][0][0]
    assert f"logprob {r['logprobs'][start + 2]:.3f}" in browser.find_element(By.ID, "tokinfo").text
    assert "<answer>" in "".join(s.text for s in policy)  # decoded with the run's tokenizer
    group = browser.find_element(By.ID, "group-panel")
    assert "2 episodes, mean reward 0.500" in group.text and "0.500" in group.text and "-0.500" in group.text
    screenshot(browser.find_element(By.ID, "token-panel"), "tokens")
    screenshot(group, "group")


def test_each_assistant_turn_shows_its_reward_and_advantage(browser, record_files, tmp_path):
    played = next(r for r in records_in(record_files["workplace"]) if r["turns"] >= 2)
    advantages = [0.25 * (k + 1) for k in range(played["turns"])]
    trained = dict(played, step=1, advantage=0.5, turn_advantages=advantages)
    older = {k: v for k, v in played.items() if k not in ("turn_rewards", "turn_state_keys")}
    path = tmp_path / "turns.jsonl"
    path.write_text(json.dumps(trained) + "\n" + json.dumps(older) + "\n")
    out = tmp_path / "turns.html"
    assert main(["view", str(path), "--out", str(out)]) == 0
    open_page(browser, out, 0)
    badges = browser.find_elements(By.CSS_SELECTOR, "#conversation .msg.assistant .turn-reward")
    want = [f"turn {k + 1} · reward {r:.3f} · advantage {a:.3f}" for k, (r, a) in enumerate(zip(played["turn_rewards"], advantages))]
    assert [b.text for b in badges] == want
    assert badges[0].get_attribute("title") == f"state {played['turn_state_keys'][0]}"
    open_page(browser, out, 1)
    assert not browser.find_elements(By.CSS_SELECTOR, "#conversation .turn-reward")  # a record from before turn rewards


def test_a_record_written_before_end_reasons_still_loads_and_views(browser, record_files, tmp_path):
    out = tmp_path / "old.html"
    assert main(["view", str(record_files["old"]), "--out", str(out)]) == 0
    open_page(browser, out, 0)
    assert len(rows(browser)) == 1 and "unrecorded" in rows(browser)[0].text
    assert "carries no verification" in browser.find_element(By.ID, "env-panel").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#conversation .msg")) == len(json.loads(record_files["old"].read_text())["messages"])


def test_the_page_fetches_nothing_and_record_text_cannot_break_out(record_files, tmp_path):
    hostile = json.loads(record_files["sudoku"].read_text().splitlines()[0])
    hostile["task_id"] = "</script><script>window.pwned=1</script>"
    path = tmp_path / "hostile.jsonl"
    path.write_text(json.dumps(hostile) + "\n")
    html = build([path])
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "default-src 'none'" in html  # the CSP forbids fetching anything at all
    assert html.count("</script>") == 2  # the two of the page; the record's were escaped


def test_hostile_record_text_is_shown_as_text(browser, record_files, tmp_path):
    hostile = json.loads(record_files["sudoku"].read_text().splitlines()[0])
    hostile["messages"][1]["content"] = "<img src=x onerror='window.pwned=1'><b>bold?</b>"
    path = tmp_path / "hostile.jsonl"
    path.write_text(json.dumps(hostile) + "\n")
    out = tmp_path / "hostile.html"
    out.write_text(build([path]))
    open_page(browser, out, 0)
    assert browser.execute_script("return window.pwned === undefined")
    assert "<b>bold?</b>" in browser.find_element(By.ID, "conversation").text
