"""#33.3: ``logitscope score FILE|-``: JSON lines per token and the perplexity; on a GGUF file the
perplexity llama.cpp's logits give (llama-cpp-python's low-level API, tests/test_gguf_scoring.py);
every bad input one line, exit 2, no traceback."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from test_gguf import needs_llama, pair  # noqa: F401 - fixture

from tui.main import main

TEXT = "the cat sat on the mat. the dog ran after the cat, and the bird flew away. "


def score(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict], str]:
    code = main(["score", *argv, "--no-config"])
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.splitlines()]
    return code, lines, captured.err


def test_a_file_s_tokens_and_perplexity_are_json_lines(chatml_model: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "text.txt"
    text.write_text(TEXT)
    code, lines, err = score([str(text), "--model", str(chatml_model), "--candidates", "3"], capsys)
    assert code == 0, err
    tokens, last = lines[:-1], lines[-1]
    assert all(line["type"] == "token" and len(line["candidates"]) == 3 for line in tokens)
    assert [line["index"] for line in tokens] == list(range(1, len(tokens) + 1))
    assert last["type"] == "perplexity" and last["scored"] == len(tokens) == last["tokens"] - 1
    mean = -sum(line["logprob"] for line in tokens) / len(tokens)
    assert last["perplexity"] == pytest.approx(math.exp(mean), rel=1e-6)


def test_stdin_is_read_with_a_dash(chatml_model: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(TEXT.encode())))
    code, lines, err = score(["-", "--model", str(chatml_model)], capsys)
    assert code == 0, err and lines[-1]["type"] == "perplexity"


@pytest.mark.parametrize("make, says", [
    (lambda d: d / "missing.txt", "no such file"),
    (lambda d: d, "is a folder"),
    (lambda d: (d / "b.bin").write_bytes(b"\x7fELF\x00\x01") and d / "b.bin", "not a text file"),
    (lambda d: (d / "l.txt").write_bytes(b"caf\xe9") and d / "l.txt", "not UTF-8"),
    (lambda d: (d / "e.txt").write_text("") == 0 and d / "e.txt", "is empty"),
])
def test_bad_files_are_one_line(make, says: str, chatml_model: Path, tmp_path: Path,  # type: ignore[no-untyped-def]
                                capsys: pytest.CaptureFixture[str]) -> None:
    path = make(tmp_path)
    code, lines, err = score([str(path), "--model", str(chatml_model)], capsys)
    assert code == 2 and lines == [] and says in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_a_text_too_long_for_the_context_is_one_line(chatml_model: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "long.txt"
    text.write_text(TEXT * 4)
    code, lines, err = score([str(text), "--model", str(chatml_model), "--ctx", "16"], capsys)
    assert code == 2 and lines == [] and "context limit is 16" in err and len(err.splitlines()) == 1


def test_bad_flags_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["x", "--candidates", "999"], ["x", "--ctx", "1"], [], ["x", "--bogus"]):
        code, _, err = score(argv, capsys)
        assert code == 2 and len(err.splitlines()) == 1, err


@needs_llama
def test_on_a_gguf_file_the_perplexity_is_llama_cpp_s(pair: tuple[Path, Path], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from test_gguf_scoring import llama_rows, llama_tokens

    text = tmp_path / "text.txt"
    text.write_text(TEXT * 2)
    code, lines, err = score([str(text), "--model", str(pair[1]), "--ctx", "256", "--candidates", "0"], capsys)
    assert code == 0, err
    ids = llama_tokens(pair[1], TEXT * 2)
    rows = llama_rows(pair[1], ids, n_ctx=256)
    nll = [-rows[i - 1][ids[i]] for i in range(1, len(ids))]
    assert [line["id"] for line in lines[:-1]] == ids[1:]
    assert lines[-1]["perplexity"] == pytest.approx(math.exp(sum(nll) / len(nll)), rel=1e-5)
    assert lines[-1]["context"] == 256


def test_run_reports_each_reply_s_perplexity_and_reads_the_chat_back_with_score(
        chatml_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--model", str(chatml_model), "--no-config", "--prompt", "hello the cat", "--prompt",
                 "and the dog", "--max-tokens", "6", "--temp", "0", "--json", "--score"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    lines = [json.loads(line) for line in captured.out.splitlines()]
    turns = [line for line in lines if line["type"] == "turn"]
    for turn in turns:
        own = [line["logprob"] for line in lines if line["type"] == "token" and line["turn"] == turn["turn"]]
        assert turn["perplexity"] == pytest.approx(math.exp(-sum(own) / len(own)), rel=1e-9)
    (scored,) = [line for line in lines if line["type"] == "score"]
    assert [m["role"] for m in scored["messages"]] == ["user", "assistant", "user", "assistant"]
    # greedy, no modifiers: a reply read back has the perplexity it was written with
    assert scored["messages"][1]["perplexity"] == pytest.approx(turns[0]["perplexity"], rel=1e-4)
    assert scored["messages"][3]["perplexity"] == pytest.approx(turns[1]["perplexity"], rel=1e-4)


def test_run_score_on_an_engine_that_cannot_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from engine.scripted import ScriptedEngine
    from tui.headless.run import main as run_main

    code = run_main(["run", "--model", "demo", "--no-config", "--prompt", "hi", "--score"],
                    engine_factory=lambda: ScriptedEngine(scoring=False))
    err = capsys.readouterr().err
    assert code == 1 and "cannot score" in err and "Traceback" not in err
