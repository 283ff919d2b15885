"""Which MLX backend runs here, decided before MLX is imported (`engine.local.backend.gpu_backend`),
from the installed distributions' metadata folders rather than by reading every distribution's
metadata (50 ms of every start, #30.8): the same answer, for every way a CUDA build is named."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

from engine.local.backend import cuda_build_installed, gpu_backend


@pytest.mark.parametrize("folder", ["mlx_cuda-0.29.1.dist-info", "mlx_cuda_12-0.30.0.dist-info",
                                    "MLX_CUDA-0.29.1.dist-info", "mlx_cuda-0.29.1-py3.11.egg-info"])
def test_a_cuda_build_among_the_packages_is_found(tmp_path: Path, folder: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mlx-0.29.1.dist-info").mkdir()
    (tmp_path / folder).mkdir()
    monkeypatch.setattr(sys, "platform", "linux")
    assert gpu_backend([str(tmp_path / "missing"), str(tmp_path)]) == "CUDA"


def test_the_cpu_build_alone_is_no_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for folder in ("mlx-0.29.1.dist-info", "mlx_lm-0.28.0.dist-info", "mlx_cuda_notes.txt"):
        (tmp_path / folder).mkdir()
    (tmp_path / "archive.zip").write_bytes(b"PK")
    monkeypatch.setattr(sys, "platform", "linux")
    assert gpu_backend([str(tmp_path), str(tmp_path / "archive.zip")]) is None


def test_macos_is_metal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert gpu_backend([]) == "Metal"


def test_it_agrees_with_the_installed_metadata() -> None:
    """On this machine's own packages, the folders say what importlib.metadata says."""
    names = {str(dist.metadata["Name"] or "").lower().replace("_", "-") for dist in metadata.distributions()}
    assert cuda_build_installed(sys.path) == any(name.startswith("mlx-cuda") for name in names)
