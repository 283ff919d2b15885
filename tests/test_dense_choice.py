"""4-bit layers' float32 copies on the CPU, chosen by measurement (engine.cpu.densechoice,
engine.cpu.denseplan): the choice on given measurements, the wiring on a tiny 4-bit model with a
fake timing, the bench's bytes per token, and nothing of it on a GPU backend."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import pytest
from mlx_lm.models import qwen2

from tinymodels import build_family

from engine.cpu import CpuLayer, CpuSwitches
from engine.cpu.densechoice import DenseChoice, LayerCost, choose_dense
from engine.cpu.denseplan import Probe, dense_candidates, plan_dense_copies, time_layer
from engine.cpu.unpacked import _PrefillDequantizedLinear
from engine.local.precision import apply_compute_dtype

ROOT = Path(__file__).resolve().parents[1]
MB = 1_000_000


def _small_layers(count: int) -> list[LayerCost]:
    """The 30M shape's 1152x384 layers as measured (0.29 ms packed, 0.036 ms float32, 1.77 MB)."""
    return [LayerCost(f"layers.{i:02d}", 1_769_472, 290e-6, 36e-6) for i in range(count)]


def test_small_layers_are_kept_together_when_together_they_pay() -> None:
    """One copy alone saves 1.3% of the step for 1.4% more memory; all 56 save 72% for 78% more,
    which halves time x memory: the best prefix is kept, not a copy at a time."""
    costs = _small_layers(56)
    choice = choose_dense(costs, rest_s=3.5e-3, resident_bytes=127 * MB, limit_bytes=10**10)
    one = choose_dense(costs[:1], rest_s=3.5e-3 + 55 * 290e-6, resident_bytes=127 * MB, limit_bytes=10**10)
    # a copy at a time would never start: alone, the first copy makes time x memory worse
    assert (one.base_step_s - 254e-6) * (one.base_resident_bytes + 1_769_472) > one.base_step_s * one.base_resident_bytes
    assert choice.kept == tuple(cost.name for cost in costs)
    assert choice.step_s == pytest.approx(3.5e-3 + 56 * 36e-6)
    assert choice.resident_bytes == 127 * MB + 56 * 1_769_472 and choice.kept_bytes == 56 * 1_769_472
    before, after = choice.speed_per_gb()
    assert after > before


def test_copies_that_multiply_the_memory_for_a_modest_gain_stay_packed() -> None:
    """A 0.5B-like model: the step is 2.2x faster with every copy, for 4.6x the memory."""
    costs = [LayerCost(f"mlp.{i:02d}", 17_432_576, 3.0e-3, 1.2e-3) for i in range(72)]
    costs.append(LayerCost("head", 544_538_624, 60e-3, 29e-3))
    choice = choose_dense(costs, rest_s=10e-3, resident_bytes=530 * MB, limit_bytes=10**10)
    assert choice.kept == () and choice.step_s == choice.base_step_s
    assert choice.resident_bytes == 530 * MB


def test_best_saving_per_byte_first_ties_by_name_and_the_slower_copy_never() -> None:
    costs = [
        LayerCost("b", 1 * MB, 1.0e-3, 0.1e-3),
        LayerCost("a", 1 * MB, 1.0e-3, 0.1e-3),
        LayerCost("big", 10 * MB, 5.0e-3, 1.0e-3),  # 0.4 ms per MB: after the 0.9 ms per MB ones
        LayerCost("slower", 1 * MB, 0.1e-3, 0.2e-3),
    ]
    choice = choose_dense(costs, rest_s=0.0, resident_bytes=100 * MB, limit_bytes=10**10)
    assert choice.kept == ("a", "b", "big")
    assert choose_dense(list(reversed(costs)), 0.0, 100 * MB, 10**10) == choice  # deterministic


