"""The [keys] table -> a keymap for `App.set_keymap`, checked before Textual sees it.

Textual accepts any string as a key and silently never fires a binding it cannot match, and it
ignores ids that no binding has. So a typo in the user's config would just do nothing; here it
becomes one line naming the file, line and binding id instead, and that entry is left out.

A key string is Textual's: one or more keys separated by commas, each ``modifier+...+key``,
e.g. ``"ctrl+up"``, ``"f2"``, ``"ctrl+shift+t, alt+t"``. A ``+`` key is written ``plus``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path

from textual.keys import KEY_ALIASES, KEY_TO_UNICODE_NAME, REPLACED_KEYS, Keys

from engine.settings import display_path, format_location

MODIFIERS = ("ctrl", "shift", "alt", "meta", "super", "hyper")


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
    keys: Mapping[str, str], known_ids: Iterable[str], source: Path | None = None
) -> tuple[dict[str, str], list[str]]:
    """The valid entries of `keys` (binding id -> key string, spaces tidied) and one problem
    line per entry left out. `source` is the user's config file, for the line numbers."""
    known = set(known_ids)
    text = _read_quietly(source)
    keymap: dict[str, str] = {}
    problems: list[str] = []
    for binding_id, value in keys.items():
        message = _entry_problem(binding_id, value, known)
        if message is None:
            keymap[binding_id] = ",".join(part.strip() for part in value.split(","))
            continue
        where = "config" if source is None else (
            format_location(source, text, ("keys",), binding_id) if text else display_path(source))
        problems.append(f"{where}: [keys] {binding_id}: {message}; ignored")
    return keymap, problems


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
        return source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
