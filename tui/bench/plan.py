"""How big each bench section is: the `Plan` that `logitscope bench`'s arguments make
(`tui.bench.cli.make_plan`) and every section reads (`tui.bench.run`). A module of its own so
the two need not import each other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    """How big each section is; `--quick` shrinks everything."""

    rounds: int
    shapes: tuple[str, ...]
    decode_tokens: int
    decode_seconds: float  # minimum time per model in the decode section (more rounds if needed)
    history_tokens: int
    reply_tokens: int
    sampler_vocabs: tuple[int, ...]
    sampler_iterations: int
    process_shapes: tuple[str, ...]  # a 4-bit and an unquantized model, unless --shapes says
    process_prompt: int
    process_decode: int
    process_budget_s: float
    sections: tuple[str, ...]
    weights_dtype: str
    gguf_file: str = ""  # the gguf-load section's real file (--gguf FILE)
