"""`/` searches the whole chat, every branch (#30.6); n / N then move between the matches.

The search itself is `engine.core.chat.search` (pure); here: ask for the text, show a match (its
branch made the shown one, the reply's token under the match selected, so its candidates show),
and step. While a search is on, n / N in the transcript go to the next / previous match instead
of the next unlikely token; an empty search turns it off, and so does anything that changes the
chat.

A helper the chat screen owns (`ChatScreen.chat_search`), typed by what it needs (`SearchHost`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from engine.core.api import TokenEvent
from engine.core.chat.search import Match, find, reveal
from tui.app.screens.chat_focus import FocusFollowsIntent
from tui.app.screens.dialogs import ValueDialog
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.message_views import UserView
from tui.app.widgets.transcript import Transcript
from tui.app.screens.host import ScreenHost

if TYPE_CHECKING:
    from tui.app.controller import ChatController


class SearchHost(ScreenHost, Protocol):
    """What the search needs of the chat screen."""

    controller: ChatController
    focus_rules: FocusFollowsIntent

    def refresh_bindings(self) -> None: ...


class SearchActions:
    """The chat screen's search (see the module docstring)."""

    def __init__(self, screen: SearchHost) -> None:
        self.screen = screen
        self.matches: list[Match] = []
        self.match_at = 0
        self.query = ""

    def search(self) -> None:
        if self.screen.controller.busy:
            self.screen.notify("A reply is streaming: Esc stops it first.", severity="warning")
            return
        self.screen.focus_rules.keep_focus = True  # the search dialog places the focus itself
        self.screen.app.push_screen(
            ValueDialog("Search this chat (every branch)", self.query, lambda _text: None,
                        "Enter finds; then n / N move between the matches. Empty: search off."),
            self._searched)

    def _searched(self, answer: str | None) -> None:
        transcript = self.screen.query_one(Transcript)
        text = (answer or "").strip() if answer is not None else None
        if not text:
            if text is not None and self.matches:
                self.screen.notify("Search off.", timeout=2)
            self.end_search()
            self.screen.query_one(ChatInput).focus()
            return
        self.query = text
        matches = find(self.screen.controller.conversation, text)
        if not matches:
            self.end_search()
            self.screen.notify(f"Nothing in this chat matches “{text}”.", timeout=4)
            self.screen.query_one(ChatInput).focus()
            return
        self.matches, transcript.searching = matches, True
        transcript.focus()
        self.screen.refresh_bindings()  # the footer says "n Match"
        self._show_match(0)

    def end_search(self) -> None:
        """No search: n / N are the unlikely-token keys again."""
        self.matches, self.match_at = [], 0
        transcript = self.screen.query_one(Transcript)
        if transcript.searching:
            transcript.searching = False
            self.screen.refresh_bindings()

    def step(self, step: int) -> None:
        """n / N while a search is on (`SearchStep`)."""
        if self.matches:
            self._show_match((self.match_at + step) % len(self.matches))

    def _show_match(self, at: int) -> None:
        controller = self.screen.controller
        match = self.matches[at]
        self.match_at = at
        if controller.busy or not reveal(controller.conversation, match):
            self.end_search()
            self.screen.notify("The chat changed: search again (/).", timeout=4)
            return
        transcript = self.screen.query_one(Transcript)
        transcript.show(controller.conversation)
        controller.prepare()  # the branch now shown is the one the next reply continues
        tokens = transcript.tokens_of(match.node)  # a reply's, or the user's scored text's (#33.1)
        if tokens:
            transcript.select_token(match.node, _token_at(tokens, match.start))
        else:
            transcript.clear()
            for user in transcript.query(UserView):
                if user.node is match.node:
                    user.scroll_visible()
        where = "" if len(match.node.versions) == 1 else f", version {match.version + 1}/{len(match.node.versions)}"
        note = f"Match {at + 1} of {len(self.matches)} ({match.node.role}{where}). n / N: next / previous."
        self.screen.notify(note, timeout=3)


def _token_at(tokens: list[TokenEvent], offset: int) -> int:
    """The index of the token whose text holds character `offset` of the joined texts."""
    seen = 0
    for index, token in enumerate(tokens):
        seen += len(token.text)
        if offset < seen:
            return index
    return max(0, len(tokens) - 1)
