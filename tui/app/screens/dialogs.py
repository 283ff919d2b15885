"""Small modal dialogs: type one value (validated before it is accepted) and edit a text."""

from __future__ import annotations

from typing import Callable

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, TextArea

from tui.app.bindings import bindings_for
from tui.app.safe_text import literal, printable
from tui.app.widgets.plain_input import PlainInput

Validate = Callable[[str], "str | None"]  # the problem as one line, or None when the text is fine

class Dialog(ModalScreen[str | None]):
    """The look every dialog shares: a bordered box in the middle of the screen.

    The CSS lives on this base class because Textual scopes a class's DEFAULT_CSS to that class:
    rules written for `ModalScreen` inside a subclass would match nothing. `max-width: 100%`:
    a subclass may ask for more width (the model picker, the library), never more than the
    terminal has (at 80 columns they overflowed, #30.7).
    """

    DEFAULT_CSS = """
    Dialog { align: center middle; }
    Dialog > Vertical { width: 70; max-width: 100%; height: auto; max-height: 80%; border: thick $primary;
                        background: $surface; padding: 1 2; }
    Dialog .error { color: $error; height: auto; }
    Dialog .hint { color: $text-muted; height: auto; }
    Dialog Horizontal { height: auto; align-horizontal: right; }
    Dialog Button { margin-left: 1; }
    """


class ValueDialog(Dialog):
    """One line of input; Enter accepts only if `validate` has no complaint (shown inline)."""

    BINDINGS = bindings_for("dialog")

    def __init__(self, title: str, value: str, validate: Validate, hint: str = "") -> None:
        super().__init__()
        self.title_text, self.value, self.validate, self.hint = title, value, validate, hint

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(literal(self.title_text))
            yield PlainInput(self.value, id="value")
            yield Label(literal(self.hint), classes="hint")
            yield Label("", id="error", classes="error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        problem = self.validate(event.value)
        if problem is not None:
            self.query_one("#error", Label).update(literal(problem))  # quotes what was typed
            return
        self.dismiss(event.value)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class TextDialog(Dialog):
    """A multi-line text (system prompt, a message to edit); Ctrl+S or the button accepts.

    A text holding control characters (a resumed file's, say) is edited with them made visible,
    so what the user sees is what is kept: ESC can never travel to the terminal through here.
    """

    DEFAULT_CSS = "TextDialog TextArea { height: 10; }"
    BINDINGS = bindings_for("dialog") + bindings_for("text_dialog")

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text, self.text = title, text

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(literal(f"{self.title_text}  (Ctrl+S accepts, Esc cancels)"))
            yield TextArea(printable(self.text), soft_wrap=True, id="text")
            with Horizontal():
                yield Button("Cancel", id="cancel")
                yield Button("OK", id="ok", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_accept() if event.button.id == "ok" else self.dismiss(None)

    def action_accept(self) -> None:
        self.dismiss(self.query_one(TextArea).text)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
