"""engine.bench.gguf_section: the GGUF rows of ``logitscope bench`` are built offline and filled.

One round, a few tokens, the smallest shape: this checks the section runs end to end (files made
and quantized by llama.cpp, both contenders measured, ratios against their targets), not speed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from engine.bench.report import Section

pytestmark = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                                reason='llama-cpp-python is not installed (pip install "logitscope[gguf]")')


async def test_section_compares_every_file_type(tmp_path: Path) -> None:
    from engine.bench.gguf_section import gguf_section

    section = Section("gguf", "GGUF")
    await gguf_section(section, ("2m",), tmp_path, rounds=1, tokens=4, prompt_words=8, threads=(1,))
    labels = " | ".join(row.label for row in section.rows)
    for kind in ("F32", "F16", "Q8_0", "Q4_0"):
        assert f"ours decode, 10 candidates (2m {kind}, 1 thr)" in labels and "llama.cpp prefill" in labels
        assert f"load average before each round (2m {kind}, 1 thr)" in labels
    targets = {ratio.label: ratio.target for ratio in section.ratios}
    assert targets["ours / llama.cpp decode (2m Q4_0, 1 thr)"] == ">= 0.95"
    assert targets["ours / llama.cpp prefill (2m F16, 1 thr)"] == ">= 0.95"
    assert "ours, 2 threads / 1 thread (2m Q4_0)" in targets  # backs `default_threads`
    assert all(row.stat.median > 0 for row in section.rows if not row.label.startswith("load"))


def test_a_file_whose_tokenizer_differs_from_llama_cpps_is_refused(tmp_path: Path) -> None:
    """llama.cpp's 'default' pre-tokenizer splits text unlike GPT-2's: the load says so in one line."""
    import gguf

    from engine.core.api import ModelLoadError
    from engine.bench.gguf_section import gguf_files
    from engine.gguf.load import load_gguf

    good = gguf_files("2m", tmp_path)["F32"]
    reader = gguf.GGUFReader(str(good))
    field = reader.fields["tokenizer.ggml.pre"]
    raw = good.read_bytes()
    start = field.offset + sum(part.nbytes for part in field.parts[:-1])
    assert raw[start:start + 5] == b"gpt-2"
    bad = tmp_path / "default-pre.gguf"
    bad.write_bytes(raw[:start] + b"deflt" + raw[start + 5:])  # same length: the file stays valid
    with pytest.raises(ModelLoadError) as caught:
        load_gguf(str(bad), 0, 1)
    assert "deflt" in str(caught.value) and "\n" not in str(caught.value)


def test_the_load_section_needs_a_file_and_says_how_to_get_one() -> None:
    """``--sections gguf-load`` without ``--gguf FILE``: skipped in one line (the real run loads a
    real file in fresh processes, minutes: measured by hand, BENCHMARKS.md)."""
    from tui.bench.cli import make_plan, parser
    from engine.bench.gguf_load import gguf_load_section

    section = Section("gguf-load", "GGUF load")
    gguf_load_section(section, None, rounds=1, threads=1)
    assert section.skipped.startswith("pass --gguf FILE") and not section.rows
    plan = make_plan(parser().parse_args(["--sections", "gguf-load", "--gguf", "x.gguf"]))
    assert plan.sections == ("gguf-load",) and plan.gguf_file == "x.gguf"


def test_weights_read_per_token_count_the_head_and_every_linear_once() -> None:
    """engine.bench.memory_worker.decode_bytes on a 4-bit model without kept copies: every packed
    linear with its scales and biases, plus the tied embedding as the head; float32 counts 4 bytes."""
    import mlx.core as mx
    import mlx.nn as nn
    from mlx.utils import tree_flatten

    from engine.bench.memory_worker import decode_bytes
    from engine.bench.shapes import build_model, shape_named

    model = build_model(shape_named("2m-4bit"))
    everything = sum(int(a.nbytes) for _, a in tree_flatten(model.parameters()))
    norms = sum(int(m.weight.nbytes) for _, m in model.named_modules() if isinstance(m, nn.RMSNorm))
    assert decode_bytes(model) == everything - norms
    dense = build_model(shape_named("2m-full"))
    dense.set_dtype(mx.float32)
    vocab, hidden = 4096, 128
    assert decode_bytes(dense) == sum(int(a.nbytes) for _, a in tree_flatten(dense.parameters())) - sum(
        int(m.weight.nbytes) for _, m in dense.named_modules() if isinstance(m, nn.RMSNorm))
    assert decode_bytes(dense) >= vocab * hidden * 4


def test_the_converter_refuses_a_tokenizer_it_would_write_wrongly(tmp_path: Path) -> None:
    """A Llama 2 style tokenizer.json (SentencePiece pieces, "▁" for spaces) written as a byte-level
    ``gpt2`` vocabulary loaded, but split "Once upon a time" into 10 ids where the model's own
    tokenizer makes 5, and showed "▁there" for " there" (seen on the real stories260k)."""
    import json
    import shutil

    from tinymodels import build_model

    from engine.gguf.convert import convert_folder

    folder = build_model(tmp_path / "chatml", "chatml", seed=5)
    convert_folder(folder, tmp_path / "ok.gguf")  # byte-level: converts
    spm = tmp_path / "spm"
    shutil.copytree(folder, spm)
    spec = json.loads((spm / "tokenizer.json").read_text(encoding="utf-8"))
    spec["pre_tokenizer"] = None
    spec["decoder"] = {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                                                         {"type": "ByteFallback"}, {"type": "Fuse"}]}
    (spm / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(ValueError, match="only byte-level BPE tokenizers"):
        convert_folder(spm, tmp_path / "spm.gguf")
    assert not (tmp_path / "spm.gguf").exists()
