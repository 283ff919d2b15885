"""How many positions a model takes: read in one place from every key model configs use for it.

Why: a model run past its context does not fail cleanly. GPT-2 and GPT-BigCode keep their length
as `n_positions` and look positions up in a learned table, and MLX's CPU lookup does no bounds
check: position 1,024 of a 1,024-row table reads whatever memory follows (tried: token id 0 three
times with null logprobs). Reading only `max_position_embeddings` and falling back to 4096 let
that happen. The engine refuses a prompt that would pass the limit and stops a reply at it
(`engine.local.turn`), so the limit itself must be right for every family.

The rules:
- every key mlx-lm's model configs use for it (`CONTEXT_KEYS`), at the top level and in a nested
  `text_config` (vision-language wrappers), and in the model's own arguments (mlx-lm's defaults
  for keys the config left out); where several are present, the smallest wins;
- a learned position table (`wpe`) caps the limit at its row count whatever the config says;
- a sliding window bounds what a layer attends to, not how many positions the model takes, and
  RoPE scaling factors are not multiplied in (the configs that use them already state the
  extended length in `max_position_embeddings`): the limit stays the stated one, the safe side;
- when nothing states a limit (Falcon, Mamba), the engine says so once (`ContextLimit.note`,
  carried by `ModelInfo.notes`) and uses the user's `[model] max_context` when set, else
  mlx-lm's default for the family or `DEFAULT_CONTEXT`, whichever is smaller.

Plain data in, plain data out: no MLX import here (the model is only walked for its table).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping

# Keys that hold a model's context length in the configs of the families mlx-lm runs:
# max_position_embeddings (most), n_positions (gpt2, gpt_bigcode, gptj), n_ctx (gpt2),
# max_seq_len (mpt-style), seq_length (qwen v1, chatglm, plamo2), max_sequence_length,
# max_seq_length, model_max_length (kimi_linear).
CONTEXT_KEYS: tuple[str, ...] = (
    "max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "seq_length",
    "max_sequence_length", "max_seq_length", "model_max_length",
)
NESTED_CONFIGS: tuple[str, ...] = ("text_config",)
DEFAULT_CONTEXT = 4096  # when nothing states a limit and the user set no maximum
POSITION_TABLES: tuple[str, ...] = ("wpe",)  # learned absolute position embeddings (one row per position)


@dataclass(frozen=True)
class ContextLimit:
    """The limit the engine uses, and where it came from (for the one line that explains it)."""

    tokens: int
    source: str  # "config n_positions", "position table", "mlx-lm default ...", "max_context", "default"
    stated: bool  # the model states it (config or position table); else it is an assumption

    def note(self) -> str:
        """One line for the user when the limit is an assumption; "" when the model states it."""
        if self.stated:
            return ""
        if self.source == "max_context":
            return f"the model's config states no context length; using max_context = {self.tokens} tokens"
        return (f"the model's config states no context length; assuming {self.tokens} tokens "
                "(set [model] max_context to change it)")


def stated_limits(config: Mapping[str, Any] | None) -> Iterator[tuple[str, int]]:
    """(key, value) for every usable context key in `config` and its nested text config."""
    if not isinstance(config, Mapping):
        return
    for key in CONTEXT_KEYS:
        value = _positive_int(config.get(key))
        if value is not None:
            yield key, value
    for nested in NESTED_CONFIGS:
        for key, value in stated_limits(config.get(nested)):
            yield f"{nested}.{key}", value


def _positive_int(value: Any) -> int | None:
    """A usable length: a positive integer (or an integral float, as some configs write it)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else None


def _arguments(args: Any) -> Mapping[str, Any] | None:
    """The model's mlx-lm arguments (a dataclass) as a mapping, or None."""
    fields = getattr(args, "__dict__", None)
    return fields if isinstance(fields, Mapping) else None


def position_table_rows(model: Any) -> int | None:
    """Rows of the model's learned position table, the hard bound where there is one."""
    named = getattr(model, "named_modules", None)
    if named is None:
        return None
    rows = [_rows(module) for name, module in named() if name.rsplit(".", 1)[-1] in POSITION_TABLES]
    found = [r for r in rows if r is not None]
    return min(found) if found else None


def _rows(module: Any) -> int | None:
    weight = getattr(module, "weight", None)
    shape = getattr(weight, "shape", None)
    return int(shape[0]) if shape else None


def model_context_limit(config: Mapping[str, Any] | None, model: Any = None, max_context: int = 0) -> ContextLimit:
    """The context limit for a loaded model (see the module doc for the rules).

    A limit the model states is only ever lowered by `max_context` (0 = none); an assumed one
    (mlx-lm's default for the family, else `DEFAULT_CONTEXT`) is replaced by it. A learned
    position table caps both.
    """
    table = position_table_rows(model) if model is not None else None
    stated = [(f"config {key}", value) for key, value in stated_limits(config)]
    if table is not None:
        stated.append(("position table", table))
    if stated:
        source, tokens = min(stated, key=lambda item: item[1])
        return ContextLimit(min(tokens, max_context) if max_context > 0 else tokens, source, True)
    if max_context > 0:
        return ContextLimit(max_context, "max_context", False)
    assumed = [(f"mlx-lm default {key}", value)
               for key, value in stated_limits(_arguments(getattr(model, "args", None)))]
    source, tokens = min(assumed, key=lambda item: item[1], default=("default", DEFAULT_CONTEXT))
    return ContextLimit(min(tokens, DEFAULT_CONTEXT), source, False)
