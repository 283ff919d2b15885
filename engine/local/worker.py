"""The engine thread: the one thread that ever touches MLX, fed by a command queue.

MLX streams belong to a thread (the Metal build crashes when a model is driven from another), so
loading, prefill, decoding, cache trimming and teardown all happen here. Callers submit commands
and receive plain data through a `Sink`, a thread-safe callable they supply (the async client
posts onto its event loop with `call_soon_threadsafe`).

MLX and mlx-lm are imported lazily inside the thread, so importing this module stays cheap.
"""

from __future__ import annotations

import atexit
import queue
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from engine.core.api import (
    NO_MODEL,
    EngineError,
    ModelInfo,
    ModelLoadError,
)
from engine.local.commands import (
    Command,
    CountCommand,
    GenerateCommand,
    LoadCommand,
    PrepareCommand,
    PreviewCommand,
    ProbeCommand,
    ScoreCommand,
    StagesCommand,
    TokenizeCommand,
    StopCommand,
)
from engine.local.loaders import MlxLoader, ModelLoader
from engine.local.options import EngineOptions
from engine.core.text import clipped, error_line as one_line
from engine.core.outside_logs import route_outside_logs
from engine.local.watchdog import Watchdog, bound_template

if TYPE_CHECKING:
    from engine.local.backend import SpeedLayer
    from engine.local.session import Session

CLOSE_WAIT_S = 2.0  # the longest closing waits for the engine thread (a daemon: it cannot hold the exit)


