"""The model picker's GGUF files: one entry per file in the Hugging Face cache (as the
``owner/repo/file.gguf`` spec that loads it), in a typed folder, or recently used; each with its
size and quantization (from the file name, else from the header, read without the ``gguf``
package: the header is written here with it, as an independent check).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from engine.models import ggufs, hub

COMMIT = "0123456789abcdef0123456789abcdef01234567"
HAVE_GGUF = importlib.util.find_spec("gguf") is not None


def _cached_repo(cache: Path, repo_id: str, files: dict[str, bytes]) -> Path:
    """A Hugging Face cache entry as huggingface_hub writes it: blobs, snapshot links, refs/main."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / COMMIT
    for index, (name, data) in enumerate(files.items()):
        blob = repo / "blobs" / f"{index:040x}"
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(blob)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    return snapshot


def _header(path: Path, file_type: int | None) -> Path:
    """A GGUF file with no tensors and a few keys, `general.file_type` among the later ones."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("listing-test")
    writer.add_token_list(["<s>", "a", "b"])  # an array of strings before the key: skipped item by item
    writer.add_token_scores([0.0, -1.0, -2.0])
    if file_type is not None:
        writer.add_file_type(file_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


def test_cached_gguf_files_are_one_entry_each(tmp_path: Path, tiny: Path) -> None:
    cache, state = tmp_path / "cache", tmp_path / "state"
    _cached_repo(cache, "org/Chat-GGUF", {
        "chat-Q4_K_M.gguf": b"GGUF" + b"\0" * 996,
        "chat.Q8_0.gguf": b"GGUF" + b"\0" * 1996,
        "big/big-Q4_0-00001-of-00002.gguf": b"GGUF" + b"\0" * 2996,
        "big/big-Q4_0-00002-of-00002.gguf": b"\0" * 3000,  # a later part: loaded with the first
        "README.md": b"# Chat",
    })
    entries = hub.list_local_models(cache_dir=cache, state=state)
    found = {e.spec: e for e in entries if e.format == "gguf"}
    assert sorted(found) == ["org/Chat-GGUF/big/big-Q4_0-00001-of-00002.gguf", "org/Chat-GGUF/chat-Q4_K_M.gguf",
                             "org/Chat-GGUF/chat.Q8_0.gguf"]
    q4 = found["org/Chat-GGUF/chat-Q4_K_M.gguf"]
    assert (q4.source, q4.quant, q4.size_bytes) == ("cache", "Q4_K_M", 1000)
    assert q4.path is not None and Path(q4.path).is_file()
    assert found["org/Chat-GGUF/chat.Q8_0.gguf"].quant == "Q8_0"
    assert found["org/Chat-GGUF/big/big-Q4_0-00001-of-00002.gguf"].size_bytes == 6000  # both parts
    assert ggufs.hub_file(q4.spec) == ("org/Chat-GGUF", "chat-Q4_K_M.gguf")  # the spec load.py downloads


def test_a_recent_gguf_spec_is_kept_as_typed_and_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``owner/repo/file.gguf`` is not a local path: recorded as is (not made absolute), listed as GGUF."""
    monkeypatch.chdir(tmp_path)
    cache, state = tmp_path / "cache", tmp_path / "state"
    hub.record_recent("org/Elsewhere-GGUF/model-Q5_K_S.gguf", state)
    local = tmp_path / "models" / "mine-F16.gguf"
    local.parent.mkdir()
    local.write_bytes(b"GGUF" + b"\0" * 12)
    hub.record_recent(str(local), state)
    assert hub.recent_models(state) == [str(local), "org/Elsewhere-GGUF/model-Q5_K_S.gguf"]
    entries = [e for e in hub.list_local_models(cache_dir=cache, state=state) if e.source == "recent"]
    assert [(e.name, e.format, e.quant, e.path is None) for e in entries] == [
        ("mine-F16.gguf", "gguf", "F16", False), ("org/Elsewhere-GGUF/model-Q5_K_S.gguf", "gguf", "", True)]


