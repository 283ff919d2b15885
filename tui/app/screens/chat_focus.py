"""Focus follows intent (#30.1): what is typed as text is never taken as a command.

The trap it closes: after Esc (the transcript has the focus) a new chat, or a dialog closed,
left the focus in the transcript, where letters are parameter keys: "What is 2 plus 3?" lowered
the temperature at every t and sent nothing. The rules:

- back from any dialog, and on a new, resumed or reopened chat, the input has the focus
  (`ConversationActions.show_new_conversation`); the search dialog alone places it itself;
- outside the input, a printable key that nothing is bound to goes to the input, which takes
  the focus: a message typed into the transcript is kept from its first unbound letter on;
- a parameter a key changes is shown where it changed (`ParamActions.set_params`: its panel row
  flashes, or a toast says it when the panel is out of sight).

A helper the chat screen owns (`ChatScreen.focus_rules`), typed by what it needs (`FocusHost`).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from textual import events
from textual.css.query import NoMatches
from textual.widget import Widget

from tui.app.widgets.chat_input import ChatInput

W = TypeVar("W", bound=Widget)


class FocusHost(Protocol):
    """What the focus rules need of the chat screen."""

    @property
    def focused(self) -> Widget | None: ...

    @property
    def active_bindings(self) -> dict[str, Any]: ...

    def query_one(self, selector: type[W]) -> W: ...

    def set_focus(self, widget: Widget | None, scroll_visible: bool = True) -> None: ...


class FocusFollowsIntent:
    """The chat screen's focus rules (see the module docstring)."""

    def __init__(self, screen: FocusHost) -> None:
        self.screen = screen
        self.keep_focus = False  # set by a dialog that places the focus itself (the search)

    def screen_resumed(self) -> None:
        """Back from any dialog (help, library, picker, palette, a value, a question): the input
        has the focus, so what is typed next is a message, never a parameter key. (The search
        dialog alone places the focus itself: on its match, for n / N.)"""
        if self.keep_focus:
            self.keep_focus = False
            return
        try:
            chat_input = self.screen.query_one(ChatInput)
        except NoMatches:  # not composed yet
            return
        self.screen.set_focus(chat_input)  # now, not after the keys already queued

    def typed_key(self, event: events.Key) -> bool:
        """Whether a key that reached the app (`LogitscopeApp.on_key`, before its bindings) is
        text, now put into the input (True). Two cases, both printable keys sent to a widget
        other than the input:

        - nothing is bound to it there: the start of a message; the input takes the focus;
        - the input has the focus already: the input stops every printable key it takes, so
          this one was queued for the transcript while the key before it (Ctrl+N, an unbound
          letter) moved the focus; it is text like its neighbours ("unfinished question" typed
          fast after Esc came out as "fhed qeo", the rest stepping parameters; seen in tmux).

        Decided at the app, not on the way up: keys reach the app in the order typed, each
        after the one before has acted, so the letters keep their order.
        """
        if not event.is_printable or event.character is None:
            return False
        chat_input = self.screen.query_one(ChatInput)
        if self.screen.focused is not chat_input and any(key in self.screen.active_bindings for key in event.aliases):
            return False
        event.stop()
        self.screen.set_focus(chat_input)
        chat_input.insert(event.character)
        return True
