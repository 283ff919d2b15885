"""#13.7: when OpenBLAS could not be loaded, the app says why once (the library and the command that
installs it), from the first load's `ModelInfo.notes`; the status bar keeps its short `MLX built-in`."""

from __future__ import annotations

import dataclasses
from typing import Any

from tui_helpers import SIZE, wait_idle

from engine.core.api import ModelInfo
from engine.scripted import ScriptedEngine

PROBLEM = ("OpenBLAS could not be loaded: the GNU Fortran runtime libgfortran.so.5 is missing "
           "(install it: sudo apt install libgfortran5, or dnf install libgfortran); using MLX's slow BLAS")


class NoBlasEngine(ScriptedEngine):
    """A scripted engine whose first load reports the BLAS problem, as the real engine's does."""

    loads = 0

    async def load(self, model: str, **options: Any) -> ModelInfo:
        info = await super().load(model, **options)
        notes = (f"Fast BLAS off: {PROBLEM}.",) if self.loads == 0 else ()
        self.loads += 1
        self._model = dataclasses.replace(info, blas="MLX built-in", blas_problem=PROBLEM, notes=notes)
        return self._model


async def test_the_missing_blas_library_is_named_once(make_app: Any) -> None:
    app = make_app(engine=NoBlasEngine())
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        told = [n.message for n in app._notifications if "libgfortran5" in n.message]
        assert told == [f"Fast BLAS off: {PROBLEM}."]
