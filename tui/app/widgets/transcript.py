"""The scrolling transcript and its token cursor.

It shows the visible path of the conversation (one view per message) and owns the view state of
token inspection: which reply and which token are selected. It never talks to the engine: moves
of the cursor go up as `TokenSelected`, digit keys as `CandidateChosen`.

A long chat is shown lazily (`transcript_window`): its newest messages are mounted, and earlier
ones when the view scrolls up to them or the cursor moves to them, so opening and closing a
2,000-message chat costs what a short one does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from textual.containers import VerticalScroll
from textual.events import Click
from textual.geometry import Region
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from engine.core.api import TokenEvent
from engine.core.forks import ForkRule
from tui.app.bindings import bindings_for
from tui.app.messages import CandidateChosen, SearchStep, TokenSelected
from engine.core.chat.conversation import Conversation, Node, Version
from tui.app.widgets.message_views import AssistantView, UserView, Welcome, welcome_text
from tui.app.widgets.token_chunk import TokenChunk
from tui.app.widgets.render import HeatPalette
from tui.app.scores import ChatScores
from tui.app.widgets.token_jumps import find_token
from tui.app.widgets.transcript_window import window_for, BATCH, earlier_text, plan
from tui.app.widgets.token_click import TokenClicked


class EarlierMessages(Static):
    """The line above the mounted messages saying how many earlier ones are not shown yet."""

    DEFAULT_CSS = """
    EarlierMessages { color: $text-muted; height: 1; }
    """

    def on_click(self, event: Click) -> None:
        event.stop()
        parent = self.parent
        if isinstance(parent, Transcript):
            parent.show_earlier()


class Transcript(VerticalScroll, can_focus=True):
    """Message views for the visible path; follows the stream unless scrolled up."""

    DEFAULT_CSS = """
    Transcript { padding: 0 1; }
    Transcript:focus { background: $surface; }
    """
    BINDINGS = bindings_for("transcript")

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.conversation = Conversation()
        self.heat: HeatPalette | None = None
        self.low_threshold = 0.1
        self.forks = ForkRule()  # what f / F stop at and the replies' headers count (the screen sets it)
        self.selected: AssistantView | UserView | None = None  # the message holding the token cursor
        self.scores: ChatScores | None = None  # the messages' scored tokens (#33.1; the screen sets it)
        self.differences: frozenset[int] = frozenset()  # id(token)s where two models' first choices differ (#33.5)
        self._model: str | None = None  # the loaded model's name for the welcome; None: the demo
        self._plain = False  # the loaded model has no chat template (the welcome says so)
        self._system: Node | None = None
        self._path: list[Node] = []  # the path shown (the system prompt first, when there is one)
        self._first = 0  # the index in `_path` of the first mounted view (those before are not)
        self._earlier_due = False  # a scroll to the top asked for earlier messages; not mounted yet
        self.searching = False  # a chat search is on: n / N step through its matches (`chat_search`)

    def on_mount(self) -> None:
        self.anchor()
        self._welcome(True)

    def _welcome(self, shown: bool) -> None:
        """The welcome stands in for the chat while it is empty."""
        welcome = self.query_children(Welcome)
        if shown and not welcome:
            self.mount(Welcome(self._model, self._plain, self._keymap()))
        elif not shown:
            welcome.remove()

    # --- what the screen calls

    def welcome_model(self, model: str | None, plain: bool = False) -> None:
        """Name the loaded model in the welcome (None: the demo, with what it knows); `plain`:
        it has no chat template."""
        self._model, self._plain = model, plain
        for welcome in self.query_children(Welcome):
            welcome.update(welcome_text(model, plain, self._keymap()))

    def _keymap(self) -> dict[str, str]:
        """The user's [keys] (the app's keymap), for the keys the welcome names."""
        return dict(getattr(self.app, "keymap", {}))

    def show(self, conversation: Conversation) -> None:
        """Make the views match the conversation's visible path (reusing views that still fit;
        of a long new path, only the newest messages are mounted)."""
        self.conversation = conversation
        path = self._system_nodes(conversation) + conversation.path()
        self._welcome(not path)
        views = self._views()
        size = self.size if self.size.height else self.app.size  # not laid out yet: the terminal's
        change = plan(self._path, self._first, len(views), path, window_for(path, 2 * size.height, size.width))
        for view in views[change.keep:]:
            if view is self.selected:
                self.selected = None
            view.remove()
        for view in views[: change.keep]:
            self._resync(view)
        self._path, self._first = path, change.first
        self.mount_all([self._view_for(node) for node in path[change.mount_from:]])
        self._update_earlier()
        if self.cursor is None:
            self.anchor()  # a resumed chat, another branch: its newest message in view
        if self._first > 0:
            self.call_after_refresh(self._fill)
        self.post_message(self.Shown())

    def _fill(self) -> None:
        """Mount earlier messages while the mounted ones do not fill two screens (short messages
        on a tall terminal): with nothing to scroll, scrolling up could never ask for them."""
        if self._first > 0 and self.is_attached and self.virtual_size.height < 2 * max(self.size.height, 1):
            self._mount_earlier(self._first - BATCH)
            self.call_after_refresh(self._fill)

    def _views(self) -> list[UserView | AssistantView]:
        """The mounted message views, in order."""
        return [v for v in self.query_children().results() if isinstance(v, (UserView, AssistantView))]

    def _update_earlier(self) -> None:
        """The "earlier messages" line: above the first view while some are not mounted."""
        line = next(iter(self.query_children(EarlierMessages)), None)
        if self._first == 0:
            if line is not None:
                line.remove()
        elif line is None:
            views = self._views()
            self.mount(EarlierMessages(earlier_text(self._first), markup=False),
                       before=views[0] if views else None)
        else:
            line.update(earlier_text(self._first))

    def _mount_earlier(self, start: int) -> None:
        """Mount the views of `_path[start:_first]` above the first mounted one."""
        start = max(0, start)
        if start >= self._first:
            return
        views = self._views()
        new = [self._view_for(node) for node in self._path[start:self._first]]
        self._first = start
        self.mount_all(new, before=views[0] if views else None)
        self._update_earlier()

    def show_earlier(self) -> None:
        """Mount the next `BATCH` earlier messages, keeping what is on screen where it is."""
        views = self._views()
        if self._first == 0 or not views:
            self._earlier_due = False
            return
        anchor, offset = views[0], views[0].virtual_region.y - self.scroll_y
        self.release_anchor()  # the user went up: the view must not jump back to the newest message
        self._mount_earlier(self._first - BATCH)

        def keep_in_view(last: bool) -> None:
            self.scroll_to(y=anchor.virtual_region.y - offset, animate=False, immediate=True)
            self._earlier_due = self._earlier_due and not last

        self.call_after_refresh(keep_in_view, False)
        self.call_after_refresh(self.call_after_refresh, keep_in_view, True)  # once the new views are laid out

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        """Scrolling up to within a screen of the top mounts earlier messages."""
        super().watch_scroll_y(old_value, new_value)
        if new_value < old_value and new_value <= self.size.height and self._first > 0 and not self._earlier_due:
            self._earlier_due = True
            self.call_later(self.show_earlier)

    def _revealed(self, node: Node) -> AssistantView | UserView | None:
        """The view of `node`, mounting the earlier messages down to it when it is above the
        mounted ones (a cursor moving back through the replies)."""
        view = self.any_view_of(node)
        if view is None:
            index = next((i for i in range(self._first) if self._path[i] is node), None)
            if index is not None:
                self._mount_earlier(index)
                view = self.any_view_of(node)
        return view

    def _system_nodes(self, conversation: Conversation) -> list[Node]:
        """The system prompt shown as a first message (a stable node while its text is unchanged)."""
        if not conversation.system_prompt:
            return []
        if self._system is None or self._system.version.text != conversation.system_prompt:
            self._system = Node("system", [Version(conversation.system_prompt)])
        return [self._system]

    def _view_for(self, node: Node) -> UserView | AssistantView:
        scored = self.scores.of(node.version) if self.scores is not None else None
        if node.role == "assistant":
            view = AssistantView(node)
            view.heat, view.forks = self.heat, self.forks
            view.perplexity = scored.perplexity if scored is not None else None
            return view
        user = UserView(node)
        user.heat, user.scores = self.heat, scored
        return user

    def _resync(self, view: object) -> None:
        if isinstance(view, AssistantView):
            if view.cursor is not None and view.cursor >= len(view.tokens):
                view.cursor = None
            view.rebuild()
        elif isinstance(view, UserView):
            self._rescore(view)

    def _rescore(self, view: UserView | AssistantView) -> None:
        """Give a view the scores of the version it shows (a cursor past its tokens leaves)."""
        scored = self.scores.of(view.node.version) if self.scores is not None else None
        if isinstance(view, AssistantView):
            view.set_perplexity(scored.perplexity if scored is not None else None)
            return
        if view is self.selected and view.cursor is not None and (scored is None or view.cursor >= len(scored.tokens)):
            self.clear()
        view.set_scores(scored)

    def scores_changed(self) -> None:
        """New scores: every mounted message shows its own (tokens, perplexity)."""
        for view in self._views():
            self._rescore(view)

    def path_nodes(self) -> list[Node]:
        """The path shown, the system prompt first when there is one: one node per message the
        engine reads (`Conversation.messages`)."""
        return list(self._path)

    def tokens_of(self, node: Node) -> list[TokenEvent]:
        """The tokens the cursor walks in `node`: a reply's own, a read message's scored ones."""
        if node.role == "assistant":
            return node.version.tokens or []
        return self.scores.tokens(node) if self.scores is not None else []

    def view_of(self, node: Node) -> AssistantView | None:
        return next((v for v in self.query_children(AssistantView) if v.node is node), None)

    def any_view_of(self, node: Node) -> AssistantView | UserView | None:
        return next((v for v in self._views() if v.node is node), None)

    def stream_grew(self, node: Node, follow: bool) -> None:
        """New tokens in a streaming reply; the cursor follows the newest when asked."""
        view = self.view_of(node)
        if view is None:
            return
        view.sync()
        if follow:
            self._select(view, len(view.tokens) - 1 if view.tokens else None, scroll=False)

    def set_forks(self, rule: ForkRule) -> None:
        """New fork thresholds: f / F stop by them and every reply's header counts by them."""
        self.forks = rule
        for view in self.query_children(AssistantView):
            view.set_forks(rule)

    def set_heat(self, heat: HeatPalette | None) -> None:
        self.heat = heat
        for view in self._views():
            view.set_heat(heat)

    # --- the cursor

    @property
    def cursor(self) -> tuple[Node, int] | None:
        if self.selected is None or self.selected.cursor is None:
            return None
        return self.selected.node, self.selected.cursor

    @property
    def cursor_token(self) -> TokenEvent | None:
        """The token under the cursor: a reply's, or a read message's scored one."""
        cursor = self.cursor
        tokens = self.tokens_of(cursor[0]) if cursor is not None else []
        return tokens[cursor[1]] if cursor is not None and cursor[1] < len(tokens) else None

    def _select(self, view: AssistantView | UserView | None, index: int | None, scroll: bool = True) -> None:
        """Move the cursor; a cursor that scrolls releases the view's anchor, and leaving the
        cursor restores it: the view follows the newest message whenever the cursor is not in use."""
        if view is None or index is None:
            self.anchor()
        if view is None and self.selected is None:
            return  # nothing was selected: no news to post
        if view is not None and not view.ready:  # just mounted (an earlier message revealed): once it is laid out
            if view.is_attached:
                self.call_after_refresh(self._select, view, index, scroll)
            return
        if self.selected is not None and self.selected is not view:
            self.selected.set_cursor(None)
        self.selected = view
        chunk = view.set_cursor(index) if view is not None else None
        if scroll and chunk is not None and index is not None:
            self.release_anchor()
            if chunk.lines_of(index):
                self._scroll_to_cursor(chunk, index)
            else:  # the chunk is not laid out yet: scroll once it is
                self.call_after_refresh(self._scroll_to_cursor, chunk, index)
        node = view.node if view is not None else None
        at = index if view is not None else None
        tokens = view.tokens if view is not None else []
        self.post_message(TokenSelected(node, at, tokens[at] if at is not None and 0 <= at < len(tokens) else None))

    def _scroll_to_cursor(self, chunk: TokenChunk, index: int) -> None:
        """Bring the lines of token `index` into view: a chunk may be taller than the screen.

        The lines' region is carried up to this container's virtual space the way
        `Widget.scroll_to_widget` carries a widget's (the views in between do not scroll).
        """
        lines = chunk.lines_of(index)
        if not lines:
            self.scroll_to_widget(chunk, animate=False)
            return
        box = chunk.virtual_region
        region = Region(box.x, box.y + lines.start, box.width, len(lines))
        widget: Widget = chunk
        while isinstance(widget.parent, Widget) and widget.parent is not self:
            container = widget.parent
            region = (region.translate(container.styles.margin.top_left)
                      .translate(container.styles.border.spacing.top_left)
                      .translate(container.virtual_region_with_margin.offset))
            widget = container
        self.scroll_to_region(region, animate=False)

    def select_token(self, node: Node, index: int | None) -> None:
        view = self._revealed(node)
        if view is not None:
            self._select(view, index)

    def clear(self) -> None:
        self._select(None, None)

    def _replies(self) -> list[AssistantView | UserView]:
        """The mounted messages that have tokens (replies, and read messages once scored)."""
        return [v for v in self._views() if v.tokens]

    def _reply_nodes(self) -> list[Node]:
        """Every message with tokens on the path shown, mounted or not (the cursor can go to any)."""
        return [n for n in self._path if self.tokens_of(n)]

    def on_token_clicked(self, event: TokenClicked) -> None:
        self.focus()
        self._select(event.view, event.index, scroll=False)

    # --- key actions

    def _ensure_selected(self) -> AssistantView | None:
        """Start inspecting at the last reply when nothing is selected yet."""
        if self.selected is None:
            replies = self._replies()
            if replies:
                self._select(replies[-1], len(replies[-1].tokens) - 1)
            return None
        return self.selected

    def action_move(self, step: int) -> None:
        view = self._ensure_selected()
        if view is not None and view.cursor is not None:
            self._select(view, max(0, min(len(view.tokens) - 1, view.cursor + step)))

    def action_edge(self, where: int) -> None:
        view = self._ensure_selected() or self.selected
        if view is not None and view.tokens:
            self._select(view, 0 if where == 0 else len(view.tokens) - 1)

    def action_next_low(self, step: int) -> None:
        """Jump to the next/previous token whose raw probability is under the threshold, in this
        reply or the ones after (before) it; with no token selected, from the chat's first
        (last) token. When there is none, say so (a bell is not seen; before #30.7 `n` with
        nothing selected only selected the last token, silently)."""
        if self.searching:
            self.post_message(SearchStep(step))
            return
        limit = math.log(self.low_threshold) if self.low_threshold > 0 else -math.inf
        self._jump(step, lambda token: token.logprob < limit, f"No token below {self.low_threshold * 100:g}%")

    def action_next_fork(self, step: int) -> None:
        """Jump to the next/previous fork (`engine.core.forks`: the model unsure there), as n / N
        do to unlikely tokens, in the replies only (a fork is where a reply could have gone
        another way); its candidates and what-if previews then show beside."""
        rule = self.forks
        self._jump(step, rule.is_fork, f"No fork ({rule.describe()})", replies_only=True)

    def action_next_difference(self, step: int) -> None:
        """Jump to the next/previous place where the second model's first choice differs from the
        first model's (#33.5), in any message the two compared."""
        if not self.differences:
            self.notify("No second model has read this chat (palette: Open a second model…), or they agree "
                        "everywhere.", timeout=4)
            return
        differences = self.differences
        self._jump(step, lambda token: id(token) in differences, "No place where the two models' first choices differ")

    def _jump(self, step: int, hit: Callable[[TokenEvent], bool], none: str, replies_only: bool = False) -> None:
        """Move the cursor to the next/previous token `hit` accepts (`token_jumps.find_token`),
        or say `none` and where it looked."""
        replies = [n for n in self._reply_nodes() if n.role == "assistant" or not replies_only]
        if not replies:
            self.notify("No reply to look in yet.", timeout=3)
            return
        chosen = self.selected
        at = next((i for i, node in enumerate(replies) if chosen is not None and node is chosen.node), None)
        start = (at, chosen.cursor) if at is not None and chosen is not None and chosen.cursor is not None else None
        found = find_token([self.tokens_of(node) for node in replies], start, step, hit)
        if found is not None:
            self._select(self._revealed(replies[found[0]]), found[1])
            return
        where = "in this chat" if start is None else "after this one" if step > 0 else "before this one"
        self.notify(f"{none} {where}.", timeout=3)

    def action_reply(self, step: int) -> None:
        replies = self._reply_nodes()
        if not replies:
            return
        at = next((i for i, node in enumerate(replies) if self.selected and node is self.selected.node), None)
        if at is None:
            self._select(self._revealed(replies[-1]), 0)
            return
        if 0 <= at + step < len(replies):
            self._select(self._revealed(replies[at + step]), 0)

    def action_clear_cursor(self) -> None:
        self.clear()

    def action_choose(self, position: int) -> None:
        """A digit: continue from that candidate. The screen decides which token (the selected
        one, else the one the candidates panel shows) and says why not when it cannot."""
        self.post_message(CandidateChosen(position))

    def action_flip(self, step: int) -> None:
        """Ask to show the previous/next version of the selected reply (or the last message
        that has versions); the screen decides, because it knows whether a reply is streaming."""
        node = self.selected.node if self.selected is not None else self._last_multi()
        if node is None:
            self.app.bell()
        else:
            self.post_message(self.FlipRequested(node, step))

    def action_toggle_fold(self) -> None:
        """Fold or unfold the thinking block of the selected reply, else of the last reply that
        has one; a cursor inside a block being folded leaves it (its token is no longer shown)."""
        view = self.selected
        if view is None or view.thinking() is None:
            view = next((v for v in reversed(self._replies()) if v.thinking() is not None), None)
        if view is None:
            self.app.bell()
            return
        block = view.thinking()
        inside = view is self.selected and view.cursor is not None and block is not None and view.cursor < block.end
        if inside and not view.folded:
            self.clear()
        view.toggle_fold()

    def reselect(self) -> None:
        """Post the current selection again (the shown version changed under the cursor)."""
        cursor = self.cursor
        self.post_message(TokenSelected(*cursor, self.cursor_token) if cursor else TokenSelected(None, None))

    def _last_multi(self) -> Node | None:
        return next((n for n in reversed(self.conversation.path()) if len(n.versions) > 1), None)

    def action_focus_input(self) -> None:
        self.screen.focus_next("ChatInput")

    class Shown(Message):
        """The views were matched to the conversation (`show`): what it reads may be scored."""

    @dataclass(eq=False)
    class FlipRequested(Message):
        """The user wants `node` to show its previous (-1) or next (+1) version."""

        node: Node
        step: int
