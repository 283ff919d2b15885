"""#30.8: transformers' lazy-import table (a scan of ~3,400 files, 40% of importing mlx-lm) is
kept in the cache folder between runs, exactly as transformers builds it; a bad cache file is
ignored, never an error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from engine.local import importcache

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys, time
from pathlib import Path
from engine.local import importcache
importcache.install(Path(sys.argv[1]))
import transformers.utils.import_utils as iu
from transformers import AutoTokenizer  # noqa: F401 - what mlx-lm imports
models = str(Path(iu.__file__).parent.parent / "models")
table = iu.create_import_structure_from_path(models)
print(json.dumps({"patched": iu.create_import_structure_from_path.__name__ == "scan",
                  "entries": len(table), "llama": "llama" in table}))
"""


def _run(folder: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, str(folder)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-600:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_table_is_written_once_and_read_back_the_same(tmp_path: Path) -> None:
    first = _run(tmp_path)
    files = list(tmp_path.glob("transformers-imports-*.json"))
    assert first["patched"] and first["llama"] and len(files) == 1
    written = files[0].stat().st_mtime_ns
    again = _run(tmp_path)
    assert again == first and files[0].stat().st_mtime_ns == written  # read, not scanned and written again


AS_MLX_LM = """
import json, sys
from pathlib import Path
from engine.local import importcache
importcache.install(Path(sys.argv[1]))
import os
read = []
real = os.scandir
os.scandir = lambda path=".": (read.append(str(path)) if "models" in str(path) else None, real(path))[1]
import mlx_lm.tokenizer_utils  # noqa: F401 - transformers imported as mlx-lm imports it
print(json.dumps({"folders_listed": len(read)}))
"""


def test_importing_mlx_lm_reads_the_table_from_the_cache(tmp_path: Path) -> None:
    """As transformers itself asks (`define_import_structure(__file__)` in ``models/__init__.py``:
    a file, not the folder; 5.x), the second start lists no model folder (it listed ~560 and
    read ~1,700 files at every start: the cache was only ever used when asked with the folder,
    as the probe above asks)."""
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", AS_MLX_LM, str(tmp_path)], cwd=ROOT, capture_output=True,
                              text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, done.stderr[-600:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1])["folders_listed"])
    assert runs[0] > 500 and len(list(tmp_path.glob("transformers-imports-*.json"))) == 1
    assert runs[1] < 20, runs


def test_the_cached_table_equals_the_scan(tmp_path: Path) -> None:
    import transformers.utils.import_utils as iu

    models = str(Path(iu.__file__).parent.parent / "models")
    original = getattr(iu.create_import_structure_from_path, "__wrapped__", iu.create_import_structure_from_path)
    scan = importcache.cached(original, tmp_path)
    assert scan(models) == original(models)
    assert importcache.cached(original, tmp_path)(models) == original(models)  # from the file this time


def test_a_malformed_cache_file_is_ignored(tmp_path: Path) -> None:
    """In a fresh interpreter: in the suite's own process an earlier test may have installed the
    import hook or imported transformers' models already, which made this comparison depend on
    the order the tests ran in."""
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "import transformers.utils.import_utils as iu\n"
        "from engine.local import importcache\n"
        "folder = Path(sys.argv[1])\n"
        "models = str(Path(iu.__file__).parent.parent / 'models')\n"
        "original = getattr(iu.create_import_structure_from_path, '__wrapped__', iu.create_import_structure_from_path)\n"
        "importcache.cached(original, folder)(models)\n"
        "for file in folder.glob('transformers-imports-*.json'):\n"
        "    file.write_text(json.dumps({'folders': {'x': 3}, 'groups': []}), encoding='utf-8')\n"
        "assert importcache.cached(original, folder)(models) == original(models)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]