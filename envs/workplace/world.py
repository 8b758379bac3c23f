"""The world: a template SQLite database that every session clones in microseconds.

A :class:`World` is built once per process per ``(world_seed, data_dir)`` (from the synthetic
generator or from a directory of WorkBench CSV tables) and kept as the serialised image of an
in-memory database. A session is a connection into which that image is ``deserialize``-d, which
copies one buffer (~25 us) instead of replaying inserts or running ``backup`` (~5x slower), so a
reset costs far below a millisecond and sessions share nothing.

The world also keeps its rows as plain dicts for the task generator, which reads parameters and
ground truth from them without touching SQL, and the searched text of its rows, folded once for
every session's word searches (:mod:`~textgym.envs.workplace.search`).
"""

from __future__ import annotations

import csv
import functools
import hashlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from textgym.envs.workplace import schema as S
from textgym.envs.workplace.search import WordIndex, build
from textgym.envs.workplace.synth import synthesize
from textgym.envs.workplace.visits import Visits

# File names in the WorkBench repository (data/processed, data/raw), then our own table names.
CSV_NAMES: dict[str, tuple[str, ...]] = {
    "emails": ("emails.csv",),
    "calendar": ("calendar_events.csv", "calendar.csv"),
    "analytics": ("analytics_data.csv", "analytics.csv"),
    "plots": ("plots.csv",),
    "project_tasks": ("project_tasks.csv",),
    "customers": ("customer_relationship_manager_data.csv", "customers.csv"),
    "company_directory": ("email_addresses.csv", "company_directory.csv"),
}


CHUNK = 4096
"""Bytes per compared piece of a database image (SQLite's default page size)."""
SCHEMA_SQL = "SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master ORDER BY type, name"
"""The schema of a database; a session's writes never change it (nor where its b-trees start)."""
CHECKED_KEPT = 256
"""Database deltas remembered per world as having passed :meth:`World.check_image`."""


