"""`logitscope bench --sections formats`: every format of a shape in one table (#31.5)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from engine.bench.report import Section


@pytest.mark.slow
def test_every_format_has_speed_memory_and_its_share_of_the_bound(tmp_path: Path) -> None:
    from engine.bench.formats_section import formats_section

    section = Section("formats", "formats")
    formats_section(section, ("2m",), tmp_path, prompt=16, decode=4, rounds=1)
    rows = {row.label: row.stat.median for row in section.rows}
    names = ["MLX float32", "MLX 4-bit"]
    if importlib.util.find_spec("llama_cpp") is not None:
        names += ["GGUF F32", "GGUF F16", "GGUF Q8_0", "GGUF Q4_0"]
    for name in names:
        assert rows[f"decode, 10 candidates (2m, {name})"] > 0
        assert 0 < rows[f"peak resident memory (2m, {name})"] < 2000  # MB
        assert 0 < rows[f"share of the bandwidth bound (2m, {name})"] < 100
    if "GGUF F32" in names:  # the bytes a token reads shrink with the format
        assert rows["weights read per token (2m, GGUF Q4_0)"] < rows["weights read per token (2m, GGUF F16)"] \
            < rows["weights read per token (2m, GGUF F32)"]
