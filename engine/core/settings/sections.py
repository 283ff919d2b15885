"""The settings as typed objects: one frozen dataclass per `config.toml` table, each field
documented where it is declared. `engine.core.settings.config` reads the files into them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engine.core.api import SamplingParams
from engine.core.forks import DEFAULT_ENTROPY, DEFAULT_MARGIN, ForkRule

COMPUTE_DTYPES = ("auto", "float32", "bfloat16", "float16", "model")
GGUF_THREADS_LIMIT = 512


def parse_gguf_threads(text: str) -> int:
    """``--gguf-threads N`` (``logitscope`` and ``logitscope run``): a whole number from 0 (automatic)
    to GGUF_THREADS_LIMIT, the range [model] gguf_threads takes; ValueError with one line."""
    value = text.strip()
    if not (value.isascii() and value.isdigit() and len(value) <= 4) or int(value) > GGUF_THREADS_LIMIT:
        shown = value if len(value) <= 20 else value[:17] + "..."
        raise ValueError(f"--gguf-threads takes a whole number from 0 (automatic) to {GGUF_THREADS_LIMIT}, "
                         f"got {shown!r}")
    return int(value)


@dataclass(frozen=True)
class ModelConfig:
    """[model]: which model to open and how to run it."""

    default: str = "demo"  # a local folder, a Hugging Face repo id, or "demo"
    trust_remote_code: bool = False  # allow model code from the repo; never on by default
    max_context: int = 0  # stop a conversation at this many tokens (0 = the model's limit)
    compute_dtype: str = "auto"  # one of COMPUTE_DTYPES; "auto" = fastest on this machine
    fast_blas: bool = True  # load OpenBLAS into MLX on Linux CPUs
    fast_layers: bool = True  # CPU fast paths: prompt attention, SwiGLU, RoPE, RMSNorm (engine.cpu.routing)
    # llama.cpp's threads for GGUF files; 0 = automatic (LOGITSCOPE_GGUF_THREADS, else
    # engine.gguf.default_threads); --gguf-threads overrides it
    gguf_threads: int = 0


@dataclass(frozen=True)
class UIConfig:
    """[ui]: how the TUI looks when it starts."""

    theme: str = "logitscope-dark"  # a built-in theme or one from the config folder's themes/
    heatmap: bool = False  # colour every token by its probability
    low_prob_threshold: float = 0.1  # "jump to next low-probability token" stops below this
    # A fork (f / F jump to the next / previous one; a reply's header counts them): a token whose
    # entropy is above `fork_entropy` nats, or whose top two raw probabilities are closer than
    # `fork_margin`. 0 switches that test off (`engine.core.forks`).
    fork_entropy: float = DEFAULT_ENTROPY
    fork_margin: float = DEFAULT_MARGIN
    # Read the chat back once it rests (#33): your messages' tokens with what the model would
    # have said there, each message's perplexity. Costs the engine a pass over what it has not
    # read yet; off: nothing is asked (the palette's "Score the chat on/off" switches it).
    score_chat: bool = True
    show_candidates: bool = True  # the candidates panel beside the chat
    show_params: bool = True  # the parameters panel

    @property
    def forks(self) -> ForkRule:
        return ForkRule(self.fork_entropy, self.fork_margin)


@dataclass(frozen=True)
class EngineConfig:
    """[engine]: where the model runs. Empty `server` = here, with MLX; a URL = an
    OpenAI-compatible server (mlx_lm.server, vLLM, llama.cpp: `engine.remote`)."""

    server: str = ""  # e.g. "http://127.0.0.1:8080"; --server overrides it
    # The *name* of the environment variable holding the server's API key (never the key itself,
    # so a config file can be shared); an empty name or an unset variable sends no key.
    api_key_env: str = "LOGITSCOPE_API_KEY"
    timeout_s: float = 60.0  # the longest silence tolerated from the server
    # The longest one reply may take in all, however the server streams (SSE keep-alive comments
    # reset only the silence timeout); --turn-timeout overrides it.
    turn_timeout_s: float = 600.0
    # The model's tokenizer (a folder or hub id) for servers that take token-id prompts (vLLM,
    # llama.cpp); empty = the model's name. --tokenizer overrides it.
    tokenizer: str = ""


CONTEXT_STRATEGIES = ("drop_oldest", "refuse")


@dataclass(frozen=True)
class ChatConfig:
    """[chat]: how a conversation behaves when it outgrows the model's context."""

    # "drop_oldest": leave the oldest exchanges out of what the model reads (never the system
    # prompt, never the new message; the status bar says so); "refuse": send nothing that does
    # not fit. Either way a message too long on its own is refused and stays in the input.
    context_strategy: str = "drop_oldest"


PREVIEW_SAMPLING = ("greedy", "current")


@dataclass(frozen=True)
class PreviewConfig:
    """[preview]: what-if previews, the next tokens each top candidate would lead to (`run --preview`
    and the candidates panel)."""

    candidates: int = 3  # how many of the top candidates get a preview; 0 = no previews
    tokens: int = 12  # how long each preview is
    sampling: str = "greedy"  # "greedy", or "current": the current sampling parameters with `seed`
    seed: int = 0  # the fixed seed of "current" previews (so a preview is what its branch writes)
    delay_ms: int = 300  # how long the token cursor rests before previews are computed

    def params(self, current: SamplingParams) -> SamplingParams:
        """What previews sample with: `current` at temperature 0 ("greedy": the model's favourite
        at each step, penalties kept) or as is ("current", drawn with `seed`); no candidates, a
        preview shows only its tokens."""
        greedy = {"temperature": 0.0} if self.sampling == "greedy" else {}
        return current.with_changes(candidates=0, seed=self.seed, max_tokens=self.tokens, **greedy)


Preset = dict[str, "int | float | None"]


@dataclass(frozen=True)
class Config:
    """Every setting, typed. `presets` map a name to a partial set of `SamplingParams` fields
    (apply one with ``params.with_changes(**preset)``); `keys` map binding ids to key strings
    (validated against the TUI's bindings by `tui.app.keymap`)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    sampling: SamplingParams = field(default_factory=SamplingParams)
    presets: dict[str, Preset] = field(default_factory=dict)
    ui: UIConfig = field(default_factory=UIConfig)
    keys: dict[str, str] = field(default_factory=dict)
    chat: ChatConfig = field(default_factory=ChatConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    preview: PreviewConfig = field(default_factory=PreviewConfig)


@dataclass(frozen=True)
class LoadedConfig:
    """The result of `load_config`: the settings, what was wrong, and where they came from.

    `user_path` is where "Save settings" writes, whether or not the file exists yet.
    """

    config: Config
    problems: tuple[str, ...]
    user_path: Path
    default_path: Path | None
