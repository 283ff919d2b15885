"""`logitscope bench`: the report's structure and the harness's behaviour (never the timings)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from engine.cpu import native
from tui.bench import main
from engine.bench.report import Report, Section, Stat, alternate, per_round_ratio


def _run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["bench", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_tiny_quick_run_reports_every_requested_section(capsys: pytest.CaptureFixture[str]) -> None:
    report = _run_json(capsys, "--quick", "--rounds", "1", "--shapes", "2m", "--history", "300",
                       "--sections", "decode,ttft,branch,sampler")

    machine = report["machine"]
    for key in ("cpu", "cores", "python", "mlx", "mlx-lm", "textual", "blas", "compute dtype"):
        assert machine[key] not in ("", None), key
    assert machine["native kernels"] == native.load()[1]  # "on", or "off: <why>"
    sections = {s["name"]: s for s in report["sections"]}
    assert list(sections) == ["decode", "ttft", "branch", "sampler"]
    for section in sections.values():
        assert section["rows"] and not section["skipped"]
        for row in section["rows"]:
            stat = row["stat"]
            assert stat["n"] == 1 and 0 < stat["low"] <= stat["median"] <= stat["high"], row
            assert math.isfinite(stat["median"])

    decode = sections["decode"]
    assert [r["unit"] for r in decode["rows"]] == ["tok/s", "tok/s"]
    (ratio,) = decode["ratios"]
    assert ratio["target"] == ">= 0.9" and isinstance(ratio["met"], bool)
    assert math.isclose(ratio["stat"]["median"], decode["rows"][0]["stat"]["median"] / decode["rows"][1]["stat"]["median"])

    ttft = sections["ttft"]
    assert len(ttft["rows"]) == 5 and [r["target"] for r in ttft["ratios"]] == [">= 10", "<= 1.3", "", ""]
    fresh, cold, reused, prefilled = (int(w) for w in _numbers(ttft["notes"][0]))
    assert cold > 250 and reused > 250 and prefilled < 60 and fresh < 60  # the cache really was reused
    warmed, reused_after, prefilled_after = (int(w) for w in _numbers(ttft["notes"][1]))
    assert reused_after == warmed >= cold and prefilled_after < 60  # the warm-up was the turn's cache

    assert len(sections["branch"]["rows"]) == 2
    labels = [r["label"] for r in sections["sampler"]["rows"]]
    assert any("vocab 151,936" in label for label in labels) and any("LiveSampler" in label for label in labels)


def _numbers(text: str) -> list[str]:
    return [w.strip(",;") for w in text.split() if w.strip(",;").isdigit()]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sections", "decode,nope"], "unknown section 'nope'"),
        (["--shapes", "7b"], "unknown benchmark shape '7b'"),
        (["--rounds", "-2"], "--rounds must be"),
        (["--history", "5"], "--history must be at least 100"),
    ],
)
def test_bad_arguments_get_one_line(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_text_report_shows_targets_and_skips() -> None:
    section = Section("decode", "Decode")
    section.add("engine", [10.0, 12.0, 11.0], "tok/s")
    section.compare("engine / plain", [10.0, 12.0], [10.0, 10.0], 0.97)
    section.compare("cached / fresh", [2.0], [1.0], 1.3, at_most=True)
    skipped = Section("tui", "TUI", skipped="not there yet")
    text = Report({"cpu": "x"}, [section, skipped]).to_text()
    assert "11 tok/s" in text and "(10-12, n=3)" in text
    assert "target >= 0.97 met" in text and "target <= 1.3 MISSED" in text
    assert "skipped: not there yet" in text


def test_stats_and_per_round_ratios() -> None:
    assert Stat.of([3.0, 1.0, 2.0]) == Stat(2.0, 1.0, 3.0, 3)
    assert per_round_ratio([2.0, 9.0, 4.0], [1.0, 3.0, 1.0]) == Stat(3.0, 2.0, 4.0, 3)
    with pytest.raises(ValueError):
        Stat.of([])


def test_alternate_rotates_who_goes_first() -> None:
    order: list[str] = []

    def contender(name: str):  # type: ignore[no-untyped-def]
        def measure(round_: int) -> float:
            order.append(name)
            return float(round_)
        return measure

    samples = alternate({"a": contender("a"), "b": contender("b"), "c": contender("c")}, rounds=3)
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert samples == {"a": [0.0, 1.0, 2.0], "b": [0.0, 1.0, 2.0], "c": [0.0, 1.0, 2.0]}


def test_a_worker_process_measures_one_configuration() -> None:
    from engine.bench.process_section import run_worker

    result = run_worker({"shape": "2m", "blas": False, "dtype": "float32", "prompt": 16, "decode": 6})
    assert result["dtype"] == "float32" and result["blas_active"] is False
    assert result["prefill_tps"] > 0 and result["decode_tps"] > 0 and result["decoded"] == 6


def test_a_worker_process_times_the_engine_too() -> None:
    """Engine mode: the real Engine on a written model folder, a prompt of the asked length."""
    from engine.bench.process_section import run_worker

    result = run_worker({"shape": "2m", "blas": True, "gemv_forward": True, "dtype": "float32", "prompt": 40,
                         "decode": 5, "engine": True})
    assert result["dtype"] == "float32" and result["config"]["engine"] is True
    assert 40 <= result["prompt_tokens"] <= 44 and result["decoded"] == 5
    assert result["prefill_tps"] > 0 and result["decode_tps"] > 0


def test_bench_models_have_realistic_sizes_and_a_tokenizer_for_every_id(tmp_path: Path) -> None:
    from engine.bench.folders import write_tokenizer
    from engine.bench.shapes import build_model, parameter_count, shape_named

    assert 1.8e6 < parameter_count(build_model(shape_named("2m"))) < 2.5e6
    assert parameter_count(build_model(shape_named("2m-4bit"))) == parameter_count(build_model(shape_named("2m")))
    write_tokenizer(tmp_path, 4096)
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(tmp_path))
    assert len(tokenizer) == 4096 and tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") == 4095
    assert tokenizer.decode(tokenizer.encode("hello world")) == "hello world"


def test_a_bench_tokenizer_covers_a_qwen_sized_vocabulary(tmp_path: Path) -> None:
    """151,936 ids need byte triples beyond the 65,536 pairs; every id must exist and decode."""
    from transformers import PreTrainedTokenizerFast

    from engine.bench.folders import write_tokenizer

    write_tokenizer(tmp_path, 151936)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(tmp_path))
    assert len(tokenizer) == 151936 and tokenizer.convert_tokens_to_ids("<|im_end|>") == 151935
    assert len(tokenizer.decode([70000, 151000])) > 0
    assert tokenizer.decode(tokenizer.encode("hello world")) == "hello world"


def test_blas_section_measures_an_unquantized_and_a_quantized_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness only: workers are faked; every configuration runs per round and is compared."""
    from tui.bench import process_section as ps

    seen: list[dict] = []

    def fake_worker(config: dict, timeout_s: float = 600.0) -> dict:
        seen.append(config)
        speed = (10.0 if config["blas"] else 1.0) * (2.0 if config["dtype"] == "float32" else 1.0)
        return {"prefill_tps": 30 * speed, "decode_tps": speed, "blas": "OpenBLAS (fake)"}

    monkeypatch.setattr(ps, "run_worker", fake_worker)
    section = Section("blas-dtype", "BLAS")
    ps.process_section(section, "2m", 8, 4, 2, 1.0)
    assert len(seen) == 2 * 6 and {c["shape"] for c in seen} == {"2m"}
    assert sum(bool(c.get("engine_tuning")) for c in seen) == 2
    assert sum(bool(c.get("engine")) for c in seen) == 2
    assert sum(bool(c.get("gemv_forward")) for c in seen) == 4  # the fast paths and the engine only
    ps.process_section(section, "2m-4bit", 8, 4, 2, 1.0)
    assert len(seen) == 4 * 6 and sum(bool(c.get("engine_tuning")) for c in seen) == 4
    ratios = {r.label: r.stat.median for r in section.ratios}
    assert ratios["prefill: OpenBLAS+float32 / reference BLAS, bfloat16 (2m)"] == pytest.approx(20.0)
    assert ratios["decode: OpenBLAS+float32 / reference BLAS, float32 (2m)"] == pytest.approx(10.0)
    assert "decode: all fast paths / OpenBLAS+float32 (2m-4bit)" in ratios
    ps.process_section(section, "30m", 8, 4, 1, 1.0)
    targets = {r.label: r.target for r in section.ratios if r.target}
    assert targets == {f"{kind}: {who} / reference BLAS, bfloat16 ({shape})": goal
                       for who in ("all fast paths", "engine")
                       for kind, shape, goal in (("prefill", "30m", ">= 10"), ("decode", "30m", ">= 2"),
                                                 ("decode", "2m-4bit", ">= 5"))}  # none for the 2M model


