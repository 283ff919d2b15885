"""Which messages of a long chat the transcript mounts: the newest, and earlier ones on demand.

Why: every message is a widget (a reply several: header, fold line, token chunks), and Textual
lays out and tears down every mounted widget. A 2,000-message chat took 19-25 s to open and
8-11 s to quit with all of them mounted. So a chat opens with its newest `WINDOW` messages (more
while they do not fill two screens: there must be something to scroll), a line above them says
how many are earlier, and scrolling up to it (or a cursor going there) mounts `BATCH` more. Once
mounted, a message stays mounted while it stays on the path.

Pure bookkeeping here (no Textual), so the rules are tested without an app.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.core.chat.conversation import Node

WINDOW = 16  # messages mounted when a chat is shown anew (more screens' worth than a screen)
BATCH = 16  # earlier messages mounted each time the view reaches the top


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


def plan(old: Sequence[Node], first: int, mounted: int, new: Sequence[Node]) -> Change:
    """The change from `old` (of which `mounted` views from index `first` are mounted) to `new`.

    Views still on the path are kept (a turn adds two messages: two views are mounted). When the
    path changed above the mounted views (an earlier message edited, another chat), or the new
    part is longer than a window (a chat opened), the newest `WINDOW` messages are mounted anew.
    """
    same = common_prefix(old, new)
    if first <= same:
        keep = max(0, min(same, first + mounted) - first)
        if len(new) - (first + keep) <= WINDOW:
            return Change(keep, first, first + keep)
    start = max(0, len(new) - WINDOW)
    return Change(0, start, start)


def earlier_text(hidden: int) -> str:
    """The line above the mounted messages while earlier ones are not."""
    return f"▲ {hidden:,} earlier message{'' if hidden == 1 else 's'}: scroll up (or click here) to show more"