class EngineWorker:
    """Owns the engine thread and the session (model + cache) that lives on it."""

    def __init__(self, options: EngineOptions | None = None, loaders: Sequence[ModelLoader] = ()) -> None:
        """Start the thread at once: it must exist before any MLX work can be queued. `loaders` are
        asked in order which one reads a spec; MLX's (`MlxLoader`) takes every other spec."""
        self._options = options or EngineOptions()
        self._loaders: tuple[ModelLoader, ...] = (*loaders, MlxLoader())
        self._speed: SpeedLayer | None = None  # set on the thread, before MLX is imported
        self._commands: queue.Queue[Command] = queue.Queue()
        self._stream: Any = None  # the engine thread's MLX stream, touched only on that thread
        self._lock = threading.Lock()  # orders `submit` against the thread's death
        self._death: EngineError | None = None  # why the thread ended unasked, once it has
        self._current: Command | None = None  # the command the thread is running
        self._session: Session | None = None  # the loaded model and its cache (on the thread only)
        self._watchdog: Watchdog | None = None  # stops a chat template that renders too long
        self._told_blas = False  # a fast BLAS that could not be loaded is said once (the first load's notes)
        self._turn_unsaved = False  # a turn ran since the KV cache was last written to disk (engine.local.kvdisk)
        self._thread = threading.Thread(target=self._run, name="logitscope-engine", daemon=True)
        self._thread.start()
        # A daemon thread left running at interpreter exit can abort the process from MLX's
        # destructors; stopping it first (and releasing its streams on it) prevents that.
        atexit.register(self._stop_at_exit)

    @property
    def thread_id(self) -> int | None:
        """The engine thread's identity (tests check that MLX only ran there)."""
        return self._thread.ident

    def submit(self, command: Command) -> None:
        """Queue a command; it runs after every command submitted before it. After the thread
        died, the command is answered at once with the reason (nobody would ever serve it)."""
        with self._lock:
            if self._death is None:
                self._commands.put(command)
                return
        _refuse(command, self._death)

    def stop(self, timeout: float | None = None) -> None:
        """Finish queued work, free the model on its own thread, and join the thread."""
        if self._thread.is_alive():
            self._commands.put(StopCommand())
            self._thread.join(timeout)
        if not self._thread.is_alive():
            atexit.unregister(self._stop_at_exit)

    def _stop_at_exit(self) -> None:
        """The atexit hook: bounded, so a wedged turn cannot hang interpreter exit forever."""
        self.stop(timeout=CLOSE_WAIT_S)

    def _run(self) -> None:
        """The thread's body: set the speed layer up before MLX loads, serve commands, tear down here.

        Whatever escapes (the speed layer's set-up, a bug) must not leave callers waiting forever
        on a thread that is gone: `_die` answers the running command, the queued ones and every
        later one with the reason.
        """
        try:
            from engine.local.backend import speed_layer  # before this thread imports MLX

            self._speed = speed_layer(self._options.fast_blas, self._options.fast_layers)
            _import_for_load()
            self._serve()
        except BaseException as exc:  # noqa: BLE001 - reported to every caller, never swallowed
            self._die(exc)
        finally:
            _tear_down(self._session)

    def _serve(self) -> None:
        """Run commands until a StopCommand."""
        while True:
            command = self._current = self._commands.get()
            if isinstance(command, StopCommand):
                return
            if isinstance(command, LoadCommand):
                self._session = self._load(command, self._session)
            elif isinstance(command, PrepareCommand):
                self._prepare(command, self._session)
            elif isinstance(command, CountCommand):
                self._count(command, self._session)
            elif isinstance(command, PreviewCommand):
                self._preview(command, self._session)
            elif isinstance(command, (ScoreCommand, ProbeCommand)):
                self._score(command, self._session)
            elif isinstance(command, StagesCommand):
                self._stages(command, self._session)
            elif isinstance(command, TokenizeCommand):
                self._tokenize(command, self._session)
            else:
                self._generate(command, self._session)
                self._turn_unsaved = True
            self._current = None
            self._store_when_idle()

    def _die(self, exc: BaseException) -> None:
        """Record why the thread ends and answer every command that would otherwise wait forever."""
        with self._lock:
            self._death = EngineError(f"The engine stopped: {one_line(exc)}")
            waiting = [self._current] if self._current is not None else []
            while not self._commands.empty():
                waiting.append(self._commands.get_nowait())
        for command in waiting:
            _refuse(command, self._death)

    def _load(self, command: LoadCommand, old: Session | None) -> Session | None:
        """Replace the loaded model once the new one is in: a load that fails keeps the old model
        and its cache (for the moment of the swap both are in memory).

        The steps every kind of model shares run here, once; reading the weights is the job of
        the first loader that takes the spec (`engine.local.loaders`)."""
        try:
            import mlx.core as mx

            from engine.local.loaders import LoadContext
            from engine.local.session import Session

            speed = self._speed
            assert speed is not None  # set before the first command is read
            route_outside_logs()  # what transformers says while loading is our one line
            loader = next(loader for loader in self._loaders if loader.accepts(command.spec))
            parts = loader.load(command, LoadContext(self._options, speed, first_load=not self._told_blas,
                                                     bind_template=self._bind_template))
            if self._stream is None:  # one stream for the thread's life, made on the thread
                self._stream = mx.new_stream(mx.default_device())
            session = Session(parts.model, parts.tokenizer, parts.context_limit, self._stream, parts.last_row,
                              sampler_exp=speed.sampler_exp)
            session.decoder_factory = parts.decoder_factory
            session.runtime = parts.runtime
            if old is not None:
                old.close()
                old.runtime.close()
            if parts.disk_key is not None:
                session.disk = self._disk_cache(*parts.disk_key)
            elif parts.disk_cache is not None and self._options.kv_cache_dir:
                session.disk = parts.disk_cache(Path(self._options.kv_cache_dir), self._options.kv_cache_mb * 2**20)
            from engine.local.firstturn import warm_first_turn

            if self._options.warm_on_load:
                blas = warm_first_turn(session, parts.after_load, command.on_progress)
                command.sink(replace(parts.info, blas=blas) if blas else parts.info)
            else:  # as before #31.4: told at once, the CPU layer's work after (a turn waits for it)
                command.sink(parts.info)
                if parts.after_load is not None:
                    parts.after_load(lambda: not self._commands.empty())
            self._told_blas = True
            return session
        except EngineError as exc:
            command.sink(exc)
        except Exception as exc:  # never let the thread die; the caller gets one line
            command.sink(ModelLoadError(f"Could not load {clipped(command.spec)}: {one_line(exc)}"))
        return old

    def _bind_template(self, tokenizer: Any, name: str) -> None:
        """Bound the tokenizer's chat template by this thread's watchdog (made on first use)."""
        self._watchdog = self._watchdog or Watchdog()
        bound_template(tokenizer, self._watchdog, name)

    def _disk_cache(self, folder: str, dtype: str) -> Any:
        """The on-disk KV cache for this model, when the options ask for one."""
        if not self._options.kv_cache_dir or not folder:
            return None
        from engine.local.kvdisk import DiskKVCache, model_key

        return DiskKVCache(Path(self._options.kv_cache_dir), model_key(folder, dtype),
                           self._options.kv_cache_mb * 2**20)

    def _store_when_idle(self) -> None:
        """Once after each turn, when nothing is queued, write the history's cache to disk
        (`engine.local.kvdisk`): off every turn's path, once per turn (not per warm-up of a draft being
        typed), and a command arriving meanwhile waits for one file write at most."""
        session = self._session
        if not self._turn_unsaved or session is None or session.disk is None or not self._commands.empty():
            return
        self._turn_unsaved = False
        try:
            session.disk.store(session)
        except Exception:  # noqa: BLE001 - an optimisation: a failed write leaves nothing behind
            pass

    def _count(self, command: CountCommand, session: Session | None) -> None:
        """The prompt's length as the next turn would render it (its template, its spliced ids)."""
        if session is None:
            command.sink(EngineError(NO_MODEL))
            return
        try:
            from engine.local.prompt import render_prompt

            command.sink(len(render_prompt(session.tokenizer, command.messages, False, session.encode,
                                              command.thinking)))
        except EngineError as exc:
            command.sink(exc)
        except Exception as exc:  # noqa: BLE001 - a template that cannot render this conversation
            command.sink(EngineError(f"Could not count the conversation's tokens: {one_line(exc)}"))

    def _prepare(self, command: PrepareCommand, session: Session | None) -> None:
        """Warm the cache until done or until another command waits; never fails the thread."""
        warmed = 0
        try:
            if session is not None:
                from engine.local.warmup import warm_cache

                warmed = warm_cache(session, command.messages, lambda: not self._commands.empty(), command.draft,
                                    command.thinking, command.score_candidates)
        except EngineError:  # ids this model cannot take: the turn itself will say so
            pass
        except Exception:  # noqa: BLE001 - an optimisation: the next turn prefills what is missing
            assert session is not None
            session.reset_cache()  # the cache may hold ids the bookkeeping never saw
        command.done(warmed)

    def _preview(self, command: PreviewCommand, session: Session | None) -> None:
        """Run what-if previews; they never touch the session's cache, so a failure leaves it as is."""
        if session is None:
            command.sink(EngineError(NO_MODEL))
            return
        try:
            from engine.local.preview import check_request, run_preview

            check_request(command.request, session.vocab_size)
            def stop() -> bool:
                """Give way to any queued command (a turn starts within one decode step)."""
                return command.cancelled.is_set() or not self._commands.empty()

            command.sink(run_preview(session, command.request, stop, command.sink))
        except EngineError as exc:
            command.sink(exc)
        except Exception as exc:  # noqa: BLE001 - the thread lives on; the caller gets one line
            command.sink(EngineError(f"Preview failed: {one_line(exc)}"))

    def _score(self, command: ScoreCommand | ProbeCommand, session: Session | None) -> None:
        """Score or probe (`engine.local.scoring`); a failure leaves a clean cache and one line."""
        if session is None:
            command.sink(EngineError(NO_MODEL))
            return
        try:
            from engine.local.scoring import run_probe, run_score

            if isinstance(command, ScoreCommand):
                command.sink(run_score(session, command.request, command.cancelled))
            else:
                command.sink(run_probe(session, command.request))
        except EngineError as exc:
            command.sink(exc)
        except Exception as exc:  # noqa: BLE001 - the thread lives on; the caller gets one line
            session.reset_cache()  # the cache may hold ids the bookkeeping never saw
            command.sink(EngineError(f"Scoring failed: {one_line(exc)}"))

    def _stages(self, command: StagesCommand, session: Session | None) -> None:
        """Recompute a token's stage view; it reads the session's cache, never changes it."""
        if session is None:
            command.sink(EngineError(NO_MODEL))
            return
        try:
            from engine.local.stagerows import run_stage_view

            command.sink(run_stage_view(session, command.request))
        except EngineError as exc:
            command.sink(exc)
        except Exception as exc:  # noqa: BLE001 - the thread lives on; the caller gets one line
            command.sink(EngineError(f"The stage view failed: {one_line(exc)}"))

    def _tokenize(self, command: TokenizeCommand, session: Session | None) -> None:
        if session is None:
            command.sink(EngineError(NO_MODEL))
            return
        try:
            command.sink(tuple(int(i) for i in session.tokenizer.encode(command.text, add_special_tokens=False)))
        except Exception as exc:  # noqa: BLE001 - a tokenizer that fails on this text
            command.sink(EngineError(f"Could not tokenize {command.text[:40]!r}: {one_line(exc)}"))

    def _generate(self, command: GenerateCommand, session: Session | None) -> None:
        """Run one turn; any failure ends it with one EngineError and a clean cache."""
        if session is None:
            command.sink(EngineError(NO_MODEL))
            return
        try:
            from engine.local.turn import run_turn

            sink, flush = session.runtime.turn_sink(command.sink)
            session.runtime.user_turn()
            try:
                done = run_turn(session, command.request, command.control, sink)
                compute = session.runtime.compute_line()
                sink(replace(done, compute=compute) if compute else done)
            finally:
                flush()
        except EngineError as exc:
            command.sink(exc)
        except Exception as exc:
            session.reset_cache()  # the cache may hold ids the bookkeeping never saw
            command.sink(EngineError(f"Generation failed: {one_line(exc)}"))


