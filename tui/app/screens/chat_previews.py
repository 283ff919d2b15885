"""The chat screen's what-if previews: asked when the token cursor rests, shown under the
candidates, and a branch from a chosen candidate that starts from its finished preview instead
of computing it again.

A helper the chat screen owns (`ChatScreen.preview_actions`), typed by what it needs
(`PreviewHost`): the screen calls `cursor` when the token cursor moves and `continuation` when a
candidate is chosen; the rest is here and in `tui.app.previews`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from engine.core.api import PreviewRequest, TokenEvent
from engine.core.chat.conversation import Node
from tui.app.previews import Previews, PreviewsChanged, branch_tokens
from tui.app.widgets.candidates import CandidatesPanel
from tui.app.widgets.previews import PreviewLine, PreviewsPanel
from tui.app.widgets.transcript import Transcript
from tui.app.screens.host import ScreenHost

if TYPE_CHECKING:
    from tui.app.controller import ChatController


class PreviewHost(ScreenHost, Protocol):
    """What the previews need of the chat screen."""

    controller: ChatController


class PreviewActions:
    """The chat screen's previews (see the module docstring); `previews` asks the engine."""

    def __init__(self, screen: PreviewHost, previews: Previews) -> None:
        self.screen = screen
        self.previews = previews
        self.shown: PreviewRequest | None = None  # what the panel shows the previews of
        self._told: frozenset[str] = frozenset()  # the refusals already said (once per reason)

    def cursor(self, node: Node | None, index: int | None) -> None:
        """The cursor is on token `index` of `node`'s reply (or on nothing): show what is known
        of its previews at once, and ask for the rest once the cursor has rested."""
        request = self._request(node, index)
        self.shown = request
        self.screen.query_one(PreviewsPanel).rows = self._lines(request, node, index)
        self.previews.rest_on(request)

    def continuation(self, node: Node, index: int, position: int) -> list[TokenEvent]:
        """The finished preview of candidate `position` at the cursor, as reply tokens: a branch
        there starts with them (they are what the engine would write again); [] when there is none."""
        request = self._request(node, index)
        tokens = node.version.tokens or []
        if request is None or request != self.shown or not 0 <= position < len(tokens[index].candidates):
            return []
        row = self.previews.complete(request, tokens[index].candidates[position].id)
        return branch_tokens(row, index + 1) if row is not None else []

    def branch(self, position: int) -> None:
        """A candidate chosen (a digit, a click): branch at the cursor's token (else at the token
        the candidates panel shows), starting from its finished preview where there is one."""
        cursor = self.panel_cursor()
        if cursor is None:
            self.screen.notify("Select a token first (Esc, then ←/→).", severity="warning")
        elif cursor[0].role != "assistant":
            self.screen.notify("This is text the model reads: a branch starts at a reply's token.", severity="warning")
        elif (why := self.screen.controller.branch(cursor[0], cursor[1], position,
                                                   self.continuation(*cursor, position))) is not None:
            self.screen.notify(why, severity="warning")
        else:
            self.screen.query_one(Transcript).clear()

    def panel_cursor(self) -> tuple[Node, int] | None:
        """The token under the cursor, else the one the candidates panel shows while none is
        selected (the newest reply's last), so a digit picks from the list on screen rather than
        failing silently (the stage view reads the same token)."""
        cursor = self.screen.query_one(Transcript).cursor
        if cursor is not None:
            return cursor[0], cursor[1]
        token = self.screen.query_one(CandidatesPanel).token
        for node in reversed(self.screen.controller.conversation.path()):
            tokens = node.version.tokens or []
            if token is not None and tokens and tokens[-1] is token:
                return node, len(tokens) - 1
        return None

    def changed(self, event: PreviewsChanged) -> None:
        """New rows (or a refusal) for a request: shown if it is the one on screen."""
        problem = self.previews.problem
        if problem and problem not in self._told:
            self._told |= {problem}
            self.screen.notify(f"{problem} (for this token; the palette's 'Previews on/off' turns them off)",
                               title="No preview", severity="warning", markup=False)
        if event.request == self.shown:
            node, index = self._cursor_token()
            self.screen.query_one(PreviewsPanel).rows = self._lines(event.request, node, index)

    def params_changed(self) -> None:
        """New parameters make new previews: those of the token under the cursor are asked again."""
        if self.shown is not None:
            self.cursor(*self._cursor_token())

    def toggle(self) -> None:
        """The palette's switch: previews off (the panel empties) or on (this token asked again)."""
        on = self.previews.toggle()
        self.screen.notify("What-if previews on." if on else "What-if previews off.", timeout=3)
        self.cursor(*self._cursor_token())

    def drop(self) -> None:
        """A turn starts: the conversation changes, so every preview goes."""
        self.previews.drop()
        self.shown = None
        self.screen.query_one(PreviewsPanel).rows = ()

    def _cursor_token(self) -> tuple[Node | None, int | None]:
        cursor = self.screen.query_one(Transcript).cursor
        return (cursor[0], cursor[1]) if cursor is not None else (None, None)

    def _request(self, node: Node | None, index: int | None) -> PreviewRequest | None:
        """What a preview of this token asks (None: no token, a reply streaming, another model's ids)."""
        controller = self.screen.controller
        if node is None or index is None or controller.busy or controller.loading or controller.engine.model is None:
            return None
        version = node.version
        if not version.tokens or not version.ids_fit(controller.model_folder) or node not in controller.conversation.path():
            return None
        messages = controller.history(upto=node)
        return self.previews.request_for(messages, version.tokens, index, controller.params, version.thinking)

    def _lines(self, request: PreviewRequest | None, node: Node | None,
               index: int | None) -> tuple[PreviewLine, ...]:
        if request is None or node is None or index is None or not node.version.tokens:
            return ()
        texts = {c.id: c.text for c in node.version.tokens[index].candidates}
        rows = self.previews.rows(request)
        refused = next((row.problem for row in rows if row.problem), "")
        if refused:  # one line says why, instead of a row per candidate saying nothing
            return (("—", f"no preview: {refused}", True),)
        return tuple((texts.get(row.candidate, "?"), row.text, row.done) for row in rows if row.tokens or row.done)
