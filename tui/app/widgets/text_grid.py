"""Rows of styled cells laid out as one `Text`: what ``rich.table.Table.grid`` draws for the
candidates panel, without its cost.

Why: the panel follows the newest token while a reply streams, so it is drawn at the screen's
flush rate; a Rich table measures and renders every cell several times per frame (~110 table
renders a frame for an 11-row grid, 20 ms of the event loop's time on a 2-core machine, time
the engine thread waited for the GIL). The columns here are as wide as their widest cell,
one space apart, cells left or right aligned, each cell's style over its padding as a table
cell's is; a line never wraps (the panel sizes its columns to fit).
"""

from __future__ import annotations

from typing import Literal, Sequence

from rich.cells import cell_len
from rich.text import Text

Justify = Literal["left", "right"]


def grid_text(rows: Sequence[Sequence[Text | str]], justify: Sequence[Justify],
              least: Sequence[int] = ()) -> Text:
    """`rows` (each at most ``len(justify)`` cells) as one no-wrap Text, a line per row; column i
    is at least ``least[i]`` cells wide, so columns stay put while the rows shown change."""
    cells = [[c if isinstance(c, Text) else Text(c) for c in row] for row in rows]
    least = list(least) + [0] * (len(justify) - len(least))
    widths = [max([least[i], *(cell_len(row[i].plain) for row in cells if i < len(row))]) for i in range(len(justify))]
    out = Text(no_wrap=True, overflow="ellipsis", end="")
    for n, row in enumerate(cells):
        if n:
            out.append("\n")
        last = len(row) - 1
        for i, cell in enumerate(row):
            room = widths[i] - cell_len(cell.plain)
            if i == last and justify[i] == "left":
                room = 0  # no trailing spaces after the last cell of a line
            padded = cell.copy()
            if justify[i] == "right":
                padded = Text(" " * room, style=cell.style) + padded
            else:
                padded.append(" " * room)
            out.append_text(padded)
            if i < last:
                out.append(" ")
    return out
