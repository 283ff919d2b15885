"""`/` searches the whole chat, every branch (#30.6); n / N then move between the matches.

A mixin of `ChatScreen` (kept apart so the screen stays a router). The search itself is
`engine.core.chat.search` (pure); here: ask for the text, show a match (its branch made the shown
one, the reply's token under the match selected, so its candidates show), and step. While a
search is on, n / N in the transcript go to the next / previous match instead of the next
unlikely token; an empty search turns it off, and so does anything that changes the chat.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.core.chat.search import Match, find, reveal
from tui.app.messages import SearchStep
from tui.app.screens.dialogs import ValueDialog
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.message_views import UserView
from tui.app.widgets.transcript import Transcript

if TYPE_CHECKING:
    from tui.app.controller import ChatController


class SearchActions:
    """Needs `controller`, `query_one`, `notify` and `app` (the screen has them)."""

    controller: ChatController
    _matches: list[Match] = []
    _match_at = 0
    _query = ""
    _keep_focus: bool  # the search dialog places the focus itself (`chat_focus.FocusFollowsIntent`)

    def action_search(self) -> None:
        if self.controller.busy:
            self.notify("A reply is streaming: Esc stops it first.", severity="warning")  # type: ignore[attr-defined]
            return
        self._keep_focus = True
        self.app.push_screen(  # type: ignore[attr-defined]
            ValueDialog("Search this chat (every branch)", self._query, lambda _text: None,
                        "Enter finds; then n / N move between the matches. Empty: search off."),
            self._searched)

    def _searched(self, text: str | None) -> None:
        transcript = self.query_one(Transcript)  # type: ignore[attr-defined]
        text = (text or "").strip() if text is not None else None  # type: ignore[assignment]
        if not text:
            if text is not None and self._matches:
                self.notify("Search off.", timeout=2)  # type: ignore[attr-defined]
            self.end_search()
            self.query_one(ChatInput).focus()  # type: ignore[attr-defined]
            return
        self._query = text
        matches = find(self.controller.conversation, text)
        if not matches:
            self.end_search()
            self.notify(f"Nothing in this chat matches “{text}”.", timeout=4)  # type: ignore[attr-defined]
            self.query_one(ChatInput).focus()  # type: ignore[attr-defined]
            return
        self._matches, transcript.searching = matches, True
        transcript.focus()
        self.refresh_bindings()  # type: ignore[attr-defined]  # the footer says "n Match"
        self._show_match(0)

    def end_search(self) -> None:
        """No search: n / N are the unlikely-token keys again."""
        self._matches, self._match_at = [], 0
        transcript = self.query_one(Transcript)  # type: ignore[attr-defined]
        if transcript.searching:
            transcript.searching = False
            self.refresh_bindings()  # type: ignore[attr-defined]

    def on_search_step(self, event: SearchStep) -> None:
        if self._matches:
            self._show_match((self._match_at + event.step) % len(self._matches))

    def _show_match(self, at: int) -> None:
        match = self._matches[at]
        self._match_at = at
        if self.controller.busy or not reveal(self.controller.conversation, match):
            self.end_search()
            self.notify("The chat changed: search again (/).", timeout=4)  # type: ignore[attr-defined]
            return
        transcript = self.query_one(Transcript)  # type: ignore[attr-defined]
        transcript.show(self.controller.conversation)
        self.controller.prepare()  # the branch now shown is the one the next reply continues
        tokens = transcript.tokens_of(match.node)  # a reply's, or the user's scored text's (#33.1)
        if tokens:
            transcript.select_token(match.node, _token_at(tokens, match.start))
        else:
            transcript.clear()
            for user in transcript.query(UserView):
                if user.node is match.node:
                    user.scroll_visible()
        where = "" if len(match.node.versions) == 1 else f", version {match.version + 1}/{len(match.node.versions)}"
        note = f"Match {at + 1} of {len(self._matches)} ({match.node.role}{where}). n / N: next / previous."
        self.notify(note, timeout=3)  # type: ignore[attr-defined]


def _token_at(tokens: list, offset: int) -> int:
    """The index of the token whose text holds character `offset` of the joined texts."""
    seen = 0
    for index, token in enumerate(tokens):
        seen += len(token.text)
        if offset < seen:
            return index
    return max(0, len(tokens) - 1)
