"""Issue #29 item 7: no file the app reads is opened before it is known to be a regular file. A FIFO
at model.safetensors, at tokenizer.json, in the KV cache folder, at the library or at an imported
file hung forever (opening a FIFO waits for a writer); each is now one line, at once. Each case
runs in a child process with a deadline, so the old hang is a failure here, not a stuck test run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


def _child(code: str, tmp_path: Path, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_STATE_HOME": str(tmp_path / "state"), "PYTHONPATH": str(ROOT)}
    try:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail("hung on a FIFO")


def _with_fifo(source: Path, folder: Path, name: str) -> Path:
    shutil.copytree(source, folder)
    (folder / name).unlink()
    os.mkfifo(folder / name)
    return folder


@pytest.mark.parametrize("name", ["model.safetensors", "tokenizer.json", "tokenizer_config.json"])
def test_a_fifo_in_a_model_folder_is_one_line(chatml_model: Path, tmp_path: Path, name: str) -> None:
    folder = _with_fifo(chatml_model, tmp_path / "model", name)
    code = ("import sys\nfrom tui.headless import main\n"
            f"sys.exit(main(['run', '--no-config', '--model', {str(folder)!r}, '--prompt', 'hi']))\n")
    done = _child(code, tmp_path)
    assert done.returncode != 0 and done.stdout == ""
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and name in err[0] and "not a regular file (a FIFO)" in err[0], done.stderr


def test_a_fifo_in_the_kv_cache_folder_is_passed_over(tmp_path: Path) -> None:
    kv = tmp_path / "kv"
    (kv / "key").mkdir(parents=True)
    ids = list(range(400))
    os.mkfifo(kv / "key" / "a.ids.json")  # an entry whose ids are a FIFO
    (kv / "key" / "b.ids.json").write_text(json.dumps(ids))  # and one whose cache file is
    os.mkfifo(kv / "key" / "b.safetensors")
    code = ("from pathlib import Path\nfrom types import SimpleNamespace\n"
            "from engine.local.kvdisk import DiskKVCache\n"
            f"cache = DiskKVCache(Path({str(kv)!r}), 'key', 2**30)\n"
            f"print(cache.restore(SimpleNamespace(tokens=[]), {ids!r}))\n")
    done = _child(code, tmp_path)
    assert (done.returncode, done.stdout.strip()) == (0, "0"), done.stderr


def test_a_fifo_at_the_library_or_an_imported_file_is_one_line(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "chat.json")
    code = ("import sys\nfrom tui.main import main\n"
            f"sys.exit(main(['import', {str(tmp_path / 'chat.json')!r}]))\n")
    done = _child(code, tmp_path)
    assert done.returncode == 2 and "not a regular file (a FIFO)" in done.stderr and done.stderr.count("\n") == 1
    library = tmp_path / "data" / "logitscope" / "library.sqlite3"
    library.parent.mkdir(parents=True, exist_ok=True)
    for made in library.parent.glob("library.sqlite3*"):  # the import opened the library first
        made.unlink()
    os.mkfifo(library)
    done = _child("import sys\nfrom tui.main import main\nsys.exit(main(['list']))\n", tmp_path)
    assert done.returncode != 0 and "not a regular file (a FIFO)" in done.stderr and done.stderr.count("\n") == 1
