"""The Hugging Face hub, offline, and the model picker's list: one-line download errors, the
cache, repo ids told apart from paths, recent models, and listing without importing MLX.

The hub is only ever asked with HF_HUB_OFFLINE on (so huggingface_hub refuses to open a
connection) or with a prepared cache; tiny models come from the `tiny` fixture (conftest.py).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.models import hub
from engine.core.api import LoadProgress, ModelLoadError

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------------------
# The hub, offline


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub read HF_HUB_OFFLINE at import, so set the constant too: no connection is opened."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


def _fake_cache(cache: Path, repo_id: str, source: Path) -> Path:
    """A Hugging Face cache entry as huggingface_hub writes it: snapshots/<commit> and refs/main."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    commit = "0123456789abcdef0123456789abcdef01234567"
    shutil.copytree(source, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return repo / "snapshots" / commit


def test_offline_and_not_cached_is_one_line(offline: None, tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError) as caught:
        hub.download_model("nobody/no-such-model", lambda p: None, cache_dir=str(tmp_path))
    assert str(caught.value) == (
        "cannot download nobody/no-such-model: offline mode is on (HF_HUB_OFFLINE) and it is not in the "
        "local cache; download it once online or pass a local folder"
    )


def test_offline_uses_the_cache(offline: None, tmp_path: Path, tiny: Path) -> None:
    snapshot = _fake_cache(tmp_path, "org/tiny", tiny)
    seen: list[LoadProgress] = []
    assert hub.download_model("org/tiny", seen.append, cache_dir=str(tmp_path)) == snapshot
    assert seen[0].message == "looking for org/tiny on Hugging Face"


def test_no_network_and_other_hub_failures_map_to_advice(monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants, errors

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    message = str(hub._download_error("a/b", errors.LocalEntryNotFoundError("Got: ConnectError")))
    assert message.startswith("cannot download a/b: no network") and "pass a local folder" in message
    assert "not a valid Hugging Face repo id" in str(hub._download_error("a/b", errors.HFValidationError("x")))
    assert str(hub._download_error("a/b", OSError("No space left on device\nmore"))) == (
        "cannot download a/b: No space left on device"
    )


def test_repo_ids_and_paths_are_told_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert hub.looks_like_repo_id("mlx-community/Qwen3-0.6B-4bit")
    assert not hub.looks_like_repo_id("./models/x") and not hub.looks_like_repo_id("/abs/x")
    (tmp_path / "org" / "name").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert not hub.looks_like_repo_id("org/name")  # an existing local folder wins


def test_download_progress_is_reported_not_drawn(capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[LoadProgress] = []
    bar = hub._progress_class("org/m", seen.append)(total=4_000_000, unit="B", desc="Downloading", mininterval=0)
    bar.update(1_000_000)
    bar.close()
    assert LoadProgress("org/m: Downloading 1.0 of 4.0 MB", 0.25) in seen
    assert capsys.readouterr() == ("", "")


# ---------------------------------------------------------------------------------------------
# The model picker


def test_recent_models_newest_first_and_deduplicated(tmp_path: Path, tiny: Path) -> None:
    state = tmp_path / "state"
    hub.record_recent("org/a", state)
    hub.record_recent(str(tiny), state)
    hub.record_recent("org/a", state)
    assert hub.recent_models(state) == ["org/a", str(tiny.resolve())]


def test_a_corrupt_recent_file_is_an_empty_history(tmp_path: Path) -> None:
    (tmp_path / "recent.json").write_text("{oops")
    assert hub.recent_models(tmp_path) == []
    hub.record_recent("org/a", tmp_path)
    assert hub.recent_models(tmp_path) == ["org/a"]


def test_state_dir_follows_xdg(tmp_path: Path) -> None:
    assert hub.state_dir({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "logitscope"
    assert hub.state_dir({"XDG_STATE_HOME": "relative"}) == Path.home() / ".local" / "state" / "logitscope"


def test_list_local_models(tmp_path: Path, tiny: Path) -> None:
    cache, state = tmp_path / "cache", tmp_path / "state"
    _fake_cache(cache, "org/good", tiny)
    _fake_cache(cache, "org/other", tiny)
    torch_only = tmp_path / "torch"
    torch_only.mkdir()
    shutil.copy(tiny / "config.json", torch_only)
    _fake_cache(cache, "org/torch", torch_only)  # no safetensors: not offered
    hub.record_recent("org/other", state)
    hub.record_recent(str(tiny), state)
    hub.record_recent(str(tmp_path / "deleted"), state)  # gone from disk: not offered
    entries = hub.list_local_models(cache_dir=cache, state=state)
    demo = [("demo", "demo")] if hub.demo_model_path().is_dir() else []
    assert [(e.spec, e.source) for e in entries] == demo + [
        (str(tiny.resolve()), "recent"), ("org/other", "recent"), ("org/good", "cache"),
    ]
    assert entries[-1].path is not None and Path(entries[-1].path, "config.json").is_file()
    assert entries[-1].size_bytes > 0


def test_listing_models_does_not_import_mlx(tmp_path: Path) -> None:
    code = (
        "import sys; from engine.models import hub\n"
        f"hub.list_local_models(cache_dir={str(tmp_path)!r}, state={str(tmp_path)!r})\n"
        "hub.is_supported_model_type('llama')\n"
        "assert not any(m == 'mlx' or m.startswith(('mlx.', 'mlx_lm')) for m in sys.modules), 'mlx imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
