"""The built wheel carries the data files (config defaults, themes) and finds them once installed.

A checkout finds `config.toml` at the repository root and the themes beside `themes/__init__.py`;
a wheel must carry both as package data, or the installed app would start without defaults.
Built offline: ``--no-build-isolation`` uses the hatchling installed here (the [test] extra)
instead of fetching one from PyPI.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if importlib.util.find_spec("hatchling") is None:
        pytest.fail("hatchling is needed to build the wheel offline: pip install -e '.[test]'")
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(REPO)],
        check=True, timeout=120, capture_output=True,
    )
    (built,) = out.glob("logitscope-*.whl")
    return built


def test_wheel_contains_the_data_files(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "engine/config.toml" in names
    demo = {f"engine/models/demo_model/{f.name}" for f in (REPO / "engine" / "models" / "demo_model").iterdir() if f.is_file()}
    assert {"engine/models/demo_model/model.safetensors", "engine/models/demo_model/config.json"} <= demo <= names
    assert {"engine/core/settings/config.py", "engine/core/settings/files.py", "tui/app/themes.py", "tui/app/keymap.py"} <= names
    assert {"engine/cpu/gemv_forward.c", "engine/cpu/native.c", "engine/cpu/cblas_alias.c"} <= names  # compiled on first use (engine.cpu.cbuild)
    themes = {n for n in names if n.startswith("themes/") and n.endswith(".toml")}
    shipped = {f"themes/{p.name}" for p in (REPO / "themes").glob("*.toml")}
    assert themes == shipped and len(themes) >= 4
    packaged = zipfile.ZipFile(wheel).read("engine/config.toml")
    assert packaged == (REPO / "config.toml").read_bytes()


def test_installed_wheel_finds_its_defaults_and_themes(wheel: Path, tmp_path: Path) -> None:
    """Unpacked wheel first on the path, run from elsewhere, so the checkout cannot be used."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    probe = textwrap.dedent("""
        import json
        from importlib import resources
        from pathlib import Path
        import engine.core.settings.config, tui.app.themes
        from engine.core.settings.config import load_config
        from tui.app.themes import load_builtin_themes
        loaded = load_config(Path("absent.toml"))
        print(json.dumps({
            "module": engine.core.settings.config.__file__,
            "default_path": str(loaded.default_path),
            "problems": list(loaded.problems),
            "theme": loaded.config.ui.theme,
            "presets": sorted(loaded.config.presets),
            "themes": [t.name for t in load_builtin_themes()],
            "themes_dir": str(resources.files("themes")),
        }))
    """)
    env = {**os.environ, "PYTHONPATH": str(site), "HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["module"] == str(site / "engine" / "core" / "settings" / "config.py")
    assert seen["default_path"] == str(site / "engine" / "config.toml")
    assert seen["themes_dir"] == str(site / "themes")
    assert seen["problems"] == []
    assert seen["theme"] == "logitscope-dark"
    assert seen["presets"] == ["balanced", "creative", "precise"]
    assert seen["theme"] in seen["themes"] and len(seen["themes"]) >= 4
