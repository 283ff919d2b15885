"""`logitscope run`: flags and config, the JSON line format, the conversation it builds, and the
ways it ends (bad input -> one line + exit 2, Ctrl-C -> 130, closed pipe -> quiet).

Most tests drive `tui.headless.main` in-process with the scripted engine; the signal and pipe tests
run a small driver in a subprocess, and one end-to-end test runs ``python -m tui.headless`` on a
tiny real model.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from engine.core.api import ContextLimitError, EngineError, Message, SamplingParams
from tui.headless import main
from engine.scripted import ScriptedEngine, ScriptedToken

ROOT = Path(__file__).resolve().parent.parent
REPLIES = (
    (ScriptedToken("Hi", 0.6, (("Hello", 0.3), ("Hey", 0.05))), "!", " there"),
    ("Sure", ".", ""),
)
TOKEN_KEYS = {"type", "turn", "index", "id", "text", "piece", "logprob", "sampled_prob", "rank", "entropy", "candidates"}
TURN_KEYS = {"type", "turn", "prompt_ids", "prompt_tokens", "reused_tokens", "prefilled_tokens", "generated_tokens",
             "ttft_s", "prefill_tps", "decode_tps", "finish_reason", "text", "seed", "params", "recommended",
             "perplexity"}


@pytest.fixture(autouse=True)
def isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the developer's own config or writes their recent-models list."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


class Recorder:
    """An engine factory that remembers the engines it made."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.engines: list[ScriptedEngine] = []

    def __call__(self) -> ScriptedEngine:
        engine = ScriptedEngine(self.options.pop("replies", REPLIES), **self.options)
        self.engines.append(engine)
        return engine

    @property
    def engine(self) -> ScriptedEngine:
        return self.engines[0]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str], **options: Any) -> tuple[int, str, str, Recorder]:
    factory = Recorder(**options)
    code = main(argv, engine_factory=factory)
    out, err = capsys.readouterr()
    return code, out, err, factory


# ---------------------------------------------------------------------------------------------
# Output


