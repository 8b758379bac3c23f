"""Sudoku-v0: generation, pinned tasks, move legality, answers, rewards, vector envs and fuzzing."""

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

from textgym.envs.sudoku import BLANKS, SudokuEnv
from textgym.envs.sudoku.grid import format_board, from_string
from textgym.envs.sudoku.solver import BOX_SHAPES
from textgym.error import InvalidTask, ResetNeeded
from textgym.tasks import write_jsonl

REPO = Path(__file__).resolve().parents[2]

# A 4x4 puzzle with a unique solution, and that solution (row-major).
P4 = "1...3.1..1.3...1"
S4 = "1234341221434321"
# The classic 9x9 example (51 blanks) and its unique solution.
P9 = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"
S9 = "534678912672195348198342567859761423426853791713924856961537284287419635345286179"


def call(row, col, digit):
    return f"<tool_call>{json.dumps({'name': 'place', 'arguments': {'row': row, 'col': col, 'digit': digit}})}</tool_call>"


def pinned(puzzle=P4, **kwargs):
    env = SudokuEnv(**kwargs)
    env.reset(options={"task": {"puzzle": puzzle}})
    return env


def count_naive(cells, size, limit=2):
    """An independent, deliberately simple solution counter (first empty cell, plain checks)."""
    br, bc = BOX_SHAPES[size]
    cells = list(cells)

    def ok(i, d):
        r, c = divmod(i, size)
        r0, c0 = r - r % br, c - c % bc
        return (
            all(cells[r * size + k] != d for k in range(size))
            and all(cells[k * size + c] != d for k in range(size))
            and all(cells[(r0 + a) * size + c0 + b] != d for a in range(br) for b in range(bc))
        )

    def count():
        try:
            i = cells.index(0)
        except ValueError:
            return 1
        total = 0
        for d in range(1, size + 1):
            if ok(i, d):
                cells[i] = d
                total += count()
                cells[i] = 0
                if total >= limit:
                    break
        return total

    return count()


# ----- Gymnasium contract -----


@pytest.mark.parametrize("size", [4, 6, 9])
def test_check_env(size):
    check_env(gym.make("textgym/Sudoku-v0", size=size, render_mode="ansi").unwrapped, skip_render_check=False)


def test_registered_entry_point_and_defaults():
    spec = gym.spec("textgym/Sudoku-v0")
    assert spec.entry_point == "textgym.envs.sudoku:SudokuEnv"
    env = gym.make("textgym/Sudoku-v0")
    obs, info = env.reset(seed=0)
    u = env.unwrapped
    assert u.size == 9 and u.puzzle.count(0) == BLANKS[9]["medium"] and u.max_turns == 81
    assert [t["function"]["name"] for t in info["tools"]] == ["place"]
    assert [m["role"] for m in obs] == ["system", "user"]
    assert "<answer>" in obs[0]["content"] and "<tool_call>" in obs[0]["content"] and "place" in obs[0]["content"]
    assert format_board(u.board, 9) in obs[1]["content"]


