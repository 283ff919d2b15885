"""The engine in a process of its own: `ProcessEngine` (the app's side) and the child it runs
(``python -m engine.process``). Importing this imports neither MLX nor Textual."""

from engine.process.client import ProcessEngine
from engine.process.setup import EngineSetup, LocalSetup, ScriptedSetup

__all__ = ["EngineSetup", "LocalSetup", "ProcessEngine", "ScriptedSetup"]
