"""Forged states: each test attacks one property of ``set_state`` and checks that the state is
refused with ``InvalidState`` at once and that the env is left exactly as it was."""

from __future__ import annotations

import sqlite3

import gymnasium as gym
import pytest

import textgym  # noqa: F401  (registers the ids)
from textgym.error import InvalidState
from textgym.state import MAGIC, pack, unpack


def _make(env_id, **kwargs):
    return gym.make(env_id, **kwargs).unwrapped


def _refused(env, state, match=None):
    """``state`` is refused and ``env`` (mid-episode) continues as if nothing was tried."""
    before = env.get_state()
    with pytest.raises(InvalidState, match=match):
        env.set_state(state)
    assert env.get_state() == before


def _forged(env, edit):
    header, blobs = unpack(env.get_state())
    blobs = edit(header, blobs) or blobs
    return pack(header, blobs)


@pytest.fixture
def workplace():
    env = _make("textgym/Workplace-v0")
    env.reset(seed=3)
    env.step(env.oracle_action())  # a database that differs from the world's
    return env


@pytest.fixture
def sudoku():
    env = _make("textgym/Sudoku-v0", size=4)
    env.reset(seed=0)
    env.step(env.oracle_action(place=1))
    return env


@pytest.mark.parametrize("length", [2**40, -4096, 0, 4096 * 5 + 1])
def test_a_database_length_is_checked_against_the_chunks_present(workplace, length):
    target = _make("textgym/Workplace-v0")
    target.reset(seed=1)

    def edit(header, blobs):
        header["parts"]["db"]["length"] = length

    _refused(target, _forged(workplace, edit), "corrupt")


@pytest.mark.parametrize(
    "edit",
    [
        lambda db, blob: db.update(chunks=[10**12]),  # a chunk past the image
        lambda db, blob: db.update(chunks=db["chunks"] + db["chunks"][:1]),  # one chunk twice
        lambda db, blob: db.update(chunks=[-1]),
        lambda db, blob: db.update(chunks=["0"]),
        lambda db, blob: db.update(blob=5),
    ],
)
def test_database_chunks_that_the_blob_does_not_hold_are_refused(workplace, edit):
    target = _make("textgym/Workplace-v0")
    target.reset(seed=1)

    def forge(header, blobs):
        edit(header["parts"]["db"], blobs)

    _refused(target, _forged(workplace, forge), "corrupt")


def test_blob_sizes_are_each_checked_not_only_their_sum(sudoku):
    header, _ = unpack(sudoku.get_state())
    head = b'{"format":1,"blobs":[8,-8]}'
    forged = MAGIC + len(head).to_bytes(4, "big") + head
    _refused(sudoku, forged, "corrupt")
    _refused(sudoku, MAGIC + (10**6).to_bytes(4, "big") + b"{}", "corrupt")  # a header longer than the state


def test_a_header_nested_past_json_limits_is_refused(sudoku):
    head = b"[" * 100_000
    _refused(sudoku, MAGIC + len(head).to_bytes(4, "big") + head, "corrupt")


@pytest.mark.parametrize("kwargs", [[1, 2], "size=4", 7])
def test_a_header_whose_kwargs_is_not_an_object_is_refused(sudoku, kwargs):
    def edit(header, blobs):
        header["kwargs"] = kwargs

    _refused(sudoku, _forged(sudoku, edit))


def _database_state(workplace, sql):
    """A state of ``workplace`` whose database ran ``sql`` first (what a forger can write)."""
    workplace.db.executescript(sql)
    state = workplace.get_state()
    return state


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TRIGGER planted AFTER INSERT ON calendar BEGIN UPDATE project_tasks SET list_name = 'Done'; END;",
        "CREATE VIEW seen AS SELECT * FROM emails;",
        "CREATE TABLE extra (x);",
        "CREATE INDEX extra_index ON emails (subject);",
        "DROP INDEX emails_0;",
    ],
)
def test_a_restored_database_schema_must_be_the_envs_own(workplace, sql):
    forged = _database_state(workplace, sql)
    target = _make("textgym/Workplace-v0")
    target.reset(seed=3)
    _refused(target, forged, "schema")
    status = "SELECT count(*) FROM project_tasks WHERE list_name = 'Done'"
    before = target.db.execute(status).fetchone()
    target.step(workplace.oracle_action())  # no trigger fires in the target's own database
    assert target.db.execute(status).fetchone() == before


