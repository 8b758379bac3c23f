"""Sudoku-v0's fast path for a move written exactly as the prompt asks: the same step as the general one.

``SudokuEnv.step`` answers ``MOVE % (row, col, digit)`` with on-board values without the shared
parser, because parsing was a third of a 4x4 step. Every test here steps one env through
``SudokuEnv.step`` and a twin through ``TextEnv.step`` (the general parser and the toolset, never
the fast path) and asserts the same observation, reward, flags, info and board after every action.
"""

import json
import random

import pytest

import textgym.env
from textgym.env import TextEnv
from textgym.envs.sudoku import SudokuEnv
from textgym.envs.sudoku.env import MOVE
from textgym.envs.sudoku.solver import Masks, geometry
from textgym.error import ResetNeeded

P4_MANY = "1......2........"  # a pinned 4x4 puzzle with many solutions


def twins(seed, **kwargs):
    fast, general = SudokuEnv(**kwargs), SudokuEnv(**kwargs)
    assert fast.reset(seed=seed) == general.reset(seed=seed)
    return fast, general


def assert_same_step(fast, general, action):
    got, want = fast.step(action), TextEnv.step(general, action)
    assert got == want, action
    assert type(got[1]) is type(want[1]) and type(got[2]) is type(want[2]) is bool
    assert [type(m) for m in got[0]] == [type(m) for m in want[0]]
    assert (fast.board, fast._text, fast.turn, fast._done) == (general.board, general._text, general.turn, general._done)
    assert (fast._masks.rows, fast._masks.cols, fast._masks.boxes) == (general._masks.rows, general._masks.cols, general._masks.boxes)
    return got


def near_misses(row, col, digit):
    """Actions that look like a move but are not :data:`MOVE` exactly (the general path's cases)."""
    args = {"row": row, "col": col, "digit": digit}
    move = MOVE % (row, col, digit)
    return [
        move + " ",
        " " + move,
        move + "\n",
        move.replace(": ", ":"),
        move.replace('{"row"', '{ "row"'),
        move.replace("<tool_call>", "<tool_call> "),
        move.replace("</tool_call>", " </tool_call>"),
        move.replace('"digit": %d' % digit, '"digit": "%d"' % digit),
        move.replace('"row": %d' % row, '"row": %d.0' % row),
        move.replace('"col": %d' % col, '"col": 0%d' % col),
        move.replace('"col": %d' % col, '"col": -%d' % col),
        move.replace('"col": %d' % col, '"col": true'),
        move.replace('"row": %d' % row, '"row": \u0661'),  # ARABIC-INDIC DIGIT ONE
        move.replace(str(digit) + "}}", "\uff11}}"),  # FULLWIDTH DIGIT ONE
        move.replace('"digit": %d' % digit, '"digit": %d, "digit": %d' % (digit, digit % 4 + 1)),
        move.replace('"digit": %d' % digit, '"digit": %d, "note": "x"' % digit),
        move.replace('"digit": %d' % digit, ""),
        move.replace('"place"', '"Place"'),
        move.replace('"place"', '"plac\\u0065"'),
        move.replace('"arguments"', '"parameters"'),
        move * 2,
        move + MOVE % (col, row, digit),
        move + "<answer>1234</answer>",
        "I will play " + move,
        "<tool_call>" + json.dumps({"name": "place", "arguments": args}, indent=1) + "</tool_call>",
        "<tool_call>" + json.dumps({"arguments": args, "name": "place"}) + "</tool_call>",
        move[:-1],
        move[1:],
        {"role": "assistant", "content": move},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "place", "arguments": json.dumps(args)}}]},
        "",
        "<answer>\n1234\n3412\n2143\n4321\n</answer>",
    ]


def random_action(rng, env):
    n = env._n
    kind = rng.random()
    if kind < 0.45:  # the oracle's next move (or its answer grid): episodes progress and end solved
        return env.oracle_action(place=1)
    if kind < 0.7:  # any on-board move: givens, conflicts, overwrites, repeats
        row, col, digit = (rng.randint(1, n) for _ in range(3))
    else:  # off the board or not a digit of it (0..10, so some are single characters)
        row, col, digit = (rng.randint(0, 10) for _ in range(3))
    if rng.random() < 0.8:
        return MOVE % (row, col, digit)
    return rng.choice(near_misses(row, col, digit))


