"""GGUF files on the local engine: the loader (`GgufLoader`) and what a llama.cpp model does
differently on the engine thread (`LlamaRuntime`).

Everything else (the command queue, turns, warm-up, counting, cancel, teardown, the shared load
steps) is the local engine's own (`engine.local.worker`), so the contract holds exactly as it does
for MLX models. Only reading the model differs: no MLX weights, no compute dtype, no CPU speed
layer (llama.cpp has its own kernels); each turn decodes with `engine.gguf.decoder` (llama.cpp on
the engine thread, each token's statistics on a side thread that also posts the turn's events).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from engine.core.api import EngineError, LoadProgress, ModelInfo
from engine.local.loaders import LoadContext, LoadedParts, ModelRuntime

if TYPE_CHECKING:
    from engine.gguf.load import LoadedGguf
    from engine.gguf.tuner import InUseThreads
    from engine.local.commands import LoadCommand

Sink = Callable[[object], None]
THREADS_FILE = "gguf-threads.json"  # measured thread counts, per file and machine (#31.1)


class GgufLoader:
    """``.gguf`` files (local, or ``owner/repo/file.gguf`` on the hub), run by llama.cpp."""

    def __init__(self, threads: int, in_use: bool = False) -> None:
        """`threads`: llama.cpp's threads for every model this loader reads; 0: chosen by
        measurement at each load (`engine.gguf.threads.candidate_threads`), starting from the rule.
        `in_use`: with 0, chosen again on the user's first replies (`engine.gguf.tuner`): where a
        screen draws them (the app); a headless run keeps the load's measurement, which is timed
        as it runs (tokens that go nowhere), so tuning again would only cost it its first reply."""
        self.threads = threads
        self.in_use = in_use

    def accepts(self, spec: str) -> bool:
        """A spec that names a GGUF file."""
        from engine.gguf.load import is_gguf_spec

        return is_gguf_spec(spec)

    def load(self, command: LoadCommand, context: LoadContext) -> LoadedParts:
        """llama.cpp's model and context, the tokenizer, and the overlapped decoder."""
        from engine.gguf.decoder import decoder_factory
        from engine.gguf.load import load_gguf
        from engine.local.lastrow import LastRowHead

        name = Path(command.spec).expanduser().name or command.spec
        command.on_progress(LoadProgress(f"loading {name} with llama.cpp"))
        from engine.core.settings.paths import cache_dir
        from engine.gguf.load import resolve_gguf
        from engine.gguf.threads import candidate_threads, default_threads, remembered_threads, threads_key

        store, key = cache_dir() / THREADS_FILE, ""
        remembered = None
        if not self.threads:  # automatic: a count measured for this file and machine before, else measure
            try:
                key = threads_key(Path(resolve_gguf(command.spec, command.on_progress)))
                remembered = remembered_threads(store, key)
            except (OSError, EngineError):
                key = ""  # the load below says what is wrong with the file
        threads = self.threads or remembered or default_threads()
        choices = () if self.threads or remembered else candidate_threads()
        loaded = load_gguf(command.spec, context.options.max_context, threads, command.on_progress)
        context.bind_template(loaded.tokenizer, loaded.name)
        command.on_progress(LoadProgress(f"loaded {name}", 1.0))
        from engine.gguf.tuner import InUseThreads

        tuned = self.in_use and not self.threads
        in_use = InUseThreads(candidate_threads(), threads, loaded.model.set_threads) if tuned else None
        return LoadedParts(
            model=loaded.model, tokenizer=loaded.tokenizer, context_limit=loaded.context,
            info=gguf_model_info(loaded, threads, measured=remembered is not None), template_name=loaded.name,
            last_row=LastRowHead([]), decoder_factory=decoder_factory(loaded.model.stats_thread, in_use),
            runtime=LlamaRuntime(loaded.model, choices, (store, key) if key else None, in_use),
            disk_cache=lambda folder, cap: _disk_cache(loaded, folder, cap),
        )