def test_same_seed_same_task_in_another_process():
    code = (
        "import json, gymnasium as gym, textgym\n"
        "env = gym.make('textgym/Sudoku-v0', size=6, difficulty='hard')\n"
        "obs, info = env.reset(seed=7)\n"
        "print(json.dumps([env.unwrapped.task.to_json(), [m['content'] for m in obs]]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    env = gym.make("textgym/Sudoku-v0", size=6, difficulty="hard")
    obs, _ = env.reset(seed=7)
    assert json.loads(out.stdout) == [env.unwrapped.task.to_json(), [m["content"] for m in obs]]
    other, _ = env.reset(seed=8)
    assert other != obs


# ----- generation -----


@pytest.mark.parametrize("size", [4, 6, 9])
@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_generated_puzzles_are_unique_and_consistent(size, difficulty):
    env = SudokuEnv(size=size, difficulty=difficulty)
    for seed in range(6 if size < 9 else 2):
        env.reset(seed=seed)
        puzzle, solution = env.puzzle, env.solution
        assert puzzle.count(0) == BLANKS[size][difficulty]
        assert all(p in (0, s) for p, s in zip(puzzle, solution))
        assert count_naive(puzzle, size) == 1
        assert count_naive(solution, size) == 1  # the solution itself breaks no rule


def test_blanks_argument_and_its_bounds():
    env = SudokuEnv(size=9, blanks=50)
    env.reset(seed=3)
    assert env.puzzle.count(0) == 50
    for bad in (0, 57, 2.5, "50"):
        with pytest.raises(ValueError, match="blanks"):
            SudokuEnv(size=9, blanks=bad)
    with pytest.raises(ValueError, match="size"):
        SudokuEnv(size=5)
    with pytest.raises(ValueError, match="difficulty"):
        SudokuEnv(difficulty="extreme")
    with pytest.raises(ValueError, match="reward"):
        SudokuEnv(reward="shaped")


# ----- pinned tasks -----


def test_pinned_puzzles_infer_size_and_accept_both_blank_marks():
    env = pinned(P4.replace(".", "0"), size=9)
    assert env._n == 4 and env.solution == from_string(S4) and env.max_turns == 16
    env.reset(options={"task": {"puzzle": P9}})
    assert env._n == 9 and env.solution == from_string(S9)
    six = "4.3....6..14....5.14..6.63..4.....36"  # boxes of 2 rows x 3 columns
    env.reset(options={"task": {"puzzle": six}})
    assert env._n == 6 and 0 not in env.solution and count_naive(from_string(six), 6) == 1


def test_pinned_task_record_dict_and_jsonl_dataset(tmp_path):
    env = pinned()
    record = env.unwrapped.task.to_dict()
    assert record["data"]["puzzle"] == P4 and record["answer"] == S4
    env.reset(options={"task": record})
    assert env.task.id == record["id"] and env.puzzle == from_string(P4)
    path = tmp_path / "tasks.jsonl"
    write_jsonl(path, [env.task])
    path.write_text(path.read_text() + json.dumps({"puzzle": P9}) + "\n")
    ds = gym.make("textgym/Sudoku-v0", tasks=str(path))
    ds.reset(options={"task_index": 1})
    assert ds.unwrapped.puzzle == from_string(P9)
    _, info = ds.reset(options={"task_index": 0})
    assert info["task_id"] == record["id"]


@pytest.mark.parametrize(
    "task, fragment",
    [
        ({"puzzle": P4[:-1]}, "15 characters"),
        ({"puzzle": P4[:-1] + "5"}, "character 16"),
        ({"puzzle": P4[:-1] + "x"}, "character 16"),
        ({"puzzle": "11" + "." * 14}, "conflict"),
        ({"puzzle": "1." + "." * 6 + "1" + "." * 7}, "conflict"),
        ({"puzzle": "12....3...4....."}, "no solution"),
        ({"puzzle": 1234}, "string"),
        ({"grid": P4}, "'puzzle'"),
        ({"puzzle": P4, "solution": "1" * 16}, "solution"),
        ({"id": "t", "data": {"puzzle": P4}, "answer": "1" * 16}, "solution"),
    ],
)
def test_bad_pinned_puzzles_raise_value_error_with_one_line(task, fragment):
    env = SudokuEnv()
    with pytest.raises(ValueError, match=fragment) as exc:
        env.reset(options={"task": task})
    assert isinstance(exc.value, InvalidTask) and "\n" not in str(exc.value)


def test_pinned_puzzle_with_several_solutions_accepts_any_valid_grid():
    env = pinned("." * 16)
    other = "2143341243211234"  # a valid 4x4 grid, not necessarily the stored one
    assert count_naive(from_string(other), 4) == 1
    _, reward, terminated, _, info = env.step(f"<answer>{other}</answer>")
    assert terminated and reward == 1.0 and info["success"]
    assert env.task.metadata["unique"] is False


# ----- moves -----


ONE_GIVEN = "1" + "." * 15


@pytest.mark.parametrize(
    "puzzle, action, fragment",
    [
        (P4, call(5, 1, 2), "off the board"),
        (P4, call(0, 2, 2), "off the board"),
        (P4, call(1, 1, 2), "given"),
        (ONE_GIVEN, call(1, 2, 1), "conflicts with the 1 at row 1, col 1 (same row)"),
        (ONE_GIVEN, call(2, 1, 1), "conflicts with the 1 at row 1, col 1 (same column)"),
        (ONE_GIVEN, call(2, 2, 1), "conflicts with the 1 at row 1, col 1 (same box)"),
        (P4, call(1, 2, 5), "not a digit"),
        (P4, call(1, 2, 0), "not a digit"),
        (P4, call(1, 2, "two"), "must be an integer"),
        (P4, call(1.5, 2, 2), "must be an integer"),
        (P4, call(1, 2, None), "must not be null"),
        (P4, call(1, 2, True), "must be an integer"),
    ],
)
def test_illegal_moves_are_explained_and_change_nothing(puzzle, action, fragment):
    env = pinned(puzzle)
    obs, reward, terminated, truncated, info = env.step(action)
    assert fragment in info["error"] and fragment in obs[-2]["content"]
    assert obs[-2]["role"] == "tool" and obs[-1]["role"] == "user" and "rejected" in obs[-1]["content"]
    assert env.board == from_string(puzzle) and reward == 0.0 and not terminated and not truncated


def test_several_moves_per_turn_apply_in_order_and_own_digits_can_be_overwritten():
    env = pinned()
    obs, _, _, _, info = env.step(call(1, 2, 4) + call(1, 2, 2) + call(1, 3, 2))
    assert env.board[1] == 2 and env.board[2] == 0  # overwritten, then the third call conflicts
    assert "replacing 4" in obs[-3]["content"] and "conflicts" in info["error"]
    assert [m["role"] for m in obs[-4:]] == ["tool", "tool", "tool", "user"]
    assert format_board(env.board, 4) in obs[-1]["content"]


def test_the_board_drawn_after_every_turn_is_the_board_held():
    # The env redraws the board one character per move: after any mix of moves,
    # overwrites, conflicts and bad cells, the text shown is the board as format_board draws it.
    import random

    rng = random.Random(0)
    for size in (4, 6, 9):
        env = SudokuEnv(size=size, max_turns=400)
        env.reset(seed=size)
        for _ in range(60):
            row, col, digit = (rng.randint(0, size + 1) for _ in range(3))
            obs, _, terminated, truncated, _ = env.step(call(row, col, digit) + env.oracle_action(place=rng.randint(1, 2)))
            assert format_board(env.board, size) in obs[-1]["content"]
            if terminated or truncated:
                break


def test_openai_dict_actions_and_no_move_turns():
    env = pinned()
    action = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "x", "type": "function", "function": {"name": "place", "arguments": '{"row": 1, "col": 2, "digit": 2}'}}],
    }
    obs, _, _, _, info = env.step(action)
    assert env.board[1] == 2 and info["error"] is None and obs[-2]["tool_call_id"] == "x"
    obs, _, terminated, _, info = env.step("I think row 1 is 1 2 3 4")
    assert "no move found" in info["error"] and not terminated and obs[-1]["role"] == "user"


