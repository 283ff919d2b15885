"""#19.7 / #23.3: numbers that are not numbers.

A model whose logits hold NaN or +inf (damaged weights, an overflow) gives one clear error for the
turn, never a token with a NaN logprob: the heatmap cannot crash on one, `--json` never writes a bare
`NaN` (strict JSON parsers reject it), and the chat and the engine stay usable.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from engine_helpers import GREEDY, cold_greedy, reply, run
from tinymodels import build_model

from engine.core.api import EngineError, Message, SamplingParams, TokenEvent
from engine.local.client import Engine
from engine.cpu.fastmath import exp_nonpositive
from engine.local.sampling import LiveSampler, logits_were_numbers

ROOT = Path(__file__).resolve().parent.parent
NAN, INF = float("nan"), float("inf")
HELLO = [Message("user", "hello world how are you")]


@pytest.fixture(scope="module")
def nan_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama whose output head holds a NaN: every logit row is NaN."""
    folder = build_model(tmp_path_factory.mktemp("nan") / "nan-model", "chatml", seed=5)
    weights = mx.load(str(folder / "model.safetensors"))
    head = weights["lm_head.weight"]
    weights["lm_head.weight"] = mx.where(mx.arange(head.shape[1]) == 3, mx.array(NAN), head)
    mx.save_safetensors(str(folder / "model.safetensors"), weights)
    return folder


@pytest.mark.parametrize("exp", [mx.exp, exp_nonpositive])
@pytest.mark.parametrize("params", [
    SamplingParams(temperature=0.0, candidates=3), SamplingParams(temperature=1.0, candidates=3),
    SamplingParams(temperature=0.7, top_k=5, top_p=0.9, candidates=3), SamplingParams(temperature=1.0, min_p=0.1),
], ids=["greedy", "full", "top-k-p", "min-p"])
@pytest.mark.parametrize(("logits", "numbers"), [
    ([1.0, 2.0, 0.5], True),
    ([1.0, -INF, 2.0], True),       # a token made impossible is still a distribution
    ([1.0, NAN, 2.0], False),
    ([NAN, NAN, NAN], False),
    ([1.0, INF, 2.0], False),
    ([INF, -INF, 0.0], False),
], ids=["finite", "minus-inf", "nan", "all-nan", "plus-inf", "both-infs"])
def test_a_packed_row_says_whether_the_logits_were_numbers(logits: list[float], numbers: bool,
                                                           params: SamplingParams, exp: Any) -> None:
    sampler = LiveSampler(64, params, 0, exp=exp)
    _, row = sampler.step(mx.array(logits + [0.0] * 61), None)
    assert logits_were_numbers(row.tolist()) is numbers


async def test_nan_logits_are_one_clear_error_and_the_engine_stays_usable(
    nan_model: Path, chatml_model: Path, engine: Engine
) -> None:
    await engine.load(str(nan_model))
    seen: list[TokenEvent] = []
    for _ in range(2):  # the same clear error each time, not a cache-bookkeeping failure
        with pytest.raises(EngineError, match="NaN or infinite logits") as caught:
            async for item in _gen(engine):
                seen.append(item)
        assert "\n" not in str(caught.value)
    assert not [e for e in seen if isinstance(e, TokenEvent)]
    await engine.load(str(chatml_model))
    events, finished = await run(engine, HELLO)
    assert events and finished.finish_reason in ("stop", "length")


def _gen(engine: Engine) -> Any:
    from engine.core.api import GenerateRequest

    return engine.generate(GenerateRequest(tuple(HELLO), GREEDY))


async def test_logits_that_turn_nan_mid_reply_end_the_turn_and_reset_the_cache(
    chatml_model: Path, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tokens before the bad step arrive; the next turn starts from a clean cache and is exact."""
    from engine.local.session import Session

    real_forward = Session.forward
    calls = {"n": 0, "poison": True}

    def forward(self: Session, ids: mx.array) -> mx.array:
        calls["n"] += 1
        logits = real_forward(self, ids)
        return logits * NAN if calls["poison"] and calls["n"] == 3 else logits

    monkeypatch.setattr(Session, "forward", forward)
    await engine.load(str(chatml_model))
    events: list[TokenEvent] = []
    with pytest.raises(EngineError, match=r"NaN or infinite logits \(reply token 2\)"):
        async for item in _gen(engine):
            events.append(item)
    assert len(events) == 2 and all(math.isfinite(e.logprob) for e in events)
    calls["poison"] = False
    events, finished = await run(engine, HELLO)
    assert finished.reused_tokens == 0  # the poisoned cache was dropped
    assert [e.id for e in events] == cold_greedy(chatml_model, finished.prompt_ids, GREEDY.max_tokens)[: len(events)]
    follow = [*HELLO, reply(finished), Message("user", "and you")]
    _, again = await run(engine, follow)
    assert again.reused_tokens > 0  # the bookkeeping is sound again


def test_json_output_never_holds_a_bare_nan(nan_model: Path, tmp_path: Path) -> None:
    """`logitscope run --json` on a NaN model: exit 1, one line on stderr, strict JSON on stdout."""
    env = {"XDG_CONFIG_HOME": str(tmp_path / "c"), "XDG_STATE_HOME": str(tmp_path / "s"), "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "tui.headless", "run", "--model", str(nan_model), "--prompt", "hi",
                           "--json", "--max-tokens", "3"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    assert "NaN" not in done.stdout and "Infinity" not in done.stdout
    for line in done.stdout.splitlines():
        json.loads(line, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "NaN or infinite logits" in lines[0] and "Traceback" not in done.stderr


def test_json_records_write_impossible_values_as_null() -> None:
    """A remote or scripted engine may still send a non-finite number: the line stays strict JSON."""
    from engine.core.api import Candidate
    from tui.headless.output import token_record

    event = TokenEvent(0, 5, "a", "a", -1.0, NAN, 1, 0.5, (Candidate(6, "b", -INF, NAN),))
    line = json.dumps(token_record(1, event), allow_nan=False)
    assert json.loads(line)["candidates"][0] == {"id": 6, "text": "b", "logprob": None, "sampled_prob": None}


@pytest.mark.parametrize("p", [NAN, INF, -INF, -0.5, 1.5])
def test_the_heatmap_and_bars_take_any_number(p: float) -> None:
    from textual.color import Color

    from tui.app.widgets.render import HeatPalette, bar, token_style

    heat = HeatPalette(Color.parse("#ff0000"), Color.parse("#ffff00"), Color.parse("#00ff00"))
    assert isinstance(heat.colour(p), Color)
    logprob = math.log(p) if 0 < p < INF else p
    event = TokenEvent(0, 5, "a", "a", logprob, p, 1, p, ())
    token_style(event, 0, False, heat)
    assert len(bar(p, 8)) == 8
    assert heat.colour(NAN) == heat.low and bar(NAN, 4) == " " * 4