def test_shapes_choose_the_blas_section_models_too() -> None:
    from tui.bench.cli import make_plan, parser

    assert make_plan(parser().parse_args([])).process_shapes == ("30m-4bit", "30m")
    assert make_plan(parser().parse_args(["--quick"])).process_shapes == ("2m-4bit", "2m")
    chosen = make_plan(parser().parse_args(["--shapes", "qwen0.5b-bf16"]))
    assert chosen.process_shapes == chosen.shapes == ("qwen0.5b-bf16",)


def test_the_tui_section_adds_the_app_rows_for_a_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from tui.bench import tui_section as module

    calls: list[tuple[str, ...]] = []

    def probe(*args: str) -> dict[str, float]:
        calls.append(args)
        if args[0] == "stream":
            return {"stream_tps": 5000.0, "backlog_s": 1e-4, "key_ms_median": 15.0, "key_ms_max": 25.0}
        if args[0] == "startup":
            return {"first_paint_s": 0.4, "model_loaded_s": 1.5}
        if args[0] == "previews":
            return {"key_ms_median": 20.0, "key_ms_max": 30.0, "presses": 10}
        return {"first_token_ms": 70.0, "engine_ttft_ms": 50.0, "decode_tps": 44.0}

    monkeypatch.setattr(module, "_probe", probe)
    monkeypatch.setattr(module, "_startup", lambda *extra: {"first_paint_s": 0.4, "model_loaded_s": 1.5})
    monkeypatch.setattr(module, "_race_round", lambda: {"first_paint_s": 0.5, "model_loaded_s": 3.0, "mlx_chat_s": 3.5})
    section = Section("tui", "TUI")
    module.tui_section(section, 2, 100, ("30m", "/models/30m"))
    rows = {row.label: row for row in section.rows}
    assert rows["in the app: Enter -> first token, real engine (30m)"].stat.median == 70.0
    assert rows["in the app: the engine's own TTFT, same turns (30m)"].unit == "ms"
    assert rows["in the app: decode while it draws, 10 candidates (30m)"].unit == "tok/s"
    assert rows["key -> screen while 3 previews compute (worst, 30m)"].stat.median == 30.0
    assert rows["command -> ready: mlx_lm.chat (same model, same rounds)"].stat.median == 3.5
    assert rows["ready: logitscope minus mlx_lm.chat (per round)"].stat.median == -0.5
    assert [c for c in calls if c[0] == "app"] == [("app", "--model", "/models/30m", "--turns", "6", "--tokens", "200")] * 2
    plain = Section("tui", "TUI")
    module.tui_section(plain, 1, 100)
    assert not any(row.label.startswith("in the app") for row in plain.rows)