def _refuse(command: Command, error: EngineError) -> None:
    """Answer a command the thread will never run: its caller gets `error` (a warm-up, 0)."""
    if isinstance(command, PrepareCommand):
        command.done(0)
    elif not isinstance(command, StopCommand):
        command.sink(error)


def _import_for_load() -> None:
    """Import what every model load needs (MLX, mlx-lm and, through it, transformers: seconds)
    when the thread starts, transformers' import table from the cache folder after the first
    run (`engine.local.importcache`: the hook must be in before transformers is imported)."""
    from engine.core.settings.paths import cache_dir
    from engine.local import importcache

    importcache.install(cache_dir() / "imports")
    import engine.local.loaders  # noqa: F401 - for the import itself
    import engine.local.session  # noqa: F401
    import engine.models  # noqa: F401
    import mlx_lm.utils  # noqa: F401


def _tear_down(session: Session | None) -> None:
    """Free the model and the thread's streams; best effort, the thread is ending either way."""
    try:
        if session is not None:
            session.close()
            session.runtime.close()
        _release_streams()
    except Exception:  # noqa: BLE001 - nothing is left to tell: callers were answered already
        pass


def _release_streams() -> None:
    """Finish pending work and destroy this thread's MLX streams before the thread ends.

    Left to process exit, stream threads owned by a finished thread can abort the interpreter
    ("terminate called without an active exception"); MLX provides `clear_streams` for this.
    """
    if "mlx.core" not in sys.modules:
        return
    import mlx.core as mx

    mx.synchronize()
    mx.clear_streams()
