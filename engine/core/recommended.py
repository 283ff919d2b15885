"""A model's recommended sampling settings, as it ships them: ``generation_config.json`` (Hugging
Face folders) or ``general.sampling.*`` (GGUF metadata, llama.cpp's names). Plain data in, plain
data out; each value is checked by `SamplingParams` itself and a bad one is left out (a file from
outside is data, never trusted), so applying them can never fail half-way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from engine.core.api import ParamError, SamplingParams

# generation_config.json key -> ours (Hugging Face's names mostly are ours)
_HF = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "min_p": "min_p",
       "repetition_penalty": "repetition_penalty", "typical_p": "typical_p"}
# GGUF general.sampling.* (llama.cpp's llama-model-loader names) -> ours
_GGUF = {"temp": "temperature", "top_k": "top_k", "top_p": "top_p", "min_p": "min_p",
         "xtc_probability": "xtc_probability", "xtc_threshold": "xtc_threshold",
         "penalty_repeat": "repetition_penalty", "penalty_last_n": "repetition_context_size",
         "mirostat": "mirostat", "mirostat_tau": "mirostat_tau", "mirostat_eta": "mirostat_eta"}

Recommended = tuple[tuple[str, Any], ...]


def _checked(pairs: list[tuple[str, Any]]) -> Recommended:
    out = []
    for name, value in pairs:
        if isinstance(value, list) and len(value) == 1:  # GGUF arrays of one
            value = value[0]
        kind = type(getattr(SamplingParams(), name))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        try:
            SamplingParams().with_changes(**{name: value})
        except (ParamError, TypeError, OverflowError):
            continue
        out.append((name, value))
    return tuple(out)


def from_folder(folder: Path) -> Recommended:
    """What ``generation_config.json`` recommends (nothing when absent, unreadable, or greedy:
    ``do_sample: false`` recommends temperature 0)."""
    try:
        data = json.loads((folder / "generation_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    if not isinstance(data, dict):
        return ()
    pairs = [(ours, data[key]) for key, ours in _HF.items() if key in data]
    if data.get("do_sample") is False:
        pairs = [("temperature", 0.0)]
    return _checked(pairs)


def from_gguf(meta: dict[str, Any]) -> Recommended:
    """What a GGUF file's ``general.sampling.*`` keys recommend."""
    pairs = [(ours, meta[f"general.sampling.{key}"]) for key, ours in _GGUF.items() if f"general.sampling.{key}" in meta]
    return _checked(pairs)


def from_gguf_text(read: Callable[[str], str | None]) -> Recommended:
    """The same, from values read as text (llama.cpp's ``llama_model_meta_val_str``): numbers are
    parsed here, anything else is left out."""
    meta: dict[str, Any] = {}
    for key in _GGUF:
        text = read(f"general.sampling.{key}")
        if text is None:
            continue
        try:
            meta[f"general.sampling.{key}"] = int(text) if text.strip().lstrip("-").isdigit() else float(text)
        except ValueError:
            continue
    return from_gguf(meta)


def apply(params: SamplingParams, recommended: Recommended) -> SamplingParams:
    """`params` with the recommended values (each already checked)."""
    return params.with_changes(**dict(recommended))
