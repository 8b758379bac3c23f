"""Result tables that stay readable at any terminal width and when piped to a file.

Rich fits a table to the console by cutting cells ("openai…", "episod…"), and a console that is
not a terminal is 80 columns wide, so a piped report lost its policy names. Here a table is
printed whole when it fits; otherwise its row labels become ``P1``, ``P2``... with a legend of the
full names below it (and headers fold at their spaces), and when even that is too wide, each row becomes a block of ``column:
value`` lines under its full name. Output that is not a terminal is never cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

UNLIMITED = 1_000_000  # the width of a console that is not a terminal


def console(**kwargs: Any) -> Any:
    """A rich console; one writing to a file or a pipe has no width limit."""
    from rich.console import Console

    out = Console(**kwargs)
    return out if out.is_terminal else Console(width=UNLIMITED, **kwargs)


def print_table(
    out: Any,
    title: str,
    label: str,
    columns: Sequence[str],
    rows: Sequence[tuple[str, Sequence[str]]],
    names: str = "rows",
) -> None:
    """Print ``rows`` (a label, then one cell per column) in the widest form that fits ``out``.

    Args:
        out: A rich console.
        title: The table's title.
        label: The header of the label column (e.g. ``policy``).
        columns: The other headers.
        rows: ``(label, cells)`` per row.
        names: Where the long names (policies) are, ``"rows"`` or ``"columns"``: those become
            ``P1``, ``P2``... with a legend when the table is too wide.
    """
    from rich.text import Text

    full = _table(title, label, columns, rows)
    if _width(full) <= out.width:
        out.print(full)
        return
    if names == "rows":
        legend = [row[0] for row in rows]
        table = _table(title, label, [c.replace(" ", "\n") for c in columns], [(f"P{i + 1}", c) for i, (_, c) in enumerate(rows)])
    else:
        legend = list(columns)
        table = _table(title, label, [f"P{i + 1}" for i in range(len(columns))], rows)
    if _width(table) <= out.width:
        out.print(table)
        for i, name in enumerate(legend):
            out.print(Text(f"P{i + 1} = {name}", overflow="fold"))
        return
    out.print(Text(title, style="italic", overflow="fold"))
    for name, cells in rows:
        out.print(Text(f"{label}: {name}", style="bold", overflow="fold"))
        for column, cell in zip(columns, cells):
            out.print(Text(f"  {column}: {cell}", overflow="fold"))


def _table(title: str, label: str, columns: Sequence[str], rows: Sequence[tuple[str, Sequence[str]]]) -> Any:
    from rich.table import Table

    table = Table(title=title)
    table.add_column(label, justify="left", no_wrap=True)
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True)
    for name, cells in rows:
        table.add_row(name, *cells)
    return table


def _width(table: Any) -> int:
    """The width the table takes when nothing is cut."""
    from rich.console import Console

    return Console(width=UNLIMITED).measure(table).maximum
