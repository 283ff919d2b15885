"""What an engine refuses or fails at: one line for the user each (see `engine.core.api`)."""

from __future__ import annotations


class EngineError(Exception):
    """Anything the engine refuses or fails at; the message is one line for the user."""


NO_MODEL = "No model is loaded: load one first."  # what every engine answers before its first load


class ModelLoadError(EngineError):
    """A model that cannot be found, downloaded or loaded."""


class ContextLimitError(EngineError):
    """The conversation does not fit in the model's context (or the configured maximum)."""
