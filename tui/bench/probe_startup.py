"""``python -m tui.bench.probe_startup``: how long `logitscope` takes to start, the way the console
script starts it (`tui.launch.build_app`: the engine thread first, then Textual), for the bench.

Nothing here imports Textual at module level: the probe must not import it before the app would.
One JSON line: seconds from ``--since`` (the parent's ``time.time()`` just before it spawned this
process) to the first painted chat screen (``first_paint_s``) and to the model being ready to
answer (``model_loaded_s``), with the scripted engine or (``--real``) the real one on the demo.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def startup(since: float, real: bool, model: str = "demo") -> dict[str, float]:
    """Run the app headless from `tui.launch.build_app` until its model is loaded, then quit."""
    marks: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):  # nothing of the user's is touched
            os.environ[name] = str(Path(folder) / name.lower())
        os.environ["LOGITSCOPE_KV_CACHE"] = "off"
        from tui.launch import build_app, parse_args

        argv = ["--model", model] + ([] if real else ["--fake-engine"])
        app: Any = build_app(parse_args(argv))
        if isinstance(app, int):
            raise SystemExit(f"the app could not be built (exit status {app})")

        async def pilot_run(pilot: Any) -> None:
            await _until(lambda: app.screen is app.chat_screen)
            marks["first_paint_s"] = time.time() - since  # composed and refreshed once
            await _until(lambda: app.engine.model is not None, timeout=300)
            marks["model_loaded_s"] = time.time() - since
            await app.action_quit()

        app.run(headless=True, size=(120, 36), auto_pilot=pilot_run)
    return marks


async def _until(condition: Any, timeout: float = 60.0) -> None:
    import asyncio

    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise TimeoutError("the app did not get there in time")
        await asyncio.sleep(0.001)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tui.bench.probe_startup")
    parser.add_argument("--since", type=float, default=0.0)
    parser.add_argument("--real", action="store_true")
    parser.add_argument("--model", default="demo")
    args = parser.parse_args(argv)
    print(json.dumps(startup(args.since or time.time(), args.real, args.model)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