def test_filling_the_board_by_moves_ends_with_success():
    env = gym.make("textgym/Sudoku-v0", size=6, difficulty="easy")
    env.reset(seed=0)
    u = env.unwrapped
    for turn in range(1, u.max_turns + 1):  # noqa: B007 - the turn count is checked after the loop
        obs, reward, terminated, truncated, info = env.step(u.oracle_action(place=1))
        if terminated:
            break
    assert turn == BLANKS[6]["easy"] and reward == 1.0 and info["success"]
    assert info["verification"]["by"] == "moves" and u.board == u.solution


# ----- answers and rewards -----


def test_answer_grid_formats():
    boxed = format_board(from_string(S4), 4)
    for text in (f"<answer>\n{boxed}\n</answer>", f"<answer>{S4}</answer>", "<answer>\n1 2 3 4\n3 4 1 2\n2 1 4 3\n4 3 2 1"):
        env = pinned()
        _, reward, terminated, _, info = env.step("Let me think.\n" + text)
        assert terminated and reward == 1.0 and info["success"] and info["verification"]["by"] == "answer"


@pytest.mark.parametrize(
    "grid, reason",
    [
        ("1434341221434321", "appears twice"),  # keeps the givens, repeats a 4 in row 1
        ("2143341243211234", "given"),  # valid grid, but ignores the givens
        ("1234341221434.21", "not a digit"),
    ],
)
def test_wrong_answers_score_zero_and_end_the_episode(grid, reason):
    env = pinned()
    _, reward, terminated, truncated, info = env.step(f"<answer>{grid}</answer>")
    assert terminated and not truncated and reward == 0.0 and info["success"] is False
    assert reason in info["verification"]["reason"]


def test_an_answer_that_is_not_a_grid_is_a_format_error_and_play_goes_on():
    env = pinned()
    obs, reward, terminated, _, info = env.step("<answer>the top row is 1 2 3 4</answer>")
    assert not terminated and reward == 0.0 and "not a 4x4 grid" in info["error"]
    assert env.board == from_string(P4)