def test_a_database_with_corrupt_pages_is_refused(workplace):
    image = bytearray(workplace.db.serialize())
    # Garble every page after the schema's (the b-tree pages of the tables), keeping the header.
    for at in range(4096 * 2, len(image), 4096):
        image[at + 8 : at + 64] = b"\xff" * 56
    scratch = sqlite3.connect(":memory:")
    scratch.deserialize(bytes(image))
    workplace.db.deserialize(scratch.serialize())
    forged = workplace.get_state()
    target = _make("textgym/Workplace-v0")
    target.reset(seed=3)
    _refused(target, forged, "corrupt")


def test_a_fresh_episode_state_restores_without_a_database_check(monkeypatch):
    # A state whose database is the world's own holds nothing to check.
    env = _make("textgym/Workplace-v0")
    env.reset(seed=2)
    target = _make("textgym/Workplace-v0")

    def refuse(*args):
        raise AssertionError("checked the world's own image")

    monkeypatch.setattr(type(target.world), "check_image", refuse)
    target.set_state(env.get_state())
    assert target.conversation == env.conversation


def test_a_code_task_without_tests_or_expected_values_is_refused():
    env = _make("textgym/Code-v0")
    try:
        env.reset(options={"task": {"prompt": "Double x.", "entry_point": "f", "tests": [{"args": [1], "expected": 2}]}})
        for edit in (
            lambda answer: answer.update(tests=[]),
            lambda answer: answer["tests"][0].pop("expected"),
            lambda answer: answer["tests"][0].update(kind="eval"),
            lambda answer: answer["tests"].append("print(1)"),
        ):

            def forge(header, blobs, edit=edit):
                edit(header["episode"]["task"]["answer"])

            target = _make("textgym/Code-v0")
            target.reset(seed=1)
            _refused(target, _forged(env, forge))
    finally:
        env.close()


@pytest.mark.parametrize(
    "edit",
    [
        lambda h: h["parts"].update(solution=[str(c) for c in h["parts"]["solution"]]),
        lambda h: h["parts"].update(board=h["parts"]["board"][:-1]),
        lambda h: h["parts"].update(board=[9] * 16),
        lambda h: h["parts"].update(puzzle=[0] * 16),
        lambda h: h["parts"].update(correct=99),
        lambda h: h["episode"].update(conversation="a string"),
        lambda h: h["episode"].update(conversation=[{"role": "wizard", "content": "x"}]),
        lambda h: h["episode"].update(conversation=h["episode"]["conversation"] + [{"role": "user", "content": 3}]),
        lambda h: h["episode"].update(turn="1"),
        lambda h: h["episode"].update(turn=-1),
        lambda h: h["episode"].update(turn=16),  # a live episode past max_turns
        lambda h: h["episode"].update(done="no"),
        lambda h: h["episode"].update(seed="0"),
        lambda h: h["episode"]["task"].update(data={"puzzle": 12}),
    ],
)
def test_a_sudoku_episode_the_env_never_writes_is_refused(sudoku, edit):
    def forge(header, blobs):
        edit(header)

    target = _make("textgym/Sudoku-v0", size=4)
    target.reset(seed=1)
    _refused(target, _forged(sudoku, forge))


def test_limits_come_from_the_envs_construction_not_from_the_state(sudoku):
    def forge(header, blobs):
        header["episode"]["max_turns"] = 10**9

    target = _make("textgym/Sudoku-v0", size=4, max_turns=3)
    twin = _make("textgym/Sudoku-v0", size=4, max_turns=3)
    twin.reset(seed=0)
    twin.step(twin.oracle_action(place=1))
    target.set_state(_forged(twin, forge))
    assert target.max_turns == 3
    target.step("no move")
    assert target.step("no move")[3]  # truncated at the env's own third turn


def test_a_refused_state_leaves_an_env_without_an_episode_without_one():
    env = _make("textgym/Sudoku-v0", size=4)
    other = _make("textgym/Sudoku-v0", size=4)
    other.reset(seed=0)

    def forge(header, blobs):
        header["parts"]["board"] = "x"

    with pytest.raises(InvalidState):
        env.set_state(_forged(other, forge))
    assert env.task is None and env.conversation == ()


def test_a_workplace_state_refused_for_its_turn_leaves_the_database_as_it_was(workplace):
    # The database is valid; the episode is not (a live turn at max_turns): nothing may change.
    def forge(header, blobs):
        header["episode"]["conversation"] += [{"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}] * 20
        header["episode"]["turn"] = 20

    target = _make("textgym/Workplace-v0")
    target.reset(seed=1)
    _refused(target, _forged(workplace, forge), "turn")
