"""The [keys] table -> a keymap for `App.set_keymap`, checked before Textual sees it.

Textual accepts any string as a key and silently never fires a binding it cannot match, and it
ignores ids that no binding has. So a typo in the user's config would just do nothing; here it
becomes one line naming the file, line and binding id instead, and that entry is left out.
Likewise a key already used by a binding that is live at the same time (``ctrl+q`` for a
parameter would take Quit away): one line naming both ids, and the entry is left out.

A key string is Textual's: one or more keys separated by commas, each ``modifier+...+key``,
e.g. ``"ctrl+up"``, ``"f2"``, ``"ctrl+shift+t, alt+t"``. A ``+`` key is written ``plus``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path

from textual.keys import (
    KEY_ALIASES,
    KEY_TO_UNICODE_NAME,
    REPLACED_KEYS,
    Keys,
    _character_to_key,
)

from engine.core.regular import read_regular_text
from engine.core.settings import KeyLines, Problems

MODIFIERS = ("ctrl", "shift", "alt", "meta", "super", "hyper")
# Bindings here act only while their widget has focus, so two of these places are never live
# together; "app" and "screen" bindings are live whatever has focus.
FOCUS_PLACES = frozenset({"input", "transcript", "candidates", "params"})
# A dialog's bindings act only while it is on top (a modal screen): live with the app's and its
# own, never with the chat screen's or a widget's there. A text dialog has both "dialog" (cancel)
# and "text_dialog" (accept).
MODAL_PLACES = frozenset({"dialog", "text_dialog", "messages", "picker", "library", "replace", "help"})

Defaults = Mapping[str, tuple[str, str]]  # binding id -> (where it acts, default keys)
# Textual's own bindings, live on every screen (App.BINDINGS, Screen.BINDINGS): not rebindable,
# but a key of theirs given to one of ours would take focus moving or copying away.
TEXTUAL_KEYS: Defaults = {
    "textual.focus_next": ("screen", "tab"),
    "textual.focus_previous": ("screen", "shift+tab"),
    "textual.copy": ("screen", "ctrl+c,super+c"),
}


def _named_keys() -> frozenset[str]:
    """Key names Textual knows without a character: "up", "f5", "pageup", "enter", ..."""
    names = {key.value.rsplit("+", 1)[-1] for key in Keys if not key.value.startswith("<")}
    return frozenset(names | set(KEY_ALIASES) | {"space", "newline"})


def _is_key_name(name: str, named: frozenset[str]) -> bool:
    """True for a key Textual can bind: a named key, one character, or a character's name
    as Textual spells it (``question_mark``, ``plus``, ``comma``)."""
    if name in named or (len(name) == 1 and name.isprintable() and not name.isspace()):
        return True
    original = REPLACED_KEYS.get(name, name)  # "slash" -> "solidus", as Textual spells it
    unicode_name = KEY_TO_UNICODE_NAME.get(original, original)
    for candidate in (unicode_name, unicode_name.replace("_", " ")):
        try:
            if len(unicodedata.lookup(candidate)) == 1:
                return True
        except KeyError:
            continue
    return False


def key_problem(keys: str) -> str | None:
    """Why `keys` is not a valid Textual key string, or None if it is."""
    named = _named_keys()
    if not keys.strip():
        return "no key given"
    for key in (part.strip() for part in keys.split(",")):
        if not key:
            return f"empty key in {keys!r}"
        *modifiers, name = key.split("+")
        if "" in (*modifiers, name):
            return f"{key!r} has an empty part (the + key is written 'plus')"
        for modifier in modifiers:
            if modifier not in MODIFIERS:
                return f"{modifier!r} in {key!r} is not a modifier (use {', '.join(MODIFIERS)})"
        if len(set(modifiers)) != len(modifiers):
            return f"a modifier is repeated in {key!r}"
        if not _is_key_name(name, named):
            return f"{name!r} in {key!r} is not a key Textual knows"
    return None


def build_keymap(
    keys: Mapping[str, str], known_ids: Iterable[str], source: Path | None = None,
    defaults: Defaults | None = None,
) -> tuple[dict[str, str], list[str]]:
    """The valid entries of `keys` (binding id -> key string, spaces tidied) and the problem
    lines of the entries left out (twenty at most, then a count). `source` is the user's config
    file, for the line numbers; with `defaults` (`tui.app.bindings.binding_defaults`), an entry
    taking a key that a binding live at the same time already has is left out too."""
    known = set(known_ids)
    report = _Reporter(source)
    keymap: dict[str, str] = {}
    for binding_id, value in keys.items():
        message = _entry_problem(binding_id, value, known)
        if message is None:
            keymap[binding_id] = ",".join(part.strip() for part in value.split(","))
        else:
            report(binding_id, message)
    if defaults is not None:
        for binding_id, key, other in _drop_conflicts(keymap, {**TEXTUAL_KEYS, **defaults}):
            report(binding_id, f"{key!r} is already the key of {other}")
    return keymap, report.problems.listed()


class _Reporter:
    """One line per bad entry, twenty at most, located from one scan of the file (made at the
    first problem: a config without one is not read again)."""

    def __init__(self, source: Path | None) -> None:
        self.source = source
        self.problems = Problems(source or Path("config"))
        self._lines: KeyLines | None = None

    def __call__(self, binding_id: str, message: str) -> None:
        if self.problems.full:
            self.problems.add("")  # counted only
            return
        self.problems.add(f"{self._where(binding_id)}: [keys] {binding_id}: {message}; ignored")

    def _where(self, binding_id: str) -> str:
        if self.source is None:
            return "config"
        if self._lines is None:
            self._lines = KeyLines(_read_quietly(self.source))
        return self._lines.location(self.source, ("keys",), binding_id)


def _keys_of(keys: str) -> list[str]:
    return [part.strip() for part in keys.split(",") if part.strip()]


def _spellings(key: str) -> frozenset[str]:
    """Every way of writing the key Textual will match: a character by its name, as
    `App.set_keymap` normalises it ("[" is left_square_bracket), and the aliases of the same
    key press (Tab is also ctrl+i, Enter ctrl+m)."""
    name = _character_to_key(key) if len(key) == 1 else key
    same = {name, *KEY_ALIASES.get(name, ())}
    same.update(main for main, aliases in KEY_ALIASES.items() if name in aliases)
    return frozenset(same)


def _shared(keys: str, other: str) -> str | None:
    """The first key of `keys` that `other` also has (in any spelling), or None."""
    theirs = {spelling for key in _keys_of(other) for spelling in _spellings(key)}
    return next((key for key in _keys_of(keys) if _spellings(key) & theirs), None)


def _live_together(place: str, other: str) -> bool:
    """Whether bindings of the two places can both fire on one key press."""
    if place == other or {place, other} == {"dialog", "text_dialog"}:
        return True
    if place in MODAL_PLACES or other in MODAL_PLACES:
        return "app" in (place, other)
    return place not in FOCUS_PLACES or other not in FOCUS_PLACES


def _conflict(keymap: Mapping[str, str], defaults: Defaults, binding_id: str) -> tuple[str, str] | None:
    """(key, other id) if a key of `binding_id` is another live binding's, unless the two
    shared it by design (Escape stops a reply and leaves the input)."""
    place, default = defaults[binding_id]
    for other, (other_place, other_default) in defaults.items():
        if other == binding_id or not _live_together(place, other_place):
            continue
        key = _shared(keymap[binding_id], keymap.get(other, other_default))
        if key is not None and not (_shared(key, default) and _shared(key, other_default)):
            return key, other
    return None


def _drop_conflicts(keymap: dict[str, str], defaults: Defaults) -> list[tuple[str, str, str]]:
    """Leave out entries whose key is taken, latest first, until none clash; returns
    (id, key, other id) per entry left out, in file order. The check uses every other entry
    as applied, so a key another entry moves away from is free to take."""
    order = list(keymap)
    dropped = []
    while True:
        clashing = [(bid, found) for bid in keymap if bid in defaults
                    if (found := _conflict(keymap, defaults, bid)) is not None]
        if not clashing:
            return sorted(dropped, key=lambda entry: order.index(entry[0]))
        binding_id, (key, other) = clashing[-1]
        del keymap[binding_id]
        dropped.append((binding_id, key, other))


def _entry_problem(binding_id: str, value: object, known: set[str]) -> str | None:
    """Why one [keys] entry cannot be used, or None."""
    if binding_id not in known:
        return "unknown binding id (the help screen, F1, lists them)"
    if not isinstance(value, str):
        return f"must be a key string, got {value!r}"
    return key_problem(value)


def _read_quietly(source: Path | None) -> str:
    """The config text for locating lines; without it we still name the file."""
    if source is None:
        return ""
    try:
        return read_regular_text(source)
    except (OSError, UnicodeDecodeError):
        return ""