def test_the_memory_limit_skips_a_copy_that_does_not_fit_and_takes_smaller_ones() -> None:
    costs = [LayerCost("head", 50 * MB, 50e-3, 1e-3), LayerCost("small", 1 * MB, 5e-3, 1e-3),
             LayerCost("small2", 1 * MB, 5e-3, 1e-3)]
    assert choose_dense(costs, 1e-3, 100 * MB, limit_bytes=10**10).kept == ("small", "small2", "head")
    assert choose_dense(costs, 1e-3, 100 * MB, limit_bytes=30 * MB).kept == ("small", "small2")
    assert choose_dense(costs, 1e-3, 100 * MB, limit_bytes=0).kept == ()


def test_no_measurement_of_memory_keeps_nothing_rather_than_dividing_by_zero() -> None:
    choice = choose_dense(_small_layers(3), rest_s=0.0, resident_bytes=0, limit_bytes=10**10)
    assert choice.kept == ()
    assert choose_dense([], 1e-3, 100 * MB, 10**10) == DenseChoice((), 1e-3, 100 * MB, 1e-3, 100 * MB)


def _tiny_4bit(seed: int = 6) -> nn.Module:
    """A 2-layer random Qwen2 (tied, quantized head), 4-bit, computing in float32, as after a load."""
    mx.random.seed(seed)
    model = qwen2.Model(qwen2.ModelArgs(model_type="qwen2", hidden_size=64, num_hidden_layers=2,
                                        intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                                        vocab_size=256, rms_norm_eps=1e-6, tie_word_embeddings=True))
    model.set_dtype(mx.bfloat16)
    nn.quantize(model, group_size=32, bits=4)
    mx.eval(model.parameters())
    apply_compute_dtype(model, "float32")
    return model


def _fake_probe(dense_wins: tuple[str, ...], resident: int = 100 * MB) -> Probe:
    """Layers whose name ends in one of `dense_wins` decode 10x faster on a copy; the rest lose.

    The plan measures one layer per shape (and bias), so `dense_wins` names whole groups: gate and
    up share a shape, q and o do not (q has a bias)."""
    def layer_s(layer: Any) -> tuple[float, float]:
        wins = getattr(layer, "_probe_name", "").endswith(dense_wins)
        return (1e-3, 1e-4) if wins else (1e-4, 2e-4)

    return Probe(layer_s=layer_s, step_s=lambda model: 5e-3, resident_bytes=lambda: resident,
                 limit_bytes=lambda: 10**10)


def _tuned(model: nn.Module, probe: Probe) -> CpuLayer:
    """The speed layer's own tune and after_load, with a fake measurement."""
    for name, layer in model.named_modules():  # the fake timing tells layers apart by name
        object.__setattr__(layer, "_probe_name", name)
    speed = CpuLayer("OpenBLAS (test)", True, CpuSwitches(fast_layers=False))
    speed.dense_probe = probe
    speed.tune(model)
    speed.after_load(model, lambda: False)
    return speed


def _switched(model: nn.Module) -> dict[str, Any]:
    """Every layer that may keep a copy, kept or not (`dense_candidates` leaves out kept ones)."""
    from engine.cpu.unpacked import _KeepsUnpacked

    return {name: layer for name, layer in model.named_modules() if isinstance(layer, _KeepsUnpacked)}


def _dense_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    used: list[int] = []
    real = _PrefillDequantizedLinear.dense_call

    def spying(self: _PrefillDequantizedLinear, x: mx.array, dense: mx.array) -> mx.array:
        used.append(id(self))
        return real(self, x, dense)

    monkeypatch.setattr(_PrefillDequantizedLinear, "dense_call", spying)
    return used