def test_truncation_after_max_turns():
    env = pinned(max_turns=2)
    env.step("hmm")
    _, reward, terminated, truncated, info = env.step("hmm")
    assert truncated and not terminated and reward == 0.0
    assert info["success"] is False and info["verification"]["by"] == "truncation"
    with pytest.raises(ResetNeeded):
        env.step("hmm")


def test_dense_reward_pays_progress_and_sums_to_one():
    env = pinned(P9, reward="dense")
    blanks = P9.count(".")
    # A blank cell and a legal but wrong digit for it (not in its row, column or box).
    first, wrong = next(
        (i, d)
        for i in range(81)
        for d in range(1, 10)
        if not env.board[i] and d != env.solution[i] and env._masks.candidates(i) & (1 << (d - 1))
    )
    sol = env.solution[first]
    r, c = divmod(first, 9)
    _, reward, *_ = env.step(call(r + 1, c + 1, wrong))
    assert reward == 0.0
    _, reward, *_ = env.step(call(r + 1, c + 1, sol))
    assert reward == pytest.approx(1 / blanks)
    _, reward, *_ = env.step(call(r + 1, c + 1, wrong))
    assert reward == pytest.approx(-1 / blanks)
    total = 0.0
    while True:
        _, reward, terminated, truncated, _ = env.step(env.oracle_action(place=3))
        total += reward
        if terminated or truncated:
            break
    assert terminated and total == pytest.approx(1.0)
    env = pinned(P9, reward="dense")
    env.step(env.oracle_action(place=5))
    _, reward, terminated, _, info = env.step(env.oracle_action())
    assert terminated and info["success"] and reward == pytest.approx(1 - 5 / blanks)


def test_dense_reward_gives_a_wrong_answer_grid_partial_credit():
    """A one-turn answer is paid for its correct blanks; one that alters a given gets nothing."""
    env = pinned(P9, reward="dense")
    blanks = [i for i in range(81) if not env.board[i]]
    digits = [str(d) for d in env.solution]
    for i in blanks[:3]:  # three blanks wrong (a wrong digit, shape kept)
        digits[i] = str(env.solution[i] % 9 + 1)
    rows = ["".join(digits[r * 9 : r * 9 + 9]) for r in range(9)]
    _, reward, terminated, _, info = env.step("<answer>\n" + "\n".join(rows) + "\n</answer>")
    assert terminated and not info["success"]
    assert reward == pytest.approx((len(blanks) - 3) / len(blanks))
    assert info["verification"]["correct"] == len(blanks) - 3

    env = pinned(P9, reward="dense")
    given = next(i for i in range(81) if env.board[i])
    digits = [str(d) for d in env.solution]
    digits[given] = str(env.solution[given] % 9 + 1)
    rows = ["".join(digits[r * 9 : r * 9 + 9]) for r in range(9)]
    _, reward, terminated, _, info = env.step("<answer>\n" + "\n".join(rows) + "\n</answer>")
    assert terminated and reward == 0.0 and info["verification"]["correct"] == 0

    env = pinned(P9)  # binary: the same wrong grid scores 0 but is counted the same way
    digits = [str(d) for d in env.solution]
    digits[blanks[0]] = str(env.solution[blanks[0]] % 9 + 1)
    rows = ["".join(digits[r * 9 : r * 9 + 9]) for r in range(9)]
    _, reward, _, _, info = env.step("<answer>\n" + "\n".join(rows) + "\n</answer>")
    assert reward == 0.0 and info["verification"]["correct"] == len(blanks) - 1


# ----- oracle and vector envs -----


def test_oracle_answers_at_any_time():
    env = SudokuEnv(size=4)
    with pytest.raises(ResetNeeded):
        env.oracle_action()
    env.reset(seed=1)
    env.step(call(1, 1, 1) + call(1, 2, 1))  # possibly wrong moves first
    _, reward, terminated, _, _ = env.step(env.oracle_action())
    assert terminated and reward == 1.0
    assert env.oracle_action().startswith("<answer>")  # harmless after the end


@pytest.mark.parametrize("size", [4, 6, 9])
def test_compact_oracle_answers_digits_only_rows_and_solves(size):
    env = SudokuEnv(size=size, difficulty="easy")
    env.reset(seed=3)
    action = env.oracle_action(compact=True)
    rows = action.removeprefix("<answer>\n").removesuffix("\n</answer>").split("\n")
    assert len(rows) == size and all(len(r) == size and r.isdigit() for r in rows)
    assert "".join(rows) == "".join(map(str, env.solution))
    _, reward, terminated, _, info = env.step(action)
    assert terminated and reward == 1.0 and info["success"]


