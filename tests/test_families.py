"""Every model family the engine has been tested on: with every CPU speed-up on, the engine's
tokens equal plain mlx-lm in float32 on the same weights, and its logprobs agree within 1e-4,
over two turns (the second prefills over a cache, as a follow-up does).

Each family is a tiny random-weight model built by `tinymodels.build_family`, in bfloat16 and in
4-bit. The reference is mlx-lm's own `generate_step` on this (the test's) thread, which the fast
routes never serve, with the model cast to float32 (the engine's compute dtype on a CPU). In this
process MLX was imported before OpenBLAS could be put under it, so the matrix runs once more in a
fresh interpreter that does that first (`tests/fastblas_first.py`), where the speed-ups that need
a fast BLAS (4-bit layers unpacked for prompts, gemv forwarding) are on too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from engine_helpers import GREEDY, reply, run
from mlx_lm.generate import generate_step
from mlx_lm.utils import load
from tinymodels import LATENT_ATTENTION_FAMILIES, build_family

from engine.core.api import Message, TokenEvent
from engine.local.client import Engine

# Each family in bfloat16 and 4-bit: the whole matrix takes ~15 s (the slowest case ~1 s); its rerun with
# OpenBLAS under MLX, as long again, is marked slow.
FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text", "phi3", "olmo2",
            "granite", "starcoder2", "cohere", "internlm2", "glm4", "gpt2", "gpt_bigcode", "deepseek_v2",
            "deepseek_v2_lite", "deepseek_v3", "minicpm3", "youtu_llm", "mamba2", "granitemoehybrid")
ROOT = Path(__file__).resolve().parent.parent
INNER_RUN = "LOGITSCOPE_TEST_FAST_BLAS_RUN"  # set in the fresh interpreter that has OpenBLAS under MLX
TURN = GREEDY.with_changes(max_tokens=5)
FIRST = "the cat sat on the mat and then it was happy, the dog ran far away"
SECOND = "once upon a time there lived a little bird"


@pytest.fixture(scope="module")
def family_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("families")


def _cases(families: tuple[str, ...]) -> list[object]:
    """(family, bits) pairs: bfloat16 and 4-bit."""
    return [pytest.param(f, bits, id=f"{f}-{bits or 'bf16'}") for f in families for bits in (None, 4)]


def plain_float32(folder: Path, prompt_ids: tuple[int, ...], count: int) -> list[tuple[int, np.ndarray]]:
    """mlx-lm's own greedy tokens and logprobs for `prompt_ids`, the weights cast to float32."""
    model, _ = load(str(folder))
    model.set_dtype(mx.float32)  # floating arrays only: packed 4-bit weights stay as they are
    steps = generate_step(mx.array(list(prompt_ids)), model, max_tokens=count)
    return [(int(token), np.array(logprobs.astype(mx.float32))) for token, logprobs in steps]


def assert_same_as_plain(events: list[TokenEvent], reference: list[tuple[int, np.ndarray]]) -> None:
    """Tokens equal; each chosen token's and candidate's logprob within 1e-4."""
    assert [e.id for e in events] == [token for token, _ in reference[: len(events)]]
    for event, (_, logprobs) in zip(events, reference):
        assert event.logprob == pytest.approx(float(logprobs[event.id]), abs=1e-4)
        for candidate in event.candidates:
            assert candidate.logprob == pytest.approx(float(logprobs[candidate.id]), abs=1e-4)


async def check_family(engine: Engine, folder: Path) -> None:
    """Two turns through the engine, each equal to plain mlx-lm in float32 on the same prompt ids."""
    await engine.load(str(folder))
    conversation = [Message("user", FIRST)]
    for turn in range(2):
        events, finished = await run(engine, conversation, TURN)
        assert events, "the turn produced no token"
        assert_same_as_plain(events, plain_float32(folder, finished.prompt_ids, len(events)))
        if turn == 1:
            assert finished.reused_tokens > 0  # the follow-up prefilled over a cache
        conversation += [reply(finished), Message("user", SECOND)]


@pytest.mark.parametrize(("family", "bits"), _cases(FAMILIES))
async def test_family_equals_plain_mlx_lm_in_float32(
    family: str, bits: int | None, family_root: Path, engine: Engine
) -> None:
    folder = build_family(family_root / f"{family}-{bits}", family, bits=bits)
    await check_family(engine, folder)
    if os.environ.get(INNER_RUN):
        assert engine.model is not None and engine.model.blas.startswith("OpenBLAS")


@pytest.mark.slow  # the matrix again, ~15 s
@pytest.mark.skipif(bool(os.environ.get(INNER_RUN)), reason="this is the run it starts")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fast BLAS is Linux-only")
def test_family_matrix_with_openblas_under_mlx() -> None:
    """The matrix again in a fresh interpreter whose MLX runs on OpenBLAS (as the app's does), so
    the speed-ups that need it are on too: 4-bit layers unpacked for prompts, gemv forwarding."""
    env = {**os.environ, INNER_RUN: "1", "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "tests"),
                                                                                       os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "fastblas_first",
         str(Path(__file__)), "-k", "equals_plain"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=170,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_latent_attention_families_are_in_the_matrix() -> None:
    """#22: the families whose value heads differ from their query heads stay covered."""
    assert set(LATENT_ATTENTION_FAMILIES) <= set(FAMILIES)
