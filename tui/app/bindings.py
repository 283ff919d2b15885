"""Every key binding of the app, in one table: each has an id (what `[keys]` in config.toml
rebinds through `App.set_keymap`) and a tooltip. The widgets' `BINDINGS` are taken from here, and
the help screen and the command palette read the same table, so they can never disagree.
"""

from __future__ import annotations

from textual.binding import Binding, BindingType

from engine.core.param_steps import ALL_PARAMS
from engine.core.params import keys

# (where, id, key, action, description, tooltip, show in footer, priority)
_Spec = tuple[str, str, str, str, str, str, bool, bool]

# Down / up keys for stepping each parameter (lowercase = down, uppercase = up), from the one table.
PARAM_KEYS: dict[str, str] = keys()

_SPECS: tuple[_Spec, ...] = (
    ("app", "app.quit", "ctrl+q", "quit", "Quit", "Quit at once (a running reply is stopped)", True, True),
    ("app", "app.help", "f1", "help", "Help", "List every key and its binding id", True, False),
    ("app", "app.palette", "ctrl+p", "command_palette", "Commands", "Search every action", False, False),
    ("app", "app.theme.next", "ctrl+t", "next_theme", "Next theme", "Cycle through the themes", False, False),
    ("app", "app.theme.pick", "f8", "change_theme", "Pick theme", "Choose a theme by name", False, False),
    ("app", "app.model.switch", "ctrl+o", "switch_model", "Switch model…",
     "Load another model: the demo, a recent one, the Hugging Face cache, or any folder or repo id",
     False, False),
    ("app", "app.save_settings", "ctrl+s", "save_settings", "Save settings",
     "Write the parameters and theme to your config file", False, False),
    ("screen", "chat.stop", "escape", "stop", "Stop", "Stop the reply now", True, True),
    ("screen", "chat.regenerate", "ctrl+r", "regenerate", "Regenerate",
     "A new version of the last reply (the old one stays as a branch)", True, False),
    ("screen", "chat.edit_last", "f4", "edit_last", "Edit last",
     "Edit and resend your last message (the old one stays as a branch)", False, False),
    ("screen", "chat.edit_message", "f6", "edit_message", "Edit a message…",
     "Edit any message of yours and resend from there (what followed stays as a branch)", False, True),
    ("screen", "chat.delete_message", "f7", "delete_message", "Delete a message…",
     "Delete a message and everything after it (asks first, can save the chat)", False, True),
    ("screen", "chat.new", "ctrl+n", "new_chat", "New chat", "Start a new conversation", False, False),
    ("screen", "chat.resume", "ctrl+l", "resume_last", "Resume last",
     "Reopen the conversation saved when logitscope last quit", False, False),
    ("screen", "chat.search", "slash", "search", "Search chat",
     "Search this chat, every branch; then n / N move between the matches", False, False),
    ("screen", "chat.system_prompt", "f2", "system_prompt", "System prompt",
     "Set the system prompt", False, False),
    # not ctrl+k: that deletes to the line's end in the input (TextArea), and a priority binding took it
    ("screen", "chat.thinking", "f12", "toggle_thinking", "Thinking on/off",
     "Switch a reasoning model's <think> block off or on for the next replies (where its template can)",
     False, True),
    ("screen", "view.heatmap", "f3", "toggle_heatmap", "Heatmap",
     "Colour every token by probability, then by entropy, then not at all", True, False),
    ("screen", "view.units", "u", "toggle_units", "Percent / log p",
     "Show the candidates' probabilities in percent or as natural-log probabilities", False, False),
    ("screen", "view.candidates", "f9", "toggle_candidates", "Candidates panel",
     "Show or hide the candidates panel", False, False),
    ("screen", "view.stages", "w", "toggle_stages", "Stage view",
     "Show, for the selected token, each candidate's probability after every stage of the sampling chain "
     "(which stage removed which candidate); again: the probabilities", False, False),
    ("screen", "view.params", "f10", "toggle_params", "Parameters panel",
     "Show or hide the parameters panel", False, False),
    ("screen", "param.recommended", "O", "apply_recommended", "Model's settings",
     "Apply the sampling settings the model ships (generation_config.json, GGUF metadata), shown in the panel",
     False, False),
    ("screen", "param.preset.next", "f5", "next_preset", "Next preset",
     "Apply the next preset from config (precise, balanced, creative, ...)", False, False),
    ("input", "chat.send", "enter", "send", "Send", "Send the message", False, True),
    ("input", "chat.newline", "ctrl+j,shift+enter", "newline", "Newline",
     "Insert a line break (Ctrl+J in every terminal; Shift+Enter reaches the app only in some)", False, True),
    ("input", "chat.history.prev", "up", "history(-1)", "Previous input",
     "Recall an earlier message (on the first line)", False, False),
    ("input", "chat.history.next", "down", "history(1)", "Next input",
     "Recall a later message (on the last line)", False, False),
    ("input", "focus.transcript", "escape", "leave", "To transcript",
     "Leave the input to inspect tokens", False, False),
    ("transcript", "token.next", "right", "move(1)", "Next token", "Select the next token", False, False),
    ("transcript", "token.prev", "left", "move(-1)", "Previous token", "Select the previous token", False,
     False),
    ("transcript", "token.next_low", "n", "next_low(1)", "Next unlikely token",
     "Jump to the next token below the low-probability threshold", False, False),
    ("transcript", "token.prev_low", "N", "next_low(-1)", "Previous unlikely token",
     "Jump to the previous token below the low-probability threshold", False, False),
    ("transcript", "token.next_fork", "f", "next_fork(1)", "Next fork",
     "Jump to the next fork: a token where the model was unsure (entropy or top-two margin; palette: Set fork…)",
     False, False),
    ("transcript", "token.prev_fork", "F", "next_fork(-1)", "Previous fork",
     "Jump to the previous fork: a token where the model was unsure", False, False),
    ("transcript", "token.next_difference", "e", "next_difference(1)", "Next difference",
     "Jump to where the second model's first choice differs from the first model's (palette: Open a second model…)",
     False, False),
    ("transcript", "token.prev_difference", "E", "next_difference(-1)", "Previous difference",
     "Jump back to where the two models' first choices differ", False, False),
    ("transcript", "token.probe", "question_mark", "screen.probe_phrase", "Probe…",
     "Type a word or phrase: its probability in place of the selected token, and its first token's rank",
     False, False),
    ("transcript", "token.first", "home", "edge(0)", "First token", "First token of the reply", False, False),
    ("transcript", "token.last", "end", "edge(-1)", "Last token", "Last token of the reply", False, False),
    ("transcript", "token.reply.prev", "up", "reply(-1)", "Previous message",
     "Inspect the previous message (a reply, or once scored your own text)", False, False),
    ("transcript", "token.reply.next", "down", "reply(1)", "Next message",
     "Inspect the next message (a reply, or once scored your own text)", False, False),
    ("transcript", "token.clear", "backspace", "clear_cursor", "Unselect", "Leave token inspection", False,
     False),
    ("transcript", "branch.prev", "left_square_bracket", "flip(-1)", "Previous branch",
     "Show the previous version of the selected message", False, False),
    ("transcript", "branch.next", "right_square_bracket", "flip(1)", "Next branch",
     "Show the next version of the selected message", False, False),
    ("transcript", "focus.input", "i", "focus_input", "Type", "Back to the input", False, False),
    ("transcript", "view.thinking.fold", "z", "toggle_fold", "Fold thinking",
     "Fold or unfold a reply's <think> block (the selected reply, else the last one with a block)", False, False),
    ("candidates", "candidate.up", "up", "cursor(-1)", "Up", "Previous candidate", False, False),
    ("candidates", "candidate.down", "down", "cursor(1)", "Down", "Next candidate", False, False),
    ("candidates", "candidate.choose", "enter", "choose", "Branch here",
     "Continue the reply from this candidate", False, False),
    ("candidates", "candidate.ban", "b", "bias(None)", "Ban",
     "Ban this candidate from the next token on (again: unban); the biases are listed in the parameters panel",
     False, False),
    ("candidates", "candidate.raise", "plus,equals_sign", "bias(2.0)", "Raise",
     "Raise this candidate's logit by 2 from the next token on", False, False),
    ("candidates", "candidate.lower", "minus", "bias(-2.0)", "Lower",
     "Lower this candidate's logit by 2 from the next token on", False, False),
    ("candidates", "candidate.stages.prev", "left", "stage_page(-1)", "Earlier stages",
     "In the stage view: the earlier stages' columns", False, False),
    ("candidates", "candidate.stages.next", "right", "stage_page(1)", "Later stages",
     "In the stage view: the later stages' columns", False, False),
    ("candidates", "candidates.leave", "i,escape", "focus_input", "Type",
     "Back to the input", False, False),
    ("params", "params.leave", "i,escape", "focus_input", "Type", "Back to the input", False, False),
    ("params", "param.select.up", "up", "select(-1)", "Up", "Previous parameter", False, False),
    ("params", "param.select.down", "down", "select(1)", "Down", "Next parameter", False, False),
    ("params", "param.selected.down", "left,minus", "step(-1)", "Decrease", "Step the parameter down", False,
     False),
    ("params", "param.selected.up", "right,plus,equals_sign", "step(1)", "Increase",
     "Step the parameter up", False, False),
    ("params", "param.edit", "enter", "edit", "Type value", "Type an exact value", False, False),
    ("app", "app.library", "ctrl+g", "open_library", "Library…",
     "Find a kept chat by any word in it and reopen it; rename, delete (with undo) or fork it", False, False),
    ("transcript", "token.copy", "y", "app.copy_token", "Copy token",
     "Copy the selected token's text to the clipboard", False, False),
    ("transcript", "code.copy", "b", "app.copy_code", "Copy code block",
     "Copy the fenced code block holding the cursor (else the reply's last one) to the clipboard", False, False),
    ("transcript", "message.copy", "Y", "app.copy_message", "Copy message",
     "Copy the message holding the cursor (else the last one) to the clipboard", False, False),
    # The dialogs: each acts only while its dialog is on top (`tui.app.keymap.MODAL_PLACES`).
    ("dialog", "dialog.cancel", "escape", "dismiss_none", "Cancel", "Close without change", True, False),
    ("text_dialog", "dialog.accept", "ctrl+s", "accept", "OK", "Accept the text", True, False),
    ("messages", "messages.cancel", "escape", "cancel", "Cancel", "Close without change", True, False),
    ("picker", "picker.cancel", "escape", "dismiss_none", "Cancel", "Close without loading", True, False),
    ("picker", "picker.down", "down", "move(1)", "Down", "Next model", False, False),
    ("picker", "picker.up", "up", "move(-1)", "Up", "Previous model", False, False),
    ("library", "library.close", "escape", "dismiss_none", "Close", "Back to the chat", True, False),
    ("library", "library.down", "down", "move(1)", "Down", "Next chat", False, False),
    ("library", "library.up", "up", "move(-1)", "Up", "Previous chat", False, False),
    ("library", "library.rename", "ctrl+r", "rename", "Rename", "Rename the chat", True, True),
    ("library", "library.delete", "ctrl+d", "delete", "Delete", "Delete the chat (Ctrl+Z undoes)", True, True),
    ("library", "library.undo", "ctrl+z", "undo", "Undo delete", "Bring back the chat deleted last", True, True),
    ("library", "library.fork", "ctrl+f", "fork", "Fork", "Copy the chat, to take it elsewhere", True, True),
    ("replace", "replace.cancel", "escape", "cancel", "Cancel", "Keep the current chat", True, False),
    ("replace", "replace.save", "s", "choose('save')", "Save", "Save the chat to a file, then go on", True, False),
    ("replace", "replace.discard", "d", "choose('discard')", "Discard", "Drop the chat and go on", True, False),
    ("help", "help.close", "escape,f1,q", "app.pop_screen", "Close", "Close help", True, False),
)


