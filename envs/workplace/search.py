"""The words of a search, found in Python in a world's pristine rows instead of by a ``LIKE`` scan.

A search word matches a row when it appears, ignoring ASCII case, in one of the table's
``search`` columns: ``col LIKE '%word%'`` per column, which SQLite answers by decoding every
character of the table (~150 us for the default world's 320 emails, issue 14). A world's rows
never change, so a :class:`WordIndex` folds and joins their searched text once per world, and a
word is found by ``bytes.find`` in C; a session reads back only the rows that it wrote and folds
them alike (``WorkplaceTools._matches``). Nothing is built per reset.

Why this equals ``LIKE`` (tests/envs/test_workplace_search.py checks it against the statements):
``LIKE`` folds ASCII letters only, as ``bytes.lower`` does on UTF-8, and a UTF-8 needle can only
match at character boundaries; ``LIKE`` reads a value up to its first NUL, so the text is cut
there; a word holds no whitespace, so it cannot match across the newline that joins two columns
or the NUL that ends a row. Words that ``LIKE`` may treat otherwise (a NUL, a lone surrogate,
over :data:`MAX_WORD` characters, near SQLite's pattern limit) stay ``LIKE`` conditions.
"""

from __future__ import annotations

import sqlite3
from bisect import bisect_right
from collections.abc import Iterable, Sequence

from textgym.envs.workplace import schema as S

MAX_WORD = 1000  # characters; SQLite refuses LIKE patterns past 50,000 bytes, so long words go to SQL


def key(word: str) -> bytes | None:
    """The folded bytes to look for, or None when ``LIKE`` must decide about this word."""
    if "\x00" in word or len(word) > MAX_WORD:
        return None
    try:
        return word.encode().lower()
    except UnicodeEncodeError:  # a lone surrogate: SQLite's binding raises, as before
        return None


def fold(values: Iterable[str | None]) -> bytes:
    """A row's searched columns as one folded text, each column cut at its first NUL as ``LIKE`` reads it."""
    return b"\n".join(v.split("\x00", 1)[0].encode().lower() for v in values if v is not None)


class WordIndex:
    """One table's searched text in a pristine world, its rows in the table's search order.

    Args:
        db: The world's database, as built.
        table: A table with ``search`` columns and an ``order``.
    """

    def __init__(self, db: sqlite3.Connection, table: S.Table):
        ident = f'"{table.id_column}"' if table.id_column else "NULL"
        cols = ", ".join(f'"{c}"' for c in table.search)
        rows = db.execute(f'SELECT rowid, {ident}, {cols} FROM "{table.name}" ORDER BY {table.order}').fetchall()
        self.rowids: list[int] = [r[0] for r in rows]  # position -> rowid
        self.position: dict[str, int] = {r[1]: i for i, r in enumerate(rows) if r[1] is not None}  # id -> position
        self.texts: list[bytes] = [fold(r[2:]) for r in rows]
        self.text = b"\x00".join(self.texts) + b"\x00"
        self.starts: list[int] = []  # where each row's text begins in ``text``
        at = 0
        for t in self.texts:
            self.starts.append(at)
            at += len(t) + 1

    def matching(self, keys: Sequence[bytes]) -> set[int]:
        """Positions of the rows whose text holds every key."""
        text, starts, found = self.text, self.starts, set()
        at = text.find(keys[0])
        while at != -1:  # one C search per matching row: skip to the next row after each hit
            row = bisect_right(starts, at) - 1
            found.add(row)
            at = text.find(keys[0], starts[row] + len(self.texts[row]) + 1)
        for k in keys[1:]:
            found = {p for p in found if k in self.texts[p]}
        return found


def build(db: sqlite3.Connection) -> dict[str, WordIndex]:
    """The word index of every searchable table of a world database."""
    return {t.name: WordIndex(db, t) for t in S.TABLES if t.search}
