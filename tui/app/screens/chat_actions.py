"""What the user does to the conversation as a whole: regenerate, edit the last or any earlier
message, delete a message and what follows, flip between versions, set the system prompt, start a
new chat, resume the last one, open a chat from the library. Each that
would replace or cut the live chat keeps it first: in the library (committed now, no question),
or, when the library cannot take it, once the user chose in `ReplaceChatDialog` (keep a copy,
discard, or change nothing).

A helper the chat screen owns (`ChatScreen.conversation_actions`), typed by what it needs of the
screen (`ChatHost`); the screen's ``action_*`` methods call it. The library is the one store
(`tui.app.library_sync`): "resume" opens its most recently changed chat but the live one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from textual.widget import Widget

from engine.core.chat.conversation import Conversation, Node
from engine.core.library import LibraryError
from tui.app.library_sync import LibrarySync
from tui.app.screens.dialogs import TextDialog
from tui.app.screens.message_picker import MessagePicker
from tui.app.screens.replace_chat import DISCARD, SAVE, ReplaceChatDialog
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.transcript import Transcript
from tui.app.screens.host import ScreenHost

if TYPE_CHECKING:
    from tui.app.controller import ChatController
    from tui.app.screens.chat_search import SearchActions


class ChatHost(ScreenHost, Protocol):
    """What the conversation actions need of the chat screen (`ChatScreen` is one)."""

    controller: ChatController
    chat_search: SearchActions

    def set_focus(self, widget: Widget | None, scroll_visible: bool = True) -> None: ...

    def clear_panels(self) -> None: ...


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class ConversationActions:
    """The chat-level actions of the main screen (see the module docstring)."""

    def __init__(self, screen: ChatHost, library: LibrarySync) -> None:
        self.screen = screen
        self.library = library

    @property
    def controller(self) -> ChatController:
        return self.screen.controller

    def why_not_now(self) -> str | None:
        """Why no turn can start right now, as a short note (None: one can)."""
        if self.controller.busy:
            return "Busy: Esc stops."
        return "A model is loading." if self.controller.loading else None

    def regenerate(self) -> None:
        if not self.controller.regenerate():
            self.screen.notify(self.why_not_now() or "Nothing to regenerate yet.")

    def edit_last(self) -> None:
        user = self.controller.last_user()
        if user is None or not self.controller.can_start:
            self.screen.notify(self.why_not_now() or "No message to edit yet.")
            return
        self.screen.app.push_screen(TextDialog("Edit your last message", user.version.text), self._resend_last)

    def _resend_last(self, text: str | None) -> None:
        if text and text.strip():
            self.screen.query_one(Transcript).clear()
            self.controller.edit_last_user(text.strip())

    def system_prompt(self) -> None:
        def done(text: str | None) -> None:
            if text is not None:
                self.controller.set_system_prompt(text.strip())
                self.screen.query_one(Transcript).show(self.controller.conversation)
                self.controller.prepare()
        self.screen.app.push_screen(TextDialog("System prompt", self.controller.conversation.system_prompt), done)

    def flip(self, node: Node, step: int) -> None:
        """Show another version of `node` ([ / ]); the next reply continues the branch shown."""
        if self.controller.busy:
            self.screen.notify("A reply is streaming: Esc stops it first.", severity="warning")
        elif not self.controller.flip(node, step):
            self.screen.app.bell()
        else:
            transcript = self.screen.query_one(Transcript)
            transcript.show(self.controller.conversation)
            transcript.reselect()
            self.controller.prepare()  # the next reply continues the branch now shown

    def edit_message(self) -> None:
        """Pick any message of yours, edit it, and resend from there."""
        users = [n for n in self.controller.conversation.path() if n.role == "user"]
        if not users or not self.controller.can_start:
            self.screen.notify(self.why_not_now() or "No message to edit yet.")
            return

        def picked(index: int | None) -> None:
            if index is not None:
                node = users[index]
                self.screen.app.push_screen(TextDialog(f"Edit message {index + 1}", node.version.text),
                                            lambda text: self._resend_from(node, text))
        self.screen.app.push_screen(MessagePicker("Edit which message of yours?", users), picked)

    def _resend_from(self, node: Node, text: str | None) -> None:
        if text and text.strip() and self.controller.can_start:
            self.screen.query_one(Transcript).clear()
            self.controller.edit_user(node, text.strip())

    def delete_message(self) -> None:
        """Pick a message; it and everything after it go (asked first, with a copy offered)."""
        path = self.controller.conversation.path()
        if not path or not self.controller.can_start:
            self.screen.notify(self.why_not_now() or "No message to delete yet.")
            return

        def picked(index: int | None) -> None:
            if index is None:
                return
            after = len(path) - index - 1
            what = f"Delete message {index + 1}" + (f" and the {after} after it" if after else "")
            self.ask_to_keep(what, lambda: self._delete(path[index]))
        self.screen.app.push_screen(MessagePicker("Delete which message (and what follows)?", path), picked)

    def _delete(self, node: Node) -> None:
        if self.controller.delete_from(node):
            self.show_new_conversation()

    def new_chat(self) -> None:
        if self.controller.busy:
            self.screen.notify("Busy: Esc stops the reply first.")
            return
        self.replace_chat("Start a new chat", self._new_chat)

    def _new_chat(self) -> None:
        if self.controller.busy:
            return
        self.controller.new_chat()
        self.show_new_conversation()

    def replace_chat(self, action: str, then: Callable[[], object]) -> None:
        """Run `then` (which replaces the live chat) once the chat is kept: in the library,
        committed now, without a question; when the library cannot take it, once the user chose to
        keep a copy, discard it, or cancel. An empty chat is simply replaced."""
        if self.controller.conversation.root is None:
            then()
            return
        if self.library.kept():
            then()
            self.screen.notify("The chat you had is in the library (Ctrl+G).")
            return
        self.ask_to_keep(action, then)

    def ask_to_keep(self, action: str, then: Callable[[], object]) -> None:
        """Run `then` once the user chose: keep a copy of the chat first, discard it, or cancel.
        Also for cutting the live chat itself (a delete), whose row the library then cuts too."""
        conversation = self.controller.conversation

        def chosen(choice: str | None) -> None:
            if choice == SAVE and not self._keep(conversation):
                return  # not kept: nothing is replaced
            if choice in (SAVE, DISCARD):
                then()
        self.screen.app.push_screen(ReplaceChatDialog(action, len(conversation.path())), chosen)

    def _keep(self, conversation: Conversation) -> bool:
        """A copy in the library, else in a rescue file; False (and one line) if neither can."""
        try:
            where = self.library.keep_copy(conversation)
        except OSError as exc:
            self.screen.notify(f"Could not save the chat, so it was kept open: {exc}", severity="error", timeout=15)
            return False
        self.screen.notify(where)
        return True

    def show_new_conversation(self) -> None:
        """Redraw the transcript for the controller's (new, resumed or reopened) conversation; no
        turn stats; the input has the focus (what is typed next is a message, #30.1)."""
        transcript = self.screen.query_one(Transcript)
        transcript.clear()
        transcript.show(self.controller.conversation)
        self.screen.clear_panels()
        self.screen.chat_search.end_search()
        self.screen.set_focus(self.screen.query_one(ChatInput))  # now: keys typed right after go to it

    def resume_last(self) -> None:
        """Open the library's most recently changed chat but the live one (read off the loop)."""
        why = self.why_not_now()
        if why is not None:
            self.screen.notify(why)
            return
        self.screen.run_worker(self._resume(), group="resume", exclusive=True)

    async def _resume(self) -> None:
        await self.library.ready()  # the chat files of older versions are in by then
        try:
            chat_id = await asyncio.to_thread(self.library.latest, self.library.live_id())
        except LibraryError as exc:
            self.screen.notify(f"Could not read the library: {first_line(exc)}", severity="error", timeout=15)
            return
        if chat_id is None:
            self.screen.notify("No other chat in the library yet: every chat is kept there as it happens.",
                               severity="warning")
            return
        await self.open_stored(chat_id, resumed=True)

    async def open_stored(self, chat_id: str, resumed: bool = False) -> None:
        """Make the stored chat the live one, exactly as it was (branches, tokens and candidates,
        parameters), once the live one is kept; later changes are saved to its row."""
        if chat_id == self.library.live_id():
            self.screen.notify("That chat is the one open.")
            return
        try:
            title, conversation = await asyncio.to_thread(self.library.read, chat_id)
        except (LibraryError, ValueError) as exc:
            self.screen.notify(f"Could not open the chat: {first_line(exc)}", severity="error", timeout=15)
            return
        verb = "Resumed" if resumed else "Opened"
        self.replace_chat(f"{'Resume' if resumed else 'Open'} “{title}”",
                          lambda: self._opened(conversation, chat_id, f"{verb} “{title}”"))

    def _opened(self, conversation: Conversation, chat_id: str, what: str) -> None:
        refused = self.controller.resume(conversation)
        if refused is not None:
            self.screen.notify(refused, severity="warning", timeout=15)
            return
        self.library.adopt(conversation, chat_id)
        self.show_new_conversation()
        model = self.controller.model_folder
        foreign = any(v.tokens is not None and not v.ids_fit(model) for n in conversation.iter_nodes() for v in n.versions)
        note = " Its replies came from another model: they continue as text." if foreign else ""
        self.screen.notify(f"{what} ({len(conversation.path())} messages).{note}")