@pytest.mark.parametrize("reward", ["binary", "dense"])
@pytest.mark.parametrize("size", [4, 6, 9])
def test_fuzzed_actions_give_the_general_paths_steps(size, reward):
    rng = random.Random(size * 10 + len(reward))
    blanks, max_turns = {4: (4, 10), 6: (8, 18), 9: (20, 45)}[size]  # some episodes are truncated, others solved
    steps, ends, episode = 0, set(), 0
    while steps < 600:
        fast, general = twins(episode, size=size, reward=reward, blanks=blanks, max_turns=max_turns)
        done = False
        while not done:
            _, _, terminated, truncated, info = assert_same_step(fast, general, random_action(rng, fast))
            done = terminated or truncated
            steps += 1
        ends.add((info["end_reason"], info["verification"]["by"]))
        episode += 1
    assert {("success", "moves"), ("max_turns", "truncation")} <= ends


def test_every_on_board_move_of_a_4x4_board_gives_the_general_reply():
    for row in range(1, 5):
        for col in range(1, 5):
            for digit in range(1, 5):
                fast, general = twins(3, size=4, reward="dense")
                assert_same_step(fast, general, MOVE % (row, col, digit))
                assert_same_step(fast, general, MOVE % (row, col, digit))  # the same move again: "already holds"


def test_near_misses_and_other_actions_give_the_general_reply():
    fast, general = twins(5, size=4)
    cell = fast.puzzle.index(0)
    for action in near_misses(cell // 4 + 1, cell % 4 + 1, fast.solution[cell]):
        if not fast._done:
            assert_same_step(fast, general, action)


def completions(cells):
    """Every valid completion of a 4x4 board, by plain backtracking on the first blank."""
    if 0 not in cells:
        yield list(cells)
        return
    i = cells.index(0)
    for d in range(1, 5):
        masks = Masks(geometry(4), cells)
        if masks.candidates(i) & (1 << (d - 1)):
            yield from completions(cells[:i] + [d] + cells[i + 1 :])


def test_solving_by_moves_a_pinned_puzzle_with_several_solutions():
    fast, general = SudokuEnv(), SudokuEnv()
    for env in (fast, general):
        env.reset(options={"task": {"puzzle": P4_MANY}})
    other = next(s for s in completions([int(ch) if ch != "." else 0 for ch in P4_MANY]) if s != fast.solution)
    for i, p in enumerate(P4_MANY):
        if p == ".":
            _, reward, terminated, _, info = assert_same_step(fast, general, MOVE % (i // 4 + 1, i % 4 + 1, other[i]))
    assert (reward, terminated, info["success"]) == (1.0, True, True)


@pytest.mark.parametrize("max_action_chars", [40, len(MOVE % (1, 1, 1)) - 1, len(MOVE % (1, 1, 1))])
def test_a_character_budget_shorter_than_a_move_is_kept(max_action_chars):
    fast, general = twins(1, size=4, max_action_chars=max_action_chars)
    cell = fast.puzzle.index(0)
    _, _, _, _, info = assert_same_step(fast, general, MOVE % (cell // 4 + 1, cell % 4 + 1, fast.solution[cell]))
    assert (info["error"] is None) == (max_action_chars == len(MOVE % (1, 1, 1)))


def test_a_str_subclass_and_a_finished_episode_go_the_general_way():
    class Text(str):
        pass

    fast, general = twins(2, size=4)
    cell = fast.puzzle.index(0)
    move = MOVE % (cell // 4 + 1, cell % 4 + 1, fast.solution[cell])
    assert_same_step(fast, general, Text(move))
    fast.step(fast.oracle_action())
    with pytest.raises(ResetNeeded):
        fast.step(move)  # a move that place would accept ("already holds")


def test_the_prompts_move_skips_the_parser_and_others_do_not(monkeypatch):
    calls = []
    parse = textgym.env.parse_turn
    monkeypatch.setattr(textgym.env, "parse_turn", lambda *a, **k: calls.append(a[0]) or parse(*a, **k))
    env = SudokuEnv(size=4)
    env.reset(seed=0)
    cell = env.puzzle.index(0)
    good = MOVE % (cell // 4 + 1, cell % 4 + 1, env.solution[cell])
    env.step(good)
    assert calls == []
    env.step(good + " ")
    assert calls == [good + " "]
