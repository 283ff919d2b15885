"""What a remote server cannot tell (engine.core.api, "What a remote engine cannot know") is shown as
unknown: "—" in the candidates panel, null in `run --json`; never a crash, never a made-up number."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from textual.app import App, ComposeResult

from engine.core.api import Candidate, Message, SamplingParams, TokenEvent
from tui.headless.output import Printer
from engine.remote.events import UNKNOWN_ID
from engine.core.chat.context import Fit, fit
from engine.core.chat.conversation import Conversation, Node, Version
from engine.core.chat.store import load_conversation, save_conversation
from tui.app.widgets.candidates import CandidatesPanel

REMOTE_TOKEN = TokenEvent(index=0, id=7, text=" cat", piece=" cat", logprob=-0.5, sampled_prob=None, rank=None,
                          entropy=None, candidates=(Candidate(3, " dog", -0.2, None), Candidate(7, " cat", -0.5, None)))


class _PanelApp(App[None]):
    def compose(self) -> ComposeResult:
        yield CandidatesPanel()

async def test_the_candidates_panel_shows_unknown_numbers_as_a_dash() -> None:
    app = _PanelApp()
    async with app.run_test(size=(60, 12)) as pilot:
        panel = app.query_one(CandidatesPanel)
        panel.token = REMOTE_TOKEN
        await pilot.pause()
        summary = panel._summary(REMOTE_TOKEN).plain
        assert "sampled —" in summary and "rank —" in summary and "entropy —" in summary
        rows = panel._table(REMOTE_TOKEN).plain.split("\n")[1:]
        assert [row.split()[-1] for row in rows] == ["—", "—"]  # the sampled column, last

def test_run_json_writes_unknown_numbers_as_null() -> None:
    out = io.StringIO()
    Printer(out, as_json=True).token(1, REMOTE_TOKEN)
    record = json.loads(out.getvalue())
    assert record["sampled_prob"] is None and record["rank"] is None and record["entropy"] is None
    assert [c["sampled_prob"] for c in record["candidates"]] == [None, None]
    assert record["logprob"] == -0.5


def test_a_chat_with_unknown_numbers_saves_and_reads_back(tmp_path: Path) -> None:
    """Unknown numbers (null) and ids (-1: a server that names tokens by text only) load back."""
    by_text = replace(REMOTE_TOKEN, index=1, id=UNKNOWN_ID, candidates=(Candidate(UNKNOWN_ID, " dog", -0.2, None),))
    conversation = Conversation("")
    conversation.append(Node("user", [Version("hi")]))
    conversation.append(Node("assistant", [Version(" cat dog", [REMOTE_TOKEN, by_text], SamplingParams(), "stop")]))
    path = tmp_path / "remote.json"
    save_conversation(conversation, path)
    loaded = load_conversation(path)
    assert loaded.path()[-1].version.tokens == [REMOTE_TOKEN, by_text]


async def test_a_server_that_does_not_say_its_context_limit_gets_the_message() -> None:
    """context_limit 0 = unknown (mlx_lm.server): the server refuses what does not fit, in one line."""
    async def count(messages: Sequence[Message]) -> int:
        return 0

    sent = (Message("user", "hello there"),)
    assert await fit(count, sent, 0, "drop_oldest", 512) == Fit(sent)
