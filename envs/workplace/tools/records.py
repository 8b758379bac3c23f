"""What every domain's tools share: one session database, its rows by id, and paged searches.

Every write records the table and the id of the row it touched in :attr:`SessionRecords.touched`,
which lets the verifier read only those rows.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from textgym.envs.workplace import schema as S
from textgym.envs.workplace import search
from textgym.envs.workplace.tools.arguments import date_bounds, like_pattern, normalise_id
from textgym.error import ToolError
from textgym.tools import Encoded, ToolResult, Toolset, to_json

if TYPE_CHECKING:
    from textgym.envs.workplace.world import World


class SearchFilter:
    """A search's WHERE clause, built filter by filter, with its parameters in placeholder order.

    Args:
        table: The table searched (its ``search`` columns hold the words).
        indexed: Whether the words may be found in the world's word index (see ``search.py``)
            rather than by ``LIKE`` conditions.
    """

    def __init__(self, table: S.Table | None = None, indexed: bool = False):
        self.table = table
        self.indexed = indexed
        self.conds: list[str] = []
        self.params: list[Any] = []
        self.keys: list[bytes] = []  # the words that the word index finds, folded
        self.narrowed = False  # whether to find the matches once (words, an end time), then page them

    def add(self, cond: str, *params: Any) -> None:
        self.conds.append(cond)
        self.params += params

    def words(self, text: str) -> None:
        """Every word of ``text`` must appear (case-insensitively) in one of the table's ``search`` columns."""
        words = text.split()
        self.narrowed = self.narrowed or bool(words)  # the matches found once, for count and page
        columns = self.table.search
        for word in words:
            key = search.key(word) if self.indexed else None
            if key is not None:
                self.keys.append(key)
            else:
                self.add("(" + " OR ".join(f"{c} LIKE ? ESCAPE '\\'" for c in columns) + ")", *[like_pattern(word)] * len(columns))

    def equal(self, **values: str | None) -> None:
        """Each column given a value must hold it (ignoring case); None leaves the column free."""
        for col, value in values.items():
            if value is not None:
                self.add(f"{col} = ? COLLATE NOCASE", value.strip())

    def dates(self, column: str, lo: str | None, hi: str | None) -> None:
        """``column`` (a date expression) must lie within [lo, hi]; an omitted bound is open."""
        for op, value in zip((">=", "<="), date_bounds(lo, hi)):
            if value:
                self.add(f"{column} {op} ?", value)

    @property
    def sql(self) -> str:
        return " WHERE " + " AND ".join(self.conds) if self.conds else ""


class GuardedToolset(Toolset):
    """A toolset that also turns what SQLite rejects into error results instead of exceptions.

    Schema validation cannot see everything the database refuses: a JSON string may decode to a
    lone surrogate that cannot be encoded as UTF-8. Each statement fails before it changes
    anything, so the call changes nothing, like any other tool error.
    """

    def call(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        try:
            return super().call(name, arguments)
        except (UnicodeEncodeError, OverflowError, sqlite3.Error) as exc:
            message = f"{name}: the database rejected the arguments ({type(exc).__name__}: {exc})"
            return ToolResult(json.dumps({"error": message}), message)


class SessionRecords:
    """The row operations of one session database (swapped on every reset via :attr:`db`).

    Args:
        db: The session's SQLite connection.
        world: The world that ``db`` is a copy of: searches find their words in its word index
            (and in the rows this session wrote), the analytics counts are its own. Without
            it, SQL does all (``LIKE`` per word and column).
    """

    def __init__(self, db: sqlite3.Connection, world: World | None = None):
        self.db = db
        self.world = world
        self.rows = search.SessionRows(db, None if world is None else world.words)

    @property
    def touched(self) -> dict[str, set[str]]:
        """The ids of the rows each table's writes touched (a table without ids: an empty set)."""
        return self.rows.touched

    def clear(self) -> None:
        """Forget the touched rows (after the database was restored)."""
        self.rows.clear()

    def _touch(self, table: S.Table, row_id: str | None) -> None:
        self.rows.touch(table, row_id)

    def _where(self, table: S.Table) -> SearchFilter:
        """A search's filter; its words go to the word index when that describes the database."""
        return SearchFilter(table, self.rows.indexed())

    def _get(self, table: S.Table, row_id: str, field: str | None) -> dict[str, Any]:
        key = table.id_column
        cols = table.select_list
        row = self.db.execute(f'SELECT {cols} FROM "{table.name}" WHERE "{key}" = ?', (normalise_id(row_id),)).fetchone()
        if row is None:
            raise ToolError(f"no {table.name} row with {key} {row_id!r}")
        record = dict(zip(table.names, row))
        return record if field is None else {field: record[field]}

    def _require(self, table: S.Table, row_id: str) -> str:
        key = normalise_id(row_id)
        if self.db.execute(f'SELECT 1 FROM "{table.name}" WHERE "{table.id_column}" = ?', (key,)).fetchone() is None:
            raise ToolError(f"no {table.name} row with {table.id_column} {row_id!r}")
        return key

    def _next_id(self, table: S.Table) -> str:
        key = table.id_column
        (top,) = self.db.execute(f'SELECT max("{key}") FROM "{table.name}"').fetchone()  # uses the primary key
        if top is not None and not top.isdigit():  # foreign, non-numeric ids: scan for the largest number
            (top,) = self.db.execute(f'SELECT max(CAST("{key}" AS INTEGER)) FROM "{table.name}"').fetchone()
        return f"{int(top or 0) + 1:08d}"

    def _insert(self, table: S.Table, values: dict[str, Any]) -> None:
        cols = ", ".join(f'"{c}"' for c in values)
        marks = ", ".join("?" for _ in values)
        self.db.execute(f'INSERT INTO "{table.name}" ({cols}) VALUES ({marks})', tuple(values.values()))
        self._touch(table, values.get(table.id_column))

    def _create(self, table: S.Table, values: dict[str, Any]) -> str:
        """Inserts a row under the next free id and returns that id."""
        row_id = self._next_id(table)
        self._insert(table, {table.id_column: row_id, **values})
        return row_id

    def _delete(self, table: S.Table, row_id: str) -> str:
        key = self._require(table, row_id)
        self.db.execute(f'DELETE FROM "{table.name}" WHERE "{table.id_column}" = ?', (key,))
        self._touch(table, key)
        return key

    def _update(self, table: S.Table, row_id: str, field: str, value: Any) -> dict[str, Any]:
        key = self._require(table, row_id)
        self.db.execute(f'UPDATE "{table.name}" SET "{field}" = ? WHERE "{table.id_column}" = ?', (value, key))
        self._touch(table, key)
        return {"status": "updated", table.id_column: key, "field": field, "new_value": value}

    def _page(self, table: S.Table, where: SearchFilter, page: int, page_size: int, label: str):
        total, rows, texts = self.rows.read(table, where, (page - 1) * page_size, page_size)
        counts = {"page": page, "page_size": page_size, "total": total, "total_pages": max(1, math.ceil(total / page_size))}
        result = {label: rows, **counts}
        if texts is None:
            return result
        # The rows' texts joined as the encoder joins a list; the counts encoded as they are.
        return Encoded(result, "{" + to_json(label) + ": [" + ", ".join(texts) + "], " + to_json(counts)[1:])
