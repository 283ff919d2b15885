"""The loader seam: how one kind of model file becomes what a `Session` needs.

Why a seam: the engine thread's load steps are the same for every kind of model (bound the chat
template's run time, one MLX stream for the thread, build the session, free the old one only once
the new one is in, tell the caller), and only reading the weights differs: an MLX folder through
mlx-lm (`MlxLoader`, here) or a GGUF file through llama.cpp (`engine.gguf.loader.GgufLoader`).
`engine.local.worker.EngineWorker` asks each loader in turn whether it takes a spec and runs the
shared steps once, around whichever does.

A loaded model may also need its own behaviour on the engine thread after the load (llama.cpp's
turns post their events from a statistics thread, its model is freed explicitly): that is its
`ModelRuntime`, kept on the session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from engine.core.api import ModelInfo

if TYPE_CHECKING:
    from engine.local.backend import SpeedLayer
    from engine.local.commands import LoadCommand
    from engine.local.lastrow import LastRowHead
    from engine.local.options import EngineOptions

Sink = Callable[[object], None]


class ModelRuntime:
    """What a loaded model does differently on the engine thread; the MLX defaults here."""

    def turn_sink(self, sink: Sink) -> tuple[Sink, Callable[[], None]]:
        """The sink a turn writes to, and what to call once the turn is over (to flush it)."""
        return sink, lambda: None

    def close(self) -> None:
        """Free the model now; MLX models are freed by the garbage collector."""

    def user_turn(self) -> None:
        """A user's turn is about to run (not a warm-up): the runtime may time it."""

    def compute_line(self) -> str:
        """`TurnFinished.compute`: what computes the turns now, where it was chosen again since
        the load ("" otherwise)."""
        return ""

    def thread_choices(self) -> tuple[int, ...]:
        """Thread counts the load should measure to pick one (none: nothing to choose here)."""
        return ()

    def set_threads(self, threads: int, final: bool = False) -> str:
        """Run with `threads` threads from now on (`final`: the chosen count); returns the BLAS
        line `ModelInfo.blas` shows."""
        return ""


@dataclass
class LoadedParts:
    """A model read from its file, ready for the shared steps to wrap in a `Session`."""

    model: Any
    tokenizer: Any  # mlx-lm's TokenizerWrapper (or one shaped like it)
    context_limit: int
    info: ModelInfo
    template_name: str  # how the watchdog names the chat template in its one line
    last_row: LastRowHead | None = None
    decoder_factory: Callable[..., Any] | None = None  # None: `engine.local.turn`'s MLX decoder
    runtime: ModelRuntime = field(default_factory=ModelRuntime)
    disk_key: tuple[str, str] | None = None  # (folder, dtype) of the on-disk KV cache, when it has one
    # or: makes a model's own on-disk KV cache from (folder, size cap in bytes) (llama.cpp: engine.gguf.kvdisk)
    disk_cache: Callable[[Path, int], Any] | None = None
    after_load: Callable[[Callable[[], bool]], None] | None = None  # work once the caller has its answer


@dataclass(frozen=True)
class LoadContext:
    """What a loader may use of the engine thread: its options and speed layer."""

    options: EngineOptions
    speed: SpeedLayer
    first_load: bool  # the engine's first load says once why a fast BLAS could not be used
    # bounds the run time of the tokenizer's chat template (`engine.local.watchdog`): called as
    # soon as the tokenizer is read, before anything renders the template (the load's own probes
    # of it included), with the name its one line uses
    bind_template: Callable[[Any, str], None] = lambda tokenizer, name: None


class ModelLoader(Protocol):
    """One kind of model file."""

    def accepts(self, spec: str) -> bool:
        """Whether this loader reads `spec` (checked in order; the last loader takes the rest)."""
        ...

    def load(self, command: LoadCommand, context: LoadContext) -> LoadedParts:
        """Read the model; raises EngineError (one line) or anything else for the shared wrapper."""
        ...