def _choose_specs() -> tuple[_Spec, ...]:
    """Digits 1-9 and 0 pick candidates 1-10 of the selected token (branching), from the
    transcript and from the candidates panel that prints them."""
    out = []
    for n in range(10):
        key = str((n + 1) % 10)
        out.append(("transcript", f"branch.choose.{n + 1}", key, f"choose({n})", f"Branch on candidate {n + 1}",
                    f"Continue the reply from candidate {n + 1} of the selected token", False, False))
        out.append(("candidates", f"candidate.choose.{n + 1}", key, f"choose_at({n})",
                    f"Branch on candidate {n + 1}", f"Continue the reply from candidate {n + 1}", False, False))
    return tuple(out)


def _param_specs() -> tuple[_Spec, ...]:
    """Two bindings per parameter, named param.<name>.down / .up."""
    out = []
    for name, label in ALL_PARAMS:
        key = PARAM_KEYS.get(name)
        if key is None:
            continue  # set from the palette only
        for direction, suffix, k in ((-1, "down", key), (1, "up", key.upper())):
            out.append(("screen", f"param.{name}.{suffix}", k, f"step_param('{name}', {direction})",
                        f"{label} {suffix}", f"Step {label} {suffix}", False, False))
    return tuple(out)


ALL_SPECS: tuple[_Spec, ...] = _SPECS + _choose_specs() + _param_specs()


def bindings_for(where: str) -> list[BindingType]:
    """The `BINDINGS` list for one place ("app", "screen", "input", "transcript", ...)."""
    return [
        Binding(key, action, description, show=show, priority=priority, id=binding_id, tooltip=tooltip)
        for place, binding_id, key, action, description, tooltip, show, priority in ALL_SPECS
        if place == where
    ]


def binding_ids() -> list[str]:
    """Every binding id (what `[keys]` may rebind)."""
    return [spec[1] for spec in ALL_SPECS]


def binding_defaults() -> dict[str, tuple[str, str]]:
    """Every binding id -> (where it acts, its default keys): what `tui.app.keymap` checks a
    rebinding against, so that a key is never given to two bindings that are live together."""
    return {spec[1]: (spec[0], spec[2]) for spec in ALL_SPECS}


def key_table(keymap: dict[str, str] | None = None) -> list[tuple[str, str, str, str]]:
    """(id, key, description, where) for every binding, with the user's keymap applied."""
    keymap = keymap or {}
    return [(bid, keymap.get(bid, key), desc, place) for place, bid, key, _a, desc, _t, _s, _p in ALL_SPECS]
