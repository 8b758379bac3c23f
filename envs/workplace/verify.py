"""State verification: the session's final database against the one the ground truth produces.

The reference state is made by replaying the ground-truth calls on a fresh copy of the world.
Both states are compared table by table as multisets of rows without the system-assigned id
column, after normalising free text (case, runs of whitespace), addresses (case) and datetimes
(any ISO spelling), so call order, the ids that creation assigned, ``"2023-12-01T10:00"`` versus
``"2023-12-01 10:00:00"`` and ``"Raj.Patel@Atlas.com"`` versus ``"raj.patel@atlas.com"`` do not
matter, while any unintended change (a duplicate send, an extra delete, a wrong field) does.

The verdict carries the row-level diff per table (``missing``: expected rows that are absent,
``unexpected``: rows that should not be there), what each side did per table (``changes``: the
agent's and the ground truth's rows ``added``, ``changed`` and ``deleted``, and the ids of the
agent's ``side_effects``) and two flags: ``side_effect`` (the agent touched a
row the ground truth leaves alone, or created more rows than it) and ``noop`` (the task needs no
change at all). Only the rows that the agent or the ground truth touched are read (the tools
record them): every other row is the template's on both sides, so verification costs in
proportion to the changes, not to the size of the world.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import Counter
from typing import Any

from textgym.envs.workplace import schema as S
from textgym.envs.workplace.world import World

MAX_DIFF_ROWS = 20


def normalize(kind: str, value: Any) -> Any:
    """One cell in the form the comparison uses (see the module docstring)."""
    if value is None:
        return ""
    if kind in ("int", "number", "bool"):
        try:
            number = float(value)
        except (TypeError, ValueError):
            return " ".join(str(value).split()).casefold()
        return int(number) if number.is_integer() else round(number, 6)
    text = str(value).strip()
    parse = {"datetime": S.parse_datetime, "date": S.parse_date}.get(kind)
    if parse is not None:
        try:
            return parse(text)
        except ValueError:
            pass
    return " ".join(text.split()).casefold()


def _normalized(table: S.Table, rows: Counter) -> Counter:
    kinds = [k for _, k in table.columns if k != "id"]
    out: Counter = Counter()
    for row, n in rows.items():
        out[tuple(normalize(k, v) for k, v in zip(kinds, row))] += n
    return out


def _read(conn: sqlite3.Connection, table: S.Table, ids: set[str]) -> dict[Any, tuple]:
    """The rows with these ids (every row, keyed by position, for tables without ids), without the id."""
    cols = ", ".join(f'"{c}"' for c in table.compared)
    key = table.id_column
    if key is None:
        return dict(enumerate(conn.execute(f'SELECT {cols} FROM "{table.name}"')))
    # Placeholders, not json_each(): with SQLite 3.40, using the json_each table-valued function
    # again after deserialize() replaced a database where it had been used segfaults.
    marks = ", ".join("?" for _ in ids)
    sql = f'SELECT "{key}", {cols} FROM "{table.name}" WHERE "{key}" IN ({marks})'
    return {r[0]: r[1:] for r in conn.execute(sql, sorted(ids))}


def database_digest(conn: sqlite3.Connection, touched: dict[str, set[str]]) -> str:
    """A digest of a session database: the rows of ``touched`` (the ids its writes touched, per
    table) as they are now, deleted ones absent. Every other row is the world's, so two sessions of
    one world with equal digests hold equal databases."""
    digest = hashlib.blake2b(digest_size=8)
    for table in S.TABLES:
        if table.name in touched:
            rows = _read(conn, table, touched[table.name])
            digest.update(json.dumps([table.name, sorted(rows.items(), key=lambda kv: str(kv[0]))], default=str).encode())
    return digest.hexdigest()


def _changes(table: S.Table, before: dict, after: dict) -> tuple[set, int, Counter, Counter]:
    """(ids whose row changed or vanished, rows created, normalised rows added, rows removed)."""
    if table.id_column is None:
        b, a = Counter(before.values()), Counter(after.values())
        added, removed = _normalized(table, a - b), _normalized(table, b - a)
        return set(), 0, added - removed, removed - added
    kinds = [k for _, k in table.columns if k != "id"]
    norm = lambda row: tuple(normalize(k, v) for k, v in zip(kinds, row))
    touched = {k for k, row in before.items() if after.get(k) != row and (k not in after or norm(after[k]) != norm(row))}
    created = sum(1 for k in after if k not in before)
    return touched, created, Counter(), Counter()


def _edits(table: S.Table, before: dict, after: dict) -> dict[str, list]:
    """What changed from ``before`` to ``after``: rows ``added``, ``changed`` (``id``, ``before``,
    ``after``) and ``deleted``, as column dicts (at most ``MAX_DIFF_ROWS`` of each)."""
    names = table.compared
    row = lambda values: dict(zip(names, values))
    if table.id_column is None:
        b, a = Counter(before.values()), Counter(after.values())
        added, deleted = list((a - b).elements()), list((b - a).elements())
        return {"added": [row(r) for r in added[:MAX_DIFF_ROWS]], "changed": [], "deleted": [row(r) for r in deleted[:MAX_DIFF_ROWS]]}
    added = [{"id": k, **row(v)} for k, v in sorted(after.items()) if k not in before]
    deleted = [{"id": k, **row(v)} for k, v in sorted(before.items()) if k not in after]
    changed = [{"id": k, "before": row(v), "after": row(after[k])} for k, v in sorted(before.items()) if k in after and after[k] != v]
    return {"added": added[:MAX_DIFF_ROWS], "changed": changed[:MAX_DIFF_ROWS], "deleted": deleted[:MAX_DIFF_ROWS]}


def _diff(table: S.Table, final: dict, expected: dict) -> tuple[list, list]:
    raw_f, raw_e = Counter(final.values()), Counter(expected.values())
    common = raw_f & raw_e
    nf, ne = _normalized(table, raw_f - common), _normalized(table, raw_e - common)
    names = table.compared
    rows = lambda c: [dict(zip(names, r)) for r in list(c.elements())[:MAX_DIFF_ROWS]]
    return rows(ne - nf), rows(nf - ne)


def compare(
    world: World,
    final: sqlite3.Connection,
    expected: sqlite3.Connection,
    final_touched: dict[str, set[str]],
    expected_touched: dict[str, set[str]],
    ground_truth_errors: list[str] | None = None,
) -> tuple[bool, dict[str, Any]]:
    """Compare the final and the expected state on the rows either side touched.

    Args:
        world: The world both states started from.
        final: The agent's session database.
        expected: The database after replaying the ground truth on a fresh copy.
        final_touched: Ids of the rows the agent's calls wrote, per table name.
        expected_touched: Ids of the rows the ground-truth calls wrote, per table name.
        ground_truth_errors: Errors met while replaying the ground truth (reported, not fatal).

    Returns:
        ``(success, verification)``; ``verification`` is JSON-ready.
    """
    diff: dict[str, dict[str, list]] = {}
    changes: dict[str, dict[str, Any]] = {}
    side_effect, noop = False, True
    for table in S.TABLES:
        if table.name not in final_touched and table.name not in expected_touched:
            continue
        ids = final_touched.get(table.name, set()) | expected_touched.get(table.name, set())
        initial = world.initial(table)
        before = initial if table.id_column is None else {k: initial[k] for k in ids if k in initial}
        got, want = _read(final, table, ids), _read(expected, table, ids)
        a_touched, a_created, a_added, a_removed = _changes(table, before, got)
        g_touched, g_created, g_added, g_removed = _changes(table, before, want)
        if g_touched or g_created or g_added or g_removed:
            noop = False
        if a_touched - g_touched or a_created > g_created or a_added - g_added or a_removed - g_removed:
            side_effect = True
        missing, unexpected = _diff(table, got, want)
        if missing or unexpected:
            diff[table.name] = {"missing": missing, "unexpected": unexpected}
        agent, expected_edits = _edits(table, before, got), _edits(table, before, want)
        if any(agent.values()) or any(expected_edits.values()):
            # Rows the agent wrote that the ground truth leaves alone (by id; tables without ids: none).
            stray = sorted(a_touched - g_touched)[:MAX_DIFF_ROWS]
            changes[table.name] = {"agent": agent, "expected": expected_edits, "side_effects": stray}
    success = not diff
    if success:
        reason = "the final state matches the expected state"
    else:
        reason = "the final state differs from the expected state in " + ", ".join(diff)
        if side_effect:
            reason += " (unintended changes)"
    verification = {"success": success, "reason": reason, "side_effect": side_effect, "noop": noop, "diff": diff, "changes": changes}
    if ground_truth_errors:
        verification["ground_truth_errors"] = list(ground_truth_errors)
    return success, verification
