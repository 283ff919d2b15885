"""The two worlds stay apart: engine/ never imports Textual, tui/ never imports MLX.

Checked two ways: statically (no import statement names the other world's library) and at run time
(importing the whole TUI, including the real engine client, leaves MLX unloaded, which is also what
keeps the first paint fast).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _imported_roots(path: Path) -> set[str]:
    """Top-level module names that a file imports anywhere (function bodies included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def _offenders(package: str, forbidden: set[str]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)} imports {sorted(_imported_roots(path) & forbidden)}"
        for path in sorted((ROOT / package).rglob("*.py"))
        if _imported_roots(path) & forbidden
    ]


def test_engine_never_imports_textual() -> None:
    assert _offenders("engine", {"textual", "tui", "rich"}) == []


def test_tui_never_imports_mlx() -> None:
    assert _offenders("tui", {"mlx", "mlx_lm"}) == []


def test_importing_the_tui_and_engine_client_leaves_mlx_unloaded() -> None:
    code = (
        "import sys, importlib, pkgutil, tui, engine.client\n"
        "for m in pkgutil.walk_packages(tui.__path__, 'tui.'):\n"
        "    importlib.import_module(m.name)\n"
        "loaded = sorted(n for n in sys.modules if n == 'mlx' or n.startswith(('mlx.', 'mlx_lm')))\n"
        "print(loaded)\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
