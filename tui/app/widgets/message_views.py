"""One widget per message of the transcript.

An assistant reply has one face: its tokens' text exactly as the model wrote it. Once the reply
is finished its Markdown is highlighted in place (`markdown_marks`: headings, bold, code... styled,
their markers kept and dimmed), so the token cursor entering it, the heatmap or inspection change
colours and never the layout (a Markdown renderer re-wrapped it, hid ``**`` and drew ``-`` as
``•``: the reply reflowed when the cursor entered it). The view is split into chunks of a few
hundred tokens, cut after a token that ends a line; each chunk wraps and draws its lines
incrementally (`TokenChunk`), so a flush costs O(new tokens) and a cursor move O(its lines), even
in a 5,000-token reply without a newline.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.events import Click
from textual.widgets import Static

from engine.core.api import TokenEvent
from engine.core.chat.conversation import Node, Version
from engine.core.forks import ForkRule
from engine.core.param_steps import changes_note
from tui.app.hints import welcome_keys
from tui.app.safe_text import printable
from tui.app.widgets.markdown_marks import Mark, markdown_marks
from tui.app.widgets.render import HeatPalette, mark_style, token_display
from tui.app.widgets.thinking_fold import ThinkingBlock, thinking_block
from tui.app.widgets.token_chunk import TokenChunk
from tui.app.widgets.token_click import TokenClicked
from tui.app.widgets.user_view import UserView, perplexity_text

__all__ = ["AssistantView", "UserView", "Welcome", "welcome_text", "fit_parts"]

CHUNK_SOFT = 200  # cut a chunk after a newline once it is this long (never mid-paragraph)


WELCOME_INTRO = "Welcome to logitscope: chat with a model and see what it almost said."
WELCOME_DEMO = (
    "The built-in demo model knows the capitals of about fifty countries, colours, what animals "
    "say and how many legs they have, and small sums. Try \"What is the capital of France?\", "
    "then \"And Italy?\"."
)


WELCOME_PLAIN = ("It has no chat template: plain text. The model continues your message; each new message "
                 "starts after a blank line.")


def welcome_text(model: str | None, plain: bool = False, keymap: Mapping[str, str] | None = None) -> str:
    """The welcome for `model` (None: the demo, which is what the app starts on), its keys as
    `keymap` binds them (`tui.app.hints`); `plain`: the model has no chat template, said here
    once (`engine.local.prompt.PLAIN_SEPARATOR`)."""
    middle = WELCOME_DEMO if model is None else f"You are chatting with {printable(model)}."
    if plain and model is not None:
        middle = f"{middle} {WELCOME_PLAIN}"
    return f"{WELCOME_INTRO}\n\n{middle}\n\n{welcome_keys(keymap or {})}"


class Welcome(Static):
    """What the screen says before the first message: what the model is (what the demo knows),
    and the three keys that matter."""

    DEFAULT_CSS = """
    Welcome { height: auto; margin: 1 0 0 0; padding: 0 1; color: $text-muted; }
    """

    def __init__(self, model: str | None = None, plain: bool = False, keymap: Mapping[str, str] | None = None) -> None:
        super().__init__(welcome_text(model, plain, keymap), markup=False)


class AssistantView(Vertical):
    """An assistant message: a header, the fold line of its thinking, and its tokens."""

    DEFAULT_CSS = """
    AssistantView { height: auto; margin: 1 0 0 0; padding: 0 1; border-left: thick $primary; }
    AssistantView > #header { color: $text-muted; height: 1; }
    AssistantView > #thinking { color: $text-muted; text-style: dim; height: 1; }
    AssistantView > #tokens { height: auto; }
    AssistantView.-inspect { border-left: thick $secondary; }
    """

    TokenClicked = TokenClicked  # a scored user message posts it too (#33.1)

    def __init__(self, node: Node) -> None:
        super().__init__()
        self.node = node
        self.cursor: int | None = None
        self.heat: HeatPalette | None = None
        self.streaming = False
        self._chunks: list[TokenChunk] = []
        self._marked: tuple[int, int] | None = None  # (first token, tokens) the Markdown marks were made for
        self._text_only: Static | None = None  # a reply saved without tokens: its text
        self._text_only_source = ""  # the text it shows
        self._header_text = ""
        self._shown: Version | None = None  # the version the chunks were built from
        self.folded = True  # a leading <think> block shows as one line until unfolded (z)
        self._block: ThinkingBlock | None = None  # the version's block once closed (it no longer changes)
        self._ready = False  # children exist (views are mounted without awaiting)
        self.forks = ForkRule()  # which tokens the header counts as forks (the transcript sets it)
        self.perplexity: float | None = None  # the reply's, read back teacher-forced (#33.3)
        self._forks_of: tuple[Version, ForkRule] | None = None  # what `_forks_before` counted
        self._forks_before = (0, 0)  # (tokens counted, forks among them): all but the last token

    def compose(self) -> ComposeResult:
        yield Static(id="header", markup=False)
        yield Static(id="thinking", markup=False)
        yield Vertical(id="tokens")

    def on_mount(self) -> None:
        """Take the composed children. A view removed in the same tick it was mounted in (a chat
        replaced while it opened) still gets Mount, without its children: it must not crash the app."""
        header = self.query("#header").results(Static)
        fold_line = self.query("#thinking").results(Static)
        tokens_box = self.query("#tokens").results(Vertical)
        found = next(header, None), next(fold_line, None), next(tokens_box, None)
        if None in found or self._closing or self._closed:
            return
        self._header, self._fold_line, self._tokens_box = found  # type: ignore[assignment]
        self._ready = True
        self.rebuild()

    @property
    def tokens(self) -> list[TokenEvent]:
        return self.node.version.tokens or []

    @property
    def ready(self) -> bool:
        """Whether the view is mounted and has its children (a cursor can be shown in it)."""
        return self._ready

    def rebuild(self) -> None:
        """Start over when the node shows another version; else only catch up with new tokens.

        The transcript calls this for every kept view when a turn starts: a reply that did not
        change must not be laid out (or its Markdown highlighted) again.
        """
        if not self._ready:
            return
        if self.node.version is not self._shown:
            self._shown, self._block = self.node.version, None
            self._tokens_box.remove_children()
            self._chunks = []
            self._marked = None
        self.sync()

    def thinking(self) -> ThinkingBlock | None:
        """The reply's leading thinking block (remembered once closed: a flush then costs nothing)."""
        if self._block is None:
            block = thinking_block(self.tokens, self.node.version.thinking_opened)
            self._block = block if block is not None and block.closed and not self.streaming else None
            return block
        return self._block

    def toggle_fold(self, folded: bool | None = None) -> bool:
        """Fold or unfold the thinking block (the token view is laid out again); False: none."""
        block = self.thinking()
        if block is None or not self._ready:
            return False
        self.folded = not self.folded if folded is None else folded
        self._shown = None
        self.rebuild()
        return True

    def _first_shown(self, tokens: list[TokenEvent]) -> int:
        """The first token the token view shows: after the thinking block while it is folded."""
        block = self.thinking() if self.folded else None
        return block.end if block is not None else 0

    def sync(self) -> None:
        """Lay out tokens that arrived since the last call; once the reply is finished, take its
        settled last token and highlight its Markdown; update the header and the fold line."""
        if not self._ready:
            return
        tokens = self.tokens
        first = self._first_shown(tokens)
        if self._chunks and self._chunks[0].start < first:  # a streamed reply turned out to think
            self._tokens_box.remove_children()
            self._chunks = []
            self._marked = None
        if self._chunks and not self.streaming:
            self._chunks[-1].settle(tokens)
        index = self._chunks[-1].end if self._chunks else first
        while index < len(tokens):
            chunk = self._chunk_for(index, tokens)
            end = index + 1
            while end < len(tokens) and not self._cut_before(chunk.start, end, tokens):
                end += 1
            chunk.grow(tokens, end)
            index = end
        if self.streaming and not self._chunks and not first:  # an empty line, laid out with the new
            self._chunk_for(0, tokens)  # message: the first token then fills it without a layout pass
        elif not self.streaming and not tokens and self._chunks:  # ended before its first token
            self._tokens_box.remove_children()
            self._chunks = []
        self._update_header()
        self._update_fold_line()
        self._mark_markdown(first)
        self._show_text_only()

    def _update_fold_line(self) -> None:
        block = self.thinking()
        self._fold_line.display = block is not None
        if block is not None:
            self._fold_line.update(block.label(self.folded), layout=False)

    @staticmethod
    def _cut_before(start: int, index: int, tokens: list[TokenEvent]) -> bool:
        """Whether token `index` starts a new chunk: after a token that ends a line, once the
        chunk is long. Never inside a line: a chunk starts on a row of its own."""
        return index - start >= CHUNK_SOFT and tokens[index - 1].text.endswith("\n")

    def _show_text_only(self) -> None:
        """A reply saved without its tokens (a file may hold one), or whose tokens' texts are
        unknown (`Version.texts_unknown`), shows its text, highlighted the same way, in a plain
        Static: no token has text to lay out."""
        version = self.node.version
        if (version.tokens is not None and not version.texts_unknown) or not version.text:
            if self._text_only is not None:
                self._text_only.remove()
                self._text_only = None
            return
        if self._text_only is not None and self._text_only_source == version.text:
            return  # unchanged: not rendered again
        text = Text(printable(version.text))
        for start, end, role in markdown_marks(text.plain):
            text.stylize(mark_style(role, self.app.theme_variables), start, end)
        if self._text_only is None:
            self._text_only = Static(text, markup=False)
            self.mount(self._text_only)
        else:
            self._text_only.update(text)
        self._text_only_source = version.text

    def _mark_markdown(self, first: int) -> None:
        """Highlight the finished reply's Markdown in place (once per version and fold): each
        chunk gets the marks of its own text. A streaming reply is not highlighted (each flush
        would cost O(reply)); its colours, never its layout, change when it ends."""
        tokens = self.tokens
        if self.streaming or self.node.version.finish_reason is None or self._marked == (first, len(tokens)):
            return
        self._marked = (first, len(tokens))
        texts = [token_display(token) for token in tokens[first:]]
        marks = markdown_marks("".join(texts))
        at = 0
        for chunk in self._chunks:
            end = at + sum(len(text) for text in texts[chunk.start - first:chunk.end - first])
            chunk.set_marks(_within(marks, at, end))
            at = end

    def _chunk_for(self, index: int, tokens: list[TokenEvent]) -> TokenChunk:
        """The chunk token `index` goes into: the last one, or a new one mounted after it."""
        last = self._chunks[-1] if self._chunks else None
        if last is None or self._cut_before(last.start, index, tokens):
            last = TokenChunk(index, self.cursor, self.heat)
            self._chunks.append(last)
            self._tokens_box.mount(last)
        return last

    def _chunk_of(self, index: int | None) -> TokenChunk | None:
        if index is None:
            return None
        return next((c for c in self._chunks if c.start <= index < c.end), None)

    def set_cursor(self, index: int | None) -> TokenChunk | None:
        """Move the highlighted token; re-render only the lines involved. Returns its chunk."""
        block = self.thinking()
        if self._ready and index is not None and self.folded and block is not None and index < block.end:
            self.toggle_fold(False)  # a thinking token inspected: the block opens, its tokens as any
        old, self.cursor = self._chunk_of(self.cursor), index
        if not self._ready:
            return None
        new = self._chunk_of(index)
        for chunk in dict.fromkeys(c for c in (old, new) if c is not None):
            chunk.set_cursor(index)
        self.set_class(index is not None, "-inspect")
        return new

    def set_heat(self, heat: HeatPalette | None) -> None:
        self.heat = heat
        if not self._ready:
            return
        for chunk in self._chunks:
            chunk.set_heat(heat)

    def _update_header(self) -> None:
        """One line that never cuts a word: on a narrow screen the details go, least useful
        first (the temperature, where it branched, the token count), whole."""
        node, version = self.node, self.node.version
        parts = [("assistant", 0)]
        if len(node.versions) > 1:
            parts.append((f"‹branch {node.active + 1}/{len(node.versions)}›", 0))
        if version.branched_at is not None:
            parts.append((f"from token {version.branched_at}", 2))
        if version.params is not None:
            parts.append((f"T={version.params.temperature:.2f}", 3))  # as the parameters panel writes it
            if version.params.seed is not None:
                parts.append((f"seed {version.params.seed}", 4))
            if version.changes:
                parts.append((changes_note(version.params, version.changes), 2))
        parts.append((f"{len(self.tokens)} tok", 1))
        if self.tokens:
            forks = self.fork_count()
            parts.append((f"{forks} fork{'s' if forks != 1 else ''}", 1))
        if self.perplexity is not None and version.finish_reason is not None:
            parts.append((perplexity_text(self.perplexity), 2))
        if version.finish_reason is None:
            parts.append(("streaming…", 0))
        elif version.finish_reason != "stop":
            parts.append((printable(version.finish_reason), 0))  # a saved file's finish_reason is data
        text = fit_parts(parts, self._header.size.width or 10_000)
        if text != self._header_text:  # one line, fixed height: no layout needed
            self._header_text = text
            self._header.update(text, layout=False)

    def fork_count(self) -> int:
        """How many of the reply's tokens are forks. Counted incrementally while it streams (a
        flush costs O(new tokens)); the last token is always looked at again, since the finished
        reply settles it."""
        tokens, key = self.tokens, (self.node.version, self.forks)
        counted, forks = self._forks_before
        if self._forks_of is None or self._forks_of[0] is not key[0] or self._forks_of[1] != key[1] \
                or counted > len(tokens) - 1:
            self._forks_of, counted, forks = key, 0, 0
        while counted < len(tokens) - 1:
            forks += self.forks.is_fork(tokens[counted])
            counted += 1
        self._forks_before = (counted, forks)
        return forks + (1 if tokens and self.forks.is_fork(tokens[-1]) else 0)

    def set_perplexity(self, value: float | None) -> None:
        self.perplexity = value
        if self._ready:
            self._update_header()

    def set_forks(self, rule: ForkRule) -> None:
        """Count forks by another rule (the thresholds changed)."""
        self.forks = rule
        if self._ready:
            self._update_header()

    def on_resize(self) -> None:
        self._update_header()

    def on_click(self, event: Click) -> None:
        index = event.style.meta.get("token") if event.style else None
        if not isinstance(index, int):
            if not self.tokens:
                return
            index = 0  # a click on the Markdown face starts inspecting the reply
        event.stop()
        self.post_message(self.TokenClicked(self, index))


def _within(marks: list[Mark], start: int, end: int) -> list[Mark]:
    """The marks in [start, end), moved to offsets from `start` (a mark never crosses a
    newline, and chunks are cut at one)."""
    return [(a - start, b - start, role) for a, b, role in marks if start <= a < end]


def fit_parts(parts: list[tuple[str, int]], width: int, sep: str = " · ") -> str:
    """Join (text, rank) parts with `sep` in at most `width` cells: parts of the highest rank go
    first (rank 0 stays), each whole; what is left that still does not fit ends at the last
    whole part that does."""
    kept = list(parts)
    while cell_len(sep.join(t for t, _r in kept)) > width and any(r for _t, r in kept):
        worst = max(r for _t, r in kept)
        kept.remove(next(p for p in reversed(kept) if p[1] == worst))
    shown: list[str] = []
    for text, _rank in kept:
        if cell_len(sep.join([*shown, text])) > width and shown:
            break
        shown.append(text)
    return sep.join(shown)
