"""The command palette: every bound action, every preset, every theme and "set <param>…".

Built from the same binding table as the keys and the help screen, so a new binding is in the
palette without anyone remembering to add it. Labels are plain text (`Content`, never markup);
preset and theme names come from config files, so their control characters are made visible.
"""

from __future__ import annotations

from functools import partial
from collections.abc import Iterable, Iterator
from typing import Any, Awaitable, Callable

from textual.app import SystemCommand
from textual.command import DiscoveryHit, Hit, Hits, Matcher, Provider
from textual.content import Content

from engine.core.settings import printable
from tui.app.bindings import ALL_SPECS
from tui.app.keymap import MODAL_PLACES
from engine.core.param_steps import ALL_PARAMS
from engine.core.params import ORDERS
from tui.app.screens.help import key_display

# Key-only bindings that make no sense from a palette (they act on a focused widget).
_SKIP_PLACES = {"input", "candidates", "params", "transcript"} | MODAL_PLACES  # a dialog's keys act in it only
# Textual's system commands that our own list has with a key: Quit [^q], Pick theme [f8], Help [f1].
_OURS = {"Quit", "Theme", "Keys"}

Command = tuple[str, Callable[[], Awaitable[Any] | Any], str]


class LogitscopeCommands(Provider):
    """Commands for the chat screen; the action runs on the screen or the app as bound."""

    def _commands(self) -> list[Command]:
        app: Any = self.app
        chat = app.chat_screen
        keymap = app.keymap
        out: list[Command] = []
        for place, binding_id, key, action, description, tooltip, _show, _prio in ALL_SPECS:
            if (place in _SKIP_PLACES and not action.startswith("app.")) or binding_id == "app.palette":
                continue  # an app.… action works from anywhere, so a transcript key's is listed too
            target = app if place == "app" else chat
            label = f"{description}  [{key_display(app, keymap.get(binding_id, key))}]"
            out.append((label, partial(app.run_action, action, target), tooltip))
        for fmt, what in (("md", "Markdown (the visible branch)"), ("json", "JSON (every branch, token and candidate)")):
            out.append((f"Export chat as {what.split()[0]}", partial(app.action_export_chat, fmt),
                        f"Write the chat as {what} to the exports folder"))
        out.append(("Past thinking: exact cache / as the template renders it", chat.action_toggle_past_thinking,
                    "Earlier replies' <think> blocks: kept as the exact ids in the cache (reused), or as the chat "
                    "template renders them (dropped where it drops them: less context, the last reply re-read)"))
        out.append(("Previews on/off", chat.preview_actions.toggle,
                    "Turn the what-if previews under the candidates off, or on again"))
        out.append(("Score the chat on/off", chat.scope.toggle_scoring,
                    "Read the chat back: your messages' tokens (what the model would have said there) and "
                    "each message's perplexity; off asks the engine nothing"))
        if chat.scope.can_probe():
            out.append(("Probe a phrase at the cursor…", chat.scope.probe,
                        "Type a word or phrase: its probability in place of the selected token, and its "
                        "first token's rank"))
        out.append(("Open a second model…", chat.second.pick,
                    "A second model reads the chat beside the first: each token's probability under both, "
                    "the heatmap by disagreement (F3), e / E to where their first choices differ"))
        if chat.second.open:
            out.append(("Close the second model", chat.second.close, "Free the second model's memory"))
        for setting, what in (("entropy", "an entropy (nats) above which"),
                              ("margin", "a margin of the top two probabilities within which")):
            out.append((f"Set fork {setting}…", partial(chat.scope.edit_fork, setting),
                        f"Forks (f / F, the count in each reply's header): {what} a token is one"))
        for name, label in ALL_PARAMS:
            out.append((f"Set {label}…", partial(chat.param_actions.edit, name), f"Type an exact {label}"))
        for order in ORDERS:
            out.append((f"Sampler order: {order}", partial(chat.param_actions.set_order, order),
                        f"Run the chain in {order}'s order: {' → '.join(ORDERS[order])}"))
        for preset in chat.config.presets:
            out.append((f"Preset: {printable(preset)}", partial(chat.param_actions.apply_preset, preset), "Apply this preset"))
        for theme in sorted(app.available_themes):
            out.append((f"Theme: {printable(theme)}", partial(setattr, app, "theme", theme), "Switch theme"))
        return out

    @staticmethod
    def without_duplicates(commands: Iterable[SystemCommand]) -> Iterator[SystemCommand]:
        """Textual's system commands less the ones this provider lists itself: the palette showed
        "Quit" and "Quit [ctrl+q]", "Theme" and "Pick theme", "Keys" and "Help"."""
        return (command for command in commands if command.title not in _OURS)

    async def discover(self) -> Hits:
        for label, callback, help_text in self._commands():
            yield DiscoveryHit(Content(label), callback, text=label, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for label, callback, help_text in self._commands():
            score = matcher.match(label)
            if score > 0:
                yield Hit(score, _highlight(matcher, label), callback, text=label, help=help_text)


def _highlight(matcher: Matcher, label: str) -> Content:
    """`label` with the query's letters marked, read as plain text.

    `Matcher.highlight` reads its argument as markup, where a key shown as "[f1]" is a style tag
    and vanishes from the label; the labels here are plain text, brackets and all.
    """
    _score, offsets = matcher.fuzzy_search.match(matcher.query, label)
    content = Content(label)
    for offset in offsets:
        if not label[offset].isspace():
            content = content.stylize(matcher.match_style, offset, offset + 1)
    return content
