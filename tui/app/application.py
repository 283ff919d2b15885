"""The Textual app: wiring only. The engine is injected (tests pass `engine.scripted.ScriptedEngine`).

Set-up order on mount: themes (built-in + user), the configured theme, the keymap from [keys],
every config problem as a notification, the chat screen, then the model loads in a worker while
the UI is already usable. Quitting commits the conversation to the library (a rescue file when the
library cannot take it) and closes the engine (its thread stopped and joined), also when the
terminal goes away mid-reply.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
from collections.abc import Iterable
from pathlib import Path

from textual import events
from textual.app import App, SystemCommand
from textual.driver import Driver
from textual.notifications import SeverityLevel
from textual.screen import Screen

from engine.models import list_local_models, normalise_spec, record_recent
from engine.core.api import EngineAPI
from engine.core.library import DB_NAME
from engine.core.settings import (
    ConfigError,
    LoadedConfig,
    data_dir,
    printable,
    save_settings,
    shortened,
    state_dir,
)
from tui.app.bindings import binding_defaults, binding_ids, bindings_for
from tui.app.commands import LogitscopeCommands
from tui.app.controller import ChatController, Post
from tui.app.keymap import build_keymap
from tui.app.library_sync import LibrarySync
from engine.core.chat.draft import draft_path, save_draft
from tui.app.widgets.chat_input import ChatInput
from tui.app.screens.chat import ChatScreen
from tui.app.screens.help import HelpScreen
from tui.app.library_actions import LibraryActions
from tui.app.paste_guard import paste_safe_driver
from tui.app.screens.model_picker import ModelPicker
from tui.app.themes import DEFAULT_DARK, load_builtin_themes, register_all, resolve_theme_name

QUIT_WAIT_S = 2.0  # the longest quitting waits for the engine: a stuck engine thread never keeps the app
TERMINATED = 128 + signal.SIGTERM  # the exit status after SIGTERM, as a shell reports a signalled job


FEW_PROBLEMS = 3  # config problems shown as toasts one by one; more become one summary toast


class LogitscopeApp(App[None]):
    """logitscope: chat with a local model and see what it almost said."""

    TITLE = "logitscope"
    BINDINGS = bindings_for("app")
    COMMANDS = App.COMMANDS | {LogitscopeCommands}

    def __init__(
        self,
        engine: EngineAPI,
        config: LoadedConfig,
        *,
        model: str | None = None,
        trust_remote_code: bool | None = None,
        config_dir: Path | None = None,
        save_dir: Path | None = None,
        library_path: Path | None = None,
    ) -> None:
        super().__init__()
        self.engine = engine
        self.loaded = config
        settings = config.config
        self.model_spec = model or settings.model.default
        self.trust_remote_code = settings.model.trust_remote_code if trust_remote_code is None else trust_remote_code
        self.config_dir = config_dir if config_dir is not None else config.user_path.parent
        self.save_dir = save_dir if save_dir is not None else state_dir()
        self.keymap: dict[str, str] = {}
        self.config_problems: list[str] = []  # every config line that went wrong, for F1
        self.library = LibrarySync(library_path or data_dir() / DB_NAME, self.save_dir,
                                   lambda: self.controller.conversation, lambda: self.model_spec,
                                   lambda line: self.notify(line, title="Library", severity="warning", timeout=10),
                                   streaming=lambda: self.controller.busy)
        self._controller: ChatController | None = None  # made with the chat screen, whose messages it posts
        self.library_actions = LibraryActions(self)
        self.chat_screen = ChatScreen(self._make_controller, settings, self.library, draft_path(self.save_dir))
        self._engine_closed = False
        self.engine_stuck = False  # the engine did not close in QUIT_WAIT_S: the process must not wait on it
        self.exit_note: str | None = None  # one line for the terminal once the screen is gone

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver for this terminal, with every bracketed paste kept one paste, an ESC
        in it as text (`tui.app.paste_guard`)."""
        return paste_safe_driver(super().get_driver_class())

    def _make_controller(self, post: Post) -> ChatController:
        """The app's one controller, made when the chat screen can take its messages; the library
        hears every change of its conversation (and commits each turn's start and end at once)."""
        config = self.loaded.config
        self._controller = ChatController(self.engine, config.sampling, self.library.observing(post),
                                          config.chat.context_strategy, on_change=self.library.changed)
        return self._controller

    @property
    def controller(self) -> ChatController:
        """The one object that talks to the engine (owned here; the chat screen drives it)."""
        assert self._controller is not None, "the chat screen makes the controller when it is built"
        return self._controller

    def action_open_library(self) -> None:
        self.library_actions.open_library()

    def action_copy_token(self) -> None:
        self.library_actions.copy_token()

    def action_copy_message(self) -> None:
        self.library_actions.copy_message()

    def action_copy_code(self) -> None:
        self.library_actions.copy_code()

    def action_export_chat(self, fmt: str) -> None:
        self.library_actions.export_chat(fmt)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's own palette entries, less those the palette already lists with their keys."""
        return LogitscopeCommands.without_duplicates(super().get_system_commands(screen))

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """logitscope's variables ($heat-low, $prob-bar, ...) for themes that lack them."""
        dark = next((t for t in load_builtin_themes() if t.name == DEFAULT_DARK), None)
        return dict(dark.variables) if dark is not None else {}

    def on_mount(self) -> None:
        problems = list(self.loaded.problems)
        problems += register_all(self, self.config_dir)
        theme, problem = resolve_theme_name(self.loaded.config.ui.theme, self.available_themes)
        self.theme = theme
        problems += [problem] if problem else []
        user_file = self.loaded.user_path if self.loaded.user_path.is_file() else None
        self.keymap, key_problems = build_keymap(self.loaded.config.keys, binding_ids(), user_file,
                                                 defaults=binding_defaults())
        self.set_keymap(self.keymap)
        self._show_config_problems(problems + key_problems)
        self.push_screen(self.chat_screen)
        self._watch_hangup()
        # After the first paint: the engine thread's MLX import competes for the GIL, and the
        # screen should be up (and typing possible) before the model is. The library opens then
        # too, in a thread, taking in the chat files left in the state folder (`LibrarySync.start`).
        self.call_after_refresh(self._start_load, self.model_spec)
        self.call_after_refresh(self.library.start)

    def _show_config_problems(self, lines: list[str]) -> None:
        """A toast per problem when there are a few; more, and one toast says the first and how
        many more, which F1 lists (a bad config stacked ~36 toasts over the screen for 20 s)."""
        self.config_problems = lines
        if len(lines) > FEW_PROBLEMS:
            lines = [f"{lines[0]} (and {len(lines) - 1} more: F1 lists them)"]
        for line in lines:
            self.notify(line, title="Config", severity="warning", timeout=20)

    # --- models

    def _start_load(self, spec: str) -> None:
        """Start the load now (the controller's `loading` is true from here) and follow it up."""
        load = self.controller.load(spec, self.trust_remote_code)
        self.run_worker(self._after_load(spec, load), name="load-model", group="load-model")

    async def _after_load(self, spec: str, load: asyncio.Task[bool]) -> None:
        """A success goes first in the picker's recent list. (Cancelling this cancels the load.)"""
        if await load:
            self.model_spec = spec
            await asyncio.to_thread(record_recent, spec)

    def action_switch_model(self) -> None:
        """Open the model picker (not over another picker, not while a reply or a load runs)."""
        if isinstance(self.screen, ModelPicker):
            return
        if self.controller.busy or self.controller.loading:
            busy = "A reply is streaming: Esc stops it" if self.controller.busy else "A model is still loading"
            self.notify(f"{busy}, then switch models.", severity="warning")
            return
        current = normalise_spec(self.model_spec) if self.engine.model is not None else None
        self.push_screen(ModelPicker(list_local_models, current), self._picked)

    def _picked(self, spec: str | None) -> None:
        if spec:
            self.switch_model(spec)

    def switch_model(self, spec: str) -> None:
        """Load another model. The conversation stays (its replies continue as text, as a resumed
        one's do: their ids are the old model's), and a load that fails keeps the old model."""
        if not self.controller.can_start:
            self.notify("Busy: wait for the reply or the load to end, then switch models.", severity="warning")
            return
        self._start_load(spec)

    def _watch_hangup(self) -> None:
        """A closed terminal (SIGHUP) or a SIGTERM must lose nothing and print no traceback."""
        if self.is_headless:
            return  # tests: never install process-wide handlers
        try:
            signal.signal(signal.SIGHUP, self._hangup)
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self.terminate)
        except (ValueError, AttributeError, NotImplementedError, RuntimeError):
            pass  # not the main thread, or no such signals (Windows)

    def terminate(self) -> None:
        """SIGTERM (`kill`, a logout, a service manager): unlike a hangup the terminal is still
        there, so leave the normal way (save, restore the terminal), at once and bounded."""
        self.engine.cancel()
        asyncio.get_running_loop().create_task(self._quit(TERMINATED))

    def _hangup(self, signum: int, frame: object) -> None:
        """The terminal is gone. Textual's writer thread dies on the first write that fails, after
        which any repaint blocks the event loop for good, so the normal (rendering) exit cannot
        run. A plain signal handler still runs in the main thread: stop the engine's turn, save
        the conversation, and leave at once (the OS frees the model and its thread)."""
        self.engine.cancel()
        self._keep_chat()
        self._save_draft()
        os._exit(0)

    async def action_quit(self) -> None:
        """Quit at once, mid-stream included; but a chat that neither the library nor a rescue
        file can take (a full disk) is asked about first, as replacing it is: leaving would lose it."""
        if not self._keep_chat():
            # the user decides (a copy kept elsewhere, or discarded): leaving does not try again
            self.chat_screen.conversation_actions.ask_to_keep(
                "Quit", lambda: asyncio.get_running_loop().create_task(self._quit(0, keep=False)))
            return
        await self._quit(0)

    async def _quit(self, code: int, keep: bool = True) -> None:
        await self.shutdown(keep)
        self.exit(return_code=code)

    async def shutdown(self, keep: bool = True) -> None:
        """Keep the conversation (unless the user already decided its fate: `keep` False), then
        close the engine, waiting at most `QUIT_WAIT_S`: a reply still streaming is saved as
        cancelled, and an engine thread that does not answer (a chat template that loops, a hung
        load) is left to the OS (`engine_stuck`). Idempotent."""
        if self._engine_closed:
            return
        self._engine_closed = True
        if keep:
            self._keep_chat()  # first: whatever the engine does now, the chat is on disk
        else:
            self.exit_note = None
        self._save_draft()
        try:
            await asyncio.wait_for(asyncio.gather(self.controller.close(), self.chat_screen.second.close_model()),
                                   QUIT_WAIT_S)
        except asyncio.TimeoutError:
            self.engine_stuck = True
        self.library.close()

    def _save_draft(self) -> None:
        """Keep the text left in the input for the next start (#30.6); a failure is one line on exit."""
        inputs = self.chat_screen.query(ChatInput) if self.chat_screen.is_mounted else []
        text = inputs.first().text if inputs else ""
        try:
            save_draft(text, draft_path(self.save_dir))
        except OSError as exc:
            self.exit_note = f"logitscope: the unsent message could not be kept: {exc.strerror or exc}"

    def _keep_chat(self) -> bool:
        """Commit the live chat to the library now, else write it to a rescue file (the next
        start imports it); whether it is kept (or empty). Where it went when the library could
        not take it, or why it is nowhere, is one line shown on exit."""
        conversation = self.controller.conversation
        if self.library.kept():
            self.exit_note = None
            return True
        try:
            path = self.library.rescue(conversation)
        except OSError as exc:
            self.exit_note = f"logitscope: the conversation could not be saved (the library failed, then {exc.strerror or exc})"
            self.log.warning(self.exit_note)
            return False
        self.exit_note = (f"logitscope: the library could not take the conversation: it is saved to {path} "
                          "(taken into the library at the next start)")
        return True

    async def on_unmount(self) -> None:
        await self.shutdown()

    def copy_to_clipboard(self, text: str) -> None:
        """Everything the app copies (y, Y) passes here, made safe as the screen makes it: every
        control character but newline and tab becomes visible (`printable`: ESC shows as ␛).

        Why: a reply is the model's text. Copied raw, a crafted reply's ESC and BEL would act on
        the terminal it is pasted into (an OSC 52 there writes that terminal's clipboard in turn).
        """
        super().copy_to_clipboard(printable(text))

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every notification (ours and the widgets', which all come here) shows its text
        literally: error lines quote paths, model names, config values and engine errors, where
        markup would crash the app (``[/]``) or eat text and an ESC would reach the terminal.
        Our own lines carry no markup, so `markup` is ignored. A message echoing a huge value
        (a 20 MB config value) is cut in the middle: a toast is for reading."""
        super().notify(printable(shortened(message)), title=printable(shortened(title, 80)), severity=severity,
                       timeout=timeout, markup=False)

    def on_key(self, event: events.Key) -> None:
        """Before the app's bindings: a key typed as text outside the input goes into it
        (`FocusFollowsIntent.typed_key`, #30.1)."""
        if self.screen is self.chat_screen and self.chat_screen.focus_rules.typed_key(event):
            event.prevent_default()  # no binding acts on it

    def action_help_quit(self) -> None:
        """Ctrl+C where nothing is selected to copy: say how to quit. Textual's own line is
        markup ("[b]ctrl+q[/b]"), which `notify` here shows literally; this one is plain text and
        names the key as the keymap has it (#30.7)."""
        for active in self.active_bindings.values():
            if active.binding.action in ("quit", "app.quit"):
                self.notify(f"Press {self.get_key_display(active.binding)} to quit.", title="Do you want to quit?")
                return

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.keymap, self.config_problems))

    def action_next_theme(self) -> None:
        """Cycle: logitscope's own themes first, then Textual's."""
        names = sorted(self.available_themes, key=lambda n: (not n.startswith("logitscope"), n))
        self.theme = names[(names.index(self.theme) + 1) % len(names)] if self.theme in names else names[0]
        self.notify(f"Theme: {self.theme}", timeout=2)

    def action_save_settings(self) -> None:
        path = self.loaded.user_path
        try:
            save_settings(self.controller.params, self.theme, path, self.chat_screen.scope.ui_settings())
        except (ConfigError, OSError) as exc:
            self.notify(str(exc), title="Settings not saved", severity="error", timeout=15)
            return
        self.notify(f"Saved parameters, theme and fork thresholds to {path}", title="Settings")


GIL_SWITCH_S = 0.0005  # Python's default is 0.005


def tune_for_streaming() -> None:
    """Collect garbage less often, and hand the GIL over sooner, while the app runs.

    A stream allocates many small objects; with the default thresholds full collections ran
    every few seconds, each a visible stall of a key press (the worst key-to-screen latency of
    `python -m tui.bench.probe_app stream`; the numbers: docs/benchmarks-history.md).

    The engine thread needs the GIL for a moment between two forward passes (the token's
    text, the draw, the hand-over of its statistics), and the event loop holds it while it draws
    a frame. A thread asking for the GIL waits for the switch interval before the holder must let
    go: at Python's 5 ms, up to 5 ms of a 6 ms token. At 0.5 ms the 30M GGUF model decoded at
    119 tok/s in the app instead of 90 (4 rounds alternating, `python -m tui.bench.probe_decode`).
    """
    gc.set_threshold(10_000, 10, 10)
    sys.setswitchinterval(GIL_SWITCH_S)
