"""``logitscope convert FILE.gguf DIR`` (`tui.headless.convert`, issue #28.4): a GGUF file becomes an MLX
folder holding exactly its weights, which the MLX engine runs as llama.cpp runs the file; every bad
input is one line and leaves nothing of the user's changed.

The file is the tiny Llama of `tinymodels.build_model` written as F32 GGUF, so the converted folder
can be compared weight for weight with the folder the file was made from. Skipped without the
``[gguf]`` extra.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from engine_helpers import run
from tinymodels import build_model

from engine.core.api import Message
from engine.local.client import Engine
from tui.main import main

HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("gguf") is not None
pytestmark = pytest.mark.skipif(not HAVE_LLAMA, reason='llama-cpp-python is not installed (pip install "logitscope[gguf]")')
CHAT = (Message("user", "hello there, how are you today?"),)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(MLX folder, the F32 GGUF file written from it)."""
    from engine.gguf.convert import convert_folder

    root = tmp_path_factory.mktemp("convert-cli")
    folder = build_model(root / "llama3", "llama3", seed=4)
    return folder, convert_folder(folder, root / "llama3-f32.gguf")


def weights(folder: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(folder / "model.safetensors"))


async def test_the_folder_holds_the_files_model(pair: tuple[Path, Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from engine.factory import local_engine

    source, gguf_file = pair
    out = tmp_path / "converted"
    assert main(["convert", str(gguf_file), str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    ours, theirs = weights(out), weights(source)
    assert set(ours) == set(theirs)
    for name, array in theirs.items():  # Q/K rows back in Hugging Face's order, bit for bit
        assert np.array_equal(ours[name], array.astype(np.float32)), name
    gguf_engine, mlx_engine = local_engine(), Engine()
    try:
        await gguf_engine.load(str(gguf_file))
        await mlx_engine.load(str(out))
        (g_events, g_done), (m_events, m_done) = await run(gguf_engine, CHAT), await run(mlx_engine, CHAT)
    finally:
        await gguf_engine.close()
        await mlx_engine.close()
    assert m_done.prompt_ids == g_done.prompt_ids and m_done.token_ids == g_done.token_ids
    assert max(abs(a.logprob - b.logprob) for a, b in zip(m_events, g_events)) < 1e-3


def test_float16_halves_the_folder(pair: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "half"
    assert main(["convert", str(pair[1]), str(out), "--dtype", "float16"]) == 0
    assert all(a.dtype == np.float16 for a in weights(out).values())


def test_bad_inputs_are_one_line_and_change_nothing(pair: tuple[Path, Path], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nothing.gguf"
    assert main(["convert", str(missing), str(tmp_path / "a")]) == 2
    assert not (tmp_path / "a").exists()
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine", encoding="utf-8")
    assert main(["convert", str(pair[1]), str(taken)]) == 2
    assert [p.name for p in taken.iterdir()] == ["notes.txt"]
    not_gguf = tmp_path / "fake.gguf"
    not_gguf.write_bytes(b"GGML" + bytes(64))
    assert main(["convert", str(not_gguf), str(tmp_path / "b")]) == 2
    assert not (tmp_path / "b").exists()
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("logitscope convert: ") for line in lines)
    assert "no such GGUF file" in lines[0] and "not an empty folder" in lines[1] and "not a GGUF file" in lines[2]


def test_a_family_it_cannot_convert_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import gguf

    odd = tmp_path / "odd.gguf"
    writer = gguf.GGUFWriter(str(odd), "mamba")
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert main(["convert", str(odd), str(tmp_path / "out")]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("logitscope convert: ")]
    assert len(errors) == 1 and "'mamba'" in errors[0]  # the other lines say what it was doing
    assert not (tmp_path / "out").exists()
