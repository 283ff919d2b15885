"""The engine thread for GGUF models too: `engine.local.worker.EngineWorker` with a llama.cpp loader
for ``.gguf`` specs (every other spec loads as before, with MLX), so one engine, on one thread,
takes whatever the model picker or ``--model`` names.

Everything else (the command queue, turns, warm-up, counting, cancel, teardown) is the MLX
engine's own, so the contract holds exactly as it does there. Only loading differs: no MLX
weights, no compute dtype, no CPU speed layer for the model (llama.cpp has its own kernels);
Each turn decodes with `engine.gguf.decoder` (llama.cpp on this thread, the statistics beside it).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from engine.core.api import EngineError, ModelInfo, ModelLoadError
from engine.models import one_line
from engine.local.watchdog import Watchdog, bound_template
from engine.local.commands import GenerateCommand, LoadCommand, PreviewCommand
from engine.local.worker import EngineOptions, EngineWorker, _clipped

if TYPE_CHECKING:
    from engine.gguf.load import LoadedGguf
    from engine.local.session import Session


class GgufWorker(EngineWorker):
    """An `EngineWorker` whose models are GGUF files run by llama.cpp with `threads` threads."""

    def __init__(self, options: EngineOptions | None = None, threads: int = 1) -> None:
        self._threads = threads
        super().__init__(options)

    def _run(self) -> None:
        """The MLX engine's thread body; at its end the llama.cpp model is freed too (on this
        thread), and with it its statistics thread."""
        try:
            super()._run()
        finally:
            if self._session is not None:
                _close_model(self._session)

    def _load(self, command: LoadCommand, old: Session | None) -> Session | None:
        """Replace the loaded model once the new one is in; a failed load keeps the old one."""
        from engine.gguf.load import is_gguf_spec

        if not is_gguf_spec(command.spec):
            session = super()._load(command, old)
            if session is not old and old is not None:
                _close_model(old)
            return session
        try:
            return self._swap(command, old)
        except EngineError as exc:
            command.sink(exc)
        except Exception as exc:  # noqa: BLE001 - never let the thread die; the caller gets one line
            command.sink(ModelLoadError(f"Could not load {_clipped(command.spec)}: {one_line(exc)}"))
        return old

    def _generate(self, command: GenerateCommand, session: Session | None) -> None:
        """As the MLX engine's, with the turn's events posted from the statistics thread
        (`engine.gguf.decoder.HandOff`); returns once all of them, the last included, are posted."""
        if session is None or not _is_llama(session):
            super()._generate(command, session)
            return
        from engine.gguf.decoder import HandOff

        handoff = HandOff(command.sink, session.model.stats_thread)
        try:
            super()._generate(replace(command, sink=handoff), session)
        finally:
            handoff.flush()

    def _preview(self, command: PreviewCommand, session: Session | None) -> None:
        """What-if previews need a batch cache copied from the session's; llama.cpp's memory is
        one sequence shared with the chat here, so a GGUF model refuses them (and keeps its cache)."""
        if session is not None and _is_llama(session):
            command.sink(EngineError("What-if previews are not available for GGUF models yet."))
            return
        super()._preview(command, session)

    def _swap(self, command: LoadCommand, old: Session | None) -> Session:
        """Load `command.spec`, build its session, then free `old` and its llama.cpp model."""
        import mlx.core as mx

        from engine.core.api import LoadProgress
        from engine.gguf.decoder import decoder_factory
        from engine.gguf.load import load_gguf
        from engine.local.lastrow import LastRowHead
        from engine.local.session import Session

        name = Path(command.spec).expanduser().name or command.spec
        command.on_progress(LoadProgress(f"loading {name} with llama.cpp"))
        loaded = load_gguf(command.spec, self._options.max_context, self._threads, command.on_progress)
        self._watchdog = self._watchdog or Watchdog()
        bound_template(loaded.tokenizer, self._watchdog, loaded.name)
        if self._stream is None:  # one stream for the thread's life, made on the thread
            self._stream = mx.new_stream(mx.default_device())
        speed = self._speed
        assert speed is not None  # set before the first command is read
        session = Session(loaded.model, loaded.tokenizer, loaded.context, self._stream, LastRowHead([]),
                          sampler_exp=speed.sampler_exp)
        session.decoder_factory = decoder_factory(loaded.model.stats_thread)
        if old is not None:
            old.close()
            _close_model(old)
        command.on_progress(LoadProgress(f"loaded {name}", 1.0))
        command.sink(_model_info(loaded, self._threads))
        return session


def _is_llama(session: Session) -> bool:
    """Whether the session's model is llama.cpp's (not MLX's)."""
    from engine.gguf.model import LlamaModel

    return isinstance(session.model, LlamaModel)


def _close_model(session: Session) -> None:
    """Free a llama.cpp model now (an MLX one is freed by the garbage collector)."""
    if _is_llama(session):
        session.model.close()


def _model_info(loaded: LoadedGguf, threads: int) -> ModelInfo:
    """What the caller may know about the loaded GGUF model (plain data only)."""
    return ModelInfo(
        name=loaded.name,
        path=str(loaded.path),
        context_limit=loaded.context,
        vocab_size=loaded.model.args.vocab_size,
        has_chat_template=bool(loaded.tokenizer.has_chat_template),
        parameters=loaded.model.parameters(),
        dtype=f"gguf {loaded.model.file_type_name()}",
        blas=f"llama.cpp ({threads} thread{'s' if threads != 1 else ''})",
        notes=(loaded.context_note,) if loaded.context_note else (),
        recommended=loaded.recommended,
    )
