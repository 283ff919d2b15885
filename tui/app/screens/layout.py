"""How the chat screen fits any terminal: which of three arrangements, and what F9/F10 do in each.

The side panels need 46 columns (the candidates table: key, text, bar, two numbers). Beside the
chat that left 32 columns at 80x24 and none at 40x12. So:

- **wide** (>= `WIDE` columns): the panels in a column beside the chat, as designed;
- **narrow**: the panels in a row *under* the chat, the chat full width;
- **tight** (< `TIGHT` columns): room for one panel under the chat: F9 shows the candidates,
  F10 the parameters, and the key of the one showing hides it;
- **short** (< `SHORT` rows, and not wide): no panels (the chat needs every row); F9 or F10
  shows the one asked for in the chat's place, and again brings the chat back.

Notifications appear at the top left, over the oldest lines of the chat: Textual's place, bottom
right, is where the parameters panel is, so a toast covered the values one was changing.

Pure decisions plus one function per screen event, so `ChatScreen` stays a router.
"""

from __future__ import annotations

from typing import Any

from textual.geometry import Size
from textual.screen import Screen
from textual.widget import Widget

WIDE = 100
TIGHT = 80
SHORT = 18
SIDE_ROWS = 10  # under the chat: the parameters' 8 rows, or the candidates' numbers and 4 rows

LAYOUT_CSS = f"""
ChatScreen #body {{ height: 1fr; }}
ChatScreen Transcript {{ width: 1fr; }}
ChatScreen #side {{ width: 46; }}
ChatScreen.-narrow #body {{ layout: vertical; }}
ChatScreen.-narrow #chat {{ height: 1fr; }}
ChatScreen.-narrow #side {{ width: 1fr; height: {SIDE_ROWS}; layout: horizontal; }}
ChatScreen.-narrow #side > CandidatesPanel {{ width: 1fr; height: 1fr; }}
ChatScreen.-narrow #side > ParamsPanel {{ width: 34; height: 1fr; }}
ChatScreen.-narrow #side > PreviewsPanel {{ display: none; }}
ChatScreen.-narrow #side > SecondLine {{ width: 24; height: 1fr; border-top: none; border-left: solid $panel-lighten-2; }}
ChatScreen.-tight #side > SecondLine {{ display: none; }}
ChatScreen.-tight #side > ParamsPanel {{ display: none; }}
ChatScreen.-tight.-params-first #side > ParamsPanel {{ display: block; width: 1fr; }}
ChatScreen.-tight.-params-first #side > CandidatesPanel {{ display: none; }}
ChatScreen.-tight.-slot-off #side {{ display: none; }}
ChatScreen.-short #side {{ display: none; }}
ChatScreen.-short.-peek #side {{ display: block; height: 1fr; }}
ChatScreen.-short.-peek #chat {{ display: none; }}
ChatScreen #side > .-hidden, ChatScreen #side.-hidden {{ display: none !important; }}
ChatScreen ToastRack {{ dock: top; align: left top; margin-bottom: 0; }}
ChatScreen ToastHolder {{ align-horizontal: left; }}
"""


def arrangement(size: Size) -> dict[str, bool]:
    """The screen classes for a terminal of `size` (columns, rows)."""
    narrow = size.width < WIDE
    return {"-narrow": narrow, "-tight": narrow and size.width < TIGHT, "-short": narrow and size.height < SHORT}


def fit(screen: Screen[Any], size: Size) -> None:
    """Arrange `screen` for `size` (called on every resize). A terminal that has just become
    short shows the chat, whatever was peeked at before."""
    classes = arrangement(size)
    if classes["-short"] and not screen.has_class("-short"):
        screen.remove_class("-peek")
    for name, on in classes.items():
        screen.set_class(on, name)


def toggle(screen: Screen[Any], panel: Widget, other: Widget, params: bool) -> None:
    """F9 (`params` False) or F10 (True): what the key does in the current arrangement."""
    side = panel.parent
    if screen.has_class("-tight") or screen.has_class("-short"):
        _toggle_slot(screen, params)
        panel.remove_class("-hidden")
        if isinstance(side, Widget):
            side.remove_class("-hidden")
        return
    panel.toggle_class("-hidden")
    if isinstance(side, Widget):
        side.set_class(panel.has_class("-hidden") and other.has_class("-hidden"), "-hidden")


def _toggle_slot(screen: Screen[Any], params: bool) -> None:
    """Room for one panel: its key shows that panel, or hides it when it is the one showing."""
    short = screen.has_class("-short")
    open_ = screen.has_class("-peek") if short else not screen.has_class("-slot-off")
    showing = open_ and screen.has_class("-params-first") == params
    if short:
        screen.set_class(not showing, "-peek")
    else:
        screen.set_class(showing, "-slot-off")
    screen.set_class(params, "-params-first")
