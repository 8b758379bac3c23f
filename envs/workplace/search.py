"""A world's rows kept in Python in each search's order, and their words, for the search tools.

A search word matches a row when it appears, ignoring ASCII case, in one of the table's
``search`` columns: ``col LIKE '%word%'`` per column, which SQLite answers by decoding every
character of the table (~150 us for the default world's 320 emails, issue 14). A world's rows
never change, so a :class:`WordIndex` holds them in the table's search order, folds their
searched text once per world and notes which rows hold each 3-byte sequence: a word's
candidates are the rows holding all of its sequences, and a substring test decides. A page of
untouched rows is read from here, not from SQL. A session reads back only the rows that it
wrote, folds them alike and puts them in order (``WorkplaceTools._indexed_rows``). Nothing is
built per reset.

Why this equals ``LIKE`` (tests/envs/test_workplace_search.py checks it against the statements):
``LIKE`` folds ASCII letters only, as ``bytes.lower`` does on UTF-8, and a UTF-8 needle can only
match at character boundaries; ``LIKE`` reads a value up to its first NUL, so the text is cut
there; a word holds no whitespace, so it cannot match across the newline that joins two
columns. Words that ``LIKE`` may treat otherwise (a NUL, a lone surrogate, over
:data:`MAX_WORD` characters, near SQLite's pattern limit) stay ``LIKE`` conditions.
"""

from __future__ import annotations

import sqlite3
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
    """One table's rows and searched text in a pristine world, in the table's search order.

    Args:
        db: The world's database, as built.
        table: A table with ``search`` columns and an ``order``.
    """

    def __init__(self, db: sqlite3.Connection, table: S.Table):
        ident = f'"{table.id_column}"' if table.id_column else "NULL"
        rows = db.execute(f'SELECT rowid, {ident}, {table.select_list} FROM "{table.name}" ORDER BY {table.order}').fetchall()
        self.rowids: list[int] = [r[0] for r in rows]  # position -> rowid
        self.position: dict[str, int] = {r[1]: i for i, r in enumerate(rows) if r[1] is not None}  # id -> position
        columns = [r[2:] for r in rows]  # the row's columns, as the tools select them
        self.records: list[dict] = [dict(zip(table.names, r)) for r in columns]  # position -> the row, to copy
        self.at: dict[int, int] = {r: i for i, r in enumerate(self.rowids)}  # rowid -> position
        self.searched = [table.names.index(c) for c in table.search]
        self.texts: list[bytes] = [fold([r[i] for i in self.searched]) for r in columns]
        terms = [t.split() for t in table.order.split(",")]
        self.order = [(table.names.index(t[0]), t[-1].upper() == "DESC") for t in terms]  # (column, descending)
        self.keys: list[tuple] = [self.key(r) for r in columns]  # position -> its sort key, ascending
        self.grams: dict[bytes, int] = {}  # each 3-byte sequence of the texts -> the rows holding it, as bits
        for p, text in enumerate(self.texts):
            bit = 1 << p
            for gram in {text[i : i + 3] for i in range(len(text) - 2)}:
                self.grams[gram] = self.grams.get(gram, 0) | bit

    def key(self, row: tuple) -> tuple:
        """A row's place in the table's order, as a key that sorts ascending.

        The order's columns hold text (TEXT affinity stores every value the tools and the
        loaders write as text), and Python orders ``str`` as SQLite's BINARY collation does.
        """
        return tuple(_Descending(row[i]) if desc else row[i] for i, desc in self.order)

    def holds(self, row: tuple, keys: Sequence[bytes]) -> bool:
        """Whether a row (as the tools select it) holds every key in its searched columns."""
        text = fold([row[i] for i in self.searched])
        return all(k in text for k in keys)

    def matching(self, keys: Sequence[bytes]) -> list[int]:
        """Positions (ascending) of the rows whose text holds every key.

        The rows holding every 3-byte sequence of the keys are the candidates (a few bit ANDs),
        and a substring test on each candidate decides; keys under 3 bytes test every row.
        """
        mask = (1 << len(self.texts)) - 1
        for k in keys:
            for i in range(len(k) - 2):
                mask &= self.grams.get(k[i : i + 3], 0)
        bits, found, at = format(mask, "b")[::-1], [], 0
        while (at := bits.find("1", at)) != -1:
            found.append(at)
            at += 1
        texts = self.texts
        for k in keys:  # a 3-byte key is its own sequence: its candidates hold it
            if len(k) != 3:
                found = [p for p in found if k in texts[p]]
        return found


class _Descending:
    """A value that sorts in reverse, for the ``DESC`` terms of an order."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __lt__(self, other: _Descending) -> bool:
        return other.value < self.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and other.value == self.value


def build(db: sqlite3.Connection) -> dict[str, WordIndex]:
    """The word index of every searchable table of a world database."""
    return {t.name: WordIndex(db, t) for t in S.TABLES if t.search}
