"""One widget per message of the transcript.

An assistant reply has two faces: a token view (while streaming, while a token of it is
selected, or in heatmap mode) and Markdown (once finished). The token view is split into chunks
of a few hundred tokens, cut after a newline, so a new token re-renders only the last chunk and a
cursor move only the chunks it leaves and enters: a 5,000-token reply stays cheap.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.events import Click
from textual.message import Message
from textual.widgets import Markdown, Static

from tui.model.conversation import Node
from tui.widgets.render import HeatPalette, render_tokens

CHUNK_SOFT = 200  # cut a chunk after a newline once it is this long
CHUNK_HARD = 1500  # cut anyway (a reply without newlines)


class TokenChunk(Static):
    """Tokens [start, end) of a reply, rendered as one Text."""

    DEFAULT_CSS = "TokenChunk { height: auto; }"

    def __init__(self, start: int) -> None:
        super().__init__(markup=False)
        self.start = start
        self.end = start


class UserView(Static):
    """A user (or system) message, with its version counter when it has been edited."""

    DEFAULT_CSS = """
    UserView { height: auto; margin: 1 0 0 0; padding: 0 1; border-left: thick $accent; }
    UserView.system { border-left: thick $warning; color: $text-muted; }
    """

    def __init__(self, node: Node) -> None:
        super().__init__(markup=False, classes=node.role)
        self.node = node

    def on_mount(self) -> None:
        self.sync()

    def sync(self) -> None:
        node = self.node
        label = "system" if node.role == "system" else "you"
        if len(node.versions) > 1:
            label += f"  ‹{node.active + 1}/{len(node.versions)}›"
        self.update(Text.assemble((label, "dim"), "\n", node.version.text))


class AssistantView(Vertical):
    """An assistant message: a header, the token view and the Markdown view."""

    DEFAULT_CSS = """
    AssistantView { height: auto; margin: 1 0 0 0; padding: 0 1; border-left: thick $primary; }
    AssistantView > #header { color: $text-muted; height: 1; }
    AssistantView > #tokens { height: auto; }
    AssistantView > Markdown { height: auto; margin: 0; padding: 0; }
    AssistantView.-inspect { border-left: thick $secondary; }
    """

    class TokenClicked(Message):
        def __init__(self, view: "AssistantView", index: int) -> None:
            super().__init__()
            self.view = view
            self.index = index

    def __init__(self, node: Node) -> None:
        super().__init__()
        self.node = node
        self.cursor: int | None = None
        self.heat: HeatPalette | None = None
        self.streaming = False
        self._chunks: list[TokenChunk] = []
        self._markdown_text: str | None = None
        self._ready = False  # children exist (views are mounted without awaiting)

    def compose(self) -> ComposeResult:
        yield Static(id="header", markup=False)
        yield Vertical(id="tokens")
        yield Markdown()

    def on_mount(self) -> None:
        self._ready = True
        self.rebuild()

    @property
    def tokens(self) -> list:
        return self.node.version.tokens or []

    def rebuild(self) -> None:
        """Forget all chunks (the shown version changed) and render again."""
        if not self._ready:
            return
        self.query_one("#tokens").remove_children()
        self._chunks = []
        self._markdown_text = None
        self.sync()

    def sync(self) -> None:
        """Render tokens that arrived since the last call; choose the face; update the header."""
        if not self._ready:
            return
        tokens = self.tokens
        done = self._chunks[-1].end if self._chunks else 0
        dirty: set[TokenChunk] = set()
        for index in range(done, len(tokens)):
            chunk = self._chunk_for_new(index, tokens)
            chunk.end = index + 1
            dirty.add(chunk)
        for chunk in dirty:
            self._render_chunk(chunk)
        self._update_header()
        self._choose_face()

    def _chunk_for_new(self, index: int, tokens: list) -> TokenChunk:
        last = self._chunks[-1] if self._chunks else None
        size = 0 if last is None else last.end - last.start
        after_newline = index > 0 and "\n" in tokens[index - 1].text
        if last is None or (size >= CHUNK_SOFT and after_newline) or size >= CHUNK_HARD:
            last = TokenChunk(index)
            self._chunks.append(last)
            self.query_one("#tokens").mount(last)
        return last

    def _render_chunk(self, chunk: TokenChunk) -> None:
        chunk.update(render_tokens(self.tokens[chunk.start:chunk.end], chunk.start, self.cursor, self.heat))

    def _chunk_of(self, index: int | None) -> TokenChunk | None:
        if index is None:
            return None
        return next((c for c in self._chunks if c.start <= index < c.end), None)

    def set_cursor(self, index: int | None) -> TokenChunk | None:
        """Move the highlighted token; re-render only the chunks involved. Returns its chunk."""
        old, self.cursor = self._chunk_of(self.cursor), index
        if not self._ready:
            return None
        new = self._chunk_of(index)
        for chunk in {old, new} - {None}:
            self._render_chunk(chunk)  # type: ignore[arg-type]
        self._choose_face()
        return new

    def set_heat(self, heat: HeatPalette | None) -> None:
        self.heat = heat
        if not self._ready:
            return
        for chunk in self._chunks:
            self._render_chunk(chunk)
        self._choose_face()

    def _choose_face(self) -> None:
        """Tokens while streaming, inspecting or in heatmap mode; Markdown otherwise."""
        version = self.node.version
        show_tokens = self.streaming or self.cursor is not None or self.heat is not None \
            or version.finish_reason is None
        self.set_class(self.cursor is not None, "-inspect")
        self.query_one("#tokens").display = show_tokens
        markdown = self.query_one(Markdown)
        markdown.display = not show_tokens
        if not show_tokens and self._markdown_text != version.reply_text():
            self._markdown_text = version.reply_text()
            markdown.update(self._markdown_text)

    def _update_header(self) -> None:
        node, version = self.node, self.node.version
        parts = ["assistant"]
        if len(node.versions) > 1:
            parts.append(f"‹branch {node.active + 1}/{len(node.versions)}›")
        if version.branched_at is not None:
            parts.append(f"from token {version.branched_at}")
        if version.params is not None:
            parts.append(f"T={version.params.temperature:g}")
        parts.append(f"{len(self.tokens)} tok")
        if version.finish_reason is None:
            parts.append("streaming…")
        elif version.finish_reason != "stop":
            parts.append(version.finish_reason)
        self.query_one("#header", Static).update(" · ".join(parts))

    def on_click(self, event: Click) -> None:
        index = event.style.meta.get("token") if event.style else None
        if not isinstance(index, int):
            if not self.tokens:
                return
            index = 0  # a click on the Markdown face starts inspecting the reply
        event.stop()
        self.post_message(self.TokenClicked(self, index))
