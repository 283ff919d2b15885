"""RoPE settings that a config keeps where mlx-lm does not look, mapped to where it does (or refused).

Why: transformers 5 writes a model's RoPE base and scaling only inside ``rope_parameters``
(``{"rope_type": "default", "rope_theta": 100000.0}``), with no top-level ``rope_theta`` or
``rope_scaling``. mlx-lm 0.32's Llama (and most of its families) reads only the top-level keys and
falls back to its defaults without a word: SmolLM2-135M converted that way ran with base 10000
instead of 100000 and answered in broken French. So before mlx-lm builds a model, the keys its
arguments class reads are filled from ``rope_parameters`` (`overrides`); a shape this module cannot
map safely (settings per layer type for a family that has one RoPE) is refused in one line
(`ModelLoadError`), never run silently wrong.

Families whose arguments class declares ``rope_parameters`` read it themselves and are left alone.
Pure Python (no MLX): `engine.models.load` asks mlx-lm for the arguments class's field names.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from engine.core.api import ModelLoadError

# Gemma 3's per-layer-type settings: full attention layers take the global base (and scaling),
# sliding ones the local base (mlx-lm: rope_theta / rope_scaling and rope_local_base_freq)
_PER_LAYER_TYPE = {"full_attention": ("rope_theta", "rope_scaling"), "sliding_attention": ("rope_local_base_freq", None)}


def overrides(config: dict[str, Any], fields: Collection[str], name: str) -> dict[str, Any]:
    """The config keys to set so that an mlx-lm arguments class with `fields` reads the RoPE
    settings `config` keeps in ``rope_parameters`` ({} when nothing needs mapping).

    ``rope_parameters`` wins over a top-level key that disagrees with it, as in transformers.
    Raises ModelLoadError (one line) for settings this cannot map.
    """
    params = config.get("rope_parameters")
    if not isinstance(params, dict) or not params or "rope_parameters" in fields:
        return {}
    if all(isinstance(value, dict) for value in params.values()):
        return _per_layer_type(params, fields, name)
    if any(isinstance(value, dict) for value in params.values()):
        raise ModelLoadError(f"{name}: its config.json's rope_parameters mixes per-layer settings with global ones; "
                             "refusing to guess its RoPE settings")
    return _one_rope(params, fields, name, "rope_theta", "rope_scaling")


def _one_rope(params: dict[str, Any], fields: Collection[str], name: str, base_key: str,
              scaling_key: str | None) -> dict[str, Any]:
    """One RoPE's settings (base, scaling, rotary fraction) under the keys mlx-lm reads."""
    out: dict[str, Any] = {}
    theta = params.get("rope_theta")
    if theta is not None:
        if not isinstance(theta, (int, float)) or isinstance(theta, bool) or theta <= 0:
            raise ModelLoadError(f"{name}: its config.json's rope_parameters has no usable rope_theta ({theta!r})")
        out[_needed(base_key, fields, name)] = float(theta)
    kind = params.get("rope_type", params.get("type", "default"))
    if kind != "default":
        if scaling_key is None:
            raise ModelLoadError(f"{name}: its config.json scales a RoPE ({kind!r}) that this mlx-lm version "
                                 "applies no scaling to; refusing to run it with different positions")
        out[_needed(scaling_key, fields, name)] = {k: v for k, v in params.items() if k != "rope_theta"}
    fraction = params.get("partial_rotary_factor")
    if fraction is not None and fraction != 1.0:
        out[_needed("partial_rotary_factor", fields, name)] = fraction
    return out


def _per_layer_type(params: dict[str, dict[str, Any]], fields: Collection[str], name: str) -> dict[str, Any]:
    """Settings per layer type (Gemma 3's full and sliding attention) under mlx-lm's names."""
    unknown = sorted(set(params) - set(_PER_LAYER_TYPE))
    if unknown:
        raise ModelLoadError(f"{name}: its config.json keeps RoPE settings for layer type {unknown[0]!r}, "
                             "which this mlx-lm version does not read; refusing to guess them")
    out: dict[str, Any] = {}
    for layer_type, settings in params.items():
        base_key, scaling_key = _PER_LAYER_TYPE[layer_type]
        out.update(_one_rope(settings, fields, name, base_key, scaling_key))
    return out


def _needed(key: str, fields: Collection[str], name: str) -> str:
    """`key`, if the model's mlx-lm arguments read it; else one line (the setting would be dropped)."""
    if key not in fields:
        raise ModelLoadError(f"{name}: its config.json sets {key} (in rope_parameters), which mlx-lm's model "
                             "for it does not read; refusing to run it with different settings")
    return key
