"""Which messages of a long chat the transcript mounts: the newest, and earlier ones on demand.

Why: every message is a widget (a reply several: header, fold line, token chunks), and Textual
lays out and tears down every mounted widget. A 2,000-message chat took 19-25 s to open and
8-11 s to quit with all of them mounted. So a chat opens with as many of its newest messages as
fill two screens (estimated from their text: there must be something to scroll), a line above them says
how many are earlier, and scrolling up to it (or a cursor going there) mounts `BATCH` more. Once
mounted, a message stays mounted while it stays on the path.

Pure bookkeeping here (no Textual), so the rules are tested without an app.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.core.chat.conversation import Node

WINDOW = 16  # messages mounted when a chat is shown anew, when the screen's size is not known
BATCH = 16  # earlier messages mounted each time the view reaches the top
MOST = 96  # the most messages one opening mounts, however short they are


@dataclass(frozen=True)
class Change:
    """How to bring the mounted views in line with a new path: keep the first `keep` mounted
    views, remove the rest, and mount `path[mount_from:]` after them; `first` is the path index
    of the first mounted view afterwards."""

    keep: int
    first: int
    mount_from: int


def common_prefix(old: Sequence[Node], new: Sequence[Node]) -> int:
    """How many leading nodes the two paths share (the same objects, not equal ones)."""
    same = 0
    for a, b in zip(old, new):
        if a is not b:
            break
        same += 1
    return same


def estimated_lines(node: Node, width: int) -> int:
    """About how many rows `node`'s view takes at `width` columns (its text wrapped, plus its
    header and margin). An estimate is enough: it decides how many views to mount, not where."""
    width = max(width - 4, 16)
    return 2 + sum(max(1, -(-len(line) // width)) for line in node.version.text.split("\n"))


def window_for(path: Sequence[Node], rows: int, width: int) -> int:
    """How many of the newest messages fill `rows` (two screens, say) at `width` columns.

    Why not a fixed count: short messages on a tall terminal leave nothing to scroll, and each
    extra round of mounting costs a whole layout (0.2-0.5 s on this 2-core machine with 2,000
    messages in the chat); long ones need fewer views. One estimate mounts enough in one round.
    """
    if rows <= 0 or width <= 0:
        return WINDOW
    filled, count = 0, 0
    for node in reversed(path):
        if filled >= rows or count >= MOST:
            break
        filled += estimated_lines(node, width)
        count += 1
    return max(count, 2)


def plan(old: Sequence[Node], first: int, mounted: int, new: Sequence[Node], window: int = WINDOW) -> Change:
    """The change from `old` (of which `mounted` views from index `first` are mounted) to `new`.

    Views still on the path are kept (a turn adds two messages: two views are mounted). When the
    path changed above the mounted views (an earlier message edited, another chat), or the new
    part is longer than a window (a chat opened), the newest `window` messages are mounted anew.
    """
    same = common_prefix(old, new)
    if first <= same:
        keep = max(0, min(same, first + mounted) - first)
        if len(new) - (first + keep) <= window:
            return Change(keep, first, first + keep)
    start = max(0, len(new) - window)
    return Change(0, start, start)


def earlier_text(hidden: int) -> str:
    """The line above the mounted messages while earlier ones are not."""
    return f"▲ {hidden:,} earlier message{'' if hidden == 1 else 's'}: scroll up (or click here) to show more"
