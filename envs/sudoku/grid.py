"""Sudoku boards as text: pinned puzzle strings, the board the agent sees, and answer grids.

One format goes both ways: the board shown to the agent (digits, ``.`` for blanks, ``|``/``-``/``+``
box lines) is itself a valid answer once its blanks are filled, so a model can copy it back.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from textgym.envs.sudoku.solver import BOX_SHAPES, SearchBudgetExceeded, count_solutions, first_conflict, geometry
from textgym.error import InvalidTask

SIZE_BY_LENGTH = {n * n: n for n in BOX_SHAPES}
BLANK_CHARS = ".0"
DIGIT_CHARS = ".123456789"  # DIGIT_CHARS[d] draws cell value d (0 = blank)
IGNORED = str.maketrans("", "", " \t\r|-+")
PINNED_SEARCH_BUDGET = 100_000  # boards a pinned puzzle's search may visit (under a second; the hardest known 9x9 need ~30,000)
_DIGIT_BYTES = bytes.maketrans(bytes(range(10)), DIGIT_CHARS.encode())


def parse_puzzle(puzzle: object) -> tuple[int, list[int]]:
    """Read a pinned puzzle string (``size * size`` chars, ``.`` or ``0`` for blanks).

    Returns:
        ``(size, cells)`` with the size inferred from the length.

    Raises:
        InvalidTask: (a ValueError) with a one-line reason: not a string, bad length, bad
            characters or conflicting givens.
    """
    if not isinstance(puzzle, str):
        raise InvalidTask(f"puzzle must be a string of 16, 36 or 81 characters, got {type(puzzle).__name__}")
    size = SIZE_BY_LENGTH.get(len(puzzle))
    if size is None:
        raise InvalidTask(f"puzzle has {len(puzzle)} characters; expected 16 (4x4), 36 (6x6) or 81 (9x9)")
    cells = []
    for pos, ch in enumerate(puzzle):
        if ch in BLANK_CHARS:
            cells.append(0)
        elif ch.isascii() and ch.isdigit() and 1 <= int(ch) <= size:
            cells.append(int(ch))
        else:
            raise InvalidTask(f"puzzle character {pos + 1} is {ch!r}; a {size}x{size} puzzle uses 1-{size} and '.' or '0' for blanks")
    conflict = first_conflict(cells, size)
    if conflict is not None:
        d, kind, a, b = conflict
        geo = geometry(size)
        raise InvalidTask(
            f"givens conflict: {d} appears twice in {geo.unit_name(kind)} {_unit_number(size, kind, a)} "
            f"(at {cell_name(size, a)} and {cell_name(size, b)})"
        )
    return size, cells


def solve_pinned(cells: Sequence[int], size: int) -> tuple[list[int], bool]:
    """The first solution of a pinned puzzle and whether it is the only one.

    The search has a budget (:data:`PINNED_SEARCH_BUDGET` boards, under a second): a pinned
    puzzle comes from outside, and one built to be slow must not hold the env (or a server).

    Raises:
        InvalidTask: the puzzle has no solution, or the budget ran out before deciding.
    """
    try:
        count, solution = count_solutions(cells, size, limit=2, budget=PINNED_SEARCH_BUDGET)
    except SearchBudgetExceeded:
        raise InvalidTask(
            f"the puzzle could not be solved within the search budget ({PINNED_SEARCH_BUDGET} boards); pin a better-constrained puzzle"
        ) from None
    if solution is None:
        raise InvalidTask("the puzzle has no solution")
    return solution, count == 1


def to_string(cells: Sequence[int]) -> str:
    """The compact one-line form used in task records (``.`` for blanks).

    Byte translation: several times faster than joining characters, and every verdict draws
    three grids.

    >>> to_string([1, 0, 3, 9])
    '1.39'
    """
    return bytes(cells).translate(_DIGIT_BYTES).decode()


def from_string(text: str) -> list[int]:
    return [0 if ch in BLANK_CHARS else int(ch) for ch in text]


def cell_name(size: int, i: int) -> str:
    return f"row {i // size + 1}, col {i % size + 1}"


def _unit_number(size: int, kind: int, i: int) -> int:
    geo = geometry(size)
    return (geo.row, geo.col, geo.box)[kind][i] + 1


def format_board(cells: Sequence[int], size: int, compact: bool = False) -> str:
    """The board as the agent sees it: box lines, digits and ``.`` for blanks (``compact``: the
    digits and ``.`` only, one row per line, a fifth of the characters at 4x4).

    >>> print(format_board([1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1], 4))
    +-----+-----+
    | 1 . | . . |
    | . . | 1 . |
    +-----+-----+
    | . 1 | . . |
    | . . | . 1 |
    +-----+-----+
    """
    return board_format(size, compact) % tuple(map(DIGIT_CHARS.__getitem__, cells))


@cache
def cell_offsets(size: int, compact: bool = False) -> tuple[int, ...]:
    """Where each cell's character stands in :func:`format_board`'s text, so that a move redraws
    the board by replacing one character instead of formatting every cell.

    >>> text = format_board([0] * 16, 4)
    >>> [text[k] for k in cell_offsets(4)] == ["."] * 16
    True
    """
    template = board_format(size, compact)
    starts = [k for k in range(len(template)) if template.startswith("%s", k)]
    return tuple(k - cell for cell, k in enumerate(starts))  # each earlier "%s" drew one character


@cache
def board_format(size: int, compact: bool = False) -> str:
    """A ``%``-template with one ``%s`` per cell (the board drawn at reset)."""
    if compact:
        return "\n".join(["%s" * size] * size)
    br, bc = BOX_SHAPES[size]
    rule = "+" + "+".join(["-" * (2 * bc + 1)] * (size // bc)) + "+"
    row = "| " + " | ".join([" ".join(["%s"] * bc)] * (size // bc)) + " |"
    lines = [rule]
    for r in range(size):
        lines.append(row)
        if (r + 1) % br == 0:
            lines.append(rule)
    return "\n".join(lines)


def read_answer(text: str, size: int) -> tuple[list[str] | None, str | None]:
    """Split an answer into ``size`` rows of ``size`` characters, ignoring spaces and ``|-+``.

    Returns:
        ``(rows, None)`` when the text has the grid's shape, else ``(None, reason)``. Whether the
        characters are the right digits is for :func:`judge_answer`.
    """
    rows = [line.translate(IGNORED) for line in text.splitlines()]
    rows = [row for row in rows if row]
    if len(rows) == 1 and len(rows[0]) == size * size:
        rows = [rows[0][k : k + size] for k in range(0, size * size, size)]
    if len(rows) != size:
        return None, f"the answer has {len(rows)} non-empty rows; expected {size} rows of {size} digits"
    for r, row in enumerate(rows):
        if len(row) != size:
            return None, f"answer row {r + 1} has {len(row)} cells ({row[:20]!r}); expected {size} digits"
    return rows, None


def correct_blanks(rows: Sequence[str], puzzle: Sequence[int], solution: Sequence[int]) -> int:
    """How many blank cells an answer grid fills with the solution's digit; 0 if it alters a given
    (such a grid answers another puzzle). The partial credit of a wrong answer under dense reward."""
    cells = "".join(rows)
    if any(given and cells[i] != str(given) for i, given in enumerate(puzzle)):
        return 0
    return sum(1 for i, given in enumerate(puzzle) if not given and cells[i] == str(solution[i]))


def judge_answer(rows: Sequence[str], puzzle: Sequence[int], size: int) -> tuple[bool, str]:
    """Whether a ``size``-row answer solves ``puzzle``: digits only, givens kept, no repeats.

    A grid that keeps every given and repeats no digit in a row, column or box is a solution;
    for a unique puzzle that is *the* solution.
    """
    cells = []
    for r, row in enumerate(rows):
        for c, ch in enumerate(row):
            if not (ch.isascii() and ch.isdigit() and 1 <= int(ch) <= size):
                return False, f"row {r + 1}, col {c + 1} is {ch!r}, not a digit 1-{size}"
            cells.append(int(ch))
    for i, (given, d) in enumerate(zip(puzzle, cells)):
        if given and given != d:
            return False, f"{cell_name(size, i)} is {d} but the given there is {given}"
    conflict = first_conflict(cells, size)
    if conflict is not None:
        d, kind, a, _ = conflict
        return False, f"{d} appears twice in {geometry(size).unit_name(kind)} {_unit_number(size, kind, a)}"
    return True, "the grid keeps every given and each row, column and box holds each digit once"
