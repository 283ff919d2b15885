"""Keys named in prose (the welcome) from the keymap, never from memory.

Why: a hint that names a key by hand goes stale the moment `[keys]` in config.toml rebinds it
("←/→ Token" stayed in the footer after ←/→ were rebound, #30.7). The welcome asks here, with
the app's keymap, for the key of a binding id, and gets it written as a person would: "Ctrl+L",
"Esc", "F1", "←".
"""

from __future__ import annotations

from collections.abc import Mapping

from tui.app.bindings import binding_defaults

_NAMED = {
    "escape": "Esc", "enter": "Enter", "left": "←", "right": "→", "up": "↑", "down": "↓",
    "space": "Space", "tab": "Tab", "backspace": "Backspace", "delete": "Del", "home": "Home",
    "end": "End", "pageup": "PgUp", "pagedown": "PgDn", "insert": "Ins",
    "left_square_bracket": "[", "right_square_bracket": "]", "minus": "-", "plus": "+",
    "equals_sign": "=", "slash": "/", "question_mark": "?", "comma": ",", "full_stop": ".",
}


def key_prose(keys: str) -> str:
    """The first key of a Textual key string as prose: "ctrl+l" -> "Ctrl+L", "f1" -> "F1"."""
    first = next((part.strip() for part in keys.split(",") if part.strip()), "")
    *modifiers, name = first.split("+") if first else [""]
    if name in _NAMED:
        shown = _NAMED[name]
    elif len(name) == 1:
        shown = name.upper() if modifiers else name
    elif name[:1] == "f" and name[1:].isdigit():
        shown = name.upper()
    else:
        shown = name.replace("_", " ")
    return "+".join([*(m.capitalize() for m in modifiers), shown])


def key_of(binding_id: str, keymap: Mapping[str, str]) -> str:
    """The key of `binding_id` in prose, the user's keymap applied."""
    return key_prose(keymap.get(binding_id) or binding_defaults()[binding_id][1])


def welcome_keys(keymap: Mapping[str, str]) -> str:
    """The welcome's key paragraph: the few keys a newcomer needs, as this keymap binds them."""
    def k(binding_id: str) -> str:
        return key_of(binding_id, keymap)

    walk = f"{k('token.prev')}/{k('token.next')}"
    digits = f"{k('branch.choose.1')}-{k('branch.choose.9')}, {k('branch.choose.10')}"
    return (
        f"{k('chat.send')} sends.  {k('focus.transcript')}, then {walk} walks a reply's tokens and what else "
        f"the model considered; {digits} continue the reply from one.  {k('chat.resume')} reopens your "
        f"last chat, {k('app.library')} finds a kept one.  {k('app.help')}: every key, what the numbers mean."
    )
