"""Regenerate after a long history on caches that cannot be trimmed: rebuild vs snapshot.

A Mamba-2 model and a Mamba-2/attention hybrid (Granite-4-H) hold recurrent state that cannot be
cut back, so a regenerate used to rebuild the cache from the first token (before); the session
now restores the snapshot taken where the reply started (after, `engine.local.snapshots`). Both run
the engine's own `run_turn` on a `Session` in this thread, alternating, on the same weights: the
"before" session simply keeps no snapshots. Rows: the time to the regenerated reply's first
token, and the prompt ids prefilled for it.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Callable

from engine.core.api import GenerateRequest, Message, SamplingParams, TurnControl
from engine.bench.report import Section, alternate
from engine.bench.shapes import Shape, build_model
from engine.bench.turns import history, words

_MAMBA2 = {"num_heads": 16, "head_dim": 32, "state_size": 64, "conv_kernel": 4, "n_groups": 1,
           "layer_norm_epsilon": 1e-5, "time_step_limit": [0.0, 1e9], "time_step_rank": "auto"}
# Tiny models of the two kinds (bfloat16, random weights), about 6M parameters each.
REWIND_SHAPES: dict[str, Shape] = {
    "mamba2": Shape("mamba2", {
        "model_type": "mamba2", "hidden_size": 256, "num_hidden_layers": 4, "intermediate_size": 512,
        "vocab_size": 4096, "use_bias": False, "use_conv_bias": True, "tie_word_embeddings": True, **_MAMBA2}),
    "hybrid": Shape("hybrid", {
        "model_type": "granitemoehybrid", "hidden_size": 256, "num_hidden_layers": 4, "intermediate_size": 512,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 4096, "rms_norm_eps": 1e-5,
        "max_position_embeddings": 4096, "rope_theta": 10000.0, "tie_word_embeddings": True,
        "layer_types": ["mamba", "mamba", "mamba", "attention"], "position_embedding_type": "rope",
        "shared_intermediate_size": 512, "logits_scaling": 1.0, "attention_multiplier": 0.125,
        "embedding_multiplier": 1.0, "residual_multiplier": 1.0, "attention_bias": False, "mlp_bias": False,
        "mamba_n_heads": 16, "mamba_d_head": 32, "mamba_d_state": 64, "mamba_d_conv": 4, "mamba_n_groups": 1,
        "mamba_proj_bias": False, "mamba_conv_bias": True}),
}


def _session(folder: str, keep_snapshots: bool) -> Any:
    """A session on `folder` in the engine's compute dtype, with or without snapshots."""
    import mlx.core as mx
    from mlx_lm.utils import load

    from engine.local.precision import apply_compute_dtype, choose_compute_dtype
    from engine.local.session import Session
    from engine.local.snapshots import CacheSnapshots

    model, tokenizer = load(folder)[:2]
    apply_compute_dtype(model, choose_compute_dtype("auto", mx.default_device()))  # as the engine loads it
    session = Session(model, tokenizer, 8192, mx.default_stream(mx.default_device()))
    session.snapshots = CacheSnapshots() if keep_snapshots else CacheSnapshots(limit=0)
    return session


def _regenerate(session: Any, request: GenerateRequest, out: list[int]) -> Callable[[int], float]:
    """A contender: one regenerate of `request`'s reply; returns its TTFT in ms, notes the ids
    prefilled in `out`."""
    from engine.local.turn import run_turn

    def measure(_round: int) -> float:
        finished = run_turn(session, request, TurnControl(request.params), lambda _event: None)
        out.append(finished.prefilled_tokens)
        return finished.ttft_s * 1e3

    return measure


def rewind_section(section: Section, scratch: Path, history_tokens: int, rounds: int) -> None:
    """Rows for each model kind: regenerate TTFT and ids prefilled, rebuild vs snapshot."""
    from engine.bench.folders import write_model_folder

    for name, shape in REWIND_SHAPES.items():
        folder = str(write_model_folder(scratch / f"rewind-{name}", shape, build_model(shape)))
        sessions = {"rebuild": _session(folder, False), "snapshot": _session(folder, True)}
        rng = random.Random(0)
        chat = (*history(history_tokens, 4096, sessions["rebuild"].tokenizer, rng), Message("user", words(48, rng)))
        request = GenerateRequest(chat, SamplingParams(temperature=0.0, candidates=10, max_tokens=8))
        prefilled: dict[str, list[int]] = {kind: [] for kind in sessions}
        for kind, session in sessions.items():  # the first reply: both sessions then hold the history
            _regenerate(session, request, [])(0)
        samples = alternate({kind: _regenerate(s, request, prefilled[kind]) for kind, s in sessions.items()}, rounds)
        tag = f"after a {prefilled['rebuild'][0]:,}-token history ({name})"
        for kind, label in (("rebuild", "rebuild (before)"), ("snapshot", "snapshot (after)")):
            section.add(f"regenerate TTFT, {label}, {tag}", samples[kind], "ms")
            section.add(f"regenerate: prompt ids prefilled, {label}, {tag}", [float(n) for n in prefilled[kind]],
                        "ids")
        section.compare(f"regenerate TTFT: rebuild / snapshot ({name})", samples["rebuild"], samples["snapshot"])
    section.notes.append("the engine's run_turn on one thread, greedy, 8-token replies; 'before' keeps no snapshots, "
                         "so a rewind rebuilds the cache from the first token")
