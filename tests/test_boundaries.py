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
        "import sys, importlib, pkgutil, tui, engine.local.client\n"
        "for m in pkgutil.walk_packages(tui.__path__, 'tui.'):\n"
        "    importlib.import_module(m.name)\n"
        "loaded = sorted(n for n in sys.modules if n == 'mlx' or n.startswith(('mlx.', 'mlx_lm')))\n"
        "print(loaded)\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


# The engine's three jobs, each in its own place (docs/architecture.md).
SPEED_LAYER = "engine.cpu"
ENGINE_PROPER = frozenset({
    "engine.core.api", "engine.local.backend", "engine.local.client", "engine.local.commands", "engine.scripted", "engine.local.kvdisk", "engine.local.lastrow", "engine.local.penalties",
    "engine.local.precision", "engine.local.preview", "engine.local.prompt", "engine.local.sampling", "engine.local.session", "engine.local.snapshots", "engine.local.textstream",
    "engine.local.turn", "engine.local.warmup", "engine.local.watchdog", "engine.local.worker",
})
TUI_MAY_IMPORT = frozenset({"engine.core.api", "engine.local.client", "engine.scripted", "engine.remote", "engine.core.settings",
                            "engine.models", "engine.gguf", "engine.core.library"})
REMOTE = "engine.remote"


def _engine_imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) for every absolute import of an `engine...` module a file makes, anywhere.

    `from engine import x` is reported as the module `engine.x` (a submodule import)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names if alias.name.split(".")[0] == "engine")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [alias.name for alias in node.names]
            if node.module == "engine":
                found.extend((f"engine.{name}", []) for name in names)
            elif node.module.startswith("engine."):
                found.append((node.module, names))
    return found


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_engine_proper_enters_the_speed_layer_only_through_install() -> None:
    offenders = []
    for path in sorted((ROOT / "engine").glob("*.py")):
        for module, names in _engine_imports(path):
            if _in(module, SPEED_LAYER) and (module, names) != (SPEED_LAYER, ["install"]):
                offenders.append(f"{path.relative_to(ROOT)} imports {module} {names}")
    assert offenders == []
    assert {_module_name(p) for p in (ROOT / "engine").glob("*.py")} - {"engine"} == ENGINE_PROPER


def test_the_speed_layer_imports_nothing_from_the_engine_proper() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted((ROOT / "engine" / "cpu").rglob("*.py"))
        for module, _ in _engine_imports(path)
        if not _in(module, SPEED_LAYER) and module != "engine.core.settings.paths"
    ]
    assert offenders == []


def test_the_tui_uses_only_the_engines_public_doors() -> None:
    """The contract, the two engines, and the settings and models packages' public names (never a
    module inside those packages)."""
    offenders = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted((ROOT / "tui").rglob("*.py"))
        for module, _ in _engine_imports(path)
        if module not in TUI_MAY_IMPORT and module != "tui.headless"
    ]
    assert offenders == []


def test_the_remote_engine_needs_no_mlx_and_only_the_contract_and_settings() -> None:
    """A server does the model's work: `engine.remote` imports no MLX, no speed layer and of the
    local engine only the pure prompt rendering (token-id prompts), so it runs where MLX cannot."""
    offenders = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted((ROOT / "engine" / "remote").rglob("*.py"))
        for module, _ in _engine_imports(path)
        if not _in(module, REMOTE) and module not in ("engine.core.api", "engine.local.prompt", "engine.core.settings.sections")
    ]
    assert offenders == []
    assert _offenders("engine/remote", {"mlx", "mlx_lm"}) == []


def test_the_library_is_plain_data_and_sqlite() -> None:
    """The app and `logitscope run` share the conversation library, so it imports no MLX, no
    Textual and of the engine only its own modules and the XDG folders."""
    offenders = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted((ROOT / "engine" / "library").rglob("*.py"))
        for module, _ in _engine_imports(path)
        if not _in(module, "engine.core.library") and module != "engine.core.settings.paths"
    ]
    assert offenders == []
    assert _offenders("engine/core/library", {"mlx", "mlx_lm", "textual"}) == []


def test_the_tui_imports_engine_cli_only_to_hand_over_headless_commands() -> None:
    users = [path.relative_to(ROOT).as_posix() for path in sorted((ROOT / "tui").rglob("*.py"))
             if any(module == "tui.headless" for module, _ in _engine_imports(path))]
    assert users == ["tui/main.py"]


def test_on_a_gpu_backend_no_module_of_the_speed_layer_is_imported(chatml_model: Path) -> None:
    """A real load and turn with the backend reported as Metal: mlx-lm's own code only."""
    code = (
        "import asyncio, sys\n"
        "import engine.local.backend as backend\n"
        "backend.gpu_backend = lambda: 'Metal'\n"
        "from engine.core.api import GenerateRequest, Message, SamplingParams, TurnFinished\n"
        "from engine.local.client import Engine\n"
        "async def main():\n"
        "    engine = Engine()\n"
        f"    info = await engine.load({str(chatml_model)!r})\n"
        "    request = GenerateRequest((Message('user', 'hi'),), SamplingParams(temperature=0.0, max_tokens=3))\n"
        "    events = [e async for e in engine.generate(request)]\n"
        "    assert isinstance(events[-1], TurnFinished), events[-1]\n"
        "    await engine.close()\n"
        "    return info\n"
        "info = asyncio.run(main())\n"
        "loaded = sorted(n for n in sys.modules if n == 'engine.cpu' or n.startswith('engine.cpu.'))\n"
        "print(info.blas, loaded)\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "MLX built-in []" in result.stdout


def test_on_the_cpu_build_the_speed_layer_is_entered(chatml_model: Path) -> None:
    """The counterpart: the same load on this machine's CPU build installs the layer's routes."""
    code = (
        "import asyncio, sys\n"
        "from engine.local.client import Engine\n"
        "async def main():\n"
        "    engine = Engine()\n"
        f"    await engine.load({str(chatml_model)!r})\n"
        "    await engine.close()\n"
        "asyncio.run(main())\n"
        "assert 'engine.cpu.routing' in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_gguf_engine_is_light_to_import_and_stays_out_of_the_speed_layer() -> None:
    """`engine.gguf` (the llama.cpp engine) enters no CPU kernel module, and importing its public
    entry loads neither llama.cpp nor MLX: the TUI may import it with the extra not installed."""
    assert _offenders("engine/gguf", {"textual"}) == []
    offenders = [f"{path.relative_to(ROOT)} imports {module}" for path in sorted((ROOT / "engine" / "gguf").rglob("*.py"))
                 for module, _ in _engine_imports(path) if _in(module, SPEED_LAYER)]
    assert offenders == []
    code = ("import sys, engine.gguf\n"
            "loaded = sorted(n for n in sys.modules if n.split('.')[0] in ('mlx', 'mlx_lm', 'llama_cpp', 'gguf'))\n"
            "assert not loaded, loaded\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