def _disk_cache(loaded: LoadedGguf, folder: Path, cap: int) -> Any:
    """Recent histories' KV caches on disk, written and read by llama.cpp (`engine.gguf.kvdisk`)."""
    from engine.gguf.kvdisk import LlamaDiskCache, gguf_key

    return LlamaDiskCache(folder, gguf_key(loaded.path, loaded.model.kv_type), cap)


class LlamaRuntime(ModelRuntime):
    """A llama.cpp model on the engine thread: events posted from its statistics thread, freed
    explicitly (on this thread); what-if previews run as llama.cpp sequences (`engine.gguf.rows`)."""

    def __init__(self, model: Any, choices: tuple[int, ...] = (), memory: tuple[Path, str] | None = None,
                 in_use: InUseThreads | None = None) -> None:
        self._model = model  # engine.gguf.model.LlamaModel
        self._choices = choices  # thread counts to measure (none: the user chose, or measured before)
        self._memory = memory  # where the measured count is kept, and for what
        self.in_use = in_use  # the count chosen again on the user's own turns (None: the user set one)

    def thread_choices(self) -> tuple[int, ...]:
        return self._choices

    def set_threads(self, threads: int, final: bool = False) -> str:
        """Use `threads` from now on; `final`: the measured choice, kept for the next load."""
        from engine.gguf.threads import remember_threads

        self._model.set_threads(threads)
        if self.in_use is not None:
            self.in_use.current = threads  # the load's choice is where the user's turns start
        if final and self._memory is not None:
            remember_threads(*self._memory, threads)
        return blas_line(threads, measured=True)

    def user_turn(self) -> None:
        if self.in_use is not None:
            self.in_use.arm()

    def compute_line(self) -> str:
        """The count the user's replies chose (`engine.gguf.tuner`), once chosen."""
        in_use = self.in_use
        return blas_line(in_use.current, measured=True) if in_use is not None and in_use.settled else ""

    def turn_sink(self, sink: Sink) -> tuple[Sink, Callable[[], None]]:
        """The turn's events go out from the statistics thread (`engine.gguf.decoder.HandOff`)."""
        from engine.gguf.decoder import HandOff

        handoff = HandOff(sink, self._model.stats_thread)
        in_use = self.in_use

        def flush() -> None:
            if in_use is not None:
                in_use.disarm()
            handoff.flush()
        return handoff, flush

    def close(self) -> None:
        """Free the llama.cpp model and its statistics thread now."""
        self._model.close()


def gguf_model_info(loaded: LoadedGguf, threads: int, measured: bool = False) -> ModelInfo:
    """What the caller may know about the loaded GGUF model (plain data only): as an MLX model's,
    the thinking switch read from the file's own chat template, and every ability."""
    from engine.local.prompt import supports_thinking
    from engine.local.reasoning import drops_past_thinking, opens_thinking

    return ModelInfo(
        name=loaded.name,
        path=str(loaded.path),
        context_limit=loaded.context,
        vocab_size=loaded.model.args.vocab_size,
        has_chat_template=bool(loaded.tokenizer.has_chat_template),
        parameters=loaded.model.parameters(),
        dtype=f"gguf {loaded.model.file_type_name()}",
        blas=blas_line(threads, measured),
        notes=(loaded.context_note,) if loaded.context_note else (),
        supports_thinking=supports_thinking(loaded.tokenizer),
        opens_thinking=opens_thinking(loaded.tokenizer),
        drops_past_thinking=drops_past_thinking(loaded.tokenizer),
        recommended=loaded.recommended,
    )


def blas_line(threads: int, measured: bool = False) -> str:
    """What the status bar says of llama.cpp's threads (`ModelInfo.blas`)."""
    return f"llama.cpp ({threads} thread{'s' if threads != 1 else ''}{', measured' if measured else ''})"
