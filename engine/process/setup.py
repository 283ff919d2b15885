"""What the app tells its engine process to build, in the first frame it sends.

Kept apart from the client and the child so that both read one definition, and so that the
child builds the same engine `engine.factory` would build in the app's own process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.core.api import EngineAPI
from engine.core.settings import ModelConfig


@dataclass(frozen=True)
class LocalSetup:
    """The local engine (MLX and GGUF), as `engine.factory.local_engine` makes it."""

    model: ModelConfig = ModelConfig()
    threads: int | None = None  # llama.cpp's (None: [model] gguf_threads; 0: measured at each load)
    disk_cache: bool = True  # recent histories' KV caches on disk
    threads_in_use: bool = False  # automatic threads chosen again on the user's replies (a screen draws them)

    def build(self) -> EngineAPI:
        from engine.gguf.local_engine import local_engine

        return local_engine(self.model, threads=self.threads, disk_cache=self.disk_cache,
                            threads_in_use=self.threads_in_use)


@dataclass(frozen=True)
class ScriptedSetup:
    """The scripted test double (`engine.scripted`): the process's own mechanics tested without
    weights or MLX (cancelling, live parameters, a child that dies)."""

    options: dict[str, Any] = field(default_factory=dict)  # ScriptedEngine's keyword arguments

    def build(self) -> EngineAPI:
        from engine.scripted import ScriptedEngine

        return ScriptedEngine(**self.options)


EngineSetup = LocalSetup | ScriptedSetup
