"""What the user does to the conversation as a whole: edit any earlier message, delete a message
and what follows, start a new chat, resume the saved one. Each that would replace or cut the live
chat asks first (`ReplaceChatDialog`: save it to a file of its own, discard it, or keep it).

A base class of `ChatScreen` (kept apart so the screen stays one screenful of routing); it uses
the screen's controller, its saved-conversation path and its widgets.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Callable

from textual.screen import Screen

from tui.app.controller import ChatController
from engine.core.chat.conversation import Conversation, Node
from engine.core.chat.store import KEPT_FOLDER, load_conversation, save_copy
from tui.app.screens.dialogs import TextDialog
from tui.app.screens.message_picker import MessagePicker
from tui.app.screens.replace_chat import DISCARD, SAVE, ReplaceChatDialog
from tui.app.widgets.candidates import CandidatesPanel
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.status_bar import StatusBar
from tui.app.widgets.transcript import Transcript


class ConversationActions(Screen[None]):
    """The chat-level actions of the main screen (see the module docstring)."""

    controller: ChatController
    saved_conversation: Path | None  # the file written on quit, which "resume" reopens
    _dropped: int  # oldest messages the last turn left out to fit the context

    def _why_not_now(self) -> str | None:
        """Why no turn can start right now, as a short note (None: one can)."""
        if self.controller.busy:
            return "Busy: Esc stops."
        return "A model is loading." if self.controller.loading else None

    def action_edit_message(self) -> None:
        """Pick any message of yours, edit it, and resend from there."""
        users = [n for n in self.controller.conversation.path() if n.role == "user"]
        if not users or not self.controller.can_start:
            self.notify(self._why_not_now() or "No message to edit yet.")
            return

        def picked(index: int | None) -> None:
            if index is not None:
                node = users[index]
                self.app.push_screen(TextDialog(f"Edit message {index + 1}", node.version.text),
                                     lambda text: self._resend_from(node, text))
        self.app.push_screen(MessagePicker("Edit which message of yours?", users), picked)

    def _resend_from(self, node: Node, text: str | None) -> None:
        if text and text.strip() and self.controller.can_start:
            self.query_one(Transcript).clear()
            self.controller.edit_user(node, text.strip())

    def action_delete_message(self) -> None:
        """Pick a message; it and everything after it go (asked first, with a save offered)."""
        path = self.controller.conversation.path()
        if not path or not self.controller.can_start:
            self.notify(self._why_not_now() or "No message to delete yet.")
            return

        def picked(index: int | None) -> None:
            if index is None:
                return
            after = len(path) - index - 1
            what = f"Delete message {index + 1}" + (f" and the {after} after it" if after else "")
            self.ask_to_keep(what, lambda: self._delete(path[index]))
        self.app.push_screen(MessagePicker("Delete which message (and what follows)?", path), picked)

    def _delete(self, node: Node) -> None:
        if self.controller.delete_from(node):
            self._show_new_conversation()

    def action_new_chat(self) -> None:
        if self.controller.busy:
            self.notify("Busy: Esc stops the reply first.")
            return
        self.replace_chat("Start a new chat", self._new_chat)

    def _new_chat(self) -> None:
        if self.controller.busy:
            return
        self.controller.new_chat()
        self._show_new_conversation()

    def replace_chat(self, action: str, then: Callable[[], None]) -> None:
        """Run `then` (which replaces the live chat) once the chat is kept: in the library,
        committed now, without a question; when the library cannot take it, once the user chose to
        save it to a file of its own, discard it, or cancel. An empty chat is simply replaced."""
        conversation = self.controller.conversation
        if conversation.root is None:
            then()
            return
        if self.app.library.kept():  # type: ignore[attr-defined]
            then()
            self.notify("The chat you had is in the library (Ctrl+G).")
            return
        self.ask_to_keep(action, then)

    def ask_to_keep(self, action: str, then: Callable[[], None]) -> None:
        """Run `then` once the user chose: save the chat to a file of its own first, discard it,
        or cancel. Also for cutting the live chat itself (a delete), which the library, saving the
        live chat as it changes, would not keep."""
        conversation = self.controller.conversation

        def chosen(choice: str | None) -> None:
            if choice == SAVE and not self._keep(conversation):
                return  # not saved: nothing is replaced
            if choice in (SAVE, DISCARD):
                then()
        self.app.push_screen(ReplaceChatDialog(action, len(conversation.path())), chosen)

    def _keep(self, conversation: Conversation) -> bool:
        """Save a copy beside the quit-time file; False (and one line) if that fails."""
        folder = (self.saved_conversation.parent if self.saved_conversation else Path(".")) / KEPT_FOLDER
        try:
            path = save_copy(conversation, folder)
        except OSError as exc:
            self.notify(f"Could not save the chat, so it was kept open: {exc}", severity="error", timeout=15)
            return False
        self.notify(f"Saved the chat to {path}")
        return True

    def _show_new_conversation(self) -> None:
        """Redraw the transcript for the controller's (new, resumed or reopened) conversation; no
        turn stats; the input has the focus (what is typed next is a message, #30.1)."""
        transcript = self.query_one(Transcript)
        transcript.clear()
        transcript.show(self.controller.conversation)
        self._clear_panels()
        self.end_search()  # type: ignore[attr-defined]
        self.set_focus(self.query_one(ChatInput))  # now: keys typed right after go to it

    def _clear_panels(self) -> None:
        """No old token's numbers, no old turn's stats or 'stopped'/'error' for a chat that is new
        (or resumed, or cut back): the panels describe the conversation on screen."""
        panel = self.query_one(CandidatesPanel)
        panel.streaming, panel.token = False, None
        bar = self.query_one(StatusBar)
        self._dropped = 0
        bar.stats = None
        if not self.controller.loading:
            bar.state = "ready" if self.controller.engine.model is not None else ""

    def action_resume_last(self) -> None:
        """Reopen the conversation saved when logitscope last quit (read off the event loop)."""
        why = self._why_not_now()
        if why is not None or self.saved_conversation is None:
            self.notify(why or "Nothing is saved here.")
            return
        self.run_worker(self._resume(self.saved_conversation), group="resume", exclusive=True)

    async def _resume(self, path: Path) -> None:
        try:
            conversation = await asyncio.to_thread(load_conversation, path)
        except FileNotFoundError:
            self.notify("No saved conversation yet: logitscope saves the current one when it quits.",
                        severity="warning")
            return
        except (OSError, ValueError) as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            self.notify(f"Could not read {path}: {reason}", severity="error", timeout=15)
            return
        self.replace_chat("Resume the saved chat", lambda: self._resumed(conversation))

    def _resumed(self, conversation: Conversation) -> None:
        refused = self.controller.resume(conversation)
        if refused is not None:
            self.notify(refused, severity="warning", timeout=15)
            return
        self._show_new_conversation()
        model = self.controller.model_folder
        foreign = any(v.tokens is not None and not v.ids_fit(model) for n in conversation.iter_nodes() for v in n.versions)
        note = " Its replies came from another model: they continue as text." if foreign else ""
        self.notify(f"Resumed the conversation saved on quit ({len(conversation.path())} messages).{note}")
