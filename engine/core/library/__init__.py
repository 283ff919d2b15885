"""The conversation library (a SQLite database in the user's data folder): Textual-free and
MLX-free, so the app and `logitscope run` share it. `store.Library` is the door."""

from engine.core.library.legacy import ImportReport, import_files
from engine.core.library.store import (
    DB_NAME,
    ChatChanged,
    Entry,
    Library,
    LibraryError,
    Stored,
    default_path,
)

__all__ = ["DB_NAME", "ChatChanged", "Entry", "Library", "LibraryError", "Stored", "default_path",
           "ImportReport", "import_files"]
