"""Bitmask Sudoku solving and seeded generation of unique-solution puzzles.

A board is a flat list of ``size * size`` ints, row-major, ``0`` for a blank. Each row, column
and box keeps a bitmask of the digits it already holds (bit ``d - 1`` for digit ``d``), so the
candidates of a cell are one ``&~(row | col | box)``. The search always branches on the blank
with the fewest candidates, which solves and counts 9x9 puzzles in well under a millisecond in
pure Python.

Generation fills a random grid, then blanks cells in a random order and keeps a blank only if
the puzzle stays unique. Most blanks are proven safe by a naked or hidden single in O(size); the
rest by searching for a solution with a different digit in that cell (none may exist). This is
what makes a 9x9 reset with ~50 blanks take milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

BOX_SHAPES = {4: (2, 2), 6: (2, 3), 9: (3, 3)}
"""Box height and width for each supported size (6x6 boxes are 2 rows by 3 columns)."""


@dataclass(frozen=True)
class Geometry:
    """Index tables for one board size: which row, column and box each cell belongs to."""

    size: int
    box_rows: int
    box_cols: int
    row: tuple[int, ...]
    col: tuple[int, ...]
    box: tuple[int, ...]
    units: tuple[tuple[tuple[int, ...], ...], ...]  # per cell: (row cells, col cells, box cells)
    full: int  # mask of every digit
    popcount: tuple[int, ...]  # popcount[mask]

    @property
    def cells(self) -> int:
        return self.size * self.size

    def unit_name(self, kind: int) -> str:
        return ("row", "column", "box")[kind]


@cache
def geometry(size: int) -> Geometry:
    """The (cached) index tables for ``size`` in ``BOX_SHAPES``."""
    if size not in BOX_SHAPES:
        raise ValueError(f"size must be one of {sorted(BOX_SHAPES)}, got {size!r}")
    br, bc = BOX_SHAPES[size]
    n = size * size
    row = tuple(i // size for i in range(n))
    col = tuple(i % size for i in range(n))
    box = tuple((row[i] // br) * (size // bc) + col[i] // bc for i in range(n))
    members = [[[i for i in range(n) if table[i] == k] for k in range(size)] for table in (row, col, box)]
    units = tuple(tuple(tuple(members[kind][table[i]]) for kind, table in enumerate((row, col, box))) for i in range(n))
    full = (1 << size) - 1
    popcount = tuple(bin(m).count("1") for m in range(full + 1))
    return Geometry(size, br, bc, row, col, box, units, full, popcount)


class Masks:
    """Digits used per row, column and box for a board; updated in place by ``set``/``clear``."""

    __slots__ = ("geo", "rows", "cols", "boxes")

    def __init__(self, geo: Geometry, cells: Sequence[int]):
        self.geo = geo
        self.rows = [0] * geo.size
        self.cols = [0] * geo.size
        self.boxes = [0] * geo.size
        for i, d in enumerate(cells):
            if d:
                self.set(i, d)

    def candidates(self, i: int) -> int:
        g = self.geo
        return g.full & ~(self.rows[g.row[i]] | self.cols[g.col[i]] | self.boxes[g.box[i]])

    def set(self, i: int, d: int) -> None:
        bit = 1 << (d - 1)
        g = self.geo
        self.rows[g.row[i]] |= bit
        self.cols[g.col[i]] |= bit
        self.boxes[g.box[i]] |= bit

    def clear(self, i: int, d: int) -> None:
        bit = ~(1 << (d - 1))
        g = self.geo
        self.rows[g.row[i]] &= bit
        self.cols[g.col[i]] &= bit
        self.boxes[g.box[i]] &= bit

    def replace(self, i: int, old: int, new: int) -> bool:
        """Put digit ``new`` into cell ``i`` in place of ``old`` (0 for blank, never ``new``) unless
        a peer holds it; whether it did. One call per move, where clear/candidates/set are three.

        The board this tracks never holds a conflict, so ``old``'s bit in the cell's units is the
        cell's own and ``new``'s bit, if set, a peer's.
        """
        g = self.geo
        r, c, b = g.row[i], g.col[i], g.box[i]
        rows, cols, boxes = self.rows, self.cols, self.boxes
        bit = 1 << (new - 1)
        if (rows[r] | cols[c] | boxes[b]) & bit:
            return False
        keep = ~(1 << (old - 1)) if old else -1
        rows[r] = rows[r] & keep | bit
        cols[c] = cols[c] & keep | bit
        boxes[b] = boxes[b] & keep | bit
        return True


def first_conflict(cells: Sequence[int], size: int) -> tuple[int, int, int, int] | None:
    """The first repeated digit as ``(digit, unit kind 0/1/2, first cell, second cell)``, or None."""
    geo = geometry(size)
    for kind in range(3):
        for k in range(size):
            seen: dict[int, int] = {}
            for i in geo.units[_first_cell(geo, kind, k)][kind]:
                d = cells[i]
                if d:
                    if d in seen:
                        return d, kind, seen[d], i
                    seen[d] = i
    return None


def _first_cell(geo: Geometry, kind: int, k: int) -> int:
    """Any cell of row/column/box ``k`` (used to look up the unit's member list)."""
    table = (geo.row, geo.col, geo.box)[kind]
    return table.index(k)


class SearchBudgetExceeded(Exception):
    """The search visited its budget of boards without deciding."""


def count_solutions(cells: Sequence[int], size: int, limit: int = 2, budget: int | None = None) -> tuple[int, list[int] | None]:
    """Count solutions up to ``limit``; also return the first one found (None when there is none).

    The givens must not conflict (check with :func:`first_conflict` first). ``budget`` caps the
    boards the search visits (a puzzle from outside can be built to take minutes: no conflicting
    givens, no solution, few constraints); past it, :class:`SearchBudgetExceeded`.
    """
    geo = geometry(size)
    board = list(cells)
    masks = Masks(geo, board)
    blanks = [i for i, d in enumerate(board) if not d]
    found: list[list[int]] = []
    _search(geo, board, masks, blanks, limit, found, order=None, budget=None if budget is None else [budget])
    return len(found), (found[0] if found else None)


def _search(
    geo: Geometry,
    board: list[int],
    masks: Masks,
    blanks: list[int],
    limit: int,
    found: list[list[int]],
    order: list[list[int]] | None,
    budget: list[int] | None = None,
) -> None:
    """Depth-first search on the most constrained blank; appends complete boards to ``found``.

    ``order[i]`` optionally gives the digit order to try in cell ``i`` (for random grids).
    ``board``, ``masks`` and ``blanks`` are restored before returning, unless ``budget`` (boards
    left to visit, one-item list) runs out: then :class:`SearchBudgetExceeded`.
    """
    if budget is not None:
        budget[0] -= 1
        if budget[0] < 0:
            raise SearchBudgetExceeded
    if not blanks:
        found.append(list(board))
        return
    rows, cols, boxes, full, pop = masks.rows, masks.cols, masks.boxes, geo.full, geo.popcount
    R, C, B = geo.row, geo.col, geo.box
    best_pos, best_mask, best_count = -1, 0, geo.size + 1
    for pos, i in enumerate(blanks):
        m = full & ~(rows[R[i]] | cols[C[i]] | boxes[B[i]])
        n = pop[m]
        if n < best_count:
            best_pos, best_mask, best_count = pos, m, n
            if n <= 1:
                break
    if best_count == 0:
        return
    i = blanks[best_pos]
    blanks[best_pos] = blanks[-1]
    blanks.pop()
    r, c, b = R[i], C[i], B[i]
    digits = order[i] if order is not None else range(1, geo.size + 1)
    for d in digits:
        bit = 1 << (d - 1)
        if not best_mask & bit:
            continue
        board[i] = d
        rows[r] |= bit
        cols[c] |= bit
        boxes[b] |= bit
        _search(geo, board, masks, blanks, limit, found, order, budget)
        rows[r] &= ~bit
        cols[c] &= ~bit
        boxes[b] &= ~bit
        board[i] = 0
        if len(found) >= limit:
            break
    blanks.append(i)
    blanks[best_pos], blanks[-1] = blanks[-1], blanks[best_pos]


def random_grid(rng: np.random.Generator, size: int) -> list[int]:
    """A random complete grid: the search tries digits in an order drawn once per cell."""
    geo = geometry(size)
    order = (np.argsort(rng.random((geo.cells, size)), axis=1) + 1).tolist()
    board = [0] * geo.cells
    found: list[list[int]] = []
    _search(geo, board, Masks(geo, board), list(range(geo.cells)), 1, found, order)
    return found[0]


def dig(rng: np.random.Generator, solution: Sequence[int], size: int, blanks: int) -> list[int] | None:
    """Blank ``blanks`` cells of ``solution`` in random order, keeping the solution unique.

    Returns None when every cell was tried and fewer than ``blanks`` could be removed.
    """
    geo = geometry(size)
    puzzle = list(solution)
    masks = Masks(geo, puzzle)
    empty: list[int] = []
    for i in rng.permutation(geo.cells).tolist():
        if len(empty) == blanks:
            return puzzle
        d = puzzle[i]
        puzzle[i] = 0
        masks.clear(i, d)
        if _still_unique(geo, puzzle, masks, empty, i, d):
            empty.append(i)
        else:
            puzzle[i] = d
            masks.set(i, d)
    return puzzle if len(empty) == blanks else None


def _still_unique(geo: Geometry, puzzle: list[int], masks: Masks, empty: list[int], i: int, d: int) -> bool:
    """Whether blanking cell ``i`` (which held ``d`` in the unique solution) keeps it unique.

    It does iff no solution puts another digit in ``i``. Cheap proofs first: ``d`` is the only
    candidate of ``i`` (naked single), or no other blank of a unit of ``i`` can take ``d``
    (hidden single). Otherwise search for a solution with each other candidate in ``i``.
    """
    bit = 1 << (d - 1)
    cands = masks.candidates(i)
    if cands == bit:
        return True
    for unit in geo.units[i]:
        if all(j == i or puzzle[j] or not masks.candidates(j) & bit for j in unit):
            return True
    found: list[list[int]] = []
    for alt in range(1, geo.size + 1):
        if alt == d or not cands & (1 << (alt - 1)):
            continue
        puzzle[i] = alt
        masks.set(i, alt)
        _search(geo, puzzle, masks, empty, 1, found, order=None)
        masks.clear(i, alt)
        puzzle[i] = 0
        if found:
            return False
    return True


def generate(rng: np.random.Generator, size: int, blanks: int, attempts: int = 50) -> tuple[list[int], list[int]]:
    """A ``(puzzle, solution)`` pair with exactly ``blanks`` blanks and a unique solution.

    All randomness comes from ``rng``, so the same generator state gives the same puzzle in any
    process. A fresh grid is drawn when one cannot be dug to ``blanks`` (rare below the
    ``max_blanks`` the env allows).

    Raises:
        ValueError: no grid reached ``blanks`` within ``attempts`` tries.
    """
    for _ in range(attempts):
        solution = random_grid(rng, size)
        puzzle = dig(rng, solution, size, blanks)
        if puzzle is not None:
            return puzzle, solution
    raise ValueError(f"could not make a unique {size}x{size} puzzle with {blanks} blanks in {attempts} tries")