def test_the_folder_of_a_recent_gguf_file_is_listed(tmp_path: Path) -> None:
    """Where a user keeps one GGUF file, the others are: listed after the cache, each once."""
    models = tmp_path / "models"
    (models / "sub").mkdir(parents=True)
    for name in ("used-Q4_0.gguf", "other-Q8_0.gguf", "sub/third.gguf"):
        (models / name).write_bytes(b"GGUF" + b"\0" * 8)
    state = tmp_path / "state"
    hub.record_recent(str(models / "used-Q4_0.gguf"), state)
    hub.record_recent("org/remote-GGUF/x-Q4_0.gguf", state)  # not local: no folder to look in
    entries = hub.list_local_models(cache_dir=tmp_path / "cache", state=state)
    assert [(e.name, e.source) for e in entries if e.format == "gguf"] == [
        ("org/remote-GGUF/x-Q4_0.gguf", "recent"), ("used-Q4_0.gguf", "recent"),
        ("other-Q8_0.gguf", "folder"), ("sub/third.gguf", "folder")]


def test_a_typed_folder_lists_its_models(tmp_path: Path, tiny: Path) -> None:
    models = tmp_path / "models"
    (models / "deep" / "deeper").mkdir(parents=True)
    (models / "a-Q4_0.gguf").write_bytes(b"GGUF" + b"\0" * 10)
    (models / "deep" / "b-IQ4_XS.gguf").write_bytes(b"GGUF")
    (models / "deep" / "deeper" / "c-Q8_0.gguf").write_bytes(b"GGUF")  # two levels down: not walked
    (models / "notes.txt").write_text("x")
    found = hub.folder_models(str(models))
    assert [(e.name, e.quant, e.source) for e in found] == [("a-Q4_0.gguf", "Q4_0", "folder"),
                                                             ("deep/b-IQ4_XS.gguf", "IQ4_XS", "folder")]
    assert found[0].spec == str(models.resolve() / "a-Q4_0.gguf") and found[0].size_bytes == 14
    single = hub.folder_models(str(models / "a-Q4_0.gguf"))
    assert [(e.spec, e.format) for e in single] == [(found[0].spec, "gguf")]
    mlx = hub.folder_models(str(tiny))
    assert [(e.spec, e.format) for e in mlx] == [(str(tiny.resolve()), "mlx")]
    assert hub.folder_models(str(tmp_path / "nowhere")) == [] and hub.folder_models("org/repo") == []


@pytest.mark.skipif(not HAVE_GGUF, reason="the gguf package (the [gguf] extra) writes the test headers")
def test_quantization_from_the_header_when_the_name_does_not_say(tmp_path: Path) -> None:
    assert ggufs.quantization(_header(tmp_path / "model.gguf", 15)) == "Q4_K_M"
    assert ggufs.quantization(_header(tmp_path / "plain.gguf", None)) == ""  # no such key: just "GGUF"
    assert ggufs.quantization(_header(tmp_path / "named-Q6_K.gguf", 2)) == "Q6_K"  # the name wins
    cut = tmp_path / "cut.gguf"
    cut.write_bytes((tmp_path / "model.gguf").read_bytes()[:40])
    assert ggufs.quantization(cut) == ""
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF\x03\0\0\0" + b"\xff" * 64)
    assert ggufs.quantization(junk) == ""


def test_a_typed_parent_folder_lists_the_mlx_models_inside(tmp_path: Path, tiny: Path) -> None:
    """Before (#30.7): ~/models holding two MLX model folders listed nothing; only a model's own
    folder did."""
    import shutil

    models = tmp_path / "models"
    models.mkdir()
    for name in ("b-model", "a-model"):
        shutil.copytree(tiny, models / name)
    (models / "not-a-model").mkdir()
    found = hub.folder_models(str(models))
    assert [(e.name, e.format, e.source) for e in found] == [("models/a-model", "mlx", "folder"),
                                                             ("models/b-model", "mlx", "folder")]
    assert found[0].spec == str((models / "a-model").resolve())
