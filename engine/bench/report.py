"""Benchmark results as plain data, summarised robustly, printed as text or JSON.

Why medians with a spread: the machine is usually shared (other processes, thermal state), so
single runs lie; the median of alternating rounds plus min-max shows both the typical value and
how noisy it was. Ratios are taken per round between contenders measured back to back, which
cancels most of the drift a comparison of two separate medians would suffer.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path
from types import ModuleType
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence


@dataclass(frozen=True)
class Stat:
    """A median with its min-max spread over `n` samples."""

    median: float
    low: float
    high: float
    n: int

    @staticmethod
    def of(samples: Sequence[float]) -> "Stat":
        if not samples:
            raise ValueError("no samples")
        return Stat(statistics.median(samples), min(samples), max(samples), len(samples))


@dataclass(frozen=True)
class Row:
    """One measured quantity, e.g. "engine decode (30m)" in tok/s."""

    label: str
    stat: Stat
    unit: str


@dataclass(frozen=True)
class Ratio:
    """A per-round ratio of two contenders, with the target it is held to (if any)."""

    label: str
    stat: Stat
    target: str = ""  # e.g. ">= 0.97"; empty when there is none
    met: bool | None = None  # None when there is no target


@dataclass
class Section:
    """One part of the report; `skipped` says why a section could not run."""

    name: str
    title: str
    rows: list[Row] = field(default_factory=list)
    ratios: list[Ratio] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str = ""

    def add(self, label: str, samples: Sequence[float], unit: str) -> None:
        self.rows.append(Row(label, Stat.of(samples), unit))

    def compare(self, label: str, top: Sequence[float], bottom: Sequence[float], target: float | None = None,
                at_most: bool = False) -> Ratio:
        """Record median(top_i / bottom_i); `target` is a floor (or a ceiling with `at_most`)."""
        ratio = Ratio(label, per_round_ratio(top, bottom))
        if target is not None:
            met = ratio.stat.median <= target if at_most else ratio.stat.median >= target
            ratio = Ratio(label, ratio.stat, f"{'<=' if at_most else '>='} {target:g}", met)
        self.ratios.append(ratio)
        return ratio


def per_round_ratio(top: Sequence[float], bottom: Sequence[float]) -> Stat:
    """Ratios of samples taken in the same round (zip), summarised."""
    pairs = [a / b for a, b in zip(top, bottom) if b]
    return Stat.of(pairs) if pairs else Stat(float("nan"), float("nan"), float("nan"), 0)


@dataclass
class Report:
    """The whole benchmark: where it ran and what it measured."""

    machine: dict[str, Any]
    sections: list[Section] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    def to_text(self) -> str:
        lines = [f"{key}: {value}" for key, value in self.machine.items()]
        for section in self.sections:
            lines += ["", f"## {section.title}"]
            if section.skipped:
                lines.append(f"  skipped: {section.skipped}")
            lines += [_row_line(row) for row in section.rows]
            lines += [_ratio_line(ratio) for ratio in section.ratios]
            lines += [f"  note: {note}" for note in section.notes]
        return "\n".join(lines)


def _number(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"


def _row_line(row: Row) -> str:
    s = row.stat
    return f"  {row.label:<62} {_number(s.median):>9} {row.unit:<6} ({_number(s.low)}-{_number(s.high)}, n={s.n})"


def _ratio_line(ratio: Ratio) -> str:
    s = ratio.stat
    verdict = "" if ratio.met is None else ("  target " + ratio.target + (" met" if ratio.met else " MISSED"))
    return f"  {ratio.label:<62} {s.median:>8.3f}x ({s.low:.3f}-{s.high:.3f}){verdict}"


def alternate(contenders: dict[str, Callable[[int], float]], rounds: int) -> dict[str, list[float]]:
    """Run every contender once per round, rotating who goes first; samples per contender.

    Each contender takes the round number (for seeds) and returns one measurement.
    """
    names = list(contenders)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(contenders[name](round_))
    return samples


def alternate_runs(configs: dict[str, Any], rounds: int,
                   run: Callable[[Any], dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """`alternate` for measurements that return a record each (a worker process's JSON): every
    configuration's records, the configurations rotating who goes first round by round."""
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}

    def contender(name: str) -> Callable[[int], float]:
        def measure(_round: int) -> float:
            results[name].append(run(configs[name]))
            return 0.0
        return measure

    alternate({name: contender(name) for name in configs}, rounds)
    return results


def proc_status_bytes(field: str) -> int | None:
    """A size from this process's ``/proc/self/status`` (``VmRSS``, ``VmHWM``...) in bytes;
    None where there is none (not Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def run_json_module(module: ModuleType, *args: str, timeout_s: float) -> dict[str, Any]:
    """``python -m module *args`` in a fresh interpreter; its last stdout line is the JSON result.

    The probe is passed as an imported module, not a name, so a moved or renamed probe fails at
    its import (and under the type checker), not as a subprocess that cannot find it. Raises
    RuntimeError with the module's last stderr line when it fails.
    """
    name = module.__name__
    done = subprocess.run([sys.executable, "-m", name, *args], capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed: {(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result