class MlxLoader:
    """MLX folders, hub repos and the demo, through mlx-lm (with the CPU speed layer)."""

    def accepts(self, spec: str) -> bool:
        """Every spec: MLX is the engine's default kind."""
        return True

    def load(self, command: LoadCommand, context: LoadContext) -> LoadedParts:
        """mlx-lm's load, the compute dtype, the speed layer's tuning and the last-row head."""
        import mlx.core as mx

        from engine.local.lastrow import install_last_row_head
        from engine.local.precision import apply_compute_dtype, choose_compute_dtype
        from engine.models import load_model
        from engine.models.context import model_context_limit

        loaded = load_model(command.spec, trust_remote_code=command.trust_remote_code,
                            on_progress=command.on_progress)
        context.bind_template(loaded.tokenizer, Path(command.spec).expanduser().name or loaded.name)
        _quiet_length_warning(loaded.tokenizer)
        dtype = apply_compute_dtype(loaded.model,
                                    choose_compute_dtype(context.options.compute_dtype, mx.default_device()))
        speed = context.speed
        speed.tune(loaded.model)
        limit = model_context_limit(loaded.config, loaded.model, context.options.max_context)
        info = mlx_model_info(command.spec, loaded, limit, dtype, speed, tell_blas=context.first_load)
        return LoadedParts(
            model=loaded.model, tokenizer=loaded.tokenizer, context_limit=limit.tokens, info=info,
            template_name=Path(command.spec).expanduser().name or loaded.name,
            last_row=install_last_row_head(loaded.model), disk_key=(info.path, dtype),
            after_load=lambda busy: speed.after_load(loaded.model, busy),
        )


def _quiet_length_warning(tokenizer: Any) -> None:
    """Silence transformers' "Token indices sequence length is longer than..." for this tokenizer.

    The engine measures every prompt against the model's context itself and says so in one line
    (`ContextLimitError`); the tokenizer's own limit (often unset or wrong) would add a second,
    misleading line on stderr. transformers keeps this once-only flag per tokenizer.
    """
    flags = getattr(tokenizer, "deprecation_warnings", None)
    if isinstance(flags, dict):
        flags["sequence-length-is-longer-than-the-specified-maximum"] = True


def mlx_model_info(spec: str, loaded: Any, context: Any, dtype: str, speed: SpeedLayer, tell_blas: bool) -> ModelInfo:
    """What the caller may know about a loaded MLX model (plain data only).

    `path` is the folder the weights came from (for a hub id or "demo", not the spec itself);
    `notes` says once what the user should know, e.g. that the context limit is assumed, and, on
    the engine's first load (`tell_blas`), why the fast BLAS could not be loaded.
    """
    from engine.core.recommended import from_folder
    from engine.local.prompt import supports_thinking
    from engine.local.reasoning import drops_past_thinking, opens_thinking

    model, tokenizer = loaded.model, loaded.tokenizer
    blas_note = (f"Fast BLAS off: {speed.blas_problem}.",) if tell_blas and speed.blas_problem else ()
    return ModelInfo(
        name=Path(spec).expanduser().name or loaded.name,
        path=str(loaded.path),
        context_limit=context.tokens,
        vocab_size=vocab_size(model, tokenizer),
        has_chat_template=bool(tokenizer.has_chat_template),
        parameters=_parameter_count(model),
        dtype=dtype,
        blas=speed.blas_status,
        blas_problem=speed.blas_problem,
        supports_thinking=supports_thinking(tokenizer),
        opens_thinking=opens_thinking(tokenizer),
        drops_past_thinking=drops_past_thinking(tokenizer),
        notes=((context.note(),) if context.note() else ()) + blas_note,
        recommended=from_folder(Path(loaded.path)),
    )


def vocab_size(model: Any, tokenizer: Any) -> int:
    """How many ids the model's embedding takes (its config's vocab_size, else the tokenizer's)."""
    return int(getattr(getattr(model, "args", None), "vocab_size", 0) or len(tokenizer))


def _parameter_count(model: Any) -> int:
    """How many weights the model holds (quantized weights count as their packed elements)."""
    from mlx.utils import tree_flatten

    flat = tree_flatten(model.parameters())  # typed as list-or-dict; without `destination` a list
    assert isinstance(flat, list)
    return sum(int(array.size) for _, array in flat)
