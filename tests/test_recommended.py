"""A model's recommended sampling settings: read from what it ships, checked, reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.core.api import SamplingParams
from engine.core.recommended import apply, from_folder, from_gguf


def test_generation_config_is_read_and_checked(tmp_path: Path) -> None:
    (tmp_path / "generation_config.json").write_text(json.dumps(
        {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "repetition_penalty": 99, "bos_token_id": 1}))
    assert from_folder(tmp_path) == (("temperature", 0.6), ("top_p", 0.95), ("top_k", 20))  # 99: out of range, left out
    assert apply(SamplingParams(), from_folder(tmp_path)).top_k == 20
    (tmp_path / "generation_config.json").write_text('{"do_sample": false, "temperature": 0.6}')
    assert from_folder(tmp_path) == (("temperature", 0.0),)
    (tmp_path / "generation_config.json").write_text("not json")
    assert from_folder(tmp_path) == ()


def test_gguf_metadata_is_read_with_llama_cpp_s_names() -> None:
    meta: dict[str, Any] = {"general.sampling.temp": 0.7, "general.sampling.top_k": 40, "general.sampling.min_p": 0.05,
                            "general.sampling.mirostat": 1, "general.sampling.penalty_last_n": 32}
    assert dict(from_gguf(meta)) == {"temperature": 0.7, "top_k": 40, "min_p": 0.05, "repetition_context_size": 32}


async def test_the_engine_reports_them(chatml_model: Path, engine: Any, tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(chatml_model, folder)
    (folder / "generation_config.json").write_text(json.dumps({"temperature": 0.3, "top_p": 0.8}))
    info = await engine.load(str(folder))
    assert dict(info.recommended) == {"temperature": 0.3, "top_p": 0.8}
