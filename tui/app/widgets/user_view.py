"""`UserView`: a user (or system) message, and, once the chat is scored (#33.1), its tokens.

The model *reads* these messages; scored teacher-forced (`tui.app.scores`), each of their tokens
has the statistics a reply's token has. Then the text is drawn by a `TokenChunk` exactly as a
reply's is, so the token cursor, the candidates panel ("the model would have said X here") and
the heatmap work inside the user's own text; until then, and for a message whose tokens do not
spell its text, the text is a plain `Static`. The header says the message's perplexity.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.events import Click
from textual.widgets import Static

from engine.core.api import TokenEvent
from engine.core.chat.conversation import Node
from tui.app.safe_text import printable
from tui.app.scores import MessageTokens
from tui.app.widgets.render import HeatPalette
from tui.app.widgets.token_chunk import TokenChunk
from tui.app.widgets.token_click import TokenClicked


def perplexity_text(value: float | None) -> str:
    """"ppl 12.3" (None: ""), as every header and the status bar write it."""
    if value is None:
        return ""
    return "ppl ∞" if value == float("inf") else f"ppl {value:.3g}" if value < 1000 else f"ppl {value:.0f}"


class UserView(Vertical):
    """A user (or system) message, with its version counter when it has been edited."""

    DEFAULT_CSS = """
    UserView { height: auto; margin: 1 0 0 0; padding: 0 1; border-left: thick $accent; }
    UserView.system { border-left: thick $warning; color: $text-muted; }
    UserView > #header { height: 1; text-style: dim; }
    UserView > Static#text { height: auto; }
    UserView.-inspect { border-left: thick $secondary; }
    """

    def __init__(self, node: Node) -> None:
        super().__init__(classes=node.role)
        self.node = node
        self.cursor: int | None = None
        self.heat: HeatPalette | None = None
        self.scores: MessageTokens | None = None  # the shown version's, once scored (the transcript sets it)
        self._shown: tuple[str, str, tuple[TokenEvent, ...]] | None = None  # (header, text, tokens) drawn
        self._chunk: TokenChunk | None = None
        self._ready = False

    def compose(self) -> ComposeResult:
        yield Static(id="header", markup=False)
        yield Static(id="text", markup=False)

    def on_mount(self) -> None:
        """Take the composed children. A view removed in the tick it was mounted in (a chat
        replaced while it opened) gets Mount without them: it must not crash the app (as
        `AssistantView.on_mount`)."""
        header = next(self.query("#header").results(Static), None)
        text = next(self.query("#text").results(Static), None)
        if header is None or text is None or self._closing or self._closed:
            return
        self._header, self._text = header, text
        self._ready = True
        self.sync()

    @property
    def ready(self) -> bool:
        return self._ready

    @property
    def tokens(self) -> list[TokenEvent]:
        """The scored tokens the cursor walks ([] until scored, or when they do not spell the text)."""
        return list(self.scores.tokens) if self.scores is not None else []

    def set_scores(self, scores: MessageTokens | None) -> None:
        self.scores = scores
        if self.cursor is not None and self.cursor >= len(self.tokens):
            self.cursor = None
        self.sync()

    def sync(self) -> None:
        """Redraw if the header, the text or the tokens changed (the transcript asks every view
        at each send: an unchanged one must not be re-rendered or laid out again)."""
        if not self._ready:
            return
        node = self.node
        label = "system" if node.role == "system" else "you"
        if len(node.versions) > 1:
            label += f"  ‹{node.active + 1}/{len(node.versions)}›"
        ppl = perplexity_text(self.scores.perplexity) if self.scores is not None else ""
        header = f"{label} · {ppl}" if ppl else label
        shown = (header, node.version.text, tuple(self.tokens))
        if shown != self._shown:
            self._shown = shown
            self.draw(header, node.version.text)

    def draw(self, header: str, text: str) -> None:
        """Draw the header, then the tokens (scored) or the plain text."""
        self._header.update(header)
        tokens = self.tokens
        plain = self._text
        if self._chunk is not None:
            self._chunk.remove()
            self._chunk = None
        plain.display = not tokens
        if tokens:
            self._chunk = TokenChunk(0, self.cursor, self.heat)
            self.mount(self._chunk)
            self._chunk.grow(tokens, len(tokens))
        else:
            plain.update(Text(printable(text)))

    def set_cursor(self, index: int | None) -> TokenChunk | None:
        """Move the highlighted token (as `AssistantView.set_cursor`); returns its chunk."""
        self.cursor = index
        self.set_class(index is not None, "-inspect")
        if self._chunk is None:
            return None
        self._chunk.set_cursor(index)
        return self._chunk if index is not None else None

    def set_heat(self, heat: HeatPalette | None) -> None:
        self.heat = heat
        if self._chunk is not None:
            self._chunk.set_heat(heat)

    def thinking(self) -> None:
        """A message the model reads has no thinking block (the transcript asks every view)."""
        return None

    def on_click(self, event: Click) -> None:
        index = event.style.meta.get("token") if event.style else None
        if isinstance(index, int) and self.tokens:
            event.stop()
            self.post_message(TokenClicked(self, index))
