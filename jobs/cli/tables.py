"""Rows as the operator commands print them: a table (rich on a terminal, plain aligned columns
when piped) or, with ``--json``, one JSON object per row."""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from rocketlake.jobs.printable import printable

Row = dict[str, Any]


#: a cell this wide or narrower (a number, an ISO time) is never folded on a terminal; a longer
#: name may fold down to _FOLDED characters a line
_WHOLE, _FOLDED = 24, 8


def fit_widths(natural: Sequence[int], floor: Sequence[int], room: int) -> list[int]:
    """Column widths within ``room`` characters: each column's ``natural`` width, the widest
    narrowed first, one character at a time, never below its ``floor`` (then the sum may stay
    above ``room``)."""
    widths = list(natural)
    while sum(widths) > room:
        wide = [i for i, w in enumerate(widths) if w > floor[i]]
        if not wide:
            break
        widths[max(wide, key=lambda i: widths[i])] -= 1
    return widths


def show_rows(a: argparse.Namespace, rows: Sequence[Row], columns: Sequence[str], title: str) -> None:
    """``--json``: one JSON object per row. Otherwise a table of ``columns``: rich on a terminal,
    plain space-aligned columns (never wrapped) when stdout is not one; the cells
    :func:`printable`. On a terminal too narrow for the whole table nothing is cut: a number or
    a time keeps its width (its header folds), a longer name folds onto more lines of its cell."""
    out = sys.stdout
    if a.json:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
        return
    cells = [["-" if r[c] is None else printable(str(r[c])) for c in columns] for r in rows]
    numeric = [all(isinstance(r[c], int) or r[c] is None for r in rows) for c in columns]
    if out.isatty():
        console = Console(file=out)
        values = [max((cell_len(line[i]) for line in cells), default=1) for i in range(len(columns))]
        natural = [max(v, cell_len(c)) for v, c in zip(values, columns)]
        floor = [v if num or v <= _WHOLE else min(v, _FOLDED) for v, num in zip(values, numeric)]
        room = console.width - 3 * len(columns) - 1  # a border and two spaces of padding a column
        table = Table(title=Text(printable(title)))
        for c, num, width in zip(columns, numeric, fit_widths(natural, floor, room)):
            table.add_column(c, justify="right" if num else "left", overflow="fold", width=width)
        for line in cells:
            table.add_row(*map(Text, line))  # Text: a stored "[bold]" is not rich markup
        console.print(table)
        return
    widths = [max([len(c), *(len(line[i]) for line in cells)]) for i, c in enumerate(columns)]
    for line in [list(columns), *cells]:
        out.write("  ".join(v.rjust(w) if num else v.ljust(w)
                            for v, w, num in zip(line, widths, numeric)).rstrip() + "\n")
