"""The message a clicked token posts, from a reply's view or a scored message's (#33.1): its own
module, so the two views need not import each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message


@dataclass(eq=False)
class TokenClicked(Message):
    """The user clicked token `index` of `view`'s tokens (an AssistantView or a UserView)."""

    view: Any
    index: int
