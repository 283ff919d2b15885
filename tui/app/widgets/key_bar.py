"""`KeyBar`: the footer's key hints, drawn as one line of text.

Why not Textual's `Footer`: it recomposes a widget per key whenever the bindings change, and they
change at the start and the end of every reply (Esc Stop comes and goes). Mounting and styling
those widgets, and the layout pass that follows, take the main thread's time at the worst moment:
on a small machine that is the CPU the engine needs right when it computes the first token (the
measurement: docs/benchmarks-history.md, round 5). Here a change re-renders one line and asks
for no layout. What `Footer` offers is kept: one hint per action in binding order, the keymap's key
names, disabled keys dimmed (a click on one rings the bell), a click presses the key, a hover
highlights it and shows its tooltip, and the command palette's key sits on the right.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual import events
from textual.screen import Screen
from textual.widget import Widget


@dataclass(frozen=True)
class KeyHint:
    """One key as the bar shows it."""

    key: str  # what a click presses
    display: str  # the key as the keymap names it
    description: str
    enabled: bool
    tooltip: str


# The core interaction, shown while it is live although no binding asks for the footer: where
# the focus is decides (the transcript: arrows, digits, n; the input: Esc to inspect). Several
# bindings share one hint: (group, description); a group's keys are shown as the keymap binds
# them, its first and last member joined (`GROUPS`: "←/→", "1-0"); None = the binding's own key.
CORE_HINTS: dict[str, tuple[str | None, str]] = {
    "focus.transcript": (None, "Inspect"),
    "token.prev": ("token", "Token"), "token.next": ("token", "Token"),
    **{f"branch.choose.{n}": ("branch", "Branch") for n in range(1, 11)},
    **{f"candidate.choose.{n}": ("candidate", "Branch") for n in range(1, 11)},
    "token.next_low": (None, "Unlikely"),
    "token.next_fork": (None, "Fork"),
    "focus.input": (None, "Type"), "candidates.leave": (None, "Type"), "params.leave": (None, "Type"),
}
# group -> (first member, last member, what joins their keys)
GROUPS: dict[str, tuple[str, str, str]] = {
    "token": ("token.prev", "token.next", "/"),
    "branch": ("branch.choose.1", "branch.choose.10", "-"),
    "candidate": ("candidate.choose.1", "candidate.choose.10", "-"),
}


def key_hints(screen: Screen[object]) -> tuple[list[KeyHint], KeyHint | None]:
    """The screen's bindings shown in the footer, one per action in binding order, after the
    core hints of the focused place, and the command palette's binding (None when the app has
    no palette). Every key shown is the keymap's (a rebound ←/→ shows its new keys)."""
    app = screen.app
    core: dict[tuple[str, str], KeyHint] = {}
    shown: dict[str, KeyHint] = {}
    palette: KeyHint | None = None
    active = list(screen.active_bindings.items())
    displays = {binding.id: app.get_key_display(binding) for _key, (_, binding, _e, _t) in active if binding.id}
    for key, (_, binding, enabled, tooltip) in active:
        display = app.get_key_display(binding)
        hint = KeyHint(binding.key, display, binding.description, enabled,
                       tooltip or binding.tooltip or binding.description)
        if app.ENABLE_COMMAND_PALETTE and key == app.COMMAND_PALETTE_BINDING:
            palette = hint
        elif binding.id in CORE_HINTS and enabled:
            group, description = CORE_HINTS[binding.id]
            if binding.id == "token.next_low" and getattr(screen.focused, "searching", False):
                description = "Match"  # a chat search is on: n / N step through its matches
            shown_as = _group_display(group, displays) if group else display
            core.setdefault((group or display, description),
                            KeyHint(binding.key, shown_as, description, True, hint.tooltip))
        elif binding.show:
            shown.setdefault(binding.action, hint)
    order = [description for _display, description in CORE_HINTS.values()] + ["Match"]
    ranked = sorted(core.values(), key=lambda hint: order.index(hint.description))
    return [*ranked, *shown.values()], palette


def _group_display(group: str, displays: dict[str, str]) -> str:
    """A group's keys as bound now: "←/→", "1-0" (one of them alone if the other is not live)."""
    first, last, joint = GROUPS[group]
    keys = [displays[i] for i in (first, last) if i in displays]
    return joint.join(dict.fromkeys(keys))


class KeyBar(Widget, can_focus=False):
    """The key hints of the screen it is on, docked at the bottom."""

    COMPONENT_CLASSES = {"key-bar--key", "key-bar--description", "key-bar--hover"}
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom; height: 1; text-wrap: nowrap; text-overflow: ellipsis;
        color: $footer-foreground; background: $footer-background;
        & > .key-bar--key { color: $footer-key-foreground; background: $footer-key-background; text-style: bold; }
        & > .key-bar--description {
            color: $footer-description-foreground; background: $footer-description-background;
        }
        & > .key-bar--hover { background: $block-hover-background; }
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self.hints: list[KeyHint] = []
        self.palette: KeyHint | None = None
        self._hover: str | None = None  # the key under the mouse

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if screen is not self.screen:
            return
        hints, palette = key_hints(screen)
        if (hints, palette) != (self.hints, self.palette):
            self.hints, self.palette = hints, palette
            self.refresh()  # one line, fixed height: a repaint, never a layout

    def render(self) -> Text:
        """The hints that fit, whole and in order (the palette's key kept on the right)."""
        line = Text(no_wrap=True, overflow="ellipsis", end="")
        right = self._hint_text(self.palette) if self.palette is not None else Text()
        room = (self.size.width or 10_000) - (right.cell_len + 2 if right else 0)
        for hint in self.hints:
            text = self._hint_text(hint)
            if line.cell_len + text.cell_len > room and line.cell_len:
                continue  # a later, shorter hint may still fit
            line.append_text(text)
        if self.palette is not None:
            gap = self.size.width - line.cell_len - right.cell_len
            if gap >= 2:
                line.append(" " * (gap - 1))
                line.append("│", "dim")
                line.append_text(right)
        return line

    def _hint_text(self, hint: KeyHint) -> Text:
        """` key description ` with the key's style, and the key as click metadata."""
        meta = Style.from_meta({"key": hint.key})
        key_style = self.get_component_rich_style("key-bar--key")
        description_style = self.get_component_rich_style("key-bar--description")
        if hint.key == self._hover:
            hover = self.get_component_rich_style("key-bar--hover")
            key_style, description_style = key_style + hover, description_style + hover
        if not hint.enabled:
            key_style, description_style = key_style + Style(dim=True), description_style + Style(dim=True)
        return Text.assemble((f" {hint.display} ", key_style + meta),
                             (f"{hint.description} " if hint.description else "", description_style + meta))

    def _hint_at(self, style: Style | None) -> KeyHint | None:
        key = style.meta.get("key") if style is not None else None
        return next((h for h in [*self.hints, *([self.palette] if self.palette else [])] if h.key == key), None)

    def on_click(self, event: events.Click) -> None:
        hint = self._hint_at(event.style)
        if hint is None:
            return
        event.stop()
        if hint.enabled:
            self.app.simulate_key(hint.key)
        else:
            self.app.bell()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        hint = self._hint_at(event.style)
        key = hint.key if hint is not None else None
        if key != self._hover:
            self._hover = key
            self.tooltip = hint.tooltip if hint is not None else None
            self.refresh()

    def on_leave(self, event: events.Leave) -> None:
        if self._hover is not None:
            self._hover = None
            self.tooltip = None
            self.refresh()
