"""SentencePiece GGUF vocabularies (``tokenizer.ggml.model = llama``: Llama 2, Mistral, TinyLlama):
the engine's tokenizer (llama.cpp's own, ``engine.gguf.tokenizer``) encodes as SentencePiece (the
library that trained the vocabulary, `spm_gguf.train_spm`), on hard strings and a seeded sample of
random ones; a reply's text is llama.cpp's pieces joined (its leading space kept); and such a
file chats in the GGUF engine with its chat template.
"""

from __future__ import annotations

import ctypes
import importlib.util
import random
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import GREEDY, run
from spm_gguf import CORPUS, MARKERS, train_spm, write_spm_gguf

from engine.core.api import Message, ModelLoadError

HAVE_ALL = all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "gguf", "sentencepiece"))
pytestmark = pytest.mark.skipif(not HAVE_ALL, reason='needs the [gguf] extra (pip install "logitscope[gguf]")')
HARD = [
    "Hello, world!", "", " ", "  two leading spaces", "trailing  ", "a  b   c\t\td", "the cat\n\n  sat\r\n on",
    "naïve café, Zürich: crème brûlée", "你好世界 🙂🚀 unseen ŧħıñğş", "12345 2024 3.14159",
    "<|user|>\nhi</s>\n<|assistant|>\n", "<s>x</s>", "<unk>q", "x<|user|>y<|assistant|>", "</s></s>", "<|user",
]


@pytest.fixture(scope="module")
def spm_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the SentencePiece model, a GGUF file with its vocabulary)."""
    root = tmp_path_factory.mktemp("spm")
    model = train_spm(root, vocab_size=700)
    return model, write_spm_gguf(root / "spm-F32.gguf", model)


@pytest.fixture(scope="module")
def loaded(spm_file: tuple[Path, Path]) -> Any:
    from engine.gguf.load import load_gguf

    result = load_gguf(str(spm_file[1]), 0, 1)
    yield result
    result.model.close()


def _samples(count: int, seed: int) -> list[str]:
    """Random strings: slices of the training text, and characters drawn from it and beyond."""
    rng = random.Random(seed)
    chars = sorted(set("".join(CORPUS))) + list(" \n\t\r🙂你ß<>|/s") + MARKERS
    out = []
    for index in range(count):
        if index % 2:
            out.append("".join(rng.choice(chars) for _ in range(rng.randint(1, 40))))
        else:
            line = rng.choice(CORPUS)
            start = rng.randint(0, len(line))
            out.append(line[start:start + rng.randint(1, 60)])
    return out


def test_encodes_as_llama_cpp_and_sentencepiece(spm_file: tuple[Path, Path], loaded: Any) -> None:
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=str(spm_file[0]))
    for text in HARD + _samples(600, seed=3):
        ours = list(loaded.tokenizer.encode(text, add_special_tokens=False))
        assert ours == loaded.model.tokenize(text), text
        if "<" not in text:  # SentencePiece itself knows no special tokens in text
            assert ours == processor.encode(text), text


def _llama_detokenize(model: Any, ids: list[int], special: bool = False) -> str:
    """llama.cpp's own text for `ids` (`special`: control tokens written out, else left out)."""
    import llama_cpp

    array = (llama_cpp.llama_token * len(ids))(*ids)
    size = 16 * len(ids) + 16
    buffer = ctypes.create_string_buffer(size)
    count = llama_cpp.llama_detokenize(model._vocab, array, len(ids), buffer, size, False, special)
    assert count >= 0
    return buffer.raw[:count].decode("utf-8", "backslashreplace")  # the app's form of a lone byte


def _llama_pieces(model: Any, ids: list[int]) -> str:
    """llama.cpp's streaming text of `ids`: each token's piece (control tokens left out), joined."""
    import llama_cpp

    out = b""
    for token in ids:
        buffer = ctypes.create_string_buffer(64)
        size = llama_cpp.llama_token_to_piece(model._vocab, token, buffer, 64, 0, False)
        out += buffer.raw[:size]
    return out.decode("utf-8", "backslashreplace")


def test_decodes_as_llama_cpp(loaded: Any) -> None:
    tokenizer = loaded.tokenizer
    for text in HARD + _samples(200, seed=4):
        ids = list(tokenizer.encode(text, add_special_tokens=False))
        assert tokenizer.decode(ids) == _llama_pieces(loaded.model, ids), text
        if not text.startswith("<"):  # llama.cpp's whole-text decoding: the same, less the space it adds
            assert _llama_detokenize(loaded.model, ids) == tokenizer.decode(ids).removeprefix(" "), text
    rng = random.Random(5)
    normal = [i for i, t in enumerate(tokenizer.convert_ids_to_tokens(range(len(tokenizer))))
              if not t.startswith("<")]
    for _ in range(200):  # sequences no text would give: every token still reads as llama.cpp's
        ids = [rng.choice(normal) for _ in range(rng.randint(1, 12))]
        assert tokenizer.decode(ids) == _llama_pieces(loaded.model, ids), ids


async def test_an_spm_file_chats_with_its_template(spm_file: tuple[Path, Path], loaded: Any) -> None:
    from engine.factory import local_engine

    chat = (Message("system", "You are a cat."), Message("user", "Hello there, how  are you?\n🙂"))
    engine = local_engine(threads=1)
    try:
        info = await engine.load(str(spm_file[1]))
        assert info.has_chat_template and info.vocab_size == len(loaded.tokenizer)
        events, done = await run(engine, chat, GREEDY)
    finally:
        await engine.close()
    rendered = loaded.tokenizer.apply_chat_template([{"role": m.role, "content": m.text} for m in chat],
                                                    tokenize=False, add_generation_prompt=True)
    assert rendered.startswith("<|system|>\nYou are a cat.</s>\n<|user|>\n")
    assert list(done.prompt_ids) == loaded.model.tokenize(rendered)  # what llama.cpp itself would read
    assert done.token_ids and "".join(e.text for e in events) == done.text
    assert done.text == _llama_pieces(loaded.model, list(done.token_ids))  # its leading space kept