def test_noisy_oracle_keeps_givens_guesses_blanks_and_repeats_itself():
    env = SudokuEnv(size=4, blanks=1, max_turns=1)
    solved = []
    for seed in range(200):
        env.reset(seed=seed)
        action = env.oracle_action(compact=True, noise=1.0)
        assert action == env.oracle_action(compact=True, noise=1.0)  # a function of the task
        assert env.oracle_action(compact=True, noise=0.0) == env.oracle_action(compact=True)
        cells = action.removeprefix("<answer>\n").removesuffix("\n</answer>").replace("\n", "")
        assert all(g == 0 or int(c) == g for c, g in zip(cells, env.puzzle))  # givens are copied
        solved.append(env.step(action)[1])
    # A random digit for the one blank: right about a quarter of the time.
    assert 0.15 < sum(solved) / len(solved) < 0.35


def test_compact_board_shows_digit_rows_and_plays_the_same_game():
    drawn, compact = SudokuEnv(size=4, blanks=3), SudokuEnv(size=4, blanks=3, board="compact")
    obs_d, _ = drawn.reset(seed=5)
    obs_c, _ = compact.reset(seed=5)
    assert obs_c[-1]["content"] == "Here is the puzzle:\n" + format_board(compact.puzzle, 4, compact=True)
    assert format_board(compact.puzzle, 4, compact=True).replace("\n", "") == "".join(".1234"[d] for d in compact.puzzle)
    done = False
    while not done:  # the same moves, the same rewards and boards; only the drawing differs
        move = drawn.oracle_action(place=1)
        a, b = drawn.step(move), compact.step(move)
        assert a[1:4] == b[1:4] and drawn.board == compact.board
        assert format_board(compact.board, 4, compact=True) in b[0][-1]["content"]
        done = a[2] or a[3]
    assert b[1] == 1.0
    with pytest.raises(ValueError, match="board must be"):
        SudokuEnv(board="small")


def test_noisy_move_oracle_guesses_digits_of_the_cells_it_would_fill():
    env = SudokuEnv(size=4, blanks=3, max_turns=8)
    right = wrong = 0
    for seed in range(100):
        env.reset(seed=seed)
        clean = env.oracle_action(place=1)
        assert env.oracle_action(place=1, noise=0.0) == clean
        guess = env.oracle_action(place=1, noise=1.0)
        assert guess == env.oracle_action(place=1, noise=1.0)  # a function of the state
        assert guess[: guess.index('"digit"')] == clean[: clean.index('"digit"')]  # the same cell
        right += guess == clean
        wrong += guess != clean
    # A random digit: right about a quarter of the time.
    assert 0.12 < right / (right + wrong) < 0.4


def test_noisy_move_oracle_still_solves_within_enough_turns():
    env = SudokuEnv(size=4, blanks=3, max_turns=40)
    for seed in range(20):
        env.reset(seed=seed)
        done, reward = False, 0.0
        while not done:  # a rejected guess is not repeated forever: the turn reseeds it
            _, reward, terminated, truncated, _ = env.step(env.oracle_action(place=1, noise=0.5))
            done = terminated or truncated
        assert reward == 1.0


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_oracle_scores_one_in_vector_envs_with_grouped_seeds(mode):
    venv = gym.make_vec("textgym/Sudoku-v0", num_envs=4, vectorization_mode=mode, size=4)
    try:
        obs, infos = venv.reset(seed=[5, 5, 9, 9])
        assert obs[0] == obs[1] and obs[2] == obs[3] and obs[0] != obs[2]
        assert infos["task_id"][0] == infos["task_id"][1] != infos["task_id"][2]
        actions = list(venv.call("oracle_action"))
        obs, rewards, terminated, truncated, infos = venv.step(actions)
        assert list(rewards) == [1.0] * 4 and all(terminated) and not any(truncated)
        assert all(infos["success"])
    finally:
        venv.close()


# ----- rendering -----


def test_render_ansi_shows_the_board():
    env = pinned(render_mode="ansi")
    text = env.render()
    assert format_board(from_string(P4), 4) in text and "4x4" in text
    assert SudokuEnv().render() is None


# ----- fuzzing -----

