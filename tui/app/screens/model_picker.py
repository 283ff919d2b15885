"""The model picker: the demo, recently used models and the Hugging Face cache (MLX repos and
each GGUF file they hold), or any local folder, .gguf file or repo id typed in (a typed folder
lists the models in it). Dismisses with the spec to load (None = cancelled); loading is the app's job.

Listing the Hugging Face cache walks the disk (every snapshot of every repo), which can take a
while on a big or slow cache, so it runs in a thread worker: the dialog is usable at once (typing
a spec works before the scan ends) and the list fills in when the scan is done. A typed path is
looked into the same way (a path may be a slow mount), the newest typed text winning.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Label, OptionList
from textual.widgets.option_list import Option
from textual.worker import Worker, WorkerState

from engine.models import ModelEntry, folder_models
from tui.app.bindings import bindings_for
from tui.app.safe_text import literal, printable
from tui.app.screens.dialogs import Dialog
from tui.app.widgets.plain_input import PlainInput

ListModels = Callable[[], list[ModelEntry]]
ListFolder = Callable[[str], list[ModelEntry]]  # what a typed path holds
_SOURCES = {"demo": "built-in", "recent": "recent", "cache": "HF cache", "folder": "folder"}


def _size(size_bytes: int) -> str:
    """Disk size, short ("1.2 GB", "840 MB"); "" when unknown."""
    if size_bytes <= 0:
        return ""
    if size_bytes >= 10**9:
        return f"{size_bytes / 10**9:.1f} GB"
    return f"{max(1, round(size_bytes / 10**6))} MB"


def matches(entry: ModelEntry, text: str) -> bool:
    """Case-insensitive substring match on the spec or the name (empty text matches all)."""
    needle = text.strip().lower()
    return needle in entry.spec.lower() or needle in entry.name.lower()


def entry_prompt(entry: ModelEntry, current: bool) -> Text:
    """One row: name, where it comes from, size, and whether loading it means a download.
    Names and specs come from folders and the hub's cache: shown defused."""
    row = Text(printable(entry.name), style="bold")
    if entry.name != entry.spec and entry.source != "demo":
        row.append(f"  {printable(entry.spec)}", style="dim")
    kind = " ".join(("GGUF", entry.quant)).strip() if entry.format == "gguf" else ""
    details = [_SOURCES[entry.source], printable(kind), _size(entry.size_bytes)]
    details.append("not downloaded" if entry.path is None else "")
    row.append("  " + " · ".join(d for d in details if d), style="italic")
    if current:
        row.append("  (loaded)", style="bold")
    return row


def _one_per_spec(entries: list[ModelEntry]) -> list[ModelEntry]:
    """One row per spec, its first listing's (a typed folder's before a recent or cached one)."""
    first: dict[str, ModelEntry] = {}
    for entry in entries:
        first.setdefault(entry.spec, entry)
    return list(first.values())


class ModelPicker(Dialog):
    """Type to filter; Enter loads the highlighted row (or the typed path / repo id); Esc cancels."""

    DEFAULT_CSS = """
    ModelPicker > Vertical { width: 96; }
    ModelPicker Label { width: 100%; height: auto; }  /* wraps on a small screen, never clips */
    ModelPicker OptionList { height: auto; max-height: 18; }
    """
    BINDINGS = bindings_for("picker")

    def __init__(self, list_models: ListModels, current: str | None = None,
                 list_folder: ListFolder = folder_models) -> None:
        super().__init__()
        self.list_models = list_models
        self.list_folder = list_folder
        self.current = current
        self.entries: list[ModelEntry] | None = None  # None = still scanning
        self.typed: tuple[str, list[ModelEntry]] = ("", [])  # a typed path and what it holds
        self._specs: list[str] = []  # the spec of each row, in row order

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Switch model  (Enter loads it, the chat stays; Esc cancels)")
            yield PlainInput(placeholder="filter, or type a local folder or Hugging Face repo id", id="spec")
            yield OptionList(id="models")
            yield Label("Looking for models in the Hugging Face cache…", id="note", classes="hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()
        self._fill("")
        self.run_worker(self.list_models, name="list-models", thread=True, exit_on_error=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The scan ended: show what it found, or say in one line why it could not look."""
        if event.worker.name == "look-in-path" and event.state == WorkerState.SUCCESS:
            self._looked(*event.worker.result)
            return
        if event.worker.name != "list-models" or not event.worker.is_finished:
            return
        note = self.query_one("#note", Label)
        if event.state == WorkerState.SUCCESS:
            self.entries = list(event.worker.result or [])
            note.update("" if self.entries else "No local models found: type a folder or a repo id.")
        else:
            self.entries = []
            note.update(literal(f"Could not list local models: {event.worker.error}".splitlines()[0]))
        self._fill(self.query_one(Input).value)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._fill(event.value)
        typed = event.value.strip()
        if typed:  # it may be a path: a folder of models, or a .gguf file
            self.run_worker(partial(self._look_in, typed), name="look-in-path", group="look-in-path",
                            exclusive=True, thread=True, exit_on_error=False)

    def _look_in(self, typed: str) -> tuple[str, list[ModelEntry]]:
        """(In a thread.) What the typed path holds, paired with the text it was looked up for."""
        return typed, self.list_folder(typed)

    def _looked(self, typed: str, found: list[ModelEntry]) -> None:
        """A typed path was looked into: show its models if the text is still the same."""
        if typed == self.query_one(Input).value.strip():
            self.typed = (typed, found)
            self._fill(typed)

    def _fill(self, text: str) -> None:
        """The models a typed path holds, the entries matching `text`, then one to load `text`
        itself as typed."""
        typed = text.strip()
        held = self.typed[1] if self.typed[0] == typed and typed else []
        shown = _one_per_spec(held + [e for e in self.entries or [] if matches(e, text)])
        rows = [Option(entry_prompt(e, e.spec == self.current)) for e in shown]
        self._specs = [e.spec for e in shown]
        if typed and typed not in self._specs:
            rows.append(Option(Text.assemble("Load ", (printable(typed), "bold"),
                                             ("  (local folder, .gguf file or repo id)", "dim"))))
            self._specs.append(typed)
        options = self.query_one(OptionList)
        options.set_options(rows)
        options.highlighted = 0 if rows else None

    def action_move(self, step: int) -> None:
        options = self.query_one(OptionList)
        options.action_cursor_down() if step > 0 else options.action_cursor_up()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._choose(self.query_one(OptionList).highlighted)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self._choose(event.option_index)

    def _choose(self, index: int | None) -> None:
        if index is None or not 0 <= index < len(self._specs):
            self.app.bell()
            return
        self.dismiss(self._specs[index])

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
