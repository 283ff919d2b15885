"""What a caller may know of the loaded model (`ModelInfo`), what the engine can do with it
(`Abilities`), and the news while it loads (`LoadProgress`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LoadProgress:
    """Loading or downloading news while `EngineAPI.load` runs (fraction None = unknown)."""

    message: str
    fraction: float | None = None


@dataclass(frozen=True)
class Abilities:
    """What an engine can do with the loaded model, declared at load so a front end shows or hides
    a feature up front instead of finding out by an error. Each missing ability carries its one
    line of why (`why`), said once where the feature would be."""

    previews: bool = True  # what-if previews (`EngineAPI.preview`)
    branching: bool = True  # continue a reply from a chosen candidate (`GenerateRequest.continue_last`)
    token_counting: bool = True  # `count_tokens` counts exactly; without it the server checks the length
    live_params: bool = True  # a parameter change applies from the next token (else from the next reply)
    warm_up: bool = True  # `prepare` warms the cache for the message being typed
    scoring: bool = True  # `score`: teacher-forced statistics of every token read, perplexity
    probes: bool = True  # `probe`: a phrase's probability at any position
    stage_view: bool = True  # `stages` recomputes each stage's distribution exactly (it needs full logits rows)
    why: tuple[tuple[str, str], ...] = ()  # (ability, the one line saying why it is missing)

    def reason(self, ability: str) -> str:
        """Why `ability` is missing ("" when it is not, or no reason was given)."""
        return dict(self.why).get(ability, "")


@dataclass(frozen=True)
class ModelInfo:
    """What the caller may know about the loaded model."""

    name: str  # a short display name
    path: str  # the local folder it was loaded from
    context_limit: int
    vocab_size: int
    has_chat_template: bool
    parameters: int
    dtype: str  # compute dtype in use, e.g. "float32"
    blas: str = ""  # which BLAS MLX's CPU matmuls use, e.g. "OpenBLAS (2 threads)"
    notes: tuple[str, ...] = ()  # lines to tell the user once after the load (an assumed context limit)
    blas_problem: str = ""  # why the fast BLAS could not be loaded (the missing library, its install command)
    supports_thinking: bool = False  # the chat template has a thinking switch (`GenerateRequest.thinking`)
    abilities: Abilities = Abilities()  # what the engine can do with this model
    opens_thinking: bool = False  # the generation prompt ends inside <think>: replies think from token 0
    drops_past_thinking: bool = False  # the template leaves earlier replies' thinking out of the history
    # the sampling settings the model ships (generation_config.json, GGUF general.sampling.*): (name, value)
    recommended: tuple[tuple[str, object], ...] = ()