garbage_text = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    st.sampled_from(
        [
            "<tool_call>",
            "<tool_call>{",
            "</tool_call>",
            '<tool_call>{"name": "place"}</tool_call>',
            '<tool_call>{"name": "erase", "arguments": {}}</tool_call>',
            "```python\nx\n```",
            "\x00" * 50,
        ]
    ),
).filter(lambda s: "<answer>" not in s)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
garbage_dicts = st.fixed_dictionaries(
    {"role": st.sampled_from(["assistant", "user", "tool"]), "content": st.one_of(st.text(max_size=50), st.none(), st.integers())},
    optional={"tool_calls": st.one_of(json_values, st.lists(st.fixed_dictionaries({"function": json_values}), max_size=2))},
)


@settings(max_examples=150, deadline=None)
@given(action=st.one_of(garbage_text, garbage_dicts))
def test_fuzzed_garbage_never_raises_and_leaves_the_board_intact(action):
    env = pinned()
    obs, reward, terminated, truncated, info = env.step(action)
    assert env.board == from_string(P4) and reward == 0.0 and not terminated
    assert info["error"] and obs[-1]["role"] != "assistant"


@settings(max_examples=150, deadline=None)
@given(row=json_values, col=json_values, digit=json_values)
def test_fuzzed_place_arguments_change_the_board_only_when_legal(row, col, digit):
    env = pinned()
    action = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "place", "arguments": {"row": row, "col": col, "digit": digit}}}],
    }
    _, reward, terminated, _, info = env.step(action)
    changed = [i for i, (a, b) in enumerate(zip(env.board, from_string(P4))) if a != b]
    assert (len(changed) == 1) == (info["error"] is None) and len(changed) <= 1
    assert all(env.board[i] == p for i, p in enumerate(from_string(P4)) if p)
    assert not terminated and reward == 0.0


# No conflicting givens and no solution: an unbudgeted search took over 100 s on it.
SLOW_PUZZLE = ".....5.8....6.1.43..........1.5........1.6...3.......553.....61........4........."


@pytest.mark.timeout(60)
def test_a_pinned_puzzle_built_to_be_slow_is_refused_within_the_search_budget():
    env = gym.make("textgym/Sudoku-v0")
    with pytest.raises(InvalidTask, match="search budget"):
        env.reset(options={"task": {"puzzle": SLOW_PUZZLE}})
    obs, info = env.reset(seed=0)  # the env goes on
    assert info["turn"] == 0


def test_the_hardest_known_puzzles_fit_the_search_budget():
    inkala = "8..........36......7..9.2...5...7.......457.....1...3...1....68..85...1..9....4.."
    env = gym.make("textgym/Sudoku-v0")
    env.reset(options={"task": {"puzzle": inkala}})
    assert env.unwrapped.task.metadata["unique"] is True


def test_state_key_is_the_board_and_the_last_refusal_not_the_history():
    a, b = pinned(), pinned()
    start = a.reset(options={"task": {"puzzle": P4}})[1]["state_key"]
    assert b.reset(options={"task": {"puzzle": P4}})[1]["state_key"] == start and len(start) == 16
    # Two moves in either order reach one board, one state; each first move leaves a state of its own.
    a_keys = [a.step(call(1, 2, 2))[4]["state_key"], a.step(call(1, 3, 3))[4]["state_key"]]
    b_keys = [b.step(call(1, 3, 3))[4]["state_key"], b.step(call(1, 2, 2))[4]["state_key"]]
    assert a_keys[1] == b_keys[1] and len({start, a_keys[0], b_keys[0], a_keys[1]}) == 4
    # A refused move changes no cell, but its refusal is what the model sees next: the same
    # refusal is the same state, and once a move is accepted the refusal is gone from it.
    c, d = pinned(), pinned()
    refused = c.step(call(1, 1, 2))[4]["state_key"]
    assert d.step(call(1, 1, 2))[4]["state_key"] == refused != start
    assert d.step(call(1, 4, 4))[4]["state_key"] != c.step(call(1, 1, 3))[4]["state_key"]
    assert c.step(call(1, 2, 2))[4]["state_key"] == a_keys[0]
    # A restored state has its key, refusal included.
    copy = SudokuEnv()
    _, info = copy.reset(options={"state": c.get_state()})
    assert info["state_key"] == c.state_key() == a_keys[0]
    c.step(call(1, 1, 4))
    copy.set_state(c.get_state())
    assert copy.state_key() == c.state_key() != a_keys[0]
