"""The GGUF engine's per-token llama.cpp calls keep the GIL (`engine.gguf.gilcalls`): ctypes let
go of it around each one, and taking it back waited while the app's event loop drew a frame."""

from __future__ import annotations

import ctypes
import importlib.util
from pathlib import Path

import pytest
from tinymodels import build_model

from engine.gguf.gilcalls import QUICK, QuickLib

pytestmark = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("gguf") is None,
                                reason='llama-cpp-python is not installed (pip install "logitscope[gguf]")')


def _keeps_gil(function: object) -> bool:
    return bool(getattr(function, "_flags_", 0) & ctypes._FUNCFLAG_PYTHONAPI)  # type: ignore[attr-defined]


def test_the_quick_calls_keep_the_gil_and_the_rest_do_not() -> None:
    import llama_cpp

    lib = QuickLib(llama_cpp)
    assert set(lib.quick) == set(QUICK)
    assert all(_keeps_gil(getattr(lib, name)) for name in QUICK)
    assert not _keeps_gil(lib.llama_decode), "the forward pass lets other threads run"
    assert lib.llama_token is llama_cpp.llama_token  # every other name is the module's own


def test_a_loaded_model_decodes_with_them(tmp_path: Path) -> None:
    """The model and its vocabulary use the quick calls, and they answer as the module's do."""
    import llama_cpp

    from engine.gguf.convert import convert_folder
    from engine.gguf.model import LlamaModel

    path = convert_folder(build_model(tmp_path / "chatml", "chatml", seed=5), tmp_path / "chatml-f32.gguf")
    model = LlamaModel(path, 256, 1)
    try:
        assert _keeps_gil(model.lib.llama_token_to_piece) and _keeps_gil(model.vocab._lib.llama_vocab_is_eog)
        ids = model.tokenize("hello there")
        logits = model.feed(ids, [type("Cache", (), {"offset": 0})()])
        assert logits.shape == (model.args.vocab_size,)
        plain = llama_cpp.llama_get_logits_ith(model.context(), -1)
        assert ctypes.addressof(plain.contents) == ctypes.addressof(model.lib.llama_get_logits_ith(model.context(),
                                                                                                    -1).contents)
        buffer = ctypes.create_string_buffer(64)
        for token in ids:
            size = llama_cpp.llama_token_to_piece(model.vocab.pointer, token, buffer, 64, 0, True)
            assert model.vocab.piece(token, True) == buffer.raw[:size]
    finally:
        model.close()