def test_plain_text_streams_each_reply(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, factory = _run(["run", "--model", "m", "--prompt", "a", "--prompt", "b"], capsys)
    assert (code, out, err) == (0, ">>> a\nHi! there\n\n>>> b\nSure.\n", "")
    assert factory.engine.closed


def test_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _, factory = _run(["run", "--model", "m", "--prompt", "a", "--prompt", "b", "--json"], capsys)
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert [(r["type"], r["turn"], r.get("index")) for r in records] == [
        ("token", 1, 0), ("token", 1, 1), ("token", 1, 2), ("turn", 1, None),
        ("token", 2, 0), ("token", 2, 1), ("token", 2, 2), ("turn", 2, None),
    ]
    first = records[0]
    assert set(first) == TOKEN_KEYS and first["text"] == "Hi" and first["rank"] == 1
    assert first["logprob"] == pytest.approx(-0.5108256, abs=1e-6)  # log 0.6, the raw probability
    assert [c["text"] for c in first["candidates"]] == ["Hi", "Hello", "Hey"]
    assert set(first["candidates"][0]) == {"id", "text", "logprob", "sampled_prob"}
    turn = records[3]
    assert set(turn) == TURN_KEYS and turn["finish_reason"] == "stop" and turn["text"] == "Hi! there"
    assert turn["generated_tokens"] == 3 and turn["prompt_tokens"] == len(turn["prompt_ids"])
    assert records[7]["reused_tokens"] > 0  # the second turn starts from the first one's cache


def test_the_conversation_carries_each_reply_with_its_ids(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--model", "m", "--system", "be brief", "--prompt", "a", "--prompt", "b"]
    code, _, _, factory = _run(argv, capsys)
    first, second = factory.engine.requests
    assert code == 0
    assert first.messages == (Message("system", "be brief"), Message("user", "a"))
    assistant = second.messages[2]
    assert assistant.role == "assistant" and assistant.text == "Hi! there" and len(assistant.token_ids or ()) == 3
    assert second.messages[3] == Message("user", "b") and not second.continue_last


def test_max_tokens_finishes_with_length(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _, _ = _run(["run", "--model", "m", "--prompt", "a", "--json", "--max-tokens", "1"], capsys)
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and records[-1]["finish_reason"] == "length" and len(records) == 2


# ---------------------------------------------------------------------------------------------
# Flags and config


def test_flags_override_config_and_config_overrides_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "my.toml"
    config.write_text('[model]\ndefault = "cfg-model"\n[sampling]\ntemperature = 0.0\ntop_k = 5\nseed = 7\n')
    argv = ["run", "--config", str(config), "--prompt", "a", "--top-k", "9", "--min-p", "0.1"]
    code, _, _, factory = _run(argv, capsys)
    assert code == 0
    assert factory.engine.model is not None and factory.engine.model.name == "cfg-model"
    params = factory.engine.requests[0].params
    assert (params.temperature, params.top_k, params.min_p, params.seed) == (0.0, 9, 0.1, 7)


def test_every_param_flag_reaches_the_request(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--model", "m", "--prompt", "a", "--temp", "1.5", "--top-k", "3", "--top-p", "0.9",
            "--min-p", "0.05",
            "--repetition-penalty", "1.2", "--repetition-context-size", "32", "--presence-penalty", "0.5",
            "--frequency-penalty", "-0.5", "--seed", "42", "--max-tokens", "100", "--candidates", "4"]
    code, _, _, factory = _run(argv, capsys)
    assert code == 0
    assert factory.engine.requests[0].params == SamplingParams(1.5, 3, 0.9, 0.05, 1.2, 32, 0.5, -0.5, 42, 100, 4)


def test_seed_minus_one_means_a_fresh_seed(capsys: pytest.CaptureFixture[str]) -> None:
    """A fresh seed per turn, chosen by `run` (so --json can record it), never the same twice."""
    _, _, _, factory = _run(["run", "--model", "m", "--prompt", "a", "--prompt", "b", "--seed", "-1"], capsys)
    seeds = [request.params.seed for request in factory.engine.requests]
    assert all(isinstance(seed, int) for seed in seeds) and seeds[0] != seeds[1]


def test_default_model_comes_from_the_packaged_config(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, _, factory = _run(["run", "--prompt", "a"], capsys)
    assert factory.engine.model is not None and factory.engine.model.path == "/scripted/demo"


def test_trust_remote_code_flag_reaches_load(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    original = ScriptedEngine.load

    async def load(
        self: ScriptedEngine, model: str, *, trust_remote_code: bool = False, on_progress: Any = None
    ) -> Any:
        seen.append(trust_remote_code)
        return await original(self, model, trust_remote_code=trust_remote_code, on_progress=on_progress)

    monkeypatch.setattr(ScriptedEngine, "load", load)
    _run(["run", "--model", "m", "--prompt", "a"], capsys)
    _run(["run", "--model", "m", "--prompt", "a", "--trust-remote-code"], capsys)
    assert seen == [False, True]


# ---------------------------------------------------------------------------------------------
# Bad input: one line, exit 2, no traceback


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--temp", "9"], "logitscope: --temp: temperature must be between 0.0 and 5.0, got 9.0"),
        (["--top-p", "1.5"], "logitscope: --top-p: top_p must be between 0.0 and 1.0, got 1.5"),
        (["--candidates", "101"], "logitscope: --candidates: candidates must be between 0 and 100, got 101"),
        (["--max-tokens", "0"], "logitscope: --max-tokens: max_tokens must be between 1 and 1000000, got 0"),
        (["--top-k", "2.5"], "logitscope: argument --top-k: a whole number, got '2.5' (see 'logitscope run --help')"),
        (["--temp", "warm"], "logitscope: argument --temp: a number, got 'warm' (see 'logitscope run --help')"),
        (["--temp", "nan"], "logitscope: --temp: temperature must be a finite number, got nan"),
        (["--bogus"], "logitscope: unrecognized arguments: --bogus (see 'logitscope run --help')"),
        (["--prompt", " "], "logitscope: --prompt must not be empty"),
        (["--config", "/no/such/file.toml"], "logitscope: config file not found: /no/such/file.toml"),
    ],
)
def test_bad_flags(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, factory = _run(["run", "--model", "m", "--prompt", "a", *argv], capsys)
    assert (code, out, err) == (2, "", expected + "\n")
    assert factory.engines == []  # refused before any engine started


@pytest.mark.parametrize(
    ("argv", "expected"),
    [([], "logitscope: the following arguments are required: {run,bench}"),
     (["run"], "logitscope: the following arguments are required: --prompt"),
     (["chat"], "logitscope: argument {run,bench}: invalid choice: 'chat'")],  # the rest varies by Python
)
def test_bad_commands(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, _ = _run(argv, capsys)
    assert (code, out) == (2, "") and err.startswith(expected) and err.count("\n") == 1


def test_bench_is_handed_to_the_benchmark(monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.bench

    seen: list[list[str] | None] = []

    def bench(argv: list[str] | None = None) -> int:
        seen.append(argv)
        return 7

    monkeypatch.setattr(tui.bench, "main", bench)
    from tui.main import main as console_main

    assert console_main(["bench", "--quick"]) == 7 and seen == [["--quick"]]


def test_help_returns_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _, _ = _run(["run", "--help"], capsys)
    assert code == 0 and "--repetition-context-size" in out and "--trust-remote-code" in out


def test_a_model_that_fails_to_load(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--model", "x", "--prompt", "a"]
    code, out, err, factory = _run(argv, capsys, load_error="model folder not found: x")
    assert (code, out, err) == (2, "", "logitscope: model folder not found: x\n")
    assert factory.engine.closed


@pytest.mark.parametrize(("error", "code"), [(ContextLimitError("too long"), 2), (EngineError("it broke"), 1)])
def test_engine_errors_during_a_turn(error: EngineError, code: int, capsys: pytest.CaptureFixture[str]) -> None:
    factory = Recorder()

    def failing() -> ScriptedEngine:
        engine = factory()
        engine.fail_next = error
        return engine

    assert main(["run", "--model", "m", "--prompt", "a"], engine_factory=failing) == code
    assert capsys.readouterr().err == f"logitscope: {error}\n"
    assert factory.engine.closed


# ---------------------------------------------------------------------------------------------
# Ending early, in a real process

DRIVER = textwrap.dedent(
    """
    import sys
    from tui.headless import main
    from engine.scripted import ScriptedEngine
    engines = []
    def factory():
        engines.append(ScriptedEngine([["tok "] * 5000], token_delay=0.002))
        return engines[0]
    code = main(sys.argv[1:], engine_factory=factory)
    sys.stderr.write(f"closed={engines[0].closed}\\n")
    sys.exit(code)
    """
)


def _driver(tmp_path: Path) -> subprocess.Popen[str]:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path)}
    return subprocess.Popen(
        [sys.executable, str(script), "run", "--model", "m", "--prompt", "go", "--json", "--max-tokens", "5000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )


def test_ctrl_c_cancels_closes_and_exits_130(tmp_path: Path) -> None:
    process = _driver(tmp_path)
    assert process.stdout is not None and json.loads(process.stdout.readline())["type"] == "token"
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert "Traceback" not in err and err.strip().splitlines() == ["logitscope: interrupted", "closed=True"]


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    process = _driver(tmp_path)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()  # like `| head -1`
    err = process.stderr.read()
    process.wait(timeout=30)
    assert process.returncode == 141
    assert err.strip().splitlines() == ["closed=True"]


# ---------------------------------------------------------------------------------------------
# End to end on a real tiny model


def _cli(*argv: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(tmp_path),
                   "XDG_STATE_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), **env}
    return subprocess.run([sys.executable, "-m", "tui.headless", "run", *argv], capture_output=True, text=True,
                          env=environment, cwd=ROOT, timeout=120)


def test_end_to_end_two_turns_on_a_tiny_model(chatml_model: Path, tmp_path: Path) -> None:
    result = _cli("--model", str(chatml_model), "--prompt", "hello", "--prompt", "how are you",
                  "--temp", "0", "--max-tokens", "4", "--candidates", "3", "--json", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    turns = [r for r in records if r["type"] == "turn"]
    tokens = [r for r in records if r["type"] == "token"]
    assert [t["turn"] for t in turns] == [1, 2]
    assert len(tokens) == turns[0]["generated_tokens"] + turns[1]["generated_tokens"]
    for token in tokens:
        assert len(token["candidates"]) == 3 and token["candidates"][0]["logprob"] >= token["logprob"]
        assert token["rank"] == 1 and token["candidates"][0]["id"] == token["id"]  # greedy picks the favourite
    # turn 2 reuses turn 1's prompt and reply from the cache (at least the whole first prompt)
    assert turns[1]["reused_tokens"] >= turns[0]["prompt_tokens"]
    assert turns[1]["prompt_ids"][: turns[0]["prompt_tokens"]] == turns[0]["prompt_ids"]
    assert json.loads((tmp_path / "logitscope" / "recent.json").read_text())["recent"] == [str(chatml_model.resolve())]


def test_end_to_end_bad_models_are_one_line(tmp_path: Path) -> None:
    not_a_model = tmp_path / "folder"
    not_a_model.mkdir()
    for spec in (str(tmp_path / "missing"), str(not_a_model), "nobody/no-such-model-anywhere"):
        result = _cli("--model", spec, "--prompt", "hi", tmp_path=tmp_path)
        assert result.returncode == 2 and result.stdout == ""
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
        assert spec.split("/")[-1] in result.stderr
