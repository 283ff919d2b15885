"""The one place a front end gets its engine: scripted, remote or local.

Why one factory: the app and `logitscope run` used to build engines in two functions that drifted
apart (one kept recent KV caches on disk, the other did not; one used the GGUF-capable engine for
every model, the other only for ``.gguf`` specs). Every front end now calls `build_engine` with the
settings it resolved (config file, then its own flags), and gets the same engine for the same
settings. Importing this module imports neither MLX nor llama.cpp.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.core.api import EngineAPI
from engine.core.settings import Config

if TYPE_CHECKING:
    from engine.process.spawn import Spawned


@dataclass(frozen=True)
class EngineChoice:
    """What a front end decided beyond the config file (None: the config's value)."""

    server: str | None = None  # --server
    tokenizer: str | None = None  # --tokenizer
    gguf_threads: int | None = None  # --gguf-threads (0: automatic)
    scripted: bool = False  # the scripted test double instead of a model (tests, screenshots)
    scripted_delay_s: float = 0.02  # its time between tokens
    disk_cache: bool = True  # keep recent histories' KV caches on disk (off for throwaway runs)
    own_process: bool = False  # the local engine in a process of its own (the app: `engine.process`)
    threads_in_use: bool = False  # a screen draws the replies: llama.cpp's automatic thread count is
    # chosen again on the user's first replies (`engine.gguf.tuner`), not only at the load
    spawned: "Spawned | None" = None  # that process, started before the config was read (its starter
    # discards it when no engine took it: `tui.launch.build_app`)


def build_engine(config: Config, choice: EngineChoice = EngineChoice()) -> EngineAPI:
    """The engine for `config` and `choice`. Raises EngineError (one line) for a server URL that
    is not one."""
    if choice.scripted:
        from engine.scripted import ScriptedEngine

        return ScriptedEngine(token_delay=choice.scripted_delay_s)
    server = choice.server if choice.server is not None else config.engine.server
    if server:
        from dataclasses import replace

        from engine.remote import remote_engine

        engine = replace(config.engine, server=server, tokenizer=choice.tokenizer or config.engine.tokenizer)
        return remote_engine(engine)
    if choice.own_process:
        from engine.process import LocalSetup, ProcessEngine

        setup = LocalSetup(config.model, choice.gguf_threads, choice.disk_cache, choice.threads_in_use)
        return ProcessEngine(setup, spawned=choice.spawned)
    from engine.gguf.local_engine import local_engine

    return local_engine(config.model, threads=choice.gguf_threads, disk_cache=choice.disk_cache,
                        threads_in_use=choice.threads_in_use)


def __getattr__(name: str) -> Any:
    """`engine.factory.local_engine` (the front ends' name for `engine.gguf.local_engine`),
    imported when first asked for, so that importing the factory stays light (the app imports
    it before its first paint)."""
    if name == "local_engine":
        from engine.gguf.local_engine import local_engine

        return local_engine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def speed_layer(fast_blas: bool, fast_layers: bool) -> Any:
    """Which backend and BLAS the local engine would use here, decided before MLX is imported (as
    the engine thread decides it): what ``logitscope --version`` reports."""
    from engine.local.backend import speed_layer as decide

    return decide(fast_blas=fast_blas, fast_layers=fast_layers)
