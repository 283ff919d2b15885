"""Remote engines send the samplers their server knows, under its names, and refuse the rest."""

from __future__ import annotations

import pytest

from engine.core.api import EngineError, SamplingParams
from engine.core.params import MLX_LM_ORDER
from engine.remote.wire import sampling_fields

EVERYTHING = SamplingParams(dry_multiplier=0.8, top_n_sigma=1.5, typical_p=0.9, xtc_probability=0.5,
                            dynatemp_range=0.4, mirostat=2, logit_bias=((7, -100.0), (9, 2.0)), samplers=MLX_LM_ORDER)


def test_llama_cpp_s_server_gets_every_sampler_under_its_names() -> None:
    body = sampling_fields(EVERYTHING, 3, "llama.cpp")
    assert body["samplers"] == list(MLX_LM_ORDER)
    assert (body["dry_multiplier"], body["dry_sequence_breakers"]) == (0.8, ["\n", ":", "\"", "*"])
    assert (body["top_n_sigma"], body["typical_p"], body["xtc_probability"], body["mirostat"]) == (1.5, 0.9, 0.5, 2)
    assert body["logit_bias"] == {"7": -100.0, "9": 2.0}
    assert sampling_fields(SamplingParams(), 3, "llama.cpp")["top_n_sigma"] == -1.0  # its "off"


def test_mlx_lm_server_gets_xtc_and_refuses_the_rest_in_one_line() -> None:
    body = sampling_fields(SamplingParams(xtc_probability=0.5, xtc_threshold=0.2), 3, "mlx_lm.server")
    assert (body["xtc_probability"], body["xtc_threshold"]) == (0.5, 0.2)
    with pytest.raises(EngineError) as error:
        sampling_fields(EVERYTHING, 3, "mlx_lm.server")
    message = str(error.value)
    assert "\n" not in message and "DRY" in message and "XTC" not in message.split("takes")[0]


@pytest.mark.parametrize("kind", ["vLLM", "OpenAI-compatible"])
def test_other_servers_refuse_what_they_lack_but_take_a_bias(kind: str) -> None:
    with pytest.raises(EngineError, match="does not take DRY"):
        sampling_fields(SamplingParams(dry_multiplier=1.0), 0, kind)
    assert sampling_fields(SamplingParams(logit_bias=((3, 5.0),)), 0, kind)["logit_bias"] == {"3": 5.0}
    assert "samplers" not in sampling_fields(SamplingParams(), 0, kind)  # their own order: nothing to send


def test_the_docs_table_names_what_each_server_takes() -> None:
    """docs/remote.md's row (the README points there) says what `_SERVER_KNOWS` sends (#32.6)."""
    from pathlib import Path

    from engine.remote.wire import _LABELS, _SERVER_KNOWS

    doc = (Path(__file__).parent.parent / "docs" / "remote.md").read_text(encoding="utf-8")
    row = next(line for line in doc.splitlines() if line.startswith("| samplers beyond"))
    mlx, vllm, llama = [cell.strip() for cell in row.strip("|").split("|")[1:4]]
    assert mlx == ", ".join(_LABELS[n] for n in _SERVER_KNOWS["mlx_lm.server"]) and vllm == "none"
    assert all(_LABELS[n].split()[0].lower() in llama.lower() for n in _SERVER_KNOWS["llama.cpp"])