def test_the_layers_kept_are_those_the_timing_favours_and_decoding_uses_exactly_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    model = _tiny_4bit()
    step = mx.random.randint(0, 256, (1, 1), key=mx.random.key(9))
    reference = model(step)
    speed = _tuned(model, _fake_probe(dense_wins=("mlp.gate_proj", "mlp.up_proj", "o_proj")))
    choice = speed.dense_choice
    assert choice is not None
    assert sorted(choice.kept) == sorted(f"model.layers.{i}.{part}" for i in range(2)
                                         for part in ("mlp.gate_proj", "mlp.up_proj", "self_attn.o_proj"))
    layers = _switched(model)
    kept = {name for name, layer in layers.items() if layer._dense is not None}
    assert kept == set(choice.kept)  # unpacked ahead by after_load; nothing else holds a copy
    assert all(layers[name]["weight"].size == 0 for name in kept)  # the packed weights let go
    assert all(layer["weight"].size > 0 for name, layer in layers.items() if name not in kept)
    used = _dense_calls(monkeypatch)
    got = model(step)
    assert sorted(used) == sorted(id(layers[name]) for name in choice.kept)
    assert mx.allclose(got, reference, atol=1e-4, rtol=1e-4).item()


def test_when_no_copy_pays_none_is_held_and_decoding_stays_packed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the measured choice, every layer kept a copy within 1/8 of RAM, whatever it bought."""
    model = _tiny_4bit()
    step = mx.random.randint(0, 256, (1, 1), key=mx.random.key(9))
    reference = model(step)
    speed = _tuned(model, _fake_probe(dense_wins=()))
    assert speed.dense_choice is not None and speed.dense_choice.kept == ()
    assert all(layer._dense is None and not layer._keep_dense for layer in dense_candidates(model).values())
    used = _dense_calls(monkeypatch)
    assert mx.array_equal(model(step), reference).item() and used == []  # MLX's own kernel, bit for bit


def test_the_tied_head_is_kept_when_it_pays_and_lookups_give_the_same_rows() -> None:
    model = _tiny_4bit()
    tokens = mx.random.randint(0, 256, (1, 6), key=mx.random.key(3))
    reference, lookups = model(tokens), model.model.embed_tokens(tokens)
    speed = _tuned(model, _fake_probe(dense_wins=("embed_tokens",)))
    head = model.model.embed_tokens
    assert speed.dense_choice is not None and speed.dense_choice.kept == ("model.embed_tokens",)
    assert head._dense is not None
    assert mx.allclose(model(tokens), reference, atol=1e-4, rtol=1e-4).item()
    assert mx.array_equal(head(tokens), lookups).item()


def test_a_plan_replaces_earlier_marks_but_a_copy_that_replaced_its_weights_stays() -> None:
    from engine.cpu.unpacked import enable_dequantized_prefill, keep_unpacked_weights

    model = _tiny_4bit()
    enable_dequantized_prefill(model, keep_bytes=1 << 40)  # every layer marked, no copy made yet
    for name, layer in model.named_modules():
        object.__setattr__(layer, "_probe_name", name)
    choice = plan_dense_copies(model, _fake_probe(dense_wins=("down_proj",)))
    assert choice is not None and sorted(choice.kept) == [f"model.layers.{i}.mlp.down_proj" for i in range(2)]
    assert sorted(name for name, layer in _switched(model).items() if layer._keep_dense) == sorted(choice.kept)
    keep_unpacked_weights(model, lambda: False)
    again = plan_dense_copies(model, _fake_probe(dense_wins=()))  # nothing pays now: the copies stay
    assert again is not None and again.kept == ()
    held = sorted(name for name, layer in _switched(model).items() if layer._dense is not None)
    assert held == sorted(choice.kept)


def test_a_copy_not_made_ahead_is_made_by_the_first_decode_step() -> None:
    """A command waiting stops the unpacking after the load; decoding then makes the copy itself."""
    model = _tiny_4bit()
    step = mx.random.randint(0, 256, (1, 1), key=mx.random.key(9))
    reference = model(step)
    for name, layer in model.named_modules():
        object.__setattr__(layer, "_probe_name", name)
    speed = CpuLayer("OpenBLAS (test)", True, CpuSwitches(fast_layers=False))
    speed.dense_probe = _fake_probe(dense_wins=("gate_proj", "up_proj"))
    speed.tune(model)
    speed.after_load(model, lambda: True)
    ups = [layer for name, layer in _switched(model).items() if name.endswith("up_proj")]
    assert all(layer._keep_dense and layer._dense is None for layer in ups)
    assert mx.allclose(model(step), reference, atol=1e-4, rtol=1e-4).item()
    assert all(layer._dense is not None for layer in ups)


def test_the_real_measurement_runs_and_changes_no_result() -> None:
    """On this machine, without a fake: positive times, a choice within the memory, same logits."""
    model = _tiny_4bit()
    tokens = mx.random.randint(0, 256, (1, 12), key=mx.random.key(4))
    reference = model(tokens)
    speed = CpuLayer("OpenBLAS (test)", True, CpuSwitches(fast_layers=False))
    speed.tune(model)
    layer = next(iter(dense_candidates(model).values()))
    quantized, dense = time_layer(layer, rounds=2)
    assert 0 < quantized < 1 and 0 < dense < 1
    speed.after_load(model, lambda: False)
    choice = speed.dense_choice
    assert choice is not None and choice.base_resident_bytes > 0
    assert mx.allclose(model(tokens), reference, atol=1e-4, rtol=1e-4).item()
    assert mx.allclose(model(tokens[:, :1]), reference[:, :1], atol=1e-4, rtol=1e-4).item()


def test_bytes_read_per_token_count_kept_copies_instead_of_packed_weights() -> None:
    from mlx.utils import tree_flatten

    from engine.bench.memory_worker import decode_bytes, kept_copy_bytes

    model = _tiny_4bit()
    packed = decode_bytes(model)
    downs = [layer for name, layer in model.named_modules() if name.endswith("down_proj")]
    own = sum(int(a.nbytes) for layer in downs for _, a in tree_flatten(layer.parameters()))
    _tuned(model, _fake_probe(dense_wins=("down_proj",)))
    assert len(downs) == 2 and all(layer._keep_dense for layer in downs)
    assert decode_bytes(model) == packed - own + sum(64 * 128 * 4 for _ in downs)
    assert kept_copy_bytes(model) == 2 * 64 * 128 * 4


def test_on_a_gpu_backend_no_part_of_it_is_imported(tmp_path: Path) -> None:
    """A 4-bit model loaded and run with the backend reported as Metal: no engine.cpu module."""
    folder = build_family(tmp_path / "q4", "qwen2", bits=4)
    code = (
        "import asyncio, sys\n"
        "import engine.local.backend as backend\n"
        "backend.gpu_backend = lambda: 'Metal'\n"
        "from engine.core.api import GenerateRequest, Message, SamplingParams\n"
        "from engine.local.client import Engine\n"
        "async def main():\n"
        "    engine = Engine()\n"
        f"    await engine.load({str(folder)!r})\n"
        "    request = GenerateRequest((Message('user', 'hi'),), SamplingParams(temperature=0.0, max_tokens=3))\n"
        "    [e async for e in engine.generate(request)]\n"
        "    await engine.close()\n"
        "asyncio.run(main())\n"
        "loaded = sorted(n for n in sys.modules if n == 'engine.cpu' or n.startswith('engine.cpu.'))\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_a_head_that_cannot_be_unpacked_is_no_candidate() -> None:
    """A tied 3-bit head still splits over two streams, but no copy of it is ever planned."""
    mx.random.seed(2)
    model = qwen2.Model(qwen2.ModelArgs(model_type="qwen2", hidden_size=64, num_hidden_layers=1,
                                        intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                                        vocab_size=2048, rms_norm_eps=1e-6, tie_word_embeddings=True))
    nn.quantize(model, group_size=32, bits=3)
    speed = CpuLayer("OpenBLAS (test)", True, CpuSwitches(fast_layers=False))
    speed.tune(model)
    assert type(model.model.embed_tokens).__name__ == "_TwoStreamEmbedding"
    assert "model.embed_tokens" not in dense_candidates(model)


@pytest.mark.slow
def test_the_memory_section_reports_speed_bytes_and_memory_for_both_models() -> None:
    """Real processes (2M shape, one round): each model's folder is written by a process of its
    own, so a measuring process's peak memory is the engine's alone."""
    from engine.bench.memory_section import memory_section
    from engine.bench.report import Section

    section = Section("memory", "4-bit memory")
    memory_section(section, ("2m-4bit", "2m"), prompt=16, decode=4, rounds=1)
    rows = {row.label: row.stat.median for row in section.rows}
    for name in ("2m-4bit", "2m-full"):
        assert rows[f"decode, 10 candidates ({name})"] > 0
        assert rows[f"weights read per decoded token ({name})"] > 0
        assert 0 < rows[f"peak resident memory ({name})"] < 2000  # MB: no model build in it
        assert rows[f"decode speed per GB resident ({name})"] > 0
        assert 0 < rows[f"share of the bandwidth bound ({name})"] < 100  # no format reads faster than memory
    assert rows["memory read bandwidth (numpy sums, every CPU)"] > 0.5  # GB/s
    assert rows["float32 copies of 4-bit layers kept (2m-full)"] == 0
    assert {ratio.label for ratio in section.ratios} == {"decode: 4-bit / float32 (2m-4bit)",
                                                         "peak memory: 4-bit / float32 (2m-4bit)"}


def test_a_big_layer_is_timed_on_a_slice_of_its_rows_and_memory_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.cpu import denseplan

    model = _tiny_4bit()
    CpuLayer("OpenBLAS (test)", True, CpuSwitches(fast_layers=False)).tune(model)
    head = model.model.embed_tokens
    monkeypatch.setattr(denseplan, "MEASURE_MAX_BYTES", 64 * 4 * 16)  # 16 of the head's 256 rows
    quantized, dense = time_layer(head, rounds=1)
    assert 0 < quantized < 1 and 0 < dense < 1 and head._dense is None  # timed, nothing kept
    if sys.platform.startswith("linux"):
        assert denseplan.resident_bytes() > 0 and denseplan.available_bytes() > 0


def test_an_even_trade_goes_to_speed() -> None:
    """Measured on the Qwen2.5-0.5B shape: every copy makes decoding 3.36x faster for 3.35x the
    memory (5.66 tok/s per GB both ways). The strict minimum flipped with the machine's load;
    within 10% the faster prefix is kept. A clearly better product still wins over speed."""
    costs = [LayerCost(f"mlp.{i:02d}", 24_300_000, 3.0e-3, 0.776e-3) for i in range(72)]
    even = choose_dense(costs, rest_s=12e-3, resident_bytes=740 * MB, limit_bytes=10**10)
    base = even.base_step_s * even.base_resident_bytes
    assert 1 < even.step_s * even.resident_bytes / base < 1.1  # an even trade, a hair worse strictly...
    assert even.kept == tuple(cost.name for cost in costs)  # ...goes to the faster choice
    costly = [LayerCost(f"mlp.{i:02d}", 40 * MB, 3.0e-3, 0.776e-3) for i in range(72)]
    assert choose_dense(costly, rest_s=12e-3, resident_bytes=740 * MB, limit_bytes=10**10).kept == ()


def test_a_slow_layer_is_still_timed_several_times() -> None:
    """The 0.5B head took ~0.1 s a round, past ENOUGH_S after one: a single hiccup (OpenBLAS's
    thread descheduled) then decided its copy for the whole session (7 tok/s instead of 14)."""
    import time as clock

    from engine.cpu.denseplan import MIN_ROUNDS, _fastest_s

    delays = iter([0.0, 0.12] + [0.0] * 10)  # warm-up, a hiccup in the first timed round, then quick

    def run() -> mx.array:
        clock.sleep(next(delays))
        return mx.array(0)

    (fastest,) = _fastest_s((run,), rounds=5, enough_s=0.05)
    assert MIN_ROUNDS >= 3 and fastest < 0.05
