"""The conversation library without the TUI: schema and migrations, every field back exactly,
compact tokens, search, and the failures a user meets (a killed writer, two writers, a locked,
read-only or damaged database), each one `LibraryError` line."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
from array import array
from pathlib import Path
from typing import Any

import pytest

from engine.core.api import Candidate, SamplingParams, TokenEvent
from engine.core.library import Library, LibraryError, schema
from engine.core.library.blobs import BlobError, decode_tokens, encode_tokens
from engine.core.chat.conversation import Conversation, Node, TurnStats, Version
from engine.core.chat.fileformat import conversation_from_dict, conversation_to_dict

ROOT = Path(__file__).resolve().parents[1]


def _f32(x: float) -> float:
    return array("f", [x])[0]


def _token(i: int, rng: random.Random, k: int = 3) -> TokenEvent:
    cands = tuple(Candidate(rng.randrange(50), f"w{i}-{j}" if j == 2 else f"t{j}", -0.1 * (j + 1) - i / 7, 0.3 / (j + 1))
                  for j in range(k))
    return TokenEvent(i, cands[0].id, f"t{i}", f"p{i}", -0.25 - i / 3, 0.5 if i % 2 else None,
                      None if i % 3 == 0 else 2, 1.0 / (i + 3), cands)


def _chat() -> Conversation:
    """Every field: branches, tokens (float64 numbers, None where a server cannot tell, a
    candidate whose text differs per token), params, stats, model folder, a branch point."""
    rng = random.Random(3)
    conv = Conversation("be brief")
    conv.append(Node("user", [Version("Tell me about tokens")]))
    stats = TurnStats(5, 1, 4, 3, 0.125, 100.5, 20.25, 9, 512)
    first = Version("abc", [_token(i, rng) for i in range(4)], SamplingParams(temperature=0.7, seed=9), "stop",
                    None, stats, model="/models/tiny")
    reply = conv.append(Node("assistant", [first]))
    reply.add_version(Version("abd", [_token(i, rng) for i in range(3)], SamplingParams(top_k=5), "length", 2,
                              None, model="/models/tiny"))
    conv.append(Node("user", [Version("and then?")]))
    return conv


def test_every_field_comes_back_exactly(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib.db")
    doc = conversation_to_dict(_chat())
    cid = lib.save(doc, model_spec="tiny")
    stored = lib.load(cid)
    assert stored.document == doc
    assert conversation_to_dict(conversation_from_dict(stored.document)) == doc
    entry = stored.entry
    assert (entry.title, entry.model_spec, entry.model_folder, entry.messages) == \
        ("Tell me about tokens", "tiny", "/models/tiny", 3)
    assert lib.integrity() == "ok"


def test_token_blob_is_exact_and_compact() -> None:
    """float32 where exact (what MLX computes), float64 otherwise; 2,000 tokens x 10 candidates
    with a realistic spread of ids stay under ~250 KB (the issue's budget)."""
    rng = random.Random(0)
    odd = [{"index": 2**40, "id": -1, "text": "x", "piece": "", "logprob": 0.1, "sampled_prob": None,
            "rank": None, "entropy": None, "candidates": []}]
    assert decode_tokens(encode_tokens(odd)) == odd
    tokens = []
    for i in range(2000):
        lps = sorted((_f32(-rng.expovariate(0.7)) for _ in range(10)), reverse=True)
        ids = [int(rng.paretovariate(0.8)) % 32000 for _ in range(10)]
        cands = [{"id": d, "text": f"tok{d}", "logprob": lp, "sampled_prob": _f32(math.exp(lp)) if n < 4 else 0.0}
                 for n, (d, lp) in enumerate(zip(ids, lps))]
        tokens.append({"index": i, "id": ids[0], "text": f"tok{ids[0]}", "piece": f"tok{ids[0]}", "logprob": lps[0],
                       "sampled_prob": cands[0]["sampled_prob"], "rank": 1, "entropy": _f32(1.5 + i % 7), "candidates": cands})
    blob = encode_tokens(tokens)
    assert decode_tokens(blob) == tokens
    assert len(blob) <= 250_000, f"{len(blob) / 2000:.0f} bytes per token"
    with pytest.raises(BlobError):
        decode_tokens(blob[:-20])


def test_search_rename_delete_undo_fork(tmp_path: Path) -> None:
    ticks = iter(range(1, 1000))
    lib = Library(tmp_path / "lib.db", clock=lambda: float(next(ticks)))
    a = lib.save(_doc("Penguins live in the south", "They swim"))
    b = lib.save(_doc("Volcanoes erupt", "Lava flows"))
    assert [e.id for e in lib.entries()] == [b, a]  # newest first
    for fts in (True, False):
        lib.fts = fts and lib.fts
        assert [e.id for e in lib.entries("lava")] == [b]
        assert [e.id for e in lib.entries("pengu swim")] == [a]
        assert lib.entries('"AND* NEAR( %_') == []  # typed syntax is text, never an error
    lib.rename(a, "Birds")
    lib.save(_doc("Penguins live in the south", "They swim more"), conversation_id=a)
    assert lib.load(a).entry.title == "Birds" and [e.id for e in lib.entries("birds")] == [a]
    lib.delete(b)
    assert [e.id for e in lib.entries()] == [a]
    lib.restore(b)
    copy = lib.fork(a)
    assert lib.load(copy).document == lib.load(a).document and lib.load(copy).entry.title == "Birds (copy)"
    assert lib.resolve(copy[:6]) == copy
    with pytest.raises(LibraryError, match="no chat"):
        lib.load("zzzz")


def _doc(question: str, answer: str) -> dict[str, Any]:
    conv = Conversation()
    conv.append(Node("user", [Version(question)]))
    conv.append(Node("assistant", [Version(answer, [], finish_reason="stop")]))
    return conversation_to_dict(conv)


def test_migrations_from_the_first_schema(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    schema.MIGRATIONS[0](conn)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO conversations (id, title, created, updated, messages, document, text) "
                 "VALUES ('old1', 'Old chat', 1, 1, 0, ?, 'kept from version one')",
                 (json.dumps({"format": 2, "system_prompt": "", "nodes": []}),))
    conn.close()
    lib = Library(path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == schema.VERSION
    assert [e.id for e in lib.entries("version")] == ["old1"]
    lib.close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {schema.VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(LibraryError, match="newer logitscope"):
        Library(path)


def _one_line(exc: pytest.ExceptionInfo[LibraryError]) -> str:
    text = str(exc.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_locked_read_only_and_corrupt_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "lib.db"
    lib = Library(path, timeout=0.1)
    cid = lib.save(_doc("q", "a"))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    with pytest.raises(LibraryError) as locked:
        lib.save(_doc("q2", "a2"))
    assert "locked" in _one_line(locked)
    assert lib.load(cid).entry.title == "q"  # reading goes on while another writes
    holder.execute("ROLLBACK")
    lib.save(_doc("q3", "a3"), conversation_id=cid)  # and writing resumes once the lock goes
    lib._conn.execute("PRAGMA query_only = ON")  # what a read-only file gives (root ignores chmod)
    with pytest.raises(LibraryError) as ro:
        lib.rename(cid, "x")
    assert "read-only" in _one_line(ro)
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(LibraryError) as corrupt:
        Library(bad)
    assert "damaged" in _one_line(corrupt)


WRITER = """
import sys, time
sys.path.insert(0, {root!r})
from engine.core.library import Library
from tests.test_library import _chat
from engine.core.chat.fileformat import conversation_to_dict
lib = Library(__import__("pathlib").Path({path!r}), timeout=30)
doc = conversation_to_dict(_chat())
cid = None
for n in range({count}):
    doc["system_prompt"] = "turn %d" % n
    cid = lib.save(doc, conversation_id=cid if {same} else None)
    print(n, flush=True)
"""


def _writer(path: Path, count: int, same: bool) -> subprocess.Popen[str]:
    code = WRITER.format(root=str(ROOT), path=str(path), count=count, same=same)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)


@pytest.mark.slow
def test_a_writer_killed_mid_commit_leaves_a_sound_library(tmp_path: Path) -> None:
    path = tmp_path / "lib.db"
    proc = _writer(path, 100_000, True)
    assert proc.stdout is not None
    for _ in range(30):
        proc.stdout.readline()  # thirty commits done; the next are in flight
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    lib = Library(path)
    assert lib.integrity() == "ok"
    [entry] = lib.entries()
    doc = lib.load(entry.id).document
    assert int(doc["system_prompt"].split()[1]) >= 29
    assert conversation_from_dict(doc).path()[1].version.tokens is not None


@pytest.mark.slow
def test_two_processes_write_at_once(tmp_path: Path) -> None:
    path = tmp_path / "lib.db"
    Library(path).close()  # created (and migrated) once; both then write
    procs = [_writer(path, 25, False) for _ in range(2)]
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0 and out.split()[-1] == "24"
    lib = Library(path)
    assert len(lib.entries()) == 50 and lib.integrity() == "ok"


def test_the_chat_files_are_imported_once_and_moved_to_a_backup_folder(tmp_path: Path) -> None:
    """last-conversation.json and conversations/*.json (older versions' files, the app's rescue
    files) go into the library, newest listed first; each file then moves to the backup folder,
    unchanged, a broken one too (named in one line); importing again adds nothing, even a file
    put back (a start that died before moving it: its chat is found in the library)."""
    from engine.core.library import import_files

    state = tmp_path / "state"
    (state / "conversations").mkdir(parents=True)
    (state / "last-conversation.json").write_text(json.dumps(_doc("latest question", "x")))
    (state / "conversations" / "conversation-1.json").write_text(json.dumps(_doc("kept question", "y")))
    (state / "conversations" / "broken.json").write_text("{nope")
    os.utime(state / "conversations" / "conversation-1.json", (1000, 1000))
    lib = Library(tmp_path / "lib.db")
    report = import_files(lib, state)
    assert (report.imported, report.already, report.unmoved) == (2, 0, [])
    assert len(report.skipped) == 1 and report.skipped[0].startswith("broken.json: ")
    assert [e.title for e in lib.entries()] == ["latest question", "kept question"]
    backup = state / "imported-into-library"
    assert report.backup is not None and backup in (report.backup, report.backup.parent)
    assert not (state / "last-conversation.json").exists() and not any((state / "conversations").iterdir())
    assert (backup / "conversations" / "broken.json").read_text() == "{nope"
    assert json.loads((backup / "last-conversation.json").read_text()) == _doc("latest question", "x")
    again = import_files(lib, state)
    assert (again.imported, again.already, again.skipped) == (0, 0, [])
    shutil.copy2(backup / "last-conversation.json", state / "last-conversation.json")  # put back by hand
    third = import_files(lib, state)
    assert (third.imported, third.already) == (0, 1) and len(lib.entries()) == 2
    assert (backup / "last-conversation-1.json").is_file()  # the backup never overwrites


def test_a_fifo_or_a_folder_among_the_chat_files_is_left_alone(tmp_path: Path) -> None:
    """Only regular files are read (a FIFO would block the start forever) or moved."""
    from engine.core.library import import_files

    state = tmp_path / "state"
    (state / "conversations" / "folder.json").mkdir(parents=True)
    os.mkfifo(state / "last-conversation.json")
    os.mkfifo(state / "conversations" / "pipe.json")
    report = import_files(Library(tmp_path / "lib.db"), state)
    assert (report.imported, report.skipped, report.backup) == (0, [], None)
    assert (state / "last-conversation.json").exists() and (state / "conversations" / "pipe.json").exists()


def test_a_chat_file_is_imported_only_into_a_library_that_takes_it(tmp_path: Path) -> None:
    """A library that cannot be written (locked) leaves every file where it was, for the next start."""
    from engine.core.library import import_files

    state = tmp_path / "state"
    state.mkdir()
    (state / "last-conversation.json").write_text(json.dumps(_doc("latest question", "x")))
    lib = Library(tmp_path / "lib.db", timeout=0.1)
    holder = sqlite3.connect(tmp_path / "lib.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    with pytest.raises(LibraryError, match="locked"):
        import_files(lib, state)
    holder.execute("ROLLBACK")
    assert (state / "last-conversation.json").is_file()
    assert import_files(lib, state).imported == 1


def test_the_library_lives_in_the_xdg_data_folder(tmp_path: Path) -> None:
    from engine.core.settings.paths import data_dir

    assert data_dir({"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "logitscope"
    assert data_dir({"XDG_DATA_HOME": "relative"}) == Path.home() / ".local" / "share" / "logitscope"


def test_the_kv_cache_folder_can_be_moved_or_turned_off(tmp_path: Path) -> None:
    from engine.core.settings.paths import kv_cache_dir

    assert kv_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == str(tmp_path / "logitscope" / "kv")
    assert kv_cache_dir({"LOGITSCOPE_KV_CACHE": str(tmp_path / "x")}) == str(tmp_path / "x")
    assert kv_cache_dir({"LOGITSCOPE_KV_CACHE": "off"}) == ""


def test_purge_removes_only_chats_deleted_long_enough_ago(tmp_path: Path) -> None:
    now = [100.0]
    lib = Library(tmp_path / "lib.db", clock=lambda: now[0])
    old, recent, _kept = (lib.save(_doc(q, "a")) for q in ("old", "recent", "kept"))
    lib.delete(old)
    now[0] = 200.0
    lib.delete(recent)
    assert lib.purge(older_than=50) == 1
    with pytest.raises(LibraryError):
        lib.load(old)
    lib.restore(recent)
    assert sorted(e.title for e in lib.entries()) == ["kept", "recent"]
    assert lib.integrity() == "ok"
