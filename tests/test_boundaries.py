"""The house's rules: front ends -> engines -> core (docs/architecture.md).

The layers are declared once, in pyproject.toml, and checked with import-linter; on top of that:
no import cycles, the front ends and the core load no MLX at run time (which also keeps the first
paint fast), the speed layer is entered only through its install hook, and the front ends use only
the engines' public doors.
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


def test_the_layers_declared_in_pyproject_hold() -> None:
    """Front ends -> engines -> core, the front ends apart, no Textual in the engines, no MLX in
    the core or the front ends: declared once, in pyproject.toml's [tool.importlinter], and
    checked here by import-linter over the whole import graph (function-level imports included)."""
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True))"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "BROKEN" not in result.stdout and " KEPT" in result.stdout


def test_importing_the_app_and_the_headless_commands_leaves_mlx_unloaded() -> None:
    """What keeps the first paint fast: the app, the headless commands and the engine factory
    import no MLX until the engine thread loads a model."""
    code = (
        "import sys, importlib, pkgutil, tui.app, tui.headless, tui.main, engine.factory\n"
        "for package in (tui.app, tui.headless):\n"
        "    for m in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        if not m.name.endswith('__main__'):\n"
        "            importlib.import_module(m.name)\n"
        "loaded = sorted(n for n in sys.modules if n == 'mlx' or n.startswith(('mlx.', 'mlx_lm')))\n"
        "print(loaded)\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


SPEED_LAYER = "engine.cpu"
ENGINE_PROPER = "engine.local"
# What a front end may use of the engines: the core, the factory, the scripted double, the model
# sources' public names, and (the bench only) the engine side of the bench.
FRONT_END_DOORS = ("engine.core", "engine.factory", "engine.scripted")
FRONT_END_PACKAGES = frozenset({"engine.models", "engine.gguf"})  # their public names, never a module inside
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
    for path in sorted((ROOT / "engine" / "local").rglob("*.py")):
        for module, names in _engine_imports(path):
            if _in(module, SPEED_LAYER) and (module, names) != (SPEED_LAYER, ["install"]):
                offenders.append(f"{path.relative_to(ROOT)} imports {module} {names}")
    assert offenders == []


def test_the_speed_layer_imports_nothing_from_the_engine_proper() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted((ROOT / "engine" / "cpu").rglob("*.py"))
        for module, _ in _engine_imports(path)
        if not _in(module, SPEED_LAYER) and module not in ("engine.core.settings.paths", "engine.core.memory")
    ]  # the core's OS facts (paths, memory) only
    assert offenders == []


def test_the_front_ends_use_only_the_engines_public_doors() -> None:
    """The app and the headless commands: the core, the factory, the scripted double and the model
    sources' public names (never a module inside those packages); the bench may also use the
    engine side of the bench."""
    offenders = [
        f"{path.relative_to(ROOT)} imports {module}"
        for folder in ("app", "headless")
        for path in sorted((ROOT / "tui" / folder).rglob("*.py"))
        for module, _ in _engine_imports(path)
        if not any(_in(module, door) for door in FRONT_END_DOORS) and module not in FRONT_END_PACKAGES
    ]
    assert offenders == []


def test_the_remote_engine_needs_no_mlx_and_only_the_contract_and_settings() -> None:
    """A server does the model's work: `engine.remote` imports no MLX, no speed layer and of the
    local engine only the pure prompt rendering (token-id prompts), so it runs where MLX cannot."""
    offenders = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted((ROOT / "engine" / "remote").rglob("*.py"))
        for module, _ in _engine_imports(path)
        if not _in(module, REMOTE) and not _in(module, "engine.core") and module != "engine.local.prompt"
    ]
    assert offenders == []
    assert _offenders("engine/remote", {"mlx", "mlx_lm"}) == []


def test_the_library_is_plain_data_and_sqlite() -> None:
    """The app and `logitscope run` share the conversation library, so it imports no MLX, no
    Textual and of the engine only its own modules and the core's settings and chat."""
    offenders = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted((ROOT / "engine" / "core" / "library").rglob("*.py"))
        for module, _ in _engine_imports(path)
        if not _in(module, "engine.core")
    ]
    assert offenders == []
    assert _offenders("engine/core/library", {"mlx", "mlx_lm", "textual"}) == []


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
