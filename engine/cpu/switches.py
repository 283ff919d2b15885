"""Environment switches: how logitscope reads an on/off variable such as LOGITSCOPE_FAST_BLAS."""

from __future__ import annotations

import os
from typing import Mapping

OFF_VALUES = frozenset({"0", "false", "no", "off"})


def switched_off(variable: str, env: Mapping[str, str] | None = None) -> bool:
    """True when `variable` is set to an off value (0, false, no, off; any case); unset means on."""
    env = os.environ if env is None else env
    return env.get(variable, "1").strip().lower() in OFF_VALUES
