"""#30.4: a server that sends tokens as bare ids (mlx_lm.server at temperature > 0) shows each
token's text when the model's tokenizer is on this machine (its folder, or its id in the local
Hugging Face cache), and says once, plainly, when it is not, instead of gluing the whole reply
onto the last token. Branching over a chat endpoint is refused before a branch exists."""

from __future__ import annotations

import asyncio
import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from remote_server import ScriptedServer
from tinymodels import build_tokenizer

from engine_helpers import turn
from engine.core.api import GenerateRequest, Message, SamplingParams
from engine.core.chat.conversation import Version
from engine.remote import HttpOptions, RemoteEngine
from tui.app.controller import ChatController
from tui.headless.run import main as run_main

REPLY = "the cat sat on the mat"
SAMPLED = SamplingParams(temperature=0.8, candidates=5, max_tokens=40)


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("served-model")
    build_tokenizer(folder, "chatml")
    return folder


@pytest.fixture(scope="module")
def reply_ids(tokenizer_folder: Path) -> list[int]:
    from transformers import AutoTokenizer
    ids = AutoTokenizer.from_pretrained(str(tokenizer_folder)).encode(REPLY, add_special_tokens=False)
    assert len(ids) > 2
    return list(ids)


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    yield scripted
    scripted.stop()


def _mlx(server: ScriptedServer, model_id: str, ids: list[int]) -> None:
    script = server.reset()
    script.mlx, script.models, script.mlx_ids, script.mlx_text = True, [model_id], ids, REPLY


async def _sampled_turn(server: ScriptedServer) -> tuple[RemoteEngine, list, object]:
    remote = RemoteEngine(HttpOptions(server.url, timeout_s=5.0))
    await remote.load("demo")
    tokens, done = await turn(remote, GenerateRequest((Message("user", "hi"),), SAMPLED))
    return remote, tokens, done


async def test_the_served_models_folder_gives_each_token_its_text(server: ScriptedServer, tokenizer_folder: Path,
                                                                  reply_ids: list[int]) -> None:
    """mlx_lm.server on this machine names its model by its path: that folder's tokenizer is used."""
    _mlx(server, str(tokenizer_folder.resolve()), reply_ids)
    remote, tokens, done = await _sampled_turn(server)
    try:
        assert [t.id for t in tokens] == reply_ids
        assert all(t.text for t in tokens) and "".join(t.text for t in tokens) == REPLY == done.text
        assert not any("unknown" in note for note in remote.model.notes)
    finally:
        await remote.close()


async def test_the_models_hub_id_in_the_local_cache_gives_each_token_its_text(
        server: ScriptedServer, tokenizer_folder: Path, reply_ids: list[int], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A hub id the server serves, found in the local Hugging Face cache (never downloaded)."""
    snapshot = tmp_path / "hub" / "models--someone--tiny-chat" / "snapshots" / "abc123"
    shutil.copytree(tokenizer_folder, snapshot)
    (tmp_path / "hub" / "models--someone--tiny-chat" / "refs").mkdir()
    (tmp_path / "hub" / "models--someone--tiny-chat" / "refs" / "main").write_text("abc123")
    import huggingface_hub.constants as hub_constants
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _mlx(server, "someone/tiny-chat", reply_ids)
    remote, tokens, _ = await _sampled_turn(server)
    try:
        assert "".join(t.text for t in tokens) == REPLY and all(t.text for t in tokens)
    finally:
        await remote.close()


async def test_no_tokenizer_is_said_once_and_the_reply_is_never_glued_onto_one_token(
        server: ScriptedServer, reply_ids: list[int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants as hub_constants
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    _mlx(server, "someone/not-here", reply_ids)
    remote, tokens, done = await _sampled_turn(server)
    try:
        said = [note for note in remote.model.notes if "unknown" in note]
        assert len(said) == 1 and "--tokenizer" in said[0]
        assert done.text == REPLY and len(tokens) == len(reply_ids)
        version = Version(tokens=list(tokens))
        version.settle(done.text)
        assert all(t.text == "" for t in version.tokens)  # not the whole reply on the last one
        assert version.texts_unknown and version.text == REPLY
    finally:
        await remote.close()


async def test_a_wrong_tokenizer_found_by_name_is_not_believed(server: ScriptedServer, tokenizer_folder: Path,
                                                               reply_ids: list[int]) -> None:
    """Ids that the local tokenizer spells as something else than the server's reply: unknown."""
    _mlx(server, str(tokenizer_folder.resolve()), [i + 1 for i in reply_ids])
    remote, tokens, _ = await _sampled_turn(server)
    try:
        assert all(t.text == "" for t in tokens)
    finally:
        await remote.close()


def test_run_json_gives_each_token_its_text(server: ScriptedServer, tokenizer_folder: Path,
                                            reply_ids: list[int], capsys: pytest.CaptureFixture[str]) -> None:
    _mlx(server, str(tokenizer_folder.resolve()), reply_ids)
    code = run_main(["run", "--no-config", "--server", server.url, "--json", "--temp", "0.8", "--prompt", "hi"])
    assert code == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    texts = [line["text"] for line in lines if line["type"] == "token"]
    assert texts and all(texts) and "".join(texts) == REPLY


async def test_branching_over_a_chat_endpoint_is_refused_before_a_branch_exists(
        server: ScriptedServer, tokenizer_folder: Path, reply_ids: list[int]) -> None:
    script = server.reset()  # an OpenAI-style streaming server: chat endpoint only
    posted: list[object] = []
    controller = ChatController(RemoteEngine(HttpOptions(server.url, timeout_s=5.0)),
                                SamplingParams(temperature=0.0, candidates=2), posted.append)
    assert await controller.load("scripted")
    await asyncio.sleep(0)
    assert controller.send("hi")
    while controller.busy:
        await asyncio.sleep(0.01)
    node = controller.conversation.path()[-1]
    assert node.version.tokens and len(node.version.tokens[0].candidates) == 2
    reason = controller.branch(node, 0, 1)
    assert reason is not None and "branching from a candidate needs" in reason
    assert len(node.versions) == 1 and len(script.bodies) == 1  # no branch made, nothing sent
    await controller.close()
