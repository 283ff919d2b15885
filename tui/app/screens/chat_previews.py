"""The chat screen's what-if previews: asked when the token cursor rests, shown under the
candidates, and a branch that starts from a finished preview instead of computing it again.

A mixin so `ChatScreen` stays a router: it calls `preview_cursor` when the cursor moves and
`preview_continuation` when a candidate is chosen; the rest is here and in `tui.app.previews`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.core.api import PreviewRequest, TokenEvent
from engine.core.chat.conversation import Node
from tui.app.previews import Previews, PreviewsChanged, branch_tokens
from tui.app.widgets.previews import PreviewLine, PreviewsPanel

if TYPE_CHECKING:
    from tui.app.controller import ChatController


class PreviewActions:
    """Needs `controller`, `previews`, `query_one` and `notify` (the screen has them)."""

    controller: ChatController
    previews: Previews
    _preview_shown: PreviewRequest | None = None
    _preview_told: frozenset[str] = frozenset()  # the refusals already said (once per reason)

    def preview_cursor(self, node: Node | None, index: int | None) -> None:
        """The cursor is on token `index` of `node`'s reply (or on nothing): show what is known
        of its previews at once, and ask for the rest once the cursor has rested."""
        request = self._preview_request(node, index)
        self._preview_shown = request
        self.query_one(PreviewsPanel).rows = self._preview_lines(request, node, index)  # type: ignore[attr-defined]
        self.previews.rest_on(request)

    def preview_continuation(self, node: Node, index: int, position: int) -> list[TokenEvent]:
        """The finished preview of candidate `position` at the cursor, as reply tokens: a branch
        there starts with them (they are what the engine would write again); [] when there is none."""
        request = self._preview_request(node, index)
        tokens = node.version.tokens or []
        if request is None or request != self._preview_shown or not 0 <= position < len(tokens[index].candidates):
            return []
        row = self.previews.complete(request, tokens[index].candidates[position].id)
        return branch_tokens(row, index + 1) if row is not None else []

    def on_previews_changed(self, event: PreviewsChanged) -> None:
        problem = self.previews.problem
        if problem and problem not in self._preview_told:
            self._preview_told |= {problem}
            self.notify(f"{problem} (for this token; the palette's 'Previews on/off' turns them off)",  # type: ignore[attr-defined]
                        title="No preview", severity="warning", markup=False)
        if event.request == self._preview_shown:
            node, index = self._cursor_token()
            self.query_one(PreviewsPanel).rows = self._preview_lines(event.request, node, index)  # type: ignore[attr-defined]

    def on_mount(self) -> None:
        """New parameters make new previews: those of the token under the cursor are asked again."""
        from tui.app.widgets.params_panel import ParamsPanel

        self.watch(self.query_one(ParamsPanel), "params", self._params_changed, init=False)  # type: ignore[attr-defined]

    def _params_changed(self) -> None:
        if self._preview_shown is not None:
            self.preview_cursor(*self._cursor_token())

    def on_unmount(self) -> None:
        """No preview task outlives the screen (the engine is closed after it)."""
        self.previews.stop()

    def action_toggle_previews(self) -> None:
        """The palette's switch: previews off (the panel empties) or on (this token asked again)."""
        on = self.previews.toggle()
        self.notify("What-if previews on." if on else "What-if previews off.", timeout=3)  # type: ignore[attr-defined]
        self.preview_cursor(*self._cursor_token())

    def drop_previews(self) -> None:
        """A turn starts: the conversation changes, so every preview goes."""
        self.previews.drop()
        self._preview_shown = None
        self.query_one(PreviewsPanel).rows = ()  # type: ignore[attr-defined]

    def _cursor_token(self) -> tuple[Node | None, int | None]:
        from tui.app.widgets.transcript import Transcript

        cursor = self.query_one(Transcript).cursor  # type: ignore[attr-defined]
        return (cursor[0], cursor[1]) if cursor is not None else (None, None)

    def _preview_request(self, node: Node | None, index: int | None) -> PreviewRequest | None:
        """What a preview of this token asks (None: no token, a reply streaming, another model's ids)."""
        controller = self.controller
        if node is None or index is None or controller.busy or controller.loading or controller.engine.model is None:
            return None
        version = node.version
        if not version.tokens or not version.ids_fit(controller.model_folder) or node not in controller.conversation.path():
            return None
        messages = controller.history(upto=node)
        return self.previews.request_for(messages, version.tokens, index, controller.params, version.thinking)

    def _preview_lines(self, request: PreviewRequest | None, node: Node | None,
                       index: int | None) -> tuple[PreviewLine, ...]:
        if request is None or node is None or index is None or not node.version.tokens:
            return ()
        texts = {c.id: c.text for c in node.version.tokens[index].candidates}
        rows = self.previews.rows(request)
        refused = next((row.problem for row in rows if row.problem), "")
        if refused:  # one line says why, instead of a row per candidate saying nothing
            return (("—", f"no preview: {refused}", True),)
        return tuple((texts.get(row.candidate, "?"), row.text, row.done) for row in rows if row.tokens or row.done)
