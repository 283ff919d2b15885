"""The engine in a process of its own: `ProcessEngine` (the app's side) and the child it runs
(``python -m engine.process``). Importing this imports neither MLX nor Textual.

The names below are imported when first asked for: the child imports this package on its way to
`engine.process.child` and needs nothing of the app's side, and `engine.process.spawn` must be
importable before anything heavy (the app starts the process with it first thing)."""

from __future__ import annotations

from typing import Any

__all__ = ["EngineSetup", "LocalSetup", "ProcessEngine", "ScriptedSetup", "Spawned", "spawn"]

_HOMES = {"ProcessEngine": "engine.process.client", "EngineSetup": "engine.process.setup",
          "LocalSetup": "engine.process.setup", "ScriptedSetup": "engine.process.setup",
          "Spawned": "engine.process.spawn", "spawn": "engine.process.spawn"}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        import importlib

        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
