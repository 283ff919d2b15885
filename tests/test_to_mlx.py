"""`engine.gguf.to_mlx` on a GGUF file it did not write (issue #28.4): a one-layer Llama with random F32
weights in llama.cpp's layout and a SentencePiece vocabulary (`spm_gguf`, the way llama.cpp's converter
writes one). The MLX folder it becomes must tokenize as llama.cpp does (the SPM rebuild in
`engine.gguf.hf_tokenizer`) and compute what llama.cpp computes: the query and key rows are put
back in Hugging Face's order independently of `engine.gguf.convert` here, so a wrong unpermutation
shows as different numbers, not as a round trip that cancels out. Float32 on both sides: logprobs
within 1e-3 (the order of float32 sums). Skipped without the ``[gguf]`` extra and sentencepiece.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from engine_helpers import run
from spm_gguf import train_spm, write_spm_gguf

from engine.core.api import Message, SamplingParams
from engine.local.client import Engine

HAVE_ALL = all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "gguf", "sentencepiece"))
pytestmark = pytest.mark.skipif(not HAVE_ALL, reason='needs the [gguf] extra (pip install "logitscope[gguf]")')
HARD = ["Hello, world!", " ", "  two leading spaces", "trailing  ", "a  b   c\t\td", "the cat\n\n  sat\r\n on",
        "naïve café, Zürich: crème brûlée", "你好世界 🙂🚀 unseen", "12345 2024 3.14159",
        "<|user|>\nhi</s>\n<|assistant|>\n", "x<|user|>y<|assistant|>", "</s></s>"]


@pytest.fixture(scope="module")
def spm_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the SentencePiece GGUF file, the MLX folder converted from it)."""
    from engine.gguf.to_mlx import convert_gguf

    root = tmp_path_factory.mktemp("to-mlx")
    gguf_file = write_spm_gguf(root / "spm-F32.gguf", train_spm(root, vocab_size=700), seed=3)
    return gguf_file, convert_gguf(gguf_file, root / "spm-mlx")


@pytest.mark.parametrize("text", HARD)
def test_the_sentencepiece_tokenizer_splits_as_llama_cpp(spm_pair: tuple[Path, Path], text: str) -> None:
    from engine.gguf.to_mlx import check_tokenizer

    check_tokenizer(*spm_pair, probe=text)  # raises on the first difference


async def test_the_folder_computes_what_llama_cpp_computes(spm_pair: tuple[Path, Path]) -> None:
    from engine.factory import local_engine

    gguf_file, folder = spm_pair
    params = SamplingParams(temperature=0.0, max_tokens=10, candidates=5)
    chat = (Message("user", "Once upon a time the cat sat"),)
    llama, mlx_engine = local_engine(), Engine()
    try:
        await llama.load(str(gguf_file))
        theirs, their_done = await run(llama, chat, params)
        await mlx_engine.load(str(folder))
        ours, done = await run(mlx_engine, chat, params)
    finally:
        await llama.close()
        await mlx_engine.close()
    assert done.prompt_ids == their_done.prompt_ids and done.token_ids == their_done.token_ids
    for a, b in zip(ours, theirs):
        assert [c.id for c in a.candidates] == [c.id for c in b.candidates]
        assert max(abs(x.logprob - y.logprob) for x, y in zip(a.candidates, b.candidates)) < 1e-3
