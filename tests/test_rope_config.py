"""RoPE settings kept only in ``rope_parameters`` (as transformers 5 writes configs) are read, or refused
in one line, never run silently with mlx-lm's defaults (`engine.models.ropeconfig`, issue #28.4).

The same tiny Llama is written twice: once with the top-level ``rope_theta`` / ``rope_scaling`` that
mlx-lm reads, once with only ``rope_parameters``. Both must give the same logits; a third copy
with no RoPE keys at all (mlx-lm's default base, 10000) must not, which shows the comparison can fail.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tinymodels import build_model

from engine.core.api import ModelLoadError
from engine.models.ropeconfig import overrides

IDS = [5, 17, 42, 8, 99, 23, 61, 7, 150, 12, 33, 71]
LLAMA_FIELDS = {"rope_theta", "rope_scaling", "max_position_embeddings"}


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_model(tmp_path_factory.mktemp("rope") / "base", "chatml", seed=7)


def variant(source: Path, folder: Path, edit: dict[str, Any], drop: tuple[str, ...] = ()) -> Path:
    """A copy of `source` whose config.json has `edit` applied and the `drop` keys removed."""
    shutil.copytree(source, folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config.update(edit)
    for key in drop:
        config.pop(key, None)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def logits(folder: Path) -> np.ndarray:
    """The model's logits over IDS, loaded through the engine's own loader."""
    import mlx.core as mx

    from engine.models.load import load_model

    loaded = load_model(str(folder), trust_remote_code=False, on_progress=None)
    return np.array(loaded.model(mx.array([IDS]))[0].astype(mx.float32))


@pytest.mark.parametrize(
    ("top", "nested"),
    [
        ({"rope_theta": 100000.0}, {"rope_type": "default", "rope_theta": 100000.0}),
        ({"rope_theta": 50000.0, "rope_scaling": {"rope_type": "linear", "factor": 4.0}},
         {"rope_type": "linear", "factor": 4.0, "rope_theta": 50000.0}),
    ],
    ids=["base", "linear-scaling"],
)
def test_rope_parameters_only_equals_top_level_keys(source: Path, tmp_path: Path, top: dict[str, Any],
                                                     nested: dict[str, Any]) -> None:
    old_style = variant(source, tmp_path / "top", top)
    new_style = variant(source, tmp_path / "nested", {"rope_parameters": nested}, drop=("rope_theta", "rope_scaling"))
    default = variant(source, tmp_path / "default", {}, drop=("rope_theta", "rope_scaling"))
    expected = logits(old_style)
    assert np.array_equal(logits(new_style), expected)
    assert np.abs(logits(default) - expected).max() > 1e-2  # mlx-lm's own default would differ


def test_rope_parameters_win_over_a_disagreeing_top_level_key() -> None:
    """transformers reads rope_parameters first; mlx-lm must then run with that value too."""
    config = {"rope_theta": 10000.0, "rope_parameters": {"rope_type": "default", "rope_theta": 100000.0}}
    assert overrides(config, LLAMA_FIELDS, "m") == {"rope_theta": 100000.0}


def test_gemma3_layer_types_map_to_its_two_bases() -> None:
    config = {"rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}}
    fields = {"rope_theta", "rope_scaling", "rope_local_base_freq"}
    assert overrides(config, fields, "g") == {"rope_theta": 1e6, "rope_local_base_freq": 10000.0,
                                              "rope_scaling": {"rope_type": "linear", "factor": 8.0}}


def test_families_that_read_rope_parameters_are_left_alone() -> None:
    config = {"rope_parameters": {"chunked_attention": {"rope_theta": 5.0}}}
    assert overrides(config, {"rope_parameters", "rope_theta"}, "m") == {}
    assert overrides({"rope_theta": 5.0}, LLAMA_FIELDS, "m") == {}


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"chunked_attention": {"rope_theta": 5.0}}, "layer type 'chunked_attention'"),
        ({"full_attention": {"rope_theta": 5.0}, "rope_theta": 3.0}, "mixes"),
        ({"rope_type": "default", "rope_theta": "fast"}, "no usable rope_theta"),
        ({"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}, "partial_rotary_factor"),
    ],
)
def test_settings_it_cannot_map_are_one_line(params: dict[str, Any], said: str) -> None:
    with pytest.raises(ModelLoadError, match=said) as caught:
        overrides({"rope_parameters": params}, LLAMA_FIELDS, "m")
    assert "\n" not in str(caught.value)


def test_a_folder_it_cannot_map_is_refused_at_load(source: Path, tmp_path: Path) -> None:
    folder = variant(source, tmp_path / "odd", {"rope_parameters": {"chunked_attention": {"rope_theta": 5.0}}})
    with pytest.raises(ModelLoadError, match="refusing") as caught:
        logits(folder)
    assert "\n" not in str(caught.value)