class World:
    """A company's databases as a template image plus read-only rows for task generation.

    Args:
        tables: Rows per table name, each a tuple in the column order of ``schema.TABLES``.
        name: A short label for the world (``"synthetic-0"``, a directory path).
    """

    def __init__(self, tables: dict[str, list[tuple]], name: str):
        self.name = name
        db = sqlite3.connect(":memory:")
        for table in S.TABLES:
            db.execute(table.ddl())
            rows = tables.get(table.name, [])
            marks = ", ".join("?" for _ in table.columns)
            db.executemany(f'INSERT INTO "{table.name}" VALUES ({marks})', rows)
            for ddl in table.index_ddl():
                db.execute(ddl)
        db.execute("ANALYZE")  # statistics for the planner, part of the image every session clones
        db.commit()
        self.image: bytes = db.serialize()
        self.schema: list[tuple] = db.execute(SCHEMA_SQL).fetchall()
        self.rows: dict[str, list[dict[str, Any]]] = {
            t.name: [dict(zip(t.names, r)) for r in db.execute(f'SELECT * FROM "{t.name}"')] for t in S.TABLES
        }
        self.words: dict[str, WordIndex] = build(db)  # every session's searches read it (see search.py)
        self.visits = Visits(db)  # the analytics tools' counts (see visits.py)
        db.close()
        self.people: list[tuple[str, str]] = [
            (r["name"], r["email_address"]) for r in self.rows["company_directory"] if r["email_address"] != S.USER_EMAIL
        ]
        self._initial: dict[str, dict[Any, tuple]] = {}
        self._checked: dict[bytes, None] = {}  # digests of deltas whose images passed check_image, oldest first
        self._checked_lock = threading.Lock()

    def connect(self) -> sqlite3.Connection:
        """A new private session database holding a copy of the world."""
        conn = sqlite3.connect(":memory:", check_same_thread=False)
        self.restore(conn)
        return conn

    def restore(self, conn: sqlite3.Connection) -> None:
        """Overwrite a session database with the pristine world (the fast path of reset)."""
        conn.deserialize(self.image)

    def delta(self, image: bytes) -> tuple[list[int], bytes, int]:
        """What a session's database image changed from the world's: the indices of the
        ``CHUNK``-byte chunks that differ, those chunks, and the image's length. A state stores
        these instead of the whole image (a few kilobytes, not ~300)."""
        base = self.image  # bytes slices compare with memcmp (memoryviews compare item by item)
        starts = range(0, len(image), CHUNK)
        changed = [i for i, at in enumerate(starts) if image[at : at + CHUNK] != base[at : at + CHUNK]]
        return changed, b"".join(image[i * CHUNK : (i + 1) * CHUNK] for i in changed), len(image)

    def patch(self, changed: list[int], chunks: bytes, length: int) -> bytes:
        """The image that :meth:`delta` described, rebuilt on the world's.

        Raises:
            ValueError: The chunk indices, the chunks' bytes and the length do not agree (a
                forged state): nothing is built before every size is checked against the bytes given.
        """
        if type(length) is not int or length <= 0 or not isinstance(changed, list) or not all(type(i) is int for i in changed):
            raise ValueError("the database's length or chunk indices are not positive integers")
        count = -(-length // CHUNK)
        if changed != sorted(set(changed)) or (changed and not 0 <= changed[0] <= changed[-1] < count):
            raise ValueError(f"the database's chunk indices are not distinct, in order, and within its {count} chunks")
        extra = count - -(-len(self.image) // CHUNK)  # chunks past the world's image: each must be given
        if extra > 0 and (extra > len(changed) or changed[-extra:] != list(range(count - extra, count))):
            raise ValueError("the database is longer than the world's and its chunks do not fill the rest")
        if len(chunks) != sum(min(CHUNK, length - i * CHUNK) for i in changed):
            raise ValueError(f"the database's chunks hold {len(chunks)} bytes, not what its indices and length say")
        base, new = memoryview(self.image), memoryview(chunks)
        replaced = {i: new[k * CHUNK : (k + 1) * CHUNK] for k, i in enumerate(changed)}
        image = b"".join(replaced.get(i, base[i * CHUNK : min((i + 1) * CHUNK, length)]) for i in range(count))
        if len(image) != length:
            raise ValueError(f"the database's chunks rebuild {len(image)} bytes, not {length}")
        return image

    def rebuild(self, changed: list[int], chunks: bytes, length: int) -> bytes:
        """:meth:`patch`, then :meth:`check_image` unless the image is the world's own or this
        delta passed before (a GRPO group restores one state G times: its check is paid once)."""
        image = self.patch(changed, chunks, length)
        if not changed and length == len(self.image):
            return image
        key = hashlib.sha256(b"%d %r " % (length, changed) + chunks).digest()
        if key not in self._checked:
            self.check_image(image)
            with self._checked_lock:  # served sessions restore on several threads
                if len(self._checked) >= CHECKED_KEPT:
                    self._checked.pop(next(iter(self._checked)))
                self._checked[key] = None
        return image

    def check_image(self, image: bytes) -> None:
        """Refuse a database image a session of this world cannot have written: a schema other
        than the world's own (a trigger, a view, a table or index it does not create) or pages
        that fail SQLite's ``quick_check``. Opened in a scratch connection: no session is touched.

        Raises:
            ValueError: Why the image is refused.
        """
        scratch = sqlite3.connect(":memory:")
        try:
            scratch.deserialize(image)
            if scratch.execute(SCHEMA_SQL).fetchall() != self.schema:
                raise ValueError("the database's schema is not the world's own (a trigger, view, table or index it does not create)")
            problems = scratch.execute("PRAGMA quick_check").fetchall()
            if problems != [("ok",)]:
                raise ValueError(f"the database is corrupt: {problems[0][0]}")
        except sqlite3.Error as exc:
            raise ValueError(f"the database is corrupt: {exc}") from None
        finally:
            scratch.close()

    def initial(self, table: S.Table) -> dict[Any, tuple]:
        """The pristine rows of a table keyed by id (by position without one), compared columns only."""
        if table.name not in self._initial:
            rows = [(r.get(table.id_column, i), tuple(r[c] for c in table.compared)) for i, r in enumerate(self.rows[table.name])]
            self._initial[table.name] = dict(rows)
        return self._initial[table.name]


@functools.lru_cache(maxsize=8)
def synthetic_world(seed: int = 0) -> World:
    """The synthetic company for ``seed`` (cached: every env in a process shares one template)."""
    return World(synthesize(seed), name=f"synthetic-{seed}")


@functools.lru_cache(maxsize=8)
def csv_world(data_dir: str) -> World:
    """A world from a directory of CSV tables in the WorkBench column layout.

    Recognised files: emails.csv (``email_id, inbox/outbox, sender/recipient, subject,
    sent_datetime, body``, or separate ``sender``/``recipient``), calendar_events.csv,
    analytics_data.csv, project_tasks.csv, customer_relationship_manager_data.csv and
    email_addresses.csv (the company directory). Missing tables are empty.
    """
    root = Path(data_dir)
    if not root.is_dir():
        raise ValueError(f"data_dir must be a directory of CSV tables, got {data_dir!r}")
    tables, found = {}, False
    for table in S.TABLES:
        path = next((root / n for n in CSV_NAMES[table.name] if (root / n).is_file()), None)
        if path is None:
            tables[table.name] = []
            continue
        found = True
        with open(path, newline="", encoding="utf-8") as fh:
            tables[table.name] = [_row(table, rec) for rec in csv.DictReader(fh)]
    if not found:
        expected = ", ".join(n[0] for n in CSV_NAMES.values())
        raise ValueError(f"data_dir {data_dir!r} holds none of the expected CSV files ({expected})")
    if not tables["company_directory"]:
        tables["company_directory"] = _directory_from(tables)
    return World(tables, name=os.fspath(root))


def _row(table: S.Table, rec: dict[str, str]) -> tuple:
    """One CSV record as a row tuple, mapping WorkBench's column spellings onto ours."""
    rec = {k.strip(): (v or "").strip() for k, v in rec.items() if k}
    if table is S.EMAILS and "sender/recipient" in rec:
        other = rec["sender/recipient"]
        inbox = rec.get("inbox/outbox", "inbox").lower() != "outbox"
        rec["sender"], rec["recipient"] = (other, S.USER_EMAIL) if inbox else (S.USER_EMAIL, other)
    if table is S.DIRECTORY and "name" not in rec:
        rec["name"] = _name_of(rec.get("email_address", ""))
    out = []
    for col, kind in table.columns:
        value: Any = rec.get(col, "")
        if kind == "id" and str(value).isdigit():
            value = str(value).zfill(8)  # WorkBench's ids are 8 digits; keep them sortable as text
        elif kind == "bool":
            value = int(str(value).lower() in ("1", "true", "yes"))
        elif kind in ("int", "number") and value != "":
            value = float(value) if kind == "number" else int(float(value))
        out.append(value)
    return tuple(out)


def _name_of(address: str) -> str:
    return " ".join(p.capitalize() for p in address.split("@")[0].replace("_", ".").split("."))


def _directory_from(tables: dict[str, list[tuple]]) -> list[tuple]:
    """Company addresses seen anywhere in the tables, when no directory file is given."""
    domain = "@" + S.COMPANY_DOMAIN
    seen = {v for rows in tables.values() for r in rows for v in r if isinstance(v, str) and v.endswith(domain)}
    return [(_name_of(a), a) for a in sorted(seen)]


def get_world(world_seed: int = 0, data_dir: str | os.PathLike | None = None) -> World:
    """The world an env runs in: the CSV directory when given, else the synthetic company."""
    if data_dir is not None:
        return csv_world(os.fspath(Path(data_dir).resolve()))
    return synthetic_world(int(world_seed))
