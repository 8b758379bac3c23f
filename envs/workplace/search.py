"""A world's rows kept in Python in each search's order, and their words, for the search tools.

A search word matches a row when it appears, ignoring ASCII case, in one of the table's
``search`` columns: ``col LIKE '%word%'`` per column, which SQLite answers by decoding every
character of the table (~150 us for the default world's 320 emails). A world's rows
never change, so a :class:`WordIndex` holds them in the table's search order, folds their
searched text once per world and notes which rows hold each 3-byte sequence: a word's
candidates are the rows holding all of its sequences, and a substring test decides. A page of
untouched rows is read from here, not from SQL. A session reads back only the rows that it
wrote, folds them alike and puts them in order (:class:`SessionRows`). Nothing is
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
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from textgym.envs.workplace import schema as S
from textgym.tools import to_json

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
        self.encoded: list[str] = [to_json(r) for r in self.records]  # position -> the row's JSON text
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


class Where(Protocol):
    """What :meth:`SessionRows.read` needs of a search's filter (``tools.records.SearchFilter``)."""

    indexed: bool  # the words are in ``keys``, to find in the index
    keys: list[bytes]
    conds: list[str]  # the other conditions, SQL
    params: list[Any]
    narrowed: bool  # without the index: find the matches once (words, an end time), then page them
    sql: str  # " WHERE ..." of ``conds`` (or "")


