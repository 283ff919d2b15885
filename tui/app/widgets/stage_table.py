"""The candidates panel's stage view: each candidate's probability after every stage in force.

Rows are the candidates (the panel's cursor, digits and bias keys keep working on them); columns
are the stages in the chain's order, "model" first and "final" last. The side panel is ~42 cells
wide whatever the terminal, so a cell is 5 characters (5 columns fit) and the columns after
"model" page with ←/→ (‹ › in the head row say there are more). A candidate a stage removed shows ✗ under that stage and · after it; the line under the
table names the stage for the highlighted candidate, and the chosen one is marked ▶ as in the
probability table.
"""

from __future__ import annotations

import math

from rich.cells import set_cell_size
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from engine.core.api import StageView, TokenEvent
from tui.app.widgets.render import log_text, percent, visible

CELL = 5
SHORT = {"model": "model", "logit bias": "bias", "penalties": "pen", "DRY": "DRY", "top-nσ": "nσ", "top-k": "top-k",
         "typical-p": "typ-p", "top-p": "top-p", "min-p": "min-p", "XTC": "XTC", "temperature": "temp",
         "mirostat": "miro", "final": "final"}


def cell(p: float, logprobs: bool) -> str:
    """A probability in 5 characters: percent without its sign (the head says %), or log p."""
    if logprobs:
        x = math.log(p) if p > 0 else -math.inf
        return log_text(x) if x > -10 or x == -math.inf else f"{x:.1f}"
    if p >= 0.9995:
        return "100"
    if p >= 0.001:
        return f"{p * 100:.1f}"
    return "0" if p == 0 else "<.1"


def columns_that_fit(width: int, chars: int) -> int:
    """How many stage columns fit beside the marker and the text."""
    return max(1, (width - 2 - chars - 1) // (CELL + 1))


def last_offset(view: StageView, width: int) -> int:
    """The furthest the stage columns after "model" page (the last page still shows "final")."""
    return max(0, len(view.stages) - 1 - (columns_that_fit(width, _chars(width)) - 1))


def _chars(width: int) -> int:
    """The candidate text's width: 8 cells, less in a panel too narrow for two stage columns."""
    return max(4, min(8, width - 2 - 1 - 2 * (CELL + 1)))


def stage_table(view: StageView, token: TokenEvent, row: int, width: int, offset: int, logprobs: bool,
                chosen_style: str, focused: bool, height: int = 100) -> RenderableType:
    """The table for `view` with the panel's cursor on candidate `row` of `token`, the stage
    columns from `offset` (after "model") on, in `height` lines (the rows scroll with the cursor)."""
    chars = _chars(width)
    fit = columns_that_fit(width, chars)
    stages = list(view.stages)
    rest = stages[1:]
    offset = max(0, min(offset, max(0, len(rest) - (fit - 1))))
    shown = [stages[0], *rest[offset:offset + fit - 1]]
    table = Table.grid(padding=(0, 1))
    table.add_column()
    table.add_column()
    for _ in shown:
        table.add_column(justify="right", width=CELL)
    unit = "log p" if logprobs else "%"
    more = f"{'‹' if offset else ' '}{'›' if offset + fit - 1 < len(rest) else ' '}"  # ←/→ page the columns
    table.add_row(Text(more, style="dim"), Text(set_cell_size(unit, chars), style="dim"),
                  *(Text(SHORT.get(name, name[:CELL]), style="dim") for name, _ in shown))
    index = {cid: k for k, cid in enumerate(view.candidates)}
    order = [c.id for c in token.candidates if c.id in index]
    order += [cid for cid in view.candidates if cid not in order]  # the chosen one, beyond the top-N
    texts = {c.id: c.text for c in token.candidates}
    texts.setdefault(token.id, token.piece or token.text)
    names = [name for name, _ in stages]
    room = max(1, height - 2)  # the head row and the line under the table
    top = max(0, min(row - room + 1, len(order) - room))
    for r, cid in list(enumerate(order))[top:top + room]:
        k = index[cid]
        removed_at = names.index(view.removed_by[k]) if view.removed_by[k] in names else len(names)
        cells = []
        for name, probs in shown:
            at = names.index(name)
            if at == removed_at:
                cells.append(Text("✗", style="bold red"))
            elif at > removed_at:
                cells.append(Text("·", style="dim"))
            else:
                cells.append(Text(cell(probs[k], logprobs)))
        style = "reverse" if r == row and focused else ""
        chosen = cid == token.id
        label = f"bold {chosen_style}" if chosen else ""
        key = str((r + 1) % 10) if r < 10 and cid in texts and r < len(token.candidates) else " "
        table.add_row(Text(key + ("▶" if chosen else " "), style=style),
                      Text(set_cell_size(visible(texts.get(cid, f"#{cid}")), chars), style=f"{label} {style}".strip()),
                      *cells)
    return Group(table, Text(explain(view, order, row, texts), style="italic dim"))


def explain(view: StageView, order: list[int], row: int, texts: dict[int, str]) -> str:
    """One line for the highlighted candidate: which stage removed it, or where it went."""
    if not order:
        return ""
    cid = order[min(row, len(order) - 1)]
    k = view.candidates.index(cid)
    name = visible(texts.get(cid, f"#{cid}"))
    if view.removed_by[k]:
        return f"{name!r} (id {cid}): removed by {view.removed_by[k]}"
    first, last = view.stages[0][1][k], view.stages[-1][1][k]
    return f"{name!r} (id {cid}): kept, {percent(first, precise=True)} → {percent(last, precise=True)}"
