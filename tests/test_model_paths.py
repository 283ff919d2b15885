"""A model folder whose path holds glob characters loads like any other (issue #29, item 13):
mlx-lm finds the weights with ``glob.glob`` on the folder's own path, which read ``[ab]`` as a
pattern and said "No safetensors found"."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.models.load import load_model


@pytest.mark.parametrize("name", ["run[ab]", "what?", "star*", "[1]"])
def test_a_folder_named_like_a_glob_pattern_loads(tiny: Path, tmp_path: Path, name: str) -> None:
    folder = tmp_path / name / "model"
    shutil.copytree(tiny, folder)
    loaded = load_model(str(folder), trust_remote_code=False, on_progress=None)
    assert loaded.path == folder and loaded.tokenizer.encode("hello")