class SessionRows:
    """The rows a session's searches read: the world's index while it describes the database, else SQL.

    It also keeps what the session's writes touched (``touched``, which the verifier reads too):
    the index describes the database as long as every change was one of those writes.

    Args:
        db: The session's database.
        words: The word index of the world that ``db`` is a copy of (``World.words``), or None:
            then SQL does all.
    """

    def __init__(self, db: sqlite3.Connection, words: dict[str, WordIndex] | None):
        self.db = db
        self.words = words
        self.touched: dict[str, set[str]] = {}
        self._changes = db.total_changes  # rows changed so far; any other count means a write not ours
        self._overlays: dict[str, tuple] = {}  # see _overlay

    def clear(self) -> None:
        """Forget the touched rows (after the database was restored)."""
        self.touched = {}
        self._changes = self.db.total_changes
        self._overlays = {}

    def restore(self, touched: dict[str, set[str]], indexed: bool) -> None:
        """Take over what another session had touched, after its database was restored here;
        ``indexed=False`` when the index no longer described it (a write not noted)."""
        self.clear()
        self.touched = touched
        if not indexed:
            self._changes = -1  # never equals a change count: SQL answers every search

    def touch(self, table: S.Table, row_id: str | None) -> None:
        """Note a write into ``table`` (of the row ``row_id``), just made."""
        ids = self.touched.setdefault(table.name, set())
        if row_id is not None:
            ids.add(row_id)
        self._changes = self.db.total_changes
        self._overlays.pop(table.name, None)

    def indexed(self) -> bool:
        """Whether the world's index (and its counts) describe the database: a world was given,
        and no row changed but by the writes noted here."""
        return self.words is not None and self.db.total_changes == self._changes

    def _overlay(self, table: S.Table) -> tuple[dict[int, tuple], set[int], list[int]]:
        """The rows this session wrote into ``table`` (rowid -> row), the index positions that they
        replace, and the positions of the other rows; read once after each write."""
        if table.name not in self._overlays:
            index, touched = self.words[table.name], self.touched[table.name]
            marks = ", ".join("?" * len(touched))
            sql = f'SELECT rowid, {table.select_list} FROM "{table.name}" WHERE "{table.id_column}" IN ({marks})'
            written = {r[0]: r[1:] for r in self.db.execute(sql, list(touched))}
            skip = {index.position[i] for i in touched if i in index.position}
            self._overlays[table.name] = written, skip, [p for p in range(len(index.records)) if p not in skip]
        return self._overlays[table.name]

    def read(self, table: S.Table, where: Where, offset: int, limit: int | None) -> tuple[int, list[dict[str, Any]], list[str] | None]:
        """The number of matches, the matches ``offset`` to ``offset + limit`` (all without a
        limit) in order, and their JSON texts where the rows came from the index (else None)."""
        end = None if limit is None else offset + limit
        if where.indexed:
            return self._from_index(table, where, offset, end)
        cond, params = where.sql, where.params
        if not where.narrowed:  # the page walks the index in the table's order and stops after LIMIT rows
            (total,) = self.db.execute(f'SELECT count(*) FROM "{table.name}"{cond}', params).fetchone()
            sql = f'SELECT {table.select_list} FROM "{table.name}"{cond} ORDER BY {table.order} LIMIT ? OFFSET ?'
            page = [*params, -1 if end is None else end - offset, offset]
            rows = self.db.execute(sql, page).fetchall() if total > offset else []
            return total, [dict(zip(table.names, r)) for r in rows], None
        # The matches found once, their rowids in order; then the page's rows. "+column" keeps
        # SQLite from walking the order's index past every non-match: the matches (a LIKE scan,
        # or by the index on the event end) come first and are sorted (few).
        by = ", ".join("+" + term.strip() for term in table.order.split(","))
        ids = [i for (i,) in self.db.execute(f'SELECT rowid FROM "{table.name}"{cond} ORDER BY {by}', params)]
        total, ids = len(ids), ids[offset:end]
        sql = f'SELECT rowid, {table.select_list} FROM "{table.name}" WHERE rowid IN ({", ".join("?" * len(ids))})'
        found = {r[0]: r[1:] for r in self.db.execute(sql, ids)} if ids else {}
        return total, [dict(zip(table.names, found[i])) for i in ids], None

    def _from_index(self, table: S.Table, where: Where, offset: int, end: int | None) -> tuple[int, list[dict[str, Any]], list[str]]:
        """:meth:`read` from the world's index: its rows as built, and the rows this session wrote.

        The index holds the untouched rows in order and finds the words; SQL only tells which
        rows pass the other filters (one string of rowids: a returned row costs more than a
        filter); the rows this session wrote are read back and put in order among the others.
        """
        index = self.words[table.name]
        positions = index.matching(where.keys) if where.keys else range(len(index.records))
        written: dict[int, tuple] = {}  # rowid -> row, of the rows this session wrote that hold the words
        if self.touched.get(table.name):
            written, skip, untouched = self._overlay(table)
            if where.keys:
                positions = [p for p in positions if p not in skip]
                written = {i: row for i, row in written.items() if index.holds(row, where.keys)}
            else:
                positions = untouched
        if where.conds:
            cond, params = where.sql, where.params
            if where.keys:  # only the words' matches, as many marks as the next power of two (the
                # last repeated): a few statements to prepare, not one per count (json_each would
                # be one, but a statement holding it crashed SQLite 3.40 after the next deserialize)
                ids = [index.rowids[p] for p in positions] + list(written)
                if not ids:
                    return 0, [], []
                ids += ids[-1:] * ((1 << (len(ids) - 1).bit_length()) - len(ids))
                cond = " WHERE " + " AND ".join([f"rowid IN ({', '.join('?' * len(ids))})", *where.conds])
                params = [*ids, *params]
            (found,) = self.db.execute(f'SELECT group_concat(rowid) FROM "{table.name}"{cond}', params).fetchone()
            passing = set(map(int, found.split(","))) if found else set()
            positions = sorted(index.at[i] for i in passing if i not in written and i in index.at)
            written = {i: row for i, row in written.items() if i in passing}
        order: list[int | tuple] = [*positions]  # positions in the index, and written rows
        for row in sorted(written.values(), key=index.key, reverse=True):  # the largest first: later ones go before
            order.insert(bisect_left(positions, index.key(row), key=index.keys.__getitem__), row)
        # A copy of the world's record (a fresh dict per call) costs a third of building one; its
        # JSON text was made with the index, a written row's is made here.
        rows, texts = [], []
        for p in order[offset:end]:
            if isinstance(p, int):
                rows.append(dict(index.records[p]))
                texts.append(index.encoded[p])
            else:
                rows.append(dict(zip(table.names, p)))
                texts.append(to_json(rows[-1]))
        return len(order), rows, texts


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
