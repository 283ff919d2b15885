"""The thinking switch on GGUF models, read from the file's own chat template (issue #28.6).

A tiny Llama with Qwen3's template (it mentions ``enable_thinking``) written as an F32 GGUF: the
GGUF engine says it has the switch (``ModelInfo.supports_thinking``, which the app's thinking key
asks), and thinking off renders the template's empty think block exactly as the MLX engine does
on the same model. Skipped without llama-cpp-python.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from engine_helpers import GREEDY, turn
from template_fixtures import family_model

from engine.core.api import GenerateRequest, Message
from engine.local.client import Engine

HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("gguf") is not None
pytestmark = pytest.mark.skipif(not HAVE_LLAMA, reason='llama-cpp-python is not installed (pip install "logitscope[gguf]")')
ASK = (Message("user", "hello the cat"),)


@pytest.fixture(scope="module")
def qwen3_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from engine.gguf.convert import convert_folder

    root = tmp_path_factory.mktemp("gguf-thinking")
    folder = family_model(root, "bpe", "qwen3")
    return folder, convert_folder(folder, root / "qwen3-f32.gguf")


async def prompts(engine: Engine, spec: Path) -> dict[bool | None, tuple[int, ...]]:
    """The prompt ids of a one-token turn under each position of the switch."""
    await engine.load(str(spec))
    out = {}
    for thinking in (None, True, False):
        _, finished = await turn(engine, GenerateRequest(ASK, GREEDY.with_changes(max_tokens=1), thinking=thinking))
        out[thinking] = finished.prompt_ids
    return out


async def test_the_switch_comes_from_the_files_template(qwen3_pair: tuple[Path, Path]) -> None:
    from engine.factory import local_engine

    folder, gguf_file = qwen3_pair
    gguf_engine, mlx_engine = local_engine(), Engine()
    try:
        ours = await prompts(gguf_engine, gguf_file)
        assert gguf_engine.model is not None and gguf_engine.model.supports_thinking
        theirs = await prompts(mlx_engine, folder)
    finally:
        await gguf_engine.close()
        await mlx_engine.close()
    assert ours == theirs
    assert ours[False] != ours[None] == ours[True]


async def test_a_template_without_the_switch_says_so(tmp_path: Path) -> None:
    from engine.factory import local_engine
    from engine.gguf.convert import convert_folder

    gguf_file = convert_folder(family_model(tmp_path, "bpe", "chatml"), tmp_path / "chatml.gguf")
    engine = local_engine()
    try:
        await engine.load(str(gguf_file))
        assert engine.model is not None and not engine.model.supports_thinking
    finally:
        await engine.close()


def test_think_tags_as_real_reasoning_models_ship_them_fold_on_gguf(tmp_path: Path) -> None:
    """Qwen3 and DeepSeek-R1 ship ``<think>`` / ``</think>`` as added tokens that are not special,
    which llama.cpp's converter writes as user-defined tokens: the GGUF engine's reply text keeps
    them, exactly as the MLX engine's does, so the app's fold (`tui.app.widgets.thinking_fold`)
    finds the block. (A file whose think tags are control tokens shows no tag text on GGUF: see
    the issue's report.)"""
    import json

    from engine.core.api import TokenEvent
    from engine.gguf.convert import convert_folder
    from engine.gguf.load import load_gguf
    from engine.local.textstream import ReplyText
    from tui.app.widgets.thinking_fold import thinking_block

    folder = family_model(tmp_path, "bpe", "qwen3")
    spec = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    for entry in spec["added_tokens"]:
        if entry["content"] in ("<think>", "</think>"):
            entry["special"] = False
    (folder / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    loaded = load_gguf(str(convert_folder(folder, tmp_path / "qwen3.gguf")), 0, 1)
    try:
        ids = loaded.tokenizer.encode("<think>\nhello\n</think>\n\nworld", add_special_tokens=False)
        text = ReplyText(loaded.tokenizer, ())
        pieces = [text.add(i) for i in ids]
    finally:
        loaded.model.close()
    assert pieces[0] == "<think>" and "</think>" in pieces
    events = [TokenEvent(i, token, piece, piece, -1.0, None, None, None, ()) for i, (token, piece) in
              enumerate(zip(ids, pieces))]
    block = thinking_block(events)
    assert block is not None and block.closed and "".join(pieces[block.end:]) == "world"
