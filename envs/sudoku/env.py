"""Sudoku-v0: fill a 4x4, 6x6 or 9x9 grid by placing digits with a tool, or answer it at once."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from itertools import product
from typing import Any, Literal

import numpy as np

from textgym.env import Outcome, TextEnv, tool_messages
from textgym.envs.sudoku import grid
from textgym.envs.sudoku.solver import BOX_SHAPES, Masks, generate, geometry
from textgym.error import InvalidTask, ResetNeeded, ToolError
from textgym.messages import FrozenDict, assistant, system, tool, user
from textgym.parsing import ParsedTurn
from textgym.tasks import Task, task_id
from textgym.tools import Tool, Toolset, to_json

Difficulty = Literal["easy", "medium", "hard"]
RewardMode = Literal["binary", "dense"]
BoardStyle = Literal["drawn", "compact"]

BLANKS: dict[int, dict[str, int]] = {
    4: {"easy": 6, "medium": 8, "hard": 10},
    6: {"easy": 14, "medium": 18, "hard": 22},
    9: {"easy": 36, "medium": 46, "hard": 54},
}
"""Blank cells per difficulty preset (every generated puzzle has exactly one solution)."""

MAX_BLANKS = {4: 11, 6: 24, 9: 56}
"""The most blanks ``blanks=`` accepts: random digging reaches them in a few tries at most."""

MOVE = '<tool_call>{"name": "place", "arguments": {"row": %d, "col": %d, "digit": %d}}</tool_call>'
"""One move as the prompt writes it (``MOVE % (row, col, digit)``); ``step`` answers exactly this
text, for on-board values, without the general parser (see ``SudokuEnv.step``)."""
_MOVE_CHARS = len(MOVE % (1, 1, 1))  # every on-board move of a board of at most 9x9
_FILLED = "every cell is filled and no row, column or box repeats a digit"


class SudokuEnv(TextEnv):
    """Fill a 4x4, 6x6 or 9x9 Sudoku over several turns by placing digits with a tool, or answer the whole grid.

    `textgym/Sudoku-v0` (entry point `textgym.envs.sudoku:SudokuEnv`). Every generated puzzle has
    exactly one solution; the verifier checks the rules, so the score cannot be gamed by
    formatting.

    ```python
    import gymnasium as gym
    import textgym

    env = gym.make("textgym/Sudoku-v0", size=4)                  # difficulty="medium": 8 blanks
    obs, info = env.reset(seed=0)
    print(obs[-1]["content"])                                     # the board
    obs, reward, terminated, truncated, info = env.step(
        '<tool_call>{"name": "place", "arguments": {"row": 1, "col": 1, "digit": 4}}</tool_call>'
    )
    obs, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_action())  # <answer> grid
    assert terminated and reward == 1.0 and info["success"]

    venv = gym.make_vec("textgym/Sudoku-v0", num_envs=8, vectorization_mode="async", size=9)
    obs, infos = venv.reset(seed=[0, 0, 0, 0, 1, 1, 1, 1])      # GRPO groups: same seed, same puzzle
    ```

    ```
    textgym eval textgym/Sudoku-v0 --policy oracle --episodes 100
    textgym play textgym/Sudoku-v0 --env-kwargs '{"size": 4}'
    ```

    ## Observation

    The whole conversation as a tuple of read-only chat messages (OpenAI shape). Reset gives:

    - a **system** message: the rules for the board size, both action formats with an example of
      each;
    - a **user** message with the board. Blanks are `.`, boxes are outlined:

    ```
    +-------+-------+-------+
    | 5 3 . | . 7 . | . . . |
    | 6 . . | 1 9 5 | . . . |
    | . 9 8 | . . . | . 6 . |
    +-------+-------+-------+
    ...
    ```

    6x6 boards have boxes of 2 rows by 3 columns, 4x4 boards 2x2. After each turn the env adds one
    `tool` message per tool call (`"placed 4 at row 1, col 1"` or `{"error": ...}`) and then a
    `user` message with the board and the number of empty cells (and how many moves were rejected).
    The last message is always the env's.

    `info` on reset: `task_id`, `turn`, `error`, `tools` (the `place` schema), and on reset and every
    step `state_key`, a digest of the board as shown and the last turn's refusal (the moves that made
    the board are not in it: two orders of the same moves reach one key). On the last step also
    `success` and `verification` = `{"by": "moves" | "answer" | "truncation", "reason": ...,
    "correct": <blank cells holding the solution's digit>, "blanks": ..., "puzzle": ..., "board": ...,
    "solution": ...}`, the three grids as `N*N` characters (`.` blank; `board` is the final board, or
    the answered grid as written), which `textgym view` draws. `end_reason` is `success`, `failure`
    (a wrong answer grid), `max_turns` or `length` (the last action was cut at `max_action_chars`).

    ## Actions

    The assistant turn as text or an OpenAI assistant message dict with `tool_calls`.

    **Moves**: `place` tool calls (see Tools), any number per turn, applied in order.

    **One-shot answer**: `<answer>` followed by the full grid, one row per line (closing
    `</answer>` optional). Spaces, `|`, `-` and `+` are ignored, so the board as shown, filled in,
    is a valid answer; a single line of N*N digits is accepted too. An answer of the right shape
    ends the episode at any turn; it scores 1.0 only if every cell is a digit 1..N, every given is
    kept and no row, column or box repeats a digit (for a unique puzzle: it is the solution). Text
    after `<answer>` that is not an N x N grid is a format error: reported in `info["error"]`,
    the board is unchanged and the episode continues.

    A turn with neither a tool call nor an answer, and any malformed turn (bad JSON, unknown tool,
    binary garbage, a huge string), is answered with an error message, counts as a turn and
    changes nothing.

    ## Tools

    One tool, `place(row: int, col: int, digit: int)`, rows and columns 1-indexed from the top left,
    written as

    ```
    <tool_call>{"name": "place", "arguments": {"row": 1, "col": 3, "digit": 4}}</tool_call>
    ```

    A move is rejected, with the reason in its tool message and in `info["error"]`, and the board
    is left as it was, when:

    | problem | message (example) |
    |---|---|
    | off the board | `row 10, col 1 is off the board; rows and columns are 1-9` |
    | a given cell | `row 1, col 1 holds the given 5 and cannot be changed` |
    | not a digit | `0 is not a digit of this board; use 1-9` |
    | conflict | `5 at row 1, col 3 conflicts with the 5 at row 1, col 1 (same row)` |
    | wrong type | `place: 'digit' must be an integer, got string 'five' (...)` |

    Numeric strings (`"5"`) and integral floats (`5.0`) are accepted as integers; booleans are not.

    *Overwriting*: a cell you filled earlier may be overwritten with another (legal) digit, so a
    mistake can be corrected; givens never change. There is no erase move: if two wrong digits
    block each other, answer the grid instead. Since every accepted placement is conflict-free, a
    full board is a solved board: filling the last blank ends the episode with success.

    ## Reward

    - `reward="binary"` (default): 1.0 on the step that solves the puzzle (by moves or by answer),
      else 0.0.
    - `reward="dense"`: each step pays the change of the potential `correct / blanks` (1.0 once
      solved), where `correct` counts formerly blank cells that hold the solution's digit. A
      correct move pays `1/blanks`, overwriting a correct digit with a wrong one costs `1/blanks`,
      a correct answer pays the rest up to 1.0, a wrong answer grid is paid for the blanks it fills
      with the solution's digit (nothing if it alters a given), so one-turn answers get partial
      credit. An episode's rewards sum to its final potential, so a solved episode sums to 1.0.
      `info["verification"]["correct"]` counts the same cells in both modes.

    ## Episode end

    - `terminated`: the board is full, or an answer grid was given (right or wrong).
    - `truncated`: `max_turns` turns passed. The default (`max_turns=None`) is N*N turns per
      episode (16, 36 or 81): one turn per cell, i.e. one for every blank plus a spare turn for
      every given.

    ## Tasks

    - `reset(seed=s)`: a generated puzzle, the same for the same seed in any process. All
      randomness comes from the env's generator; a random complete grid is built by a bitmask
      search with per-cell random digit orders, then cells are blanked in random order, each
      blank kept only if the solution stays unique.
    - `reset(options={"task": {"puzzle": "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"}})`
      pins a puzzle: N*N characters, `.` or `0` for blanks, size inferred from the length (16, 36,
      81). An optional `"solution"` is checked. A bad length, bad characters, conflicting givens or
      no solution raise `textgym.error.InvalidTask` (a `ValueError`) with a one-line reason, e.g.
      `givens conflict: 5 appears twice in row 1 (at row 1, col 1 and row 1, col 5)`. A pinned
      puzzle with several solutions is accepted; any valid completion then counts. The search that
      checks a pinned puzzle visits at most 100,000 boards (under a second; the hardest known 9x9
      puzzles need about 30,000): a puzzle built to be slow (no conflicting givens and no solution
      took over 100 s unbudgeted) raises `InvalidTask` naming the budget instead of holding the env.
    - The Task record (`env.unwrapped.task.to_dict()`):
      `{"id": "sudoku-<hash>", "data": {"puzzle": "...", "size": 9}, "answer": "<solution>",
      "metadata": {"size": 9, "blanks": 46, "difficulty": "medium", "unique": true}}`. Both this
      dict and the `{"puzzle": ...}` dict work in `options={"task": ...}` and as JSONL rows for
      `tasks=`; `options={"task_index": i}` picks row `i`.

    ## Arguments

    | argument | default | meaning |
    |---|---|---|
    | `size` | `9` | 4, 6 or 9 for generated puzzles (a pinned puzzle brings its own size) |
    | `difficulty` | `"medium"` | blank cells: 4x4 easy/medium/hard 6/8/10; 6x6 14/18/22; 9x9 36/46/54 |
    | `blanks` | `None` | exact number of blanks, overrides `difficulty`; 1..11 (4x4), 1..24 (6x6), 1..56 (9x9) |
    | `reward` | `"binary"` | `"binary"` or `"dense"` |
    | `max_turns` | `None` | N*N, see above |
    | `tasks` | `None` | a JSONL path or a list of task dicts to draw from instead of the generator |
    | `max_action_chars` | `32768` | longer actions are cut and reported |
    | `render_mode` | `None` | `"ansi"`: `env.render()` returns a status line and the board |
    | `board` | `"drawn"` | `"compact"` shows the board as digits and `.` only, one row per line (`1.23`): 19 characters at 4x4 instead of 97, for small models whose cost is the context; moves, rules and verdicts are the same |

    ## Oracle

    `env.unwrapped.oracle_action()` returns the solution grid after `<answer>`, which solves any
    task at any turn (also after wrong moves). `oracle_action(place=k)` instead returns up to `k`
    `place` calls that first correct wrong digits and then fill blanks, choosing only moves that are
    legal now; sending `oracle_action(place=1)` every turn solves the puzzle move by move. After the
    episode ended it returns the (harmless) answer grid. `compact=True` writes the answer grid as
    digits only, one row per line (`1423`), a third of the drawn board's tokens.
    `noise=p` makes a noisy demonstrator for warm starts that should leave reinforcement learning
    room: each blank of the answer grid holds a random digit instead of the solution's with
    probability `p`, drawn from a generator seeded by the puzzle (so a task always gets the same
    answer); the givens are always copied. With one blank and `noise=1.0` it solves about a quarter
    of the puzzles. With `place=k`, `noise=p` guesses each move's digit instead (a random digit with
    probability `p`, drawn from the puzzle, the board and the turn, so a rejected guess is not
    simply repeated): the move still goes to the cell the oracle would fill, so a warm start on such
    episodes learns where to move and the call's format, and leaves the digit to reinforcement
    learning. On 4x4 puzzles with 3 blanks and `max_turns=4`, `noise=0.5` solves 53% of them and
    `noise=1.0` 5% (300 seeds).

    ## Speed

    A 9x9 reset with 50 blanks takes a few milliseconds. A move written exactly as the prompt
    shows it (`<tool_call>{"name": "place", "arguments": {"row": 1, "col": 2, "digit": 3}}</tool_call>`,
    one call per turn) is answered without the general parser, with the same reply; a move step,
    returning the whole conversation, then makes 2.1-2.2x GEM's steps per CPU-second at 4x4 and
    about five times at 9x9 (measured 2026-12-01, [benchmarks](docs/benchmarks.md#sudoku)).

    ## Version history

    - v0: initial release.
    """

    def __init__(
        self,
        *,
        size: int = 9,
        difficulty: Difficulty = "medium",
        blanks: int | None = None,
        reward: RewardMode = "binary",
        max_turns: int | None = None,
        tasks=None,
        max_action_chars: int = 32_768,
        render_mode: str | None = None,
        board: BoardStyle = "drawn",
    ):
        if size not in BOX_SHAPES:
            raise ValueError(f"size must be one of {sorted(BOX_SHAPES)}, got {size!r}")
        if difficulty not in BLANKS[size]:
            raise ValueError(f"difficulty must be 'easy', 'medium' or 'hard', got {difficulty!r}")
        if blanks is not None and not (isinstance(blanks, int) and 1 <= blanks <= MAX_BLANKS[size]):
            raise ValueError(f"blanks for a {size}x{size} puzzle must be an int in 1..{MAX_BLANKS[size]}, got {blanks!r}")
        if reward not in ("binary", "dense"):
            raise ValueError(f"reward must be 'binary' or 'dense', got {reward!r}")
        if board not in ("drawn", "compact"):
            raise ValueError(f"board must be 'drawn' or 'compact', got {board!r}")
        self._compact_board = board == "compact"
        self.size = size
        self.difficulty = difficulty
        self.blanks = BLANKS[size][difficulty] if blanks is None else blanks
        self.reward_mode = reward
        self._dense = reward == "dense"
        self._auto_turns = max_turns is None
        super().__init__(
            tasks=tasks,
            max_turns=size * size if max_turns is None else max_turns,
            max_action_chars=max_action_chars,
            render_mode=render_mode,
        )
        self._toolset = Toolset([Tool(self.place)])
        self.board: list[int] = []
        self._moves: dict[str, tuple[int, int, int]] = {}  # this board's well-formed moves (_moves(n))
        self._fresh: tuple[Task, list[int], list[int]] | None = None  # (task, puzzle, solution) last generated

    # ----- tasks -----

    def generate_task(self, rng: np.random.Generator) -> Task:
        puzzle, solution = generate(rng, self.size, self.blanks)
        text = grid.to_string(puzzle)
        meta = {"size": self.size, "blanks": self.blanks, "difficulty": self.difficulty, "unique": True}
        task = Task(task_id("sudoku", text), {"puzzle": text, "size": self.size}, grid.to_string(solution), meta)
        self._fresh = (task, puzzle, solution)
        return task

    def task_from_dict(self, d: Mapping[str, Any]) -> Task:
        """A task from ``{"puzzle": ..., "solution"?: ...}`` or a Task record dict; validated."""
        record = Task.from_dict(d) if Task.is_record(d) else None
        data = record.data if record else d
        if "puzzle" not in data:
            raise InvalidTask("a Sudoku task needs a 'puzzle' string (N*N chars, '.' or '0' for blanks)")
        size, cells = grid.parse_puzzle(data["puzzle"])
        if "size" in data and data["size"] != size:
            raise InvalidTask(f"the task says size {data['size']!r} but its puzzle has {size * size} cells ({size}x{size})")
        solution, unique = grid.solve_pinned(cells, size)
        given = record.answer if record else d.get("solution")
        if given is not None:
            rows, reason = grid.read_answer(given, size) if isinstance(given, str) else (None, "not a string")
            ok, reason = grid.judge_answer(rows, cells, size) if rows else (False, reason)
            if not ok:
                raise InvalidTask(f"the task's solution does not solve its puzzle: {reason}")
            assert rows is not None  # judged ok, so the answer was read
            solution = [int(ch) for row in rows for ch in row]
        text = grid.to_string(cells)
        meta = {**(record.metadata if record else {}), "size": size, "blanks": cells.count(0), "unique": unique}
        tid = record.id if record else task_id("sudoku", text)
        return Task(tid, {"puzzle": text, "size": size}, grid.to_string(solution), meta)

    # ----- episode -----

    def begin(self, task: Task) -> list[FrozenDict]:
        puzzle, solution = self._checked(task)
        self._set_board(puzzle, solution, list(puzzle), correct=0)
        if self._auto_turns:
            self.max_turns = self._n * self._n
        return [system(_system_prompt(self._n)), user(f"Here is the puzzle:\n{self._text}")]

    def save_episode(self, blobs: list[bytes]) -> dict[str, Any]:
        """The board and the grids it is judged by (the moves themselves are in the conversation)."""
        return {"puzzle": self.puzzle, "solution": self.solution, "board": self.board, "correct": self._correct}

    def restore_task(self, d: Mapping[str, Any]) -> Task:
        """A state's task as a record, with the turns its size allows when ``max_turns`` is the
        default; ``load_episode`` checks it as ``begin`` checks a Task (a pinned dict's check
        solves the puzzle, which would cost a restore milliseconds)."""
        task = Task.from_dict(d)
        if self._auto_turns:
            n, _ = grid.parse_puzzle(task.data.get("puzzle"))
            self.max_turns = n * n
        return task

    def load_episode(self, parts: dict[str, Any], blobs: list[bytes]) -> None:
        """The grids of the state's task as ``begin`` builds them, and a board that only ever
        held moves ``place`` accepts (givens kept, no rule broken)."""
        puzzle, solution = self._checked(self.task)
        if parts.get("puzzle") != puzzle or parts.get("solution") != solution:
            raise ValueError("the puzzle or solution is not the task's")
        n = grid.SIZE_BY_LENGTH[len(puzzle)]
        board = parts.get("board")
        if not (isinstance(board, list) and len(board) == len(puzzle) and all(type(d) is int and 0 <= d <= n for d in board)):
            raise ValueError(f"the board is not {len(puzzle)} digits in 0..{n}")
        if any(given and d != given for given, d in zip(puzzle, board)):
            raise ValueError("the board changes a given")
        seen = Masks(geometry(n), ())
        for i, d in enumerate(board):
            if d and not seen.candidates(i) >> (d - 1) & 1:
                raise ValueError(f"the board repeats {d} in a row, column or box")
            if d:
                seen.set(i, d)
        correct, placed = parts.get("correct"), sum(1 for i, d in enumerate(board) if not puzzle[i] and d == solution[i])
        if type(correct) is not int or not 0 <= correct <= puzzle.count(0) or (not self._done and correct != placed):
            raise ValueError("the count of correct cells does not fit the board")
        self._set_board(puzzle, solution, board, correct)

    def _set_board(self, puzzle: list[int], solution: list[int], board: list[int], correct: int) -> None:
        """The episode's grids and everything derived from them, for a new episode and a restored one alike."""
        self._n = grid.SIZE_BY_LENGTH[len(puzzle)]
        self._geo = geometry(self._n)
        self.puzzle, self.solution, self.board = puzzle, solution, board
        self._text = grid.format_board(board, self._n, self._compact_board)  # the board as shown, kept in step with it
        self._offsets = grid.cell_offsets(self._n, self._compact_board)
        self._moves = _moves(self._n)
        self._masks = Masks(self._geo, board)
        self._blank_count = puzzle.count(0)
        self._empty = board.count(0)
        self._correct = correct

    def _checked(self, task: Task) -> tuple[list[int], list[int]]:
        """Puzzle and solution cells of a task, re-checked: the base passes Task objects through.

        Free for the task just generated; tens of microseconds when the stored answer solves the
        puzzle; a solve otherwise.
        """
        if self._fresh is not None and self._fresh[0] is task:
            return self._fresh[1], self._fresh[2]
        size, cells = grid.parse_puzzle(task.data.get("puzzle"))
        rows, _ = grid.read_answer(task.answer, size) if isinstance(task.answer, str) else (None, None)
        if rows is None or not grid.judge_answer(rows, cells, size)[0]:
            return cells, grid.solve_pinned(cells, size)[0]
        return cells, [int(ch) for row in rows for ch in row]

    @property
    def tools(self) -> Toolset:
        return self._toolset

    def decision_state(self) -> str:
        """The board as shown and the last turn's refusal, if its reply showed one (the move
        that placed a digit is history: the board holds its effect)."""
        return f"{self._text}\0{self.last_error or ''}"

    def step(self, action: Any):
        """TextEnv's step, answering the usual action, one move written exactly as :data:`MOVE`
        with on-board values, without parsing it (parsing was a third of a 4x4 step).

        The reply is the one the general path gives: the same messages, reward and info (a test
        steps thousands of actions through both). A move ``place`` refuses changed nothing, so it
        goes the general way, as does everything else (several calls, other spacing, answers).
        """
        move = self._moves.get(action) if type(action) is str and len(action) == _MOVE_CHARS <= self.max_action_chars else None
        if move is None or self._done:
            return super().step(action)
        before = self._potential() if self._dense else 0.0
        try:
            result = self.place(*move)
        except ToolError:
            return super().step(action)
        messages = [tool(to_json(result), f"call_{self.turn + 1}_0", "place")]
        outcome = self._moved(messages, before) if self._empty else self._end(messages, True, "moves", _FILLED, before, [])
        return self._answered(assistant(action), outcome)

    def place(self, row: int, col: int, digit: int) -> str:
        """Write a digit into a cell that is blank in the puzzle (your own earlier digits may be overwritten).

        Args:
            row: Row number, 1 (top) to the board size.
            col: Column number, 1 (left) to the board size.
            digit: The digit to write, 1 to the board size.
        """
        n = self._n
        if not (1 <= row <= n and 1 <= col <= n):
            raise ToolError(f"row {row}, col {col} is off the board; rows and columns are 1-{n}")
        if not 1 <= digit <= n:
            raise ToolError(f"{digit} is not a digit of this board; use 1-{n}")
        i = (row - 1) * n + (col - 1)
        if self.puzzle[i]:
            raise ToolError(f"row {row}, col {col} holds the given {self.puzzle[i]} and cannot be changed")
        old = self.board[i]
        if old == digit:
            return f"row {row}, col {col} already holds {digit}"
        if not self._masks.replace(i, old, digit):
            raise ToolError(self._conflict(i, digit))
        self.board[i] = digit
        k, text = self._offsets[i], self._text
        self._text = text[:k] + grid.DIGIT_CHARS[digit] + text[k + 1 :]
        sol = self.solution[i]
        self._correct += (digit == sol) - (old == sol)
        self._empty -= not old
        return f"placed {digit} at row {row}, col {col}" + (f" (replacing {old})" if old else "")

    def respond(self, turn: ParsedTurn) -> Outcome:
        dense = self._dense
        before = self._potential() if dense else 0.0  # only dense rewards look at it
        messages, errors = tool_messages(self._toolset, turn)
        if not errors and turn.answer is None and turn.tool_calls and self._empty:  # moves only: most steps
            return self._moved(messages, before)
        rejected = len(errors)
        if turn.answer is not None:
            rows, reason = grid.read_answer(turn.answer, self._n)
            if rows is not None:
                ok, reason = grid.judge_answer(rows, self.puzzle, self._n)
                if not ok:
                    self._correct = grid.correct_blanks(rows, self.puzzle, self.solution)
                return self._end(messages, ok, "answer", reason, before, errors, board="".join(rows))
            errors.append(f"<answer> is not a {self._n}x{self._n} grid: {reason}")
        if self._empty == 0:
            return self._end(messages, True, "moves", _FILLED, before, errors)
        if not turn.tool_calls and turn.answer is None:
            errors.append("no move found: call the place tool or give the full grid after <answer>")
        notes = [f"{rejected} of {len(turn.tool_calls)} moves rejected (see the tool results)."] if rejected else []
        notes += [f"Error: {e}." for e in errors[rejected:]]
        notes.append(f"Board ({self._empty} empty cells left):\n{self._text}")
        messages.append(user("\n".join(notes)))
        return Outcome(messages=messages, reward=self._shaped(before), error="; ".join(errors) or None)

    def _moved(self, messages: list[FrozenDict], before: float) -> Outcome:
        """The reply to a turn of accepted moves that leaves cells empty: the board as it is now."""
        messages.append(user(f"Board ({self._empty} empty cells left):\n{self._text}"))
        return Outcome(messages, self._potential() - before if self._dense else 0.0)

    def verdict(self) -> tuple[bool, Any]:
        return False, self._verification("truncation", f"the turn limit was reached with {self._empty} empty cells")

    def oracle_action(self, *, place: int = 0, compact: bool = False, noise: float = 0.0) -> str:
        """The full solution after ``<answer>``; or, with ``place=k``, ``place`` calls for up to k cells.

        ``compact=True`` writes the answer grid as digits only, one row per line (``1423``), which
        the answer parser accepts as well: a third of the tokens of the drawn board, so a small
        model trained on it has fewer tokens to copy and GRPO fewer to sample.

        ``noise=p`` makes a noisy demonstrator: each blank of the answer grid holds a random digit
        instead of the solution's with probability ``p`` (drawn from the puzzle, so a task always
        gets the same answer); with ``place``, each move's digit is such a guess (drawn from the
        puzzle, the board and the turn, so a rejected guess is not simply repeated). Warm starts
        on such answers learn the format and some solving, and leave reinforcement learning
        something to improve on.

        The calls first correct wrong digits, then fill blanks, taking only cells whose solution
        digit is legal on the current board (so every call succeeds, in order). When no cell
        qualifies (solved, or wrong digits block each other) it answers the grid instead. A
        policy that sends ``oracle_action(place=1)`` every turn solves the board move by move.
        Works at any time after reset, also once the episode has ended.
        """
        if self.task is None:
            raise ResetNeeded("call reset() before oracle_action()")
        todo = sorted((not b, i) for i, (b, s) in enumerate(zip(self.board, self.solution)) if b != s)
        cells = [i for _, i in todo if self._placeable(i)][: max(place, 0)]
        n = self._n
        if not cells:
            digits = self._noisy_solution(noise) if noise > 0 else self.solution
            if compact:
                board = "\n".join(grid.to_string(digits[r * n : (r + 1) * n]) for r in range(n))
            else:
                board = grid.format_board(digits, n)
            return f"<answer>\n{board}\n</answer>"
        digits = self._noisy_moves(cells, noise) if noise > 0 else [self.solution[i] for i in cells]
        return "".join(MOVE % (i // n + 1, i % n + 1, d) for i, d in zip(cells, digits))

    def _noisy_moves(self, cells: list[int], noise: float) -> list[int]:
        """The solution's digits of ``cells``, each a random digit with probability ``noise``;
        the generator is seeded by the puzzle, the board and the turn (a function of the state)."""
        rng = np.random.default_rng([*self.puzzle, *self.board, self.turn])
        return [self.solution[i] if rng.random() >= noise else int(rng.integers(1, self._n + 1)) for i in cells]

    def _noisy_solution(self, noise: float) -> list[int]:
        """The solution with each blank replaced by a random digit with probability ``noise``;
        the generator is seeded by the puzzle, so the answer is a function of the task."""
        rng = np.random.default_rng(list(self.puzzle))
        return [s if given or rng.random() >= noise else int(rng.integers(1, self._n + 1)) for given, s in zip(self.puzzle, self.solution)]

    def _placeable(self, i: int) -> bool:
        """Whether the solution digit of cell ``i`` is legal now (the board never holds a conflict,
        so the cell's own digit is in no peer and may be added back to its candidates)."""
        own = 1 << (self.board[i] - 1) if self.board[i] else 0
        return bool((self._masks.candidates(i) | own) & (1 << (self.solution[i] - 1)))

    def render_text(self) -> str:
        if self.task is None:
            return "(call reset() first)\n"
        state = "over" if self._done else f"turn {self.turn}/{self.max_turns}"
        return f"Sudoku {self._n}x{self._n} · {state} · {self._empty} empty\n{self._text}\n"

    # ----- helpers -----

    def _conflict(self, i: int, digit: int) -> str:
        where = grid.cell_name(self._n, i)
        for kind, unit in enumerate(self._geo.units[i]):
            for j in unit:
                if j != i and self.board[j] == digit:
                    other = grid.cell_name(self._n, j)
                    return f"{digit} at {where} conflicts with the {digit} at {other} (same {self._geo.unit_name(kind)})"
        raise AssertionError("unreachable: a masked-out digit is always in a peer cell")

    def _potential(self) -> float:
        return 1.0 if self._correct == self._blank_count else self._correct / self._blank_count

    def _shaped(self, before: float) -> float:
        return self._potential() - before if self._dense else 0.0

    def _verification(self, by: str, reason: str, board: str | None = None) -> dict[str, Any]:
        """The verdict, with the grids (``N*N`` characters, ``.`` blank) it was reached on: the
        ``puzzle``, the final ``board`` (an answered grid as written) and the ``solution``."""
        return {
            "by": by,
            "reason": reason,
            "correct": self._correct,
            "blanks": self._blank_count,
            "puzzle": grid.to_string(self.puzzle),
            "board": board if board is not None else grid.to_string(self.board),
            "solution": grid.to_string(self.solution),
        }

    def _end(self, messages: list, ok: bool, by: str, reason: str, before: float, errors: list[str], board: str | None = None) -> Outcome:
        """Finish the episode: the verdict message, the terminal reward and the verification."""
        if ok:  # an accepted <answer> grid becomes the board, so the last message shows the solution
            self._correct = self._blank_count
            if self.board != self.solution:  # not so after moves, unless they solved a pinned puzzle another way
                self.board = list(self.solution)
                self._text = grid.format_board(self.solution, self._n, self._compact_board)
                self._masks = Masks(self._geo, self.board)
                self._empty = 0
        reward = self._shaped(before) if self._dense else float(ok)
        verdict = "Solved!" if ok else f"Not solved: {reason}."
        messages.append(user(f"{verdict} The episode is over.\n{self._text}"))
        return Outcome(
            messages=messages,
            reward=reward,
            terminated=True,
            success=ok,
            verification=self._verification(by, reason, None if ok else board),
            error="; ".join(errors) or None,
        )


@cache
def _moves(n: int) -> dict[str, tuple[int, int, int]]:
    """Every on-board move of an ``n x n`` board as :data:`MOVE` writes it, to its ``(row, col, digit)``."""
    return {MOVE % (r, c, d): (r, c, d) for r, c, d in product(range(1, n + 1), repeat=3)}


@cache
def _system_prompt(n: int) -> str:
    """The rules and both action formats for an ``n x n`` board (cached: one string per size)."""
    br, bc = BOX_SHAPES[n]
    example = grid.format_board([0] * (n * n), n).replace(".", "d")
    call = MOVE % (1, 2, 3)
    return (
        f"You are solving a {n}x{n} Sudoku. Fill every empty cell ('.') with a digit 1-{n} so that each row, "
        f"each column and each {br}x{bc} box (outlined by the box lines) contains every digit 1-{n} exactly "
        f"once. Given digits cannot be changed. Rows are numbered 1-{n} from the top, columns 1-{n} from the "
        "left.\n\n"
        "You can act in two ways.\n"
        "1. Place digits with the place tool, one call per cell, as many calls per turn as you like. They are "
        "applied in order and the board is shown after each turn. Illegal moves (off the board, on a given "
        f"cell, a digit outside 1-{n}, or a digit already in the same row, column or box) are rejected with a "
        "reason and leave the board unchanged. You may overwrite a digit you placed earlier. Write each call "
        f"as\n{call}\nFilling the last empty cell solves the puzzle.\n"
        "2. Give the whole solved grid at once after <answer>, one row per line (spaces, |, - and + are "
        "ignored, so you may copy the board and fill it in), for example\n"
        f"<answer>\n{example}\n</answer>\n"
        "with each d a digit. An answer grid ends the episode; it scores only if it is the solution."
    )
